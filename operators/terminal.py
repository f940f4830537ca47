"""``surge.bake_in_terminal`` and ``surge.load_baked``: long bakes in a process of their own.

The terminal bake is a separate headless Blender (see ``bridge.headless``): it survives closing
this Blender, writes its output to ``terminal_bake.log`` in the cache folder, and leaves the
cache and its point files there. It bakes a copy of the open file as it is now
(``terminal_bake.blend`` in the cache folder), so the artist's own file is neither saved nor
changed; "Load Baked Liquid" then shows the result in this file.
"""

from __future__ import annotations

import os
import subprocess
import sys

import bpy
from bpy.props import BoolProperty

from .common import SceneIdle
from ..bridge import bake_state, export, files, headless, liquid, preferences, surface
from ..bridge.paths import ADDON_PACKAGE, ADDON_ROOT
from ..engine.io import cache as cache_mod
from ..engine.errors import EngineError


class _Idle(SceneIdle):
    busy_message = "This scene is baking"


def save_copy(cache_dir: str) -> str:
    """Write the open file as it is now to ``terminal_bake.blend`` in ``cache_dir`` and return its path.

    The open file keeps its name and unsaved state; relative paths in the copy are remapped so that
    textures and libraries still resolve from the cache folder.
    """
    path = os.path.join(cache_dir, files.TERMINAL_COPY)
    os.makedirs(cache_dir, exist_ok=True)
    if os.path.exists(path):
        os.remove(path)  # overwriting would leave a terminal_bake.blend1 backup behind
    bpy.ops.wm.save_as_mainfile(filepath=path, copy=True, relative_remap=True, check_existing=False)
    return path


class SURGE_OT_bake_in_terminal(_Idle, bpy.types.Operator):
    """Bake a copy of this file as it is now in a separate background Blender that keeps running if this one
    closes (your file is not saved); its output goes to terminal_bake.log in the cache folder"""

    bl_idname = "surge.bake_in_terminal"
    bl_label = "Bake in a Terminal"
    bl_options = set()  # Repeat Last must not start a second bake

    resume: BoolProperty(
        name="Resume", default=False, options={"SKIP_SAVE"},
        description="Continue the bake in the cache folder from its last checkpoint instead of starting over")

    def execute(self, context):
        scene = context.scene
        try:
            cache_dir = files.resolve_cache_dir(scene, ADDON_ROOT)
            # nothing is written into a folder that is not Surge's or that another bake is writing into
            cache_mod.check_folder(cache_dir, files.NOT_FOREIGN)
            cache_mod.check_free(cache_dir)
            cache_mod.check_writable(cache_dir)
            copy = save_copy(cache_dir)
        except (EngineError, OSError) as exc:
            self.report({"ERROR"}, str(exc))
            return {"CANCELLED"}
        except RuntimeError as exc:  # Blender could not write the copy
            self.report({"ERROR"}, f"Could not write a copy of the file to bake: {exc}")
            return {"CANCELLED"}
        # the copy lives in the cache folder: give it the absolute cache folder, which a relative or
        # default one (named after the .blend file) would not reproduce from there
        command = headless.terminal_command(copy, ADDON_PACKAGE, ADDON_ROOT, resume=self.resume,
                                            scene_name=scene.name, cache_dir=cache_dir)
        log = headless.terminal_log(cache_dir)
        options = {}
        if sys.platform == "win32":
            # its own console window, which shows the progress lines too
            options["creationflags"] = subprocess.CREATE_NEW_CONSOLE
        else:
            options["start_new_session"] = True  # not stopped with this Blender or its terminal
        env = dict(os.environ)
        if preferences.bake_threads():
            env["NUMBA_NUM_THREADS"] = str(preferences.bake_threads())
        try:
            with open(log, "w", encoding="utf-8") as out:
                process = subprocess.Popen(command, stdin=subprocess.DEVNULL, stdout=out, stderr=subprocess.STDOUT,
                                           cwd=cache_dir, env=env, **options)
        except OSError as exc:
            self.report({"ERROR"}, f"The terminal bake could not start: {exc}")
            return {"CANCELLED"}
        text = (f"Baking a copy of this file in a separate process (id {process.pid}); progress in '{log}'. "
                f"Load Baked Liquid shows the result")
        bake_state.set_status(scene, text)
        self.report({"INFO"}, text)
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
        liquid.show_frames(scene, os.path.join(usd_dir, frames[0]), files.cache_dir_is_relative(scene),
                           export.unit_scale(scene))
        surface.sync(scene, export.unit_scale(scene))
        from ..bridge import surface_bake

        surface_bake.show_surface(scene, cache_dir,
                                  files.cache_dir_is_relative(scene))  # a baked surface, if the bake meshed one
        self.report({"INFO"}, f"Showing {len(frames)} baked frames from '{usd_dir}'")
        return {"FINISHED"}


CLASSES = (SURGE_OT_bake_in_terminal, SURGE_OT_load_baked)
