"""Scene builders and probes shared by the tests inside Blender."""

from __future__ import annotations

import importlib
import os
import subprocess
import sys
import tempfile

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
