"""PBF's per-substep kernels at the walls: the prediction step, which particles a wall can reach in a
substep, and the walls' free fraction and its gradient for those particles.

Used by :class:`engine.solvers.pbf.PBFSolver` (stages 1 and 3 of its module docstring). The free fraction
is the one of :func:`engine.collision.queries.free_fraction`: F = F_b F_c, the product of the box walls'
and the mesh colliders' fractions, and the wall's mass 1 - F enters the density constraint as rho0 (1 - F).
"""

from __future__ import annotations

import numpy as np
from numba import njit, prange

from ..collision.queries import collider_near, free_fraction
from ..collision.walls import clamp_into_boxes, near_walls
from .pbf_passes import FASTMATH


@njit(parallel=True, cache=True, fastmath=FASTMATH)
def predict(x, v, gx, gy, gz, dt, boxes, no_friction, bounce, margin,
            # outputs
            v_start):
    """v_start = v; v += g dt; x += v dt; then put x back into every box container it crossed
    (:func:`engine.collision.walls.clamp_into_boxes` with ``no_friction``, zeros: box friction acts in
    :func:`finish`). The velocity into the wall is reversed and scaled by the box's bounce, so the
    step starts with no particle outside.
    """
    for i in prange(x.shape[0]):
        for k in range(3):
            v_start[i, k] = v[i, k]
        v[i, 0] += gx * dt
        v[i, 1] += gy * dt
        v[i, 2] += gz * dt
        for k in range(3):
            x[i, k] += v[i, k] * dt
        clamp_into_boxes(x, v, i, boxes, margin, no_friction, bounce)


@njit(parallel=True, cache=True)
def boundary_flags(x, level, level_h, reach_factor, boxes, cset,
                   # outputs
                   wall_free, slot):
    """slot[i] = 1 where a box wall or a mesh collider lies within ``reach_factor * h_i`` of particle i,
    else 0; wall_free[i] = 1 (see :func:`number_flagged`).

    Computed once per substep: only these particles can feel a wall during the iterations (the reach
    covers the kernel support plus the most the iterations can move a particle), so only they pay
    for the wall queries of :func:`boundary_walls`.
    """
    colliders = cset.colliders.shape[0] > 0  # read once, outside the loop
    for i in prange(x.shape[0]):
        reach = reach_factor * level_h[level[i]]
        x0 = np.float64(x[i, 0])
        x1 = np.float64(x[i, 1])
        x2 = np.float64(x[i, 2])
        near = near_walls(x0, x1, x2, boxes, reach)
        if not near and colliders:
            near = collider_near(x0, x1, x2, reach, cset)
        slot[i] = 1 if near else 0
        wall_free[i] = np.float32(1.0)


@njit(cache=True)
def number_flagged(slot, bidx):
    """The flagged particles of :func:`boundary_flags` in order: ``bidx[:k]`` their indices and
    ``slot[i]`` the place of i in it (-1 for the others); returns k."""
    k = 0
    for i in range(slot.shape[0]):
        if slot[i]:
            bidx[k] = i
            slot[i] = k
            k += 1
        else:
            slot[i] = -1
    return k


@njit(parallel=True, cache=True)
def boundary_walls(x, bidx, level, level_h, boxes, table_q0, table_step, psi, dpsi, cset,
                   # outputs
                   wall_free, wall_grad):
    """Free fraction and its gradient for the particles near a wall (``bidx``, see :func:`boundary_flags`).

    wall_free[i] = F_b F_c, the product of the free fractions of box walls and mesh colliders (the
    wall mass is 1 - F_b F_c, added to the density as rho0 (1 - F)); ``wall_grad[s]`` (s the slot of
    i in ``bidx``) = grad (1 - F_b F_c) = F_c grad psi_boxes - F_b grad F_c, 1/m, for the push of
    :func:`correct` at the same positions.
    """
    colliders = cset.colliders.shape[0] > 0  # read once, outside the loop
    for s in prange(bidx.shape[0]):
        i = bidx[s]
        hi_ = level_h[level[i]]
        xi = np.float64(x[i, 0])
        yi = np.float64(x[i, 1])
        zi = np.float64(x[i, 2])
        free, _, g0, g1, g2 = free_fraction(xi, yi, zi, boxes, 2.0 * hi_, 1.0 / hi_, table_q0, table_step, psi,
                                            dpsi, cset, colliders)
        wall_free[i] = free
        wall_grad[s, 0] = g0
        wall_grad[s, 1] = g1
        wall_grad[s, 2] = g2
