"""The rigid bodies of a bake, advanced substep by substep beside the liquid.

One substep [t, t + dt] of :meth:`RigidWorld.step`, before the liquid's:

1. velocities: ``v += g dt + F dt / m + J / m`` and ``w += I^-1 (L - dt w x (I w))`` (world axes, the
   gyroscopic term explicit), with ``J``, ``L`` the liquid's impulse and angular impulse of the substep
   before (the weak two-way coupling of Akinci, Ihmsen, Akinci, Solenthaler & Teschner 2012, "Versatile
   Rigid-Fluid Coupling for Incompressible SPH", §4: the liquid's forces of one step act on the body
   at the next; :mod:`engine.rigid.coupling`) and F the force fields' force (Blender applies a field's
   force to a rigid body's centre, as it gives a particle of 1 kg that force); then damping
   ``v *= (1 - d)^dt`` (Blender's and Bullet's meaning of Damping: the fraction lost per second);
2. contacts with containers, colliders and other bodies at the current poses, within a margin that
   covers the substep's motion, warm-started with the impulses the same contacts ended the last
   substep with, and solved on the velocities (:mod:`engine.rigid.contacts`);
3. the poses advance: ``x += v dt``, ``q <- exp(w dt / 2) q`` (the exact rotation of w over dt);
4. what overlap is left is pushed apart as position constraints, changing no velocity;
5. the bodies' colliders (:class:`engine.collision.world.CollisionWorld`) move from the old pose to the
   new over the substep, so the liquid's substep sees each body where it ends and moves with its
   surface velocity; the liquid's reaction of that substep is collected afterwards (:meth:`take_reaction`).

A body that is not Dynamic (its animated switch, as Blender's rigid bodies have) follows its
animation: its pose is the interpolated animation and it pushes dynamic bodies without being pushed.
When it turns dynamic it keeps the velocity its animation had.
"""

from __future__ import annotations

import math

import numpy as np

from ..scene import animation
from .bodies import RigidModel, RigidState, body_mass, make_model, pose_from_matrix
from .contacts import (CONTACT_DTYPE, contact_ids, find_contacts, push_apart, reduce_contacts, solve_velocities,
                       warm_start, world_inverse_inertia)
from .motion import angular_velocity, matrix_of, pose_matrix, quat_matrix, rotate_by
from .trajectory import RECORDS  # noqa: F401  (re-exported: the bodies' arrays in a cache frame)

#: Sequential-impulse sweeps over the contacts per substep, and position sweeps after the move.
VELOCITY_ITERATIONS = 8
POSITION_ITERATIONS = 2

#: Overlap left alone by the position pass, in particle spacings, and the fraction of the rest it removes
#: per substep.
SLOP = 0.01
PUSH_FRACTION = 0.5

#: Contacts are sought this many particle spacings beyond a surface: more than two surfaces close in one
#: substep (each moves at most :data:`MAX_BODY_TRAVEL`), so that no contact is missed.
CONTACT_MARGIN = 1.0

#: How far inside a body, in particle spacings, a contact's normal is read (:func:`find_contacts`).
NORMAL_SHIFT = 0.1

#: Largest distance, in particle spacings, a body's surface may move in one substep.
MAX_BODY_TRAVEL = 0.4


def body_colliders(bodies) -> tuple:
    """The collider each rigid body is to the liquid: a SOLID :class:`engine.scene.MeshCollider` of its rest
    mesh with its liquid friction and bounce (and their animation), at rest: its motion is given while
    simulating (:meth:`engine.collision.world.CollisionWorld.move`)."""
    from ..scene import MeshCollider
    from ..settings import ColliderSettings

    out = []
    for b in bodies:
        tracks = {k: v for k, v in b.tracks.items() if k in ("friction", "bounce")}
        out.append(MeshCollider(b.name, b.mesh, ColliderSettings(collider_mode="SOLID", friction=b.settings.friction,
                                                                  bounce=b.settings.bounce), tracks=tracks))
    return tuple(out)


def initial_motion(body, centre: np.ndarray, fps: float) -> tuple[np.ndarray, np.ndarray]:
    """Velocity (3,) m/s and angular velocity (3,) rad/s a body starts with: its settings', plus its
    animation's over the first frame with Use Object Motion."""
    st = body.settings
    v = np.array(st.linear_velocity, dtype=np.float64)
    w = np.array(st.angular_velocity, dtype=np.float64)
    if st.use_animated_velocity and body.transforms is not None and len(body.transforms) > 1:
        t0, t1 = body.transforms[0], body.transforms[1]
        x0, q0 = pose_from_matrix(t0, centre)
        x1, q1 = pose_from_matrix(t1, centre)
        if q1 @ q0 < 0.0:
            q1 = -q1
        v += (x1 - x0) * fps
        w += np.array(angular_velocity(q1, q0, fps))
    return v, w


class RigidWorld:
    """The bodies, their state and their links to the colliders.

    Parameters
    ----------
    model : RigidModel
    state : RigidState
    collision : engine.collision.CollisionWorld
        Holds one collider per body (``body_colliders``) besides the scene's colliders.
    body_colliders : ndarray (B,), int64
        The collider index of each body.
    boxes : ndarray (K, 2, 3)
        Inner corners of the box containers, m.
    dx : float
        Particle spacing, m.
    fps : float
    transforms : list of ndarray (F, 4, 4) or None
        Each body's animation (rest to world per frame), for its kinematic phase.
    dynamic : list of ndarray (F,) or None
        Each body's Dynamic switch per frame (None: always dynamic).
    """

    def __init__(self, model: RigidModel, state: RigidState, collision, body_colliders, boxes, dx: float, fps: float,
                 transforms=None, dynamic=None):
        self.model = model
        self.state = state
        self.collision = collision
        self.body_colliders = np.asarray(body_colliders, dtype=np.int64)
        n_col = len(collision.entries) if collision is not None else 0
        self.static_colliders = np.array([c for c in range(n_col) if c not in set(self.body_colliders.tolist())],
                                         dtype=np.int64)
        self.boxes = np.asarray(boxes, dtype=np.float64).reshape(-1, 2, 3)
        self.dx = float(dx)
        self.fps = float(fps)
        n = len(model)
        self.transforms = list(transforms) if transforms is not None else [None] * n
        self.dynamic = list(dynamic) if dynamic is not None else [None] * n
        self._contacts = np.zeros(1024, dtype=CONTACT_DTYPE)
        self._reduced = np.zeros(1024, dtype=CONTACT_DTYPE)
        self._old_ids = np.zeros(0, dtype=np.int64)
        self._old_pn = np.zeros(0)
        self._old_pt = np.zeros((0, 3))
        self.contact_count = 0
        self.time = 0.0

    def __len__(self) -> int:
        return len(self.model)

    @classmethod
    def from_scene(cls, scene, settings, collision) -> RigidWorld:
        """The bodies of ``scene`` at the first frame, their colliders the last ones of ``collision``
        (:func:`engine.assemble.make_collision`)."""
        bodies = scene.bodies
        masses = [body_mass(b.mesh, b.settings) for b in bodies]
        st = [b.settings for b in bodies]
        model = make_model([b.name for b in bodies], [b.mesh for b in bodies], masses,
                           [s.contact_friction for s in st], [s.contact_bounce for s in st],
                           [s.linear_damping for s in st], [s.angular_damping for s in st], settings.particle_spacing)
        state = RigidState.at_rest(model.centre)
        for b, body in enumerate(bodies):
            state.v[b], state.w[b] = initial_motion(body, model.centre[b], scene.fps)
        boxes = np.array([[c.lower, c.upper] for c in scene.containers], dtype=np.float64).reshape(-1, 2, 3)
        first = collision.first_body
        world = cls(model, state, collision, np.arange(first, first + len(bodies)), boxes, settings.particle_spacing,
                    scene.fps, transforms=[b.transforms for b in bodies],
                    dynamic=[b.tracks.get("use_dynamic", None if b.settings.use_dynamic else np.zeros(1))
                             for b in bodies])
        from .coupling import LiquidReaction

        collision.reaction = LiquidReaction(len(bodies))
        return world

    def advance(self, solver, forces, t: float, dt: float) -> None:
        """:meth:`step` with the solver's gravity (animated gravity included) and the force fields at the
        substep's middle (:class:`engine.sources.forces.Forces`)."""
        model = solver.model
        gravity = getattr(model, "gravity", None)
        if gravity is None:
            gravity = model.sph.gravity          # the hybrid: its SPH part's
        push = None
        if forces:
            from ..sources.forces import accelerations

            pid = -1 - np.arange(len(self), dtype=np.int64)
            # a field gives a body the force it gives a particle of 1 kg, at its centre (as Blender does)
            push = accelerations(self.state.x, self.state.v, pid, forces.params(t + 0.5 * dt))
        self.step(t, dt, gravity, push)

    def take_reaction(self) -> None:
        """Collect the liquid's impulses of the substep just taken (:class:`engine.rigid.coupling.LiquidReaction`)."""
        if self.collision is not None and self.collision.reaction is not None:
            self.receive(*self.collision.reaction.take())

    def save_arrays(self) -> dict:
        """The state a checkpoint keeps: the bodies' and the contacts' impulses of the last substep (warm start),
        as named arrays."""
        out = {f"body_{k}": v for k, v in self.state.arrays().items()}
        out.update(body_contact_ids=self._old_ids, body_contact_pn=self._old_pn, body_contact_pt=self._old_pt,
                   body_time=np.float64(self.time))
        return out

    def restore_arrays(self, arrays: dict) -> None:
        """Continue from :meth:`save_arrays`' arrays (a checkpoint): the same state, bit for bit."""
        self.state = RigidState.from_arrays({k: arrays[f"body_{k}"] for k in
                                             ("x", "q", "v", "w", "impulse", "angular_impulse")})
        self._old_ids = np.array(arrays["body_contact_ids"], dtype=np.int64)
        self._old_pn = np.array(arrays["body_contact_pn"], dtype=np.float64)
        self._old_pt = np.array(arrays["body_contact_pt"], dtype=np.float64).reshape(-1, 3)
        self.time = float(arrays["body_time"])
        if self.collision is not None:
            now = self.matrices()
            for b in range(len(self)):
                self.collision.move(int(self.body_colliders[b]), now[b], now[b], self.time, self.time)

    def manifest(self) -> dict:
        """What the cache manifest says of the bodies (``rigid_bodies``): their names in record order, mass
        (kg), centre of mass at the first frame (m) and inertia tensor about it (kg m^2, world axes at the
        first frame)."""
        m = self.model
        return {"names": list(m.names), "mass": m.mass.tolist(), "centre": m.centre.tolist(),
                "inertia": m.inertia.tolist(), "volume": m.volume.tolist()}

    def frame_records(self) -> dict:
        """The bodies' state as a frame of the cache holds it (:data:`engine.rigid.trajectory.RECORDS`)."""
        s = self.state
        return {"body_matrix": self.matrices(), "body_position": s.x.copy(), "body_orientation": s.q.copy(),
                "body_velocity": s.v.copy(), "body_angular_velocity": s.w.copy()}

    # ------------------------------------------------------------------------------------------
    def is_dynamic(self, b: int, t: float) -> bool:
        track = self.dynamic[b]
        if track is None:
            return True
        return bool(animation.sample(track, t, self.fps, switch=True) > 0.5)

    def animated_pose(self, b: int, t: float) -> np.ndarray:
        """Rest-to-world matrix of body b's animation at time t (identity without one)."""
        tr = self.transforms[b]
        if tr is None:
            return np.eye(4)
        return animation.sample(tr, t, self.fps)

    def matrices(self) -> np.ndarray:
        """Rest-to-world matrix of every body now, (B, 4, 4)."""
        s, m = self.state, self.model
        return np.array([pose_matrix(s.x[b], s.q[b], m.centre[b]) for b in range(len(m))]).reshape(-1, 4, 4)

    def dt_limit(self) -> float:
        """Longest substep that moves no body's surface more than :data:`MAX_BODY_TRAVEL` spacings, s."""
        s, m = self.state, self.model
        limit = math.inf
        for b in range(len(m)):
            speed = float(np.linalg.norm(s.v[b]) + np.linalg.norm(s.w[b]) * m.radius[b])
            if speed > 0.0:
                limit = min(limit, MAX_BODY_TRAVEL * self.dx / speed)
        return limit

    def receive(self, impulse: np.ndarray, moment: np.ndarray) -> None:
        """Add the liquid's impulse (B, 3), N s, and its moment about the world origin (B, 3), N m s, from
        the substep just taken (the bodies stood at their current poses)."""
        s = self.state
        s.impulse += impulse
        s.angular_impulse += moment - np.cross(s.x, impulse)

    # ------------------------------------------------------------------------------------------
    def step(self, t: float, dt: float, gravity: np.ndarray, forces: np.ndarray | None = None) -> None:
        """Advance the bodies over [t, t + dt] (see the module docstring); ``forces`` (B, 3), N, from
        force fields."""
        s, m = self.state, self.model
        n = len(m)
        if self.collision is not None:
            self.collision.update(t + dt)           # animated colliders where they will be
        start = self.matrices()
        rot = np.array([matrix_of(q) for q in s.q]).reshape(-1, 3, 3)
        inv_mass = np.zeros(n)
        inv_iw = np.zeros((n, 3, 3))
        inv_i0 = m.inv_inertia
        g = np.asarray(gravity, dtype=np.float64)
        kinematic = {}
        for b in range(n):
            if not self.is_dynamic(b, t + dt):
                # kinematic: the velocities that reach the animation's pose at t + dt
                end = self.animated_pose(b, t + dt)
                x1, q1 = pose_from_matrix(end, m.centre[b])
                if q1 @ s.q[b] < 0.0:
                    q1 = -q1
                kinematic[b] = (x1, q1)
                s.v[b] = (x1 - s.x[b]) / dt
                s.w[b] = angular_velocity(q1, s.q[b], 1.0 / dt)
                s.impulse[b] = 0.0
                s.angular_impulse[b] = 0.0
                continue
            inv_mass[b] = 1.0 / m.mass[b]
            world_inverse_inertia(rot[b], inv_i0[b], inv_iw[b])
            kick = s.impulse[b] + dt * m.mass[b] * g
            if forces is not None:
                kick = kick + dt * forces[b]
            s.v[b] += kick * inv_mass[b]
            iw = rot[b] @ m.inertia[b] @ rot[b].T
            s.w[b] += inv_iw[b] @ (s.angular_impulse[b] - dt * np.cross(s.w[b], iw @ s.w[b]))
            s.impulse[b] = 0.0
            s.angular_impulse[b] = 0.0
            s.v[b] *= (1.0 - m.linear_damping[b]) ** dt
            s.w[b] *= (1.0 - m.angular_damping[b]) ** dt
        contacts = self._find(rot, inv_mass)
        self.contact_count = len(contacts)
        if len(contacts):
            warm_start(contacts, self._old_ids, self._old_pn, self._old_pt, s.x, rot, s.v, s.w, inv_mass, inv_iw)
            solve_velocities(contacts, s.x, rot, s.v, s.w, inv_mass, inv_iw, dt,
                             2.0 * float(np.linalg.norm(g)) * dt, VELOCITY_ITERATIONS)
        for b in range(n):
            if b in kinematic:
                s.x[b], s.q[b] = kinematic[b]
            else:
                s.x[b] += s.v[b] * dt
                rotate_by(s.q[b], s.w[b, 0], s.w[b, 1], s.w[b, 2], dt)
            quat_matrix(s.q[b], rot[b])
            if inv_mass[b] > 0.0:
                world_inverse_inertia(rot[b], inv_i0[b], inv_iw[b])
        if len(contacts):
            push_apart(contacts, s.x, s.q, rot, inv_mass, inv_i0, inv_iw, SLOP * self.dx, PUSH_FRACTION,
                       POSITION_ITERATIONS)
        ids = contact_ids(contacts)
        order = np.argsort(ids, kind="stable")
        self._old_ids = ids[order]
        self._old_pn = contacts["pn"][order]
        self._old_pt = contacts["pt"][order]
        self.time = t + dt
        if self.collision is not None:
            end = self.matrices()
            for b in range(n):
                self.collision.move(int(self.body_colliders[b]), start[b], end[b], t, t + dt)

    def _find(self, rot, inv_mass) -> np.ndarray:
        s, m = self.state, self.model
        cset = self.collision.args
        margin = CONTACT_MARGIN * self.dx
        while True:
            count = find_contacts(m.samples, m.normals, m.sample_start, s.x, rot, m.centre, m.radius, s.v, s.w,
                                  inv_mass, self.body_colliders, self.static_colliders, self.boxes, cset, margin,
                                  NORMAL_SHIFT * self.dx, m.friction, m.bounce, self._contacts)
            if count <= len(self._contacts):
                if self._reduced.shape[0] < count:
                    self._reduced = np.zeros(len(self._contacts), dtype=CONTACT_DTYPE)
                kept = reduce_contacts(self._contacts[:count], s.x, rot, self._reduced)
                return self._reduced[:kept]
            self._contacts = np.zeros(2 * count, dtype=CONTACT_DTYPE)
