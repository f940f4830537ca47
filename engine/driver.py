"""The frame loop: the only place that advances a simulation over frames and writes the cache.

``check_job`` is cheap (numpy only; importing this module does not load numba) and is what the
host calls before touching a cache folder; ``bake_job`` reads a job folder and bakes it; ``bake`` does the same from objects in memory.
Progress goes through a callback (one dict per event, see :mod:`engine.cli`), cancellation
through a callable polled between substeps.
"""

from __future__ import annotations

import logging
import math
import os
import time
from typing import Callable

import numpy as np

from . import __version__
from . import budget, checkpoint, jobcheck
from . import settings as settings_mod
from .cache import SDF_DIR, CacheLock, CacheReader, CacheWriter, check_writable, claim_folder, mark_ended
from .errors import BakeCancelled, CacheFormatError, InvalidSceneError, SimulationDivergedError
from .memory import resident_bytes
from .particles import Particles
from .scene import SceneDescription, channel_names, load_job, scene_hash

log = logging.getLogger(__name__)

Progress = Callable[[dict], None]
Cancel = Callable[[], bool]


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
    if settings.solver != "PBF":
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
    from . import emit  # numba: imported only when baking, so check_job stays cheap for the host

    spacings, levels = resolution_levels(scene, settings)
    pt = Particles.create(np.zeros((0, 3)), np.zeros((0, 3)), settings.rest_density)
    for name in channel_names(scene):
        pt.add_channel(name)
    level = []
    problems = []
    for f in scene.fluids:
        lev = levels[("FLUID", f.name)]
        dx = float(spacings[lev])
        pts = emit.fill_volume(f.mesh, dx)
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
    dx = settings.particle_spacing if spacing is None else spacing
    if settings.solver == "PBF":
        from .solvers import pbf

        return 2.0 * pbf.H_FACTOR * dx
    return 2.0 * settings.smoothing_length_factor * dx


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
    """The :class:`engine.collision.CollisionWorld` of the scene's mesh colliders, or None without any
    (``store_grids`` False reads the grids cached in ``grid_dir`` but writes none)."""
    if not scene.colliders:
        return None
    from .collision import CollisionWorld

    spacings, _levels = resolution_levels(scene, settings)
    return CollisionWorld(scene.colliders, liquid, dx=settings.particle_spacing,
                          support=kernel_support(settings, float(spacings.max())),
                          cell_factor=settings.collider_cell_size, fps=scene.fps, grid_dir=grid_dir,
                          progress=progress, store_grids=store_grids)


def remove_inside_colliders(particles: Particles, collision, scene: SceneDescription,
                            settings: settings_mod.SimulationSettings, level: np.ndarray | None = None):
    """Drop initial particles that lie inside a collider's solid (a fluid overlapping an obstacle).

    Returns the particles (the same object, compacted) and, when given, their levels."""
    if collision is None or len(particles) == 0:
        return particles if level is None else (particles, level)
    inside = collision.inside(particles.x)
    if inside.all() and not scene.inflows:
        names = ", ".join(f"'{c.name}'" for c in scene.colliders)
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
            from .animation import make_motion

            speed += float(np.max(make_motion(f.mesh, f.transforms, f.frame_vertices, scene.fps).speeds, initial=0.0))
        xs.append(f.mesh.vertices.astype(np.float32))
        vs.append(np.tile(np.float32([speed, 0.0, 0.0]), (len(f.mesh.vertices), 1)))
    return np.concatenate(xs), np.concatenate(vs)


def _auto_sound_speed(scene: SceneDescription, x: np.ndarray, v: np.ndarray, boxes: np.ndarray,
                      collider_speed: float) -> float:
    """:func:`engine.solvers.wcsph.auto_sound_speed` for the strongest gravity of the shot (an animated
    gravity's every frame), so the liquid stays as incompressible when gravity grows during the bake."""
    from .solvers import wcsph

    track = scene.tracks.get("gravity")
    gravities = [scene.gravity] if track is None else list(np.asarray(track, dtype=np.float64).reshape(-1, 3))
    return max(wcsph.auto_sound_speed(x, v, g, boxes, collider_speed) for g in gravities)


def _make_solver(scene: SceneDescription, settings: settings_mod.SimulationSettings, particles: Particles,
                 collision=None, level: np.ndarray | None = None):
    from .solvers import wcsph

    boxes = np.array([[c.lower, c.upper] for c in scene.containers], dtype=np.float64).reshape(-1, 2, 3)
    friction = np.array([c.settings.friction for c in scene.containers], dtype=np.float64)
    bounce = np.array([c.settings.bounce for c in scene.containers], dtype=np.float64)
    collider_speed = collision.max_speed() if collision is not None else 0.0
    x_all, v_all = _sound_speed_inputs(scene, particles)
    auto_c0 = _auto_sound_speed(scene, x_all, v_all, boxes, collider_speed)
    if settings.solver == "PBF":
        from .solvers import pbf

        spacings, _levels = resolution_levels(scene, settings)
        # Same bound as WCSPH with its automatic sound speed: 50 times the fastest free-fall speed.
        limit = 5.0 * auto_c0
        model = pbf.make_model(dx=float(spacings[0]), spacings=spacings, rho0=settings.rest_density,
                               iterations=settings.pbf_iterations,
                               tolerance=settings.pbf_density_tolerance / 100.0, beta=settings.pbf_stiffness,
                               xsph=settings.pbf_xsph_viscosity, kappa=settings.pbf_surface_tension,
                               gravity=scene.gravity, boxes=boxes, friction=friction, bounce=bounce,
                               cfl=settings.pbf_cfl_number, max_dt=settings.pbf_time_step, speed_limit=limit)
        log.info("PBF: %d particles, h=%.4g m, mass=%.4g kg, %d iterations", len(particles), model.h,
                 model.level_mass[0], model.iterations)
        return pbf.PBFSolver(model, particles, level=level, collision=collision)
    c0 = settings.sound_speed or auto_c0
    model = wcsph.make_model(dx=settings.particle_spacing, h_factor=settings.smoothing_length_factor,
                             rho0=settings.rest_density, c0=c0, alpha=settings.artificial_viscosity,
                             nu=settings.viscosity, gravity=scene.gravity, boxes=boxes,
                             friction=friction, bounce=bounce, cfl=settings.cfl_number,
                             # the hybrid mirrors the summation kernels (engine.solvers.hybrid)
                             density="summation" if settings.solver == "HYBRID" else settings.wcsph_density.lower())
    if settings.solver == "HYBRID":
        return _make_hybrid(settings, model, boxes, particles, collision)
    log.info("WCSPH: %d particles, h=%.4g m, c0=%.4g m/s, mass=%.4g kg, %s density", len(particles), model.h, c0,
             model.mass, model.density)
    if model.density == "continuity" and len(particles):
        # the liquid starts at rest under gravity: at the density of its depth (the equation of state's
        # hydrostatic pressure) instead of rho0, which would make it sink and ring for the first
        # substeps; continuity density keeps what it is given (summation recomputes it from positions)
        depth = wcsph.liquid_depth(particles.x, scene.gravity, settings.particle_spacing)
        particles.rho[:] = wcsph.hydrostatic_density(depth, settings.rest_density, c0,
                                                     float(np.linalg.norm(scene.gravity)))
    return wcsph.WCSPHSolver(model, particles, collision=collision)


def _make_hybrid(settings: settings_mod.SimulationSettings, sph_model, boxes: np.ndarray, particles: Particles,
                 collision=None):
    """The MAC-SPH hybrid (:mod:`engine.solvers.hybrid`) over the box containers' extent, or, without
    any, over the initial liquid's bounding box grown by a quarter of its size each way."""
    from .solvers import hybrid

    if len(boxes):
        lower, upper = boxes[:, 0].min(axis=0), boxes[:, 1].max(axis=0)
    elif len(particles):
        lower, upper = particles.x.min(axis=0).astype(np.float64), particles.x.max(axis=0).astype(np.float64)
        pad = 0.25 * (upper - lower) + 2.0 * settings.particle_spacing
        lower, upper = lower - pad, upper + pad
    else:
        lower, upper = np.zeros(3), np.full(3, settings.particle_spacing)
    model = hybrid.make_model(sph_model, lower=lower, upper=upper, cell_factor=settings.hybrid_cell_factor,
                              interface_mode=settings.hybrid_interface_mode,
                              interface_depth=settings.hybrid_interface_depth,
                              interface_height=settings.hybrid_interface_height,
                              pressure_solver=settings.hybrid_pressure_solver, omega=settings.hybrid_sor_omega,
                              tolerance=settings.hybrid_pressure_tolerance,
                              max_iterations=settings.hybrid_max_iterations)
    solver = hybrid.HybridSolver(model, particles, collision=collision)
    log.info("HYBRID: %d particles, h=%.4g m, c0=%.4g m/s, grid %s of %.4g m cells, interface at %.4g m (%s)",
             len(particles), sph_model.h, sph_model.c0, "x".join(map(str, model.shape)), model.cell,
             solver.interface, solver.kind_counts())
    return solver


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
        from .emit import Drain  # numba: imported only when baking

        self.drains = [Drain(o, scene.fps) for o in scene.outflows]
        if scene.inflows:
            from . import emit

            spacings, levels = resolution_levels(scene, settings)
            problems = []
            for f in scene.inflows:
                lev = levels[("INFLOW", f.name)]
                e = emit.make_emitter(f, float(spacings[lev]), lev, scene.frame_start, scene.fps)
                if isinstance(e, emit.VolumeEmitter) and len(e.sites) == 0:
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
        and no moving outflow moves more than :data:`engine.animation.MAX_OUTFLOW_TRAVEL` spacings."""
        return min([self.max_dt] + [d.dt_limit(t, self.dx) for d in self.drains])

    def step(self, solver, t: float, dt: float) -> None:
        """After the solver's substep [t, t + dt]: age the particles, remove, then emit."""
        pt = solver.particles
        pt.age += np.float32(dt)
        if self._removes and len(pt):
            from . import emit

            mask = emit.removal_mask(pt.x, pt.age, self.drains, self.lifetime, self.kill_box, t + dt, self.fps)
            self.removed += solver.remove_particles(mask)
        for e in self.emitters:
            x, v, age = e.emit(t, dt, solver.particles.x)
            if len(x):
                solver.add_particles(x, v, level=e.level, age=age, channels=e.channels)
                self.emitted += len(x)


def _check_state(solver, frame: int) -> None:
    """Raise SimulationDivergedError if a position or velocity is not finite or a particle is far
    faster than the time step allows; called after every substep, so a blow-up is caught while the
    frames before it are intact (the message names the frame being computed)."""
    from .state_check import max_speed  # numba: imported only when baking

    pt = solver.particles
    vmax = max_speed(pt.x, pt.v)
    if not math.isfinite(vmax):
        raise SimulationDivergedError(f"The simulation became unstable at frame {frame} (non-finite positions or "
                                      f"velocities). {solver.nonfinite_advice()}")
    limit = solver.speed_limit()
    if vmax > limit.speed:
        raise SimulationDivergedError(
            f"The simulation became unstable at frame {frame}: a particle moves at {vmax:.3g} m/s, {limit.reason}. "
            f"{limit.advice}")


class Simulation:
    """A simulation in memory: the solver with its colliders, the sources (inflows, outflows, removal),
    the animated settings and the force fields, and the substep loop that advances them by a frame.

    :func:`bake` advances one frame after the other into the cache; the live session
    (:mod:`engine.live`) advances the same way, one displayed frame at a time.
    """

    def __init__(self, scene: SceneDescription, settings: settings_mod.SimulationSettings, solver, sources: Sources,
                 animation, forces):
        self.scene = scene
        self.settings = settings
        self.solver = solver
        self.sources = sources
        self.animation = animation
        self.forces = forces

    @classmethod
    def start(cls, scene: SceneDescription, settings: settings_mod.SimulationSettings, grid_dir: str | None = None,
              progress: Progress | None = None, t0: float | None = None) -> "Simulation":
        """The state at the first frame: fluids filled, colliders' distance grids built (read from and
        written to ``grid_dir`` when given), particles inside colliders removed, the solver made.
        ``progress`` receives the 'fill', 'colliders' and 'compile' stage events (elapsed from ``t0``)."""
        emit_ = progress or (lambda event: None)
        t0 = time.perf_counter() if t0 is None else t0
        emit_({"event": "stage", "stage": "fill", "elapsed": round(time.perf_counter() - t0, 3)})
        particles, level = fill_fluids(scene, settings)
        collision = None
        if scene.colliders:
            emit_({"event": "stage", "stage": "colliders", "elapsed": round(time.perf_counter() - t0, 3)})
            collision = make_collision(scene, settings, particles.x, grid_dir, emit_)
            particles, level = remove_inside_colliders(particles, collision, scene, settings, level)
        sources = Sources(scene, settings)
        emit_({"event": "stage", "stage": "compile", "elapsed": round(time.perf_counter() - t0, 3)})
        solver = _make_solver(scene, settings, particles, collision, level)
        from .animation import SceneAnimation
        from .forces import Forces

        return cls(scene, settings, solver, sources, SceneAnimation(scene, solver), Forces(scene))

    def advance_frame(self, frame: int, frame_dt: float, cancel: Cancel | None = None,
                      cancelled: str | None = None, between_substeps: Callable[[], None] | None = None) -> int:
        """Advance by ``frame_dt`` seconds in equal substeps that land exactly on the frame's end;
        returns the substeps taken. ``frame`` names the frame in messages; ``cancelled`` replaces the
        message of the cancel. ``between_substeps`` is called before every substep but the first (a
        live session takes the newest collider poses there).

        Raises
        ------
        BakeCancelled
            When ``cancel()`` returned True before a substep.
        SimulationDivergedError
            After the substep where the state stopped being finite or too fast, or past Max Substeps.
        """
        solver, sources, settings = self.solver, self.sources, self.settings
        remaining = frame_dt
        substeps = 0
        while remaining > 1e-12 * frame_dt:
            if cancel is not None and cancel():
                raise BakeCancelled(cancelled or f"Bake cancelled at frame {frame}; frames up to {frame - 1} are kept")
            if between_substeps is not None and substeps > 0:
                between_substeps()
            dt = min(solver.stable_dt(), sources.dt_limit(solver.time), remaining)
            n_left = math.ceil(remaining / dt - 1e-9)
            dt = remaining / n_left  # equal substeps that land exactly on the frame time
            t_step = solver.time
            # animated settings at the substep's middle, then the force fields' kick
            self.animation.apply(solver, t_step + 0.5 * dt)
            self.forces.kick(solver, t_step, dt)
            solver.step(dt)
            sources.step(solver, t_step, dt)
            remaining -= dt
            substeps += 1
            _check_state(solver, frame)
            if substeps > settings.max_substeps:
                raise SimulationDivergedError(
                    f"Frame {frame} needed more than {settings.max_substeps} substeps (Max Substeps). The "
                    f"liquid is moving too fast for the particle spacing; raise Max Substeps or the spacing.")
        solver.flush()  # particles a solver moves every few substeps (the hybrid's markers) catch up
        return substeps


def cache_header(scene: SceneDescription, settings: settings_mod.SimulationSettings) -> dict:
    """The manifest header of a cache of ``scene`` baked with ``settings`` (see :mod:`engine.cache`)."""
    return {
        "engine_version": __version__,
        "solver": settings.solver,
        "settings": settings_mod.to_dict(settings),
        "settings_hash": settings_mod.settings_hash(settings),
        "scene_hash": scene_hash(scene),
        "scene_objects": jobcheck.scene_object_hashes(scene),
        "frame_start": int(scene.frame_start),
        "frame_end": int(scene.frame_end),
        "fps": float(scene.fps),
        "particle_spacing": float(settings.particle_spacing),
        "particle_radius": 0.5 * float(settings.particle_spacing),
    }


def extra_attributes(scene: SceneDescription) -> dict:
    """The attributes a cache of ``scene`` holds beyond the built-in ones (see :mod:`engine.cache`)."""
    return {name: ("float32", (), "", "particle channel set by the scene's objects") for name in channel_names(scene)}


def _resume_state(scene: SceneDescription, settings: settings_mod.SimulationSettings, cache_dir: str,
                  resume_from, accept_scene_change: bool, emit_: Progress) -> tuple[int, dict, dict]:
    """Every check of a resume, before the cache changes: ``(frame, checkpoint state, manifest)``.

    ``resume_from`` is a frame or 'latest' (the newest checkpoint that can be read: a truncated or
    corrupt one is skipped with a warning event). The frames the resume keeps must all be readable,
    and a changed scene is refused unless ``accept_scene_change``.
    """
    reader = CacheReader(cache_dir)
    manifest = reader.manifest
    frames = checkpoint.resumable_frames(cache_dir)
    if resume_from == "latest":
        if not frames:
            raise CacheFormatError(f"The cache '{cache_dir}' has no checkpoint to resume from; bake it again")
        frame, state, skipped = checkpoint.load_latest(cache_dir, frames)
        for why in skipped:
            emit_({"event": "warning", "message": f"{why}; resuming from the checkpoint at frame {frame} instead"})
    else:
        frame = int(resume_from)
        if frame not in frames:
            raise InvalidSceneError(f"The cache '{cache_dir}' has no checkpoint at frame {frame} with every frame "
                                    f"before it; checkpoints: {frames or 'none'}")
        state = checkpoint.load(cache_dir, frame)
    checkpoint.check_resume(manifest, frame, settings_mod.to_dict(settings), scene.frame_start, scene.fps, "Scene")
    changes = jobcheck.scene_changes(manifest.get("scene_objects"), jobcheck.scene_object_hashes(scene))
    if changes and not accept_scene_change:
        raise InvalidSceneError([f"Scene: {c} since the cached frames were baked" for c in changes]
                                + ["resume only if the change should apply from the checkpoint on, or bake again"])
    try:
        reader.check_frames(f for f in reader.frames if f <= frame)
    except CacheFormatError as exc:
        raise CacheFormatError(f"{exc}. The resume keeps that frame, so it cannot resume from frame {frame}; bake "
                               f"again from the start (the cache was left as it was)") from exc
    return frame, state, manifest


def bake(scene: SceneDescription, settings: settings_mod.SimulationSettings, cache_dir: str,
         progress: Progress | None = None, cancel: Cancel | None = None, checkpoint_every: int = 0,
         resume_from: int | str | None = None, *, run_id: str | None = None, accept_scene_change: bool = False,
         lock: CacheLock | None = None, job_dir: str | None = None, ignore: tuple = ()) -> dict:
    """Bake ``scene`` into ``cache_dir``; the frame at ``scene.frame_start`` is the initial state.

    Every frame is in the cache as soon as it is simulated, so a failure or cancel keeps all
    frames before it. The cache folder's previous bake stays as it was until this one has simulated
    its first frame (:class:`engine.cache.CacheWriter`): a bake refused, failed or cancelled before
    that leaves it untouched. From then on the manifest says how the bake ended ('complete',
    'cancelled' or 'failed') whatever stops it.

    Parameters
    ----------
    checkpoint_every : int
        Save the solver state every this many frames (:mod:`engine.checkpoint`); 0 saves none.
    resume_from : int or 'latest', optional
        Continue the bake already in ``cache_dir`` from its checkpoint at this frame, with
        ``settings`` (which may differ from the earlier ones, see :func:`checkpoint.check_resume`);
        the frames after it are replaced. The manifest's ``segments`` lists which settings baked
        which frames.
    run_id : str, optional
        Id recorded as the manifest's ``run_id`` once this bake replaces the previous one.
    accept_scene_change : bool
        Resume even though the scene's objects changed since the cached frames were baked.
    lock : CacheLock, optional
        The folder's lock, held by the caller; without it the bake takes the lock itself.
    job_dir : str, optional
        The job folder the scene was read from, copied into the cache's ``job/`` once this bake
        replaces the previous one.
    ignore : tuple of str
        Names in a new cache folder that are not foreign (see :func:`engine.cache.check_folder`).

    Returns
    -------
    dict
        ``frames`` (count written), ``particles`` (final count), ``elapsed`` (s), ``substeps``.

    Raises
    ------
    BakeCancelled
        When ``cancel()`` returned True.
    SimulationDivergedError, InvalidSceneError, InvalidSettingsError, CacheFormatError, CacheLockedError,
    ForeignFolderError, OSError
    """
    emit_ = progress or (lambda event: None)
    check_job(scene, settings)
    check_writable(cache_dir)
    own_lock = lock is None
    if own_lock:
        lock = CacheLock(cache_dir, "bake").acquire()
    try:
        if lock.took_over is not None:
            mark_ended(cache_dir, None, "failed", "The bake stopped unexpectedly: its process ended without finishing")
        claim_folder(cache_dir, ignore)
        return _bake_locked(scene, settings, cache_dir, emit_, cancel, checkpoint_every, resume_from,
                            run_id, accept_scene_change, job_dir)
    finally:
        if own_lock:
            lock.release()


def _bake_locked(scene, settings, cache_dir, emit_, cancel, checkpoint_every, resume_from, run_id,
                 accept_scene_change, job_dir) -> dict:
    t0 = time.perf_counter()
    resumed = manifest = None
    if resume_from is not None:
        # every check before the cache changes: a refused resume leaves it as it was
        resume_from, resumed, manifest = _resume_state(scene, settings, cache_dir, resume_from, accept_scene_change,
                                                       emit_)

    sim = Simulation.start(scene, settings, os.path.join(cache_dir, SDF_DIR), emit_, t0)
    solver, sources = sim.solver, sim.sources
    if resumed is not None:
        # colliders and solver model come from the first frame, as in the uninterrupted bake (Auto
        # modes and the automatic speed of sound pick the same); the liquid continues from the checkpoint
        solver = sim.solver = checkpoint.restore(solver, resumed)
        checkpoint.restore_sources(sources, resumed)

    header = cache_header(scene, settings)
    extra = extra_attributes(scene)
    segment = {"from_frame": int(scene.frame_start if resumed is None else resume_from + 1),
               "settings_hash": header["settings_hash"], "scene_hash": header["scene_hash"],
               "settings": header["settings"]}
    first_arrays = solver.particles.frame_arrays() if resumed is None else None
    first = scene.frame_start + 1 if resumed is None else resume_from + 1

    def replace_previous_bake() -> CacheWriter:
        """The first frame is simulated: from here on this bake is the cache folder's."""
        if resumed is None:
            w = CacheWriter(cache_dir, dict(header, segments=[segment]), extra, run_id=run_id)
            w.write_frame(scene.frame_start, first_arrays)
        else:
            earlier = [g for g in manifest.get("segments", []) if g["from_frame"] <= resume_from]
            w = CacheWriter.resume(cache_dir, resume_from, dict(header, segments=earlier + [segment]), run_id=run_id)
        if job_dir is not None:
            jobcheck.record_job(job_dir, cache_dir)
        # the cache now holds this bake's first frames (the initial one, or those a resume keeps):
        # what follows the bake (engine.stages.follow_bake) starts on them here
        emit_({"event": "stage", "stage": "simulate", "elapsed": time.perf_counter() - t0})
        return w

    frame_dt = 1.0 / scene.fps
    total_substeps = 0
    sim_start = time.perf_counter()
    n_frames = scene.frame_end - first + 1
    writer = None
    try:
        for k, frame in enumerate(range(first, scene.frame_end + 1)):
            substeps = sim.advance_frame(frame, frame_dt, cancel, None if writer is not None else
                                         "Bake cancelled before its first frame; the previous bake is kept")
            if writer is None:
                writer = replace_previous_bake()
            writer.write_frame(frame, solver.particles.frame_arrays())
            if checkpoint.is_due(frame, scene.frame_start, checkpoint_every):
                checkpoint.save(cache_dir, frame, solver, sources)
                writer.add_checkpoint(frame)
            total_substeps += substeps
            elapsed = time.perf_counter() - t0
            done = k + 1
            eta = (time.perf_counter() - sim_start) / done * (n_frames - done)
            emit_({"event": "frame", "frame": frame, "frame_start": scene.frame_start,
                   "frame_end": scene.frame_end, "substeps": substeps, "particles": len(solver.particles),
                   "elapsed": round(elapsed, 3), "eta": round(eta, 3), "memory": resident_bytes()})
        if writer is None:  # nothing left to simulate (a resume from the last frame)
            writer = replace_previous_bake()
    except BaseException as exc:
        if writer is not None:
            status = "cancelled" if isinstance(exc, (BakeCancelled, KeyboardInterrupt)) else "failed"
            writer.finish(status, str(exc) or type(exc).__name__)
        raise
    elapsed = time.perf_counter() - t0
    writer.finish("complete", "", elapsed=round(elapsed, 3), substeps=total_substeps)
    return {"frames": len(writer.manifest["frames"]), "particles": len(solver.particles),
            "elapsed": round(elapsed, 3), "substeps": total_substeps}


def bake_job(job_dir: str, cache_dir: str, progress: Progress | None = None, cancel: Cancel | None = None,
             checkpoint_every: int = 0, resume_from: int | str | None = None, **options) -> dict:
    """Read a job folder (see :func:`engine.scene.save_job`) and :func:`bake` it into ``cache_dir``; the
    job is copied into the cache's ``job/`` once the bake replaces the previous one. ``options`` go
    to :func:`bake`."""
    scene, settings = load_job(job_dir)
    return bake(scene, settings, cache_dir, progress=progress, cancel=cancel, checkpoint_every=checkpoint_every,
                resume_from=resume_from, job_dir=job_dir, **options)
