"""Baking through ``bpy.ops.surge.bake()`` in background mode, playback, reload, refusals, free bake."""

from __future__ import annotations

import json
import os
import time
import types

import bpy
import numpy as np
import pytest

from blender_helpers import (add_box, bake_state, column_scene, evaluated_points, run_fresh_blender, snapshot,
                             submodule)

pytestmark = pytest.mark.blender


def _liquids():
    return [o for o in bpy.data.objects if o.type == "POINTCLOUD"]


def _cache(surge, cache_dir):
    return submodule(surge, "engine.io.cache").CacheReader(cache_dir)


def _by_id(points: dict, name: str) -> np.ndarray:
    return points[name][np.argsort(points["id"])]


@pytest.mark.slow  # a bake in a child process or a fresh Blender
def test_bake_in_background_mode_plays_the_cache(scene, surge, tmp_path):
    cache_dir = str(tmp_path / "cache")
    column_scene(scene, cache_dir)
    assert bpy.app.background
    assert bpy.ops.surge.bake() == {"FINISHED"}

    reader = _cache(surge, cache_dir)
    assert reader.frames == [1, 2, 3] and reader.manifest["status"] == "complete"
    state = bake_state(surge, scene)
    assert not state.is_baking and "Baked frames 1-3" in state.status
    liquid = scene.surge.liquid_object
    assert _liquids() == [liquid] and liquid.name == "Surge Liquid"
    for frame in (1, 3):
        points = evaluated_points(liquid, frame)
        cached = reader.read_frame(frame)
        assert points["count"] == len(cached["id"]) == 250
        assert {"velocity", "density", "id", "radius"} <= set(points)
        order = np.argsort(cached["id"])
        # float32 all the way (cache -> USD -> Blender): equal to float32 rounding of metre values
        np.testing.assert_allclose(_by_id(points, "position"), cached["position"][order], rtol=1e-6, atol=1e-7)
        np.testing.assert_allclose(_by_id(points, "velocity"), cached["velocity"][order], rtol=1e-6, atol=1e-6)
        np.testing.assert_allclose(_by_id(points, "density"), cached["density"][order], rtol=1e-6, atol=1e-3)
        np.testing.assert_allclose(points["radius"], 0.01, rtol=1e-6)  # half the 2 cm spacing
    # the column has started to fall: frame 3 differs from frame 1
    assert not np.allclose(evaluated_points(liquid, 1)["position"], evaluated_points(liquid, 3)["position"])


@pytest.mark.slow  # a bake in a child process or a fresh Blender
def test_second_bake_updates_the_same_liquid(scene, surge, tmp_path):
    cache_dir = str(tmp_path / "cache")
    column_scene(scene, cache_dir)
    bpy.ops.surge.bake()
    liquid = scene.surge.liquid_object
    first_file = liquid.modifiers["Surge Cache"].cache_file.filepath
    assert evaluated_points(liquid, 2)["count"] == 250

    bpy.data.objects["Water"].scale.z = 0.5  # a column half as tall: 125 particles
    bpy.ops.surge.bake()
    assert _liquids() == [liquid] and scene.surge.liquid_object == liquid
    assert len(bpy.data.cache_files) == 1
    assert liquid.modifiers["Surge Cache"].cache_file.filepath != first_file
    for frame in (1, 2, 3):
        assert evaluated_points(liquid, frame)["count"] == 125, frame  # no stale frame from the first bake
    # the first bake's point files are gone, only the current bake's remain
    usd_root = os.path.join(cache_dir, "usd")
    assert len(os.listdir(usd_root)) == 1


@pytest.mark.slow  # a bake in a child process or a fresh Blender
def test_saved_file_plays_in_a_fresh_blender_without_surge(scene, surge, tmp_path):
    blend = str(tmp_path / "shot.blend")
    column_scene(scene, "//surge_cache/")
    bpy.ops.wm.save_as_mainfile(filepath=blend)
    bpy.ops.surge.bake()
    bpy.ops.wm.save_as_mainfile(filepath=blend)
    cache_dir = str(tmp_path / "surge_cache")
    reader = _cache(surge, cache_dir)
    # stored relative to the .blend, so the project folder can move
    assert scene.surge.liquid_object.modifiers["Surge Cache"].cache_file.filepath.startswith("//surge_cache")

    script = f"""
import json, sys
import bpy
import numpy as np
bpy.ops.wm.open_mainfile(filepath={blend!r})
assert not hasattr(bpy.types.Scene, "surge"), "Surge is installed in the fresh Blender"
loaded = [name for name in sys.modules if "surge" in name or name.count(".") >= 2 and name.startswith("bl_ext.")]
assert not loaded, f"extensions were loaded: {{loaded}}"
scene = bpy.context.scene
obj = bpy.data.objects["Surge Liquid"]
out = {{"material": [s.material.name if s.material else None for s in obj.material_slots]}}
for frame in (1, 3):
    scene.frame_set(frame)
    data = obj.evaluated_get(bpy.context.evaluated_depsgraph_get()).data
    entry = {{"count": len(data.points), "attributes": sorted(a.name for a in data.attributes)}}
    for name, width in (("position", 3), ("velocity", 3), ("density", 1), ("id", 1)):
        attr = data.attributes[name]
        buf = np.empty(len(attr.data) * width)
        attr.data.foreach_get("vector" if width == 3 else "value", buf)
        entry[name] = buf.tolist()
    out[frame] = entry
print("RESULT " + json.dumps(out))
"""
    proc = run_fresh_blender(script)
    assert proc.returncode == 0, proc.stderr[-3000:]
    line = [x for x in proc.stdout.splitlines() if x.startswith("RESULT ")][-1]
    result = json.loads(line[len("RESULT "):])
    assert result["material"] == ["Surge Water"]
    for frame in (1, 3):
        got = result[str(frame)]
        cached = reader.read_frame(frame)
        assert got["count"] == len(cached["id"]) == 250
        assert {"position", "velocity", "density", "id", "radius"} <= set(got["attributes"])
        ids = np.array(got["id"], dtype=np.int64)
        order = np.argsort(ids)
        want = np.argsort(cached["id"])
        np.testing.assert_array_equal(ids[order], cached["id"][want])
        # float32 values through USD: equal to float32 rounding
        np.testing.assert_allclose(np.reshape(got["position"], (-1, 3))[order], cached["position"][want],
                                   rtol=1e-6, atol=1e-7)
        np.testing.assert_allclose(np.reshape(got["velocity"], (-1, 3))[order], cached["velocity"][want],
                                   rtol=1e-6, atol=1e-6)
        np.testing.assert_allclose(np.asarray(got["density"])[order], cached["density"][want], rtol=1e-6)


@pytest.fixture
def earlier_bake(scene, surge, tmp_path):
    """A scene with a finished bake, and a snapshot of every file of that bake."""
    cache_dir = str(tmp_path / "cache")
    column_scene(scene, cache_dir)
    assert bpy.ops.surge.bake() == {"FINISHED"}
    return cache_dir, snapshot(cache_dir), scene.surge.liquid_object.modifiers["Surge Cache"].cache_file.filepath


def _fluid_without_faces():
    mesh = bpy.data.meshes.new("Puddle")
    mesh.from_pydata([(0.01, 0.01, 0.01), (0.05, 0.01, 0.01), (0.01, 0.05, 0.01)], [(0, 1)], [])
    obj = bpy.data.objects.new("Puddle", mesh)
    bpy.context.scene.collection.objects.link(obj)
    obj.surge.role = "FLUID"


def _cache_path_blocked_by_a_file(tmp_path):
    blocker = tmp_path / "not_a_folder"
    blocker.write_text("a file where the cache folder's parent should be")
    bpy.context.scene.surge.cache_directory = str(blocker / "cache")


def _too_many_particles(_tmp_path):
    water = bpy.data.objects["Water"]
    water.scale = (40.0, 40.0, 40.0)  # 4 x 4 x 8 m of water
    bpy.data.objects["Tank"].scale = (80.0, 80.0, 80.0)
    bpy.context.scene.surge.particle_spacing = 0.0005


@pytest.mark.parametrize("spoil, message", [
    (lambda tmp_path: _fluid_without_faces(), "Fluid 'Puddle' has no faces"),
    (_cache_path_blocked_by_a_file, "is not writable"),
    (_too_many_particles, "Increase the particle spacing"),
], ids=["fluid-without-faces", "unwritable-cache", "too-many-particles"])
@pytest.mark.slow  # a bake in a child process or a fresh Blender
def test_bad_input_is_refused_and_keeps_the_earlier_bake(earlier_bake, surge, tmp_path, spoil, message):
    cache_dir, before, shown = earlier_bake
    spoil(tmp_path)
    with pytest.raises(RuntimeError, match=message):
        bpy.ops.surge.bake()
    assert snapshot(cache_dir) == before
    scene = bpy.context.scene
    assert not bake_state(surge, scene).is_baking
    assert scene.surge.liquid_object.modifiers["Surge Cache"].cache_file.filepath == shown


def test_unsupported_objects_are_all_named_at_once(scene, surge, tmp_path):
    column_scene(scene, str(tmp_path / "cache"))
    tap = bpy.data.objects.new("Tap", bpy.data.meshes.new("Tap"))  # an inflow without faces
    tap.data.from_pydata([(0, 0, 0.25), (0.02, 0, 0.25)], [(0, 1)], [])
    bpy.context.scene.collection.objects.link(tap)
    tap.surge.role = "INFLOW"
    bpy.data.objects.new("Lamp", bpy.data.lights.new("Lamp", "POINT")).surge.role = "COLLIDER"
    bpy.context.scene.collection.objects.link(bpy.data.objects["Lamp"])
    with pytest.raises(RuntimeError) as info:
        bpy.ops.surge.bake()
    text = str(info.value)
    for name in ("'Tap'", "'Lamp'"):
        assert name in text, name
    assert "Inflow 'Tap' has no faces" in text and "without geometry" in text
    assert not os.path.exists(tmp_path / "cache")  # refused before the folder was created


def test_unit_scale_and_transforms_reach_the_engine_in_metres(scene, surge, tmp_path):
    column_scene(scene, str(tmp_path / "cache"))
    export = submodule(surge, "bridge.export")
    scene.unit_settings.scale_length = 0.01  # centimetres: the 0.1 BU wide water is 1 mm
    bpy.data.objects["Water"].location.x = 0.02
    scene.gravity = (0.0, 0.0, -981.0)
    description, _settings = export.export_scene(scene, bpy.context.evaluated_depsgraph_get())
    verts = description.fluids[0].mesh.vertices
    np.testing.assert_allclose(verts.min(axis=0), [0.0002, 0.0, 0.0], atol=1e-9)
    np.testing.assert_allclose(verts.max(axis=0), [0.0012, 0.001, 0.002], atol=1e-9)
    np.testing.assert_allclose(description.gravity, [0, 0, -9.81], rtol=1e-6)
    scene.use_gravity = False
    description, _settings = export.export_scene(scene, bpy.context.evaluated_depsgraph_get())
    assert not description.gravity.any()


def test_relative_cache_folder_needs_a_saved_file(scene, surge):
    column_scene(scene, "//surge_cache/")
    with pytest.raises(RuntimeError, match="has not been saved yet"):
        bpy.ops.surge.bake()


@pytest.mark.slow  # a bake in a child process or a fresh Blender
def test_free_bake_removes_only_surge_files(earlier_bake):
    cache_dir, before, _shown = earlier_bake
    assert any(p.endswith(".usdc") for p in before) and "manifest.json" in before
    foreign = {"notes.txt": b"mine", os.path.join("frames", "keep.npz"): b"not a frame",
               os.path.join("usd", "readme.txt"): b"mine too", os.path.join("job", "render.sh"): b"echo"}
    for rel, data in foreign.items():
        with open(os.path.join(cache_dir, rel), "wb") as fh:
            fh.write(data)
    assert bpy.ops.surge.free_bake() == {"FINISHED"}
    assert snapshot(cache_dir) == foreign
    # the liquid stays, pointing at nothing, so a new bake reuses it
    liquid = bpy.context.scene.surge.liquid_object
    assert liquid is not None and liquid.modifiers["Surge Cache"].cache_file.filepath == ""
    # without its manifest the folder is no longer provably Surge's: a bake there is refused until
    # the user's files are gone
    with pytest.raises(RuntimeError, match="holds files that are not Surge's"):
        bpy.ops.surge.bake()
    assert snapshot(cache_dir) == foreign
    for rel in foreign:
        os.remove(os.path.join(cache_dir, rel))
    assert bpy.ops.surge.bake() == {"FINISHED"}
    assert _liquids() == [liquid] and evaluated_points(liquid, 2)["count"] == 250


@pytest.mark.slow  # a bake in a child process or a fresh Blender
def test_cancel_keeps_the_frames_baked_so_far(scene, surge, tmp_path):
    """What Esc does in the modal operator, driven directly (background mode has no events)."""
    bake = submodule(surge, "bridge.bake")
    cache_dir = str(tmp_path / "cache")
    column_scene(scene, cache_dir, frames=(1, 200))
    session = bake.BakeSession(scene, bpy.context.evaluated_depsgraph_get())
    assert bake_state(surge, scene).is_baking
    while not session.finished:
        events = session.poll(timeout=0.5)
        if any(e.get("event") == "frame" and e["frame"] >= 3 for e in events):
            session.cancel()
    result = session.finish()
    assert result.status == "cancelled" and 3 <= len(result.frames) < 200
    assert not bake_state(surge, scene).is_baking and not os.path.exists(os.path.join(cache_dir, "cancel.flag"))
    assert _cache(surge, cache_dir).manifest["status"] == "cancelled"
    liquid = scene.surge.liquid_object
    assert evaluated_points(liquid, result.frames[-1])["count"] == 250


def _conversion_only(bake, files, scene, cache_dir):
    """A BakeSession reduced to its cache-to-USD half (no export, no process)."""
    return bake.BakeSession.playback(scene, cache_dir, radius=0.01)


def _child_writes(surge, session, frames, radius=0.01, fps=24.0):
    """What the bake process does as it caches ``frames``: write their USD point files (with Blender's pxr,
    which the bake process is given on its path)."""
    submodule(surge, "bridge.usd").import_pxr()
    reader = submodule(surge, "engine.io.cache").CacheReader(session.cache_dir)
    writer = submodule(surge, "engine.io.usd").PointsWriter(session.usd_dir, radius)
    for frame in frames:
        writer(frame, reader.read_frame(frame))


def test_particle_counts_may_change_from_frame_to_frame(scene, surge, tmp_path):
    """The playback path on its own: a cache with 10, 7 and 12 particles plays exactly those counts."""
    cache_mod = submodule(surge, "engine.io.cache")
    bake = submodule(surge, "bridge.bake")
    files = submodule(surge, "bridge.files")
    scene.surge.cache_directory = str(tmp_path / "cache")
    writer = cache_mod.CacheWriter(str(tmp_path / "cache"), {"particle_radius": 0.01, "frame_start": 1,
                                                             "frame_end": 3})
    rng = np.random.default_rng(7)
    for frame, n in ((1, 10), (2, 7), (3, 12)):
        writer.write_frame(frame, {"position": rng.random((n, 3)), "velocity": np.full((n, 3), frame),
                                   "density": np.full(n, 1000.0 + frame), "id": np.arange(n) + 100 * frame,
                                   "age": np.zeros(n)})
    writer.finish("complete")

    session = _conversion_only(bake, files, scene, str(tmp_path / "cache"))
    _child_writes(surge, session, (1, 2, 3))
    session._convert(budget=float("inf"))
    liquid = scene.surge.liquid_object
    for frame, n in ((1, 10), (2, 7), (3, 12)):
        points = evaluated_points(liquid, frame)
        assert points["count"] == n, frame
        np.testing.assert_array_equal(np.sort(points["id"]), np.arange(n) + 100 * frame)
        np.testing.assert_allclose(points["velocity"], frame)
        np.testing.assert_allclose(points["density"], 1000.0 + frame)


def test_a_frame_baked_while_it_is_shown_replaces_what_was_shown(scene, surge, tmp_path):
    """During a modal bake the viewport may sit on a frame whose file appears later."""
    cache_mod = submodule(surge, "engine.io.cache")
    bake = submodule(surge, "bridge.bake")
    files = submodule(surge, "bridge.files")
    cache_dir = str(tmp_path / "cache")
    writer = cache_mod.CacheWriter(cache_dir, {"particle_radius": 0.01})

    def frame(n, value):
        return {"position": np.full((n, 3), value), "velocity": np.zeros((n, 3)), "density": np.ones(n),
                "id": np.arange(n), "age": np.zeros(n)}

    writer.write_frame(1, frame(4, 0.1))
    session = _conversion_only(bake, files, scene, cache_dir)
    _child_writes(surge, session, (1,))
    session._convert(budget=float("inf"))
    liquid = scene.surge.liquid_object
    assert evaluated_points(liquid, 2)["count"] == 0  # no file for frame 2 yet (Blender warns and shows nothing)
    writer.write_frame(2, frame(6, 0.2))
    _child_writes(surge, session, (2,))
    session._convert(budget=float("inf"))
    # no frame change (a viewport that just redraws): the conversion itself must ask for a re-read
    depsgraph = bpy.context.evaluated_depsgraph_get()
    depsgraph.update()
    data = liquid.evaluated_get(depsgraph).data
    assert len(data.points) == 6
    position = np.empty(18)
    data.attributes["position"].data.foreach_get("vector", position)
    np.testing.assert_allclose(position, 0.2, rtol=1e-6)


def test_the_fluid_is_exported_with_its_modifiers_applied(scene, surge, tmp_path):
    column_scene(scene, str(tmp_path / "cache"))
    water = bpy.data.objects["Water"]
    array = water.modifiers.new("Twice", "ARRAY")
    array.count, array.use_relative_offset, array.relative_offset_displace = 2, True, (0.5, 0.0, 0.0)
    export = submodule(surge, "bridge.export")
    description, _settings = export.export_scene(scene, bpy.context.evaluated_depsgraph_get())
    verts = description.fluids[0].mesh.vertices
    np.testing.assert_allclose(verts.max(axis=0), [0.15, 0.1, 0.2], atol=1e-7)  # 1.5 widths along X
    assert len(description.fluids[0].mesh.triangles) == 2 * 12
    assert water.evaluated_get(bpy.context.evaluated_depsgraph_get()).data is not None  # to_mesh cleared


class _FakeWindowManager:
    windows = ()

    def __init__(self):
        self.removed = []

    def event_timer_remove(self, timer):
        self.removed.append(timer)


@pytest.mark.slow  # a bake in a child process or a fresh Blender
def test_modal_bake_cancels_on_escape_and_keeps_frames(scene, surge, tmp_path):
    """The modal operator's event handling, called as Blender would (there are no events headless)."""
    bake = submodule(surge, "bridge.bake")
    op_cls = bpy.types.SURGE_OT_bake
    cache_dir = str(tmp_path / "cache")
    column_scene(scene, cache_dir, frames=(1, 200))
    reports = []
    op = types.SimpleNamespace(_session=bake.BakeSession(scene, bpy.context.evaluated_depsgraph_get()),
                               _timer=object(), report=lambda kind, text: reports.append((kind, text)))
    op._stop = types.MethodType(op_cls._stop, op)
    op._finish = types.MethodType(op_cls._finish, op)
    context = types.SimpleNamespace(window_manager=_FakeWindowManager(), scene=scene)
    timer = types.SimpleNamespace(type="TIMER", value="NOTHING")
    assert op_cls.modal(op, context, types.SimpleNamespace(type="MOUSEMOVE", value="NOTHING")) == {"PASS_THROUGH"}
    result = {"PASS_THROUGH"}
    while result == {"PASS_THROUGH"}:
        time.sleep(0.05)
        result = op_cls.modal(op, context, timer)
        state = bake_state(surge, scene)
        if state.progress > 0 and not op._session.process.cancel_requested_at:
            assert state.is_baking and state.status.startswith("Frame")
            assert op_cls.modal(op, context, types.SimpleNamespace(type="ESC", value="PRESS")) == {"RUNNING_MODAL"}
    assert result == {"FINISHED"}
    assert context.window_manager.removed == [op._timer]
    assert reports and reports[-1][0] == {"WARNING"} and "Bake cancelled" in reports[-1][1]
    assert not bake_state(surge, scene).is_baking
    frames = submodule(surge, "engine.io.cache").CacheReader(cache_dir).frames
    assert 2 <= len(frames) < 200
    assert evaluated_points(scene.surge.liquid_object, frames[-1])["count"] == 250


@pytest.mark.slow  # a bake in a child process or a fresh Blender
def test_hybrid_solver_bakes_through_the_operator(scene, surge, tmp_path):
    """Scene.surge.solver = 'HYBRID' with its interface settings: a 0.36 m column at 2 cm spacing,
    deep enough for a grid part under the interface (cells of one spacing, interface 0.14 m under the
    surface), baked for two frames."""
    cache_dir = str(tmp_path / "cache")
    add_box("Water", (0, 0, 0), (0.1, 0.1, 0.36), role="FLUID")
    add_box("Tank", (0, 0, 0), (0.1, 0.1, 0.45), role="COLLIDER", collider_mode="CONTAINER")
    scene.frame_start, scene.frame_end = 1, 2
    scene.surge.particle_spacing = 0.02
    scene.surge.cache_directory = cache_dir
    scene.surge.solver = "HYBRID"
    scene.surge.hybrid_interface_mode = "AUTO"
    scene.surge.hybrid_interface_depth = 0.05
    scene.surge.hybrid_cell_factor = 1.0
    scene.surge.hybrid_pressure_solver = "SOR"
    assert bpy.ops.surge.bake() == {"FINISHED"}
    reader = _cache(surge, cache_dir)
    assert reader.frames == [1, 2] and reader.manifest["status"] == "complete"
    assert reader.manifest["solver"] == "HYBRID"
    settings = reader.manifest["settings"]
    assert settings["hybrid_pressure_solver"] == "SOR" and settings["hybrid_cell_factor"] == 1.0
    liquid = scene.surge.liquid_object
    points = evaluated_points(liquid, 2)
    assert points["count"] == len(reader.read_frame(2)["id"]) == 5 * 5 * 18
    # every kind is written: the markers deep in the column are in the frame, at rest within 1 cm/s
    z = _by_id(points, "position")[:, 2]
    speed = np.linalg.norm(_by_id(points, "velocity"), axis=1)
    assert z.min() < 0.02 and speed[z < 0.1].max() < 0.01
