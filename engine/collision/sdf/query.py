"""Sampling a narrow-band distance grid: distance, gradient and closest triangle at points.

:func:`sample_point` and :func:`sample_flat` are inlined numba functions the solvers call inside
their own kernels; :func:`sample` is the checked batch wrapper.
"""

from __future__ import annotations

import numpy as np
from numba import njit, prange

from .grid import _BLOCK_SHIFT, _SIDE_POSITIVE, BLOCK, SignedDistanceGrid, kernel_args


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
    one set of arrays (see :mod:`engine.collision.world`). ``(o0, o1, o2)`` is the grid's origin."""
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
