"""Blender scene -> engine scene description and settings.

Everything leaves here in metres and seconds, in world space: object transforms are applied to
the evaluated meshes (modifiers included) and Blender units are multiplied by the scene's unit
scale. Unsupported roles and shapes are refused with a message naming the object; nothing is
silently ignored.
"""

from __future__ import annotations

import numpy as np

from ..engine import settings as settings_mod
from ..engine.errors import InvalidSceneError
from ..engine.scene import BoxContainer, FluidObject, SceneDescription, TriangleMesh

#: Object types whose evaluated geometry can be turned into a triangle mesh.
GEOMETRY_TYPES = {"MESH", "CURVE", "SURFACE", "META", "FONT"}

#: Engine units that are lengths per Blender unit: multiplied by the unit scale on export.
SCALED_UNITS = {"m", "m/s"}

#: Relative tolerance (of the box size) for "this vertex lies on the box", well above float32 noise
#: of transformed coordinates and well below any deliberate modelling offset.
BOX_TOLERANCE = 1e-4


def float32_to_float(value: float) -> float:
    """The shortest decimal that reads back as the same float32 (Blender stores floats in 32 bits).

    0.025 typed in the UI is stored as 0.0250000004; the engine should see 0.025.
    """
    return float(np.format_float_scientific(np.float32(value), unique=True))


def unit_scale(scene) -> float:
    """Metres per Blender unit (the scene's unit scale, itself a float32: 0.01 stays 0.01)."""
    return float32_to_float(scene.unit_settings.scale_length)


def settings_from_scene(scene) -> settings_mod.SimulationSettings:
    """Engine settings from ``scene.surge``; lengths and speeds converted to SI with the unit scale."""
    scale = unit_scale(scene)
    values = {}
    for p in settings_mod.parameters():
        value = getattr(scene.surge, p.name)
        if p.kind is float:
            value = float32_to_float(value)
            if p.unit in SCALED_UNITS:
                value *= scale
        elif p.kind is int:
            value = int(value)
        elif p.kind is bool:
            value = bool(value)
        values[p.name] = value
    return settings_mod.SimulationSettings(**values)


def _world_mesh(obj, depsgraph, scale: float) -> TriangleMesh:
    """Triangulated evaluated geometry of ``obj`` in world space, metres."""
    evaluated = obj.evaluated_get(depsgraph)
    mesh = evaluated.to_mesh()
    try:
        mesh.calc_loop_triangles()
        co = np.empty(len(mesh.vertices) * 3, dtype=np.float64)
        mesh.vertices.foreach_get("co", co)
        tris = np.empty(len(mesh.loop_triangles) * 3, dtype=np.int32)
        mesh.loop_triangles.foreach_get("vertices", tris)
    finally:
        evaluated.to_mesh_clear()
    co = co.reshape(-1, 3)
    matrix = np.array(evaluated.matrix_world, dtype=np.float64)
    world = co @ matrix[:3, :3].T + matrix[:3, 3]
    return TriangleMesh(world * scale, tris.reshape(-1, 3))


def _box_problem(name: str, mesh: TriangleMesh) -> str | None:
    """Why ``mesh`` is not an axis-aligned box, or None when it is one.

    A box here: all 8 corners of the bounding box are vertices, every vertex lies on the box
    surface, and every triangle lies in one of its six faces. A rotated box fails the corner test,
    a cylinder or a sphere fails the surface test. An open-topped tank passes (the engine closes it).
    """
    v = mesh.vertices
    if len(mesh.triangles) == 0:
        return f"Container '{name}' has no faces; use a box mesh"
    lo, hi = v.min(axis=0), v.max(axis=0)
    tol = BOX_TOLERANCE * max(float(np.max(hi - lo)), 1e-12)
    if np.any(hi - lo <= tol):
        return f"Container '{name}' is flat (its size is zero along an axis); use a box mesh"
    on_lo, on_hi = np.abs(v - lo) <= tol, np.abs(v - hi) <= tol
    corners = np.array([[hi[0] if i & 1 else lo[0], hi[1] if i & 2 else lo[1], hi[2] if i & 4 else lo[2]]
                        for i in range(8)])
    has_corner = [np.any(np.all(np.abs(v - c) <= tol, axis=1)) for c in corners]
    on_surface = np.any(on_lo | on_hi, axis=1)
    t = mesh.triangles
    in_face_plane = np.any(np.all(on_lo[t], axis=1) | np.all(on_hi[t], axis=1), axis=1)
    if not (all(has_corner) and np.all(on_surface) and np.all(in_face_plane)):
        return (f"Container '{name}' is not an axis-aligned box; this version of Surge handles box containers "
                f"only. Use an unrotated box (apply or clear its rotation), or set its collider mode to Solid "
                f"once that mode is available")
    return None


def _inside(inner: TriangleMesh, lower: np.ndarray, upper: np.ndarray) -> bool:
    """True if every vertex of ``inner`` lies within the box [lower, upper]."""
    v = inner.vertices
    return bool(len(v)) and bool(np.all(v >= lower) and np.all(v <= upper))


def export_scene(scene, depsgraph) -> tuple[SceneDescription, settings_mod.SimulationSettings]:
    """Scene description and settings of ``scene``, checked for everything the bridge knows about.

    Raises
    ------
    InvalidSceneError
        Listing every object with an unsupported role or shape, and every structural problem
        :meth:`SceneDescription.validate` finds (no fluid, a fluid with no faces, an empty frame range).
    InvalidSettingsError
        If a setting is out of range (from :func:`engine.settings.validate`).
    """
    scale = unit_scale(scene)
    problems: list[str] = []
    fluids, colliders = [], []
    for obj in sorted(scene.objects, key=lambda o: o.name):
        role = obj.surge.role
        if role == "NONE":
            continue
        if role in {"INFLOW", "OUTFLOW"}:
            problems.append(f"Object '{obj.name}' has the role {role.title()}, which this version of Surge cannot "
                            f"simulate yet; set its role to None, Fluid or Collider")
            continue
        if obj.type not in GEOMETRY_TYPES:
            problems.append(f"Object '{obj.name}' has the role {role.title()} but is a {obj.type.lower()} object "
                            f"without geometry; use a mesh")
            continue
        if role == "FLUID":
            fluids.append(FluidObject(obj.name, _world_mesh(obj, depsgraph, scale)))
        else:
            colliders.append((obj, _world_mesh(obj, depsgraph, scale)))

    containers = []
    for obj, mesh in colliders:
        mode = obj.surge.collider_mode
        if mode in {"SOLID", "SHELL"}:
            problems.append(f"Collider '{obj.name}' is in {mode.title()} mode, which this version of Surge cannot "
                            f"simulate yet; use Container mode on a box around the liquid")
            continue
        box = _box_problem(obj.name, mesh)
        if mode == "AUTO" and len(mesh.vertices):
            lower, upper = mesh.vertices.min(axis=0), mesh.vertices.max(axis=0)
            # a fluid modelled flush against the walls must count as inside despite rounding
            tol = BOX_TOLERANCE * max(float(np.max(upper - lower)), 1e-12)
            if not any(_inside(f.mesh, lower - tol, upper + tol) for f in fluids):
                problems.append(f"Collider '{obj.name}' (mode Auto) does not hold the liquid at the start, so it would "
                                f"be a solid obstacle, which this version of Surge cannot simulate yet; move it "
                                f"around the liquid or set its role to None")
                continue
        if box:
            problems.append(box)
            continue
        containers.append(BoxContainer(obj.name, mesh.vertices.min(axis=0), mesh.vertices.max(axis=0)))

    gravity = np.array(scene.gravity, dtype=np.float64) * scale if scene.use_gravity else np.zeros(3)
    description = SceneDescription(
        fluids=fluids, containers=containers, gravity=gravity,
        frame_start=scene.frame_start, frame_end=scene.frame_end,
        fps=scene.render.fps / scene.render.fps_base)
    try:
        description.validate()
    except InvalidSceneError as exc:
        problems += exc.problems
    if problems:
        raise InvalidSceneError(problems)
    return description, settings_from_scene(scene)
