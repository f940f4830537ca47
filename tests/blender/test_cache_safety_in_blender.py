"""A bake never destroys what was baked, seen from Blender: a second bake into a held folder, foreign
folders, re-bakes and resumes that fail, the saved file's USD files, a killed bake process.

Each test names in its docstring what the add-on did before these safeguards.
"""

from __future__ import annotations

import os

import bpy
import pytest

from blender_helpers import add_box, column_scene, evaluated_points, snapshot, submodule

pytestmark = pytest.mark.blender


def _liquid_count(frame: int) -> int:
    return evaluated_points(bpy.context.scene.surge.liquid_object, frame)["count"]


def _reopen(blend: str) -> None:
    bpy.ops.wm.open_mainfile(filepath=blend)


def _saved_bake(scene, tmp_path, frames=(1, 3), checkpoints=0):
    """A .blend saved after a bake of 250 particles into ``//cache``; returns (blend path, cache folder)."""
    blend = str(tmp_path / "shot.blend")
    column_scene(scene, "//cache", frames=frames)
    scene.surge.checkpoint_interval = checkpoints
    bpy.ops.wm.save_as_mainfile(filepath=blend)
    assert bpy.ops.surge.bake() == {"FINISHED"}
    bpy.ops.wm.save_mainfile()
    return blend, str(tmp_path / "cache")


def test_a_second_bake_into_a_folder_being_baked_is_refused(scene, surge, tmp_path):
    """Before: the second bake started and both wrote into one folder."""
    bake = submodule(surge, "bridge.bake")
    errors = submodule(surge, "engine.errors")
    cache_dir = str(tmp_path / "cache")
    column_scene(scene, cache_dir, frames=(1, 200))
    session = bake.BakeSession(scene, bpy.context.evaluated_depsgraph_get())
    try:
        with pytest.raises(errors.CacheLockedError, match=f"in use by a bake of scene '{scene.name}' in Blender "
                                                          f"\\(process {os.getpid()}"):
            bake.BakeSession(scene, bpy.context.evaluated_depsgraph_get())
        while not session.finished:
            if any(e.get("event") == "frame" and e["frame"] >= 3 for e in session.poll(timeout=0.5)):
                session.cancel()
        result = session.finish()
    finally:
        session.release()
    assert result.status == "cancelled" and len(result.frames) >= 3
    assert not os.path.exists(os.path.join(cache_dir, "surge.lock"))
    scene.frame_end = 3
    assert bpy.ops.surge.bake() == {"FINISHED"}  # the folder is free again


def test_a_folder_with_foreign_files_is_refused_by_bake_and_free_bake(scene, surge, tmp_path):
    """Before: a user's manifest.json, job/settings.json or cancel.flag in the chosen folder was
    overwritten by a bake and deleted by Free Bake."""
    home = tmp_path / "home"
    (home / "job").mkdir(parents=True)
    mine = {"manifest.json": b'{"project": "mine"}', os.path.join("job", "settings.json"): b"{}",
            "cancel.flag": b"mine", "notes.txt": b"mine"}
    for rel, data in mine.items():
        (home / rel).write_bytes(data)
    column_scene(scene, str(home))
    with pytest.raises(RuntimeError, match="holds a 'manifest.json' that is not a Surge cache's"):
        bpy.ops.surge.bake()
    with pytest.raises(RuntimeError, match="not a Surge cache's"):
        bpy.ops.surge.free_bake()
    os.remove(home / "manifest.json")
    with pytest.raises(RuntimeError, match=r"holds files that are not Surge's \('cancel.flag', 'job', 'notes.txt'\)"):
        bpy.ops.surge.bake()
    with pytest.raises(RuntimeError, match="not Surge's"):
        bpy.ops.surge.free_bake()
    del mine["manifest.json"]
    assert snapshot(str(home)) == mine
    # the .blend's own folder ('//') holds the .blend
    (tmp_path / "project").mkdir()
    bpy.ops.wm.save_as_mainfile(filepath=str(tmp_path / "project" / "shot.blend"))
    bpy.context.scene.surge.cache_directory = "//"
    with pytest.raises(RuntimeError, match=r"not Surge's \('shot.blend'\)"):
        bpy.ops.surge.bake()
    assert os.listdir(tmp_path / "project") == ["shot.blend"]


def test_a_cache_folder_in_the_home_folder_is_expanded(scene, surge, tmp_path, monkeypatch):
    """Before: '~/cache' was taken literally (a folder named '~' under the working directory)."""
    files = submodule(surge, "bridge.files")
    paths = submodule(surge, "bridge.paths")
    monkeypatch.setenv("HOME", str(tmp_path))
    scene.surge.cache_directory = "~/surge_cache"
    assert files.resolve_cache_dir(scene, paths.ADDON_ROOT) == str(tmp_path / "surge_cache")


@pytest.mark.slow  # a bake of many frames: in the full suite, not the fast layer
def test_a_rebake_not_yet_saved_keeps_the_files_the_saved_blend_plays(scene, surge, tmp_path):
    """Before: the re-bake deleted the previous USD folder at once, so the saved .blend (not saved
    again) rendered no liquid."""
    blend, cache_dir = _saved_bake(scene, tmp_path)
    bpy.data.objects["Water"].scale.z = 0.5  # 125 particles
    assert bpy.ops.surge.bake() == {"FINISHED"}
    assert _liquid_count(2) == 125
    assert len(os.listdir(os.path.join(cache_dir, "usd"))) == 2  # the saved file's folder is kept
    _reopen(blend)
    assert _liquid_count(2) == 250  # the saved file plays the bake it was saved with
    bpy.data.objects["Water"].scale.z = 0.5
    assert bpy.ops.surge.bake() == {"FINISHED"}
    bpy.ops.wm.save_mainfile()  # now nothing points at the first bake's files: they go
    assert len(os.listdir(os.path.join(cache_dir, "usd"))) == 1
    _reopen(blend)
    assert _liquid_count(2) == 125


def test_a_rebake_whose_process_dies_leaves_the_previous_bake_playing(scene, surge, tmp_path):
    """Before: the previous USD folder was deleted at the new bake's first frame and the manifest
    said 'baking' for ever after the process died; an old frame that could not be deleted failed
    the re-bake after it had deleted the manifest."""
    bake = submodule(surge, "bridge.bake")
    cache_mod = submodule(surge, "engine.io.cache")
    blend, cache_dir = _saved_bake(scene, tmp_path)
    os.makedirs(os.path.join(cache_dir, "frames", "frame_000020.npz", "held"))  # a file that cannot be deleted
    bpy.data.objects["Water"].scale.z = 0.5
    scene.frame_end = 200
    session = bake.BakeSession(scene, bpy.context.evaluated_depsgraph_get())
    try:
        while not session.finished:
            if any(e.get("event") == "frame" and e["frame"] >= 3 for e in session.poll(timeout=0.5)):
                session.process.kill()  # as an out-of-memory kill would
        with pytest.raises(bake.BakeFailedError, match="stopped unexpectedly"):
            session.finish()
    finally:
        session.release()
    manifest = cache_mod.CacheReader(cache_dir).manifest
    assert manifest["status"] == "failed" and manifest["run_id"] == session.run_id
    _reopen(blend)
    assert _liquid_count(3) == 250
    assert bpy.ops.surge.bake() == {"FINISHED"}  # the undeletable old file no longer fails a re-bake
    assert _liquid_count(3) == 250


@pytest.mark.slow  # a bake of many frames: in the full suite, not the fast layer
def test_a_resume_over_an_unreadable_frame_is_refused_and_the_bake_keeps_playing(scene, surge, tmp_path):
    """Before: the resume dropped the frames after the checkpoint and the previous USD folder, then
    failed on the truncated frame with an uncaught BadZipFile; the saved .blend played nothing."""
    cache_mod = submodule(surge, "engine.io.cache")
    blend, cache_dir = _saved_bake(scene, tmp_path, frames=(1, 8), checkpoints=3)
    reader = cache_mod.CacheReader(cache_dir)
    with open(reader.frame_path(2), "r+b") as fh:
        fh.truncate(100)
    before = {k: v for k, v in snapshot(cache_dir).items() if not k.startswith("job")}
    with pytest.raises(RuntimeError, match=r"frame_000002\.npz.*bake again from the start"):
        bpy.ops.surge.bake(resume=True)
    assert {k: v for k, v in snapshot(cache_dir).items() if not k.startswith("job")} == before
    assert _liquid_count(8) == 250
    _reopen(blend)
    assert _liquid_count(8) == 250


def test_a_resume_after_a_moved_wall_asks_first(scene, surge, tmp_path):
    """Before: the scene was never compared; a wall moved into the liquid resumed without a word."""
    cache_mod = submodule(surge, "engine.io.cache")
    cache_dir = str(tmp_path / "cache")
    add_box("Water", (0, 0, 0), (0.06, 0.06, 0.1), role="FLUID")
    tank = add_box("Tank", (0, 0, 0), (0.1, 0.1, 0.3), role="COLLIDER", collider_mode="CONTAINER")
    scene.frame_start, scene.frame_end = 1, 8
    scene.surge.particle_spacing = 0.02
    scene.surge.checkpoint_interval = 3
    scene.surge.cache_directory = cache_dir
    assert bpy.ops.surge.bake() == {"FINISHED"}
    before = cache_mod.CacheReader(cache_dir).manifest
    tank.scale.x = 0.5  # the wall cuts through the liquid
    with pytest.raises(RuntimeError, match=r"the scene changed since the cached frames were baked "
                                           r"\(Container 'Tank' changed\)"):
        bpy.ops.surge.bake(resume=True)
    assert cache_mod.CacheReader(cache_dir).manifest == before
    assert bpy.ops.surge.bake(resume=True, if_settings_changed="RESUME") == {"FINISHED"}
    manifest = cache_mod.CacheReader(cache_dir).manifest
    assert [g["from_frame"] for g in manifest["segments"]] == [1, 8] and manifest["status"] == "complete"


def test_stages_and_free_operators_respect_the_folder_lock(scene, surge, tmp_path):
    """Before: Bake Whitewater, Free Surface and Free Whitewater wrote into or deleted from a cache
    folder another process was baking into, and a bake started while a whitewater run wrote there."""
    cache_mod = submodule(surge, "engine.io.cache")
    whitewater = submodule(surge, "bridge.whitewater")
    errors = submodule(surge, "engine.errors")
    cache_dir = str(tmp_path / "cache")
    column_scene(scene, cache_dir, frames=(1, 3))
    assert bpy.ops.surge.bake() == {"FINISHED"}
    before = snapshot(cache_dir)
    with cache_mod.CacheLock(cache_dir, "a bake on the farm"):
        for op in (bpy.ops.surge.bake_whitewater, bpy.ops.surge.free_bake):
            with pytest.raises(RuntimeError, match="is in use by a bake on the farm"):
                op()
        for op in (bpy.ops.surge.free_whitewater, bpy.ops.surge.free_surface):  # none made: greyed out
            with pytest.raises(RuntimeError, match="Nothing to free"):
                op()
        assert {k: v for k, v in snapshot(cache_dir).items() if k != "surge.lock"} == before
    session = whitewater.WhitewaterSession(scene)
    try:
        with pytest.raises(errors.CacheLockedError, match=f"in use by the whitewater of scene '{scene.name}'"):
            submodule(surge, "bridge.bake").BakeSession(scene, bpy.context.evaluated_depsgraph_get())
        while not session.finished:
            session.poll(timeout=0.5)
        assert session.finish().status == "complete"
    finally:
        if not session.finished:
            session.abort()
    assert not os.path.exists(os.path.join(cache_dir, "surge.lock"))
    assert bpy.ops.surge.free_whitewater() == {"FINISHED"}
