"""The on-disk cache: a versioned manifest and one numpy ``.npz`` file per frame.

Layout of a cache folder::

    manifest.json               format, versions, hashes, settings, frame list, attributes
    frames/frame_000001.npz     one file per baked frame (uncompressed numpy archive)

Every frame is written to a temporary name, flushed, and renamed into place; a frame counts only
once the manifest lists it, and the manifest itself is replaced atomically. A reader therefore
never sees half a frame, even if the bake process is killed.

Frame archives hold these arrays (N particles; N may change between frames):

==========  ===========  =======  ==========================================
name        shape        dtype    meaning
==========  ===========  =======  ==========================================
position    (N, 3)       float32  world-space position, metres
velocity    (N, 3)       float32  velocity, m/s
density     (N,)         float32  SPH density, kg/m^3
id          (N,)         int32    stable particle id (survives reordering)
==========  ===========  =======  ==========================================

A bake may declare more attributes (the particle age, named extra channels of
:class:`engine.particles.Particles`); the manifest's ``attributes`` lists every attribute a frame
holds, with its dtype, shape, unit and description.

Any tool that reads ``.npz`` (numpy) reads these files; ``np.load(path, allow_pickle=False)``.
"""

from __future__ import annotations

import json
import os
import re
import time

import numpy as np

from .errors import CacheFormatError

FORMAT_NAME = "surge-cache"
FORMAT_VERSION = 1
MANIFEST = "manifest.json"
FRAMES_DIR = "frames"
#: Distance grids of colliders (engine.collision), named by a hash of their inputs; kept by a re-bake.
SDF_DIR = "sdf"
_SDF_RE = re.compile(r"^[0-9a-f]{64}\.npz$")
_FRAME_RE = re.compile(r"^frame_(\d{6})\.npz$")
#: Solver states for resuming a bake (engine.checkpoint); a new bake deletes them.
CHECKPOINT_DIR = "checkpoints"
CHECKPOINT_RE = re.compile(r"^checkpoint_(\d{6})\.npz$")

#: name -> (dtype, trailing shape, unit, description)
ATTRIBUTES = {
    "position": ("float32", (3,), "m", "world-space position"),
    "velocity": ("float32", (3,), "m/s", "velocity"),
    "density": ("float32", (), "kg/m3", "SPH density"),
    "id": ("int32", (), "", "stable particle id"),
}


def frame_filename(frame: int) -> str:
    if frame < 0 or frame > 999999:
        raise CacheFormatError(f"Frame {frame} is outside the cache's range 0-999999")
    return f"frame_{frame:06d}.npz"


def _write_json_atomic(path: str, doc: dict) -> None:
    tmp = path + ".tmp"
    with open(tmp, "w", encoding="utf-8") as fh:
        json.dump(doc, fh, indent=1, sort_keys=True)
        fh.flush()
        os.fsync(fh.fileno())
    os.replace(tmp, path)


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


class CacheWriter:
    """Writes a bake into ``cache_dir``.

    Parameters
    ----------
    cache_dir : str
    header : dict
        Manifest fields known at the start (settings, hashes, frame range, fps, engine version).
    extra_attributes : dict of str -> (dtype, trailing shape, unit, description), optional
        Attributes every frame holds besides the built-in ones (:data:`ATTRIBUTES`).
    """

    def __init__(self, cache_dir: str, header: dict, extra_attributes: dict | None = None):
        self.cache_dir = cache_dir
        self.attributes = dict(ATTRIBUTES)
        for name, spec in (extra_attributes or {}).items():
            if name in ATTRIBUTES:
                raise CacheFormatError(f"Attribute '{name}' is built in; an extra attribute needs another name")
            self.attributes[name] = tuple(spec)
        self.frames_dir = os.path.join(cache_dir, FRAMES_DIR)
        os.makedirs(self.frames_dir, exist_ok=True)
        self.manifest = {
            "format": FORMAT_NAME,
            "format_version": FORMAT_VERSION,
            "attributes": {k: {"dtype": v[0], "shape": list(v[1]), "unit": v[2], "description": v[3]}
                           for k, v in self.attributes.items()},
            "frames": [],
            "status": "baking",
            "message": "",
            "created": time.strftime("%Y-%m-%dT%H:%M:%S"),
        }
        self.manifest.update(header)
        self._flush()

    @classmethod
    def resume(cls, cache_dir: str, frame: int, header: dict) -> "CacheWriter":
        """Continue the bake in ``cache_dir`` after ``frame``: frames after it are dropped, ``header``
        replaces the manifest fields it names, and the status is 'baking' again.

        The manifest stops listing the dropped frames before their files are deleted, so a reader
        never sees a listed frame without its file.
        """
        manifest = CacheReader(cache_dir).manifest
        writer = cls.__new__(cls)
        writer.cache_dir = cache_dir
        writer.frames_dir = os.path.join(cache_dir, FRAMES_DIR)
        os.makedirs(writer.frames_dir, exist_ok=True)
        writer.attributes = {k: (v["dtype"], tuple(v["shape"]), v["unit"], v["description"])
                             for k, v in manifest["attributes"].items()}
        dropped = [f for f in manifest.get("frames", []) if f > frame]
        manifest["frames"] = [f for f in manifest.get("frames", []) if f <= frame]
        manifest.update(header)
        manifest.update(status="baking", message="")
        writer.manifest = manifest
        writer._flush()
        for f in dropped:
            path = os.path.join(writer.frames_dir, frame_filename(f))
            if os.path.exists(path):
                os.remove(path)
        return writer

    def _flush(self) -> None:
        _write_json_atomic(os.path.join(self.cache_dir, MANIFEST), self.manifest)

    def write_frame(self, frame: int, arrays: dict) -> str:
        """Write one frame atomically, then list it in the manifest. Returns the file path."""
        out = {}
        for name, (dtype, tail, _unit, _doc) in self.attributes.items():
            a = np.ascontiguousarray(arrays[name], dtype=dtype)
            if a.shape[1:] != tail:
                raise CacheFormatError(f"Attribute '{name}' has shape {a.shape}, expected (N, {tail})")
            out[name] = a
        path = os.path.join(self.frames_dir, frame_filename(frame))
        tmp = path + ".tmp"
        with open(tmp, "wb") as fh:
            np.savez(fh, **out)
            fh.flush()
            os.fsync(fh.fileno())
        os.replace(tmp, path)
        frames = set(self.manifest["frames"])
        frames.add(int(frame))
        self.manifest["frames"] = sorted(frames)
        self._flush()
        return path

    def finish(self, status: str, message: str = "", **extra) -> None:
        """Record how the bake ended: 'complete', 'cancelled' or 'failed'."""
        self.manifest["status"] = status
        self.manifest["message"] = message
        self.manifest.update(extra)
        self._flush()


class CacheReader:
    """Reads a cache folder; refuses unknown formats and versions with a clear message."""

    def __init__(self, cache_dir: str):
        self.cache_dir = cache_dir
        path = os.path.join(cache_dir, MANIFEST)
        try:
            with open(path, encoding="utf-8") as fh:
                self.manifest = json.load(fh)
        except FileNotFoundError as exc:
            raise CacheFormatError(f"No Surge cache in '{cache_dir}' (no {MANIFEST})") from exc
        except (OSError, ValueError) as exc:
            raise CacheFormatError(f"The cache manifest '{path}' cannot be read: {exc}") from exc
        fmt, ver = self.manifest.get("format"), self.manifest.get("format_version")
        if fmt != FORMAT_NAME:
            raise CacheFormatError(f"'{path}' is not a Surge cache (format {fmt!r})")
        if ver != FORMAT_VERSION:
            raise CacheFormatError(f"The cache in '{cache_dir}' has format version {ver!r}; this version of "
                                   f"Surge reads version {FORMAT_VERSION}. Bake again to replace it.")

    @property
    def frames(self) -> list[int]:
        """Frames listed in the manifest (complete frames only), ascending."""
        return list(self.manifest.get("frames", []))

    def frame_path(self, frame: int) -> str:
        return os.path.join(self.cache_dir, FRAMES_DIR, frame_filename(frame))

    def read_frame(self, frame: int) -> dict:
        """Arrays of one frame as a dict ``name -> ndarray`` (see the module docstring)."""
        if frame not in set(self.frames):
            raise CacheFormatError(f"Frame {frame} is not in the cache '{self.cache_dir}'")
        try:
            with np.load(self.frame_path(frame), allow_pickle=False) as z:
                return {k: z[k] for k in z.files}
        except (OSError, ValueError) as exc:
            raise CacheFormatError(f"Frame {frame} of the cache '{self.cache_dir}' cannot be read: {exc}") from exc


def own_files(cache_dir: str, include_grids: bool = False) -> list[str]:
    """Paths of the files Surge writes inside ``cache_dir`` (and nothing else).

    With ``include_grids``, also the cached collider grids ``sdf/<sha256>.npz``.
    """
    out = []
    gdir = os.path.join(cache_dir, SDF_DIR)
    if include_grids and os.path.isdir(gdir):
        for name in sorted(os.listdir(gdir)):
            base = name[:-4] if name.endswith(".tmp") else name
            if _SDF_RE.match(base):
                out.append(os.path.join(gdir, name))
    m = os.path.join(cache_dir, MANIFEST)
    for p in (m, m + ".tmp"):
        if os.path.isfile(p):
            out.append(p)
    for sub, pattern in ((FRAMES_DIR, _FRAME_RE), (CHECKPOINT_DIR, CHECKPOINT_RE)):
        folder = os.path.join(cache_dir, sub)
        if os.path.isdir(folder):
            for name in sorted(os.listdir(folder)):
                base = name[:-4] if name.endswith(".tmp") else name
                if pattern.match(base):
                    out.append(os.path.join(folder, name))
    return out


def clear(cache_dir: str, include_grids: bool = False) -> int:
    """Delete the cache files Surge owns in ``cache_dir``; returns how many were removed.

    Only ``manifest.json``, ``frames/frame_NNNNNN.npz`` and ``checkpoints/checkpoint_NNNNNN.npz`` (and
    their temporary names) are touched,
    plus, with ``include_grids`` (freeing a bake), the collider grids ``sdf/<sha256>.npz``, which a
    re-bake keeps and reuses; each folder is removed only if it ends up empty.
    """
    files = own_files(cache_dir, include_grids)
    for p in files:
        os.remove(p)
    for sub in (FRAMES_DIR, CHECKPOINT_DIR, SDF_DIR):
        d = os.path.join(cache_dir, sub)
        if os.path.isdir(d) and not os.listdir(d):
            os.rmdir(d)
    return len(files)
