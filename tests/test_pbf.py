"""PBF micro-scenes (Alduán, Tena & Otaduy 2015, "Efficient and Robust Position-Based Fluids for VFX", §3):
resting tank, viscous slump, two resolutions, the legacy surface pull, determinism, and a bake through the driver."""

import numpy as np
import pytest
from numpy.testing import assert_allclose

from engine import driver
from engine.io.cache import CacheReader
from engine.core.particles import Particles
from engine.settings import SimulationSettings
from engine.solvers import pbf
from engine.solvers.liquid_forces import LiquidTable
from engine.collision.walls import clamp_point_into_boxes
from helpers import check_half_list_row, column_scene

G = np.array([0.0, 0.0, -9.81])
NO_BOXES = np.zeros((0, 2, 3))


def lattice(lower, upper, dx):
    """Simple cubic lattice with sites at lower + (i + 1/2) dx, as engine.sources.inflow fills a box."""
    axes = [np.arange(lo + dx / 2, hi - dx / 4, dx) for lo, hi in zip(lower, upper)]
    grid = np.meshgrid(*axes, indexing="ij")
    return np.stack([a.ravel() for a in grid], axis=1)


def make(x, dx=0.02, boxes=NO_BOXES, gravity=G, level=None, spacings=None, **kw):
    params = dict(dx=dx, rho0=1000.0, iterations=4, tolerance=0.005, beta=0.6, xsph=0.02,
                  gravity=gravity, boxes=boxes, friction=0.0, cfl=0.5, max_dt=0.002, speed_limit=100.0,
                  spacings=spacings)
    params.update(kw)
    model = pbf.make_model(**params)
    return pbf.PBFSolver(model, Particles.create(x, np.zeros_like(x), 1000.0), level=level)


def run(solver, steps, every=1):
    """Advance at the solver's own dt; returns per-step records every ``every`` steps."""
    out = []
    for k in range(steps):
        dt = solver.stable_dt()
        solver.step(dt)
        if k % every == 0 or k == steps - 1:
            v = solver.particles.v.astype(np.float64)
            out.append(dict(iterations=solver.iterations, error=solver.density_error,
                            speed=np.linalg.norm(v, axis=1).mean(), dt=dt))
    return out


def test_position_clamp_puts_points_on_the_walls_they_crossed_and_leaves_the_rest():
    """walls.clamp_point_into_boxes (PBF's corrections): inside points stay, points outside within the
    margin land on the nearest point of the box, points beyond it stay; two boxes act in turn."""
    boxes = np.array([[[0.0, 0.0, 0.0], [1.0, 2.0, 3.0]], [[5.0, 5.0, 5.0], [6.0, 6.0, 6.0]]], dtype=np.float32)
    margin = np.float32(0.1)
    rng = np.random.default_rng(11)
    pts = rng.uniform(-0.3, 6.3, (4000, 3)).astype(np.float32)
    for p in pts:
        got = np.array(clamp_point_into_boxes(p[0], p[1], p[2], boxes, margin))
        want = p.copy()
        for lo, hi in boxes:
            inside = np.all((lo <= want) & (want <= hi))
            near = np.all((lo - margin <= want) & (want <= hi + margin))
            if near and not inside:
                want = np.clip(want, lo, hi)
        np.testing.assert_array_equal(got, want)  # only comparisons and copies: exact


def _brute_force_neighbours(s):
    nl = s.neighbours
    xs = s.particles.x.astype(np.float64)
    d2 = ((xs[:, None, :] - xs[None, :, :]) ** 2).sum(-1)
    want = d2 < (2 * s.model.h) ** 2
    np.fill_diagonal(want, False)
    # a half list over blocks of nl.half particles: a pair inside a block is listed once, under its
    # first particle (first in the range), a pair across blocks under both
    half = nl.half
    assert half == pbf.half_block(len(xs)) and nl.block == 1
    blk = np.arange(len(xs)) // half
    for i in range(len(xs)):
        check_half_list_row(nl, i, want, blk)
    assert nl.pairs == int(want.sum())
    # no two ranges overlap (a chunk filled again after an overflow lies after the others, so the
    # starts need not ascend with the particles)
    order = np.argsort(nl.start, kind="stable")
    ends = (nl.start + nl.count.astype(np.int64))[order]
    assert np.all(ends[:-1] <= nl.start[order][1:]) and ends[-1] <= nl.nbr.shape[0]


def test_neighbour_list_equals_brute_force():
    """First build (counting pass), rebuilds sized from the last counts, and a compression that
    overflows the slices sized from them: every list equals the brute-force one."""
    rng = np.random.default_rng(3)
    x = rng.uniform(0.0, 0.2, size=(600, 3))
    s = make(x, gravity=np.zeros(3))
    s._neighbours()
    _brute_force_neighbours(s)
    assert s.neighbours.recounts == 1
    for _ in range(3):  # small moves: the previous counts size the slices
        s.particles.x += rng.uniform(-0.3, 0.3, size=s.particles.x.shape).astype(np.float32) * s.model.h
        s._neighbours()
        _brute_force_neighbours(s)
    s.particles.x *= np.float32(0.6)  # ~4.6 times more neighbours: the slices overflow, counted again
    before = s.neighbours.recounts
    s._neighbours()
    _brute_force_neighbours(s)
    assert s.neighbours.recounts == before + 1


def test_resting_tank_settles_within_tolerance_and_keeps_every_particle():
    dx, width, height = 0.02, 0.3, 0.2
    box = np.array([[[0.0, 0.0, 0.0], [width, width, 0.4]]])
    x = lattice([0, 0, 0], [width, width, height], dx)
    s = make(x, boxes=box)
    n0 = len(x)
    assert n0 == 15 * 15 * 10
    rec = run(s, 400)  # 0.8 s
    pt = s.particles
    assert len(pt) == n0 and np.array_equal(np.sort(pt.id), np.arange(n0))
    assert np.all(np.isfinite(pt.x)) and np.all(np.isfinite(pt.v))
    # nothing leaves the box: the projection puts particles on the wall at worst (float32 rounding)
    assert np.all(pt.x >= -1e-6) and np.all(pt.x <= box[0, 1] + 1e-6)
    # settled: four in five of the last 50 substeps reach the tolerance before the budget of 4 is spent;
    # when the budget runs out the error is the one measured before the last correction, an upper
    # bound that may exceed the tolerance slightly (seen: 1.006 times it), hence the 1.2 factor
    last = rec[-50:]
    assert sum(r["iterations"] < s.model.iterations for r in last) >= 40
    assert max(r["error"] for r in last) <= 1.2 * s.model.tolerance
    speed = [r["speed"] for r in rec]
    # the block starts uncompressed, drops a fraction of a spacing and rings; the ringing decays
    # (seen: 0.09 m/s at 0.1 s, 0.03 m/s at 0.8 s). 3 % of sqrt(g H) is a loose bound on the final
    # mean speed, as in the WCSPH test (seen: 2 %)
    assert np.mean(speed[-50:]) < 0.5 * np.mean(speed[20:100])
    assert np.mean(speed[-50:]) < 0.03 * np.sqrt(9.81 * height)
    # the median particle sits at rest density: compression at most the tolerance; rtol from the
    # 0.5 % tolerance, atol 0
    assert_allclose(np.median(pt.rho), 1000.0, rtol=s.model.tolerance, atol=0)


def _slump(xsph):
    """A 0.16 m block on a floor (no side walls) for 0.3 s at 2 ms; checks the energy each step."""
    dx = 0.02
    floor = np.array([[[-5.0, -5.0, 0.0], [5.0, 5.0, 5.0]]])  # walls far away: only the floor acts
    x = lattice([0, 0, 0], [0.16, 0.16, 0.16], dx)
    s = make(x, boxes=floor, xsph=xsph)
    m = s.model.level_mass[0]
    z0 = float(x[:, 2].mean())
    atol = 0.5 * len(x) * m * (9.81 * 0.002) ** 2
    previous = 0.0
    for k in range(150):
        s.step(0.002)
        v = s.particles.v.astype(np.float64)
        kinetic = 0.5 * m * float((v * v).sum())
        released = m * 9.81 * len(x) * (z0 - float(s.particles.x[:, 2].mean()))
        # kinetic energy never exceeds the potential energy released (free fall is the bound);
        # atol: the kinetic energy one step of free fall gives the whole block, N m (g dt)^2 / 2
        assert kinetic <= released + atol, (xsph, k, kinetic, released)
        # and kinetic + potential energy never grows from one substep to the next (same atol:
        # the velocity of a substep lags its position change by one gravity kick)
        energy = kinetic - released
        assert energy <= previous + atol, (xsph, k, energy, previous)
        previous = energy
    assert np.all(np.isfinite(s.particles.v))
    return s, float(np.percentile(s.particles.x[:, 2], 99))


def test_viscous_block_is_stable_at_the_water_time_step_and_slumps_slowly():
    """Alduán et al. 2015, §3.2 and Fig. 2: a toothpaste-like XSPH coefficient at the 2 ms water time step."""
    water, h_water = _slump(0.02)
    paste, h_paste = _slump(15.0)
    assert water.model.xsph_passes == 1 and paste.model.xsph_passes == 30
    # water collapses to a few layers in 0.3 s; the paste keeps most of its 0.16 m height
    assert h_paste > h_water + 0.03, (h_paste, h_water)


def test_two_resolutions_rest_together_within_tolerance():
    """Alduán et al. 2015, eq. 1-2: a coarse half (2x spacing, 8x mass) and a fine half share one tank."""
    fine, coarse = 0.02, 0.04
    box = np.array([[[0.0, 0.0, 0.0], [0.32, 0.16, 0.4]]])
    xf = lattice([0, 0, 0], [0.16, 0.16, 0.2], fine)
    xc = lattice([0.16, 0, 0], [0.32, 0.16, 0.2], coarse)
    x = np.concatenate([xf, xc])
    level = np.concatenate([np.zeros(len(xf), np.uint8), np.ones(len(xc), np.uint8)])
    s = make(x, dx=fine, boxes=box, level=level, spacings=[fine, coarse])
    assert_allclose(s.model.level_mass[1] / s.model.level_mass[0], 8.0, rtol=1e-12, atol=0)
    run(s, 400)
    pt = s.particles
    c = np.maximum(pt.rho / 1000.0 - 1.0, 0.0)
    # the solver stops on the mean over all particles, so the mean of one resolution may sit a little
    # above the tolerance (seen: 1.01 times it for the fine half); 1.5 times is the bound
    assert c.mean() <= 1.2 * s.model.tolerance
    for lev in (0, 1):
        sel = s.level == lev
        assert c[sel].mean() <= 1.5 * s.model.tolerance, (lev, c[sel].mean())
    assert np.all(pt.x >= -1e-6) and np.all(pt.x <= box[0, 1] + 1e-6)
    # both halves ring down (seen: 0.13 m/s at 0.2 s, 0.07 m/s at 0.8 s); the interface is noisier
    # than a single resolution (the halves slowly mix), so the bound is 7 % of sqrt(g H) instead of
    # the tank's 3 %
    speed = np.linalg.norm(pt.v, axis=1)
    assert speed.mean() < 0.07 * np.sqrt(9.81 * 0.2)


def _roundness(x):
    """Extent along the cube diagonals over the extent along the axes: sqrt(3) for a cube, 1 for a ball."""
    c = x - x.mean(axis=0)
    diag = [np.percentile(np.abs(c @ (np.array(d) / np.sqrt(3))), 98) for d in
            ((1, 1, 1), (1, 1, -1), (1, -1, 1), (-1, 1, 1))]
    axis = [np.percentile(np.abs(c[:, k]), 98) for k in range(3)]
    return np.mean(diag) / np.mean(axis)


@pytest.mark.parametrize("kappa", [0.0, 1.0])
def test_legacy_surface_pull_rounds_a_cube(kappa):
    """Alduán et al. 2015, §3.3: with the legacy pull kappa > 0 a floating cube rounds off; with kappa = 0
    nothing pulls. Kept as it was so that files made with it bake as they did."""
    x = lattice([0, 0, 0], [0.2, 0.2, 0.2], 0.02)
    s = make(x, gravity=np.zeros(3), kappa=kappa, xsph=0.5)
    r0 = _roundness(x)
    radius0 = np.median(np.linalg.norm(x - x.mean(axis=0), axis=1))
    for _ in range(100):  # 0.2 s
        s.step(0.002)
    xs = s.particles.x.astype(np.float64)
    r1 = _roundness(xs)
    radius1 = np.median(np.linalg.norm(xs - xs.mean(axis=0), axis=1))
    assert np.all(np.isfinite(xs))
    if kappa == 0.0:
        # no attraction at all: a lattice at rest density stays put; rtol: float32 rounding only
        assert_allclose(r1, r0, rtol=1e-4, atol=0)
        assert_allclose(radius1, radius0, rtol=1e-4, atol=0)
    else:
        # the corners are pulled in: the diagonal/axis extent ratio drops from 1.35 (this lattice
        # and percentile) towards 1 (seen: 1.21 after 0.2 s)
        assert r1 < r0 - 0.1, (r0, r1)
        # known limitation: the one-sided constraint cannot hold the bulk together against the
        # jitter the cohesion creates, so the drop also swells slowly (seen: +17 % in 0.2 s)
        assert radius1 < 1.25 * radius0, (radius0, radius1)


def test_two_runs_are_bit_identical():
    box = np.array([[[0.0, 0.0, 0.0], [0.3, 0.12, 0.3]]])
    x = lattice([0, 0, 0], [0.12, 0.12, 0.2], 0.02)
    runs = []
    for _ in range(2):
        # honey's viscosity: the implicit solve's sums are over a fixed partition too
        s = make(x, boxes=box, xsph=1.0, liquid=LiquidTable.single(1420.0, 10.0))
        run(s, 40)
        order = np.argsort(s.particles.id)
        runs.append((s.particles.x[order].copy(), s.particles.v[order].copy()))
    np.testing.assert_array_equal(runs[0][0], runs[1][0])
    np.testing.assert_array_equal(runs[0][1], runs[1][1])


def test_driver_bakes_a_pbf_scene(tmp_path):
    scene = column_scene(water=(0.06, 0.06, 0.1), tank=(0.1, 0.06, 0.2), frames=(1, 4))
    settings = SimulationSettings(solver="PBF", particle_spacing=0.02)
    out = driver.bake(scene, settings, str(tmp_path))
    r = CacheReader(str(tmp_path))
    assert r.manifest["solver"] == "PBF" and r.manifest["status"] == "complete"
    frames = [r.read_frame(f) for f in r.frames]
    assert len(frames) == 4 and out["frames"] == 4
    n0 = 3 * 3 * 5
    for f in frames:
        assert len(f["id"]) == n0
        assert np.all(np.isfinite(f["position"]))
        assert np.all(f["position"] >= -1e-6) and np.all(f["position"] <= np.array([0.1, 0.06, 0.2]) + 1e-6)
    # 1/24 s per frame at most 2 ms per substep: at least 21 substeps a frame
    assert out["substeps"] >= 3 * 21


def test_box_friction_acts_per_box_on_particles_touching_its_walls():
    """finish(): a particle within h/4 of a box wall loses the share ``friction[b]`` of its speed along
    that wall (normal component kept); particles away from walls, or near a box without friction,
    keep their velocity; a = (v - v_start) / dt."""
    h = 0.02
    boxes = np.array([[[0.0, 0.0, 0.0], [1.0, 1.0, 1.0]], [[5.0, 0.0, 0.0], [6.0, 1.0, 1.0]]])
    friction = np.array([0.25, 0.0])
    x = np.array([[0.5, 0.5, 0.2 * h],      # on box 0's floor (within h/4)
                  [0.5, 0.5, 0.5],          # inside box 0, far from its walls
                  [5.5, 0.5, 0.2 * h],      # on box 1's floor: box 1 has no friction
                  [0.5, 0.5, 0.5 * h]], dtype=np.float32)  # half a spacing up: not touching
    v = np.tile(np.float32([1.0, -2.0, 0.5]), (4, 1))
    v_start = np.zeros_like(v)
    pbf.finish(x, np.zeros(4, np.uint8), np.array([h]), boxes, friction, 100.0, v, v_start)
    want = np.tile(np.float32([1.0, -2.0, 0.5]), (4, 1))
    want[0, :2] *= 0.75  # tangential (x, y) reduced by the friction, normal (z) kept
    # float32 products of exactly representable values: equal to rounding (rtol 1e-6, atol 0)
    assert_allclose(v, want, rtol=1e-6, atol=0.0)
    assert_allclose(v_start, want * 100.0, rtol=1e-6, atol=0.0)  # a = (v - 0) / dt, dt = 0.01 s


def test_one_iteration_equals_brute_force_eq5():
    """One Jacobi iteration (the constraint pass, then the correction from the kernel slopes it stored
    per pair, uint16 fixed point) against eq. 1, 4 and 5 summed over every pair in float64."""
    rng = np.random.default_rng(11)
    dx = 0.02
    x = lattice([0.0, 0.0, 0.0], [0.24, 0.2, 0.2], 0.98 * dx)  # compressed: C > 0 inside
    x += rng.uniform(-0.05, 0.05, size=x.shape) * dx
    s = make(x, dx=dx, gravity=np.zeros(3), iterations=1, xsph=0.0)
    x0 = s.particles.x.astype(np.float64)[np.argsort(s.particles.id)]
    dt = 0.002
    s.step(dt)
    order = np.argsort(s.particles.id)
    moved = s.particles.x.astype(np.float64)[order] - x0
    rho = s.particles.rho.astype(np.float64)[order]

    m = s.model
    h, mass, rho0 = m.h, float(m.level_mass[0]), m.rho0
    d = x0[:, None, :] - x0[None, :, :]
    r = np.sqrt((d ** 2).sum(-1))
    q = r / h
    w = 0.25 * np.clip(2.0 - q, 0.0, None) ** 3 - np.clip(1.0 - q, 0.0, None) ** 3
    dw = -0.75 * np.clip(2.0 - q, 0.0, None) ** 2 + 3.0 * np.clip(1.0 - q, 0.0, None) ** 2
    rho_ref = mass / (np.pi * h ** 3) * w.sum(axis=1)                      # eq. 1, the particle itself included
    lam = np.minimum(-m.beta * m.level_k[0] * (rho_ref / rho0 - 1.0), 0.0)  # eq. 4, kappa = 0: no pull
    with np.errstate(invalid="ignore", divide="ignore"):
        grad = np.where(r[..., None] > 0.0, (dw / (np.pi * h ** 4) / r)[..., None] * d, 0.0)
    pair = mass / rho0 * (lam[:, None] + lam[None, :])[..., None] * grad
    want = pair.sum(axis=1)                                                 # eq. 5
    size = np.linalg.norm(want, axis=1)
    assert size.max() > 0.01 * dx                                           # a real correction, not noise
    assert size.max() < pbf.MAX_MOVE * h                                    # no clamp: eq. 5 as is
    # rtol 1e-5: the float32 density sum (about 30 terms of 6e-8 relative rounding each)
    assert_allclose(rho, rho_ref, rtol=1e-5, atol=0.0)
    # each stored slope is within 2.7e-5 absolute (5.4e-5 of the largest pair push, see
    # pbf_passes.SLOPE_UNIT) and the float32 pass adds ~1e-7 relative per term: 30 pairs give at most
    # 30 * 5.4e-5 = 1.6e-3 of the largest pair push; positions are float32 (3e-8 m at 0.24 m)
    biggest = np.abs(pair).max()
    assert_allclose(moved, want, rtol=1e-3, atol=1.6e-3 * biggest + 3e-8)
    # and much closer in the mean: the rounding errors of the pairs are unbiased
    assert np.abs(moved - want).mean() < 1e-4 * biggest


def _brute_kernel_sums(x, h, values):
    """sum_j w(|x_i - x_j| / h) values_j over every j (itself included), float64, in row chunks."""
    out = np.zeros((x.shape[0],) + values.shape[1:])
    for a in range(0, x.shape[0], 400):
        r = np.sqrt(((x[a:a + 400, None, :] - x[None, :, :]) ** 2).sum(-1))
        q = r / h
        w = 0.25 * np.clip(2.0 - q, 0.0, None) ** 3 - np.clip(1.0 - q, 0.0, None) ** 3
        out[a:a + 400] = np.tensordot(w, values, axes=(1, 0))
    return out


def test_pair_passes_equal_brute_force_over_many_blocks():
    """The staged pair loops (neighbour positions copied for 32 particles at a time, 16 pairs a vector
    step, the lanes past a particle's range masked) against eq. 1 and eq. 6 summed over every pair in
    float64, on a half list of blocks of 64 particles: pairs inside a block (visited once, a share for
    both) and across blocks (listed from both sides), and groups that end inside a block; the
    correction (eq. 5, from the slopes the density pass stored) on the same list; XSPH also from the
    kernel slopes."""
    from engine.core.neighbour_list import NeighbourList
    from engine.core.cell_grid import build_grid
    from engine.solvers import pbf_passes

    rng = np.random.default_rng(5)
    dx = 0.02
    x = lattice([0.0, 0.0, 0.0], [0.26, 0.22, 0.18], dx)
    x += rng.uniform(-0.2, 0.2, size=x.shape) * dx
    s = make(x, dx=dx, gravity=np.zeros(3), iterations=1)
    m = s.model
    grid = build_grid(x.astype(np.float32), m.cell_size)
    xs = x.astype(np.float32)[grid.order]
    n = xs.shape[0]
    level = np.zeros(n, dtype=np.uint8)
    nl = NeighbourList(half=64)
    nl.build(xs, s._lh[level], grid._replace(order=None))
    assert n > 20 * 64 and nl.count.max() > 2 * pbf_passes.LANES  # many blocks, ranges over two steps

    # density, eq. 1 (wall_free = 1: no walls)
    xq = np.zeros((n, 4), dtype=np.float32)
    xq[:, :3] = xs
    rho = np.empty(n, dtype=np.float32)
    blocks = -(-n // nl.half)
    err, top = np.empty(blocks), np.empty(blocks)
    slope = np.zeros(nl.nbr.shape[0], dtype=np.uint16)
    mass, h = float(m.level_mass[0]), m.h
    lam_max = m.attraction_limit(0.002).astype(np.float32)
    pbf_passes.constraint(xq, level, nl.start, nl.count, nl.local, nl.nbr, s._lh, s._lmass,
                          m.level_k.astype(np.float32), lam_max, True, pbf._SIGMA * mass, m.rho0, m.beta,
                          np.ones(n, dtype=np.float32), nl.half, rho, err, top, slope)
    x64 = xs.astype(np.float64)
    rho_ref = mass / (np.pi * h ** 3) * _brute_kernel_sums(x64, h, np.ones(n))
    # rtol 1e-5: the float32 sum of about 30 terms, 6e-8 relative rounding each (as in eq. 5's test)
    assert_allclose(rho, rho_ref, rtol=1e-5, atol=0.0)

    # correction, eq. 5, with half the multipliers the pass wrote into xq[:, 3] (the lattice's closest
    # pairs would otherwise ask for more than the clamp of MAX_MOVE h); no walls
    xq[:, 3] *= np.float32(0.5)
    x_out = np.zeros((n, 4), dtype=np.float32)
    x_out[:, 3] = 7.0  # the fourth column is left alone
    v0 = np.zeros((n, 3), dtype=np.float32)
    no_boxes = np.zeros((0, 2, 3), dtype=np.float32)
    pbf_passes.correct(xq, level, nl.start, nl.count, nl.local, nl.nbr, s._lh, s._lmass,
                       np.zeros(1, dtype=np.float32), True, pbf._SIGMA * mass / m.rho0, np.full(n, -1, np.int32),
                       np.zeros((0, 3), np.float32), pbf.WALL_FACTOR, pbf.MAX_MOVE, no_boxes, m.cell_size, False,
                       500.0, nl.half, slope, x_out, v0)
    lam = xq[:, 3].astype(np.float64)
    pushes = np.zeros((n, 3))
    biggest = 0.0
    for k in range(0, n, 400):
        d = x64[k:k + 400, None, :] - x64[None, :, :]
        r = np.sqrt((d ** 2).sum(-1))
        q = r / h
        dw = -0.75 * np.clip(2.0 - q, 0.0, None) ** 2 + 3.0 * np.clip(1.0 - q, 0.0, None) ** 2
        with np.errstate(invalid="ignore", divide="ignore"):
            grad = np.where(r[..., None] > 0.0, (dw / (np.pi * h ** 4) / r)[..., None] * d, 0.0)
        pair = mass / m.rho0 * (lam[k:k + 400, None] + lam[None, :])[..., None] * grad
        pushes[k:k + 400] = pair.sum(axis=1)
        biggest = max(biggest, np.abs(pair).max())
    assert np.abs(pushes).max() > 0.01 * dx and np.linalg.norm(pushes, axis=1).max() < pbf.MAX_MOVE * h
    # as in eq. 5's test: each stored slope within 5.4e-5 of the largest pair push, ~30 pairs, plus
    # float32 positions (3e-8 m at 0.26 m)
    assert_allclose(x_out[:, :3], x64 + pushes, rtol=0.0, atol=1.6e-3 * biggest + 3e-8)
    assert np.all(x_out[:, 3] == 7.0)
    assert_allclose(v0, (x_out[:, :3] - xs) * 500.0, rtol=1e-6, atol=1e-6)  # v += dx / dt

    # XSPH, eq. 6: v_i + c sum_j m_j / rho_j (v_j - v_i) W_ij, with scattered densities and velocities
    rho_j = rng.uniform(900.0, 1100.0, n).astype(np.float32)
    v = rng.normal(0.0, 1.0, (n, 3)).astype(np.float32)
    vq = np.empty((n, 4), dtype=np.float32)
    pbf_passes.velocity_rows(v, rho_j, vq)
    c = 0.3
    v_out = np.empty_like(v)
    a = np.zeros_like(v)
    table = pbf_passes.kernel_of_slope()
    pbf_passes.xsph_pass(xs, xq, vq, level, nl.start, nl.count, nl.local, nl.nbr, s._lh, s._lmass, True,
                         c * pbf._SIGMA * mass, False, m.level_h, m.boxes, m.box_friction, 500.0, nl.half,
                         False, slope, table, v_out, a)
    v64 = v.astype(np.float64)
    share = (1.0 / rho_j.astype(np.float64))[:, None]
    sums = _brute_kernel_sums(x64, h, share * v64) - _brute_kernel_sums(x64, h, share) * v64
    want = v64 + c * mass / (np.pi * h ** 3) * sums
    # atol: float32 sums of ~30 terms of size c m / rho W |v| ~ 0.03 m/s each (6e-8 relative rounding
    # each) and float32 velocities (|v| ~ 3, 2.4e-7 m/s); 1e-6 m/s covers both with margin
    assert_allclose(v_out, want, rtol=1e-6, atol=1e-6)
    assert np.abs(v_out - v).max() > 1e-3  # the pass did something

    # XSPH from the slopes the constraint pass stored at these positions (the iterations stopped on the
    # tolerance): kernel values from the slope codes. A code is within half a unit (2.7e-5) of the
    # slope, which moves w by at most 4e-5 (engine.solvers.pbf_passes.kernel_of_slope): the bound on
    # each particle's error is c m / (pi h^3) sum_j 4e-5 |(v_j - v_i) / rho_j| over its neighbours,
    # plus the float32 rounding allowed above (1e-6 m/s).
    v_slope = np.empty_like(v)
    pbf_passes.xsph_pass(xs, xq, vq, level, nl.start, nl.count, nl.local, nl.nbr, s._lh, s._lmass, True,
                         c * pbf._SIGMA * mass, False, m.level_h, m.boxes, m.box_friction, 500.0, nl.half,
                         True, slope, table, v_slope, a)
    bound = np.zeros(n)
    for k in range(0, n, 400):
        near = np.sqrt(((x64[k:k + 400, None, :] - x64[None, :, :]) ** 2).sum(-1)) < 2.0 * h
        diff = np.abs(v64[None, :, :] - v64[k:k + 400, None, :]) * share[None, :, :]
        bound[k:k + 400] = (near[:, :, None] * diff).sum(1).max(-1)
    bound = c * mass / (np.pi * h ** 3) * 4e-5 * bound + 1e-6
    assert np.all(np.abs(v_slope - want).max(-1) <= bound)
    assert np.abs(v_slope - want).max() > 1e-7  # not the exact path by accident: the codes are rounded
