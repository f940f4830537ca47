"""Bake a .blend headless with Blender as a Python module (no ``blender`` program needed).

    .venv/bin/python tools/bake.py shot.blend [--resume] [--with-surface] [--save]
    .venv/bin/python tools/bake.py shot.blend --surface [--restart] [--save]
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
file, the same way. Exit statuses as for the bake.
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
    args = parser.parse_args(argv)
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
    if args.surface:
        return headless.bake_surface_open_file(save=args.save, restart=args.restart)
    if args.whitewater:
        return headless.bake_whitewater_open_file(save=args.save, restart=args.restart)
    if args.with_surface:
        bpy.context.scene.surge.use_surface_in_bake = True
    return headless.bake_open_file(resume=args.resume, save=args.save)


if __name__ == "__main__":
    sys.exit(main())
