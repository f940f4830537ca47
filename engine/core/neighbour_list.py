"""The compact neighbour list of a cell grid: each particle's neighbours within the kernel support.

:class:`NeighbourList` turns a :class:`engine.core.cell_grid.CellGrid` into one list of neighbour
indices per particle (the full list, or the half list of later particles within a block of
particles for the PBF pair passes), filled in parallel per chunk of :data:`LIST_CHUNK` cells: a
chunk's candidates are gathered once into contiguous buffers (:func:`gather_candidates`,
:func:`gather_rows`) and tested :data:`engine.core.vector_ops.LANES` at a time
(:func:`engine.core.vector_ops.candidate_masks`), the hits packed into the list with compress
stores. A list keeps room from one build to the next, so the rebuild after every substep reuses its
arrays.
"""

from __future__ import annotations

import numpy as np
from numba import njit, prange

from .cell_grid import CellGrid
from .vector_ops import LANES, candidate_masks, compress_store, move_lanes, popcount, store_count_up

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
    numba's loop over the 16 lanes stays scalar (:func:`engine.core.vector_ops.move_lanes`)."""
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
    """The index bounds (after, end, before, start) of :func:`engine.core.vector_ops.candidate_masks` for
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
    :func:`_list_fill` (:func:`engine.core.vector_ops.candidate_masks`), so it counts exactly the pairs
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
    list and the other) and stores the selected indices packed (:mod:`engine.core.vector_ops`): no loop
    over the hits, no branch that depends on them. The other blocks' part is stored at every step too:
    a test for it would mispredict wherever a block's border crosses the cell (a fifth of a half list's
    entries lie in other blocks).
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
    reordered copy of them)."""
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


@njit(inline="always", cache=True)
def list_range(start, count, local, half, i):
    """Particle i's entries of a list (:class:`NeighbourList`): ``[p0, mid)`` its later neighbours of its
    own block, each pair visited once for both particles, and ``[mid, end)`` the others, visited for i
    alone. ``half`` says whether the list is a half list (a full list's entries are all of the second
    kind, whatever ``local`` holds)."""
    p0 = start[i]
    mid = p0 + np.int64(local[i]) if half else p0
    return p0, mid, p0 + np.int64(count[i])


class NeighbourList:
    """Compact neighbour list of a sorted particle set, rebuilt every substep.

    Particle j is a neighbour of i (j != i) when |x_i - x_j| < h_i + h_j, i.e. within the support
    2 h_ij of the pair's mean smoothing length. The neighbours of i are
    ``nbr[start[i] : start[i] + count[i]]`` (int32 indices into the sorted order).

    Built cell by cell: for each cell the particles of its 27 neighbour cells are copied into
    contiguous buffers, once for all the particles of the cell (:func:`gather_rows`), and every
    particle tests them 16 at a time into bit masks and stores the selected indices packed
    (:mod:`engine.core.vector_ops`; about 8 times fewer scattered reads than a walk over the 27 cells per
    particle, and no branch on the hits). Cells are processed in chunks of
    :data:`LIST_CHUNK`; each chunk writes into its own slice of ``nbr``, sized from the counts of the
    previous substep (the same particles, reordered) plus 5 %, so one pass usually suffices. The
    first build or a changed particle count costs one extra counting pass; a chunk that outgrew its
    slice (in the benchmark's dam break, three builds in four have one, a chunk or two each) is filled
    again alone, into a new slice after the others, in the room of :data:`LIST_ROOM` the array keeps
    (so that the array is not made anew and copied).

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
            # room for the refills of a build or two (in a dam break, chunks outgrow their slices in three
            # builds of four)
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
