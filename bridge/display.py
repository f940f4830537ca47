"""How the baked points look, set without baking again: a Geometry Nodes modifier (*Surge Display*) right
after an object's cache modifier, on the liquid and on the three whitewater objects.

* **Viewport amount**: the share of the points the viewport draws (renders draw them all). A point is kept
  by a random draw seeded with its ``id`` attribute, so the same particles stay visible from frame to frame.
* **Radius**: every point's radius times a **scale** (the liquid's *Point Size*), or a radius of its own
  (each whitewater kind's size). Points of radius 0 stay 0: a whitewater frame without particles of a kind
  holds one such invisible point (:data:`engine.whitewater.stage.EMPTY_ID`).

The node tree works in the object's space, which is metres (the object carries the unit scale), so a size in
Blender units is multiplied by the unit scale here. Like the cache modifier, it is plain Blender data: the
.blend plays and renders the same without Surge.
"""

from __future__ import annotations

import bpy

GROUP_NAME = "Surge Display"
MODIFIER_NAME = "Surge Display"


def _node_group():
    group = bpy.data.node_groups.get(GROUP_NAME)
    if group is not None:
        return group
    group = bpy.data.node_groups.new(GROUP_NAME, "GeometryNodeTree")
    iface = group.interface
    iface.new_socket("Geometry", in_out="INPUT", socket_type="NodeSocketGeometry")
    amount = iface.new_socket("Viewport Amount", in_out="INPUT", socket_type="NodeSocketFloat")
    amount.default_value, amount.min_value, amount.max_value = 1.0, 0.0, 1.0
    radius = iface.new_socket("Radius", in_out="INPUT", socket_type="NodeSocketFloat")
    radius.default_value, radius.min_value = 0.0, 0.0
    scale = iface.new_socket("Radius Scale", in_out="INPUT", socket_type="NodeSocketFloat")
    scale.default_value, scale.min_value = 1.0, 0.0
    iface.new_socket("Geometry", in_out="OUTPUT", socket_type="NodeSocketGeometry")

    nodes, links = group.nodes, group.links
    inp = nodes.new("NodeGroupInput")
    out = nodes.new("NodeGroupOutput")
    # drop (1 - amount) of the points, in the viewport only
    is_viewport = nodes.new("GeometryNodeIsViewport")
    keep = nodes.new("FunctionNodeRandomValue")
    keep.data_type = "BOOLEAN"  # true with the given probability; its ID input reads the 'id' attribute
    drop = nodes.new("FunctionNodeBooleanMath")
    drop.operation = "NIMPLY"  # viewport and not kept
    delete = nodes.new("GeometryNodeDeleteGeometry")
    delete.domain = "POINT"
    # radius: its own when given (> 0), else the file's, times the scale; radius 0 stays 0
    old_radius = nodes.new("GeometryNodeInputRadius")
    has_own = nodes.new("FunctionNodeCompare")
    has_own.data_type, has_own.operation = "FLOAT", "GREATER_THAN"
    pick = nodes.new("GeometryNodeSwitch")
    pick.input_type = "FLOAT"
    scaled = nodes.new("ShaderNodeMath")
    scaled.operation = "MULTIPLY"
    visible = nodes.new("FunctionNodeCompare")
    visible.data_type, visible.operation = "FLOAT", "GREATER_THAN"
    set_radius = nodes.new("GeometryNodeSetPointRadius")

    links.new(inp.outputs["Viewport Amount"], keep.inputs["Probability"])
    links.new(is_viewport.outputs[0], drop.inputs[0])
    links.new(next(s for s in keep.outputs if s.enabled), drop.inputs[1])
    links.new(inp.outputs["Geometry"], delete.inputs["Geometry"])
    links.new(drop.outputs[0], delete.inputs["Selection"])
    links.new(inp.outputs["Radius"], has_own.inputs["A"])
    has_own.inputs["B"].default_value = 0.0
    links.new(has_own.outputs[0], pick.inputs["Switch"])
    links.new(old_radius.outputs[0], pick.inputs["False"])
    links.new(inp.outputs["Radius"], pick.inputs["True"])
    links.new(pick.outputs[0], scaled.inputs[0])
    links.new(inp.outputs["Radius Scale"], scaled.inputs[1])
    links.new(old_radius.outputs[0], visible.inputs["A"])
    visible.inputs["B"].default_value = 0.0
    links.new(delete.outputs[0], set_radius.inputs["Points"])
    links.new(visible.outputs[0], set_radius.inputs["Selection"])
    links.new(scaled.outputs[0], set_radius.inputs["Radius"])
    links.new(set_radius.outputs[0], out.inputs["Geometry"])
    for i, node in enumerate((inp, is_viewport, keep, drop, delete, old_radius, has_own, pick, scaled, visible,
                              set_radius, out)):
        node.location = (180.0 * i, 0.0)
    return group


def _input_ids(group) -> dict:
    return {item.name: item.identifier for item in group.interface.items_tree
            if item.item_type == "SOCKET" and item.in_out == "INPUT"}


def apply(obj, amount: float = 1.0, radius: float = 0.0, scale: float = 1.0) -> None:
    """Give ``obj`` (a point cloud playing a cache) its display modifier, right after its cache modifier:
    ``amount`` of the points in the viewport (0 to 1), each of ``radius`` metres (0 keeps the file's)
    times ``scale``. Only values that changed are written."""
    if obj is None:
        return
    mod = obj.modifiers.get(MODIFIER_NAME)
    if mod is None:
        mod = obj.modifiers.new(MODIFIER_NAME, "NODES")
        mod.node_group = _node_group()
        caches = [i for i, m in enumerate(obj.modifiers) if m.type == "MESH_SEQUENCE_CACHE"]
        obj.modifiers.move(len(obj.modifiers) - 1, caches[0] + 1 if caches else 0)
    ids = _input_ids(mod.node_group)
    changed = False
    for name, value in (("Viewport Amount", float(amount)), ("Radius", float(radius)),
                        ("Radius Scale", float(scale))):
        if name in ids and abs(mod[ids[name]] - value) > 1e-7 * max(1.0, abs(value)):
            mod[ids[name]] = value
            changed = True
    if changed:
        obj.update_tag()
