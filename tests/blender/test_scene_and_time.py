"""State that survives renaming the scene, the simulation's own frame range and time scale, and Ctrl+Z after a
bake (then saving) losing no baked file."""

from __future__ import annotations

import os
import time

import bpy
import pytest

from blender_helpers import bake_state, column_scene, fake_cache, submodule

pytestmark = pytest.mark.blender


def test_the_default_cache_folder_survives_renaming_the_scene(scene, surge, tmp_path):
    files = submodule(surge, "bridge.files")
    paths = submodule(surge, "bridge.paths")
    default_cache = submodule(surge, "bridge.default_cache")
    column_scene(scene, "", frames=(1, 2))
    bpy.ops.wm.save_as_mainfile(filepath=str(tmp_path / "shot.blend"))
    scene = bpy.context.scene
    before = files.resolve_cache_dir(scene, paths.ADDON_ROOT)
    default_cache.keep_folder_name(scene)  # what the first bake does
    scene.name = "Shot 10"
    assert files.resolve_cache_dir(scene, paths.ADDON_ROOT) == before
    # a full copy of the scene gets a folder of its own, the original keeps its one
    bpy.context.window.scene = scene
    bpy.ops.scene.new(type="FULL_COPY")
    copy = bpy.context.scene
    assert copy != scene
    scene.name = scene.surge.cache_folder_name  # the original, under its first name again
    assert files.resolve_cache_dir(scene, paths.ADDON_ROOT) == before
    assert files.resolve_cache_dir(copy, paths.ADDON_ROOT) != before


def test_the_bake_state_follows_the_scene_through_renaming(scene, surge):
    state = bake_state(surge, scene)
    state.is_baking, state.status = True, "Frame 3 of 9"
    try:
        scene.name = "Renamed"
        assert submodule(surge, "bridge.bake_state").is_baking(scene)
        assert not bpy.ops.surge.bake.poll()  # still greyed out: this scene bakes
    finally:
        state.is_baking = False


def test_own_frame_range_and_time_scale_reach_the_engine(scene, surge, tmp_path):
    export = submodule(surge, "bridge.export")
    errors = submodule(surge, "engine.errors")
    column_scene(scene, str(tmp_path / "cache"), frames=(1, 40))
    scene.surge.use_frame_range = True
    scene.surge.frame_start, scene.surge.frame_end = 5, 12
    scene.surge.time_scale = 0.5
    description, _settings = export.export_scene(scene, bpy.context.evaluated_depsgraph_get())
    assert (description.frame_start, description.frame_end) == (5, 12)
    assert description.fps == pytest.approx(48.0)  # 24 fps at half speed: a frame simulates 1/48 s
    assert export.frame_range_note(scene) == ""
    scene.surge.frame_end = 60  # past the scene's 40: said, not refused
    assert "reach past the scene's frame range 1-40" in export.frame_range_note(scene)
    scene.surge.frame_end = 4
    with pytest.raises(errors.InvalidSceneError, match=r"End frame \(4\) lies before its Start frame \(5\)"):
        export.export_scene(scene, bpy.context.evaluated_depsgraph_get())
    scene.surge.use_frame_range = False
    assert export.bake_range(scene) == (1, 40)
    # the Outdated mark sees a change of range or time scale against the cache's manifest
    fake_cache(surge, scene.surge.cache_directory, frames=(1, 2, 3))
    cache_state = submodule(surge, "bridge.cache_state")
    paths = submodule(surge, "bridge.paths")
    reasons = cache_state.outdated(scene, paths.ADDON_ROOT, None, export.bake_range(scene), export.simulated_fps(scene))
    assert "frame range (baked 1-3)" in reasons and "frame rate or time scale" in reasons


@pytest.mark.slow  # a bake in a child process
def test_a_scene_renamed_during_its_bake_keeps_its_bake_and_progress(scene, surge, tmp_path):
    """The bake runs in its own frames (5-9) at half speed; renaming the scene halfway neither stops it nor
    orphans its state."""
    bake = submodule(surge, "bridge.bake")
    column_scene(scene, "", frames=(1, 20))
    scene.surge.use_frame_range = True
    scene.surge.frame_start, scene.surge.frame_end = 5, 9
    scene.surge.time_scale = 0.5
    bpy.ops.wm.save_as_mainfile(filepath=str(tmp_path / "shot.blend"))
    scene = bpy.context.scene
    session = bake.BakeSession(scene, bpy.context.evaluated_depsgraph_get())
    renamed = False
    while not session.finished:
        session.poll(timeout=0.2)
        if not renamed and bake_state(surge, scene).particles:
            scene.name = "Shot Renamed"
            renamed = True
        time.sleep(0.02)
    result = session.finish()
    assert renamed and result.status == "complete", result.message
    state = bake_state(surge, scene)
    assert not state.is_baking and (state.kind, state.frame_start, state.frame_end) == ("Bake", 5, 9)
    cache_dir = str(tmp_path / "surge_cache" / "shot" / "Scene")  # the folder of the name it first baked under
    reader = submodule(surge, "engine.io.cache").CacheReader(cache_dir)
    assert reader.frames == [5, 6, 7, 8, 9] and reader.manifest["fps"] == pytest.approx(48.0)
    assert scene.surge.liquid_object is not None


@pytest.mark.slow  # two bakes in a child process
def test_undo_after_a_bake_then_saving_loses_no_baked_file(scene, surge, tmp_path):
    """Ctrl+Z after a bake takes the liquid back to the previous bake's files (the bake is not an undo step);
    saving then must keep the new bake's files, and Load Baked Liquid shows it again."""
    files = submodule(surge, "bridge.files")
    cache_state = submodule(surge, "bridge.cache_state")
    paths = submodule(surge, "bridge.paths")
    blend = str(tmp_path / "shot.blend")
    column_scene(scene, "//surge_cache/", frames=(1, 2))
    bpy.ops.wm.save_as_mainfile(filepath=blend)
    assert bpy.ops.surge.bake() == {"FINISHED"}
    bpy.ops.wm.save_mainfile()
    first = os.path.dirname(bpy.path.abspath(
        bpy.context.scene.surge.liquid_object.modifiers["Surge Cache"].cache_file.filepath))
    bpy.ops.ed.undo_push(message="after the first bake")
    bpy.context.scene.surge.dynamic_viscosity = 0.002
    bpy.ops.ed.undo_push(message="an edit")
    time.sleep(1.1)  # the second bake's folder is newer by the file system's clock
    assert bpy.ops.surge.bake() == {"FINISHED"}
    cache_dir = str(tmp_path / "surge_cache")
    second = [d for d in files.usd_bake_dirs(cache_dir) if os.path.normpath(d) != os.path.normpath(first)]
    assert len(second) == 1
    bpy.ops.ed.undo()
    scene = bpy.context.scene
    shown = os.path.dirname(bpy.path.abspath(scene.surge.liquid_object.modifiers["Surge Cache"].cache_file.filepath))
    assert os.path.normpath(shown) == os.path.normpath(first)  # undo went back past the second bake
    assert "older bake" in cache_state.playing(scene, paths.ADDON_ROOT, os.path.join(shown, "liquid_000001.usdc"))
    bpy.ops.wm.save_mainfile()
    reader = submodule(surge, "engine.io.cache").CacheReader(cache_dir)
    for frame in reader.frames:  # every frame the cache lists still has its point file
        assert os.path.isfile(files.usd_frame_path(second[0], frame)), frame
    assert bpy.ops.surge.load_baked() == {"FINISHED"}
    now = bpy.path.abspath(bpy.context.scene.surge.liquid_object.modifiers["Surge Cache"].cache_file.filepath)
    assert os.path.normpath(os.path.dirname(now)) == os.path.normpath(second[0])
