"""Kernel sums of one frame's particles: particle volumes, the colour field on a grid, values at vertices.

Every sum here uses the cubic spline of Monaghan 1992 (:func:`engine.kernels.cubic_w`) with compact
support ``support`` (h = support / 2), the kernel splashsurf uses, and the particles binned by
:func:`engine.neighbors.build_grid` with cells of at least the support:

* :func:`kernel_sums` -- at any query points, the sums sum_j W(|q - x_j|) (and the count of particles
  within the support, and sum_j W a_j of per-particle values a_j), gathered from the 27 cells around
  each query's cell (no scatter, so no race between threads). With the particles themselves as queries it
  gives their number densities and neighbour counts; with mesh vertices, the vertex attributes and the
  smoothing weights.
* :func:`colour_field` -- the SPH colour field c(p) = sum_j V_j W(|p - x_j|) at every point of a dense
  grid, V_j the particle's volume (Löschner et al. 2023, "Weighted Laplacian Smoothing for Surface
  Reconstruction of Particle-based Fluids", eq. 1 with V_j = m_j / rho_j). Each particle adds into the
  grid points of its support; the grid is cut into slabs along its first axis, each slab owned by one
  task that adds only into its own points (a fixed partition: the sums, and so the mesh, do not depend
  on the thread count).
"""

from __future__ import annotations

import math
from typing import NamedTuple

import numpy as np
from numba import njit, prange

from ..kernels import cubic_w_scaled
from ..neighbors import CellGrid, around_cell, build_grid, cell_coords, chunk_width, gather_candidates, morton_key

#: Query cells per parallel task of :func:`kernel_sums` (each cell's candidates gathered once for
#: all the queries in it).
CELL_CHUNK = 16

#: Grid points along the first axis per slab of :func:`colour_field` (a fixed partition).
SLAB_POINTS = 8


class ParticleGrid(NamedTuple):
    """A frame's particles sorted by :func:`engine.neighbors.build_grid`.

    Attributes
    ----------
    x : ndarray, shape (N, 3), float32, m -- positions in the grid's sorted order
    grid : CellGrid -- its ``order`` maps the caller's order to the sorted one
    support : float, m -- kernel support (the grid's cells are at least this wide)
    """

    x: np.ndarray
    grid: CellGrid
    support: float

    @staticmethod
    def build(x: np.ndarray, support: float, cell_size: float | None = None) -> "ParticleGrid":
        x = np.ascontiguousarray(x, dtype=np.float32).reshape(-1, 3)
        grid = build_grid(x, max(float(support), float(cell_size or 0.0)))
        return ParticleGrid(np.ascontiguousarray(x[grid.order]), grid, float(support))

    def sorted(self, values: np.ndarray) -> np.ndarray:
        """Per-particle ``values`` (the caller's order) in the grid's order, as float32 rows (N, K)."""
        a = np.asarray(values, dtype=np.float32).reshape(len(self.x), -1)
        return np.ascontiguousarray(a[self.grid.order])


@njit(parallel=True, cache=True)
def _query_cells(q, inv_cell, keys, coords):
    """The Morton key and integer coordinates of the grid cell holding each query."""
    for i in prange(q.shape[0]):
        ci, cj, ck = cell_coords(q[i, 0], q[i, 1], q[i, 2], inv_cell)
        coords[i, 0] = ci
        coords[i, 1] = cj
        coords[i, 2] = ck
        keys[i] = morton_key(ci, cj, ck)


@njit(parallel=True, cache=True)
def _cells_around(coords, cell_key, out):
    """The occupied cells (-1: none) among the 27 around each of the query cells ``coords`` (M, 3)."""
    for m in prange(coords.shape[0]):
        for t in range(27):
            out[m, t] = around_cell(cell_key, coords[m, 0], coords[m, 1], coords[m, 2], t)


@njit(parallel=True, cache=True)
def _cell_sums(q, q_start, x, values, no_h, support, cell_start, cell_nbr,
               # outputs
               wsum, count, wcount, acc, nearest):
    """For every query q_i: sum_j W, the count of particles within ``support`` and their distance-weighted
    count sum_j (1 - r_ij^2 / support^2), sum_j W values_j, and the nearest particle of the 27 cells
    around q_i (-1 if none).

    Queries come sorted by their cell: cell c's are ``q_start[c]:q_start[c + 1]`` and ``cell_nbr[c]``
    names the occupied particle cells around it. The particles of those 27 cells are copied into
    contiguous buffers once per cell (:func:`engine.neighbors.gather_candidates`) and every query of
    the cell runs over them."""
    m, k = cell_nbr.shape[0], values.shape[1]
    s2 = support * support
    inv_s2 = 1.0 / s2
    h = 0.5 * support
    inv_h = 1.0 / h
    sigma = 1.0 / (math.pi * h * h * h)
    for b in prange((m + CELL_CHUNK - 1) // CELL_CHUNK):
        c0 = b * CELL_CHUNK
        c1 = min(m, c0 + CELL_CHUNK)
        if q_start[c1] == q_start[c0]:
            continue
        width = chunk_width(c0, c1, cell_start, cell_nbr)
        cx = np.empty(width, np.float32)
        cy = np.empty(width, np.float32)
        cz = np.empty(width, np.float32)
        ch = np.empty(width, np.float32)
        cj = np.empty(width, np.int32)
        sums = np.empty(k, np.float64)
        dist = np.empty(width, np.float32)
        hits = np.empty(width, np.int32)
        for c in range(c0, c1):
            if q_start[c + 1] == q_start[c]:
                continue
            n = gather_candidates(c, x, no_h, cell_start, cell_nbr, 0, cx, cy, cz, ch, cj)  # 0: every neighbour cell
            for i in range(q_start[c], q_start[c + 1]):
                qx, qy, qz = q[i, 0], q[i, 1], q[i, 2]
                # squared distances to every candidate (a loop without branches: vectorised), then the
                # few within the support
                for t in range(n):
                    d0 = qx - cx[t]
                    d1 = qy - cy[t]
                    d2 = qz - cz[t]
                    dist[t] = d0 * d0 + d1 * d1 + d2 * d2
                cnt = 0
                for t in range(n):
                    if dist[t] < s2:
                        hits[cnt] = t
                        cnt += 1
                sums[:] = 0.0
                ws = 0.0
                wn = 0.0
                for h_i in range(cnt):
                    t = hits[h_i]
                    d = dist[t]
                    w = cubic_w_scaled(math.sqrt(d), inv_h, sigma)
                    ws += w
                    wn += 1.0 - d * inv_s2
                    j = cj[t]
                    for a in range(k):
                        sums[a] += w * values[j, a]
                best = -1
                if cnt == 0:  # the nearest candidate, for a query out of every particle's reach
                    best_d = np.inf
                    for t in range(n):
                        if dist[t] < best_d:
                            best, best_d = t, dist[t]
                wsum[i] = ws
                count[i] = cnt
                wcount[i] = wn
                nearest[i] = cj[best] if best >= 0 else (cj[hits[0]] if cnt > 0 else -1)
                for a in range(k):
                    acc[i, a] = sums[a]


class KernelSums(NamedTuple):
    """What :func:`kernel_sums` returns, one row per query.

    wsum : (Q,) float64, 1/m^3 -- sum_j W(|q - x_j|)
    count : (Q,) int32 -- particles within the support (the query itself included if it is a particle)
    wcount : (Q,) float64 -- their distance-weighted count sum_j (1 - r^2 / support^2) (the query itself,
        if a particle, adds 1)
    acc : (Q, K) float64 -- sum_j W(|q - x_j|) values_j
    nearest : (Q,) int64 -- nearest particle (grid order) of the 27 cells around the query, -1 if none
    """

    wsum: np.ndarray
    count: np.ndarray
    wcount: np.ndarray
    acc: np.ndarray
    nearest: np.ndarray

    def shepard(self, values_sorted: np.ndarray) -> np.ndarray:
        """Normalised (Shepard) averages acc / wsum, float32 (Q, K); a query with no particle within
        the support takes the nearest particle's value, or zero if it has none around it."""
        out = np.zeros(self.acc.shape, np.float32)
        has = self.wsum > 0.0
        out[has] = self.acc[has] / self.wsum[has, None]
        near = ~has & (self.nearest >= 0)
        out[near] = values_sorted[self.nearest[near]]
        return out


def kernel_sums(particles: ParticleGrid, queries: np.ndarray, values_sorted: np.ndarray | None = None,
                query_cells: np.ndarray | None = None) -> KernelSums:
    """Kernel sums of ``particles`` at ``queries`` (see :class:`KernelSums`).

    Queries are grouped by the grid cell that holds them (occupied by particles or not), and each
    cell's candidates are gathered once for all of them.

    Parameters
    ----------
    particles : ParticleGrid
    queries : ndarray, shape (Q, 3), m
    values_sorted : ndarray, shape (N, K), float32, optional
        Per-particle values in the grid's order (:meth:`ParticleGrid.sorted`).
    query_cells : ndarray, shape (Q,), int32, optional
        ``particles.grid.particle_cell`` when the queries are the grid's own particles (``particles.x``).
    """
    q = np.ascontiguousarray(queries, dtype=np.float32).reshape(-1, 3)
    values = np.zeros((len(particles.x), 0), np.float32) if values_sorted is None else values_sorted
    nq, k = len(q), values.shape[1]
    out = KernelSums(np.zeros(nq, np.float64), np.zeros(nq, np.int32), np.zeros(nq, np.float64),
                     np.zeros((nq, k), np.float64), np.full(nq, -1, np.int64))
    if nq == 0 or len(particles.x) == 0:
        return out
    g = particles.grid
    support = np.float32(particles.support)
    no_h = np.zeros(len(particles.x), np.float32)  # the candidates' smoothing lengths: unused here
    if query_cells is not None:  # the particles themselves, already sorted by cell
        _cell_sums(q, g.cell_start, particles.x, values, no_h, support, g.cell_start, g.cell_nbr, *out)
        return out
    keys = np.empty(nq, np.uint64)
    coords = np.empty((nq, 3), np.int64)
    _query_cells(q, 1.0 / g.cell_size, keys, coords)
    cells, first, which = np.unique(keys, return_index=True, return_inverse=True)
    around = np.empty((len(cells), 27), np.int32)
    _cells_around(np.ascontiguousarray(coords[first]), g.cell_key, around)
    order = np.argsort(which, kind="stable")
    q_start = np.zeros(len(cells) + 1, np.int64)
    np.cumsum(np.bincount(which, minlength=len(cells)), out=q_start[1:])
    part = KernelSums(*(np.empty_like(a) for a in out))
    _cell_sums(np.ascontiguousarray(q[order]), q_start, particles.x, values, no_h, support, g.cell_start, around,
               *part)
    for full, sub in zip(out, part):
        full[order] = sub
    return out


# -- the colour field on a dense grid ----------------------------------------------------------------

class DenseGrid(NamedTuple):
    """Points ``origin + (i, j, k) * cell`` for i < shape[0], j < shape[1], k < shape[2] (m)."""

    origin: np.ndarray  # (3,) float64, m; a whole multiple of ``cell`` on every axis
    cell: float
    shape: tuple

    @property
    def points(self) -> int:
        return int(self.shape[0]) * int(self.shape[1]) * int(self.shape[2])

    @staticmethod
    def around(x: np.ndarray, cell: float, support: float) -> "DenseGrid":
        """The grid that holds every point within ``support`` of the particles ``x`` plus one empty layer
        (the field is zero on its border, so the iso-surface inside it is closed). Its points are whole
        multiples of ``cell``, so a liquid at rest meshes the same from frame to frame."""
        lo = np.floor((x.min(axis=0).astype(np.float64) - support) / cell) - 1.0
        hi = np.ceil((x.max(axis=0).astype(np.float64) + support) / cell) + 1.0
        return DenseGrid(lo * cell, float(cell), tuple(int(n) for n in (hi - lo + 1.0)))


@njit(parallel=True, cache=True)
def _colour_field(x_by_i, volume, slab_lo, slab_hi, origin, cell, support,
                  # outputs
                  field, row_lo, row_hi):
    """field[i, j, k] = sum_j V_j W(|p_ijk - x_j|) (Löschner et al. 2023, eq. 1), slab by slab: slab s
    owns the points i in [s * SLAB_POINTS, (s + 1) * SLAB_POINTS) and reads the particles
    ``slab_lo[s]:slab_hi[s]`` of ``x_by_i`` (sorted by slab) that may reach into it. Each row
    (i, j) of points keeps the range of k it was written in (``row_lo``, ``row_hi``; empty rows keep
    nz and -1)."""
    nx, ny, nz = field.shape
    s2 = support * support
    h = 0.5 * support
    inv_h = 1.0 / h
    sigma = 1.0 / (math.pi * h * h * h)
    inv_cell = 1.0 / cell
    reach = support * inv_cell
    cell32 = np.float32(cell)
    inv_h32 = np.float32(inv_h)
    sigma32 = np.float32(sigma)
    for s in prange(slab_lo.shape[0]):
        i0 = s * SLAB_POINTS
        i1 = min(nx, i0 + SLAB_POINTS)
        for p in range(slab_lo[s], slab_hi[s]):
            px, py, pz, vp = x_by_i[p, 0], x_by_i[p, 1], x_by_i[p, 2], volume[p]
            vp32 = np.float32(vp)
            gx = (px - origin[0]) * inv_cell
            gy = (py - origin[1]) * inv_cell
            gz = (pz - origin[2]) * inv_cell
            ia = max(i0, int(math.ceil(gx - reach)))
            ib = min(i1 - 1, int(math.floor(gx + reach)))
            ja = max(0, int(math.ceil(gy - reach)))
            jb = min(ny - 1, int(math.floor(gy + reach)))
            for i in range(ia, ib + 1):
                dx = origin[0] + i * cell - px
                dxx = dx * dx
                for j in range(ja, jb + 1):
                    dy = origin[1] + j * cell - py
                    dxy = dxx + dy * dy
                    if dxy >= s2:
                        continue
                    rz = math.sqrt(s2 - dxy) * inv_cell  # the support's half-chord along k, in cells
                    ka = max(0, int(math.ceil(gz - rz)))
                    kb = min(nz - 1, int(math.floor(gz + rz)))
                    if ka > kb:
                        continue
                    if ka < row_lo[i, j]:
                        row_lo[i, j] = ka
                    if kb > row_hi[i, j]:
                        row_hi[i, j] = kb
                    # no branch: the kernel is zero at and beyond its support (vectorised along k)
                    z0 = np.float32(origin[2] + ka * cell - pz)
                    dxy32 = np.float32(dxy)
                    for k in range(ka, kb + 1):
                        dz = z0 + np.float32(k - ka) * cell32
                        field[i, j, k] += vp32 * cubic_w_scaled(math.sqrt(dxy32 + dz * dz), inv_h32, sigma32)


class ColourField(NamedTuple):
    """The colour field on a dense grid and, for every row (i, j) of points, the range of k where it
    may be non-zero (``row_lo`` > ``row_hi`` for an empty row).

    values : (nx, ny, nz) float32, C-contiguous
    row_lo, row_hi : (nx, ny) int32
    """

    values: np.ndarray
    row_lo: np.ndarray
    row_hi: np.ndarray


def colour_field(x: np.ndarray, volume: np.ndarray, grid: DenseGrid, support: float) -> ColourField:
    """The colour field c = sum_j V_j W(|p - x_j|) at every point of ``grid``.

    Parameters
    ----------
    x : ndarray, shape (N, 3), m
    volume : ndarray, shape (N,), m^3 -- V_j = m_j / rho_j
    grid : DenseGrid
    support : float, m

    Returns
    -------
    ColourField (1 inside the bulk of the liquid, 0 far away)
    """
    field = np.zeros(grid.shape, np.float32)
    row_lo = np.full(grid.shape[:2], grid.shape[2], np.int32)
    row_hi = np.full(grid.shape[:2], -1, np.int32)
    if len(x) == 0:
        return ColourField(field, row_lo, row_hi)
    # particles by the slab their point falls in, keeping the caller's order within a slab (the neighbour
    # grid's Morton order: particles next to each other in memory add into nearby points); slab s reads
    # the particles of the slabs within reach
    nslab = (grid.shape[0] + SLAB_POINTS - 1) // SLAB_POINTS
    home = np.clip(np.floor((x[:, 0].astype(np.float64) - grid.origin[0]) / grid.cell).astype(np.int64)
                   // SLAB_POINTS, 0, nslab - 1)
    order = np.argsort(home, kind="stable")
    xs = np.ascontiguousarray(x[order], dtype=np.float64)
    vs = np.ascontiguousarray(np.asarray(volume, np.float64)[order])
    bounds = np.searchsorted(home[order], np.arange(nslab + 1))
    reach = int(np.ceil(support / grid.cell / SLAB_POINTS))
    slab_lo = bounds[np.maximum(np.arange(nslab) - reach, 0)].astype(np.int64)
    slab_hi = bounds[np.minimum(np.arange(nslab) + reach + 1, nslab)].astype(np.int64)
    _colour_field(xs, vs, slab_lo, slab_hi, np.asarray(grid.origin, np.float64), float(grid.cell), float(support),
                  field, row_lo, row_hi)
    return ColourField(field, row_lo, row_hi)


# -- thin-sheet bridges -------------------------------------------------------------------------------

@njit(cache=True)
def _bridges(x, sparse, rmin, nbr_start, nbr_count, nbr, out, count_only):
    """Mid-points of the listed pairs i < j of sparse particles at least ``rmin`` apart; returns how many."""
    lo2 = rmin * rmin
    m = 0
    for i in range(x.shape[0]):
        if not sparse[i]:
            continue
        for t in range(nbr_start[i], nbr_start[i] + nbr_count[i]):
            j = nbr[t]
            if j <= i or not sparse[j]:
                continue
            d0 = x[j, 0] - x[i, 0]
            d1 = x[j, 1] - x[i, 1]
            d2 = x[j, 2] - x[i, 2]
            if d0 * d0 + d1 * d1 + d2 * d2 >= lo2:
                if not count_only:
                    out[m, 0] = x[i, 0] + 0.5 * d0
                    out[m, 1] = x[i, 1] + 0.5 * d1
                    out[m, 2] = x[i, 2] + 0.5 * d2
                m += 1
    return m


def pair_midpoints(particles: ParticleGrid, sparse_sorted: np.ndarray, rmin: float, rmax: float) -> np.ndarray:
    """Mid-points of every pair of ``sparse_sorted`` particles (a mask in the grid's order) between ``rmin``
    and ``rmax`` apart (``rmax`` at most the grid's cell), in a fixed order.

    Returns
    -------
    ndarray, shape (B, 3), float32, m
    """
    from ..neighbors import NeighbourList

    if rmax > particles.grid.cell_size * (1 + 1e-9):
        raise ValueError(f"pair distance {rmax} exceeds the grid's cell {particles.grid.cell_size}")
    pairs = NeighbourList()
    pairs.build(particles.x, np.full(len(particles.x), 0.5 * rmax, np.float32), particles.grid._replace(order=None))
    args = (particles.x, np.ascontiguousarray(sparse_sorted, np.bool_), np.float32(rmin), pairs.start, pairs.count,
            pairs.nbr)
    n = _bridges(*args, np.zeros((0, 3), np.float32), True)
    out = np.empty((n, 3), np.float32)
    _bridges(*args, out, False)
    return out
