"""Box walls (engine/collision/walls.py) against a brute-force sum over the imaginary wall particles they stand for."""

import math

import numpy as np
from numpy.testing import assert_allclose

from engine.core.kernels import half_space_tables, lattice_sum
from engine.collision.walls import wall_free_gradient, wall_gradient, wall_mass

DX = 0.02
H = 1.2 * DX  # the add-on's default smoothing length


def _cubic(r, h):
    """Cubic spline W and dW/dr (Monaghan 1992), vectorised: the reference, independent of
    engine.core.kernels' numba."""
    q = r / h
    t = np.maximum(2.0 - q, 0.0)
    s = np.maximum(1.0 - q, 0.0)
    w = (0.25 * t ** 3 - s ** 3) / (math.pi * h ** 3)
    dw = (-0.75 * t ** 2 + 3.0 * s ** 2) / (math.pi * h ** 4)
    return w, dw


def _brute_force(point, solid):
    """Wall mass sum_j W(x - x_j) / L and its gradient over the sites x_j of the liquid's lattice
    (spacing DX, the site layers at (k + 1/2) DX from the walls x = 0 and y = 0) that lie in the
    solid, L the kernel sum of a full lattice: what engine.core.kernels.half_space_tables tabulates
    for one flat wall."""
    n = 5
    ax = (np.arange(-n, n + 1) + 0.5) * DX
    gx, gy, gz = np.meshgrid(ax, ax, np.arange(-n, n + 1) * DX, indexing="ij")
    sites = np.stack([gx.ravel(), gy.ravel(), gz.ravel()], axis=1)
    sites = sites[solid(sites)]
    r = point - sites
    dist = np.linalg.norm(r, axis=1)
    w, dw = _cubic(dist, H)
    norm = lattice_sum("cubic", H, DX)
    keep = dist > 0.0
    grad = np.sum((dw[keep] / dist[keep])[:, None] * r[keep], axis=0)
    return float(np.sum(w)) / norm, grad / norm


def _tables():
    d, psi, dpsi = half_space_tables("cubic", H, DX)
    return float(d[0]), float(d[1] - d[0]), psi, dpsi


def _points():
    """Liquid lattice sites near the corner where the walls x = 0 and y = 0 meet (both within 2h)."""
    return [np.array([(i + 0.5) * DX, (j + 0.5) * DX, 0.0]) for i in range(3) for j in range(3)]


def test_two_boxes_crossing_at_a_corner_push_like_the_wall_particles_behind_them():
    # Box A holds x > 0, box B holds y > 0 (each far larger than the kernel): a particle in both
    # near the origin has the wall x = 0 of A and the wall y = 0 of B within its support, and the
    # solid behind them is {x < 0} or {y < 0}, the same as behind one box's corner.
    t0, step, psi, dpsi = _tables()
    boxes = np.array([[[0.0, -1.0, -1.0], [1.0, 1.0, 1.0]], [[-1.0, 0.0, -1.0], [1.0, 1.0, 1.0]]])
    first_layer = abs(float(np.interp(0.5 * DX, np.linspace(-2 * H, 2 * H, len(dpsi)), dpsi)))  # |grad psi| at dx/2
    worst_sum = 0.0
    for x in _points():
        mass, grad = _brute_force(x, lambda s: (s[:, 0] < 0.0) | (s[:, 1] < 0.0))
        g = np.array(wall_gradient(*x, boxes, 2.0 * H, 1.0, t0, step, psi, dpsi))
        m = wall_mass(*x, boxes, 2.0 * H, 1.0, t0, step, psi)
        # The product 1 - (1 - psi_x)(1 - psi_y) is exact for a kernel that factorises along the axes;
        # the cubic spline does not, and the product misses part of the corner quadrant's mass: 0.5 %
        # of the mass at the corner site, and 0.5 % of the first layer's gradient |grad psi(dx/2)|
        # = 23.5 /m in the gradient (measured; the tables' interpolation adds < 1e-4). Tolerances:
        # rtol 1e-2 and atol 1e-2 |grad psi(dx/2)| (gradient), atol 1e-2 (mass, dimensionless).
        assert_allclose(m, mass, rtol=1e-2, atol=1e-2)
        assert_allclose(g, grad, rtol=1e-2, atol=1e-2 * first_layer)
        # the sum of the two boxes' own gradients counts the solid quadrant {x < 0, y < 0} twice
        summed = sum(np.array(wall_gradient(*x, b[None], 2.0 * H, 1.0, t0, step, psi, dpsi)) for b in boxes)
        worst_sum = max(worst_sum, float(np.max(np.abs(summed - grad))) / first_layer)
    assert worst_sum > 0.2  # 27 % at the corner site: what the product rule across boxes removes


def test_two_boxes_crossing_at_a_corner_equal_one_box_with_that_corner():
    t0, step, psi, dpsi = _tables()
    two = np.array([[[0.0, -1.0, -1.0], [1.0, 1.0, 1.0]], [[-1.0, 0.0, -1.0], [1.0, 1.0, 1.0]]])
    one = np.array([[[0.0, 0.0, -1.0], [1.0, 1.0, 1.0]]])
    for x in _points():
        # the same factors multiplied in another order: rounding only (rtol 1e-12; atol 1e-12 for zeros)
        assert_allclose(wall_mass(*x, two, 2.0 * H, 1.0, t0, step, psi),
                        wall_mass(*x, one, 2.0 * H, 1.0, t0, step, psi), rtol=1e-12, atol=1e-12)
        assert_allclose(wall_gradient(*x, two, 2.0 * H, 1.0, t0, step, psi, dpsi),
                        wall_gradient(*x, one, 2.0 * H, 1.0, t0, step, psi, dpsi), rtol=1e-12, atol=1e-12)


def test_wall_gradient_is_the_gradient_of_the_wall_mass_across_boxes():
    # Three overlapping boxes around a point near several of their walls: a central difference of
    # wall_mass. The tables are linear between samples (step 4h / 511), the derivative table is
    # their central difference: over a difference step of 1e-6 m they agree to ~1 % of the local
    # gradient (0.4 % of |grad psi(dx/2)| = 23.5 /m measured), hence rtol 1e-2 and atol 1e-2 |grad psi(dx/2)|.
    # The sum of the boxes' own gradients is 25-36 % of |grad psi(dx/2)| off at the first two points.
    t0, step, psi, dpsi = _tables()
    boxes = np.array([[[0.0, -1.0, -1.0], [1.0, 1.0, 1.0]], [[-1.0, 0.0, -1.0], [1.0, 1.0, 1.0]],
                      [[-1.0, -1.0, 0.0], [1.0, 1.0, 1.0]]])
    scale = 23.5
    for x in ([0.3 * DX, 0.7 * DX, 1.1 * DX], [0.9 * DX, 0.2 * DX, 0.6 * DX], [1.4 * DX, 1.3 * DX, 0.4 * DX]):
        x = np.array(x)
        g = np.array(wall_gradient(*x, boxes, 2.0 * H, 1.0, t0, step, psi, dpsi))
        eps = 1e-6
        fd = np.array([(wall_mass(*(x + eps * e), boxes, 2.0 * H, 1.0, t0, step, psi)
                        - wall_mass(*(x - eps * e), boxes, 2.0 * H, 1.0, t0, step, psi)) / (2 * eps)
                       for e in np.eye(3)])
        assert_allclose(g, fd, rtol=1e-2, atol=1e-2 * scale)


def test_free_fraction_from_the_gradients_lookups_equals_one_minus_the_wall_mass():
    # What PBF's boundary pass reads: F = 1 - wall_mass from the same lookups as the gradient (which
    # wall_gradient returns, checked against the wall lattice and a central difference of wall_mass
    # above; walls beyond the support skipped). The same factors multiplied in another order:
    # rounding only (rtol 1e-12; atol 1e-12 for the points no wall reaches).
    t0, step, psi, dpsi = _tables()
    boxes = np.array([[[0.0, 0.0, 0.0], [0.3, 0.2, 0.1]], [[0.25, -0.1, 0.0], [0.6, 0.15, 0.4]]])
    rng = np.random.default_rng(5)
    points = rng.uniform([-0.05, -0.15, -0.05], [0.65, 0.25, 0.45], (300, 3))
    near = 0
    for x in points:
        free = wall_free_gradient(*x, boxes, 2.0 * H, 1.0, t0, step, psi, dpsi)[0]
        mass = wall_mass(*x, boxes, 2.0 * H, 1.0, t0, step, psi)
        assert_allclose(free, 1.0 - mass, rtol=1e-12, atol=1e-12)
        near += mass > 0.0
    assert near > 10  # the points sample the walls' reach, not only the free interior
