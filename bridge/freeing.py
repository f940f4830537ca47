"""What a Free button would delete, counted before anything goes: the files, their size, the folder.

Free Bake, Free Surface and Free Whitewater ask before deleting (``invoke_confirm``), naming the
folder, how many files go and their size on disk, so that hours of baking are never lost to one
click. The files counted here are exactly those the Free functions delete (:func:`bridge.bake.free_bake`,
:func:`bridge.surface_bake.free_surface`, :func:`bridge.whitewater.free_whitewater`): Surge's own
names inside the cache folder and its preview folder; the user's files there are not counted and
not deleted.

Whether there is anything to free at all is :mod:`bridge.cache_state`'s (cheap enough for ``poll``).
"""

from __future__ import annotations

import os
from dataclasses import dataclass

from ..engine.io import cache as cache_mod
from ..engine import stages
from ..engine.surface import stage as surface_stage
from ..engine.whitewater import stage as ww_stage
from . import files


@dataclass(frozen=True)
class FreeSummary:
    """The files a Free would delete: ``count`` files of ``size`` bytes in all, in ``cache_dir``."""

    what: str  # "baked liquid", "surface", "whitewater"
    cache_dir: str
    count: int
    size: int

    @property
    def message(self) -> str:
        """The confirmation's question: what goes, how much, from where."""
        return (f"Delete the {self.what} ({self.count:,} file{'s' if self.count != 1 else ''}, "
                f"{size_text(self.size)}) from '{self.cache_dir}'? Other files in the folder stay")


def size_text(size: int) -> str:
    """A size on disk for people: '812 bytes', '3.4 MB', '1.27 GB' (powers of 1000, as file managers show)."""
    if size < 1000:
        return f"{size} bytes"
    for unit in ("kB", "MB", "GB", "TB"):
        size /= 1000.0
        if size < 1000.0 or unit == "TB":
            return f"{size:.3g} {unit}" if size < 100 else f"{size:.0f} {unit}"
    raise AssertionError("unreachable")


def _total(paths) -> tuple[int, int]:
    count = size = 0
    for path in dict.fromkeys(paths):
        try:
            size += os.path.getsize(path)
        except OSError:
            continue  # gone meanwhile: it will not be deleted either
        count += 1
    return count, size


def _stage_files(folder: str, name: str, file_re, job_files: tuple) -> list[str]:
    out = stages.own_files(folder, name, file_re)
    job = files.job_dir(folder)
    out += [os.path.join(job, n) for n in job_files if os.path.isfile(os.path.join(job, n))]
    return out


def bake_summary(scene, addon_root: str) -> FreeSummary:
    """Everything Free Bake deletes: the particle cache, its preview, surface and whitewater, the USD
    files Blender plays, checkpoints and collider grids."""
    from .surface_bake import LOG_FILE as SURFACE_LOG, SETTINGS_FILE as SURFACE_SETTINGS
    from .whitewater import LOG_FILE as WW_LOG, SETTINGS_FILE as WW_SETTINGS

    cache_dir = files.resolve_cache_dir(scene, addon_root)
    paths = []
    for folder in (files.preview_dir(cache_dir), cache_dir):
        if not os.path.isdir(folder):
            continue
        paths += cache_mod.own_files(folder, include_grids=True) + files.own_files(folder)
        paths += _stage_files(folder, surface_stage.NAME, surface_stage.FILE_RE, (SURFACE_SETTINGS, SURFACE_LOG))
        paths += _stage_files(folder, ww_stage.NAME, ww_stage.FILE_RE, (WW_SETTINGS, WW_LOG))
    return FreeSummary("baked liquid, its surface and whitewater", cache_dir, *_total(paths))


def surface_summary(scene, addon_root: str) -> FreeSummary:
    """What Free Surface deletes: the surface stage's files (the particles stay)."""
    from .surface_bake import LOG_FILE, SETTINGS_FILE

    cache_dir = files.resolve_cache_dir(scene, addon_root)
    paths = _stage_files(cache_dir, surface_stage.NAME, surface_stage.FILE_RE, (SETTINGS_FILE, LOG_FILE))
    return FreeSummary("baked surface", cache_dir, *_total(paths))


def whitewater_summary(scene, addon_root: str) -> FreeSummary:
    """What Free Whitewater deletes: the whitewater stage's files (the liquid stays)."""
    from .whitewater import LOG_FILE, SETTINGS_FILE

    cache_dir = files.resolve_cache_dir(scene, addon_root)
    paths = _stage_files(cache_dir, ww_stage.NAME, ww_stage.FILE_RE, (SETTINGS_FILE, LOG_FILE))
    return FreeSummary("baked whitewater", cache_dir, *_total(paths))
