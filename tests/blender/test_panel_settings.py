"""What the panels offer acts: default cache folders per file and scene, add-on preferences, animatable
settings, vector settings with units, the kill box in the viewport."""

from __future__ import annotations

import itertools
import os

import bpy
import numpy as np
import pytest

from blender_helpers import column_scene, submodule

pytestmark = pytest.mark.blender


def _resolve(surge, scene):
    files, paths = submodule(surge, "bridge.files"), submodule(surge, "bridge.paths")
    return files.resolve_cache_dir(scene, paths.ADDON_ROOT)


@pytest.fixture
def preferences(surge):
    """The add-on's preferences, restored to their defaults afterwards."""
    prefs = bpy.context.preferences.addons[surge.__name__].preferences
    yield prefs
    prefs.bake_threads, prefs.cache_root = 0, ""


def test_default_cache_folder_is_unique_per_file_and_scene(scene, surge, tmp_path):
    """Two scenes of a file, and two files in one folder, bake into different default folders; an
    explicit folder (as older files have) is kept."""
    second = bpy.data.scenes.new("Shot 2")
    blend_a, blend_b = str(tmp_path / "a.blend"), str(tmp_path / "b.blend")
    bpy.ops.wm.save_as_mainfile(filepath=blend_a)
    scene = bpy.data.scenes[scene.name]
    second = bpy.data.scenes["Shot 2"]
    in_a = {_resolve(surge, s) for s in (scene, second)}
    bpy.ops.wm.save_as_mainfile(filepath=blend_b)
    in_b = {_resolve(surge, bpy.data.scenes[s.name]) for s in (scene, second)}
    folders = in_a | in_b
    assert len(folders) == 4, folders
    for folder in folders:  # all beside the .blend files, in surge_cache
        assert os.path.dirname(os.path.dirname(folder)) == str(tmp_path / "surge_cache"), folder
    assert os.path.join(str(tmp_path), "surge_cache", "b", "Scene") in in_b
    # "Shot 2" and "Shot_2" would clean to the same folder name: a hash keeps them apart
    third = bpy.data.scenes.new("Shot_2")
    assert _resolve(surge, third) != _resolve(surge, bpy.data.scenes["Shot 2"])

    # an explicit folder, relative or absolute, is used as it is
    sc = bpy.data.scenes[scene.name]
    sc.surge.cache_directory = "//surge_cache/"
    assert _resolve(surge, sc) == str(tmp_path / "surge_cache")
    sc.surge.cache_directory = str(tmp_path / "mine")
    assert _resolve(surge, sc) == str(tmp_path / "mine")


def test_an_old_file_with_an_explicit_folder_bakes_there(scene, surge, tmp_path):
    column_scene(scene, "//surge_cache/", frames=(1, 2))
    blend = str(tmp_path / "old.blend")
    bpy.ops.wm.save_as_mainfile(filepath=blend)
    bpy.ops.wm.open_mainfile(filepath=blend)
    assert bpy.context.scene.surge.cache_directory == "//surge_cache/"
    assert bpy.ops.surge.bake() == {"FINISHED"}
    reader = submodule(surge, "engine.io.cache").CacheReader(str(tmp_path / "surge_cache"))
    assert reader.frames == [1, 2]


def test_default_cache_folder_bakes_and_plays(scene, surge, tmp_path):
    column_scene(scene, "", frames=(1, 2))
    bpy.ops.wm.save_as_mainfile(filepath=str(tmp_path / "shot.blend"))
    assert bpy.ops.surge.bake() == {"FINISHED"}
    folder = tmp_path / "surge_cache" / "shot" / "Scene"
    assert submodule(surge, "engine.io.cache").CacheReader(str(folder)).frames == [1, 2]
    liquid = bpy.context.scene.surge.liquid_object
    # relative to the file, like the folder: the .blend and its cache move together
    assert liquid.modifiers["Surge Cache"].cache_file.filepath.startswith("//surge_cache/shot/Scene/")


def test_cache_root_preference_holds_the_default_folders(scene, surge, tmp_path, preferences):
    root = tmp_path / "caches"
    preferences.cache_root = str(root)
    os.makedirs(tmp_path / "one")
    os.makedirs(tmp_path / "two")
    bpy.ops.wm.save_as_mainfile(filepath=str(tmp_path / "one" / "shot.blend"))
    first = _resolve(surge, bpy.context.scene)
    bpy.ops.wm.save_as_mainfile(filepath=str(tmp_path / "two" / "shot.blend"))
    second = _resolve(surge, bpy.context.scene)
    # files of the same name in different folders share the root, not a cache
    assert first != second
    for folder in (first, second):
        assert os.path.dirname(os.path.dirname(folder)) == str(root) and folder.endswith(os.sep + "Scene")
    # the panel tells where the default folder is
    default = submodule(surge, "bridge.default_cache").default_cache_dir(bpy.context.scene)
    assert os.path.normpath(default) == second


def test_bake_threads_preference_reaches_the_bake_process(scene, surge, tmp_path, preferences):
    """The child's environment caps numba's threads (read from /proc on Linux, where the tests run)."""
    process = submodule(surge, "bridge.process")
    # 0: numba's own default, whatever the environment says
    assert process.child_environment("/a", "/b", 0).get("NUMBA_NUM_THREADS") == os.environ.get("NUMBA_NUM_THREADS")
    assert process.child_environment("/a", "/b", 3)["NUMBA_NUM_THREADS"] == "3"
    # one OpenBLAS thread: its pool would compete with numba's threads (engine.collision.world.inverse3)
    assert process.child_environment("/a", "/b", 0)["OPENBLAS_NUM_THREADS"] == "1"
    if not os.path.isdir("/proc/self"):
        pytest.skip("reading a process's environment needs /proc")
    preferences.bake_threads = 1
    column_scene(scene, str(tmp_path / "cache"), frames=(1, 2))
    bake = submodule(surge, "bridge.bake")
    session = bake.BakeSession(scene, bpy.context.evaluated_depsgraph_get())
    try:
        with open(f"/proc/{session.process._proc.pid}/environ", "rb") as fh:
            env = dict(item.split(b"=", 1) for item in fh.read().split(b"\0") if b"=" in item)
    finally:
        session.abort()
    assert env[b"NUMBA_NUM_THREADS"] == b"1"


def test_only_animatable_settings_take_keyframes(scene, surge):
    """Blender refuses keyframes on what a bake reads once; the settings read every frame take them."""
    settings = submodule(surge, "engine.settings")
    obj = bpy.data.objects.new("Tap", bpy.data.meshes.new("Tap"))
    scene.collection.objects.link(obj)
    for owner, params in ((scene.surge, settings.parameters()), (obj.surge, settings.object_parameters())):
        for p in params:
            if p.animatable:
                assert owner.keyframe_insert(p.name, frame=1), p.name
            else:
                with pytest.raises(TypeError):
                    owner.keyframe_insert(p.name, frame=1)
    # a keyed viscosity reads back per frame
    scene.surge.dynamic_viscosity = 0.5
    scene.surge.keyframe_insert("dynamic_viscosity", frame=10)
    scene.frame_set(10)
    assert scene.surge.dynamic_viscosity == pytest.approx(0.5)


def test_vector_settings_export_in_metres(scene, surge):
    export = submodule(surge, "bridge.export")
    scene.unit_settings.scale_length = 0.01  # one Blender unit is a centimetre
    scene.surge.use_kill_box = True
    scene.surge.kill_box_min = (-50.0, -50.0, 0.0)
    scene.surge.kill_box_max = (50.0, 50.0, 200.0)
    out = export.settings_from_scene(scene)
    assert out.kill_box_min == pytest.approx((-0.5, -0.5, 0.0)) and out.kill_box_max == pytest.approx((0.5, 0.5, 2.0))
    obj = bpy.data.objects.new("Tap", bpy.data.meshes.new("Tap"))
    obj.surge.velocity = (0.0, 0.0, -100.0)  # 100 cm/s downwards
    assert export.inflow_settings(obj, 0.01).velocity == pytest.approx((0.0, 0.0, -1.0))
    rna = bpy.types.Object.bl_rna.properties["surge"].fixed_type.properties
    assert rna["velocity"].unit == "VELOCITY" and rna["velocity"].array_length == 3
    assert bpy.types.Scene.bl_rna.properties["surge"].fixed_type.properties["kill_box_min"].unit == "LENGTH"


def test_kill_box_is_drawn_as_its_twelve_edges(scene, surge):
    """The viewport draws the kill box's 12 edges (background mode has no GPU to draw with: the geometry
    and the handler's registration are what can be checked here)."""
    viewport = submodule(surge, "panels.viewport")
    assert viewport.is_registered()
    lo, hi = np.array([-1.0, -2.0, 0.0]), np.array([1.0, 2.0, 3.0])
    points = np.array(viewport.kill_box_lines(lo, hi))
    assert points.shape == (24, 3)
    corners = {tuple(c) for c in itertools.product(*zip(lo, hi))}
    assert {tuple(p) for p in points} == corners
    edges = {frozenset((tuple(a), tuple(b))) for a, b in zip(points[0::2], points[1::2])}
    assert len(edges) == 12
    for a, b in edges:  # each edge runs along one axis, the box's full length
        delta = np.abs(np.subtract(b, a))
        axis = int(np.argmax(delta))
        assert np.count_nonzero(delta) == 1 and delta[axis] == (hi - lo)[axis]
    scene.surge.use_kill_box = False
    viewport.draw_kill_box(scene)  # off: draws nothing, touches no GPU


def test_fluid_initial_velocity_is_exported_in_metres_per_second(scene, surge, tmp_path):
    column_scene(scene, str(tmp_path / "cache"), frames=(1, 2))
    scene.unit_settings.scale_length = 0.5  # one Blender unit is half a metre
    bpy.data.objects["Water"].surge.initial_velocity = (2.0, 0.0, 0.0)  # 2 units/s: 1 m/s
    export = submodule(surge, "bridge.export")
    description, _settings = export.export_scene(scene, bpy.context.evaluated_depsgraph_get())
    np.testing.assert_allclose(description.fluids[0].velocity, [1.0, 0.0, 0.0], rtol=0, atol=1e-7)
