"""The liquid's push on rigid bodies: equal and opposite to what each body does to the liquid.

A rigid body meets the liquid as a collider (:mod:`engine.collision`): its distance grid adds wall mass
to the particles' density, the density constraint (PBF) or pressure (WCSPH) pushes particles off its
surface, and the contact pass moves particles out of it and takes their velocity relative to its
surface. Each of these changes a particle's momentum by an impulse ``m_i dv_i``; the body receives
``-m_i dv_i`` at the particle's position, so the momentum of liquid and bodies together is exchanged
and never created (the two-way coupling of Akinci, Ihmsen, Akinci, Solenthaler & Teschner 2012,
"Versatile Rigid-Fluid Coupling for Incompressible SPH", eq. 13-14: the force of each boundary sample
on a fluid particle, reversed, summed into the body's force and torque; here the boundary is the
body's distance grid, not sampled particles, and each impulse is the one the solver actually applied).

Two ways the impulses are found:

* **wall push** (PBF, :func:`wall_reaction`): a particle near walls is moved by
  ``dx_i = lambda_i grad (1 - F_i)`` in each constraint iteration (Alduán et al. 2015's collision
  constraint; :func:`engine.solvers.pbf_passes.correct`), with ``F_i`` the product of the free
  fractions ``f = 1 - psi(phi)`` of every wall. Body c's share of that gradient is
  ``F_i / f_c  psi'(phi_c) n_c`` (the product rule), and the particle's velocity changes by ``dx / dt``:
  the impulse is ``m_i dx_i^c / dt``;
* **contact** (every solver, :func:`project_with_bodies`): the contact pass of the bodies runs apart from
  that of the other colliders, and each particle's velocity change is measured and charged to the body
  nearest to it (a particle touches two bodies at once only where they nearly touch each other).

The moment is summed about the world origin (``x_i x J_i``) and turned into one about each body's centre
of mass by the rigid-body world (:meth:`engine.rigid.world.RigidWorld.receive`).

The PBF correction's robustness clamp (a move longer than ``MAX_MOVE h`` is shortened) and its box
containers' clamp act after the wall push; they are not charged to the body (they act on particles
whose neighbourhood collapsed, or are the box container's own reaction).
"""

from __future__ import annotations

import numpy as np
from numba import njit, prange

from ..collision.queries import _near, collider_phi, project
from ..collision.walls import table

#: Blocks of particles summed apart (then added), so that the sums do not depend on the thread count.
CHUNKS = 64


class LiquidReaction:
    """Where a substep's solver adds the liquid's impulses on the bodies.

    Attributes
    ----------
    impulse : ndarray (B, 3), float64, N s
    moment : ndarray (B, 3), float64, N m s, about the world origin
    """

    def __init__(self, n_bodies: int):
        self.impulse = np.zeros((n_bodies, 3))
        self.moment = np.zeros((n_bodies, 3))
        self._chunks = np.zeros((CHUNKS, n_bodies, 6))

    def add_chunks(self) -> None:
        """Add the per-block sums of the last kernel and clear them."""
        total = self._chunks.sum(axis=0)
        self.impulse += total[:, :3]
        self.moment += total[:, 3:]
        self._chunks[:] = 0.0

    def take(self) -> tuple[np.ndarray, np.ndarray]:
        """The impulse and moment gathered since the last call; both are cleared."""
        out = self.impulse.copy(), self.moment.copy()
        self.impulse[:] = 0.0
        self.moment[:] = 0.0
        return out


@njit(inline="always", cache=True)
def _charge(out, ch, b, px, py, pz, j0, j1, j2):
    """Body b receives the impulse -J at p (the particle received J)."""
    out[ch, b, 0] -= j0
    out[ch, b, 1] -= j1
    out[ch, b, 2] -= j2
    out[ch, b, 3] -= py * j2 - pz * j1
    out[ch, b, 4] -= pz * j0 - px * j2
    out[ch, b, 5] -= px * j1 - py * j0


@njit(parallel=True, cache=True)
def wall_reaction(xq, bidx, level, level_h, level_mass, wall_free, wall_factor, inv_dt, table_q0, table_step, psi,
                  dpsi, bodies,
                  # outputs
                  out):
    """The bodies' share of the wall push of one PBF correction (see the module docstring), from the
    multipliers ``xq[:, 3]`` and free fractions ``wall_free`` of the constraint pass at the positions
    ``xq[:, :3]``; ``bidx`` the particles near a wall, ``bodies`` the bodies' collider set. Adds into
    ``out`` (chunks, B, 6): impulse and moment (about the origin)."""
    n = bidx.shape[0]
    nch = out.shape[0]
    nb = bodies.colliders.shape[0]
    for ch in prange(nch):
        for s in range(ch * n // nch, (ch + 1) * n // nch):
            i = bidx[s]
            lam = np.float64(xq[i, 3])
            if lam >= 0.0:
                continue
            h = level_h[level[i]]
            px = np.float64(xq[i, 0])
            py = np.float64(xq[i, 1])
            pz = np.float64(xq[i, 2])
            m = level_mass[level[i]]
            for c in range(nb):
                if not _near(px, py, pz, bodies.colliders[c]):
                    continue
                phi, n0, n1, n2, tri, r0, r1, r2 = collider_phi(px, py, pz, c, bodies)
                if phi >= 2.0 * h:
                    continue
                t = phi / h
                f = 1.0 - table(psi, table_q0, table_step, t)
                if f <= 1e-6:
                    continue
                # dx = wall_factor lambda F / f psi'(phi) n; the particle's impulse m dx / dt
                k = wall_factor * lam * np.float64(wall_free[i]) / f * table(dpsi, table_q0, table_step, t) / h
                k *= m * inv_dt
                _charge(out, ch, c, px, py, pz, k * n0, k * n1, k * n2)


@njit(parallel=True, cache=True)
def contact_reaction(x, v_before, v, level, level_mass, bodies,
                     # outputs
                     out):
    """Charge each particle's velocity change ``v - v_before`` (times its mass) to the body nearest to it
    (the smallest distance among the bodies whose box holds it); adds into ``out`` (chunks, B, 6)."""
    n = x.shape[0]
    nch = out.shape[0]
    nb = bodies.colliders.shape[0]
    for ch in prange(nch):
        for i in range(ch * n // nch, (ch + 1) * n // nch):
            d0 = np.float64(v[i, 0]) - np.float64(v_before[i, 0])
            d1 = np.float64(v[i, 1]) - np.float64(v_before[i, 1])
            d2 = np.float64(v[i, 2]) - np.float64(v_before[i, 2])
            if d0 == 0.0 and d1 == 0.0 and d2 == 0.0:
                continue
            px = np.float64(x[i, 0])
            py = np.float64(x[i, 1])
            pz = np.float64(x[i, 2])
            best = 1e300
            cb = -1
            for c in range(nb):
                if not _near(px, py, pz, bodies.colliders[c]):
                    continue
                phi = collider_phi(px, py, pz, c, bodies)[0]
                if phi < best:
                    best = phi
                    cb = c
            if cb < 0:
                continue
            m = level_mass[level[i]]
            _charge(out, ch, cb, px, py, pz, m * d0, m * d1, m * d2)


def project_with_bodies(collision, x_start, x, v, sweep, contact, inv_dt, use_response, level, level_mass) -> None:
    """:func:`engine.collision.queries.project` over every collider, the bodies' impulses charged to them.

    Without bodies it is one call over every collider. With bodies, the other colliders' pass comes
    first, then the bodies' own, whose velocity changes go to :attr:`CollisionWorld.reaction`. ``level``
    (N,) uint8 and ``level_mass`` (L,) float64, kg, give each particle's mass.
    """
    if collision.n_bodies == 0 or collision.reaction is None:
        project(x_start, x, v, sweep, contact, inv_dt, use_response, collision.args)
        return
    if collision.first_body > 0:
        project(x_start, x, v, sweep, contact, inv_dt, use_response, collision.fixed_args)
    before = v.copy()
    bodies = collision.body_args
    project(x_start, x, v, sweep, contact, inv_dt, use_response, bodies)
    reaction = collision.reaction
    contact_reaction(x, before, v, level, level_mass, bodies, reaction._chunks)
    reaction.add_chunks()


def add_wall_reaction(collision, xq, bidx, level, level_h, level_mass, wall_free, wall_factor, inv_dt, model) -> None:
    """:func:`wall_reaction` into the collision world's :class:`LiquidReaction` (nothing without bodies)."""
    if collision is None or collision.n_bodies == 0 or collision.reaction is None or bidx.shape[0] == 0:
        return
    reaction = collision.reaction
    wall_reaction(xq, bidx, level, level_h, level_mass, wall_free, float(wall_factor), float(inv_dt), model.table_q0,
                  model.table_step, model.psi, model.dpsi, collision.body_args, reaction._chunks)
    reaction.add_chunks()
