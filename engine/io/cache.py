"""The on-disk cache: a versioned manifest and one numpy ``.npz`` file per frame.

Layout of a cache folder::

    manifest.json               format, versions, ownership id, hashes, settings, frame list, attributes
    frames/frame_000001.npz     one file per baked frame (uncompressed numpy archive)
    checkpoints/                solver states for resuming (engine.io.checkpoint), listed in the manifest
    sdf/                        collider distance grids, named by a hash of their inputs
    job/                        the job (scene and settings) that baked the listed frames
    surge.lock                  exists while a bake or stage writes here (engine.io.lock)

Every file is written atomically (:mod:`engine.io.atomic`); a frame or checkpoint counts only once
the manifest lists it, and the manifest itself is replaced atomically. A reader therefore never
sees half a frame, even if the bake process is killed.

**Ownership.** A folder is a Surge cache folder once its ``manifest.json`` has the format marker
``surge-cache``; the manifest's ``cache_id`` is the folder's ownership id, kept by every bake into
it, and its ``run_id`` names the bake that wrote the listed frames. Surge writes into a folder only
if it is missing, empty, or already a Surge cache folder (:func:`claim_folder`); a folder holding
anything else is refused before anything is written (:class:`ForeignFolderError`), and inside a
cache folder Surge deletes only its own file names.

**Replacing a bake.** A new bake or a resume changes nothing until it has simulated its first
frame: only then does :class:`CacheWriter` replace the manifest (the old frames stop counting),
and the old files go after that, so a bake that fails or is cancelled before its first frame
leaves the previous one as it was.

**Versions.** ``format_version`` 1: the first release (the ``age`` attribute was added to it
without a new version). 2: ``age`` is a built-in attribute every frame holds; the manifest has
``cache_id``, ``run_id`` and the list of ``checkpoints``. Readers refuse any other version.

Frame archives hold these arrays (N particles; N may change between frames):

==========  ===========  =======  ==========================================
name        shape        dtype    meaning
==========  ===========  =======  ==========================================
position    (N, 3)       float32  world-space position, metres
velocity    (N, 3)       float32  velocity, m/s
density     (N,)         float32  SPH density, kg/m^3
id          (N,)         int32    stable particle id (survives reordering)
age         (N,)         float32  seconds since the particle was emitted (or since the first frame)
==========  ===========  =======  ==========================================

Besides the particles, a frame may hold *records*: arrays with one row per object of the scene rather
than per particle, declared in the manifest's ``records`` like the attributes (dtype, shape of one row,
unit, description). A bake with rigid bodies records their pose and velocities (``body_matrix`` (B, 4, 4),
``body_position``, ``body_orientation``, ``body_velocity``, ``body_angular_velocity``; see
:data:`engine.rigid.trajectory.RECORDS`), one row per body in the order of the manifest's ``rigid_bodies``;
:func:`engine.rigid.trajectory.read_trajectory` reads them back over every frame.

A bake may declare more attributes (named extra channels of
:class:`engine.core.particles.Particles`); the manifest's ``attributes`` lists every attribute a frame
holds, with its dtype, shape, unit and description.

Any tool that reads ``.npz`` (numpy) reads these files; ``np.load(path, allow_pickle=False)``.
"""


from __future__ import annotations

import json
import logging
import math
import os
import re
import time
import uuid
import zipfile

import numpy as np

from . import atomic
from .lock import LOCK_FILE, CacheLock, check_free, read_holder  # noqa: F401  (the cache's public lock API)
from ..errors import CacheFormatError, ForeignFolderError

log = logging.getLogger(__name__)

FORMAT_NAME = "surge-cache"
FORMAT_VERSION = 2
MANIFEST = "manifest.json"
FRAMES_DIR = "frames"
#: Distance grids of colliders (engine.collision.world), named by a hash of their inputs; kept by a re-bake.
SDF_DIR = "sdf"
_SDF_RE = re.compile(r"^[0-9a-f]{64}\.npz$")
_FRAME_RE = re.compile(r"^frame_(\d{6})\.npz$")
#: Solver states for resuming a bake (engine.io.checkpoint); a new bake deletes them.
CHECKPOINT_DIR = "checkpoints"
CHECKPOINT_RE = re.compile(r"^checkpoint_(\d{6})\.npz$")
#: The job (engine.scene.save_job) that baked the listed frames.
JOB_DIR = "job"
#: A sub-folder that is a cache folder of its own (preview bakes), allowed in a new cache folder.
PREVIEW_DIR = "preview"

#: name -> (dtype, trailing shape, unit, description)
ATTRIBUTES = {
    "position": ("float32", (3,), "m", "world-space position"),
    "velocity": ("float32", (3,), "m/s", "velocity"),
    "density": ("float32", (), "kg/m3", "SPH density"),
    "id": ("int32", (), "", "stable particle id"),
    "age": ("float32", (), "s", "time since the particle was emitted"),
}


def frame_filename(frame: int) -> str:
    if frame < 0 or frame > 999999:
        raise CacheFormatError(f"Frame {frame} is outside the cache's range 0-999999")
    return f"frame_{frame:06d}.npz"


def check_writable(cache_dir: str) -> None:
    """Raise ``OSError`` with a clear message if ``cache_dir`` cannot be created or written."""
    try:
        os.makedirs(cache_dir, exist_ok=True)
        probe = os.path.join(cache_dir, f".surge_write_test_{os.getpid()}")
        with open(probe, "wb") as fh:
            fh.write(b"ok")
        os.remove(probe)
    except OSError as exc:
        raise OSError(f"Cache directory '{cache_dir}' is not writable: {exc.strerror or exc}") from exc


# -- ownership -------------------------------------------------------------------------------------------


def _read_manifest(path: str):
    with open(path, encoding="utf-8") as fh:
        return json.load(fh)


def is_cache_folder(cache_dir: str) -> bool:
    """True if ``cache_dir`` holds a manifest with Surge's format marker (of any version)."""
    try:
        doc = _read_manifest(os.path.join(cache_dir, MANIFEST))
    except (OSError, ValueError):
        return False
    return isinstance(doc, dict) and doc.get("format") == FORMAT_NAME


def _is_lock_leftover(name: str) -> bool:
    return name == LOCK_FILE or (name.startswith(LOCK_FILE + ".") and name.endswith(".stale"))


def _holds_files(path: str) -> bool:
    if not os.path.isdir(path):
        return True
    return any(names for _base, _dirs, names in os.walk(path))


def check_folder(cache_dir: str, ignore: tuple = ()) -> bool:
    """Check that Surge may write into ``cache_dir``: it is missing, empty, or a Surge cache folder.

    Returns True if it is a Surge cache folder already, False if it is new (missing or empty).

    Parameters
    ----------
    ignore : tuple of str
        Names in the folder a caller of Surge's created there itself (a terminal bake's log).

    Raises
    ------
    ForeignFolderError
        If the folder holds files that are not Surge's (nothing is written or deleted then).
    """
    if not os.path.exists(cache_dir):
        return False
    if not os.path.isdir(cache_dir):
        raise ForeignFolderError(f"The cache folder '{cache_dir}' is a file, not a folder; choose another folder")
    manifest = os.path.join(cache_dir, MANIFEST)
    if os.path.exists(manifest):
        if is_cache_folder(cache_dir):
            return True
        raise ForeignFolderError(f"The cache folder '{cache_dir}' holds a '{MANIFEST}' that is not a Surge "
                                 f"cache's; choose an empty folder (Surge leaves that file alone)")
    foreign = []
    for name in sorted(os.listdir(cache_dir)):
        if name in ignore or _is_lock_leftover(name):
            continue
        if not _holds_files(os.path.join(cache_dir, name)):
            continue  # an empty folder (what deleting a bake leaves when another file kept it) is nobody's
        if name == PREVIEW_DIR and os.path.isdir(os.path.join(cache_dir, name)):
            try:
                check_folder(os.path.join(cache_dir, name))
                continue
            except ForeignFolderError:
                pass
        foreign.append(name)
    if foreign:
        shown = ", ".join(f"'{n}'" for n in foreign[:5]) + (f" and {len(foreign) - 5} more" if len(foreign) > 5
                                                              else "")
        raise ForeignFolderError(f"The cache folder '{cache_dir}' holds files that are not Surge's ({shown}); "
                                 f"choose an empty folder or a folder Surge baked into before")
    return False


def claim_folder(cache_dir: str, ignore: tuple = ()) -> dict:
    """Make ``cache_dir`` a Surge cache folder if it is new, and return its manifest.

    Call it holding the folder's :class:`CacheLock`. A new folder gets a manifest with a fresh
    ``cache_id``, no frames and the status 'empty'; a Surge cache folder is left as it is.

    Raises
    ------
    ForeignFolderError
        As :func:`check_folder`.
    """
    if check_folder(cache_dir, ignore):
        return _read_manifest(os.path.join(cache_dir, MANIFEST))
    os.makedirs(cache_dir, exist_ok=True)
    manifest = {"format": FORMAT_NAME, "format_version": FORMAT_VERSION, "cache_id": uuid.uuid4().hex,
                "run_id": "", "frames": [], "checkpoints": [], "status": "empty", "message": "",
                "attributes": _attribute_doc(ATTRIBUTES), "created": time.strftime("%Y-%m-%dT%H:%M:%S")}
    atomic.write_json(os.path.join(cache_dir, MANIFEST), manifest)
    return manifest


def _attribute_doc(attributes: dict) -> dict:
    return {k: {"dtype": v[0], "shape": list(v[1]), "unit": v[2], "description": v[3]} for k, v in attributes.items()}


def _remove_quietly(paths) -> list[str]:
    """Delete ``paths``; returns those that could not be deleted (logged, not raised: they are files
    the manifest no longer lists, which a later bake or Free Bake removes)."""
    left = []
    for p in paths:
        try:
            os.remove(p)
        except FileNotFoundError:
            pass
        except OSError as exc:
            log.warning("cannot delete the unlisted cache file '%s' (%s); it is removed later", p,
                        exc.strerror or exc)
            left.append(p)
    return left


def _numbered_files(folder: str, pattern: re.Pattern) -> dict[str, int | None]:
    """Files of ``folder`` named by ``pattern`` -> their number, and temporary files of those names -> None."""
    out = {}
    if os.path.isdir(folder):
        for name in os.listdir(folder):
            m = pattern.match(atomic.final_name(name))
            if m:
                out[os.path.join(folder, name)] = None if atomic.is_temporary(name) else int(m.group(1))
    return out


class CacheWriter:
    """Writes a bake into ``cache_dir`` (holding its :class:`CacheLock` is the caller's job).

    Creating it replaces the previous bake, as one transaction: the bake's first frames
    (``first_frames``) are written to disk under temporary names first, so that a full disk or any
    other write failure raises while the previous bake is untouched; then the manifest is replaced by
    one that lists no frame (the previous bake's frames stop counting), the first frames are renamed
    into place and listed, and only then are the previous bake's other frames and checkpoints
    deleted. Create it once the bake has its first frames to write.

    Parameters
    ----------
    cache_dir : str
    header : dict
        Manifest fields known at the start (settings, hashes, frame range, fps, engine version).
    extra_attributes : dict of str -> (dtype, trailing shape, unit, description), optional
        Attributes every frame holds besides the built-in ones (:data:`ATTRIBUTES`).
    run_id : str, optional
        Id of this bake (recorded as the manifest's ``run_id``; a host uses it to tell its bake's
        frames from an earlier one's). A new one is made if not given.
    first_frames : dict of int -> dict of arrays, optional
        The frames the new bake starts with (the initial state and the first simulated frame).
    """

    def __init__(self, cache_dir: str, header: dict, extra_attributes: dict | None = None,
                 run_id: str | None = None, first_frames: dict | None = None, records: dict | None = None):
        self.cache_dir = cache_dir
        self.records = dict(records or {})
        self.attributes = dict(ATTRIBUTES)
        for name, spec in (extra_attributes or {}).items():
            if name in ATTRIBUTES:
                raise CacheFormatError(f"Attribute '{name}' is built in; an extra attribute needs another name")
            self.attributes[name] = tuple(spec)
        self.frames_dir = os.path.join(cache_dir, FRAMES_DIR)
        os.makedirs(self.frames_dir, exist_ok=True)
        staged = self._stage(first_frames or {})
        manifest = {
            "format": FORMAT_NAME,
            "format_version": FORMAT_VERSION,
            "cache_id": _existing_cache_id(cache_dir) or uuid.uuid4().hex,
            "run_id": run_id or uuid.uuid4().hex,
            "attributes": _attribute_doc(self.attributes),
            "records": _attribute_doc(self.records),
            "frames": [],
            "checkpoints": [],
            "status": "baking",
            "message": "",
            "created": time.strftime("%Y-%m-%dT%H:%M:%S"),
        }
        manifest.update(header)
        self._replace(manifest, staged, lambda frame: True)

    @classmethod
    def resume(cls, cache_dir: str, frame: int, header: dict, run_id: str | None = None,
               first_frames: dict | None = None) -> "CacheWriter":
        """Continue the bake in ``cache_dir`` after ``frame``: frames and checkpoints after it are dropped,
        ``header`` replaces the manifest fields it names, and the status is 'baking' again.

        As a new bake, in one transaction: ``first_frames`` (the first frames after ``frame``) are on
        disk before anything changes, and the manifest stops listing the dropped files before they are
        deleted, so a reader never sees a listed frame without its file.
        """
        manifest = CacheReader(cache_dir).manifest
        writer = cls.__new__(cls)
        writer.cache_dir = cache_dir
        writer.frames_dir = os.path.join(cache_dir, FRAMES_DIR)
        os.makedirs(writer.frames_dir, exist_ok=True)
        writer.attributes = {k: (v["dtype"], tuple(v["shape"]), v["unit"], v["description"])
                             for k, v in manifest["attributes"].items()}
        writer.records = {k: (v["dtype"], tuple(v["shape"]), v["unit"], v["description"])
                          for k, v in manifest.get("records", {}).items()}
        staged = writer._stage(first_frames or {})
        manifest["frames"] = [f for f in manifest["frames"] if f <= frame]
        manifest["checkpoints"] = [f for f in manifest["checkpoints"] if f <= frame]
        manifest.update(header)
        manifest.update(status="baking", message="", run_id=run_id or uuid.uuid4().hex)
        writer._replace(manifest, staged, lambda f: f > frame)
        return writer

    def _stage(self, frames: dict) -> dict:
        """Write ``frames`` (frame -> arrays) under temporary names; returns frame -> temporary path. On a
        failure the ones written are removed and the error raised (nothing else has changed)."""
        staged = {}
        try:
            for frame, arrays in sorted(frames.items()):
                out = self._checked(frame, arrays)
                path = os.path.join(self.frames_dir, frame_filename(frame))
                staged[int(frame)] = atomic.stage(path, lambda fh, out=out: np.savez(fh, **out))
        except BaseException:
            for tmp in staged.values():
                atomic.discard(tmp)
            raise
        return staged

    def _replace(self, manifest: dict, staged: dict, dropped) -> None:
        """Replace the manifest with ``manifest``, put the ``staged`` frames into place and list them, then
        delete the frames and checkpoints of numbers ``dropped(number)`` says go (and temporary leftovers)."""
        self.manifest = manifest
        try:
            self._flush()
        except BaseException:
            for tmp in staged.values():
                atomic.discard(tmp)
            raise
        stale = _numbered_files(self.frames_dir, _FRAME_RE)
        stale.update(_numbered_files(os.path.join(self.cache_dir, CHECKPOINT_DIR), CHECKPOINT_RE))
        keep = set(staged.values())
        for frame, tmp in staged.items():
            path = os.path.join(self.frames_dir, frame_filename(frame))
            atomic.commit(tmp, path)
            keep.add(path)
        if staged:
            self.manifest["frames"] = sorted(set(self.manifest["frames"]) | set(staged))
            self._flush()
        _remove_quietly(p for p, f in stale.items() if p not in keep and (f is None or dropped(f)))

    def _checked(self, frame: int, arrays: dict) -> dict:
        """The arrays of one frame in the cache's dtypes, checked against its attributes."""
        out = {}
        missing = [name for name in self.attributes if name not in arrays]
        if missing:
            raise CacheFormatError(f"Frame {frame} lacks the attribute(s) {', '.join(missing)}")
        for name, (dtype, tail, _unit, _doc) in self.attributes.items():
            a = np.ascontiguousarray(arrays[name], dtype=dtype)
            if a.shape[1:] != tail:
                raise CacheFormatError(f"Attribute '{name}' has shape {a.shape}, expected (N, {tail})")
            out[name] = a
        for name, (dtype, tail, _unit, _doc) in self.records.items():
            if name not in arrays:
                raise CacheFormatError(f"Frame {frame} lacks the record '{name}'")
            a = np.ascontiguousarray(arrays[name], dtype=dtype)
            if a.shape[1:] != tail:
                raise CacheFormatError(f"Record '{name}' has shape {a.shape}, expected (B, {tail})")
            out[name] = a
        return out

    def _flush(self) -> None:
        atomic.write_json(os.path.join(self.cache_dir, MANIFEST), self.manifest)

    def write_frame(self, frame: int, arrays: dict) -> str:
        """Write one frame atomically, then list it in the manifest. Returns the file path."""
        out = self._checked(frame, arrays)
        path = os.path.join(self.frames_dir, frame_filename(frame))
        atomic.write_npz(path, out)
        self.manifest["frames"] = sorted(set(self.manifest["frames"]) | {int(frame)})
        self._flush()
        return path

    def add_checkpoint(self, frame: int) -> None:
        """List the checkpoint at ``frame`` (written by :func:`engine.io.checkpoint.save`) in the manifest."""
        self.manifest["checkpoints"] = sorted(set(self.manifest["checkpoints"]) | {int(frame)})
        self._flush()

    def finish(self, status: str, message: str = "", **extra) -> None:
        """Record how the bake ended: 'complete', 'cancelled' or 'failed'."""
        self.manifest["status"] = status
        self.manifest["message"] = message
        self.manifest.update(extra)
        self._flush()


def _existing_cache_id(cache_dir: str) -> str | None:
    try:
        doc = _read_manifest(os.path.join(cache_dir, MANIFEST))
    except (OSError, ValueError):
        return None
    return doc.get("cache_id") if isinstance(doc, dict) and doc.get("format") == FORMAT_NAME else None


def mark_ended(cache_dir: str, run_id: str | None, status: str, message: str) -> bool:
    """Record ``status`` for a bake that stopped without saying so (its process was killed or crashed).

    Only a manifest still saying 'baking' changes, and only if ``run_id`` (when given) is the bake
    it records. Returns True if the manifest changed.
    """
    path = os.path.join(cache_dir, MANIFEST)
    try:
        doc = _read_manifest(path)
    except (OSError, ValueError):
        return False
    if not isinstance(doc, dict) or doc.get("format") != FORMAT_NAME or doc.get("status") != "baking":
        return False
    if run_id is not None and doc.get("run_id") != run_id:
        return False
    doc.update(status=status, message=message)
    atomic.write_json(path, doc)
    return True


def _is_number(value, integer: bool = False) -> bool:
    kinds = (int,) if integer else (int, float)
    return isinstance(value, kinds) and not isinstance(value, bool) and (integer or math.isfinite(value))


def check_manifest(manifest: dict, path: str) -> None:
    """Raise :class:`CacheFormatError` naming ``path`` and the field if a manifest of this version holds a
    value of the wrong type or out of range (a hand-edited or damaged file): readers then index frames,
    build file names and do arithmetic with these values, and would otherwise fail with a traceback.
    """
    def bad(field: str, value, want: str):
        shown = json.dumps(value)
        shown = shown if len(shown) <= 60 else shown[:57] + "..."
        raise CacheFormatError(f"The cache manifest '{path}' is damaged: '{field}' holds {shown}, not {want}. "
                               f"Bake again to replace it.")

    for field in ("frames", "checkpoints"):
        values = manifest.get(field, [])
        if not isinstance(values, list):
            bad(field, values, "a list of frame numbers")
        for value in values:
            if not (_is_number(value, integer=True) and 0 <= value <= 999999):
                bad(field, value, "a frame number (0-999999)")
    for field in ("frame_start", "frame_end"):
        if field in manifest and not _is_number(manifest[field], integer=True):
            bad(field, manifest[field], "a frame number")
    for field in ("fps", "particle_spacing", "particle_radius"):
        if field in manifest and not (_is_number(manifest[field]) and manifest[field] > 0):
            bad(field, manifest[field], "a positive number")
    attributes = manifest.get("attributes", {})
    if not isinstance(attributes, dict):
        bad("attributes", attributes, "a table of attributes")
    for name, spec in attributes.items():
        if not (isinstance(spec, dict) and isinstance(spec.get("dtype"), str) and isinstance(spec.get("shape"), list)
                and all(_is_number(n, integer=True) and n > 0 for n in spec["shape"])):
            bad(f"attributes.{name}", spec, "an attribute's dtype and shape")
    for field in ("settings", "segments", "scene_objects"):
        if field in manifest and not isinstance(manifest[field], dict if field != "segments" else list):
            bad(field, manifest[field], "a table" if field != "segments" else "a list")


class CacheReader:
    """Reads a cache folder; refuses unknown formats and versions with a clear message."""

    def __init__(self, cache_dir: str):
        self.cache_dir = cache_dir
        path = os.path.join(cache_dir, MANIFEST)
        try:
            self.manifest = _read_manifest(path)
        except FileNotFoundError as exc:
            raise CacheFormatError(f"No Surge cache in '{cache_dir}' (no {MANIFEST})") from exc
        except (OSError, ValueError) as exc:
            raise CacheFormatError(f"The cache manifest '{path}' cannot be read: {exc}") from exc
        if not isinstance(self.manifest, dict):
            raise CacheFormatError(f"'{path}' is not a Surge cache (not a JSON object)")
        fmt, ver = self.manifest.get("format"), self.manifest.get("format_version")
        if fmt != FORMAT_NAME:
            raise CacheFormatError(f"'{path}' is not a Surge cache (format {fmt!r})")
        if ver != FORMAT_VERSION:
            raise CacheFormatError(f"The cache in '{cache_dir}' has format version {ver!r}; this version of "
                                   f"Surge reads version {FORMAT_VERSION}. Bake again to replace it.")
        check_manifest(self.manifest, path)

    @property
    def frames(self) -> list[int]:
        """Frames listed in the manifest (complete frames only), ascending."""
        return list(self.manifest.get("frames", []))

    @property
    def checkpoints(self) -> list[int]:
        """Frames whose checkpoint the manifest lists, ascending."""
        return list(self.manifest.get("checkpoints", []))

    def frame_path(self, frame: int) -> str:
        return os.path.join(self.cache_dir, FRAMES_DIR, frame_filename(frame))

    def read_frame(self, frame: int) -> dict:
        """Arrays of one frame as a dict ``name -> ndarray`` (see the module docstring).

        Raises
        ------
        CacheFormatError
            If the frame is not listed, or its file is missing, truncated or lacks an attribute.
        """
        if frame not in set(self.frames):
            raise CacheFormatError(f"Frame {frame} is not in the cache '{self.cache_dir}'")
        path = self.frame_path(frame)
        try:
            with np.load(path, allow_pickle=False) as z:
                arrays = {k: z[k] for k in z.files}
        except (OSError, ValueError, EOFError, zipfile.BadZipFile) as exc:
            raise CacheFormatError(f"Frame {frame} of the cache cannot be read: '{path}': {exc}") from exc
        missing = sorted(set(self.manifest.get("attributes", {})) - set(arrays))
        if missing:
            raise CacheFormatError(f"Frame {frame} of the cache ('{path}') lacks {', '.join(missing)}")
        # the particles' arrays only: the records (one row per object) are read_records'
        return {k: v for k, v in arrays.items() if k not in self.manifest.get("records", {})}

    def read_records(self, frame: int) -> dict:
        """The records of one frame (the manifest's ``records``: one row per object, such as the rigid
        bodies') as a dict ``name -> ndarray``.

        Raises
        ------
        CacheFormatError
            If the frame is not listed, or its file is missing, truncated or lacks a record.
        """
        if frame not in set(self.frames):
            raise CacheFormatError(f"Frame {frame} is not in the cache '{self.cache_dir}'")
        names = list(self.manifest.get("records", {}))
        path = self.frame_path(frame)
        try:
            with np.load(path, allow_pickle=False) as z:
                missing = [k for k in names if k not in z.files]
                if missing:
                    raise CacheFormatError(f"Frame {frame} of the cache ('{path}') lacks {', '.join(missing)}")
                return {k: z[k] for k in names}
        except (OSError, ValueError, EOFError, zipfile.BadZipFile) as exc:
            raise CacheFormatError(f"Frame {frame} of the cache cannot be read: '{path}': {exc}") from exc

    def check_frames(self, frames) -> None:
        """Read every one of ``frames`` (a resume keeps them); raises :class:`CacheFormatError` naming the
        first that cannot be read."""
        for frame in frames:
            self.read_frame(frame)


def own_files(cache_dir: str, include_grids: bool = False) -> list[str]:
    """Paths of the files Surge writes inside ``cache_dir`` (and nothing else): the manifest, frames,
    checkpoints and their temporary names; with ``include_grids``, the collider grids ``sdf/<sha256>.npz``.
    """
    out = []
    if include_grids:
        out += sorted(_numbered_files_any(os.path.join(cache_dir, SDF_DIR), _SDF_RE))
    for name in sorted(os.listdir(cache_dir)) if os.path.isdir(cache_dir) else ():
        if atomic.final_name(name) == MANIFEST and os.path.isfile(os.path.join(cache_dir, name)):
            out.append(os.path.join(cache_dir, name))  # a path built from cache_dir as given: see clear()
    for sub, pattern in ((FRAMES_DIR, _FRAME_RE), (CHECKPOINT_DIR, CHECKPOINT_RE)):
        out += sorted(_numbered_files(os.path.join(cache_dir, sub), pattern))
    return out


def _numbered_files_any(folder: str, pattern: re.Pattern) -> list[str]:
    if not os.path.isdir(folder):
        return []
    return [os.path.join(folder, n) for n in os.listdir(folder) if pattern.match(atomic.final_name(n))]


def clear(cache_dir: str, include_grids: bool = False, extra: tuple = ()) -> int:
    """Delete the cache files Surge owns in ``cache_dir``; returns how many were removed.

    Only the files of :func:`own_files` are touched, and ``extra`` (other files the host wrote
    there, which it names); the manifest goes last, so a clear that fails part-way leaves a folder
    still known as Surge's. Each sub-folder is removed only if it ends up empty. Nothing is deleted
    unless the folder is a Surge cache folder.

    Raises
    ------
    ForeignFolderError
        If ``cache_dir`` holds files but no Surge manifest.
    OSError
        If a file cannot be deleted (the message names it).
    """
    cache_dir = os.path.normpath(cache_dir)
    if not check_folder(cache_dir):
        return 0
    files = own_files(cache_dir, include_grids)
    top = [p for p in files if os.path.dirname(p) == cache_dir]
    ordered = [p for p in files if p not in top] + [p for p in extra if p not in files] + top
    for p in ordered:
        try:
            os.remove(p)
        except FileNotFoundError:
            pass
        except OSError as exc:
            raise OSError(exc.errno, f"Cannot delete '{p}': {exc.strerror or exc}") from exc
    for sub in (FRAMES_DIR, CHECKPOINT_DIR, SDF_DIR):
        d = os.path.join(cache_dir, sub)
        if os.path.isdir(d) and not os.listdir(d):
            os.rmdir(d)
    return len(ordered)
