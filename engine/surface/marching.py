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

The grid is cut into slabs of :data:`SLAB_POINTS` planes along its first axis, one task each: a
counting pass sizes the output, a second pass writes the vertices and triangles of each slab into its
own ranges, numbering vertices in a fixed order (plane, row, column, axis). The result does not depend
on the thread count.
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


@njit(inline="always", cache=True)
def _case(f, i, j, k, iso):
    c = 0
    for corner in range(8):
        if f[i + (corner & 1), j + ((corner >> 1) & 1), k + ((corner >> 2) & 1)] > iso:
            c |= 1 << corner
    return c


@njit(inline="always", cache=True)
def _k_range(row_lo, row_hi, i, j, whole_cell):
    """The k where point (i, j, k)'s edges (``whole_cell`` False: rows (i, j), (i + 1, j), (i, j + 1)) or
    cell (i, j, k) (True: its four rows) may see a non-zero value; (lo, hi + 1) for a ``range``."""
    nx, ny = row_lo.shape
    lo = row_lo[i, j]
    hi = row_hi[i, j]
    for di in range(2):
        for dj in range(2):
            if di + dj == 0 or (di + dj == 2 and not whole_cell) or i + di >= nx or j + dj >= ny:
                continue
            lo = min(lo, row_lo[i + di, j + dj])
            hi = max(hi, row_hi[i + di, j + dj])
    return max(0, lo - 1), hi + 1


@njit(parallel=True, cache=True)
def _count(f, iso, row_lo, row_hi, case_counts, nslab, vcount, tcount):
    nx, ny, nz = f.shape
    for s in prange(nslab):
        nv = 0
        nt = 0
        for i in range(s * SLAB_POINTS, min(nx, (s + 1) * SLAB_POINTS)):
            for j in range(ny):
                k0, k1 = _k_range(row_lo, row_hi, i, j, False)
                for k in range(k0, min(k1, nz)):
                    inside = f[i, j, k] > iso
                    if i + 1 < nx and (f[i + 1, j, k] > iso) != inside:
                        nv += 1
                    if j + 1 < ny and (f[i, j + 1, k] > iso) != inside:
                        nv += 1
                    if k + 1 < nz and (f[i, j, k + 1] > iso) != inside:
                        nv += 1
                if i + 1 < nx and j + 1 < ny:
                    k0, k1 = _k_range(row_lo, row_hi, i, j, True)
                    for k in range(k0, min(k1, nz - 1)):
                        nt += case_counts[_case(f, i, j, k, iso)]
        vcount[s] = nv
        tcount[s] = nt


@njit(inline="always", cache=True)
def _plane(f, iso, row_lo, row_hi, i, origin, cell, next_id, ids, verts, write):
    """Number the crossed edges whose low end lies in plane i (order j, k, axis) from ``next_id`` into
    ``ids`` (ny, nz, 3); with ``write``, put their vertices into ``verts``. Returns the next free id."""
    nx, ny, nz = f.shape
    for j in range(ny):
        k0, k1 = _k_range(row_lo, row_hi, i, j, False)
        for k in range(k0, min(k1, nz)):
            f0 = f[i, j, k]
            inside = f0 > iso
            for a in range(3):
                f1 = f0
                if a == 0:
                    if i + 1 >= nx:
                        continue
                    f1 = f[i + 1, j, k]
                elif a == 1:
                    if j + 1 >= ny:
                        continue
                    f1 = f[i, j + 1, k]
                else:
                    if k + 1 >= nz:
                        continue
                    f1 = f[i, j, k + 1]
                if (f1 > iso) == inside:
                    continue
                ids[j, k, a] = next_id
                if write:
                    t = (iso - f0) / (f1 - f0)
                    verts[next_id, 0] = origin[0] + (i + (t if a == 0 else 0.0)) * cell
                    verts[next_id, 1] = origin[1] + (j + (t if a == 1 else 0.0)) * cell
                    verts[next_id, 2] = origin[2] + (k + (t if a == 2 else 0.0)) * cell
                next_id += 1
    return next_id


@njit(parallel=True, cache=True)
def _emit(f, iso, row_lo, row_hi, origin, cell, case_counts, case_tris, edge_axis, edge_offset, vstart, tstart,
          # outputs
          verts, tris):
    nx, ny, nz = f.shape
    nslab = vstart.shape[0] - 1
    for s in prange(nslab):
        i0 = s * SLAB_POINTS
        i1 = min(nx, i0 + SLAB_POINTS)
        # only the entries of crossed edges are ever read: the buffers need no clearing
        low = np.empty((ny, nz, 3), np.int64)
        high = np.empty((ny, nz, 3), np.int64)
        next_id = _plane(f, iso, row_lo, row_hi, i0, origin, cell, vstart[s], low, verts, True)
        t = tstart[s]
        for i in range(i0, i1):
            if i + 1 >= nx:
                break
            if i + 1 < i1:
                next_id = _plane(f, iso, row_lo, row_hi, i + 1, origin, cell, next_id, high, verts, True)
            else:  # plane i + 1 is the next slab's first: its ids, which that slab writes
                _plane(f, iso, row_lo, row_hi, i + 1, origin, cell, vstart[s + 1], high, verts, False)
            for j in range(ny - 1):
                k0, k1 = _k_range(row_lo, row_hi, i, j, True)
                for k in range(k0, min(k1, nz - 1)):
                    case = _case(f, i, j, k, iso)
                    for m in range(case_counts[case]):
                        for corner in range(3):
                            e = case_tris[case, m, corner]
                            a = edge_axis[e]
                            dj = edge_offset[e, 1]
                            dk = edge_offset[e, 2]
                            if edge_offset[e, 0] == 0:
                                tris[t, corner] = low[j + dj, k + dk, a]
                            else:
                                tris[t, corner] = high[j + dj, k + dk, a]
                        t += 1
            low, high = high, low


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
    nslab = (f.shape[0] + SLAB_POINTS - 1) // SLAB_POINTS
    vcount = np.zeros(nslab, np.int64)
    tcount = np.zeros(nslab, np.int64)
    iso32 = np.float32(iso)
    _count(f, iso32, row_lo, row_hi, CASE_COUNTS, nslab, vcount, tcount)
    vstart = np.concatenate([[0], np.cumsum(vcount)]).astype(np.int64)
    tstart = np.concatenate([[0], np.cumsum(tcount)]).astype(np.int64)
    verts = np.empty((int(vstart[-1]), 3), np.float32)
    tris = np.empty((int(tstart[-1]), 3), np.int32)
    _emit(f, iso32, row_lo, row_hi, np.asarray(origin, np.float64), float(cell), CASE_COUNTS, CASE_TRIANGLES,
          EDGE_AXIS, EDGE_OFFSET, vstart, tstart, verts, tris)
    return verts, tris
