"""Checkpoints and Resume from Blender: after a cancel, with changed settings, and with nothing to resume."""

from __future__ import annotations

import bpy
import numpy as np
import pytest

from blender_helpers import add_box, bake_state, evaluated_points, submodule

pytestmark = pytest.mark.blender


def _small_scene(sc, cache_dir, frames=(1, 8)):
    """45 particles (3 x 3 x 5 at 2 cm) of PBF liquid in a tank, checkpoints every 3 frames."""
    add_box("Water", (0, 0, 0), (0.06, 0.06, 0.1), role="FLUID")
    add_box("Tank", (0, 0, 0), (0.1, 0.1, 0.3), role="COLLIDER", collider_mode="CONTAINER")
    sc.frame_start, sc.frame_end = frames
    sc.surge.solver = "PBF"
    sc.surge.particle_spacing = 0.02
    sc.surge.checkpoint_interval = 3
    sc.surge.cache_directory = cache_dir


def _cancelled_bake(surge, scene, after: int):
    bake = submodule(surge, "bridge.bake")
    session = bake.BakeSession(scene, bpy.context.evaluated_depsgraph_get())
    while not session.finished:
        events = session.poll(timeout=0.5)
        if any(e.get("event") == "frame" and e["frame"] >= after for e in events):
            session.cancel()
    return session.finish()


@pytest.mark.slow  # a bake in a child process or a fresh Blender
def test_resume_after_cancel_gives_the_frames_of_an_uninterrupted_bake(scene, surge, tmp_path):
    cache_mod = submodule(surge, "engine.io.cache")
    _small_scene(scene, str(tmp_path / "whole"))
    assert bpy.ops.surge.bake() == {"FINISHED"}
    whole = cache_mod.CacheReader(str(tmp_path / "whole"))

    scene.surge.cache_directory = str(tmp_path / "parts")
    result = _cancelled_bake(surge, scene, after=5)
    assert result.status == "cancelled" and 5 <= len(result.frames) < 8
    assert bpy.ops.surge.bake(resume=True) == {"FINISHED"}
    parts = cache_mod.CacheReader(str(tmp_path / "parts"))
    assert parts.frames == whole.frames == list(range(1, 9)) and parts.manifest["status"] == "complete"
    for frame in parts.frames:
        # deterministic: the resumed frames are bit-identical to the uninterrupted bake's
        np.testing.assert_array_equal(parts.read_frame(frame)["position"], whole.read_frame(frame)["position"],
                                      err_msg=str(frame))
    # resumed from the checkpoint the cancel wrote at the last frame it finished (not the periodic one at 4)
    assert [g["from_frame"] for g in parts.manifest["segments"]] == [1, result.frames[-1] + 1]
    assert "Baked frames 1-8" in bake_state(surge, scene).status
    assert evaluated_points(scene.surge.liquid_object, 8)["count"] == 45


@pytest.mark.slow  # a bake in a child process or a fresh Blender
def test_resume_with_changed_settings_asks_then_resumes_or_rebakes(scene, surge, tmp_path):
    cache_dir = str(tmp_path / "cache")
    cache_mod = submodule(surge, "engine.io.cache")
    _small_scene(scene, cache_dir)
    assert bpy.ops.surge.bake() == {"FINISHED"}

    scene.surge.pbf_velocity_smoothing = 2.0
    changed = r"settings changed since the cached frames were baked \(PBF Velocity Smoothing\)"
    with pytest.raises(RuntimeError, match=changed):
        bpy.ops.surge.bake(resume=True)
    assert bpy.ops.surge.bake(resume=True, resume_frame=4, if_settings_changed="RESUME") == {"FINISHED"}
    manifest = cache_mod.CacheReader(cache_dir).manifest
    assert [(g["from_frame"], g["settings"]["pbf_velocity_smoothing"]) for g in manifest["segments"]] == [(1, 0.02),
                                                                                                       (5, 2.0)]
    with pytest.raises(RuntimeError, match="no checkpoint at frame 5; a bake can resume from frame 4, 7"):
        bpy.ops.surge.bake(resume=True, resume_frame=5)

    scene.surge.particle_spacing = 0.025  # the saved particles cannot become coarser
    with pytest.raises(RuntimeError, match="'Particle Spacing' changed"):
        bpy.ops.surge.bake(resume=True, if_settings_changed="RESUME")
    assert bpy.ops.surge.bake(resume=True, if_settings_changed="REBAKE") == {"FINISHED"}
    manifest = cache_mod.CacheReader(cache_dir).manifest
    assert [g["from_frame"] for g in manifest["segments"]] == [1]
    assert manifest["settings"]["particle_spacing"] == pytest.approx(0.025, rel=1e-6)


@pytest.mark.slow  # a bake in a child process or a fresh Blender
def test_nothing_to_resume_is_refused(scene, surge, tmp_path):
    _small_scene(scene, str(tmp_path / "cache"))
    scene.surge.checkpoint_interval = 0
    assert bpy.ops.surge.bake() == {"FINISHED"}
    with pytest.raises(RuntimeError, match="nothing to resume .* no checkpoint"):
        bpy.ops.surge.bake(resume=True)
    with pytest.raises(RuntimeError, match="Nothing to resume: the cache folder holds no checkpoint"):
        bpy.ops.surge.resume_bake()  # greyed out, with the reason
