"""Neighbour search: equal to brute force, exactly, on random and lattice clouds."""

import numpy as np
import pytest

import naive
from engine.core import cell_grid, neighbour_list
from helpers import check_half_list_row


def brute_force_pairs(x, radius):
    d2 = ((x[:, None, :].astype(np.float64) - x[None, :, :]) ** 2).sum(-1)
    i, j = np.nonzero(d2 < radius * radius)
    out = np.stack([i, j], axis=1)
    return out[np.lexsort((out[:, 1], out[:, 0]))]


def _check(x, radius, cell_size=None):
    grid = cell_grid.build_grid(x, cell_size or radius)
    xs = x[grid.order]
    got = naive.neighbour_pairs(xs, grid, radius)
    # map sorted indices back to input indices, then compare with brute force on the input
    got = grid.order[got]
    got = got[np.lexsort((got[:, 1], got[:, 0]))]
    want = brute_force_pairs(x, radius)
    np.testing.assert_array_equal(got, want)
    return grid


@pytest.mark.parametrize("seed", [0, 1, 2])
def test_random_cloud_equals_brute_force(seed):
    rng = np.random.default_rng(seed)
    x = rng.uniform(-1.0, 1.0, (1500, 3)).astype(np.float32)
    _check(x, 0.12)


def test_lattice_equals_brute_force():
    """Lattice points sit exactly on cell faces and at exactly the radius: the edge cases."""
    g = np.arange(-6, 6) * 0.1
    x = np.stack(np.meshgrid(g, g, g, indexing="ij"), -1).reshape(-1, 3).astype(np.float32)
    _check(x, 0.2)
    _check(x, 0.1000001, cell_size=0.1000001)


def test_unbounded_far_apart_clusters():
    """Two clusters kilometres apart: no dense grid, exact pairs."""
    rng = np.random.default_rng(5)
    a = rng.uniform(0, 0.3, (300, 3))
    b = rng.uniform(0, 0.3, (300, 3)) + np.array([-2500.0, 1800.0, 900.0])
    x = np.concatenate([a, b]).astype(np.float64)
    grid = _check(x, 0.05)
    assert len(grid.cell_key) < 2 * 300  # memory follows the particles


def test_grid_built_from_the_last_one_equals_the_grid_built_alone():
    """Each grid built from the one before (the substep's path: the particles in the last grid's
    order, moved, cells emptied and occupied, clusters at the clamped edge of the key range) sorts
    the particles into the same order and cells, with the same neighbour table, as a grid built alone
    (a stable sort of the keys, every cell looked up); so does one after a jump that occupies mostly
    new cells, one from particles not in the last grid's order, and one whose last grid had another
    cell size (not used)."""
    rng = np.random.default_rng(8)
    x = np.concatenate([rng.uniform(-0.15, 0.15, (1500, 3)),  # 7 particles a cell, as in a liquid
                        rng.uniform(-0.02, 0.02, (50, 3)) + 1e7,      # beyond 2^20 cells: clamped
                        rng.uniform(-0.02, 0.02, (50, 3)) - 1e7])
    v = rng.normal(0.0, 1.0, x.shape)
    last = None
    fresh_cells = 0
    for step in range(10):
        if last is not None and step != 7:  # step 7: the particles of the last grid, in another order
            x, v = x[last.order], v[last.order]
        x = x + 0.004 * v if step != 5 else x + 0.73  # step 5: almost every cell is new
        grid = cell_grid.build_grid(x, 0.05, previous=last)
        alone = cell_grid.build_grid(x, 0.05)
        for name in ("order", "cell_key", "cell_start", "cell_nbr", "particle_cell"):
            np.testing.assert_array_equal(getattr(grid, name), getattr(alone, name), err_msg=f"{name}, step {step}")
        if last is not None:
            fresh_cells += np.setdiff1d(grid.cell_key, last.cell_key).size
        last = grid
    assert fresh_cells > 50  # the carried tables had new cells to link in
    other = cell_grid.build_grid(x, 0.07, previous=last)
    np.testing.assert_array_equal(other.cell_nbr, cell_grid.build_grid(x, 0.07).cell_nbr)
    np.testing.assert_array_equal(other.order, cell_grid.build_grid(x, 0.07).order)


def test_morton_keys_sorted_and_cells_contiguous():
    rng = np.random.default_rng(3)
    x = rng.normal(size=(2000, 3)).astype(np.float32)
    grid = cell_grid.build_grid(x, 0.3)
    assert np.all(grid.cell_key[1:] > grid.cell_key[:-1])
    assert grid.cell_start[0] == 0 and grid.cell_start[-1] == len(x)
    counts = np.diff(grid.cell_start)
    assert np.all(counts > 0)
    np.testing.assert_array_equal(np.repeat(np.arange(len(counts)), counts), grid.particle_cell)
    # the cell of each particle contains it
    xs = x[grid.order]
    cell_of = np.floor(xs / 0.3).astype(np.int64)
    for c in range(len(counts)):
        members = cell_of[grid.cell_start[c]:grid.cell_start[c + 1]]
        assert np.all(members == members[0])


def test_bad_input_rejected():
    with pytest.raises(ValueError, match="shape"):
        cell_grid.build_grid(np.zeros((4, 2)), 0.1)
    with pytest.raises(ValueError, match="positive"):
        cell_grid.build_grid(np.zeros((4, 3)), 0.0)


@pytest.mark.parametrize("block", [1, 16])
def test_neighbour_list_equals_brute_force_and_pads_with_self(block):
    """The compact list (exactly the brute-force pairs, mixed smoothing lengths) and its padding:
    each range is filled to a multiple of ``block`` with the particle's own index."""
    rng = np.random.default_rng(7)
    x = rng.uniform(-0.5, 0.5, (2000, 3)).astype(np.float32)
    h = rng.choice(np.float32([0.03, 0.045]), size=2000)
    grid = cell_grid.build_grid(x, 2.0 * float(h.max()))
    xs, hs = x[grid.order], h[grid.order]
    nl = neighbour_list.NeighbourList(block=block)
    nl.build(xs, hs, grid._replace(order=None))
    d2 = ((xs[:, None, :].astype(np.float64) - xs[None, :, :]) ** 2).sum(-1)
    reach = hs[:, None].astype(np.float64) + hs[None, :]
    want = d2 < reach * reach
    np.fill_diagonal(want, False)
    for i in range(len(xs)):
        row = nl.nbr[nl.start[i]:nl.start[i] + nl.count[i]]
        np.testing.assert_array_equal(np.sort(row), np.nonzero(want[i])[0])
        padded = -(-int(nl.count[i]) // block) * block
        np.testing.assert_array_equal(nl.nbr[nl.start[i] + nl.count[i]:nl.start[i] + padded], i)


@pytest.mark.parametrize("cloud, half", [("random", 64), ("random", 700), ("random", 5000), ("liquid", 8)])
def test_half_list_holds_each_pair_of_a_block_once_and_every_pair_across_blocks(cloud, half):
    """A half list over blocks of ``half`` particles (mixed smoothing lengths): the range of i holds
    its neighbours j > i of its own block first (``local[i]`` of them), then every neighbour in
    another block; together with the mirrored pairs of the blocks that is exactly the brute-force
    set. Built after a counting pass, then again sized from the last counts (the same particles).
    The "liquid" case (a jittered lattice, about 30 neighbours, blocks of 8) gives most particles
    more neighbours in other blocks than one 16-lane store holds."""
    rng = np.random.default_rng(11)
    if cloud == "random":
        x = rng.uniform(-0.5, 0.5, (2000, 3)).astype(np.float32)
        h = rng.choice(np.float32([0.03, 0.045]), size=2000)
    else:
        dx = 0.025
        x = (np.stack(np.meshgrid(*[np.arange(12) * dx] * 3, indexing="ij"), -1).reshape(-1, 3)
             + rng.uniform(-0.1 * dx, 0.1 * dx, (12 ** 3, 3))).astype(np.float32)
        h = rng.choice(np.float32([dx, 1.2 * dx]), size=len(x))
    grid = cell_grid.build_grid(x, 2.0 * float(h.max()))
    xs, hs = x[grid.order], h[grid.order]
    d2 = ((xs[:, None, :].astype(np.float64) - xs[None, :, :]) ** 2).sum(-1)
    reach = hs[:, None].astype(np.float64) + hs[None, :]
    want = d2 < reach * reach
    np.fill_diagonal(want, False)
    blk = np.arange(len(xs)) // half
    nl = neighbour_list.NeighbourList(half=half)
    for sized_from_last in (False, True):
        g = grid._replace(order=np.arange(len(xs))) if sized_from_last else grid._replace(order=None)
        nl.build(xs, hs, g)
        found = np.zeros_like(want)
        for i in range(len(xs)):
            row = check_half_list_row(nl, i, want, blk)
            found[i, row] = True
            found[row[:nl.local[i]], i] = True
        np.testing.assert_array_equal(found, want)
        assert nl.pairs == int(want.sum())
    assert nl.recounts == 1  # the second build was sized from the first one's counts
    if cloud == "liquid":
        assert np.mean(nl.count - nl.local > 16) > 0.5


def test_neighbour_list_rejects_a_bad_half_block():
    with pytest.raises(ValueError):
        neighbour_list.NeighbourList(half=-1)


@pytest.mark.parametrize("guess", ["low", "exact", "high"])
def test_neighbour_list_from_a_count_guess_equals_the_counted_one(guess):
    """A count guess (the hybrid's, for a particle set that is not a reordering of the last) only
    sizes the list's slices: too low costs a second filling pass, too high some memory; the list is
    the same as the one built after a counting pass (and with one smoothing length given for all
    particles, the same as with one each)."""
    rng = np.random.default_rng(9)
    x = rng.uniform(-0.5, 0.5, (3000, 3)).astype(np.float32)
    h = np.full(3000, 0.04, dtype=np.float32)
    grid = cell_grid.build_grid(x, 0.08)
    xs = x[grid.order]
    counted = neighbour_list.NeighbourList()
    counted.build(xs, h, grid._replace(order=None))
    hint = {"low": np.zeros(3000, dtype=np.int64), "exact": counted.count.astype(np.int64),
            "high": counted.count.astype(np.int64) * 3 + 5}[guess]
    nl = neighbour_list.NeighbourList()
    # one smoothing length given for all builds the same list as one per particle
    nl.build(xs, np.full(1, 0.04, dtype=np.float32), grid._replace(order=None), counts_hint=hint)
    assert nl.recounts == (1 if guess == "low" else 0)
    np.testing.assert_array_equal(nl.count, counted.count)
    for i in range(len(xs)):
        np.testing.assert_array_equal(nl.nbr[nl.start[i]:nl.start[i] + nl.count[i]],
                                      counted.nbr[counted.start[i]:counted.start[i] + counted.count[i]])


def test_neighbour_list_rejects_a_bad_block():
    with pytest.raises(ValueError):
        neighbour_list.NeighbourList(block=0)


@pytest.mark.parametrize("block", [1, 16])
def test_chunk_slices_read_the_last_counts_through_the_new_order(block):
    """A chunk's slice is the sum of its particles' counts (rounded up to ``block``), times the growth,
    plus the pad; with an order, particle i's count is ``counts[order[i]]`` (the last build's counts,
    not copied into the new order), exactly as with the reordered copy."""
    rng = np.random.default_rng(5)
    n = 3000
    cells = 2 * neighbour_list.LIST_CHUNK + 37  # three chunks, the last one short
    cell_start = np.concatenate([[0], np.sort(rng.choice(np.arange(1, n), cells - 1, replace=False)), [n]])
    counts = rng.integers(0, 40, n).astype(np.uint16)
    order = rng.permutation(n).astype(np.int64)
    chunks = 3
    got_base, got_cap = np.empty(chunks, np.int64), np.empty(chunks, np.int64)
    total = neighbour_list._chunk_slices(cell_start, counts, order, block, 1.05, 8, got_base, got_cap)
    want_base, want_cap = np.empty(chunks, np.int64), np.empty(chunks, np.int64)
    copied = counts[order].astype(np.int64)
    assert total == neighbour_list._chunk_slices(cell_start, copied, neighbour_list._IDENTITY, block, 1.05, 8,
                                                 want_base,
                                            want_cap)
    np.testing.assert_array_equal(got_cap, want_cap)
    np.testing.assert_array_equal(got_base, want_base)
    # the reference by hand: whole cells per chunk
    for b in range(chunks):
        p0 = cell_start[b * neighbour_list.LIST_CHUNK]
        p1 = cell_start[min(cells, (b + 1) * neighbour_list.LIST_CHUNK)]
        c = copied[p0:p1]
        assert got_cap[b] == int(np.sum((c + block - 1) // block * block) * 1.05) + 8
    # the order matters here: the counts in their old order give other slices
    neighbour_list._chunk_slices(cell_start, counts, neighbour_list._IDENTITY, block, 1.05, 8, want_base, want_cap)
    assert not np.array_equal(got_cap, want_cap)
