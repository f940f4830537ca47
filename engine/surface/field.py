"""Kernel sums of one frame's particles: particle volumes, the colour field on a grid, values at vertices.

Every sum here uses the cubic spline of Monaghan 1992 (:func:`engine.kernels.cubic_w`) with compact
support ``support`` (h = support / 2), the kernel splashsurf uses, and the particles binned by
:func:`engine.neighbors.build_grid` with cells of at least the support:

* :func:`kernel_sums` -- at any query points, the sums sum_j W(|q - x_j|) (and its count of particles
  within the support, and sum_j W a_j of per-particle values a_j), gathered from the 27 cells around
  each query (no scatter, so no race between threads). With the particles themselves as queries it
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

from ..kernels import cubic_w
from ..neighbors import CellGrid, around_cell, build_grid, cell_coords, find_cell

#: Queries per parallel task of :func:`kernel_sums` (one accumulator allocation per task).
QUERY_CHUNK = 256

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
def _kernel_sums(q, q_cell, x, values, support, inv_cell, cell_key, cell_start, cell_nbr,
                 # outputs
                 wsum, count, wcount, acc, nearest):
    """Gather, for every query q_i, sum_j W, the count of particles within ``support`` and their
    distance-weighted count sum_j (1 - r_ij^2 / support^2), sum_j W values_j and the nearest particle of
    the 27 cells around q_i (-1 if none). ``q_cell[i]`` is the occupied cell holding q_i, or -1 to find
    it (a query that is not one of the grid's particles)."""
    nq, k = q.shape[0], values.shape[1]
    s2 = support * support
    h = 0.5 * support
    for chunk in prange((nq + QUERY_CHUNK - 1) // QUERY_CHUNK):
        sums = np.empty(k, np.float64)
        for i in range(chunk * QUERY_CHUNK, min(nq, (chunk + 1) * QUERY_CHUNK)):
            qx, qy, qz = q[i, 0], q[i, 1], q[i, 2]
            c = q_cell[i]
            ci, cj, ck = cell_coords(qx, qy, qz, inv_cell)
            if c < 0:
                c = find_cell(cell_key, ci, cj, ck)
            sums[:] = 0.0
            ws = 0.0
            wn = 0.0
            n = 0
            best, best_d = -1, np.inf
            for t in range(27):
                nc = cell_nbr[c, t] if c >= 0 else around_cell(cell_key, ci, cj, ck, t)
                if nc < 0:
                    continue
                for j in range(cell_start[nc], cell_start[nc + 1]):
                    d0 = qx - x[j, 0]
                    d1 = qy - x[j, 1]
                    d2 = qz - x[j, 2]
                    d = d0 * d0 + d1 * d1 + d2 * d2
                    if d < best_d:
                        best, best_d = j, d
                    if d < s2:
                        w = cubic_w(math.sqrt(d), h)
                        ws += w
                        wn += 1.0 - d / s2
                        n += 1
                        for a in range(k):
                            sums[a] += w * values[j, a]
            wsum[i] = ws
            count[i] = n
            wcount[i] = wn
            nearest[i] = best
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

    Parameters
    ----------
    particles : ParticleGrid
    queries : ndarray, shape (Q, 3), m
    values_sorted : ndarray, shape (N, K), float32, optional
        Per-particle values in the grid's order (:meth:`ParticleGrid.sorted`).
    query_cells : ndarray, shape (Q,), int32, optional
        The occupied cell of each query when the queries are the grid's own particles
        (``particles.grid.particle_cell``): saves the look-up.
    """
    q = np.ascontiguousarray(queries, dtype=np.float32).reshape(-1, 3)
    values = np.zeros((len(particles.x), 0), np.float32) if values_sorted is None else values_sorted
    cells = np.full(len(q), -1, np.int32) if query_cells is None else np.ascontiguousarray(query_cells, np.int32)
    out = KernelSums(np.empty(len(q), np.float64), np.empty(len(q), np.int32), np.empty(len(q), np.float64),
                     np.empty((len(q), values.shape[1]), np.float64), np.empty(len(q), np.int64))
    if len(q) and len(particles.x):
        g = particles.grid
        _kernel_sums(q, cells, particles.x, values, np.float32(particles.support), 1.0 / g.cell_size, g.cell_key,
                     g.cell_start, g.cell_nbr, *out)
    else:
        out.wsum[:] = 0.0
        out.count[:] = 0
        out.wcount[:] = 0.0
        out.acc[:] = 0.0
        out.nearest[:] = -1
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
                  field):
    """field[i, j, k] = sum_j V_j W(|p_ijk - x_j|) (Löschner et al. 2023, eq. 1), slab by slab: slab s
    owns the points i in [s * SLAB_POINTS, (s + 1) * SLAB_POINTS) and reads the particles
    ``slab_lo[s]:slab_hi[s]`` of ``x_by_i`` (sorted along the first axis) that reach into it."""
    nx, ny, nz = field.shape
    s2 = support * support
    h = 0.5 * support
    reach = support / cell
    for s in prange(slab_lo.shape[0]):
        i0 = s * SLAB_POINTS
        i1 = min(nx, i0 + SLAB_POINTS)
        for p in range(slab_lo[s], slab_hi[s]):
            px, py, pz, vp = x_by_i[p, 0], x_by_i[p, 1], x_by_i[p, 2], volume[p]
            gx = (px - origin[0]) / cell
            gy = (py - origin[1]) / cell
            gz = (pz - origin[2]) / cell
            ia = max(i0, int(math.ceil(gx - reach)))
            ib = min(i1 - 1, int(math.floor(gx + reach)))
            ja = max(0, int(math.ceil(gy - reach)))
            jb = min(ny - 1, int(math.floor(gy + reach)))
            ka = max(0, int(math.ceil(gz - reach)))
            kb = min(nz - 1, int(math.floor(gz + reach)))
            for i in range(ia, ib + 1):
                dx = origin[0] + i * cell - px
                dxx = dx * dx
                for j in range(ja, jb + 1):
                    dy = origin[1] + j * cell - py
                    dxy = dxx + dy * dy
                    if dxy >= s2:
                        continue
                    for k in range(ka, kb + 1):
                        dz = origin[2] + k * cell - pz
                        d = dxy + dz * dz
                        if d < s2:
                            field[i, j, k] += vp * cubic_w(math.sqrt(d), h)


def colour_field(x: np.ndarray, volume: np.ndarray, grid: DenseGrid, support: float) -> np.ndarray:
    """The colour field c = sum_j V_j W(|p - x_j|) at every point of ``grid``.

    Parameters
    ----------
    x : ndarray, shape (N, 3), m
    volume : ndarray, shape (N,), m^3 -- V_j = m_j / rho_j
    grid : DenseGrid
    support : float, m

    Returns
    -------
    ndarray, shape ``grid.shape``, float32, C-contiguous (1 inside the bulk of the liquid, 0 far away)
    """
    field = np.zeros(grid.shape, np.float32)
    if len(x) == 0:
        return field
    order = np.argsort(x[:, 0], kind="stable")
    xs = np.ascontiguousarray(x[order], dtype=np.float64)
    vs = np.ascontiguousarray(np.asarray(volume, np.float64)[order])
    nslab = (grid.shape[0] + SLAB_POINTS - 1) // SLAB_POINTS
    first = grid.origin[0] + np.arange(nslab) * SLAB_POINTS * grid.cell
    last = grid.origin[0] + (np.minimum((np.arange(nslab) + 1) * SLAB_POINTS, grid.shape[0]) - 1) * grid.cell
    slab_lo = np.searchsorted(xs[:, 0], first - support, side="left").astype(np.int64)
    slab_hi = np.searchsorted(xs[:, 0], last + support, side="right").astype(np.int64)
    _colour_field(xs, vs, slab_lo, slab_hi, np.asarray(grid.origin, np.float64), float(grid.cell), float(support),
                  field)
    return field


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
