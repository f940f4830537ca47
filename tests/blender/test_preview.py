"""Preview bakes: the first frames at twice the spacing, beside the full bake's cache."""

from __future__ import annotations

import os

import bpy
import pytest

from blender_helpers import column_scene, evaluated_points, submodule

pytestmark = pytest.mark.blender


@pytest.mark.slow  # a bake in a child process or a fresh Blender
def test_preview_bakes_the_first_frames_coarser_and_leaves_the_full_cache_alone(scene, surge, tmp_path):
    bake = submodule(surge, "bridge.bake")
    cache_mod = submodule(surge, "engine.io.cache")
    cache_dir = str(tmp_path / "cache")
    column_scene(scene, cache_dir, frames=(1, 40))
    scene.surge.solver = "PBF"
    assert bpy.ops.surge.bake(preview=True) == {"FINISHED"}

    preview = cache_mod.CacheReader(os.path.join(cache_dir, "preview"))
    assert preview.frames == list(range(1, bake.PREVIEW_FRAMES + 1))
    assert preview.manifest["particle_spacing"] == pytest.approx(0.04, rel=1e-6)  # twice the 2 cm
    assert not os.path.exists(os.path.join(cache_dir, "manifest.json"))  # no full bake was touched
    n = len(preview.read_frame(1)["id"])
    assert 0 < n < 250 / 4  # 250 particles at 2 cm; about 8 times fewer at 4 cm
    assert evaluated_points(scene.surge.liquid_object, bake.PREVIEW_FRAMES)["count"] == n
    assert scene.surge.particle_spacing == pytest.approx(0.02)  # the scene's setting is unchanged
    # what the panel and the status bar said: the preview's own frames, not the scene's 40
    state = submodule(surge, "bridge.bake_state").ensure(scene)
    assert (state.kind, state.frame_start, state.frame_end) == ("Preview", 1, bake.PREVIEW_FRAMES)
    assert submodule(surge, "panels.sidebar").progress_text(scene) == (
        f"Preview frame {bake.PREVIEW_FRAMES} of {bake.PREVIEW_FRAMES}")

    assert bpy.ops.surge.free_bake() == {"FINISHED"}
    assert not os.path.exists(os.path.join(cache_dir, "preview"))
