"""Neighbour search on a Morton-sorted cell grid with 64-bit keys (no dense grid, unbounded).

Alduán, Tena & Otaduy 2015, "Efficient and Robust Position-Based Fluids for VFX", §5: particles are binned
into cubic cells of edge ``cell_size``
(the kernel support, 2h), each cell named by the 64-bit Z-order (Morton) interleave of its three
21-bit integer coordinates. Sorting particles by that key puts the particles of one cell next to
each other in memory and nearby cells near each other. Only occupied cells exist: memory follows
the particles, not the bounding box, so a splash may fly anywhere within +-2^20 cells of the origin
(about 52 km at 5 cm cells); particles beyond that are clamped into the outermost cell.

For every occupied cell the indices of its (up to) 27 occupied neighbour cells are found once in
a hash table of the occupied keys. :class:`NeighbourList` turns the grid into a compact list of
each particle's neighbours (the PBF iterations read it several times per substep);
:func:`neighbour_pairs` is a slow reference for tests.
"""

from __future__ import annotations

from typing import NamedTuple

import numpy as np
from numba import njit, prange

from .vector_ops import LANES, candidate_masks, compress_store, move_lanes, popcount, store_count_up

_BITS = 21
_OFFSET = 1 << (_BITS - 1)
_MAXC = (1 << _BITS) - 1


class CellGrid(NamedTuple):
    """Occupied cells of a sorted particle set.

    Attributes
    ----------
    cell_size : float
        Edge of a cell, metres (>= the interaction radius).
    order : ndarray, shape (N,), int64
        Permutation that sorts particles by cell key (apply it to every particle array).
    cell_key : ndarray, shape (M,), uint64
        Morton key of each occupied cell, ascending.
    cell_start : ndarray, shape (M + 1,), int64
        Particles of cell c are ``cell_start[c]:cell_start[c + 1]`` in sorted order.
    cell_nbr : ndarray, shape (M, 27), int32
        Occupied neighbour cells of each cell (itself included), -1 where empty.
    particle_cell : ndarray, shape (N,), int32
        Cell of each particle, in sorted order.
    """

    cell_size: float
    order: np.ndarray
    cell_key: np.ndarray
    cell_start: np.ndarray
    cell_nbr: np.ndarray
    particle_cell: np.ndarray


@njit(inline="always", cache=True)
def _spread(v):
    """Insert two zero bits between each of the low 21 bits of v (uint64)."""
    v = v & np.uint64(0x1FFFFF)
    v = (v | (v << np.uint64(32))) & np.uint64(0x1F00000000FFFF)
    v = (v | (v << np.uint64(16))) & np.uint64(0x1F0000FF0000FF)
    v = (v | (v << np.uint64(8))) & np.uint64(0x100F00F00F00F00F)
    v = (v | (v << np.uint64(4))) & np.uint64(0x10C30C30C30C30C3)
    v = (v | (v << np.uint64(2))) & np.uint64(0x1249249249249249)
    return v


@njit(inline="always", cache=True)
def _compact(v):
    """Inverse of :func:`_spread`."""
    v = v & np.uint64(0x1249249249249249)
    v = (v ^ (v >> np.uint64(2))) & np.uint64(0x10C30C30C30C30C3)
    v = (v ^ (v >> np.uint64(4))) & np.uint64(0x100F00F00F00F00F)
    v = (v ^ (v >> np.uint64(8))) & np.uint64(0x1F0000FF0000FF)
    v = (v ^ (v >> np.uint64(16))) & np.uint64(0x1F00000000FFFF)
    v = (v ^ (v >> np.uint64(32))) & np.uint64(0x1FFFFF)
    return v


@njit(inline="always", cache=True)
def morton_key(ci, cj, ck):
    """64-bit Morton key of integer cell coordinates already offset into [0, 2^21)."""
    return _spread(np.uint64(ci)) | (_spread(np.uint64(cj)) << np.uint64(1)) | (_spread(np.uint64(ck)) << np.uint64(2))


@njit(inline="always", cache=True)
def _key_coords(key):
    """Integer cell coordinates of a Morton key (inverse of :func:`morton_key`), int64."""
    return (np.int64(_compact(key)), np.int64(_compact(key >> np.uint64(1))),
            np.int64(_compact(key >> np.uint64(2))))


@njit(inline="always", cache=True)
def _cell_coord(xc, inv):
    c = np.int64(np.floor(xc * inv)) + _OFFSET
    if c < 0:
        c = 0
    elif c > _MAXC:
        c = _MAXC
    return c


@njit(inline="always", cache=True)
def cell_coords(x0, x1, x2, inv):
    """Integer coordinates of the cell holding a point, as :func:`build_grid` bins it (``inv`` = 1 / cell
    size), for :func:`find_cell`."""
    return _cell_coord(x0, inv), _cell_coord(x1, inv), _cell_coord(x2, inv)


@njit(inline="always", cache=True)
def find_cell(cell_key, ci, cj, ck):
    """Index of the occupied cell at integer coordinates (ci, cj, ck) in a grid's sorted ``cell_key``, or
    -1 (empty, or outside the key range): a binary search, for points that are not the grid's particles."""
    if ci < 0 or cj < 0 or ck < 0 or ci > _MAXC or cj > _MAXC or ck > _MAXC:
        return -1
    key = morton_key(ci, cj, ck)
    c = np.searchsorted(cell_key, key)
    if c < cell_key.shape[0] and cell_key[c] == key:
        return c
    return -1


@njit(inline="always", cache=True)
def around_cell(cell_key, ci, cj, ck, q):
    """:func:`find_cell` of the q-th (0 to 26) of the 27 cells around and including (ci, cj, ck)."""
    return find_cell(cell_key, ci + q // 9 - 1, cj + (q // 3) % 3 - 1, ck + q % 3 - 1)


@njit(parallel=True, cache=True)
def _keys(x, inv, out):
    for i in prange(x.shape[0]):
        out[i] = morton_key(_cell_coord(x[i, 0], inv), _cell_coord(x[i, 1], inv), _cell_coord(x[i, 2], inv))


@njit(cache=True)
def _cells_from_sorted(skeys, cell_key, cell_start, particle_cell):
    m = 0
    n = skeys.shape[0]
    for i in range(n):
        if i == 0 or skeys[i] != skeys[i - 1]:
            cell_key[m] = skeys[i]
            cell_start[m] = i
            m += 1
        particle_cell[i] = m - 1
    cell_start[m] = n
    return m


_HASH_MUL = np.uint64(0x9E3779B97F4A7C15)  # Fibonacci hashing: 2^64 / golden ratio


@njit(cache=True)
def _hash_cells(cell_key, bits, table):
    """Open-addressing hash table (linear probing) from a cell's key to its index; -1 is empty."""
    shift = np.uint64(64 - bits)
    mask = table.shape[0] - 1
    for c in range(cell_key.shape[0]):
        slot = np.int64((cell_key[c] * _HASH_MUL) >> shift)
        while table[slot] >= 0:
            slot = (slot + 1) & mask
        table[slot] = c


@njit(inline="always", cache=True)
def _lookup(cell_key, table, shift, mask, key):
    slot = np.int64((key * _HASH_MUL) >> shift)
    while True:
        c = table[slot]
        if c < 0:
            return -1
        if cell_key[c] == key:
            return c
        slot = (slot + 1) & mask


@njit(parallel=True, cache=True)
def _neighbour_cells(cell_key, table, bits, out):
    """The (up to) 27 occupied neighbour cells of every cell, found in the hash table of occupied keys
    (a few probes each, against 13 dependent reads of a binary search over the sorted keys)."""
    shift = np.uint64(64 - bits)
    mask = table.shape[0] - 1
    for c in prange(cell_key.shape[0]):
        key = cell_key[c]
        ci, cj, ck = _key_coords(key)
        n = 0
        for di in range(-1, 2):
            for dj in range(-1, 2):
                for dk in range(-1, 2):
                    a, b, d = ci + di, cj + dj, ck + dk
                    if a < 0 or b < 0 or d < 0 or a > _MAXC or b > _MAXC or d > _MAXC:
                        out[c, n] = -1
                    else:
                        out[c, n] = _lookup(cell_key, table, shift, mask, morton_key(a, b, d))
                    n += 1


@njit(cache=True)
def _match_cells(old_key, new_key, new_to_old, old_to_new):
    """Index of each new cell among the old ones and back (-1 where a cell is only in one set): a merge
    of the two sorted key arrays. Returns the number of new cells."""
    old_to_new[:] = -1
    a = 0
    fresh = 0
    for c in range(new_key.shape[0]):
        k = new_key[c]
        while a < old_key.shape[0] and old_key[a] < k:
            a += 1
        if a < old_key.shape[0] and old_key[a] == k:
            new_to_old[c] = a
            old_to_new[a] = c
        else:
            new_to_old[c] = -1
            fresh += 1
    return fresh


@njit(parallel=True, cache=True)
def _carry_neighbour_cells(new_to_old, old_to_new, old_nbr, out):
    """Rows of the cells that were occupied before: the old row with old indices mapped to new ones (a
    cell emptied since maps to -1). A cell occupied since is missing from them: see
    :func:`_link_fresh_cells`."""
    for c in prange(new_to_old.shape[0]):
        o = new_to_old[c]
        if o < 0:
            continue
        for q in range(27):
            nc = old_nbr[o, q]
            out[c, q] = old_to_new[nc] if nc >= 0 else -1


@njit(cache=True)
def _link_fresh_cells(cell_key, new_to_old, out):
    """Rows of the cells occupied since the old grid, searched in the sorted keys, and their entry in
    the rows of their neighbours (the neighbour q of a cell has it as its neighbour 26 - q)."""
    for c in range(cell_key.shape[0]):
        if new_to_old[c] >= 0:
            continue
        key = cell_key[c]
        ci, cj, ck = _key_coords(key)
        for q in range(27):
            nc = around_cell(cell_key, ci, cj, ck, q)
            out[c, q] = nc
            if nc >= 0:
                out[nc, 26 - q] = c


def _carries(previous: CellGrid | None, cell_size: float) -> bool:
    """Whether a grid can start from ``previous``: one of the same cell size, with its neighbour table."""
    return previous is not None and previous.cell_size == cell_size and previous.cell_nbr is not None


def _neighbour_table(cell_key: np.ndarray, previous: CellGrid | None, cell_size: float) -> np.ndarray:
    """The 27 neighbour cells of every cell (:attr:`CellGrid.cell_nbr`). With the grid of the same cell
    size built last substep, the table is carried over from it: the occupied cells change little
    between substeps (in the 97,336-particle dam break of ``bench/bench_blender.py``, 67 of 12,900 a
    substep), so only the new cells are searched. Otherwise every cell's neighbours are looked up in
    a hash table of the occupied keys."""
    m = cell_key.shape[0]
    cell_nbr = np.empty((m, 27), dtype=np.int32)
    if _carries(previous, cell_size):
        new_to_old = np.empty(m, dtype=np.int32)
        old_to_new = np.empty(previous.cell_key.shape[0], dtype=np.int32)
        fresh = _match_cells(previous.cell_key, cell_key, new_to_old, old_to_new)
        if fresh * 8 <= m:  # else the hash table's lookups of every cell cost less than the searches
            _carry_neighbour_cells(new_to_old, old_to_new, previous.cell_nbr, cell_nbr)
            _link_fresh_cells(cell_key, new_to_old, cell_nbr)
            return cell_nbr
    bits = max(4, int(m).bit_length() + 1)  # table at least twice the number of cells: short probe runs
    table = np.full(1 << bits, -1, dtype=np.int32)
    _hash_cells(cell_key, bits, table)
    _neighbour_cells(cell_key, table, bits, cell_nbr)
    return cell_nbr


@njit(parallel=True, cache=True)
def _cells_from_previous(keys, prev_key, prev_start, prev_nbr, slot):
    """slot[i] = the index in the previous grid of the cell with particle i's key, looked for in the
    cell i was in (``prev_start``: the particles are in the previous grid's order) and its 26
    neighbours, else searched in the sorted keys; -1 where no previous cell has it."""
    m = prev_key.shape[0]
    for c in prange(m):
        for i in range(prev_start[c], prev_start[c + 1]):
            k = keys[i]
            s = -1
            if k == prev_key[c]:
                s = c
            else:
                for q in range(27):
                    nc = prev_nbr[c, q]
                    if nc >= 0 and prev_key[nc] == k:
                        s = nc
                        break
                if s < 0:  # moved farther than a cell, or into a cell empty before
                    a = np.searchsorted(prev_key, k)
                    if a < m and prev_key[a] == k:
                        s = a
            slot[i] = s


@njit(cache=True)
def _sort_into_cells(keys, prev_key, slot,
                     # outputs
                     order, cell_key, cell_start, particle_cell):
    """Counting sort of the particles by cell, given ``slot`` of :func:`_cells_from_previous`: the
    same order as a stable sort of ``keys``. The cells are the previous grid's and the keys of the
    particles in none of them, merged in key order (the empty ones dropped). Returns the number of
    cells; ``slot`` is overwritten."""
    n = keys.shape[0]
    mo = prev_key.shape[0]
    lost = 0
    for i in range(n):
        lost += slot[i] < 0
    fresh = np.empty(lost, dtype=np.uint64)
    t = 0
    for i in range(n):
        if slot[i] < 0:
            fresh[t] = keys[i]
            t += 1
    fresh = np.unique(fresh)
    mf = fresh.shape[0]
    # every key, previous or new, in ascending order: its rank
    rank_key = np.empty(mo + mf, dtype=np.uint64)
    old_rank = np.empty(mo, dtype=np.int64)
    fresh_rank = np.empty(mf, dtype=np.int64)
    a = 0
    b = 0
    for r in range(mo + mf):
        if b >= mf or (a < mo and prev_key[a] < fresh[b]):
            old_rank[a] = r
            rank_key[r] = prev_key[a]
            a += 1
        else:
            fresh_rank[b] = r
            rank_key[r] = fresh[b]
            b += 1
    fill = np.zeros(mo + mf, dtype=np.int64)
    for i in range(n):
        s = slot[i]
        r = old_rank[s] if s >= 0 else fresh_rank[np.searchsorted(fresh, keys[i])]
        slot[i] = r
        fill[r] += 1
    # the occupied ranks are the cells; fill[r] becomes the next free place of rank r
    m = 0
    at = 0
    rank_cell = np.empty(mo + mf, dtype=np.int32)
    for r in range(mo + mf):
        k = fill[r]
        rank_cell[r] = m
        if k > 0:
            cell_key[m] = rank_key[r]
            cell_start[m] = at
            m += 1
        fill[r] = at
        at += k
    cell_start[m] = n
    for i in range(n):
        r = slot[i]
        p = fill[r]
        fill[r] = p + 1
        order[p] = i
        particle_cell[p] = rank_cell[r]
    return m


def build_grid(x: np.ndarray, cell_size: float, previous: CellGrid | None = None) -> CellGrid:
    """Bin and sort particles.

    Parameters
    ----------
    x : ndarray, shape (N, 3), float32 or float64, metres
    cell_size : float
        Cell edge in metres; at least the interaction radius.
    previous : CellGrid, optional
        The grid built last, of any particles (the result is the same). With the same cell size, its
        neighbour table is carried over (see :func:`_neighbour_table`), and for as many particles as
        it sorted, in its order (a substep's particles after :meth:`Particles.reorder`), the particles
        are sorted into its cells: a particle is looked for in its last cell and that cell's
        neighbours, and a counting sort over the cells replaces the sort of the keys
        (:func:`_sort_into_cells`). In the 97,336-particle dam break of ``bench/bench_blender.py``, 11 %
        of the particles change cells in a substep; the grid took 1.4 ms to sort them (two threads),
        0.9 ms now.

    Returns
    -------
    CellGrid
        ``order`` sorts ``x``; all other arrays refer to the sorted order. The caller applies
        ``order`` to every particle array (see :meth:`engine.particles.Particles.reorder`).
    """
    if x.ndim != 2 or x.shape[1] != 3:
        raise ValueError(f"positions must have shape (N, 3), got {x.shape}")
    if not cell_size > 0:
        raise ValueError(f"cell_size must be positive, got {cell_size}")
    n = x.shape[0]
    keys = np.empty(n, dtype=np.uint64)
    _keys(x, 1.0 / cell_size, keys)
    cell_key = np.empty(n, dtype=np.uint64)
    cell_start = np.empty(n + 1, dtype=np.int64)
    particle_cell = np.empty(n, dtype=np.int32)
    if _carries(previous, float(cell_size)) and previous.cell_start[-1] == n:
        slot = np.empty(n, dtype=np.int64)
        _cells_from_previous(keys, previous.cell_key, previous.cell_start, previous.cell_nbr, slot)
        order = np.empty(n, dtype=np.int64)
        m = _sort_into_cells(keys, previous.cell_key, slot, order, cell_key, cell_start, particle_cell)
    else:
        order = np.argsort(keys, kind="stable")
        m = _cells_from_sorted(keys[order], cell_key, cell_start, particle_cell)
    cell_key = cell_key[:m].copy()
    cell_start = cell_start[:m + 1].copy()
    cell_nbr = _neighbour_table(cell_key, previous, float(cell_size))
    return CellGrid(float(cell_size), order, cell_key, cell_start, cell_nbr, particle_cell)


#: Cells per task of the neighbour-list kernels (each task gathers its cells' candidates once).
LIST_CHUNK = 32

#: Neighbours per block of a padded :class:`NeighbourList` walked by the PBF kernels: 16 float32 lanes
#: fill one AVX-512 register (two AVX2 ones). A compile-time constant, so the block loop unrolls.
NBR_BLOCK = 16


@njit(inline="always", cache=True)
def _first_block_start(c, cell_start, half):
    """Start of the block of ``half`` particles holding cell c's last particle (0 for a full list)."""
    return ((cell_start[c + 1] - 1) // half) * half if half > 0 else 0


@njit(inline="always", cache=True)
def _cell_wanted(nc, c, cell_start, half, first):
    """Whether neighbour cell nc of cell c gives candidates: it exists, and for a half list (``half`` > 0)
    it is not an earlier cell all of whose particles lie in the block starting at ``first`` or later
    (only a neighbour in another block would be listed from it; see :func:`_first_block_start`)."""
    return nc >= 0 and not (half > 0 and nc < c and cell_start[nc] >= first)


@njit(inline="always", cache=True)
def gather_candidates(c, x, hsup, cell_start, cell_nbr, half, cx, cy, cz, ch, ci):
    """Copy the particles of cell c's 27 neighbour cells into contiguous buffers; returns their count.

    ``x`` (N, 3) and ``hsup`` (N,) are in the grid's sorted order; the buffers ``cx, cy, cz, ch``
    (float32) and ``ci`` (int32, the particles' sorted indices) hold at least :func:`chunk_width` entries.

    For a half list (``half`` > 0) an earlier cell (whose particles all come before cell c's) is left
    out unless it reaches into an earlier block than the last of cell c's particles: only a
    neighbour in another block would be listed from it.
    """
    first = _first_block_start(c, cell_start, half)
    k = 0
    for q in range(27):
        nc = cell_nbr[c, q]
        if not _cell_wanted(nc, c, cell_start, half, first):
            continue
        for j in range(cell_start[nc], cell_start[nc + 1]):
            cx[k] = x[j, 0]
            cy[k] = x[j, 1]
            cz[k] = x[j, 2]
            ch[k] = hsup[j]
            ci[k] = j
            k += 1
    return k


@njit(parallel=True, cache=True)
def _candidate_rows(x, hsup,
                    # outputs
                    rows):
    """rows[0:3, i] = x_i, rows[3, i] = hsup_i, float32, one contiguous row per value (``rows`` (4, N +
    :data:`LANES`); the last LANES columns are only read, never used, by :func:`gather_rows`). A
    ``hsup`` of one entry is every particle's."""
    n = x.shape[0]
    one = hsup.shape[0] == 1
    for i in prange(n):
        rows[0, i] = np.float32(x[i, 0])
        rows[1, i] = np.float32(x[i, 1])
        rows[2, i] = np.float32(x[i, 2])
        rows[3, i] = np.float32(hsup[0] if one else hsup[i])
    for i in range(n, rows.shape[1]):
        for k in range(4):
            rows[k, i] = np.inf


@njit(inline="always", cache=True)
def _row_of(rows, i):
    """Position and half support of particle i from the flattened rows of :func:`_candidate_rows`."""
    stride = rows.shape[0] // 4
    return rows[i], rows[stride + i], rows[2 * stride + i], rows[3 * stride + i]


@njit(inline="always", cache=True)
def gather_rows(c, rows, cell_start, cell_nbr, half, cx, cy, cz, ch, ci):
    """:func:`gather_candidates` from the rows of :func:`_candidate_rows`: each neighbour cell's run of
    particles is copied :data:`LANES` at a time, in a loop of fixed length the compiler turns into
    vector moves (the last copy of a run also writes up to LANES - 1 entries past it, which the next
    run or the caller's padding overwrites: the buffers need LANES entries of room). A copy per
    particle would end its loop after a varying count, about 8, a mispredicted branch per cell, and
    numba's loop over the 16 lanes stays scalar (:func:`engine.vector_ops.move_lanes`). One thread,
    the benchmark's 64,000 particles: the list fill 7.1 -> 4.2 ms."""
    first = _first_block_start(c, cell_start, half)
    k = np.uintp(0)
    lanes = np.uintp(LANES)
    stride = np.uintp(rows.shape[0] // 4)
    for q in range(27):
        nc = cell_nbr[c, q]
        if not _cell_wanted(nc, c, cell_start, half, first):
            continue
        j0 = np.uintp(cell_start[nc])
        j1 = np.uintp(cell_start[nc + 1])
        while j0 < j1:
            move_lanes(rows, j0, cx, k)
            move_lanes(rows, stride + j0, cy, k)
            move_lanes(rows, stride * np.uintp(2) + j0, cz, k)
            move_lanes(rows, stride * np.uintp(3) + j0, ch, k)
            store_count_up(ci, k, j0)
            step = min(lanes, j1 - j0)
            k += step
            j0 += step
    return np.int64(k)


@njit(cache=True)
def _candidate_buffers(width):
    """Positions (x, y, z), half supports and indices of up to ``width`` candidate particles."""
    return (np.empty(width, dtype=np.float32), np.empty(width, dtype=np.float32), np.empty(width, dtype=np.float32),
            np.empty(width, dtype=np.float32), np.empty(width, dtype=np.int32))


@njit(cache=True)
def chunk_width(c0, c1, cell_start, cell_nbr):
    """The most candidates :func:`gather_candidates` (full, ``half`` = 0) copies for any of the cells
    ``c0:c1``: the size of the buffers a task over those cells allocates once."""
    width = 0
    for c in range(c0, c1):
        w = 0
        for q in range(27):
            nc = cell_nbr[c, q]
            if nc >= 0:
                w += cell_start[nc + 1] - cell_start[nc]
        width = max(width, w)
    return width


#: Bounds for int32 particle indices that no index reaches.
_INT32_MIN = np.int32(-2147483648)
_INT32_MAX = np.int32(2147483647)


@njit(inline="always", cache=True)
def _block_end(i, half, end):
    """End of the block of ``half`` particles holding particle i (0 for a full list, ``half`` = 0),
    given ``end``: 0, or that of an earlier particle. The kernels walk a cell's particles in order
    and pass 0 for its first one: a division per cell, not per particle (a 64-bit division takes
    longer than the rest of a particle's bookkeeping)."""
    if half == 0:
        return 0
    if end == 0:
        return (i // half + 1) * half
    while end <= i:
        end += half
    return end


@njit(inline="always", cache=True)
def _list_bounds(i, half, end):
    """The index bounds (after, end, before, start) of :func:`engine.vector_ops.candidate_masks` for
    particle i (``end`` of :func:`_block_end`): neighbours j with after < j < end or j < before open
    its list, those with j >= end or j < start follow (see :class:`NeighbourList`). A full list
    (``half`` = 0) holds every j != i, in candidate order; a half list first its later neighbours of
    its own block of ``half`` particles, then its neighbours in other blocks."""
    if half == 0:
        return np.int32(i), _INT32_MAX, np.int32(i), _INT32_MIN
    return np.int32(i), np.int32(end), _INT32_MIN, np.int32(end - half)


@njit(inline="always", cache=True)
def _pad_candidates(k, cx, cy, cz, ch, ci):
    """Fill the candidate buffers from k up to a multiple of :data:`LANES` with candidates out of
    anyone's reach; returns that length."""
    padded = (k + LANES - 1) // LANES * LANES
    for t in range(np.uintp(k), np.uintp(padded)):
        cx[t] = np.inf
        cy[t] = np.inf
        cz[t] = np.inf
        ch[t] = 0.0
        ci[t] = -1
    return padded


@njit(parallel=True, cache=True)
def _list_counts(rows, cell_start, cell_nbr, half, counts):
    """Entries of every particle's list (see :class:`NeighbourList`): its neighbours j != i with
    |x_i - x_j| < h_i + h_j, or with ``half`` > 0 those of them the half list keeps. The same test as
    :func:`_list_fill` (:func:`engine.vector_ops.candidate_masks`), so it counts exactly the pairs
    the fill finds."""
    m = cell_nbr.shape[0]
    for b in prange((m + LIST_CHUNK - 1) // LIST_CHUNK):
        c0 = b * LIST_CHUNK
        c1 = min(m, c0 + LIST_CHUNK)
        width = chunk_width(c0, c1, cell_start, cell_nbr)
        cx, cy, cz, ch, ci = _candidate_buffers(width + LANES)
        for c in range(c0, c1):
            k = gather_rows(c, rows, cell_start, cell_nbr, half, cx, cy, cz, ch, ci)
            padded = _pad_candidates(k, cx, cy, cz, ch, ci)
            bend = 0
            for i in range(cell_start[c], cell_start[c + 1]):
                xi, yi, zi, hi = _row_of(rows, i)
                bend = _block_end(i, half, bend)
                after, end, before, start = _list_bounds(i, half, bend)
                n = 0
                for t in range(0, padded, LANES):
                    both = candidate_masks(cx, cy, cz, ch, ci, t, xi, yi, zi, hi, after, end, before, start)
                    n += np.int64(popcount(both))
                counts[i] = n


@njit(parallel=True, cache=True)
def _list_fill(rows, cell_start, cell_nbr, chunk_base, chunk_cap, block, half, todo,
               # outputs
               nbr_start, nbr_count, nbr_local, nbr, overflow):
    """Fill the neighbours of each chunk b in ``todo`` into its own slice
    ``chunk_base[b] : chunk_base[b] + chunk_cap[b]``.

    Particles of a chunk are consecutive, so their ranges follow each other inside the slice; each
    range is padded with the particle's own index to a multiple of ``block`` entries (see
    :class:`NeighbourList`). With ``half`` > 0 a range holds the particle's later neighbours of its
    own block of ``half`` particles first (``nbr_local[i]`` of them), then its neighbours in other
    blocks. A chunk whose neighbours do not fit sets ``overflow[b]``; its counts are
    still exact (the caller sizes the slices from them and fills again).

    Every particle tests its cell's candidates 16 at a time into two bit masks (its own part of the
    list and the other) and stores the selected indices packed (:mod:`engine.vector_ops`): no loop
    over the hits, no branch that depends on them. One thread, the benchmark's 64,000 particles:
    10.0 -> 7.1 ms (the same lists), 4.2 ms with the candidates copied by :func:`gather_rows`. The
    other blocks' part is stored at every step too: a test for it mispredicted wherever a block's
    border crosses the cell (a fifth of a half list's entries lie in other blocks), and its entries
    were copied one by one. One thread, the 97,336-particle dam break of ``bench/bench_blender.py``
    half a second in: 9.3 -> 7.0 ms (the same lists).
    """
    m = cell_nbr.shape[0]
    for task in prange(todo.shape[0]):
        b = todo[task]
        c0 = b * LIST_CHUNK
        c1 = min(m, c0 + LIST_CHUNK)
        width = chunk_width(c0, c1, cell_start, cell_nbr) + LANES
        cx, cy, cz, ch, ci = _candidate_buffers(width)
        # a packed store writes LANES entries: room for them after the last candidate
        row = np.empty(width + LANES, dtype=np.int32)
        rem = np.empty(width + LANES, dtype=np.int32)
        cursor = chunk_base[b]
        limit = chunk_base[b] + chunk_cap[b]
        over = False
        for c in range(c0, c1):
            k = gather_rows(c, rows, cell_start, cell_nbr, half, cx, cy, cz, ch, ci)
            padded = _pad_candidates(k, cx, cy, cz, ch, ci)
            bend = 0
            for i in range(cell_start[c], cell_start[c + 1]):
                xi, yi, zi, hi = _row_of(rows, i)
                bend = _block_end(i, half, bend)
                after, end, before, start = _list_bounds(i, half, bend)
                # straight into the list when even every candidate would fit, else through ``row``
                direct = cursor + padded + max(block, LANES) <= limit
                dst = nbr if direct else row
                off = cursor if direct else 0
                n = 0
                nrem = 0
                for t in range(0, padded, LANES):
                    both = candidate_masks(cx, cy, cz, ch, ci, t, xi, yi, zi, hi, after, end, before, start)
                    mine = both & np.uint64(0xFFFF)
                    compress_store(ci, t, mine, dst, off + n)
                    n += np.int64(popcount(mine))
                    # neighbours in other blocks (none in a full list): stored without a test, which
                    # mispredicts wherever a block's border crosses the cell
                    other = both >> np.uint64(32)
                    compress_store(ci, t, other, rem, nrem)
                    nrem += np.int64(popcount(other))
                nbr_local[i] = n
                # a half list's neighbours in other blocks follow those of its own, LANES at a time (the
                # last move writes past them, into room the next particle or the padding overwrites)
                at = np.uintp(off + n)
                for t in range(np.uintp(0), np.uintp(nrem), np.uintp(LANES)):
                    move_lanes(rem, t, dst, at + t)
                n += nrem
                padded_n = n if block == 1 else (n + block - 1) // block * block
                nbr_start[i] = cursor
                nbr_count[i] = n
                if cursor + padded_n <= limit:
                    if not direct:
                        for t in range(n):
                            nbr[cursor + t] = row[t]
                    for t in range(n, padded_n):
                        nbr[cursor + t] = i
                else:
                    over = True
                cursor += padded_n
        overflow[b] = over


@njit(parallel=True, cache=True)
def _chunk_slices(cell_start, counts, order, block, grow, pad,
                  # outputs
                  chunk_base, chunk_cap):
    """Slice of every chunk: its particles' counts (each rounded up to a multiple of ``block``) summed,
    times ``grow``, plus ``pad``; returns the total. Particle i's count is ``counts[order[i]]``, or
    ``counts[i]`` when ``order`` is empty (the counts of the last build and the grid's new order: no
    reordered copy of them, which took 0.13 ms a substep at 64,000 particles)."""
    m = cell_start.shape[0] - 1
    reordered = order.shape[0] > 0
    for b in prange(chunk_base.shape[0]):
        p0 = cell_start[b * LIST_CHUNK]
        p1 = cell_start[min(m, (b + 1) * LIST_CHUNK)]
        total = 0
        for i in range(p0, p1):
            c = np.int64(counts[order[i]] if reordered else counts[i])
            total += c if block == 1 else (c + block - 1) // block * block
        chunk_cap[b] = np.int64(total * grow) + pad
    base = 0
    for b in range(chunk_base.shape[0]):
        chunk_base[b] = base
        base += chunk_cap[b]
    return base


#: No reordering (:func:`_chunk_slices`).
_IDENTITY = np.zeros(0, dtype=np.int64)

#: The neighbour list's array has 1 / LIST_ROOM more entries than its slices take when it is made.
LIST_ROOM = 16


class NeighbourList:
    """Compact neighbour list of a sorted particle set, rebuilt every substep.

    Particle j is a neighbour of i (j != i) when |x_i - x_j| < h_i + h_j, i.e. within the support
    2 h_ij of the pair's mean smoothing length. The neighbours of i are
    ``nbr[start[i] : start[i] + count[i]]`` (int32 indices into the sorted order).

    Built cell by cell: for each cell the particles of its 27 neighbour cells are copied into
    contiguous buffers, once for all the particles of the cell (:func:`gather_rows`), and every
    particle tests them 16 at a time into bit masks and stores the selected indices packed
    (:mod:`engine.vector_ops`; about 8 times fewer scattered reads than a walk over the 27 cells per
    particle, and no branch on the hits). Cells are processed in chunks of
    :data:`LIST_CHUNK`; each chunk writes into its own slice of ``nbr``, sized from the counts of the
    previous substep (the same particles, reordered) plus 5 %, so one pass usually suffices. The
    first build or a changed particle count costs one extra counting pass; a chunk that outgrew its
    slice (in the benchmark's dam break, three builds in four have one, a chunk or two each) is filled
    again alone, into a new slice after the others, in the room of :data:`LIST_ROOM` the array keeps
    (without it the array was made anew and copied in one build of five: 1.2 ms at 64,000
    particles).

    With ``block`` > 1 every particle's range is padded with its own index to a multiple of
    ``block`` entries: ``nbr[start[i] : start[i] + padded(i)]``, padded(i) = ceil(count[i] / block)
    block. A kernel can then walk the neighbours in blocks of a size the compiler knows (the PBF
    iterations use :data:`NBR_BLOCK` = 16, one AVX-512 vector of float32), where a loop of ~27
    iterations of unknown count mostly runs in the compiler's scalar remainder loop. A padding entry
    is the particle itself: it adds W(0) to a density sum (the kernel subtracts it again) and nothing
    to a sum over (x_i - x_j) or (v_j - v_i). Loops over ``start[i] : start[i] + count[i]`` see exactly
    the real neighbours whatever the block.

    With ``half`` > 0 the list is a *half list* over blocks of ``half`` consecutive particles: a pair
    of one block is listed once, under its first particle, and a pair across two blocks under both.
    The range of i holds first its neighbours j > i of its own block (``local[i]`` of them), then
    all its neighbours in other blocks. A kernel that walks one block in one thread, in order, visits
    each pair of the block once and adds its share to both particles (the later one's sums are
    complete once the walk reaches it: every earlier particle of the block has added its part), and
    never writes to another block's particles: no race, and the sums do not depend on the number of
    threads. A full list has ``local`` equal to ``count``.

    Attributes
    ----------
    start : ndarray, shape (N,), int64
    count : ndarray, shape (N,), uint16
    local : ndarray, shape (N,), uint16
    nbr : ndarray, int32 (slack between chunks is unused)
    block : int
    half : int
    """

    def __init__(self, block: int = 1, half: int = 0):
        if block < 1:
            raise ValueError(f"block must be at least 1, got {block}")
        if half < 0:
            raise ValueError(f"half must be 0 (full lists) or a block of particles, got {half}")
        self.block = int(block)
        self.half = int(half)
        self.start = np.zeros(0, dtype=np.int64)
        self.count = np.zeros(0, dtype=np.uint16)
        self.local = np.zeros(0, dtype=np.uint16)
        self.nbr = np.zeros(0, dtype=np.int32)
        #: extra counting passes so far (first builds, count changes, overflows)
        self.recounts = 0

    @property
    def pairs(self) -> int:
        """Number of ordered neighbour pairs (i, j), i != j (a half list's pairs within a block count
        both ways)."""
        total = int(self.count.sum(dtype=np.int64))
        return total + int(self.local.sum(dtype=np.int64)) if self.half else total

    def nbytes(self) -> int:
        return self.start.nbytes + self.count.nbytes + self.local.nbytes + self.nbr.nbytes

    def build(self, x_sorted: np.ndarray, hsup: np.ndarray, grid: CellGrid,
              counts_hint: np.ndarray | None = None) -> None:
        """Neighbours of the particles ``x_sorted`` (the grid's sorted order).

        Parameters
        ----------
        x_sorted : ndarray, shape (N, 3), float32
        hsup : ndarray, shape (N,) or (1,), float32
            Smoothing length h of each particle (support 2h), or one for all; ``2 * max(hsup)`` must
            not exceed ``grid.cell_size``.
        grid : CellGrid
            The grid ``x_sorted`` was sorted by; its ``order`` maps the previous order of the same
            particles to this one (pass a grid without ``order`` when the particles changed).
        counts_hint : ndarray, shape (N,), optional
            Expected neighbour count of each particle (in the sorted order), for a particle set that
            is not a reordering of the last one: it sizes the list's slices instead of a counting
            pass. Too low a guess costs one more filling pass, never a wrong list.
        """
        n = x_sorted.shape[0]
        m = grid.cell_nbr.shape[0]
        chunks = (m + LIST_CHUNK - 1) // LIST_CHUNK
        rows = np.empty((4, n + LANES), dtype=np.float32)
        _candidate_rows(x_sorted, hsup, rows)
        rows = rows.reshape(-1)
        chunk_base = np.empty(chunks, dtype=np.int64)
        chunk_cap = np.empty(chunks, dtype=np.int64)
        overflow = np.zeros(chunks, dtype=np.bool_)
        order = _IDENTITY
        if counts_hint is not None and counts_hint.shape[0] == n:
            counts = counts_hint.astype(np.int64)
        elif self.count.shape[0] == n and grid.order is not None:
            counts, order = self.count, grid.order
        else:
            counts = np.empty(n, dtype=np.int64)
            _list_counts(rows, grid.cell_start, grid.cell_nbr, self.half, counts)
            self.recounts += 1
        start = np.empty(n, dtype=np.int64)
        count = np.empty(n, dtype=np.uint16)
        local = np.empty(n, dtype=np.uint16)
        total = _chunk_slices(grid.cell_start, counts, order, self.block, 1.05, 8, chunk_base, chunk_cap)
        if total > self.nbr.shape[0] or total < self.nbr.shape[0] // 2:
            # room for the refills of a build or two (in the benchmark's dam break, chunks outgrow their
            # slices in three builds of four): a list grown and copied took 1.2 ms
            self.nbr = np.empty(total + total // LIST_ROOM, dtype=np.int32)
        _list_fill(rows, grid.cell_start, grid.cell_nbr, chunk_base, chunk_cap, self.block, self.half,
                   np.arange(chunks, dtype=np.int64), start, count, local, self.nbr, overflow)
        if overflow.any():
            # Only the chunks that outgrew their slices are filled again, each into a new slice after
            # the others, sized from its now exact counts (the old slices stay unused until the next
            # build sizes the list afresh).
            todo = np.flatnonzero(overflow).astype(np.int64)
            exact_base = np.empty(chunks, dtype=np.int64)
            exact_cap = np.empty(chunks, dtype=np.int64)
            _chunk_slices(grid.cell_start, count, _IDENTITY, self.block, 1.0, 0, exact_base, exact_cap)
            chunk_cap[todo] = exact_cap[todo]
            chunk_base[todo] = total + np.cumsum(exact_cap[todo]) - exact_cap[todo]
            grown = total + int(exact_cap[todo].sum())
            if grown > self.nbr.shape[0]:
                nbr = np.empty(grown + total // LIST_ROOM, dtype=np.int32)
                nbr[:total] = self.nbr[:total]
                self.nbr = nbr
            overflow[:] = False
            _list_fill(rows, grid.cell_start, grid.cell_nbr, chunk_base, chunk_cap, self.block, self.half,
                       todo, start, count, local, self.nbr, overflow)
            self.recounts += 1
        self.start, self.count, self.local = start, count, local


@njit(cache=True)
def _count_pairs(x, radius, cell_start, cell_nbr, particle_cell, counts):
    r2 = radius * radius
    for i in range(x.shape[0]):
        c = particle_cell[i]
        k = 0
        for q in range(27):
            nc = cell_nbr[c, q]
            if nc < 0:
                continue
            for j in range(cell_start[nc], cell_start[nc + 1]):
                dx = x[i, 0] - x[j, 0]
                dy = x[i, 1] - x[j, 1]
                dz = x[i, 2] - x[j, 2]
                if dx * dx + dy * dy + dz * dz < r2:
                    k += 1
        counts[i] = k


@njit(cache=True)
def _fill_pairs(x, radius, cell_start, cell_nbr, particle_cell, offsets, out):
    r2 = radius * radius
    for i in range(x.shape[0]):
        c = particle_cell[i]
        k = offsets[i]
        for q in range(27):
            nc = cell_nbr[c, q]
            if nc < 0:
                continue
            for j in range(cell_start[nc], cell_start[nc + 1]):
                dx = x[i, 0] - x[j, 0]
                dy = x[i, 1] - x[j, 1]
                dz = x[i, 2] - x[j, 2]
                if dx * dx + dy * dy + dz * dz < r2:
                    out[k, 0] = i
                    out[k, 1] = j
                    k += 1


def neighbour_pairs(x_sorted: np.ndarray, grid: CellGrid, radius: float) -> np.ndarray:
    """All ordered pairs (i, j), i != j included both ways and i == j included, with |x_i - x_j| < radius.

    A slow helper for tests and tools (the solvers loop over cells directly).

    Returns
    -------
    ndarray, shape (P, 2), int64, indices into the *sorted* order, rows sorted lexicographically.
    """
    if radius > grid.cell_size * (1 + 1e-12):
        raise ValueError(f"radius {radius} exceeds the cell size {grid.cell_size}")
    n = x_sorted.shape[0]
    counts = np.zeros(n, dtype=np.int64)
    _count_pairs(x_sorted, radius, grid.cell_start, grid.cell_nbr, grid.particle_cell, counts)
    offsets = np.concatenate([[0], np.cumsum(counts)[:-1]]).astype(np.int64) if n else np.zeros(0, np.int64)
    out = np.empty((int(counts.sum()), 2), dtype=np.int64)
    _fill_pairs(x_sorted, radius, grid.cell_start, grid.cell_nbr, grid.particle_cell, offsets, out)
    idx = np.lexsort((out[:, 1], out[:, 0]))
    return out[idx]
