"""Implicit viscosity after Weiler, Koschier, Brand & Bender 2018 (engine.solvers.viscosity_weiler2018):
the solve against a dense float64 solution of the same system, the no-slip wall against a linear
shear, angular momentum, and (slow) Couette flow and the viscous spreading of Huppert 1982."""


import numpy as np
import pytest

from engine.core.cell_grid import build_grid
from engine.core.kernels import cubic_dwdr
from engine.core.neighbour_list import NeighbourList
from engine.driver import Simulation
from engine.scene import BoxContainer, FluidObject, MeshCollider, SceneDescription
from engine.settings import ColliderSettings, SimulationSettings
from engine.solvers import viscosity_weiler2018 as vw
from helpers import box_mesh

NO_COLLIDERS = None


def _world_args():
    from engine.collision.world import empty_world_args

    return empty_world_args()


def _cloud(n_side=6, dx=0.01, jitter=0.2, seed=3):
    """A jittered lattice, sorted along a cell grid, with its full neighbour list within 2h (h = dx)."""
    rng = np.random.default_rng(seed)
    g = (np.arange(n_side) + 0.5) * dx
    x = np.stack(np.meshgrid(g, g, g, indexing="ij"), -1).reshape(-1, 3)
    x = (x + rng.uniform(-jitter, jitter, x.shape) * dx).astype(np.float32)
    grid = build_grid(x, 2.0 * dx)
    x = np.ascontiguousarray(x[grid.order])
    nl = NeighbourList()
    nl.build(x, np.full(1, dx, dtype=np.float32), grid._replace(order=None))
    return x, nl


def _dense(x, h, mu, volume, mass, dt, v):
    """The system of Weiler et al. 2018, eq. 12 in mass form, assembled pair by pair in float64."""
    n = len(x)
    xd = x.astype(np.float64)
    a = np.zeros((3 * n, 3 * n))
    for i in range(n):
        a[3 * i:3 * i + 3, 3 * i:3 * i + 3] += mass * np.eye(3)
        for j in range(n):
            e = xd[i] - xd[j]
            r = float(np.linalg.norm(e))
            if j == i or r >= 2.0 * h:
                continue
            c = dt * mu * 10.0 * volume * volume * (-cubic_dwdr(r, h) / r) / (r * r + 0.01 * h * h)
            block = c * np.outer(e, e)
            a[3 * i:3 * i + 3, 3 * i:3 * i + 3] += block
            a[3 * i:3 * i + 3, 3 * j:3 * j + 3] -= block
    return np.linalg.solve(a, mass * v.astype(np.float64).reshape(-1)).reshape(n, 3)


def _solve(x, v, nl, h, mu, volume, mass, dt, model=None, boxes=np.zeros((0, 2, 3)), no_slip=np.zeros(0)):
    solver = vw.ImplicitViscosity(model or vw.make_model(1.0, tolerance=1e-6, max_iterations=500))
    n = len(x)
    one = np.ones(n, dtype=np.float32)
    out = solver.apply(x, v.copy(), np.full(n, h, dtype=np.float32), np.full(n, mu, dtype=np.float32), one, one,
                       volume, mass, dt, nl, (boxes, no_slip, np.zeros(0), _world_args()))
    return out, solver


@pytest.mark.parametrize("mu", [0.05, 50.0])
def test_solve_equals_the_dense_solution_of_eq_12(mu):
    """The matrix-free conjugate gradients against numpy's dense solve of the same system: a stiff case
    (honey-like, s >> 1) and an explicit one (s < EXPLICIT_LIMIT: one pass, O(s^2) from the solve)."""
    dx = h = 0.01
    x, nl = _cloud(dx=dx)
    rng = np.random.default_rng(5)
    v = rng.normal(0.0, 1.0, x.shape).astype(np.float32)
    rho = 1000.0
    volume = dx ** 3
    mass = rho * volume
    dt = 0.002 if mu > 1.0 else 2e-4
    got, solver = _solve(x, v, nl, h, mu, volume, mass, dt)
    want = _dense(x, h, mu, volume, mass, dt, v)
    change = np.abs(want - v).max()
    if mu > 1.0:
        assert solver.stiffness > 1.0 and solver.iterations > 3
        # float32 pair terms (1e-6 relative) and the 1e-6 residual: well under 1e-4 of the change
        np.testing.assert_allclose(got, want, rtol=0, atol=1e-4 * change)
    else:
        assert solver.stiffness < vw.EXPLICIT_LIMIT and solver.iterations == 0
        # the explicit step differs from the implicit one by O(s^2) of the velocities (s < 0.02): 4e-4
        # of the unit velocities here, and 2 % of the change itself
        np.testing.assert_allclose(got, want, rtol=0, atol=max(4e-4, 0.02 * change))


def test_rigid_rotation_and_translation_are_untouched():
    """Pair forces along x_ij (Weiler et al. 2018, eq. 8): a rigidly spinning, moving blob of honey keeps
    its motion (a Laplacian of v_j - v_i alone would brake the spin)."""
    dx = h = 0.01
    x, nl = _cloud(n_side=7, dx=dx)
    omega = np.array([0.0, 0.0, 3.0])
    v = (np.cross(omega, x - x.mean(axis=0)) + [0.2, 0.0, -0.1]).astype(np.float32)
    got, solver = _solve(x, v, nl, h, 10.0, dx ** 3, 1420.0 * dx ** 3, 0.002)
    assert solver.stiffness > 1.0
    # float32 pair terms: the relative velocities of the rotation are exact to ~1e-7 m/s
    np.testing.assert_allclose(got, v, rtol=0, atol=2e-5)


def test_viscosity_below_the_solver_s_smoothing_is_skipped_and_acts_without_it():
    """vw.UNRESOLVED_FRACTION: water (1.0e-3 Pa s) at a spacing of 2.5 cm and a substep of 2 ms has the
    stiffness 7e-5, under 5 % of PBF's default velocity smoothing (0.02 a substep): the pass is skipped and
    the velocities are those given. With no smoothing the same water acts (a shear loses some of its
    relative velocity), and olive oil (0.084 Pa s) is above the bound and acts under the smoothing too."""
    dx = h = 0.025
    x, nl = _cloud(n_side=6, dx=dx)
    rng = np.random.default_rng(5)
    v = rng.normal(0.0, 0.1, x.shape).astype(np.float32)
    n = len(x)
    one = np.ones(n, dtype=np.float32)

    def apply(mu, rho, smoothing):
        solver = vw.ImplicitViscosity(vw.make_model(1.0))
        out = solver.apply(x, v.copy(), np.full(n, h, dtype=np.float32), np.full(n, mu, dtype=np.float32), one,
                           one, dx ** 3, rho * dx ** 3, 0.002, nl, (np.zeros((0, 2, 3)), np.zeros(0), np.zeros(0),
                                                                     _world_args()), smoothing)
        return out, solver

    water, solver = apply(1.0e-3, 1000.0, 0.02)
    assert solver.skipped and 5e-5 < solver.stiffness < 0.05 * 0.02
    np.testing.assert_array_equal(water, v)
    water, solver = apply(1.0e-3, 1000.0, 0.0)
    assert not solver.skipped and np.abs(water - v).max() > 1e-6
    oil, solver = apply(0.084, 920.0, 0.02)
    assert not solver.skipped and np.abs(oil - v).max() > 1e-4


@pytest.mark.parametrize("no_slip", [1.0, 0.0])
def test_linear_shear_through_a_no_slip_wall_is_force_free(no_slip):
    """The wall term -S (v - v_w) / d makes a shear u = g z through a no-slip floor exact, whatever the
    first layer's distance (a PBF liquid sits closer than dx / 2); a slip floor brakes nothing, so the
    layers next to it (missing their neighbours below) are not in balance."""
    dx = h = 0.01
    g = (np.arange(8) + 0.5) * dx
    x = np.stack(np.meshgrid(g, g, (np.arange(6) + 0.36) * dx, indexing="ij"), -1).reshape(-1, 3)
    x = x.astype(np.float32)
    grid = build_grid(x, 2.0 * dx)
    x = np.ascontiguousarray(x[grid.order])
    nl = NeighbourList()
    nl.build(x, np.full(1, dx, dtype=np.float32), grid._replace(order=None))
    v = np.zeros_like(x)
    v[:, 0] = 2.0 * x[:, 2]
    floor = np.array([[[-1.0, -1.0, 0.0], [1.0, 1.0, 1.0]]])
    got, _ = _solve(x, v, nl, h, 10.0, dx ** 3, 1420.0 * dx ** 3, 0.002, boxes=floor, no_slip=np.array([no_slip]))
    # the bulk: away from the block's other faces (free surfaces) and its top
    inner = np.all((x[:, :2] > 2.1 * dx) & (x[:, :2] < 5.9 * dx), axis=1) & (x[:, 2] < 2.5 * dx)
    change = np.abs(got[inner, 0] - v[inner, 0]).max() / float(v[inner, 0].max())
    if no_slip:
        assert change < 2e-3, change  # float32 rounding of the moments and the pair sums
    else:
        assert change > 0.01, change  # seen: 0.04


# ----------------------------------------------------------------------------------------------
# flows through the driver


def _couette_scene(dx, height, speed, seconds, fps=24.0):
    frames = int(round(seconds * fps)) + 1
    width = 6 * dx
    t = np.arange(frames) / fps
    move = np.tile(np.eye(4), (frames, 1, 1))
    move[:, 0, 3] = speed * t
    plate = MeshCollider("Plate", box_mesh([-0.4, -0.1, height], [0.4, width + 0.1, height + 0.02]),
                         ColliderSettings(collider_mode="SOLID"), transforms=move)
    return SceneDescription(
        fluids=[FluidObject("Honey", box_mesh([-0.1, 0.0, 0.0], [0.1, width, height]))],
        containers=[BoxContainer("Floor", [-1.0, -1.0, 0.0], [1.0, 1.0, 1.0]),
                    BoxContainer("Sides", [-1.0, 0.0, -1.0], [1.0, width, 1.0],
                                 ColliderSettings(collider_mode="CONTAINER", use_no_slip=False))],
        colliders=[plate], gravity=[0.0, 0.0, 0.0], frame_start=1, frame_end=frames, fps=fps)


def _run(scene, settings):
    sim = Simulation.start(scene, settings)
    for frame in range(scene.frame_start + 1, scene.frame_end + 1):
        sim.advance_frame(frame, 1.0 / scene.fps)
    return sim


@pytest.mark.slow
def test_couette_flow_has_the_linear_profile():
    """Plane Couette flow of honey between a resting floor and a plate moving at U: the steady profile
    u = U z / H (independent of the viscosity), both walls no-slip; the side walls slip. Steady after
    0.3 s (slowest mode exp(-pi^2 nu t / H^2) = 1e-10). Each layer within 3 % of U: the tolerance
    the issue sets (seen: within 1 %)."""
    dx, height, speed = 0.005, 0.03, 0.1
    scene = _couette_scene(dx, height, speed, 0.3)
    settings = SimulationSettings(solver="PBF", particle_spacing=dx, rest_density=1420.0, dynamic_viscosity=10.0,
                                  pbf_velocity_smoothing=0.0)
    sim = _run(scene, settings)
    pt = sim.solver.particles
    x, v = pt.x.astype(np.float64), pt.v.astype(np.float64)
    mid = np.abs(x[:, 0] - np.median(x[:, 0])) < 0.05
    layer = np.floor(x[mid, 2] / dx).astype(int)
    for k in np.unique(layer):
        z = x[mid, 2][layer == k].mean()
        u = v[mid, 0][layer == k].mean()
        assert abs(u - speed * z / height) < 0.03 * speed, (k, z, u, speed * z / height)


def _cylinder(radius, height, segments=48):
    """Closed, outward-facing cylinder standing on z = 0, its axis along z."""
    from engine.scene import TriangleMesh

    ang = 2.0 * np.pi * np.arange(segments) / segments
    ring = np.stack([radius * np.cos(ang), radius * np.sin(ang)], -1)
    verts = np.concatenate([np.column_stack([ring, np.zeros(segments)]),
                            np.column_stack([ring, np.full(segments, height)]), [[0, 0, 0], [0, 0, height]]])
    tris = []
    for j in range(segments):
        a, b = j, (j + 1) % segments
        tris += [(a, b, segments + b), (a, segments + b, segments + a),
                 (2 * segments, b, a), (2 * segments + 1, segments + a, segments + b)]
    return TriangleMesh(verts, np.array(tris))


#: Honey (engine.settings.liquids): 1420 kg/m^3, 10 Pa s.
HONEY = dict(rest_density=1420.0, dynamic_viscosity=10.0)


def _spread(dx, max_dt, seconds, radius=0.08):
    """A honey cylinder (radius = height) released on a no-slip floor: the front's radius at each time.

    The front is the radius holding 99 % of the particles over 0.984, the 99 % volume radius of Huppert's
    profile h ~ (1 - r^2 / R^2)^(1/3) (the volume beyond r is (1 - r^2 / R^2)^(4/3))."""
    fps = 10.0
    scene = SceneDescription(fluids=[FluidObject("Honey", _cylinder(radius, radius))],
                             containers=[BoxContainer("Floor", [-1.0, -1.0, 0.0], [1.0, 1.0, 1.0])],
                             frame_start=1, frame_end=1 + int(round(max(seconds) * fps)), fps=fps)
    settings = SimulationSettings(solver="PBF", particle_spacing=dx, pbf_time_step=max_dt, **HONEY)
    sim = Simulation.start(scene, settings)
    volume = len(sim.solver.particles) * dx ** 3
    out = []
    for frame in range(2, scene.frame_end + 1):
        sim.advance_frame(frame, 1.0 / fps)
        t = (frame - 1) / fps
        if any(abs(t - s) < 1e-9 for s in seconds):
            x = sim.solver.particles.x.astype(np.float64)
            r = np.hypot(x[:, 0], x[:, 1])
            out.append(np.percentile(r, 99.0) / 0.984)
    return np.array(out), volume


def huppert_radius(volume, t, rho=1420.0, mu=10.0, g=9.81):
    """Huppert 1982, eq. 2.12 (axisymmetric current of fixed volume): R = 0.894 (rho g V^3 t / (3 mu))^(1/8)."""
    return 0.894 * (rho * g * volume ** 3 * np.asarray(t) / (3.0 * mu)) ** 0.125


@pytest.mark.slow
def test_honey_spreads_as_huppert_1982_at_two_spacings_and_two_substeps():
    """Huppert 1982, "The propagation of two-dimensional and axisymmetric viscous gravity currents over a
    rigid horizontal surface", J. Fluid Mech. 121: R(t) = 0.894 (rho g V^3 t / (3 mu))^(1/8) once the
    current is thin (here t = 0.5 and 1 s: 7 and 9 times wider than thick). A 1.6 l honey cylinder on a
    no-slip floor, within 10 % at two spacings (the issue's tolerance; seen: 0-9 %); the spacings, and two
    substep limits, within 5 % of each other at t = 1 s (seen: 3.3 % and 3.9 %). The two spacings fill
    slightly different volumes: they are compared as R / V^(3/8), Huppert's scaling."""
    t = np.array([0.5, 1.0])
    coarse, v_coarse = _spread(0.008, 0.004, seconds=t)
    fine, v_fine = _spread(0.006, 0.004, seconds=t)
    short, v_short = _spread(0.008, 0.002, seconds=t)
    np.testing.assert_allclose(coarse, huppert_radius(v_coarse, t), rtol=0.10, atol=0)
    np.testing.assert_allclose(fine, huppert_radius(v_fine, t), rtol=0.10, atol=0)
    np.testing.assert_allclose(fine[-1] / v_fine ** 0.375, coarse[-1] / v_coarse ** 0.375, rtol=0.05, atol=0)
    np.testing.assert_allclose(short[-1], coarse[-1], rtol=0.05, atol=0)
