"""The liquid object: a point cloud that plays the baked USD files through Blender's own cache reader.

The object is plain Blender data (a point cloud, a Mesh Sequence Cache modifier, a Cache File with
``is_sequence`` on, a material), so a saved .blend plays and renders without Surge installed and
no Python runs on frame change. Each bake points the same object at its new files.
"""

from __future__ import annotations

import os

import bpy
from mathutils import Matrix

from .usd import PRIM_PATH, SURFACE_PRIM_PATH, SURFACE_SPRAY_PRIM_PATH

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


#: The geometry-nodes group and modifier after the cache modifier that drop an empty point cloud (below).
NEVER_EMPTY_NAME = "Surge Drop Empty Points"


def _never_empty_group():
    """Nodes that pass the geometry on unchanged, except a point cloud component with no points, which is
    left out: Cycles in Blender 5.0 aborts a render on an empty point cloud ("Malloc returns null ...
    std::bad_alloc"), and the liquid is one on every frame outside the bake, on a frame the liquid has
    all drained away, and when its cache folder is gone (the cache modifier then passes the object's own
    empty point cloud on). Measured: an empty point cloud of the object's data aborts; no point cloud
    component at all renders."""
    group = bpy.data.node_groups.get(NEVER_EMPTY_NAME)
    if group is not None:
        return group
    group = bpy.data.node_groups.new(NEVER_EMPTY_NAME, "GeometryNodeTree")
    group.interface.new_socket("Geometry", in_out="INPUT", socket_type="NodeSocketGeometry")
    group.interface.new_socket("Geometry", in_out="OUTPUT", socket_type="NodeSocketGeometry")
    nodes, links = group.nodes, group.links
    inp, out = nodes.new("NodeGroupInput"), nodes.new("NodeGroupOutput")
    parts = nodes.new("GeometryNodeSeparateComponents")
    size = nodes.new("GeometryNodeAttributeDomainSize")
    size.component = "POINTCLOUD"
    has_points = nodes.new("FunctionNodeCompare")
    has_points.data_type, has_points.operation = "INT", "GREATER_THAN"
    keep = nodes.new("GeometryNodeSwitch")
    keep.input_type = "GEOMETRY"
    join = nodes.new("GeometryNodeJoinGeometry")
    links.new(inp.outputs[0], parts.inputs[0])
    links.new(inp.outputs[0], size.inputs[0])
    links.new(size.outputs["Point Count"], has_points.inputs[2])  # the INT 'A' input: count > 0
    links.new(has_points.outputs[0], keep.inputs["Switch"])
    links.new(parts.outputs["Point Cloud"], keep.inputs["True"])
    for name in ("Mesh", "Curve", "Grease Pencil", "Volume", "Instances"):
        if name in parts.outputs:
            links.new(parts.outputs[name], join.inputs[0])
    links.new(keep.outputs[0], join.inputs[0])
    links.new(join.outputs[0], out.inputs[0])
    for i, node in enumerate((inp, parts, size, has_points, keep, join, out)):
        node.location = (200.0 * i, 0.0)
    return group


def _never_empty(obj) -> None:
    """Put the modifier of :func:`_never_empty_group` right after the cache modifier (once)."""
    mod = obj.modifiers.get(NEVER_EMPTY_NAME)
    if mod is None:
        mod = obj.modifiers.new(NEVER_EMPTY_NAME, "NODES")
        mod.node_group = _never_empty_group()
        mod.show_expanded = False
    index = next(i for i, m in enumerate(obj.modifiers) if m == mod)
    if index != 1:
        obj.modifiers.move(index, 1)


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
    _never_empty(obj)
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
    return object_file(scene.surge.liquid_object)


def object_file(obj) -> str | None:
    """Absolute path of the file ``obj``'s Surge cache modifier points at, or None (no object, no file)."""
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
#: The particles the surface hands to the spray (Small Drops: Spray), a point cloud reading the same files
SURFACE_SPRAY_NAME = "Surge Surface Spray"
SURFACE_SPRAY_CACHE_FILE_NAME = "Surge Surface Spray Cache"

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
    if scene.surge.surface_isolated == "SPRAY":
        # the small clusters the surface left out: spheres of their volume, in the water material
        spray = _scene_object(scene, "surface_spray_object", "POINTCLOUD", SURFACE_SPRAY_NAME, bpy.data.pointclouds)
        _play(spray, first_file, relative, scale_length, SURFACE_SPRAY_PRIM_PATH, SURFACE_SPRAY_CACHE_FILE_NAME)
        _never_empty(spray)  # a frame with no small drops is an empty point cloud, which Cycles cannot render
    elif scene.surge.surface_spray_object is not None:
        release_object(scene.surge.surface_spray_object)
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
    spray = settings.surface_spray_object
    for choice, hidden in (("liquid_display", "hide_viewport"), ("liquid_display_render", "hide_render")):
        points, surface = DISPLAY.get(getattr(settings, choice), (True, True))
        if mesh is None:
            points = True
        # the surface's spray goes with the surface, while the surface hands small drops to it
        spray_shown = surface and mesh is not None and settings.surface_isolated == "SPRAY"
        for obj, shown in ((liquid, points), (mesh, surface), (spray, spray_shown)):
            if obj is not None and getattr(obj, hidden) == shown:
                setattr(obj, hidden, not shown)
    if liquid is not None and liquid.type == "POINTCLOUD":
        display.apply(liquid, settings.display_percentage / 100.0, 0.0, settings.point_scale)


def reread_surface(scene) -> None:
    """Make Blender read the surface's current frame again (its file appeared after Blender last looked)."""
    reread_object(scene.surge.surface_object)
    reread_object(scene.surge.surface_spray_object)


def release_surface_files(scene) -> None:
    """Point the surface's cache at nothing, so its files can be deleted (Windows keeps open files)."""
    release_object(scene.surge.surface_object)
    release_object(scene.surge.surface_spray_object)
