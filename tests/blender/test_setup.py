"""Setting a scene up: role operators, liquid presets (built in and the artist's own), world scale."""

from __future__ import annotations

import os

import bpy
import numpy as np
import pytest

from blender_helpers import add_box, submodule

pytestmark = pytest.mark.blender


def _select(*objects):
    bpy.context.view_layer.update()  # objects linked since the last update are not in the view layer yet
    for obj in bpy.context.view_layer.objects:
        obj.select_set(obj in objects)
    bpy.context.view_layer.objects.active = objects[0] if objects else None


def test_role_operators_set_role_and_display_of_the_selection(scene, surge):
    water = add_box("Water", (0, 0, 0), (0.1, 0.1, 0.2))
    jug = add_box("Jug", (0, 0, 0), (0.1, 0.1, 0.3))
    tank = add_box("Tank", (0, 0, 0), (1, 1, 1))
    drain = add_box("Drain", (0, 0, 0), (0.1, 0.1, 0.1))
    for op, objects, role, hide_render in ((bpy.ops.surge.make_fluid, (water, jug), "FLUID", True),
                                           (bpy.ops.surge.make_collider, (tank,), "COLLIDER", False),
                                           (bpy.ops.surge.make_outflow, (drain,), "OUTFLOW", True)):
        _select(*objects)
        assert op() == {"FINISHED"}
        for obj in objects:
            assert (obj.surge.role, obj.display_type, obj.hide_render) == (role, "WIRE", hide_render), obj.name
    assert tank.surge.role == "COLLIDER" and water.surge.role == "FLUID"  # earlier selections kept their role
    _select(drain)
    assert bpy.ops.surge.make_inflow() == {"FINISHED"} and drain.surge.role == "INFLOW"

    # clearing restores the display of objects that had a role, and leaves other objects alone
    plain = add_box("Plain", (2, 2, 2), (3, 3, 3))
    plain.display_type, plain.hide_render = "BOUNDS", True
    _select(water, plain)
    assert bpy.ops.surge.clear_role() == {"FINISHED"}
    assert (water.surge.role, water.display_type, water.hide_render) == ("NONE", "TEXTURED", False)
    assert (plain.display_type, plain.hide_render) == ("BOUNDS", True)


def test_role_operators_skip_objects_without_geometry(scene, surge):
    lamp = bpy.data.objects.new("Lamp", bpy.data.lights.new("Lamp", "POINT"))
    scene.collection.objects.link(lamp)
    box = add_box("Box", (0, 0, 0), (1, 1, 1))
    _select(lamp)
    with pytest.raises(RuntimeError, match=r"Only objects with geometry can be Collider.*'Lamp' \(light\)"):
        bpy.ops.surge.make_collider()
    assert lamp.surge.role == "NONE"
    _select(lamp, box)  # a mixed selection: the mesh gets the role, the light is reported and left alone
    assert bpy.ops.surge.make_collider() == {"FINISHED"}
    assert box.surge.role == "COLLIDER" and lamp.surge.role == "NONE"
    _select()
    with pytest.raises(RuntimeError, match="Select the objects to make Fluid"):
        bpy.ops.surge.make_fluid()


@pytest.mark.parametrize("name", ["WATER", "HONEY", "OIL", "CHOCOLATE", "MILK", "LAVA"])
def test_liquid_presets_set_physical_values_whatever_the_world_scale(scene, surge, name):
    liquids = submodule(surge, "engine.settings.liquids")
    # centimetres: 2 Blender units of spacing are 2 cm
    scene.unit_settings.scale_length = 0.01
    scene.surge.particle_spacing = 2.0
    assert bpy.ops.surge.apply_liquid(liquid=name) == {"FINISHED"}
    want = liquids.settings_for(liquids.liquid(name))
    for setting, value in want.items():
        # Blender stores float properties as float32
        np.testing.assert_allclose(getattr(scene.surge, setting), value, rtol=1e-6, atol=0, err_msg=setting)
    # the export sees the same values in SI units
    export = submodule(surge, "bridge.export")
    engine_settings = export.settings_from_scene(scene)
    np.testing.assert_allclose(engine_settings.particle_spacing, 0.02, rtol=1e-6, atol=0)
    np.testing.assert_allclose(engine_settings.rest_density, want["rest_density"], rtol=1e-6, atol=0)
    np.testing.assert_allclose(engine_settings.dynamic_viscosity, want["dynamic_viscosity"], rtol=1e-6, atol=0)
    np.testing.assert_allclose(engine_settings.surface_tension, want["surface_tension"], rtol=1e-6, atol=0)


def test_artists_own_preset_saves_and_restores(scene, surge, tmp_path, monkeypatch):
    # the preset files go to a private user folder, not the tester's Blender configuration
    monkeypatch.setenv("BLENDER_USER_RESOURCES", str(tmp_path / "user"))
    s = scene.surge
    s.rest_density, s.dynamic_viscosity, s.pbf_velocity_smoothing, s.surface_tension = 1111.0, 0.25, 7.5, 0.4
    s.artificial_viscosity = 0.1
    assert bpy.ops.surge.liquid_preset_add(name="Green Slime") == {"FINISHED"}
    path = os.path.join(str(tmp_path / "user"), "scripts", "presets", "surge", "liquids", "Green_Slime.py")
    assert os.path.isfile(path)

    bpy.ops.surge.apply_liquid(liquid="WATER")
    s.particle_spacing = 0.05  # not part of a liquid preset: applying one must not change it
    assert s.rest_density != 1111.0
    assert bpy.ops.script.execute_preset(filepath=path, menu_idname="SURGE_MT_liquid_presets") == {"FINISHED"}
    np.testing.assert_allclose([s.rest_density, s.dynamic_viscosity, s.pbf_velocity_smoothing, s.surface_tension,
                                s.artificial_viscosity], [1111.0, 0.25, 7.5, 0.4, 0.1], rtol=1e-6, atol=0)
    np.testing.assert_allclose(s.particle_spacing, 0.05, rtol=1e-6, atol=0)
    assert path in [os.path.join(d, f) for d in bpy.utils.preset_paths("surge/liquids") for f in os.listdir(d)]

    # the preset menu's remove button deletes the active (last used) preset
    assert bpy.types.SURGE_MT_liquid_presets.bl_label == "Green Slime"
    assert bpy.ops.surge.liquid_preset_add(remove_active=True) == {"FINISHED"}
    assert not os.path.exists(path)


@pytest.mark.slow  # a bake in a child process or a fresh Blender
def test_a_scene_set_up_with_operators_bakes_with_the_preset(scene, surge, tmp_path):
    cache_dir = str(tmp_path / "cache")
    water = add_box("Water", (0, 0, 0), (0.1, 0.1, 0.1))
    tank = add_box("Tank", (0, 0, 0), (0.1, 0.1, 0.3))
    _select(water)
    bpy.ops.surge.make_fluid()
    _select(tank)
    bpy.ops.surge.make_collider()
    scene.frame_start, scene.frame_end = 1, 2
    scene.surge.particle_spacing = 0.02
    scene.surge.solver = "PBF"  # the quicker solver: this test is about the set-up reaching the bake
    scene.surge.cache_directory = cache_dir
    bpy.ops.surge.apply_liquid(liquid="MILK")
    assert bpy.ops.surge.bake() == {"FINISHED"}
    manifest = submodule(surge, "engine.io.cache").CacheReader(cache_dir).manifest
    liquids = submodule(surge, "engine.settings.liquids")
    want = liquids.settings_for(liquids.liquid("MILK"))
    for setting, value in want.items():
        np.testing.assert_allclose(manifest["settings"][setting], value, rtol=1e-6, atol=0, err_msg=setting)
    assert tank.surge.collider_resolved.startswith("Container")
