"""The baked surface, from Blender: its settings, meshing an existing cache in a child process, freeing it.

Meshing runs ``python -m engine.stages run surface`` (:mod:`engine.stages`) in a child process, as a
particle bake runs ``engine.cli bake``: Blender stays responsive, Esc cancels and keeps the frames
meshed so far, a new run with the same settings resumes where the last one stopped, and new settings
re-mesh every frame without touching the particles. The child writes the surface's USD files; this
side only points the *Surge Surface* object at them (:func:`bridge.liquid.show_surface`).

:class:`SurfaceSession` is a :class:`bridge.stage_session.StageSession`: polled like a bake, holding names,
never Blender pointers.
"""

from __future__ import annotations

import dataclasses
import os

from ..engine import settings as settings_mod
from ..engine import stages
from ..engine.errors import EngineError
from ..engine.surface import stage as surface_stage
from . import bake_state, export, files, liquid
from .stage_session import StageFailedError, StageSession, describe_event, free_stage_files
from .stage_session import write_settings as _write_job_settings

#: Where the surface settings of a run are written for the child, and its log (inside the job folder).
SETTINGS_FILE = "surface.json"
LOG_FILE = "surface.log"


class SurfaceFailedError(StageFailedError):
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
    return _write_job_settings(cache_dir, SETTINGS_FILE, dataclasses.asdict(settings))


def first_surface_file(cache_dir: str) -> str | None:
    """The surface USD file of the first meshed frame in ``cache_dir``, or None."""
    folder = surface_stage.usd_folder(cache_dir)
    done = stages.done_frames(cache_dir, surface_stage.NAME)
    if folder is None or not done:
        return None
    path = os.path.join(folder, f"surface_{done[0]:06d}.usdc")
    return path if os.path.isfile(path) else None


def has_surface(scene) -> bool:
    """True if the scene's cache folder holds meshed surface frames."""
    from .paths import ADDON_ROOT

    try:
        cache_dir = files.resolve_cache_dir(scene, ADDON_ROOT)
    except (EngineError, OSError):
        return False
    return bool(os.path.isdir(cache_dir) and stages.done_frames(cache_dir, surface_stage.NAME))


def show_surface(scene, cache_dir: str, relative: bool) -> bool:
    """Point the scene's surface object at the surface files in ``cache_dir``; False if there are none."""
    first = first_surface_file(cache_dir)
    if first is None:
        return False
    liquid.show_surface(scene, first, relative, export.unit_scale(scene))
    return True


def describe(event: dict) -> str | None:
    """One line for the user about a surface progress event."""
    return describe_event(event, "Surface", "Meshing", lambda e: (f"{e.get('triangles', 0)} triangles from "
                                                                  f"{e.get('particles', 0)} particles"))


class SurfaceSession(StageSession):
    """Meshing the baked particles of one scene (see :class:`bridge.stage_session.StageSession`)."""

    stage = surface_stage.NAME
    title = "Surface"
    settings_file = SETTINGS_FILE
    log_file = LOG_FILE
    failed_error = SurfaceFailedError
    describe = staticmethod(describe)
    #: the USD files, each written while the next frame is meshed
    options = ("usd=1", "overlap=1")

    def __init__(self, scene, restart: bool = False):
        super().__init__(scene, dataclasses.asdict(surface_settings(scene)), restart=restart)

    def show(self, scene) -> bool:
        return show_surface(scene, self.cache_dir, self.relative)

    def reread(self, scene) -> None:
        liquid.reread_surface(scene)


def free_surface(scene, locked: bool = False) -> tuple[str, int]:
    """Delete the surface files of the scene's cache (and nothing else); returns the folder and the count.

    Holds the folder's lock meanwhile (``locked``: the caller holds it); raises ``CacheLockedError``
    while a bake or a stage writes there."""
    cache_dir, count = free_stage_files(scene, surface_stage.NAME, surface_stage.FILE_RE, (SETTINGS_FILE, LOG_FILE),
                                        liquid.release_surface_files, "Free Surface", locked)
    for obj in (scene.surge.surface_object, scene.surge.surface_spray_object):
        if obj is not None:
            obj.hide_render = obj.hide_viewport = True
    liquid.apply_display(scene)
    bake_state.set_status(scene, f"Removed {count} surface files from '{cache_dir}'")
    return cache_dir, count
