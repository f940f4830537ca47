"""Narrow-band signed distance grids from triangle meshes.

Seed ``004_c098f18fca6bfc80.txt`` §4 (VDB collision fields): a distance field is stored only in a
narrow band around the surface, with the index of the closest triangle kept beside the distance
(so a velocity or friction field can later be read off the closest primitive), in one of three
modes:

``'SOLID_INSIDE'``
    The inside of the mesh is solid (an obstacle): ``phi < 0`` inside.
``'SOLID_OUTSIDE'``
    The outside of the mesh is solid (an inside-out container, seed ``002``): ``phi < 0`` outside.
``'SHELL'``
    The surface itself is solid (open sheets, single-sided cups): ``phi = |d| - thickness``.

In every mode ``phi`` is the distance to the solid minus ``thickness``, so ``thickness`` inflates
the solid by that much on every side (a sheet in SHELL mode becomes a slab ``2 thickness`` thick).

Storage
-------
Grid nodes sit at ``origin + (i, j, k) * cell_size``. Nodes are grouped into blocks of 8^3; a block
exists only if one of its nodes lies within ``band + sqrt(3) cell_size`` of the surface, so memory
follows the surface area, not the bounding box. Blocks are kept in the ascending order of the 64-bit
Morton key of their block coordinates (as in :mod:`engine.neighbors`); queries find them through a
three-level index in the spirit of VDB (Museth 2013) rather than a binary search: a dense int32
table with one entry per *tile* of 8^3 blocks (64^3 cells, so 4 bytes per 262144 cells), and for
each tile the band passes through (a number that follows the surface area) a table of its 512
blocks holding the block's row. Entries without a block hold the side instead (-1 for phi > 0, -2
for phi < 0): a tile without stored blocks has no surface inside it, so one side serves it all.

Every point within ``band`` of the surface has all eight corners of its cell stored and is
interpolated trilinearly; the gradient returned is the exact gradient of that interpolant.
Anything farther answers "far" (``+band`` outside, ``-band`` inside, minus ``thickness``), the
side read from a stored corner of its cell or else from the index.

Distances
---------
At every stored node the distance is exact to the mesh (closest point on a triangle by Voronoi
regions of its vertices, edges and face, Ericson 2004, *Real-Time Collision Detection* §5.1.5),
computed by "rasterising" each triangle into the nodes of its band-dilated bounding box. Blocks are
processed in parallel and each block owns its nodes, so nothing is scattered across threads.

Sign
----
The side is the generalised winding number w (Jacobson, Kavan & Sorkine-Hornung 2013): the sum of
the signed solid angles of all triangles over 4 pi, about 1 inside a closed outward-facing mesh and
0 outside, and well behaved for holes, duplicated, overlapping, self-intersecting and
non-manifold meshes. A node is inside when ``|w| > 1/2`` (so a mesh whose normals all point inward
still reads as solid, and overlapping copies, w = 2, stay solid).

w is evaluated with the fast winding numbers of Barill, Dickson, Schmidt, Levin & Jacobson 2018
(*Fast Winding Numbers for Soups and Clouds*, §3-4): a bounding volume hierarchy over the triangles
(median splits, leaves of at most 8 triangles) stores per cluster its area-weighted centre p, exact
radius r, and the moments of the Taylor expansion of the dipole kernel g(x) = (x - q)/|x - q|^3
about p, integrated over the cluster's flat triangles::

    N = sum a_t n_t,   S = sym(sum a_t n_t (c_t - p)^T),
    C = sym3(sum a_t n_t [(c_t - p)(c_t - p)^T + sum_v (v - c_t)(v - c_t)^T / 12])

so that a cluster with |p - q| > beta r contributes, with r_q = p - q and r = |r_q|::

    4 pi w_c = N.r_q / r^3 + tr(S) / r^3 - 3 r_q.S.r_q / r^5 + 15/2 C:r_q r_q r_q / r^7 - 9/2 r_q.tr(C) / r^5

(Barill et al.'s three-term expansion; tr(C)_k = sum_i C_iik); nearer clusters are opened down
to leaves, whose triangles are summed exactly (Van Oosterom & Strackee 1983). With ``beta = 2``
the error against the exact sum (:func:`engine.emit.winding_numbers`), measured on 2k-100k-triangle
spheres, tori and a sphere with a hole, is at most 0.0073 and 0.001 on average
(``tests/test_sdf.py`` holds it below 0.01). The side can therefore only come out wrong where the
exact w is itself within 0.01 of 1/2, i.e. on the "virtual surface" spanning a hole, where neither
side is right. Inside the band, w is evaluated at about half of the nodes and copied to the others
across grid edges the surface cannot cross (see :func:`_block_windings`); the index takes one
evaluation per empty tile and per empty block of the other tiles, at their centres.

Cost (``bench/bench_sdf.py``, a shared 2-core machine): a 100k-triangle torus at 1/200 of its
extent (1.6M stored nodes, 12 MiB) builds in about 5 s of CPU, a little more than half of it
winding numbers; sampling costs ~65 ns per point for Morton-sorted queries near the surface.
"""

from __future__ import annotations

import hashlib
import math
import zipfile
from typing import NamedTuple

import numpy as np
from numba import njit, prange

from . import atomic
from .budget import available_memory
from .errors import CacheFormatError, InvalidSceneError, InvalidSettingsError
from .neighbors import morton_key
from .scene import TriangleMesh

#: Distance-field modes (see the module docstring).
MODES = ("SOLID_INSIDE", "SOLID_OUTSIDE", "SHELL")

#: Version of the on-disk format and of everything that shapes a grid's values; part of
#: :func:`sdf_key`, so a change in the method invalidates cached grids.
SDF_FORMAT_VERSION = 1

#: Nodes per block edge (8^3 = 512 nodes per block) and its log2.
BLOCK = 8
_BLOCK_SHIFT = 3
BLOCK_NODES = BLOCK ** 3

#: Fast winding numbers: a cluster farther than ``WINDING_BETA`` times its radius uses its
#: expansion (Barill et al. 2018 use 2).
WINDING_BETA = 2.0
_LEAF_SIZE = 8

#: Block coordinates must fit the 21 bits per axis of a 64-bit Morton key.
_MAX_BLOCK_COORD = (1 << 21) - 1

_FOUR_PI = 4.0 * math.pi


class SignedDistanceGrid(NamedTuple):
    """A narrow-band distance field in the mesh's own space.

    Attributes
    ----------
    name : str
        Object name, for messages.
    mode : str
        One of :data:`MODES`.
    cell_size : float
        Node spacing, metres.
    band : float
        Half-width of the band of exact distances around the surface, metres (at least
        ``thickness + 2 cell_size``; farther queries answer "far").
    thickness : float
        Surface offset subtracted from every distance, metres.
    outside_sign : float
        Sign of ``phi`` far from the mesh: +1 for SOLID_INSIDE and SHELL, -1 for SOLID_OUTSIDE.
    origin : ndarray, shape (3,), float64, metres
        Position of node (0, 0, 0).
    block_coord : ndarray, shape (B, 3), int32
        Block coordinates; block b holds nodes ``8 block_coord[b] + (0..7)``.
    block_key : ndarray, shape (B,), uint64
        Morton key of each block, ascending.
    block_phi : ndarray, shape (B, 512), float32, metres
        ``phi`` at the nodes of each block, local node ``(a * 8 + b) * 8 + c``.
    block_tri : ndarray, shape (B, 512), int32
        Closest triangle of each node, -1 where none is within ``band + sqrt(3) cell_size`` (such
        nodes hold that distance, clamped).
    tile_index : ndarray, shape (NX, NY, NZ), int32
        Per tile of 8^3 blocks covering the bounding box dilated by the band: its row in
        ``tile_block``, or the side of the whole tile (-1: phi > 0, -2: phi < 0) when no block is
        stored in it. Beyond the table the side is ``outside_sign``.
    tile_block : ndarray, shape (M, 512), int32
        Per tile with stored blocks, per local block ``(a * 8 + b) * 8 + c``: the block's row in
        ``block_phi``, or its side (-1 / -2) when it is not stored.
    """

    name: str
    mode: str
    cell_size: float
    band: float
    thickness: float
    outside_sign: float
    origin: np.ndarray
    block_coord: np.ndarray
    block_key: np.ndarray
    block_phi: np.ndarray
    block_tri: np.ndarray
    tile_index: np.ndarray
    tile_block: np.ndarray


_ARRAY_FIELDS = ("origin", "block_coord", "block_key", "block_phi", "block_tri", "tile_index", "tile_block")
_ARRAY_DTYPES = {"origin": np.float64, "block_coord": np.int32, "block_key": np.uint64,
                 "block_phi": np.float32, "block_tri": np.int32, "tile_index": np.int32, "tile_block": np.int32}

#: Side codes in ``tile_index`` and ``tile_block`` for places without a stored block.
_SIDE_POSITIVE = -1
_SIDE_NEGATIVE = -2


def grid_nbytes(grid: SignedDistanceGrid) -> int:
    """Bytes held by all arrays of ``grid``."""
    return int(sum(getattr(grid, f).nbytes for f in _ARRAY_FIELDS))


def kernel_args(grid: SignedDistanceGrid) -> tuple:
    """The arguments :func:`sample_point` and :func:`sample_kernel` take after the point(s).

    Returns ``(origin, inv_h, block_phi, block_tri, tile_index, tile_block, far, thickness,
    outside_sign)``, plain arrays and floats a solver can pass into its own numba kernels.
    """
    return (grid.origin, 1.0 / grid.cell_size, grid.block_phi, grid.block_tri, grid.tile_index, grid.tile_block,
            float(grid.band), float(grid.thickness), float(grid.outside_sign))


# ---------------------------------------------------------------------------------------------
# Geometry helpers
#
# Geometry and winding helpers are plain @njit rather than inline='always': inlining everything at
# the numba-IR level into the parallel loops made this module compile in ~45 s instead of ~20 s,
# and measured no faster for the winding numbers (LLVM still inlines small scalar calls). The
# sampling helpers are inlined: there a call per point (reference counting of the array
# arguments) made sampling ~1.7x slower.
# ---------------------------------------------------------------------------------------------

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


# ---------------------------------------------------------------------------------------------
# Fast winding numbers (Barill et al. 2018)
# ---------------------------------------------------------------------------------------------

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
def _solid_angle(qx, qy, qz, t, tri_xyz):
    """Signed solid angle of triangle t seen from q (Van Oosterom & Strackee 1983), steradians."""
    ax, ay, az = tri_xyz[t, 0] - qx, tri_xyz[t, 1] - qy, tri_xyz[t, 2] - qz
    bx, by, bz = tri_xyz[t, 3] - qx, tri_xyz[t, 4] - qy, tri_xyz[t, 5] - qz
    cx, cy, cz = tri_xyz[t, 6] - qx, tri_xyz[t, 7] - qy, tri_xyz[t, 8] - qz
    la = math.sqrt(ax * ax + ay * ay + az * az)
    lb = math.sqrt(bx * bx + by * by + bz * bz)
    lc = math.sqrt(cx * cx + cy * cy + cz * cz)
    det = ax * (by * cz - bz * cy) - ay * (bx * cz - bz * cx) + az * (bx * cy - by * cx)
    den = (la * lb * lc + (ax * bx + ay * by + az * bz) * lc + (bx * cx + by * cy + bz * cz) * la
           + (cx * ax + cy * ay + cz * az) * lb)
    return 2.0 * math.atan2(det, den)


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
    exact sum :func:`engine.emit.winding_numbers` (see the module docstring for the error).
    """
    pts = np.ascontiguousarray(points, dtype=np.float64).reshape(-1, 3)
    if tree is None:
        tree = build_winding_tree(mesh)
    out = np.empty(pts.shape[0])
    fast_winding_kernel(pts, *tree, out)
    return out


# ---------------------------------------------------------------------------------------------
# Building the grid
# ---------------------------------------------------------------------------------------------

@njit(cache=True)
def _node_range(lo, hi, origin, inv_h, pad):
    """Node indices i with origin + i h in [lo - pad, hi + pad]."""
    i0 = np.int64(math.ceil((lo - pad - origin) * inv_h))
    i1 = np.int64(math.floor((hi + pad - origin) * inv_h))
    return max(i0, 0), i1


@njit(inline="always", cache=True)
def _block_near_plane(bi, bj, bk, plane, origin, h, reach):
    """Whether block (bi, bj, bk) has a node within ``reach`` of the triangle's plane.

    Culls the blocks of a large tilted triangle's bounding box that its band never touches (a
    two-triangle ramp would otherwise fill its whole box). Zero-area triangles have a zero plane
    and keep every block.
    """
    half = 0.5 * (BLOCK - 1) * h
    s = (plane[0] * (origin[0] + (bi * BLOCK) * h + half) + plane[1] * (origin[1] + (bj * BLOCK) * h + half)
         + plane[2] * (origin[2] + (bk * BLOCK) * h + half) - plane[3])
    r = (abs(plane[0]) + abs(plane[1]) + abs(plane[2])) * half
    return abs(s) - r <= reach


@njit(parallel=True, cache=True)
def _count_tri_blocks(tri_lo, tri_hi, tri_plane, origin, h, pad,
                      # outputs
                      out_count):
    """Blocks near each triangle: in its box dilated by ``pad`` and within ``pad`` of its plane.
    Output: out_count (T,) int64."""
    inv_h = 1.0 / h
    for t in prange(tri_lo.shape[0]):
        i0, i1 = _node_range(tri_lo[t, 0], tri_hi[t, 0], origin[0], inv_h, pad)
        j0, j1 = _node_range(tri_lo[t, 1], tri_hi[t, 1], origin[1], inv_h, pad)
        k0, k1 = _node_range(tri_lo[t, 2], tri_hi[t, 2], origin[2], inv_h, pad)
        c = np.int64(0)
        for bi in range(i0 >> _BLOCK_SHIFT, (i1 >> _BLOCK_SHIFT) + 1):
            for bj in range(j0 >> _BLOCK_SHIFT, (j1 >> _BLOCK_SHIFT) + 1):
                for bk in range(k0 >> _BLOCK_SHIFT, (k1 >> _BLOCK_SHIFT) + 1):
                    if _block_near_plane(bi, bj, bk, tri_plane[t], origin, h, pad):
                        c += 1
        out_count[t] = c


@njit(parallel=True, cache=True)
def _fill_tri_blocks(tri_lo, tri_hi, tri_plane, origin, h, pad, offsets,
                     # outputs
                     out_key, out_tri):
    """(block key, triangle) pairs of :func:`_count_tri_blocks`, each triangle writing only its
    own slice ``offsets[t]:...``. Outputs: out_key (N,) uint64, out_tri (N,) int32."""
    inv_h = 1.0 / h
    for t in prange(tri_lo.shape[0]):
        i0, i1 = _node_range(tri_lo[t, 0], tri_hi[t, 0], origin[0], inv_h, pad)
        j0, j1 = _node_range(tri_lo[t, 1], tri_hi[t, 1], origin[1], inv_h, pad)
        k0, k1 = _node_range(tri_lo[t, 2], tri_hi[t, 2], origin[2], inv_h, pad)
        q = offsets[t]
        for bi in range(i0 >> _BLOCK_SHIFT, (i1 >> _BLOCK_SHIFT) + 1):
            for bj in range(j0 >> _BLOCK_SHIFT, (j1 >> _BLOCK_SHIFT) + 1):
                for bk in range(k0 >> _BLOCK_SHIFT, (k1 >> _BLOCK_SHIFT) + 1):
                    if _block_near_plane(bi, bj, bk, tri_plane[t], origin, h, pad):
                        out_key[q] = morton_key(bi, bj, bk)
                        out_tri[q] = t
                        q += 1


@njit(parallel=True, cache=True)
def _block_distances(block_coord, cand_start, cand_tri, verts, tris, tri_lo, tri_hi, tri_plane, tri_sphere,
                     origin, h, reach,
                     # outputs
                     out_d, out_tri):
    """Exact distance to the nearest candidate triangle at every node of every block.

    Each block owns its 512 nodes, so nothing is shared between threads. The caller orders each
    block's candidates nearest first (see :func:`build_sdf`), so the running minimum shrinks early
    and two cheap lower bounds (distance to the triangle's plane, distance to its bounding sphere)
    skip most of the exact tests. Ties between triangles go to the one visited first, which depends
    only on the mesh, not on the thread count.
    Outputs: out_d (B, 512) float64, metres (``reach`` where nothing is nearer); out_tri (B, 512) int32.
    """
    inv_h = 1.0 / h
    for b in prange(block_coord.shape[0]):
        best = np.full(BLOCK_NODES, reach * reach)
        best_t = np.full(BLOCK_NODES, -1, dtype=np.int32)
        bi = np.int64(block_coord[b, 0]) << _BLOCK_SHIFT
        bj = np.int64(block_coord[b, 1]) << _BLOCK_SHIFT
        bk = np.int64(block_coord[b, 2]) << _BLOCK_SHIFT
        for q in range(cand_start[b], cand_start[b + 1]):
            t = cand_tri[q]
            i0, i1 = _node_range(tri_lo[t, 0], tri_hi[t, 0], origin[0], inv_h, reach)
            j0, j1 = _node_range(tri_lo[t, 1], tri_hi[t, 1], origin[1], inv_h, reach)
            k0, k1 = _node_range(tri_lo[t, 2], tri_hi[t, 2], origin[2], inv_h, reach)
            i0, i1 = max(i0 - bi, 0), min(i1 - bi, BLOCK - 1)
            j0, j1 = max(j0 - bj, 0), min(j1 - bj, BLOCK - 1)
            k0, k1 = max(k0 - bk, 0), min(k1 - bk, BLOCK - 1)
            va, vb, vc = tris[t, 0], tris[t, 1], tris[t, 2]
            ax, ay, az = verts[va, 0], verts[va, 1], verts[va, 2]
            bx, by, bz = verts[vb, 0], verts[vb, 1], verts[vb, 2]
            cx, cy, cz = verts[vc, 0], verts[vc, 1], verts[vc, 2]
            nx, ny, nz, off = tri_plane[t, 0], tri_plane[t, 1], tri_plane[t, 2], tri_plane[t, 3]
            sx, sy, sz, sr = tri_sphere[t, 0], tri_sphere[t, 1], tri_sphere[t, 2], tri_sphere[t, 3]
            for li in range(i0, i1 + 1):
                px = origin[0] + (bi + li) * h
                for lj in range(j0, j1 + 1):
                    py = origin[1] + (bj + lj) * h
                    for lk in range(k0, k1 + 1):
                        pz = origin[2] + (bk + lk) * h
                        m = (li * BLOCK + lj) * BLOCK + lk
                        bm = best[m]
                        # lower bounds first: the plane (zero-area triangles have a zero plane
                        # and never skip here) and the bounding sphere
                        s = nx * px + ny * py + nz * pz - off
                        if s * s >= bm:
                            continue
                        ex, ey, ez = px - sx, py - sy, pz - sz
                        e2 = ex * ex + ey * ey + ez * ez
                        if e2 > sr * sr:
                            g = math.sqrt(e2) - sr
                            if g * g >= bm:
                                continue
                        d2 = _triangle_d2(px, py, pz, ax, ay, az, bx, by, bz, cx, cy, cz)
                        if d2 < bm:
                            best[m] = d2
                            best_t[m] = t
        for m in range(BLOCK_NODES):
            out_d[b, m] = math.sqrt(best[m])
            out_tri[b, m] = best_t[m]


@njit(parallel=True, cache=True)
def _block_windings(block_coord, block_d, origin, h, tri_xyz, node_int, node_data,
                    # outputs
                    out_w):
    """Winding number at every node of every block, evaluated only where it can differ.

    Nodes with even local (i, j, k) are always evaluated. Any other node n takes the value of the
    even node e = (i & ~1, j & ~1, k & ~1) of its 2x2x2 cube when its distance to the surface exceeds
    |n - e| + h/2 (|n - e| is h, sqrt(2) h or sqrt(3) h): the segment from n to e cannot reach the
    surface, so both are on the same side of a closed surface (w only jumps across the surface; near
    a hole it varies smoothly, and the copy moves the w = 1/2 level by at most sqrt(3) h). The extra
    h/2 keeps e itself off the surface, where w is 1/2 and says nothing. This evaluates about half
    of the nodes of a typical band.
    Output: out_w (B, 512) float64 (copied nodes hold the value of their even node).
    """
    for b in prange(block_coord.shape[0]):
        stack = np.empty(_STACK, dtype=np.int64)
        bi = np.int64(block_coord[b, 0]) << _BLOCK_SHIFT
        bj = np.int64(block_coord[b, 1]) << _BLOCK_SHIFT
        bk = np.int64(block_coord[b, 2]) << _BLOCK_SHIFT
        for li in range(BLOCK):
            for lj in range(BLOCK):
                for lk in range(BLOCK):
                    m = (li * BLOCK + lj) * BLOCK + lk
                    odd = (li & 1) + (lj & 1) + (lk & 1)
                    if odd > 0 and block_d[b, m] > (math.sqrt(odd) + 0.5) * h:
                        continue
                    out_w[b, m] = _winding_at(origin[0] + (bi + li) * h, origin[1] + (bj + lj) * h,
                                              origin[2] + (bk + lk) * h, tri_xyz, node_int, node_data, stack)
        for li in range(BLOCK):
            for lj in range(BLOCK):
                for lk in range(BLOCK):
                    m = (li * BLOCK + lj) * BLOCK + lk
                    odd = (li & 1) + (lj & 1) + (lk & 1)
                    if odd > 0 and block_d[b, m] > (math.sqrt(odd) + 0.5) * h:
                        out_w[b, m] = out_w[b, ((li & 6) * BLOCK + (lj & 6)) * BLOCK + (lk & 6)]


def _check_inputs(mesh, cell_size, band, mode, thickness, name):
    problems = []
    for label, value in (("cell size", cell_size), ("band", band)):
        if not (np.isfinite(value) and value > 0):
            problems.append(f"Collider '{name}': the distance-field {label} must be a positive number of "
                            f"metres, got {value!r}")
    if not (np.isfinite(thickness) and thickness >= 0):
        problems.append(f"Collider '{name}': the thickness must be zero or a positive number of metres, "
                        f"got {thickness!r}")
    if mode not in MODES:
        problems.append(f"Collider '{name}': unknown distance-field mode {mode!r}; use one of "
                        f"{', '.join(MODES)}")
    if problems:
        raise InvalidSettingsError(problems)
    if mesh.triangles.shape[0] == 0:
        raise InvalidSceneError(f"Collider '{name}' has no faces")
    if not np.all(np.isfinite(mesh.vertices)):
        raise InvalidSceneError(f"Collider '{name}' has non-finite vertex coordinates")
    if mesh.triangles.min() < 0 or mesh.triangles.max() >= mesh.vertices.shape[0]:
        raise InvalidSceneError(f"Collider '{name}' has faces that refer to missing vertices")


def build_sdf(mesh: TriangleMesh, cell_size: float, band: float, name: str = "Collider", *,
              mode: str = "SOLID_INSIDE", thickness: float = 0.0,
              memory: int | None = None) -> SignedDistanceGrid:
    """Sample the distance field of a mesh on a sparse narrow-band grid.

    Parameters
    ----------
    mesh : TriangleMesh
        Vertices in the object's own space (metres); the caller applies the object transform to the
        query points. May be open, non-manifold, self-intersecting or contain duplicates.
    cell_size : float
        Node spacing, metres.
    band : float
        Distances are exact within this distance of the surface, metres. Widened to at least
        ``thickness + 2 cell_size`` so the offset surface and its neighbourhood are always inside.
    name : str
        Object name used in error messages.
    mode : {'SOLID_INSIDE', 'SOLID_OUTSIDE', 'SHELL'}
        Which side is solid (see the module docstring).
    thickness : float
        Surface offset, metres, subtracted from every distance (half the slab thickness in SHELL).
    memory : int, optional
        Bytes available; defaults to the free physical memory. The build refuses to use more than
        half of it.

    Returns
    -------
    SignedDistanceGrid

    Raises
    ------
    InvalidSceneError
        The mesh has no faces, non-finite vertices or bad indices, or the grid would not fit in memory.
    InvalidSettingsError
        Non-positive cell size or band, negative thickness, unknown mode.
    """
    _check_inputs(mesh, cell_size, band, mode, thickness, name)
    h = float(cell_size)
    band = max(float(band), float(thickness) + 2.0 * h)
    # a point within `band` of the surface has every corner of its cell within `reach`
    reach = band + math.sqrt(3.0) * h
    memory = available_memory() if memory is None else int(memory)
    budget = memory // 2

    verts, tris = mesh.vertices, mesh.triangles
    xyz = verts[tris]                                   # (T, 3, 3)
    tri_lo, tri_hi = xyz.min(axis=1), xyz.max(axis=1)
    lo, hi = tri_lo.min(axis=0), tri_hi.max(axis=0)
    # node 0 lies one cell outside the dilated bounding box, so every node index used is >= 0
    origin = lo - (math.ceil(reach / h) + 1) * h
    n_nodes = np.floor((hi + reach - origin) / h).astype(np.int64) + 2
    n_tiles = (n_nodes >> (2 * _BLOCK_SHIFT)) + 1
    if np.any(n_tiles * BLOCK > _MAX_BLOCK_COORD):
        raise InvalidSceneError(f"Collider '{name}' is {np.max(hi - lo):.4g} m across, more than "
                                f"{_MAX_BLOCK_COORD * BLOCK} cells of {h:g} m; increase the cell size")
    # one int32 per tile, plus its centre and winding number (32 B) while building
    if int(np.prod(n_tiles)) * 36 > budget:
        raise _too_big(name, h, int(np.prod(n_tiles)) * 36, memory)

    # plane of each triangle (unit normal, offset) to cull blocks and, in the distance
    # pass, nodes: the distance to it is a cheap lower bound
    cross = np.cross(xyz[:, 1] - xyz[:, 0], xyz[:, 2] - xyz[:, 0])
    length = np.linalg.norm(cross, axis=1)
    tri_plane = np.zeros((tris.shape[0], 4))
    ok = length > 1e-300
    tri_plane[ok, :3] = cross[ok] / length[ok, None]
    tri_plane[ok, 3] = np.einsum("ij,ij->i", tri_plane[ok, :3], xyz[ok, 0])
    counts = np.empty(tris.shape[0], dtype=np.int64)
    _count_tri_blocks(tri_lo, tri_hi, tri_plane, origin, h, reach, counts)
    n_pairs = int(counts.sum())
    # (block key, triangle) pairs: 12 B each, twice while sorting, plus the sort order
    if n_pairs * 32 > budget:
        raise _too_big(name, h, n_pairs * 32, memory)
    offsets = np.zeros(tris.shape[0], dtype=np.int64)
    np.cumsum(counts[:-1], out=offsets[1:])
    pair_key = np.empty(n_pairs, dtype=np.uint64)
    pair_tri = np.empty(n_pairs, dtype=np.int32)
    _fill_tri_blocks(tri_lo, tri_hi, tri_plane, origin, h, reach, offsets, pair_key, pair_tri)
    order = np.argsort(pair_key, kind="stable")         # stable: triangles stay ascending per block
    pair_key, pair_tri = pair_key[order], pair_tri[order]
    del order
    block_key, cand_start = np.unique(pair_key, return_index=True)
    cand_start = np.append(cand_start, n_pairs).astype(np.int64)
    del pair_key
    n_cand_blocks = block_key.shape[0]
    # while building, each node holds a float64 distance, winding number and signed distance, an
    # int32 triangle and a few flags
    if n_cand_blocks * BLOCK_NODES * 40 > budget:
        raise _too_big(name, h, n_cand_blocks * BLOCK_NODES * 40, memory)
    block_coord = _decode_keys(block_key)

    # bounding sphere about the centroid (centre, radius) for the second lower bound
    tri_sphere = np.empty((tris.shape[0], 4))
    tri_sphere[:, :3] = xyz.mean(axis=1)
    tri_sphere[:, 3] = np.sqrt(((xyz - tri_sphere[:, None, :3]) ** 2).sum(-1).max(-1))

    # visit each block's candidates nearest first (distance from the block centre to the
    # triangle's bounding sphere; lexsort is stable, so ties stay in ascending triangle order)
    pair_block = np.repeat(np.arange(n_cand_blocks), np.diff(cand_start))
    centre = origin + (block_coord[pair_block] * BLOCK + 0.5 * (BLOCK - 1)) * h
    gap = np.linalg.norm(tri_sphere[pair_tri, :3] - centre, axis=1) - tri_sphere[pair_tri, 3]
    pair_tri = pair_tri[np.lexsort((gap, pair_block))]
    del pair_block, centre, gap
    dist = np.empty((n_cand_blocks, BLOCK_NODES))
    near_tri = np.empty((n_cand_blocks, BLOCK_NODES), dtype=np.int32)
    _block_distances(block_coord, cand_start, pair_tri, verts, tris, tri_lo, tri_hi, tri_plane, tri_sphere,
                     origin, h, reach, dist, near_tri)
    del pair_tri, cand_start
    # keep only blocks with a node inside `reach`: the others are never all-corner interpolated
    keep = np.any(near_tri >= 0, axis=1)
    block_key, block_coord = block_key[keep], block_coord[keep]
    dist, near_tri = dist[keep], near_tri[keep]

    # the index: tiles the band passes through get a row of 512 entries, the others a side code
    block_tile = block_coord >> _BLOCK_SHIFT
    tile_coord = _decode_keys(np.unique(_morton_keys(block_tile)))
    tile_index = np.empty(tuple(n_tiles), dtype=np.int32)
    tile_index[tuple(tile_coord.T)] = np.arange(len(tile_coord), dtype=np.int32)
    is_empty_tile = np.ones(tuple(n_tiles), dtype=bool)
    is_empty_tile[tuple(tile_coord.T)] = False
    empty_tiles = np.argwhere(is_empty_tile)
    local = np.stack(np.meshgrid(*(np.arange(BLOCK),) * 3, indexing="ij"), -1).reshape(-1, 3)
    row_blocks = (tile_coord.astype(np.int64)[:, None, :] * BLOCK + local[None]).reshape(-1, 3)
    if mode == "SHELL":
        phi = dist
        tile_side = np.full(len(empty_tiles), _SIDE_POSITIVE, dtype=np.int32)
        block_side = np.full(len(row_blocks), _SIDE_POSITIVE, dtype=np.int32)
    else:
        tree = build_winding_tree(mesh)
        w = np.empty(dist.shape)
        _block_windings(block_coord, dist, origin, h, *tree, w)
        inside = np.abs(w) > 0.5
        del w
        w_tile = fast_winding_numbers(mesh, origin + (empty_tiles * BLOCK * BLOCK + 0.5 * (BLOCK * BLOCK - 1)) * h,
                                      tree)
        w_block = fast_winding_numbers(mesh, origin + (row_blocks * BLOCK + 0.5 * (BLOCK - 1)) * h, tree)
        tile_in, block_in = np.abs(w_tile) > 0.5, np.abs(w_block) > 0.5
        if mode == "SOLID_OUTSIDE":
            inside, tile_in, block_in = ~inside, ~tile_in, ~block_in
        phi = np.where(inside, -dist, dist)
        tile_side = np.where(tile_in, _SIDE_NEGATIVE, _SIDE_POSITIVE).astype(np.int32)
        block_side = np.where(block_in, _SIDE_NEGATIVE, _SIDE_POSITIVE).astype(np.int32)
    tile_index[tuple(empty_tiles.T)] = tile_side
    tile_block = block_side.reshape(-1, BLOCK_NODES)
    # stored blocks: their row, at (row of their tile, local block)
    local_block = ((block_coord & (BLOCK - 1)) * np.array([BLOCK * BLOCK, BLOCK, 1])).sum(axis=1)
    tile_block[tile_index[tuple(block_tile.T)], local_block] = np.arange(len(block_coord), dtype=np.int32)
    phi = (phi - thickness).astype(np.float32)
    return SignedDistanceGrid(
        name=str(name), mode=mode, cell_size=h, band=band, thickness=float(thickness),
        outside_sign=-1.0 if mode == "SOLID_OUTSIDE" else 1.0, origin=origin.astype(np.float64),
        block_coord=block_coord, block_key=block_key, block_phi=np.ascontiguousarray(phi),
        block_tri=np.ascontiguousarray(near_tri), tile_index=tile_index,
        tile_block=np.ascontiguousarray(tile_block))


def _too_big(name, h, need, memory):
    return InvalidSceneError(
        f"Collider '{name}' at a distance-field cell size of {h:g} m would need about {need / 2**30:.3g} GiB; "
        f"{memory / 2**30:.3g} GiB of memory is available. Increase the cell size.")


def _decode_keys(keys: np.ndarray) -> np.ndarray:
    """Block coordinates (B, 3) int32 of Morton keys (inverse of :func:`engine.neighbors.morton_key`)."""
    out = np.zeros((keys.shape[0], 3), dtype=np.int64)
    k = keys.astype(np.uint64)
    for bit in range(21):
        for a in range(3):
            out[:, a] |= ((k >> np.uint64(3 * bit + a)) & np.uint64(1)).astype(np.int64) << bit
    return out.astype(np.int32)


def _morton_keys(coord: np.ndarray) -> np.ndarray:
    """Morton keys (uint64) of non-negative integer coordinates (N, 3) below 2^21."""
    c = coord.astype(np.uint64)
    out = np.zeros(coord.shape[0], dtype=np.uint64)
    for bit in range(21):
        for a in range(3):
            out |= ((c[:, a] >> np.uint64(bit)) & np.uint64(1)) << np.uint64(3 * bit + a)
    return out


# ---------------------------------------------------------------------------------------------
# Queries
# ---------------------------------------------------------------------------------------------

@njit(inline="always", cache=True)
def _lookup_block(bi, bj, bk, tile_flat, tile_off, nty, ntz, tile_block):
    """Row of block (bi, bj, bk) in ``block_phi``, or a side code (< 0) where none is stored.

    ``tile_flat[tile_off:]`` is the grid's ``tile_index`` flattened in C order (NX, NY, NZ).
    """
    t = tile_flat[tile_off + ((bi >> _BLOCK_SHIFT) * nty + (bj >> _BLOCK_SHIFT)) * ntz + (bk >> _BLOCK_SHIFT)]
    if t < 0:
        return t
    return tile_block[t, ((bi & (BLOCK - 1)) * BLOCK + (bj & (BLOCK - 1))) * BLOCK + (bk & (BLOCK - 1))]


@njit(inline="always", cache=True)
def _code_side(code):
    return 1.0 if code == _SIDE_POSITIVE else -1.0


@njit(inline="always", cache=True)
def sample_point(px, py, pz, origin, inv_h, block_phi, block_tri, tile_index, tile_block, far, thickness,
                 outside_sign):
    """Distance, its gradient and the closest triangle at one point (callable from numba kernels).

    The point is in the mesh's space (metres); the remaining arguments are :func:`kernel_args`.
    Returns ``(phi, gx, gy, gz, tri)``: ``phi`` is the trilinear interpolant of the node values
    (metres, negative in the solid), ``(gx, gy, gz)`` its exact gradient (length ~1 near the
    surface), ``tri`` the closest triangle of the cell corner nearest to the point. Where the
    interpolated distance reaches the band (``|phi + thickness| >= far``), and anywhere farther,
    ``phi = +-far - thickness`` exactly, the gradient is zero and ``tri = -1``.
    """
    ntx, nty, ntz = tile_index.shape
    return sample_flat(px, py, pz, origin[0], origin[1], origin[2], inv_h, block_phi, block_tri,
                       tile_index.reshape(-1), 0, ntx, nty, ntz, tile_block, far, thickness, outside_sign)


@njit(inline="always", cache=True)
def sample_flat(px, py, pz, o0, o1, o2, inv_h, block_phi, block_tri, tile_flat, tile_off, ntx, nty, ntz,
                tile_block, far, thickness, outside_sign):
    """:func:`sample_point` with the tile index flattened at an offset, so several grids can share
    one set of arrays (see :mod:`engine.collision`). ``(o0, o1, o2)`` is the grid's origin."""
    gx = (px - o0) * inv_h
    gy = (py - o1) * inv_h
    gz = (pz - o2) * inv_h
    # outside the tiles there is no surface (and NaN lands here too)
    span = BLOCK * BLOCK                      # nodes per tile edge; a cell needs its far corner too
    if not (gx >= 0.0 and gy >= 0.0 and gz >= 0.0 and gx < ntx * span - 1.0 and gy < nty * span - 1.0
            and gz < ntz * span - 1.0):
        return outside_sign * far - thickness, 0.0, 0.0, 0.0, -1
    i0, j0, k0 = np.int64(gx), np.int64(gy), np.int64(gz)
    fx, fy, fz = gx - i0, gy - j0, gz - k0
    bi, bj, bk = i0 >> _BLOCK_SHIFT, j0 >> _BLOCK_SHIFT, k0 >> _BLOCK_SHIFT
    li, lj, lk = i0 & (BLOCK - 1), j0 & (BLOCK - 1), k0 & (BLOCK - 1)
    c000 = c001 = c010 = c011 = c100 = c101 = c110 = c111 = 0.0
    missing = False
    if li < BLOCK - 1 and lj < BLOCK - 1 and lk < BLOCK - 1:
        # all eight corners in one block (343 of 512 cells): one lookup
        b = _lookup_block(bi, bj, bk, tile_flat, tile_off, nty, ntz, tile_block)
        if b < 0:
            return _code_side(b) * far - thickness, 0.0, 0.0, 0.0, -1
        m = (li * BLOCK + lj) * BLOCK + lk
        c000 = block_phi[b, m]
        c001 = block_phi[b, m + 1]
        c010 = block_phi[b, m + BLOCK]
        c011 = block_phi[b, m + BLOCK + 1]
        c100 = block_phi[b, m + BLOCK * BLOCK]
        c101 = block_phi[b, m + BLOCK * BLOCK + 1]
        c110 = block_phi[b, m + BLOCK * BLOCK + BLOCK]
        c111 = block_phi[b, m + BLOCK * BLOCK + BLOCK + 1]
        nb = b
        nm = m + (BLOCK * BLOCK if fx >= 0.5 else 0) + (BLOCK if fy >= 0.5 else 0) + (1 if fz >= 0.5 else 0)
    else:
        # the cell straddles blocks: look each corner up
        best_abs = -1.0
        side = 0.0
        nb = -1
        nm = 0
        for q in range(8):
            a, c, e = (q >> 2) & 1, (q >> 1) & 1, q & 1
            i, j, k = i0 + a, j0 + c, k0 + e
            last_b = _lookup_block(i >> _BLOCK_SHIFT, j >> _BLOCK_SHIFT, k >> _BLOCK_SHIFT, tile_flat, tile_off,
                                   nty, ntz, tile_block)
            if last_b < 0:
                missing = True
                continue
            m = ((i & (BLOCK - 1)) * BLOCK + (j & (BLOCK - 1))) * BLOCK + (k & (BLOCK - 1))
            v = np.float64(block_phi[last_b, m])
            if abs(v + thickness) > best_abs:
                best_abs = abs(v + thickness)
                side = 1.0 if v + thickness >= 0.0 else -1.0
            if a == (1 if fx >= 0.5 else 0) and c == (1 if fy >= 0.5 else 0) and e == (1 if fz >= 0.5 else 0):
                nb = last_b
                nm = m
            if q == 0:
                c000 = v
            elif q == 1:
                c001 = v
            elif q == 2:
                c010 = v
            elif q == 3:
                c011 = v
            elif q == 4:
                c100 = v
            elif q == 5:
                c101 = v
            elif q == 6:
                c110 = v
            else:
                c111 = v
        if missing:
            # farther than the band from the surface: a stored corner is on the same side (the
            # segment to it is shorter than the distance to the surface); else the index
            if best_abs < 0.0:
                side = _code_side(_lookup_block(bi, bj, bk, tile_flat, tile_off, nty, ntz, tile_block))
            return side * far - thickness, 0.0, 0.0, 0.0, -1
    # trilinear interpolation and its gradient
    c00 = c000 + (c001 - c000) * fz
    c01 = c010 + (c011 - c010) * fz
    c10 = c100 + (c101 - c100) * fz
    c11 = c110 + (c111 - c110) * fz
    c0 = c00 + (c01 - c00) * fy
    c1 = c10 + (c11 - c10) * fy
    phi = c0 + (c1 - c0) * fx
    if abs(phi + thickness) >= far:
        # stored blocks reach a little beyond the band (clamped nodes); saturate there so that
        # "far" means the same everywhere: exactly +-band, no gradient, no triangle
        return (far if phi + thickness > 0.0 else -far) - thickness, 0.0, 0.0, 0.0, -1
    dfx = c1 - c0
    dfy = (c01 - c00) * (1.0 - fx) + (c11 - c10) * fx
    dz0 = (c001 - c000) * (1.0 - fy) + (c011 - c010) * fy
    dz1 = (c101 - c100) * (1.0 - fy) + (c111 - c110) * fy
    dfz = dz0 * (1.0 - fx) + dz1 * fx
    return phi, dfx * inv_h, dfy * inv_h, dfz * inv_h, np.int64(block_tri[nb, nm])


@njit(parallel=True, cache=True)
def sample_kernel(points, origin, inv_h, block_phi, block_tri, tile_index, tile_block, far, thickness,
                  outside_sign,
                  # outputs
                  out_phi, out_grad, out_tri):
    """Batch :func:`sample_point`.

    points (P, 3) float64, metres, then :func:`kernel_args`;
    Outputs: out_phi (P,) float64 metres, out_grad (P, 3) float64, out_tri (P,) int32.
    """
    for i in prange(points.shape[0]):
        phi, gx, gy, gz, t = sample_point(np.float64(points[i, 0]), np.float64(points[i, 1]),
                                          np.float64(points[i, 2]), origin, inv_h, block_phi, block_tri,
                                          tile_index, tile_block, far, thickness, outside_sign)
        out_phi[i] = phi
        out_grad[i, 0] = gx
        out_grad[i, 1] = gy
        out_grad[i, 2] = gz
        out_tri[i] = t


def sample(grid: SignedDistanceGrid, points: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Distance, gradient and closest triangle at many points.

    Parameters
    ----------
    grid : SignedDistanceGrid
    points : ndarray, shape (P, 3), float64 (others are converted), metres, in the mesh's own space

    Returns
    -------
    phi : ndarray, shape (P,), float64, metres
        Negative in the solid. Beyond the band: ``+-band - thickness``.
    gradient : ndarray, shape (P, 3), float64, dimensionless
        Gradient of the interpolated ``phi`` (about unit length near the surface; an outward
        normal of the solid); zero beyond the band.
    tri : ndarray, shape (P,), int32
        Closest triangle of the nearest cell corner, -1 beyond the band.
    """
    pts = np.asarray(points)
    if pts.ndim != 2 or pts.shape[1] != 3:
        raise ValueError(f"points must have shape (P, 3), got {pts.shape}")
    # one compiled signature: converting float32 is one copy, a second parallel compilation costs
    # ~8 s (solvers with float32 particles call sample_point inside their own kernels)
    pts = np.ascontiguousarray(pts, dtype=np.float64)
    n = pts.shape[0]
    phi = np.empty(n)
    grad = np.empty((n, 3))
    tri = np.empty(n, dtype=np.int32)
    sample_kernel(pts, *kernel_args(grid), phi, grad, tri)
    return phi, grad, tri


def node_positions(grid: SignedDistanceGrid) -> np.ndarray:
    """Positions of every stored node, in ``block_phi`` order.

    Returns
    -------
    ndarray, shape (B * 512, 3), float64, metres
    """
    local = np.stack(np.meshgrid(*(np.arange(BLOCK),) * 3, indexing="ij"), -1).reshape(-1, 3)
    idx = grid.block_coord.astype(np.int64)[:, None, :] * BLOCK + local[None, :, :]
    return grid.origin + idx.reshape(-1, 3) * grid.cell_size


# ---------------------------------------------------------------------------------------------
# Cache key and files
# ---------------------------------------------------------------------------------------------

def sdf_key(mesh: TriangleMesh, cell_size: float, band: float, mode: str, thickness: float = 0.0) -> str:
    """Cache key of a grid: SHA-256 (hex) of everything that shapes it.

    That is the format version, the winding-number accuracy, the mesh's vertices (metres) and
    triangles, ``cell_size`` and ``band`` (metres), ``mode`` and ``thickness`` (metres); the same
    arguments as :func:`build_sdf`. The object name is not part of it.
    """
    h = hashlib.sha256()
    h.update(f"surge-sdf {SDF_FORMAT_VERSION} beta={WINDING_BETA!r} block={BLOCK}".encode("ascii"))
    h.update(f"cell={float(cell_size)!r} band={float(band)!r} mode={mode} "
             f"thickness={float(thickness)!r}".encode("utf-8"))
    for a in (mesh.vertices, mesh.triangles):
        a = np.ascontiguousarray(a)
        h.update(f"{a.dtype.str}{a.shape}".encode("ascii"))
        h.update(a.tobytes())
    return h.hexdigest()


def save_sdf(grid: SignedDistanceGrid, path: str) -> None:
    """Write ``grid`` to ``path`` (an ``.npz`` without pickles), atomically."""
    arrays = {f: getattr(grid, f) for f in _ARRAY_FIELDS}
    arrays.update(format=np.array("surge-sdf"), format_version=np.array(SDF_FORMAT_VERSION, dtype=np.int64),
                  name=np.array(grid.name), mode=np.array(grid.mode),
                  cell_size=np.array(grid.cell_size, dtype=np.float64), band=np.array(grid.band, dtype=np.float64),
                  thickness=np.array(grid.thickness, dtype=np.float64),
                  outside_sign=np.array(grid.outside_sign, dtype=np.float64))
    atomic.write_npz(path, arrays)


def load_sdf(path: str) -> SignedDistanceGrid:
    """Read a grid written by :func:`save_sdf`.

    Raises
    ------
    CacheFormatError
        If the file is missing, unreadable, or not a surge-sdf of this format version.
    """
    try:
        with np.load(path, allow_pickle=False) as z:
            data = {k: z[k] for k in z.files}
    except (OSError, ValueError, zipfile.BadZipFile) as exc:   # missing, not an npz, or truncated
        raise CacheFormatError(f"Distance-field cache '{path}' cannot be read: {exc}") from exc
    if str(data.get("format", "")) != "surge-sdf" or int(data.get("format_version", -1)) != SDF_FORMAT_VERSION:
        raise CacheFormatError(f"Distance-field cache '{path}' is not a surge-sdf file of version "
                               f"{SDF_FORMAT_VERSION}; delete it to rebuild")
    try:
        arrays = {f: np.ascontiguousarray(data[f]) for f in _ARRAY_FIELDS}
        grid = SignedDistanceGrid(
            name=str(data["name"]), mode=str(data["mode"]), cell_size=float(data["cell_size"]),
            band=float(data["band"]), thickness=float(data["thickness"]),
            outside_sign=float(data["outside_sign"]), **arrays)
    except KeyError as exc:
        raise CacheFormatError(f"Distance-field cache '{path}' is incomplete: missing {exc}") from exc
    for f, dt in _ARRAY_DTYPES.items():
        if getattr(grid, f).dtype != dt:
            raise CacheFormatError(f"Distance-field cache '{path}': array {f} has dtype "
                                   f"{getattr(grid, f).dtype}, expected {np.dtype(dt)}")
    return grid
