"""Blender scene -> engine scene description and settings.

Everything leaves here in metres and seconds, in world space: object transforms are applied to
the evaluated meshes (modifiers included) and Blender units are multiplied by the scene's unit
scale. Objects that cannot be simulated are refused with a message naming the object; nothing is
silently ignored.

Inflows and outflows move and deform as colliders do (below): rigid motion as one matrix per
frame, deformation with a fixed topology as world-space vertices per frame (see
:mod:`engine.scene.animation`).

Animated settings are read per frame through the depsgraph (keyframes and drivers both count) and
exported as per-frame tracks when they change: an inflow's Use Flow, Normal Speed and Velocity, an
outflow's Use Flow, a collider's Friction and Bounce, the scene's gravity, Viscosity, PBF
Viscosity and PBF Surface Tension. Every other setting is read at the first frame of the bake.
Force fields (Force, Wind, Vortex, Turbulence, Drag; Point, Line and Plane shapes) are exported
with their world matrix and numeric settings per frame (:mod:`engine.sources.forces`); other field types
and shapes are refused.

Colliders
---------
Every object with the role Collider is exported, in one of two forms:

* :class:`BoxContainer`, the exact fast path, for an axis-aligned box that does not move over the
  frame range and holds the liquid: its mode is Container, or Auto with a fluid inside it;
* :class:`MeshCollider` for everything else: the evaluated surface at the first frame of the bake,
  and its motion over the frame range, found by stepping the scene through every frame once for
  all the colliders that could move (an animated, constrained, parented, deformed or simulated
  object). A collider whose evaluated vertices move in its own space (armature, shape keys,
  modifiers), or whose world matrix changes by more than a rotation and a translation (animated
  scale), is *deforming* and exports its world-space vertices per frame; one whose matrix alone
  changes rigidly exports one matrix per frame; the others are static.

The scene is evaluated at the first frame of the bake (the fluids too: that is the initial
state), and the frame the user was on is restored afterwards, even when the export fails. The bake's
frames are the scene's range or the simulation's own (:func:`bake_range`), and its frame rate the
scene's over the time scale (:func:`simulated_fps`: slow motion).
"""

from __future__ import annotations

import dataclasses

import numpy as np

from ..engine import settings as settings_mod
from ..engine.errors import InvalidSceneError
from .driver_check import DriverCheck
from ..engine.scene import (FIELD_FLAGS, FIELD_SHAPES, FIELD_TYPES, FIELD_VALUES, BoxContainer, FluidObject,
                            ForceField, InflowObject, MeshCollider, OutflowObject, RigidBodyObject, SceneDescription,
                            TriangleMesh)

#: Object types whose evaluated geometry can be turned into a triangle mesh.
GEOMETRY_TYPES = {"MESH", "CURVE", "SURFACE", "META", "FONT"}

#: Engine units that are lengths per Blender unit: multiplied by the unit scale on export.
SCALED_UNITS = {"m", "m/s"}

#: Relative tolerance (of the box size) for "this vertex lies on the box", well above float32 noise
#: of transformed coordinates and well below any deliberate modelling offset.
BOX_TOLERANCE = 1e-4

#: A collider deforms when one of its evaluated vertices moves, in the object's own space, by more
#: than this fraction of the object's size: float32 coordinates carry ~6e-8 of relative rounding,
#: so nothing a modifier does by accident trips it, and nothing an artist animates slips under it.
DEFORM_TOLERANCE = 1e-6

#: A relative world matrix M(f) inv(M(start)) counts as rigid when its 3x3 part is orthonormal to
#: this tolerance (products of float32 matrices are good to ~1e-7); an animated scale of 1.001
#: already fails it.
RIGID_TOLERANCE = 1e-5


def float32_to_float(value: float) -> float:
    """The shortest decimal that reads back as the same float32 (Blender stores floats in 32 bits).

    0.025 typed in the UI is stored as 0.0250000004; the engine should see 0.025.
    """
    return float(np.format_float_scientific(np.float32(value), unique=True))


def unit_scale(scene) -> float:
    """Metres per Blender unit (the scene's unit scale, itself a float32: 0.01 stays 0.01)."""
    return float32_to_float(scene.unit_settings.scale_length)


#: Earth's gravity, m/s^2 (standard gravity, 9.80665, as Blender's default rounds it).
EARTH_GRAVITY = 9.81


def gravity(scene) -> np.ndarray:
    """The gravity a bake of ``scene`` uses at the current frame, m/s^2 (3,).

    Blender's Scene > Gravity is a length per second squared in scene units, and Blender itself shows it
    multiplied by the unit scale (at 0.01 its default -9.81 reads "-0.0981 m/s²", and its rigid bodies
    fall that slowly): Surge uses the value as Blender shows it, like every other length and speed. An
    artist who models in centimetres and means Earth's gravity sets -9.81 m/s² there (or presses Set
    Earth Gravity, ``surge.earth_gravity``); the bake warns when the default was left at another scale
    (:func:`gravity_warnings`).
    """
    if not scene.use_gravity:
        return np.zeros(3)
    return np.array([float32_to_float(g) for g in scene.gravity]) * unit_scale(scene)


def earth_gravity(scene) -> tuple:
    """Scene > Gravity (scene units) that is Earth's gravity, straight down, at the scene's unit scale."""
    return (0.0, 0.0, -EARTH_GRAVITY / unit_scale(scene))


def gravity_warnings(scene) -> list[str]:
    """A sentence when Blender's default gravity (-9.81 scene units/s^2) was left in a scene whose unit
    scale is not 1: the liquid then falls at 9.81 x scale m/s^2, which nobody modelling in centimetres
    means; empty otherwise (any gravity set on purpose is taken as it is)."""
    scale = unit_scale(scene)
    stored = np.array([float32_to_float(g) for g in scene.gravity])
    if scale == 1.0 or not scene.use_gravity or not np.allclose(stored, (0.0, 0.0, -EARTH_GRAVITY), rtol=1e-6):
        return []
    g = float(np.linalg.norm(gravity(scene)))
    return [f"Scene '{scene.name}': gravity is {g:.4g} m/s^2, Blender's default -9.81 in scene units at a unit "
            f"scale of {scale:g} (Blender shows it as {-g:.4g} m/s^2 too); for Earth's gravity press Set Earth "
            f"Gravity in the Simulation panel, or set Scene > Gravity to -9.81 m/s^2"]


def _engine_values(group, parameters: list, scale: float) -> dict:
    """Values of a PropertyGroup generated from engine ``parameters``, lengths and speeds in SI."""
    values = {}
    for p in parameters:
        value = getattr(group, p.name)
        if p.kind is float and p.size:
            factor = scale if p.unit in SCALED_UNITS else 1.0
            value = tuple(float32_to_float(v) * factor for v in value)
        elif p.kind is float:
            value = float32_to_float(value)
            if p.unit in SCALED_UNITS:
                value *= scale
        elif p.kind is int:
            value = int(value)
        elif p.kind is bool:
            value = bool(value)
        values[p.name] = value
    return values


def settings_from_scene(scene) -> settings_mod.SimulationSettings:
    """Engine settings from ``scene.surge``; lengths and speeds converted to SI with the unit scale."""
    return settings_mod.SimulationSettings(**_engine_values(scene.surge, settings_mod.parameters(), unit_scale(scene)))


def fluid_settings(obj, scale: float) -> settings_mod.FluidSettings:
    """Engine settings of a FLUID object from ``obj.surge``."""
    return settings_mod.FluidSettings(**_engine_values(obj.surge, settings_mod.fluid_parameters(), scale))


def inflow_settings(obj, scale: float) -> settings_mod.InflowSettings:
    """Engine settings of an INFLOW object from ``obj.surge``; speeds converted to m/s with ``scale``."""
    return settings_mod.InflowSettings(**_engine_values(obj.surge, settings_mod.inflow_parameters(), scale))


def particle_channels(obj) -> dict:
    """Named particle channels of a Fluid or Inflow object (``obj.surge.channels``): name -> value.
    Names are checked by the scene's validation (a bad one is refused naming the object)."""
    return {c.name: float32_to_float(c.value) for c in obj.surge.channels}


def rigid_body_settings(obj, scale: float) -> settings_mod.RigidBodySettings:
    """Engine settings of a RIGID_BODY object from ``obj.surge``; its initial velocity converted to m/s."""
    return settings_mod.RigidBodySettings(**_engine_values(obj.surge, settings_mod.rigid_body_parameters(), scale))


def collider_settings(obj, scale: float) -> settings_mod.ColliderSettings:
    """Engine collider settings from ``obj.surge``; the surface offset converted to metres with ``scale``."""
    return settings_mod.ColliderSettings(**_engine_values(obj.surge, settings_mod.collider_parameters(), scale))


class _Geometry:
    """One evaluation of an object: local vertices, faces and world matrix (Blender units)."""

    __slots__ = ("co", "triangles", "corners", "matrix")

    def __init__(self, obj, depsgraph, with_triangles: bool = True):
        evaluated = obj.evaluated_get(depsgraph)
        mesh = evaluated.to_mesh()
        try:
            co = np.empty(len(mesh.vertices) * 3, dtype=np.float64)
            mesh.vertices.foreach_get("co", co)
            # the face corners (which vertex each polygon corner uses) are the topology; the
            # triangulation of a quad may flip with its shape, so it is taken once, at the first frame
            corners = np.empty(len(mesh.loops), dtype=np.int32)
            mesh.loops.foreach_get("vertex_index", corners)
            tris = None
            if with_triangles:
                mesh.calc_loop_triangles()
                tris = np.empty(len(mesh.loop_triangles) * 3, dtype=np.int32)
                mesh.loop_triangles.foreach_get("vertices", tris)
                tris = tris.reshape(-1, 3)
        finally:
            evaluated.to_mesh_clear()
        self.co = co.reshape(-1, 3)
        self.corners = corners
        self.triangles = tris
        self.matrix = np.array(evaluated.matrix_world, dtype=np.float64)

    def world(self) -> np.ndarray:
        """World-space vertices, Blender units."""
        return self.co @ self.matrix[:3, :3].T + self.matrix[:3, 3]


def _world_mesh(obj, depsgraph, scale: float) -> TriangleMesh:
    """Triangulated evaluated geometry of ``obj`` in world space, metres."""
    geometry = _Geometry(obj, depsgraph)
    return TriangleMesh(geometry.world() * scale, geometry.triangles)


def _may_move(obj) -> bool:
    """False when nothing can move or deform ``obj`` over time, so stepping frames can skip it.

    Conservative: animation data or drivers, a constraint, a modifier, shape keys, a rigid body or
    a parent make it a candidate; stepping through the frames then decides.
    """
    data = obj.data
    return bool(obj.parent is not None or obj.animation_data is not None or len(obj.constraints)
                or len(obj.modifiers) or obj.rigid_body is not None
                or getattr(data, "animation_data", None) is not None
                or getattr(data, "shape_keys", None) is not None)


class _Track:
    """A collider followed over the frame range: its first-frame geometry and what changes after it."""

    def __init__(self, first: _Geometry):
        self.first = first
        lo, hi = (first.co.min(axis=0), first.co.max(axis=0)) if len(first.co) else (np.zeros(3), np.zeros(3))
        self.local_tolerance = DEFORM_TOLERANCE * max(float(np.max(hi - lo)), 1e-12)
        self.matrices = [first.matrix]
        self.local = [None]  # per frame: local vertices when they differ from the first frame's
        self.changed_at: int | None = None  # the first frame whose topology differs

    def add(self, frame: int, geometry: _Geometry) -> None:
        self.matrices.append(geometry.matrix)
        if self.changed_at is not None:
            return
        if len(geometry.co) != len(self.first.co) or not np.array_equal(geometry.corners, self.first.corners):
            self.changed_at = frame
            return
        moved = np.max(np.abs(geometry.co - self.first.co)) > self.local_tolerance if len(geometry.co) else False
        self.local.append(geometry.co if moved else None)

    @property
    def deforms_locally(self) -> bool:
        return any(co is not None for co in self.local)

    def motion(self, scale: float) -> tuple[np.ndarray | None, np.ndarray | None]:
        """(transforms, frame_vertices) for :class:`MeshCollider`, metres; (None, None) when static."""
        if len(self.matrices) == 1:
            return None, None
        if not self.deforms_locally:
            transforms = self._rigid(scale)
            if transforms is not None:
                return (transforms if _moves(transforms, self.first.world() * scale) else None), None
        frames = []
        for matrix, co in zip(self.matrices, self.local):
            co = self.first.co if co is None else co
            frames.append((co @ matrix[:3, :3].T + matrix[:3, 3]) * scale)
        frame_vertices = np.stack(frames)
        frame_vertices[0] = self.first.world() * scale  # bit-identical to the rest mesh
        return None, frame_vertices

    def _rigid(self, scale: float) -> np.ndarray | None:
        """Per-frame rest-to-world matrices (translations in metres), or None if one is not rigid."""
        rest = self.first.matrix
        if abs(np.linalg.det(rest[:3, :3])) < 1e-30:
            return None  # a flattened object: no rest pose to map from
        inverse = np.linalg.inv(rest)
        out = np.empty((len(self.matrices), 4, 4))
        for i, matrix in enumerate(self.matrices):
            relative = matrix @ inverse
            a = relative[:3, :3]
            if (np.max(np.abs(a.T @ a - np.eye(3))) > RIGID_TOLERANCE or np.linalg.det(a) < 0
                    or np.max(np.abs(relative[3] - (0.0, 0.0, 0.0, 1.0))) > RIGID_TOLERANCE):
                return None
            out[i] = relative
        out[:, :3, 3] *= scale
        out[0] = np.eye(4)
        return out


def _moves(transforms: np.ndarray, rest: np.ndarray) -> bool:
    """True if any of the rigid ``transforms`` moves a vertex of ``rest`` (metres) measurably."""
    lo, hi = rest.min(axis=0), rest.max(axis=0)
    tolerance = DEFORM_TOLERANCE * max(float(np.max(hi - lo)), 1e-12)
    corners = np.array([[hi[0] if i & 1 else lo[0], hi[1] if i & 2 else lo[1], hi[2] if i & 4 else lo[2]]
                        for i in range(8)])
    # a rigid map moves no point of a box more than it moves one of the box's corners
    moved = corners @ transforms[:, :3, :3].transpose(0, 2, 1) + transforms[:, None, :3, 3] - corners
    return bool(np.max(np.abs(moved)) > tolerance)


def is_axis_aligned_box(mesh: TriangleMesh) -> bool:
    """True if ``mesh`` is an axis-aligned box (the exact fast path for containers).

    A box here: all 8 corners of the bounding box are vertices, every vertex lies on the box
    surface, and every triangle lies in one of its six faces. A rotated box fails the corner test,
    a cylinder or a sphere fails the surface test. An open-topped tank passes (the engine closes it).
    """
    v = mesh.vertices
    if len(mesh.triangles) == 0:
        return False
    lo, hi = v.min(axis=0), v.max(axis=0)
    tol = BOX_TOLERANCE * max(float(np.max(hi - lo)), 1e-12)
    if np.any(hi - lo <= tol):
        return False
    on_lo, on_hi = np.abs(v - lo) <= tol, np.abs(v - hi) <= tol
    corners = np.array([[hi[0] if i & 1 else lo[0], hi[1] if i & 2 else lo[1], hi[2] if i & 4 else lo[2]]
                        for i in range(8)])
    has_corner = [np.any(np.all(np.abs(v - c) <= tol, axis=1)) for c in corners]
    on_surface = np.any(on_lo | on_hi, axis=1)
    t = mesh.triangles
    in_face_plane = np.any(np.all(on_lo[t], axis=1) | np.all(on_hi[t], axis=1), axis=1)
    return bool(all(has_corner) and np.all(on_surface) and np.all(in_face_plane))


def _holds_a_fluid(box: TriangleMesh, fluids: list) -> bool:
    """True if every vertex of some fluid lies within the bounding box of ``box``."""
    lower, upper = box.vertices.min(axis=0), box.vertices.max(axis=0)
    # a fluid modelled flush against the walls must count as inside despite rounding
    tol = BOX_TOLERANCE * max(float(np.max(upper - lower)), 1e-12)
    return any(len(f.mesh.vertices) and np.all(f.mesh.vertices >= lower - tol)
               and np.all(f.mesh.vertices <= upper + tol) for f in fluids)


def _varying(values: list) -> np.ndarray | None:
    """The per-frame values as an array, or None when every frame has the first frame's value."""
    arr = np.asarray(values, dtype=np.float64)
    return None if np.all(arr == arr[0]) else arr


class _Sampler:
    """Per-frame values of an object's animatable settings at every frame the export steps through
    (``frame_set`` evaluates keyframes and drivers through the depsgraph and writes the results into
    the original data, which is read here)."""

    def __init__(self, read):
        self.read = read
        self.frames: list[dict] = []

    def add(self, ident) -> None:
        self.frames.append(self.read(ident))

    def first(self) -> dict:
        return self.frames[0]

    def tracks(self, n_frames: int, keep: set = frozenset()) -> dict:
        """Tracks of the values that change (and of the names in ``keep`` whatever they do)."""
        if len(self.frames) != n_frames:
            return {k: np.full((n_frames,) + np.shape(v), v, dtype=np.float64)
                    for k, v in self.frames[0].items() if k in keep}
        out = {}
        for name in self.frames[0]:
            values = [f[name] for f in self.frames]
            arr = _varying(values)
            if arr is None and name in keep:
                arr = np.asarray(values, dtype=np.float64)
            if arr is not None:
                out[name] = arr
        return out


def _inflow_values(obj, scale: float) -> dict:
    st = obj.surge
    return {"use_flow": float(st.use_flow), "normal_speed": float32_to_float(st.normal_speed) * scale,
            "velocity": [float32_to_float(v) * scale for v in st.velocity]}


def _scene_values(scene, scale: float) -> dict:
    st = scene.surge
    return {"gravity": list(gravity(scene)), "dynamic_viscosity": float32_to_float(st.dynamic_viscosity),
            "pbf_velocity_smoothing": float32_to_float(st.pbf_velocity_smoothing),
            "surface_tension": float32_to_float(st.surface_tension),
            "pbf_surface_tension": float32_to_float(st.pbf_surface_tension)}


def _field_values(obj, scale: float) -> dict:
    out = {name: float32_to_float(getattr(obj.field, name)) for name in FIELD_VALUES}
    m = np.array(obj.matrix_world, dtype=np.float64)
    m[:3, 3] *= scale
    out["matrix"] = m
    return out


def force_field_objects(scene) -> tuple[list, list[str]]:
    """Objects of ``scene`` whose force field acts on the liquid, and the problems of those that cannot.

    A field acts when its type is not None, its object is enabled in viewports and it affects
    location; Surge simulates Force, Wind, Vortex, Turbulence and Drag fields of the Point, Line and
    Plane shapes and refuses the others rather than ignore them.
    """
    fields, problems = [], []
    for obj in sorted(scene.objects, key=lambda o: o.name):
        field = getattr(obj, "field", None)
        if field is None or field.type == "NONE" or obj.hide_viewport or not field.apply_to_location:
            continue
        if field.type not in FIELD_TYPES:
            problems.append(f"Object '{obj.name}' has a {field.type.replace('_', ' ').title()} force field, which "
                            f"Surge does not simulate (it simulates {', '.join(t.title() for t in FIELD_TYPES)}); "
                            f"set its type to None or disable the object in viewports")
        elif field.shape not in FIELD_SHAPES:
            problems.append(f"Force field '{obj.name}' has the shape {field.shape.title()}; Surge simulates "
                            f"{', '.join(s.title() for s in FIELD_SHAPES)} shapes")
        else:
            fields.append(obj)
    return fields, problems


def _object_motion(matrices: list, scale: float, fps: float) -> tuple[np.ndarray, np.ndarray]:
    """Velocity at the world origin (3,), m/s, and velocity gradient (3, 3), 1/s, of the rigid motion
    between the first two frames' world matrices (Blender units)."""
    if len(matrices) < 2:
        return np.zeros(3), np.zeros((3, 3))
    m0, m1 = matrices[0], matrices[1]
    if abs(np.linalg.det(m0[:3, :3])) < 1e-30:
        return np.zeros(3), np.zeros((3, 3))
    d = (m1 @ np.linalg.inv(m0) - np.eye(4)) * fps
    return d[:3, 3] * scale, d[:3, :3]


def bake_range(scene) -> tuple[int, int]:
    """The frames a bake of ``scene`` simulates: the scene's frame range, or the simulation's own
    (``Scene.surge.use_frame_range``: ``frame_start`` to ``frame_end``)."""
    st = scene.surge
    if st.use_frame_range:
        return int(st.frame_start), int(st.frame_end)
    return int(scene.frame_start), int(scene.frame_end)


def simulated_fps(scene) -> float:
    """Frames per simulated second: the scene's frame rate over the time scale (``Scene.surge.time_scale``;
    0.5 simulates half a frame's time per frame: slow motion, everything, colliders and inflows included)."""
    return scene.render.fps / scene.render.fps_base / float32_to_float(scene.surge.time_scale)


def frame_range_note(scene) -> str:
    """A sentence when the simulation's own frame range reaches past the scene's (those frames are baked but
    the timeline never plays them), else ''."""
    start, end = bake_range(scene)
    if start < scene.frame_start or end > scene.frame_end:
        return (f"Scene '{scene.name}': the simulation's frames {start}-{end} reach past the scene's frame range "
                f"{scene.frame_start}-{scene.frame_end}; the frames outside it are baked but never played")
    return ""


def export_scene(scene, depsgraph) -> tuple[SceneDescription, settings_mod.SimulationSettings]:
    """Scene description and settings of ``scene``, checked for everything the bridge knows about.

    Every setting is read at the first frame of the bake. The scene is stepped through the frame
    range when something may move or be animated (colliders, inflows, outflows, force fields, a
    Fluid object whose motion it starts with, the scene's own animated settings), and put back on
    the frame it was on.

    Raises
    ------
    InvalidSceneError
        Listing every object with a role but no geometry, every collider, inflow or outflow without
        faces or whose topology changes over the frame range, every force field Surge cannot
        simulate, and every structural problem :meth:`SceneDescription.validate` finds (no fluid, a
        fluid with no faces, an empty frame range).
    InvalidSettingsError
        If a setting is out of range (from :func:`engine.settings.validate`).
    """
    from . import migrate

    migrate.migrate_scene(scene)  # a scene appended from a file of an earlier version
    scale = unit_scale(scene)
    fps = simulated_fps(scene)
    frame_start, frame_end = bake_range(scene)
    if frame_end < frame_start:
        raise InvalidSceneError([f"Scene '{scene.name}': the simulation's End frame ({frame_end}) lies before its "
                                 f"Start frame ({frame_start}); set End to {frame_start} or later"])
    problems: list[str] = []
    fluid_objects, collider_objects, inflow_objects, outflow_objects, body_objects = [], [], [], [], []
    by_role = {"FLUID": fluid_objects, "COLLIDER": collider_objects, "INFLOW": inflow_objects,
               "OUTFLOW": outflow_objects, "RIGID_BODY": body_objects}
    for obj in sorted(scene.objects, key=lambda o: o.name):
        role = obj.surge.role
        if role == "NONE":
            continue
        if obj.type not in GEOMETRY_TYPES:
            problems.append(f"Object '{obj.name}' has the role {role.replace('_', ' ').title()} but is a "
                            f"{obj.type.lower()} object "
                            f"without geometry; use a mesh")
            continue
        by_role[role].append(obj)
    field_objects, field_problems = force_field_objects(scene)
    problems += field_problems

    # evaluate at the first frame of the bake; step through the others only if something may move or
    # is animated (objects with animation data, constraints, parents, modifiers; the scene's own keys)
    moving = {obj.name for obj in collider_objects + inflow_objects + outflow_objects + field_objects + body_objects
              if _may_move(obj)}
    moving |= {obj.name for obj in fluid_objects if obj.surge.use_object_motion and _may_move(obj)}
    scene_animated = scene.animation_data is not None
    frame, subframe = scene.frame_current, scene.frame_subframe
    step = bool(moving) or scene_animated or (frame, subframe) != (frame_start, 0.0)
    n_frames = frame_end - frame_start + 1
    samplers = {}

    def sample_all() -> None:
        # the original data: frame_set writes the animated values (keys and drivers, evaluated by the
        # depsgraph) back into it, and it never lags behind an edit the depsgraph has not seen yet
        samplers["scene"].add(scene)
        for obj in inflow_objects + outflow_objects + collider_objects + field_objects + fluid_objects + body_objects:
            if obj.name in moving or len(samplers[obj.name].frames) == 0:
                samplers[obj.name].add(obj)

    read = [(f"Scene '{scene.name}'", scene)] + [
        (f"{obj.surge.role.title()} '{obj.name}'", obj)
        for obj in fluid_objects + collider_objects + inflow_objects + outflow_objects] + [
        (f"Force field '{obj.name}'", obj) for obj in field_objects]
    drivers = DriverCheck(read)
    try:
        if step:
            # even when already there: animated values the user changed without keying them would
            # otherwise stand in for the keyed ones at the first frame only
            drivers.frame_set(scene, frame_start)
        samplers["scene"] = _Sampler(lambda ev: _scene_values(ev, scale))
        for obj in inflow_objects:
            samplers[obj.name] = _Sampler(lambda ev: _inflow_values(ev, scale))
        for obj in outflow_objects:
            samplers[obj.name] = _Sampler(lambda ev: {"use_flow": float(ev.surge.use_flow)})
        for obj in collider_objects:
            samplers[obj.name] = _Sampler(lambda ev: {"friction": float32_to_float(ev.surge.friction),
                                                      "bounce": float32_to_float(ev.surge.bounce)})
        for obj in field_objects:
            samplers[obj.name] = _Sampler(lambda ev: _field_values(ev, scale))
        for obj in body_objects:
            samplers[obj.name] = _Sampler(lambda ev: {"use_dynamic": float(ev.surge.use_dynamic),
                                                      "friction": float32_to_float(ev.surge.friction),
                                                      "bounce": float32_to_float(ev.surge.bounce)})
        for obj in fluid_objects:
            samplers[obj.name] = _Sampler(lambda ev: {"matrix": np.array(ev.matrix_world, dtype=np.float64)})
        sample_all()
        # every setting as it is at the first frame (not at the frame the user is on)
        settings = settings_from_scene(scene)
        object_settings = {}
        for obj in inflow_objects:
            object_settings[obj.name] = inflow_settings(obj, scale)
        for obj in collider_objects:
            object_settings[obj.name] = collider_settings(obj, scale)
        for obj in body_objects:
            object_settings[obj.name] = rigid_body_settings(obj, scale)
        fluids = []
        for obj in fluid_objects:
            fsettings = fluid_settings(obj, scale)
            fluids.append((obj, _world_mesh(obj, depsgraph, scale), fsettings,
                           np.array(fsettings.initial_velocity, dtype=np.float64)))
        tracks = []
        for obj in inflow_objects + outflow_objects + collider_objects + body_objects:
            first = _Geometry(obj, depsgraph)
            if len(first.triangles) == 0:
                problems.append(f"{obj.surge.role.replace('_', ' ').title()} '{obj.name}' has no faces")
                continue
            tracks.append((obj, _Track(first)))
        followed = [(obj, track) for obj, track in tracks if obj.name in moving]
        if step and (moving or scene_animated):
            # one pass over the frames for everything that may move or is animated
            for f in range(frame_start + 1, frame_end + 1):
                drivers.frame_set(scene, f)
                for obj, track in followed:
                    track.add(f, _Geometry(obj, depsgraph, with_triangles=False))
                sample_all()
    finally:
        if step:
            scene.frame_set(frame, subframe=subframe)

    problems += drivers.problems.values()
    fluid_list = []
    for obj, mesh, fsettings, velocity in fluids:
        gradient = np.zeros((3, 3))
        if obj.surge.use_object_motion:
            base, gradient = _object_motion([f["matrix"] for f in samplers[obj.name].frames], scale, fps)
            velocity = velocity + base
        fluid_list.append(FluidObject(obj.name, mesh, velocity=velocity, settings=fsettings,
                                      channels=particle_channels(obj), velocity_gradient=gradient))
    fluids = fluid_list

    containers, colliders, inflows, outflows, bodies = [], [], [], [], []
    for obj, track in tracks:
        role = obj.surge.role
        label = role.replace("_", " ").title()
        if track.changed_at is not None:
            problems.append(f"{label} '{obj.name}' changes its vertices or faces between frames {frame_start} "
                            f"and {track.changed_at}; it needs the same faces in every frame. Apply or "
                            f"disable the modifier that adds or removes geometry over time")
            continue
        mesh = TriangleMesh(track.first.world() * scale, track.first.triangles)
        transforms, frame_vertices = track.motion(scale)
        if role == "INFLOW":
            inflows.append(InflowObject(obj.name, mesh, object_settings[obj.name], particle_channels(obj),
                                        transforms=transforms, frame_vertices=frame_vertices,
                                        tracks=samplers[obj.name].tracks(n_frames)))
            continue
        if role == "RIGID_BODY":
            sampler = samplers[obj.name]
            keep = {"use_dynamic"} if sampler.first()["use_dynamic"] < 0.5 else set()
            bodies.append(RigidBodyObject(obj.name, mesh, object_settings[obj.name], transforms=transforms,
                                          frame_vertices=frame_vertices, tracks=sampler.tracks(n_frames, keep)))
            continue
        if role == "OUTFLOW":
            sampler = samplers[obj.name]
            # an outflow switched off at the first frame and never on keeps a track of zeros
            keep = {"use_flow"} if sampler.first()["use_flow"] < 0.5 else set()
            outflows.append(OutflowObject(obj.name, mesh, transforms=transforms, frame_vertices=frame_vertices,
                                          tracks=sampler.tracks(n_frames, keep)))
            continue
        settings_c = object_settings[obj.name]
        collider_tracks = samplers[obj.name].tracks(n_frames)
        static = transforms is None and frame_vertices is None
        mode = settings_c.collider_mode
        if (static and mode in {"CONTAINER", "AUTO"} and is_axis_aligned_box(mesh)
                and (mode == "CONTAINER" or _holds_a_fluid(mesh, fluids + inflows))):
            containers.append(BoxContainer(obj.name, mesh.vertices.min(axis=0), mesh.vertices.max(axis=0),
                                           dataclasses.replace(settings_c, collider_mode="CONTAINER"),
                                           tracks=collider_tracks))
        else:
            colliders.append(MeshCollider(obj.name, mesh, settings_c, transforms=transforms,
                                          frame_vertices=frame_vertices, tracks=collider_tracks))

    force_fields = []
    for obj in field_objects:
        frames = samplers[obj.name].frames
        field = obj.field
        flags = {name: getattr(field, name) for name in FIELD_FLAGS}
        values = {name: np.array([f[name] for f in frames]) for name in FIELD_VALUES}
        values = {k: (v if _varying(list(v)) is not None else v[:1]) for k, v in values.items()}
        matrices = np.array([f["matrix"] for f in frames])
        if np.all(matrices == matrices[0]):
            matrices = matrices[:1]
        force_fields.append(ForceField(obj.name, field.type, field.shape, matrices=matrices, values=values,
                                       flags=flags, unit=scale))

    scene_values = samplers["scene"]
    scene_tracks = scene_values.tracks(n_frames)
    gravity = np.array(scene_values.first()["gravity"], dtype=np.float64)
    description = SceneDescription(
        fluids=fluids, containers=containers, colliders=colliders, inflows=inflows, outflows=outflows,
        bodies=bodies, gravity=gravity, frame_start=frame_start, frame_end=frame_end, fps=fps,
        tracks=scene_tracks, force_fields=force_fields)
    try:
        description.validate()
    except InvalidSceneError as exc:
        problems += exc.problems
    if problems:
        raise InvalidSceneError(problems)
    return description, settings
