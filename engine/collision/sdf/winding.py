"""Generalised winding numbers: exact (a sum of solid angles) and fast (Barill et al. 2018).

The generalised winding number of Jacobson, Kavan & Sorkine-Hornung 2013 ("Robust Inside-Outside
Segmentation using Generalized Winding Numbers") is the sum of the signed solid angles of all
triangles over 4 pi: about 1 inside a closed outward-facing mesh and 0 outside, and well behaved
for holes, duplicated, overlapping, self-intersecting and non-manifold meshes.
:func:`winding_numbers` sums it exactly (filling and emitting liquid, :mod:`engine.sources.inflow`);
:func:`fast_winding_numbers` uses the hierarchy of Barill, Dickson, Schmidt, Levin & Jacobson 2018
(*Fast Winding Numbers for Soups and Clouds*, §3-4) described in :mod:`engine.collision.sdf`.
"""

from __future__ import annotations

import math
from typing import NamedTuple

import numpy as np
from numba import njit, prange

from ...scene import TriangleMesh

#: Fast winding numbers: a cluster farther than ``WINDING_BETA`` times its radius uses its
#: expansion (Barill et al. 2018 use 2).
WINDING_BETA = 2.0
_LEAF_SIZE = 8

_FOUR_PI = 4.0 * math.pi


class WindingTree(NamedTuple):
    """Bounding volume hierarchy with order-2 solid-angle expansions per cluster.

    Attributes
    ----------
    tri_xyz : ndarray, shape (T, 9), float64, metres
        Vertices of each triangle, in leaf order.
    node_int : ndarray, shape (K, 3), int32
        Per cluster: first child (the second is the next cluster; -1 for a leaf), and the range
        ``tri_xyz[start:end]`` of its triangles.
    node_data : ndarray, shape (K, 24), float64
        Per cluster, packed so one visit reads three cache lines: area-weighted centre p (m, 3),
        (beta r)^2 (m^2; the expansion is used beyond this squared distance from p), area vector
        N = sum a_t n_t (m^2, 3), S = sym(integral of n (x - p)^T dA) (m^3; xx, yy, zz, xy, xz, yz),
        C = the fully symmetrised integral of n (x - p)(x - p) dA (m^4; xxx, yyy, zzz, xxy, xxz,
        xyy, yyz, xzz, yzz, xyz), 1 unused.
    """

    tri_xyz: np.ndarray
    node_int: np.ndarray
    node_data: np.ndarray


@njit(cache=True)
def _build_hierarchy(centroid, leaf_size,
                     # outputs (order is also an input: the identity permutation)
                     order, node_int):
    """Median split along the longest axis of the centroids' box; returns the cluster count.

    Serial: O(T log^2 T), a fraction of a second for 10^5 triangles. Children get higher indices
    than their parent, so a reverse sweep visits children first.
    """
    stack = np.empty((128, 3), dtype=np.int64)
    stack[0, 0] = 0
    stack[0, 1] = order.shape[0]
    stack[0, 2] = 0
    sp = 1
    k = 1
    while sp > 0:
        sp -= 1
        s, e, node = stack[sp, 0], stack[sp, 1], stack[sp, 2]
        node_int[node, 1] = s
        node_int[node, 2] = e
        if e - s <= leaf_size:
            node_int[node, 0] = -1
            continue
        lo = np.full(3, np.inf)
        hi = np.full(3, -np.inf)
        for q in range(s, e):
            for a in range(3):
                v = centroid[order[q], a]
                lo[a] = min(lo[a], v)
                hi[a] = max(hi[a], v)
        axis = 0
        for a in range(1, 3):
            if hi[a] - lo[a] > hi[axis] - lo[axis]:
                axis = a
        sub = order[s:e].copy()
        keys = np.empty(e - s)
        for q in range(e - s):
            keys[q] = centroid[sub[q], axis]
        perm = np.argsort(keys, kind="mergesort")
        for q in range(e - s):
            order[s + q] = sub[perm[q]]
        mid = (s + e) // 2
        node_int[node, 0] = k
        stack[sp, 0], stack[sp, 1], stack[sp, 2] = s, mid, k
        stack[sp + 1, 0], stack[sp + 1, 1], stack[sp + 1, 2] = mid, e, k + 1
        sp += 2
        k += 2
    return k


@njit(cache=True)
def _cluster_moments(tri_xyz, node_int, beta,
                     # outputs
                     node_data):
    """Centre, opening radius and expansion moments of every cluster, straight from its triangles.

    Each cluster is summed over its own triangle range (O(T log T) in all; serial, since it takes a
    fraction of a second for 10^5 triangles and compiles much faster than a parallel loop); the
    radius is exact, since a loose bound would open clusters needlessly.
    Output: node_data (K, 24) float64, see :class:`WindingTree`.
    """
    for n in range(node_int.shape[0]):
        s, e = node_int[n, 1], node_int[n, 2]
        wsum = 0.0
        px = py = pz = 0.0
        for t in range(s, e):
            ux, uy, uz = tri_xyz[t, 3] - tri_xyz[t, 0], tri_xyz[t, 4] - tri_xyz[t, 1], tri_xyz[t, 5] - tri_xyz[t, 2]
            vx, vy, vz = tri_xyz[t, 6] - tri_xyz[t, 0], tri_xyz[t, 7] - tri_xyz[t, 1], tri_xyz[t, 8] - tri_xyz[t, 2]
            area = 0.5 * math.sqrt((uy * vz - uz * vy) ** 2 + (uz * vx - ux * vz) ** 2 + (ux * vy - uy * vx) ** 2)
            wsum += area
            px += area * (tri_xyz[t, 0] + tri_xyz[t, 3] + tri_xyz[t, 6]) / 3.0
            py += area * (tri_xyz[t, 1] + tri_xyz[t, 4] + tri_xyz[t, 7]) / 3.0
            pz += area * (tri_xyz[t, 2] + tri_xyz[t, 5] + tri_xyz[t, 8]) / 3.0
        if wsum > 0.0:
            px, py, pz = px / wsum, py / wsum, pz / wsum
        else:
            # only zero-area triangles: any of their points will do, they contribute nothing
            px, py, pz = tri_xyz[s, 0], tri_xyz[s, 1], tri_xyz[s, 2]
        m = np.zeros(24)
        p = np.array([px, py, pz])
        an = np.empty(3)       # area vector a n of one triangle
        c = np.empty(3)        # its centroid relative to p
        q = np.empty((3, 3))   # integral over it of (x - p)(x - p)^T dA / a
        r2 = 0.0
        for t in range(s, e):
            ux, uy, uz = tri_xyz[t, 3] - tri_xyz[t, 0], tri_xyz[t, 4] - tri_xyz[t, 1], tri_xyz[t, 5] - tri_xyz[t, 2]
            vx, vy, vz = tri_xyz[t, 6] - tri_xyz[t, 0], tri_xyz[t, 7] - tri_xyz[t, 1], tri_xyz[t, 8] - tri_xyz[t, 2]
            an[0] = 0.5 * (uy * vz - uz * vy)
            an[1] = 0.5 * (uz * vx - ux * vz)
            an[2] = 0.5 * (ux * vy - uy * vx)
            c[0] = (tri_xyz[t, 0] + tri_xyz[t, 3] + tri_xyz[t, 6]) / 3.0 - px
            c[1] = (tri_xyz[t, 1] + tri_xyz[t, 4] + tri_xyz[t, 7]) / 3.0 - py
            c[2] = (tri_xyz[t, 2] + tri_xyz[t, 5] + tri_xyz[t, 8]) / 3.0 - pz
            # over a flat triangle, (1/a) integral of (x - p)(x - p)^T dA is the centroid term plus
            # the triangle's own spread, sum over vertices of (v - c)(v - c)^T / 12
            for j in range(3):
                for k in range(3):
                    q[j, k] = c[j] * c[k]
            for v in range(3):
                for j in range(3):
                    dj = tri_xyz[t, 3 * v + j] - p[j] - c[j]
                    for k in range(3):
                        dk = tri_xyz[t, 3 * v + k] - p[k] - c[k]
                        q[j, k] += dj * dk / 12.0
                    r2 = max(r2, (tri_xyz[t, 3 * v] - px) ** 2 + (tri_xyz[t, 3 * v + 1] - py) ** 2
                             + (tri_xyz[t, 3 * v + 2] - pz) ** 2)
            for i in range(3):
                m[4 + i] += an[i]
            # S = sym(integral of n (x - p)^T dA) = sym(a n c^T); only the symmetric part meets the
            # symmetric Hessian of 1/|r|
            m[7] += an[0] * c[0]
            m[8] += an[1] * c[1]
            m[9] += an[2] * c[2]
            m[10] += 0.5 * (an[0] * c[1] + an[1] * c[0])
            m[11] += 0.5 * (an[0] * c[2] + an[2] * c[0])
            m[12] += 0.5 * (an[1] * c[2] + an[2] * c[1])
            # C_ijk = integral of n_i (x - p)_j (x - p)_k dA, fully symmetrised (it meets the fully
            # symmetric third derivative of 1/|r|): (C_ijk + C_jki + C_kij) / 3
            for slot in range(10):
                i, j, k = _SYM3[slot, 0], _SYM3[slot, 1], _SYM3[slot, 2]
                m[13 + slot] += (an[i] * q[j, k] + an[j] * q[k, i] + an[k] * q[i, j]) / 3.0
        m[0], m[1], m[2] = px, py, pz
        m[3] = beta * beta * r2
        for a in range(24):
            node_data[n, a] = m[a]


#: Index triples of the 10 independent components of a symmetric 3-tensor, in node_data order
#: (xxx, yyy, zzz, xxy, xxz, xyy, yyz, xzz, yzz, xyz).
_SYM3 = np.array([[0, 0, 0], [1, 1, 1], [2, 2, 2], [0, 0, 1], [0, 0, 2], [0, 1, 1], [1, 1, 2], [0, 2, 2],
                  [1, 2, 2], [0, 1, 2]], dtype=np.int64)


def build_winding_tree(mesh: TriangleMesh, beta: float = WINDING_BETA) -> WindingTree:
    """Cluster hierarchy for :func:`fast_winding_numbers`.

    Parameters
    ----------
    mesh : TriangleMesh
        At least one triangle.
    beta : float
        Accuracy: clusters are expanded only beyond ``beta`` times their radius (larger is more
        exact and slower; Barill et al. 2018 use 2).
    """
    tris = mesh.triangles
    t_count = tris.shape[0]
    xyz = mesh.vertices[tris].reshape(t_count, 9)
    centroid = xyz.reshape(t_count, 3, 3).mean(axis=1)
    order = np.arange(t_count, dtype=np.int64)
    node_int = np.empty((2 * t_count + 1, 3), dtype=np.int32)
    k = _build_hierarchy(centroid, _LEAF_SIZE, order, node_int)
    node_int = node_int[:k].copy()
    tri_xyz = np.ascontiguousarray(xyz[order])
    node_data = np.empty((k, 24))
    _cluster_moments(tri_xyz, node_int, float(beta), node_data)
    return WindingTree(tri_xyz, node_int, node_data)


@njit(cache=True)
def solid_angle(ax, ay, az, bx, by, bz, cx, cy, cz):
    """Signed solid angle of the triangle (a, b, c) seen from the origin, steradians (Van Oosterom &
    Strackee 1983, "The Solid Angle of a Plane Triangle", IEEE Trans. Biomed. Eng. 30(2));
    the vertices are given relative to the viewpoint. Positive when the triangle's normal (by the
    right-hand rule a -> b -> c) points away from the viewpoint."""
    la = math.sqrt(ax * ax + ay * ay + az * az)
    lb = math.sqrt(bx * bx + by * by + bz * bz)
    lc = math.sqrt(cx * cx + cy * cy + cz * cz)
    det = ax * (by * cz - bz * cy) - ay * (bx * cz - bz * cx) + az * (bx * cy - by * cx)
    den = (la * lb * lc + (ax * bx + ay * by + az * bz) * lc + (bx * cx + by * cy + bz * cz) * la
           + (cx * ax + cy * ay + cz * az) * lb)
    return 2.0 * math.atan2(det, den)


@njit(cache=True)
def _solid_angle(qx, qy, qz, t, tri_xyz):
    """:func:`solid_angle` of triangle t of a :class:`WindingTree` seen from q, steradians."""
    return solid_angle(tri_xyz[t, 0] - qx, tri_xyz[t, 1] - qy, tri_xyz[t, 2] - qz,
                       tri_xyz[t, 3] - qx, tri_xyz[t, 4] - qy, tri_xyz[t, 5] - qz,
                       tri_xyz[t, 6] - qx, tri_xyz[t, 7] - qy, tri_xyz[t, 8] - qz)


@njit(cache=True)
def _winding_at(qx, qy, qz, tri_xyz, node_int, node_data, stack):
    """Fast winding number at q; ``stack`` is scratch of length >= 2 * tree depth + 2."""
    total = 0.0
    stack[0] = 0
    sp = 1
    while sp > 0:
        sp -= 1
        n = stack[sp]
        rx = node_data[n, 0] - qx
        ry = node_data[n, 1] - qy
        rz = node_data[n, 2] - qz
        d2 = rx * rx + ry * ry + rz * rz
        if d2 > node_data[n, 3]:
            # Barill et al. 2018 eq. 10-13 to second order: the Taylor expansion of the dipole kernel
            # g(x) = (x - q) / |x - q|^3 about p, integrated over the cluster:
            # N . g + S : grad g + 1/2 C : grad grad g, with grad g = I/r^3 - 3 r r^T / r^5 and
            # grad grad g = 15 r r r / r^7 - 3 (I r + ...) / r^5
            inv2 = 1.0 / d2
            inv3 = inv2 * math.sqrt(inv2)
            ndot = node_data[n, 4] * rx + node_data[n, 5] * ry + node_data[n, 6] * rz
            sxx, syy, szz = node_data[n, 7], node_data[n, 8], node_data[n, 9]
            rsr = (sxx * rx * rx + syy * ry * ry + szz * rz * rz
                   + 2.0 * (node_data[n, 10] * rx * ry + node_data[n, 11] * rx * rz + node_data[n, 12] * ry * rz))
            cxxx, cyyy, czzz = node_data[n, 13], node_data[n, 14], node_data[n, 15]
            cxxy, cxxz, cxyy = node_data[n, 16], node_data[n, 17], node_data[n, 18]
            cyyz, cxzz, cyzz, cxyz = node_data[n, 19], node_data[n, 20], node_data[n, 21], node_data[n, 22]
            rrrc = (cxxx * rx * rx * rx + cyyy * ry * ry * ry + czzz * rz * rz * rz
                    + 3.0 * (cxxy * rx * rx * ry + cxxz * rx * rx * rz + cxyy * rx * ry * ry
                             + cyyz * ry * ry * rz + cxzz * rx * rz * rz + cyzz * ry * rz * rz)
                    + 6.0 * cxyz * rx * ry * rz)
            rt = (rx * (cxxx + cxyy + cxzz) + ry * (cxxy + cyyy + cyzz) + rz * (cxxz + cyyz + czzz))
            total += inv3 * (ndot + (sxx + syy + szz) - 3.0 * rsr * inv2
                             + inv2 * (7.5 * rrrc * inv2 - 4.5 * rt))
        elif node_int[n, 0] < 0:
            for t in range(node_int[n, 1], node_int[n, 2]):
                total += _solid_angle(qx, qy, qz, t, tri_xyz)
        else:
            stack[sp] = node_int[n, 0]
            stack[sp + 1] = node_int[n, 0] + 1
            sp += 2
    return total / _FOUR_PI


_STACK = 256  # a median-split tree of 2^31 triangles is 28 deep; 2 slots per level suffice


@njit(parallel=True, cache=True)
def fast_winding_kernel(points, tri_xyz, node_int, node_data,
                        # outputs
                        out_w):
    """Fast winding number of each point (Barill et al. 2018, order 2).

    points (P, 3) float32/float64, metres; the arrays of a :class:`WindingTree`;
    Output: out_w (P,) float64, dimensionless.
    """
    n = points.shape[0]
    chunk = 256
    for c in prange((n + chunk - 1) // chunk):
        stack = np.empty(_STACK, dtype=np.int64)  # one per chunk, not per point
        for i in range(c * chunk, min(n, (c + 1) * chunk)):
            out_w[i] = _winding_at(np.float64(points[i, 0]), np.float64(points[i, 1]), np.float64(points[i, 2]),
                                   tri_xyz, node_int, node_data, stack)


def fast_winding_numbers(mesh: TriangleMesh, points: np.ndarray, tree: WindingTree | None = None) -> np.ndarray:
    """Generalised winding numbers by the fast hierarchical approximation.

    Parameters
    ----------
    mesh : TriangleMesh
        At least one triangle.
    points : ndarray, shape (P, 3), float64, metres
    tree : WindingTree, optional
        From :func:`build_winding_tree`, to reuse across calls.

    Returns
    -------
    ndarray, shape (P,), float64: ~1 inside a closed outward-facing mesh, ~0 outside; close to the
    exact sum :func:`winding_numbers` (see :mod:`engine.collision.sdf` for the error).
    """
    pts = np.ascontiguousarray(points, dtype=np.float64).reshape(-1, 3)
    if tree is None:
        tree = build_winding_tree(mesh)
    out = np.empty(pts.shape[0])
    fast_winding_kernel(pts, *tree, out)
    return out

@njit(parallel=True, cache=True)
def exact_winding_kernel(points, verts, tris,
                         # outputs
                         out_w):
    """Exact generalised winding number of each point: the sum over all triangles of
    :func:`solid_angle` over 4 pi (O(P T); a reference and a tool for small meshes).

    points (P, 3) float64, metres; verts (V, 3) float64, metres; tris (T, 3) int32;
    Output: out_w (P,) float64, dimensionless.
    """
    for i in prange(points.shape[0]):
        px, py, pz = points[i, 0], points[i, 1], points[i, 2]
        total = 0.0
        for t in range(tris.shape[0]):
            a, b, c = tris[t, 0], tris[t, 1], tris[t, 2]
            total += solid_angle(verts[a, 0] - px, verts[a, 1] - py, verts[a, 2] - pz,
                                 verts[b, 0] - px, verts[b, 1] - py, verts[b, 2] - pz,
                                 verts[c, 0] - px, verts[c, 1] - py, verts[c, 2] - pz)
        out_w[i] = total / _FOUR_PI


def winding_numbers(points: np.ndarray, mesh: TriangleMesh) -> np.ndarray:
    """Generalised winding number of each point with respect to the mesh, summed exactly over all
    triangles (Jacobson, Kavan & Sorkine-Hornung 2013, "Robust Inside-Outside Segmentation using
    Generalized Winding Numbers").

    Parameters
    ----------
    points : ndarray, shape (P, 3), float64, metres
    mesh : TriangleMesh

    Returns
    -------
    ndarray, shape (P,), float64: ~1 inside a closed outward-facing mesh, ~0 outside.
    """
    pts = np.ascontiguousarray(points, dtype=np.float64).reshape(-1, 3)
    out = np.empty(pts.shape[0], dtype=np.float64)
    exact_winding_kernel(pts, mesh.vertices, mesh.triangles, out)
    return out
