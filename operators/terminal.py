"""``surge.bake_in_terminal`` and ``surge.load_baked``: long bakes in a process of their own.

The terminal bake is a separate headless Blender (see ``bridge.headless``): it survives closing
this Blender, writes its output to ``terminal_bake.log`` in the cache folder, and leaves the
cache and its point files there. "Load Baked Liquid" then shows them in this file.
"""

from __future__ import annotations

import os
import subprocess
import sys

import bpy
from bpy.props import BoolProperty

from .common import SceneIdle
from ..bridge import export, files, headless, liquid, surface
from ..bridge.bake import ADDON_PACKAGE, ADDON_ROOT
from ..engine import cache as cache_mod
from ..engine.errors import EngineError


class _Idle(SceneIdle):
    busy_message = "This scene is baking"


class SURGE_OT_bake_in_terminal(_Idle, bpy.types.Operator):
    """Save the file and bake it in a separate background Blender that keeps running if this one closes; its
    output goes to terminal_bake.log in the cache folder"""

    bl_idname = "surge.bake_in_terminal"
    bl_label = "Bake in a Terminal"
    bl_options = {"REGISTER"}

    resume: BoolProperty(
        name="Resume", default=False, options={"SKIP_SAVE"},
        description="Continue the bake in the cache folder from its last checkpoint instead of starting over")

    def execute(self, context):
        if not bpy.data.filepath:
            self.report({"ERROR"}, "Save the .blend file first: the terminal bake opens it from disk")
            return {"CANCELLED"}
        scene = context.scene
        try:
            cache_dir = files.resolve_cache_dir(scene, ADDON_ROOT)
            cache_mod.check_writable(cache_dir)
        except (EngineError, OSError) as exc:
            self.report({"ERROR"}, str(exc))
            return {"CANCELLED"}
        if bpy.data.is_dirty:
            bpy.ops.wm.save_mainfile()
        command = headless.terminal_command(bpy.data.filepath, ADDON_PACKAGE, ADDON_ROOT, resume=self.resume)
        log = headless.terminal_log(cache_dir)
        options = {}
        if sys.platform == "win32":
            # its own console window, which shows the progress lines too
            options["creationflags"] = subprocess.CREATE_NEW_CONSOLE
        else:
            options["start_new_session"] = True  # not stopped with this Blender or its terminal
        try:
            with open(log, "w", encoding="utf-8") as out:
                process = subprocess.Popen(command, stdin=subprocess.DEVNULL, stdout=out, stderr=subprocess.STDOUT,
                                           cwd=os.path.dirname(bpy.data.filepath), **options)
        except OSError as exc:
            self.report({"ERROR"}, f"The terminal bake could not start: {exc}")
            return {"CANCELLED"}
        scene.surge.bake_status = (f"Baking in a separate process (id {process.pid}); progress in '{log}'. "
                                   f"Load Baked Liquid shows the result")
        self.report({"INFO"}, scene.surge.bake_status)
        return {"FINISHED"}


class SURGE_OT_load_baked(_Idle, bpy.types.Operator):
    """Show the liquid last baked into the cache folder (by a terminal or farm bake, for instance)"""

    bl_idname = "surge.load_baked"
    bl_label = "Load Baked Liquid"
    bl_options = {"REGISTER", "UNDO"}

    def execute(self, context):
        scene = context.scene
        try:
            cache_dir = files.resolve_cache_dir(scene, ADDON_ROOT)
        except (EngineError, OSError) as exc:
            self.report({"ERROR"}, str(exc))
            return {"CANCELLED"}
        usd_dir = headless.newest_usd_dir(files.usd_bake_dirs(cache_dir))
        names = sorted(os.listdir(usd_dir)) if usd_dir else []
        frames = [n for n in names if files.USD_FRAME_RE.match(n) and not n.endswith(".tmp.usdc")]
        if not frames:
            self.report({"ERROR"}, f"No baked liquid in '{cache_dir}' yet; bake first, or wait for the terminal bake")
            return {"CANCELLED"}
        relative = scene.surge.cache_directory.strip().startswith("//")
        liquid.show_frames(scene, os.path.join(usd_dir, frames[0]), relative, export.unit_scale(scene))
        surface.sync(scene, export.unit_scale(scene))
        self.report({"INFO"}, f"Showing {len(frames)} baked frames from '{usd_dir}'")
        return {"FINISHED"}


CLASSES = (SURGE_OT_bake_in_terminal, SURGE_OT_load_baked)
