"""``surge.bake_in_terminal`` and ``surge.load_baked``: long bakes in a process of their own.

The terminal bake is a separate headless Blender (see ``bridge.headless``): it survives closing
this Blender, writes its output to ``terminal_bake.log`` in the cache folder, and leaves the
cache and its point files there. It bakes a copy of the open file as it is now
(``terminal_bake.blend`` in the cache folder), so the artist's own file is neither saved nor
changed; "Load Baked Liquid" then shows the result in this file.
"""

from __future__ import annotations

import sys

import bpy
from bpy.props import BoolProperty

from .common import SceneIdle
from ..bridge import bake_state, cache_state, headless
from ..bridge.paths import ADDON_ROOT
from ..engine.errors import EngineError


class _Idle(SceneIdle):
    busy_message = "This scene is baking"


class SURGE_OT_bake_in_terminal(_Idle, bpy.types.Operator):
    """Bake a copy of this file as it is now in a separate background Blender that keeps running if this one
    closes (your file is not saved); its output goes to terminal_bake.log in the cache folder"""

    bl_idname = "surge.bake_in_terminal"
    # named for what it does: Windows gives the bake a console window of its own; elsewhere it runs unseen,
    # its output in terminal_bake.log
    bl_label = "Bake in a Console Window" if sys.platform == "win32" else "Bake in Background"
    bl_options = set()  # Repeat Last must not start a second bake

    resume: BoolProperty(
        name="Resume", default=False, options={"SKIP_SAVE"},
        description="Continue the bake in the cache folder from its last checkpoint instead of starting over")

    def execute(self, context):
        scene = context.scene
        try:
            pid, log = headless.start_terminal_bake(scene, resume=self.resume)
        except EngineError as exc:
            self.report({"ERROR"}, str(exc))
            return {"CANCELLED"}
        except OSError as exc:
            self.report({"ERROR"}, f"The terminal bake could not start: {exc}")
            return {"CANCELLED"}
        except RuntimeError as exc:  # Blender could not write the copy
            self.report({"ERROR"}, f"Could not write a copy of the file to bake: {exc}")
            return {"CANCELLED"}
        text = (f"Baking a copy of this file in a separate process (id {pid}); progress in '{log}'. "
                f"Load Baked Liquid shows the result")
        bake_state.set_status(scene, text)
        self.report({"INFO"}, text)
        return {"FINISHED"}


class SURGE_OT_load_baked(_Idle, bpy.types.Operator):
    """Show the liquid last baked into the cache folder (by a terminal or farm bake, for instance)"""

    bl_idname = "surge.load_baked"
    bl_label = "Load Baked Liquid"
    bl_options = {"REGISTER", "UNDO"}

    @classmethod
    def poll(cls, context):
        if not super().poll(context):
            return False
        if not cache_state.has_usd(context.scene, ADDON_ROOT):
            cls.poll_message_set("The cache folder holds no baked liquid yet: bake first, or wait for the "
                                 "separate bake to write its first frames")
            return False
        return True

    def execute(self, context):
        try:
            usd_dir, count = headless.show_newest_bake(context.scene)
        except (EngineError, OSError) as exc:
            self.report({"ERROR"}, str(exc))
            return {"CANCELLED"}
        self.report({"INFO"}, f"Showing {count} baked frames from '{usd_dir}'")
        return {"FINISHED"}


CLASSES = (SURGE_OT_bake_in_terminal, SURGE_OT_load_baked)
