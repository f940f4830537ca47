"""Command line: bake an exported job folder without Blender.

Usage (from the add-on folder, or with it on ``PYTHONPATH``)::

    python -m engine.cli bake JOB_DIR CACHE_DIR [--cancel-file PATH] [--checkpoint-every N]
                             [--resume-from FRAME|latest] [--accept-scene-change] [--usd-dir DIR]
                             [--surface FILE.json] [--whitewater FILE.json] [--run-id ID]
                             [--lock-token TOKEN] [--watch-parent] [--quiet]

Prints one JSON object per line on stdout:

* ``{"event": "stage", "stage": "compile" | "fill" | "simulate", "elapsed": s}``
* ``{"event": "frame", "frame": f, "frame_start": a, "frame_end": b, "substeps": n,
  "particles": N, "elapsed": s, "eta": s, "memory": bytes}`` (memory: the bake process's resident memory)
* ``{"event": "done", "status": "complete" | "cancelled", "frames": k, "particles": N, "elapsed": s}``
* ``{"event": "warning", "message": "..."}`` (a corrupt latest checkpoint skipped, for instance)
* ``{"event": "error", "error": "<exception class>", "message": "..."}``

Exit status: 0 complete, 1 engine error (message in the error event), 2 bad usage,
3 cancelled (frames written so far stay valid). Creating the file named by ``--cancel-file``
asks the bake to stop after the current substep; ``--watch-parent`` stops it the same way once the
process that started it has gone (the manifest then says 'stopped'), and so does a broken pipe on
stdout (nobody reads the progress). ``--checkpoint-every N`` saves the solver state every N frames
(``checkpoints/`` in the cache folder), and a bake stopped in between saves one at the last frame it
finished, so that it resumes exactly there; ``--resume-from`` continues the bake in
CACHE_DIR from one of them (``latest``: the last one every earlier frame is baked for that can be
read) with the job's settings, replacing the frames after it; a scene whose objects changed since
the cached frames were baked is refused unless ``--accept-scene-change`` is given.

The bake holds the cache folder's lock (:class:`engine.io.cache.CacheLock`) and writes only into a
new folder, an empty one or a Surge cache folder; the previous bake in it stays as it was until
the new one has simulated its first frame. ``--lock-token`` joins the lock of the process that
started this one (Blender) instead; ``--run-id`` is recorded in the manifest once the bake
replaces the previous one, so that process can tell the new frames from the old.

Work on each frame as it is cached, in this process (see :func:`engine.stages.follow_bake`):
``--usd-dir DIR`` writes the frame's particles to ``DIR/liquid_NNNNNN.usdc`` (:mod:`engine.io.usd`), and
``--surface FILE.json`` meshes it with those surface settings (:mod:`engine.surface.stage`; with
``--usd-dir``, its USD files too), and ``--whitewater FILE.json`` makes its spray, foam and bubbles
with those whitewater settings (:mod:`engine.whitewater.stage`, the job's colliders included; automatic
thresholds from the frames simulated so far), all before the frame's event is printed. The frame event
then also carries ``surface_seconds``, ``surface_vertices`` and ``surface_triangles``, and
``whitewater_seconds``, ``whitewateremitted``, ``whitewater_spray``, ``whitewater_foam`` and
``whitewater_bubbles``.
"""

from __future__ import annotations

import argparse
import json
import logging
import os
import sys

from .io.child import cancel_flag, emit, log_to_stderr
from .errors import BakeCancelled, BakeStopped, EngineError

log = logging.getLogger(__name__)


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
    b.add_argument("--accept-scene-change", action="store_true",
                   help="resume even though the scene's objects changed since the cached frames were baked")
    b.add_argument("--run-id", default=None, help="id recorded in the manifest for this bake")
    b.add_argument("--lock-token", default=None,
                   help="the cache folder is locked by the process that started this one, with this token")
    b.add_argument("--usd-dir", default=None, metavar="DIR",
                   help="write each frame's particles as a USD file into DIR as it is cached")
    b.add_argument("--surface", default=None, metavar="FILE.json",
                   help="mesh each frame with the surface settings in FILE.json as it is cached")
    b.add_argument("--whitewater", default=None, metavar="FILE.json",
                   help="make each frame's whitewater with the settings in FILE.json as it is cached")
    b.add_argument("--watch-parent", action="store_true",
                   help="stop cleanly (frames kept, a checkpoint where it stopped) if the parent process goes away")
    b.add_argument("--quiet", action="store_true", help="log warnings only (stderr)")
    args = parser.parse_args(argv)
    if args.checkpoint_every < 0:
        parser.error("--checkpoint-every must be 0 or more")
    resume_from = args.resume_from
    if resume_from is not None and resume_from != "latest":
        try:
            resume_from = int(resume_from)
        except ValueError:
            parser.error("--resume-from takes a frame number or 'latest'")

    log_to_stderr(args.quiet)
    from . import driver  # imported late so that argument errors do not wait for numba

    cancel = cancel_flag(args.cancel_file, args.watch_parent)

    from .io.cache import CacheLock

    try:
        job_inside = os.path.relpath(os.path.abspath(args.job_dir), os.path.abspath(args.cache_dir))
    except ValueError:  # Windows: on another drive
        job_inside = os.pardir
    # a job folder inside a new cache folder is not a foreign file there
    ignore = (job_inside.split(os.sep)[0],) if not job_inside.startswith(os.pardir) else ()
    progress = emit
    try:
        if args.usd_dir or args.surface or args.whitewater:
            progress = _following(args, resume_from is not None)
        lock = CacheLock.join(args.cache_dir, args.lock_token) if args.lock_token else None
        summary = driver.bake_job(args.job_dir, args.cache_dir, progress=progress, cancel=cancel,
                                  checkpoint_every=args.checkpoint_every, resume_from=resume_from,
                                  run_id=args.run_id, accept_scene_change=args.accept_scene_change, lock=lock,
                                  ignore=ignore)
    except BakeCancelled as exc:
        if isinstance(exc, BakeStopped):
            log.warning("%s", exc)
        getattr(progress, "finish", lambda *a: None)("cancelled", str(exc))
        _last(emit, {"event": "done", "status": "cancelled", "message": str(exc)})
        return 3
    except (EngineError, OSError, ValueError) as exc:
        getattr(progress, "finish", lambda *a: None)("failed", str(exc))
        _last(emit, {"event": "error", "error": type(exc).__name__, "message": str(exc)})
        return 1
    getattr(progress, "finish", lambda *a: None)("complete")
    _last(emit, {"event": "done", "status": "complete", **summary})
    return 0


def _last(emit_, event: dict) -> None:
    """The closing event; if the parent has just gone, there is nobody to tell and nothing to stop."""
    try:
        emit_(event)
    except BakeStopped:
        pass


def _following(args, resumed: bool):
    """The progress callback that writes the points' USD files and runs the surface and the whitewater on
    each cached frame."""
    from . import stages
    from .scene import channel_names, load_job

    scene, settings = load_job(args.job_dir)
    writers = []
    if args.usd_dir:
        from .io.usd import PointsWriter

        writers.append(PointsWriter(args.usd_dir, 0.5 * settings.particle_spacing))
    followers = []
    if args.surface:
        from .surface.stage import for_bake

        with open(args.surface, encoding="utf-8") as fh:
            followers.append(for_bake(settings, channel_names(scene), json.load(fh), use_usd=bool(args.usd_dir),
                                      job_dir=args.job_dir))
    if args.whitewater:
        with open(args.whitewater, encoding="utf-8") as fh:
            whitewater_settings = json.load(fh)
        followers.append(stages.make_stage("whitewater", {"particle_spacing": settings.particle_spacing,
                                                          "fps": scene.fps}, whitewater_settings,
                                           {"usd": "1" if args.usd_dir else "0", "job": args.job_dir,
                                            "in_bake": "1"}))
    # a new bake meshes every frame again; a resumed one keeps the frames meshed before its checkpoint
    return stages.follow_bake(args.cache_dir, followers, emit, restart=not resumed, writers=tuple(writers))


if __name__ == "__main__":
    sys.exit(main())
