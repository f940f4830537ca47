"""The grid's boundary row from the SPH particles: Suárez & Susín 2006, "Mesh-particle model for fluid
animation", eq. 9 (Shepard-normalised kernel interpolation of the particles' velocity and P = p / rho
at the row's own staggered nodes).

The particles around a node are found in the cell grid of :mod:`engine.core.cell_grid` (the nodes are not
particles: each looks up its 27 cells, :func:`engine.core.cell_grid.around_cell`). :class:`BoundaryRow` keeps,
from one neighbour-list build to the next, the list of particles within 2h + SKIN h / 2 of every node
of the boundary row, found in the grid of that build (:meth:`BoundaryRow.build`), so eq. 9 needs no
search each substep (:func:`fill_row_listed`); rows filled once (the first fill, rows the MAC part
takes over) search a grid of the particles around them (:func:`fill_rows`).
"""

from __future__ import annotations

import math
from typing import NamedTuple

import numpy as np
from numba import njit, prange

from ...core.cell_grid import CellGrid, around_cell, build_grid, cell_coords
from ...core.kernels import cubic_shape32
from ..sph import pair_offset
from .model import FASTMATH


class NodeLists(NamedTuple):
    """The boundary row's nodes (:func:`row_nodes`: positions (M, 3) m, component (M,) int8, face or cell
    (M, 2) int32) and, per node m, the rows of the particles listed for it: ``nbr[start[m]:start[m] +
    count[m]]``; ``row``: the grid row they are for."""

    pos: np.ndarray
    comp: np.ndarray
    ij: np.ndarray
    start: np.ndarray
    count: np.ndarray
    nbr: np.ndarray
    row: int


@njit(inline="always", cache=True)
def _node_term(x, v, p, rho, n, fx, fy, fz, mass, inv_h, r2max, comp):
    """Particle n's share of the Shepard sums at a node (eq. 9): (weight, weight times the velocity
    component ``comp`` (0-2) or p / rho (3)), with the cubic spline without its normalisation, which the
    Shepard ratio cancels, in single precision like the SPH sums; (0, 0) beyond 2h."""
    _, _, _, r2 = pair_offset(x, n, fx, fy, fz)
    if r2 >= r2max:
        return np.float32(0.0), np.float32(0.0)
    r = rho[n]
    wt = np.float32(mass) / r * cubic_shape32(math.sqrt(r2) * inv_h)
    return wt, wt * (p[n] / r if comp == 3 else v[n, comp])


@njit(inline="always", cache=True)
def _node_sum(px, py, pz, x, v, p, rho, rows, cell_key, cell_start, inv, mass, h, comp):
    """Shepard-normalised kernel interpolation at a node (eq. 9) of the velocity component ``comp``
    (0-2) or of p / rho (3), over the particles ``rows[cell_start[c]:cell_start[c + 1]]`` of the 27
    cells (edge >= 2h) around the node. Returns (value, weight sum), in single precision like the
    SPH sums."""
    ci, cj, ck = cell_coords(px, py, pz, inv)
    inv_h = np.float32(1.0 / h)
    r2max = np.float32(4.0 * h * h)
    fx = np.float32(px)
    fy = np.float32(py)
    fz = np.float32(pz)
    zero = np.float32(0.0)
    s = zero
    sw = zero
    for q in range(27):
        c = around_cell(cell_key, ci, cj, ck, q)
        if c >= 0:
            for t in range(cell_start[c], cell_start[c + 1]):
                wt, ws = _node_term(x, v, p, rho, rows[t], fx, fy, fz, mass, inv_h, r2max, comp)
                sw += wt
                s += ws
    if sw > zero:
        return np.float64(s) / np.float64(sw), np.float64(sw)
    return 0.0, 0.0


@njit(parallel=True, cache=True, fastmath=FASTMATH)
def fill_rows(x, v, p, rho, rows, cell_key, cell_start, inv, mass, h, k0, k1, ox, oy, oz, cell, solid,
              # outputs
              u, vv, w, pg):
    """Rows k0..k1 of the grid from particles (eq. 9): P = p / rho at the cell centres, u and v on the
    row's faces, w on the face above each cell, from the particles ``rows`` in the cells of a grid of
    cell edge 1 / inv >= 2h (:func:`engine.core.cell_grid.build_grid`; ``cell_key``, ``cell_start`` index
    ``rows``). Nodes without a particle keep their value, except P, which becomes 0 (the free surface
    is above them)."""
    ni, nj, nk = solid.shape
    for i in prange(ni + 1):
        for j in range(nj + 1):
            for k in range(k0, k1 + 1):
                zc = oz + (k + 0.5) * cell
                if j < nj:
                    val, sw = _node_sum(ox + i * cell, oy + (j + 0.5) * cell, zc, x, v, p, rho, rows, cell_key,
                                        cell_start, inv, mass, h, 0)
                    if sw > 0.0:
                        u[i, j, k] = val
                if i < ni:
                    val, sw = _node_sum(ox + (i + 0.5) * cell, oy + j * cell, zc, x, v, p, rho, rows, cell_key,
                                        cell_start, inv, mass, h, 1)
                    if sw > 0.0:
                        vv[i, j, k] = val
                if i < ni and j < nj:
                    px = ox + (i + 0.5) * cell
                    py = oy + (j + 0.5) * cell
                    if k + 1 <= nk:
                        val, sw = _node_sum(px, py, zc + 0.5 * cell, x, v, p, rho, rows, cell_key, cell_start, inv,
                                            mass, h, 2)
                        if sw > 0.0:
                            w[i, j, k + 1] = val
                    val, sw = _node_sum(px, py, zc, x, v, p, rho, rows, cell_key, cell_start, inv, mass, h, 3)
                    pg[i, j, k] = 0.0 if solid[i, j, k] else val


@njit(cache=True)
def row_nodes(ox, oy, oz, cell, ni, nj, nk, k):
    """The nodes of boundary row k (eq. 9): u faces ((ni + 1) nj), v faces (ni (nj + 1)), the
    w faces on the row's top (ni nj, if the grid has them) and the cell centres for P (ni nj), in
    that order. Returns positions (M, 3) and, per node, its component (0-2: u, v, w; 3: P) and
    its face or cell (i, j)."""
    zc = oz + (k + 0.5) * cell
    top = k + 1 <= nk
    m = (ni + 1) * nj + ni * (nj + 1) + (ni * nj if top else 0) + ni * nj
    pos = np.empty((m, 3), dtype=np.float64)
    comp = np.empty(m, dtype=np.int8)
    ij = np.empty((m, 2), dtype=np.int32)
    t = 0
    for i in range(ni + 1):
        for j in range(nj):
            pos[t, 0] = ox + i * cell
            pos[t, 1] = oy + (j + 0.5) * cell
            pos[t, 2] = zc
            comp[t] = 0
            ij[t, 0] = i
            ij[t, 1] = j
            t += 1
    for i in range(ni):
        for j in range(nj + 1):
            pos[t, 0] = ox + (i + 0.5) * cell
            pos[t, 1] = oy + j * cell
            pos[t, 2] = zc
            comp[t] = 1
            ij[t, 0] = i
            ij[t, 1] = j
            t += 1
    for c in range(2 if top else 1):
        for i in range(ni):
            for j in range(nj):
                pos[t, 0] = ox + (i + 0.5) * cell
                pos[t, 1] = oy + (j + 0.5) * cell
                pos[t, 2] = zc + 0.5 * cell if (top and c == 0) else zc
                comp[t] = 2 if (top and c == 0) else 3
                ij[t, 0] = i
                ij[t, 1] = j
                t += 1
    return pos, comp, ij


@njit(parallel=True, cache=True)
def node_candidates(pos, x, cell_key, cell_start, inv, reach, start, cap,
                    # outputs
                    count, nbr):
    """For every node of ``pos``, the particles within ``reach`` (at most the cell edge 1 / inv) among the
    27 cells around it in a grid of ``x`` (sorted rows, :func:`engine.core.cell_grid.build_grid`): their rows
    into nbr[start[m]:start[m] + cap[m]], in cell order (the same order on every build from the same
    positions), and how many there are into count[m] (more than cap[m]: the list did not fit; cap = 0
    only counts)."""
    r2max = reach * reach
    for m in prange(pos.shape[0]):
        px = pos[m, 0]
        py = pos[m, 1]
        pz = pos[m, 2]
        ci, cj, ck = cell_coords(px, py, pz, inv)
        n = 0
        out = start[m]
        room = cap[m]
        for q in range(27):
            c = around_cell(cell_key, ci, cj, ck, q)
            if c < 0:
                continue
            for t in range(cell_start[c], cell_start[c + 1]):
                _, _, _, r2 = pair_offset(x, t, px, py, pz)
                if r2 < r2max:
                    if n < room:
                        nbr[out + n] = t
                    n += 1
        count[m] = n


@njit(parallel=True, cache=True, fastmath=FASTMATH)
def fill_row_listed(x, v, p, rho, mass, h, lists, solid,
                    # outputs
                    u, vv, w, pg):
    """Row ``lists.row`` of the grid from each node's listed particles (``lists``, :class:`NodeLists` of
    :func:`node_candidates`, built with a skin at the last neighbour-list build): the same
    Shepard-normalised sums as :func:`fill_rows` (eq. 9), without searching the grid every substep."""
    pos, comp, ij, start, count, nbr, k = lists
    inv_h = np.float32(1.0 / h)
    r2max = np.float32(4.0 * h * h)
    zero = np.float32(0.0)
    for m in prange(pos.shape[0]):
        fx = np.float32(pos[m, 0])
        fy = np.float32(pos[m, 1])
        fz = np.float32(pos[m, 2])
        c = comp[m]
        s = zero
        sw = zero
        for t in range(start[m], start[m] + count[m]):
            wt, ws = _node_term(x, v, p, rho, nbr[t], fx, fy, fz, mass, inv_h, r2max, c)
            sw += wt
            s += ws
        i = ij[m, 0]
        j = ij[m, 1]
        if c == 3:
            val = np.float64(s) / np.float64(sw) if sw > zero else 0.0
            pg[i, j, k] = 0.0 if solid[i, j, k] else val
        elif sw > zero:
            val = np.float64(s) / np.float64(sw)
            if c == 0:
                u[i, j, k] = val
            elif c == 1:
                vv[i, j, k] = val
            else:
                w[i, j, k + 1] = val


class BoundaryRow:
    """Eq. 9 for one grid: the node lists of the boundary row.

    Attributes
    ----------
    lists : NodeLists or None
        The lists of the last neighbour-list build (None: none, the next fill searches afresh).
    recounts : int
        Builds whose slices had to be counted again (a node's list outgrew the room the last build's
        count gave it).
    """

    def __init__(self):
        self.lists: NodeLists | None = None
        self.recounts = 0
        self._counts = np.zeros(0, dtype=np.int64)  # per node, its list's length at the last build
        self._counts_row = -1                        # the row of those counts

    @property
    def row(self) -> int:
        """The row the node lists are for (-1: none)."""
        return self.lists.row if self.lists is not None else -1

    def forget(self) -> None:
        """Drop the node lists (the particle rows they name changed)."""
        self.lists = None

    def build(self, grid, x: np.ndarray, cells: CellGrid | None, reach: float, ktop: int) -> None:
        """For every node of row ``ktop`` of ``grid``, the particles within ``reach`` (2h + SKIN h / 2) of
        it at positions ``x``, the sorted rows of a neighbour-list build whose cells are ``cells`` (edge
        2h + SKIN h >= ``reach``): until the next build no particle moves SKIN h / 2, so every particle
        within 2h of a node at a later substep is listed, and :meth:`fill` fills the row from the lists
        instead of searching every substep."""
        self.lists = None
        if ktop <= 0 or cells is None or x.shape[0] == 0:
            return
        if reach > cells.cell_size:
            raise ValueError(f"node reach {reach} exceeds the cell size {cells.cell_size}")
        ni, nj, nk = grid.shape
        pos, comp, ij = row_nodes(grid.origin[0], grid.origin[1], grid.origin[2], grid.cell, ni, nj, nk, int(ktop))
        # each node's slice sized from its count at the last build of the same row (plus a margin):
        # one pass; a first build, or a node whose list outgrew its slice, takes a counting pass
        count = np.zeros(len(pos), dtype=np.int64)
        args = (pos, x, cells.cell_key, cells.cell_start, 1.0 / cells.cell_size, reach)
        last = self._counts if self._counts.shape[0] == len(pos) and self._counts_row == ktop else None
        if last is None:
            nothing = np.zeros(len(pos), dtype=np.int64)
            node_candidates(*args, nothing, nothing, count, np.zeros(0, dtype=np.int32))  # counts only
            cap = count.copy()
        else:
            cap = last + last // 4 + 8
        node_start = np.zeros(len(pos), dtype=np.int64)
        np.cumsum(cap[:-1], out=node_start[1:])
        nbr = np.empty(int(node_start[-1] + cap[-1]), dtype=np.int32)
        node_candidates(*args, node_start, cap, count, nbr)
        if np.any(count > cap):  # grown past the margin: exact slices from these counts
            cap = count.copy()
            np.cumsum(cap[:-1], out=node_start[1:])
            nbr = np.empty(int(node_start[-1] + cap[-1]), dtype=np.int32)
            node_candidates(*args, node_start, cap, count, nbr)
            self.recounts += 1
        self._counts = count
        self._counts_row = int(ktop)
        self.lists = NodeLists(pos, comp, ij, node_start, count, nbr, int(ktop))

    def fill(self, grid, x, v, p, rho, n_search: int, mass: float, h: float, k0: int, k1: int,
             use_lists: bool = True) -> None:
        """Rows k0..k1 of ``grid`` from the particles around them (eq. 9): the boundary row alone from the
        node lists when they are for it (and ``use_lists``), other rows (or without lists) from the
        first ``n_search`` particles, those within 2h of the rows binned in a cell grid of edge 2h."""
        lists = self.lists
        if use_lists and lists is not None and k0 == k1 == lists.row:
            fill_row_listed(x, v, p, rho, mass, h, lists, grid.solid, grid.u, grid.v, grid.w, grid.p)
            return
        zlo = grid.origin[2] + k0 * grid.cell - 2.0 * h
        zhi = grid.origin[2] + (k1 + 1) * grid.cell + 2.0 * h
        z = x[:n_search, 2]
        band = np.flatnonzero((z >= zlo) & (z <= zhi)).astype(np.int32)
        cells = build_grid(x[band], 2.0 * h)
        rows = band[cells.order]
        fill_rows(x, v, p, rho, rows, cells.cell_key, cells.cell_start, 1.0 / cells.cell_size, mass, h, int(k0),
                  int(k1), grid.origin[0], grid.origin[1], grid.origin[2], grid.cell, grid.solid, grid.u, grid.v,
                  grid.w, grid.p)

    def nbytes(self) -> int:
        """Bytes of the node lists."""
        arrays = [self._counts]
        if self.lists is not None:
            arrays += [self.lists.pos, self.lists.comp, self.lists.ij, self.lists.start, self.lists.count,
                       self.lists.nbr]
        return int(sum(a.nbytes for a in arrays))
