"""The weakly-compressible SPH core shared by :mod:`engine.solvers.wcsph` and :mod:`engine.solvers.hybrid`.

Suárez & Susín 2006, "Mesh-particle model for fluid animation", §3:

* density by kernel summation, rho_i = sum_j m W_ij, plus the kernel mass of the walls (below);
* Tait equation of state, eq. 6: p_i = P0 ((rho_i / rho0)^7 - 1), P0 = rho0 c0^2 / 7, clamped at 0
  (no tensile instability at the free surface), and its inverse rho = rho0 (1 + p / P0)^(1/7);
* symmetric pressure force, eq. 5: a_i = -sum_j m (p_i / rho_i^2 + p_j / rho_j^2) grad_i W_ij, with
  Monaghan's (1992) artificial viscosity, Morris, Fox & Zhu's (1997) laminar viscosity and gravity.

Walls (box containers and mesh colliders) are continuous solid: a wall at distance d adds the kernel
mass rho0 psi(d) of the solid half-space to the density (:func:`engine.core.kernels.half_space_tables`),
combined over walls as rho0 (1 - F_boxes F_colliders), and pushes with the pressure of imaginary wall
particles carrying p_w + rho g . (x_j - x_i) (Adami, Hu & Adams 2012, "A generalized wall boundary
condition for smoothed particle hydrodynamics", eq. 27): -(p_i + p_w) / rho_i^2 rho0 grad psi - G
(:func:`engine.collision.walls.wall_hydrostatic`).

The kernels run over a subset of the particle rows: every row for WCSPH (``all_rows``), the SPH and
MIXA rows for the hybrid (``rows``), whose other rows carry the grid's p and rho into the sums.

The pair loops run in single precision with fastmath (:data:`FASTMATH`): positions and velocities
are float32, and densities, accelerations and the wall terms are float64 where sums meet walls and
gravity. Only particles with a wall or collider within the kernel support (``near``, found by
:func:`density_pressure`) query the walls and take the Shepard average of the pressure the wall
terms need.

Neighbour lists are Verlet lists reaching :data:`SKIN` smoothing lengths past the kernel support,
rebuilt once a particle has moved half the skin (:func:`max_displacement2`).
"""

from __future__ import annotations

import math

import numpy as np
from numba import njit, prange

from ..core.compile import FASTMATH
from ..core.kernels import cubic_dshape32 as _dw32, cubic_shape32 as _w32
from ..collision.queries import free_fraction
from ..collision.walls import near_walls, wall_gradient, wall_hydrostatic, wall_mass

#: Exponent of the Tait equation of state (eq. 6).
GAMMA = 7.0
#: Verlet skin of the neighbour lists, in smoothing lengths: a list holds pairs within 2h + SKIN h and
#: lasts until a particle has moved SKIN h / 2 (a few substeps at liquid speeds) for
#: (1 + SKIN / 2)^3 = 1.24 times the pairs of an exact list.
SKIN = 0.15
#: particles per block of :func:`max_displacement2` (one maximum per block)
DISPLACEMENT_BLOCK = 4096


@njit(inline="always", cache=True)
def pair_offset(x, j, xi, yi, zi):
    """(x_i - x_j, |x_i - x_j|^2) for the point (xi, yi, zi) and row j of ``x``, in the points' precision."""
    dx = xi - x[j, 0]
    dy = yi - x[j, 1]
    dz = zi - x[j, 2]
    return dx, dy, dz, dx * dx + dy * dy + dz * dz


@njit(inline="always", cache=True)
def pair_constants(h, mass):
    """Single-precision constants of the pair loops: (2h)^2, 1 / h, eta^2 = 0.01 h^2 (the singularity
    guard of the viscous and diffusive terms) and cg = m / (pi h^4), so that m dW/dr = cg dw/dq."""
    support = 2.0 * h
    return (np.float32(support * support), np.float32(1.0 / h), np.float32(0.01 * h * h),
            np.float32(mass / (math.pi * h * h * h * h)))


@njit(inline="always", cache=True)
def tait(r, rho0, p0):
    """Tait pressure (eq. 6), Pa, clamped at 0: no tensile instability at the free surface."""
    ratio = r / rho0
    r2_ = ratio * ratio
    pi_ = p0 * (r2_ * r2_ * r2_ * ratio - 1.0)  # (rho / rho0)^7
    if pi_ < 0.0:
        pi_ = 0.0
    return pi_


@njit(inline="always", cache=True)
def tait_density_ratio(x):
    """rho / rho0 = (1 + x)^(1/7) for x = p / P0 >= 0 (eq. 6 inverted). Below x = 0.05 (a resting
    column at the automatic sound speed reaches x = 0.035 at its floor) a fifth-order series, within
    1e-8 of the power, which costs a few times more and runs for every grid particle of the hybrid
    each substep; above it, the power itself."""
    if x < 0.05:
        return 1.0 + x * (1.0 / 7.0 + x * (-3.0 / 49.0 + x * (13.0 / 343.0 + x * (-65.0 / 2401.0
                                                                                + x * (351.0 / 16807.0)))))
    return (1.0 + x) ** (1.0 / GAMMA)


@njit(inline="always", cache=True)
def walls_at(x0, x1, x2, boxes, support, rho0, table_d0, table_step, psi, dpsi, cset, n_col):
    """(near, rho0 psi_walls, grad psi_walls) at a point: box walls and mesh colliders.

    psi_walls = 1 - F_boxes F_colliders. ``near``: a box wall or a collider lies within ``support``.
    The gradient, F_c grad psi_boxes - F_b grad F_c, is only computed when there are colliders
    (:func:`accelerations` finds the boxes' alone itself); it is (0, 0, 0) otherwise.
    """
    flag = near_walls(x0, x1, x2, boxes, support)
    wall = 0.0
    w0 = 0.0
    w1 = 0.0
    w2 = 0.0
    if n_col > 0:
        free, free_col, w0, w1, w2 = free_fraction(x0, x1, x2, boxes, support, 1.0, table_d0, table_step, psi, dpsi,
                                                   cset, True)
        flag = flag or free_col < 1.0
        wall = rho0 * (1.0 - free)
    elif flag:  # box walls alone: their mass, not its gradient (accelerations finds that itself)
        wall = rho0 * wall_mass(x0, x1, x2, boxes, support, 1.0, table_d0, table_step, psi)
    return flag, wall, w0, w1, w2


@njit(inline="always", cache=True)
def store_density(i, r, x0, x1, x2, boxes, support, rho0, p0, table_d0, table_step, psi, dpsi, cset, n_col,
                  # outputs
                  rho, p, pr, near, wall_grad):
    """Row i gets the density r (the liquid's part, kg/m^3) plus the walls' part, the Tait pressure
    and pr = p / rho^2; ``near[i]`` and, with colliders, ``wall_grad[i]`` from :func:`walls_at`."""
    flag, wall, w0, w1, w2 = walls_at(x0, x1, x2, boxes, support, rho0, table_d0, table_step, psi, dpsi, cset, n_col)
    if n_col > 0:
        wall_grad[i, 0] = w0
        wall_grad[i, 1] = w1
        wall_grad[i, 2] = w2
    r += wall
    near[i] = flag
    rho[i] = r
    pi_ = tait(r, rho0, p0)
    p[i] = pi_
    pr[i] = pi_ / (r * r)


@njit(parallel=True, cache=True, fastmath=FASTMATH)
def density_pressure(x, rows, all_rows, nbr_start, nbr_count, nbr, h, mass, rho0, p0,
                     boxes, table_d0, table_step, psi, dpsi, cset,
                     # outputs
                     rho, p, pr, near, wall_grad):
    """rho_i = sum_j m W_ij + rho0 psi_walls; p from Tait (eq. 6), clamped at 0; pr = p / rho^2.

    Over every row with ``all_rows``, else over ``rows`` (the others are left to the caller).
    psi_walls = 1 - F_boxes F_colliders: box walls and mesh colliders (:mod:`engine.collision.world`).
    ``near[i]`` = 1 where a box wall or a collider lies within the kernel support (only those
    particles pay for wall queries, here and in :func:`accelerations`). With mesh colliders,
    ``wall_grad[i]`` receives grad psi_walls = F_c grad psi_boxes - F_b grad F_c for
    :func:`accelerations` (one collider query per evaluation, not two); without, it may be (0, 3).

    The pair loop runs in single precision (positions are float32); the sum is scaled once per particle.
    """
    support = 2.0 * h
    r2max, inv_h, _, _ = pair_constants(h, mass)
    unit = mass / (math.pi * h * h * h)  # m W = unit * w(q)
    n_col = cset.colliders.shape[0]
    n_rows = x.shape[0] if all_rows else rows.shape[0]
    for t_row in prange(n_rows):  # an equal share of the rows per thread
        i = np.int64(t_row) if all_rows else np.int64(rows[t_row])  # one integer type (uint64 and int32 unify to float)
        xi = x[i, 0]
        yi = x[i, 1]
        zi = x[i, 2]
        s = np.float32(1.0)  # w(0): the particle itself
        for t in range(nbr_start[i], nbr_start[i] + nbr_count[i]):
            j = nbr[t]
            dx, dy, dz, r2 = pair_offset(x, j, xi, yi, zi)
            if r2 < r2max:  # the list reaches a skin further
                s += _w32(math.sqrt(r2) * inv_h)
        store_density(i, unit * s, np.float64(xi), np.float64(yi), np.float64(zi), boxes, support, rho0, p0,
                      table_d0, table_step, psi, dpsi, cset, n_col, rho, p, pr, near, wall_grad)


@njit(parallel=True, cache=True, fastmath=FASTMATH)
def accelerations(x, v, rows, all_rows, rho, p, pr, near, nbr_start, nbr_count, nbr, h, mass, rho0, c0, alpha, nu,
                  gx, gy, gz, boxes, table_d0, table_step, psi, dpsi, tau_n, tau_t, n_colliders, wall_grad,
                  # outputs
                  a):
    """Pressure (eq. 5), artificial and laminar viscosity, gravity and wall pressure, over every row
    with ``all_rows``, else over ``rows`` (their neighbours may be any row: the hybrid's MIXB
    particles enter with the p, rho and half-step velocity they carry).

    ``pr`` is p / rho^2 from :func:`density_pressure` (one division per particle, not per pair).
    The pair terms are evaluated in single precision: positions and velocities are float32 and a
    resting column's pair forces cancel to gravity with about 20 terms of 20 g each, so the
    rounding (1e-7 relative) stays far below the validation tolerances. Particles with ``near[i]``
    = 0 skip the Shepard average of the pressure, which only the wall terms use. With mesh colliders
    (``n_colliders`` > 0) the wall gradient comes from ``wall_grad``; without, from the boxes here.
    """
    support = 2.0 * h
    r2max, inv_h, eta2, cg = pair_constants(h, mass)  # m dW/dr = cg * dw/dq
    # Monaghan 1992: Pi_ij = -alpha c0 mu_ij / rho_bar, mu_ij = h v_ij.r_ij / (r^2 + eta^2), rho_bar = (rho_i + rho_j)
    # / 2
    av = np.float32(2.0 * alpha * c0 * h)
    nu32 = np.float32(nu)
    zero = np.float32(0.0)
    gnorm = math.sqrt(gx * gx + gy * gy + gz * gz)
    inv_g2h = 1.0 / (gnorm * support) if gnorm > 0.0 else 0.0
    n_rows = x.shape[0] if all_rows else rows.shape[0]
    # the hybrid passes only its SPH and MIXA rows, so that the threads get an equal share of them
    # (its MIXB rows lie together in Morton order; skipping them inside the loop left one thread idle)
    for t_row in prange(n_rows):
        i = np.int64(t_row) if all_rows else np.int64(rows[t_row])  # one integer type (uint64 and int32 unify to float)
        xi = x[i, 0]
        yi = x[i, 1]
        zi = x[i, 2]
        vxi = v[i, 0]
        vyi = v[i, 1]
        vzi = v[i, 2]
        rhoi = rho[i]
        inv_rhoi = np.float32(1.0) / rhoi
        pi_term = pr[i]
        wall_i = near[i]
        ax = zero
        ay = zero
        az = zero
        sw = np.float32(1.0)   # Shepard average of the pressure around i (i included, w(0) = 1)
        spw = p[i]
        for t in range(nbr_start[i], nbr_start[i] + nbr_count[i]):
            j = nbr[t]
            dx, dy, dz, r2 = pair_offset(x, j, xi, yi, zi)
            if r2 >= r2max or r2 == zero:
                continue
            r = math.sqrt(r2)
            q = r * inv_h
            g = cg * _dw32(q) / r  # m grad_i W = g * (x_i - x_j)
            if wall_i:
                w = _w32(q)
                sw += w
                spw += w * p[j]
            dvx = vxi - v[j, 0]
            dvy = vyi - v[j, 1]
            dvz = vzi - v[j, 2]
            rhoj = rho[j]
            coef = pi_term + pr[j]
            vr = dvx * dx + dvy * dy + dvz * dz
            inv = np.float32(1.0) / (r2 + eta2)
            if vr < zero:
                coef -= av * vr * inv / (rhoi + rhoj)
            # Morris 1997: m_j (mu_i + mu_j) / (rho_i rho_j) (r . grad W) / (r^2 + eta^2) v_ij
            visc = nu32 * (inv_rhoi + np.float32(1.0) / rhoj) * g * r2 * inv
            f = -coef * g
            ax += f * dx + visc * dvx
            ay += f * dy + visc * dvy
            az += f * dz + visc * dvz
        ax64 = np.float64(ax)
        ay64 = np.float64(ay)
        az64 = np.float64(az)
        if wall_i:
            # Walls as imaginary particles with the pressure p_w + rho_i g . (x_j - x_i) (Adami, Hu &
            # Adams 2012, eq. 27), p_w the Shepard average of the liquid's pressure around i:
            #   -sum_j m (p_i / rho_i^2 + p_j / rho_j^2) grad W_ij = -(p_i + p_w) / rho_i^2 rho0 grad psi - G.
            # With p_i alone (one-sided) the liquid's own pair forces pull a particle into the wall by
            # about p_i / rho_i grad psi (sticky walls, a doubled pressure on the first layer); with p_w
            # = p_i itself (no average) the force feeds back on the particle's own density and a resting
            # column boils. G (walls.wall_hydrostatic) restores the part of the pressure gradient the
            # truncated kernel misses next to a wall; without it the liquid along side walls sinks and
            # the pressure of a narrow column is too high. Within 2h of the free surface (p_w < rho |g| 2h)
            # some imaginary particles would carry a negative pressure, so G fades out there.
            x0 = np.float64(xi)
            x1 = np.float64(yi)
            x2 = np.float64(zi)
            r64 = np.float64(rhoi)
            p_w = np.float64(spw) / np.float64(sw)
            fade = min(p_w * inv_g2h / r64, 1.0)
            G0, G1, G2 = wall_hydrostatic(x0, x1, x2, boxes, support, table_d0, table_step, tau_n, tau_t, gx, gy, gz)
            if n_colliders > 0:
                w0 = wall_grad[i, 0]      # boxes and mesh colliders, from density_pressure()
                w1 = wall_grad[i, 1]
                w2 = wall_grad[i, 2]
            else:
                w0, w1, w2 = wall_gradient(x0, x1, x2, boxes, support, 1.0, table_d0, table_step, psi, dpsi)
            wall = -(np.float64(pi_term) + p_w / (r64 * r64)) * rho0
            ax64 += wall * w0 - fade * G0
            ay64 += wall * w1 - fade * G1
            az64 += wall * w2 - fade * G2
        a[i, 0] = ax64 + gx
        a[i, 1] = ay64 + gy
        a[i, 2] = az64 + gz


@njit(parallel=True, cache=True)
def max_displacement2(x, x_ref):
    """Largest squared distance of a particle from where it was at the last neighbour-list build, m^2
    (0 for no particles): a fixed partition into blocks of :data:`DISPLACEMENT_BLOCK`, so the result
    does not depend on the number of threads."""
    n = x.shape[0]
    chunks = (n + DISPLACEMENT_BLOCK - 1) // DISPLACEMENT_BLOCK
    part = np.zeros(max(chunks, 1), dtype=np.float64)
    for b in prange(chunks):
        m = 0.0
        for i in range(b * DISPLACEMENT_BLOCK, min(n, (b + 1) * DISPLACEMENT_BLOCK)):
            dx = x[i, 0] - x_ref[i, 0]
            dy = x[i, 1] - x_ref[i, 1]
            dz = x[i, 2] - x_ref[i, 2]
            m = max(m, dx * dx + dy * dy + dz * dz)
        part[b] = m
    return part.max()
