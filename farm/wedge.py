"""Wedges: every combination of a few settings of one shot, each baked as its own task on a Dask cluster.

A wedge is what a studio bakes overnight to pick one look: ``--set dynamic_viscosity=0.001,0.01 --set
particle_spacing=0.02,0.03`` gives four combinations. Each combination is one task; a task runs a
separate headless Blender (``tools/bake.py``, or the ``blender`` program) that opens the shot, applies
the combination's settings, saves the shot under the combination's folder (so every result opens
and plays) and bakes it into its own cache folder there::

    OUT/wedge.json                         what was asked and how each combination ended
    OUT/cancel.flag                        exists while the whole wedge is being cancelled
    OUT/<combination>/<shot>.blend         the shot with the combination's settings, playing its cache
    OUT/<combination>/cache/               the combination's cache folder (manifest, frames, checkpoints)
    OUT/<combination>/task.json            which process on which host bakes it now
    OUT/<combination>/bake_output.log      what the bake printed

Dask (``dask.distributed``) schedules the tasks: a ``LocalCluster`` on this machine, or any running
scheduler (``dask scheduler`` and ``dask worker`` on a farm). A worker that dies takes its task with
it; the scheduler gives the task to another worker, which resumes the bake from its last checkpoint
(the orphaned Blender notices its worker is gone and cancels itself, keeping its frames). Re-running
the same wedge skips what completed and resumes the rest.

The plan (options, combinations, ``wedge.json``) is :mod:`farm.plan`. This module imports no ``bpy``
and of the engine only :mod:`engine.io.atomic`, :mod:`engine.io.lock`
and :mod:`engine.errors` (plain Python), and is sent to the workers by value with them
(``cloudpickle.register_pickle_by_value``): a worker needs dask, a Python that can run the bake
command, and the shared file system where the shot and ``OUT`` live. Each combination's bake holds
its cache folder's lock (:class:`engine.io.lock.CacheLock`); a retried task waits for a bake of
the combination still holding it (an orphan on another host) before it starts its own.
"""

from __future__ import annotations

import json
import os
import socket
import subprocess
import sys
import time
from dataclasses import dataclass

from engine import errors
from engine.io import atomic, lock as cachelock

from . import plan
from .plan import (BAKE_LOG, CANCEL_FLAG, CANCEL_WAIT, Combination, EXIT_CANCELLED, EXIT_DONE, EXIT_FAILED,
                   EXIT_USAGE, ORPHAN_WAIT, PROGRESS_TOPIC, TASK_FILE, Variation, WEDGE_FILE, WedgeError,
                   combinations, merge_previous, parse_set, read_wedge, wedge_document)


def write_json_atomic(path: str, doc: dict) -> None:
    """Write ``doc`` to ``path`` through a temporary file renamed into place (:mod:`engine.io.atomic`)."""
    atomic.write_json(path, doc, sort_keys=False)


# --- the task that runs on a worker -----------------------------------------------------------------

def _wait_for_orphan(folder: str, cache_dir: str, host: str, log) -> None:
    """A bake of this combination left running by a worker that died: ask it to cancel, wait, then stop it.

    Only a process on this host can be waited for; one on another host cancels itself when it
    notices its worker is gone (``tools/bake.py --watch-parent``).
    """
    try:
        with open(os.path.join(folder, TASK_FILE), encoding="utf-8") as f:
            task = json.load(f)
    except (OSError, ValueError):
        return
    pid = task.get("pid")
    if (task.get("host") != host or not isinstance(pid, int) or pid == os.getpid()
            or not cachelock.pid_running(pid)):
        return
    log(f"an earlier bake of this combination (process {pid}) still runs; asking it to stop")
    deadline = time.monotonic() + ORPHAN_WAIT
    while cachelock.pid_running(pid) and time.monotonic() < deadline:
        os.makedirs(cache_dir, exist_ok=True)
        with open(os.path.join(cache_dir, CANCEL_FLAG), "w", encoding="utf-8"):
            pass
        time.sleep(0.5)
    if cachelock.pid_running(pid):
        import signal

        os.kill(pid, signal.SIGKILL)
        time.sleep(0.5)


def _wait_for_cache_lock(cache_dir: str, log) -> None:
    """Wait (up to :data:`ORPHAN_WAIT`) while a live process holds the combination's cache folder: an
    orphaned bake on another host stops by itself once it notices its worker is gone. A holder that
    stays is not disturbed; the bake is then refused with a message naming it."""
    holder = cachelock.read_holder(cache_dir)
    if holder is None or not cachelock.holder_alive(holder):
        return
    log(f"the cache folder is held by {cachelock.describe_holder(holder)}; waiting for it to end")
    deadline = time.monotonic() + ORPHAN_WAIT
    while time.monotonic() < deadline:
        time.sleep(0.5)
        holder = cachelock.read_holder(cache_dir)
        if holder is None or not cachelock.holder_alive(holder):
            return


def bake_command(spec: dict) -> list[str]:
    """The command that bakes one combination (see ``tools/bake.py``)."""
    settings = [f"{k}={v}" for k, v in spec["settings"].items()]
    if spec.get("blender"):
        expr = ("import sys, importlib; "
                f"sys.exit(importlib.import_module({spec['addon_module'] + '.bridge.headless'!r}).bake_open_file("
                f"resume='auto', save=True, settings={settings!r}, cache_dir={spec['cache_dir']!r}, "
                f"save_as={spec['blend_out']!r}))")
        return [spec["blender"], "-b", spec["blend"], "--python-exit-code", "1", "--python-expr", expr]
    if not os.path.isfile(os.path.join(spec["root"], "tools", "bake.py")):
        # an installed add-on (no repository tools): Blender as a module in this Python, Surge enabled
        script = ("import importlib, sys\nimport bpy\nimport addon_utils\n"
                  f"addon_utils.enable({spec['addon_module']!r}, default_set=True)\n"
                  f"bpy.ops.wm.open_mainfile(filepath={spec['blend']!r})\n"
                  f"sys.exit(importlib.import_module({spec['addon_module'] + '.bridge.headless'!r}).bake_open_file("
                  f"resume='auto', save=True, settings={settings!r}, cache_dir={spec['cache_dir']!r}, "
                  f"save_as={spec['blend_out']!r}))\n")
        return [spec.get("python") or sys.executable, "-c", script]
    command = [spec.get("python") or sys.executable, os.path.join(spec["root"], "tools", "bake.py"), spec["blend"],
               "--resume-if-possible", "--save", "--cache-dir", spec["cache_dir"], "--save-as", spec["blend_out"],
               "--watch-parent"]
    for s in settings:
        command += ["--set", s]
    return command


def bake_combination(spec: dict) -> dict:
    """Bake one combination; runs on a Dask worker. Returns how it ended (never raises for a failed bake).

    Progress lines of the bake go to the client as events on :data:`PROGRESS_TOPIC`. The wedge's
    ``cancel.flag`` stops the bake after its current substep (its frames and checkpoints stay).
    """
    host = socket.gethostname()
    worker = None
    try:
        from distributed import get_worker

        worker_obj = get_worker()
        worker = worker_obj.address
    except (ImportError, ValueError):
        worker_obj = None

    def send(text: str) -> None:
        if worker_obj is not None:
            worker_obj.log_event(PROGRESS_TOPIC, {"name": spec["name"], "text": text})

    result = {"name": spec["name"], "host": host, "worker": worker, "status": "failed", "exit_code": None,
              "message": "", "bake_time": None}
    wedge_flag = os.path.join(spec["out"], CANCEL_FLAG)
    if os.path.exists(wedge_flag):
        result.update(status="cancelled", message="the wedge was cancelled before this combination started")
        return result
    os.makedirs(spec["folder"], exist_ok=True)
    _wait_for_orphan(spec["folder"], spec["cache_dir"], host, send)
    _wait_for_cache_lock(spec["cache_dir"], send)
    command = bake_command(spec)
    env = dict(os.environ)
    env["PYTHONUNBUFFERED"] = "1"
    if spec.get("threads"):
        env["NUMBA_NUM_THREADS"] = str(spec["threads"])  # workers sharing one machine share its cores
    log_path = os.path.join(spec["folder"], BAKE_LOG)
    start = time.monotonic()
    # output to a file, not a pipe: a bake orphaned by a dying worker must not die of a broken pipe
    # before it has cancelled itself cleanly
    try:
        with open(log_path, "w", encoding="utf-8") as log_file:
            process = subprocess.Popen(command, stdin=subprocess.DEVNULL, stdout=log_file,
                                       stderr=subprocess.STDOUT, cwd=spec["folder"], env=env)
    except OSError as exc:
        result["message"] = f"the bake command could not start: {exc}"
        return result
    write_json_atomic(os.path.join(spec["folder"], TASK_FILE),
                      {"host": host, "pid": process.pid, "worker": worker, "started": time.time()})
    send("started")
    lines: list[str] = []
    cache_flag = os.path.join(spec["cache_dir"], CANCEL_FLAG)
    with open(log_path, encoding="utf-8", errors="replace") as log_file:
        pending = ""
        while True:
            finished = process.poll() is not None
            pending += log_file.read()
            *complete, pending = pending.split("\n")
            for line in complete:
                line = line.rstrip()
                if line:
                    lines.append(line)
                    if line.startswith("Surge:"):
                        send(line)
            del lines[:-200]
            if finished:
                break
            if os.path.exists(wedge_flag) and os.path.isdir(spec["cache_dir"]) and not os.path.exists(cache_flag):
                # written again while the bake runs: a bake deletes a flag it finds when it starts
                with open(cache_flag, "w", encoding="utf-8"):
                    pass
            time.sleep(0.25)
        if pending.strip():
            lines.append(pending.strip())
    code = process.returncode
    errors = [ln.partition("Surge: error:")[2].strip() for ln in lines if "Surge: error:" in ln]
    result.update(exit_code=code, bake_time=round(time.monotonic() - start, 3))
    if code == EXIT_DONE:
        result["status"] = "complete"
        # a setting that does not act (one the solver ignores) bakes what the other values bake: say so
        warnings = [ln.partition("Surge: warning:")[2].strip() for ln in lines if "Surge: warning:" in ln]
        result["message"] = "; ".join(dict.fromkeys(warnings))
    elif code == EXIT_CANCELLED:
        result.update(status="cancelled", message="cancelled; frames and checkpoints kept, the next run resumes")
    else:
        tail = "; ".join(errors) or (lines[-1] if lines else "no output")
        result["message"] = f"the bake failed (exit status {code}): {tail}"
    try:
        os.remove(os.path.join(spec["folder"], TASK_FILE))
    except OSError:
        pass
    return result


# --- the client ---------------------------------------------------------------------------------------

@dataclass
class WedgeRun:
    """Everything a wedge run needs; see :func:`run_wedge`."""

    blend: str
    variations: list[Variation]
    out: str
    root: str  # the repository (tools/bake.py) as the workers see it
    scheduler: str | None = None  # address of a running scheduler; None starts a LocalCluster
    workers: int = 2  # LocalCluster workers (each bakes one combination at a time)
    python: str | None = None  # Python that runs tools/bake.py on the workers (default: the worker's own)
    blender: str | None = None  # run the ``blender`` program instead (Surge installed and enabled there)
    addon_module: str = "bl_ext.user_default.surge"  # Surge's module name in that Blender
    log: object = print


def _spec(run: WedgeRun, c: Combination) -> dict:
    return {"name": c.name, "settings": c.settings, "folder": c.folder, "cache_dir": c.cache_dir,
            "blend_out": c.blend, "blend": run.blend, "out": run.out, "root": run.root, "python": run.python,
            "blender": run.blender, "addon_module": run.addon_module,
            # a LocalCluster's workers share this machine's cores; a farm's workers use their own machine's
            "threads": None if run.scheduler else max(1, (os.cpu_count() or 1) // max(1, run.workers))}


def by_value_modules() -> tuple:
    """The modules whose code goes to the workers with each task (a worker imports nothing of Surge)."""
    return (sys.modules[__name__], plan, atomic, cachelock, errors)


def _start_client(run: WedgeRun):
    import cloudpickle
    from distributed import Client, LocalCluster

    # the workers get this module's code with each task (and the engine's atomic writes and lock
    # checks it uses): they need not import the add-on
    for module in by_value_modules():
        cloudpickle.register_pickle_by_value(module)
    if run.scheduler:
        return Client(run.scheduler, timeout="30s"), None
    cluster = LocalCluster(n_workers=run.workers, threads_per_worker=1, processes=True, dashboard_address=None)
    return Client(cluster), cluster


def run_wedge(run: WedgeRun) -> int:
    """Bake every combination not yet complete; returns 0 (all complete), 1 (one failed) or 3 (cancelled).

    ``wedge.json`` is rewritten as each combination ends. Ctrl-C (KeyboardInterrupt) cancels: the
    running bakes stop after their current substep, keep their frames and checkpoints, and the
    same command resumes them later.
    """
    from distributed import as_completed, wait

    blend = os.path.abspath(run.blend)
    out = os.path.abspath(run.out)
    run.blend, run.out = blend, out
    combos = combinations(blend, run.variations, out)
    os.makedirs(out, exist_ok=True)
    merge_previous(read_wedge(out), blend, run.variations, combos)
    flag = os.path.join(out, CANCEL_FLAG)
    if os.path.exists(flag):
        os.remove(flag)  # left by a cancelled run: this run is asked for
    scheduler_name = run.scheduler or f"LocalCluster({run.workers} workers)"

    def save() -> None:
        write_json_atomic(os.path.join(out, WEDGE_FILE), wedge_document(blend, run.variations, combos, scheduler_name))

    todo = [c for c in combos if c.status != "complete"]
    for c in combos:
        if c.status == "complete":
            run.log(f"[{c.name}] complete earlier; skipped")
    save()
    if not todo:
        run.log(f"Wedge: all {len(combos)} combinations complete in '{out}'")
        return EXIT_DONE

    started = time.monotonic()
    client, cluster = _start_client(run)
    cancelled = False
    try:
        run.log(f"Wedge: {len(todo)} of {len(combos)} combinations on {scheduler_name} "
                f"(started in {time.monotonic() - started:.1f} s)")
        client.subscribe_topic(PROGRESS_TOPIC, lambda event: run.log(f"[{event[1]['name']}] {event[1]['text']}"))

        def task(spec: dict) -> dict:
            # a local function: plain pickle refuses it, so Dask sends it with cloudpickle, which
            # sends this module by value (registered in _start_client) and workers need not import it
            return bake_combination(spec)

        futures = {}
        for c in todo:
            c.status, c.attempts = "running", c.attempts + 1
            futures[client.submit(task, _spec(run, c), key=f"surge-wedge-{c.name}-{c.attempts}",
                                  pure=False)] = c
        save()
        pending = as_completed(list(futures))
        try:
            for future in pending:
                _record(future, futures[future], run)
                save()
        except KeyboardInterrupt:
            cancelled = True
            run.log("Wedge: cancelling; running bakes stop after their current substep and keep their frames")
            with open(flag, "w", encoding="utf-8"):
                pass
            running = [f for f, c in futures.items() if c.status == "running"]
            try:
                wait(running, timeout=CANCEL_WAIT)
            except TimeoutError:
                run.log(f"Wedge: some bakes did not stop within {CANCEL_WAIT:.0f} s; they are left to the cluster")
            for future in running:
                _record(future, futures[future], run)
            save()
            client.cancel([f for f, c in futures.items() if c.status == "running"])
            for c in futures.values():
                if c.status == "running":
                    c.status, c.message = "cancelled", "cancelled before it finished"
            save()
    finally:
        client.close()
        if cluster is not None:
            cluster.close()
        if os.path.exists(flag):
            os.remove(flag)
    done = sum(c.status == "complete" for c in combos)
    failed = [c for c in combos if c.status == "failed"]
    run.log(f"Wedge: {done} of {len(combos)} complete, {len(failed)} failed; results in "
            f"'{os.path.join(out, WEDGE_FILE)}'")
    if cancelled or any(c.status == "cancelled" for c in combos):
        return EXIT_CANCELLED
    return EXIT_FAILED if failed else EXIT_DONE


def _record(future, c: Combination, run: WedgeRun) -> None:
    """Copy a finished task's result into its combination."""
    if not future.done():
        return
    if future.status == "finished":
        r = future.result()
        c.status, c.message = r["status"], r["message"]
        c.bake_time, c.host, c.worker = r["bake_time"], r["host"], r["worker"]
    elif future.status == "cancelled":
        c.status, c.message = "cancelled", "cancelled before it started"
    else:
        exc = future.exception()
        c.status, c.message = "failed", f"the task failed on the cluster: {type(exc).__name__}: {exc}"
    c.frames = _cached_frames(c.cache_dir)
    took = f" in {c.bake_time:.1f} s" if c.bake_time is not None and c.status != "cancelled" else ""
    run.log(f"[{c.name}] {c.status}{took}" + (f": {c.message}" if c.message else ""))


def _cached_frames(cache_dir: str) -> list:
    try:
        with open(os.path.join(cache_dir, "manifest.json"), encoding="utf-8") as f:
            frames = json.load(f).get("frames", [])
    except (OSError, ValueError, AttributeError):
        return []
    if isinstance(frames, dict):
        frames = list(frames)
    out = []
    for f in frames:
        try:
            out.append(int(f))
        except (TypeError, ValueError):
            continue
    return sorted(out)


# --- command line -------------------------------------------------------------------------------------

def main(argv: list[str] | None = None, default_root: str | None = None) -> int:
    """``tools/wedge.py`` (and ``python -m bridge.wedge`` from the add-on's folder): see that tool's help."""
    import argparse

    parser = argparse.ArgumentParser(prog="tools/wedge.py",
                                     description="Bake every combination of the given settings of a shot, each as "
                                                 "its own task on a Dask cluster")
    parser.add_argument("blend", help="the shot (.blend) to vary")
    parser.add_argument("--set", action="append", default=[], metavar="NAME=V1,V2", required=True,
                        help="a setting and its values (NAME@OBJECT=... for an object's setting; vectors as x:y:z); "
                             "repeatable")
    parser.add_argument("--scheduler", help="address of a running Dask scheduler (default: a LocalCluster here)")
    parser.add_argument("--workers", type=int, default=2, help="LocalCluster workers (default 2)")
    parser.add_argument("--out", help="output folder (default: SHOT_wedge beside the shot)")
    parser.add_argument("--worker-root", help="the folder holding tools/bake.py as the workers see it "
                                              "(default: this repository)")
    parser.add_argument("--worker-python", help="Python that runs tools/bake.py on the workers (default: theirs)")
    parser.add_argument("--blender", help="bake with this blender program instead of tools/bake.py (Surge "
                                          "installed and enabled in its preferences)")
    parser.add_argument("--addon-module", default="bl_ext.user_default.surge",
                        help="Surge's module name in that Blender (with --blender)")
    args = parser.parse_args(argv)
    blend = os.path.abspath(args.blend)
    if not os.path.isfile(blend):
        print(f"Surge: error: no such file '{blend}'", file=sys.stderr)
        return EXIT_USAGE
    if args.workers < 1:
        parser.error("--workers must be at least 1")
    root = args.worker_root or default_root or os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
    try:
        variations = [parse_set(text) for text in args.set]
        run = WedgeRun(blend=blend, variations=variations, out=args.out or os.path.splitext(blend)[0] + "_wedge",
                       root=root, scheduler=args.scheduler, workers=args.workers, python=args.worker_python,
                       blender=args.blender, addon_module=args.addon_module, log=lambda text: print(text, flush=True))
        return run_wedge(run)
    except WedgeError as exc:
        print(f"Surge: error: {exc}", file=sys.stderr)
        return EXIT_USAGE


if __name__ == "__main__":
    sys.exit(main())
