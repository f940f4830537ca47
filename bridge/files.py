"""The cache folder: where it is, and which files in it belong to Surge.

Layout inside the folder the user picks (``Scene.surge.cache_directory``)::

    manifest.json, frames/frame_NNNNNN.npz     the engine's cache (engine.io.cache)
    sdf/                                       collider distance grids, kept between bakes (engine.io.cache)
    job/scene.json, scene.npz, settings.json   the job that baked the cached frames (engine.scene)
    job/pending/                               the job of a bake that has not replaced them yet, and its log
    job/bake.log                               the log (stderr) of the bake process that made the frames
    job/blender_objects.json                   signatures of the objects baked (bridge.cache_state)
    cancel.flag                                exists while a cancel is pending
    surge.lock                                 exists while a bake holds the folder (engine.io.lock)
    usd/bake_XXXXXXXXXXXX/liquid_NNNNNN.usdc   the point files Blender plays back, one folder per bake

A new bake writes its USD files into a new ``bake_*`` folder, so Blender's USD reader, which keeps
files open, never shows a stale frame. An older folder is deleted only once no .blend points at
it: at once if the open file was never saved, otherwise when it is saved next (the saved file
still plays the previous bake until then).

Surge writes only into a folder that is new, empty or a Surge cache folder
(:func:`engine.io.cache.check_folder`), and deletes only these names there; anything else in the
folder (the user's files) survives.
"""

from __future__ import annotations

import os
import re
import uuid

from ..engine.io import atomic
from ..engine.io import cache as cache_mod
from ..engine.errors import InvalidSettingsError

JOB_DIR = "job"
JOB_FILES = ("scene.json", "scene.npz", "settings.json")
LOG_FILE = "bake.log"
#: The signatures of the objects the cached frames were baked from (bridge.cache_state), beside the job.
OBJECTS_FILE = "blender_objects.json"
CANCEL_FLAG = "cancel.flag"
PREVIEW_DIR = "preview"
#: Output of a bake started with "Bake in a Terminal" (bridge.headless), and the copy of the .blend it bakes.
TERMINAL_LOG = "terminal_bake.log"
TERMINAL_COPY = "terminal_bake.blend"
USD_DIR = "usd"
USD_BAKE_RE = re.compile(r"^bake_[0-9a-f]{12}$")
USD_FRAME_RE = re.compile(r"^liquid_(\d{6})\.usdc$")
PENDING_JOB_DIR = "pending"
#: Names a new cache folder may hold that Surge created there before the bake claimed it.
NOT_FOREIGN = (TERMINAL_LOG, TERMINAL_COPY)


def resolve_cache_dir(scene, addon_root: str) -> str:
    """Absolute cache folder of ``scene``.

    Raises
    ------
    InvalidSettingsError
        If no folder is set and the .blend file was never saved, if the folder is relative to an unsaved
        .blend file, or if it is inside the add-on.
    """
    import bpy  # only this function needs Blender; the rest of the module is plain file handling

    from .default_cache import cache_directory

    raw = cache_directory(scene)
    where = f"Scene '{scene.name}': cache directory"
    if not raw:
        raise InvalidSettingsError([
            f"{where} is not set and the .blend file has not been saved yet, so there is no default folder for "
            f"it; save the file first or choose a Cache Directory"])
    if raw.startswith("//") and not bpy.data.filepath:
        raise InvalidSettingsError([
            f"{where} '{raw}' is relative to the .blend file, which has not been saved yet; save the file first "
            f"or choose an absolute folder"])
    path = os.path.normpath(os.path.abspath(os.path.expanduser(bpy.path.abspath(raw))))
    root = os.path.normpath(os.path.abspath(addon_root))
    if path == root or path.startswith(root + os.sep):
        # the add-on folder is replaced on update, so a cache there would vanish
        raise InvalidSettingsError([f"{where} '{path}' is inside the Surge add-on folder; choose another folder"])
    return path


def cache_dir_is_relative(scene) -> bool:
    """True if the scene's cache folder is given relative to the .blend file (``//``), so that the liquid
    object's paths are relative too."""
    from .default_cache import cache_directory

    return cache_directory(scene).startswith("//")


def preview_dir(cache_dir: str) -> str:
    """The cache folder of preview bakes, inside the scene's cache folder."""
    return os.path.join(cache_dir, PREVIEW_DIR)


def job_dir(cache_dir: str) -> str:
    return os.path.join(cache_dir, JOB_DIR)


def pending_job_dir(cache_dir: str) -> str:
    """Where a bake writes its job before it has replaced the cached frames (engine.driver.bake_job
    copies it into ``job/`` then)."""
    return os.path.join(cache_dir, JOB_DIR, PENDING_JOB_DIR)


def log_path(cache_dir: str) -> str:
    """The log of the bake that made the cached frames."""
    return os.path.join(cache_dir, JOB_DIR, LOG_FILE)


def pending_log_path(cache_dir: str) -> str:
    """Where a bake process logs until it has replaced the previous bake (its log then moves to
    :func:`log_path`); a bake refused or failed before that leaves its log here, and the previous
    bake's log stays as it was."""
    return os.path.join(pending_job_dir(cache_dir), LOG_FILE)


def cancel_flag(cache_dir: str) -> str:
    return os.path.join(cache_dir, CANCEL_FLAG)


def new_usd_dir(cache_dir: str) -> str:
    """A fresh, not yet created ``usd/bake_*`` folder for one bake's point files."""
    return os.path.join(cache_dir, USD_DIR, f"bake_{uuid.uuid4().hex[:12]}")


def usd_frame_path(usd_dir: str, frame: int) -> str:
    """Path of one frame's point file; the number is the frame, as Blender's sequence reader expects."""
    cache_mod.frame_filename(frame)  # refuses the frames the engine cache refuses (outside 0-999999)
    return os.path.join(usd_dir, f"liquid_{frame:06d}.usdc")


def usd_bake_dirs(cache_dir: str) -> list[str]:
    """The ``usd/bake_*`` folders of ``cache_dir``, by name."""
    root = os.path.join(cache_dir, USD_DIR)
    if not os.path.isdir(root):
        return []
    return [os.path.join(root, n) for n in sorted(os.listdir(root))
            if USD_BAKE_RE.match(n) and os.path.isdir(os.path.join(root, n))]


def _own(folder: str, names) -> list[str]:
    """Files of ``folder`` whose name, or the name a temporary file stands for, is one of ``names``."""
    if not os.path.isdir(folder):
        return []
    return [os.path.join(folder, n) for n in sorted(os.listdir(folder))
            if atomic.final_name(n) in names and os.path.isfile(os.path.join(folder, n))]


def own_files(cache_dir: str) -> list[str]:
    """Every file in ``cache_dir`` that Surge wrote besides the engine's (job, log, flag, USD frames)."""
    jdir = job_dir(cache_dir)
    out = (_own(jdir, JOB_FILES + (LOG_FILE, OBJECTS_FILE))
           + _own(os.path.join(jdir, PENDING_JOB_DIR), JOB_FILES + (LOG_FILE,)))
    out += _own(cache_dir, (CANCEL_FLAG, TERMINAL_LOG, TERMINAL_COPY))
    for d in usd_bake_dirs(cache_dir):
        out += [os.path.join(d, n) for n in sorted(os.listdir(d)) if USD_FRAME_RE.match(atomic.final_name(n))]
    return out


def _remove_dir_if_empty(path: str) -> None:
    if os.path.isdir(path) and not os.listdir(path):
        os.rmdir(path)


def remove_usd_dir(path: str) -> bool:
    """Delete one ``usd/bake_*`` folder's frame files and the folder if that empties it; False if a file
    could not be deleted (on Windows a file Blender still has open)."""
    try:
        for n in os.listdir(path):
            if USD_FRAME_RE.match(atomic.final_name(n)):
                os.remove(os.path.join(path, n))
        _remove_dir_if_empty(path)
    except FileNotFoundError:
        pass
    except OSError:
        return False
    return True


def remove_usd_dirs(cache_dir: str, keep: str | None = None) -> list[str]:
    """Delete the USD frame files of every bake folder except ``keep``.

    Returns the folders that could not be emptied: on Windows a file Blender still has open cannot be
    deleted; it goes with the next bake or Free Bake instead of failing this one.
    """
    keep_path = os.path.normpath(keep) if keep else None
    left = [d for d in usd_bake_dirs(cache_dir)
            if not (keep_path and os.path.normpath(d) == keep_path) and not remove_usd_dir(d)]
    if not left:
        _remove_dir_if_empty(os.path.join(cache_dir, USD_DIR))
    return left


def usd_cache_folder(usd_file: str) -> str | None:
    """The cache folder holding ``usd/bake_*/<usd_file>``, or None for a file elsewhere."""
    bake_dir = os.path.dirname(usd_file)
    usd_root = os.path.dirname(bake_dir)
    if USD_BAKE_RE.match(os.path.basename(bake_dir)) and os.path.basename(usd_root) == USD_DIR:
        return os.path.dirname(usd_root)
    return None


def free(cache_dir: str) -> int:
    """Delete Surge's files in ``cache_dir`` (collider grids included) and the sub-folders they leave
    empty; returns the count. Nothing is deleted unless ``cache_dir`` is a Surge cache folder.

    Raises
    ------
    ForeignFolderError
        If the folder holds files but no Surge cache.
    OSError
        If a file cannot be deleted (the message names it).
    """
    count = cache_mod.clear(cache_dir, include_grids=True, extra=tuple(own_files(cache_dir)))
    for d in usd_bake_dirs(cache_dir):
        _remove_dir_if_empty(d)
    _remove_dir_if_empty(os.path.join(cache_dir, USD_DIR))
    _remove_dir_if_empty(os.path.join(job_dir(cache_dir), PENDING_JOB_DIR))
    _remove_dir_if_empty(job_dir(cache_dir))
    return count
