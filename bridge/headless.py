"""Baking without the interface: in a terminal, on a render farm, or started from the UI.

:func:`bake_open_file` is what every headless route runs inside a Blender (the ``blender``
program in background mode, or Blender as a Python module): bake the open file's scene, print
progress lines on stdout, and return an exit status (0 done, 1 refused or failed, 3 cancelled),
the error message going to stderr. ``tools/bake.py`` runs it for users with Blender as a Python
module only; :func:`terminal_command` builds the command the "Bake in a Terminal" button starts.
"""

from __future__ import annotations

import os
import re
import sys

import bpy
import numpy as np

from . import bake_state, files, setting_checks
from .export import float32_to_float
from ..engine.errors import EngineError

#: Exit statuses of a headless bake.
EXIT_DONE, EXIT_FAILED, EXIT_CANCELLED = 0, 1, 3


def _within(prop, number) -> bool:
    """True if Blender stores ``number`` within the property's hard limits. A float property holds float32, and
    so do its limits: 0.0005 typed as the minimum 0.0005 is stored as the minimum, though the float64 0.0005 is
    a hair below the float32 one."""
    if prop.type == "FLOAT":
        return bool(np.float32(prop.hard_min) <= np.float32(number) <= np.float32(prop.hard_max))
    return prop.hard_min <= number <= prop.hard_max


def _shown(prop, value) -> str:
    """A limit as people typed it (the shortest decimal of its float32)."""
    return f"{float32_to_float(value):g}" if prop.type == "FLOAT" else str(value)


def _value_for(prop, text: str, owner: str):
    """``text`` converted to the type of the Blender property ``prop``; raises ValueError naming the setting."""
    where = f"{owner}: setting '{prop.identifier}'"
    kind = prop.type
    length = getattr(prop, "array_length", 0) if kind in ("FLOAT", "INT", "BOOLEAN") else 0
    parts = [t for t in text.replace(":", " ").split()] if length else [text.strip()]
    if length and len(parts) != length:
        raise ValueError(f"{where} is a vector of {length} values; write them as {':'.join(['v'] * length)}, "
                         f"not {text!r}")
    values = []
    for part in parts:
        if kind == "BOOLEAN":
            if part.lower() not in ("1", "0", "true", "false", "on", "off", "yes", "no"):
                raise ValueError(f"{where} is on or off (true/false), not {part!r}")
            values.append(part.lower() in ("1", "true", "on", "yes"))
        elif kind in ("FLOAT", "INT"):
            try:
                number = float(part) if kind == "FLOAT" else int(part)
            except ValueError:
                raise ValueError(f"{where} takes a {'number' if kind == 'FLOAT' else 'whole number'}, "
                                 f"not {part!r}") from None
            if not _within(prop, number):
                low, high = (_shown(prop, prop.hard_min), _shown(prop, prop.hard_max))
                raise ValueError(f"{where} must lie between {low} and {high} (both included); {part} is outside")
            values.append(number)
        elif kind == "ENUM":
            choices = [item.identifier for item in prop.enum_items]
            if part not in choices:
                raise ValueError(f"{where} is one of {', '.join(choices)}, not {part!r}")
            values.append(part)
        elif kind == "STRING":
            values.append(part)
        else:
            raise ValueError(f"{where} cannot be set from the command line (a {kind.lower()} property)")
    return values if length else values[0]


def apply_settings(scene, assignments, apply: bool = True) -> list[str]:
    """Set Surge settings from ``NAME=VALUE`` texts (``NAME@OBJECT=VALUE`` for an object's setting); returns
    a warning for each setting that does not act in this scene (a setting the solver does not read, an
    object's setting for another role: :func:`bridge.setting_checks.does_not_act`).

    ``NAME`` is a property of ``Scene.surge`` (or, with ``@OBJECT``, of that object's ``Object.surge``);
    a ``Scene.surge.`` or ``Object.surge.`` prefix is allowed. Vectors write their components with ``:``.
    Every assignment is checked before any is made; with ``apply=False`` they are only checked.

    Raises
    ------
    InvalidSettingsError
        Naming every unknown object or setting and every value that does not fit.
    """
    from ..engine.errors import InvalidSettingsError

    problems, changes = [], []
    for text in assignments:
        key, sep, value = text.partition("=")
        key = key.strip().removeprefix("Scene.surge.").removeprefix("Object.surge.")
        name, _, obj_name = key.partition("@")
        if not sep or not name:
            problems.append(f"{text!r}: expected NAME=VALUE or NAME@OBJECT=VALUE")
            continue
        if obj_name:
            obj = bpy.data.objects.get(obj_name)
            if obj is None:
                problems.append(f"No object '{obj_name}' in the file (setting '{name}')")
                continue
            group, owner = obj.surge, f"Object '{obj_name}'"
        else:
            group, owner = scene.surge, f"Scene '{scene.name}'"
        prop = group.bl_rna.properties.get(name)
        if prop is None or name == "rna_type" or prop.is_readonly:
            problems.append(f"{owner} has no Surge setting '{name}'")
            continue
        try:
            changes.append((group, name, _value_for(prop, value, owner)))
        except ValueError as exc:
            problems.append(str(exc))
    if problems:
        raise InvalidSettingsError(problems)
    # the solver the bake will use: the one set here, if any
    solvers = {value for group, name, value in changes if group == scene.surge and name == "solver"}
    solvers = solvers or {scene.surge.solver}
    warnings = []
    for group, name, _value in changes:
        obj = group.id_data if group.id_data != scene else None
        reasons = {setting_checks.does_not_act(name, solver, obj) for solver in solvers}
        if None not in reasons:  # acts with none of the solvers the assignments use
            warnings.append(sorted(reasons)[0])
    for group, name, value in changes if apply else ():
        setattr(group, name, value)
    return list(dict.fromkeys(warnings))


def operator_error(exc: RuntimeError) -> str:
    """The message of an operator's ERROR report or refused ``poll()``, without Blender's prefixes."""
    message = str(exc).strip().removeprefix("Error:").strip()
    return re.sub(r"^Operator bpy\.ops\.[\w.]+\.poll\(\)\s*", "", message)


def can_resume(scene) -> bool:
    """True when the scene's cache folder holds a checkpoint a bake can resume from."""
    from ..engine.io import checkpoint
    from .paths import ADDON_ROOT

    try:
        return bool(checkpoint.resumable_frames(files.resolve_cache_dir(scene, ADDON_ROOT)))
    except (EngineError, OSError):
        return False


def bake_open_file(resume=False, save: bool = False, scene_name: str = "", cache_dir: str = "", settings=(),
                   save_as: str = "", if_settings_changed: str = "REFUSE") -> int:
    """Bake the current scene of the open .blend (blocking); returns the exit status.

    ``scene_name`` bakes that scene instead; ``cache_dir`` (an absolute folder) replaces the scene's
    Cache Directory, as when baking a copy of a file that must bake into the original's cache.
    ``settings`` are ``NAME=VALUE`` assignments applied first (:func:`apply_settings`); ``save_as``
    saves the file under that path before baking (the bake's own .blend, as a wedge does); ``resume``
    may be 'auto': resume when the cache holds a checkpoint, else bake from the start; ``if_settings_changed``
    says what a resume does when the settings or the scene changed since the cached frames were baked
    (``REFUSE``, ``RESUME`` with the new ones from the checkpoint, ``REBAKE`` from the start).
    Progress lines come from the bake operator (``Surge: Frame 2 of 48: ...``); a failure prints
    ``Surge: error: <message>`` on stderr.
    """
    scene = bpy.data.scenes.get(scene_name) if scene_name else bpy.context.scene
    if scene is None:
        print(f"Surge: error: the file has no scene '{scene_name}'", file=sys.stderr, flush=True)
        return EXIT_FAILED
    try:
        warnings = apply_settings(scene, settings)
    except EngineError as exc:
        print(f"Surge: error: {exc}", file=sys.stderr, flush=True)
        return EXIT_FAILED
    for text in warnings:
        print(f"Surge: warning: {text}", file=sys.stderr, flush=True)
    if cache_dir:
        scene.surge.cache_directory = os.path.abspath(cache_dir)
    if save_as:
        os.makedirs(os.path.dirname(os.path.abspath(save_as)), exist_ok=True)
        bpy.ops.wm.save_as_mainfile(filepath=os.path.abspath(save_as))
        print(f"Surge: saved '{bpy.data.filepath}'", flush=True)
    if resume == "auto":
        resume = can_resume(scene)
        if resume:
            print("Surge: resuming from the cache's last checkpoint", flush=True)
    resume = bool(resume)
    try:
        if scene == bpy.context.scene:
            result = bpy.ops.surge.bake(resume=resume, if_settings_changed=if_settings_changed)
        else:
            with bpy.context.temp_override(scene=scene, view_layer=scene.view_layers[0]):
                result = bpy.ops.surge.bake(resume=resume, if_settings_changed=if_settings_changed)
    except RuntimeError as exc:  # the operator's ERROR report: a refused scene or a failed bake
        message = operator_error(exc)
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
        message = operator_error(exc)
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


def bake_surface_on_cluster(scheduler: str, workers: int, root: str, save: bool = False,
                            restart: bool = False) -> int:
    """Mesh the surface of the open .blend's cache with its frames spread over a Dask cluster (blocking).

    ``scheduler`` is a scheduler's address or ``'local'`` (a LocalCluster of ``workers`` processes);
    ``root`` the repository folder as the workers see it. The cluster is driven by the program
    ``python -m farm.cluster_stage`` in a child process (no Dask in Blender's process). Progress lines
    ``Surge: Surface frame 12 (worker tcp://...)``; the exit status as :func:`bake_surface_open_file`.
    """
    from ..engine.io.lock import check_free
    from . import surface_bake, usd
    from .paths import ADDON_ROOT, numba_cache_dir
    from .process import BakeProcess

    scene = bpy.context.scene
    try:
        settings = surface_bake.surface_settings(scene)
        cache_dir = files.resolve_cache_dir(scene, ADDON_ROOT)
        check_free(cache_dir)  # another process writing there keeps its cancel flag
        usd.import_pxr()
        settings_file = surface_bake.write_settings(cache_dir, settings)
    except (EngineError, OSError) as exc:
        print(f"Surge: error: {exc}", file=sys.stderr, flush=True)
        return EXIT_FAILED
    flag = files.cancel_flag(cache_dir)
    if os.path.exists(flag):
        os.remove(flag)
    pxr_paths = [p for p in sys.path if os.path.isdir(os.path.join(p, "pxr"))]
    command = [sys.executable, "-m", "farm.cluster_stage", "surface", cache_dir, "--root", root,
               "--scheduler", scheduler, "--workers", str(workers), "--settings", settings_file,
               "--option", "usd=1", "--cancel-file", flag] + ["--restart"] * restart
    for path in pxr_paths:
        command += ["--pxr-path", path]
    try:
        process = BakeProcess("", cache_dir, flag, ADDON_ROOT, numba_cache_dir(),
                              os.path.join(files.job_dir(cache_dir), "cluster_surface.log"), command=command)
    except OSError as exc:
        print(f"Surge: error: the cluster stage could not start: {exc}", file=sys.stderr, flush=True)
        return EXIT_FAILED
    done, error = None, None
    try:
        while not process.finished:
            for event in process.events(timeout=0.5):
                if event.get("event") == "frame":
                    print(f"Surge: Surface frame {event['frame']} of {event['frame_end']}: "
                          f"{event.get('triangles', '?')} triangles in {event['seconds']:.2f} s "
                          f"(worker {event.get('worker')})", flush=True)
                elif event.get("event") == "done":
                    done = event
                elif event.get("event") == "error":
                    error = event.get("message", "")
    except KeyboardInterrupt:
        process.request_cancel()
    code = process.wait()
    if code == EXIT_CANCELLED:
        print(f"Surge: {(done or {}).get('message', 'Surface cancelled')}", flush=True)
        return EXIT_CANCELLED
    if code != EXIT_DONE or done is None:
        print(f"Surge: error: {error or process.log_tail() or f'the cluster stage ended with status {code}'}",
              file=sys.stderr, flush=True)
        return EXIT_FAILED
    surface_bake.show_surface(scene, cache_dir, files.cache_dir_is_relative(scene))
    print(f"Surge: Surface meshed: {done['processed']} frames on {len(done['workers'])} workers, "
          f"{done['kept']} kept, in {done['elapsed']:.1f} s", flush=True)
    if save:
        bpy.ops.wm.save_mainfile()
        print(f"Surge: saved '{bpy.data.filepath}'", flush=True)
    return EXIT_DONE

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


def start_terminal_bake(scene, resume: bool = False) -> tuple[int, str]:
    """Bake a copy of the open file as it is now in a separate background Blender that goes on if this
    one closes (the artist's file is neither saved nor changed); returns the process id and its log.

    Raises
    ------
    EngineError, OSError
        The cache folder is not Surge's, is being baked into, or cannot be written; the process could
        not start.
    RuntimeError
        Blender could not write the copy.
    """
    import subprocess

    from ..engine.io import cache as cache_mod
    from . import preferences
    from .paths import ADDON_PACKAGE, ADDON_ROOT

    cache_dir = files.resolve_cache_dir(scene, ADDON_ROOT)
    # nothing is written into a folder that is not Surge's or that another bake is writing into
    cache_mod.check_folder(cache_dir, files.NOT_FOREIGN)
    cache_mod.check_free(cache_dir)
    cache_mod.check_writable(cache_dir)
    copy = save_copy(cache_dir)
    # the copy lives in the cache folder: give it the absolute cache folder, which a relative or
    # default one (named after the .blend file) would not reproduce from there
    command = terminal_command(copy, ADDON_PACKAGE, ADDON_ROOT, resume=resume, scene_name=scene.name,
                               cache_dir=cache_dir)
    log = terminal_log(cache_dir)
    options = {}
    if sys.platform == "win32":
        options["creationflags"] = subprocess.CREATE_NEW_CONSOLE  # its own console window shows the progress
    else:
        options["start_new_session"] = True  # not stopped with this Blender or its terminal
    env = dict(os.environ)
    if preferences.bake_threads():
        env["NUMBA_NUM_THREADS"] = str(preferences.bake_threads())
    with open(log, "w", encoding="utf-8") as out:
        process = subprocess.Popen(command, stdin=subprocess.DEVNULL, stdout=out, stderr=subprocess.STDOUT,
                                   cwd=cache_dir, env=env, **options)
    return process.pid, log


def show_newest_bake(scene) -> tuple[str, int]:
    """Play the liquid last baked into the scene's cache folder (by a terminal or farm bake, for
    instance), with its surface if one was meshed; returns the USD folder and the number of frames.

    Raises
    ------
    EngineError, OSError
        No cache folder, or nothing baked into it yet.
    """
    from ..engine.errors import CacheFormatError
    from . import export, liquid, surface, surface_bake
    from .paths import ADDON_ROOT

    cache_dir = files.resolve_cache_dir(scene, ADDON_ROOT)
    usd_dir = newest_usd_dir(files.usd_bake_dirs(cache_dir))
    names = sorted(os.listdir(usd_dir)) if usd_dir else []
    frames = [n for n in names if files.USD_FRAME_RE.match(n) and not n.endswith(".tmp.usdc")]
    if not frames:
        raise CacheFormatError(f"No baked liquid in '{cache_dir}' yet; bake first, or wait for the terminal bake")
    liquid.show_frames(scene, os.path.join(usd_dir, frames[0]), files.cache_dir_is_relative(scene),
                       export.unit_scale(scene))
    surface.sync(scene, export.unit_scale(scene))
    surface_bake.show_surface(scene, cache_dir, files.cache_dir_is_relative(scene))  # a surface, if meshed
    return usd_dir, len(frames)
