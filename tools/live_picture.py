"""A picture of a live session: the demo scene simulated live while Suzanne is pushed through the water,
its liquid drawn as the live surface meeting the tank and Suzanne, rendered with Workbench to a PNG.

    .venv/bin/python tools/live_picture.py [--frames 30] [--spacing 0.025] [--out out/live]

Prints the PNG's path. The session runs as in Blender's UI (the engine in its child process, the
frames coming through shared memory) with this script calling the session's update where the timer
would.
"""

from __future__ import annotations

import argparse
import importlib
import os
import sys
import tempfile
import time

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, os.path.join(ROOT, "tools"))

from blender_session import enable_from_source  # noqa: E402  (needs sys.path above)
from demo import build_scene  # noqa: E402

import bpy  # noqa: E402


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--frames", type=int, default=30, help="live frames to simulate before the picture")
    parser.add_argument("--spacing", type=float, default=0.025)
    parser.add_argument("--out", default=os.path.join(ROOT, "out", "live"))
    parser.add_argument("--points", action="store_true", help="draw points instead of the surface")
    args = parser.parse_args()
    os.makedirs(args.out, exist_ok=True)
    module = enable_from_source(ROOT, os.path.join(tempfile.mkdtemp(prefix="surge_live_picture_"), "repo"))
    live = importlib.import_module(f"{module}.bridge.live")
    build_scene(args.spacing, 72)
    scene = bpy.context.scene
    scene.surge.cache_directory = os.path.join(args.out, "cache")
    scene.surge_live.show_surface = not args.points
    # the tank's glass is one sheet of faces: the surface overlaps it a little (Meet Colliders: Inside), as for a
    # refractive glass, rather than lying in the same plane (coincident faces flicker in the viewport)
    scene.surge.surface_collider_mode = "INSIDE"
    suzanne = scene.objects["Suzanne"]
    start_x = suzanne.location.x
    session = live.start(scene, bpy.context.evaluated_depsgraph_get(), paused=True)
    if not session.wait_for_frame(0, timeout=600):
        raise SystemExit(f"the live engine did not start: {session.error}")
    for k in range(1, args.frames + 1):
        # Suzanne slides toward the wall of water while it falls, as an artist would drag her
        suzanne.location.x = start_x - 0.25 * min(1.0, k / args.frames)
        bpy.context.view_layer.update()
        live.update(scene.name)
        session.step()
        if not session.wait_for_frame(k, timeout=120):
            raise SystemExit(f"frame {k} did not come: {session.error}")
    live.update(scene.name)
    session.show(scene)
    scene.render.engine = "BLENDER_WORKBENCH"
    scene.display.shading.light = "STUDIO"
    scene.display.shading.color_type = "MATERIAL"
    scene.render.resolution_x, scene.render.resolution_y = 960, 540
    scene.render.use_stamp_filename = False  # no absolute path of the .blend in the PNG's metadata
    scene.render.image_settings.file_format = "PNG"
    path = os.path.join(args.out, "live_surface.png" if not args.points else "live_points.png")
    scene.render.filepath = path
    t0 = time.monotonic()
    bpy.ops.render.render(write_still=True)
    figures = session.figures
    live.stop(scene)
    print(f"{path} ({figures['particles']} particles at frame {figures['frame']}, rendered in "
          f"{time.monotonic() - t0:.1f} s)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
