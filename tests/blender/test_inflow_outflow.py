"""Inflow and outflow objects through Blender: settings on Object.surge, export, bake, playback."""

from __future__ import annotations

import bpy
import numpy as np
import pytest

from blender_helpers import add_box, evaluated_points, submodule

pytestmark = pytest.mark.blender


def _tap_scene(sc, cache_dir: str):
    """A 4 x 4 cm tap pouring down at 1 m/s into a 10 x 10 cm tank with a drain in one corner."""
    add_box("Tank", (0, 0, 0), (0.1, 0.1, 0.3), role="COLLIDER", collider_mode="CONTAINER")
    tap = add_box("Tap", (0.03, 0.03, 0.2), (0.07, 0.07, 0.22), role="INFLOW")
    tap.surge.inflow_mode = "SURFACE"
    tap.surge.normal_speed = 0.0
    tap.surge.velocity = (0.0, 0.0, -1.0)  # only the bottom face (normal -Z) moves liquid outward
    channel = tap.surge.channels.add()
    channel.name, channel.value = "from_tap", 1.0
    add_box("Drain", (0.06, 0.06, -0.01), (0.11, 0.11, 0.03), role="OUTFLOW")
    sc.frame_start, sc.frame_end = 1, 7
    sc.surge.solver = "PBF"
    sc.surge.particle_spacing = 0.01
    sc.surge.cache_directory = cache_dir
    return tap


def test_inflow_settings_reach_the_engine(scene, surge):
    export = submodule(surge, "bridge.export")
    tap = _tap_scene(scene, "//unused/")
    tap.surge.emit_start, tap.surge.emit_end, tap.surge.spacing_factor = 2, 5, 1.0
    scene.unit_settings.scale_length = 0.5  # speeds are Blender units per second: 1 BU/s = 0.5 m/s
    description, _settings = export.export_scene(scene, bpy.context.evaluated_depsgraph_get())
    (inflow,) = description.inflows
    assert inflow.name == "Tap" and inflow.settings.inflow_mode == "SURFACE"
    assert (inflow.settings.emit_start, inflow.settings.emit_end) == (2, 5)
    np.testing.assert_allclose(inflow.velocity, [0.0, 0.0, -0.5], rtol=0, atol=1e-12)
    np.testing.assert_allclose(inflow.mesh.vertices.min(axis=0), [0.015, 0.015, 0.1], rtol=0, atol=1e-7)
    (drain,) = description.outflows
    assert drain.name == "Drain" and len(drain.mesh.triangles) == 12
    assert [c.name for c in description.containers] == ["Tank"]


@pytest.mark.slow  # a bake in a child process or a fresh Blender
def test_bake_a_tap_into_a_tank_with_a_drain(scene, surge, tmp_path):
    cache_dir = str(tmp_path / "cache")
    _tap_scene(scene, cache_dir)
    assert bpy.ops.surge.bake() == {"FINISHED"}
    reader = submodule(surge, "engine.io.cache").CacheReader(cache_dir)
    assert reader.manifest["status"] == "complete" and reader.frames == list(range(1, 8))
    assert "age" in reader.manifest["attributes"]
    counts = [len(reader.read_frame(f)["id"]) for f in reader.frames]
    assert counts[0] == 0 and counts[-1] > counts[1] > 0  # the tap starts from an empty tank
    last = reader.read_frame(7)
    # 6 frames of 1/24 s at A v = 0.0016 m^3/s: 400 particles of 1 cm^3, less at most one owed per
    # emission point (16 on the 4 x 4 cm face) and those the drain has taken
    assert 400 - 16 <= int(last["id"].max()) + 1 <= 400
    inside = np.all((last["position"] > [0.06, 0.06, -0.01]) & (last["position"] < [0.11, 0.11, 0.03]), axis=1)
    assert not inside.any()
    assert np.all(last["position"] >= -1e-6) and np.all(last["position"] <= [0.1 + 1e-6, 0.1 + 1e-6, 0.3])
    # Blender plays the varying counts
    liquid = scene.surge.liquid_object
    for frame in (1, 4, 7):
        assert evaluated_points(liquid, frame)["count"] == counts[frame - 1]
    # the particle age and the tap's channel travel to Blender as attributes
    assert reader.manifest["attributes"]["from_tap"]["dtype"] == "float32"
    np.testing.assert_array_equal(last["from_tap"], 1.0)
    points = evaluated_points(liquid, 7)
    order, cached = np.argsort(points["id"]), np.argsort(last["id"])
    np.testing.assert_allclose(points["age"][order], last["age"][cached], rtol=1e-6, atol=0)
    np.testing.assert_array_equal(points["from_tap"], 1.0)


def test_bad_channel_name_is_refused(scene, surge, tmp_path):
    tap = _tap_scene(scene, str(tmp_path / "cache"))
    tap.surge.channels.add().name = "position"
    with pytest.raises(RuntimeError, match="Inflow 'Tap': particle channel 'position' is a built-in"):
        bpy.ops.surge.bake()
