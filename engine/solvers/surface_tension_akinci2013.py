"""Surface tension and adhesion after Akinci, Akinci & Teschner 2013, "Versatile surface tension and
adhesion for SPH fluids" (ACM Transactions on Graphics 32(6)), with the coefficient set from the
liquid's measured surface tension sigma (N/m).

Between two particles of one liquid, with h_c = 2h the kernel support (their h):

* cohesion, eq. 1-2:   F_coh = -gamma m_i m_j C(r) x_ij / r,
  C(r) = 32 / (pi h_c^9) ((h_c - r)^3 r^3 for h_c / 2 < r <= h_c; 2 (h_c - r)^3 r^3 - h_c^6 / 64 for
  0 < r <= h_c / 2): attraction beyond h_c / 2, a little repulsion inside it;
* eq. 6: times K_ij = 2 rho0 / (rho_i + rho_j), which strengthens the pull where the surface's
  particles lack neighbours.

Their curvature term (eq. 4-5, -gamma m_i (n_i - n_j)) is not used: with gamma in the unit the
cohesion needs for a surface tension in N/m (N m^3 / kg^2) it is not an acceleration, and the paper
gives it no scale of its own.

gamma from sigma: a liquid of uniform density n = rho / m whose particles attract with the pair
force F(r) has the surface tension sigma = (pi / 8) n^2 int_0^h_c r^4 F(r) dr (Kirkwood & Buff 1949:
half the work per unit area of pulling two half-spaces apart, their uniform densities meeting at a
plane). With F = gamma m^2 C(r) that is sigma = (pi / 8) rho^2 gamma I_4, I_4 = int_0^h_c r^4 C(r) dr,
so gamma = 8 sigma / (pi rho^2 I_4).

Time step. The cohesion is explicit, and with PBF it also sets how fast particle-scale jitter grows:
each substep the cohesion's unbalanced pull a ~ sigma / (rho dx^2) on a particle leaves a velocity
error of about a dt that the one-sided density constraint does not take back, and once that jitter
carries more kinetic energy than the cohesion binds (rho u^2 ~ sigma / dx) the liquid boils apart. Both
sides scale alike, so the bound has the form of the capillary limit of Brackbill, Kothe & Zemach 1992
(eq. 61), dt < c sqrt(rho dx^3 / sigma), but with a much smaller constant than their 1 / sqrt(2 pi):
a weightless water drop at dx = 1 mm holds at dt = 0.2 ms (jitter 0.2 m/s) and boils apart within
0.5 s at dt = 0.3 ms, where Brackbill's bound is 1.5 ms. :data:`CAPILLARY_DT` = 0.027 keeps 2.5 times
below that threshold (0.1 ms there); see :func:`capillary_dt`.

Adhesion (eq. 7): a wall attracts the liquid next to it. Akinci et al. sum a kernel A over boundary
particles; the walls here are continuous (the solid half-space behind a box wall or collider surface),
and the pull is the cohesion kernel's over that half-space, times the collider's ``adhesion``:

    a_adh = adhesion gamma rho0 I_C(d) (-n),   I_C(d) = 2 pi int_d^h_c s int_s^h_c C(r) dr ds,

so that ``adhesion`` 1 pulls the liquid as the liquid itself would, were the wall made of it. In this
mean-field picture Young's relation reads cos theta = 2 adhesion - 1: 0 beads the liquid up
(theta = 180 degrees), 0.5 gives 90 degrees, 1 wets completely.

Known limitation: the l = 2 oscillation of a weightless drop is faster than Rayleigh's (a 2 cm water
drop at dx = 4 mm: period 0.6 s against 0.74 s), as if the surface tension were stronger than sigma;
the resting radius is kept.
"""

from __future__ import annotations

import math

import numpy as np
from numba import njit, prange

from ..collision.queries import collider_near, collider_phi
from ..collision.walls import near_box, table
from ..core.compile import FASTMATH
from ..core.neighbour_list import list_range

#: Particles per block of the fixed partition (full neighbour lists).
BLOCK = 4096

#: c of the substep bound dt < c sqrt(rho dx^3 / sigma) (see the module docstring).
CAPILLARY_DT = 0.027


def cohesion_kernel(r, hc):
    """C(r) of Akinci et al. 2013, eq. 2 (numpy, any shape), 1/m^3."""
    r = np.asarray(r, dtype=np.float64)
    c = 32.0 / (math.pi * hc ** 9)
    outer = (hc - r) ** 3 * r ** 3
    inner = 2.0 * outer - hc ** 6 / 64.0
    out = np.where(2.0 * r > hc, outer, inner)
    return np.where((r > 0.0) & (r <= hc), c * out, 0.0)


def gamma_per_sigma(hc: float, rho: float) -> float:
    """gamma / sigma = 8 / (pi rho^2 I_4), I_4 = int_0^h_c r^4 C(r) dr (see the module docstring)."""
    r = np.linspace(0.0, hc, 20001)
    i4 = float(np.trapz(r ** 4 * cohesion_kernel(r, hc), r))
    return 8.0 / (math.pi * rho * rho * i4)


def adhesion_table(samples: int = 256) -> tuple[np.ndarray, np.ndarray]:
    """I_C(d) h_c^0 at h_c = 1 on d in [0, 1]: the cohesion kernel's pull, per unit gamma rho0, of the
    solid half-space at distance d (its unit is 1/m at h_c = 1 m; scale by 1 / h_c)."""
    s = np.linspace(0.0, 1.0, 4001)
    c = cohesion_kernel(s, 1.0)
    tail = np.concatenate([[0.0], np.cumsum(0.5 * (c[1:] + c[:-1]) * np.diff(s))])
    f = tail[-1] - tail  # F(s) = int_s^1 C(r) dr
    d = np.linspace(0.0, 1.0, samples)
    out = np.array([2.0 * math.pi * np.trapz(s[s >= di] * f[s >= di], s[s >= di]) if di < 1.0 else 0.0 for di in d])
    return d, out


def capillary_dt(rho: np.ndarray, sigma: np.ndarray, dx: float) -> float:
    """The longest stable substep, :data:`CAPILLARY_DT` sqrt(rho dx^3 / sigma) (the form of Brackbill,
    Kothe & Zemach 1992, eq. 61, with the constant measured for this cohesion: see the module
    docstring), over the liquids, s (inf without surface tension)."""
    sigma = np.asarray(sigma, dtype=np.float64)
    if not np.any(sigma > 0.0):
        return math.inf
    rho = np.asarray(rho, dtype=np.float64)
    return CAPILLARY_DT * float(np.min(np.sqrt(rho[sigma > 0.0] * dx ** 3 / sigma[sigma > 0.0])))


@njit(inline="always", cache=True)
def _cohesion32(r, hc):
    """C(r) in single precision."""
    c = np.float32(32.0 / math.pi) / (hc * hc * hc * hc * hc * hc * hc * hc * hc)
    t = (hc - r) * r
    outer = t * t * t
    if np.float32(2.0) * r > hc:
        return c * outer
    h3 = hc * hc * hc
    return c * (np.float32(2.0) * outer - h3 * h3 / np.float32(64.0))


@njit(parallel=True, cache=True, fastmath=FASTMATH)
def accelerations(x, h, mass_abs, rho, rho0, gamma, start, count, local, nbr, half, block,
                  # outputs
                  acc):
    """Cohesion of Akinci et al. 2013, eq. 1-2 and 6, as accelerations (m/s^2): for each pair
    -K_ij gamma_ij m_j C(r) x_ij / r, K_ij = 2 rho0_ij / (rho_i + rho_j), gamma_ij and rho0_ij the mean of
    the two particles' (``gamma`` and ``rho0`` per particle, ``mass_abs`` kg)."""
    n = x.shape[0]
    for b in prange((n + block - 1) // block):
        i0 = b * block
        i1 = min(n, i0 + block)
        for i in range(i0, i1):
            acc[i, 0] = 0.0
            acc[i, 1] = 0.0
            acc[i, 2] = 0.0
        for i in range(i0, i1):
            p0, mid, end = list_range(start, count, local, half, i)
            xi = x[i, 0]
            yi = x[i, 1]
            zi = x[i, 2]
            s0 = np.float32(0.0)
            s1 = np.float32(0.0)
            s2 = np.float32(0.0)
            for t in range(p0, end):
                j = nbr[t]
                e0 = xi - x[j, 0]
                e1 = yi - x[j, 1]
                e2 = zi - x[j, 2]
                r2 = e0 * e0 + e1 * e1 + e2 * e2
                hc = h[i] + h[j]  # 2 h_ij
                if r2 >= hc * hc or r2 == np.float32(0.0):
                    continue
                r = math.sqrt(r2)
                g = np.float32(0.5) * (gamma[i] + gamma[j])
                c = (rho0[i] + rho0[j]) / (rho[i] + rho[j]) * g * _cohesion32(r, hc) / r
                s0 -= mass_abs[j] * c * e0
                s1 -= mass_abs[j] * c * e1
                s2 -= mass_abs[j] * c * e2
                if t < mid:
                    acc[j, 0] += mass_abs[i] * c * e0
                    acc[j, 1] += mass_abs[i] * c * e1
                    acc[j, 2] += mass_abs[i] * c * e2
            acc[i, 0] += s0
            acc[i, 1] += s1
            acc[i, 2] += s2


@njit(parallel=True, cache=True)
def adhere(x, h, gamma, rho0, boxes, box_adhesion, col_adhesion, table_d, cset, dt,
           # outputs
           v):
    """v += dt adhesion gamma rho0 I_C(d) / h_c (-n) for every wall within h_c = 2h with an adhesion (box
    walls and mesh colliders; ``table_d`` I_C on [0, 1] in units of h_c, see :func:`adhesion_table`)."""
    n_col = cset.colliders.shape[0]
    step = 1.0 / (table_d.shape[0] - 1)
    for i in prange(x.shape[0]):
        if gamma[i] == 0.0:
            continue
        hc = 2.0 * np.float64(h[i])
        scale = dt * np.float64(gamma[i]) * np.float64(rho0[i]) / hc
        x0 = np.float64(x[i, 0])
        x1 = np.float64(x[i, 1])
        x2 = np.float64(x[i, 2])
        a0 = 0.0
        a1 = 0.0
        a2 = 0.0
        for b in range(boxes.shape[0]):
            if box_adhesion[b] == 0.0 or not near_box(x0, x1, x2, boxes[b, 0], boxes[b, 1], hc):
                continue
            for axis in range(3):
                xa = x0 if axis == 0 else (x1 if axis == 1 else x2)
                lo = xa - boxes[b, 0, axis]
                hi = boxes[b, 1, axis] - xa
                pull = 0.0
                if lo < hc:
                    pull -= table(table_d, 0.0, step, max(lo, 0.0) / hc)
                if hi < hc:
                    pull += table(table_d, 0.0, step, max(hi, 0.0) / hc)
                pull *= box_adhesion[b]
                if axis == 0:
                    a0 += pull
                elif axis == 1:
                    a1 += pull
                else:
                    a2 += pull
        if n_col > 0 and collider_near(x0, x1, x2, hc, cset):
            for c in range(n_col):
                if col_adhesion[c] == 0.0:
                    continue
                phi, n0, n1, n2, _tri, _r0, _r1, _r2 = collider_phi(x0, x1, x2, c, cset)
                if phi >= hc or (n0 == 0.0 and n1 == 0.0 and n2 == 0.0):
                    continue
                pull = col_adhesion[c] * table(table_d, 0.0, step, max(phi, 0.0) / hc)
                a0 -= pull * n0
                a1 -= pull * n1
                a2 -= pull * n2
        v[i, 0] += scale * a0
        v[i, 1] += scale * a1
        v[i, 2] += scale * a2


class SurfaceTension:
    """The surface-tension step of a particle solver (see the module docstring): call :meth:`apply` once
    per substep after the positions are final, with the neighbour list of those positions."""

    def __init__(self):
        self._n = -1
        self._table = adhesion_table()[1]

    def _buffers(self, n: int) -> None:
        if n != self._n:
            self._n = n
            self._acc = np.zeros((n, 3), dtype=np.float32)

    def nbytes(self) -> int:
        return 0 if self._n < 0 else self._acc.nbytes

    def apply(self, x, v, h, mass, rho, rho0, sigma, dt, neighbours, boxes, box_adhesion, col_adhesion,
              cset) -> None:
        """v += dt a_st (cohesion and curvature) and the walls' adhesion, in place.

        ``h`` (N,) float32 smoothing lengths (m); ``mass`` (N,) kg of each particle;
        ``rho`` (N,) its density (kg/m^3, the solver's last evaluation), ``rho0`` (N,) its liquid's rest
        density and ``sigma`` (N,) its liquid's surface tension (N/m), all float32.
        """
        n = x.shape[0]
        if n == 0 or not np.any(sigma > 0.0):
            return
        self._buffers(n)
        nl = neighbours
        half = nl.half > 0
        block = nl.half if half else BLOCK
        hc = 2.0 * h.astype(np.float64)
        # gamma = 8 sigma / (pi rho0^2 I_4(h_c)); I_4 scales as h_c^2 (C ~ h_c^-9, r^4 dr ~ h_c^5)
        gamma = (sigma * gamma_per_sigma(1.0, 1.0) / (rho0.astype(np.float64) ** 2 * hc * hc)).astype(np.float32)
        rho_safe = np.maximum(rho, np.float32(1e-6) * rho0)
        accelerations(x, h, mass, rho_safe, rho0, gamma, nl.start, nl.count, nl.local, nl.nbr, half,
                      block, self._acc)
        v += np.float32(dt) * self._acc
        if np.any(box_adhesion > 0.0) or np.any(col_adhesion > 0.0):
            adhere(x, h, gamma, rho0, boxes, box_adhesion, col_adhesion, self._table, cset, dt, v)
