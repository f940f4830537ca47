"""Building a narrow-band distance grid from a triangle mesh (see :mod:`engine.collision.sdf`).

Triangles are "rasterised" into the blocks of their band-dilated bounding boxes; every block then
takes the exact distance to its nearest candidate triangle at each node (:mod:`engine.collision.sdf.distance`)
and, except in SHELL mode, the side from the fast winding numbers (:mod:`engine.collision.sdf.winding`).
"""

from __future__ import annotations

import math

import numpy as np
from numba import njit, prange

from ...scene.budget import available_memory
from ...errors import InvalidSceneError, InvalidSettingsError
from ...core.cell_grid import morton_key
from ...scene import TriangleMesh
from .distance import _triangle_d2
from .grid import _BLOCK_SHIFT, _SIDE_NEGATIVE, _SIDE_POSITIVE, BLOCK, BLOCK_NODES, MODES, SignedDistanceGrid
from .winding import _STACK, _winding_at, build_winding_tree, fast_winding_numbers

#: Block coordinates must fit the 21 bits per axis of a 64-bit Morton key.
_MAX_BLOCK_COORD = (1 << 21) - 1


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
        Which side is solid (see :mod:`engine.collision.sdf`).
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
    """Block coordinates (B, 3) int32 of Morton keys (inverse of :func:`engine.core.cell_grid.morton_key`)."""
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
