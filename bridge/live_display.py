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
Volume and Volume to Mesh, as the bake's surface preview does (``bridge.surface``).

The node tree works in the object's own space, metres. Nothing here runs on frame change: the
session's timer writes the vertices when a new frame arrives.
"""

from __future__ import annotations

import bpy
import numpy as np
from mathutils import Matrix

OBJECT_NAME = "Surge Live"
MODIFIER_NAME = "Surge Live Display"
GROUP_NAME = "Surge Live Display"

#: Voxels per particle radius of the live surface's grid: 2 keeps one voxel per half spacing.
VOXELS_PER_RADIUS = 2.0


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


def _node_group():
    group = bpy.data.node_groups.get(GROUP_NAME)
    if group is not None:
        return group
    group = bpy.data.node_groups.new(GROUP_NAME, "GeometryNodeTree")
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
        to_mesh = nodes.new("GeometryNodeGridToMesh")
        links.new(_socket(mean, ("Grid",), outputs=True), _socket(to_mesh, ("Grid",)))
        chain = (sdf, mean, to_mesh)
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
        mod.node_group = _node_group()
    return obj


def sync(obj, particle_spacing: float, display: dict) -> None:
    """Set the modifier's inputs: ``display`` has ``surface`` (bool), ``surface_radius`` and
    ``smoothness`` (multiples of the particle spacing, and passes); lengths here in metres."""
    mod = obj.modifiers.get(MODIFIER_NAME)
    if mod is None or mod.node_group is None:
        return
    ids = _input_ids(mod.node_group)
    values = {"Point Radius": 0.5 * particle_spacing, "Surface": bool(display["surface"]),
              "Surface Radius": float(display["surface_radius"]) * particle_spacing,
              "Smoothness": int(display["smoothness"]),
              "Material": obj.material_slots[0].material if obj.material_slots else None}
    for name, value in values.items():
        if name in ids and mod[ids[name]] != value:
            mod[ids[name]] = value
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
