"""The frame loop: the only place that advances a simulation over frames and writes the cache.

``bake_job`` reads a job folder and bakes it; ``bake`` does the same from objects in memory. What a
simulation is built from (the checks before a bake, the first particles, colliders, solver and
sources) is in :mod:`engine.assemble`.
Progress goes through a callback (one dict per event, see :mod:`engine.cli`), cancellation
through a callable polled between substeps.
"""

from __future__ import annotations

import logging
import math
import os
import time
from typing import Callable


from . import __version__
from .assemble import Sources, make_solver, check_job, fill_fluids, make_collision, remove_inside_colliders
from .scene import jobcheck
from .scene.hints import scene_warnings
from .io import checkpoint
from . import settings as settings_mod
from .io.cache import SDF_DIR, CacheLock, CacheReader, CacheWriter, check_writable, claim_folder, mark_ended
from .errors import (BakeCancelled, BakeStopped, CacheFormatError, FileWriteError, InvalidSceneError,
                     SimulationDivergedError)
from .io.child import frames_left_time, resident_bytes
from .scene import SceneDescription, channel_names, load_job, scene_hash

log = logging.getLogger(__name__)

Progress = Callable[[dict], None]
Cancel = Callable[[], bool]


def _check_state(solver, frame: int) -> None:
    """Raise SimulationDivergedError if a position or velocity is not finite or a particle is far
    faster than the time step allows; called after every substep, so a blow-up is caught while the
    frames before it are intact (the message names the frame being computed)."""
    from .core.state_check import max_speed  # numba: imported only when baking

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
    (:mod:`engine.live.session`) advances the same way, one displayed frame at a time.
    """

    def __init__(self, scene: SceneDescription, settings: settings_mod.SimulationSettings, solver, sources: Sources,
                 animation, forces, bodies=None):
        self.scene = scene
        #: the rigid bodies (:class:`engine.rigid.world.RigidWorld`), or None without any
        self.bodies = bodies
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
        if scene.colliders or scene.bodies:
            emit_({"event": "stage", "stage": "colliders", "elapsed": round(time.perf_counter() - t0, 3)})
            collision = make_collision(scene, settings, particles.x, grid_dir, emit_)
            particles, level = remove_inside_colliders(particles, collision, scene, settings, level)
        sources = Sources(scene, settings)
        emit_({"event": "stage", "stage": "compile", "elapsed": round(time.perf_counter() - t0, 3)})
        solver = make_solver(scene, settings, particles, collision, level)
        from .scene.animation import SceneAnimation
        from .sources.forces import Forces

        bodies = None
        if scene.bodies:
            from .rigid.world import RigidWorld

            bodies = RigidWorld.from_scene(scene, settings, collision)
        return cls(scene, settings, solver, sources, SceneAnimation(scene, solver), Forces(scene), bodies)

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
            dt = min(solver.stable_dt(), sources.dt_limit(solver.time), remaining,
                     self.bodies.dt_limit() if self.bodies is not None else math.inf)
            n_left = math.ceil(remaining / dt - 1e-9)
            dt = remaining / n_left  # equal substeps that land exactly on the frame time
            t_step = solver.time
            # animated settings at the substep's middle, then the force fields' kick
            self.animation.apply(solver, t_step + 0.5 * dt)
            self.forces.kick(solver, t_step, dt)
            if self.bodies is not None:
                # the bodies move first; the liquid's substep sees them where they end it, and pushes back
                self.bodies.advance(solver, self.forces, t_step, dt)
            solver.step(dt)
            if self.bodies is not None:
                self.bodies.take_reaction()
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
    """The manifest header of a cache of ``scene`` baked with ``settings`` (see :mod:`engine.io.cache`)."""
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
    """The attributes a cache of ``scene`` holds beyond the built-in ones (see :mod:`engine.io.cache`)."""
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
    its first frame (:class:`engine.io.cache.CacheWriter`): a bake refused, failed or cancelled before
    that leaves it untouched. From then on the manifest says how the bake ended ('complete',
    'cancelled' or 'failed') whatever stops it.

    Parameters
    ----------
    checkpoint_every : int
        Save the solver state every this many frames (:mod:`engine.io.checkpoint`); 0 saves none.
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
        Names in a new cache folder that are not foreign (see :func:`engine.io.cache.check_folder`).

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
    for text in scene_warnings(scene):
        emit_({"event": "warning", "message": text})
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
        if sim.bodies is not None:
            checkpoint.restore_bodies(sim.bodies, resumed)

    header = cache_header(scene, settings)
    records = {}
    if sim.bodies is not None:
        from .rigid.trajectory import RECORDS

        header["rigid_bodies"] = sim.bodies.manifest()
        records = RECORDS
    extra = extra_attributes(scene)
    segment = {"from_frame": int(scene.frame_start if resumed is None else resume_from + 1),
               "settings_hash": header["settings_hash"], "scene_hash": header["scene_hash"],
               "settings": header["settings"]}

    def frame_arrays() -> dict:
        arrays = solver.particles.frame_arrays()
        if sim.bodies is not None:
            arrays.update(sim.bodies.frame_records())
        return arrays

    first_arrays = frame_arrays() if resumed is None else None
    first = scene.frame_start + 1 if resumed is None else resume_from + 1

    def replace_previous_bake(frames: dict) -> CacheWriter:
        """The first frame is simulated: from here on this bake is the cache folder's. ``frames`` (frame ->
        arrays) are on disk before the previous bake changes, so a write failure (a full disk) leaves it
        as it was."""
        try:
            if resumed is None:
                w = CacheWriter(cache_dir, dict(header, segments=[segment]), extra, run_id=run_id,
                                first_frames={scene.frame_start: first_arrays, **frames}, records=records)
            else:
                earlier = [g for g in manifest.get("segments", []) if g["from_frame"] <= resume_from]
                w = CacheWriter.resume(cache_dir, resume_from, dict(header, segments=earlier + [segment]),
                                       run_id=run_id, first_frames=frames)
        except OSError as exc:
            raise FileWriteError(exc.errno, f"{exc}. Nothing of the previous bake in '{cache_dir}' was changed: "
                                            f"it is kept") from exc
        if job_dir is not None:
            jobcheck.record_job(job_dir, cache_dir)
        # the cache now holds this bake's first frames (the initial one, or those a resume keeps):
        # what follows the bake (engine.stages.follow_bake) starts on them here
        emit_({"event": "stage", "stage": "simulate", "elapsed": time.perf_counter() - t0})
        return w

    frame_dt = 1.0 / scene.fps
    total_substeps = 0
    first_done = None  # when the first frame ended: it carries the kernels' compile, so it times nothing
    n_frames = scene.frame_end - first + 1
    writer = None
    # (frame, checkpoint arrays) of the last frame written when it is not a checkpoint frame: a bake
    # stopped in the middle of the next frame writes it as a checkpoint, so it resumes exactly there
    last_state = None
    try:
        for k, frame in enumerate(range(first, scene.frame_end + 1)):
            substeps = sim.advance_frame(frame, frame_dt, cancel, None if writer is not None else
                                         "Bake cancelled before its first frame; the previous bake is kept")
            arrays = frame_arrays()
            if writer is None:
                writer = replace_previous_bake({frame: arrays})
            else:
                writer.write_frame(frame, arrays)
            last_state = None
            if checkpoint.is_due(frame, scene.frame_start, checkpoint_every):
                checkpoint.save(cache_dir, frame, solver, sources, sim.bodies)
                writer.add_checkpoint(frame)
            elif checkpoint_every > 0 and frame < scene.frame_end:
                last_state = (frame, checkpoint.state(frame, solver, sources, copy=True, bodies=sim.bodies))
            total_substeps += substeps
            elapsed = time.perf_counter() - t0
            done = k + 1
            emit_({"event": "frame", "frame": frame, "frame_start": scene.frame_start,
                   "frame_end": scene.frame_end, "substeps": substeps, "particles": len(solver.particles),
                   "elapsed": round(elapsed, 3), "eta": frames_left_time(first_done, done, n_frames),
                   "memory": resident_bytes()})
            if first_done is None:
                first_done = time.perf_counter()
        if writer is None:  # nothing left to simulate (a resume from the last frame)
            writer = replace_previous_bake({})
    except BaseException as exc:
        if writer is not None:
            stopped = isinstance(exc, (BakeCancelled, KeyboardInterrupt))
            message = str(exc) or type(exc).__name__
            if stopped and last_state is not None:
                message += _checkpoint_at_stop(cache_dir, writer, *last_state)
            writer.finish("stopped" if isinstance(exc, BakeStopped) else "cancelled" if stopped else "failed",
                          message)
        raise
    elapsed = time.perf_counter() - t0
    writer.finish("complete", "", elapsed=round(elapsed, 3), substeps=total_substeps)
    return {"frames": len(writer.manifest["frames"]), "particles": len(solver.particles),
            "elapsed": round(elapsed, 3), "substeps": total_substeps}


def _checkpoint_at_stop(cache_dir: str, writer: CacheWriter, frame: int, arrays: dict) -> str:
    """Write the checkpoint of the last frame of a bake that was stopped (cancelled, or its parent went
    away) and list it; returns words for the manifest's message. A failure to write it is logged, not
    raised: the frames stay, and the resume starts from the checkpoint before."""
    try:
        checkpoint.write(cache_dir, frame, arrays)
        writer.add_checkpoint(frame)
    except OSError as exc:
        log.warning("the checkpoint at frame %d of the stopped bake could not be written: %s", frame, exc)
        return ""
    return f"; a checkpoint at frame {frame} resumes it from there"


def bake_job(job_dir: str, cache_dir: str, progress: Progress | None = None, cancel: Cancel | None = None,
             checkpoint_every: int = 0, resume_from: int | str | None = None, **options) -> dict:
    """Read a job folder (see :func:`engine.scene.save_job`) and :func:`bake` it into ``cache_dir``; the
    job is copied into the cache's ``job/`` once the bake replaces the previous one. ``options`` go
    to :func:`bake`."""
    scene, settings = load_job(job_dir)
    return bake(scene, settings, cache_dir, progress=progress, cancel=cancel, checkpoint_every=checkpoint_every,
                resume_from=resume_from, job_dir=job_dir, **options)
