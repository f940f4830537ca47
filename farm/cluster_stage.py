"""A stage over a particle cache (the liquid's surface) with its frames spread over a Dask cluster.

The same :class:`engine.stages.StageRunner` as a local run keeps the stage's manifest; only where a
frame is processed changes. Each frame is one task: a worker reads the particle frame from the
shared cache folder, runs the stage's ``process_frame`` on it (which writes the frame's files
atomically) and returns what the manifest records. This process lists each frame in the manifest
as its task returns, in whatever order they come back, so a frame counts only once its files are
complete. A worker that dies loses only the frame it was on; Dask runs that task again on another
worker. The files are the ones a local run writes: the same code on the same particle frame.

Only stages whose frames are independent of each other go to the cluster this way
(:data:`PER_FRAME_STAGES`); the surface is one (each frame's mesh comes from that frame's particles
alone).

Like :mod:`farm.wedge`, this module imports no ``bpy``; its task function is sent to the workers
by value, and imports ``engine`` from the repository folder it is given (the workers need this
repository's environment and the cache folder at the same path). It is a program over the engine,
run from the repository folder (``python -m farm.cluster_stage``, as the bridge starts it for a
headless bake): one JSON event per line on stdout, as ``engine.stages`` prints them, and the same
exit statuses.
"""

from __future__ import annotations

import argparse
import importlib
import importlib.util
import json
import os
import sys
import time

from engine import stages
from engine.errors import BakeCancelled, EngineError
from engine.io.cache import CacheLock, CacheReader
from engine.io.child import cancel_flag, emit, log_to_stderr

from . import wedge

#: Stages whose frames can be processed in any order, each on its own.
PER_FRAME_STAGES = ("surface",)


def process_frame_task(spec: dict, frame: int) -> dict:
    """Run one frame of a stage; runs on a worker. Returns the manifest's record of the frame."""
    if spec["root"] not in sys.path:
        sys.path.insert(0, spec["root"])
    importlib.import_module("engine.io.usd").ensure_pxr(spec.get("pxr_paths", []))
    stages = importlib.import_module("engine.stages")
    cache = importlib.import_module("engine.io.cache")
    reader = cache.CacheReader(spec["cache_dir"])
    stage = stages.make_stage(spec["stage"], reader.manifest, spec["settings"], spec["options"])
    folder = stages.stage_dir(spec["cache_dir"], spec["stage"])
    stage.begin(folder, dict(spec["state"]), resumed=True)
    path = reader.frame_path(frame)
    stamp = stages._source_stamp(path)
    arrays = reader.read_frame(frame)
    t0 = time.perf_counter()
    figures = stage.process_frame(frame, arrays, folder)
    stage.end("complete")  # a stage that defers its writes (the surface's overlapped USD file) finishes them
    worker = None
    try:
        from distributed import get_worker

        worker = get_worker().address
    except (ImportError, ValueError):
        pass
    return {"frame": int(frame), "stamp": stamp, "files": stage.frame_files(frame), "figures": figures,
            "seconds": round(time.perf_counter() - t0, 4), "particles": int(len(arrays["position"])),
            "worker": worker}


def run_on_cluster(cache_dir: str, stage_name: str, settings: dict, options: dict, root: str, scheduler: str,
                   workers: int = 2, restart: bool = False, progress=None, cancel=None, pxr_paths=()) -> dict:
    """Run stage ``stage_name`` over the cache in ``cache_dir``, one task per frame not done yet.

    Parameters
    ----------
    scheduler : str
        Address of a running Dask scheduler, or ``'local'`` for a LocalCluster of ``workers`` processes.
    root : str
        The repository folder (holding ``engine/``) as the workers see it.
    progress, cancel : callable, optional
        As for :class:`engine.stages.StageRunner`; ``cancel`` is polled while frames are out.

    Returns
    -------
    dict
        ``frames`` (done in total), ``processed`` (this run), ``kept``, ``elapsed`` (s), ``workers``
        (the addresses that processed frames).

    Raises
    ------
    BakeCancelled, EngineError, OSError
        As a local run; the frames listed in the manifest stay valid. ``CacheLockedError`` when
        another process (a bake, a stage) holds the cache folder.
    """
    if stage_name not in PER_FRAME_STAGES:
        raise ValueError(f"The {stage_name} stage carries state from frame to frame and runs on one machine")
    CacheReader(cache_dir)  # first: no lock file is left in a folder that holds no cache
    # this process writes the stage's manifest (the workers only its frame files): it holds the lock,
    # so a bake into the folder, Free Bake or another stage there is refused until it ends
    with CacheLock(cache_dir, f"the {stage_name} stage on a cluster"):
        return _run_locked(cache_dir, stage_name, settings, options, root, scheduler, workers, restart, progress,
                           cancel, pxr_paths)


def _run_locked(cache_dir, stage_name, settings, options, root, scheduler, workers, restart, progress, cancel,
                pxr_paths) -> dict:
    emit = progress or (lambda event: None)
    reader = CacheReader(cache_dir)
    stage = stages.make_stage(stage_name, reader.manifest, settings, options)
    runner = stages.StageRunner(cache_dir, stage, progress=emit, restart=restart)
    kept = set(runner.open(reader))
    todo = [f for f in reader.frames if f not in kept]
    first, last = (int(reader.frames[0]), int(reader.frames[-1])) if reader.frames else (0, 0)
    emit({"event": "stage", "stage": stage_name, "frames": len(todo), "kept": len(kept),
          "elapsed": round(time.perf_counter() - runner.started, 3)})
    spec = {"root": root, "cache_dir": cache_dir, "stage": stage_name, "settings": settings, "options": options,
            "state": runner.manifest["state"], "pxr_paths": list(pxr_paths)}
    used = set()
    run = wedge.WedgeRun(blend="", variations=[], out="", root=root,
                         scheduler=None if scheduler == "local" else scheduler, workers=workers)
    client, cluster = wedge._start_client(run)
    import cloudpickle
    from distributed import as_completed

    cloudpickle.register_pickle_by_value(sys.modules[__name__])

    def task(frame: int) -> dict:
        # a local function, so that Dask sends it (and this module) by value: see farm.wedge
        return process_frame_task(spec, frame)

    futures = [client.submit(task, f, key=f"surge-{stage_name}-{os.path.basename(cache_dir)}-{f}", pure=False)
               for f in todo]
    try:
        pending = as_completed(futures)
        for future in pending:
            if cancel is not None and cancel():
                raise BakeCancelled(f"{stage_name.capitalize()} cancelled; {len(runner.manifest['frames'])} frames "
                                    f"are done and kept")
            if future.status != "finished":
                exc = future.exception()
                raise OSError(f"A {stage_name} task failed on the cluster: {type(exc).__name__}: {exc}")
            r = future.result()
            frame = r["frame"]
            frames = set(runner.manifest["frames"])
            frames.add(frame)
            runner.manifest["frames"] = sorted(frames)
            runner.manifest["sources"][str(frame)] = r["stamp"]
            runner.manifest["files"][str(frame)] = r["files"]
            runner.manifest["updated"] = time.strftime("%Y-%m-%dT%H:%M:%S")
            runner._flush()
            runner.processed += 1
            used.add(r["worker"])
            elapsed = time.perf_counter() - runner.started
            event = {"event": "frame", "stage": stage_name, "frame": frame, "frame_start": first, "frame_end": last,
                     "seconds": r["seconds"], "elapsed": round(elapsed, 3),
                     "eta": round(elapsed / runner.processed * (len(todo) - runner.processed), 3),
                     "particles": r["particles"], "worker": r["worker"]}
            event.update(r["figures"])
            emit(event)
    except (BakeCancelled, KeyboardInterrupt) as exc:
        client.cancel(futures)
        runner.finish("cancelled", str(exc))
        raise
    except (EngineError, OSError) as exc:
        client.cancel(futures)
        runner.finish("failed", str(exc))
        raise
    finally:
        client.close()
        if cluster is not None:
            cluster.close()
    complete = set(reader.frames) <= set(runner.manifest["frames"])
    runner.finish("complete" if complete else "partial")
    return {"frames": len(runner.manifest["frames"]), "processed": runner.processed, "kept": len(kept),
            "elapsed": round(time.perf_counter() - runner.started, 3), "workers": sorted(w for w in used if w)}


def main(argv: list[str] | None = None) -> int:
    """``python -m farm.cluster_stage STAGE CACHE_DIR --root ROOT [--scheduler ADDRESS|local] ...``"""
    parser = argparse.ArgumentParser(prog="python -m farm.cluster_stage",
                                     description="Run a per-frame stage over a Surge cache on a Dask cluster")
    parser.add_argument("stage", help=f"one of: {', '.join(PER_FRAME_STAGES)}")
    parser.add_argument("cache_dir")
    parser.add_argument("--root", required=True, help="the repository folder (holding engine/) as the workers see it")
    parser.add_argument("--scheduler", default="local", help="a Dask scheduler's address, or 'local'")
    parser.add_argument("--workers", type=int, default=2, help="processes of a local cluster")
    parser.add_argument("--settings", default=None, help="JSON file with the stage's settings")
    parser.add_argument("--option", action="append", default=[], metavar="KEY=VALUE", help="host option for the stage")
    parser.add_argument("--restart", action="store_true", help="redo every frame, even those done with these settings")
    parser.add_argument("--cancel-file", default=None, help="stop cleanly once this file exists")
    parser.add_argument("--pxr-path", action="append", default=[], help="a folder holding the pxr module")
    args = parser.parse_args(argv)
    options = {}
    for item in args.option:
        key, eq, value = item.partition("=")
        if not eq:
            parser.error(f"--option takes KEY=VALUE, got {item!r}")
        options[key] = value
    log_to_stderr(True)
    try:
        settings = {}
        if args.settings:
            with open(args.settings, encoding="utf-8") as fh:
                settings = json.load(fh)
        summary = run_on_cluster(args.cache_dir, args.stage, settings, options, args.root, args.scheduler,
                                 workers=args.workers, restart=args.restart, progress=emit,
                                 cancel=cancel_flag(args.cancel_file), pxr_paths=args.pxr_path)
    except BakeCancelled as exc:
        emit({"event": "done", "stage": args.stage, "status": "cancelled", "message": str(exc)})
        return stages.EXIT_CANCELLED
    except (EngineError, OSError, ValueError) as exc:
        emit({"event": "error", "error": type(exc).__name__, "message": str(exc)})
        return stages.EXIT_ENGINE_ERROR
    emit({"event": "done", "stage": args.stage, "status": "complete", **summary})
    return stages.EXIT_COMPLETE


if __name__ == "__main__":
    sys.exit(main())
