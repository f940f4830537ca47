"""Marker-and-cell (MAC) solver on a staggered grid, for the deep part of the hybrid solver.

Suárez & Susín 2006, "Mesh-Particle Model for Fluid Animation" (Eurographics 2006), §2 (after
Harlow & Welch 1965 and Griebel,
Dornseifer & Neunhoeffer 1998):

* staggered grid (Fig. 1): the kinematic pressure P = p / rho at cell centres, the velocity
  components on the faces (u on the faces normal to i, v normal to j, w normal to k);
* eq. 2-3, explicit predictor: F = u + dt (nu lap u - (u . grad) u + g) (and G, H for v, w), the
  advection terms as a blend of centred and donor-cell differences of the conservative form
  (weight ``gamma`` of the donor cell, GDN98 §3.1.1), the viscous term with the 7-point Laplacian;
* eq. 4, the pressure Poisson equation lap P^(n+1) = div(F, G, H) / dt, solved by SOR
  (:func:`sor_solve`, lexicographic, as in the paper) or by red-black SOR over both colours in
  parallel (:func:`rbsor_solve`, the faster choice on several cores);
* eq. 3, the projection u^(n+1) = F - dt dP/dx (and likewise for v, w).

Axis k is vertical (Surge's Z, the paper's y). The grid only has to hold the liquid below the
hybrid interface: cells of rows ``k < ktop`` are computed; row ``ktop`` is a boundary row whose
P, u and v, and w on its upper face, are given (the hybrid solver fills them from SPH particles,
Suárez & Susín 2006, eq. 9); rows above are unused. There is no free surface in the MAC part (Suárez & Susín
2006, §2.3).

Solid cells (``solid == 1``) and everything outside the grid are walls: the velocity through
their faces is zero and the pressure has a zero normal gradient there (Neumann). A tangential
neighbour outside the grid takes the value of the face itself (free slip); a face next to a solid
cell inside the grid holds 0.
"""

from __future__ import annotations

import types
from dataclasses import dataclass

import numpy as np
from numba import njit, prange

from ...core.compile import FASTMATH_GRID as FASTMATH


#: Weight of the donor-cell part of the advection differences (GDN98 recommend 0 < gamma <= 1 and
#: gamma >= max |u dt / dx|); 0.5 keeps most of the centred scheme's accuracy.
DONOR_CELL_WEIGHT = 0.5

POISSON_SOLVERS = ("SOR", "RBSOR")


def _builds(body):
    """A parallel and a serial build of one kernel body (``prange`` runs as ``range`` in the serial
    one). The serial build compiles a copy of the function under its own name: numba's on-disk cache
    is keyed by the function's name and line, not by its ``parallel`` flag, so two builds of the
    same function object load whichever was cached first."""
    serial = types.FunctionType(body.__code__, body.__globals__, body.__name__ + "_serial", body.__defaults__,
                                body.__closure__)
    serial.__qualname__ = body.__qualname__ + "_serial"
    serial.__doc__ = body.__doc__
    return (njit(parallel=True, cache=True, fastmath=FASTMATH)(body),
            njit(cache=True, fastmath=FASTMATH)(serial))


@dataclass
class MACGrid:
    """State of a staggered grid of cubic cells (axis names i, j, k; k vertical).

    Attributes
    ----------
    origin : ndarray, shape (3,), float64, metres
        Lower corner of cell (0, 0, 0).
    cell : float
        Edge of a cell, metres.
    u : ndarray, shape (ni + 1, nj, nk), float64, m/s
        Velocity along i on the faces normal to i (face i lies at origin_x + i cell).
    v : ndarray, shape (ni, nj + 1, nk), float64, m/s
    w : ndarray, shape (ni, nj, nk + 1), float64, m/s
    p : ndarray, shape (ni, nj, nk), float64, m^2/s^2
        Kinematic pressure p / rho at the cell centres.
    solid : ndarray, shape (ni, nj, nk), uint8
        1 where the cell is solid.
    """

    origin: np.ndarray
    cell: float
    u: np.ndarray
    v: np.ndarray
    w: np.ndarray
    p: np.ndarray
    solid: np.ndarray

    @classmethod
    def create(cls, origin, cell: float, shape) -> "MACGrid":
        ni, nj, nk = (int(s) for s in shape)
        if min(ni, nj, nk) < 1:
            raise ValueError(f"a MAC grid needs at least one cell along each axis, got {shape}")
        return cls(origin=np.asarray(origin, dtype=np.float64).reshape(3).copy(), cell=float(cell),
                   u=np.zeros((ni + 1, nj, nk)), v=np.zeros((ni, nj + 1, nk)), w=np.zeros((ni, nj, nk + 1)),
                   p=np.zeros((ni, nj, nk)), solid=np.zeros((ni, nj, nk), dtype=np.uint8))

    @property
    def shape(self) -> tuple[int, int, int]:
        return self.p.shape

    def cell_centres(self) -> np.ndarray:
        """Centres of every cell, shape (ni * nj * nk, 3), float64, metres, in C order of (i, j, k)."""
        ni, nj, nk = self.shape
        axes = [self.origin[a] + (np.arange(n) + 0.5) * self.cell for a, n in enumerate((ni, nj, nk))]
        gi, gj, gk = np.meshgrid(*axes, indexing="ij")
        return np.stack([gi.ravel(), gj.ravel(), gk.ravel()], axis=1)

    def nbytes(self) -> int:
        return sum(a.nbytes for a in (self.u, self.v, self.w, self.p, self.solid))


# --------------------------------------------------------------------------------------------
# helpers


@njit(inline="always", cache=True)
def _d_product(a_lo, a_hi, b_lo, b_hi, c_lo, c_hi, d_lo, d_hi, dx, gamma):
    """d(ab)/ds from face values: centred part ((a_hi + b_hi)/2 (c_hi + d_hi)/2 - ...) / dx and the
    donor-cell part gamma (|a+b|/2 (c-d)/2 ...) / dx (GDN98 eq. 3.19-3.20)."""
    s_hi = 0.5 * (a_hi + b_hi)
    s_lo = 0.5 * (a_lo + b_lo)
    cen = s_hi * 0.5 * (c_hi + d_hi) - s_lo * 0.5 * (c_lo + d_lo)
    don = abs(s_hi) * 0.5 * (c_hi - d_hi) - abs(s_lo) * 0.5 * (c_lo - d_lo)
    return (cen + gamma * don) / dx


# --------------------------------------------------------------------------------------------
# eq. 2-3: explicit predictor


def _predictor_body(u, v, w, solid, ktop, dx, dt, nu, gamma, gx, gy, gz,
              # outputs
              f, g, hh):
    """F, G, H of Suárez & Susín 2006, eq. 3: u + dt (nu lap u - (u . grad) u + g), for every face of a computed cell.

    Faces on a wall (the grid's sides or a solid cell) get 0; the u and v faces of the boundary row,
    and every face above it, are not written (the Poisson right-hand side and the projection read
    only computed faces; copying the whole grid there first cost a third of this kernel).
    """
    ni, nj, nk = solid.shape
    inv2 = 1.0 / (dx * dx)
    for i in prange(ni + 1):
        for j in range(nj + 1):
            for k in range(min(ktop + 1, nk + 1)):
                # cell (i, j, k) computed / computed or open boundary row (written out rather than
                # helpers taking the array: numba counts references on every such call, which made
                # this loop 3x slower)
                here = i < ni and j < nj and k < ktop and solid[i, j, k] == 0
                here_open = i < ni and j < nj and k <= ktop and solid[i, j, k] == 0
                # ---- u face (i, j, k): between cells (i-1, j, k) and (i, j, k)
                if j < nj and k < ktop:
                    if i >= 1 and solid[i - 1, j, k] == 0 and here:
                        c = u[i, j, k]
                        du2 = _d_product(u[max(i - 1, 0), j, k], c, c, u[min(i + 1, u.shape[0] - 1), j, k],
                                         u[max(i - 1, 0), j, k], c, c, u[min(i + 1, u.shape[0] - 1), j, k],
                                         dx, gamma)
                        duv = _d_product(v[i - 1, j, k], v[i - 1, j + 1, k], v[i, j, k], v[i, j + 1, k],
                                         u[i, max(j - 1, 0), k], c, c, u[i, min(j + 1, u.shape[1] - 1), k],
                                         dx, gamma)
                        duw = _d_product(w[i - 1, j, k], w[i - 1, j, k + 1], w[i, j, k], w[i, j, k + 1],
                                         u[i, j, max(k - 1, 0)], c, c, u[i, j, min(k + 1, u.shape[2] - 1)],
                                         dx, gamma)
                        lap = (u[min(i + 1, u.shape[0] - 1), j, k] + u[max(i - 1, 0), j, k]
                               + u[i, min(j + 1, u.shape[1] - 1), k] + u[i, max(j - 1, 0), k]
                               + u[i, j, min(k + 1, u.shape[2] - 1)] + u[i, j, max(k - 1, 0)] - 6.0 * c) * inv2
                        f[i, j, k] = c + dt * (nu * lap - du2 - duv - duw + gx)
                    elif i <= ni:
                        f[i, j, k] = 0.0
                # ---- v face (i, j, k): between cells (i, j-1, k) and (i, j, k)
                if i < ni and k < ktop:
                    if j >= 1 and solid[i, j - 1, k] == 0 and here:
                        c = v[i, j, k]
                        dvu = _d_product(u[i, j - 1, k], u[i + 1, j - 1, k], u[i, j, k], u[i + 1, j, k],
                                         v[max(i - 1, 0), j, k], c, c, v[min(i + 1, v.shape[0] - 1), j, k],
                                         dx, gamma)
                        dv2 = _d_product(v[i, max(j - 1, 0), k], c, c, v[i, min(j + 1, v.shape[1] - 1), k],
                                         v[i, max(j - 1, 0), k], c, c, v[i, min(j + 1, v.shape[1] - 1), k],
                                         dx, gamma)
                        dvw = _d_product(w[i, j - 1, k], w[i, j - 1, k + 1], w[i, j, k], w[i, j, k + 1],
                                         v[i, j, max(k - 1, 0)], c, c, v[i, j, min(k + 1, v.shape[2] - 1)],
                                         dx, gamma)
                        lap = (v[min(i + 1, v.shape[0] - 1), j, k] + v[max(i - 1, 0), j, k]
                               + v[i, min(j + 1, v.shape[1] - 1), k] + v[i, max(j - 1, 0), k]
                               + v[i, j, min(k + 1, v.shape[2] - 1)] + v[i, j, max(k - 1, 0)] - 6.0 * c) * inv2
                        g[i, j, k] = c + dt * (nu * lap - dvu - dv2 - dvw + gy)
                    else:
                        g[i, j, k] = 0.0
                # ---- w face (i, j, k): between cells (i, j, k-1) and (i, j, k); k = ktop borders the boundary row
                if i < ni and j < nj and k <= ktop:
                    if k >= 1 and solid[i, j, k - 1] == 0 and here_open:
                        c = w[i, j, k]
                        dwu = _d_product(u[i, j, k - 1], u[i + 1, j, k - 1], u[i, j, k], u[i + 1, j, k],
                                         w[max(i - 1, 0), j, k], c, c, w[min(i + 1, w.shape[0] - 1), j, k],
                                         dx, gamma)
                        dwv = _d_product(v[i, j, k - 1], v[i, j + 1, k - 1], v[i, j, k], v[i, j + 1, k],
                                         w[i, max(j - 1, 0), k], c, c, w[i, min(j + 1, w.shape[1] - 1), k],
                                         dx, gamma)
                        dw2 = _d_product(w[i, j, k - 1], c, c, w[i, j, min(k + 1, w.shape[2] - 1)],
                                         w[i, j, k - 1], c, c, w[i, j, min(k + 1, w.shape[2] - 1)], dx, gamma)
                        lap = (w[min(i + 1, w.shape[0] - 1), j, k] + w[max(i - 1, 0), j, k]
                               + w[i, min(j + 1, w.shape[1] - 1), k] + w[i, max(j - 1, 0), k]
                               + w[i, j, min(k + 1, w.shape[2] - 1)] + w[i, j, k - 1] - 6.0 * c) * inv2
                        hh[i, j, k] = c + dt * (nu * lap - dwu - dwv - dw2 + gz)
                    else:
                        hh[i, j, k] = 0.0


predictor_parallel, predictor_serial = _builds(_predictor_body)


# --------------------------------------------------------------------------------------------
# eq. 4: pressure Poisson equation


def _poisson_rhs_body(f, g, hh, solid, ktop, dx, dt,
                # outputs
                rhs):
    """Right-hand side of Suárez & Susín 2006, eq. 4: div(F, G, H) / dt at every computed cell, 1/s^2 (0 at solid
    cells; rows from ``ktop`` up are not written: nothing reads them)."""
    ni, nj, nk = solid.shape
    s = 1.0 / (dx * dt)
    for i in prange(ni):
        for j in range(nj):
            for k in range(min(ktop, nk)):
                if k < ktop and solid[i, j, k] == 0:
                    rhs[i, j, k] = (f[i + 1, j, k] - f[i, j, k] + g[i, j + 1, k] - g[i, j, k]
                                    + hh[i, j, k + 1] - hh[i, j, k]) * s
                else:
                    rhs[i, j, k] = 0.0


poisson_rhs_parallel, poisson_rhs_serial = _builds(_poisson_rhs_body)


@njit(cache=True)
def neighbour_mask(solid, ktop,
                   # outputs
                   mask):
    """Which of the 7-point stencil's neighbours take part in each computed cell's equation: bits
    0-5 for i-1, i+1, j-1, j+1, k-1 (computed cells) and k+1 (a computed cell or the boundary row,
    Dirichlet); walls (solid or outside the grid) are left out, a zero normal gradient (Neumann).
    Built once per solve so that the sweeps test one byte instead of six bounds and solid checks;
    rows from ``ktop`` up are not written (the sweeps stop under the boundary row)."""
    ni, nj, nk = solid.shape
    for i in range(ni):
        for j in range(nj):
            for k in range(min(ktop, nk)):
                m = 0
                if k < ktop and solid[i, j, k] == 0:
                    # the neighbours' tests written out (see _predictor_body)
                    if i >= 1 and solid[i - 1, j, k] == 0:
                        m |= 1
                    if i + 1 < ni and solid[i + 1, j, k] == 0:
                        m |= 2
                    if j >= 1 and solid[i, j - 1, k] == 0:
                        m |= 4
                    if j + 1 < nj and solid[i, j + 1, k] == 0:
                        m |= 8
                    if k >= 1 and solid[i, j, k - 1] == 0:
                        m |= 16
                    if k + 1 <= ktop and k + 1 < nk and solid[i, j, k + 1] == 0:
                        m |= 32
                mask[i, j, k] = m


@njit(cache=True)
def _stencil_tables():
    """Neighbour count n and 1/n (0 for no neighbour) of every 6-bit mask of :func:`neighbour_mask`."""
    count = np.zeros(64, dtype=np.float64)
    inv = np.zeros(64, dtype=np.float64)
    for m in range(1, 64):
        c = 0
        for b in range(6):
            c += (m >> b) & 1
        count[m] = c
        inv[m] = 1.0 / c
    return count, inv


# One SOR update of a cell (i, j, k) with neighbour mask m (Suárez & Susín 2006, eq. 4, 7-point Laplacian over
# the neighbours of neighbour_mask), written out in both sweep kernels below:
#
#     total = sum over the six neighbours of bit(m) * p[neighbour]   (indices clamped into the grid)
#     r = (total - n(m) p[i, j, k]) / dx^2 - rhs[i, j, k]            (0 where m = 0)
#     p[i, j, k] += omega r dx^2 / n(m)
#
# Branch-free (every neighbour read, weighted by its bit): testing the six bits one by one made a
# sweep 4x slower (22 against 5 ns per cell), and so did an inline helper taking the arrays (numba
# updates their reference counts on every call).


@njit(cache=True, fastmath=FASTMATH)
def _sor_sweeps(p, rhs, mask, ktop, dx, omega, tol, max_iter):
    ni, nj, nk = mask.shape
    dx2 = dx * dx
    inv_dx2 = 1.0 / dx2
    count, inv_count = _stencil_tables()
    r_max = 0.0
    for it in range(max_iter):
        r_max = 0.0
        for k in range(min(ktop, nk)):
            km = max(k - 1, 0)
            kp = min(k + 1, nk - 1)
            for j in range(nj):
                jm = max(j - 1, 0)
                jp = min(j + 1, nj - 1)
                for i in range(ni):
                    m = np.int64(mask[i, j, k])
                    total = ((m & 1) * p[max(i - 1, 0), j, k] + ((m >> 1) & 1) * p[min(i + 1, ni - 1), j, k]
                             + ((m >> 2) & 1) * p[i, jm, k] + ((m >> 3) & 1) * p[i, jp, k]
                             + ((m >> 4) & 1) * p[i, j, km] + ((m >> 5) & 1) * p[i, j, kp])
                    c = p[i, j, k]
                    r = (total - count[m] * c) * inv_dx2 - rhs[i, j, k] if m != 0 else 0.0
                    p[i, j, k] = c + omega * r * inv_count[m] * dx2
                    r = abs(r)
                    if r > r_max:
                        r_max = r
        if r_max <= tol:
            return it + 1, r_max
    return max_iter, r_max


def _rbsor_body(p, rhs, mask, ktop, dx, omega, tol, max_iter):
    """Red-black SOR iterations in one compiled loop (one parallel region per colour, no Python
    round trip between them); per-row residual maxima avoid a shared reduction. The cells of one
    colour do not neighbour each other, so the serial and parallel builds give identical results."""
    ni, nj, nk = mask.shape
    kmax = min(ktop, nk)
    dx2 = dx * dx
    inv_dx2 = 1.0 / dx2
    count, inv_count = _stencil_tables()
    rows = np.zeros((2, max(ni, 1)), dtype=np.float64)
    r_max = 0.0
    for it in range(max_iter):
        for colour in range(2):
            # k, the last axis, innermost: the cells of one colour are every other element of a
            # contiguous run (an i-innermost walk jumps nj * nk elements per cell: 4x slower)
            for i in prange(ni):
                im = max(i - 1, 0)
                ip = min(i + 1, ni - 1)
                r_row = 0.0
                for j in range(nj):
                    jm = max(j - 1, 0)
                    jp = min(j + 1, nj - 1)
                    k0 = (colour + i + j) % 2  # colour of (i, j, k) = (i + j + k) mod 2
                    for k in range(k0, kmax, 2):
                        m = np.int64(mask[i, j, k])
                        total = ((m & 1) * p[im, j, k] + ((m >> 1) & 1) * p[ip, j, k]
                                 + ((m >> 2) & 1) * p[i, jm, k] + ((m >> 3) & 1) * p[i, jp, k]
                                 + ((m >> 4) & 1) * p[i, j, max(k - 1, 0)]
                                 + ((m >> 5) & 1) * p[i, j, min(k + 1, nk - 1)])
                        c = p[i, j, k]
                        r = (total - count[m] * c) * inv_dx2 - rhs[i, j, k] if m != 0 else 0.0
                        p[i, j, k] = c + omega * r * inv_count[m] * dx2
                        r = abs(r)
                        if r > r_row:
                            r_row = r
                rows[colour, i] = r_row
        r_max = rows.max()
        if r_max <= tol:
            return it + 1, r_max
    return max_iter, r_max


_rbsor_parallel, _rbsor_serial = _builds(_rbsor_body)

#: The grid kernels run in parallel from this many computed cells up; below, the cost of waking
#: the threads (twice per iteration for red-black SOR) exceeds the work (same result either way);
#: on a loaded machine every parallel region costs more, so small grids stay serial.
PARALLEL_MIN_CELLS = 4096


def is_large(shape, ktop: int) -> bool:
    """True if a grid of ``shape`` computed up to row ``ktop`` is worth the parallel kernels."""
    return shape[0] * shape[1] * min(int(ktop), shape[2]) >= PARALLEL_MIN_CELLS


def sor_solve(p: np.ndarray, rhs: np.ndarray, solid: np.ndarray, ktop: int, dx: float, omega: float, tol: float,
              max_iter: int) -> tuple[int, float]:
    """Solve Suárez & Susín 2006, eq. 4 by lexicographic SOR (the paper's method), in place.

    Parameters
    ----------
    p : ndarray, shape (ni, nj, nk), float64, m^2/s^2
        Initial guess (warm start); row ``ktop`` holds the Dirichlet values.
    rhs : ndarray, shape (ni, nj, nk), float64, 1/s^2
    tol : float, 1/s^2
        Stop once the largest residual |lap P - rhs| of a sweep is at most this.

    Returns
    -------
    (iterations, largest residual of the last sweep)
    """
    if ktop <= 0:
        return 0, 0.0
    mask = np.empty(solid.shape, dtype=np.uint8)
    neighbour_mask(solid, int(ktop), mask)
    it, r = _sor_sweeps(p, rhs, mask, int(ktop), float(dx), float(omega), float(tol), int(max_iter))
    return int(it), float(r)


def rbsor_solve(p: np.ndarray, rhs: np.ndarray, solid: np.ndarray, ktop: int, dx: float, omega: float, tol: float,
                max_iter: int) -> tuple[int, float]:
    """Red-black SOR: the cells of one colour do not neighbour each other, so each half sweep runs in
    parallel over the rows k (same arguments and result as :func:`sor_solve`)."""
    if ktop <= 0:
        return 0, 0.0
    kernel = _rbsor_parallel if is_large(p.shape, ktop) else _rbsor_serial
    mask = np.empty(solid.shape, dtype=np.uint8)
    neighbour_mask(solid, int(ktop), mask)
    it, r = kernel(p, rhs, mask, int(ktop), float(dx), float(omega), float(tol), int(max_iter))
    return int(it), float(r)


def solve_pressure(method: str, *args) -> tuple[int, float]:
    """Dispatch to :func:`sor_solve` ('SOR') or :func:`rbsor_solve` ('RBSOR')."""
    if method == "SOR":
        return sor_solve(*args)
    if method == "RBSOR":
        return rbsor_solve(*args)
    raise ValueError(f"unknown pressure solver {method!r}; choose one of {', '.join(POISSON_SOLVERS)}")


# --------------------------------------------------------------------------------------------
# eq. 3: projection


def _project_body(f, g, hh, p, solid, ktop, dx, dt, track, fresh,
                  # outputs
                  u, v, w, ou, ov, ow, mu, mv, mw):
    """u^(n+1) = F - dt dP/dx on faces between computed cells (Suárez & Susín 2006, eq. 3); w on the faces under
    the boundary row uses its Dirichlet pressure. Wall faces get 0; boundary-row faces are kept.

    With ``track``, every face of the computed rows (u and v under the boundary row, w up to its
    lower face) also gives the half-step velocity of Suárez & Susín 2006, eq. 10, o = (u^n + u^(n+1)) / 2, read
    before it is overwritten, into ``ou``, ``ov``, ``ow``, and adds dt o to the displacement field
    ``mu``, ``mv``, ``mw`` (sets it when ``fresh``); faces above are not written (the particles that
    sample these fields lie under the interface)."""
    ni, nj, nk = solid.shape
    s = dt / dx
    for i in prange(ni + 1):
        for j in range(nj + 1):
            for k in range(min(ktop + 1, nk + 1)):
                here = i < ni and j < nj and k < ktop and solid[i, j, k] == 0  # as in the predictor
                here_open = i < ni and j < nj and k <= ktop and solid[i, j, k] == 0
                if j < nj and k < ktop:
                    old = u[i, j, k]
                    if i >= 1 and solid[i - 1, j, k] == 0 and here:
                        new = f[i, j, k] - s * (p[i, j, k] - p[i - 1, j, k])
                    else:
                        new = 0.0
                    u[i, j, k] = new
                    if track:
                        half = 0.5 * (old + new)
                        ou[i, j, k] = half
                        mu[i, j, k] = dt * half if fresh else mu[i, j, k] + dt * half
                if i < ni and k < ktop:
                    old = v[i, j, k]
                    if j >= 1 and solid[i, j - 1, k] == 0 and here:
                        new = g[i, j, k] - s * (p[i, j, k] - p[i, j - 1, k])
                    else:
                        new = 0.0
                    v[i, j, k] = new
                    if track:
                        half = 0.5 * (old + new)
                        ov[i, j, k] = half
                        mv[i, j, k] = dt * half if fresh else mv[i, j, k] + dt * half
                if i < ni and j < nj and k <= ktop:
                    old = w[i, j, k]
                    new = old
                    if k >= 1 and solid[i, j, k - 1] == 0 and here_open:
                        new = hh[i, j, k] - s * (p[i, j, k] - p[i, j, k - 1])
                    elif k < ktop or not here_open:
                        new = 0.0
                    w[i, j, k] = new
                    if track:
                        half = 0.5 * (old + new)
                        ow[i, j, k] = half
                        mw[i, j, k] = dt * half if fresh else mw[i, j, k] + dt * half


project_parallel, project_serial = _builds(_project_body)


@njit(parallel=True, cache=True, fastmath=FASTMATH)
def divergence(u, v, w, solid, ktop, dx,
               # outputs
               div):
    """Discrete divergence of the face velocities in every computed cell, 1/s (0 elsewhere)."""
    ni, nj, nk = solid.shape
    for i in prange(ni):
        for j in range(nj):
            for k in range(nk):
                if k < ktop and solid[i, j, k] == 0:
                    div[i, j, k] = (u[i + 1, j, k] - u[i, j, k] + v[i, j + 1, k] - v[i, j, k]
                                    + w[i, j, k + 1] - w[i, j, k]) / dx
                else:
                    div[i, j, k] = 0.0


class MACScratch:
    """Work arrays of :func:`step`, sized for one grid."""

    def __init__(self, grid: MACGrid):
        self.f = np.zeros_like(grid.u)
        self.g = np.zeros_like(grid.v)
        self.h = np.zeros_like(grid.w)
        self.rhs = np.zeros_like(grid.p)

    def nbytes(self) -> int:
        return self.f.nbytes + self.g.nbytes + self.h.nbytes + self.rhs.nbytes


def step(grid: MACGrid, scratch: MACScratch, ktop: int, dt: float, nu: float, gravity, method: str, omega: float,
         tol: float, max_iter: int, gamma: float = DONOR_CELL_WEIGHT, half_step=None) -> tuple[int, float]:
    """One MAC time step in place (Suárez & Susín 2006, eq. 2-4): predictor, Poisson solve, projection.

    ``tol`` is in 1/s (the largest velocity divergence the solve may leave, tolerance times dt is
    compared with the residual of eq. 4). ``half_step``, if given, is (ou, ov, ow, mu, mv, mw,
    fresh): the projection also writes the half-step velocity (u^n + u^(n+1)) / 2 of the computed
    rows into ou, ov, ow and adds dt times it to mu, mv, mw (sets it if ``fresh``). Returns the
    solver's (iterations, residual in 1/s^2).
    """
    if ktop <= 0:
        return 0, 0.0
    gx, gy, gz = float(gravity[0]), float(gravity[1]), float(gravity[2])
    large = is_large(grid.shape, ktop)
    (predictor_parallel if large else predictor_serial)(
        grid.u, grid.v, grid.w, grid.solid, int(ktop), grid.cell, dt, nu, gamma, gx, gy, gz,
        scratch.f, scratch.g, scratch.h)
    (poisson_rhs_parallel if large else poisson_rhs_serial)(
        scratch.f, scratch.g, scratch.h, grid.solid, int(ktop), grid.cell, dt, scratch.rhs)
    result = solve_pressure(method, grid.p, scratch.rhs, grid.solid, int(ktop), grid.cell, omega, tol / dt,
                            max_iter)
    if half_step is None:
        track, fresh, fields = False, False, _NO_FIELDS
    else:
        track, fresh, fields = True, bool(half_step[6]), half_step[:6]
    (project_parallel if large else project_serial)(
        scratch.f, scratch.g, scratch.h, grid.p, grid.solid, int(ktop), grid.cell, dt, track, fresh,
        grid.u, grid.v, grid.w, *fields)
    return result


_NO_FIELDS = tuple(np.zeros((1, 1, 1)) for _ in range(6))
