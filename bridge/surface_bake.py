"""The baked surface, from Blender: its settings, meshing an existing cache in a child process, freeing it.

Meshing runs ``python -m engine.stages run surface`` (:mod:`engine.stages`) in a child process, as a
particle bake runs ``engine.cli bake``: Blender stays responsive, Esc cancels and keeps the frames
meshed so far, a new run with the same settings resumes where the last one stopped, and new settings
re-mesh every frame without touching the particles. The child writes the surface's USD files; this
side only points the *Surge Surface* object at them (:func:`bridge.liquid.show_surface`).

:class:`SurfaceSession` is polled like :class:`bridge.bake.BakeSession` and holds names, never
Blender pointers.
"""

from __future__ import annotations

import json
import os
import sys
import time
from dataclasses import dataclass

import bpy

from ..engine import settings as settings_mod
from ..engine import stages
from ..engine.cache import CacheReader
from ..engine.errors import EngineError, InvalidSceneError
from ..engine.surface import stage as surface_stage
from . import export, files, liquid, usd
from .process import EXIT_CANCELLED, EXIT_COMPLETE, EXIT_ENGINE_ERROR, BakeProcess

#: Where the surface settings of a run are written for the child, and its log (inside the job folder).
SETTINGS_FILE = "surface.json"
LOG_FILE = "surface.log"


class SurfaceFailedError(EngineError):
    """Meshing ended with an error or the process stopped unexpectedly."""


def surface_settings(scene) -> settings_mod.SurfaceSettings:
    """The scene's surface settings (``Scene.surge.surface_*``), validated.

    Raises
    ------
    InvalidSettingsError
    """
    values = export._engine_values(scene.surge, settings_mod.surface_parameters(), 1.0)
    return settings_mod.surface_from_dict(values, owner=f"Scene '{scene.name}'")


def write_settings(cache_dir: str, settings: settings_mod.SurfaceSettings) -> str:
    """Write the settings file the child reads; returns its path."""
    path = os.path.join(files.job_dir(cache_dir), SETTINGS_FILE)
    os.makedirs(os.path.dirname(path), exist_ok=True)
    tmp = path + ".tmp"
    with open(tmp, "w", encoding="utf-8") as fh:
        json.dump(settings_mod.dataclasses.asdict(settings), fh, indent=1, sort_keys=True)
    os.replace(tmp, path)
    return path


def first_surface_file(cache_dir: str) -> str | None:
    """The surface USD file of the first meshed frame in ``cache_dir``, or None."""
    folder = surface_stage.usd_folder(cache_dir)
    done = stages.done_frames(cache_dir, surface_stage.NAME)
    if folder is None or not done:
        return None
    path = os.path.join(folder, f"surface_{done[0]:06d}.usdc")
    return path if os.path.isfile(path) else None


def show_surface(scene, cache_dir: str, relative: bool) -> bool:
    """Point the scene's surface object at the surface files in ``cache_dir``; False if there are none."""
    first = first_surface_file(cache_dir)
    if first is None:
        return False
    liquid.show_surface(scene, first, relative, export.unit_scale(scene))
    return True


@dataclass
class SurfaceResult:
    status: str  # 'complete' or 'cancelled'
    frames: int
    meshed: int
    elapsed: float
    cache_dir: str

    @property
    def message(self) -> str:
        if self.status == "complete":
            return (f"Surface of {self.frames} frames ready ({self.meshed} meshed now, {self.elapsed:.1f} s) in "
                    f"'{self.cache_dir}'")
        return f"Surface cancelled; {self.frames} meshed frames are kept in '{self.cache_dir}'"


def describe(event: dict) -> str | None:
    """One line for the user about a surface progress event."""
    kind = event.get("event")
    if kind == "stage":
        kept = f" ({event['kept']} kept from the last run)" if event.get("kept") else ""
        return f"Meshing {event.get('frames', 0)} frames{kept}"
    if kind == "frame":
        from .bake import duration

        return (f"Surface frame {event['frame']} of {event['frame_end']}: {event.get('triangles', 0)} triangles "
                f"from {event.get('particles', 0)} particles, {event.get('seconds', 0.0):.2f} s, "
                f"{duration(event.get('eta', 0.0))} left")
    if kind == "error":
        return f"Error: {event.get('message', '')}"
    return None


class SurfaceSession:
    """Meshing the baked particles of one scene.

    Creating it checks the settings and the cache (raising before anything is written), then starts
    the child process.
    """

    def __init__(self, scene, restart: bool = False):
        from .bake import ADDON_ROOT, numba_cache_dir

        settings = surface_settings(scene)
        cache_dir = files.resolve_cache_dir(scene, ADDON_ROOT)
        reader = CacheReader(cache_dir)  # CacheFormatError: nothing baked there
        if not reader.frames:
            raise InvalidSceneError(f"Scene '{scene.name}': the cache '{cache_dir}' holds no baked frame to mesh; "
                                    f"bake the liquid first")
        self.scene_name = scene.name
        self.cache_dir = cache_dir
        self.relative = scene.surge.cache_directory.strip().startswith("//")
        self.frame_start, self.frame_end = int(reader.frames[0]), int(reader.frames[-1])
        path = write_settings(cache_dir, settings)
        usd.import_pxr()  # puts Blender's pxr on sys.path, which the child inherits
        flag = files.cancel_flag(cache_dir)
        if os.path.exists(flag):
            os.remove(flag)
        command = [sys.executable, "-m", "engine.stages", "run", surface_stage.NAME, cache_dir, "--settings", path,
                   "--option", "usd=1", "--cancel-file", flag]
        if restart:
            command.append("--restart")
        self.process = BakeProcess(files.job_dir(cache_dir), cache_dir, flag, ADDON_ROOT, numba_cache_dir(),
                                   os.path.join(files.job_dir(cache_dir), LOG_FILE), command=command)
        self.started = time.monotonic()
        self.error: dict | None = None
        self.shown = False
        self.status = "Starting the surface process"
        self.progress = 0.0
        self.summary: dict = {}
        self._publish()

    def scene(self):
        scene = bpy.data.scenes.get(self.scene_name)
        if scene is None:
            self.process.kill()
            raise SurfaceFailedError(f"Scene '{self.scene_name}' was deleted while meshing; meshing was stopped")
        return scene

    def _publish(self) -> None:
        state = self.scene().surge
        if not state.is_baking:
            state.is_baking = True
            state.bake_cancel_requested = False
        if abs(state.bake_progress - self.progress) > 1e-4:
            state.bake_progress = self.progress
        if state.bake_status != self.status:
            state.bake_status = self.status

    def poll(self, timeout: float = 0.0) -> list[dict]:
        events = self.process.events(timeout)
        for event in events:
            kind = event.get("event")
            if kind == "frame":
                span = max(1, self.frame_end - self.frame_start)
                self.progress = min(1.0, (event["frame"] - self.frame_start) / span)
                scene = self.scene()
                if not self.shown:
                    self.shown = show_surface(scene, self.cache_dir, self.relative)
                elif scene.frame_current == event["frame"] and scene.surge.surface_object is not None:
                    for mod in scene.surge.surface_object.modifiers:
                        if mod.type == "MESH_SEQUENCE_CACHE" and mod.cache_file is not None:
                            mod.cache_file.update_tag()
            elif kind == "error":
                self.error = event
            elif kind == "done":
                self.summary = event
            text = describe(event)
            if text:
                self.status = text
        if self.scene().surge.bake_cancel_requested and self.process.cancel_requested_at is None:
            self.cancel()
        self.process.kill_if_overdue()
        self._publish()
        return events

    @property
    def finished(self) -> bool:
        return self.process.finished

    def cancel(self) -> None:
        self.process.request_cancel()
        self.status = "Cancelling"
        self._publish()

    def finish(self) -> SurfaceResult:
        code = self.process.wait()
        self.poll()
        flag = files.cancel_flag(self.cache_dir)
        if os.path.exists(flag):
            os.remove(flag)
        scene = self.scene()
        scene.surge.is_baking = False
        scene.surge.bake_cancel_requested = False
        show_surface(scene, self.cache_dir, self.relative)
        done = len(stages.done_frames(self.cache_dir, surface_stage.NAME))
        elapsed = time.monotonic() - self.started
        meshed = int(self.summary.get("processed", 0))
        if code == EXIT_COMPLETE:
            result = SurfaceResult("complete", done, meshed, elapsed, self.cache_dir)
        elif code == EXIT_CANCELLED or self.process.cancel_requested_at is not None:
            result = SurfaceResult("cancelled", done, meshed, elapsed, self.cache_dir)
        elif code == EXIT_ENGINE_ERROR and self.error:
            scene.surge.bake_status = f"Surface failed: {self.error.get('message', '')}"
            raise SurfaceFailedError(self.error.get("message") or "Meshing failed")
        else:
            tail = self.process.log_tail()
            message = (f"The surface process stopped unexpectedly (exit status {code})"
                       + (f"; last lines of its log '{self.process.log_path}': {tail}" if tail else ""))
            scene.surge.bake_status = message
            raise SurfaceFailedError(message)
        scene.surge.bake_status = result.message
        scene.surge.bake_progress = done / max(1, self.frame_end - self.frame_start + 1)
        return result

    def abort(self) -> None:
        self.process.kill()
        self.process.wait()
        scene = bpy.data.scenes.get(self.scene_name)
        if scene is not None:
            scene.surge.is_baking = False
            scene.surge.bake_status = "Meshing stopped"


def free_surface(scene) -> tuple[str, int]:
    """Delete the surface files of the scene's cache (and nothing else); returns the folder and the count."""
    from .bake import ADDON_ROOT

    cache_dir = files.resolve_cache_dir(scene, ADDON_ROOT)
    liquid.release_surface_files(scene)  # first: Windows cannot delete a file Blender holds open
    count = stages.clear_stage(cache_dir, surface_stage.NAME, surface_stage.FILE_RE) if os.path.isdir(cache_dir) else 0
    for name in (SETTINGS_FILE, SETTINGS_FILE + ".tmp", LOG_FILE):
        path = os.path.join(files.job_dir(cache_dir), name)
        if os.path.isfile(path):
            os.remove(path)
            count += 1
    obj = scene.surge.surface_object
    if obj is not None:
        obj.hide_render = obj.hide_viewport = True
    liquid.apply_display(scene)
    scene.surge.bake_status = f"Removed {count} surface files from '{cache_dir}'"
    return cache_dir, count
