"""The no-slip walls of the implicit viscosity (:mod:`engine.solvers.viscosity_weiler2018`): each
particle's closest no-slip wall and the wall block its viscous row gets.

For a particle at distance d from its closest no-slip wall (unit normal n into the liquid, wall
velocity v_w) and the field v = v_w + g (n . (x - x_wall)), the liquid's own pairs give
sum_j a_ij e_ij (e_ij . g) (n . e_ij) = S_i g, e_ij = x_j - x_i, which is zero in the bulk and not next
to the wall, where the particles beyond it are missing; the wall supplies the opposite,

    F_wall = -S_i (v_i - v_w) / d,   S_i = sum_j a_ij (n . e_ij) e_ij e_ij^T,

used as b_n n n^T + b_t (I - n n^T) with its normal and tangential moments, each clamped at zero (the
derivation and its sources are in the viscosity module's docstring). The moments are summed in the
pair passes of :mod:`engine.solvers.viscosity_pairs` (:func:`wall_moments`), the block made from them
once a particle's sums are complete (:func:`wall_block`).
"""

from __future__ import annotations

import numpy as np
from numba import njit, prange

from ..collision.queries import collider_near, collider_phi, collider_velocity
from ..collision.walls import near_box
from ..core.kernels import SUPPORT

#: Closest distance to a wall, in h, the wall term divides by (nearer particles take this one):
#: -S (v - v_w) / d grows without bound as d -> 0.
GHOST_NEAREST = 0.25


@njit(inline="always", cache=True)
def _closer(best, d, n0, n1, n2, u0, u1, u2, geo, i):
    """Keep the wall at distance d (normal n into the liquid, velocity u) if it is the closest so far."""
    if d < best:
        geo[i, 0] = n0
        geo[i, 1] = n1
        geo[i, 2] = n2
        geo[i, 3] = d
        geo[i, 4] = u0
        geo[i, 5] = u1
        geo[i, 6] = u2
        return d
    return best


@njit(parallel=True, cache=True)
def wall_geometry(x, h, boxes, box_no_slip, col_no_slip, cset,
                  # outputs
                  geo):
    """The closest no-slip wall within the kernel support 2 h_i of each particle: ``geo[i]`` = (n, d,
    v_w), its unit normal into the liquid, distance (m) and velocity (m/s); d = 0 where there is none
    (box walls stand still; a collider's surface moves with it)."""
    n_col = cset.colliders.shape[0]
    for i in prange(x.shape[0]):
        for k in range(7):
            geo[i, k] = 0.0
        support = SUPPORT * h[i]
        best = support
        x0 = np.float64(x[i, 0])
        x1 = np.float64(x[i, 1])
        x2 = np.float64(x[i, 2])
        for b in range(boxes.shape[0]):
            if box_no_slip[b] == 0.0 or not near_box(x0, x1, x2, boxes[b, 0], boxes[b, 1], support):
                continue
            best = _closer(best, x0 - boxes[b, 0, 0], 1.0, 0.0, 0.0, 0.0, 0.0, 0.0, geo, i)
            best = _closer(best, x1 - boxes[b, 0, 1], 0.0, 1.0, 0.0, 0.0, 0.0, 0.0, geo, i)
            best = _closer(best, x2 - boxes[b, 0, 2], 0.0, 0.0, 1.0, 0.0, 0.0, 0.0, geo, i)
            best = _closer(best, boxes[b, 1, 0] - x0, -1.0, 0.0, 0.0, 0.0, 0.0, 0.0, geo, i)
            best = _closer(best, boxes[b, 1, 1] - x1, 0.0, -1.0, 0.0, 0.0, 0.0, 0.0, geo, i)
            best = _closer(best, boxes[b, 1, 2] - x2, 0.0, 0.0, -1.0, 0.0, 0.0, 0.0, geo, i)
        if n_col > 0 and collider_near(x0, x1, x2, support, cset):
            for c in range(n_col):
                if col_no_slip[c] == 0.0:
                    continue
                phi, n0, n1, n2, tri, r0, r1, r2 = collider_phi(x0, x1, x2, c, cset)
                if phi >= best or (n0 == 0.0 and n1 == 0.0 and n2 == 0.0):
                    continue
                u0, u1, u2 = collider_velocity(c, tri, r0, r1, r2, cset)
                best = _closer(best, phi, n0, n1, n2, u0, u1, u2, geo, i)
        if best < support:
            geo[i, 3] = max(best, GHOST_NEAREST * h[i])  # d; 0 marks no wall


@njit(inline="always", cache=True)
def wall_moments(geo, i, a, e0, e1, e2, sign, sn, st):
    """Add pair (a, e = x_i - x_j) to particle i's wall moments: with u = n . (x_j - x_i) = -sign n . e,
    sn += a u^3 and st += a u (|e|^2 - u^2) / 2 (zero without a wall)."""
    if geo[i, 3] == np.float32(0.0):
        return sn, st
    u = -sign * (geo[i, 0] * e0 + geo[i, 1] * e1 + geo[i, 2] * e2)
    e2_ = e0 * e0 + e1 * e1 + e2 * e2
    return sn + a * u * u * u, st + np.float32(0.5) * a * u * (e2_ - u * u)


@njit(inline="always", cache=True)
def wall_block(geo, i, sn, st, wall):
    """Particle i's wall block B = (b_n n n^T + b_t (I - n n^T)), b = max(moment, 0) / d, into
    ``wall[i, :6]`` and B v_w into ``wall[i, 6:9]`` (zeros without a wall)."""
    d = geo[i, 3]
    if d == np.float32(0.0):
        for k in range(9):
            wall[i, k] = 0.0
        return
    bn = max(sn, np.float32(0.0)) / d
    bt = max(st, np.float32(0.0)) / d
    n0 = geo[i, 0]
    n1 = geo[i, 1]
    n2 = geo[i, 2]
    dd = bn - bt
    wall[i, 0] = bt + dd * n0 * n0
    wall[i, 1] = bt + dd * n1 * n1
    wall[i, 2] = bt + dd * n2 * n2
    wall[i, 3] = dd * n0 * n1
    wall[i, 4] = dd * n0 * n2
    wall[i, 5] = dd * n1 * n2
    u0 = geo[i, 4]
    u1 = geo[i, 5]
    u2 = geo[i, 6]
    wall[i, 6] = wall[i, 0] * u0 + wall[i, 3] * u1 + wall[i, 4] * u2
    wall[i, 7] = wall[i, 3] * u0 + wall[i, 1] * u1 + wall[i, 5] * u2
    wall[i, 8] = wall[i, 4] * u0 + wall[i, 5] * u1 + wall[i, 2] * u2
