"""Surface preview: the liquid as a mesh from Blender's own geometry nodes, before any surface cache.

A Geometry Nodes modifier (``Surge Surface``) after the liquid's cache modifier turns the points
into a fog volume (Points to Volume, a sphere of the chosen radius per particle), meshes its
surface (Volume to Mesh), smooths it (Blur Attribute on the positions, as many iterations as the
smoothing), shades it smooth and gives it the liquid's material. It is plain Blender data, so the
preview plays and renders without Surge too; turning the preview off only hides the modifier.

The node tree works in the liquid object's space, which is metres (the object carries the unit
scale); the radius setting is in Blender units and converted here.
"""

from __future__ import annotations

import bpy

GROUP_NAME = "Surge Surface"
MODIFIER_NAME = "Surge Surface"

#: voxel size of the volume as a fraction of the radius: finer shows single drops, coarser is faster
VOXELS_PER_RADIUS = 3.0


def _node_group():
    group = bpy.data.node_groups.get(GROUP_NAME)
    if group is not None:
        return group
    group = bpy.data.node_groups.new(GROUP_NAME, "GeometryNodeTree")
    iface = group.interface
    iface.new_socket("Geometry", in_out="INPUT", socket_type="NodeSocketGeometry")
    radius = iface.new_socket("Radius", in_out="INPUT", socket_type="NodeSocketFloat")
    radius.default_value, radius.min_value = 0.02, 1e-5
    smooth = iface.new_socket("Smoothing", in_out="INPUT", socket_type="NodeSocketInt")
    smooth.default_value, smooth.min_value = 2, 0
    material = iface.new_socket("Material", in_out="INPUT", socket_type="NodeSocketMaterial")
    iface.new_socket("Geometry", in_out="OUTPUT", socket_type="NodeSocketGeometry")
    del material

    nodes, links = group.nodes, group.links
    inp = nodes.new("NodeGroupInput")
    out = nodes.new("NodeGroupOutput")
    voxel = nodes.new("ShaderNodeMath")
    voxel.operation = "DIVIDE"
    voxel.inputs[1].default_value = VOXELS_PER_RADIUS
    to_volume = nodes.new("GeometryNodePointsToVolume")
    to_volume.inputs["Resolution Mode"].default_value = "Size"
    to_mesh = nodes.new("GeometryNodeVolumeToMesh")
    to_mesh.inputs["Resolution Mode"].default_value = "Grid"
    position = nodes.new("GeometryNodeInputPosition")
    blur = nodes.new("GeometryNodeBlurAttribute")
    blur.data_type = "FLOAT_VECTOR"
    set_position = nodes.new("GeometryNodeSetPosition")
    shade = nodes.new("GeometryNodeSetShadeSmooth")
    set_material = nodes.new("GeometryNodeSetMaterial")

    links.new(inp.outputs["Radius"], voxel.inputs[0])
    links.new(inp.outputs["Geometry"], to_volume.inputs["Points"])
    links.new(inp.outputs["Radius"], to_volume.inputs["Radius"])
    links.new(voxel.outputs[0], to_volume.inputs["Voxel Size"])
    links.new(to_volume.outputs["Volume"], to_mesh.inputs["Volume"])
    links.new(position.outputs["Position"], blur.inputs["Value"])
    links.new(inp.outputs["Smoothing"], blur.inputs["Iterations"])
    links.new(to_mesh.outputs["Mesh"], set_position.inputs["Geometry"])
    links.new(blur.outputs["Value"], set_position.inputs["Position"])
    links.new(set_position.outputs["Geometry"], shade.inputs["Mesh"])
    links.new(shade.outputs["Mesh"], set_material.inputs["Geometry"])
    links.new(inp.outputs["Material"], set_material.inputs["Material"])
    links.new(set_material.outputs["Geometry"], out.inputs["Geometry"])
    for i, node in enumerate((inp, voxel, to_volume, to_mesh, position, blur, set_position, shade, set_material,
                              out)):
        node.location = (200.0 * i, 0.0)
    return group


def _input_ids(group) -> dict:
    return {item.name: item.identifier for item in group.interface.items_tree
            if item.item_type == "SOCKET" and item.in_out == "INPUT"}


def sync(scene, scale_length: float) -> None:
    """Add, update or hide the surface modifier of the scene's liquid object from ``Scene.surge``."""
    settings = scene.surge
    obj = settings.liquid_object
    if obj is None:
        return
    mod = obj.modifiers.get(MODIFIER_NAME)
    if mod is None:
        if not settings.use_surface_preview:
            return
        mod = obj.modifiers.new(MODIFIER_NAME, "NODES")
        mod.node_group = _node_group()
    ids = _input_ids(mod.node_group)
    values = {"Radius": float(settings.surface_radius) * scale_length, "Smoothing": int(settings.surface_smoothing),
              "Material": obj.material_slots[0].material if obj.material_slots else None}
    for name, value in values.items():
        if name in ids and mod[ids[name]] != value:
            mod[ids[name]] = value
    mod.show_viewport = mod.show_render = bool(settings.use_surface_preview)
    obj.update_tag()
