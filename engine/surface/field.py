"""Kernel sums of one frame's particles: particle volumes, the colour field on a grid, values at vertices.

Every sum here uses the cubic spline of Monaghan 1992 (:func:`engine.core.kernels.cubic_w`) with compact
support ``support`` (h = support / 2), the kernel splashsurf uses, and the particles binned by
:func:`engine.core.cell_grid.build_grid` with cells of at least the support:

* :func:`self_sums` -- at every particle, sum_j W(|x_i - x_j|) and the (distance-weighted) count of
  particles within the support: their number densities and neighbour counts;
* :func:`point_averages` -- at any query points, kernel-weighted averages sum_j W a_j / sum_j W (or with
  another column of the values in the weights) of per-particle values a_j: the vertex attributes and
  the smoothing weights;
* :func:`colour_field` -- the SPH colour field c(p) = sum_j V_j W(|p - x_j|) at every point of a dense
  grid, V_j the particle's volume (Löschner et al. 2023, "Weighted Laplacian Smoothing for Surface
  Reconstruction of Particle-based Fluids", eq. 1 with V_j = m_j / rho_j).

The first two gather from the 27 cells around each query's cell (no scatter, so no race between
threads): the candidates of a cell are copied into contiguous buffers once for all the queries in
it, and each query runs over all of them without a branch (the kernel is zero beyond its support),
a loop the compiler vectorises. In the colour field each particle adds into a fixed window of grid
points around it; the grid is cut into slabs along its first axis, each slab owned by one task that
adds only into its own points (a fixed partition: the sums, and so the mesh, do not depend on the
thread count).
"""

from __future__ import annotations

import math
from typing import NamedTuple

import numpy as np
from numba import njit, prange

from ..core.compile import FASTMATH_SUMS as FASTMATH
from ..core.cell_grid import CellGrid, around_cell, build_grid, cell_coords, find_cell, morton_key
from ..core.hash_table import fill_table, probe
from ..core.kernels import cubic_shape32
from ..core.neighbour_list import chunk_width, gather_candidates

#: Query cells per parallel task of :func:`self_sums` and :func:`point_averages` (each cell's candidates
#: gathered once for all the queries in it).
CELL_CHUNK = 16


#: Grid points along the first axis per slab of :func:`colour_field` (a fixed partition).
SLAB_POINTS = 8


class ParticleGrid(NamedTuple):
    """A frame's particles sorted by :func:`engine.core.cell_grid.build_grid`.

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


@njit(parallel=True, nogil=True, cache=True)
def _query_keys(q, inv_cell, keys):
    """The Morton key of the grid cell holding each query."""
    for i in prange(q.shape[0]):
        ci, cj, ck = cell_coords(q[i, 0], q[i, 1], q[i, 2], inv_cell)
        keys[i] = morton_key(ci, cj, ck)


@njit(cache=True)
def _group_keys(keys, order, start):
    """Group equal ``keys`` (a counting sort through an open-addressing hash table,
    :mod:`engine.core.hash_table`, groups in the order of their first query): ``order[start[g]:start[g +
    1]]`` are group g's queries in their own order. Returns the number of groups. The table starts small
    and doubles when half full: it holds the groups, far fewer than the queries, and stays in cache."""
    n = keys.shape[0]
    bits = 10
    table = np.full(1 << bits, -1, np.int32)
    group_key = np.empty(n, np.uint64)
    group = np.empty(n, np.int32)
    size = np.zeros(n + 1, np.int64)
    m = 0
    g = -1
    for i in range(n):
        key = keys[i]
        if i == 0 or key != keys[i - 1]:  # neighbouring queries (mesh vertices) often share a cell
            slot = probe(table, group_key, key, bits)
            if table[slot] < 0:
                table[slot] = m
                group_key[m] = key
                m += 1
                if 2 * m > (1 << bits):  # half full: rehash the groups into a table twice as large
                    bits += 1
                    table = np.full(1 << bits, -1, np.int32)
                    fill_table(group_key, m, bits, table)
                g = m - 1
            else:
                g = table[slot]
        group[i] = g
        size[g + 1] += 1
    start[0] = 0
    for g in range(m):
        start[g + 1] = start[g] + size[g + 1]
    fill = start[:m].copy()
    for i in range(n):
        g = group[i]
        order[fill[g]] = i
        fill[g] += 1
    return m


class QueryGroups(NamedTuple):
    """Query points grouped by the cell of a :class:`ParticleGrid` that holds them.

    order : (Q,) int64 -- the queries of group g are ``order[start[g]:start[g + 1]]``
    start : (G + 1,) int64
    """

    order: np.ndarray
    start: np.ndarray

    @staticmethod
    def build(particles: "ParticleGrid", q: np.ndarray) -> "QueryGroups":
        keys = np.empty(len(q), np.uint64)
        inv = 1.0 / particles.grid.cell_size
        _query_keys(q, inv, keys)
        order = np.empty(len(q), np.int64)
        start = np.empty(len(q) + 1, np.int64)
        m = _group_keys(keys, order, start)
        return QueryGroups(order, start[:m + 1].copy())


@njit(parallel=True, nogil=True, cache=True, fastmath=FASTMATH)
def _self_sums(x, support, cell_start, cell_nbr,
               # outputs
               wsum, count, wcount):
    """For every particle i (grid order): sum_j W_ij, the count of particles within ``support`` and their
    distance-weighted count sum_j (1 - r_ij^2 / support^2), i itself included. The particles of a cell's
    27 neighbour cells are copied into contiguous buffers once (:func:`engine.core.neighbour_list.gather_candidates`)
    and every particle of the cell runs over all of them without a branch (the kernel and the count's
    weight are zero beyond the support): the loop is vectorised."""
    m = cell_nbr.shape[0]
    s2 = np.float32(support * support)
    inv_s2 = np.float32(1.0) / s2
    h = 0.5 * support
    inv_h = np.float32(1.0 / h)
    sigma = 1.0 / (math.pi * h * h * h)
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
            n = gather_candidates(c, x, no_h, cell_start, cell_nbr, 0, cx, cy, cz, ch, cj)  # 0: every neighbour cell
            for i in range(cell_start[c], cell_start[c + 1]):
                qx, qy, qz = x[i, 0], x[i, 1], x[i, 2]
                ws = zero
                wn = zero
                cnt = 0
                for t in range(n):
                    d0 = qx - cx[t]
                    d1 = qy - cy[t]
                    d2 = qz - cz[t]
                    d = d0 * d0 + d1 * d1 + d2 * d2
                    ws += _spline(d, inv_h)
                    wn += max(one - d * inv_s2, zero)
                    cnt += d < s2
                wsum[i] = sigma * ws
                count[i] = cnt
                wcount[i] = wn


@njit(inline="always", cache=True, fastmath=FASTMATH)
def _spline(d, inv_h):
    """:func:`engine.core.kernels.cubic_shape32` (the spline without its factor 1 / (pi h^3)) of the
    squared distance ``d`` (float32): zero at and beyond the support, without a branch."""
    return cubic_shape32(math.sqrt(d) * inv_h)


@njit(parallel=True, nogil=True, cache=True, fastmath=FASTMATH)
def _point_averages(q, q_order, q_start, x, values, denominator, use_nearest, support, inv_cell, cell_key,
                    cell_start, cell_nbr,
                    # outputs
                    out):
    """out[i] = sum_j W(|q_i - x_j|) values_j / D_i for every query, D_i = sum_j W (``denominator`` < 0) or
    sum_j W values_j[denominator]. A query with D_i = 0 takes the values of the nearest particle of
    the 27 cells around it (``use_nearest``; zero if there is none) or zero.

    The queries come grouped by their grid cell (:class:`QueryGroups`); a group's 27 neighbour cells
    are the grid's ``cell_nbr`` row if its cell holds particles, else looked up, and their particles'
    positions and values are copied into contiguous buffers once for all the group's queries, each of
    which runs over all of them without a branch (vectorised)."""
    g_count, k = q_start.shape[0] - 1, values.shape[1]
    h = 0.5 * support
    inv_h = np.float32(1.0 / h)
    zero = np.float32(0.0)
    no_h = np.zeros(x.shape[0], np.float32)
    for b in prange((g_count + CELL_CHUNK - 1) // CELL_CHUNK):
        g0 = b * CELL_CHUNK
        g1 = min(g_count, g0 + CELL_CHUNK)
        around = np.empty((g1 - g0, 27), np.int32)
        for g in range(g0, g1):
            i = q_order[q_start[g]]
            ci, cj, ck = cell_coords(q[i, 0], q[i, 1], q[i, 2], inv_cell)
            c = find_cell(cell_key, ci, cj, ck)
            for t in range(27):
                around[g - g0, t] = cell_nbr[c, t] if c >= 0 else around_cell(cell_key, ci, cj, ck, t)
        width = chunk_width(0, g1 - g0, cell_start, around)
        cx = np.empty(width, np.float32)
        cy = np.empty(width, np.float32)
        cz = np.empty(width, np.float32)
        ch = np.empty(width, np.float32)
        cj = np.empty(width, np.int32)
        cv = np.empty((k, width), np.float32)
        w = np.empty(width, np.float32)
        for g in range(g0, g1):
            n = gather_candidates(g - g0, x, no_h, cell_start, around, 0, cx, cy, cz, ch, cj)
            for t in range(n):
                for a in range(k):
                    cv[a, t] = values[cj[t], a]
            for t_i in range(q_start[g], q_start[g + 1]):
                i = q_order[t_i]
                qx, qy, qz = q[i, 0], q[i, 1], q[i, 2]
                ws = zero
                for t in range(n):
                    d0 = qx - cx[t]
                    d1 = qy - cy[t]
                    d2 = qz - cz[t]
                    wt = _spline(d0 * d0 + d1 * d1 + d2 * d2, inv_h)  # the factor 1 / (pi h^3) cancels
                    w[t] = wt
                    ws += wt
                for a in range(k):
                    sa = zero
                    for t in range(n):
                        sa += w[t] * cv[a, t]
                    out[i, a] = sa
                den = ws if denominator < 0 else out[i, denominator]
                if den > zero:
                    inv = np.float32(1.0) / den
                    for a in range(k):
                        out[i, a] *= inv
                    continue
                best = -1
                if use_nearest:  # the nearest candidate, for a query out of every particle's reach
                    best_d = np.inf
                    for t in range(n):
                        d0 = qx - cx[t]
                        d1 = qy - cy[t]
                        d2 = qz - cz[t]
                        d = d0 * d0 + d1 * d1 + d2 * d2
                        if d < best_d:
                            best, best_d = t, d
                for a in range(k):
                    out[i, a] = values[cj[best], a] if best >= 0 else zero


def self_sums(particles: ParticleGrid) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Kernel sums of the particles at themselves, in the grid's order, each particle included in its own:
    ``(wsum (N,) float64 1/m^3 sum_j W_ij, count (N,) int32 particles within the support,
    wcount (N,) float64 sum_j (1 - r_ij^2 / support^2))``."""
    n = len(particles.x)
    wsum, count, wcount = np.zeros(n, np.float64), np.zeros(n, np.int32), np.zeros(n, np.float64)
    if n:
        g = particles.grid
        _self_sums(particles.x, particles.support, g.cell_start, g.cell_nbr, wsum, count, wcount)
    return wsum, count, wcount


def point_averages(particles: ParticleGrid, queries: np.ndarray, values_sorted: np.ndarray, denominator: int = -1,
                   use_nearest: bool = True) -> np.ndarray:
    """Kernel-weighted averages of per-particle values at query points.

    out_i = sum_j W(|q_i - x_j|) a_j / D_i with D_i = sum_j W(|q_i - x_j|) (the Shepard average,
    ``denominator`` -1) or sum_j W(|q_i - x_j|) a_j[denominator] (a column of the values as the weights'
    own factor). Where D_i = 0 (no particle within the support): with ``use_nearest`` the values of the
    nearest particle of the 27 cells around the query (zero if it has none), else zero.

    Parameters
    ----------
    particles : ParticleGrid
    queries : ndarray, shape (Q, 3), m
    values_sorted : ndarray, shape (N, K), float32
        Per-particle values in the grid's order (:meth:`ParticleGrid.sorted`).

    Returns
    -------
    ndarray, shape (Q, K), float32, in the queries' order
    """
    q = np.ascontiguousarray(queries, dtype=np.float32).reshape(-1, 3)
    values = np.ascontiguousarray(values_sorted, dtype=np.float32).reshape(len(particles.x), -1)
    out = np.zeros((len(q), values.shape[1]), np.float32)
    if len(q) == 0 or len(particles.x) == 0:
        return out
    groups = QueryGroups.build(particles, q)
    g = particles.grid
    _point_averages(q, groups.order, groups.start, particles.x, values, int(denominator), bool(use_nearest),
                    np.float32(particles.support), 1.0 / g.cell_size, g.cell_key, g.cell_start, g.cell_nbr, out)
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
        return DenseGrid.spanning(x.min(axis=0).astype(np.float64) - support,
                                  x.max(axis=0).astype(np.float64) + support, cell)

    @staticmethod
    def spanning(lo, hi, cell: float) -> "DenseGrid":
        """The grid that holds the box from ``lo`` to ``hi`` (m) plus one layer of points around it, its points
        whole multiples of ``cell``."""
        a = np.floor(np.asarray(lo, np.float64) / cell) - 1.0
        b = np.ceil(np.asarray(hi, np.float64) / cell) + 1.0
        return DenseGrid(a * cell, float(cell), tuple(int(n) for n in (b - a + 1.0)))


@njit(parallel=True, nogil=True, cache=True, fastmath=FASTMATH)
def _colour_field(x_by_i, volume, slab_lo, slab_hi, origin, cell, support, width,
                  # outputs
                  field, row_lo, row_hi):
    """field[i, j, k] = sum_j V_j W(|p_ijk - x_j|) (Löschner et al. 2023, eq. 1), slab by slab: slab s
    owns the points i in [s * SLAB_POINTS, (s + 1) * SLAB_POINTS) and reads the particles
    ``slab_lo[s]:slab_hi[s]`` of ``x_by_i`` (sorted by slab) that may reach into it. Each row
    (i, j) of points keeps the range of k it was written in (``row_lo``, ``row_hi``; empty rows keep
    nz and -1).

    A particle's support holds at most ``width`` points along each axis (the open interval of 2 support
    / cell points): a particle adds into a window of ``width`` points per axis starting at the first point
    past its support's low end, rows outside the support's disc skipped, each row's ``width`` points
    without a branch (the kernel is zero at and beyond its support): a vectorised loop of fixed length.
    The grid holds every particle's window (:meth:`DenseGrid.around`)."""
    nx, ny, nz = field.shape
    s2 = support * support
    h = 0.5 * support
    inv_h = np.float32(1.0 / h)
    sigma = 1.0 / (math.pi * h * h * h)
    inv_cell = 1.0 / cell
    reach = support * inv_cell
    for s in prange(slab_lo.shape[0]):
        i0 = s * SLAB_POINTS
        i1 = min(nx, i0 + SLAB_POINTS)
        dz2 = np.empty(width, np.float32)
        for p in range(slab_lo[s], slab_hi[s]):
            px, py, pz = x_by_i[p, 0], x_by_i[p, 1], x_by_i[p, 2]
            vp = np.float32(volume[p] * sigma)
            gx = (px - origin[0]) * inv_cell
            gy = (py - origin[1]) * inv_cell
            gz = (pz - origin[2]) * inv_cell
            # the windows' first points, kept inside the grid (they are, but for rounding)
            ia = min(max(0, int(math.floor(gx - reach)) + 1), nx - width)
            ja = min(max(0, int(math.floor(gy - reach)) + 1), ny - width)
            ka = min(max(0, int(math.floor(gz - reach)) + 1), nz - width)
            ib = min(i1, ia + width)
            ia = max(i0, ia)
            if ia >= ib:
                continue
            z0 = origin[2] + ka * cell - pz
            for t in range(width):
                dz = np.float32(z0 + t * cell)
                dz2[t] = dz * dz
            kb = ka + width - 1
            for i in range(ia, ib):
                dx = origin[0] + i * cell - px
                dxx = dx * dx
                for j in range(ja, ja + width):
                    dy = origin[1] + j * cell - py
                    dxy = dxx + dy * dy
                    if dxy >= s2:
                        continue
                    if ka < row_lo[i, j]:
                        row_lo[i, j] = ka
                    if kb > row_hi[i, j]:
                        row_hi[i, j] = kb
                    dxy32 = np.float32(dxy)
                    row = field[i, j, ka:ka + width]
                    for t in range(width):
                        row[t] += vp * _spline(dxy32 + dz2[t], inv_h)


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
    width = int(math.ceil(2.0 * support / grid.cell))  # most points of an open interval of 2 support
    if min(grid.shape) < width:
        raise ValueError(f"grid {grid.shape} smaller than a particle's support ({width} points)")
    _colour_field(xs, vs, slab_lo, slab_hi, np.asarray(grid.origin, np.float64), float(grid.cell), float(support),
                  width, field, row_lo, row_hi)
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
    from ..core.neighbour_list import NeighbourList

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
