"""The object a live session shows: a vertex-only mesh updated from the shared state, with a geometry-nodes
modifier that draws it as points or as a smooth surface.

*Surge Live* is a mesh whose vertices are the particles (positions in metres; the object's scale
turns them into Blender units, as for the baked liquid), with a ``velocity`` attribute (m/s). Its
modifier *Surge Live Display* (node group *Surge Live Display*) turns the vertices into points of
the particle radius, or, with *Surface* on, into the smooth union of spheres around them that seed
003 (Hussain, "SPH for Real-Time Fluid Simulation for Unity") ray-marches: Blender 5.0's grid nodes
build the same field on the CPU, Points to SDF Grid (a sphere's signed distance per particle, their
union), SDF Grid Mean (a box filter over the distance field, which rounds the union off like a
smooth minimum: larger Smoothness, rounder), Grid to Mesh (the zero level), then shade smooth.
Where the grid nodes are missing (a Blender without OpenVDB) the surface falls back to Points to
Volume and Volume to Mesh, as the bake's surface preview does (``bridge.surface``), and meets no collider.

The surface meets the colliders as the baked surface does (Mesh Against Colliders, Meet Colliders and
Collider Offset of the scene's surface settings; :mod:`engine.settings.surface`): between SDF Grid Mean and
Grid to Mesh the liquid's distance field goes through the node group *Surge Live Colliders*, which holds
one Object Info node per collider of the session (relative to the live object, so the collider stands
where Blender shows it, moved or not) and turns its mesh into a distance field with Mesh to SDF Grid at the
liquid's voxel size. With d the meeting distance (:func:`engine.settings.surface.meeting_distance`:
0 on the surface, the offset out in the free space or into the solid) and phi the collider's signed distance
(negative inside its mesh):

* a solid is taken away from the liquid (SDF Grid Boolean, Difference) grown by d (SDF Grid Offset: phi - d);
* a container keeps the liquid inside (Intersect) shrunk by d (phi + d);
* a shell (an open mesh, a wall half a spacing thick on each side, as the engine takes it,
  :data:`engine.collision.world.SHELL_HALF_THICKNESS`) is taken away as |phi| - (h + d), h the half
  thickness (Mesh to SDF Grid's distances are exact in its band whatever the mesh's sign, so their size is
  the unsigned distance to an open mesh).

Offsets go through SDF Grid Offset, not Math nodes: math on a grid maps its active voxels and gives the
inactive ones the background value, which would turn the inside of a closed mesh beyond its narrow band
into outside (a shell's |phi| has no inside, so math serves it).

The difference of two signed distance fields is their maximum (max(phi_liquid, -phi_solid)) and the
intersection too, so the zero level Grid to Mesh extracts is the boundary of the liquid with the solids
taken away: no vertex lies inside a solid or beyond a container's wall, up to Grid to Mesh's placing of a
vertex at the mean of its voxel's edge crossings. That is exact against a plane wall; against a curved
or creased solid the mean can lie inside it by the sagitta of a chord across the voxel, 3 h^2 / (8 R) for a
radius R and voxel h, plus (sqrt(3) h / 2) sin(theta / 2) at a crease of exterior angle theta (up to 0.6
voxels at a box's right-angled edge; ``tests/blender/test_live_surface.py``). The fields are
narrow bands; the band of the colliders' fields is made wide enough to hold h + |d|.

The node tree works in the object's own space, metres. Nothing here runs on frame change: the
session's timer writes the vertices when a new frame arrives.
"""

from __future__ import annotations

import math

import bpy
import numpy as np
from mathutils import Matrix

OBJECT_NAME = "Surge Live"
MODIFIER_NAME = "Surge Live Display"
GROUP_NAME = "Surge Live Display"

#: Voxels per particle radius of the live surface's grid: 2 keeps one voxel per half spacing.
VOXELS_PER_RADIUS = 2.0

#: Node group between the liquid's smoothed field and Grid to Mesh that meets the session's colliders.
COLLIDERS_GROUP_NAME = "Surge Live Colliders"

#: Version of the node groups' layout: a file saved with an older layout gets them built again.
GROUP_VERSION = 2

#: Voxels of a collider's distance band beyond the shell's half thickness and the meeting distance (OpenVDB's
#: default half width, which Grid to Mesh and the Booleans need around the zero level).
BAND_VOXELS = 3


def _grid_nodes_available() -> bool:
    return all(hasattr(bpy.types, name) for name in
               ("GeometryNodePointsToSDFGrid", "GeometryNodeSDFGridMean", "GeometryNodeGridToMesh"))


def _socket(node, names: tuple, outputs: bool = False):
    """The first socket of ``node`` called one of ``names`` (node sockets were renamed across versions)."""
    sockets = node.outputs if outputs else node.inputs
    for name in names:
        if name in sockets:
            return sockets[name]
    raise KeyError(f"{node.bl_idname} has none of the sockets {names}: {[s.name for s in sockets]}")


def _colliders_group():
    """The (empty) node group that meets the colliders: Grid, Voxel Size, Meet Distance, Shell Half Thickness and
    Band Width in, the Grid out; :func:`set_colliders` fills it."""
    group = bpy.data.node_groups.get(COLLIDERS_GROUP_NAME)
    if group is not None and group.get("surge_version") == GROUP_VERSION:
        return group
    if group is not None:
        bpy.data.node_groups.remove(group)
    group = bpy.data.node_groups.new(COLLIDERS_GROUP_NAME, "GeometryNodeTree")
    group["surge_version"] = GROUP_VERSION
    iface = group.interface
    iface.new_socket("Grid", in_out="INPUT", socket_type="NodeSocketFloat")
    for name in ("Voxel Size", "Meet Distance", "Shell Half Thickness"):
        iface.new_socket(name, in_out="INPUT", socket_type="NodeSocketFloat")
    iface.new_socket("Band Width", in_out="INPUT", socket_type="NodeSocketInt")
    iface.new_socket("Grid", in_out="OUTPUT", socket_type="NodeSocketFloat")
    _fill_colliders(group, ())
    return group


def _math(nodes, links, operation: str, a, b=None):
    node = nodes.new("ShaderNodeMath")
    node.operation = operation
    links.new(a, node.inputs[0])
    if b is not None:
        links.new(b, node.inputs[1])
    return node.outputs[0]


def _offset(nodes, links, grid, distance):
    """The level set ``grid`` grown by ``distance`` (SDF Grid Offset: phi - distance). Not a Math node: math on a
    grid maps its active voxels alone and gives the inactive ones the background's value, which turns the
    inside of a closed mesh (beyond its narrow band) outside."""
    node = nodes.new("GeometryNodeSDFGridOffset")
    links.new(grid, node.inputs["Grid"])
    links.new(distance, node.inputs["Distance"])
    return node.outputs[0]


def _fill_colliders(group, colliders) -> None:
    """Make ``group`` meet ``colliders``, a sequence of (object, mode) with mode SOLID, CONTAINER or SHELL (see
    the module docstring); no colliders: the grid passes through."""
    nodes, links = group.nodes, group.links
    nodes.clear()
    inp = nodes.new("NodeGroupInput")
    out = nodes.new("NodeGroupOutput")
    grid = inp.outputs["Grid"]
    d = inp.outputs["Meet Distance"]
    column = 1

    def collider_field(obj):
        nonlocal column
        info = nodes.new("GeometryNodeObjectInfo")
        info.transform_space = "RELATIVE"
        info.inputs["Object"].default_value = obj
        sdf = nodes.new("GeometryNodeMeshToSDFGrid")
        links.new(info.outputs["Geometry"], sdf.inputs["Mesh"])
        links.new(inp.outputs["Voxel Size"], sdf.inputs["Voxel Size"])
        links.new(inp.outputs["Band Width"], sdf.inputs["Band Width"])
        info.location, sdf.location = (200.0, -200.0 * column), (400.0, -200.0 * column)
        column += 1
        return sdf.outputs[0]

    containers = [obj for obj, mode in colliders if mode == "CONTAINER"]
    solids = [(obj, mode) for obj, mode in colliders if mode in ("SOLID", "SHELL")]
    if containers:
        keep = nodes.new("GeometryNodeSDFGridBoolean")
        keep.operation = "INTERSECT"  # of every grid linked to its multi-input (Grid 1 is for Difference only)
        links.new(grid, keep.inputs[1])
        inward = _math(nodes, links, "MULTIPLY", d)
        inward.node.inputs[1].default_value = -1.0
        for obj in containers:
            links.new(_offset(nodes, links, collider_field(obj), inward), keep.inputs[1])
        grid = keep.outputs[0]
    if solids:
        cut = nodes.new("GeometryNodeSDFGridBoolean")
        cut.operation = "DIFFERENCE"
        links.new(grid, cut.inputs[0])
        reach = _math(nodes, links, "ADD", inp.outputs["Shell Half Thickness"], d)
        for obj, mode in solids:
            phi = collider_field(obj)
            if mode == "SHELL":
                # beyond its band a shell's |phi| is the (positive) background: no interior to keep
                cut_field = _math(nodes, links, "SUBTRACT", _math(nodes, links, "ABSOLUTE", phi), reach)
            else:
                cut_field = _offset(nodes, links, phi, d)
            links.new(cut_field, cut.inputs[1])  # Grid 1 minus the union of these
        grid = cut.outputs[0]
    links.new(grid, out.inputs["Grid"])
    out.location = (1000.0, 0.0)


def _colliders_key(colliders) -> str:
    return "|".join(f"{obj.name}:{mode}" for obj, mode in colliders)


def set_colliders(colliders) -> bool:
    """Make the live surface meet ``colliders``, a sequence of (object, mode) with mode SOLID, CONTAINER or SHELL
    (an empty one: meet none); True if the node group changed."""
    group = _colliders_group()
    colliders = [(obj, mode) for obj, mode in colliders if mode in ("SOLID", "CONTAINER", "SHELL")]
    key = _colliders_key(colliders)
    known = [node.inputs["Object"].default_value for node in group.nodes if node.bl_idname == "GeometryNodeObjectInfo"]
    if group.get("surge_colliders") == key and all(obj is not None for obj in known):
        return False
    _fill_colliders(group, colliders)
    group["surge_colliders"] = key
    return True


def _node_group():
    group = bpy.data.node_groups.get(GROUP_NAME)
    if group is not None and group.get("surge_version") == GROUP_VERSION:
        return group
    if group is not None:  # a file saved with an older layout
        group.name = GROUP_NAME + " (old)"
    group = bpy.data.node_groups.new(GROUP_NAME, "GeometryNodeTree")
    group["surge_version"] = GROUP_VERSION
    iface = group.interface
    iface.new_socket("Geometry", in_out="INPUT", socket_type="NodeSocketGeometry")
    s = iface.new_socket("Point Radius", in_out="INPUT", socket_type="NodeSocketFloat")
    s.default_value, s.min_value = 0.01, 1e-6
    iface.new_socket("Surface", in_out="INPUT", socket_type="NodeSocketBool")
    s = iface.new_socket("Surface Radius", in_out="INPUT", socket_type="NodeSocketFloat")
    s.default_value, s.min_value = 0.02, 1e-6
    s = iface.new_socket("Smoothness", in_out="INPUT", socket_type="NodeSocketInt")
    s.default_value, s.min_value = 2, 0
    iface.new_socket("Material", in_out="INPUT", socket_type="NodeSocketMaterial")
    for name in ("Meet Distance", "Shell Half Thickness"):
        iface.new_socket(name, in_out="INPUT", socket_type="NodeSocketFloat")
    s = iface.new_socket("Band Width", in_out="INPUT", socket_type="NodeSocketInt")
    s.default_value, s.min_value = BAND_VOXELS, 1
    iface.new_socket("Geometry", in_out="OUTPUT", socket_type="NodeSocketGeometry")

    nodes, links = group.nodes, group.links
    inp = nodes.new("NodeGroupInput")
    out = nodes.new("NodeGroupOutput")
    to_points = nodes.new("GeometryNodeMeshToPoints")
    links.new(inp.outputs["Geometry"], to_points.inputs["Mesh"])
    links.new(inp.outputs["Point Radius"], to_points.inputs["Radius"])
    voxel = nodes.new("ShaderNodeMath")
    voxel.operation = "DIVIDE"
    voxel.inputs[1].default_value = VOXELS_PER_RADIUS
    links.new(inp.outputs["Surface Radius"], voxel.inputs[0])
    if _grid_nodes_available():
        sdf = nodes.new("GeometryNodePointsToSDFGrid")
        links.new(to_points.outputs["Points"], _socket(sdf, ("Points",)))
        links.new(inp.outputs["Surface Radius"], _socket(sdf, ("Radius",)))
        links.new(voxel.outputs[0], _socket(sdf, ("Voxel Size",)))
        mean = nodes.new("GeometryNodeSDFGridMean")
        links.new(_socket(sdf, ("SDF Grid", "Grid"), outputs=True), _socket(mean, ("Grid",)))
        links.new(inp.outputs["Smoothness"], _socket(mean, ("Iterations",)))
        meet = nodes.new("GeometryNodeGroup")
        meet.node_tree = _colliders_group()
        links.new(_socket(mean, ("Grid",), outputs=True), meet.inputs["Grid"])
        links.new(voxel.outputs[0], meet.inputs["Voxel Size"])
        for name in ("Meet Distance", "Shell Half Thickness", "Band Width"):
            links.new(inp.outputs[name], meet.inputs[name])
        to_mesh = nodes.new("GeometryNodeGridToMesh")
        links.new(meet.outputs["Grid"], _socket(to_mesh, ("Grid",)))
        _socket(to_mesh, ("Threshold",)).default_value = 0.0
        chain = (sdf, mean, meet, to_mesh)
    else:
        sdf = nodes.new("GeometryNodePointsToVolume")
        sdf.inputs["Resolution Mode"].default_value = "Size"
        links.new(to_points.outputs["Points"], sdf.inputs["Points"])
        links.new(inp.outputs["Surface Radius"], sdf.inputs["Radius"])
        links.new(voxel.outputs[0], sdf.inputs["Voxel Size"])
        to_mesh = nodes.new("GeometryNodeVolumeToMesh")
        links.new(sdf.outputs["Volume"], to_mesh.inputs["Volume"])
        chain = (sdf, to_mesh)
    shade = nodes.new("GeometryNodeSetShadeSmooth")
    links.new(_socket(to_mesh, ("Mesh",), outputs=True), shade.inputs["Mesh"])
    switch = nodes.new("GeometryNodeSwitch")
    switch.input_type = "GEOMETRY"
    links.new(inp.outputs["Surface"], switch.inputs["Switch"])
    links.new(to_points.outputs["Points"], switch.inputs["False"])
    links.new(shade.outputs["Mesh"], switch.inputs["True"])
    material = nodes.new("GeometryNodeSetMaterial")
    links.new(switch.outputs["Output"], material.inputs["Geometry"])
    links.new(inp.outputs["Material"], material.inputs["Material"])
    links.new(material.outputs["Geometry"], out.inputs["Geometry"])
    for i, node in enumerate((inp, to_points, voxel) + chain + (shade, switch, material, out)):
        node.location = (200.0 * i, 0.0)
    return group


def _input_ids(group) -> dict:
    return {item.name: item.identifier for item in group.interface.items_tree
            if item.item_type == "SOCKET" and item.in_out == "INPUT"}


def ensure_object(scene, scale_length: float):
    """The scene's live object (made, or relinked into the scene, when needed)."""
    from .liquid import _water_material

    obj = bpy.data.objects.get(OBJECT_NAME)
    if obj is None or obj.type != "MESH":
        mesh = bpy.data.meshes.new(OBJECT_NAME)
        obj = bpy.data.objects.new(OBJECT_NAME, mesh)
    if obj.name not in scene.collection.objects:
        scene.collection.objects.link(obj)
    s = 1.0 / scale_length
    obj.matrix_world = Matrix.Diagonal((s, s, s, 1.0))
    mesh = obj.data
    if "velocity" not in mesh.attributes:
        mesh.attributes.new("velocity", "FLOAT_VECTOR", "POINT")
    if not obj.material_slots:
        obj.data.materials.append(_water_material())
    mod = obj.modifiers.get(MODIFIER_NAME)
    if mod is None:
        mod = obj.modifiers.new(MODIFIER_NAME, "NODES")
    group = _node_group()
    if mod.node_group is not group:
        mod.node_group = group
    return obj


def meeting_values(particle_spacing: float, display: dict) -> dict:
    """The colliders' inputs of the node group, metres: ``Meet Distance`` d
    (:func:`engine.settings.surface.meeting_distance`), ``Shell Half Thickness`` (a shell's half thickness) and
    ``Band Width`` (voxels of the colliders' distance bands: enough for the shell's half thickness plus |d|)."""
    from ..engine.collision.world import SHELL_HALF_THICKNESS
    from ..engine.settings.surface import meeting_distance

    d = meeting_distance(display["collider_mode"], float(display["collider_offset"]) * particle_spacing)
    half = SHELL_HALF_THICKNESS * particle_spacing
    voxel = float(display["surface_radius"]) * particle_spacing / VOXELS_PER_RADIUS
    return {"Meet Distance": d, "Shell Half Thickness": half,
            "Band Width": int(math.ceil((half + abs(d)) / voxel - 1e-9)) + BAND_VOXELS}


def sync(obj, particle_spacing: float, display: dict, colliders=None) -> None:
    """Set the modifier's inputs: ``display`` has ``surface`` (bool), ``surface_radius`` and
    ``smoothness`` (multiples of the particle spacing, and passes), and the scene's surface settings
    ``use_colliders`` (bool), ``collider_mode`` and ``collider_offset`` (spacings); lengths here in metres.
    ``colliders``: the (object, mode) pairs the surface meets (:func:`set_colliders`; None leaves them as they
    are)."""
    mod = obj.modifiers.get(MODIFIER_NAME)
    if mod is None or mod.node_group is None:
        return
    changed = False
    if colliders is not None:
        changed = set_colliders(colliders if display.get("use_colliders", True) else ())
    ids = _input_ids(mod.node_group)
    values = {"Point Radius": 0.5 * particle_spacing, "Surface": bool(display["surface"]),
              "Surface Radius": float(display["surface_radius"]) * particle_spacing,
              "Smoothness": int(display["smoothness"]),
              "Material": obj.material_slots[0].material if obj.material_slots else None}
    if "collider_mode" in display:
        values.update(meeting_values(particle_spacing, display))
    for name, value in values.items():
        if name in ids and mod[ids[name]] != value:
            mod[ids[name]] = value
            changed = True
    if changed:
        obj.update_tag()


def write(obj, x: np.ndarray, v: np.ndarray | None) -> None:
    """Make the mesh's vertices the particles ``x`` (N, 3) float32, metres, with velocities ``v``."""
    mesh = obj.data
    n = int(x.shape[0])
    if len(mesh.vertices) != n:
        mesh.clear_geometry()
        mesh.vertices.add(n)
        if "velocity" not in mesh.attributes:
            mesh.attributes.new("velocity", "FLOAT_VECTOR", "POINT")
    if n:
        mesh.attributes["position"].data.foreach_set("vector", np.ascontiguousarray(x, dtype=np.float32).ravel())
        if v is not None:
            mesh.attributes["velocity"].data.foreach_set("vector", np.ascontiguousarray(v, dtype=np.float32).ravel())
    mesh.update()


def positions(obj) -> np.ndarray:
    """The live object's vertices (N, 3), metres (for tests and the benchmark)."""
    mesh = obj.data
    out = np.empty(len(mesh.vertices) * 3, dtype=np.float32)
    mesh.attributes["position"].data.foreach_get("vector", out)
    return out.reshape(-1, 3)
