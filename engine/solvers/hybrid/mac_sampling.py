"""Sampling the MAC grid (:mod:`engine.solvers.hybrid.mac`) at particle positions: trilinear
interpolation of the staggered face velocities and the cell-centred pressure (Suárez & Susín 2006,
"Mesh-Particle Model for Fluid Animation", §4: the SPH particles of the transition layers read the
grid's velocity and pressure where they are).
"""

from __future__ import annotations

import numpy as np
from numba import njit, prange

from .mac import FASTMATH

@njit(inline="always", cache=True)
def _axis(f, n):
    """Index pair and weight along one axis of a trilinear sample (fractional index f, n samples,
    clamped to the array).
    The indices are unsigned, so that the arrays they index skip numba's wrap-around test for
    negative indices (a sixth of a pressure sample's time); use them only as indices."""
    f = min(max(f, 0.0), n - 1.0)
    i = min(int(f), n - 2) if n > 1 else 0
    return np.uint64(i), np.uint64(min(i + 1, n - 1)), f - i


@njit(inline="always", cache=True)
def _lerp3(a, i, i1, tx, j, j1, ty, k, k1, tz):
    """Trilinear blend of the 8 samples of ``a`` around (i, j, k) with weights (tx, ty, tz)."""
    c00 = a[i, j, k] * (1.0 - tx) + a[i1, j, k] * tx
    c10 = a[i, j1, k] * (1.0 - tx) + a[i1, j1, k] * tx
    c01 = a[i, j, k1] * (1.0 - tx) + a[i1, j, k1] * tx
    c11 = a[i, j1, k1] * (1.0 - tx) + a[i1, j1, k1] * tx
    c0 = c00 * (1.0 - ty) + c10 * ty
    c1 = c01 * (1.0 - ty) + c11 * ty
    return c0 * (1.0 - tz) + c1 * tz


@njit(inline="always", cache=True)
def _trilinear(a, fx, fy, fz):
    """Trilinear interpolation of array ``a`` at fractional index (fx, fy, fz), clamped to the array."""
    n0, n1, n2 = a.shape
    i, i1, tx = _axis(fx, n0)
    j, j1, ty = _axis(fy, n1)
    k, k1, tz = _axis(fz, n2)
    return _lerp3(a, i, i1, tx, j, j1, ty, k, k1, tz)


@njit(inline="always", cache=True)
def velocity_at(u, v, w, ox, oy, oz, inv, px, py, pz):
    """Velocity of the staggered field at a point (each component interpolated from its own faces,
    as :func:`_trilinear` would; the index pairs along each axis, on the faces and between them,
    are found once for the three components)."""
    fx = (px - ox) * inv
    fy = (py - oy) * inv
    fz = (pz - oz) * inv
    ni = v.shape[0]
    nj = u.shape[1]
    nk = u.shape[2]
    xf, xf1, tfx = _axis(fx, ni + 1)
    xc, xc1, tcx = _axis(fx - 0.5, ni)
    yf, yf1, tfy = _axis(fy, nj + 1)
    yc, yc1, tcy = _axis(fy - 0.5, nj)
    zf, zf1, tfz = _axis(fz, nk + 1)
    zc, zc1, tcz = _axis(fz - 0.5, nk)
    return (_lerp3(u, xf, xf1, tfx, yc, yc1, tcy, zc, zc1, tcz),
            _lerp3(v, xc, xc1, tcx, yf, yf1, tfy, zc, zc1, tcz),
            _lerp3(w, xc, xc1, tcx, yc, yc1, tcy, zf, zf1, tfz))


@njit(inline="always", cache=True)
def velocity_pair_at(ua, va, wa, ub, vb, wb, ox, oy, oz, inv, px, py, pz):
    """:func:`velocity_at` of two staggered fields of the same shape at one point: (u_a, v_a, w_a,
    u_b, v_b, w_b). Both calls inline into the caller, which computes their common axis weights once."""
    a0, a1, a2 = velocity_at(ua, va, wa, ox, oy, oz, inv, px, py, pz)
    b0, b1, b2 = velocity_at(ub, vb, wb, ox, oy, oz, inv, px, py, pz)
    return a0, a1, a2, b0, b1, b2


@njit(inline="always", cache=True)
def pressure_at(p, ox, oy, oz, inv, px, py, pz):
    """Kinematic pressure at a point, trilinear between cell centres, m^2/s^2."""
    return _trilinear(p, (px - ox) * inv - 0.5, (py - oy) * inv - 0.5, (pz - oz) * inv - 0.5)


@njit(parallel=True, cache=True, fastmath=FASTMATH)
def sample_velocity(u, v, w, ox, oy, oz, inv, x,
                    # outputs
                    out):
    """Velocity of the grid at every point of ``x`` (N, 3), m/s."""
    for n in prange(x.shape[0]):
        a, b, c = velocity_at(u, v, w, ox, oy, oz, inv, x[n, 0], x[n, 1], x[n, 2])
        out[n, 0] = a
        out[n, 1] = b
        out[n, 2] = c
