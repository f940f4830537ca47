"""Bake to Keyframes: the cached liquid as plain Blender animation that needs nothing but Blender.

Two forms:

* **objects**: one object per particle, each an instance of one mesh (linked data), with a
  location keyframe at every cached frame; for small counts and motion graphics. Refused above
  :data:`MAX_OBJECTS` particles: thousands of animated objects make Blender's depsgraph, outliner
  and file size slow long before the animation itself is a problem.
* **shape keys**: one mesh with a vertex per particle and one absolute shape key per cached frame,
  played by a single linear F-curve on the shape keys' evaluation time (the approach measured in
  the platform notes: 100k points x 100 frames write in about 1.6 s and change frame in about 1 ms).

Particles are matched across frames by their stable ``id``. Where the count changes (liquid that
enters or leaves), a particle holds its nearest known position on the frames it does not exist;
as objects, it is also scaled to zero there so that it is not seen. Each object and the shape-key
mesh carry the particle ids (an object's ``surge_id`` custom property, the mesh's ``id`` point
attribute), so a script can match them to the cache without Surge.
"""

from __future__ import annotations

import bmesh
import bpy
import numpy as np
from bpy_extras import anim_utils

#: Most particles "Bake to Keyframes" turns into objects (see the module docstring).
MAX_OBJECTS = 5000

COLLECTION_NAME = "Surge Keyframes"
SHAPE_OBJECT_NAME = "Surge Liquid Keys"
#: Custom property marking what Bake to Keyframes made (the shape-key object), so that a new run replaces
#: only that.
MADE_BY = "surge_made_by"


class KeyframeError(Exception):
    """A cache that cannot be turned into keyframes in the chosen form (the message says why)."""


def tracks(frames: list[int], arrays: list[dict]) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Positions of every particle at every frame, matched by id.

    Returns
    -------
    ids : ndarray, shape (K,), int64
        Every id seen in any frame, ascending.
    position : ndarray, shape (F, K, 3), float64
        Position at each frame, metres; where a particle is absent, its nearest known position
        (the earlier one when two are equally near).
    present : ndarray, shape (F, K), bool
    """
    ids = np.unique(np.concatenate([a["id"] for a in arrays])).astype(np.int64)
    n_frames = len(frames)
    position = np.zeros((n_frames, len(ids), 3))
    present = np.zeros((n_frames, len(ids)), dtype=bool)
    for f, a in enumerate(arrays):
        columns = np.searchsorted(ids, a["id"])
        position[f, columns] = a["position"]
        present[f, columns] = True
    if not present.all():
        # hold: fill each absent slot from the nearest frame where that particle exists
        index = np.arange(n_frames)[:, None]
        last = np.maximum.accumulate(np.where(present, index, -1), axis=0)
        nxt = np.flip(np.minimum.accumulate(np.flip(np.where(present, index, n_frames), axis=0), axis=0), axis=0)
        use_next = (last < 0) | ((nxt < n_frames) & (nxt - index < index - last))
        source = np.where(use_next, nxt, last)
        position = position[source, np.arange(len(ids))[None, :]]
    return ids, position, present


def _linear_curve(fcurves, data_path: str, index: int, frames: np.ndarray, values: np.ndarray):
    curve = fcurves.new(data_path, index=index)
    points = curve.keyframe_points
    points.add(len(frames))
    points.foreach_set("co", np.column_stack([frames, values]).astype(np.float32).ravel())
    linear = bpy.types.Keyframe.bl_rna.properties["interpolation"].enum_items["LINEAR"].value
    points.foreach_set("interpolation", np.full(len(frames), linear, dtype=np.int32))
    curve.update()
    return curve


def _channelbag(owner, name: str):
    """The F-curve container of a new action assigned to ``owner`` (Blender 5 slotted actions)."""
    action = bpy.data.actions.new(name)
    owner.animation_data_create()
    owner.animation_data.action = action
    slot = owner.animation_data.action_slot
    if slot is None:
        slot = action.slots.new(id_type=owner.id_type, name=owner.name)
        owner.animation_data.action_slot = slot
    return anim_utils.action_ensure_channelbag_for_slot(action, slot)


def _default_particle_mesh(radius: float):
    mesh = bpy.data.meshes.new("Surge Particle")
    bm = bmesh.new()
    try:
        bmesh.ops.create_icosphere(bm, subdivisions=1, radius=radius)
        bm.to_mesh(mesh)
    finally:
        bm.free()
    return mesh


def _made_here(obj) -> bool:
    """True for an object Bake to Keyframes made (a particle object, or the shape-key mesh): only those are
    replaced by a new run; an object of the user's that shares a name or a collection with them stays."""
    if "surge_id" in obj or obj.get(MADE_BY) == "bake_to_keyframes":
        return True
    # the shape-key mesh of a file made before objects were marked: a vertex mesh with ids and shape keys
    data = obj.data if obj.type == "MESH" else None
    return bool(data is not None and obj.name.startswith(SHAPE_OBJECT_NAME) and data.shape_keys is not None
                and "id" in data.attributes and not len(data.polygons))


def _fresh_collection(scene):
    old = bpy.data.collections.get(COLLECTION_NAME)
    if old is not None:
        for obj in [o for o in old.objects if _made_here(o)]:
            bpy.data.objects.remove(obj)
        for action in [a for a in bpy.data.actions if a.users == 0 and a.name.startswith("Surge Particle")]:
            bpy.data.actions.remove(action)
        collection = old
    else:
        collection = bpy.data.collections.new(COLLECTION_NAME)
    if collection.name not in scene.collection.children:
        scene.collection.children.link(collection)
    return collection


def keyframe_objects(scene, frames: list[int], arrays: list[dict], scale_length: float, radius: float,
                     instance=None, limit: int = MAX_OBJECTS):
    """One object per particle with location keyframes, in the collection ``Surge Keyframes``
    (replacing what an earlier run put there); returns the collection.

    Parameters
    ----------
    scale_length : float
        Metres per Blender unit (positions are divided by it).
    radius : float
        Particle radius in metres, for the default icosphere when ``instance`` is None.
    instance : bpy.types.Object, optional
        A mesh object whose mesh every particle shares.
    """
    ids, position, present = tracks(frames, arrays)
    if len(ids) > limit:
        raise KeyframeError(f"Bake to Keyframes as objects is limited to {limit} particles and this cache has "
                            f"{len(ids)}; use Shape Keys, which has no such limit")
    if instance is not None and instance.type != "MESH":
        raise KeyframeError(f"The instance object '{instance.name}' is a {instance.type.lower()}; choose a mesh")
    mesh = instance.data if instance is not None else _default_particle_mesh(radius / scale_length)
    collection = _fresh_collection(scene)
    keys = np.asarray(frames, dtype=np.float64)
    location = position / scale_length
    varying = not present.all()
    for k, pid in enumerate(ids):
        obj = bpy.data.objects.new(f"Surge Particle {pid}", mesh)
        obj["surge_id"] = int(pid)
        collection.objects.link(obj)
        fcurves = _channelbag(obj, obj.name).fcurves
        for axis in range(3):
            _linear_curve(fcurves, "location", axis, keys, location[:, k, axis])
        if varying:
            shown = present[:, k].astype(np.float64)
            curves = [_linear_curve(fcurves, "scale", axis, keys, shown) for axis in range(3)]
            constant = bpy.types.Keyframe.bl_rna.properties["interpolation"].enum_items["CONSTANT"].value
            for curve in curves:  # appear and vanish on the frame, not gradually
                curve.keyframe_points.foreach_set("interpolation", np.full(len(keys), constant, dtype=np.int32))
    return collection


def keyframe_shape_keys(scene, frames: list[int], arrays: list[dict], scale_length: float):
    """One vertex mesh (``Surge Liquid Keys``) with an absolute shape key per cached frame and one
    F-curve on the evaluation time; replaces an earlier one. Returns the object."""
    ids, position, _present = tracks(frames, arrays)
    # the mesh an earlier run made (under its own name, or with a suffix when the user's object took the name)
    old = next((o for o in bpy.data.objects if o.name.startswith(SHAPE_OBJECT_NAME) and "surge_id" not in o
                and _made_here(o)), None)
    if old is not None:
        old_mesh = old.data
        bpy.data.objects.remove(old)
        if old_mesh.users == 0:
            bpy.data.meshes.remove(old_mesh)
    location = (position / scale_length).astype(np.float32)
    mesh = bpy.data.meshes.new(SHAPE_OBJECT_NAME)
    mesh.vertices.add(len(ids))
    mesh.vertices.foreach_set("co", location[0].ravel())
    attribute = mesh.attributes.new("id", "INT", "POINT")
    attribute.data.foreach_set("value", ids.astype(np.int32))
    mesh.update()
    obj = bpy.data.objects.new(SHAPE_OBJECT_NAME, mesh)
    obj[MADE_BY] = "bake_to_keyframes"
    scene.collection.objects.link(obj)

    basis = obj.shape_key_add(name=f"Frame {frames[0]}", from_mix=False)
    key = mesh.shape_keys
    key.use_relative = False  # absolute keys: the evaluation time blends neighbouring frames
    basis.interpolation = "KEY_LINEAR"
    for f in range(1, len(frames)):
        block = obj.shape_key_add(name=f"Frame {frames[f]}", from_mix=False)
        block.data.foreach_set("co", location[f].ravel())
        block.interpolation = "KEY_LINEAR"
    # each absolute key sits at its own evaluation time (Blender spaces them 10 apart); the curve
    # maps each cached frame onto its key
    key_times = np.array([block.frame for block in key.key_blocks], dtype=np.float64)
    fcurves = _channelbag(key, SHAPE_OBJECT_NAME).fcurves
    _linear_curve(fcurves, "eval_time", 0, np.asarray(frames, dtype=np.float64), key_times)
    return obj


def bake_to_keyframes(scene, mode: str) -> str:
    """Keyframe the scene's baked liquid as ``mode`` ('OBJECTS' or 'SHAPE_KEYS'); returns what was made,
    for the report ("Keyframed frames 1-48 as ...").

    Raises
    ------
    EngineError, OSError
        The cache cannot be read or holds no frame.
    KeyframeError
        Too many particles for one object each.
    """
    from ..engine.errors import CacheFormatError
    from ..engine.io.cache import CacheReader
    from . import files
    from .export import unit_scale
    from .paths import ADDON_ROOT

    cache_dir = files.resolve_cache_dir(scene, ADDON_ROOT)
    reader = CacheReader(cache_dir)
    frames = reader.frames
    if not frames:
        raise CacheFormatError(f"The cache '{cache_dir}' holds no baked frame; bake first")
    arrays = [reader.read_frame(f) for f in frames]
    scale = unit_scale(scene)
    if mode == "OBJECTS":
        radius = float(reader.manifest.get("particle_radius", 0.5 * scene.surge.particle_spacing * scale))
        made = keyframe_objects(scene, frames, arrays, scale, radius, instance=scene.surge.keyframe_instance)
        what = f"{len(made.objects)} objects in the collection '{made.name}'"
    else:
        made = keyframe_shape_keys(scene, frames, arrays, scale)
        what = f"the mesh '{made.name}' ({len(made.data.vertices)} vertices)"
    return f"Keyframed frames {frames[0]}-{frames[-1]} as {what}"
