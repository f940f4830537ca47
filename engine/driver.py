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
from . import budget, checkpoint
from . import settings as settings_mod
from .cache import SDF_DIR, CacheReader, CacheWriter, check_writable, clear
from .errors import BakeCancelled, InvalidSceneError, SimulationDivergedError
from .memory import resident_bytes
from .particles import Particles
from .scene import SceneDescription, load_job, scene_hash

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
    return budget.check_particle_budget(scene, settings.particle_spacing)


def initial_particles(scene: SceneDescription, settings: settings_mod.SimulationSettings) -> Particles:
    """Fill every FLUID volume with particles at the spacing; ids in object order."""
    from . import emit  # numba: imported only when baking, so check_job stays cheap for the host

    xs, vs = [], []
    problems = []
    for f in scene.fluids:
        pts = emit.fill_volume(f.mesh, settings.particle_spacing)
        if len(pts) == 0:
            problems.append(f"Fluid '{f.name}' holds no particle at spacing {settings.particle_spacing:g} m: "
                            f"it is open, flat or thinner than the spacing")
        xs.append(pts)
        vs.append(np.broadcast_to(f.velocity, pts.shape))
    if problems:
        raise InvalidSceneError(problems)
    x = np.concatenate(xs) if xs else np.zeros((0, 3))
    v = np.concatenate(vs) if vs else np.zeros((0, 3))
    return Particles.create(x, v, settings.rest_density)


def kernel_support(settings: settings_mod.SimulationSettings) -> float:
    """Interaction radius 2h of the chosen solver, m."""
    if settings.solver == "PBF":
        from .solvers import pbf

        return 2.0 * pbf.H_FACTOR * settings.particle_spacing
    return 2.0 * settings.smoothing_length_factor * settings.particle_spacing


def make_collision(scene: SceneDescription, settings: settings_mod.SimulationSettings, liquid: np.ndarray,
                   grid_dir: str | None = None, progress: Progress | None = None):
    """The :class:`engine.collision.CollisionWorld` of the scene's mesh colliders, or None without any."""
    if not scene.colliders:
        return None
    from .collision import CollisionWorld

    return CollisionWorld(scene.colliders, liquid, dx=settings.particle_spacing, support=kernel_support(settings),
                          cell_factor=settings.collider_cell_size, fps=scene.fps, grid_dir=grid_dir,
                          progress=progress)


def remove_inside_colliders(particles: Particles, collision, scene: SceneDescription,
                            settings: settings_mod.SimulationSettings) -> Particles:
    """Drop initial particles that lie inside a collider's solid (a fluid overlapping an obstacle)."""
    if collision is None or len(particles) == 0:
        return particles
    inside = collision.inside(particles.x)
    if not inside.any():
        return particles
    if inside.all():
        names = ", ".join(f"'{c.name}'" for c in scene.colliders)
        raise InvalidSceneError(f"Every particle of the liquid starts inside the solid of a collider ({names}); "
                                f"move the fluid objects out of it or change the collider's mode")
    keep = ~inside
    log.info("removed %d particles that start inside colliders", int(inside.sum()))
    return Particles.create(particles.x[keep], particles.v[keep], settings.rest_density)


def _make_solver(scene: SceneDescription, settings: settings_mod.SimulationSettings, particles: Particles,
                 collision=None):
    from .solvers import wcsph

    boxes = np.array([[c.lower, c.upper] for c in scene.containers], dtype=np.float64).reshape(-1, 2, 3)
    friction = np.array([c.settings.friction for c in scene.containers], dtype=np.float64)
    bounce = np.array([c.settings.bounce for c in scene.containers], dtype=np.float64)
    collider_speed = collision.max_speed() if collision is not None else 0.0
    if settings.solver == "PBF":
        from .solvers import pbf

        # Same bound as WCSPH with its automatic sound speed: 50 times the fastest free-fall speed.
        limit = 5.0 * wcsph.auto_sound_speed(particles.x, particles.v, scene.gravity, boxes, collider_speed)
        model = pbf.make_model(dx=settings.particle_spacing, rho0=settings.rest_density,
                               iterations=settings.pbf_iterations,
                               tolerance=settings.pbf_density_tolerance / 100.0, beta=settings.pbf_stiffness,
                               xsph=settings.pbf_xsph_viscosity, kappa=settings.pbf_surface_tension,
                               gravity=scene.gravity, boxes=boxes, friction=friction, bounce=bounce,
                               cfl=settings.pbf_cfl_number, max_dt=settings.pbf_time_step, speed_limit=limit)
        log.info("PBF: %d particles, h=%.4g m, mass=%.4g kg, %d iterations", len(particles), model.h,
                 model.level_mass[0], model.iterations)
        return pbf.PBFSolver(model, particles, collision=collision)
    c0 = settings.sound_speed or wcsph.auto_sound_speed(particles.x, particles.v, scene.gravity, boxes,
                                                         collider_speed)
    model = wcsph.make_model(dx=settings.particle_spacing, h_factor=settings.smoothing_length_factor,
                             rho0=settings.rest_density, c0=c0, alpha=settings.artificial_viscosity,
                             nu=settings.viscosity, gravity=scene.gravity, boxes=boxes,
                             friction=friction, bounce=bounce, cfl=settings.cfl_number)
    log.info("WCSPH: %d particles, h=%.4g m, c0=%.4g m/s, mass=%.4g kg", len(particles), model.h, c0, model.mass)
    return wcsph.WCSPHSolver(model, particles, collision=collision)


def _speed_limit(solver, settings: settings_mod.SimulationSettings) -> tuple[float, str]:
    """Speed above which a solver has diverged, m/s, and advice an artist can act on."""
    if solver.name == "WCSPH":
        return (5.0 * solver.model.c0,
                f"more than five times the speed of sound ({solver.model.c0:.3g} m/s). Lower the CFL number "
                f"(now {settings.cfl_number:g}) or raise the speed of sound.")
    return (solver.speed_limit,
            f"more than {solver.speed_limit:.3g} m/s, fifty times the fastest free fall the scene allows. "
            f"Lower the PBF Max Substep (now {settings.pbf_time_step:g} s) or raise the PBF Iterations.")


def _check_state(solver, frame: int, settings: settings_mod.SimulationSettings) -> None:
    """Raise SimulationDivergedError if a position or velocity is not finite or a particle is far
    faster than the time step allows; called after every substep, so a blow-up is caught while the
    frames before it are intact (the message names the frame being computed)."""
    pt = solver.particles
    if not (np.all(np.isfinite(pt.x)) and np.all(np.isfinite(pt.v))):
        advice = (f"Lower the CFL number (now {settings.cfl_number:g}) or raise the speed of sound."
                  if solver.name == "WCSPH" else
                  f"Lower the PBF Max Substep (now {settings.pbf_time_step:g} s) or the PBF Stiffness.")
        raise SimulationDivergedError(
            f"The simulation became unstable at frame {frame} (non-finite positions or velocities). {advice}")
    vmax = float(np.sqrt(np.max(np.einsum("ij,ij->i", pt.v, pt.v)))) if len(pt) else 0.0
    limit, advice = _speed_limit(solver, settings)
    if vmax > limit:
        raise SimulationDivergedError(
            f"The simulation became unstable at frame {frame}: a particle moves at {vmax:.3g} m/s, {advice}")


def bake(scene: SceneDescription, settings: settings_mod.SimulationSettings, cache_dir: str,
         progress: Progress | None = None, cancel: Cancel | None = None, checkpoint_every: int = 0,
         resume_from: int | None = None) -> dict:
    """Bake ``scene`` into ``cache_dir``; the frame at ``scene.frame_start`` is the initial state.

    Every frame is in the cache as soon as it is simulated, so a failure or cancel keeps all
    frames before it.

    Parameters
    ----------
    checkpoint_every : int
        Save the solver state every this many frames (:mod:`engine.checkpoint`); 0 saves none.
    resume_from : int, optional
        Continue the bake already in ``cache_dir`` from its checkpoint at this frame, with
        ``settings`` (which may differ from the earlier ones, see :func:`checkpoint.check_resume`);
        the frames after it are replaced. The manifest's ``segments`` lists which settings baked
        which frames.

    Returns
    -------
    dict
        ``frames`` (count written), ``particles`` (final count), ``elapsed`` (s), ``substeps``.

    Raises
    ------
    BakeCancelled
        When ``cancel()`` returned True (the manifest says 'cancelled').
    SimulationDivergedError, InvalidSceneError, InvalidSettingsError, OSError
    """
    emit_ = progress or (lambda event: None)
    t0 = time.perf_counter()
    check_job(scene, settings)
    check_writable(cache_dir)
    resumed = None
    if resume_from is not None:
        # every check before the cache changes: a refused resume leaves it as it was
        manifest = CacheReader(cache_dir).manifest
        if resume_from not in checkpoint.resumable_frames(cache_dir):
            raise InvalidSceneError(f"The cache '{cache_dir}' has no checkpoint at frame {resume_from} with every "
                                    f"frame before it; checkpoints: {checkpoint.resumable_frames(cache_dir) or 'none'}")
        checkpoint.check_resume(manifest, resume_from, settings_mod.to_dict(settings), scene.frame_start, scene.fps,
                                "Scene")
        resumed = checkpoint.load(cache_dir, resume_from)

    emit_({"event": "stage", "stage": "fill", "elapsed": 0.0})
    particles = initial_particles(scene, settings)
    collision = None
    if scene.colliders:
        emit_({"event": "stage", "stage": "colliders", "elapsed": time.perf_counter() - t0})
        collision = make_collision(scene, settings, particles.x, os.path.join(cache_dir, SDF_DIR), emit_)
        particles = remove_inside_colliders(particles, collision, scene, settings)
    emit_({"event": "stage", "stage": "compile", "elapsed": time.perf_counter() - t0})
    solver = _make_solver(scene, settings, particles, collision)
    if resumed is not None:
        # colliders and solver model come from the first frame, as in the uninterrupted bake (Auto
        # modes and the automatic speed of sound pick the same); the liquid continues from the checkpoint
        solver = checkpoint.restore(solver, resumed)

    header = {
        "engine_version": __version__,
        "solver": settings.solver,
        "settings": settings_mod.to_dict(settings),
        "settings_hash": settings_mod.settings_hash(settings),
        "scene_hash": scene_hash(scene),
        "frame_start": int(scene.frame_start),
        "frame_end": int(scene.frame_end),
        "fps": float(scene.fps),
        "particle_spacing": float(settings.particle_spacing),
        "particle_radius": 0.5 * float(settings.particle_spacing),
    }
    segment = {"from_frame": int(scene.frame_start if resumed is None else resume_from + 1),
               "settings_hash": header["settings_hash"], "scene_hash": header["scene_hash"],
               "settings": header["settings"]}
    if resumed is None:
        clear(cache_dir)  # only now: a bake refused above leaves the previous cache untouched
        writer = CacheWriter(cache_dir, dict(header, segments=[segment]))
        writer.write_frame(scene.frame_start, solver.particles.frame_arrays())
        first = scene.frame_start + 1
    else:
        earlier = [g for g in manifest.get("segments", []) if g["from_frame"] <= resume_from]
        checkpoint.remove_after(cache_dir, resume_from)
        writer = CacheWriter.resume(cache_dir, resume_from, dict(header, segments=earlier + [segment]))
        first = resume_from + 1
    emit_({"event": "stage", "stage": "simulate", "elapsed": time.perf_counter() - t0})

    frame_dt = 1.0 / scene.fps
    total_substeps = 0
    sim_start = time.perf_counter()
    n_frames = scene.frame_end - first + 1
    try:
        for k, frame in enumerate(range(first, scene.frame_end + 1)):
            remaining = frame_dt
            substeps = 0
            while remaining > 1e-12 * frame_dt:
                if cancel is not None and cancel():
                    raise BakeCancelled(f"Bake cancelled at frame {frame}; frames up to {frame - 1} are kept")
                dt = solver.stable_dt()
                n_left = math.ceil(remaining / dt - 1e-9)
                dt = remaining / n_left  # equal substeps that land exactly on the frame time
                solver.step(dt)
                remaining -= dt
                substeps += 1
                _check_state(solver, frame, settings)
                if substeps > settings.max_substeps:
                    raise SimulationDivergedError(
                        f"Frame {frame} needed more than {settings.max_substeps} substeps (Max Substeps). The "
                        f"liquid is moving too fast for the particle spacing; raise Max Substeps or the spacing.")
            writer.write_frame(frame, solver.particles.frame_arrays())
            if checkpoint.is_due(frame, scene.frame_start, checkpoint_every):
                checkpoint.save(cache_dir, frame, solver)
            total_substeps += substeps
            elapsed = time.perf_counter() - t0
            done = k + 1
            eta = (time.perf_counter() - sim_start) / done * (n_frames - done)
            emit_({"event": "frame", "frame": frame, "frame_start": scene.frame_start,
                   "frame_end": scene.frame_end, "substeps": substeps, "particles": len(solver.particles),
                   "elapsed": round(elapsed, 3), "eta": round(eta, 3), "memory": resident_bytes()})
    except BakeCancelled as exc:
        writer.finish("cancelled", str(exc))
        raise
    except SimulationDivergedError as exc:
        writer.finish("failed", str(exc))
        raise
    elapsed = time.perf_counter() - t0
    writer.finish("complete", "", elapsed=round(elapsed, 3), substeps=total_substeps)
    return {"frames": len(writer.manifest["frames"]), "particles": len(solver.particles),
            "elapsed": round(elapsed, 3), "substeps": total_substeps}


def bake_job(job_dir: str, cache_dir: str, progress: Progress | None = None, cancel: Cancel | None = None,
             checkpoint_every: int = 0, resume_from: int | None = None) -> dict:
    """Read a job folder (see :func:`engine.scene.save_job`) and :func:`bake` it into ``cache_dir``."""
    scene, settings = load_job(job_dir)
    return bake(scene, settings, cache_dir, progress=progress, cancel=cancel, checkpoint_every=checkpoint_every,
                resume_from=resume_from)
