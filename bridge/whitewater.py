"""Whitewater from Blender: its settings, the stage over an existing cache in a child process, the three
point clouds that play it, freeing it.

Bake Whitewater runs ``python -m engine.stages run whitewater`` (:mod:`engine.whitewater.stage`) in a
child process, as a particle bake runs ``engine.cli bake``: Blender stays responsive, Esc cancels and
keeps the frames made so far, a new run with the same settings continues where the last one stopped,
and new settings make the whitewater again without touching the liquid's cache. The child writes one
USD point file per kind and frame; this side points three objects at them:

==================  ====================================  ==============================================
object              files                                 attributes (Blender)
==================  ====================================  ==============================================
Surge Spray         ``spray_NNNNNN.usdc``                 ``velocity`` (m/s), ``age`` (s), ``lifetime``
Surge Foam          ``foam_NNNNNN.usdc``                  (s left before it dissolves), ``id``,
Surge Bubbles       ``bubbles_NNNNNN.usdc``               ``radius`` (the kind's size)
==================  ====================================  ==============================================

Each is a point cloud with a Mesh Sequence Cache modifier and a material linked to the object:
plain Blender data that plays with no Python on frame change and renders without Surge.

:class:`WhitewaterSession` is polled like :class:`bridge.bake.BakeSession` and holds names, never
Blender pointers.
"""

from __future__ import annotations

import json
import os
import sys
import time
from dataclasses import asdict, dataclass

import bpy
from mathutils import Matrix

from ..engine import settings as settings_mod
from ..engine import stages
from ..engine.cache import CacheReader
from ..engine.errors import EngineError, InvalidSceneError
from ..engine.whitewater import stage as ww_stage
from . import export, files, liquid, usd
from .process import EXIT_CANCELLED, EXIT_COMPLETE, EXIT_ENGINE_ERROR, BakeProcess

#: Where the whitewater settings of a run are written for the child, and its log (inside the job folder).
SETTINGS_FILE = "whitewater.json"
LOG_FILE = "whitewater.log"

#: kind -> (object name, material name, viewport colour)
OBJECTS = {
    "spray": ("Surge Spray", "Surge Spray", (0.9, 0.95, 1.0, 1.0)),
    "foam": ("Surge Foam", "Surge Foam", (1.0, 1.0, 1.0, 1.0)),
    "bubbles": ("Surge Bubbles", "Surge Bubbles", (0.75, 0.88, 1.0, 1.0)),
}


class WhitewaterFailedError(EngineError):
    """The whitewater stage ended with an error or its process stopped unexpectedly."""


def whitewater_settings(scene) -> settings_mod.WhitewaterSettings:
    """The scene's whitewater settings (``Scene.surge.whitewater``) in SI, validated.

    Lengths (sizes) and speeds (trapped-air thresholds) are Blender units times the unit scale; the
    energy thresholds are per kilogram in SI whatever the scale.

    Raises
    ------
    InvalidSettingsError
    """
    values = export._engine_values(scene.surge.whitewater, settings_mod.whitewater_parameters(),
                                   export.unit_scale(scene))
    return settings_mod.whitewater_from_dict(values, owner=f"Scene '{scene.name}' whitewater")


def write_settings(cache_dir: str, settings: settings_mod.WhitewaterSettings) -> str:
    """Write the settings file the child reads; returns its path."""
    path = os.path.join(files.job_dir(cache_dir), SETTINGS_FILE)
    os.makedirs(os.path.dirname(path), exist_ok=True)
    tmp = path + ".tmp"
    with open(tmp, "w", encoding="utf-8") as fh:
        json.dump(asdict(settings), fh, indent=1, sort_keys=True)
    os.replace(tmp, path)
    return path


# -- the three objects -----------------------------------------------------------------------------------

def _material(kind: str):
    """The whitewater material of ``kind`` (made once; a user's edits are kept).

    Principled BSDF for both Cycles and EEVEE: foam is a rough white that fades out over its last half
    second (``lifetime`` through a Map Range into Alpha), spray a brighter, glossier white, bubbles a
    clear shell with the index of refraction of air in water (1 / 1.33), which makes them read as
    bright rims in the liquid.
    """
    _obj_name, name, colour = OBJECTS[kind]
    material = bpy.data.materials.get(name)
    if material is not None:
        return material
    material = bpy.data.materials.new(name)
    material.diffuse_color = colour  # solid-mode viewport colour
    tree = material.node_tree
    bsdf = next((n for n in tree.nodes if n.bl_idname == "ShaderNodeBsdfPrincipled"), None)
    if bsdf is None:
        return material
    bsdf.inputs["Base Color"].default_value = colour
    if kind == "foam":
        bsdf.inputs["Roughness"].default_value = 0.6
        bsdf.inputs["Subsurface Weight"].default_value = 0.3
        attr = tree.nodes.new("ShaderNodeAttribute")
        attr.attribute_name = "lifetime"
        fade = tree.nodes.new("ShaderNodeMapRange")
        fade.inputs["From Min"].default_value = 0.0
        fade.inputs["From Max"].default_value = 0.5
        tree.links.new(attr.outputs["Fac"], fade.inputs["Value"])
        tree.links.new(fade.outputs["Result"], bsdf.inputs["Alpha"])
    elif kind == "spray":
        bsdf.inputs["Roughness"].default_value = 0.25
        bsdf.inputs["Coat Weight"].default_value = 0.5
    else:
        bsdf.inputs["Roughness"].default_value = 0.05
        bsdf.inputs["IOR"].default_value = 1.0 / 1.33
        bsdf.inputs["Transmission Weight"].default_value = 1.0
    return material


def _show_kind(scene, kind: str, first_file: str, relative: bool, scale_length: float):
    group = scene.surge.whitewater
    obj_name, _material_name, _colour = OBJECTS[kind]
    obj = getattr(group, f"{kind}_object")
    if obj is None or obj.type != "POINTCLOUD":
        obj = bpy.data.objects.new(obj_name, bpy.data.pointclouds.new(obj_name))
        setattr(group, f"{kind}_object", obj)
    if obj.name not in scene.objects:
        scene.collection.objects.link(obj)
    mod = liquid._cache_modifier(obj)
    cache_file = mod.cache_file
    if cache_file is None:
        cache_file = liquid._new_cache_file(first_file)
        cache_file.name = f"{obj_name} Cache"
        mod.cache_file = cache_file
    # a new folder each time the stage starts over: Blender drops the readers of the old files
    cache_file.filepath = liquid._blend_path(first_file, relative)
    cache_file.is_sequence = True
    cache_file.scale = 1.0
    mod.object_path = f"/SurgeWhitewater_{kind}"
    s = 1.0 / scale_length
    obj.matrix_world = Matrix.Diagonal((s, s, s, 1.0))
    if not obj.material_slots:
        obj.data.materials.append(None)
    slot = obj.material_slots[0]
    if slot.link != "OBJECT":  # object-linked: the point cloud read from the file has no materials
        slot.link = "OBJECT"
    if slot.material is None:
        slot.material = _material(kind)
    obj.hide_render = obj.hide_viewport = False
    return obj


def show_whitewater(scene, cache_dir: str, relative: bool) -> bool:
    """Point the scene's three whitewater objects at the files in ``cache_dir``; False if there are none."""
    folder = ww_stage.usd_folder(cache_dir)
    done = stages.done_frames(cache_dir, ww_stage.NAME)
    if folder is None or not done:
        return False
    scale = export.unit_scale(scene)
    for kind in ww_stage.KINDS:
        path = os.path.join(folder, ww_stage.usd_name(kind, done[0]))
        if not os.path.isfile(path):
            return False
        _show_kind(scene, kind, path, relative, scale)
    return True


def _objects(scene) -> list:
    group = scene.surge.whitewater
    return [o for o in (getattr(group, f"{kind}_object") for kind in ww_stage.KINDS) if o is not None]


def reread(scene) -> None:
    """Make Blender read the current frame's files again (they appeared after Blender last looked)."""
    for obj in _objects(scene):
        for mod in obj.modifiers:
            if mod.type == "MESH_SEQUENCE_CACHE" and mod.cache_file is not None:
                mod.cache_file.update_tag()


def release_files(scene) -> None:
    """Point the objects' caches at nothing, so the files can be deleted (Windows keeps open files)."""
    for obj in _objects(scene):
        for mod in obj.modifiers:
            if mod.type == "MESH_SEQUENCE_CACHE" and mod.cache_file is not None:
                mod.cache_file.filepath = ""


def summary_text(cache_dir: str) -> str:
    """One line about the whitewater in ``cache_dir``: particles at the last frame, thresholds, the cap."""
    fig = ww_stage.figures(cache_dir)
    th = fig.get("thresholds") or {}
    text = f"{fig['emitted']:,} particles made, {fig['particles']:,} at the last frame"
    if th:
        text += (f"; thresholds: trapped air {th['trapped_air'][0]:.3g}-{th['trapped_air'][1]:.3g} m/s, wave crest "
                 f"{th['wave_crest'][0]:.3g}-{th['wave_crest'][1]:.3g}, energy {th['energy'][0]:.3g}-"
                 f"{th['energy'][1]:.3g} J/kg")
    return text


# -- the run ---------------------------------------------------------------------------------------------

@dataclass
class WhitewaterResult:
    status: str  # 'complete' or 'cancelled'
    frames: int
    processed: int
    elapsed: float
    cache_dir: str
    cap_message: str = ""

    @property
    def message(self) -> str:
        if self.status == "complete":
            text = (f"Whitewater of {self.frames} frames ready ({self.processed} made now, {self.elapsed:.1f} s) in "
                    f"'{self.cache_dir}'")
        else:
            text = f"Whitewater cancelled; {self.frames} frames are kept in '{self.cache_dir}'"
        return f"{text}. {self.cap_message}" if self.cap_message else text


def describe(event: dict) -> str | None:
    """One line for the user about a whitewater progress event."""
    kind = event.get("event")
    if kind == "stage":
        kept = f" ({event['kept']} kept from the last run)" if event.get("kept") else ""
        return f"Whitewater over {event.get('frames', 0)} frames{kept}"
    if kind == "frame":
        from .bake import duration

        capped = f", cap reached ({event['capped']} not made)" if event.get("capped") else ""
        return (f"Whitewater frame {event['frame']} of {event['frame_end']}: {event.get('emitted', 0)} new, "
                f"{event.get('spray', 0)} spray, {event.get('foam', 0)} foam, {event.get('bubbles', 0)} bubbles"
                f"{capped}, {event.get('seconds', 0.0):.2f} s, {duration(event.get('eta', 0.0))} left")
    if kind == "error":
        return f"Error: {event.get('message', '')}"
    return None


class WhitewaterSession:
    """The whitewater stage over the baked liquid of one scene.

    Creating it checks the settings and the cache (raising before anything is written), then starts
    the child process.
    """

    def __init__(self, scene, restart: bool = False):
        from .bake import ADDON_ROOT, numba_cache_dir

        settings = whitewater_settings(scene)
        cache_dir = files.resolve_cache_dir(scene, ADDON_ROOT)
        reader = CacheReader(cache_dir)  # CacheFormatError: nothing baked there
        if not reader.frames:
            raise InvalidSceneError(f"Scene '{scene.name}': the cache '{cache_dir}' holds no baked frame to make "
                                    f"whitewater from; bake the liquid first")
        self.scene_name = scene.name
        self.cache_dir = cache_dir
        self.relative = scene.surge.cache_directory.strip().startswith("//")
        self.frame_start, self.frame_end = int(reader.frames[0]), int(reader.frames[-1])
        path = write_settings(cache_dir, settings)
        usd.import_pxr()  # puts Blender's pxr on sys.path, which the child inherits
        flag = files.cancel_flag(cache_dir)
        if os.path.exists(flag):
            os.remove(flag)
        command = [sys.executable, "-m", "engine.stages", "run", ww_stage.NAME, cache_dir, "--settings", path,
                   "--option", "usd=1", "--cancel-file", flag]
        if restart:
            command.append("--restart")
        self.process = BakeProcess(files.job_dir(cache_dir), cache_dir, flag, ADDON_ROOT, numba_cache_dir(),
                                   os.path.join(files.job_dir(cache_dir), LOG_FILE), command=command)
        self.started = time.monotonic()
        self.error: dict | None = None
        self.shown = False
        self.status = "Starting the whitewater process"
        self.progress = 0.0
        self.summary: dict = {}
        self._publish()

    def scene(self):
        scene = bpy.data.scenes.get(self.scene_name)
        if scene is None:
            self.process.kill()
            raise WhitewaterFailedError(f"Scene '{self.scene_name}' was deleted while making whitewater; it was "
                                        f"stopped")
        return scene

    def _publish(self) -> None:
        state = self.scene().surge
        if not state.is_baking:
            state.is_baking = True
            state.bake_cancel_requested = False
        if abs(state.bake_progress - self.progress) > 1e-4:
            state.bake_progress = self.progress
        if state.bake_status != self.status:
            state.bake_status = self.status

    def poll(self, timeout: float = 0.0) -> list[dict]:
        events = self.process.events(timeout)
        for event in events:
            kind = event.get("event")
            if kind == "frame":
                span = max(1, self.frame_end - self.frame_start)
                self.progress = min(1.0, (event["frame"] - self.frame_start) / span)
                scene = self.scene()
                if not self.shown:
                    self.shown = show_whitewater(scene, self.cache_dir, self.relative)
                elif scene.frame_current == event["frame"]:
                    reread(scene)
            elif kind == "error":
                self.error = event
            elif kind == "done":
                self.summary = event
            text = describe(event)
            if text:
                self.status = text
        if self.scene().surge.bake_cancel_requested and self.process.cancel_requested_at is None:
            self.cancel()
        self.process.kill_if_overdue()
        self._publish()
        return events

    @property
    def finished(self) -> bool:
        return self.process.finished

    def cancel(self) -> None:
        self.process.request_cancel()
        self.status = "Cancelling"
        self._publish()

    def finish(self) -> WhitewaterResult:
        code = self.process.wait()
        self.poll()
        flag = files.cancel_flag(self.cache_dir)
        if os.path.exists(flag):
            os.remove(flag)
        scene = self.scene()
        scene.surge.is_baking = False
        scene.surge.bake_cancel_requested = False
        show_whitewater(scene, self.cache_dir, self.relative)
        done = len(stages.done_frames(self.cache_dir, ww_stage.NAME))
        elapsed = time.monotonic() - self.started
        processed = int(self.summary.get("processed", 0))
        cap = ww_stage.figures(self.cache_dir)["message"]
        if code == EXIT_COMPLETE:
            result = WhitewaterResult("complete", done, processed, elapsed, self.cache_dir, cap)
        elif code == EXIT_CANCELLED or self.process.cancel_requested_at is not None:
            result = WhitewaterResult("cancelled", done, processed, elapsed, self.cache_dir, cap)
        elif code == EXIT_ENGINE_ERROR and self.error:
            scene.surge.bake_status = f"Whitewater failed: {self.error.get('message', '')}"
            raise WhitewaterFailedError(self.error.get("message") or "Whitewater failed")
        else:
            tail = self.process.log_tail()
            message = (f"The whitewater process stopped unexpectedly (exit status {code})"
                       + (f"; last lines of its log '{self.process.log_path}': {tail}" if tail else ""))
            scene.surge.bake_status = message
            raise WhitewaterFailedError(message)
        scene.surge.bake_status = result.message
        scene.surge.whitewater.summary = summary_text(self.cache_dir)
        scene.surge.bake_progress = done / max(1, self.frame_end - self.frame_start + 1)
        return result

    def abort(self) -> None:
        self.process.kill()
        self.process.wait()
        scene = bpy.data.scenes.get(self.scene_name)
        if scene is not None:
            scene.surge.is_baking = False
            scene.surge.bake_status = "Whitewater stopped"


def free_whitewater(scene) -> tuple[str, int]:
    """Delete the whitewater files of the scene's cache (and nothing else); returns the folder and the count."""
    from .bake import ADDON_ROOT

    cache_dir = files.resolve_cache_dir(scene, ADDON_ROOT)
    release_files(scene)  # first: Windows cannot delete a file Blender holds open
    count = stages.clear_stage(cache_dir, ww_stage.NAME, ww_stage.FILE_RE) if os.path.isdir(cache_dir) else 0
    for name in (SETTINGS_FILE, SETTINGS_FILE + ".tmp", LOG_FILE):
        path = os.path.join(files.job_dir(cache_dir), name)
        if os.path.isfile(path):
            os.remove(path)
            count += 1
    for obj in _objects(scene):
        obj.hide_render = obj.hide_viewport = True
    scene.surge.whitewater.summary = ""
    scene.surge.bake_status = f"Removed {count} whitewater files from '{cache_dir}'"
    return cache_dir, count
