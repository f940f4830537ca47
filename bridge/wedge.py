"""The Blender side of wedges: the scene's variations as ``--set`` options, the copy of the file a
wedge bakes, the wedge program started in a process of its own, and its results read back.

The wedge itself is a Dask program with no Blender in it (:mod:`farm.wedge`); this module plans with
the same code (:mod:`farm.plan`, standard library only) and starts ``python -m farm.wedge`` from the
add-on's folder.
"""

from __future__ import annotations

import os
import subprocess
import sys

import bpy

from ..farm import plan
from . import headless
from .paths import ADDON_PACKAGE, ADDON_ROOT

#: Name of the wedge's log in its folder (what the wedge program prints).
WEDGE_LOG = "wedge.log"
#: Sub-folder of the wedge folder holding the copy of the file the wedge bakes.
SOURCE_DIR = "source"

WedgeError = plan.WedgeError


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
    """The command that runs this scene's wedge: ``farm.wedge`` in this Blender's Python."""
    settings = scene.surge_wedge
    command = [sys.executable, "-m", "farm.wedge", blend, "--out", out, "--workers", str(settings.workers)]
    if settings.scheduler.strip():
        command += ["--scheduler", settings.scheduler.strip()]
    if bpy.app.binary_path:  # the blender program: each combination bakes in a background blender
        command += ["--blender", bpy.app.binary_path, "--addon-module", ADDON_PACKAGE]
    else:  # Blender as a Python module: tools/bake.py of a source tree, else the installed add-on
        command += ["--worker-root", ADDON_ROOT, "--addon-module", ADDON_PACKAGE]
    for text in variation_texts(scene):
        command += ["--set", text]
    return command


def prepare(scene) -> tuple[str, str, int]:
    """Check the scene's wedge and write the copy of the open file it bakes; returns the copy's path, the
    wedge folder and the number of combinations.

    Raises
    ------
    WedgeError, EngineError, ValueError, OSError
        Bad variations (every value of every one is checked against the settings), no wedge folder, or a
        copy that cannot be written.
    """
    variations = [plan.parse_set(text) for text in variation_texts(scene)]
    out = wedge_dir(scene)
    if not out:
        raise ValueError("Set a wedge folder")
    source = os.path.join(out, SOURCE_DIR, os.path.basename(bpy.data.filepath) or "untitled.blend")
    count = len(plan.combinations(source, variations, out))
    headless.apply_settings(scene, [f"{v.key}={value}" for v in variations for value in v.values], apply=False)
    os.makedirs(os.path.dirname(source), exist_ok=True)
    # the wedge bakes this file as it is now, unsaved changes included; the artist's file is left alone
    bpy.ops.wm.save_as_mainfile(filepath=source, copy=True, relative_remap=True)
    return source, out, count


def start(scene, source: str, out: str) -> tuple[int, str]:
    """Start the wedge program on ``source`` in a process of its own that goes on if Blender closes;
    returns its process id and its log file (``wedge.log`` in the wedge folder).

    ``farm.wedge`` comes from the add-on's folder; the rest of the path is the one a plain Python has
    (Blender's own script folders must not shadow the bpy module a Blender-as-a-module wedge bakes with).
    """
    log = os.path.join(out, WEDGE_LOG)
    env = dict(os.environ)
    env["PYTHONPATH"] = os.pathsep.join(p for p in (ADDON_ROOT, env.get("PYTHONPATH", "")) if p)
    options = {"creationflags": subprocess.CREATE_NEW_CONSOLE} if sys.platform == "win32" else \
        {"start_new_session": True}
    with open(log, "w", encoding="utf-8") as f:
        process = subprocess.Popen(wedge_command(scene, source, out), stdin=subprocess.DEVNULL, stdout=f,
                                   stderr=subprocess.STDOUT, cwd=ADDON_ROOT, env=env, **options)
    return process.pid, log


def read(scene) -> dict | None:
    """The scene's ``wedge.json``, or None when there is none (or no readable one).

    Raises
    ------
    WedgeError, ValueError
        Only from :func:`read_checked`; this one returns None instead.
    """
    try:
        return read_checked(scene)
    except (plan.WedgeError, ValueError):
        return None


def read_checked(scene) -> dict | None:
    """The scene's ``wedge.json`` or None; a file that is not a wedge file raises WedgeError."""
    return plan.read_wedge(wedge_dir(scene))


def summary(scene) -> str:
    """'3 of 4 complete, 1 failed' for the scene's wedge folder, or ''.

    The panel draws it: ``wedge.json`` is read again only when the file changed
    (:func:`bridge.cache_state.read_json`), not on every redraw.
    """
    from . import cache_state

    try:
        folder = wedge_dir(scene)
    except ValueError:
        return ""
    doc = cache_state.read_json(os.path.join(folder, plan.WEDGE_FILE)) if folder else None
    return plan.summary(doc) if isinstance(doc, dict) and doc.get("format") == plan.WEDGE_FORMAT else ""


def variation_note(scene, variation) -> str | None:
    """Why a variation's setting would bake the same result for every value (the solver does not read it, the
    object's role does not use it), or that no such setting exists; None when it acts."""
    from . import setting_checks

    name = variation.setting.strip()
    obj = variation.target
    if name not in {item[0] for item in setting_checks.variable_settings(obj)}:
        return f"'{name}' is no setting a wedge can vary{' for this object' if obj is not None else ''}"
    solvers = {scene.surge.solver}
    for other in scene.surge_wedge.variations:  # a wedge over the solver too: the setting acts if any reads it
        if other.target is None and other.setting.strip() == "solver":
            solvers = {v.strip() for v in other.values.split(",") if v.strip()} or solvers
    reasons = [setting_checks.does_not_act(name, solver, obj) for solver in sorted(solvers)]
    return None if None in reasons else reasons[0]


def newest_frames(cache_dir: str) -> tuple[str | None, list[str]]:
    """The newest bake's USD folder in ``cache_dir`` and its frame files (none while nothing is baked)."""
    from . import files

    usd_dir = headless.newest_usd_dir(files.usd_bake_dirs(cache_dir))
    frames = sorted(n for n in os.listdir(usd_dir) if files.USD_FRAME_RE.match(n) and ".tmp" not in n) \
        if usd_dir else []
    return usd_dir, frames
