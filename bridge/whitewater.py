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

:class:`WhitewaterSession` is a :class:`bridge.stage_session.StageSession`: polled like a bake, holding
names, never Blender pointers.
"""

from __future__ import annotations

import os
from dataclasses import asdict

import bpy
from mathutils import Matrix

from ..engine import settings as settings_mod
from ..engine import stages
from ..engine.whitewater import stage as ww_stage
from . import bake_state, export, liquid
from .stage_session import StageFailedError, StageSession, describe_event, free_stage_files
from .stage_session import write_settings as write_job_settings

#: Where the whitewater settings of a run are written for the child, and its log (inside the job folder).
SETTINGS_FILE = "whitewater.json"
LOG_FILE = "whitewater.log"

#: kind -> (object name, material name, viewport colour)
OBJECTS = {
    "spray": ("Surge Spray", "Surge Spray", (0.9, 0.95, 1.0, 1.0)),
    "foam": ("Surge Foam", "Surge Foam", (1.0, 1.0, 1.0, 1.0)),
    "bubbles": ("Surge Bubbles", "Surge Bubbles", (0.75, 0.88, 1.0, 1.0)),
}


#: kind -> the display setting of its size (``Scene.surge.whitewater.<name>``, Blender units)
SIZE_SETTINGS = {"spray": "spray_size", "foam": "foam_size", "bubbles": "bubble_size"}


class WhitewaterFailedError(StageFailedError):
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
    """Write the settings file the bake's child reads (Make During Bake); returns its path."""
    return write_job_settings(cache_dir, SETTINGS_FILE, asdict(settings))


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
    mod.show_viewport = mod.show_render = True  # off while released (release_files)
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


def apply_display(scene) -> None:
    """Each kind's size and the share of the whitewater the viewport draws (``Scene.surge.whitewater``), set on
    the three objects' display modifiers (:mod:`bridge.display`) without running the stage again."""
    from . import display

    group = scene.surge.whitewater
    scale = export.unit_scale(scene)
    for kind in ww_stage.KINDS:
        obj = getattr(group, f"{kind}_object")
        if obj is not None and obj.type == "POINTCLOUD":
            size = getattr(group, SIZE_SETTINGS[kind])
            display.apply(obj, group.viewport_percentage / 100.0, export.float32_to_float(size) * scale, 1.0)


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
    apply_display(scene)
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
    """Point the objects' caches at nothing, so the files can be deleted (Windows keeps open files); their cache
    modifiers are off meanwhile (see :func:`bridge.liquid.release_object`)."""
    for obj in _objects(scene):
        liquid.release_object(obj)


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

def _frame_words(event: dict) -> str:
    capped = f", cap reached ({event['capped']} not made)" if event.get("capped") else ""
    return (f"{event.get('emitted', 0)} new, {event.get('spray', 0)} spray, {event.get('foam', 0)} foam, "
            f"{event.get('bubbles', 0)} bubbles{capped}")


def describe(event: dict) -> str | None:
    """One line for the user about a whitewater progress event."""
    return describe_event(event, "Whitewater", "Whitewater over", _frame_words)


class WhitewaterSession(StageSession):
    """The whitewater stage over the baked liquid of one scene (see :class:`bridge.stage_session.StageSession`)."""

    stage = ww_stage.NAME
    title = "Whitewater"
    settings_file = SETTINGS_FILE
    log_file = LOG_FILE
    failed_error = WhitewaterFailedError
    describe = staticmethod(describe)

    def __init__(self, scene, restart: bool = False):
        super().__init__(scene, asdict(whitewater_settings(scene)), restart=restart)

    def show(self, scene) -> bool:
        return show_whitewater(scene, self.cache_dir, self.relative)

    def reread(self, scene) -> None:
        reread(scene)

    def note(self) -> str:
        return ww_stage.figures(self.cache_dir)["message"]

    def finished_run(self, scene) -> None:
        scene.surge.whitewater.summary = summary_text(self.cache_dir)


def free_whitewater(scene, locked: bool = False) -> tuple[str, int]:
    """Delete the whitewater files of the scene's cache (and nothing else); returns the folder and the count.

    Holds the folder's lock meanwhile (``locked``: the caller holds it); raises ``CacheLockedError``
    while a bake or a stage writes there."""
    cache_dir, count = free_stage_files(scene, ww_stage.NAME, ww_stage.FILE_RE, (SETTINGS_FILE, LOG_FILE),
                                        release_files, "Free Whitewater", locked)
    for obj in _objects(scene):
        obj.hide_render = obj.hide_viewport = True
    scene.surge.whitewater.summary = ""
    bake_state.set_status(scene, f"Removed {count} whitewater files from '{cache_dir}'")
    return cache_dir, count
