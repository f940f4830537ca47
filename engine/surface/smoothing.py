"""Weighted Laplacian smoothing of a closed triangle mesh (Löschner, Böttcher, Jeske & Bender 2023,
"Weighted Laplacian Smoothing for Surface Reconstruction of Particle-based Fluids", eq. 5-7).

Each pass moves every vertex towards the mean of its neighbours by its weight w_v in [0, 1]
(:func:`engine.surface.reconstruction.smoothing_weights`), in parallel over vertices:
x_v^(n+1) = (1 - beta w_v) x_v^(n-1) + beta w_v mean_{u in N(v)} x_u^(n), with x^(-1) = x^(0).
The vertex's own term is the one of the pass before the last, as splashsurf 0.14 computes it (it
alternates two buffers; the reference reconstruction of the benchmark and the tests): measured on a
resting block, this keeps the volume better than taking the last pass's own term (1.5 % against
2.2 % lost after 25 passes), and it is the surface splashsurf's users know.

All passes run in one parallel launch, without a barrier between passes: the vertices are cut into
one contiguous range per thread, and each task smooths its range together with the rings of vertices
around it (``iterations`` rings deep, found by a breadth-first search over the mesh), one ring fewer
each pass. A vertex's value after pass n depends only on the vertices within n rings of it, so the
range's vertices come out as a global pass-by-pass smoothing would give them, bit for bit (the same
sums in the same order), whatever the number of ranges.
"""

from __future__ import annotations

import numba
import numpy as np
from numba import njit, prange


@njit(cache=True)
def _rings(t, start, nbr):
    """Counting sort of the directed edges a -> b of the triangles by a (start holds the offsets)."""
    fill = start[:-1].copy()
    for m in range(t.shape[0]):
        for c in range(3):
            a = t[m, c]
            nbr[fill[a]] = t[m, (c + 1) % 3]
            fill[a] += 1


def neighbour_rings(triangles: np.ndarray, vertex_count: int) -> tuple[np.ndarray, np.ndarray]:
    """Each vertex's neighbours in CSR form ``(start (V + 1,) int64, nbr (E,) int32)``.

    On a closed, consistently oriented mesh every edge a-b is a -> b in one triangle and b -> a in the
    other, so the directed edges a -> b of the triangles name each neighbour of a exactly once.
    """
    t = np.ascontiguousarray(triangles, np.int32).reshape(-1, 3)
    start = np.zeros(vertex_count + 1, np.int64)
    np.cumsum(np.bincount(t.ravel(), minlength=vertex_count), out=start[1:])
    nbr = np.empty(3 * len(t), np.int32)
    _rings(t, start, nbr)
    return start, nbr


@njit(cache=True)
def _rings_around(start, nbr, lo, hi, depth, seen, local, ring_end):
    """Breadth-first search from the vertices ``lo:hi``: ``local[:ring_end[d]]`` are the vertices within d
    rings of them (``local[:hi - lo]`` the range itself, then ring after ring), d = 0 to ``depth``.
    ``seen`` (V,) is all False on entry."""
    n = 0
    for v in range(lo, hi):
        local[n] = v
        seen[v] = True
        n += 1
    ring_end[0] = n
    first = 0
    for d in range(1, depth + 1):
        last = n
        for idx in range(first, last):
            v = local[idx]
            for t in range(start[v], start[v + 1]):
                u = nbr[t]
                if not seen[u]:
                    seen[u] = True
                    local[n] = u
                    n += 1
        ring_end[d] = n
        first = last


@njit(inline="always", cache=True)
def _update(v, own, around, start, nbr, keep, pull, wall):
    """own[v] <- keep_v own[v] + pull_v sum(around[N(v)]); a vertex off the walls sees each neighbour on a wall
    (``wall[u, 3]`` > -inf: the plane n . x = c of its wall, n = wall[u, :3], c = wall[u, 3]) as its own
    mirror image in that plane (an empty ``wall`` has no walls)."""
    s0 = np.float32(0.0)
    s1 = np.float32(0.0)
    s2 = np.float32(0.0)
    mirror = wall.shape[0] > 0 and wall[v, 3] == -np.inf
    for t in range(start[v], start[v + 1]):
        u = nbr[t]
        if mirror and wall[u, 3] != -np.inf:
            # the liquid continues beyond the wall as its mirror image: the neighbour across the contact line
            # is v reflected in the wall's plane, so the wall does not round the free surface off
            e = np.float32(2.0) * (wall[u, 0] * around[v, 0] + wall[u, 1] * around[v, 1] + wall[u, 2] * around[v, 2]
                                   - wall[u, 3])
            s0 += around[v, 0] - e * wall[u, 0]
            s1 += around[v, 1] - e * wall[u, 1]
            s2 += around[v, 2] - e * wall[u, 2]
        else:
            s0 += around[u, 0]
            s1 += around[u, 1]
            s2 += around[u, 2]
    own[v, 0] = keep[v] * own[v, 0] + pull[v] * s0
    own[v, 1] = keep[v] * own[v, 1] + pull[v] * s1
    own[v, 2] = keep[v] * own[v, 2] + pull[v] * s2


@njit(parallel=True, nogil=True, cache=True)
def _smooth_ranges(x, start, nbr, keep, pull, wall, bounds, iterations,
                   # outputs
                   out):
    """``iterations`` passes own[v] <- keep_v own[v] + pull_v sum(around[N(v)]) (keep_v = 1 - beta w_v,
    pull_v = beta w_v / |N(v)|, then the buffers swap), task p writing the rows ``bounds[p]:bounds[p + 1]``
    of ``out`` (see the module docstring). Each task works in buffers of its own; pass n (from 1) updates
    the vertices within ``iterations - n`` rings of the range, whose neighbours are all within reach."""
    nv = x.shape[0]
    for p in prange(bounds.shape[0] - 1):
        lo, hi = bounds[p], bounds[p + 1]
        seen = np.zeros(nv, np.bool_)
        local = np.empty(nv, np.int32)
        ring_end = np.empty(iterations + 1, np.int64)
        _rings_around(start, nbr, lo, hi, iterations, seen, local, ring_end)
        # only the rows of the vertices in reach are ever written or read
        before = np.empty((nv, 3), np.float32)
        latest = np.empty((nv, 3), np.float32)
        for idx in range(ring_end[iterations]):
            v = local[idx]
            for c in range(3):
                before[v, c] = x[v, c]
                latest[v, c] = x[v, c]
        for it in range(iterations):
            # the range itself (local[:hi - lo] is lo:hi), then the rings still in reach
            for v in range(lo, hi):
                _update(v, before, latest, start, nbr, keep, pull, wall)
            for idx in range(hi - lo, ring_end[iterations - 1 - it]):
                _update(local[idx], before, latest, start, nbr, keep, pull, wall)
            before, latest = latest, before
        for v in range(lo, hi):
            for c in range(3):
                out[v, c] = latest[v, c]


def smooth(vertices: np.ndarray, triangles: np.ndarray, weights: np.ndarray, iterations: int,
           beta: float = 1.0, ranges: int | None = None, walls: np.ndarray | None = None) -> np.ndarray:
    """``iterations`` passes of weighted Laplacian smoothing (see the module docstring).

    Parameters
    ----------
    vertices : ndarray, shape (V, 3), float32, m
    triangles : ndarray, shape (T, 3), int -- closed and consistently oriented
    weights : ndarray, shape (V,), in [0, 1]
    iterations : int
    beta : float -- scales every weight (1: splashsurf's default)
    ranges : int, optional -- vertex ranges smoothed in parallel (default: one per thread); the result
        does not depend on it
    walls : ndarray, shape (V, 4), float32, optional -- for a vertex on a wall, the plane n . x = c of the
        wall under it (n, c), for the others -inf in the last column: a vertex off the walls sees a
        neighbour on a wall as its own mirror image in that wall (:mod:`engine.surface.solids`), so a
        liquid that meets a wall at a right angle keeps it

    Returns
    -------
    ndarray, shape (V, 3), float32, m (a new array)
    """
    x = np.ascontiguousarray(vertices, dtype=np.float32).reshape(-1, 3)
    if iterations <= 0 or len(x) == 0:
        return x.copy()
    start, nbr = neighbour_rings(triangles, len(x))
    w = beta * np.asarray(weights, np.float64)
    count = np.diff(start)
    keep = np.where(count > 0, 1.0 - w, 1.0).astype(np.float32)  # a vertex without neighbours stays
    pull = np.where(count > 0, w / np.maximum(count, 1), 0.0).astype(np.float32)
    ranges = max(1, min(int(ranges or numba.get_num_threads()), len(x)))
    bounds = np.linspace(0, len(x), ranges + 1).astype(np.int64)
    out = np.empty_like(x)
    wall = np.zeros((0, 4), np.float32) if walls is None else np.ascontiguousarray(walls, np.float32).reshape(-1, 4)
    if len(wall) not in (0, len(x)):
        raise ValueError(f"walls has {len(wall)} rows for {len(x)} vertices")
    _smooth_ranges(x, start, nbr, keep, pull, wall, bounds, int(iterations), out)
    return out
