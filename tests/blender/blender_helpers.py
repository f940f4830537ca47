"""Scene builders and probes shared by the tests inside Blender."""

from __future__ import annotations

import importlib
import inspect
import os
import subprocess
import sys
import tempfile
import types

import bpy
import numpy as np


def submodule(surge, name: str):
    """A submodule of the installed add-on, e.g. ``submodule(surge, "bridge.export")``."""
    return importlib.import_module(f"{surge.__name__}.{name}")


def add_box(name: str, lower, upper, role: str = "NONE", collider_mode: str = "AUTO"):
    """An axis-aligned box mesh object from ``lower`` to ``upper`` (world units), scale applied."""
    lo, hi = np.asarray(lower, float), np.asarray(upper, float)
    mesh = bpy.data.meshes.new(name)
    verts = [(hi[0] if i & 1 else lo[0], hi[1] if i & 2 else lo[1], hi[2] if i & 4 else lo[2]) for i in range(8)]
    faces = [(0, 2, 3, 1), (4, 5, 7, 6), (0, 1, 5, 4), (2, 6, 7, 3), (0, 4, 6, 2), (1, 3, 7, 5)]
    mesh.from_pydata(verts, [], faces)
    mesh.update()
    obj = bpy.data.objects.new(name, mesh)
    bpy.context.scene.collection.objects.link(obj)
    obj.surge.role = role
    obj.surge.collider_mode = collider_mode
    return obj


def column_scene(sc, cache_dir: str, *, water_top: float = 0.2, frames=(1, 3), spacing: float = 0.02):
    """A water column (0.1 x 0.1 x ``water_top`` m) in the corner of a 0.1 x 0.1 x 0.3 m tank.

    At the default spacing of 2 cm that is 5 x 5 x 10 = 250 particles: enough to be a liquid, cheap
    enough that a bake takes about a second once numba's kernels are cached.
    """
    add_box("Water", (0, 0, 0), (0.1, 0.1, water_top), role="FLUID")
    add_box("Tank", (0, 0, 0), (0.1, 0.1, 0.3), role="COLLIDER", collider_mode="CONTAINER")
    sc.frame_start, sc.frame_end = frames
    sc.surge.particle_spacing = spacing
    sc.surge.cache_directory = cache_dir
    return sc


def evaluated_points(obj, frame: int) -> dict:
    """Point count and attribute arrays of ``obj`` at ``frame``, from the evaluated depsgraph."""
    sc = bpy.context.scene
    sc.frame_set(frame)
    data = obj.evaluated_get(bpy.context.evaluated_depsgraph_get()).data
    out = {"count": len(data.points)}
    for attr in data.attributes:
        width = {"FLOAT_VECTOR": 3, "FLOAT": 1, "INT": 1}.get(attr.data_type)
        if width is None:
            continue
        key = "vector" if width == 3 else "value"
        buf = np.empty(len(attr.data) * width, dtype=np.float64 if attr.data_type != "INT" else np.int64)
        attr.data.foreach_get(key, buf)
        out[attr.name] = buf.reshape(-1, 3) if width == 3 else buf
    return out


def snapshot(folder: str) -> dict:
    """Relative path -> bytes of every file under ``folder``: to prove a refused bake changed nothing."""
    out = {}
    for base, _dirs, names in os.walk(folder):
        for n in names:
            p = os.path.join(base, n)
            with open(p, "rb") as fh:
                out[os.path.relpath(p, folder)] = fh.read()
    return out


def run_fresh_blender(script: str, timeout: float = 300.0) -> subprocess.CompletedProcess:
    """Run ``script`` in a new Python with a fresh Blender user folder: no Surge installed there."""
    env = dict(os.environ, BLENDER_USER_RESOURCES=tempfile.mkdtemp(prefix="surge_fresh_blender_"))
    env.pop("PYTHONPATH", None)
    return subprocess.run([sys.executable, "-c", script], env=env, cwd=tempfile.gettempdir(),
                          capture_output=True, text=True, timeout=timeout)


def bake_state(surge, scene):
    """The running or last bake's state of ``scene`` (``WindowManager.surge_bakes``), created if needed."""
    return submodule(surge, "bridge.bake_state").ensure(scene)


def fake_cache(surge, cache_dir: str, frames=(1, 2, 3), particles: int = 20, header=None) -> int:
    """A small Surge cache written with the engine's own writer (no bake); returns its size in bytes.
    ``header`` adds manifest fields (``settings``, say)."""
    cache_mod = submodule(surge, "engine.io.cache")
    rng = np.random.default_rng(1)
    writer = cache_mod.CacheWriter(cache_dir, dict({"frame_start": frames[0], "frame_end": frames[-1], "fps": 24.0},
                                                   **(header or {})))
    for frame in frames:
        writer.write_frame(frame, {"position": rng.normal(size=(particles, 3)).astype(np.float32),
                                   "velocity": np.zeros((particles, 3), np.float32),
                                   "density": np.full(particles, 1000.0, np.float32),
                                   "id": np.arange(particles, dtype=np.int32),
                                   "age": np.zeros(particles, np.float32)})
    writer.finish("complete")
    return sum(os.path.getsize(os.path.join(base, n)) for base, _d, names in os.walk(cache_dir) for n in names)


class Layout:
    """Stands in for UILayout in a panel's or menu's ``draw``: records every label, property and operator
    with the state of the layout it was drawn in (``alert``, ``enabled``, ``active``, inherited from the
    parents), checks every keyword against the real UILayout function and that what is drawn exists.

    Each record is a dict: ``kind`` ('label', 'prop', 'operator', 'menu', 'progress', 'pointer'), ``name``
    (property, operator or menu), ``text``, ``icon``, ``alert``, ``enabled``, ``active``, and for an operator
    the properties the panel set on the button (``props``).
    """

    def __init__(self, log=None, parent=None):
        self.log = [] if log is None else log
        self.parent = parent
        self.alert = False
        self.enabled = True
        self.active = True
        self.use_property_split = self.use_property_decorate = False
        self.scale_y = 1.0
        self.operator_context = "INVOKE_DEFAULT"

    def _state(self) -> dict:
        chain, node = [], self
        while node is not None:
            chain.append(node)
            node = node.parent
        return {"alert": any(n.alert for n in chain), "enabled": all(n.enabled for n in chain),
                "active": all(n.active for n in chain)}

    @staticmethod
    def _check(function: str, kw: dict) -> None:
        known = {p.identifier for p in bpy.types.UILayout.bl_rna.functions[function].parameters}
        assert set(kw) <= known, f"UILayout.{function} has no parameter {set(kw) - known}"

    def _add(self, kind: str, name: str = "", **kw) -> dict:
        record = dict(self._state(), kind=kind, name=name, text=kw.get("text"), icon=kw.get("icon", "NONE"))
        self.log.append(record)
        return record

    def prop(self, data, name, **kw):
        self._check("prop", kw)
        assert name in data.bl_rna.properties, f"{data.bl_rna.identifier} has no property '{name}'"
        record = self._add("prop", name, **kw)
        record["label"] = kw.get("text", data.bl_rna.properties[name].name)
        record["data"] = data

    def operator(self, idname, **kw):
        self._check("operator", kw)
        module, name = idname.split(".")
        getattr(getattr(bpy.ops, module), name).get_rna_type()  # raises KeyError if missing
        record = self._add("operator", idname, **kw)
        props = types.SimpleNamespace()
        record["props"] = props
        return props  # operator properties set by the panel land here

    def menu(self, menu, **kw):
        self._check("menu", kw)
        assert issubclass(getattr(bpy.types, menu), bpy.types.Menu), menu
        self._add("menu", menu, **kw)

    def label(self, **kw):
        self._check("label", kw)
        self._add("label", **kw)

    def progress(self, **kw):
        self._check("progress", kw)
        assert 0.0 <= kw.get("factor", 0.0) <= 1.0
        self._add("progress", **kw)

    def context_pointer_set(self, name, data):
        self._add("pointer", name)["data"] = data

    def panel(self, idname, **kw):
        self._check("panel", kw)
        return Layout(self.log, self), Layout(self.log, self)

    def row(self, **kw):
        self._check("row", kw)
        return Layout(self.log, self)

    def column(self, **kw):
        self._check("column", kw)
        return Layout(self.log, self)

    def box(self, **kw):
        return Layout(self.log, self)

    def split(self, **kw):
        self._check("split", kw)
        return Layout(self.log, self)

    def template_list(self, *args, **kw):
        self._add("list", args[0])

    def separator(self, **_kw):
        pass

    def operator_menu_enum(self, idname, prop, **kw):
        self._check("operator_menu_enum", kw)
        self._add("operator", idname, **kw)

    # -- queries -------------------------------------------------------------------------------------

    def find(self, kind: str, name: str = None, **match) -> list[dict]:
        return [r for r in self.log if r["kind"] == kind and (name is None or r["name"] == name)
                and all(r.get(k) == v for k, v in match.items())]

    def texts(self) -> list[str]:
        return [r["text"] for r in self.log if r["kind"] in ("label", "progress") and r["text"]]


def draw(draw_function, context=None) -> Layout:
    """Run a panel's, menu's or header's ``draw(self, context)`` into a :class:`Layout`; returns it."""
    layout = Layout()
    draw_function(types.SimpleNamespace(layout=layout, bl_label=""), context or bpy.context)
    return layout


class OperatorStub:
    """An operator instance for calling ``invoke`` and ``modal`` headless (Blender calls ``execute`` instead
    of ``invoke`` when there is no event): properties take their defaults unless given, methods are the
    operator class's own, reports are recorded in ``reports``."""

    def __init__(self, cls, **props):
        self._cls = cls
        self.reports = []
        module, name = cls.bl_idname.split(".")
        for p in getattr(getattr(bpy.ops, module), name).get_rna_type().properties:
            if p.identifier != "rna_type":
                setattr(self, p.identifier, p.default_array[:] if getattr(p, "is_array", False) else
                        getattr(p, "default", None))
        self.__dict__.update(props)

    def __getattr__(self, name):
        attr = getattr(self._cls, name)
        if inspect.isfunction(attr):
            return types.MethodType(attr, self)
        return attr

    def report(self, kind, text):
        self.reports.append((set(kind), text))


class WindowManagerStub:
    """The window manager an operator's ``invoke`` sees: records confirmation popups and dialogs."""

    def __init__(self, answer=frozenset({"CANCELLED"})):
        self.calls = []
        self.answer = set(answer)
        self.windows = bpy.context.window_manager.windows

    def invoke_confirm(self, operator, event, **kw):
        self.calls.append(("confirm", kw))
        return self.answer

    def invoke_props_dialog(self, operator, **kw):
        self.calls.append(("dialog", kw))
        return self.answer


def context_stub(**members):
    """bpy.context with some members replaced (``window_manager=WindowManagerStub()``, say)."""
    class Context:
        def __getattr__(self, name):
            return getattr(bpy.context, name)
    ctx = Context()
    ctx.__dict__.update(members)
    return ctx
