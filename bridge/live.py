"""A live session: the liquid simulated in a child process while the artist works, shown from a timer.

Starting one (:func:`start`) does what a bake does before its child starts: export the scene at its
first frame (:func:`bridge.export.export_scene`, so a set-up a bake refuses is refused with the same
message), let the engine check it (:func:`engine.assemble.check_job`), write the job folder; then it
creates the two shared-memory blocks of :mod:`engine.live.channel` and starts ``python -m
engine.live.session run`` through :class:`bridge.process.BakeProcess`, the bake's own process wrapper. The
live scene is the exported one without motion over the frame range: colliders are posed live.

A timer (``bpy.app.timers``, no frame-change handler) calls :func:`update` up to
:data:`TIMER_INTERVAL` apart. Each update (:meth:`LiveSession.update`):

* reads the child's events (stages, errors, saved states, recordings);
* writes the control block: each mesh collider's matrix now relative to its pose at the start
  (rest-to-world, metres; grabbed with the mouse, keyframes playing or a script), the settings that
  act live (gravity, viscosity, surface tension, speed) and a heartbeat;
* restarts the session, with a message, when a setting that cannot change live changed, or an
  object other than a collider moved or changed role or settings (after :data:`RESTART_DELAY` of
  quiet, so dragging a slider restarts once);
* copies the newest frame from the state block into the *Surge Live* object (``bridge.live_display``).

Sessions end cleanly however Blender lets go of them: :func:`stop`, the Esc key or the button, a
file being loaded (``load_pre``), the add-on being disabled (``unregister``) and Blender quitting
(``atexit``) all stop the child (asking first, killing after :data:`STOP_TIMEOUT`) and unlink both
shared-memory segments.

Sessions are kept by scene key (the scene's ``session_uid``, :func:`bridge.bake_state.scene_key`: it
survives renaming) in a module-level registry, never by Blender pointer (undo can reallocate Blender data
between two updates).
"""

from __future__ import annotations

import atexit
import dataclasses
import json
import logging
import os
import shutil
import sys
import tempfile
import time

import bpy
import numpy as np

from ..engine.live import channel as live_channel
from ..engine import settings as settings_mod
from ..engine.errors import EngineError, InvalidSceneError
from ..engine.scene import save_job, scene_hash
from . import bake_state, export, files, live_display, preferences, usd
from .paths import ADDON_ROOT, numba_cache_dir
from .progress_text import describe
from .process import BakeProcess

log = logging.getLogger(__name__)

#: Seconds between two timer updates: faster than any display rate worth having, so the update that
#: copies a frame comes at most this long after the engine published it.
TIMER_INTERVAL = 1.0 / 120.0

#: Seconds a stopping engine gets to exit after the stop request before it is killed (it looks at the
#: control block between substeps' frames; a frame of a heavy scene can take a while).
STOP_TIMEOUT = 5.0

#: Seconds a change that needs a restart must stay unchanged before the session restarts.
RESTART_DELAY = 0.4

#: Seconds to wait for the engine to save its state for Bake From Here.
SAVE_TIMEOUT = 60.0

_sessions: dict[str, "LiveSession"] = {}


class LiveError(EngineError):
    """A live session could not start or do what was asked."""


def live_settings(scene) -> settings_mod.LiveSettings:
    """The scene's live settings (``Scene.surge_live``) as the engine's dataclass."""
    group = scene.surge_live
    values = {}
    for p in settings_mod.live_parameters():
        value = getattr(group, p.name)
        values[p.name] = (export.float32_to_float(value) if p.kind is float else p.kind(value))
    return settings_mod.LiveSettings(**values)


def display_options(scene) -> dict:
    """How the live liquid is drawn: the live display settings, and where its surface meets the colliders (the
    scene's surface settings Mesh Against Colliders, Meet Colliders and Collider Offset, as the baked surface)."""
    group, surge = scene.surge_live, scene.surge
    return {"surface": group.show_surface, "surface_radius": export.float32_to_float(group.surface_radius),
            "smoothness": int(group.surface_smoothness), "use_colliders": bool(surge.surface_use_colliders),
            "collider_mode": surge.surface_collider_mode,
            "collider_offset": export.float32_to_float(surge.surface_collider_offset)}


def live_scene(description):
    """The exported scene without motion or animated values over the frame range (a live session
    poses colliders as they are and reads settings as they are set)."""
    def still(obj):
        changes = {"tracks": {}}
        if hasattr(obj, "transforms"):
            changes.update(transforms=None, frame_vertices=None)
        return dataclasses.replace(obj, **changes)

    return dataclasses.replace(
        description, tracks={}, colliders=[still(c) for c in description.colliders],
        containers=[still(c) for c in description.containers], inflows=[still(f) for f in description.inflows],
        outflows=[still(f) for f in description.outflows],
        force_fields=[dataclasses.replace(f, matrices=f.matrices[:1], values={k: v[:1] for k, v in f.values.items()})
                      for f in description.force_fields])


def _live_values(scene) -> dict:
    """The settings a running session takes on at once: gravity (m/s^2) and those of
    :data:`engine.settings.LIVE_CHANGEABLE`."""
    scale = export.unit_scale(scene)
    gravity = ([export.float32_to_float(g) * scale for g in scene.gravity] if scene.use_gravity else [0.0] * 3)
    out = {"gravity": np.array(gravity)}
    for name in settings_mod.LIVE_CHANGEABLE:
        out[name] = export.float32_to_float(getattr(scene.surge, name))
    out["speed"] = export.float32_to_float(scene.surge_live.speed)
    return out


def _object_signature(scene) -> tuple:
    """What of the scene's objects a running session cannot take on live: roles, per-object settings,
    and where every object with a role other than Collider stands (a moved inflow, outflow or fluid
    needs a new session; colliders move live, box containers excepted, see :class:`LiveSession`)."""
    out = []
    params = {role: [p.name for p in settings_mod.object_parameters() if role in p.roles]
              for role in ("FLUID", "INFLOW", "COLLIDER")}
    for obj in sorted(scene.objects, key=lambda o: o.name):
        role = obj.surge.role
        if role == "NONE":
            continue
        values = []
        for name in params.get(role, ()):
            value = getattr(obj.surge, name)
            values.append(tuple(value) if hasattr(value, "__len__") and not isinstance(value, str) else value)
        matrix = None if role == "COLLIDER" else tuple(round(v, 6) for row in obj.matrix_world for v in row)
        out.append((obj.name, role, tuple(values), matrix))
    return tuple(out)


class LiveSession:
    """One scene's running live session (see the module docstring)."""

    def __init__(self, scene, depsgraph, paused: bool = False):
        # the session starts at the scene's first frame, as a bake does
        if scene.frame_current != export.bake_range(scene)[0] or scene.frame_subframe != 0.0:
            scene.frame_set(export.bake_range(scene)[0])
            depsgraph = bpy.context.evaluated_depsgraph_get()
        description, settings = export.export_scene(scene, depsgraph)
        live = live_settings(scene)
        settings_mod.validate_live(live, f"Scene '{scene.name}' (Live)")
        sim_settings = settings_mod.live_simulation_settings(settings, live)
        description = live_scene(description)
        from ..engine import assemble  # numba-free: the pre-bake checks

        self.estimate = assemble.check_job(description, sim_settings, owner=f"Scene '{scene.name}'")
        self.scene_name = scene.name
        self.scene_key = bake_state.scene_key(scene)  # renaming the scene keeps its session
        self.scene_settings = settings
        self.live = live
        self.settings = sim_settings
        self.description = description
        self.hash = scene_hash(description)
        self.scale_length = export.unit_scale(scene)
        self.collider_names = [c.name for c in description.colliders]
        self.container_names = [c.name for c in description.containers]
        self.rest = [np.array(scene.objects[name].matrix_world, dtype=np.float64) for name in self.collider_names]
        self.rest_inverse = [np.linalg.inv(m) if abs(np.linalg.det(m[:3, :3])) > 1e-30 else np.eye(4)
                             for m in self.rest]
        self.container_matrices = {name: np.array(scene.objects[name].matrix_world) for name in self.container_names}
        # the mode each collider acts in, as the live surface meets it: Auto is resolved by the engine, which
        # reports it as it builds the colliders (a 'collider' event)
        self.collider_modes = {c.name: c.settings.collider_mode for c in description.colliders}
        self.collider_modes.update({name: "CONTAINER" for name in self.container_names})
        self.display_key: tuple | None = None
        self.signature = _object_signature(scene)
        self.live_values = _live_values(scene)
        self.pending: tuple | None = None   # (reason, since) of a change that needs a restart
        self.status = "Starting the live engine"
        self.notice = ""                    # last message for the artist (errors, restarts, saves)
        self.error: str | None = None
        self.events: list[dict] = []
        self.shown_frame = -1               # frame counter of the frame on display
        self.shown_published = 0
        self.display_times: list[float] = []
        self.figures = {"fps": 0.0, "ratio": 0.0, "particles": 0, "frame": 0, "engine_ms": 0.0, "update_ms": 0.0,
                        "substeps": 0}
        self.recording_dirs: dict | None = None
        self.saved: dict | None = None
        self.closed = False

        try:
            usd.import_pxr()  # Record writes USD files in the child: Blender's pxr must be on the path it inherits
        except OSError as exc:
            log.warning("live recordings will fail: %s", exc)
        self.job_dir = tempfile.mkdtemp(prefix="surge_live_")
        self.state = self.control = self.process = None
        try:
            save_job(self.job_dir, description, sim_settings)
            self.state = live_channel.StateBlock.create(max(int(live.max_particles), 1))
            self.control = live_channel.ControlBlock.create(len(self.collider_names))
            self.control.write(paused=int(bool(paused)), heartbeat=time.time(), **self._control_values(scene))
            command = [sys.executable, "-m", "engine.live.session", "run", self.job_dir, "--state", self.state.shm.name,
                       "--control", self.control.shm.name, "--parent", str(os.getpid()),
                       "--speed", repr(float(live.speed)), "--collider-substeps", str(live.collider_substeps),
                       "--grid-dir", os.path.join(self.job_dir, "sdf")]
            self.process = BakeProcess(self.job_dir, self.job_dir, os.path.join(self.job_dir, "stop.flag"),
                                       ADDON_ROOT, numba_cache_dir(), os.path.join(self.job_dir, "live.log"),
                                       command=command, threads=preferences.bake_threads())
        except BaseException:
            self._release()
            raise
        self.started = time.monotonic()
        obj = live_display.ensure_object(scene, self.scale_length)
        self.object_name = obj.name
        self.sync_display(scene)

    # -- the live object's display ---------------------------------------------------------------------

    def display_colliders(self) -> list:
        """(object, mode) of every collider whose mode is known (Auto ones once the engine has resolved them)."""
        out = []
        for name, mode in self.collider_modes.items():
            obj = bpy.data.objects.get(name)
            if obj is not None and obj.type == "MESH" and mode != "AUTO":
                out.append((obj, mode))
        return out

    def sync_display(self, scene, force: bool = False) -> None:
        """Bring the live object's modifier up to the display settings and the colliders (when they changed)."""
        obj = bpy.data.objects.get(self.object_name)
        if obj is None:
            return
        options = display_options(scene)
        colliders = self.display_colliders()
        key = (tuple(sorted(options.items())), tuple((o.name, m) for o, m in colliders))
        if force or key != self.display_key:
            live_display.sync(obj, self.settings.particle_spacing, options, colliders)
            self.display_key = key

    # -- what the host sends ------------------------------------------------------------------------

    def _collider_matrices(self, scene) -> np.ndarray:
        """Each mesh collider's rest-to-world matrix now (its world matrix times the inverse of the one
        it had when the session started), translation in metres: a row of ``MeshCollider.transforms``."""
        out = np.tile(np.eye(4), (max(len(self.collider_names), 1), 1, 1))
        for c, name in enumerate(self.collider_names):
            obj = scene.objects.get(name)
            if obj is None:
                continue
            now = np.array(obj.matrix_world, dtype=np.float64)
            if np.array_equal(now, self.rest[c]):
                continue  # not moved: exactly the identity (M inv(M) is not, to rounding)
            relative = now @ self.rest_inverse[c]
            relative[:3, 3] *= self.scale_length
            relative[3] = (0.0, 0.0, 0.0, 1.0)
            out[c] = relative
        return out

    def _control_values(self, scene) -> dict:
        values = _live_values(scene)
        return {"gravity": values["gravity"], "dynamic_viscosity": values["dynamic_viscosity"],
                "pbf_velocity_smoothing": values["pbf_velocity_smoothing"],
                "surface_tension": values["surface_tension"], "pbf_surface_tension": values["pbf_surface_tension"],
                "speed": values["speed"],
                "matrices": self._collider_matrices(scene)}

    def send(self, scene) -> int:
        """Write the colliders' poses, the live settings and the heartbeat; returns the control sequence."""
        return self.control.write(heartbeat=time.time(), **self._control_values(scene))

    # -- the timer's work ----------------------------------------------------------------------------

    def scene(self):
        return bake_state.scene_by_key(self.scene_key)

    def _handle(self, event: dict) -> None:
        kind = event.get("event")
        self.events.append(event)
        if kind == "error":
            self.error = event.get("message", "")
            self.notice = f"Live: {self.error}"
        elif kind == "stage":
            if event.get("stage") == "live":
                self.status = "Running"
            else:
                self.status = describe(event) or self.status
        elif kind == "saved":
            self.saved = event
        elif kind == "collider" and event.get("name") in self.collider_modes:
            self.collider_modes[event["name"]] = event.get("mode", self.collider_modes[event["name"]])
        elif kind == "recorded":
            self._show_recording(event)
        elif kind == "recording":
            self.notice = f"Recording into '{event.get('cache_dir')}'"

    def poll_events(self) -> None:
        for event in self.process.events():
            self._handle(event)

    def restart_reason(self, scene) -> str | None:
        """Why the session must start again to take on the scene as it is now, or None."""
        try:
            settings = export.settings_from_scene(scene)
            live = live_settings(scene)
        except EngineError as exc:
            return f"settings are not valid ({exc})"
        now = settings_mod.live_simulation_settings(settings, live)
        changed = [p.label for p in settings_mod.parameters()
                   if p.name not in settings_mod.LIVE_CHANGEABLE and getattr(now, p.name) != getattr(self.settings,
                                                                                                     p.name)]
        changed += [p.label for p in settings_mod.live_parameters()
                    if p.name != "speed" and getattr(live, p.name) != getattr(self.live, p.name)]
        if changed:
            return f"{', '.join(changed)} changed"
        if _object_signature(scene) != self.signature:
            return "an object's role, settings or place changed"
        for name, matrix in self.container_matrices.items():
            obj = scene.objects.get(name)
            if obj is None or not np.allclose(np.array(obj.matrix_world), matrix):
                return f"the box container '{name}' moved"
        return None

    def update(self) -> bool:
        """One timer update (see the module docstring); returns False once the session has ended."""
        if self.closed:
            return False
        scene = self.scene()
        if scene is None:
            self.stop()
            return False
        t0 = time.perf_counter()
        self.poll_events()
        if self.process.finished:
            self.stop()
            if not self.notice:
                self.notice = "Live: the engine process stopped"
            return False
        self.send(scene)
        reason = self.restart_reason(scene)
        if reason is None:
            self.pending = None
        elif self.pending is None or self.pending[0] != reason:
            self.pending = (reason, time.monotonic())
        self.sync_display(scene)
        self.show(scene)
        self.figures["update_ms"] = 1000.0 * (time.perf_counter() - t0)
        return True

    def show(self, scene=None) -> bool:
        """Copy the newest frame into the live object if the engine published one since; True if it did."""
        h = self.state.header
        published = int(h["published"])
        if published == self.shown_published:
            return False
        got = self.state.read()
        if got is None:
            return False
        meta, x, v, _ids = got
        obj = bpy.data.objects.get(self.object_name)
        if obj is None:
            scene = scene or self.scene()
            obj = live_display.ensure_object(scene, self.scale_length)
            self.object_name = obj.name
            self.sync_display(scene, force=True)
        live_display.write(obj, x, v)
        self.shown_published = published
        self.shown_frame = int(meta["frame"])
        now = time.monotonic()
        self.display_times = [t for t in self.display_times if now - t < 1.0] + [now]
        self.figures.update(fps=float(len(self.display_times)) if now - self.started > 1.0 else 0.0,
                            ratio=float(h["ratio"]), particles=int(meta["count"]), frame=int(meta["frame"]),
                            engine_ms=1000.0 * float(meta["engine_seconds"]), substeps=int(meta["substeps"]))
        status = int(h["status"])
        self.status = {live_channel.RUNNING: "Running", live_channel.PAUSED: "Paused",
                       live_channel.FAILED: "Stopped by an error (Reset starts again)"}.get(status, self.status)
        return True

    @property
    def restart_due(self) -> bool:
        return self.pending is not None and time.monotonic() - self.pending[1] >= RESTART_DELAY

    # -- commands ------------------------------------------------------------------------------------

    @property
    def paused(self) -> bool:
        return bool(self.control.record["paused"])

    def set_paused(self, paused: bool) -> None:
        self.control.write(paused=int(bool(paused)))

    def step(self) -> int:
        """Simulate one frame (while paused); returns the step counter to wait for."""
        return self.control.bump("step", paused=1)

    def reset(self) -> int:
        """Back to the first frame; returns the reset counter."""
        return self.control.bump("reset")

    def wait(self, counter: str, value: int, timeout: float = 60.0) -> bool:
        """Wait (polling events) until the engine has handled ``counter`` up to ``value``; True if it did."""
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            self.poll_events()
            if int(self.state.header[f"{counter}_done"]) >= value and int(self.state.header["published"]) > 0:
                return True
            if self.process.finished:
                return False
            time.sleep(0.002)
        return False

    def wait_for_frame(self, frame: int, timeout: float = 60.0) -> bool:
        """Wait until the front buffer holds frame ``frame`` or a later one; True if it does."""
        deadline = time.monotonic() + timeout
        h = self.state.header
        while time.monotonic() < deadline:
            self.poll_events()
            if int(h["published"]) and int(h["frames"]["frame"][int(h["front"])]) >= frame:
                return True
            if self.process.finished or self.error:
                return False
            time.sleep(0.002)
        return False

    def save_for_bake(self, cache_dir: str, timeout: float = SAVE_TIMEOUT) -> dict:
        """Ask the engine to write its state as the first frame and checkpoint of a cache in ``cache_dir``;
        returns its 'saved' event. Raises :class:`LiveError` if it fails or takes too long."""
        self.saved = None
        self.error = None
        count = self.control.bump("snapshot", text=json.dumps({"cache_dir": cache_dir}))
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline and self.saved is None:
            self.poll_events()
            if self.error:
                raise LiveError(self.error)
            if self.process.finished:
                raise LiveError("The live engine stopped before it saved its state")
            time.sleep(0.005)
        if self.saved is None or int(self.state.header["snapshot_done"]) < count:
            raise LiveError(f"The live engine did not save its state within {timeout:g} s")
        return self.saved

    @property
    def recording(self) -> bool:
        return bool(self.control.record["recording"])

    def start_recording(self, cache_dir: str) -> None:
        """Record the frames from now on into ``cache_dir`` (replacing the bake there), as a bake plays."""
        from . import liquid

        scene = self.scene()
        shown = liquid.current_file(scene)
        if shown and (shown + os.sep).startswith(cache_dir + os.sep):
            liquid.release_files(scene)  # Windows cannot delete files Blender holds open
        self.recording_dirs = {"cache_dir": cache_dir, "usd_dir": files.new_usd_dir(cache_dir)}
        self.control.bump("record", recording=1, text=json.dumps(self.recording_dirs))

    def stop_recording(self) -> None:
        self.control.write(recording=0)

    def _show_recording(self, event: dict) -> None:
        """Point the scene's liquid object at a finished recording (it then plays like a bake)."""
        from . import liquid

        scene = self.scene()
        usd_dir = event.get("usd_dir", "")
        first = files.usd_frame_path(usd_dir, int(event.get("frame_start", 0)))
        if scene is None or not event.get("frames") or not os.path.isfile(first):
            return
        try:
            liquid.show_frames(scene, first, files.cache_dir_is_relative(scene), self.scale_length)
            files.remove_usd_dirs(event["cache_dir"], keep=usd_dir)
        except OSError as exc:
            self.notice = f"Live: the recording could not be shown: {exc}"
            return
        self.notice = (f"Recorded frames {event['frame_start']}-{event['frame_end']} into '{event['cache_dir']}'; "
                       f"they play as the baked liquid")

    # -- the end -----------------------------------------------------------------------------------------

    def stop(self, timeout: float = STOP_TIMEOUT, touch_blender: bool = True) -> None:
        """Stop the engine (asking, then killing), read its last events, unlink the shared memory."""
        if self.closed:
            return
        self.closed = True
        try:
            if self.control is not None and self.process is not None:
                self.control.write(stop=1)
                deadline = time.monotonic() + timeout
                while self.process._proc.poll() is None and time.monotonic() < deadline:  # noqa: SLF001
                    time.sleep(0.005)
                self.process.kill()
                self.process.wait()
                if touch_blender:
                    for event in self.process.events():
                        self._handle(event)
        finally:
            self._release()
            if _sessions.get(self.scene_key) is self:
                del _sessions[self.scene_key]

    def _release(self) -> None:
        for block in (self.state, self.control):
            if block is not None:
                shm = block.shm
                block.close()
                live_channel.unlink(shm)
        self.state = self.control = None
        if self.process is not None:
            self.process.kill()
        shutil.rmtree(self.job_dir, ignore_errors=True)

    @property
    def segment_names(self) -> list[str]:
        return [b.shm.name for b in (self.state, self.control) if b is not None]


# -- the registry and the timer ------------------------------------------------------------------------

def get(scene) -> LiveSession | None:
    session = _sessions.get(bake_state.scene_key(scene))
    return session if session is not None and not session.closed else None


def start(scene, depsgraph, paused: bool = False) -> LiveSession:
    """Start a live session of ``scene`` (stopping one already running there).

    Raises
    ------
    EngineError, OSError
        The set-up is refused (the message a bake would give), or the process cannot start.
    """
    old = get(scene)
    if old is not None:
        old.stop()
    session = LiveSession(scene, depsgraph, paused=paused)
    _sessions[bake_state.scene_key(scene)] = session
    if not bpy.app.timers.is_registered(_tick):
        bpy.app.timers.register(_tick, first_interval=TIMER_INTERVAL)
    return session


def restart(session: LiveSession, reason: str) -> LiveSession | None:
    """Start ``session``'s scene again (its settings or objects changed); keeps it paused if it was."""
    scene = session.scene()
    paused = session.paused
    session.stop()
    if scene is None:
        return None
    try:
        new = start(scene, bpy.context.evaluated_depsgraph_get(), paused=paused)
    except (EngineError, OSError) as exc:
        _last_notice[bake_state.scene_key(scene)] = f"Live stopped: {exc}"
        return None
    new.notice = f"Live restarted: {reason}"
    return new


def reset(session: LiveSession, depsgraph) -> LiveSession:
    """Back to the first frame. The engine starts over from its job when the scene exports as it did at
    the start (nothing moved or changed); otherwise the session starts again from the scene as it is.

    Raises
    ------
    EngineError, OSError
        The scene as it is now is refused (the session is stopped then).
    """
    scene = session.scene()
    if scene.frame_current != export.bake_range(scene)[0] or scene.frame_subframe != 0.0:
        scene.frame_set(export.bake_range(scene)[0])
        depsgraph = bpy.context.evaluated_depsgraph_get()
    if session.restart_reason(scene) is None:
        description, settings = export.export_scene(scene, depsgraph)
        if scene_hash(live_scene(description)) == session.hash:
            session.reset()
            return session
    paused = session.paused
    session.stop()
    new = start(scene, depsgraph, paused=paused)
    new.notice = "Live restarted from the scene as it is now"
    return new


#: The last message of a session that ended, by scene key (bridge.bake_state.scene_key; the panel shows it).
_last_notice: dict[str, str] = {}


def update(scene_name: str | None = None) -> None:
    """Update every running session (or the one of the scene called ``scene_name``): what the timer runs.
    Tests in background mode, where timers do not fire, call it directly."""
    for name, session in list(_sessions.items()):
        if scene_name is not None and (session.scene() is None or session.scene().name != scene_name):
            continue
        try:
            alive = session.update()
        except (EngineError, OSError) as exc:
            session.stop()
            _last_notice[name] = f"Live stopped: {exc}"
            continue
        if not alive:
            _last_notice[name] = session.notice or "Live stopped"
            continue
        if session.restart_due:
            restart(session, session.pending[0])


def _redraw() -> None:
    wm = bpy.context.window_manager
    if wm is None:
        return
    for window in wm.windows:
        for area in window.screen.areas:
            if area.type in {"VIEW_3D", "PROPERTIES"}:
                area.tag_redraw()


def _tick():
    update()
    if not _sessions:
        _redraw()
        return None  # no session left: the timer ends
    _redraw()
    return TIMER_INTERVAL


def stop(scene) -> bool:
    """Stop ``scene``'s session; True if one was running."""
    session = get(scene)
    if session is None:
        return False
    session.stop()
    _last_notice[bake_state.scene_key(scene)] = session.notice or "Live stopped"
    return True


def stop_all(touch_blender: bool = True) -> None:
    """Stop every session (file load, add-on disable, Blender quitting)."""
    for session in list(_sessions.values()):
        try:
            session.stop(touch_blender=touch_blender)
        except Exception:  # noqa: BLE001 -- every session must get its chance to release its memory
            log.exception("stopping a live session")
    _sessions.clear()
    if touch_blender and bpy.app.timers.is_registered(_tick):
        bpy.app.timers.unregister(_tick)


def _stop_at_exit() -> None:
    # Blender is shutting down: its data may be gone, only the processes and the memory matter
    stop_all(touch_blender=False)


def sync_display(scene) -> None:
    """Apply the scene's live display settings to the live object (a property's update callback)."""
    session = get(scene)
    if session is not None:
        session.sync_display(scene)
        return
    obj = bpy.data.objects.get(live_display.OBJECT_NAME)
    if obj is None:
        return
    spacing = scene.surge.particle_spacing * export.unit_scale(scene) * scene.surge_live.spacing_factor
    live_display.sync(obj, spacing, display_options(scene))


def last_notice(scene) -> str:
    session = get(scene)
    if session is not None:
        return session.notice
    return _last_notice.get(bake_state.scene_key(scene), "")


def register() -> None:
    atexit.register(_stop_at_exit)


def unregister() -> None:
    stop_all()
    atexit.unregister(_stop_at_exit)


def segments_in_use() -> list[str]:
    """Names of the shared-memory segments of the running sessions."""
    return [name for s in _sessions.values() for name in s.segment_names]


__all__ = ["LiveSession", "LiveError", "InvalidSceneError", "start", "stop", "stop_all", "update", "get",
           "register", "unregister"]
