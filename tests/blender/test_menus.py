"""Surge where artists look for it: Quick Liquid in Object > Quick Effects, every operator in a menu (so F3
finds it), a Scene properties panel, a Physics panel only for objects that can take a role and acting on the
object it shows; particle channels added and removed in the panel; Clear Role gives the display back."""

from __future__ import annotations

import bpy
import numpy as np
import pytest

from blender_helpers import add_box, draw, submodule

pytestmark = pytest.mark.blender


def _surge_draws(menu_class, surge) -> list:
    return [f for f in menu_class._dyn_ui_initialize() if getattr(f, "__module__", "").startswith(surge.__name__)]


def _reachable(draw_function, seen=None) -> set:
    """Operator idnames drawn by ``draw_function`` and by every menu it opens, recursively."""
    seen = set() if seen is None else seen
    drawn = draw(draw_function)
    found = {r["name"] for r in drawn.find("operator")}
    for record in drawn.find("menu"):
        if record["name"] not in seen:
            seen.add(record["name"])
            found |= _reachable(getattr(bpy.types, record["name"]).draw, seen)
    return found


def test_quick_liquid_is_in_object_quick_effects(surge):
    draws = _surge_draws(bpy.types.VIEW3D_MT_object_quick_effects, surge)
    assert len(draws) == 1
    assert {r["name"] for r in draw(draws[0]).find("operator")} == {"surge.quick_liquid"}


def test_every_operator_is_in_a_menu_so_f3_finds_it(surge):
    """F3 searches the menus: every Surge operator an artist calls (all but the list buttons marked
    INTERNAL) must be reachable from the 3D view's Object menu."""
    draws = _surge_draws(bpy.types.VIEW3D_MT_object, surge)
    assert len(draws) == 1
    reachable = _reachable(draws[0])
    operators = submodule(surge, "operators")
    public = {cls.bl_idname for cls in operators.CLASSES if "INTERNAL" not in cls.bl_options}
    assert public - reachable == set()
    assert "surge.quick_liquid" in reachable and "surge.bake_surface" in reachable


def _mesh_cube(name, location, size=0.2):
    half = size / 2
    obj = add_box(name, (-half, -half, -half), (half, half, half))
    obj.location = location
    return obj


def test_quick_liquid_makes_fluid_a_container_and_a_spacing(scene, surge):
    export = submodule(surge, "bridge.export")
    a = _mesh_cube("A", (0.0, 0.0, 0.5))
    b = _mesh_cube("B", (0.5, 0.0, 0.5))
    b.display_type, b.hide_render = "SOLID", False
    camera = bpy.data.objects.new("Cam", bpy.data.cameras.new("Cam"))
    scene.collection.objects.link(camera)
    for obj in (a, b, camera):
        obj.select_set(True)
    bpy.context.view_layer.update()
    assert bpy.ops.surge.quick_liquid() == {"FINISHED"}
    assert a.surge.role == b.surge.role == "FLUID" and camera.surge.role == "NONE"
    boxes = [o for o in scene.objects if o.surge.role == "COLLIDER"]
    assert len(boxes) == 1 and boxes[0].surge.collider_mode == "CONTAINER" and boxes[0].hide_render
    bpy.context.view_layer.update()
    corners = np.array([boxes[0].matrix_world @ v.co for v in boxes[0].data.vertices])
    assert np.all(corners.min(axis=0) < (-0.1, -0.1, 0.4)) and np.all(corners.max(axis=0) > (0.6, 0.1, 0.6))
    # two 0.2 m cubes: 0.016 m3 for 30,000 particles gives 8.11 mm, 8 across 0.2 m 25 mm: the smaller,
    # rounded down to two digits (float32 storage: 1e-6)
    assert scene.surge.particle_spacing == pytest.approx(0.0081, rel=1e-6)
    # the set-up bakes: the scene exports with both fluids in the container
    description, settings = export.export_scene(scene, bpy.context.evaluated_depsgraph_get())
    assert len(description.fluids) == 2 and len(description.containers) == 1
    # pressed again: no second container
    assert bpy.ops.surge.quick_liquid() == {"FINISHED"}
    assert len([o for o in scene.objects if o.surge.role == "COLLIDER"]) == 1
    # Clear Role gives each object back the display it had before Surge changed it
    bpy.ops.object.select_all(action="DESELECT")
    b.select_set(True)
    assert bpy.ops.surge.clear_role() == {"FINISHED"}
    assert b.surge.role == "NONE" and b.display_type == "SOLID" and not b.hide_render


def test_clear_role_gives_back_the_artists_display(scene, surge):
    obj = add_box("Rock", (0, 0, 0), (1, 1, 1))
    obj.display_type, obj.hide_render = "BOUNDS", True
    obj.select_set(True)
    assert bpy.ops.surge.make_collider() == {"FINISHED"}
    assert obj.display_type == "WIRE" and not obj.hide_render
    assert bpy.ops.surge.make_fluid() == {"FINISHED"}  # a second role: the artist's display is still the one kept
    assert bpy.ops.surge.clear_role() == {"FINISHED"}
    assert obj.display_type == "BOUNDS" and obj.hide_render


def test_scene_properties_panel_holds_the_simulation_settings(scene, surge):
    panel = bpy.types.SCENE_PT_surge
    assert (panel.bl_space_type, panel.bl_context) == ("PROPERTIES", "scene")
    sidebar = submodule(surge, "panels.sidebar")
    drawn = draw(panel.draw)
    expected = [p.name for _group, shown in sidebar.shown_scene_settings(scene.surge) for p, _active in shown]
    props = [r["name"] for r in drawn.find("prop") if r["name"] in expected]
    assert props == expected
    assert drawn.find("operator", "surge.bake") and drawn.find("operator", "surge.free_bake")


def test_physics_panel_only_for_objects_that_can_take_a_role_and_acting_on_the_shown_one(scene, surge):
    panel = bpy.types.PHYSICS_PT_surge
    light = bpy.data.objects.new("Lamp", bpy.data.lights.new("Lamp", "POINT"))
    camera = bpy.data.objects.new("Cam", bpy.data.cameras.new("Cam"))
    shown = add_box("Shown", (0, 0, 0), (1, 1, 1))
    selected = add_box("Selected", (2, 0, 0), (3, 1, 1))
    for obj in (light, camera):
        scene.collection.objects.link(obj)
        with bpy.context.temp_override(object=obj):
            assert not panel.poll(bpy.context), obj.type
    selected.select_set(True)
    bpy.context.view_layer.objects.active = selected
    # Properties pinned on 'Shown' while 'Selected' is active and selected
    with bpy.context.temp_override(object=shown):
        assert panel.poll(bpy.context)
        drawn = draw(panel.draw)
    pointer = drawn.find("pointer", "surge_object")
    assert len(pointer) == 1 and pointer[0]["data"] == shown
    assert drawn.log.index(pointer[0]) < drawn.log.index(drawn.find("operator", "surge.make_fluid")[0])
    # what a button of that panel does: Blender passes the panel's context pointer to the operator
    with bpy.context.temp_override(surge_object=shown):
        assert bpy.ops.surge.make_fluid() == {"FINISHED"}
    assert shown.surge.role == "FLUID" and selected.surge.role == "NONE"


def test_particle_channels_are_added_and_removed_in_the_panel(scene, surge):
    obj = add_box("Dye", (0, 0, 0), (1, 1, 1), role="FLUID")
    bpy.context.view_layer.objects.active = obj
    drawn = draw(bpy.types.VIEW3D_PT_surge_object.draw)
    assert drawn.find("list", "SURGE_UL_channels")
    assert drawn.find("operator", "surge.channel_add") and drawn.find("operator", "surge.channel_remove")
    assert not bpy.ops.surge.channel_remove.poll()
    assert bpy.ops.surge.channel_add() == {"FINISHED"} and bpy.ops.surge.channel_add() == {"FINISHED"}
    assert [c.name for c in obj.surge.channels] == ["channel", "channel_1"] and obj.surge.active_channel == 1
    obj.surge.channels[0].value = 2.0
    assert bpy.ops.surge.channel_remove() == {"FINISHED"}
    assert [c.name for c in obj.surge.channels] == ["channel"]
    assert submodule(surge, "bridge.export").particle_channels(obj) == {"channel": 2.0}
    obj.surge.role = "COLLIDER"
    assert not bpy.ops.surge.channel_add.poll()
