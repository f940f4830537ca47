"""The grid's boundary row from the SPH particles: Suárez & Susín 2006, "Mesh-particle model for fluid
animation", eq. 9 (Shepard-normalised kernel interpolation of the particles' velocity and P = p / rho
at the row's own staggered nodes).

:class:`BoundaryRow` keeps, from one neighbour-list build to the next, the list of particles within
2h + SKIN h / 2 of every node of the boundary row (:meth:`BoundaryRow.build`), so eq. 9 needs no
search each substep (:func:`fill_row_listed`); rows filled once (the first fill, rows the MAC part
takes over) bin the particles afresh (:func:`bin_band`, :func:`fill_rows`).
"""

from __future__ import annotations

import math
from typing import NamedTuple

import numpy as np
from numba import njit, prange

from ..sph import pair_offset
from .model import FASTMATH

#: Rows of the boundary row's particle bins (:func:`bin_band`): position, m / rho, velocity, p / rho.
BIN_X, BIN_M, BIN_U, BIN_Q = 0, 3, 4, 7
#: Edges of those bins in smoothing lengths: columns (x, y) and layers (z). A node reads the 3 x 3
#: columns within its support and in each one contiguous run of the layers within 2h of it.
COLUMN_EDGE = 2.0
LAYER_EDGE = 0.5


class BinLayout(NamedTuple):
    """Bins of the particles in a horizontal band zlo <= z <= zhi (metres): ``ncx`` x ``ncy`` columns of
    edge 1 / cinv from (cx0, cy0), ``ncz`` layers of height 1 / zinv from zlo."""

    cx0: float
    cy0: float
    zlo: float
    zhi: float
    cinv: float
    zinv: float
    ncx: int
    ncy: int
    ncz: int


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


def bin_layout(cx0: float, cy0: float, width_x: float, width_y: float, zlo: float, zhi: float, column: float,
               layer: float) -> BinLayout:
    """The bins of columns ``column`` wide and layers ``layer`` high over [cx0, cx0 + width_x] x [cy0, cy0 +
    width_y] x [zlo, zhi] (metres)."""
    inv = 1.0 / column
    zinv = 1.0 / layer
    return BinLayout(float(cx0), float(cy0), float(zlo), float(zhi), inv, zinv, max(int(math.ceil(width_x * inv)), 1),
                     max(int(math.ceil(width_y * inv)), 1), max(int(math.ceil((zhi - zlo) * zinv)), 1))


@njit(cache=True)
def bin_band(x, v, p, rho, n_sub, mass, layout,
             # outputs
             start, bins, ids):
    """Counting sort of the first ``n_sub`` particles with zlo <= z <= zhi into the bins of ``layout``
    (:class:`BinLayout`; bin (a, b, c) at a ncy ncz + b ncz + c):
    the particles of a column lie in z order of their layers, so a node reads the layers within
    its kernel support as one contiguous range per column. ``bins`` (8, N) float32 receives, per
    binned particle, x, y, z, m / rho, u, v, w and p / rho (rows :data:`BIN_X` ... :data:`BIN_Q`),
    ``ids`` its row; returns how many particles were binned."""
    cx0, cy0, zlo, zhi, cinv, zinv, ncx, ncy, ncz = layout
    nb = ncx * ncy * ncz
    start[:] = 0
    key = np.empty(n_sub, dtype=np.int64)
    for n in range(n_sub):
        z = x[n, 2]
        if z < zlo or z > zhi:
            key[n] = -1
            continue
        a = min(max(int(math.floor((x[n, 0] - cx0) * cinv)), 0), ncx - 1)
        b = min(max(int(math.floor((x[n, 1] - cy0) * cinv)), 0), ncy - 1)
        c = min(max(int((z - zlo) * zinv), 0), ncz - 1)
        k = (a * ncy + b) * ncz + c
        key[n] = k
        start[k + 1] += 1
    for k in range(nb):
        start[k + 1] += start[k]
    fill = start[:nb].copy()
    for n in range(n_sub):
        k = key[n]
        if k < 0:
            continue
        t = fill[k]
        fill[k] = t + 1
        r = rho[n]
        for d in range(3):
            bins[d, t] = x[n, d]
            bins[4 + d, t] = v[n, d]
        bins[BIN_M, t] = mass / r
        bins[BIN_Q, t] = p[n] / r
        ids[t] = n
    return start[nb]


@njit(inline="always", cache=True)
def _node_sum(px, py, pz, bins, comp, start, layout, h):
    """Shepard-normalised kernel interpolation at a node (eq. 9) of row ``comp`` of
    ``bins`` (a velocity component or p / rho), over the bins of :func:`bin_band` within 2h.
    Returns (value, weight sum). Each column's candidates are one contiguous range read without a
    branch (the kernel clamped to 0 outside its support), in single precision, so the loop runs in
    vector lanes."""
    cx0, cy0, zlo, _, cinv, zinv, ncx, ncy, ncz = layout
    support = 2.0 * h
    edge = 1.0 / cinv
    a0 = max(int(math.floor((px - support - cx0) * cinv)), 0)
    a1 = min(int(math.floor((px + support - cx0) * cinv)), ncx - 1)
    b0 = max(int(math.floor((py - support - cy0) * cinv)), 0)
    b1 = min(int(math.floor((py + support - cy0) * cinv)), ncy - 1)
    c0 = max(int(math.floor((pz - support - zlo) * zinv)), 0)
    c1 = min(int(math.floor((pz + support - zlo) * zinv)), ncz - 1)
    if c0 > c1:
        return 0.0, 0.0
    r2max = support * support
    inv_h = np.float32(1.0 / h)
    fx = np.float32(px)
    fy = np.float32(py)
    fz = np.float32(pz)
    two = np.float32(2.0)
    one = np.float32(1.0)
    quarter = np.float32(0.25)
    zero = np.float32(0.0)
    s = np.float32(0.0)
    sw = np.float32(0.0)
    for a in range(a0, a1 + 1):
        ex = max(cx0 + a * edge - px, 0.0, px - (cx0 + (a + 1) * edge))
        for b in range(b0, b1 + 1):
            ey = max(cy0 + b * edge - py, 0.0, py - (cy0 + (b + 1) * edge))
            if ex * ex + ey * ey >= r2max:
                continue  # the column lies outside the support
            base = (a * ncy + b) * ncz
            for t in range(start[base + c0], start[base + c1 + 1]):
                d0 = fx - bins[BIN_X, t]
                d1 = fy - bins[BIN_X + 1, t]
                d2 = fz - bins[BIN_X + 2, t]
                q = math.sqrt(d0 * d0 + d1 * d1 + d2 * d2) * inv_h
                k2 = max(two - q, zero)
                k1 = max(one - q, zero)
                # the kernel without its normalisation, which the Shepard ratio cancels
                wv = bins[BIN_M, t] * (quarter * k2 * k2 * k2 - k1 * k1 * k1)
                sw += wv
                s += wv * bins[comp, t]
    if sw > zero:
        return np.float64(s) / np.float64(sw), np.float64(sw)
    return 0.0, 0.0


@njit(parallel=True, cache=True, fastmath=FASTMATH)
def fill_rows(bins, start, layout, h, k0, k1, ox, oy, oz, cell, solid,
              # outputs
              u, v, w, p):
    """Rows k0..k1 of the grid from particles (eq. 9): P = p / rho at the cell centres, u and
    v on the row's faces, w on the face above each cell, from the particles binned by
    :func:`bin_band` (``bins``, ``start``). Nodes without a particle keep their value, except P,
    which becomes 0 (the free surface is above them)."""
    ni, nj, nk = solid.shape
    for i in prange(ni + 1):
        for j in range(nj + 1):
            for k in range(k0, k1 + 1):
                zc = oz + (k + 0.5) * cell
                if j < nj:
                    val, sw = _node_sum(ox + i * cell, oy + (j + 0.5) * cell, zc, bins, BIN_U, start, layout, h)
                    if sw > 0.0:
                        u[i, j, k] = val
                if i < ni:
                    val, sw = _node_sum(ox + (i + 0.5) * cell, oy + j * cell, zc, bins, BIN_U + 1, start, layout, h)
                    if sw > 0.0:
                        v[i, j, k] = val
                if i < ni and j < nj:
                    px = ox + (i + 0.5) * cell
                    py = oy + (j + 0.5) * cell
                    if k + 1 <= nk:
                        val, sw = _node_sum(px, py, zc + 0.5 * cell, bins, BIN_U + 2, start, layout, h)
                        if sw > 0.0:
                            w[i, j, k + 1] = val
                    val, sw = _node_sum(px, py, zc, bins, BIN_Q, start, layout, h)
                    p[i, j, k] = val
                    if solid[i, j, k]:
                        p[i, j, k] = 0.0


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
def node_candidates(pos, bins_start, bins, ids, layout, reach, start, cap,
                    # outputs
                    count, nbr):
    """For every node of ``pos``, the binned particles (:func:`bin_band`; ``ids`` their rows) within
    ``reach``: their rows into nbr[start[m]:start[m] + cap[m]], in bin order (the same order on every
    build from the same positions), and how many there are into count[m] (more than cap[m]: the list
    did not fit; cap = 0 only counts)."""
    cx0, cy0, zlo, _, cinv, zinv, ncx, ncy, ncz = layout
    r2max = reach * reach
    edge = 1.0 / cinv
    for m in prange(pos.shape[0]):
        px = pos[m, 0]
        py = pos[m, 1]
        pz = pos[m, 2]
        a0 = max(int(math.floor((px - reach - cx0) * cinv)), 0)
        a1 = min(int(math.floor((px + reach - cx0) * cinv)), ncx - 1)
        b0 = max(int(math.floor((py - reach - cy0) * cinv)), 0)
        b1 = min(int(math.floor((py + reach - cy0) * cinv)), ncy - 1)
        c0 = max(int(math.floor((pz - reach - zlo) * zinv)), 0)
        c1 = min(int(math.floor((pz + reach - zlo) * zinv)), ncz - 1)
        n = 0
        out = start[m]
        room = cap[m]
        for a in range(a0, a1 + 1):
            ex = max(cx0 + a * edge - px, 0.0, px - (cx0 + (a + 1) * edge))
            for b in range(b0, b1 + 1):
                ey = max(cy0 + b * edge - py, 0.0, py - (cy0 + (b + 1) * edge))
                if ex * ex + ey * ey >= r2max or c0 > c1:
                    continue
                base = (a * ncy + b) * ncz
                for t in range(bins_start[base + c0], bins_start[base + c1 + 1]):
                    d0 = px - bins[BIN_X, t]
                    d1 = py - bins[BIN_X + 1, t]
                    d2 = pz - bins[BIN_X + 2, t]
                    if d0 * d0 + d1 * d1 + d2 * d2 < r2max:
                        if n < room:
                            nbr[out + n] = ids[t]
                        n += 1
        count[m] = n


@njit(parallel=True, cache=True, fastmath=FASTMATH)
def fill_row_listed(x, v, p, rho, mass, h, lists, solid,
                    # outputs
                    u, vv, w, pg):
    """Row ``lists.row`` of the grid from each node's listed particles (``lists``, :class:`NodeLists` of
    :func:`node_candidates`, built with a skin at the last neighbour-list build): the same
    Shepard-normalised sums as :func:`fill_rows` (eq. 9), without searching bins every substep."""
    pos, comp, ij, start, count, nbr, k = lists
    inv_h = np.float32(1.0 / h)
    r2max = np.float32(4.0 * h * h)
    two = np.float32(2.0)
    one = np.float32(1.0)
    quarter = np.float32(0.25)
    zero = np.float32(0.0)
    for m in prange(pos.shape[0]):
        fx = np.float32(pos[m, 0])
        fy = np.float32(pos[m, 1])
        fz = np.float32(pos[m, 2])
        c = comp[m]
        s = zero
        sw = zero
        for t in range(start[m], start[m] + count[m]):
            n = nbr[t]
            _, _, _, r2 = pair_offset(x, n, fx, fy, fz)
            if r2 >= r2max:
                continue
            q = math.sqrt(r2) * inv_h
            k2 = two - q
            k1 = max(one - q, zero)
            r = rho[n]
            wt = np.float32(mass) / r * (quarter * k2 * k2 * k2 - k1 * k1 * k1)
            sw += wt
            s += wt * (p[n] / r if c == 3 else v[n, c])
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
    """Eq. 9 for one grid: the node lists of the boundary row and the work arrays of the binned fill.

    Attributes
    ----------
    lists : NodeLists or None
        The lists of the last neighbour-list build (None: none, the next fill bins afresh).
    recounts : int
        Builds whose slices had to be counted again (a node's list outgrew the room the last build's
        count gave it).
    """

    def __init__(self):
        self.lists: NodeLists | None = None
        self.recounts = 0
        self._counts = np.zeros(0, dtype=np.int64)  # per node, its list's length at the last build
        self._counts_row = -1                        # the row of those counts
        self._bin_start = np.zeros(1, dtype=np.int64)
        self._bins = np.empty((8, 0), dtype=np.float32)
        self._bin_ids = np.empty(0, dtype=np.int32)

    @property
    def row(self) -> int:
        """The row the node lists are for (-1: none)."""
        return self.lists.row if self.lists is not None else -1

    def forget(self) -> None:
        """Drop the node lists (the particle rows they name changed)."""
        self.lists = None

    def build(self, grid, x, v, p, rho, n_sub: int, mass: float, h: float, reach: float, ktop: int) -> None:
        """For every node of row ``ktop`` of ``grid``, the first ``n_sub`` particles within ``reach`` (2h + SKIN
        h / 2) of it at positions ``x`` (those of a neighbour-list build): until the next build no particle
        moves SKIN h / 2, so every particle within 2h of a node at a later substep is listed, and
        :meth:`fill` fills the row from the lists instead of binning the particles every substep."""
        self.lists = None
        if ktop <= 0 or n_sub == 0:
            return
        ni, nj, nk = grid.shape
        pos, comp, ij = row_nodes(grid.origin[0], grid.origin[1], grid.origin[2], grid.cell, ni, nj, nk, int(ktop))
        zlo = float(pos[:, 2].min()) - reach
        zhi = float(pos[:, 2].max()) + reach
        layout = bin_layout(grid.origin[0], grid.origin[1], ni * grid.cell, nj * grid.cell, zlo, zhi, reach,
                            LAYER_EDGE * h)
        start = np.zeros(layout.ncx * layout.ncy * layout.ncz + 1, dtype=np.int64)
        bins = np.empty((8, n_sub), dtype=np.float32)
        ids = np.empty(n_sub, dtype=np.int32)
        bin_band(x, v, p, rho, n_sub, mass, layout, start, bins, ids)
        # each node's slice sized from its count at the last build of the same row (plus a margin):
        # one pass; a first build, or a node whose list outgrew its slice, takes a counting pass
        count = np.zeros(len(pos), dtype=np.int64)
        args = (pos, start, bins, ids, layout, reach)
        last = self._counts if self._counts.shape[0] == len(pos) and self._counts_row == ktop else None
        if last is None:
            nothing = np.zeros(len(pos), dtype=np.int64)
            node_candidates(*args, nothing, nothing, count, ids[:0])  # counts only (every slice 0 long)
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

    def fill(self, grid, x, v, p, rho, n_bin: int, mass: float, h: float, k0: int, k1: int,
             use_lists: bool = True) -> None:
        """Rows k0..k1 of ``grid`` from the particles around them (eq. 9): the boundary row alone from the
        node lists when they are for it (and ``use_lists``), other rows (or without lists) from the first
        ``n_bin`` particles binned afresh."""
        lists = self.lists
        if use_lists and lists is not None and k0 == k1 == lists.row:
            fill_row_listed(x, v, p, rho, mass, h, lists, grid.solid, grid.u, grid.v, grid.w, grid.p)
            return
        # bins of edge 2h: a node reads 3 x 3 columns (fewer, those that reach its support), and in
        # each only the layers within 2h of it
        ni, nj, _ = grid.shape
        zlo = grid.origin[2] + k0 * grid.cell - 2.0 * h
        zhi = grid.origin[2] + (k1 + 1) * grid.cell + 2.0 * h
        layout = bin_layout(grid.origin[0], grid.origin[1], ni * grid.cell, nj * grid.cell, zlo, zhi,
                            COLUMN_EDGE * h, LAYER_EDGE * h)
        nb = layout.ncx * layout.ncy * layout.ncz + 1
        if self._bin_start.shape[0] != nb:
            self._bin_start = np.zeros(nb, dtype=np.int64)
        if self._bins.shape[1] < n_bin:
            self._bins = np.empty((8, n_bin), dtype=np.float32)
            self._bin_ids = np.empty(n_bin, dtype=np.int32)
        bin_band(x, v, p, rho, n_bin, mass, layout, self._bin_start, self._bins, self._bin_ids)
        fill_rows(self._bins, self._bin_start, layout, h, int(k0), int(k1), grid.origin[0], grid.origin[1],
                  grid.origin[2], grid.cell, grid.solid, grid.u, grid.v, grid.w, grid.p)

    def nbytes(self) -> int:
        """Bytes of the node lists and the bins."""
        arrays = [self._bin_start, self._bins, self._bin_ids, self._counts]
        if self.lists is not None:
            arrays += [self.lists.pos, self.lists.comp, self.lists.ij, self.lists.start, self.lists.count,
                       self.lists.nbr]
        return int(sum(a.nbytes for a in arrays))
