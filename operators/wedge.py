"""Wedge operators: set up variations of the scene's settings, bake them on a Dask cluster in a process
of their own, and load any result into the open file (``bridge.wedge`` does the work).
"""

from __future__ import annotations

import importlib.util
import os
import sys

import bpy
from bpy.props import EnumProperty

from ..bridge import export, headless, liquid, surface, wedge
from ..engine.errors import EngineError

class SURGE_OT_wedge_add(bpy.types.Operator):
    """Add a setting to vary in the wedge"""

    bl_idname = "surge.wedge_add"
    bl_label = "Add Variation"
    bl_options = {"REGISTER", "UNDO", "INTERNAL"}

    def execute(self, context):
        settings = context.scene.surge_wedge
        settings.variations.add()
        settings.active = len(settings.variations) - 1
        return {"FINISHED"}


class SURGE_OT_wedge_remove(bpy.types.Operator):
    """Remove the selected variation from the wedge"""

    bl_idname = "surge.wedge_remove"
    bl_label = "Remove Variation"
    bl_options = {"REGISTER", "UNDO", "INTERNAL"}

    @classmethod
    def poll(cls, context):
        return len(context.scene.surge_wedge.variations) > 0

    def execute(self, context):
        settings = context.scene.surge_wedge
        settings.variations.remove(min(settings.active, len(settings.variations) - 1))
        settings.active = max(0, min(settings.active, len(settings.variations) - 1))
        return {"FINISHED"}


class SURGE_OT_wedge_in_terminal(bpy.types.Operator):
    """Bake every combination of the variations from a copy of this file as it is now, each in its own background
    Blender on a Dask cluster (this machine, or the scheduler given); runs apart from this Blender, its output goes
    to wedge.log in the wedge folder"""

    bl_idname = "surge.wedge_in_terminal"
    bl_label = "Bake Wedge in a Console Window" if sys.platform == "win32" else "Bake Wedge in Background"
    bl_options = set()  # Repeat Last must not start a second wedge

    def execute(self, context):
        scene = context.scene
        if importlib.util.find_spec("distributed") is None:
            self.report({"ERROR"}, f"Wedges need Dask, which this Blender's Python lacks: install it with "
                                   f"'{sys.executable} -m pip install dask distributed'")
            return {"CANCELLED"}
        try:
            source, out, count = wedge.prepare(scene)
        except (wedge.WedgeError, EngineError, ValueError, OSError) as exc:
            self.report({"ERROR"}, str(exc))
            return {"CANCELLED"}
        try:
            pid, log = wedge.start(scene, source, out)
        except OSError as exc:
            self.report({"ERROR"}, f"The wedge could not start: {exc}")
            return {"CANCELLED"}
        for variation in scene.surge_wedge.variations:
            note = wedge.variation_note(scene, variation)
            if note:  # every value of it bakes the same: say so before the bakes are spent
                self.report({"WARNING"}, note)
        self.report({"INFO"}, f"Baking {count} combinations in a separate process (id {pid}); progress in "
                              f"'{log}'; Load Wedge Result shows any finished one")
        return {"FINISHED"}


_result_items: list = []  # Blender keeps only pointers to dynamic enum strings: hold them here


def _results(self, context):
    _result_items.clear()
    doc = wedge.read(context.scene)
    for c in (doc or {}).get("combinations", []):
        settings = ", ".join(f"{k} = {v}" for k, v in c.get("settings", {}).items())
        _result_items.append((str(c.get("index")), f"{c.get('index')}: {settings} ({c.get('status')})",
                              f"{c.get('status')}: {c.get('folder')}"))
    if not _result_items:
        _result_items.append(("NONE", "No wedge results", "The wedge folder holds no wedge.json yet"))
    return _result_items


class SURGE_OT_load_wedge_result(bpy.types.Operator):
    """Show one result of the wedge in this file: its settings are applied to the scene and its cache played"""

    bl_idname = "surge.load_wedge_result"
    bl_label = "Load Wedge Result"
    bl_options = {"REGISTER", "UNDO"}
    bl_property = "combination"

    combination: EnumProperty(name="Result", items=_results,
                              description="The combination whose settings and cache to load")

    def invoke(self, context, event):
        context.window_manager.invoke_search_popup(self)
        return {"RUNNING_MODAL"}

    def execute(self, context):
        scene = context.scene
        try:
            doc = wedge.read_checked(scene)
        except (wedge.WedgeError, ValueError) as exc:
            self.report({"ERROR"}, str(exc))
            return {"CANCELLED"}
        combos = {str(c.get("index")): c for c in (doc or {}).get("combinations", [])}
        c = combos.get(self.combination)
        if c is None:
            self.report({"ERROR"}, "No such wedge result; bake the wedge first")
            return {"CANCELLED"}
        usd_dir, frames = wedge.newest_frames(c["cache_dir"])
        if not frames:
            self.report({"ERROR"}, f"Wedge result {c['index']} has no baked frames yet ({c.get('status')})")
            return {"CANCELLED"}
        try:
            headless.apply_settings(scene, [f"{k}={v}" for k, v in c["settings"].items()])
        except EngineError as exc:
            self.report({"ERROR"}, f"Wedge result {c['index']}: {exc}")
            return {"CANCELLED"}
        scene.surge.cache_directory = c["cache_dir"]
        liquid.show_frames(scene, os.path.join(usd_dir, frames[0]), False, export.unit_scale(scene))
        surface.sync(scene, export.unit_scale(scene))
        self.report({"INFO"}, f"Showing wedge result {c['index']} ({c.get('status')}): "
                              f"{', '.join(f'{k} = {v}' for k, v in c['settings'].items())}")
        return {"FINISHED"}


CLASSES = (SURGE_OT_wedge_add, SURGE_OT_wedge_remove, SURGE_OT_wedge_in_terminal, SURGE_OT_load_wedge_result)
