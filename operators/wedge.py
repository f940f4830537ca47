"""Wedge operators: set up variations of the scene's settings, bake them on a Dask cluster in a process
of their own, and load any result into the open file (``bridge.wedge`` does the work).
"""

from __future__ import annotations

import importlib.util
import os
import subprocess
import sys

import bpy
from bpy.props import EnumProperty

from ..bridge import export, files, headless, liquid, surface, wedge
from ..bridge.paths import ADDON_ROOT
from ..engine.errors import EngineError

#: Name of the wedge's log in its folder (what the terminal wedge prints).
WEDGE_LOG = "wedge.log"
#: Sub-folder of the wedge folder holding the copy of the file the wedge bakes.
SOURCE_DIR = "source"


def wedge_dir(scene) -> str:
    """Absolute folder of the scene's wedge ('//' is the .blend's folder)."""
    raw = scene.surge_wedge.output_directory.strip()
    if raw.startswith("//") and not bpy.data.filepath:
        raise ValueError("Save the .blend file first, or give an absolute wedge folder: this one is relative to "
                         "the file")
    return os.path.abspath(bpy.path.abspath(raw)) if raw else ""


def variation_texts(scene) -> list[str]:
    """The scene's variations as ``--set`` texts (``NAME=V1,V2`` or ``NAME@OBJECT=V1,V2``)."""
    texts = []
    for v in scene.surge_wedge.variations:
        key = v.setting.strip() if v.target is None else f"{v.setting.strip()}@{v.target.name}"
        texts.append(f"{key}={v.values.strip()}")
    return texts


def wedge_command(scene, blend: str, out: str) -> list[str]:
    """The command that runs this scene's wedge: the add-on's ``bridge.wedge`` in this Blender's Python."""
    settings = scene.surge_wedge
    command = [sys.executable, "-m", "bridge.wedge", blend, "--out", out, "--workers", str(settings.workers)]
    if settings.scheduler.strip():
        command += ["--scheduler", settings.scheduler.strip()]
    if bpy.app.binary_path:  # the blender program: each combination bakes in a background blender
        command += ["--blender", bpy.app.binary_path, "--addon-module", __package__.rpartition(".")[0]]
    else:  # Blender as a Python module: tools/bake.py of a source tree, else the installed add-on
        command += ["--worker-root", ADDON_ROOT, "--addon-module", __package__.rpartition(".")[0]]
    for text in variation_texts(scene):
        command += ["--set", text]
    return command


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
    bl_label = "Bake Wedge in a Terminal"
    bl_options = {"REGISTER"}

    def execute(self, context):
        scene = context.scene
        if importlib.util.find_spec("distributed") is None:
            self.report({"ERROR"}, f"Wedges need Dask, which this Blender's Python lacks: install it with "
                                   f"'{sys.executable} -m pip install dask distributed'")
            return {"CANCELLED"}
        try:
            variations = [wedge.parse_set(text) for text in variation_texts(scene)]
            out = wedge_dir(scene)
            if not out:
                raise ValueError("Set a wedge folder")
            source = os.path.join(out, SOURCE_DIR, os.path.basename(bpy.data.filepath) or "untitled.blend")
            count = len(wedge.combinations(source, variations, out))
            # every value of every variation, checked before anything starts
            headless.apply_settings(scene, [f"{v.key}={value}" for v in variations for value in v.values],
                                    apply=False)
            os.makedirs(os.path.dirname(source), exist_ok=True)
            # the wedge bakes this file as it is now, unsaved changes included; the artist's file is left alone
            bpy.ops.wm.save_as_mainfile(filepath=source, copy=True, relative_remap=True)
        except (wedge.WedgeError, EngineError, ValueError, OSError) as exc:
            self.report({"ERROR"}, str(exc))
            return {"CANCELLED"}
        log = os.path.join(out, WEDGE_LOG)
        # bridge.wedge from the add-on's folder; the rest of the path as a plain Python has it (Blender's own
        # script folders must not shadow the bpy module a Blender-as-a-module wedge bakes with)
        env = dict(os.environ)
        env["PYTHONPATH"] = os.pathsep.join(p for p in (ADDON_ROOT, env.get("PYTHONPATH", "")) if p)
        options = {"creationflags": subprocess.CREATE_NEW_CONSOLE} if sys.platform == "win32" else \
            {"start_new_session": True}  # goes on if this Blender closes
        try:
            with open(log, "w", encoding="utf-8") as f:
                process = subprocess.Popen(wedge_command(scene, source, out), stdin=subprocess.DEVNULL,
                                           stdout=f, stderr=subprocess.STDOUT, cwd=ADDON_ROOT, env=env, **options)
        except OSError as exc:
            self.report({"ERROR"}, f"The wedge could not start: {exc}")
            return {"CANCELLED"}
        self.report({"INFO"}, f"Baking {count} combinations in a separate process (id {process.pid}); progress in "
                              f"'{log}'; Load Wedge Result shows any finished one")
        return {"FINISHED"}


_result_items: list = []  # Blender keeps only pointers to dynamic enum strings: hold them here


def _results(self, context):
    _result_items.clear()
    try:
        doc = wedge.read_wedge(wedge_dir(context.scene))
    except (wedge.WedgeError, ValueError):
        doc = None
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
            doc = wedge.read_wedge(wedge_dir(scene))
        except (wedge.WedgeError, ValueError) as exc:
            self.report({"ERROR"}, str(exc))
            return {"CANCELLED"}
        combos = {str(c.get("index")): c for c in (doc or {}).get("combinations", [])}
        c = combos.get(self.combination)
        if c is None:
            self.report({"ERROR"}, "No such wedge result; bake the wedge first")
            return {"CANCELLED"}
        usd_dir = headless.newest_usd_dir(files.usd_bake_dirs(c["cache_dir"]))
        frames = sorted(n for n in os.listdir(usd_dir) if files.USD_FRAME_RE.match(n) and ".tmp" not in n) \
            if usd_dir else []
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


def summary(scene) -> str:
    """'3 of 4 complete, 1 failed' for the scene's wedge folder, or ''."""
    try:
        doc = wedge.read_wedge(wedge_dir(scene))
    except (wedge.WedgeError, ValueError):
        return ""
    if not doc:
        return ""
    statuses = [c.get("status") for c in doc.get("combinations", [])]
    parts = [f"{statuses.count('complete')} of {len(statuses)} complete"]
    parts += [f"{statuses.count(s)} {s}" for s in ("running", "failed", "cancelled") if statuses.count(s)]
    return ", ".join(parts)


CLASSES = (SURGE_OT_wedge_add, SURGE_OT_wedge_remove, SURGE_OT_wedge_in_terminal, SURGE_OT_load_wedge_result)
