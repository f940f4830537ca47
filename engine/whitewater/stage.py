"""The whitewater stage: spray, foam and bubbles made from a baked liquid cache, in a folder of their own.

Layout inside the liquid's cache folder (the liquid's own files are only read)::

    whitewater/manifest.json                  format, settings and their hash, the liquid cache it
                                              was made from, thresholds, frames done, per-frame figures
    whitewater/frames/whitewater_NNNNNN.npz   the diffuse particles of one frame (engine.whitewater.model)

Every frame file holds the whole state of the model, so resuming after a cancel continues from the
last frame written and gives the same result, bit for bit, as an uninterrupted run. Files are
written to a temporary name and renamed into place; a frame counts once the manifest lists it.

The frame loop (:func:`run`) reads frames in, writes per-frame files and a manifest, reports
progress and honours a cancel callable: the shape of a generic stage over a cache. Only
:class:`WhitewaterStage` (prepare, then one call per frame in order) is specific to whitewater.
"""

from __future__ import annotations

import json
import logging
import os
import re
import time

import numpy as np

from .. import __version__
from ..cache import CacheReader, _write_json_atomic
from ..errors import BakeCancelled, CacheFormatError, InvalidSettingsError
from ..settings import WhitewaterSettings, whitewater_hash
from . import model

log = logging.getLogger(__name__)

STAGE_DIR = "whitewater"
FRAMES_DIR = "frames"
MANIFEST = "manifest.json"
FORMAT_NAME = "surge-whitewater"
FORMAT_VERSION = 1
_FRAME_RE = re.compile(r"^whitewater_(\d{6})\.npz$")

#: name -> (dtype, trailing shape, unit, description) of the arrays of a frame file
ATTRIBUTES = {
    "position": ("float32", (3,), "m", "world-space position"),
    "velocity": ("float32", (3,), "m/s", "velocity"),
    "age": ("float32", (), "s", "time since the particle was emitted"),
    "lifetime": ("float32", (), "s", "time left before the particle dissolves (runs down while it is foam)"),
    "kind": ("uint8", (), "", "0 spray, 1 foam, 2 bubble"),
    "id": ("int32", (), "", "stable particle id"),
}


def stage_dir(cache_dir: str) -> str:
    return os.path.join(cache_dir, STAGE_DIR)


def frame_path(cache_dir: str, frame: int) -> str:
    return os.path.join(stage_dir(cache_dir), FRAMES_DIR, f"whitewater_{frame:06d}.npz")


def read_manifest(cache_dir: str) -> dict | None:
    """The stage's manifest, or None if the cache has no whitewater; refuses unknown versions."""
    path = os.path.join(stage_dir(cache_dir), MANIFEST)
    if not os.path.isfile(path):
        return None
    try:
        with open(path, encoding="utf-8") as fh:
            doc = json.load(fh)
    except (OSError, ValueError) as exc:
        raise CacheFormatError(f"The whitewater manifest '{path}' cannot be read: {exc}") from exc
    if doc.get("format") != FORMAT_NAME or doc.get("format_version") != FORMAT_VERSION:
        raise CacheFormatError(f"'{path}' is whitewater of format {doc.get('format')!r} version "
                               f"{doc.get('format_version')!r}; this version of Surge reads {FORMAT_NAME} "
                               f"version {FORMAT_VERSION}. Run Bake Whitewater again to replace it.")
    return doc


def read_frame(cache_dir: str, frame: int) -> dict:
    """Arrays of one whitewater frame (``np.load(..., allow_pickle=False)``)."""
    doc = read_manifest(cache_dir)
    if doc is None or frame not in set(doc.get("frames", [])):
        raise CacheFormatError(f"Frame {frame} has no whitewater in '{cache_dir}'")
    try:
        with np.load(frame_path(cache_dir, frame), allow_pickle=False) as z:
            return {name: z[name] for name in z.files}
    except (OSError, ValueError) as exc:
        raise CacheFormatError(f"Whitewater frame {frame} in '{cache_dir}' cannot be read: {exc}") from exc


def own_files(cache_dir: str) -> list[str]:
    """Paths of the files the stage writes (and nothing else), for freeing it."""
    out = []
    base = stage_dir(cache_dir)
    for name in (MANIFEST, MANIFEST + ".tmp"):
        if os.path.isfile(os.path.join(base, name)):
            out.append(os.path.join(base, name))
    folder = os.path.join(base, FRAMES_DIR)
    if os.path.isdir(folder):
        for name in sorted(os.listdir(folder)):
            if _FRAME_RE.match(name[:-4] if name.endswith(".tmp") else name):
                out.append(os.path.join(folder, name))
    return out


def clear(cache_dir: str) -> int:
    """Delete the stage's files (the liquid's cache stays); returns how many were removed."""
    files = own_files(cache_dir)
    for p in files:
        os.remove(p)
    for d in (os.path.join(stage_dir(cache_dir), FRAMES_DIR), stage_dir(cache_dir)):
        if os.path.isdir(d) and not os.listdir(d):
            os.rmdir(d)
    return len(files)


def _gravity(cache_dir: str) -> np.ndarray:
    """The bake's gravity, from the job folder saved beside the cache (the default if there is none)."""
    path = os.path.join(cache_dir, "job", "scene.npz")
    if os.path.isfile(path):
        try:
            with np.load(path, allow_pickle=False) as z:
                if "gravity" in z.files:
                    return np.asarray(z["gravity"], dtype=np.float64).reshape(3)
        except (OSError, ValueError) as exc:
            raise CacheFormatError(f"The job '{path}' cannot be read: {exc}") from exc
    return np.array([0.0, 0.0, -9.81])


def _source(manifest: dict) -> dict:
    """What identifies the liquid a stage was made from."""
    return {k: manifest.get(k) for k in ("settings_hash", "scene_hash", "created", "particle_spacing", "fps")}


class WhitewaterStage:
    """The whitewater model over one liquid cache: :meth:`prepare`, then :meth:`frame` for each frame in order.

    Parameters
    ----------
    cache_dir : str
        Folder of a baked liquid (engine.cache).
    settings : WhitewaterSettings
    progress : callable, optional
        Receives progress events (dicts) while preparing.
    """

    def __init__(self, cache_dir: str, settings: WhitewaterSettings, progress=None):
        self.reader = CacheReader(cache_dir)
        self.cache_dir = cache_dir
        self.settings = settings
        self.progress = progress
        m = self.reader.manifest
        self.spacing = float(m.get("particle_spacing") or 0.0)
        if not self.spacing > 0.0:
            raise CacheFormatError(f"The cache in '{cache_dir}' records no particle spacing; bake it again")
        self.fps = float(m.get("fps") or 24.0)
        self.gravity = _gravity(cache_dir)
        self.frames = self.reader.frames
        if not self.frames:
            raise CacheFormatError(f"The cache in '{cache_dir}' has no baked frames; bake the liquid first")
        self.thresholds: model.Thresholds | None = None
        self.state = model.Diffuse.empty()
        self.next_id = 0
        self.previous: int | None = None

    def liquid(self, frame: int) -> model.LiquidFrame:
        arrays = self.reader.read_frame(frame)
        return model.LiquidFrame(arrays["position"], arrays["velocity"], arrays["id"], self.spacing)

    def prepare(self, thresholds: model.Thresholds | None = None, cancel=None) -> model.Thresholds:
        """Find the thresholds: given (a resumed stage), the settings' own, or from the shot's range."""
        if thresholds is None and not self.settings.use_auto_thresholds:
            thresholds = model.Thresholds.manual(self.settings)
        if thresholds is None:
            # every frame when the shot is short, else an even sample of about 48 frames
            stride = max(1, len(self.frames) // 48)
            sample = self.frames[::stride]
            maxima = []
            t0 = time.monotonic()
            for i, f in enumerate(sample):
                if cancel is not None and cancel():
                    raise BakeCancelled("Whitewater cancelled while measuring the shot")
                maxima.append(model.frame_maxima(self.liquid(f)))
                if self.progress:
                    self.progress({"event": "analyse", "frame": f, "done": i + 1, "of": len(sample),
                                   "elapsed": time.monotonic() - t0})
            thresholds = model.auto_thresholds(np.array(maxima), self.spacing, self.gravity)
        self.thresholds = thresholds
        return thresholds

    def restore(self, arrays: dict, frame: int, next_id: int) -> None:
        """Continue after ``frame``, whose particles are ``arrays`` (a resumed stage)."""
        self.state = model.Diffuse.from_arrays(arrays)
        self.previous = frame
        self.next_id = int(next_id)

    def frame(self, frame: int) -> tuple[dict, model.FrameStats]:
        """Advance to ``frame`` (the next frame of the cache) and return its particles and figures."""
        dt = 0.0 if self.previous is None else (frame - self.previous) / self.fps
        liquid = self.liquid(frame)
        self.state, self.next_id, stats = model.step(self.state, liquid, frame, dt, self.next_id, self.settings,
                                                     self.thresholds, self.spacing, self.gravity)
        self.previous = frame
        return self.state.arrays(), stats


def _write_frame(path: str, arrays: dict) -> None:
    os.makedirs(os.path.dirname(path), exist_ok=True)
    tmp = path + ".tmp"
    with open(tmp, "wb") as fh:
        np.savez(fh, **{k: np.ascontiguousarray(arrays[k], dtype=ATTRIBUTES[k][0]) for k in ATTRIBUTES})
        fh.flush()
        os.fsync(fh.fileno())
    os.replace(tmp, path)


def resumable(cache_dir: str, settings: WhitewaterSettings) -> tuple[int | None, str]:
    """The last whitewater frame a run with ``settings`` can continue from, or None and why not."""
    doc = read_manifest(cache_dir)
    if doc is None or not doc.get("frames"):
        return None, "there is no whitewater to resume"
    if doc.get("settings_hash") != whitewater_hash(settings):
        return None, "the whitewater settings changed since it was made"
    if doc.get("source") != _source(CacheReader(cache_dir).manifest):
        return None, "the liquid was baked again since"
    return int(doc["frames"][-1]), ""


def run(cache_dir: str, settings: WhitewaterSettings, progress=None, cancel=None, resume: bool = False) -> dict:
    """Make the whitewater of every baked frame of ``cache_dir`` into ``cache_dir/whitewater``.

    Parameters
    ----------
    progress : callable, optional
        Receives one dict per event: ``{"event": "stage", "stage": "analyse" | "whitewater"}``,
        ``{"event": "analyse", ...}`` while the automatic thresholds are measured, and per frame
        ``{"event": "frame", "frame", "frame_start", "frame_end", "emitted", "spray", "foam",
        "bubbles", "particles", "removed", "capped", "seconds", "elapsed", "eta"}``.
    cancel : callable, optional
        Returning True stops the run after the current frame (:class:`BakeCancelled`); the frames
        written stay valid and ``resume=True`` continues from them.
    resume : bool
        Continue the run in the folder (same settings and liquid) instead of starting over.

    Returns
    -------
    dict
        ``frames`` done, ``particles`` alive at the last frame, ``emitted`` in all, ``capped`` (newborns
        the cap refused), ``thresholds``, ``elapsed`` seconds.
    """
    t0 = time.monotonic()
    emit = progress or (lambda event: None)
    stage = WhitewaterStage(cache_dir, settings, progress=emit)
    source = _source(stage.reader.manifest)
    doc = None
    if resume:
        last, why = resumable(cache_dir, settings)
        if last is None:
            raise InvalidSettingsError([f"Whitewater cannot resume: {why}; run it from the start"])
        doc = read_manifest(cache_dir)
        stage.prepare(model.Thresholds.from_dict(doc["thresholds"]))
        stage.restore(read_frame(cache_dir, last), last, doc["next_id"][str(last)])
        todo = [f for f in stage.frames if f > last]
    else:
        clear(cache_dir)
        emit({"event": "stage", "stage": "analyse", "elapsed": 0.0})
        stage.prepare(cancel=cancel)
        doc = {"format": FORMAT_NAME, "format_version": FORMAT_VERSION, "engine_version": __version__,
               "settings": {k: getattr(settings, k) for k in settings.__dataclass_fields__},
               "settings_hash": whitewater_hash(settings), "source": source,
               "thresholds": stage.thresholds.to_dict(), "particle_spacing": stage.spacing, "fps": stage.fps,
               "gravity": [float(g) for g in stage.gravity],
               "attributes": {k: {"dtype": v[0], "shape": list(v[1]), "unit": v[2], "description": v[3]}
                              for k, v in ATTRIBUTES.items()},
               "frames": [], "stats": {}, "next_id": {}, "status": "running", "message": "",
               "created": time.strftime("%Y-%m-%dT%H:%M:%S")}
        todo = list(stage.frames)
    os.makedirs(os.path.join(stage_dir(cache_dir), FRAMES_DIR), exist_ok=True)
    manifest_path = os.path.join(stage_dir(cache_dir), MANIFEST)
    doc.update(status="running", message="")
    _write_json_atomic(manifest_path, doc)
    emit({"event": "stage", "stage": "whitewater", "elapsed": time.monotonic() - t0})

    first, last = stage.frames[0], stage.frames[-1]
    capped_total = sum(int(s.get("capped", 0)) for s in doc["stats"].values())
    loop_start = time.monotonic()
    for i, f in enumerate(todo):
        if cancel is not None and cancel():
            doc.update(status="cancelled", message=f"Cancelled before frame {f}")
            _write_json_atomic(manifest_path, doc)
            raise BakeCancelled(f"Whitewater cancelled; frames up to {doc['frames'][-1] if doc['frames'] else '-'} "
                                f"are kept")
        t_frame = time.monotonic()
        arrays, stats = stage.frame(f)
        _write_frame(frame_path(cache_dir, f), arrays)
        doc["frames"].append(int(f))
        doc["stats"][str(f)] = stats.to_dict()
        doc["next_id"][str(f)] = int(stage.next_id)
        if stats.capped:
            capped_total += stats.capped
            doc["message"] = (f"The cap of {settings.max_particles:,} whitewater particles was reached: "
                              f"{capped_total:,} new particles were not made; raise Max Particles or lower the "
                              f"amounts")
        _write_json_atomic(manifest_path, doc)
        now = time.monotonic()
        per_frame = (now - loop_start) / (i + 1)
        emit({"event": "frame", "frame": int(f), "frame_start": first, "frame_end": last, **stats.to_dict(),
              "particles": int(sum(stats.alive)), "seconds": now - t_frame, "elapsed": now - t0,
              "eta": per_frame * (len(todo) - i - 1)})
    doc["status"] = "complete"
    _write_json_atomic(manifest_path, doc)
    total = sum(int(s["emitted"]) for s in doc["stats"].values())
    return {"frames": len(doc["frames"]), "particles": int(len(stage.state)), "emitted": total,
            "capped": capped_total, "message": doc["message"], "thresholds": doc["thresholds"],
            "elapsed": time.monotonic() - t0}
