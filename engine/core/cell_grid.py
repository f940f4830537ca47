"""Neighbour search on a Morton-sorted cell grid with 64-bit keys (no dense grid, unbounded).

Alduán, Tena & Otaduy 2015, "Efficient and Robust Position-Based Fluids for VFX", §5: particles are binned
into cubic cells of edge ``cell_size``
(the kernel support, 2h), each cell named by the 64-bit Z-order (Morton) interleave of its three
21-bit integer coordinates. Sorting particles by that key puts the particles of one cell next to
each other in memory and nearby cells near each other. Only occupied cells exist: memory follows
the particles, not the bounding box, so a splash may fly anywhere within +-2^20 cells of the origin
(about 52 km at 5 cm cells); particles beyond that are clamped into the outermost cell.

For every occupied cell the indices of its (up to) 27 occupied neighbour cells are found once in
a hash table of the occupied keys. :class:`engine.core.neighbour_list.NeighbourList` turns the grid
into a compact list of each particle's neighbours (the PBF iterations read it several times per
substep).
"""

from __future__ import annotations

from typing import NamedTuple

import numpy as np
from numba import njit, prange

from .hash_table import fill_table, find


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


@njit(parallel=True, cache=True)
def _neighbour_cells(cell_key, table, bits, out):
    """The (up to) 27 occupied neighbour cells of every cell, found in the hash table of occupied keys
    (a few probes each, against 13 dependent reads of a binary search over the sorted keys)."""
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
                        out[c, n] = find(table, cell_key, morton_key(a, b, d), bits)
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
    fill_table(cell_key, cell_key.shape[0], bits, table)
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
        (:func:`_sort_into_cells`): in a dam break about a tenth of the particles change cells in a
        substep.

    Returns
    -------
    CellGrid
        ``order`` sorts ``x``; all other arrays refer to the sorted order. The caller applies
        ``order`` to every particle array (see :meth:`engine.core.particles.Particles.reorder`).
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
