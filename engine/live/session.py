"""The engine side of a live session: a simulation advanced one displayed frame at a time, in real time,
while the host moves colliders and changes settings.

Run by the host as a child process, as a bake is (the same job folder, :mod:`engine.scene`)::

    python -m engine.live.session run JOB_DIR --state NAME --control NAME [--grid-dir DIR] [--parent PID]

It talks through two shared-memory blocks the host created (:mod:`engine.live.channel`): each
finished frame goes into the state block (positions, velocities and ids, double-buffered, with the
frame counter), and before each frame it reads the control block: run or pause, step one frame,
reset to the first frame, save the state for a bake ("Bake From Here"), record the frames into a cache,
the settings that act live (gravity, viscosity, surface tension) and a rest-to-world matrix per mesh
collider. Events for the user (stages, saved states, recordings, errors) go to stdout as JSON lines,
as :mod:`engine.cli` prints them.

The simulation is :class:`engine.driver.Simulation`, the bake's own: the same set-up and the same
substep loop, so a session whose colliders stay put computes the frames a bake computes. What the
session adds:

* **colliders moved while it runs**: before each frame, and again before each of its substeps when the
  host has sent newer poses, every mesh collider is driven from where it stands to the pose the host
  sent, over one frame's time (:meth:`engine.collision.world.CollisionWorld.drive`),
  so the liquid meets it with its velocity, as a collider moving in a bake. A move faster than
  ``collider_substeps`` substeps of :data:`engine.collision.world.MAX_SURFACE_TRAVEL` spacings per frame is
  spread over the next frames (the collider lags behind the mouse instead of stalling the session);
* **pacing**: a frame is simulated once its wall-clock time has come (``1 / fps / speed`` after the
  last), so the liquid moves in real time; a frame that is late is started at once (a session up to
  :data:`CATCH_UP` frames behind catches up), and one that cannot keep up runs in slow motion, with
  the ratio of simulated to wall time in the state block;
* **a particle budget**: the shared buffers hold ``capacity`` particles; inflows stop adding
  particles while it is full (the count dropped is reported).

Exit status: 0 after a stop, 1 when the set-up fails (an error event says why), 2 bad usage.
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import logging
import math
import os
import sys
import time
from typing import Callable

import numpy as np

from ..io import checkpoint
from .. import driver
from .. import assemble
from . import channel as live_channel
from .. import settings as settings_mod
from ..io.cache import CacheLock, CacheWriter, claim_folder
from ..errors import EngineError
from ..scene import SceneDescription, load_job

log = logging.getLogger(__name__)

#: Seconds the loop sleeps at most between two looks at the control block while waiting.
POLL = 0.002

#: Displayed frames a session may fall behind real time and still catch up (by starting the next
#: frames at once). Frames vary: one with an extra substep, or a neighbour list that outgrew its
#: slices, takes up to twice the mean; with a catch-up of one frame such a frame would be lost for good.
CATCH_UP = 3


class LiveSimulation:
    """A :class:`engine.driver.Simulation` that the host steers between frames.

    Parameters
    ----------
    scene : SceneDescription
        As exported for a bake; motion and tracks over a frame range are not used (the host drives
        colliders and settings live), so a live scene carries none.
    settings : SimulationSettings
        What the session simulates with (:func:`engine.settings.live_simulation_settings`).
    capacity : int
        Most particles kept; emission beyond it is dropped.
    collider_substeps : int
        Most substeps a frame spends following a collider's move (see the module docstring).
    """

    def __init__(self, scene: SceneDescription, settings: settings_mod.SimulationSettings, capacity: int,
                 collider_substeps: int = 8, grid_dir: str | None = None, progress=None):
        assemble.check_job(scene, settings)
        self.scene = scene
        self.settings = settings
        self.capacity = int(capacity)
        self.collider_substeps = int(collider_substeps)
        self.frame_dt = 1.0 / float(scene.fps)
        self.sim = driver.Simulation.start(scene, settings, grid_dir, progress)
        if len(self.sim.solver.particles) > self.capacity:
            raise EngineError(f"The liquid starts with {len(self.sim.solver.particles)} particles, more than the live "
                              f"session's Max Particles ({self.capacity}); raise it or the Live Spacing")
        self.frame = 0
        self.dropped = 0
        # the liquid may move as fast as the fastest collider the session lets through; the PBF
        # divergence check must not mistake that for a blow-up
        solver = self.sim.solver
        if hasattr(solver.model, "speed_limit") and solver.collision is not None:
            bound = 10.0 * self.collider_speed_limit()
            if bound > solver.model.speed_limit:
                solver.model = dataclasses.replace(solver.model, speed_limit=bound)

    @property
    def solver(self):
        return self.sim.solver

    @property
    def time(self) -> float:
        return float(self.sim.solver.time)

    def collider_speed_limit(self) -> float:
        """Fastest a collider surface may move, m/s: ``collider_substeps`` substeps of
        :data:`engine.collision.world.MAX_SURFACE_TRAVEL` spacings per frame."""
        from ..collision.world import MAX_SURFACE_TRAVEL

        return MAX_SURFACE_TRAVEL * self.settings.particle_spacing * self.collider_substeps / self.frame_dt

    def set_settings(self, gravity=None, dynamic_viscosity=None, pbf_velocity_smoothing=None, surface_tension=None,
                     pbf_surface_tension=None) -> None:
        """Take on the settings that act live (None keeps a value): they become one-value tracks of
        the scene's animation (:class:`engine.scene.animation.SceneAnimation`), applied at every substep."""
        tracks = self.sim.animation.tracks
        values = {"gravity": gravity, "dynamic_viscosity": dynamic_viscosity,
                  "pbf_velocity_smoothing": pbf_velocity_smoothing, "surface_tension": surface_tension,
                  "pbf_surface_tension": pbf_surface_tension}
        changes = {}
        for name, value in values.items():
            if value is None:
                continue
            arr = np.asarray(value, dtype=np.float64).reshape((1,) + ((3,) if name == "gravity" else ()))
            if not np.all(np.isfinite(arr)):
                continue
            if name not in tracks or not np.array_equal(tracks[name], arr):
                tracks[name] = arr
                if name != "gravity":
                    changes[name] = float(arr[0])
        if changes:
            self.settings = dataclasses.replace(self.settings, **changes)

    def set_colliders(self, matrices: np.ndarray) -> None:
        """Drive every mesh collider to ``matrices[c]`` (rest-to-world, metres) over the next frame, or
        slower when that is faster than :meth:`collider_speed_limit`."""
        collision = self.sim.solver.collision
        if collision is None:
            return
        t = collision.time
        limit = self.collider_speed_limit()
        for c, entry in enumerate(collision.entries):
            if c >= len(matrices) or entry.collider.motion == "DEFORMING":
                continue
            target = matrices[c]
            if entry.driven is not None and np.array_equal(entry.driven[1], target):
                continue  # already heading there (or standing there)
            if entry.driven is None and np.array_equal(target, np.eye(4)):
                continue  # never moved
            collision.drive(c, target, t + self.frame_dt)
            if entry.driven_speed > limit:
                collision.drive(c, target, t + self.frame_dt * entry.driven_speed / limit)

    def advance(self, between_substeps: Callable[[], None] | None = None) -> int:
        """Simulate one displayed frame (1 / fps); returns the substeps it took. ``between_substeps``
        runs before every substep but the first (:meth:`engine.driver.Simulation.advance_frame`)."""
        self.frame += 1
        substeps = self.sim.advance_frame(self.scene.frame_start + self.frame, self.frame_dt,
                                          between_substeps=between_substeps)
        pt = self.sim.solver.particles
        excess = len(pt) - self.capacity
        if excess > 0:
            # the newest particles go: they are the ones an inflow just added
            newest = np.argsort(pt.id, kind="stable")[-excess:]
            mask = np.zeros(len(pt), dtype=bool)
            mask[newest] = True
            self.sim.solver.remove_particles(mask)
            self.dropped += excess
        return substeps

    def arrays(self) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """Positions (N, 3) float32 m, velocities (N, 3) float32 m/s and ids (N,) int32, in the solver's order."""
        pt = self.sim.solver.particles
        return pt.x, pt.v, pt.id

    def save_for_bake(self, cache_dir: str) -> int:
        """Make ``cache_dir`` a cache whose first frame is the current state, with a checkpoint there, so
        that a bake resumed from it (``resume_from=frame_start``) continues from this state; returns
        the frame. The cache's previous frames and checkpoints are replaced (its collider grids are
        kept), holding the folder's lock as a bake does: a folder a bake or stage is writing, or one
        that is not a Surge cache folder, is refused (:func:`claim_cache`)."""
        lock = claim_cache(cache_dir)
        try:
            return self._save_for_bake(cache_dir)
        finally:
            lock.release()

    def _save_for_bake(self, cache_dir: str) -> int:
        scene, settings, solver = self.scene, self.settings, self.sim.solver
        header = driver.cache_header(scene, settings)
        segment = {"from_frame": int(scene.frame_start), "settings_hash": header["settings_hash"],
                   "scene_hash": header["scene_hash"], "settings": header["settings"]}
        writer = CacheWriter(cache_dir, dict(header, segments=[segment]), driver.extra_attributes(scene))
        writer.write_frame(scene.frame_start, solver.particles.frame_arrays())
        # the bake's clock starts at this state: its colliders' motion, animated settings and
        # inflow windows count from its first frame
        clock = solver.time
        solver.time = 0.0
        try:
            checkpoint.save(cache_dir, scene.frame_start, solver, self.sim.sources)
        finally:
            solver.time = clock
        writer.add_checkpoint(scene.frame_start)
        writer.finish("cancelled", "The state of a live session; a bake continues from it")
        return int(scene.frame_start)


def claim_cache(cache_dir: str) -> CacheLock:
    """The lock of ``cache_dir`` (purpose 'live'), taken as a bake takes it, with the folder claimed
    as a Surge cache folder (:func:`engine.io.cache.claim_folder`); the caller releases it.

    Raises
    ------
    CacheLockedError
        When a bake, a stage or another session holds the folder.
    ForeignFolderError
        When the folder holds files but is not a Surge cache folder.
    """
    lock = CacheLock(cache_dir, "live").acquire()
    try:
        claim_folder(cache_dir)
    except BaseException:
        lock.release()
        raise
    return lock


class Recorder:
    """Writes the frames of a live session into a cache (and, given ``usd_dir``, their USD point files),
    as a bake would: the first recorded frame is the scene's first frame."""

    def __init__(self, live: LiveSimulation, cache_dir: str, usd_dir: str | None = None):
        from ..io.usd import PointsWriter

        scene, settings = live.scene, live.settings
        self.cache_dir, self.usd_dir = cache_dir, usd_dir
        header = driver.cache_header(scene, settings)
        header["segments"] = [{"from_frame": int(scene.frame_start), "settings_hash": header["settings_hash"],
                               "scene_hash": header["scene_hash"], "settings": header["settings"]}]
        self.lock = claim_cache(cache_dir)  # held until finish(): no bake or stage writes here meanwhile
        try:
            self.writer = CacheWriter(cache_dir, header, driver.extra_attributes(scene))
        except BaseException:
            self.lock.release()
            raise
        self.points = PointsWriter(usd_dir, 0.5 * settings.particle_spacing) if usd_dir else None
        self.next_frame = int(scene.frame_start)
        self.frames = 0

    def write(self, live: LiveSimulation) -> None:
        arrays = live.solver.particles.frame_arrays()
        self.writer.write_frame(self.next_frame, arrays)
        if self.points is not None:
            self.points(self.next_frame, arrays)
        self.next_frame += 1
        self.frames += 1

    def finish(self) -> dict:
        last = self.next_frame - 1
        try:
            self.writer.finish("complete", "Recorded from a live session", frame_end=last)
        finally:
            self.lock.release()
        return {"event": "recorded", "frames": self.frames, "frame_start": self.next_frame - self.frames,
                "frame_end": last, "cache_dir": self.cache_dir, "usd_dir": self.usd_dir}


class _Ratio:
    """Simulated seconds per wall second over the last second of running."""

    def __init__(self):
        self.samples: list[tuple[float, float]] = []

    def add(self, wall: float, sim: float) -> float:
        self.samples.append((wall, sim))
        while len(self.samples) > 2 and wall - self.samples[1][0] >= 1.0:
            self.samples.pop(0)
        (w0, s0), (w1, s1) = self.samples[0], self.samples[-1]
        return (s1 - s0) / (w1 - w0) if w1 > w0 else 0.0

    def clear(self) -> None:
        self.samples.clear()


def _emit(event: dict) -> None:
    sys.stdout.write(json.dumps(event) + "\n")
    sys.stdout.flush()


def _host_gone(parent: int) -> bool:
    """True once the host process has ended (a crash or a kill that left no time to stop this one)."""
    if not parent:
        return False
    if os.name == "posix":
        return os.getppid() != parent  # an orphan is adopted by another process
    import ctypes  # Windows: ask the system whether the parent's handle has been signalled

    kernel32 = ctypes.windll.kernel32  # type: ignore[attr-defined]
    handle = kernel32.OpenProcess(0x00100000 | 0x1000, False, parent)  # SYNCHRONIZE | QUERY_LIMITED_INFORMATION
    if not handle:
        return True
    try:
        return kernel32.WaitForSingleObject(handle, 0) == 0  # WAIT_OBJECT_0: it has exited
    finally:
        kernel32.CloseHandle(handle)


def run(job_dir: str, state_name: str, control_name: str, *, grid_dir: str | None = None, parent: int = 0,
        speed: float = 1.0, collider_substeps: int = 8, progress=_emit) -> int:
    """The session's loop (see the module docstring); returns the exit status."""
    state = live_channel.StateBlock.open(state_name)
    control = live_channel.ControlBlock.open(control_name)
    h = state.header
    try:
        scene, settings = load_job(job_dir)

        def build() -> LiveSimulation:
            return LiveSimulation(scene, settings, state.capacity, collider_substeps, grid_dir, progress)

        try:
            live = build()
        except (EngineError, OSError, ValueError) as exc:
            h["status"] = live_channel.FAILED
            progress({"event": "error", "error": type(exc).__name__, "message": str(exc)})
            return 1
        return _loop(live, build, state, control, parent, speed, progress)
    finally:
        state.close()
        control.close()


def _publish(live: LiveSimulation, state, control_seq: int, engine_seconds: float, substeps: int,
             engine_cpu: float = 0.0) -> None:
    x, v, ids = live.arrays()
    state.publish(x, v, ids, frame=live.frame, time_=live.time, control=control_seq, engine_seconds=engine_seconds,
                  substeps=substeps, engine_cpu=engine_cpu)
    state.header["dropped"] = live.dropped


def next_due(due: float | None, t0: float, t1: float, wall_dt: float) -> float:
    """Wall time the next frame is due, for a frame that was due at ``due`` (None: the first after a
    start, reset or pause), started at ``t0`` and finished at ``t1``, with ``wall_dt`` of wall time per
    frame. Real time: one frame after this one was due. A session behind by up to :data:`CATCH_UP`
    frames starts the next at once and catches up; one further behind stays behind by that much (slow
    motion, never a burst of frames after a long stall)."""
    if due is None:
        return t0 + wall_dt
    return max(due + wall_dt, t1 - CATCH_UP * wall_dt)


def _loop(live: LiveSimulation, build, state, control, parent: int, speed: float, progress) -> int:
    h = state.header
    ctl = control.snapshot() or {}
    # the host's counters start at 0 with the block: commands sent while this process started up
    # (a step, a reset) are still to do
    for name in ("step", "reset", "snapshot", "record"):
        h[f"{name}_done"] = 0
    _publish(live, state, int(ctl.get("seq", 0)), 0.0, 0)
    progress({"event": "stage", "stage": "live", "particles": len(live.solver.particles)})
    recorder: Recorder | None = None
    ratio = _Ratio()
    wall_dt = live.frame_dt / max(speed, 1e-6)
    due = None          # wall time the next frame is due (None: at once)
    failed = False
    try:
        while True:
            ctl = control.snapshot()
            if ctl is None:
                time.sleep(POLL)
                continue
            if ctl["stop"] or _host_gone(parent):
                break
            if ctl["reset"] != h["reset_done"]:
                h["reset_done"] = ctl["reset"]
                if recorder is not None:
                    progress(recorder.finish())
                    recorder = None
                try:
                    live = build()
                    failed = False
                except (EngineError, OSError, ValueError) as exc:
                    failed = True
                    h["status"] = live_channel.FAILED
                    progress({"event": "error", "error": type(exc).__name__, "message": str(exc)})
                    continue
                h["step_done"] = ctl["step"]
                ratio.clear()
                due = None
                _publish(live, state, int(ctl["seq"]), 0.0, 0)
                progress({"event": "reset", "particles": len(live.solver.particles)})
                continue
            if ctl["snapshot"] != h["snapshot_done"]:
                h["snapshot_done"] = ctl["snapshot"]
                progress(_save(live, ctl["text"]))
            if ctl["recording"] and ctl["record"] != h["record_done"]:
                h["record_done"] = ctl["record"]
                if recorder is not None:
                    progress(recorder.finish())
                recorder = _start_recording(live, ctl["text"], progress)
                h["recorded"] = recorder.frames if recorder is not None else 0
            elif not ctl["recording"] and recorder is not None:
                progress(recorder.finish())
                recorder = None
            if failed:
                time.sleep(10 * POLL)
                continue
            live.set_settings(gravity=ctl["gravity"], dynamic_viscosity=ctl["dynamic_viscosity"],
                              pbf_velocity_smoothing=ctl["pbf_velocity_smoothing"],
                              surface_tension=ctl["surface_tension"], pbf_surface_tension=ctl["pbf_surface_tension"])
            live.set_colliders(ctl["matrices"][: ctl["n_colliders"]])
            if ctl["speed"] > 0.0:
                wall_dt = live.frame_dt / ctl["speed"]
            stepping = ctl["step"] > h["step_done"]
            if ctl["paused"] and not stepping:
                h["status"] = live_channel.PAUSED
                ratio.clear()
                due = None
                time.sleep(5 * POLL)
                continue
            now = time.perf_counter()
            if not stepping and due is not None and now < due:
                time.sleep(min(due - now, POLL))
                continue  # read the control block again just before the frame: the newest collider poses
            h["status"] = live_channel.RUNNING
            t0 = time.perf_counter()
            c0 = time.process_time()
            applied = [int(ctl["seq"])]

            def newest_poses(live=live, applied=applied):
                # a collider moved while this frame is simulated acts from the next substep on, so that
                # the frame published next already shows it (latency one displayed frame less)
                newer = control.snapshot(tries=1)
                if newer is not None and int(newer["seq"]) != applied[0] and not newer["stop"]:
                    live.set_colliders(newer["matrices"][: newer["n_colliders"]])
                    applied[0] = int(newer["seq"])

            try:
                substeps = live.advance(newest_poses)
            except EngineError as exc:
                failed = True
                h["status"] = live_channel.FAILED
                progress({"event": "error", "error": type(exc).__name__,
                          "message": f"{exc} Press Reset to start the live session again."})
                continue
            t1 = time.perf_counter()
            if stepping:
                h["step_done"] = h["step_done"] + 1
            _publish(live, state, applied[0], t1 - t0, substeps, time.process_time() - c0)
            if recorder is not None:
                recorder.write(live)
                h["recorded"] = recorder.frames
            h["ratio"] = ratio.add(t1, live.time)
            due = next_due(due, t0, t1, wall_dt)
    finally:
        if recorder is not None:
            progress(recorder.finish())
    h["status"] = live_channel.STOPPED
    progress({"event": "done", "status": "stopped", "frames": live.frame})
    return 0


def _save(live: LiveSimulation, text: str) -> dict:
    try:
        cache_dir = json.loads(text)["cache_dir"]
        frame = live.save_for_bake(cache_dir)
    except (EngineError, OSError, ValueError, KeyError) as exc:
        return {"event": "error", "error": type(exc).__name__,
                "message": f"The live state could not be saved for a bake: {exc}"}
    return {"event": "saved", "cache_dir": cache_dir, "frame": frame, "live_frame": live.frame,
            "particles": len(live.solver.particles)}


def _start_recording(live: LiveSimulation, text: str, progress) -> Recorder | None:
    try:
        folders = json.loads(text)
        recorder = Recorder(live, folders["cache_dir"], folders.get("usd_dir"))
        recorder.write(live)  # the frame on screen when Record was pressed is the first
    except (EngineError, OSError, ValueError, KeyError) as exc:
        progress({"event": "error", "error": type(exc).__name__, "message": f"Recording could not start: {exc}"})
        return None
    progress({"event": "recording", "cache_dir": recorder.cache_dir})
    return recorder


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m engine.live.session", description="Surge live session engine")
    sub = parser.add_subparsers(dest="command", required=True)
    r = sub.add_parser("run", help="simulate a job folder live through shared memory")
    r.add_argument("job_dir")
    r.add_argument("--state", required=True, help="name of the state block (shared memory)")
    r.add_argument("--control", required=True, help="name of the control block (shared memory)")
    r.add_argument("--grid-dir", default=None, help="folder of cached collider distance grids")
    r.add_argument("--parent", type=int, default=0, help="the host's process id: exit when it is gone")
    r.add_argument("--speed", type=float, default=1.0, help="simulated seconds per wall second (1: real time)")
    r.add_argument("--collider-substeps", type=int, default=8)
    r.add_argument("--quiet", action="store_true")
    args = parser.parse_args(argv)
    if not (args.speed > 0.0 and math.isfinite(args.speed)) or args.collider_substeps < 1:
        parser.error("--speed must be positive and --collider-substeps at least 1")
    logging.basicConfig(level=logging.WARNING if args.quiet else logging.INFO, stream=sys.stderr,
                        format="%(levelname)s %(name)s: %(message)s")
    try:
        return run(args.job_dir, args.state, args.control, grid_dir=args.grid_dir, parent=args.parent,
                   speed=args.speed, collider_substeps=args.collider_substeps)
    except (EngineError, OSError, ValueError) as exc:
        _emit({"event": "error", "error": type(exc).__name__, "message": str(exc)})
        return 1


if __name__ == "__main__":
    sys.exit(main())
