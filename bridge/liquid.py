"""The liquid object: a point cloud that plays the baked USD files through Blender's own cache reader.

The object is plain Blender data (a point cloud, a Mesh Sequence Cache modifier, a Cache File with
``is_sequence`` on, a material), so a saved .blend plays and renders without Surge installed and
no Python runs on frame change. Each bake points the same object at its new files.
"""

from __future__ import annotations

import os

import bpy
from mathutils import Matrix

from .usd import PRIM_PATH, SURFACE_PRIM_PATH

LIQUID_NAME = "Surge Liquid"
MODIFIER_NAME = "Surge Cache"
CACHE_FILE_NAME = "Surge Liquid Cache"
MATERIAL_NAME = "Surge Water"


def _blend_path(path: str, relative: bool) -> str:
    """``path`` as stored in the .blend: relative (``//...``) when the cache folder was given that way."""
    if relative and bpy.data.filepath:
        try:
            return bpy.path.relpath(path)
        except ValueError:  # Windows: the cache is on another drive than the .blend
            return path
    return path


def _new_cache_file(path: str):
    # Blender offers no bpy.data.cache_files.new(); this operator is the API, and it runs headless.
    before = set(bpy.data.cache_files)
    bpy.ops.cachefile.open(filepath=path, relative_path=False)
    created = [cf for cf in bpy.data.cache_files if cf not in before]
    if not created:
        raise OSError(f"Blender could not open the point cache '{path}'")
    cache_file = created[0]
    # the operator leaves a user that nothing holds (the .blend does not save it); without it the
    # modifier is the only user, so the cache file goes away with the liquid
    cache_file.user_clear()
    cache_file.name = CACHE_FILE_NAME
    return cache_file


def _water_material():
    material = bpy.data.materials.get(MATERIAL_NAME)
    if material is not None:
        return material
    material = bpy.data.materials.new(MATERIAL_NAME)
    material.diffuse_color = (0.45, 0.7, 0.95, 1.0)  # the solid-mode viewport colour
    bsdf = next((n for n in material.node_tree.nodes if n.bl_idname == "ShaderNodeBsdfPrincipled"), None)
    if bsdf is not None:
        bsdf.inputs["Base Color"].default_value = (0.8, 0.92, 1.0, 1.0)
        bsdf.inputs["Roughness"].default_value = 0.05
        bsdf.inputs["IOR"].default_value = 1.33  # water
        bsdf.inputs["Transmission Weight"].default_value = 1.0
    return material


def _cache_modifier(obj):
    for mod in obj.modifiers:
        if mod.type == "MESH_SEQUENCE_CACHE" and mod.name == MODIFIER_NAME:
            return mod
    mod = obj.modifiers.new(MODIFIER_NAME, "MESH_SEQUENCE_CACHE")
    # first in the stack: whatever the user adds (meshing, instancing) works on the particles
    obj.modifiers.move(len(obj.modifiers) - 1, 0)
    return mod


def show_frames(scene, first_file: str, relative: bool, scale_length: float):
    """Create or update the liquid object of ``scene`` so that it plays the sequence of ``first_file``.

    Parameters
    ----------
    scene : bpy.types.Scene
    first_file : str
        Absolute path of the first frame's ``liquid_NNNNNN.usdc``; the others are found by number.
    relative : bool
        Store the path relative to the .blend file (the user's cache folder was given that way).
    scale_length : float
        The scene's unit scale: the files are in metres, the object scales them to Blender units.

    Returns
    -------
    bpy.types.Object
    """
    obj = _scene_object(scene, "liquid_object", "POINTCLOUD", LIQUID_NAME, bpy.data.pointclouds)
    _play(obj, first_file, relative, scale_length, PRIM_PATH, CACHE_FILE_NAME)
    apply_display(scene)
    return obj


def _scene_object(scene, prop: str, obj_type: str, name: str, data_blocks):
    """The object ``scene.surge.<prop>``, made (with new data from ``data_blocks``) if it is missing or of
    another type, and linked to the scene if it is not."""
    obj = getattr(scene.surge, prop)
    if obj is None or obj.type != obj_type:
        obj = bpy.data.objects.new(name, data_blocks.new(name))
        setattr(scene.surge, prop, obj)
    if obj.name not in scene.objects:
        scene.collection.objects.link(obj)
    return obj


def _play(obj, first_file: str, relative: bool, scale_length: float, prim_path: str, cache_name: str) -> None:
    """Point ``obj``'s cache modifier at the sequence of ``first_file`` (prim ``prim_path``), scale it from
    metres to Blender units, and give it the water material unless it has one."""
    mod = _cache_modifier(obj)
    cache_file = mod.cache_file
    if cache_file is None:
        cache_file = _new_cache_file(first_file)
        cache_file.name = cache_name
        mod.cache_file = cache_file
    # A new file name per bake is what makes Blender drop the readers of the previous bake's files.
    cache_file.filepath = _blend_path(first_file, relative)
    cache_file.is_sequence = True
    cache_file.scale = 1.0
    mod.object_path = prim_path
    mod.show_viewport = mod.show_render = True  # off while released (release_object)
    s = 1.0 / scale_length
    obj.matrix_world = Matrix.Diagonal((s, s, s, 1.0))
    _ensure_material(obj)


def _ensure_material(obj) -> None:
    """Give the liquid the water material unless the user gave it one.

    The slot links the material to the object, not to the point cloud: the cache modifier replaces
    the point cloud with one read from the file, which has no materials (measured: a data-linked
    material renders as nothing in Cycles, an object-linked one renders).
    """
    if not obj.material_slots:
        obj.data.materials.append(None)
    slot = obj.material_slots[0]
    if slot.link != "OBJECT":
        material = slot.material
        slot.link = "OBJECT"
        slot.material = material
    if slot.material is None:
        slot.material = _water_material()


def reread(scene) -> None:
    """Make Blender read the current frame's file again (it appeared after Blender last looked).

    Measured: tagging the object does not retry a file that was missing; tagging the cache file does.
    """
    reread_object(scene.surge.liquid_object)


def reread_object(obj) -> None:
    """Make Blender read the current frame of ``obj``'s cache files again (None: nothing to do)."""
    if obj is None:
        return
    for mod in obj.modifiers:
        if mod.type == "MESH_SEQUENCE_CACHE" and mod.cache_file is not None:
            mod.cache_file.update_tag()


def release_files(scene) -> None:
    """Point the liquid's cache at nothing, so its files can be deleted (Windows keeps open files)."""
    release_object(scene.surge.liquid_object)


def release_object(obj) -> None:
    """Point ``obj``'s caches at nothing (None: nothing to do).

    The cache modifier is switched off first: a visible object whose modifier reads an empty file name makes
    Blender print "Could not create cache reader for file" on every evaluation. Showing files again
    (:func:`_play`) switches it back on.
    """
    if obj is None:
        return
    for mod in obj.modifiers:
        if mod.type == "MESH_SEQUENCE_CACHE" and mod.cache_file is not None:
            mod.show_viewport = mod.show_render = False
            mod.cache_file.filepath = ""


def current_file(scene) -> str | None:
    """Absolute path of the file the liquid's cache points at, or None."""
    obj = scene.surge.liquid_object
    if obj is None:
        return None
    for mod in obj.modifiers:
        if mod.type == "MESH_SEQUENCE_CACHE" and mod.name == MODIFIER_NAME and mod.cache_file is not None:
            if mod.cache_file.filepath:
                return os.path.normpath(bpy.path.abspath(mod.cache_file.filepath))
    return None


# -- the surface: a mesh object playing the surface stage's USD files -----------------------------------

SURFACE_NAME = "Surge Surface"
SURFACE_CACHE_FILE_NAME = "Surge Surface Cache"

#: Scene.surge.liquid_display -> (points shown, surface shown)
DISPLAY = {"POINTS": (True, False), "SURFACE": (False, True), "BOTH": (True, True)}


def show_surface(scene, first_file: str, relative: bool, scale_length: float):
    """Create or update the surface object of ``scene`` so that it plays the sequence of ``first_file``.

    The object is a mesh with a Mesh Sequence Cache modifier reading ``surface_NNNNNN.usdc`` (prim
    ``/SurgeSurface``): plain Blender data, so the saved .blend plays and renders without Surge, and no
    Python runs on frame change. The files carry ``velocity`` (m/s), which Cycles uses for the motion
    blur of a mesh whose vertices change every frame.

    Parameters
    ----------
    first_file : str
        Absolute path of the first meshed frame's file; the others are found by number.
    relative, scale_length
        As for :func:`show_frames`.

    Returns
    -------
    bpy.types.Object
    """
    obj = _scene_object(scene, "surface_object", "MESH", SURFACE_NAME, bpy.data.meshes)
    _play(obj, first_file, relative, scale_length, SURFACE_PRIM_PATH, SURFACE_CACHE_FILE_NAME)
    _cache_modifier(obj).read_data = {"VERT", "POLY", "ATTRIBUTES"}
    apply_display(scene)
    return obj


def apply_display(scene) -> None:
    """Show the points, the surface or both in the viewport (``Scene.surge.liquid_display``) and in renders
    (``liquid_display_render``), each on its own (points in the viewport, the surface in renders, say), and
    the points' viewport amount and size (:mod:`bridge.display`).

    Without a surface object the points stay visible whatever the choice.
    """
    from . import display

    settings = scene.surge
    liquid, mesh = settings.liquid_object, settings.surface_object
    for choice, hidden in (("liquid_display", "hide_viewport"), ("liquid_display_render", "hide_render")):
        points, surface = DISPLAY.get(getattr(settings, choice), (True, True))
        if mesh is None:
            points = True
        for obj, shown in ((liquid, points), (mesh, surface)):
            if obj is not None and getattr(obj, hidden) == shown:
                setattr(obj, hidden, not shown)
    if liquid is not None and liquid.type == "POINTCLOUD":
        display.apply(liquid, settings.display_percentage / 100.0, 0.0, settings.point_scale)


def reread_surface(scene) -> None:
    """Make Blender read the surface's current frame again (its file appeared after Blender last looked)."""
    reread_object(scene.surge.surface_object)


def release_surface_files(scene) -> None:
    """Point the surface's cache at nothing, so its files can be deleted (Windows keeps open files)."""
    release_object(scene.surge.surface_object)
