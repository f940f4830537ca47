"""Bake a .blend headless with Blender as a Python module (no ``blender`` program needed).

    .venv/bin/python tools/bake.py shot.blend [--resume | --resume-if-possible] [--if-settings-changed WHAT]
        [--with-surface] [--save] [--set NAME=VALUE ...] [--cache-dir DIR] [--save-as FILE] [--watch-parent]
    .venv/bin/python tools/bake.py shot.blend --surface [--restart] [--save] [--scheduler ADDRESS|local]
    .venv/bin/python tools/bake.py shot.blend --whitewater [--restart] [--save]

does what ``blender -b shot.blend --python-exit-code 1 --python-expr "import bpy; bpy.ops.surge.bake()"``
does: Surge is enabled from this source tree, the file is opened, its scene baked into the cache
folder its settings name, with one progress line per frame on stdout. Exit status 0 when the bake
completes, 1 with ``Surge: error: <message>`` on stderr when the scene is refused or the bake fails,
3 when it was cancelled (``cancel.flag`` in the cache folder). ``--save`` saves the .blend
afterwards, so that it plays the new cache when opened (on a render node, for instance).

``--with-surface`` meshes the liquid's surface inside the bake, frame by frame; ``--surface`` meshes
the surface of the cache already baked, without simulating (``bpy.ops.surge.bake_surface()``), with
the surface settings saved in the file, keeping the frames already meshed with those settings
(``--restart`` meshes every frame again). ``--whitewater`` makes the spray, foam and bubbles of the
cache already baked (``bpy.ops.surge.bake_whitewater()``) with the whitewater settings saved in the
file, the same way. Exit statuses as for the bake. With ``--surface``, ``--scheduler`` spreads the
frames over a Dask cluster (``local``: a LocalCluster of ``--workers`` processes here), each frame a
task, the files the same as a local run's.

``--resume`` continues the bake from the cache's last checkpoint (``--resume-if-possible``: when there is
one); when the settings or the scene changed since the cached frames were baked, it is refused unless
``--if-settings-changed resume`` (continue with the new ones from the checkpoint) or ``rebake`` (bake from
the start) says otherwise.

``--set NAME=VALUE`` changes a setting of ``Scene.surge`` (``NAME@OBJECT=VALUE``: of that object's
``Object.surge``; vectors as ``x:y:z``) before baking, ``--cache-dir`` bakes into another folder, and
``--save-as`` saves the changed file under a new name first (the file that plays this bake):
what a wedge (``tools/wedge.py``) runs for each combination. A ``--set`` of a setting that does not act in
the scene (one the solver does not read, an object's setting for another role) prints
``Surge: warning: ...`` on stderr: every value of it bakes the same. ``--watch-parent`` cancels the bake
cleanly (frames and checkpoints kept) when the process that started this one goes away.
"""

from __future__ import annotations

import argparse
import hashlib
import importlib
import os
import sys
import tempfile

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="tools/bake.py", description="Bake a .blend file's Surge liquid headless")
    parser.add_argument("blend", help="the .blend file to bake")
    parser.add_argument("--resume", action="store_true", help="continue from the cache's last checkpoint")
    parser.add_argument("--with-surface", action="store_true", help="mesh the surface inside the bake")
    parser.add_argument("--surface", action="store_true",
                        help="mesh the surface of the existing cache instead of baking the particles")
    parser.add_argument("--whitewater", action="store_true",
                        help="make the whitewater of the existing cache instead of baking the particles")
    parser.add_argument("--restart", action="store_true",
                        help="with --surface or --whitewater: make every frame again")
    parser.add_argument("--save", action="store_true", help="save the .blend after the bake")
    parser.add_argument("--resume-if-possible", action="store_true",
                        help="resume when the cache holds a checkpoint, else bake from the start")
    parser.add_argument("--if-settings-changed", choices=("refuse", "resume", "rebake"), default="refuse",
                        help="when resuming and the settings or the scene changed since the cached frames were "
                             "baked: refuse (the default), resume with the new ones from the checkpoint, or rebake "
                             "from the start")
    parser.add_argument("--scheduler", metavar="ADDRESS",
                        help="with --surface: spread the frames over this Dask scheduler ('local': a LocalCluster)")
    parser.add_argument("--workers", type=int, default=2, help="with --scheduler local: worker processes")
    parser.add_argument("--set", action="append", default=[], metavar="NAME=VALUE",
                        help="change a setting first (NAME@OBJECT=VALUE for an object's); repeatable")
    parser.add_argument("--cache-dir", help="bake into this cache folder instead of the scene's")
    parser.add_argument("--save-as", metavar="FILE", help="save the file under this name before baking")
    parser.add_argument("--watch-parent", action="store_true",
                        help="cancel the bake (keeping its frames) if the parent process goes away")
    args = parser.parse_args(argv)
    if args.resume and args.resume_if_possible:
        parser.error("--resume and --resume-if-possible exclude each other")
    if args.scheduler and not args.surface:
        parser.error("--scheduler goes with --surface (a wedge of bakes is tools/wedge.py)")
    if args.watch_parent and not args.cache_dir:
        parser.error("--watch-parent needs --cache-dir (the folder whose cancel flag it writes)")
    blend = os.path.abspath(args.blend)
    if not os.path.isfile(blend):
        print(f"Surge: error: no such file '{blend}'", file=sys.stderr)
        return 1

    sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
    from blender_session import enable_from_source  # imports bpy

    import bpy

    # a repository folder of this checkout's own: another checkout's link must not stand in for it
    tag = hashlib.sha256(ROOT.encode("utf-8")).hexdigest()[:12]
    module = enable_from_source(ROOT, os.path.join(tempfile.gettempdir(), f"surge_source_repo_{tag}"))
    bpy.ops.wm.open_mainfile(filepath=blend)
    headless = importlib.import_module(f"{module}.bridge.headless")
    if args.watch_parent:
        _watch_parent(os.path.abspath(args.cache_dir))
    if args.surface:
        if args.scheduler:
            return headless.bake_surface_on_cluster(args.scheduler, args.workers, ROOT, save=args.save,
                                                    restart=args.restart)
        return headless.bake_surface_open_file(save=args.save, restart=args.restart)
    if args.whitewater:
        return headless.bake_whitewater_open_file(save=args.save, restart=args.restart)
    if args.with_surface:
        bpy.context.scene.surge.use_surface_in_bake = True
    return headless.bake_open_file(resume="auto" if args.resume_if_possible else args.resume, save=args.save,
                                   settings=args.set, cache_dir=args.cache_dir or "", save_as=args.save_as or "",
                                   if_settings_changed=args.if_settings_changed.upper())


def _watch_parent(cache_dir: str) -> None:
    """Cancel the bake through its cancel flag once the parent process is gone (a Dask worker that
    died, say): the bake stops after its current substep and keeps its frames and checkpoints.

    The watcher thread only writes a file; it never touches Blender data."""
    import threading
    import time

    parent = os.getppid()

    def watch() -> None:
        while os.getppid() == parent:
            time.sleep(0.5)
        print("Surge: the process that started this bake is gone; cancelling", flush=True)
        while True:  # again and again: a bake that is just starting deletes a flag it finds
            os.makedirs(cache_dir, exist_ok=True)
            with open(os.path.join(cache_dir, "cancel.flag"), "w", encoding="utf-8"):
                pass
            time.sleep(0.5)

    threading.Thread(target=watch, daemon=True).start()


if __name__ == "__main__":
    sys.exit(main())
