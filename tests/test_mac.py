"""MAC grid pieces (Suárez & Susín 2006, "Mesh-Particle Model for Fluid Animation" (Eurographics 2006), §2):
advection of a uniform flow, hydrostatic pressure, a
divergence-free projection, and SOR against red-black SOR on a Poisson problem with a known solution."""

import numpy as np
import pytest
from numpy.testing import assert_allclose

from engine.solvers.hybrid import mac
from engine.solvers.hybrid import mac_sampling

G = (0.0, 0.0, -9.81)


def _grid(shape=(8, 6, 10), cell=0.05):
    return mac.MACGrid.create([0.0, 0.0, 0.0], cell, shape)


def test_uniform_flow_is_advected_exactly():
    """Without gravity, viscosity or walls in the way, a uniform flow is a steady solution: the
    conservative centred + donor-cell differences of u u, u v, u w vanish identically."""
    grid = _grid()
    grid.u[1:-1] = 0.7
    grid.v[:, 1:-1] = -0.3
    grid.w[:, :, 1:] = 0.2    # w through the boundary row's faces too: the flow crosses the top
    ktop = grid.shape[2] - 1
    f, g, h = np.zeros_like(grid.u), np.zeros_like(grid.v), np.zeros_like(grid.w)
    mac.predictor_serial(grid.u, grid.v, grid.w, grid.solid, ktop, grid.cell, 1e-3, 1e-3, 0.5, 0.0, 0.0, 0.0, f, g, h)
    # interior faces (both neighbours computed and away from the walls' zero faces), exact up to rounding
    assert_allclose(f[2:-2, 1:-1, 1:ktop - 1], 0.7, rtol=0, atol=1e-12)
    assert_allclose(g[1:-1, 2:-2, 1:ktop - 1], -0.3, rtol=0, atol=1e-12)
    assert_allclose(h[1:-1, 1:-1, 2:ktop], 0.2, rtol=0, atol=1e-12)


@pytest.mark.parametrize("method", mac.POISSON_SOLVERS)
def test_resting_grid_has_hydrostatic_pressure_and_stays_at_rest(method):
    """A closed tank under a boundary row at P_top: P = P_top + g (z_top - z) and u stays 0."""
    grid = _grid()
    ktop = 8
    p_top = 0.3  # m^2/s^2, kinematic pressure given by the boundary row
    grid.p[:, :, ktop] = p_top
    scratch = mac.MACScratch(grid)
    dt = 2e-3
    for _ in range(5):
        mac.step(grid, scratch, ktop, dt, 1e-6, G, method, 1.7, 1e-8, 5000)
    z = (np.arange(ktop) + 0.5) * grid.cell
    z_top = (ktop + 0.5) * grid.cell
    expect = p_top + 9.81 * (z_top - z)
    # the discrete solution is exact for a linear pressure; tolerance: solver residual 1e-8/dt
    # times dx^2 n_cells (2e-7 m^2/s^2 at most) and float rounding
    assert_allclose(grid.p[:, :, :ktop], np.broadcast_to(expect, grid.p[:, :, :ktop].shape), rtol=1e-6, atol=1e-6)
    for a in (grid.u, grid.v, grid.w[:, :, :ktop]):
        assert_allclose(a, 0.0, rtol=0, atol=1e-6)


@pytest.mark.parametrize("method", mac.POISSON_SOLVERS)
def test_projection_leaves_a_divergence_free_field(method):
    """A random velocity field with a solid block inside: after one step the divergence of every
    computed cell is below the solve's tolerance (1e-6 1/s, asked for)."""
    rng = np.random.default_rng(3)
    grid = _grid((10, 8, 12))
    grid.solid[4:6, 3:5, 2:5] = 1
    for a in (grid.u, grid.v, grid.w):
        a[:] = rng.normal(0.0, 0.3, a.shape)
    ktop = 10
    grid.p[:, :, ktop] = 0.1
    scratch = mac.MACScratch(grid)
    dt = 1e-3
    it, _ = mac.step(grid, scratch, ktop, dt, 1e-6, G, method, 1.8, 1e-6, 20000)
    assert it < 20000
    div = np.zeros_like(grid.p)
    mac.divergence(grid.u, grid.v, grid.w, grid.solid, ktop, grid.cell, div)
    # residual r of eq. 4 <= tol / dt leaves div = dt r <= tol after the projection
    assert np.abs(div).max() <= 1e-6 * 1.0001
    # walls: no flow through the grid's sides and the solid block's faces
    assert np.all(grid.u[0, :, :ktop] == 0) and np.all(grid.u[-1, :, :ktop] == 0) and np.all(grid.w[:, :, 0] == 0)
    assert np.all(grid.u[4, 3:5, 2:5] == 0) and np.all(grid.u[6, 3:5, 2:5] == 0)


def test_sor_and_red_black_sor_agree_on_an_analytic_poisson_problem():
    """lap P = -3 pi^2 P for P = cos(pi x) cos(pi y) cos(pi z) on [0,1]^3 with zero normal
    derivative on five sides and P given above the top row. The two solvers converge to the same
    discrete solution (to their tolerance) and both are within the O(dx^2) discretisation error of
    the analytic one."""
    n = 16
    dx = 1.0 / n
    ktop = n
    shape = (n, n, n + 1)
    c = (np.arange(n + 1) + 0.5) * dx
    xi, yj, zk = np.meshgrid(c[:n], c[:n], c, indexing="ij")
    exact = np.cos(np.pi * xi) * np.cos(np.pi * yj) * np.cos(np.pi * zk)
    rhs = -3.0 * np.pi ** 2 * exact
    rhs[:, :, ktop] = 0.0
    solid = np.zeros(shape, dtype=np.uint8)
    out = {}
    for method in mac.POISSON_SOLVERS:
        p = np.zeros(shape)
        p[:, :, ktop] = exact[:, :, ktop]
        it, r = mac.solve_pressure(method, p, rhs, solid, ktop, dx, 1.85, 1e-9, 20000)
        assert it < 20000 and r <= 1e-9
        out[method] = p
    # residual 1e-9 over ~ (n dx)^2 / pi^2 of the slowest mode: agreement to ~1e-10, 1e-8 is safe
    assert_allclose(out["SOR"], out["RBSOR"], rtol=0, atol=1e-8)
    # second-order discretisation error: about (pi dx)^2 / 12 relative (~3e-3 at n = 16), 1e-2 allows
    # for the ghost-free Neumann boundary's first-order corner error
    assert_allclose(out["RBSOR"][:, :, :ktop], exact[:, :, :ktop], rtol=0, atol=1e-2)


def test_sample_velocity_interpolates_linear_fields_exactly():
    grid = _grid((6, 5, 7), 0.1)
    fx = grid.origin[0] + np.arange(grid.u.shape[0]) * grid.cell
    grid.u[:] = (2.0 * fx + 1.0)[:, None, None]
    zk = grid.origin[2] + np.arange(grid.w.shape[2]) * grid.cell
    grid.w[:] = (-3.0 * zk)[None, None, :]
    pts = np.array([[0.13, 0.22, 0.31], [0.41, 0.07, 0.55]])
    out = np.zeros_like(pts)
    mac_sampling.sample_velocity(grid.u, grid.v, grid.w, 0.0, 0.0, 0.0, 1.0 / grid.cell, pts, out)
    assert_allclose(out[:, 0], 2.0 * pts[:, 0] + 1.0, rtol=1e-12, atol=1e-12)
    assert_allclose(out[:, 1], 0.0, rtol=0, atol=1e-15)
    assert_allclose(out[:, 2], -3.0 * pts[:, 2], rtol=1e-12, atol=1e-12)


def test_serial_and_parallel_builds_give_identical_results():
    """The grid kernels have a serial build for small grids; red-black ordering makes them equal."""
    rng = np.random.default_rng(5)
    grid = _grid((9, 7, 11))
    for a in (grid.u, grid.v, grid.w):
        a[:] = rng.normal(0.0, 0.3, a.shape)
    ktop = 9
    out = []
    for pred, rbsor in ((mac.predictor_serial, mac._rbsor_serial), (mac.predictor_parallel, mac._rbsor_parallel)):
        f, g, h = np.zeros_like(grid.u), np.zeros_like(grid.v), np.zeros_like(grid.w)
        pred(grid.u, grid.v, grid.w, grid.solid, ktop, grid.cell, 1e-3, 1e-6, 0.5, 0.0, 0.0, -9.81, f, g, h)
        rhs = np.zeros_like(grid.p)
        mac.poisson_rhs_serial(f, g, h, grid.solid, ktop, grid.cell, 1e-3, rhs)
        p = np.zeros_like(grid.p)
        mask = np.empty(grid.p.shape, dtype=np.uint8)
        mac.neighbour_mask(grid.solid, ktop, mask)
        it, _ = rbsor(p, rhs, mask, ktop, grid.cell, 1.7, 1e-6, 50)
        out.append((f, g, h, p, it))
    for a, b in zip(out[0], out[1]):
        np.testing.assert_array_equal(a, b)


def test_projection_gives_the_half_step_field_and_adds_up_the_displacement():
    """With ``half_step``, the projection writes (u^n + u^(n+1)) / 2 on every face of the computed
    rows (Suárez & Susín 2006, eq. 10) and sums dt times it into the displacement field: set on a fresh start,
    added afterwards. The velocity itself is the same as without it."""
    rng = np.random.default_rng(7)
    grid = _grid((9, 7, 11))
    grid.solid[3:5, 2:4, 1:3] = 1
    for a in (grid.u, grid.v, grid.w):
        a[:] = rng.normal(0.0, 0.3, a.shape)
    ktop = 8
    plain = mac.MACGrid.create(grid.origin, grid.cell, grid.shape)
    for name in ("u", "v", "w", "p", "solid"):
        getattr(plain, name)[:] = getattr(grid, name)
    fields = [np.full_like(a, np.nan) for a in (grid.u, grid.v, grid.w)]
    moved = [np.full_like(a, 7.0) for a in (grid.u, grid.v, grid.w)]
    scratch, scratch_plain = mac.MACScratch(grid), mac.MACScratch(plain)
    dt = 1e-3
    expect = [np.zeros_like(a) for a in moved]
    for step, fresh in enumerate((True, False)):
        before = [a.copy() for a in (grid.u, grid.v, grid.w)]
        mac.step(grid, scratch, ktop, dt, 1e-6, G, "RBSOR", 1.7, 1e-8, 5000, half_step=(*fields, *moved, fresh))
        mac.step(plain, scratch_plain, ktop, dt, 1e-6, G, "RBSOR", 1.7, 1e-8, 5000)
        for a, b in zip((grid.u, grid.v, grid.w), (plain.u, plain.v, plain.w)):
            np.testing.assert_array_equal(a, b)
        rows = (slice(None), slice(None), slice(0, ktop))
        rows_w = (slice(None), slice(None), slice(0, ktop + 1))
        for n, (o, m, b, a) in enumerate(zip(fields, moved, before, (grid.u, grid.v, grid.w))):
            r = rows_w if n == 2 else rows
            half = 0.5 * (b[r] + a[r])
            # the same two float64 operations: equal to rounding
            assert_allclose(o[r], half, rtol=1e-15, atol=1e-15)
            expect[n][r] = dt * half if fresh else expect[n][r] + dt * half
            assert_allclose(m[r], expect[n][r], rtol=1e-14, atol=1e-18)
