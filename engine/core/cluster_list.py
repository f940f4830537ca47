"""Cluster-pair neighbour lists: a cluster of four particles and quads of its neighbours.

After Páll & Hess 2013, "A flexible algorithm for calculating pair interactions on SIMD architectures"
(Comput. Phys. Commun. 184), §3-4. The particles of a sorted set (the cell grid's order, see
:mod:`engine.core.cell_grid`, refined by :func:`octant_order` so that the particles of a cell follow
its octants) are grouped four at a time along that order: cluster c holds particles 4 c to 4 c + 3
(the last cluster may hold fewer). A cluster's list holds its neighbours four at a time (a *quad*),
each entry with a 16-bit mask of the pairs that count: bit 4 a + u for particle 4 c + a and the
neighbour in slot u. The pairs are exactly those of :class:`engine.core.neighbour_list.NeighbourList`,
|x_i - x_j| < h_i + h_j, tested in the same single precision arithmetic
(:func:`engine.core.cluster_lanes.pair_columns`). A kernel computes the 16 pairs of an entry in one
vector step (:mod:`engine.core.cluster_lanes`): the cluster's rows are one 64-byte load, the quad's four
16-byte loads.

Pairs of clusters with clusters (as Páll & Hess list them) left three lanes in four empty at this
engine's support of 2h = 2 dx: a cluster of four is large against the support. Listing each neighbour
particle of the cluster once fills about 45 % of the lanes.

It is a *half list* over blocks of ``block`` consecutive clusters, as the particle list: a pair of one
block is listed once, under its first particle, among the cluster's first ``local[c]`` entries; the
pairs with particles of other blocks follow, listed from both sides. A kernel that walks one block's
clusters in order in one thread adds each local pair's share to both particles, writes no other
block's particles, and its sums do not depend on the number of threads.
"""

from __future__ import annotations

import numpy as np
from numba import get_num_threads, get_thread_id, njit, prange

from .cluster_lanes import CLUSTER, PAIR_LANES, pair_columns
from .vector_ops import popcount

#: Clusters per task of the list's build.
BUILD_CHUNK = 256


@njit(parallel=True, cache=True)
def octant_order(x, order, cell_start, cell_size):
    """Sort the particles of every cell by the octant of the cell they lie in (bit 0 the upper half
    along x, bit 1 along y, bit 2 along z: a Morton order one level below the cells), keeping the
    order of the particles of one octant. ``order`` (the grid's, into ``x``) is sorted in place.

    Four consecutive particles then lie in half a cell, mostly: in a jittered lattice at the
    benchmark's spacing a cluster had 26.4 neighbour clusters against 29.6 with the particles of each
    cell in any order (26 % and 24 % of the lanes of the cluster pairs used)."""
    inv2 = 2.0 / cell_size
    for c in prange(cell_start.shape[0] - 1):
        p0 = cell_start[c]
        p1 = cell_start[c + 1]
        # insertion sort on the octant: stable, and close to linear when the order is that of the last
        # substep (most particles stay in their octant)
        for p in range(p0 + 1, p1):
            j = order[p]
            key = _octant(x, j, inv2)
            u = p
            while u > p0 and _octant(x, order[u - 1], inv2) > key:
                order[u] = order[u - 1]
                u -= 1
            order[u] = j


@njit(inline="always", cache=True)
def _octant(x, j, inv2):
    return ((np.int64(np.floor(x[j, 0] * inv2)) & 1) | ((np.int64(np.floor(x[j, 1] * inv2)) & 1) << 1)
            | ((np.int64(np.floor(x[j, 2] * inv2)) & 1) << 2))


@njit(inline="always", cache=True)
def _valid(c, n):
    """Bits of the particles cluster c holds (all four but in the last cluster)."""
    left = n - CLUSTER * c
    return np.uint32(15) if left >= CLUSTER else np.uint32((1 << left) - 1)


@njit(inline="always", cache=True)
def _pairs_of(vi, vj):
    """Pair mask of the particles ``vi`` of one cluster and ``vj`` of another (bits 4 a + b)."""
    m = np.uint32(0)
    for a in range(CLUSTER):
        if vi & np.uint32(1 << a):
            m |= vj << np.uint32(CLUSTER * a)
    return m


_COLUMN = np.uint32(0x1111)  # bits 4 a of a pair mask: every particle of the first cluster


@njit(inline="always", cache=True)
def _entries(items):
    """Quads that hold ``items`` neighbours."""
    return (items + CLUSTER - 1) // CLUSTER


@njit(inline="always", cache=True)
def _candidates(c, n, block, cell_start, cell_nbr, particle_cell, seen, cand):
    """The candidate clusters of cluster c, each once: the clusters of the neighbour cells of the cells of
    its particles. Those of c's block from c on (their pairs with c are local: a share for both) go into
    ``cand[0]``, those of other blocks into ``cand[1]``; the clusters of c's block before c are left out
    (their pairs with c are listed under them). ``seen[cj]`` == c marks a candidate already taken (a
    cluster of two cells, or a cell next to two of c's). Returns how many of each, in the order of the
    cells and of their clusters; ``cand`` needs room for 2 x 27 clusters a cell of c."""
    b0 = c // block * block
    b1 = b0 + block
    k0 = 0
    k1 = 0
    p0 = CLUSTER * c
    for cell in range(particle_cell[p0], particle_cell[min(n, p0 + CLUSTER) - 1] + 1):
        for q in range(27):
            nc = cell_nbr[cell, q]
            if nc < 0:
                continue
            for cj in range(cell_start[nc] // CLUSTER, (cell_start[nc + 1] - 1) // CLUSTER + 1):
                fresh = seen[cj] != c
                seen[cj] = c
                local = cj >= c and cj < b1
                skip = cj >= b0 and cj < c
                cand[0, k0] = cj
                cand[1, k1] = cj
                k0 += np.int64(fresh and local)
                k1 += np.int64(fresh and not local and not skip)
    return k0, k1


@njit(inline="always", cache=True)
def _room(c, n, cell_start, cell_nbr, particle_cell):
    """Candidate clusters of cluster c, counting repeats."""
    p0 = CLUSTER * c
    total = 0
    for cell in range(particle_cell[p0], particle_cell[min(n, p0 + CLUSTER) - 1] + 1):
        for q in range(27):
            nc = cell_nbr[cell, q]
            if nc >= 0:
                total += (cell_start[nc + 1] - 1) // CLUSTER + 1 - cell_start[nc] // CLUSTER
    return total


@njit(inline="always", cache=True)
def _neighbours(c, n, xf, reach, k0, k1, cand, js, cols):
    """Cluster c's neighbours among its candidates ``cand[0, :k0]`` and ``cand[1, :k1]``
    (:func:`_candidates`), packed into ``js[part]`` / ``cols[part]`` four candidates at a time
    (:func:`engine.core.cluster_lanes.pair_columns`); returns how many of each part."""
    last = (n + CLUSTER - 1) // CLUSTER - 1
    v_other = _pairs_of(_valid(c, n), np.uint32(15))
    v_last = _pairs_of(_valid(c, n), _valid(last, n))
    m0 = 0
    for t in range(0, k0, CLUSTER):
        m0 += pair_columns(xf, c, cand[0], t, k0, reach, v_other, v_last, last, js[0], cols[0], m0)
    m1 = 0
    for t in range(0, k1, CLUSTER):
        m1 += pair_columns(xf, c, cand[1], t, k1, reach, v_other, v_last, last, js[1], cols[1], m1)
    return m0, m1


@njit(parallel=True, cache=True)
def _cluster_pass(xf, n, reach, cell_start, cell_nbr, particle_cell, block, fill, todo, chunk_base, chunk_cap,
                  # outputs
                  start, count, local, nbr, mask, overflow, stamps):
    """The entries (quads of neighbours) of the clusters of every chunk b in ``todo`` (of
    :data:`BUILD_CHUNK` clusters) into ``count`` and how many of them are local into ``local``; with
    ``fill`` also the entries themselves, one cluster after the other from ``chunk_base[b]``
    (``start[c]``): its local quads first (the later particles of its block with a pair), then the others
    (particles of other blocks), each in the order of the candidates and of their particles; the slots
    past a part's last neighbour hold the cluster's first particle with no pairs. A chunk whose entries
    do not fit its ``chunk_cap[b]`` sets ``overflow[b]`` (its counts are still exact). ``stamps`` (threads,
    clusters) int32, -1 or any cluster index but the chunks' own, is each thread's ``seen`` of
    :func:`_candidates`."""
    nc = count.shape[0]
    for task in prange(todo.shape[0]):
        b = todo[task]
        seen = stamps[get_thread_id()]
        cand = np.empty((2, 0), dtype=np.int32)
        js = np.empty((2, 0), dtype=np.int32)
        cols = np.empty((2, 0), dtype=np.int32)
        cursor = chunk_base[b]
        limit = cursor + chunk_cap[b]
        over = False
        for c in range(b * BUILD_CHUNK, min(nc, (b + 1) * BUILD_CHUNK)):
            room = _room(c, n, cell_start, cell_nbr, particle_cell)
            if cand.shape[1] < room + CLUSTER:
                cand = np.empty((2, 2 * room + CLUSTER), dtype=np.int32)
                js = np.empty((2, CLUSTER * cand.shape[1] + PAIR_LANES), dtype=np.int32)
                cols = np.empty((2, CLUSTER * cand.shape[1] + PAIR_LANES), dtype=np.int32)
            k0, k1 = _candidates(c, n, block, cell_start, cell_nbr, particle_cell, seen, cand)
            m0, m1 = _neighbours(c, n, xf, reach, k0, k1, cand, js, cols)
            local[c] = _entries(m0)
            count[c] = _entries(m0) + _entries(m1)
            start[c] = cursor
            if fill and cursor + count[c] <= limit:
                e = cursor
                for part, m in ((0, m0), (1, m1)):
                    for q in range(_entries(m)):
                        bits = np.uint32(0)
                        for u in range(CLUSTER):
                            t = CLUSTER * q + u
                            real = t < m
                            nbr[e, u] = js[part, t] if real else CLUSTER * c
                            bits |= np.uint32(cols[part, t] if real else 0) << np.uint32(u)
                        mask[e] = np.uint16(bits)
                        e += 1
            else:
                over = True
            cursor += count[c]
        overflow[b] = over


@njit(cache=True)
def _chunk_totals(count, totals):
    """Entries of every chunk of :data:`BUILD_CHUNK` clusters."""
    for b in range(totals.shape[0]):
        t = 0
        for c in range(b * BUILD_CHUNK, min(count.shape[0], (b + 1) * BUILD_CHUNK)):
            t += count[c]
        totals[b] = t


@njit(parallel=True, cache=True)
def _mask_bits(start, count, local, mask):
    """The set bits of the entries' masks (the pairs the kernels compute), and of the local ones."""
    total = 0
    shared = 0
    for c in prange(start.shape[0]):
        for t in range(start[c], start[c] + count[c]):
            bits = popcount(np.uint32(mask[t]))
            total += bits
            shared += bits if t < start[c] + local[c] else 0
    return total, shared


def _stamps(nc: int) -> np.ndarray:
    """Fresh ``stamps`` for a pass of :func:`_cluster_pass` (each cluster's stamp marks its candidates)."""
    return np.full((get_num_threads(), nc), -1, dtype=np.int32)


def clusters_of(n: int) -> int:
    """Clusters of n particles."""
    return -(-n // CLUSTER)


#: Room a chunk's slice of the list keeps over its entries of the last substep (:meth:`ClusterList.build`).
CHUNK_ROOM = 1.1


class ClusterList:
    """Half list of a sorted particle set's clusters and quads of their neighbours (see the module
    docstring), rebuilt every substep.

    Cluster c's entries are ``nbr[start[c] : start[c] + count[c]]`` ((E, 4) int32: four neighbour
    particles each) with their pair masks ``mask[...]`` (uint16, bit 4 a + u: particle 4 c + a and
    ``nbr[e, u]`` are neighbours; a slot with no pairs holds particle 4 c). The first ``local[c]`` entries
    hold the later particles of c's block of ``block`` clusters (visited once, a share for both), the
    others particles of other blocks. Entries of different chunks of clusters may have unused entries
    between them.

    Attributes
    ----------
    start : ndarray, shape (C,), int64
    count, local : ndarray, shape (C,), int32
    nbr : ndarray, shape (E, 4), int32
    mask : ndarray, shape (E,), uint16
    block : int
    """

    def __init__(self):
        self.block = 1
        self.n = 0
        self.start = np.zeros(0, dtype=np.int64)
        self.count = np.zeros(0, dtype=np.int32)
        self.local = np.zeros(0, dtype=np.int32)
        self.nbr = np.zeros((0, CLUSTER), dtype=np.int32)
        self.mask = np.zeros(0, dtype=np.uint16)
        #: entries of every chunk of the last build (they size the next build's slices)
        self._totals = np.zeros(0, dtype=np.int64)
        #: counting passes and refills so far (first builds, count changes, overflows)
        self.recounts = 0

    @property
    def entries(self) -> int:
        """Listed quads of neighbours."""
        return int(self.count.sum(dtype=np.int64))

    @property
    def pairs(self) -> int:
        """Ordered neighbour pairs (i, j), i != j, as :attr:`engine.core.neighbour_list.NeighbourList.pairs`
        counts them: a local pair counts both ways."""
        total, shared = _mask_bits(self.start, self.count, self.local, self.mask)
        return int(total + shared)

    def lane_use(self) -> float:
        """Fraction of the lanes of the listed entries that hold a neighbour pair (the rest are computed and
        masked out)."""
        e = self.entries
        return float(_mask_bits(self.start, self.count, self.local, self.mask)[0]) / (PAIR_LANES * e) if e else 0.0

    def nbytes(self) -> int:
        return self.start.nbytes + self.count.nbytes + self.local.nbytes + self.nbr.nbytes + self.mask.nbytes

    def build(self, rows: np.ndarray, n: int, h: float, cell_start: np.ndarray, cell_nbr: np.ndarray,
              particle_cell: np.ndarray, block: int) -> None:
        """The list of the first n particles of ``rows``.

        Parameters
        ----------
        rows : ndarray, shape (4 C, 4) or longer, float32
            Positions of the particles in the grid's order in the first three columns, C = ``clusters_of(n)``.
        h : float
            Smoothing length of every particle: neighbours are closer than h + h (float32).
        cell_start, cell_nbr, particle_cell : ndarray
            The grid the particles are sorted by (:class:`engine.core.cell_grid.CellGrid`).
        block : int
            Clusters per block of the half list.

        The chunks of :data:`BUILD_CHUNK` clusters fill slices of the list's arrays in parallel, each
        sized from the chunk's entries of the last build (the same number of particles, a few of them in
        other chunks since) times :data:`CHUNK_ROOM`, so that one pass usually suffices; a first build or
        a changed particle count counts the entries first. A chunk that outgrew its slice is filled again
        alone, into a slice after the others.
        """
        nc = clusters_of(n)
        if rows.shape[0] < CLUSTER * nc or rows.shape[1] != 4 or rows.dtype != np.float32:
            raise ValueError(f"rows must be float32 of shape ({CLUSTER * nc}, 4) or longer, got {rows.shape} "
                             f"{rows.dtype}")
        h32 = np.float32(h)
        reach = np.float32(h32 + h32)
        xf = rows.reshape(-1)
        chunks = (nc + BUILD_CHUNK - 1) // BUILD_CHUNK
        start = np.empty(nc, dtype=np.int64)
        count = np.empty(nc, dtype=np.int32)
        local = np.empty(nc, dtype=np.int32)
        overflow = np.zeros(chunks, dtype=np.bool_)
        every = np.arange(chunks, dtype=np.int64)
        args = (xf, n, reach, cell_start, cell_nbr, particle_cell, block)
        if self.n != n or self._totals.shape[0] != chunks:
            cap = np.zeros(chunks, dtype=np.int64)
            _cluster_pass(*args, False, every, cap, cap, start, count, local, self.nbr, self.mask, overflow,
                          _stamps(nc))
            _chunk_totals(count, cap)
            self.recounts += 1
        else:
            cap = (self._totals * CHUNK_ROOM).astype(np.int64) + 4
        base = np.zeros(chunks, dtype=np.int64)
        np.cumsum(cap[:-1], out=base[1:])
        total = int(base[-1] + cap[-1]) if chunks else 0
        if self.nbr.shape[0] < total or self.nbr.shape[0] > 2 * total:
            self._arrays(total + total // 16, 0)
        overflow[:] = False
        _cluster_pass(*args, True, every, base, cap, start, count, local, self.nbr, self.mask, overflow,
                          _stamps(nc))
        totals = np.empty(chunks, dtype=np.int64)
        _chunk_totals(count, totals)
        if overflow.any():
            todo = np.flatnonzero(overflow).astype(np.int64)
            cap[todo] = totals[todo]
            base[todo] = total + np.cumsum(totals[todo]) - totals[todo]
            grown = total + int(totals[todo].sum())
            if grown > self.nbr.shape[0]:
                self._arrays(grown + total // 16, total)
            _cluster_pass(*args, True, todo, base, cap, start, count, local, self.nbr, self.mask, overflow,
                          _stamps(nc))
            self.recounts += 1
        self.start, self.count, self.local = start, count, local
        self._totals = totals
        self.block = int(block)
        self.n = int(n)

    def _arrays(self, size: int, keep: int) -> None:
        """Entry arrays of ``size`` entries, the first ``keep`` of the old ones copied."""
        nbr = np.empty((size, CLUSTER), dtype=np.int32)
        mask = np.empty(size, dtype=np.uint16)
        nbr[:keep] = self.nbr[:keep]
        mask[:keep] = self.mask[:keep]
        self.nbr, self.mask = nbr, mask


