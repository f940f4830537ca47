"""The cluster-pair list (engine.core.cluster_list) against brute force, and the PBF passes over it
(engine.solvers.pbf_cluster_passes) against eq. 1, 5 (with the tensile term of eq. 7) and 6 of Alduán,
Tena & Otaduy 2015 summed over every pair in float64."""

import numba
import numpy as np
import pytest
from numpy.testing import assert_allclose

from engine.core.cell_grid import build_grid
from engine.core.cluster_list import CLUSTER, ClusterList, clusters_of, octant_order
from engine.solvers import pbf, pbf_cluster_passes as passes
from engine.solvers.pbf_passes import velocity_rows


def lattice(lower, upper, dx):
    axes = [np.arange(lo + dx / 2, hi - dx / 4, dx) for lo, hi in zip(lower, upper)]
    grid = np.meshgrid(*axes, indexing="ij")
    return np.stack([a.ravel() for a in grid], axis=1)


def sorted_rows(x, h):
    """The particles in the grid's order refined by octants, their rows and the grid."""
    x = np.asarray(x, dtype=np.float32)
    grid = build_grid(x, 2.0 * h)
    order = grid.order.copy()
    octant_order(x, order, grid.cell_start, 2.0 * h)
    xs = x[order]
    rows = passes.cluster_rows(len(xs))
    rows[:len(xs), :3] = xs
    return xs, rows, grid


def listed_pairs(cl):
    """(i, j, local) of every pair the list holds, in the list's order, and the particles each pad slot
    names (the cluster's first particle, no pairs)."""
    out = []
    for c in range(clusters_of(cl.n)):
        for e in range(cl.start[c], cl.start[c] + cl.count[c]):
            m = int(cl.mask[e])
            for u in range(CLUSTER):
                j = int(cl.nbr[e, u])
                bits = [a for a in range(CLUSTER) if m >> (4 * a + u) & 1]
                if not bits:
                    assert j == CLUSTER * c  # an empty slot: the cluster's first particle
                for a in bits:
                    out.append((CLUSTER * c + a, j, e < cl.start[c] + cl.local[c]))
    return out


def check_against_brute_force(xs, cl, h):
    """Every pair within h + h once inside a block of the half list (under its first particle, local)
    and from both sides across blocks (not local), nothing else; the particles of each cluster in order."""
    n = len(xs)
    d2 = ((xs[:, None, :] - xs[None, :, :]) ** 2).sum(-1)  # float32, as the list's exact test
    reach = np.float32(np.float32(h) + np.float32(h))
    want = d2 < reach * reach
    np.fill_diagonal(want, False)
    blk = np.arange(n) // (CLUSTER * cl.block)
    got = listed_pairs(cl)
    keys = [(i, j) for i, j, _ in got]
    assert len(keys) == len(set(keys))  # no pair twice
    assert all(i < n and j < n for i, j in keys)  # the last cluster's missing particles: no pairs
    for i, j, local in got:
        assert want[i, j]
        assert local == (blk[i] == blk[j])
        if local:
            assert j > i
    same = want & (blk[:, None] == blk[None, :])
    assert len(got) == int(np.triu(same).sum() + (want & ~same).sum())
    assert cl.pairs == int(want.sum())


@pytest.mark.parametrize("cloud, block", [("random", 1), ("random", 7), ("lattice", 5), ("lattice", 10 ** 6)])
def test_cluster_list_holds_the_half_list_pairs_of_brute_force(cloud, block):
    """Random and lattice clouds (a count not a multiple of four), blocks of 1, 5, 7 clusters and one
    block: the listed pairs are the brute-force pairs within h + h, local ones once, under the earlier
    particle, others from both sides."""
    rng = np.random.default_rng(7)
    h = 0.02
    if cloud == "random":
        x = rng.uniform(0.0, 0.16, size=(601, 3))
    else:
        x = lattice([0, 0, 0], [0.2, 0.14, 0.12], h) + rng.uniform(-0.2, 0.2, (10 * 7 * 6, 3)) * h
        x = x[:-3]
    xs, rows, grid = sorted_rows(x, h)
    cl = ClusterList()
    cl.build(rows, len(xs), h, grid.cell_start, grid.cell_nbr, grid.particle_cell, block)
    check_against_brute_force(xs, cl, h)
    assert 0.0 < cl.lane_use() <= 1.0


def test_rebuilt_lists_sized_from_the_last_equal_brute_force():
    """Rebuilds sized from the last build's chunks (small moves), and a compression that overflows those
    slices (filled again): every list equals the brute-force one."""
    rng = np.random.default_rng(3)
    h = 0.02
    x = rng.uniform(0.0, 0.3, size=(3000, 3)).astype(np.float32)
    cl = ClusterList()
    for k in range(3):
        xs, rows, grid = sorted_rows(x, h)
        cl.build(rows, len(xs), h, grid.cell_start, grid.cell_nbr, grid.particle_cell, 40)
        check_against_brute_force(xs, cl, h)
        x = xs + rng.uniform(-0.3, 0.3, size=xs.shape).astype(np.float32) * h
    assert cl.recounts == 1  # the first build counted, the next two were sized from the last
    xs, rows, grid = sorted_rows(x * np.float32(0.6), h)  # ~4.6 times the neighbours
    cl.build(rows, len(xs), h, grid.cell_start, grid.cell_nbr, grid.particle_cell, 40)
    check_against_brute_force(xs, cl, h)
    assert cl.recounts == 2  # filled again


def test_octant_order_sorts_each_cell_by_octant_and_keeps_the_cells():
    rng = np.random.default_rng(2)
    x = rng.uniform(-0.1, 0.1, size=(2000, 3)).astype(np.float32)
    size = 0.04
    grid = build_grid(x, size)
    order = grid.order.copy()
    octant_order(x, order, grid.cell_start, size)
    octant = ((np.floor(x * (2.0 / size)).astype(np.int64) & 1) * [1, 2, 4]).sum(1)
    for c in range(len(grid.cell_start) - 1):
        a, b = grid.cell_start[c], grid.cell_start[c + 1]
        np.testing.assert_array_equal(np.sort(order[a:b]), np.sort(grid.order[a:b]))  # the same particles
        assert np.all(np.diff(octant[order[a:b]]) >= 0)
        for o in range(8):  # stable: one octant's particles keep their order
            mine = grid.order[a:b][octant[grid.order[a:b]] == o]
            np.testing.assert_array_equal(order[a:b][octant[order[a:b]] == o], mine)


def _kernel(x, h):
    """w(q), -w'(q) / q and x_i - x_j of every pair, float64 (the cubic spline, q = r / h)."""
    d = x[:, None, :] - x[None, :, :]
    q = np.sqrt((d ** 2).sum(-1)) / h
    t = np.clip(2.0 - q, 0.0, None)
    s = np.clip(1.0 - q, 0.0, None)
    w = 0.25 * t ** 3 - s ** 3
    with np.errstate(invalid="ignore", divide="ignore"):
        slope = np.where(q > 0.0, (0.75 * t ** 2 - 3.0 * s ** 2) / q, 3.0)
    return w, slope, d


def test_cluster_passes_equal_brute_force_over_many_blocks():
    """One level, a jittered lattice over many blocks of 8 clusters (pairs inside a block visited once,
    across blocks from both sides): the density of eq. 1, the correction of eq. 5 with the tensile term
    of eq. 7, and XSPH of eq. 6, each against its sum over every pair in float64."""
    rng = np.random.default_rng(5)
    dx = h = 0.02
    x = lattice([0.0, 0.0, 0.0], [0.26, 0.22, 0.18], dx)
    x = x[:-1] + rng.uniform(-0.2, 0.2, size=(len(x) - 1, 3)) * dx  # not a multiple of four
    model = pbf.make_model(dx=dx, rho0=1000.0, iterations=1, tolerance=0.005, beta=0.6, xsph=0.02, kappa=0.3,
                           gravity=np.zeros(3), boxes=np.zeros((0, 2, 3)), friction=0.0, cfl=0.5, max_dt=0.002,
                           speed_limit=100.0)
    xs, rows, grid = sorted_rows(x, h)
    n = len(xs)
    block = 8
    cl = ClusterList()
    cl.build(rows, n, h, grid.cell_start, grid.cell_nbr, grid.particle_cell, block)
    blocks = -(-clusters_of(n) // block)
    assert blocks > 20
    mass = float(model.level_mass[0])
    x64 = xs.astype(np.float64)
    w, slope, d = _kernel(x64, h)
    near = ((d ** 2).sum(-1) < (2 * h) ** 2)

    # density, eq. 1 (no walls), and the multipliers of eq. 4 with the clamp of eq. 7
    rho = np.zeros(rows.shape[0], dtype=np.float32)
    err, top = np.empty(blocks), np.empty(blocks)
    lam_max = float(model.attraction_limit(0.002)[0])
    passes.constraint(rows, n, cl.start, cl.count, cl.local, cl.nbr, cl.mask, h, float(model.level_k[0]), lam_max,
                      pbf._SIGMA * mass, model.rho0, model.beta, np.ones(n, dtype=np.float32), block, rho, err, top)
    rho_ref = mass / (np.pi * h ** 3) * (w * near).sum(1)
    # rtol 1e-5: the float32 sum of about 30 terms, 6e-8 relative rounding each, and the reciprocal square
    # root refined by one Newton step (about 1e-7 relative)
    assert_allclose(rho[:n], rho_ref, rtol=1e-5, atol=0.0)
    lam_ref = np.minimum(-model.beta * model.level_k[0] * (rho_ref / model.rho0 - 1.0), lam_max)
    assert_allclose(rows[:n, 3], lam_ref, rtol=1e-3, atol=1e-3 * np.abs(lam_ref).max())  # C from rho: 1e-5 / C
    assert_allclose(err.sum(), np.maximum(rho_ref / model.rho0 - 1.0, 0.0).sum(), rtol=1e-3)

    # correction, eq. 5 with the tensile term g w / w(1) of eq. 7, half the multipliers (the lattice's
    # closest pairs would otherwise ask for more than the clamp of MAX_MOVE h); no walls
    rows[:n, 3] *= np.float32(0.5)
    lam = rows[:n, 3].astype(np.float64)
    cohesion = float(model.cohesion(0.002)[0])
    x_out = passes.cluster_rows(n)
    v = np.zeros((n, 3), dtype=np.float32)
    no_boxes = np.zeros((0, 2, 3), dtype=np.float32)
    passes.correct(rows, n, cl.start, cl.count, cl.local, cl.nbr, cl.mask, h, pbf._SIGMA * mass / model.rho0,
                   cohesion, np.full(n, -1, np.int32), np.zeros((0, 3), np.float32), pbf.WALL_FACTOR, pbf.MAX_MOVE,
                   no_boxes, model.cell_size, False, 500.0, block, x_out, v)
    coef = lam[:, None] + lam[None, :] + 4.0 * cohesion * w  # 1 / w(1) = 4
    # grad_i W_ij = -sigma / h^5 s(q) (x_i - x_j)
    pair = -(mass / model.rho0 / (np.pi * h ** 5) * coef * slope * near)[..., None] * d
    want = pair.sum(1)
    biggest = np.abs(pair).max()
    assert np.abs(want).max() > 0.01 * dx and np.linalg.norm(want, axis=1).max() < pbf.MAX_MOVE * h
    # each pair's term in float32 within about 1e-6 of itself (the slope from a refined reciprocal square
    # root), ~30 pairs: 3e-5 of the largest pair term; positions are float32 (3e-8 m at 0.26 m)
    assert_allclose(x_out[:n, :3], x64 + want, rtol=0.0, atol=3e-5 * biggest + 3e-8)
    assert_allclose(v, (x_out[:n, :3] - xs) * 500.0, rtol=1e-5, atol=1e-5)  # v += dx / dt

    # XSPH, eq. 6: v_i + c sum_j m / rho_j (v_j - v_i) W_ij, scattered densities and velocities
    rho_j = rng.uniform(900.0, 1100.0, rows.shape[0]).astype(np.float32)
    vel = rng.normal(0.0, 1.0, (n, 3)).astype(np.float32)
    vq = passes.cluster_rows(n)
    velocity_rows(vel, rho_j, vq)
    c = 0.3
    v_out = np.empty_like(vel)
    share = passes.cluster_rows(n)
    passes.xsph_pass(xs, rows, vq, n, cl.start, cl.count, cl.local, cl.nbr, cl.mask, h, c * pbf._SIGMA * mass, False,
                     np.zeros(n, np.uint8), model.level_h, model.boxes, model.box_friction, 500.0, block, share, v_out,
                     np.zeros_like(vel))
    v64 = vel.astype(np.float64)
    inv = 1.0 / rho_j[:n].astype(np.float64)
    kern = w * near
    sums = kern @ (inv[:, None] * v64) - (kern @ inv)[:, None] * v64
    want_v = v64 + c * mass / (np.pi * h ** 3) * sums
    # float32 sums of ~30 terms of size c m / rho W |v| ~ 0.03 m/s (6e-8 relative each) and float32
    # velocities (|v| ~ 3, 2.4e-7 m/s): 1e-6 m/s with margin, as for the particle list's pass
    assert_allclose(v_out, want_v, rtol=1e-6, atol=1e-6)
    assert np.abs(v_out - vel).max() > 1e-3


def test_cluster_pair_bakes_equal_with_one_and_two_threads():
    """A PBF dam break over cluster pairs (one level, surface tension, walls) stepped with one thread and
    with two: the same bits (a fixed partition into blocks, each walked in order by one thread)."""
    box = np.array([[[0.0, 0.0, 0.0], [0.3, 0.12, 0.3]]])
    x = lattice([0, 0, 0], [0.12, 0.12, 0.2], 0.02)
    runs = []
    threads = numba.get_num_threads()
    try:
        for k in (1, min(2, numba.config.NUMBA_NUM_THREADS)):
            numba.set_num_threads(k)
            model = pbf.make_model(dx=0.02, rho0=1000.0, iterations=4, tolerance=0.005, beta=0.6, xsph=1.0,
                                   kappa=0.3, gravity=np.array([0.0, 0.0, -9.81]), boxes=box, friction=0.0, cfl=0.5,
                                   max_dt=0.002, speed_limit=100.0)
            from engine.core.particles import Particles
            s = pbf.PBFSolver(model, Particles.create(x, np.zeros_like(x), 1000.0), pairs="clusters")
            s._cluster_block = 4  # many blocks, so that each thread walks several
            s._block_err = np.zeros(-(-clusters_of(len(x)) // 4))
            s._block_max = np.zeros_like(s._block_err)
            for _ in range(30):
                s.step(s.stable_dt())
            order = np.argsort(s.particles.id)
            runs.append((s.particles.x[order].copy(), s.particles.v[order].copy()))
    finally:
        numba.set_num_threads(threads)
    np.testing.assert_array_equal(runs[0][0], runs[1][0])
    np.testing.assert_array_equal(runs[0][1], runs[1][1])
