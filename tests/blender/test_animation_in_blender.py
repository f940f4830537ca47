"""What an artist animates, through real Blender: a hose on a path, keyed and driven inflow
settings, an outflow moved through the liquid, force fields, initial velocity, resume across an
animated setting."""

from __future__ import annotations

import bpy
import numpy as np
import pytest

from blender_helpers import add_box, submodule

pytestmark = pytest.mark.blender


def _export(surge, sc):
    return submodule(surge, "bridge.export").export_scene(sc, bpy.context.evaluated_depsgraph_get())[0]


def _reader(surge, cache_dir):
    return submodule(surge, "engine.io.cache").CacheReader(cache_dir)


def _path(length: float = 1.0, frames: int = 24):
    """A straight path along +X, ``length`` Blender units long, travelled over ``frames`` frames."""
    curve = bpy.data.curves.new("Path", "CURVE")
    curve.dimensions = "3D"
    spline = curve.splines.new("POLY")
    spline.points.add(1)
    spline.points[0].co = (0.0, 0.0, 0.0, 1.0)
    spline.points[1].co = (length, 0.0, 0.0, 1.0)
    curve.use_path = True
    curve.path_duration = frames
    curve.eval_time = 0.0
    curve.keyframe_insert("eval_time", frame=1)
    curve.eval_time = frames
    curve.keyframe_insert("eval_time", frame=1 + frames)
    _linear_keys(curve)
    path = bpy.data.objects.new("Path", curve)
    bpy.context.scene.collection.objects.link(path)
    return path


def _linear_keys(idblock) -> None:
    """Make every keyframe of ``idblock`` linear (Blender 5's layered actions or older flat ones)."""
    action = idblock.animation_data.action
    curves = []
    if hasattr(action, "layers") and len(action.layers):
        for layer in action.layers:
            for strip in layer.strips:
                for bag in strip.channelbags:
                    curves += list(bag.fcurves)
    if hasattr(action, "fcurves"):
        curves += list(action.fcurves)
    for fc in curves:
        for key in fc.keyframe_points:
            key.interpolation = "LINEAR"


def _hose_scene(sc, cache_dir, frames=13, spacing=0.01):
    """A 4 x 4 cm hose (its bottom face pours down at 1 m/s) carried along a path at 1 m/s, 0.3 m up."""
    sc.frame_start, sc.frame_end = 1, frames
    hose = add_box("Hose", (0.0, -0.02, 0.30), (0.04, 0.02, 0.32), role="INFLOW")
    hose.surge.normal_speed = 0.0
    hose.surge.velocity = (0.0, 0.0, -1.0)  # the set velocity: only the bottom face (normal -Z) pours
    path = _path(1.0, 24)
    constraint = hose.constraints.new("FOLLOW_PATH")
    constraint.target = path
    sc.surge.solver = "PBF"
    sc.surge.particle_spacing = spacing
    sc.surge.cache_directory = cache_dir
    return hose


@pytest.mark.slow  # a bake of many frames: in the full suite, not the fast layer
def test_hose_on_a_path_pours_from_its_moving_surface(scene, surge, tmp_path):
    cache_dir = str(tmp_path / "cache")
    _hose_scene(scene, cache_dir)
    (hose,) = _export(surge, scene).inflows
    assert hose.motion == "RIGID"
    # 1 BU along +X per 24 frames: (f - 1) / 24 m at frame f, no rotation
    np.testing.assert_allclose(hose.transforms[:, 0, 3], np.arange(13) / 24.0, rtol=0, atol=1e-6)
    np.testing.assert_allclose(hose.transforms[:, :3, :3], np.tile(np.eye(3), (13, 1, 1)), rtol=0, atol=1e-6)
    assert bpy.ops.surge.bake() == {"FINISHED"}
    reader = _reader(surge, cache_dir)
    dx, fps = 0.01, 24.0
    checked, young = 0, []
    for frame in range(2, 14):
        data = reader.read_frame(frame)
        # the particles younger than 4 ms (0.4 spacings' travel at the 1 m/s they leave at, relative to
        # the hose, plus 0.08 mm of fall) sit under the hose's bottom face as it is at that frame,
        # within half a spacing (all 16 streams pour in step, a batch every 10 ms: some frames have none)
        t = (frame - 1) / fps
        newest = data["age"] < 0.4 * dx / 1.0
        checked += int(newest.sum())
        if not newest.any():
            continue
        x = data["position"][newest]
        # (within half a spacing of the face's plane on either side: the density constraint may already
        # have pushed one back up a few millimetres)
        assert np.all(x[:, 0] >= t - 0.5 * dx) and np.all(x[:, 0] <= t + 0.04 + 0.5 * dx)
        assert np.all(np.abs(x[:, 2] - 0.30) <= 0.5 * dx)
        young.append(data["velocity"][newest])
    # they leave at the hose's velocity (1 m/s along X) plus the set velocity (1 m/s down); the engine
    # test checks that exactly at emission. Here they have had up to 4 ms of gravity (0.04 m/s) and of
    # the density constraint between the stream's first layers (single particles up to 0.5 m/s off):
    # on average they carry the hose's motion along X (0.994 m/s seen); along the stream the constraint
    # slows its fresh head by about 8 % (-0.917 m/s seen)
    young = np.concatenate(young).mean(axis=0)
    np.testing.assert_allclose(young[:2], [1.0, 0.0], rtol=0, atol=0.03)
    assert -1.0 - 0.05 <= young[2] <= -1.0 + 0.15
    assert checked >= 32
    emitted = int(reader.read_frame(13)["id"].max()) + 1
    # A v t / dx^3 = 0.0016 m^2 * 1 m/s * 0.5 s / 1e-6 = 800, as for a static hose, less at most one
    # particle owed per stream (16 streams on the 4 x 4 cm face)
    assert 800 - 16 <= emitted <= 800


def _tap(sc, cache_dir, frames, spacing=0.02):
    """A static 4 x 4 cm tap pouring down (its bottom face) at the Normal Speed of its faces."""
    sc.frame_start, sc.frame_end = 1, frames
    tap = add_box("Tap", (0.0, 0.0, 0.5), (0.04, 0.04, 0.52), role="INFLOW")
    tap.surge.normal_speed = 0.0
    tap.surge.velocity = (0.0, 0.0, -0.5)
    sc.surge.solver = "PBF"
    sc.surge.particle_spacing = spacing
    sc.surge.cache_directory = cache_dir
    sc.use_gravity = False
    return tap


@pytest.mark.slow  # a bake of many frames: in the full suite, not the fast layer
def test_inflow_keyed_off_at_20_and_on_at_40_emits_nothing_between(scene, surge, tmp_path):
    cache_dir = str(tmp_path / "cache")
    tap = _tap(scene, cache_dir, frames=44)
    tap.surge.use_flow = True
    tap.surge.keyframe_insert("use_flow", frame=19)
    tap.surge.use_flow = False
    tap.surge.keyframe_insert("use_flow", frame=20)
    tap.surge.use_flow = True
    tap.surge.keyframe_insert("use_flow", frame=40)
    scene.frame_set(30)  # the playhead on a frame where the tap is off: the bake reads every frame anyway
    (inflow,) = _export(surge, scene).inflows
    expected = np.ones(44)
    expected[19:39] = 0.0
    np.testing.assert_array_equal(inflow.tracks["use_flow"], expected)
    assert inflow.settings.use_flow  # the first frame's value, not the playhead's
    assert bpy.ops.surge.bake() == {"FINISHED"}
    reader = _reader(surge, cache_dir)
    emitted = {f: int(reader.read_frame(f)["id"].max()) + 1 if len(reader.read_frame(f)["id"]) else 0
               for f in (19, 20, 30, 40, 41, 44)}
    assert emitted[20] == emitted[30] == emitted[40]
    assert emitted[19] > 0 and emitted[41] > emitted[40]


@pytest.mark.slow  # a bake of many frames: in the full suite, not the fast layer
def test_keyed_rate_ramp_and_driven_rate(scene, surge, tmp_path):
    """Normal Speed keyed 0 -> 2 m/s over frames 1-25 (linear) pours A * mean speed * t; a driver on
    the Normal Speed of a second tap is followed frame by frame."""
    cache_dir = str(tmp_path / "cache")
    tap = _tap(scene, cache_dir, frames=25, spacing=0.01)
    tap.surge.velocity = (0.0, 0.0, 0.0)
    tap.surge.normal_speed = 0.0
    tap.surge.keyframe_insert("normal_speed", frame=1)
    tap.surge.normal_speed = 2.0
    tap.surge.keyframe_insert("normal_speed", frame=25)
    _linear_keys(tap)
    # gravity draws the stream out: without it the first, slow particles would hold back the faster ones
    # behind them (a stream that would land on liquid waits)
    scene.use_gravity = True
    # only the bottom face: the others would pour sideways too; a plane facing down instead of a box
    mesh = bpy.data.meshes.new("Nozzle")
    mesh.from_pydata([(0.0, 0.0, 0.5), (0.04, 0.0, 0.5), (0.04, 0.04, 0.5), (0.0, 0.04, 0.5)], [],
                     [(0, 3, 2, 1)])  # wound clockwise seen from above: normal -Z
    tap.data = mesh
    driven = add_box("Driven", (0.2, 0.0, 0.5), (0.24, 0.04, 0.52), role="INFLOW")
    driven.surge.velocity = (0.0, 0.0, 0.0)
    fcurve = driven.surge.driver_add("normal_speed")
    fcurve.driver.type = "SCRIPTED"
    fcurve.driver.expression = "0.1 * frame"
    description = _export(surge, scene)
    ramp, drv = description.inflows[1], description.inflows[0]
    assert (ramp.name, drv.name) == ("Tap", "Driven")
    np.testing.assert_allclose(ramp.tracks["normal_speed"], np.linspace(0.0, 2.0, 25), rtol=0, atol=1e-6)
    np.testing.assert_allclose(drv.tracks["normal_speed"], 0.1 * np.arange(1, 26), rtol=0, atol=1e-6)
    driven.surge.role = "NONE"
    assert bpy.ops.surge.bake() == {"FINISHED"}
    data = _reader(surge, cache_dir).read_frame(25)
    # 0.0016 m^2 * 1 m/s (mean of the ramp) * 1 s / 1e-6 m^3 = 1600, less one owed per stream (16)
    assert 1600 - 16 <= int(data["id"].max()) + 1 <= 1600


def test_outflow_keyed_through_the_liquid_removes_what_it_passes(scene, surge, tmp_path):
    """A weightless 20 x 10 x 10 cm block of liquid at 2 cm spacing, at rest; a 4 x 6 x 6 cm drain box
    keyed through its middle rows (its far end from x = -0.01 to 0.16) removes exactly the particles in
    its path."""
    cache_dir = str(tmp_path / "cache")
    scene.frame_start, scene.frame_end = 1, 7
    scene.use_gravity = False
    add_box("Water", (0.0, 0.0, 0.0), (0.2, 0.1, 0.1), role="FLUID")
    drain = add_box("Drain", (-0.04, -0.03, -0.03), (0.0, 0.03, 0.03), role="OUTFLOW")
    drain.location = (-0.01, 0.05, 0.05)
    drain.keyframe_insert("location", frame=1)
    drain.location = (0.16, 0.05, 0.05)
    drain.keyframe_insert("location", frame=7)
    _linear_keys(drain)
    scene.surge.solver = "PBF"
    scene.surge.particle_spacing = 0.02
    scene.surge.cache_directory = cache_dir
    (outflow,) = _export(surge, scene).outflows
    assert outflow.motion == "RIGID"
    assert bpy.ops.surge.bake() == {"FINISHED"}
    reader = _reader(surge, cache_dir)
    first, last = reader.read_frame(1), reader.read_frame(7)
    x = first["position"]
    # lattice sites at odd centimetres; the drain sweeps x in [-0.05, 0.16], y and z in [0.02, 0.08]
    swept = (x[:, 0] < 0.16) & (np.abs(x[:, 1] - 0.05) < 0.03) & (np.abs(x[:, 2] - 0.05) < 0.03)
    assert swept.sum() == 8 * 3 * 3
    np.testing.assert_array_equal(np.sort(last["id"]), np.sort(first["id"][~swept]))


def test_force_fields_reach_the_engine_and_push_the_liquid(scene, surge, tmp_path):
    cache_dir = str(tmp_path / "cache")
    scene.frame_start, scene.frame_end = 1, 5
    scene.use_gravity = False
    scene.unit_settings.scale_length = 0.5
    add_box("Water", (0.0, 0.0, 0.0), (0.08, 0.08, 0.08), role="FLUID")
    bpy.ops.object.effector_add(type="WIND", location=(0.0, 0.0, -1.0))
    wind = bpy.context.object
    wind.field.strength = 1.0
    wind.field.keyframe_insert("strength", frame=1)
    wind.field.strength = 3.0
    wind.field.keyframe_insert("strength", frame=5)
    wind.field.flow = 0.0
    wind.field.seed = 9
    scene.surge.solver = "PBF"
    scene.surge.particle_spacing = 0.04
    scene.surge.cache_directory = cache_dir
    (ff,) = _export(surge, scene).force_fields
    assert (ff.name, ff.kind, ff.shape, ff.unit) == ("Wind", "WIND", "PLANE", 0.5)
    assert ff.values["strength"][0] == 1.0 and ff.values["strength"][-1] == 3.0 and len(ff.values["strength"]) == 5
    assert ff.flags["seed"] == 9 and ff.matrices.shape == (1, 4, 4)
    np.testing.assert_allclose(ff.matrices[0][:3, 3], [0.0, 0.0, -0.5], rtol=0, atol=1e-7)
    assert bpy.ops.surge.bake() == {"FINISHED"}
    v = _reader(surge, cache_dir).read_frame(5)["velocity"]
    # the wind blows along its Z (world +Z) with the Bezier-keyed strength s(t) BU/s^2, times 0.5 m/BU:
    # between the integral of the lowest (1) and highest (3) strength over 4 frames
    assert np.all(v[:, 2] > 0.5 * 1.0 * 4 / 24 - 1e-3) and np.all(v[:, 2] < 0.5 * 3.0 * 4 / 24 + 1e-3)
    bpy.ops.object.effector_add(type="MAGNET")
    with pytest.raises(RuntimeError, match="has a Magnet force field, which Surge does not simulate"):
        bpy.ops.surge.bake()


def test_initial_velocity_and_object_motion(scene, surge):
    scene.frame_start, scene.frame_end = 1, 3
    scene.unit_settings.scale_length = 0.5
    water = add_box("Water", (-0.05, -0.05, -0.05), (0.05, 0.05, 0.05), role="FLUID")
    water.surge.initial_velocity = (1.0, 0.0, 2.0)
    (fluid,) = _export(surge, scene).fluids
    np.testing.assert_allclose(fluid.velocity, [0.5, 0.0, 1.0], rtol=0, atol=1e-7)
    assert not np.any(fluid.velocity_gradient)
    water.surge.use_object_motion = True
    water.keyframe_insert("location", frame=1)
    water.location = (0.24, 0.0, 0.0)  # 0.24 BU in 2 frames: 0.12 BU per frame, 2.88 BU/s, 1.44 m/s
    water.keyframe_insert("location", frame=3)
    _linear_keys(water)
    (fluid,) = _export(surge, scene).fluids
    np.testing.assert_allclose(fluid.velocity, [0.5 + 1.44, 0.0, 1.0], rtol=0, atol=1e-5)
    np.testing.assert_allclose(fluid.velocity_gradient, 0.0, rtol=0, atol=1e-6)


@pytest.mark.slow  # a bake of many frames: in the full suite, not the fast layer
def test_resume_across_an_animated_gravity_is_bit_identical(scene, surge, tmp_path):
    scene.frame_start, scene.frame_end = 1, 8
    add_box("Water", (0, 0, 0), (0.06, 0.06, 0.1), role="FLUID")
    add_box("Tank", (0, 0, 0), (0.1, 0.1, 0.3), role="COLLIDER", collider_mode="CONTAINER")
    scene.gravity = (0.0, 0.0, -9.81)
    scene.keyframe_insert("gravity", frame=1)
    scene.gravity = (3.0, 0.0, -5.0)
    scene.keyframe_insert("gravity", frame=8)
    scene.surge.solver = "PBF"
    scene.surge.particle_spacing = 0.02
    scene.surge.checkpoint_interval = 3
    scene.surge.cache_directory = str(tmp_path / "whole")
    description = _export(surge, scene)
    assert description.tracks["gravity"].shape == (8, 3)
    assert bpy.ops.surge.bake() == {"FINISHED"}
    scene.surge.cache_directory = str(tmp_path / "parts")
    assert bpy.ops.surge.bake() == {"FINISHED"}
    assert bpy.ops.surge.bake(resume=True, resume_frame=4) == {"FINISHED"}
    whole, parts = _reader(surge, str(tmp_path / "whole")), _reader(surge, str(tmp_path / "parts"))
    assert [g["from_frame"] for g in parts.manifest["segments"]] == [1, 5]
    for frame in range(5, 9):
        np.testing.assert_array_equal(parts.read_frame(frame)["position"], whole.read_frame(frame)["position"])
        np.testing.assert_array_equal(parts.read_frame(frame)["velocity"], whole.read_frame(frame)["velocity"])
