"""Anisotropic kernels for the colour field (Yu & Turk 2013, "Reconstructing Surfaces of Particle-Based
Fluids Using Anisotropic Kernels", ACM TOG 32(1), section 3).

An isotropic kernel gives every particle a ball of influence: a flat surface shows the bumps of the
particles under it, and a sheet or jet the flow has stretched thin tears into beads once its particles
drift farther apart than the kernel reaches. Yu & Turk shape each particle's kernel by its
neighbourhood:

1. **Weighted PCA** (eq. 6-7): with weights w_ij = 1 - (r_ij / r)^3 within r (the kernel support), the
   weighted mean x^w_i = sum_j w_ij x_j / sum_j w_ij and covariance
   C_i = sum_j w_ij (x_j - x^w_i)(x_j - x^w_i)^T / sum_j w_ij; C_i = R diag(s1, s2, s3) R^T, s1 >= s2 >= s3.
2. **A stretched kernel** (eq. 8-10) W(r, G_i) = det(G_i) P(|G_i r|), G_i = R diag(1 / a_k) R^T / h, whose
   support is an ellipsoid with semi-axes a_k times the isotropic support along the principal
   directions. Yu & Turk take a_k proportional to the clamped eigenvalues (s_k >= s1 / k_r), scaled by a
   constant; a particle with fewer than N_eps neighbours keeps a ball.
3. **Laplacian-smoothed centres** (eq. 11): the kernel sits at (1 - lambda) x_i + lambda x^w_i.

Surge keeps the three steps and changes the scaling of step 2 so that the surface's volume does not
change: the axes are a_k = min(k_max, sqrt(s_k / s3)), each principal direction stretched by the
ratio of the spreads (standard deviations) along it and across the thinnest direction, never shrunk.
The kernel keeps the isotropic extent across a flat surface or a sheet and stretches along it, and
det(G) keeps its integral (the particle's volume); the colour field across a flat layer, which
depends only on the kernels' profiles across it, is then the isotropic one: the surface of a resting
pool stays where the isotropic kernels put it (within 0.2 % of its volume, tested), while the bumps
of single particles are spread along it. Yu & Turk's own scaling shrinks the kernel across the surface
(s3 / s1 down to 1 / k_r), which moves a flat surface towards its particles' centres: measured on the
resting pool of the tests, it lost 3 % of the volume. A particle whose neighbourhood is close to
isotropic (a_1 < :data:`MIN_STRETCH`: inside the liquid) keeps the isotropic kernel, which is cheaper
to add into the grid, and so does one with fewer than N_eps neighbours.

Step 3 moves a particle towards its neighbours' weighted mean: on a flat surface that mean lies
inside the liquid, so the surface sinks with lambda (Yu & Turk use 0.9-1). ``centre_smoothing``
(lambda) is a setting, 0 by default: the measures of the tests (a resting pool's flatness and
volume, a sphere's radius) are met without it, and lambda = 0.5 already costs the pool 2 % of its
volume.
"""

from __future__ import annotations

import math
from typing import NamedTuple

import numpy as np
from numba import njit, prange

from ..core.neighbour_list import chunk_width, gather_candidates
from ..core.compile import FASTMATH_SUMS as FASTMATH
from .field import CELL_CHUNK, SLAB_POINTS, ColourField, DenseGrid, ParticleGrid, _spline

#: Yu & Turk's N_eps: a particle with fewer neighbours within the support keeps the isotropic kernel.
#: Theirs (25) leaves round every particle of a sheet pulled apart (one at 1.6 spacings has 4 neighbours
#: within two spacings), which are the ones a stretched kernel smooths; fewer than 4 lets the sparsest
#: clusters of a splash thin below the iso level and vanish (a stretched kernel has a lower peak): on
#: the demo's frame 20, 2 lost a crest of 9 particle volumes and 3 nearly, 4 and more keep every piece
#: (tests/test_surface_look.py). Given for a support of two spacings and scaled with the kernel's volume.
MIN_NEIGHBOURS = 4

#: Most stretch of a kernel axis (Yu & Turk's k_r bounds the ratio of the axes; here of the spreads).
MAX_STRETCH = 2.0

#: A particle whose longest axis would be stretched less than this keeps the isotropic kernel.
MIN_STRETCH = 1.15


class KernelShapes(NamedTuple):
    """The anisotropic particles of a frame, in the grid's order.

    index : (A,) int64 -- which particles (rows of the grid-ordered positions)
    metric : (A, 6) float32 -- the symmetric M = R diag(1 / a_k^2) R^T as (xx, xy, xz, yy, yz, zz): the
        kernel is the isotropic one at the distance sqrt(r^T M r)
    scale : (A,) float32 -- 1 / (a_1 a_2 a_3), the kernel's factor that keeps its integral
    extent : (A, 3) float32 -- the half sides of the box around the kernel's support ellipsoid, m
    """

    index: np.ndarray
    metric: np.ndarray
    scale: np.ndarray
    extent: np.ndarray


@njit(parallel=True, nogil=True, cache=True, fastmath=FASTMATH)
def _moments(x, support, cell_start, cell_nbr,
             # outputs
             mean, cov, count):
    """Yu & Turk's weighted mean (as an offset from the particle) and covariance, eq. 6-7, for every
    particle (grid order), and its neighbour count within the support (itself not counted); the same
    cell-chunked, branch-free gather as :func:`engine.surface.field._self_sums`."""
    m = cell_nbr.shape[0]
    s2 = np.float32(support * support)
    inv_s = np.float32(1.0 / support)
    zero = np.float32(0.0)
    one = np.float32(1.0)
    no_h = np.zeros(x.shape[0], np.float32)
    for b in prange((m + CELL_CHUNK - 1) // CELL_CHUNK):
        c0 = b * CELL_CHUNK
        c1 = min(m, c0 + CELL_CHUNK)
        width = chunk_width(c0, c1, cell_start, cell_nbr)
        cx = np.empty(width, np.float32)
        cy = np.empty(width, np.float32)
        cz = np.empty(width, np.float32)
        ch = np.empty(width, np.float32)
        cj = np.empty(width, np.int32)
        for c in range(c0, c1):
            n = gather_candidates(c, x, no_h, cell_start, cell_nbr, 0, cx, cy, cz, ch, cj)
            for i in range(cell_start[c], cell_start[c + 1]):
                qx, qy, qz = x[i, 0], x[i, 1], x[i, 2]
                ws = zero
                sx = zero
                sy = zero
                sz = zero
                sxx = zero
                sxy = zero
                sxz = zero
                syy = zero
                syz = zero
                szz = zero
                cnt = 0
                for t in range(n):
                    d0 = cx[t] - qx
                    d1 = cy[t] - qy
                    d2 = cz[t] - qz
                    d = d0 * d0 + d1 * d1 + d2 * d2
                    u = math.sqrt(d) * inv_s
                    w = max(one - u * u * u, zero)
                    ws += w
                    sx += w * d0
                    sy += w * d1
                    sz += w * d2
                    sxx += w * d0 * d0
                    sxy += w * d0 * d1
                    sxz += w * d0 * d2
                    syy += w * d1 * d1
                    syz += w * d1 * d2
                    szz += w * d2 * d2
                    cnt += d < s2
                # the particle itself is a candidate with weight 1: ws >= 1
                mx, my, mz = sx / ws, sy / ws, sz / ws
                mean[i, 0] = mx
                mean[i, 1] = my
                mean[i, 2] = mz
                cov[i, 0] = sxx / ws - mx * mx
                cov[i, 1] = sxy / ws - mx * my
                cov[i, 2] = sxz / ws - mx * mz
                cov[i, 3] = syy / ws - my * my
                cov[i, 4] = syz / ws - my * mz
                cov[i, 5] = szz / ws - mz * mz
                count[i] = cnt - 1


@njit(inline="always", cache=True)
def eigen_symmetric3(a00, a01, a02, a11, a12, a22):
    """Eigenvalues (descending) and eigenvectors (the columns of R) of a symmetric 3 x 3 matrix by cyclic
    Jacobi rotations (Golub & Van Loan, "Matrix Computations", 4th ed., algorithm 8.5.3), float64.

    Returns ``(w (3,), R (3, 3))`` with A = R diag(w) R^T."""
    a = np.empty((3, 3))
    a[0, 0], a[0, 1], a[0, 2] = a00, a01, a02
    a[1, 0], a[1, 1], a[1, 2] = a01, a11, a12
    a[2, 0], a[2, 1], a[2, 2] = a02, a12, a22
    r = np.eye(3)
    scale = abs(a00) + abs(a11) + abs(a22) + 1e-300
    for _sweep in range(16):
        off = abs(a[0, 1]) + abs(a[0, 2]) + abs(a[1, 2])
        if off <= 1e-14 * scale:
            break
        for p in range(2):
            for q in range(p + 1, 3):
                apq = a[p, q]
                if apq == 0.0:
                    continue
                theta = (a[q, q] - a[p, p]) / (2.0 * apq)
                t = (1.0 if theta >= 0.0 else -1.0) / (abs(theta) + math.sqrt(theta * theta + 1.0))
                c = 1.0 / math.sqrt(t * t + 1.0)
                s = t * c
                for k in range(3):  # A <- J^T A J, R <- R J
                    akp = a[k, p]
                    akq = a[k, q]
                    a[k, p] = c * akp - s * akq
                    a[k, q] = s * akp + c * akq
                for k in range(3):
                    apk = a[p, k]
                    aqk = a[q, k]
                    a[p, k] = c * apk - s * aqk
                    a[q, k] = s * apk + c * aqk
                for k in range(3):
                    rkp = r[k, p]
                    rkq = r[k, q]
                    r[k, p] = c * rkp - s * rkq
                    r[k, q] = s * rkp + c * rkq
    w = np.array([a[0, 0], a[1, 1], a[2, 2]])
    order = np.argsort(-w)
    return w[order], r[:, order]


@njit(parallel=True, nogil=True, cache=True)
def _shapes(cov, count, min_count, support, max_stretch, min_stretch,
            # outputs
            metric, scale, extent, stretched):
    """Each particle's kernel axes a_k = min(max_stretch, sqrt(s_k / s3)) (see the module docstring); the
    particles stretched by at least ``min_stretch`` along some axis get their metric, scale and extent
    and are marked in ``stretched``."""
    for i in prange(cov.shape[0]):
        stretched[i] = False
        if count[i] < min_count:
            continue
        # a nearly isotropic covariance skips the eigen solve (the bulk of the liquid): every eigenvalue lies
        # within |C - t I|_F of t = tr C / 3, so below t (m - 1) / (m + 1), m = min_stretch^2, their
        # ratio stays below m and no axis would stretch by min_stretch
        t3 = (cov[i, 0] + cov[i, 3] + cov[i, 5]) / 3.0
        dev = ((cov[i, 0] - t3) ** 2 + (cov[i, 3] - t3) ** 2 + (cov[i, 5] - t3) ** 2
               + 2.0 * (cov[i, 1] ** 2 + cov[i, 2] ** 2 + cov[i, 4] ** 2))
        ms2 = min_stretch * min_stretch
        if dev < (t3 * (ms2 - 1.0) / (ms2 + 1.0)) ** 2:
            continue
        w, r = eigen_symmetric3(cov[i, 0], cov[i, 1], cov[i, 2], cov[i, 3], cov[i, 4], cov[i, 5])
        # spreads relative to the thinnest direction (floored: a perfectly flat neighbourhood has s3 = 0)
        low = max(w[2], w[0] / (max_stretch ** 4), 1e-30)
        a0 = min(max_stretch, math.sqrt(max(w[0], low) / low))
        if a0 < min_stretch:
            continue
        a1 = min(max_stretch, math.sqrt(max(w[1], low) / low))
        a = (a0, a1, 1.0)
        inv2 = (1.0 / (a0 * a0), 1.0 / (a1 * a1), 1.0)
        m00 = m01 = m02 = m11 = m12 = m22 = 0.0
        for k in range(3):
            m00 += r[0, k] * r[0, k] * inv2[k]
            m01 += r[0, k] * r[1, k] * inv2[k]
            m02 += r[0, k] * r[2, k] * inv2[k]
            m11 += r[1, k] * r[1, k] * inv2[k]
            m12 += r[1, k] * r[2, k] * inv2[k]
            m22 += r[2, k] * r[2, k] * inv2[k]
        metric[i, 0], metric[i, 1], metric[i, 2] = m00, m01, m02
        metric[i, 3], metric[i, 4], metric[i, 5] = m11, m12, m22
        scale[i] = 1.0 / (a0 * a1)
        for d in range(3):  # the box of the ellipsoid r^T M r <= support^2: support sqrt((M^-1)_dd)
            e = 0.0
            for k in range(3):
                e += r[d, k] * r[d, k] * a[k] * a[k]
            extent[i, d] = support * math.sqrt(e)
        stretched[i] = True


class Neighbourhoods(NamedTuple):
    """Step 1 for every particle, in the grid's order: ``mean`` (N, 3) float32, the weighted mean's offset
    from the particle (m); ``cov`` (N, 6) float32, the weighted covariance (xx, xy, xz, yy, yz, zz), m^2;
    ``count`` (N,) int32, the neighbours within the support."""

    mean: np.ndarray
    cov: np.ndarray
    count: np.ndarray


def neighbourhoods(particles: ParticleGrid) -> Neighbourhoods:
    """Yu & Turk's weighted mean and covariance of every particle's neighbourhood (eq. 6-7), r the support."""
    n = len(particles.x)
    mean = np.zeros((n, 3), np.float32)
    cov = np.zeros((n, 6), np.float32)
    count = np.zeros(n, np.int32)
    if n:
        g = particles.grid
        _moments(particles.x, particles.support, g.cell_start, g.cell_nbr, mean, cov, count)
    return Neighbourhoods(mean, cov, count)


def min_neighbours(support: float, spacing: float) -> int:
    """:data:`MIN_NEIGHBOURS` at this support (scaled with the kernel's volume in spacings)."""
    return max(1, int(round(MIN_NEIGHBOURS * (support / (2.0 * spacing)) ** 3)))


def kernel_shapes(hoods: Neighbourhoods, support: float, spacing: float, max_stretch: float = MAX_STRETCH
                  ) -> KernelShapes:
    """Step 2: the particles whose kernels are stretched and their shapes (see :class:`KernelShapes`)."""
    n = len(hoods.count)
    metric = np.empty((n, 6), np.float32)
    scale = np.empty(n, np.float32)
    extent = np.empty((n, 3), np.float32)
    stretched = np.zeros(n, np.bool_)
    if n:
        _shapes(hoods.cov, hoods.count, min_neighbours(support, spacing), float(support), float(max_stretch),
                MIN_STRETCH, metric, scale, extent, stretched)
    index = np.flatnonzero(stretched)
    return KernelShapes(index, np.ascontiguousarray(metric[index]), np.ascontiguousarray(scale[index]),
                        np.ascontiguousarray(extent[index]))


def smoothed_centres(x: np.ndarray, hoods: Neighbourhoods, support: float, spacing: float, smoothing: float
                     ) -> np.ndarray:
    """Step 3: (1 - lambda) x_i + lambda x^w_i (eq. 11) for particles with enough neighbours, x_i for the
    others (grid order; a new float32 array)."""
    out = np.array(x, dtype=np.float32, copy=True)
    if smoothing > 0.0 and len(out):
        enough = hoods.count >= min_neighbours(support, spacing)
        out[enough] += np.float32(smoothing) * hoods.mean[enough]
    return out


@njit(parallel=True, nogil=True, cache=True, fastmath=FASTMATH)
def _ellipsoid_field(x_by_i, volume, metric, scale, extent, slab_lo, slab_hi, origin, cell, support,
                     # outputs
                     field, row_lo, row_hi):
    """field[i, j, k] += V_p det(G_p) W(|G_p (p_ijk - x_p)|) for the stretched particles (``x_by_i`` sorted by
    slab, as in :func:`engine.surface.field._colour_field`, whose slabs and ownership this shares: slab s
    adds only into its own points). Each row (i, j) of a particle's box is cut to the range of k inside
    its support ellipsoid (a quadratic in k) and run without a branch."""
    nx, ny, nz = field.shape
    s2 = support * support
    h = 0.5 * support
    inv_h = np.float32(1.0 / h)
    sigma = 1.0 / (math.pi * h * h * h)
    inv_cell = 1.0 / cell
    for s in prange(slab_lo.shape[0]):
        i0 = s * SLAB_POINTS
        i1 = min(nx, i0 + SLAB_POINTS)
        for p in range(slab_lo[s], slab_hi[s]):
            px, py, pz = x_by_i[p, 0], x_by_i[p, 1], x_by_i[p, 2]
            m00, m01, m02 = metric[p, 0], metric[p, 1], metric[p, 2]
            m11, m12, m22 = metric[p, 3], metric[p, 4], metric[p, 5]
            vp = np.float32(volume[p] * sigma * scale[p])
            ia = max(i0, int(math.ceil((px - extent[p, 0] - origin[0]) * inv_cell)))
            ib = min(i1 - 1, int(math.floor((px + extent[p, 0] - origin[0]) * inv_cell)))
            ja = max(0, int(math.ceil((py - extent[p, 1] - origin[1]) * inv_cell)))
            jb = min(ny - 1, int(math.floor((py + extent[p, 1] - origin[1]) * inv_cell)))
            for i in range(ia, ib + 1):
                dx = origin[0] + i * cell - px
                for j in range(ja, jb + 1):
                    dy = origin[1] + j * cell - py
                    # r^T M r = m22 dz^2 + 2 b dz + c < support^2 over the row
                    b = m02 * dx + m12 * dy
                    c = m00 * dx * dx + 2.0 * m01 * dx * dy + m11 * dy * dy
                    disc = b * b - m22 * (c - s2)
                    if disc <= 0.0:
                        continue
                    root = math.sqrt(disc)
                    ka = max(0, int(math.ceil((pz + (-b - root) / m22 - origin[2]) * inv_cell)))
                    kb = min(nz - 1, int(math.floor((pz + (-b + root) / m22 - origin[2]) * inv_cell)))
                    if ka > kb:
                        continue
                    if ka < row_lo[i, j]:
                        row_lo[i, j] = ka
                    if kb > row_hi[i, j]:
                        row_hi[i, j] = kb
                    z0 = origin[2] + ka * cell - pz
                    row = field[i, j, ka:kb + 1]
                    for t in range(kb - ka + 1):
                        dz = z0 + t * cell
                        row[t] += vp * _spline(np.float32(c + dz * (2.0 * b + m22 * dz)), inv_h)


def ellipsoid_bounds(x: np.ndarray, shapes: KernelShapes) -> tuple[np.ndarray, np.ndarray]:
    """Corners (lo, hi) of the box that holds every stretched kernel's support, m (x in the grid's order)."""
    xs = np.asarray(x, np.float64)[shapes.index]
    e = shapes.extent.astype(np.float64)
    return (xs - e).min(axis=0), (xs + e).max(axis=0)


def add_ellipsoids(field: ColourField, grid: DenseGrid, x: np.ndarray, volume: np.ndarray, shapes: KernelShapes,
                   support: float) -> None:
    """Add the stretched particles' kernels into a colour field, in place.

    Parameters
    ----------
    field : ColourField -- of the other (isotropic) particles on ``grid`` (its values and rows' ranges grow)
    grid : DenseGrid -- holds every stretched kernel's box plus an empty layer (:func:`ellipsoid_bounds`)
    x : ndarray, shape (N, 3), m; volume : ndarray, shape (N,), m^3 -- every particle, in the grid's order
    shapes : KernelShapes
    support : float, m
    """
    if len(shapes.index) == 0:
        return
    xs = np.asarray(x, np.float64)[shapes.index]
    vs = np.asarray(volume, np.float64)[shapes.index]
    nslab = (grid.shape[0] + SLAB_POINTS - 1) // SLAB_POINTS
    home = np.clip(np.floor((xs[:, 0] - grid.origin[0]) / grid.cell).astype(np.int64) // SLAB_POINTS, 0, nslab - 1)
    order = np.argsort(home, kind="stable")
    bounds = np.searchsorted(home[order], np.arange(nslab + 1))
    reach = int(np.ceil(float(shapes.extent[:, 0].max()) / grid.cell / SLAB_POINTS))
    slab_lo = bounds[np.maximum(np.arange(nslab) - reach, 0)].astype(np.int64)
    slab_hi = bounds[np.minimum(np.arange(nslab) + reach + 1, nslab)].astype(np.int64)
    _ellipsoid_field(np.ascontiguousarray(xs[order]), np.ascontiguousarray(vs[order]),
                     np.ascontiguousarray(shapes.metric[order], np.float64),
                     np.ascontiguousarray(shapes.scale[order], np.float64),
                     np.ascontiguousarray(shapes.extent[order], np.float64), slab_lo, slab_hi,
                     np.asarray(grid.origin, np.float64), float(grid.cell), float(support), field.values,
                     field.row_lo, field.row_hi)
