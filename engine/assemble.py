"""Building a simulation from a scene and its settings: the checks before a bake, the first
particles, the colliders, the solver and the sources (inflows, outflows, removal).

:func:`check_job` is cheap (numpy only; importing this module does not load numba) and is what the
host calls before touching a cache folder. The frame loop that runs what is built here is
:mod:`engine.driver`.
"""

from __future__ import annotations

import logging
import math
from typing import Callable

import numpy as np

from .scene import budget
from . import settings as settings_mod
from .errors import InvalidSceneError
from .core.particles import Particles
from .scene import SceneDescription, channel_names

log = logging.getLogger(__name__)

Progress = Callable[[dict], None]


def check_job(scene: SceneDescription, settings: settings_mod.SimulationSettings, owner: str = "Scene") -> float:
    """Validate everything that can be checked before baking; returns the estimated particle count.

    Raises
    ------
    InvalidSettingsError, InvalidSceneError
        With every problem found, each naming the object or setting.
    """
    settings_mod.validate(settings, owner)
    settings_mod.check_supported(settings, owner)
    scene.validate()
    if settings.solver not in settings_mod.MULTI_RESOLUTION_SOLVERS:
        several = [f"{kind} '{o.name}'" for kind, objs in (("Fluid", scene.fluids), ("Inflow", scene.inflows))
                   for o in objs if o.settings.spacing_factor != 1.0]
        if several:
            raise InvalidSceneError([f"{name}: setting 'Spacing Factor' (spacing_factor) is not 1, but the "
                                     f"{settings.solver} solver has a single resolution; set it to 1 or use the "
                                     f"PBF solver" for name in several])
    return budget.check_particle_budget(scene, settings.particle_spacing, lifetime=settings.particle_lifetime,
                                        drained=bool(scene.outflows) or settings.use_kill_box)


def resolution_levels(scene: SceneDescription, settings: settings_mod.SimulationSettings
                      ) -> tuple[np.ndarray, dict]:
    """Particle spacing of each resolution level (ascending, m) and the level of each FLUID and
    INFLOW object, keyed by ``(kind, name)`` with kind 'FLUID' or 'INFLOW'.

    Level 0 is the finest spacing, so the solver's time step (set by level 0) suits every level.
    """
    factors = {("FLUID", f.name): f.settings.spacing_factor for f in scene.fluids}
    factors.update({("INFLOW", f.name): f.settings.spacing_factor for f in scene.inflows})
    unique = sorted(set(factors.values()) or {1.0})
    spacings = np.array([settings.particle_spacing * f for f in unique])
    return spacings, {key: unique.index(f) for key, f in factors.items()}


def initial_particles(scene: SceneDescription, settings: settings_mod.SimulationSettings) -> Particles:
    """Fill every FLUID volume with particles at its spacing; ids in object order (see :func:`fill_fluids`)."""
    return fill_fluids(scene, settings)[0]


def fill_fluids(scene: SceneDescription, settings: settings_mod.SimulationSettings
                ) -> tuple[Particles, np.ndarray]:
    """Fill every FLUID volume with particles at its spacing; ids in object order.

    Returns the particles (with every extra channel the scene names) and their levels (uint8, see
    :func:`resolution_levels`).
    """
    from .sources import fill  # numba: imported only when baking, so check_job stays cheap for the host

    spacings, levels = resolution_levels(scene, settings)
    pt = Particles.create(np.zeros((0, 3)), np.zeros((0, 3)), settings.rest_density)
    for name in channel_names(scene):
        pt.add_channel(name)
    level = []
    problems = []
    for f in scene.fluids:
        lev = levels[("FLUID", f.name)]
        dx = float(spacings[lev])
        pts = fill.fill_volume(f.mesh, dx)
        if len(pts) == 0:
            problems.append(f"Fluid '{f.name}' holds no particle at spacing {dx:g} m: "
                            f"it is open, flat or thinner than the spacing")
        pt.add(pts, f.velocity_at(pts), channels=f.channels)
        level.append(np.full(len(pts), lev, dtype=np.uint8))
    if problems:
        raise InvalidSceneError(problems)
    if not scene.inflows:
        pt.fit()  # nothing will be added: no spare rows
    return pt, (np.concatenate(level) if level else np.zeros(0, dtype=np.uint8))


def kernel_support(settings: settings_mod.SimulationSettings, spacing: float | None = None) -> float:
    """Interaction radius 2h of the chosen solver at ``spacing`` (default: the settings'), m."""
    from .solvers import solver_type

    dx = settings.particle_spacing if spacing is None else spacing
    return solver_type(settings.solver).kernel_support(settings, dx)


def _inflow_speeds(f) -> tuple[float, float]:
    """Fastest set velocity (norm) and normal speed an inflow has over the frame range, m/s."""
    velocity = f.tracks.get("velocity", f.velocity[None, :])
    speed = f.tracks.get("normal_speed", np.array([f.settings.normal_speed]))
    return float(np.linalg.norm(velocity, axis=-1).max()), float(np.max(speed))


def _emission_speed(scene: SceneDescription) -> float:
    """Fastest speed an inflow gives its liquid relative to its surface, m/s."""
    out = 0.0
    for f in scene.inflows:
        velocity, speed = _inflow_speeds(f)
        out = max(out, velocity + speed * (f.settings.inflow_mode == "SURFACE"))
    return out


def make_collision(scene: SceneDescription, settings: settings_mod.SimulationSettings, liquid: np.ndarray,
                   grid_dir: str | None = None, progress: Progress | None = None, store_grids: bool = True):
    """The :class:`engine.collision.world.CollisionWorld` of the scene's mesh colliders and rigid bodies (each
    body a solid collider after the colliders, :func:`engine.rigid.world.body_colliders`), or None without
    any (``store_grids`` False reads the grids cached in ``grid_dir`` but writes none)."""
    if not scene.colliders and not scene.bodies:
        return None
    from .collision.world import CollisionWorld
    from .rigid.world import body_colliders

    spacings, _levels = resolution_levels(scene, settings)
    return CollisionWorld(tuple(scene.colliders) + body_colliders(scene.bodies), liquid,
                          dx=settings.particle_spacing, support=kernel_support(settings, float(spacings.max())),
                          cell_factor=settings.collider_cell_size, fps=scene.fps, grid_dir=grid_dir,
                          progress=progress, store_grids=store_grids, n_bodies=len(scene.bodies))


def remove_inside_colliders(particles: Particles, collision, scene: SceneDescription,
                            settings: settings_mod.SimulationSettings, level: np.ndarray | None = None):
    """Drop initial particles that lie inside a collider's solid (a fluid overlapping an obstacle).

    Returns the particles (the same object, compacted) and, when given, their levels."""
    if collision is None or len(particles) == 0:
        return particles if level is None else (particles, level)
    inside = collision.inside(particles.x)
    if inside.all() and not scene.inflows:
        names = ", ".join(f"'{c.name}'" for c in scene.colliders + scene.bodies)
        raise InvalidSceneError(f"Every particle of the liquid starts inside the solid of a collider ({names}); "
                                f"move the fluid objects out of it or change the collider's mode")
    if inside.any():
        log.info("removed %d particles that start inside colliders", int(inside.sum()))
        particles.remove(inside)
        if level is not None:
            level = np.ascontiguousarray(level[~inside])
    return particles if level is None else (particles, level)


def _sound_speed_inputs(scene: SceneDescription, particles: Particles) -> tuple[np.ndarray, np.ndarray]:
    """Positions and velocities the automatic speed bounds look at: the initial liquid plus every
    inflow's vertices at the fastest speed it emits."""
    xs, vs = [particles.x], [particles.v]
    for f in scene.inflows:
        speed = sum(_inflow_speeds(f))
        if f.motion != "STATIC":
            from .scene.animation import make_motion

            speed += float(np.max(make_motion(f.mesh, f.transforms, f.frame_vertices, scene.fps).speeds, initial=0.0))
        xs.append(f.mesh.vertices.astype(np.float32))
        vs.append(np.tile(np.float32([speed, 0.0, 0.0]), (len(f.mesh.vertices), 1)))
    return np.concatenate(xs), np.concatenate(vs)


def _auto_sound_speed(scene: SceneDescription, x: np.ndarray, v: np.ndarray, boxes: np.ndarray,
                      collider_speed: float) -> float:
    """:func:`engine.solvers.wcsph_model.auto_sound_speed` for the strongest gravity of the shot (an animated
    gravity's every frame), so the liquid stays as incompressible when gravity grows during the bake."""
    from .solvers import wcsph

    track = scene.tracks.get("gravity")
    gravities = [scene.gravity] if track is None else list(np.asarray(track, dtype=np.float64).reshape(-1, 3))
    return max(wcsph.auto_sound_speed(x, v, g, boxes, collider_speed) for g in gravities)


def liquid_table(scene: SceneDescription, settings: settings_mod.SimulationSettings):
    """The bake's liquids (:class:`engine.solvers.liquid_forces.LiquidTable`): row 0 the scene's."""
    from .solvers.liquid_forces import LiquidTable

    return LiquidTable.single(settings.rest_density, settings.dynamic_viscosity, settings.surface_tension)


def wall_response(scene: SceneDescription, collision=None):
    """No-slip or slip, and the adhesion, of each box container and mesh collider."""
    from .solvers.liquid_forces import WallResponse

    entries = collision.entries if collision is not None else []
    return WallResponse(np.array([float(c.settings.use_no_slip) for c in scene.containers]),
                        np.array([float(e.collider.settings.use_no_slip) for e in entries]),
                        np.array([c.settings.adhesion for c in scene.containers], dtype=np.float64),
                        np.array([e.collider.settings.adhesion for e in entries], dtype=np.float64))


def make_solver(scene: SceneDescription, settings: settings_mod.SimulationSettings, particles: Particles,
                collision=None, level: np.ndarray | None = None):
    """The solver the settings name, built from them (:meth:`engine.solvers.Solver.from_settings`) with
    the scene's box containers, gravity, resolution levels and automatic sound speed."""
    from .solvers import SolverSetup, solver_type

    boxes = np.array([[c.lower, c.upper] for c in scene.containers], dtype=np.float64).reshape(-1, 2, 3)
    collider_speed = collision.max_speed() if collision is not None else 0.0
    x_all, v_all = _sound_speed_inputs(scene, particles)
    spacings, _levels = resolution_levels(scene, settings)
    setup = SolverSetup(settings=settings, gravity=np.asarray(scene.gravity, dtype=np.float64).reshape(3),
                        boxes=boxes,
                        box_friction=np.array([c.settings.friction for c in scene.containers], dtype=np.float64),
                        box_bounce=np.array([c.settings.bounce for c in scene.containers], dtype=np.float64),
                        spacings=spacings, auto_sound_speed=_auto_sound_speed(scene, x_all, v_all, boxes,
                                                                              collider_speed),
                        liquid=liquid_table(scene, settings), walls=wall_response(scene, collision))
    return solver_type(settings.solver).from_settings(setup, particles, collision=collision, level=level)


class Sources:
    """Emission and removal between substeps: INFLOW emitters, OUTFLOW objects, lifetime, kill box.

    ``max_dt`` bounds the substep so that an emitted particle travels at most half its spacing
    in one (inf without inflows).
    """

    def __init__(self, scene: SceneDescription, settings: settings_mod.SimulationSettings):
        self.scene = scene
        self.lifetime = settings.particle_lifetime
        self.kill_box = (np.array([settings.kill_box_min, settings.kill_box_max], dtype=np.float64)
                         if settings.use_kill_box else None)
        self.emitters = []
        self.max_dt = math.inf
        self.fps = float(scene.fps)
        self.dx = float(settings.particle_spacing)
        from .sources.outflow import Drain  # numba: imported only when baking

        self.drains = [Drain(o, scene.fps) for o in scene.outflows]
        if scene.inflows:
            from .sources import inflow

            spacings, levels = resolution_levels(scene, settings)
            problems = []
            for f in scene.inflows:
                lev = levels[("INFLOW", f.name)]
                e = inflow.make_emitter(f, float(spacings[lev]), lev, scene.frame_start, scene.fps)
                if isinstance(e, inflow.VolumeEmitter) and len(e.sites) == 0:
                    problems.append(f"Inflow '{f.name}' (Emit From: Volume) holds no particle at spacing "
                                    f"{spacings[lev]:g} m: it is open, flat or thinner than the spacing")
                self.emitters.append(e)
            if problems:
                raise InvalidSceneError(problems)
            speed = _emission_speed(scene)
            if speed > 0.0:
                self.max_dt = 0.5 * float(spacings[0]) / speed
        self._removes = bool(scene.outflows) or self.lifetime > 0.0 or self.kill_box is not None
        #: particles emitted and removed so far
        self.emitted = 0
        self.removed = 0

    def dt_limit(self, t: float) -> float:
        """Longest substep from t: emitted particles travel at most half a spacing from their surface,
        and no moving outflow moves more than :data:`engine.scene.animation.MAX_OUTFLOW_TRAVEL` spacings."""
        return min([self.max_dt] + [d.dt_limit(t, self.dx) for d in self.drains])

    def step(self, solver, t: float, dt: float) -> None:
        """After the solver's substep [t, t + dt]: age the particles, remove, then emit."""
        pt = solver.particles
        pt.age += np.float32(dt)
        if self._removes and len(pt):
            from .sources import outflow

            mask = outflow.removal_mask(pt.x, pt.age, self.drains, self.lifetime, self.kill_box, t + dt, self.fps)
            self.removed += solver.remove_particles(mask)
        for e in self.emitters:
            x, v, age = e.emit(t, dt, solver.particles.x)
            if len(x):
                solver.add_particles(x, v, level=e.level, age=age, channels=e.channels)
                self.emitted += len(x)
