"""The pair passes of the implicit viscosity (:mod:`engine.solvers.viscosity_weiler2018`) over a
neighbour list: the pair coefficients a_ij, the block-Jacobi preconditioner and right-hand side
(:func:`assemble`), the matrix-vector product of the conjugate gradients (:func:`multiply`) and the
single explicit step that replaces the solve for a short substep (:func:`explicit_pass`).

Each walks the list as :func:`engine.core.neighbour_list.list_range` says (a half list's pairs of one
block visited once for both particles, one thread per block), in single precision; the block sums
the conjugate gradients need are returned per block, in double precision, so that they do not depend
on the number of threads.
"""

from __future__ import annotations

import math

import numpy as np
from numba import njit, prange

from ..core.compile import FASTMATH
from ..core.kernels import cubic_dshape32 as _dw32
from ..core.neighbour_list import list_range
from .viscosity_walls import wall_block, wall_moments

#: eta^2 / h^2, the guard against r -> 0 in the Laplacian (Weiler et al. 2018, eq. 8).
ETA2 = 0.01


@njit(inline="always", cache=True)
def _mean_mu(mi, mj):
    """Harmonic mean of two viscosities (0 if either is 0)."""
    s = mi + mj
    return np.float32(2.0) * mi * mj / s if s > np.float32(0.0) else np.float32(0.0)


@njit(inline="always", cache=True)
def _pair_coefficient(r2, h_ij, unit, mu_ij, vi, vj):
    """a_ij / (dt 2 (d + 2) V_0^2 / m_0) of one pair at squared distance r2 (0 beyond the support)."""
    inv_h = np.float32(1.0) / h_ij
    q2 = r2 * inv_h * inv_h
    if q2 >= np.float32(4.0) or q2 == np.float32(0.0):
        return np.float32(0.0)
    q = math.sqrt(q2)
    # -W'(r) / r / (r^2 + 0.01 h^2) = -w'(q) / (pi h^7 q (q^2 + 0.01))
    ih2 = inv_h * inv_h
    return unit * mu_ij * vi * vj * (-_dw32(q)) / (q * (q2 + np.float32(ETA2))) * ih2 * ih2 * ih2 * inv_h


@njit(parallel=True, cache=True, fastmath=FASTMATH)
def assemble(x, v, h, mu, vol, mass, geo, start, count, local, nbr, half, block, unit,
             # outputs
             a, moments, wall, precond, rhs):
    """The pair coefficients a_ij (one per listed entry), the block-Jacobi preconditioner and the
    right-hand side b_i = M_i v*_i + (wall block) v_w.

    Relative units: ``vol`` V_i / V_0, ``mass`` m_i / m_0, ``unit`` = dt 2 (d + 2) V_0^2 / (pi m_0)
    (so that a_ij is the pair's block factor per m_0, and the matrix M + sum a x x^T + walls acts
    on velocities). ``precond[i, :6]`` receives the inverse of particle i's diagonal block
    D_i = M_i I + sum_j a_ij x_ij x_ij^T + wall_i (symmetric, xx, yy, zz, xy, xz, yz).
    """
    n = x.shape[0]
    for b in prange((n + block - 1) // block):
        i0 = b * block
        i1 = min(n, i0 + block)
        for i in range(i0, i1):
            for k in range(6):
                precond[i, k] = 0.0
            moments[i, 0] = 0.0
            moments[i, 1] = 0.0
        for i in range(i0, i1):
            p0, mid, end = list_range(start, count, local, half, i)
            xi = x[i, 0]
            yi = x[i, 1]
            zi = x[i, 2]
            hi_ = h[i]
            mui = mu[i]
            vi = vol[i]
            sn = moments[i, 0]
            st = moments[i, 1]
            d0 = np.float32(0.0)
            d1 = np.float32(0.0)
            d2 = np.float32(0.0)
            d3 = np.float32(0.0)
            d4 = np.float32(0.0)
            d5 = np.float32(0.0)
            for t in range(p0, end):
                j = nbr[t]
                e0 = xi - x[j, 0]
                e1 = yi - x[j, 1]
                e2 = zi - x[j, 2]
                r2 = e0 * e0 + e1 * e1 + e2 * e2
                c = _pair_coefficient(r2, np.float32(0.5) * (hi_ + h[j]), unit, _mean_mu(mui, mu[j]), vi, vol[j])
                a[t] = c
                k0 = c * e0 * e0
                k1 = c * e1 * e1
                k2 = c * e2 * e2
                k3 = c * e0 * e1
                k4 = c * e0 * e2
                k5 = c * e1 * e2
                d0 += k0
                d1 += k1
                d2 += k2
                d3 += k3
                d4 += k4
                d5 += k5
                sn, st = wall_moments(geo, i, c, e0, e1, e2, np.float32(1.0), sn, st)
                if t < mid:
                    moments[j, 0], moments[j, 1] = wall_moments(geo, j, c, e0, e1, e2, np.float32(-1.0),
                                                                 moments[j, 0], moments[j, 1])
                    precond[j, 0] += k0
                    precond[j, 1] += k1
                    precond[j, 2] += k2
                    precond[j, 3] += k3
                    precond[j, 4] += k4
                    precond[j, 5] += k5
            mi = mass[i]
            wall_block(geo, i, sn, st, wall)
            s0 = np.float64(precond[i, 0] + d0 + mi + wall[i, 0])
            s1 = np.float64(precond[i, 1] + d1 + mi + wall[i, 1])
            s2 = np.float64(precond[i, 2] + d2 + mi + wall[i, 2])
            s3 = np.float64(precond[i, 3] + d3 + wall[i, 3])
            s4 = np.float64(precond[i, 4] + d4 + wall[i, 4])
            s5 = np.float64(precond[i, 5] + d5 + wall[i, 5])
            # inverse of the symmetric block by its cofactors (positive definite: det > 0)
            c0 = s1 * s2 - s5 * s5
            c1 = s0 * s2 - s4 * s4
            c2 = s0 * s1 - s3 * s3
            c3 = s4 * s5 - s3 * s2
            c4 = s3 * s5 - s4 * s1
            c5 = s3 * s4 - s0 * s5
            inv_det = 1.0 / (s0 * c0 + s3 * c3 + s4 * c4)
            precond[i, 0] = c0 * inv_det
            precond[i, 1] = c1 * inv_det
            precond[i, 2] = c2 * inv_det
            precond[i, 3] = c3 * inv_det
            precond[i, 4] = c4 * inv_det
            precond[i, 5] = c5 * inv_det
            for k in range(3):
                rhs[i, k] = mi * v[i, k] + wall[i, 6 + k]


@njit(parallel=True, cache=True, fastmath=FASTMATH)
def multiply(x, p, mass, wall, a, start, count, local, nbr, half, block,
             # outputs
             y, block_dot):
    """y = A p (A = M + sum_ij a_ij x_ij x_ij^T (p_i - p_j) + walls) and ``block_dot[b]`` = sum of
    p_i . y_i over block b."""
    n = x.shape[0]
    for b in prange((n + block - 1) // block):
        i0 = b * block
        i1 = min(n, i0 + block)
        for i in range(i0, i1):
            y[i, 0] = 0.0
            y[i, 1] = 0.0
            y[i, 2] = 0.0
        dot = 0.0
        for i in range(i0, i1):
            p0, mid, end = list_range(start, count, local, half, i)
            xi = x[i, 0]
            yi = x[i, 1]
            zi = x[i, 2]
            pi0 = p[i, 0]
            pi1 = p[i, 1]
            pi2 = p[i, 2]
            s0 = np.float32(0.0)
            s1 = np.float32(0.0)
            s2 = np.float32(0.0)
            for t in range(p0, end):
                c = a[t]
                if c == np.float32(0.0):
                    continue
                j = nbr[t]
                e0 = xi - x[j, 0]
                e1 = yi - x[j, 1]
                e2 = zi - x[j, 2]
                f = c * (e0 * (pi0 - p[j, 0]) + e1 * (pi1 - p[j, 1]) + e2 * (pi2 - p[j, 2]))
                s0 += f * e0
                s1 += f * e1
                s2 += f * e2
                if t < mid:
                    y[j, 0] -= f * e0
                    y[j, 1] -= f * e1
                    y[j, 2] -= f * e2
            mi = mass[i]
            y0 = y[i, 0] + s0 + mi * pi0 + wall[i, 0] * pi0 + wall[i, 3] * pi1 + wall[i, 4] * pi2
            y1 = y[i, 1] + s1 + mi * pi1 + wall[i, 3] * pi0 + wall[i, 1] * pi1 + wall[i, 5] * pi2
            y2 = y[i, 2] + s2 + mi * pi2 + wall[i, 4] * pi0 + wall[i, 5] * pi1 + wall[i, 2] * pi2
            y[i, 0] = y0
            y[i, 1] = y1
            y[i, 2] = y2
            dot += np.float64(pi0) * y0 + np.float64(pi1) * y1 + np.float64(pi2) * y2
        block_dot[b] = dot


@njit(parallel=True, cache=True, fastmath=FASTMATH)
def explicit_pass(x, v, h, mu, vol, mass, geo, start, count, local, nbr, half, block, unit,
                  # outputs
                  acc, moments, wall, v_out):
    """One explicit step v_out = v + M^-1 (b - A v) = v - M^-1 [sum_j a_ij x_ij x_ij^T (v_i - v_j) +
    wall_i v_i - wall rhs_i], the pair coefficients computed on the fly (``acc`` (N, 3) scratch for
    the shares of the later particles of a block)."""
    n = x.shape[0]
    for b in prange((n + block - 1) // block):
        i0 = b * block
        i1 = min(n, i0 + block)
        for i in range(i0, i1):
            acc[i, 0] = 0.0
            acc[i, 1] = 0.0
            acc[i, 2] = 0.0
            moments[i, 0] = 0.0
            moments[i, 1] = 0.0
        for i in range(i0, i1):
            p0, mid, end = list_range(start, count, local, half, i)
            xi = x[i, 0]
            yi = x[i, 1]
            zi = x[i, 2]
            vi0 = v[i, 0]
            vi1 = v[i, 1]
            vi2 = v[i, 2]
            hi_ = h[i]
            mui = mu[i]
            voli = vol[i]
            sn = moments[i, 0]
            st = moments[i, 1]
            s0 = np.float32(0.0)
            s1 = np.float32(0.0)
            s2 = np.float32(0.0)
            for t in range(p0, end):
                j = nbr[t]
                e0 = xi - x[j, 0]
                e1 = yi - x[j, 1]
                e2 = zi - x[j, 2]
                r2 = e0 * e0 + e1 * e1 + e2 * e2
                c = _pair_coefficient(r2, np.float32(0.5) * (hi_ + h[j]), unit, _mean_mu(mui, mu[j]), voli, vol[j])
                f = c * (e0 * (vi0 - v[j, 0]) + e1 * (vi1 - v[j, 1]) + e2 * (vi2 - v[j, 2]))
                s0 += f * e0
                s1 += f * e1
                s2 += f * e2
                sn, st = wall_moments(geo, i, c, e0, e1, e2, np.float32(1.0), sn, st)
                if t < mid:
                    acc[j, 0] -= f * e0
                    acc[j, 1] -= f * e1
                    acc[j, 2] -= f * e2
                    moments[j, 0], moments[j, 1] = wall_moments(geo, j, c, e0, e1, e2, np.float32(-1.0),
                                                                 moments[j, 0], moments[j, 1])
            wall_block(geo, i, sn, st, wall)
            w0 = wall[i, 0] * vi0 + wall[i, 3] * vi1 + wall[i, 4] * vi2 - wall[i, 6]
            w1 = wall[i, 3] * vi0 + wall[i, 1] * vi1 + wall[i, 5] * vi2 - wall[i, 7]
            w2 = wall[i, 4] * vi0 + wall[i, 5] * vi1 + wall[i, 2] * vi2 - wall[i, 8]
            inv_m = np.float32(1.0) / mass[i]
            v_out[i, 0] = vi0 - inv_m * (acc[i, 0] + s0 + w0)
            v_out[i, 1] = vi1 - inv_m * (acc[i, 1] + s1 + w1)
            v_out[i, 2] = vi2 - inv_m * (acc[i, 2] + s2 + w2)
