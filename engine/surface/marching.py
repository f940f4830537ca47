"""Marching cubes on a dense grid, in parallel slabs, closed and manifold by construction.

Lorensen & Cline 1987, "Marching Cubes: A High Resolution 3D Surface Construction Algorithm": each cell
of the grid is cut by a few triangles whose corners lie on the cell's edges where the field crosses
the iso level (linear interpolation along the edge). "Inside" is a value above the iso level.

The triangulation of each of the 256 inside/outside patterns of a cell's corners is not a hand-typed
table: :func:`_case_tables` derives it. On each face of the cell the crossings are joined in pairs,
each segment cutting off an inside corner (on a face whose two inside corners sit on a diagonal, they
are cut off separately); the segments of the six faces chain into closed loops (each crossed edge
belongs to two faces), each loop is oriented so that its normal points from the inside corners to the
outside ones, and triangulated as a fan. The face rule depends on the face's four corners only, so the
two cells that share a face cut it alike: the mesh has no cracks, and every vertex lies on one loop
per cell around its edge, so the mesh is a closed 2-manifold wherever the field is below the iso level
on the grid's border (the ambiguity of Nielson & Hamann 1991 resolved one way everywhere).

The sides of the grid points are packed first, 64 points of a row (i, j) to a 64-bit word: a crossed edge
is a bit of the exclusive or of two words, a cell with corners on both sides a bit of the or and not
the and of its eight corner words (the four rows around it, shifted by one point along k), so only
those edges and cells are visited, through their set bits. The grid is cut into slabs of
:data:`SLAB_POINTS` planes along its first axis, one task each: a counting pass sizes the output, a
second pass writes the vertices and triangles of each slab into its own ranges, numbering vertices in
a fixed order (plane, row, column, axis). The result does not depend on the thread count.
"""

from __future__ import annotations

import numpy as np
from numba import njit, prange

#: Grid planes along the first axis per task.
SLAB_POINTS = 8

#: Most triangles one cell can hold in the derived tables (checked when they are built).
MAX_CELL_TRIANGLES = 5


def _corner(c: int) -> np.ndarray:
    return np.array([c & 1, (c >> 1) & 1, (c >> 2) & 1], float)


def _edges() -> list[tuple[int, int, int]]:
    """The 12 cell edges as (axis, low corner, high corner); edge e = 4 axis + index."""
    out = []
    for a in range(3):
        for c in range(8):
            if not c & (1 << a):
                out.append((a, c, c | (1 << a)))
    return out


def _faces() -> list[list[int]]:
    """The 6 faces, each as its 4 corners in cyclic order."""
    faces = []
    for a in range(3):
        u, v = [b for b in range(3) if b != a]
        for side in (0, 1):
            base = side << a
            faces.append([base, base | (1 << u), base | (1 << u) | (1 << v), base | (1 << v)])
    return faces


def _case_tables() -> tuple[np.ndarray, np.ndarray]:
    """(triangle counts (256,) int32, triangles (256, MAX_CELL_TRIANGLES, 3) int32 of local edge ids)."""
    edges = _edges()
    edge_of = {frozenset((lo, hi)): e for e, (_a, lo, hi) in enumerate(edges)}
    faces = _faces()
    counts = np.zeros(256, np.int32)
    table = np.full((256, MAX_CELL_TRIANGLES, 3), -1, np.int32)
    for case in range(256):
        inside = [bool(case >> c & 1) for c in range(8)]
        links: dict[int, list[int]] = {}
        for ring in faces:
            crossed = [edge_of[frozenset((ring[p], ring[(p + 1) % 4]))] for p in range(4)
                       if inside[ring[p]] != inside[ring[(p + 1) % 4]]]
            if len(crossed) == 2:
                pairs = [tuple(crossed)]
            elif len(crossed) == 4:
                # two inside corners on a diagonal: each is cut off on its own
                pairs = [(edge_of[frozenset((ring[p - 1], ring[p]))], edge_of[frozenset((ring[p], ring[(p + 1) % 4]))])
                         for p in range(4) if inside[ring[p]]]
            else:
                pairs = []
            for e1, e2 in pairs:
                links.setdefault(e1, []).append(e2)
                links.setdefault(e2, []).append(e1)
        loops = []
        seen = set()
        for start in sorted(links):
            if start in seen:
                continue
            loop, prev, cur = [start], None, start
            seen.add(start)
            while True:
                a, b = links[cur]
                nxt = b if a == prev else a
                if nxt == start:
                    break
                loop.append(nxt)
                seen.add(nxt)
                prev, cur = cur, nxt
            loops.append(loop)
        tris = []
        for loop in loops:
            mid = [0.5 * (_corner(edges[e][1]) + _corner(edges[e][2])) for e in loop]
            normal = np.zeros(3)
            for i in range(len(mid)):  # Newell's polygon normal
                normal += np.cross(mid[i], mid[(i + 1) % len(mid)])
            outward = np.zeros(3)
            for e in loop:
                _a, lo, hi = edges[e]
                outward += (_corner(hi) - _corner(lo)) * (1.0 if inside[lo] else -1.0)
            if normal @ outward < 0:
                loop = loop[::-1]
            tris += [(loop[0], loop[i], loop[i + 1]) for i in range(1, len(loop) - 1)]
        if len(tris) > MAX_CELL_TRIANGLES:
            raise AssertionError(f"case {case}: {len(tris)} triangles")
        counts[case] = len(tris)
        if tris:
            table[case, :len(tris)] = tris
    return counts, table


#: Edge e of a cell: its axis and the offsets (i, j, k) of its low corner.
EDGE_AXIS = np.array([a for a, _lo, _hi in _edges()], np.int32)
EDGE_OFFSET = np.array([[lo & 1, (lo >> 1) & 1, (lo >> 2) & 1] for _a, lo, _hi in _edges()], np.int32)
CASE_COUNTS, CASE_TRIANGLES = _case_tables()


_M1 = np.uint64(0x5555555555555555)
_M2 = np.uint64(0x3333333333333333)
_M4 = np.uint64(0x0F0F0F0F0F0F0F0F)
_H01 = np.uint64(0x0101010101010101)
_ONE = np.uint64(1)


@njit(inline="always", cache=True)
def _popcount(v):
    """Set bits of a uint64 (the SWAR count)."""
    v = v - ((v >> _ONE) & _M1)
    v = (v & _M2) + ((v >> np.uint64(2)) & _M2)
    v = (v + (v >> np.uint64(4))) & _M4
    return np.int64((v * _H01) >> np.uint64(56))


@njit(inline="always", cache=True)
def _lowest(v):
    """Index of the lowest set bit of a non-zero uint64."""
    return _popcount((v & (np.uint64(0) - v)) - _ONE)


@njit(inline="always", cache=True)
def _bit(v, k):
    return np.int64((v >> np.uint64(k)) & _ONE)


@njit(parallel=True, nogil=True, cache=True)
def _inside_bits(f, iso, row_lo, row_hi, bits):
    """bits[i, j, w] bit b: point (i, j, 64 w + b) is inside (above ``iso``); only the rows' ranges are read
    (the field is not above ``iso`` outside them)."""
    nx, ny, nz = f.shape
    for i in prange(nx):
        for j in range(ny):
            for w in range(bits.shape[2]):
                bits[i, j, w] = 0
            for k in range(max(0, row_lo[i, j]), min(nz, row_hi[i, j] + 1)):
                if f[i, j, k] > iso:
                    bits[i, j, k >> 6] |= _ONE << np.uint64(k & 63)


@njit(inline="always", cache=True)
def _up(bits, i, j, w):
    """Row (i, j)'s word w shifted by one point: bit b tells point k + 1's side (k = 64 w + b)."""
    nxt = bits[i, j, w + 1] if w + 1 < bits.shape[2] else np.uint64(0)
    return (bits[i, j, w] >> _ONE) | (nxt << np.uint64(63))


@njit(inline="always", cache=True)
def _crossed(bits, i, j, w, k_edges):
    """The crossed edges from the points of row (i, j)'s word w along i, j and k (bit b: the edge from point
    (i, j, 64 w + b)); ``k_edges`` masks the points with an edge along k (k + 1 < nz)."""
    nx, ny = bits.shape[0], bits.shape[1]
    b = bits[i, j, w]
    ei = (b ^ bits[i + 1, j, w]) if i + 1 < nx else np.uint64(0)
    ej = (b ^ bits[i, j + 1, w]) if j + 1 < ny else np.uint64(0)
    ek = (b ^ _up(bits, i, j, w)) & k_edges
    return ei, ej, ek


@njit(inline="always", cache=True)
def _mixed(bits, i, j, w, k_cells):
    """The 8 corner rows of the cells (i, j, 64 w + b) (corner c = di + 2 dj + 4 dk) and the mask of the cells
    with corners on both sides (``k_cells``: the cells that exist, k + 1 < nz)."""
    r0 = bits[i, j, w]
    r1 = bits[i + 1, j, w]
    r2 = bits[i, j + 1, w]
    r3 = bits[i + 1, j + 1, w]
    r4 = _up(bits, i, j, w)
    r5 = _up(bits, i + 1, j, w)
    r6 = _up(bits, i, j + 1, w)
    r7 = _up(bits, i + 1, j + 1, w)
    some = r0 | r1 | r2 | r3 | r4 | r5 | r6 | r7
    every = r0 & r1 & r2 & r3 & r4 & r5 & r6 & r7
    return r0, r1, r2, r3, r4, r5, r6, r7, some & ~every & k_cells


@njit(inline="always", cache=True)
def _case(r0, r1, r2, r3, r4, r5, r6, r7, b):
    return (_bit(r0, b) | (_bit(r1, b) << 1) | (_bit(r2, b) << 2) | (_bit(r3, b) << 3) | (_bit(r4, b) << 4)
            | (_bit(r5, b) << 5) | (_bit(r6, b) << 6) | (_bit(r7, b) << 7))


@njit(parallel=True, nogil=True, cache=True)
def _count(bits, k_edges, case_counts, nslab, vcount, tcount):
    nx, ny, nw = bits.shape
    for s in prange(nslab):
        nv = 0
        nt = 0
        for i in range(s * SLAB_POINTS, min(nx, (s + 1) * SLAB_POINTS)):
            for j in range(ny):
                for w in range(nw):
                    ei, ej, ek = _crossed(bits, i, j, w, k_edges[w])
                    nv += _popcount(ei) + _popcount(ej) + _popcount(ek)
                if i + 1 < nx and j + 1 < ny:
                    for w in range(nw):
                        r0, r1, r2, r3, r4, r5, r6, r7, m = _mixed(bits, i, j, w, k_edges[w])
                        while m:
                            b = _lowest(m)
                            m &= m - _ONE
                            nt += case_counts[_case(r0, r1, r2, r3, r4, r5, r6, r7, b)]
        vcount[s] = nv
        tcount[s] = nt


@njit(inline="always", cache=True)
def _plane(f, iso, bits, k_edges, i, origin, cell, next_id, ids, verts, write):
    """Number the crossed edges whose low end lies in plane i (order j, k, axis) from ``next_id`` into
    ``ids`` (ny, nz, 3); with ``write``, put their vertices into ``verts``. Returns the next free id."""
    ny, nw = bits.shape[1], bits.shape[2]
    for j in range(ny):
        for w in range(nw):
            ei, ej, ek = _crossed(bits, i, j, w, k_edges[w])
            m = ei | ej | ek
            while m:
                b = _lowest(m)
                m &= m - _ONE
                k = 64 * w + b
                f0 = f[i, j, k]
                for a in range(3):
                    if a == 0:
                        if not _bit(ei, b):
                            continue
                        f1 = f[i + 1, j, k]
                    elif a == 1:
                        if not _bit(ej, b):
                            continue
                        f1 = f[i, j + 1, k]
                    else:
                        if not _bit(ek, b):
                            continue
                        f1 = f[i, j, k + 1]
                    ids[j, k, a] = next_id
                    if write:
                        t = (iso - f0) / (f1 - f0)
                        verts[next_id, 0] = origin[0] + (i + (t if a == 0 else 0.0)) * cell
                        verts[next_id, 1] = origin[1] + (j + (t if a == 1 else 0.0)) * cell
                        verts[next_id, 2] = origin[2] + (k + (t if a == 2 else 0.0)) * cell
                    next_id += 1
    return next_id


@njit(parallel=True, nogil=True, cache=True)
def _emit(f, iso, bits, k_edges, origin, cell, case_counts, case_tris, edge_axis, edge_offset, vstart, tstart,
          # outputs
          verts, tris):
    nx, ny, nz = f.shape
    nw = bits.shape[2]
    nslab = vstart.shape[0] - 1
    for s in prange(nslab):
        i0 = s * SLAB_POINTS
        i1 = min(nx, i0 + SLAB_POINTS)
        # only the entries of crossed edges are ever read: the buffers need no clearing
        low = np.empty((ny, nz, 3), np.int64)
        high = np.empty((ny, nz, 3), np.int64)
        next_id = _plane(f, iso, bits, k_edges, i0, origin, cell, vstart[s], low, verts, True)
        t = tstart[s]
        for i in range(i0, i1):
            if i + 1 >= nx:
                break
            if i + 1 < i1:
                next_id = _plane(f, iso, bits, k_edges, i + 1, origin, cell, next_id, high, verts, True)
            else:  # plane i + 1 is the next slab's first: its ids, which that slab writes
                _plane(f, iso, bits, k_edges, i + 1, origin, cell, vstart[s + 1], high, verts, False)
            for j in range(ny - 1):
                for w in range(nw):
                    r0, r1, r2, r3, r4, r5, r6, r7, m = _mixed(bits, i, j, w, k_edges[w])
                    while m:
                        b = _lowest(m)
                        m &= m - _ONE
                        k = 64 * w + b
                        case = _case(r0, r1, r2, r3, r4, r5, r6, r7, b)
                        for n in range(case_counts[case]):
                            for corner in range(3):
                                e = case_tris[case, n, corner]
                                a = edge_axis[e]
                                dj = edge_offset[e, 1]
                                dk = edge_offset[e, 2]
                                if edge_offset[e, 0] == 0:
                                    tris[t, corner] = low[j + dj, k + dk, a]
                                else:
                                    tris[t, corner] = high[j + dj, k + dk, a]
                            t += 1
            low, high = high, low


def _word_masks(n: int, words: int) -> np.ndarray:
    """(words,) uint64: bit b of word w set where 64 w + b < n."""
    k = np.arange(64 * words).reshape(words, 64)
    return ((k < n).astype(np.uint64) << np.arange(64, dtype=np.uint64)).sum(axis=1, dtype=np.uint64)


def marching_cubes(field: np.ndarray, iso: float, origin, cell: float, row_lo: np.ndarray | None = None,
                   row_hi: np.ndarray | None = None) -> tuple[np.ndarray, np.ndarray]:
    """The iso-surface of a dense field.

    Parameters
    ----------
    field : ndarray, shape (nx, ny, nz), float32
        Values at the points ``origin + (i, j, k) * cell``; inside is above ``iso``.
    iso : float
    origin : sequence of 3 floats, m
    cell : float, m
    row_lo, row_hi : ndarray, shape (nx, ny), int32, optional
        For a field that is zero outside them (:class:`engine.surface.field.ColourField`) and ``iso`` > 0:
        the range of k of each row (i, j) where it may be non-zero; only those parts are visited.

    Returns
    -------
    vertices : ndarray, shape (V, 3), float32, m
    triangles : ndarray, shape (T, 3), int32, counter-clockwise seen from outside (lower values)
    """
    f = np.ascontiguousarray(field, dtype=np.float32)
    if f.ndim != 3 or min(f.shape) < 2:
        return np.zeros((0, 3), np.float32), np.zeros((0, 3), np.int32)
    if row_lo is None or row_hi is None or not iso > 0:
        row_lo = np.zeros(f.shape[:2], np.int32)
        row_hi = np.full(f.shape[:2], f.shape[2] - 1, np.int32)
    nx, ny, nz = f.shape
    nslab = (nx + SLAB_POINTS - 1) // SLAB_POINTS
    words = (nz + 63) // 64
    bits = np.empty((nx, ny, words), np.uint64)
    iso32 = np.float32(iso)
    _inside_bits(f, iso32, row_lo, row_hi, bits)
    k_edges = _word_masks(nz - 1, words)  # the points with an edge along k, and the cells' k
    vcount = np.zeros(nslab, np.int64)
    tcount = np.zeros(nslab, np.int64)
    _count(bits, k_edges, CASE_COUNTS, nslab, vcount, tcount)
    vstart = np.concatenate([[0], np.cumsum(vcount)]).astype(np.int64)
    tstart = np.concatenate([[0], np.cumsum(tcount)]).astype(np.int64)
    verts = np.empty((int(vstart[-1]), 3), np.float32)
    tris = np.empty((int(tstart[-1]), 3), np.int32)
    _emit(f, iso32, bits, k_edges, np.asarray(origin, np.float64), float(cell), CASE_COUNTS, CASE_TRIANGLES,
          EDGE_AXIS, EDGE_OFFSET, vstart, tstart, verts, tris)
    return verts, tris
