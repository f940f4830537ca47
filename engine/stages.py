"""Stages over an existing cache: per-frame work that reads the particle frames and writes its own files.

A *stage* (the liquid surface, whitewater, ...) turns each frame of a particle cache into files of its
own, in a folder of the cache named after the stage, with a manifest of its own::

    <cache>/<stage>/manifest.json        format 'surge-stage', the stage's settings and their SHA-256,
                                         the frames done, and for each the particle frame it was made from
    <cache>/<stage>/...                  the stage's per-frame files (it names them)

:class:`StageRunner` drives one stage. It is used in two ways:

* **on its own** over a finished (or partly baked) cache: :meth:`StageRunner.run`, which is what
  ``python -m engine.stages run`` does in the bake's child process, so that an artist can change a
  stage's settings and redo it without simulating again;
* **inside a particle bake**, as frames are simulated: :func:`follow_bake` wraps the bake's progress
  callback and runs the stages on each frame right after the engine wrote it.

Every per-frame file is written under a temporary name and renamed into place
(:func:`write_atomic`), and a frame counts only once the stage's manifest lists it, so a killed stage
leaves a readable folder. A stage resumes by itself: frames the manifest lists, made with the same
settings from the same particle frame (same size and modification time of the ``.npz``), are kept;
any other frame is redone. Changing the settings (a different hash) starts the stage over; the
particle cache is never written.

Writing a stage: subclass :class:`Stage` (``name``, ``settings``, ``frame_files`` and
``process_frame``) and register a factory in :data:`STAGE_TYPES`.

Command line (JSON lines on stdout, as ``engine.cli bake``)::

    python -m engine.stages run STAGE CACHE_DIR [--settings FILE.json] [--cancel-file PATH]
                                [--restart] [--frames A-B] [--option KEY=VALUE ...] [--lock-token TOKEN]

A run holds the cache folder's lock (:class:`engine.io.lock.CacheLock`) while it writes, as a
bake does: a stage over a folder another process is baking into, or running another stage in, is
refused with an error event naming that process. ``--lock-token`` joins the lock of the process
that started this one (Blender, which took it before writing the stage's settings) instead.

* ``{"event": "stage", "stage": "<stage>", "frames": k, "kept": j, "elapsed": s}`` at the start,
* ``{"event": "frame", "stage": "<stage>", "frame": f, "frame_start": a, "frame_end": b,
  "elapsed": s, "eta": s, "memory": bytes, ...}`` per frame (plus the stage's own figures),
* ``{"event": "done", "stage": "<stage>", "status": "complete" | "cancelled", "frames": k, "elapsed": s}``,
* ``{"event": "error", "error": "<exception class>", "message": "..."}``.

Exit status as for a particle bake: 0 complete, 1 error, 2 bad usage, 3 cancelled (the frames done
stay valid).
"""

from __future__ import annotations

import argparse
import contextlib
import importlib
import json
import logging
import os
import re
import sys
import time
import zipfile
from typing import Callable, Iterable

import numpy as np

from .io.hashing import canonical_hash
from .io import atomic
from .io.cache import CacheLock, CacheReader
from .io.child import cancel_flag, emit, log_to_stderr
from .errors import BakeCancelled, CacheFormatError, EngineError
from .io.child import frames_left_time, resident_bytes

log = logging.getLogger(__name__)

FORMAT_NAME = "surge-stage"
FORMAT_VERSION = 1
MANIFEST = "manifest.json"

#: Exit statuses (the same as ``engine.cli bake``).
EXIT_COMPLETE, EXIT_ENGINE_ERROR, EXIT_USAGE, EXIT_CANCELLED = 0, 1, 2, 3

#: Stage name -> "module:factory", the factory called as ``factory(cache_manifest, settings, options)``
#: with the particle cache's manifest, the stage's settings (a dict, possibly empty) and host options
#: (a dict of strings); it returns a :class:`Stage`. Modules are relative to this package.
STAGE_TYPES = {
    "surface": ".surface.stage:make_stage",
    "whitewater": ".whitewater.stage:make_stage",
}

_NAME_RE = re.compile(r"^[a-z][a-z0-9_]{0,31}$")

Progress = Callable[[dict], None]
Cancel = Callable[[], bool]


class Stage:
    """One kind of per-frame work over a particle cache (subclass it).

    Attributes
    ----------
    name : str
        Folder of the stage inside the cache (lower case letters, digits, underscores).
    settings : dict
        JSON-safe settings; their hash decides whether frames done earlier are kept.
    file_re : re.Pattern
        Matches the names (relative to the stage folder, '/' separated) of every file the stage
        writes, temporary names included; :func:`clear_stage` deletes those and nothing else.
    """

    name = ""
    settings: dict = {}
    file_re = re.compile(r"^$")
    #: Matches the files (relative names, as ``file_re``) a run that starts over keeps: those a host may still
    #: be playing from a saved file (the USD folders of earlier runs); the host deletes them once nothing
    #: points at them (:func:`remove_unused_usd`). None keeps nothing.
    kept_on_restart: re.Pattern | None = None
    #: True for a stage that carries state from frame to frame (whitewater): a run keeps only the frames
    #: done before the first frame that must be redone, and processes the rest in order.
    sequential = False
    #: True for a stage whose ``process_frame`` may return before the frame's files are written (the
    #: surface's USD file, written while the next frame is meshed): it finishes them before it starts the
    #: next frame and in ``end``, and the runner lists a frame only then, so a frame counts only once
    #: its files are complete.
    defers_writes = False
    #: The frames whose deferred writes failed (never listed).
    failed_writes: frozenset | set = frozenset()

    def begin(self, folder: str, state: dict, resumed: bool) -> None:
        """Called once before the first frame. ``state`` is the manifest's ``state`` dict, kept across
        resumes (the stage may store in it what it must find again, such as a sub-folder name)."""

    def frame_files(self, frame: int) -> list[str]:
        """Files (relative to the stage folder) that ``process_frame`` writes for ``frame``."""
        raise NotImplementedError

    def process_frame(self, frame: int, arrays: dict, folder: str) -> dict:
        """Write the files of one frame (each through :func:`write_atomic`); return figures for the
        progress event (JSON-safe numbers or text)."""
        raise NotImplementedError

    def end(self, status: str) -> None:
        """Called once when the run ends ('complete', 'cancelled' or 'failed')."""


def settings_hash(settings: dict) -> str:
    """SHA-256 of the canonical JSON of a stage's settings."""
    return canonical_hash(settings)


@contextlib.contextmanager
def write_atomic(path: str):
    """Context manager giving a temporary path to write ``path`` through; renamed into place on success.

    The temporary name (engine.io.atomic) keeps the extension (``surface_000001.<id>.tmp.usdc``: USD picks the format
    from it)
    and is removed if the block raises.
    """
    os.makedirs(os.path.dirname(path) or ".", exist_ok=True)
    with atomic.replacing(path, keep_extension=True) as tmp:
        yield tmp
        if not os.path.exists(tmp):
            raise OSError(f"Nothing was written to '{tmp}'")


def stage_dir(cache_dir: str, name: str) -> str:
    if not _NAME_RE.match(name):
        raise ValueError(f"Stage name {name!r} is not a lower-case identifier")
    return os.path.join(cache_dir, name)


#: The name of a stage's folder of USD files in its state (``usd_<12 hex digits>``, one per run).
USD_DIR_RE = re.compile(r"^usd_[0-9a-f]{12}$")
#: The files of those folders (relative names): a run that starts over keeps them (:attr:`Stage.kept_on_restart`),
#: since a saved .blend may still play the last run's.
USD_KEPT_RE = re.compile(r"^usd_[0-9a-f]{12}/")


def read_frame(cache_dir: str, name: str, relative_path: str) -> dict:
    """The arrays of one frame file of stage ``name`` (``relative_path`` inside its folder, an ``.npz``).

    Raises
    ------
    CacheFormatError
        If the file is missing or cannot be read (naming the stage and the file).
    """
    path = os.path.join(stage_dir(cache_dir, name), relative_path)
    try:
        with np.load(path, allow_pickle=False) as z:
            return {k: z[k] for k in z.files}
    except (OSError, ValueError, EOFError, zipfile.BadZipFile) as exc:
        raise CacheFormatError(f"The {name} frame '{path}' cannot be read: {exc}") from exc


def usd_folder(cache_dir: str, name: str) -> str | None:
    """The folder of stage ``name``'s USD files in ``cache_dir`` (absolute, as its manifest names it), or
    None when the stage has written none."""
    folder = ((read_manifest(cache_dir, name) or {}).get("state") or {}).get("usd_dir")
    return os.path.join(cache_dir, name, folder) if isinstance(folder, str) and USD_DIR_RE.match(folder) else None


def _source_stamp(path: str) -> list[int]:
    st = os.stat(path)
    return [int(st.st_size), int(st.st_mtime_ns)]


def read_manifest(cache_dir: str, name: str) -> dict | None:
    """The manifest of stage ``name`` in ``cache_dir``, or None if the stage never ran there.

    Raises
    ------
    CacheFormatError
        If it exists but is unreadable, of another format, or of another version.
    """
    path = os.path.join(stage_dir(cache_dir, name), MANIFEST)
    if not os.path.isfile(path):
        return None
    try:
        with open(path, encoding="utf-8") as fh:
            manifest = json.load(fh)
    except (OSError, ValueError) as exc:
        raise CacheFormatError(f"The {name} manifest '{path}' cannot be read: {exc}") from exc
    if manifest.get("format") != FORMAT_NAME or manifest.get("stage") != name:
        raise CacheFormatError(f"'{path}' is not the manifest of a Surge {name} stage")
    if manifest.get("format_version") != FORMAT_VERSION:
        raise CacheFormatError(f"The {name} stage in '{cache_dir}' has format version "
                               f"{manifest.get('format_version')!r}; this version of Surge reads version "
                               f"{FORMAT_VERSION}. Run the stage again to replace it.")
    return manifest


def done_frames(cache_dir: str, name: str) -> list[int]:
    """Frames stage ``name`` has finished in ``cache_dir`` (whatever settings made them), ascending."""
    manifest = read_manifest(cache_dir, name)
    return sorted(manifest.get("frames", [])) if manifest else []


def own_files(cache_dir: str, name: str, file_re: re.Pattern) -> list[str]:
    """Every file of stage ``name`` in ``cache_dir``: its manifest and the names ``file_re`` matches."""
    folder = stage_dir(cache_dir, name)
    out = []
    if not os.path.isdir(folder):
        return out
    for root, _dirs, names in os.walk(folder):
        for n in sorted(names):
            path = os.path.join(root, n)
            rel = os.path.relpath(path, folder).replace(os.sep, "/")
            if atomic.final_name(rel) == MANIFEST or file_re.match(atomic.final_name(rel)):
                out.append(path)
    return out


def clear_stage(cache_dir: str, name: str, file_re: re.Pattern, keep: re.Pattern | None = None) -> int:
    """Delete the files of stage ``name`` (manifest first) and the folders they leave empty; returns the count.

    Files the stage did not write (the user's) and the particle cache are left alone, and so are the stage's
    files whose relative name ``keep`` matches.
    """
    folder = stage_dir(cache_dir, name)
    files = [p for p in own_files(cache_dir, name, file_re)
             if keep is None or not keep.match(os.path.relpath(p, folder).replace(os.sep, "/"))]
    manifest = os.path.join(folder, MANIFEST)
    # the manifest goes first: a folder whose manifest is gone lists no frame, whatever files remain
    files.sort(key=lambda p: p != manifest)
    for p in files:
        try:
            os.remove(p)
        except OSError as exc:
            raise OSError(f"Cannot delete '{p}': {exc.strerror or exc}") from exc
    for root, _dirs, _names in sorted(os.walk(folder, topdown=False), key=lambda t: -len(t[0])):
        if os.path.isdir(root) and not os.listdir(root):
            os.rmdir(root)
    return len(files)


class StageRunner:
    """Runs one :class:`Stage` over the frames of the particle cache in ``cache_dir``.

    Parameters
    ----------
    cache_dir : str
    stage : Stage
    progress : callable, optional
        Receives one dict per event (see the module docstring).
    cancel : callable, optional
        Polled before each frame; True stops the run (:class:`BakeCancelled`).
    restart : bool
        Redo every frame even where the manifest says it is done with the same settings.
    """

    def __init__(self, cache_dir: str, stage: Stage, progress: Progress | None = None, cancel: Cancel | None = None,
                 restart: bool = False):
        self.cache_dir = cache_dir
        self.stage = stage
        self.folder = stage_dir(cache_dir, stage.name)
        self.emit = progress or (lambda event: None)
        self.cancel = cancel
        self.restart = restart
        self.manifest: dict | None = None
        self.started = time.perf_counter()
        self.processed = 0
        #: the last frame of a stage that defers its writes, listed once they are done: (frame, stamp)
        self._pending: tuple | None = None
        self.first_done: float | None = None  # when the first frame of this run ended (it compiles the kernels)

    # -- manifest ------------------------------------------------------------------------------

    def _flush(self) -> None:
        atomic.write_json(os.path.join(self.folder, MANIFEST), self.manifest)

    def open(self, reader: CacheReader) -> list[int]:
        """Read or create the stage's manifest; returns the frames kept from an earlier run."""
        digest = settings_hash(self.stage.settings)
        try:
            old = None if self.restart else read_manifest(self.cache_dir, self.stage.name)
        except CacheFormatError as exc:
            log.warning("%s; the stage starts over", exc)
            old = None
        kept: list[int] = []
        state: dict = {}
        if old is not None and old.get("settings_hash") == digest:
            listed = set(reader.frames)
            sources = old.get("sources", {})
            for f in old.get("frames", []):
                path = reader.frame_path(f)
                if (f in listed and os.path.isfile(path) and sources.get(str(f)) == _source_stamp(path)
                        and all(os.path.isfile(os.path.join(self.folder, p)) for p in self.stage.frame_files(f))):
                    kept.append(f)
            if self.stage.sequential:
                prefix = []
                for f in reader.frames:
                    if f not in kept:
                        break
                    prefix.append(f)
                kept = prefix
            state = dict(old.get("state", {}))
        else:
            if os.path.isdir(self.folder):
                # starting over: a saved .blend may still play the last run's USD files, which stay
                clear_stage(self.cache_dir, self.stage.name, self.stage.file_re, keep=self.stage.kept_on_restart)
        os.makedirs(self.folder, exist_ok=True)
        self.manifest = {
            "format": FORMAT_NAME,
            "format_version": FORMAT_VERSION,
            "stage": self.stage.name,
            "settings": self.stage.settings,
            "settings_hash": digest,
            "frames": sorted(kept),
            "sources": {str(f): old["sources"][str(f)] for f in kept} if kept else {},
            "files": {str(f): old.get("files", {}).get(str(f), self.stage.frame_files(f)) for f in kept},
            "state": state,
            "status": "running",
            "message": "",
            "particle_cache": {k: reader.manifest.get(k) for k in ("settings_hash", "scene_hash", "created")},
            "updated": time.strftime("%Y-%m-%dT%H:%M:%S"),
        }
        self._flush()
        self.stage.begin(self.folder, self.manifest["state"], resumed=bool(kept))
        self._flush()  # the stage may have recorded state
        return sorted(kept)

    # -- frames --------------------------------------------------------------------------------

    def process(self, reader: CacheReader, frame: int, frame_start: int, frame_end: int, remaining: int = 0) -> dict:
        """Run the stage on one particle frame and list it in the manifest; returns the progress event."""
        path = reader.frame_path(frame)
        stamp = _source_stamp(path)
        arrays = reader.read_frame(frame)
        t0 = time.perf_counter()
        figures = self.stage.process_frame(frame, arrays, self.folder)
        seconds = time.perf_counter() - t0
        if self.stage.defers_writes:
            # the stage finished the files of every earlier frame before it started this one's
            self._list_pending()
            self._pending = (int(frame), stamp)
        else:
            self._list(int(frame), stamp)
        self.processed += 1
        elapsed = time.perf_counter() - self.started
        event = {"event": "frame", "stage": self.stage.name, "frame": int(frame), "frame_start": int(frame_start),
                 "frame_end": int(frame_end), "seconds": round(seconds, 4), "elapsed": round(elapsed, 3),
                 "eta": frames_left_time(self.first_done, self.processed, self.processed + remaining),
                 "memory": resident_bytes(),
                 "particles": int(len(arrays["position"]))}
        event.update(figures)
        if self.first_done is None:
            self.first_done = time.perf_counter()
        return event

    def _list(self, frame: int, stamp: list) -> None:
        """List a frame whose files are all written in the manifest."""
        frames = set(self.manifest["frames"])
        frames.add(frame)
        self.manifest["frames"] = sorted(frames)
        self.manifest["sources"][str(frame)] = stamp
        self.manifest["files"][str(frame)] = self.stage.frame_files(frame)
        self.manifest["updated"] = time.strftime("%Y-%m-%dT%H:%M:%S")
        self._flush()

    def _list_pending(self) -> None:
        if self._pending is not None:
            pending, self._pending = self._pending, None
            if pending[0] not in self.stage.failed_writes:
                self._list(*pending)

    def finish(self, status: str, message: str = "") -> None:
        error = None
        try:
            self.stage.end(status)  # a stage that defers its writes finishes them here
            self._list_pending()
        except (EngineError, OSError) as exc:
            error, status, message = exc, "failed", str(exc)
        self.manifest["status"] = status
        self.manifest["message"] = message
        self.manifest["elapsed"] = round(time.perf_counter() - self.started, 3)
        self._flush()
        if error is not None:
            raise error

    def run(self, frames: Iterable[int] | None = None) -> dict:
        """Process every listed particle frame (or those of ``frames``) not done yet.

        Returns
        -------
        dict
            ``frames`` (done in total), ``processed`` (this run), ``kept``, ``elapsed`` (s).

        Raises
        ------
        BakeCancelled
            When ``cancel()`` returned True; the frames done stay listed.
        CacheFormatError
            No particle cache in ``cache_dir``.
        """
        reader = CacheReader(self.cache_dir)
        available = reader.frames
        if frames is not None:
            wanted = set(int(f) for f in frames)
            available = [f for f in available if f in wanted]
        kept = set(self.open(reader))
        todo = [f for f in available if f not in kept]
        first = int(reader.manifest.get("frame_start", available[0] if available else 0))
        last = int(reader.manifest.get("frame_end", available[-1] if available else 0))
        self.emit({"event": "stage", "stage": self.stage.name, "frames": len(todo), "kept": len(kept),
                   "elapsed": round(time.perf_counter() - self.started, 3)})
        try:
            for k, frame in enumerate(todo):
                if self.cancel is not None and self.cancel():
                    raise BakeCancelled(f"{self.stage.name.capitalize()} cancelled at frame {frame}; "
                                        f"{len(self.manifest['frames'])} frames are done and kept")
                self.emit(self.process(reader, frame, first, last, remaining=len(todo) - k - 1))
        except BakeCancelled as exc:
            self.finish("cancelled", str(exc))
            raise
        except (EngineError, OSError) as exc:
            self.finish("failed", str(exc))
            raise
        complete = set(reader.frames) <= set(self.manifest["frames"])
        self.finish("complete" if complete else "partial")
        return {"frames": len(self.manifest["frames"]), "processed": self.processed, "kept": len(kept),
                "elapsed": round(time.perf_counter() - self.started, 3)}


def usd_folders(cache_dir: str, name: str) -> list[str]:
    """The USD folders (absolute paths, by name) stage ``name`` has in ``cache_dir``: its current run's and
    those earlier runs left for a saved file (:attr:`Stage.kept_on_restart`)."""
    folder = stage_dir(cache_dir, name)
    if not os.path.isdir(folder):
        return []
    return [os.path.join(folder, n) for n in sorted(os.listdir(folder))
            if USD_DIR_RE.match(n) and os.path.isdir(os.path.join(folder, n))]


def remove_usd_folder(path: str, file_re: re.Pattern) -> bool:
    """Delete the files of one stage USD folder that ``file_re`` matches (by its ``usd_<id>/<name>`` form) and
    the folder if that empties it; False if a file could not be deleted (on Windows, one Blender holds
    open: it goes with a later clean-up)."""
    base = os.path.basename(path)
    try:
        for n in os.listdir(path):
            if file_re.match(f"{base}/{atomic.final_name(n)}"):
                os.remove(os.path.join(path, n))
        if not os.listdir(path):
            os.rmdir(path)
    except FileNotFoundError:
        pass
    except OSError:
        return False
    return True


def follow_bake(cache_dir: str, stages: list[Stage], progress: Progress, restart: bool = False,
                writers: tuple = ()) -> Progress:
    """A progress callback for :func:`engine.driver.bake` that runs ``stages`` on every frame it writes.

    The driver reports the initial frame (or, resuming, the frames before the checkpoint) with its
    'simulate' stage event and every later frame with a 'frame' event, each once the frame is in the
    cache; the stages run on it before the event is passed on, so whoever shows frames as they are
    reported finds the stages' files already written. The frame event gains ``"<stage>_seconds"`` and
    the stage's own figures prefixed with its name. A stage that fails stops the bake with its error
    (the frames it finished stay listed). ``writers`` are callables ``writer(frame, arrays)`` run on
    each frame before the stages, without a manifest of their own (the points' USD files, which the
    host finds by frame number). Call ``.finish(status, message)`` on the returned callable when the
    bake ends.
    """
    runners = [StageRunner(cache_dir, s, restart=restart) for s in stages]
    skip = {"event", "stage", "frame", "frame_start", "frame_end", "elapsed", "eta", "memory", "particles", "seconds"}

    def run_on(reader: CacheReader, frame: int, event: dict, missing_only: bool = False) -> None:
        if writers:
            arrays = reader.read_frame(frame)
            for writer in writers:
                writer(frame, arrays)
        start = int(reader.manifest.get("frame_start", frame))
        end = int(reader.manifest.get("frame_end", frame))
        for runner in runners:
            if missing_only and frame in runner.manifest["frames"]:
                continue
            try:
                done = runner.process(reader, frame, start, end)
            except (EngineError, OSError) as exc:
                runner.finish("failed", str(exc))
                raise
            name = runner.stage.name
            event[f"{name}_seconds"] = done["seconds"]
            event.update({f"{name}_{k}": v for k, v in done.items() if k not in skip})

    def wrapped(event: dict) -> None:
        kind = event.get("event")
        if kind == "stage" and event.get("stage") == "simulate":
            # a new reader per event: the driver rewrites the manifest as it adds frames
            reader = CacheReader(cache_dir)
            for runner in runners:
                runner.open(reader)
            for frame in reader.frames:
                run_on(reader, frame, {}, missing_only=True)
        elif kind == "frame":
            run_on(CacheReader(cache_dir), int(event["frame"]), event)
        progress(event)

    def finish(status: str, message: str = "") -> None:
        for runner in runners:
            if runner.manifest is not None and runner.manifest.get("status") == "running":
                runner.finish(status, message)

    wrapped.finish = finish  # type: ignore[attr-defined]
    return wrapped


def make_stage(name: str, cache_manifest: dict, settings: dict | None = None, options: dict | None = None) -> Stage:
    """The registered stage ``name`` (:data:`STAGE_TYPES`) for a cache with ``cache_manifest``.

    Raises
    ------
    ValueError
        Unknown stage name.
    """
    if name not in STAGE_TYPES:
        raise ValueError(f"Unknown stage '{name}'; stages: {', '.join(sorted(STAGE_TYPES))}")
    module_name, _, factory = STAGE_TYPES[name].partition(":")
    module = importlib.import_module(module_name, package=__package__)
    return getattr(module, factory)(cache_manifest, dict(settings or {}), dict(options or {}))


def _frames_arg(text: str) -> range:
    a, _, b = text.partition("-")
    return range(int(a), int(b or a) + 1)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m engine.stages", description="Run a stage over a Surge cache")
    sub = parser.add_subparsers(dest="command", required=True)
    r = sub.add_parser("run", help="run a stage over the frames of a cache folder")
    r.add_argument("stage", help=f"one of: {', '.join(sorted(STAGE_TYPES))}")
    r.add_argument("cache_dir")
    r.add_argument("--settings", default=None, help="JSON file with the stage's settings")
    r.add_argument("--cancel-file", default=None, help="stop cleanly once this file exists")
    r.add_argument("--restart", action="store_true", help="redo every frame, even those done with these settings")
    r.add_argument("--frames", default=None, metavar="A-B", help="only these frames")
    r.add_argument("--option", action="append", default=[], metavar="KEY=VALUE", help="host option for the stage")
    r.add_argument("--quiet", action="store_true", help="log warnings only (stderr)")
    r.add_argument("--lock-token", default=None,
                   help="the cache folder is locked by the process that started this one, with this token")
    args = parser.parse_args(argv)
    if args.stage not in STAGE_TYPES:
        parser.error(f"unknown stage '{args.stage}'; stages: {', '.join(sorted(STAGE_TYPES))}")
    try:
        frames = _frames_arg(args.frames) if args.frames else None
    except ValueError:
        parser.error("--frames takes A-B or A")
    options = {}
    for item in args.option:
        key, eq, value = item.partition("=")
        if not eq:
            parser.error(f"--option takes KEY=VALUE, got {item!r}")
        options[key] = value
    log_to_stderr(args.quiet)
    cancel = cancel_flag(args.cancel_file)

    lock = None
    try:
        settings = {}
        if args.settings:
            with open(args.settings, encoding="utf-8") as fh:
                settings = json.load(fh)
        reader = CacheReader(args.cache_dir)  # first: no lock file is left in a folder that holds no cache
        lock = (CacheLock.join(args.cache_dir, args.lock_token) if args.lock_token else
                CacheLock(args.cache_dir, f"the {args.stage} stage").acquire())
        stage = make_stage(args.stage, reader.manifest, settings, options)
        summary = StageRunner(args.cache_dir, stage, progress=emit, cancel=cancel, restart=args.restart).run(frames)
    except BakeCancelled as exc:
        emit({"event": "done", "stage": args.stage, "status": "cancelled", "message": str(exc)})
        return EXIT_CANCELLED
    except (EngineError, OSError, ValueError) as exc:
        emit({"event": "error", "error": type(exc).__name__, "message": str(exc)})
        return EXIT_ENGINE_ERROR
    finally:
        if lock is not None:
            lock.release()
    emit({"event": "done", "stage": args.stage, "status": "complete", **summary})
    return EXIT_COMPLETE


if __name__ == "__main__":
    sys.exit(main())
