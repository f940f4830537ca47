"""MAC-SPH hybrid: a staggered grid in the deep liquid, SPH particles near the surface.

Suárez & Susín 2006, "Mesh-Particle Model for Fluid Animation" (Eurographics 2006), §4. Below an interface
height l the liquid is solved on the MAC grid of
:mod:`engine.solvers.mac` (eq. 2-4); above it by WCSPH (§3: eq. 5 pressure force, eq. 6 Tait
equation of state, eq. 8 leap-frog; the same formulation as :mod:`engine.solvers.wcsph`, with
summation density, clamped pressure and continuous box walls). Every particle has a kind, from its
height z (Surge's Z is the paper's y):

============  ======================  =====================================================
kind          band                    moved by
============  ======================  =====================================================
SPH           z >= l                  SPH forces (leap-frog)
MIXA          l - 2h <= z < l         u = beta u_MAC + (1 - beta) u_SPH, beta = (l - z) / 2h (eq. 11)
MIXB          l - 4h <= z < l - 2h    the grid; carry p = rho P_grid, rho and the half-step
                                      velocity u^(n+1/2) = u^n + a dt / 2, a = (u^(n+1) - u^n) / dt
                                      (eq. 10) so that SPH and MIXA particles see them as neighbours
MAC           z < l - 4h              the grid (markers: no neighbours, no SPH sums)
============  ======================  =====================================================

Kinds are set from the positions at the start of every substep, so particles change kind as they
cross the layers. The grid's computed rows reach up to the first row whose lower face is at least
2h above l (``ktop``); that boundary row takes P = p / rho and the velocity from the SPH particles
by kernel interpolation at its fixed nodes (eq. 9, Shepard-normalised; the nodes are the boundary
row's own staggered positions, and every particle within 2h of them is an SPH particle).

Order of a substep (§4.2):

1. boundary row of the grid from the SPH particles (eq. 9);
2. MAC step u^n -> u^(n+1) (eq. 2-4);
3. MIXA: the MAC part of eq. 11 with u_MAC^(n+1); MIXB and MAC markers: the half-step
   velocity of eq. 10 (MIXB carry it into the SPH sums);
4. SPH step of the SPH and MIXA particles (kick-drift-kick; their neighbours include MIXB
   particles with their old density and pressure); markers drift with the grid velocity;
5. after the SPH step, pressure and density of MIXB (and MAC markers) from the grid, MIXA
   pressure blended like eq. 11, density from the equation of state (eq. 6) inverted — the
   variant the paper suggests at the end of §4.2; MIXA velocity's SPH part is now up to date.

Beyond the paper (its §5 future work):

* ``interface_mode='AUTO'`` places l a fixed depth below the free surface measured on the grid
  (per grid column the highest particle; l follows the 10th percentile of the wet columns), and
  moves it, by at least half a cell, as a tank fills or empties; without enough liquid for a MAC
  part (fewer than a few cells under the MIXB band) every particle is SPH.
* the grid's solid cells are those whose centre lies outside every box container or inside a
  mesh collider's solid (:meth:`engine.collision.CollisionWorld.inside`), the same distance fields
  the particles collide with; moving colliders are re-voxelised every substep.

The neighbour search covers only SPH, MIXA and MIXB particles (a Verlet list with a skin, as in
WCSPH); after each rebuild they occupy the first ``n_sub`` rows of the particle arrays in Morton
order, the markers follow. Those markers move every few substeps (:data:`MARKER_EVERY`), with the
time they waited and the current half-step grid velocity, and always before a rebuild or a frame
(:meth:`HybridSolver.flush`), by the displacement the grid accumulated meanwhile, sampled at the
midpoint of the move: nothing reads them in between, and moving them every substep cost about 5 %
of the substep. Their p and rho are taken from the grid only by a rebuild's or a frame's
flush (before anything reads them). The boundary row's nodes keep, from one neighbour-list build to the
next, the list of particles within 2h + SKIN h / 2 of them (:meth:`HybridSolver._build_node_lists`),
so eq. 9 needs no search each substep. The pressure solve starts from the last grid pressure moved
with the boundary row's mean change and extrapolated in time (:func:`extrapolate_pressure`). The free surface is measured every
:data:`INTERFACE_EVERY` substeps.

Where this differs from the paper: density is the kernel sum (WCSPH's "summation" mode; WCSPH's
default now follows the continuity equation of §3, which the hybrid does not yet); eq. 9 is
normalised by the kernel sum of the particle volumes (exact for linear fields, and the nodes'
neighbourhoods are full anyway); the boundary row's nodes are its own
staggered positions rather than nodes averaged onto them; markers keep the velocity they moved
with (the half-step velocity inside the neighbour search, the mean velocity of their last catch-up
below it; the cache shows it); grid walls are free-slip at the grid's sides and have zero face
velocity next to a solid cell.
"""

from __future__ import annotations

import logging
import math
from dataclasses import dataclass

import numpy as np
from numba import njit, prange

from ..collision import SWEEP_STEP, CollisionWorld, collider_free, empty_world_args, project
from ..kernels import cubic_dshape32 as _dw32, cubic_shape32 as _w32
from ..neighbors import NeighbourList, build_grid
from ..particles import Particles
from ..state_check import max_speed_and_acceleration
from ..walls import clamp_into_boxes, near_box, near_walls, table, wall_hydrostatic
from . import mac
from .wcsph import GAMMA, WCSPHModel

log = logging.getLogger(__name__)

#: fastmath of every kernel of this module (one flag, see STYLE.md).
FASTMATH = True

#: Particle kinds (``HybridSolver.kind``), Suárez & Susín 2006, §4.2 and Fig. 3.
SPH, MIXA, MIXB, MAC = 0, 1, 2, 3
KIND_NAMES = ("SPH", "MIXA", "MIXB", "MAC")

#: Verlet skin of the neighbour list, in smoothing lengths (as in WCSPH).
SKIN = 0.15

#: Substeps between two measurements of the free surface (automatic interface).
INTERFACE_EVERY = 10

#: Percentile of the wet columns' surface heights the automatic interface follows (a few low
#: columns, a splash landing on a dry floor, do not pull the interface down).
SURFACE_PERCENTILE = 10.0

#: Most substeps the markers outside the neighbour search (rows from ``n_sub`` on, deeper than the
#: MIXB band and its skin) wait before they move, all at once by the grid's displacement over the
#: time they waited, sampled at their midpoint (:func:`move_markers`); they also move once that time
#: at their last speed would reach MARKER_REACH smoothing lengths (with the rebuild's trigger at half
#: the skin, 0.075 h, a marker that waits cannot reach the MIXB band unlisted: 0.075 + 0.05 < 0.15),
#: before every neighbour-list rebuild, and on :meth:`HybridSolver.flush` (before a frame is
#: written). Nothing reads them in between: they have no neighbours, and their p and rho are set
#: from the grid by the flushes of a rebuild or a frame. In a stirred tank (tests/test_hybrid.py)
#: they stand within 1.3 um of markers moved every substep after 200 substeps, whether they wait 4
#: or 16 substeps; moved with the last half-step velocity at their start (Euler), they were 3.6 um
#: off after waiting 4 and 17 um after waiting 16 (a vortex's Euler steps spiral outwards).
MARKER_EVERY = 16
MARKER_REACH = 0.05

#: Weight of the last change of the grid pressure in the pressure solve's start guess
#: (:func:`extrapolate_pressure`).
PRESSURE_EXTRAPOLATION = 0.4

#: Particles per chunk of the pass before the SPH sums (:func:`advance`).
CHUNK = 1024

#: Fewest computed grid rows under the MIXB band for the MAC part to be used at all.
MIN_MAC_ROWS = 2

INTERFACE_MODES = ("AUTO", "FIXED")

#: Rows of the boundary row's particle bins (:func:`bin_band`): position, m / rho, velocity, p / rho.
BIN_X, BIN_M, BIN_U, BIN_Q = 0, 3, 4, 7
#: Edges of those bins in smoothing lengths: columns (x, y) and layers (z). A node reads the 3 x 3
#: columns within its support and in each one contiguous run of the layers within 2h of it.
COLUMN_EDGE = 2.0
LAYER_EDGE = 0.5


@dataclass(frozen=True)
class HybridModel:
    """Static parameters of one hybrid bake (SI units).

    Attributes
    ----------
    sph : WCSPHModel
        Parameters of the SPH part (smoothing length, mass, sound speed, walls, tables).
    cell : float
        Edge of a grid cell, metres.
    origin : ndarray, shape (3,), float64, metres
        Lower corner of the grid.
    shape : tuple of 3 ints
        Cells along i, j, k.
    interface_mode : str
        'AUTO' (a depth below the free surface) or 'FIXED' (a world height).
    interface_depth : float
        Depth of l below the free surface for 'AUTO', metres (at least :attr:`min_depth` is used).
    interface_height : float
        World Z of l for 'FIXED', metres.
    pressure_solver : str
        'SOR' or 'RBSOR' (:mod:`engine.solvers.mac`).
    omega : float
        Over-relaxation factor of the pressure solve.
    tolerance : float
        Largest velocity divergence the pressure solve may leave, 1/s.
    max_iterations : int
        Most sweeps of one pressure solve.
    nu : float
        Kinematic viscosity of the grid part, m^2/s.
    """

    sph: WCSPHModel
    cell: float
    origin: np.ndarray
    shape: tuple
    interface_mode: str
    interface_depth: float
    interface_height: float
    pressure_solver: str
    omega: float
    tolerance: float
    max_iterations: int
    nu: float

    @property
    def h(self) -> float:
        return self.sph.h

    @property
    def min_depth(self) -> float:
        """Shallowest interface depth that keeps the boundary row's nodes and their 2h neighbourhoods
        under the free surface: 4h plus two cells, metres."""
        return 4.0 * self.sph.h + 2.0 * self.cell


def make_model(sph: WCSPHModel, *, lower, upper, cell_factor: float = 2.0, interface_mode: str = "AUTO",
               interface_depth: float = 0.15, interface_height: float = 0.0, pressure_solver: str = "RBSOR",
               omega: float = 1.7, tolerance: float = 1e-3, max_iterations: int = 200) -> HybridModel:
    """A :class:`HybridModel` whose grid of cells ``cell_factor * sph.dx`` covers the box [lower, upper]
    (rounded out to whole cells)."""
    if interface_mode not in INTERFACE_MODES:
        raise ValueError(f"unknown interface mode {interface_mode!r}; choose one of {', '.join(INTERFACE_MODES)}")
    if pressure_solver not in mac.POISSON_SOLVERS:
        raise ValueError(f"unknown pressure solver {pressure_solver!r}")
    cell = float(cell_factor) * sph.dx
    lower = np.asarray(lower, dtype=np.float64).reshape(3)
    upper = np.asarray(upper, dtype=np.float64).reshape(3)
    shape = tuple(int(max(1, math.ceil((upper[a] - lower[a]) / cell - 1e-9))) for a in range(3))
    # one spare row on top: the boundary row needs the face above it
    shape = (shape[0], shape[1], shape[2] + 1)
    return HybridModel(sph=sph, cell=cell, origin=lower.copy(), shape=shape, interface_mode=interface_mode,
                       interface_depth=float(interface_depth), interface_height=float(interface_height),
                       pressure_solver=pressure_solver, omega=float(omega), tolerance=float(tolerance),
                       max_iterations=int(max_iterations), nu=float(sph.nu))


# --------------------------------------------------------------------------------------------
# box walls (kernel mass of the solid half-space, as in WCSPH, with the helpers of engine.walls; the
# free fraction's gradient here takes the product rule across boxes too)


@njit(inline="always", cache=True)
def _box_walls(x0, x1, x2, boxes, support, t0, step, psi, dpsi):
    """Free fraction F = prod (1 - psi(d)) of the box walls within ``support`` and grad F (1/m)."""
    free = 1.0
    g0 = 0.0
    g1 = 0.0
    g2 = 0.0
    for b in range(boxes.shape[0]):
        lo = boxes[b, 0]
        hi = boxes[b, 1]
        if not near_box(x0, x1, x2, lo, hi, support):
            continue
        l0 = 1.0 - table(psi, t0, step, x0 - lo[0])
        l1 = 1.0 - table(psi, t0, step, x1 - lo[1])
        l2 = 1.0 - table(psi, t0, step, x2 - lo[2])
        u0 = 1.0 - table(psi, t0, step, hi[0] - x0)
        u1 = 1.0 - table(psi, t0, step, hi[1] - x1)
        u2 = 1.0 - table(psi, t0, step, hi[2] - x2)
        fb = l0 * u0 * l1 * u1 * l2 * u2
        # d/dx of l_k = -dpsi(x - lo), of u_k = +dpsi(hi - x)
        d0 = (-table(dpsi, t0, step, x0 - lo[0]) * u0 + l0 * table(dpsi, t0, step, hi[0] - x0)) * l1 * u1 * l2 * u2
        d1 = (-table(dpsi, t0, step, x1 - lo[1]) * u1 + l1 * table(dpsi, t0, step, hi[1] - x1)) * l0 * u0 * l2 * u2
        d2 = (-table(dpsi, t0, step, x2 - lo[2]) * u2 + l2 * table(dpsi, t0, step, hi[2] - x2)) * l0 * u0 * l1 * u1
        g0 = g0 * fb + free * d0
        g1 = g1 * fb + free * d1
        g2 = g2 * fb + free * d2
        free *= fb
    return free, g0, g1, g2


# --------------------------------------------------------------------------------------------
# kinds, interface


@njit(parallel=True, cache=True, fastmath=FASTMATH)
def classify(x, n_sub, l, h, lo0, lo1, lo2, hi0, hi1,
             # outputs
             kind):
    """Kind of every particle from its height (Suárez & Susín 2006, §4.2, Fig. 3): rows below ``n_sub`` by the
    bands of the module docstring (outside the grid's horizontal extent or below it: SPH); the others
    are MAC."""
    for n in prange(x.shape[0]):
        kind[n] = _kind_of(x[n, 0], x[n, 1], x[n, 2], n, n_sub, l, h, lo0, lo1, lo2, hi0, hi1)


#: Parts of the particle arrays :func:`column_tops` scans in parallel, each into its own grid of tops.
TOP_PARTS = 8


@njit(parallel=True, cache=True)
def column_tops(x, ox, oy, inv, ni, nj,
                # outputs
                top):
    """Highest particle z in every grid column (i, j), -inf where none: :data:`TOP_PARTS` parts of
    the particles scanned in parallel into their own tops, then the largest of those."""
    n = x.shape[0]
    size = (n + TOP_PARTS - 1) // TOP_PARTS
    part = np.full((TOP_PARTS, ni, nj), -np.inf)
    for b in prange(TOP_PARTS):
        for t in range(b * size, min(n, (b + 1) * size)):
            i = int(math.floor((x[t, 0] - ox) * inv))
            j = int(math.floor((x[t, 1] - oy) * inv))
            if 0 <= i < ni and 0 <= j < nj and x[t, 2] > part[b, i, j]:
                part[b, i, j] = x[t, 2]
    for i in range(ni):
        for j in range(nj):
            m = -np.inf
            for b in range(TOP_PARTS):
                m = max(m, part[b, i, j])
            top[i, j] = m


@njit(parallel=True, cache=True, fastmath=FASTMATH)
def max_displacement2(x, x_ref):
    """Largest squared distance of a particle from its position at the last neighbour-list build."""
    n = x.shape[0]
    chunks = (n + 4095) // 4096
    part = np.zeros(max(chunks, 1), dtype=np.float64)
    for b in prange(chunks):
        m = 0.0
        for i in range(b * 4096, min(n, (b + 1) * 4096)):
            d0 = x[i, 0] - x_ref[i, 0]
            d1 = x[i, 1] - x_ref[i, 1]
            d2 = x[i, 2] - x_ref[i, 2]
            m = max(m, d0 * d0 + d1 * d1 + d2 * d2)
        part[b] = m
    return part.max()


# --------------------------------------------------------------------------------------------
# eq. 9: grid boundary row from SPH particles


@njit(cache=True)
def bin_band(x, v, p, rho, n_sub, mass, zlo, zhi, cx0, cy0, cinv, zinv, ncx, ncy, ncz,
             # outputs
             start, bins, ids):
    """Counting sort of the first ``n_sub`` particles with zlo <= z <= zhi into bins of
    ``ncx`` x ``ncy`` columns and ``ncz`` layers (edge 1 / cinv, bin (a, b, c) at a ncy ncz + b ncz + c):
    the particles of a column lie in z order of their layers, so a node reads the layers within
    its kernel support as one contiguous range per column. ``bins`` (8, N) float32 receives, per
    binned particle, x, y, z, m / rho, u, v, w and p / rho (rows :data:`BIN_X` ... :data:`BIN_Q`),
    ``ids`` its row; returns how many particles were binned."""
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
def _node_sum(px, py, pz, bins, comp, start, cx0, cy0, zlo, cinv, zinv, ncx, ncy, ncz, h):
    """Shepard-normalised kernel interpolation at a node (Suárez & Susín 2006, eq. 9) of row ``comp`` of
    ``bins`` (a velocity component or p / rho), over the bins of :func:`bin_band` within 2h.
    Returns (value, weight sum). Each column's candidates are one contiguous range read without a
    branch (the kernel clamped to 0 outside its support), in single precision, so the loop runs in
    vector lanes."""
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
def fill_rows(bins, start, cx0, cy0, zlo, cinv, zinv, ncx, ncy, ncz, h, k0, k1, ox, oy, oz, cell, solid,
              # outputs
              u, v, w, p):
    """Rows k0..k1 of the grid from particles (Suárez & Susín 2006, eq. 9): P = p / rho at the cell centres, u and
    v on the row's faces, w on the face above each cell, from the particles binned by
    :func:`bin_band` (``bins``, ``start``). Nodes without a particle keep their value, except P,
    which becomes 0 (the free surface is above them)."""
    ni, nj, nk = solid.shape
    for i in prange(ni + 1):
        for j in range(nj + 1):
            for k in range(k0, k1 + 1):
                zc = oz + (k + 0.5) * cell
                if j < nj:
                    val, sw = _node_sum(ox + i * cell, oy + (j + 0.5) * cell, zc, bins, BIN_U, start,
                                        cx0, cy0, zlo, cinv, zinv, ncx, ncy, ncz, h)
                    if sw > 0.0:
                        u[i, j, k] = val
                if i < ni:
                    val, sw = _node_sum(ox + (i + 0.5) * cell, oy + j * cell, zc, bins, BIN_U + 1, start,
                                        cx0, cy0, zlo, cinv, zinv, ncx, ncy, ncz, h)
                    if sw > 0.0:
                        v[i, j, k] = val
                if i < ni and j < nj:
                    px = ox + (i + 0.5) * cell
                    py = oy + (j + 0.5) * cell
                    if k + 1 <= nk:
                        val, sw = _node_sum(px, py, zc + 0.5 * cell, bins, BIN_U + 2, start, cx0, cy0, zlo, cinv,
                                            zinv, ncx, ncy, ncz, h)
                        if sw > 0.0:
                            w[i, j, k + 1] = val
                    val, sw = _node_sum(px, py, zc, bins, BIN_Q, start, cx0, cy0, zlo, cinv, zinv, ncx, ncy, ncz, h)
                    p[i, j, k] = val
                    if solid[i, j, k]:
                        p[i, j, k] = 0.0


@njit(cache=True)
def row_nodes(ox, oy, oz, cell, ni, nj, nk, k):
    """The nodes of boundary row k (Suárez & Susín 2006, eq. 9): u faces ((ni + 1) nj), v faces (ni (nj + 1)), the
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
def node_candidates(pos, bins_start, bins, ids, cx0, cy0, zlo, cinv, zinv, ncx, ncy, ncz, reach, start, cap,
                    # outputs
                    count, nbr):
    """For every node of ``pos``, the binned particles (:func:`bin_band`; ``ids`` their rows) within
    ``reach``: their rows into nbr[start[m]:start[m] + cap[m]], in bin order (the same order on every
    build from the same positions), and how many there are into count[m] (more than cap[m]: the list
    did not fit; cap = 0 only counts)."""
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
def fill_row_listed(x, v, p, rho, mass, h, pos, comp, ij, start, count, nbr, k, solid,
                    # outputs
                    u, vv, w, pg):
    """The boundary row from each node's listed particles (:func:`node_candidates`, built with a
    skin at the last neighbour-list build): the same Shepard-normalised sums as :func:`fill_rows`
    (Suárez & Susín 2006, eq. 9), without searching bins every substep."""
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
            d0 = fx - x[n, 0]
            d1 = fy - x[n, 1]
            d2 = fz - x[n, 2]
            r2 = d0 * d0 + d1 * d1 + d2 * d2
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


# --------------------------------------------------------------------------------------------
# one pass over the particles before and one after the SPH sums (each parallel region costs a
# thread wake-up, which on a loaded machine outweighs the work of a light per-particle loop)


@njit(inline="always", cache=True)
def _kind_of(x0, x1, z, n, n_sub, l, h, lo0, lo1, lo2, hi0, hi1):
    if n >= n_sub:
        return MAC
    if x0 < lo0 or x0 > hi0 or x1 < lo1 or x1 > hi1 or z >= l or z < lo2:
        return SPH
    if z >= l - 2.0 * h:
        return MIXA
    if z >= l - 4.0 * h:
        return MIXB
    return MAC


@njit(parallel=True, cache=True, fastmath=FASTMATH)
def advance(x, v, a, x_ref, n_sub, l, h, ox, oy, oz, hi0, hi1, dt, use_grid, inv, uh, vh, wh, u1, v1, w1,
            boxes, margin, friction, bounce,
            # outputs
            kind, disp):
    """Per particle, in the order of Suárez & Susín 2006, §4.2: its kind from its height (:func:`classify`); with
    the grid, the MAC part of MIXA velocities, v = beta u_MAC^(n+1) + (1 - beta) v, v holding the SPH
    part (eq. 11), and for MIXB and MAC markers the half-step velocity u^(n+1/2) = u^n + a dt / 2 with
    a = (u^(n+1) - u^n) / dt sampled at the particle (eq. 10; MIXB carry it into the SPH sums); the
    leap-frog half kick of SPH and MIXA particles (eq. 8); the drift, particles that crossed a box
    wall put back on it (normal velocity reversed and scaled by the bounce, tangential by 1 -
    friction). ``disp[c]`` receives the largest squared move from ``x_ref`` in chunk c of :data:`CHUNK`
    particles (for the neighbour list). Only the first ``n_sub`` rows: the markers after them move
    in :func:`move_markers`."""
    n_all = n_sub
    chunks = (n_all + CHUNK - 1) // CHUNK
    half = (chunks + 1) // 2
    for t in prange(chunks):
        # each thread's contiguous share of t takes every other chunk: the MIXA and MIXB rows, which
        # sample the grid, are not spread evenly along the Morton order (seen 8,200 against 3,800
        # in the two halves of the blocks scene)
        c = 2 * t if t < half else 2 * (t - half) + 1
        m = 0.0
        for n in range(c * CHUNK, min(n_all, (c + 1) * CHUNK)):
            pz = x[n, 2]
            kd = _kind_of(x[n, 0], x[n, 1], pz, n, n_sub, l, h, ox, oy, oz, hi0, hi1)
            kind[n] = kd
            if use_grid and kd == MAC:
                # markers only drift with u^(n+1/2) (one sample of the averaged face field); their
                # acceleration is needed only once they are MIXB, whose branch below computes it
                c0, c1, c2 = mac.velocity_at(uh, vh, wh, ox, oy, oz, inv, x[n, 0], x[n, 1], pz)
                v[n, 0] = c0
                v[n, 1] = c1
                v[n, 2] = c2
            elif use_grid and kd == MIXA:
                b0, b1, b2 = mac.velocity_at(u1, v1, w1, ox, oy, oz, inv, x[n, 0], x[n, 1], pz)
                beta = min(max((l - pz) / (2.0 * h), 0.0), 1.0)
                v[n, 0] = beta * b0 + (1.0 - beta) * v[n, 0]
                v[n, 1] = beta * b1 + (1.0 - beta) * v[n, 1]
                v[n, 2] = beta * b2 + (1.0 - beta) * v[n, 2]
            elif use_grid and kd == MIXB:
                # u^(n+1/2) from the averaged face field: trilinear sampling is linear, so this
                # equals (u^n(x) + u^(n+1)(x)) / 2 with one sample instead of two; both fields
                # share the interpolation weights
                b0, b1, b2, c0, c1, c2 = mac.velocity_pair_at(u1, v1, w1, uh, vh, wh, ox, oy, oz, inv, x[n, 0],
                                                              x[n, 1], pz)
                a[n, 0] = 2.0 * (b0 - c0) / dt
                a[n, 1] = 2.0 * (b1 - c1) / dt
                a[n, 2] = 2.0 * (b2 - c2) / dt
                v[n, 0] = c0
                v[n, 1] = c1
                v[n, 2] = c2
            if kd == SPH or kd == MIXA:
                for k in range(3):
                    v[n, k] += a[n, k] * (0.5 * dt)
            for k in range(3):
                x[n, k] += v[n, k] * dt
            clamp_into_boxes(x, v, n, boxes, margin, friction, bounce)
            d0 = x[n, 0] - x_ref[n, 0]
            d1 = x[n, 1] - x_ref[n, 1]
            d2 = x[n, 2] - x_ref[n, 2]
            m = max(m, d0 * d0 + d1 * d1 + d2 * d2)
        disp[c] = m


@njit(cache=True)
def extrapolate_pressure(p, p_last, solid, ktop, beta, last_shift):
    """Start guess of the pressure solve, in the computed rows (k < ktop), from p^n (in ``p``), p^(n-1)
    (in ``p_last``) and the boundary row just filled (row ``ktop`` of ``p``; ``p_last`` holds the
    previous one):

        p <- p^n + s + beta (p^n - p^(n-1) - s_last)

    s, the mean change of the boundary row over its open cells, moves every column with it (a
    uniform change of a Dirichlet top under Neumann walls moves the whole solution by as much); the
    rest of the last change, p^n - p^(n-1) less the shift it had then (``last_shift``), is
    extrapolated in time. Updates ``p_last`` (rows up to ``ktop``) and returns s.

    Red-black SOR sweeps per substep in bench_hybrid's drop / blocks / deep tank (600 substeps):
    from p^n alone 19 / 19 / 21 (130 substeps); p^n + 0.5 (p^n - p^(n-1)) 12.8 / 9.7 / 11.6 (the
    boundary row's mean change, which the sweeps spread down the columns slowest, was left almost
    wholly to them); this guess with beta = 0.4: 6.3 / 6.2 / 6.3; beta = 0.5 sets the deep tank's
    pressure ringing at the start (44 sweeps)."""
    ni, nj, nk = p.shape
    if ktop >= nk:
        return 0.0
    total = 0.0
    count = 0
    for i in range(ni):
        for j in range(nj):
            if solid[i, j, ktop] == 0:
                total += p[i, j, ktop] - p_last[i, j, ktop]
                count += 1
    shift = total / count if count > 0 else 0.0
    for i in range(ni):
        for j in range(nj):
            for k in range(ktop):
                c = p[i, j, k]
                p[i, j, k] = c + shift + beta * (c - p_last[i, j, k] - last_shift)
                p_last[i, j, k] = c
            p_last[i, j, ktop] = p[i, j, ktop]
    return shift


@njit(inline="always", cache=True)
def _tait_density_ratio(x):
    """rho / rho0 = (1 + x)^(1/7) for x = p / P0 >= 0 (Suárez & Susín 2006, eq. 6 inverted). Below x = 0.05 (a
    resting column at the automatic sound speed reaches x = 0.035 at its floor) a fifth-order series,
    within 1e-8 of the power, which costs a few times more and runs for every grid particle each
    substep; above it, the power itself."""
    if x < 0.05:
        return 1.0 + x * (1.0 / 7.0 + x * (-3.0 / 49.0 + x * (13.0 / 343.0 + x * (-65.0 / 2401.0
                                                                                + x * (351.0 / 16807.0)))))
    return (1.0 + x) ** (1.0 / GAMMA)


@njit(parallel=True, cache=True, fastmath=FASTMATH)
def finish(x, a, kind, n_sub, l, h, rho0, p0, dt, use_grid, ox, oy, oz, inv, pg,
           # outputs
           v, p, rho):
    """After the SPH sums: the closing half kick of SPH and MIXA particles (eq. 8); then (Suárez & Susín 2006
    §4.2) MIXB and MAC markers take p = rho0 P_grid at their new position, MIXA p = beta rho0 P_grid
    + (1 - beta) p_SPH (eq. 11's blend), and the density follows from the Tait equation inverted,
    rho = rho0 (1 + p / P0)^(1/7) (eq. 6). Markers keep the velocity they moved with, u^(n+1/2)
    (the next substep sets it again from the grid before anything reads it). Rows from ``n_sub`` on
    are left to :func:`move_markers`. Chunks are shared between the threads as in :func:`advance`."""
    chunks = (n_sub + CHUNK - 1) // CHUNK
    half = (chunks + 1) // 2
    for t in prange(chunks):
        c = 2 * t if t < half else 2 * (t - half) + 1
        for n in range(c * CHUNK, min(n_sub, (c + 1) * CHUNK)):
            kd = kind[n]
            if kd == SPH or kd == MIXA:
                for k in range(3):
                    v[n, k] += a[n, k] * (0.5 * dt)
            if kd == SPH or not use_grid:
                continue
            px = x[n, 0]
            py = x[n, 1]
            pz = x[n, 2]
            pgrid = rho0 * mac.pressure_at(pg, ox, oy, oz, inv, px, py, pz)
            if kd == MIXA:
                beta = min(max((l - pz) / (2.0 * h), 0.0), 1.0)
                pn = beta * pgrid + (1.0 - beta) * p[n]
            else:
                pn = pgrid
            if pn < 0.0:
                pn = 0.0
            p[n] = pn
            rho[n] = rho0 * _tait_density_ratio(pn / p0)


@njit(parallel=True, cache=True, fastmath=FASTMATH)
def move_markers(x, x_ref, n_sub, dt, pressure, ox, oy, oz, inv, mu, mv, mw, pg, rho0, p0, boxes, margin, friction,
                 bounce,
                 # outputs
                 v, p, rho, disp):
    """The markers outside the neighbour search (rows ``n_sub`` on) catch up the time ``dt`` they
    waited (one or more substeps; none when 0): each moves by the displacement field (``mu``,
    ``mv``, ``mw``: the sum of dt u^(n+1/2) over those substeps, eq. 10) sampled at the midpoint of
    its move (x + m(x + m(x) / 2), second order in the move, where a sample at the start spirals
    outwards in a vortex), takes the mean velocity of that move, and is put back into the boxes like every particle; with
    ``pressure`` they take p = rho0 P_grid and rho from the equation of state inverted (eq. 6), as
    MIXB markers do in :func:`finish`. ``disp[c]`` receives the largest squared move from ``x_ref``
    in chunk c of 4096 markers and ``disp[chunks + c]`` their largest squared speed."""
    n_all = x.shape[0]
    count = n_all - n_sub
    chunks = (count + 4095) // 4096
    inv_dt = 1.0 / dt if dt > 0.0 else 0.0
    for c in prange(chunks):
        far = 0.0
        fast = 0.0
        for n in range(n_sub + c * 4096, min(n_all, n_sub + (c + 1) * 4096)):
            if dt > 0.0:
                m0, m1, m2 = mac.velocity_at(mu, mv, mw, ox, oy, oz, inv, x[n, 0], x[n, 1], x[n, 2])
                m0, m1, m2 = mac.velocity_at(mu, mv, mw, ox, oy, oz, inv, x[n, 0] + 0.5 * m0, x[n, 1] + 0.5 * m1,
                                             x[n, 2] + 0.5 * m2)
                v[n, 0] = m0 * inv_dt
                v[n, 1] = m1 * inv_dt
                v[n, 2] = m2 * inv_dt
                fast = max(fast, (m0 * m0 + m1 * m1 + m2 * m2) * inv_dt * inv_dt)
                x[n, 0] += m0
                x[n, 1] += m1
                x[n, 2] += m2
                clamp_into_boxes(x, v, n, boxes, margin, friction, bounce)
            if pressure:
                pn = rho0 * mac.pressure_at(pg, ox, oy, oz, inv, x[n, 0], x[n, 1], x[n, 2])
                if pn < 0.0:
                    pn = 0.0
                p[n] = pn
                rho[n] = rho0 * _tait_density_ratio(pn / p0)
            d0 = x[n, 0] - x_ref[n, 0]
            d1 = x[n, 1] - x_ref[n, 1]
            d2 = x[n, 2] - x_ref[n, 2]
            far = max(far, d0 * d0 + d1 * d1 + d2 * d2)
        disp[c] = far
        disp[chunks + c] = fast


@njit(cache=True)
def grid_pressure(x, rows, ox, oy, oz, inv, pg, rho0, p0,
                  # outputs
                  p, rho):
    """p = rho0 P_grid and rho from the equation of state inverted (eq. 6) at the particles ``rows``
    (markers that join the neighbour search at a rebuild, as MIXB particles or markers of its skin:
    the SPH sums may read them before :func:`finish` sets them)."""
    for t in range(rows.shape[0]):
        n = rows[t]
        pn = rho0 * mac.pressure_at(pg, ox, oy, oz, inv, x[n, 0], x[n, 1], x[n, 2])
        if pn < 0.0:
            pn = 0.0
        p[n] = pn
        rho[n] = rho0 * _tait_density_ratio(pn / p0)


# --------------------------------------------------------------------------------------------
# SPH part (Suárez & Susín 2006, §3), with kinds


@njit(cache=True)
def sph_rows(kind, p, rho, n_sub,
             # outputs
             rows, pr):
    """The rows of SPH and MIXA particles among the first ``n_sub`` (into ``rows``; returns how
    many), and pr = p / rho^2 of the others, which carry the grid's p and rho into the SPH sums (a
    serial pass: a few microseconds, less than the temporaries of the numpy equivalent)."""
    count = 0
    for n in range(n_sub):
        if kind[n] <= MIXA:
            rows[count] = n
            count += 1
        else:
            r = rho[n]
            pr[n] = p[n] / (r * r)
    return count


@njit(parallel=True, cache=True, fastmath=FASTMATH)
def density_pressure(x, rows, nbr_start, nbr_count, nbr, h, mass, rho0, p0,
                     boxes, t0, step, psi, dpsi, cset,
                     # outputs
                     rho, p, pr, near, wall_grad):
    """SPH and MIXA particles (``rows``): rho_i = sum_j m W_ij + rho0 (1 - F_walls), p from Tait (eq. 6)
    clamped at 0, pr = p / rho^2. The other rows (MIXB particles keep the density and pressure they
    carry, §4.2) are left to the caller.

    As in :func:`engine.solvers.wcsph.density_pressure`: the pair sum in single precision (positions
    are float32), and only particles with a wall or collider within the support (``near[i]`` = 1)
    query the walls; ``wall_grad`` receives grad(1 - F_walls) for them.
    """
    support = 2.0 * h
    r2max = np.float32(support * support)
    inv_h = np.float32(1.0 / h)
    unit = mass / (math.pi * h * h * h)  # m W = unit * w(q)
    n_col = cset.colliders.shape[0]
    for t_row in prange(rows.shape[0]):  # an equal share of the SPH and MIXA rows per thread
        i = rows[t_row]
        xi = x[i, 0]
        yi = x[i, 1]
        zi = x[i, 2]
        acc = np.float32(1.0)  # w(0): the particle itself
        for t in range(nbr_start[i], nbr_start[i] + nbr_count[i]):
            j = nbr[t]
            d0 = xi - x[j, 0]
            d1 = yi - x[j, 1]
            d2 = zi - x[j, 2]
            r2 = d0 * d0 + d1 * d1 + d2 * d2
            if r2 < r2max:  # the list reaches a skin further
                acc += _w32(math.sqrt(r2) * inv_h)
        r = unit * np.float64(acc)
        x0 = np.float64(xi)
        x1 = np.float64(yi)
        x2 = np.float64(zi)
        flag = near_walls(x0, x1, x2, boxes, support)
        if flag or n_col > 0:
            fb, b0, b1, b2 = _box_walls(x0, x1, x2, boxes, support, t0, step, psi, dpsi)
            fc, c0, c1, c2 = 1.0, 0.0, 0.0, 0.0
            if n_col > 0:  # a call per particle near a box wall cost 5 % of this kernel without colliders
                fc, c0, c1, c2 = collider_free(x0, x1, x2, support, 1.0, t0, step, psi, dpsi, cset)
            flag = flag or fc < 1.0
            r += rho0 * (1.0 - fb * fc)
            # gradient of the wall mass 1 - F_b F_c
            wall_grad[i, 0] = -(b0 * fc + fb * c0)
            wall_grad[i, 1] = -(b1 * fc + fb * c1)
            wall_grad[i, 2] = -(b2 * fc + fb * c2)
        near[i] = flag
        rho[i] = r
        ratio = r / rho0
        r2_ = ratio * ratio
        pi_ = p0 * (r2_ * r2_ * r2_ * ratio - 1.0)  # (rho / rho0)^7
        if pi_ < 0.0:
            pi_ = 0.0
        p[i] = pi_
        pr[i] = pi_ / (r * r)


@njit(parallel=True, cache=True, fastmath=FASTMATH)
def accelerations(x, v, rows, rho, p, pr, near, nbr_start, nbr_count, nbr, h, mass, rho0, c0, alpha, nu,
                  gx, gy, gz, boxes, t0, step, tau_n, tau_t, wall_grad,
                  # outputs
                  a):
    """SPH and MIXA particles: pressure force (Suárez & Susín 2006, eq. 5), Monaghan's artificial and Morris'
    laminar viscosity, gravity, and the wall pressure -(p_i + p_w) / rho_i^2 rho0 grad psi - G (as in
    WCSPH). MIXB neighbours enter with their carried p, rho and half-step velocity; MIXB and MAC
    rows are left alone (the grid moves them).

    The pair terms in single precision, as in :func:`engine.solvers.wcsph.accelerations`; only
    particles near a wall (``near``) take the Shepard average of the pressure the wall terms need.
    """
    support = 2.0 * h
    r2max = np.float32(support * support)
    inv_h = np.float32(1.0 / h)
    eta2 = np.float32(0.01 * h * h)
    cg = np.float32(mass / (math.pi * h * h * h * h))  # m dW/dr = cg * dw/dq
    av = np.float32(2.0 * alpha * c0 * h)  # Monaghan 1992: Pi_ij = -alpha c0 mu_ij / rho_bar
    nu32 = np.float32(nu)
    zero = np.float32(0.0)
    gnorm = math.sqrt(gx * gx + gy * gy + gz * gz)
    inv_g2h = 1.0 / (gnorm * support) if gnorm > 0.0 else 0.0
    # ``rows``: the SPH and MIXA rows only, so that both threads get an equal share of them (the
    # MIXB rows lie together in Morton order; skipping them inside the loop left one thread idle)
    for t_row in prange(rows.shape[0]):
        i = rows[t_row]
        xi = x[i, 0]
        yi = x[i, 1]
        zi = x[i, 2]
        vxi = v[i, 0]
        vyi = v[i, 1]
        vzi = v[i, 2]
        rhoi = np.float32(rho[i])
        inv_rhoi = np.float32(1.0) / rhoi
        pi_term = np.float32(pr[i])
        wall_i = near[i]
        ax = zero
        ay = zero
        az = zero
        sw = np.float32(1.0)  # Shepard average of the pressure around i (i included, w(0) = 1)
        spw = np.float32(p[i])
        for t in range(nbr_start[i], nbr_start[i] + nbr_count[i]):
            j = nbr[t]
            d0 = xi - x[j, 0]
            d1 = yi - x[j, 1]
            d2 = zi - x[j, 2]
            r2 = d0 * d0 + d1 * d1 + d2 * d2
            if r2 >= r2max or r2 == zero:
                continue
            r = math.sqrt(r2)
            q = r * inv_h
            g = cg * _dw32(q) / r  # m grad_i W = g * (x_i - x_j)
            if wall_i:
                w = _w32(q)
                sw += w
                spw += w * np.float32(p[j])
            dv0 = vxi - v[j, 0]
            dv1 = vyi - v[j, 1]
            dv2 = vzi - v[j, 2]
            rhoj = np.float32(rho[j])
            coef = pi_term + np.float32(pr[j])
            vr = dv0 * d0 + dv1 * d1 + dv2 * d2
            inv = np.float32(1.0) / (r2 + eta2)
            if vr < zero:
                coef -= av * vr * inv / (rhoi + rhoj)
            # Morris 1997: m_j (mu_i + mu_j) / (rho_i rho_j) (r . grad W) / (r^2 + eta^2) v_ij
            visc = nu32 * (inv_rhoi + np.float32(1.0) / rhoj) * g * r2 * inv
            f = -coef * g
            ax += f * d0 + visc * dv0
            ay += f * d1 + visc * dv1
            az += f * d2 + visc * dv2
        a0 = np.float64(ax) + gx
        a1 = np.float64(ay) + gy
        a2 = np.float64(az) + gz
        if wall_i:
            r64 = np.float64(rhoi)
            p_w = np.float64(spw) / np.float64(sw)
            fade = min(p_w * inv_g2h / r64, 1.0)
            G0, G1, G2 = wall_hydrostatic(np.float64(xi), np.float64(yi), np.float64(zi), boxes, support, t0, step,
                                          tau_n, tau_t, gx, gy, gz)
            wall = -(np.float64(pi_term) + p_w / (r64 * r64)) * rho0
            a0 += wall * wall_grad[i, 0] - fade * G0
            a1 += wall * wall_grad[i, 1] - fade * G1
            a2 += wall * wall_grad[i, 2] - fade * G2
        a[i, 0] = a0
        a[i, 1] = a1
        a[i, 2] = a2


# --------------------------------------------------------------------------------------------


def _percentile(values: np.ndarray, q: float) -> float:
    """``np.percentile(values, q)`` (its default, linear method) from a partial sort: a tenth of the
    time on the few hundred column heights of the automatic interface."""
    pos = q / 100.0 * (values.size - 1)
    lo = int(math.floor(pos))
    hi = min(lo + 1, values.size - 1)
    part = np.partition(values, [lo, hi])
    a, b = float(part[lo]), float(part[hi])
    t = pos - lo
    # numpy's lerp: from the lower value below t = 0.5, from the upper one above (same rounding)
    return a + (b - a) * t if t < 0.5 else b - (b - a) * (1.0 - t)


class HybridSolver:
    """Advances a :class:`Particles` set with the MAC-SPH hybrid (see the module docstring).

    Attributes
    ----------
    particles : Particles
    grid : mac.MACGrid
        The staggered grid (rows ``k < ktop`` computed, row ``ktop`` the boundary row).
    kind : ndarray, shape (N,), int8
        Kind of each particle at the last substep (SPH, MIXA, MIXB, MAC).
    interface : float
        Height l of the SPH / MIXA limit, metres (-inf: no MAC part, every particle is SPH).
    ktop : int
        The grid's boundary row (0: no MAC part).
    n_sub : int
        Particles in the neighbour search (SPH, MIXA, MIXB and a skin), the first rows.
    pressure_iterations : int
        Sweeps of the last pressure solve.
    """

    name = "HYBRID"

    def __init__(self, model: HybridModel, particles: Particles, collision: CollisionWorld | None = None):
        self.model = model
        self.particles = particles
        self.collision = collision
        self.time = 0.0
        self.steps = 0
        self.grid = mac.MACGrid.create(model.origin, model.cell, model.shape)
        self.scratch = mac.MACScratch(self.grid)
        self._old = (np.zeros_like(self.grid.u), np.zeros_like(self.grid.v), np.zeros_like(self.grid.w))
        top_corner = self.grid.origin + np.array(self.grid.shape) * self.grid.cell
        self._grid_top_corner = (float(top_corner[0]), float(top_corner[1]))  # x, y where the grid ends
        self._disp_chunks = np.zeros(0, dtype=np.float64)  # advance's largest moves per chunk
        #: the markers' displacement since they last moved: sum of dt u^(n+1/2) (from mac.step's projection)
        self._moved = (np.zeros_like(self.grid.u), np.zeros_like(self.grid.v), np.zeros_like(self.grid.w))
        self._moved_fresh = True
        self._p_last = np.zeros_like(self.grid.p)  # the grid pressure one substep back (extrapolate_pressure)
        self._p_last_ktop = -1                      # the boundary row it was solved under
        self._p_shift = 0.0                         # the mean change of the boundary row then
        self._box_solid = self._solid_of_boxes()
        self.neighbours = NeighbourList()
        self.rebuilds = 0
        self.n_sub = 0
        self._x_ref: np.ndarray | None = None
        self._disp2: float | None = None  # largest squared move since the last build, from advance()
        self._marker_dt = 0.0      # time the markers outside the neighbour search still have to move
        self._marker_steps = 0     # substeps that time spans
        self._marker_speed = 0.0   # their fastest speed when they last moved, m/s
        self._marker_disp2 = 0.0   # their largest squared move since the last build
        self._marker_p_stale = False  # their p and rho not yet taken from the grid where they stand
        self._l_built = None
        self._changed = True
        self.interface = -math.inf
        self.ktop = 0
        self.pressure_iterations = 0
        self.pressure_residual = 0.0
        n = len(particles)
        self.kind = np.zeros(n, dtype=np.int8)
        self._rows = np.zeros(n, dtype=np.int32)  # scratch: the rows of SPH and MIXA particles
        self._pr = np.zeros(n, dtype=np.float32)
        self._near = np.zeros(n, dtype=np.bool_)
        self._wall_grad = np.zeros((n, 3), dtype=np.float32)
        # work arrays of the boundary row's binning (_fill)
        self._bin_start = np.zeros(1, dtype=np.int64)
        self._bins = np.empty((8, 0), dtype=np.float32)
        self._bin_ids = np.empty(0, dtype=np.int32)
        # the boundary row's nodes and, per node, the particles within 2h + SKIN h / 2 at the last
        # neighbour-list build (_build_node_lists); _node_row: the row they are for (-1: none)
        self._nodes = None
        self._node_row = -1
        self._node_counts = np.zeros(0, dtype=np.int64)  # per node, its list's length at the last build
        self._node_row_last = -1                          # the row of those counts
        self.node_recounts = 0                            # builds whose slices had to be counted again
        self.head_reorders = 0                            # rebuilds that reordered only the subset
        self._update_solid()
        if n:
            self._set_interface(self._interface_target(), force=True)
            self._rebuild()
            self._classify()
            self._fill(0, self.ktop, every_particle=True)
            self._evaluate()

    # -- set-up ----------------------------------------------------------------------------------

    @property
    def _cset(self) -> tuple:
        return self.collision.args if self.collision is not None else _NO_COLLIDERS

    def _solid_of_boxes(self) -> np.ndarray:
        """1 where a cell centre lies outside every box container (or everywhere inside when there
        is none: the grid then spans the liquid and mesh colliders)."""
        boxes = self.model.sph.boxes
        c = self.grid.cell_centres()
        if len(boxes) == 0:
            return np.zeros(self.grid.shape, dtype=np.uint8)
        inside = np.zeros(len(c), dtype=bool)
        for lo, hi in boxes:
            inside |= np.all((c >= lo) & (c <= hi), axis=1)
        # the rows above the boxes' tops stay open: liquid may rise over a container
        top = max(float(b[1, 2]) for b in boxes)
        inside |= c[:, 2] > top
        return (~inside).reshape(self.grid.shape).astype(np.uint8)

    def _update_solid(self) -> None:
        """Solid cells: outside the boxes, or inside a mesh collider's solid at the current time."""
        solid = self._box_solid.copy()
        if self.collision is not None:
            inside = self.collision.inside(self.grid.cell_centres().astype(np.float32))
            solid |= inside.reshape(self.grid.shape).astype(np.uint8)
        self.grid.solid[:] = solid
        self._open_columns = ~np.all(solid.astype(bool), axis=2)  # columns with a liquid cell

    # -- interface ---------------------------------------------------------------------------------

    def _interface_target(self) -> float:
        m, g = self.model, self.grid
        ni, nj, nk = g.shape
        if m.interface_mode == "FIXED":
            return m.interface_height
        pt = self.particles
        if len(pt) == 0:
            return -math.inf
        top = np.empty((ni, nj), dtype=np.float64)
        column_tops(pt.x, g.origin[0], g.origin[1], 1.0 / g.cell, ni, nj, top)
        heights = top[np.isfinite(top) & self._open_columns]
        if heights.size == 0:
            return -math.inf
        surface = _percentile(heights, SURFACE_PERCENTILE)
        return surface - max(m.interface_depth, m.min_depth)

    def _set_interface(self, target: float, force: bool = False) -> bool:
        """Move l to ``target`` (by at least half a cell unless forced); returns True if it moved."""
        m, g = self.model, self.grid
        h, cell = m.h, g.cell
        z0 = g.origin[2]
        nk = g.shape[2]
        # the boundary row must fit under the grid's top face
        target = min(target, z0 + (nk - 1) * cell - 2.0 * h)
        if target - 4.0 * h < z0 + MIN_MAC_ROWS * cell:
            target = -math.inf
        if not force and (target == self.interface or (math.isfinite(target) and math.isfinite(self.interface)
                                                      and abs(target - self.interface) < 0.5 * cell)):
            return False
        old_ktop = self.ktop
        self.interface = target
        self.ktop = (min(int(math.ceil((target + 2.0 * h - z0) / cell - 1e-9)), nk - 1)
                     if math.isfinite(target) else 0)
        if not force and self.ktop > old_ktop and len(self.particles):
            self._fill(old_ktop, self.ktop)  # rows the MAC part takes over start from the particles
        log.debug("hybrid interface at %.4g m, boundary row %d", target, self.ktop)
        return True

    # -- neighbours --------------------------------------------------------------------------------

    def _reach(self) -> float:
        return self.model.h * (1.0 + 0.5 * SKIN)

    def _rebuild(self) -> None:
        """Subset (every particle within the skin of the MIXB band or above), Morton order first,
        markers after; neighbour list over the subset (only when a particle moved half the skin, the
        particle set changed or the interface moved)."""
        pt, h = self.particles, self.model.h
        n = len(pt)
        skin = SKIN * h
        if (not self._changed and self._x_ref is not None and self._x_ref.shape[0] == n
                and self._l_built == self.interface):
            disp2 = self._disp2 if self._disp2 is not None else max_displacement2(pt.x, self._x_ref)
            if disp2 <= (0.5 * skin) ** 2:
                return
        # the markers catch up before the subset is chosen again; the p and rho of those that join
        # it are taken from the grid below, the others' wait for a frame's flush
        self._move_markers(False)
        g = self.grid
        hi = g.origin + np.array(g.shape) * g.cell
        x = pt.x
        outside = ((x[:, 0] < g.origin[0]) | (x[:, 0] > hi[0]) | (x[:, 1] < g.origin[1]) | (x[:, 1] > hi[1])
                   | (x[:, 2] < g.origin[2]))
        sub = (x[:, 2] >= self.interface - 4.0 * h - skin) | outside
        idx_sub = np.flatnonzero(sub)
        idx_rest = np.flatnonzero(~sub)
        reach = self._reach()
        if len(idx_sub):
            grid = build_grid(x[idx_sub], 2.0 * reach)
            order = np.concatenate([idx_sub[grid.order], idx_rest])
        else:
            grid = None
            order = idx_rest
        # the list's slices are sized from the last build's counts (particles that join the subset
        # are guessed at the largest of them): a counting pass over the subset cost a third of a build
        old_n_sub, old_counts = self.n_sub, self.neighbours.count
        hint = None
        if len(idx_sub) and old_n_sub and old_counts.shape[0] == old_n_sub:
            came_from = order[:len(idx_sub)]
            known = came_from < old_n_sub
            hint = np.full(len(idx_sub), int(old_counts.max()), dtype=np.int64)
            hint[known] = old_counts[came_from[known]]
        if len(idx_sub) == old_n_sub and (len(idx_rest) == 0 or idx_rest[0] == old_n_sub):
            # the same particles in the subset (the markers are rows old_n_sub on, in order): only
            # the subset is sorted again, the markers' rows stay
            pt.reorder(order[:old_n_sub], head=old_n_sub)
            self.head_reorders += 1
        else:
            pt.reorder(order)
        self.n_sub = len(idx_sub)
        if self._marker_p_stale and self.ktop > 0:
            joined = np.flatnonzero(order[:self.n_sub] >= old_n_sub).astype(np.int64)
            g_ = self.grid
            grid_pressure(pt.x, joined, g_.origin[0], g_.origin[1], g_.origin[2], 1.0 / g_.cell, g_.p,
                          self.model.sph.rho0, self.model.sph.pressure_constant, pt.p, pt.rho)
        if grid is not None:
            self.neighbours.build(pt.x[:self.n_sub], np.full(self.n_sub, reach, dtype=np.float32),
                                  grid._replace(order=None), counts_hint=hint)
        else:
            self.neighbours = NeighbourList()
        self.kind[self.n_sub:] = MAC
        if self._x_ref is not None and self._x_ref.shape == pt.x.shape:
            self._x_ref[:] = pt.x  # into the same buffer: no fresh pages to fault in
        else:
            self._x_ref = pt.x.copy()
        self._build_node_lists(self._x_ref)
        self._disp2 = 0.0
        self._marker_disp2 = 0.0
        self._l_built = self.interface
        self._changed = False
        self.rebuilds += 1

    def _build_node_lists(self, x: np.ndarray) -> None:
        """For every node of the boundary row, the subset's particles within 2h + SKIN h / 2 of it at
        positions ``x`` (those of a neighour-list build): until the next build no particle moves
        SKIN h / 2, so every particle within 2h of a node at a later substep is listed, and
        :func:`fill_row_listed` fills the row from the lists instead of binning the particles
        every substep."""
        self._nodes = None
        self._node_row = -1
        g, m, pt = self.grid, self.model, self.particles
        ns = self.n_sub
        if self.ktop <= 0 or ns == 0:
            return
        ni, nj, nk = g.shape
        pos, comp, ij = row_nodes(g.origin[0], g.origin[1], g.origin[2], g.cell, ni, nj, nk, int(self.ktop))
        reach = m.h * (2.0 + 0.5 * SKIN)
        zlo = float(pos[:, 2].min()) - reach
        zhi = float(pos[:, 2].max()) + reach
        inv = 1.0 / reach
        zinv = 1.0 / (LAYER_EDGE * m.h)
        ncx = max(int(math.ceil(ni * g.cell * inv)), 1)
        ncy = max(int(math.ceil(nj * g.cell * inv)), 1)
        ncz = max(int(math.ceil((zhi - zlo) * zinv)), 1)
        start = np.zeros(ncx * ncy * ncz + 1, dtype=np.int64)
        bins = np.empty((8, ns), dtype=np.float32)
        ids = np.empty(ns, dtype=np.int32)
        bin_band(x, pt.v, pt.p, pt.rho, ns, m.sph.mass, zlo, zhi, g.origin[0], g.origin[1], inv, zinv, ncx, ncy,
                 ncz, start, bins, ids)
        # each node's slice sized from its count at the last build of the same row (plus a margin):
        # one pass; a first build, or a node whose list outgrew its slice, takes a counting pass
        count = np.zeros(len(pos), dtype=np.int64)
        args = (pos, start, bins, ids, g.origin[0], g.origin[1], zlo, inv, zinv, ncx, ncy, ncz, reach)
        last = self._node_counts if self._node_counts.shape[0] == len(pos) and self._node_row_last == self.ktop else None
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
            self.node_recounts += 1
        self._node_counts = count
        self._node_row_last = int(self.ktop)
        self._nodes = (pos, comp, ij, node_start, count, nbr)
        self._node_row = int(self.ktop)

    def restore_neighbours(self, x_ref: np.ndarray) -> None:
        """Keep the positions of the last build from a checkpoint (the list is rebuilt from them by
        :meth:`restore_checkpoint_state`, which knows the subset's size)."""
        self._x_ref = np.array(x_ref, dtype=np.float32, order="C")  # a copy: rebuilds write into it
        self._disp2 = None

    def checkpoint_state(self) -> dict:
        """Arrays beyond the particles that a resumed bake needs (saved by engine.checkpoint)."""
        g = self.grid
        return {"grid_u": g.u, "grid_v": g.v, "grid_w": g.w, "grid_p": g.p, "interface": np.float64(self.interface),
                "steps": np.int64(self.steps), "n_sub": np.int64(self.n_sub),
                "l_built": np.float64(self._l_built if self._l_built is not None else math.nan),
                "grid_p_last": self._p_last, "p_last_ktop": np.int64(self._p_last_ktop),
                "p_shift": np.float64(self._p_shift),
                "marker_dt": np.float64(self._marker_dt), "marker_steps": np.int64(self._marker_steps),
                "marker_speed": np.float64(self._marker_speed), "marker_disp2": np.float64(self._marker_disp2),
                "marker_p_stale": np.bool_(self._marker_p_stale), "marker_moved_u": self._moved[0],
                "marker_moved_v": self._moved[1], "marker_moved_w": self._moved[2],
                "marker_moved_fresh": np.bool_(self._moved_fresh)}

    def restore_checkpoint_state(self, state: dict) -> None:
        """Continue from :meth:`checkpoint_state`'s arrays, the particles being those of the checkpoint."""
        g = self.grid
        for name in ("u", "v", "w", "p"):
            getattr(g, name)[:] = state[f"grid_{name}"]
        self.steps = int(state["steps"])
        self._set_interface(float(state["interface"]), force=True)
        self.interface = float(state["interface"])
        n = len(self.particles)
        self._ensure_capacity()
        self.n_sub = int(state["n_sub"])
        l_built = float(state["l_built"])
        self._l_built = None if math.isnan(l_built) else l_built
        if "grid_p_last" in state:  # older checkpoints have none: the next solve starts from p^n alone
            self._p_last[:] = state["grid_p_last"]
            self._p_last_ktop = int(state["p_last_ktop"])
        if "p_shift" in state:
            self._p_shift = float(state["p_shift"])
        else:  # caches from before the boundary row's shift was kept: its previous row is unknown
            self._p_last_ktop = -1
        if "marker_dt" in state:  # caches from before the markers moved every few substeps have none
            self._marker_dt = float(state["marker_dt"])
            self._marker_steps = int(state["marker_steps"])
            self._marker_speed = float(state["marker_speed"])
            self._marker_disp2 = float(state["marker_disp2"])
            self._marker_p_stale = bool(state["marker_p_stale"]) if "marker_p_stale" in state else False
        if "marker_moved_u" in state:
            for a, name in zip(self._moved, "uvw"):
                a[:] = state[f"marker_moved_{name}"]
            self._moved_fresh = bool(state["marker_moved_fresh"])
        else:  # earlier caches moved the markers with the last half-step field, which is not saved
            self._marker_dt = 0.0
            self._marker_steps = 0
            self._moved_fresh = True
        if self._x_ref is not None and self._x_ref.shape[0] == n and self.n_sub:
            reach = self._reach()
            xs = self._x_ref[:self.n_sub]
            grid = build_grid(xs, 2.0 * reach)
            if not np.array_equal(grid.order, np.arange(self.n_sub)):
                raise ValueError("the saved neighbour-list positions are not in the particles' order")
            self.neighbours.build(xs, np.full(self.n_sub, reach, dtype=np.float32), grid._replace(order=None))
            self._build_node_lists(self._x_ref)
            self._changed = False
        else:
            self._changed = True
        self._update_solid()

    # -- pieces of a substep -------------------------------------------------------------------------

    def _classify(self) -> None:
        g = self.grid
        hi = g.origin + np.array(g.shape) * g.cell
        classify(self.particles.x, self.n_sub, self.interface, self.model.h, g.origin[0], g.origin[1], g.origin[2],
                 hi[0], hi[1], self.kind)

    def _fill(self, k0: int, k1: int, every_particle: bool = False) -> None:
        """Rows k0..k1 of the grid from the SPH particles around them (Suárez & Susín 2006, eq. 9); with
        ``every_particle`` from the markers too (the first fill of the whole grid: the liquid's
        initial velocity reaches the deep rows). The boundary row alone is filled from the node
        lists of the last build when it has them, other rows from the particles binned afresh."""
        if self.ktop <= 0:
            return
        m, g, pt = self.model, self.grid, self.particles
        h = m.h
        if k0 == k1 == self._node_row and not every_particle:
            pos, comp, ij, start, count, nbr = self._nodes
            fill_row_listed(pt.x, pt.v, pt.p, pt.rho, m.sph.mass, h, pos, comp, ij, start, count, nbr, int(k0), g.solid,
                            g.u, g.v, g.w, g.p)
            return
        zlo = g.origin[2] + k0 * g.cell - 2.0 * h
        zhi = g.origin[2] + (k1 + 1) * g.cell + 2.0 * h
        # bins of edge h: a node reads 5 x 5 columns (fewer, those that reach its support), and in
        # each only the layers within 2h of it
        ni, nj, _ = g.shape
        inv = 1.0 / (COLUMN_EDGE * h)
        zinv = 1.0 / (LAYER_EDGE * h)
        ncx = max(int(math.ceil(ni * g.cell * inv)), 1)
        ncy = max(int(math.ceil(nj * g.cell * inv)), 1)
        ncz = max(int(math.ceil((zhi - zlo) * zinv)), 1)
        ns = len(pt) if every_particle else self.n_sub
        if self._bin_start.shape[0] != ncx * ncy * ncz + 1:
            self._bin_start = np.zeros(ncx * ncy * ncz + 1, dtype=np.int64)
        if self._bins.shape[1] < ns:
            self._bins = np.empty((8, ns), dtype=np.float32)
            self._bin_ids = np.empty(ns, dtype=np.int32)
        bin_band(pt.x, pt.v, pt.p, pt.rho, ns, m.sph.mass, zlo, zhi, g.origin[0], g.origin[1], inv, zinv, ncx, ncy, ncz,
                 self._bin_start, self._bins, self._bin_ids)
        fill_rows(self._bins, self._bin_start, g.origin[0], g.origin[1], zlo, inv, zinv, ncx, ncy, ncz, h, int(k0),
                  int(k1), g.origin[0], g.origin[1], g.origin[2], g.cell, g.solid, g.u, g.v, g.w, g.p)

    def _evaluate(self) -> None:
        """Density and pressure of SPH and MIXA particles, then their accelerations."""
        s, pt = self.model.sph, self.particles
        ns = self.n_sub
        if ns == 0:
            return
        nl = self.neighbours
        x, v = pt.x[:ns], pt.v[:ns]
        # SPH and MIXA rows; MIXB (and markers not yet moved out of the list) carry p and rho from the grid
        rows = self._rows[:sph_rows(self.kind, pt.p, pt.rho, ns, self._rows, self._pr)]
        density_pressure(x, rows, nl.start, nl.count, nl.nbr, s.h, s.mass, s.rho0, s.pressure_constant,
                         s.boxes, s.table_d0, s.table_step, s.psi, s.dpsi, self._cset,
                         pt.rho[:ns], pt.p[:ns], self._pr[:ns], self._near[:ns], self._wall_grad[:ns])
        accelerations(x, v, rows, pt.rho[:ns], pt.p[:ns], self._pr[:ns], self._near[:ns], nl.start,
                      nl.count, nl.nbr, s.h,
                      s.mass, s.rho0, s.c0, s.alpha, s.nu, s.gravity[0], s.gravity[1], s.gravity[2], s.boxes,
                      s.table_d0, s.table_step, s.tau_n, s.tau_t, self._wall_grad[:ns], pt.a[:ns])

    def _ensure_capacity(self) -> None:
        n = len(self.particles)
        if self.kind.shape[0] != n:
            self.kind = np.zeros(n, dtype=np.int8)
            self._rows = np.zeros(n, dtype=np.int32)
            self._pr = np.zeros(n, dtype=np.float32)
            self._near = np.zeros(n, dtype=np.bool_)
            self._wall_grad = np.zeros((n, 3), dtype=np.float32)

    # -- public ------------------------------------------------------------------------------------

    def step(self, dt: float) -> None:
        """One substep of length dt in the order of Suárez & Susín 2006, §4.2 (see the module docstring)."""
        m, pt, g = self.model, self.particles, self.grid
        s = m.sph
        if len(pt) == 0:
            self.time += dt
            return
        self._ensure_capacity()
        if m.interface_mode == "AUTO" and self.steps % INTERFACE_EVERY == 0 and self.steps > 0:
            self._set_interface(self._interface_target())
        self._rebuild()
        inv = 1.0 / g.cell
        ox, oy, oz = g.origin
        hi0, hi1 = self._grid_top_corner
        use_grid = self.ktop > 0
        # 1-2: boundary row from SPH (eq. 9), MAC step (eq. 2-4)
        if use_grid:
            self._fill(self.ktop, self.ktop)
            if self._p_last_ktop == self.ktop:
                self._p_shift = extrapolate_pressure(g.p, self._p_last, g.solid, self.ktop, PRESSURE_EXTRAPOLATION,
                                                     self._p_shift)
            else:  # the rows changed: start from p^n alone this once
                self._p_last[:] = g.p
                self._p_shift = 0.0
            self._p_last_ktop = self.ktop
            # the projection also leaves the half-step field (u^n + u^(n+1)) / 2 of eq. 10 in _old and
            # adds dt times it to the markers' displacement
            self.pressure_iterations, self.pressure_residual = mac.step(
                g, self.scratch, self.ktop, dt, m.nu, s.gravity, m.pressure_solver, m.omega, m.tolerance,
                m.max_iterations, half_step=(*self._old, *self._moved, self._moved_fresh))
            self._moved_fresh = False
        # 3-4: kinds; MAC part of MIXA (eq. 11), half-step velocities of MIXB and markers (eq. 10); SPH
        # and MIXA half kick; everything drifts
        x_start = pt.x.copy() if self.collision is not None else pt.x
        chunks = (self.n_sub + CHUNK - 1) // CHUNK  # advance writes every one of them
        if self._disp_chunks.shape[0] < chunks:
            self._disp_chunks = np.zeros(2 * chunks, dtype=np.float64)
        disp = self._disp_chunks[:chunks]
        advance(pt.x, pt.v, pt.a, self._x_ref, self.n_sub, self.interface, m.h, ox, oy, oz, hi0, hi1, dt, use_grid,
                inv, *self._old, g.u, g.v, g.w, s.boxes, 2.0 * m.h, s.box_friction, s.box_bounce, self.kind, disp)
        self._disp2 = float(disp.max()) if chunks else 0.0
        self.time += dt
        self._marker_dt += dt
        self._marker_steps += 1
        # the first substep's half-step field holds the projection of the initial velocity (which
        # need not be divergence-free): the markers take that substep with it
        if (self._marker_steps >= MARKER_EVERY or self.steps == 0
                or (self._marker_dt + dt) * self._marker_speed > MARKER_REACH * m.h):
            self._move_markers(False)
        self._disp2 = max(self._disp2, self._marker_disp2)
        if self.collision is not None:
            self.collision.update(self.time)
            project(x_start, pt.x, pt.v, SWEEP_STEP * s.dx, 0.0, 1.0 / dt, True, self._cset)
            self._disp2 = None  # the push-out moved particles after the measurement
            if self.collision.max_speed() > 0.0:
                self._update_solid()
        # 4: SPH sums of SPH and MIXA particles (MIXB neighbours with their old p and rho)
        self._evaluate()
        # 4-5: closing half kick; pressure and density of MIXA, MIXB and markers from the grid
        finish(pt.x, pt.a, self.kind, self.n_sub, self.interface, m.h, s.rho0, s.pressure_constant, dt, use_grid,
               ox, oy, oz, inv, g.p, pt.v, pt.p, pt.rho)
        self.steps += 1

    def flush(self) -> None:
        """Move the markers outside the neighbour search by the time they still owe (see
        :data:`MARKER_EVERY`), with the last half-step grid velocity, and give them their p and rho
        from the grid. The bake calls it before it writes a frame; it changes nothing when they are
        up to date."""
        self._move_markers(True)

    def _move_markers(self, pressure: bool) -> None:
        """:meth:`flush`; without ``pressure`` the markers' p and rho are left for a later flush
        (nothing reads them before: the substep's own catch-up skips them)."""
        if self._marker_dt == 0.0 and not (pressure and self._marker_p_stale):
            return
        pt, g, s = self.particles, self.grid, self.model.sph
        count = len(pt) - self.n_sub
        if count > 0 and self._x_ref is not None and self._x_ref.shape[0] == len(pt):
            chunks = (count + 4095) // 4096
            out = np.zeros(2 * chunks, dtype=np.float64)
            move_markers(pt.x, self._x_ref, self.n_sub, self._marker_dt, pressure, g.origin[0], g.origin[1],
                         g.origin[2], 1.0 / g.cell, *self._moved, g.p, s.rho0, s.pressure_constant, s.boxes,
                         2.0 * self.model.h, s.box_friction, s.box_bounce, pt.v, pt.p, pt.rho, out)
            self._marker_disp2 = max(self._marker_disp2, float(out[:chunks].max()))
            if self._marker_dt > 0.0:
                self._marker_speed = math.sqrt(float(out[chunks:].max()))
        self._marker_p_stale = not pressure
        if self._marker_dt > 0.0:
            self._moved_fresh = True  # the displacement field starts again at the next substep
        self._marker_dt = 0.0
        self._marker_steps = 0

    def stable_dt(self) -> float:
        """Largest time step for the current state, s: the WCSPH criteria (CFL with the speed of sound,
        force and viscous limits) over SPH and MIXA particles, and the grid's CFL."""
        s, pt = self.model.sph, self.particles
        if len(pt) == 0:
            return math.inf
        vmax, amax = max_speed_and_acceleration(pt.v, pt.a, self.kind, MIXA)  # |a| of SPH and MIXA only
        dt = s.cfl * s.h / (s.c0 + vmax)
        if amax > 0.0:
            dt = min(dt, 0.25 * math.sqrt(s.h / amax))
        if s.nu > 0.0:
            dt = min(dt, 0.125 * s.h * s.h / s.nu, self.grid.cell ** 2 / (6.0 * s.nu))
        if vmax > 0.0:
            dt = min(dt, 0.5 * self.grid.cell / vmax)
        if self.collision is not None:
            dt = min(dt, self.collision.dt_limit(self.time))
        return dt

    def add_particles(self, x: np.ndarray, v: np.ndarray, level: int | np.ndarray = 0, **kwargs) -> np.ndarray:
        """Append particles between substeps (they join as SPH particles or markers by height at the
        next substep); returns their ids. The hybrid has a single resolution."""
        if np.any(np.asarray(level) != 0):
            raise ValueError("the hybrid solver has a single resolution; every particle has level 0")
        self.flush()  # the new rows come after the markers, which must not lend them their debt
        self._node_row = -1
        n = len(self.particles)
        ids = self.particles.add(x, v, **kwargs)
        self.particles.a[n:] = self.model.sph.gravity
        self._changed = True
        self._ensure_capacity()
        return ids

    def remove_particles(self, mask: np.ndarray) -> int:
        """Delete the particles where ``mask`` is True between substeps; returns how many."""
        if np.any(mask):
            self.flush()
        removed = self.particles.remove(mask)
        if removed:
            self._changed = True
            self.n_sub = 0
            self._node_row = -1
        self._ensure_capacity()
        return removed

    def kind_counts(self) -> dict:
        """Particles of each kind at the last substep."""
        counts = np.bincount(self.kind, minlength=4)
        return {name: int(c) for name, c in zip(KIND_NAMES, counts)}

    def memory_bytes(self) -> int:
        """Bytes held by the particle buffers, the grid, its work arrays and the neighbour list."""
        return (self.particles.nbytes() + self.grid.nbytes() + self.scratch.nbytes()
                + sum(a.nbytes for a in self._old) + self._p_last.nbytes + self.neighbours.nbytes() + self.kind.nbytes
                + self._rows.nbytes + self._pr.nbytes + self._near.nbytes + self._wall_grad.nbytes)


_NO_COLLIDERS = empty_world_args()
