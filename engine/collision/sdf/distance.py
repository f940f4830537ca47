"""Exact point-triangle distances (Ericson 2004, *Real-Time Collision Detection* §5.1.5).

Geometry and winding helpers are plain @njit rather than inline='always': inlining everything at
the numba-IR level into the parallel loops would double the distance-grid build's compile time for
no faster winding numbers (LLVM still inlines small scalar calls). The sampling helpers
(:mod:`engine.collision.sdf.query`) are inlined: there a call per point costs the reference counting
of the array arguments.
"""

from __future__ import annotations

import numpy as np
from numba import njit


@njit(cache=True)
def _segment_d2(px, py, pz, ax, ay, az, bx, by, bz):
    """Squared distance from p to segment ab (a point when a == b)."""
    ex, ey, ez = bx - ax, by - ay, bz - az
    wx, wy, wz = px - ax, py - ay, pz - az
    ee = ex * ex + ey * ey + ez * ez
    s = 0.0
    if ee > 0.0:
        s = (wx * ex + wy * ey + wz * ez) / ee
        s = min(max(s, 0.0), 1.0)
    dx, dy, dz = wx - s * ex, wy - s * ey, wz - s * ez
    return dx * dx + dy * dy + dz * dz


@njit(cache=True)
def _triangle_d2(px, py, pz, ax, ay, az, bx, by, bz, cx, cy, cz):
    """Squared distance from p to triangle abc (Ericson 2004 §5.1.5, Voronoi regions).

    Divisions are guarded so zero-area triangles (repeated or collinear vertices) fall back to the
    distance to their edges instead of producing NaN.
    """
    abx, aby, abz = bx - ax, by - ay, bz - az
    acx, acy, acz = cx - ax, cy - ay, cz - az
    apx, apy, apz = px - ax, py - ay, pz - az
    d1 = abx * apx + aby * apy + abz * apz
    d2 = acx * apx + acy * apy + acz * apz
    if d1 <= 0.0 and d2 <= 0.0:  # vertex a
        return apx * apx + apy * apy + apz * apz
    bpx, bpy, bpz = px - bx, py - by, pz - bz
    d3 = abx * bpx + aby * bpy + abz * bpz
    d4 = acx * bpx + acy * bpy + acz * bpz
    if d3 >= 0.0 and d4 <= d3:  # vertex b
        return bpx * bpx + bpy * bpy + bpz * bpz
    cpx, cpy, cpz = px - cx, py - cy, pz - cz
    d5 = abx * cpx + aby * cpy + abz * cpz
    d6 = acx * cpx + acy * cpy + acz * cpz
    if d6 >= 0.0 and d5 <= d6:  # vertex c
        return cpx * cpx + cpy * cpy + cpz * cpz
    vc = d1 * d4 - d3 * d2
    vb = d5 * d2 - d1 * d6
    va = d3 * d6 - d5 * d4
    if vc <= 0.0 and d1 >= 0.0 and d3 <= 0.0:  # edge ab
        return _segment_d2(px, py, pz, ax, ay, az, bx, by, bz)
    if vb <= 0.0 and d2 >= 0.0 and d6 <= 0.0:  # edge ac
        return _segment_d2(px, py, pz, ax, ay, az, cx, cy, cz)
    if va <= 0.0 and d4 - d3 >= 0.0 and d5 - d6 >= 0.0:  # edge bc
        return _segment_d2(px, py, pz, bx, by, bz, cx, cy, cz)
    den = va + vb + vc
    if not den > 0.0:
        # zero-area triangle: every region test is degenerate, its edges are the whole triangle
        e0 = _segment_d2(px, py, pz, ax, ay, az, bx, by, bz)
        e1 = _segment_d2(px, py, pz, bx, by, bz, cx, cy, cz)
        e2 = _segment_d2(px, py, pz, cx, cy, cz, ax, ay, az)
        return min(e0, min(e1, e2))
    v = vb / den
    w = vc / den
    qx = apx - v * abx - w * acx
    qy = apy - v * aby - w * acy
    qz = apz - v * abz - w * acz
    return qx * qx + qy * qy + qz * qz


@njit(cache=True)
def triangle_distances_kernel(points, verts, tris, tri_index,
                              # outputs
                              out_d2):
    """Squared distance from each point to one given triangle of the mesh (serial: a helper for
    tests and tools, e.g. checking ``block_tri``).

    points (P, 3) float64, verts (V, 3) float64, tris (T, 3) int32, tri_index (P,) int32;
    Output: out_d2 (P,) float64, m^2 (inf where tri_index < 0).
    """
    for i in range(points.shape[0]):
        t = tri_index[i]
        if t < 0:
            out_d2[i] = np.inf
            continue
        a, b, c = tris[t, 0], tris[t, 1], tris[t, 2]
        out_d2[i] = _triangle_d2(points[i, 0], points[i, 1], points[i, 2],
                                 verts[a, 0], verts[a, 1], verts[a, 2],
                                 verts[b, 0], verts[b, 1], verts[b, 2],
                                 verts[c, 0], verts[c, 1], verts[c, 2])
