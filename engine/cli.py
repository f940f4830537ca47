"""Command line: bake an exported job folder without Blender.

Usage (from the add-on folder, or with it on ``PYTHONPATH``)::

    python -m engine.cli bake JOB_DIR CACHE_DIR [--cancel-file PATH] [--checkpoint-every N]
                             [--resume-from FRAME|latest] [--quiet]

Prints one JSON object per line on stdout:

* ``{"event": "stage", "stage": "compile" | "fill" | "simulate", "elapsed": s}``
* ``{"event": "frame", "frame": f, "frame_start": a, "frame_end": b, "substeps": n,
  "particles": N, "elapsed": s, "eta": s, "memory": bytes}`` (memory: the bake process's resident memory)
* ``{"event": "done", "status": "complete" | "cancelled", "frames": k, "particles": N, "elapsed": s}``
* ``{"event": "error", "error": "<exception class>", "message": "..."}``

and, for the whitewater stage over a baked cache (:mod:`engine.whitewater.stage`)::

    python -m engine.cli whitewater CACHE_DIR [--settings FILE.json] [--cancel-file PATH] [--resume] [--quiet]

which prints ``{"event": "stage", "stage": "analyse" | "whitewater"}``, ``{"event": "frame", "frame": f,
"emitted": n, "spray": a, "foam": b, "bubbles": c, "particles": N, "capped": k, "seconds": s, ...}``
per frame and the same ``done`` and ``error`` events.

Exit status: 0 complete, 1 engine error (message in the error event), 2 bad usage,
3 cancelled (frames written so far stay valid). Creating the file named by ``--cancel-file``
asks the bake to stop after the current substep. ``--checkpoint-every N`` saves the solver state
every N frames (``checkpoints/`` in the cache folder); ``--resume-from`` continues the bake in
CACHE_DIR from one of them (``latest``: the last one every earlier frame is baked for) with the
job's settings, replacing the frames after it.
"""

from __future__ import annotations

import argparse
import json
import logging
import os
import sys

from .errors import BakeCancelled, EngineError


def _emit(event: dict) -> None:
    sys.stdout.write(json.dumps(event) + "\n")
    sys.stdout.flush()


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m engine.cli", description="Surge headless bake")
    sub = parser.add_subparsers(dest="command", required=True)
    b = sub.add_parser("bake", help="bake a job folder into a cache folder")
    b.add_argument("job_dir")
    b.add_argument("cache_dir")
    b.add_argument("--cancel-file", default=None, help="stop cleanly once this file exists")
    b.add_argument("--checkpoint-every", type=int, default=0, metavar="N",
                   help="save the solver state every N frames so the bake can resume (0: never)")
    b.add_argument("--resume-from", default=None, metavar="FRAME",
                   help="continue the bake in CACHE_DIR from its checkpoint at FRAME, or 'latest'")
    b.add_argument("--quiet", action="store_true", help="log warnings only (stderr)")
    w = sub.add_parser("whitewater", help="make spray, foam and bubbles from a baked cache")
    w.add_argument("cache_dir")
    w.add_argument("--settings", default=None, help="JSON file of whitewater settings (defaults if left out)")
    w.add_argument("--cancel-file", default=None, help="stop cleanly once this file exists")
    w.add_argument("--resume", action="store_true", help="continue the whitewater already in CACHE_DIR")
    w.add_argument("--quiet", action="store_true", help="log warnings only (stderr)")
    args = parser.parse_args(argv)
    if args.command == "whitewater":
        return _whitewater(args)
    if args.checkpoint_every < 0:
        parser.error("--checkpoint-every must be 0 or more")
    resume_from = None
    if args.resume_from is not None:
        from .checkpoint import resumable_frames

        if args.resume_from == "latest":
            frames = resumable_frames(args.cache_dir)
            if not frames:
                _emit({"event": "error", "error": "CacheFormatError",
                       "message": f"The cache '{args.cache_dir}' has no checkpoint to resume from; bake it again"})
                return 1
            resume_from = frames[-1]
        else:
            try:
                resume_from = int(args.resume_from)
            except ValueError:
                parser.error("--resume-from takes a frame number or 'latest'")

    logging.basicConfig(level=logging.WARNING if args.quiet else logging.INFO, stream=sys.stderr,
                        format="%(levelname)s %(name)s: %(message)s")
    from . import driver  # imported late so that argument errors do not wait for numba

    cancel = None
    if args.cancel_file:
        flag = args.cancel_file

        def cancel() -> bool:
            return os.path.exists(flag)

    try:
        summary = driver.bake_job(args.job_dir, args.cache_dir, progress=_emit, cancel=cancel,
                                  checkpoint_every=args.checkpoint_every, resume_from=resume_from)
    except BakeCancelled as exc:
        _emit({"event": "done", "status": "cancelled", "message": str(exc)})
        return 3
    except (EngineError, OSError) as exc:
        _emit({"event": "error", "error": type(exc).__name__, "message": str(exc)})
        return 1
    _emit({"event": "done", "status": "complete", **summary})
    return 0


def _whitewater(args) -> int:
    logging.basicConfig(level=logging.WARNING if args.quiet else logging.INFO, stream=sys.stderr,
                        format="%(levelname)s %(name)s: %(message)s")
    from .errors import InvalidSettingsError
    from .settings import whitewater_from_dict
    from .whitewater import stage

    flag = args.cancel_file
    cancel = (lambda: os.path.exists(flag)) if flag else None
    try:
        data = {}
        if args.settings:
            with open(args.settings, encoding="utf-8") as fh:
                try:
                    data = json.load(fh)
                except ValueError as exc:
                    raise InvalidSettingsError([f"Whitewater settings '{args.settings}' are not JSON: {exc}"]) from exc
        settings = whitewater_from_dict(data)
        summary = stage.run(args.cache_dir, settings, progress=_emit, cancel=cancel, resume=args.resume)
    except BakeCancelled as exc:
        _emit({"event": "done", "status": "cancelled", "message": str(exc)})
        return 3
    except (EngineError, OSError) as exc:
        _emit({"event": "error", "error": type(exc).__name__, "message": str(exc)})
        return 1
    _emit({"event": "done", "status": "complete", **summary})
    return 0


if __name__ == "__main__":
    sys.exit(main())
