"""Baking without the interface: in a terminal, on a render farm, or started from the UI.

:func:`bake_open_file` is what every headless route runs inside a Blender (the ``blender``
program in background mode, or Blender as a Python module): bake the open file's scene, print
progress lines on stdout, and return an exit status (0 done, 1 refused or failed, 3 cancelled),
the error message going to stderr. ``tools/bake.py`` runs it for users with Blender as a Python
module only; :func:`terminal_command` builds the command the "Bake in a Terminal" button starts.
"""

from __future__ import annotations

import os
import sys

import bpy

from . import bake_state, files

#: Exit statuses of a headless bake.
EXIT_DONE, EXIT_FAILED, EXIT_CANCELLED = 0, 1, 3


def bake_open_file(resume: bool = False, save: bool = False, scene_name: str = "", cache_dir: str = "") -> int:
    """Bake the current scene of the open .blend (blocking); returns the exit status.

    ``scene_name`` bakes that scene instead; ``cache_dir`` (an absolute folder) replaces the scene's
    Cache Directory, as when baking a copy of a file that must bake into the original's cache.
    Progress lines come from the bake operator (``Surge: Frame 2 of 48: ...``); a failure prints
    ``Surge: error: <message>`` on stderr.
    """
    scene = bpy.data.scenes.get(scene_name) if scene_name else bpy.context.scene
    if scene is None:
        print(f"Surge: error: the file has no scene '{scene_name}'", file=sys.stderr, flush=True)
        return EXIT_FAILED
    if cache_dir:
        scene.surge.cache_directory = cache_dir
    try:
        if scene == bpy.context.scene:
            result = bpy.ops.surge.bake(resume=resume)
        else:
            with bpy.context.temp_override(scene=scene, view_layer=scene.view_layers[0]):
                result = bpy.ops.surge.bake(resume=resume)
    except RuntimeError as exc:  # the operator's ERROR report: a refused scene or a failed bake
        message = str(exc).strip().removeprefix("Error:").strip()
        print(f"Surge: error: {message}", file=sys.stderr, flush=True)
        return EXIT_FAILED
    if "FINISHED" not in result:
        print(f"Surge: error: the bake did not run ({', '.join(sorted(result))})", file=sys.stderr, flush=True)
        return EXIT_FAILED
    if save:
        bpy.ops.wm.save_mainfile()
        print(f"Surge: saved '{bpy.data.filepath}'", flush=True)
    return EXIT_CANCELLED if bake_state.status(scene).startswith("Bake cancelled") else EXIT_DONE


def _stage_open_file(operator, title: str, save: bool, restart: bool) -> int:
    """Run a stage operator over the open .blend's baked cache (blocking); returns the exit status."""
    try:
        result = operator(restart=restart)
    except RuntimeError as exc:
        message = str(exc).strip().removeprefix("Error:").strip()
        print(f"Surge: error: {message}", file=sys.stderr, flush=True)
        return EXIT_FAILED
    if "FINISHED" not in result:
        print(f"Surge: error: the {title.lower()} did not run ({', '.join(sorted(result))})", file=sys.stderr,
              flush=True)
        return EXIT_FAILED
    scene = bpy.context.scene
    if save:
        bpy.ops.wm.save_mainfile()
        print(f"Surge: saved '{bpy.data.filepath}'", flush=True)
    return EXIT_CANCELLED if bake_state.status(scene).startswith(f"{title} cancelled") else EXIT_DONE


def bake_surface_open_file(save: bool = False, restart: bool = False) -> int:
    """Mesh the surface of the open .blend's baked cache (blocking); returns the exit status.

    Progress lines ``Surge: Surface frame 12 of 72: ...``; a failure prints ``Surge: error: <message>``
    on stderr. 3 when cancelled (``cancel.flag`` in the cache folder).
    """
    return _stage_open_file(bpy.ops.surge.bake_surface, "Surface", save, restart)


def bake_whitewater_open_file(save: bool = False, restart: bool = False) -> int:
    """Make the whitewater of the open .blend's baked cache (blocking); returns the exit status, as
    :func:`bake_surface_open_file` (progress lines ``Surge: Whitewater frame 12 of 72: ...``)."""
    return _stage_open_file(bpy.ops.surge.bake_whitewater, "Whitewater", save, restart)


#: Run by ``python -c`` in a child when Blender is a Python module (no ``blender`` program):
#: enable this add-on, open the file, bake. {module}, {root}, {blend} and {resume} are filled in.
_MODULE_CHILD = """
import importlib, os, sys
import bpy
import addon_utils
module = {module!r}
if addon_utils.enable(module, default_set=True) is None:
    # not installed where this process looks: load it from its folder through a local repository
    repos = bpy.context.preferences.extensions.repos
    if not any(r.module == "surge_terminal" for r in repos):
        repos.new(name="Surge", module="surge_terminal", custom_directory=os.path.dirname({root!r}), source="USER")
    module = "bl_ext.surge_terminal." + os.path.basename({root!r})
    if addon_utils.enable(module, default_set=True) is None:
        print("Surge: error: the add-on could not be enabled from " + {root!r}, file=sys.stderr)
        sys.exit(1)
bpy.ops.wm.open_mainfile(filepath={blend!r})
sys.exit(importlib.import_module(module + ".bridge.headless").bake_open_file(
    resume={resume!r}, scene_name={scene_name!r}, cache_dir={cache_dir!r}))
"""


def terminal_command(blend: str, addon_module: str, addon_root: str, resume: bool = False, scene_name: str = "",
                     cache_dir: str = "") -> list[str]:
    """The command that bakes ``blend`` (its scene ``scene_name``, into ``cache_dir`` if given; see
    :func:`bake_open_file`) in a separate process.

    With the ``blender`` program: ``blender -b FILE --python-exit-code 1 --python-expr ...`` (Blender's
    own preferences enable Surge). With Blender as a Python module: this Python, running a short
    script that enables the add-on from ``addon_root`` if needed.
    """
    if bpy.app.binary_path:
        expr = ("import sys, importlib; "
                f"sys.exit(importlib.import_module({addon_module + '.bridge.headless'!r}).bake_open_file("
                f"resume={resume!r}, scene_name={scene_name!r}, cache_dir={cache_dir!r}))")
        return [bpy.app.binary_path, "-b", blend, "--python-exit-code", "1", "--python-expr", expr]
    script = _MODULE_CHILD.format(module=addon_module, root=addon_root, blend=blend, resume=resume,
                                  scene_name=scene_name, cache_dir=cache_dir)
    return [sys.executable, "-c", script]


def terminal_log(cache_dir: str) -> str:
    """Where a bake started with "Bake in a Terminal" writes its output."""
    return os.path.join(cache_dir, files.TERMINAL_LOG)


def newest_usd_dir(usd_dirs: list[str]) -> str | None:
    """The most recently written of a cache's USD bake folders (what a finished bake left)."""
    return max(usd_dirs, key=os.path.getmtime) if usd_dirs else None
