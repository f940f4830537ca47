"""Smoothing kernels: normalisation, compact support, derivative, symmetry, wall tables."""

import math

import numpy as np
import pytest
from numpy.testing import assert_allclose

from engine.core import kernels


def _radial_integral(w, h, n=20001):
    r = np.linspace(0.0, 2.0 * h, n)
    f = np.array([w(float(x), h) for x in r]) * 4.0 * np.pi * r * r
    return np.trapz(f, r)


@pytest.mark.parametrize("name", sorted(kernels.KERNELS))
@pytest.mark.parametrize("h", [0.01, 0.7])
def test_kernel_integrates_to_one(name, h):
    w, _ = kernels.KERNELS[name]
    # rtol: trapezoid rule on 20001 points has error ~1e-8; atol 0 because the value is O(1).
    assert_allclose(_radial_integral(w, h), 1.0, rtol=1e-6, atol=0.0)


@pytest.mark.parametrize("name", sorted(kernels.KERNELS))
def test_kernel_compact_support_and_positive(name):
    w, dwdr = kernels.KERNELS[name]
    h = 0.3
    r = np.linspace(0.0, 1.999 * h, 500)
    assert all(w(float(x), h) > 0.0 for x in r)
    assert all(dwdr(float(x), h) <= 0.0 for x in r)
    for x in (2.0 * h, 2.5 * h, 10.0 * h):
        assert w(x, h) == 0.0 and dwdr(x, h) == 0.0


@pytest.mark.parametrize("name", sorted(kernels.KERNELS))
def test_kernel_derivative_matches_finite_difference(name):
    w, dwdr = kernels.KERNELS[name]
    h = 0.05
    eps = 1e-7
    for q in (0.1, 0.5, 0.9, 1.1, 1.5, 1.9):
        r = q * h
        fd = (w(r + eps, h) - w(r - eps, h)) / (2 * eps)
        scale = abs(w(0.0, h)) / h
        # central differences in float64 with eps=1e-7: truncation ~1e-14 h^-2, rounding ~1e-9 relative.
        assert_allclose(dwdr(r, h), fd, rtol=1e-5, atol=1e-7 * scale)


def test_gradient_is_antisymmetric():
    """grad_i W_ij = -grad_j W_ji, so pairwise pressure forces cancel (momentum is conserved)."""
    rng = np.random.default_rng(1)
    h = 0.1
    for _ in range(20):
        xi, xj = rng.uniform(-0.1, 0.1, 3), rng.uniform(-0.1, 0.1, 3)
        r = np.linalg.norm(xi - xj)
        gij = kernels.cubic_dwdr(r, h) / r * (xi - xj)
        gji = kernels.cubic_dwdr(r, h) / r * (xj - xi)
        assert_allclose(gij, -gji, rtol=0, atol=0)


def test_suarez_susin_eq7_kernel_formula():
    """Suárez & Susín 2006, eq. 7: W = 15 / (pi (4h)^3) (2 - r/h)^3."""
    h = 0.2
    for r in (0.0, 0.1, 0.3):
        assert_allclose(kernels.spiky_w(r, h), 15.0 / (math.pi * (4 * h) ** 3) * (2 - r / h) ** 3, rtol=1e-14, atol=0)


def test_wall_table_completes_a_resting_lattice():
    """A lattice particle at dx/2 from a wall: its half-lattice sum plus the wall mass equals one.

    Brute force: sum W over lattice sites on the liquid side of the wall, divide by the full
    lattice sum, add psi(dx/2); the table was built from the same sums, so only interpolation
    error remains (512 samples over 4h: ~1e-4).
    """
    dx, h = 0.02, 0.024
    d, psi, dpsi = kernels.half_space_tables("cubic", h, dx)
    n = 4
    rng = np.arange(-n, n + 1) * dx
    gx, gy, gz = np.meshgrid(rng, rng, np.arange(0, n + 1) * dx, indexing="ij")
    r = np.sqrt(gx ** 2 + gy ** 2 + gz ** 2).ravel()
    liquid = sum(kernels.cubic_w(float(x), h) for x in r) / kernels.lattice_sum("cubic", h, dx)
    assert_allclose(liquid + np.interp(dx / 2, d, psi), 1.0, rtol=0, atol=2e-4)
    assert psi[-1] == 0.0 and np.all(np.diff(psi) <= 1e-12) and np.all(dpsi <= 1e-9)  # monotone: walls only push


def test_single_precision_shapes_match_the_cubic_spline():
    """cubic_shape32 / cubic_dshape32 (the solvers' float32 pair loops) against cubic_w / cubic_dwdr:
    W = w(q) / (pi h^3), dW/dr = dw/dq / (pi h^4); float32 rounding of values of order 1 (rtol 1e-6,
    atol 1e-6 of the peak value 1), zero beyond the support, w(0) = 1 exactly (the PBF padding relies on it)."""
    from engine.core.kernels import cubic_dshape32, cubic_dwdr, cubic_shape32, cubic_w

    h = 0.03
    r = np.linspace(0.0, 2.2 * h, 67)
    w = np.array([cubic_shape32(np.float32(ri / h)) for ri in r], dtype=np.float64)
    dw = np.array([cubic_dshape32(np.float32(ri / h)) for ri in r], dtype=np.float64)
    np.testing.assert_allclose(w / (np.pi * h ** 3), [cubic_w(ri, h) for ri in r],
                               rtol=1e-6, atol=1e-6 / (np.pi * h ** 3))
    np.testing.assert_allclose(dw / (np.pi * h ** 4), [cubic_dwdr(ri, h) for ri in r],
                               rtol=1e-6, atol=1e-6 / (np.pi * h ** 4))
    assert cubic_shape32(np.float32(0.0)) == 1.0 and cubic_dshape32(np.float32(0.0)) == 0.0
    assert cubic_shape32(np.float32(2.0)) == 0.0 and cubic_dshape32(np.float32(2.5)) == 0.0
