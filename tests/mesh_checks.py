"""Slow reference checks of triangle meshes for the surface tests: self-intersection by brute force over a
bucket grid.

Two triangles that share no vertex intersect when an edge of one crosses the other (for triangles in
general position; coplanar overlaps, which marching cubes cannot make between non-adjacent
triangles, are not looked for). Each edge-triangle test is Möller & Trumbore 1997, "Fast, Minimum
Storage Ray/Triangle Intersection", restricted to the segment.
"""

import numpy as np
from numba import njit


@njit(inline="always", cache=True)
def _cross(a0, a1, a2, b0, b1, b2):
    return a1 * b2 - a2 * b1, a2 * b0 - a0 * b2, a0 * b1 - a1 * b0


@njit(cache=True)
def _segment_hits_triangle(p, q, a, b, c, eps):
    """True if the segment p-q crosses triangle abc (strictly inside, within ``eps`` of its barycentric
    bounds and of the segment's ends)."""
    d0, d1, d2 = q[0] - p[0], q[1] - p[1], q[2] - p[2]
    e10, e11, e12 = b[0] - a[0], b[1] - a[1], b[2] - a[2]
    e20, e21, e22 = c[0] - a[0], c[1] - a[1], c[2] - a[2]
    h0, h1, h2 = _cross(d0, d1, d2, e20, e21, e22)
    det = e10 * h0 + e11 * h1 + e12 * h2
    if abs(det) < 1e-30:
        return False  # parallel: no crossing in general position
    f = 1.0 / det
    s0, s1, s2 = p[0] - a[0], p[1] - a[1], p[2] - a[2]
    u = f * (s0 * h0 + s1 * h1 + s2 * h2)
    if u <= eps or u >= 1.0 - eps:
        return False
    q0, q1, q2 = _cross(s0, s1, s2, e10, e11, e12)
    v = f * (d0 * q0 + d1 * q1 + d2 * q2)
    if v <= eps or u + v >= 1.0 - eps:
        return False
    t = f * (e20 * q0 + e21 * q1 + e22 * q2)
    return eps < t < 1.0 - eps


@njit(cache=True)
def _count(v, t, order, bucket_start, bucket_of, nb, eps):
    hits = 0
    ntri = t.shape[0]
    for i in range(ntri):
        bi = bucket_of[i]
        bx, by, bz = bi // (nb[1] * nb[2]), (bi // nb[2]) % nb[1], bi % nb[2]
        for ox in range(-1, 2):
            for oy in range(-1, 2):
                for oz in range(-1, 2):
                    x, y, z = bx + ox, by + oy, bz + oz
                    if x < 0 or y < 0 or z < 0 or x >= nb[0] or y >= nb[1] or z >= nb[2]:
                        continue
                    b = (x * nb[1] + y) * nb[2] + z
                    for s in range(bucket_start[b], bucket_start[b + 1]):
                        j = order[s]
                        if j <= i:
                            continue
                        shared = False
                        for a in range(3):
                            for c in range(3):
                                if t[i, a] == t[j, c]:
                                    shared = True
                        if shared:
                            continue
                        crossed = False
                        for a in range(3):
                            p, q = v[t[i, a]], v[t[i, (a + 1) % 3]]
                            if _segment_hits_triangle(p, q, v[t[j, 0]], v[t[j, 1]], v[t[j, 2]], eps):
                                crossed = True
                            p, q = v[t[j, a]], v[t[j, (a + 1) % 3]]
                            if _segment_hits_triangle(p, q, v[t[i, 0]], v[t[i, 1]], v[t[i, 2]], eps):
                                crossed = True
                        if crossed:
                            hits += 1
    return hits


def self_intersections(vertices: np.ndarray, triangles: np.ndarray) -> int:
    """Number of pairs of triangles without a shared vertex that cross each other.

    Triangles are bucketed by centroid into cells of twice the longest triangle edge: a triangle lies
    within one edge length of its centroid, so every pair close enough to touch is in neighbouring
    buckets.
    """
    v = np.asarray(vertices, np.float64)
    t = np.asarray(triangles, np.int64)
    if len(t) < 2:
        return 0
    corners = v[t]
    size = 2.0 * float(np.linalg.norm(corners - np.roll(corners, 1, axis=1), axis=2).max())
    centroid = corners.mean(axis=1)
    lo = centroid.min(axis=0)
    cell = np.floor((centroid - lo) / size).astype(np.int64)
    nb = cell.max(axis=0) + 1
    bucket_of = (cell[:, 0] * nb[1] + cell[:, 1]) * nb[2] + cell[:, 2]
    order = np.argsort(bucket_of, kind="stable")
    bucket_start = np.searchsorted(bucket_of[order], np.arange(int(nb.prod()) + 1))
    return int(_count(v, t, order, bucket_start, bucket_of, nb, 1e-9))
