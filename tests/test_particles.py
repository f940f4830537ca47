"""Particle storage: growth, removal, compaction and reordering keep every channel with its id."""

import numpy as np
import pytest
from numpy.testing import assert_array_equal

from engine.core import particles as particles_mod
from engine.core.particles import Particles


def _check_against_reference(pt: Particles, ref: dict) -> None:
    """Every particle's channels equal the brute-force reference (a dict id -> row of values)."""
    assert len(pt) == len(ref)
    assert len(np.unique(pt.id)) == len(pt)
    for i, pid in enumerate(pt.id):
        row = ref[int(pid)]
        assert_array_equal(pt.x[i], row["x"])
        assert_array_equal(pt.v[i], row["v"])
        assert pt.age[i] == row["age"]
        for name, arr in pt.extra.items():
            assert arr[i] == row.get(name, 0.0), name
    assert pt.capacity >= len(pt)


@pytest.mark.parametrize("parallel_take", [particles_mod.PARALLEL_TAKE, 1])
def test_random_operations_match_a_reference(monkeypatch, parallel_take):
    """Adds, removals, permutations and new channels in random order against a dict of rows
    (``parallel_take`` 1: every full reorder through the compiled parallel copy)."""
    monkeypatch.setattr(particles_mod, "MIN_CAPACITY", 16)  # small buffers: many grow and shrink steps
    monkeypatch.setattr(particles_mod, "PARALLEL_TAKE", parallel_take)
    rng = np.random.default_rng(7)
    pt = Particles.create(rng.random((50, 3)), rng.random((50, 3)), 1000.0, capacity=64)
    ref = {int(i): {"x": pt.x[k].copy(), "v": pt.v[k].copy(), "age": np.float32(0.0)} for k, i in enumerate(pt.id)}
    issued = set(ref)
    capacities = {pt.capacity}
    for step in range(300):
        op = rng.integers(4)
        if op == 0:  # add a batch (sometimes large, forcing growth), with a channel value
            k = int(rng.integers(0, 900 if step % 40 == 0 else 30))
            x, v = rng.random((k, 3)).astype(np.float32), rng.random((k, 3)).astype(np.float32)
            age = rng.random(k).astype(np.float32)
            tint = rng.random(k).astype(np.float32)
            ids = pt.add(x, v, age=age, channels={"tint": tint})
            for j, pid in enumerate(ids):
                assert int(pid) not in issued  # ids are never reused
                issued.add(int(pid))
                ref[int(pid)] = {"x": x[j], "v": v[j], "age": age[j], "tint": tint[j]}
        elif op == 1 and len(pt):  # remove a random subset (sometimes almost all: forces a shrink)
            frac = 0.95 if step % 50 == 25 else 0.2
            mask = rng.random(len(pt)) < frac
            gone = pt.id[mask].copy()
            assert pt.remove(mask) == len(gone)
            for pid in gone:
                del ref[int(pid)]
        elif op == 2 and len(pt):  # a grid build's permutation, of every row or of the first ones
            if step % 2:
                pt.reorder(rng.permutation(len(pt)))
            else:
                head = int(rng.integers(0, len(pt) + 1))
                tail = pt.id[head:].copy()
                pt.reorder(rng.permutation(head), head=head)
                np.testing.assert_array_equal(pt.id[head:], tail)  # the other rows stay
        elif op == 3:  # a solver swaps in its own array for x (double buffering)
            pt.x = pt.x.copy()
        capacities.add(pt.capacity)
        _check_against_reference(pt, ref)
    assert max(capacities) > 64 and min(capacities) < 64  # it grew and shrank along the way


def test_growth_is_geometric_and_reuses_spare_rows(monkeypatch):
    monkeypatch.setattr(particles_mod, "MIN_CAPACITY", 16)
    pt = Particles.create(np.zeros((10, 3)), np.zeros((10, 3)), 1000.0, capacity=16)
    base = pt.x.base
    pt.add(np.ones((6, 3)), np.zeros(3))  # fits: written into the spare rows, no copy
    assert pt.x.base is base and pt.capacity == 16
    pt.add(np.ones((1, 3)), np.zeros(3))  # 17 > 16: grows by GROWTH
    assert pt.capacity == int(np.ceil(16 * particles_mod.GROWTH))
    appends = 0
    cap = pt.capacity
    for _ in range(2000):
        pt.add(np.ones((1, 3)), np.zeros(3))
        if pt.capacity != cap:
            appends += 1
            cap = pt.capacity
    # geometric steps: log_1.5(2024 / 24) ~ 11 reallocations for 2000 single appends
    assert appends <= 12


def test_shrinks_below_half_occupancy():
    pt = Particles.create(np.zeros((10000, 3)), np.zeros((10000, 3)), 1000.0)
    big = pt.capacity
    mask = np.zeros(len(pt), bool)
    mask[: 4000] = True
    pt.remove(mask)  # 6000 of 15000 rows used: below half, shrinks to 1.5 * 6000
    assert pt.capacity == 9000 < big
    assert pt.nbytes() == 9000 * (12 * 3 + 4 * 4)


def test_extra_channel_names_are_checked():
    pt = Particles.create(np.zeros((3, 3)), np.zeros((3, 3)), 1000.0)
    pt.add_channel("temperature", 20.0)
    assert_array_equal(pt.extra["temperature"], [20.0, 20.0, 20.0])
    for bad in ("position", "id", "2hot", "a b"):
        with pytest.raises(ValueError):
            pt.add_channel(bad)
    frame = pt.frame_arrays()
    assert set(frame) == {"position", "velocity", "density", "id", "age", "temperature"}


@pytest.mark.parametrize("solver_name", ["PBF", "WCSPH"])
def test_solvers_take_a_changing_particle_count(solver_name):
    """Emit and remove between substeps: the solver resizes its buffers and keeps levels in step."""
    from engine.solvers import pbf, wcsph

    dx = 0.02
    g = np.arange(6) * dx + dx / 2
    x = np.stack(np.meshgrid(g, g, g, indexing="ij"), -1).reshape(-1, 3)
    pt = Particles.create(x, np.zeros_like(x), 1000.0)
    boxes = np.array([[[0, 0, 0], [0.12, 0.12, 0.4]]])
    if solver_name == "PBF":
        model = pbf.make_model(dx=dx, rho0=1000.0, iterations=4, tolerance=0.005, beta=0.6, xsph=0.02,
                               gravity=[0, 0, -9.81], boxes=boxes, cfl=0.5, max_dt=0.002, speed_limit=100.0,
                               spacings=[dx, 2 * dx])
        solver = pbf.PBFSolver(model, pt)
    else:
        model = wcsph.make_model(dx=dx, h_factor=1.2, rho0=1000.0, c0=20.0, alpha=0.02, nu=0.0, gravity=[0, 0, -9.81],
                                 boxes=boxes, cfl=0.3)
        solver = wcsph.WCSPHSolver(model, pt)
    n0 = len(pt)
    for k in range(10):
        new = np.array([[0.06, 0.06, 0.2 + dx * j] for j in range(3)])
        level = 1 if (solver_name == "PBF" and k % 2) else 0
        solver.add_particles(new, [0, 0, -0.5], level=level)
        if k % 3 == 2:
            mask = np.zeros(len(solver.particles), bool)
            mask[::7] = True
            solver.remove_particles(mask)
        solver.step(min(solver.stable_dt(), 0.001))
        assert np.all(np.isfinite(solver.particles.x))
        if solver_name == "PBF":
            assert solver.level.shape[0] == len(solver.particles)
    assert len(solver.particles) != n0
    if solver_name == "PBF":
        # the coarse particles kept their level through the reorders: 5 batches of 3, minus removals
        assert 0 < np.count_nonzero(solver.level == 1) <= 15
        with pytest.raises(ValueError):
            solver.add_particles(new, [0, 0, 0], level=2)
