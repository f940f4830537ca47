"""Display control without baking again: points or surface chosen for the viewport and renders separately,
the viewport's share of the points and their size, whitewater sizes and amount as display settings; and
releasing a cache's files prints no warning."""

from __future__ import annotations

import dataclasses
import os

import bpy
import numpy as np
import pytest

from blender_helpers import evaluated_points, submodule

pytestmark = pytest.mark.blender

N = 400
RADIUS = 0.01


def _points_files(surge, folder, prim_path=None, frames=(1, 2), n=N, radius=RADIUS, name="liquid"):
    """USD point files as the engine writes them (``<name>_NNNNNN.usdc``), ids 0..n-1 on a line."""
    usd = submodule(surge, "engine.io.usd")
    submodule(surge, "bridge.usd").import_pxr()
    os.makedirs(folder, exist_ok=True)
    x = np.zeros((n, 3), np.float32)
    x[:, 0] = np.arange(n) * 0.01
    for frame in frames:
        kw = {"prim_path": prim_path} if prim_path else {}
        usd.write_points(os.path.join(folder, f"{name}_{frame:06d}.usdc"), x, np.zeros_like(x),
                         np.arange(n, dtype=np.int32), radius, {}, frame, **kw)
    return os.path.join(folder, f"{name}_{frames[0]:06d}.usdc")


@pytest.fixture
def liquid(scene, surge, tmp_path):
    first = _points_files(surge, str(tmp_path / "cache" / "usd" / "bake_0123456789ab"))
    return submodule(surge, "bridge.liquid").show_frames(scene, first, False, 1.0)


def test_viewport_and_render_show_the_points_or_the_surface_separately(scene, surge, liquid):
    mesh = bpy.data.objects.new("Surge Surface", bpy.data.meshes.new("Surge Surface"))
    scene.collection.objects.link(mesh)
    scene.surge.surface_object = mesh
    scene.surge.liquid_display = "POINTS"  # points while working ...
    scene.surge.liquid_display_render = "SURFACE"  # ... the surface in the picture
    assert not liquid.hide_viewport and liquid.hide_render
    assert mesh.hide_viewport and not mesh.hide_render
    scene.surge.liquid_display_render = "BOTH"
    assert not liquid.hide_render and not mesh.hide_render and mesh.hide_viewport


def test_viewport_amount_and_point_size_change_the_points_not_the_cache(scene, surge, liquid):
    full = evaluated_points(liquid, 1)
    assert full["count"] == N
    np.testing.assert_allclose(full["radius"], RADIUS, rtol=1e-6)
    scene.surge.display_percentage = 25.0
    scene.surge.point_scale = 2.0
    shown = {frame: evaluated_points(liquid, frame) for frame in (1, 2)}
    # a random draw of 400 points at 25 %: 100 expected, standard deviation sqrt(400 * 0.25 * 0.75) = 8.7;
    # 60-140 is more than 4.5 standard deviations either side
    assert 60 <= shown[1]["count"] <= 140
    # the same particles in every frame (the draw is seeded with each particle's id)
    np.testing.assert_array_equal(np.sort(shown[1]["id"]), np.sort(shown[2]["id"]))
    np.testing.assert_allclose(shown[1]["radius"], 2 * RADIUS, rtol=1e-6)  # float32 radii
    mod = liquid.modifiers["Surge Display"]
    assert mod.show_render  # renders get every point: Is Viewport is false there
    assert [m.type for m in liquid.modifiers][:2] == ["MESH_SEQUENCE_CACHE", "NODES"]


def test_whitewater_sizes_and_amount_are_display_settings(scene, surge, tmp_path):
    """A size change shows at once and does not touch the stage's settings (their hash decides whether Bake
    Whitewater makes every frame again)."""
    whitewater = submodule(surge, "bridge.whitewater")
    stages = submodule(surge, "engine.stages")
    folder = str(tmp_path / "cache" / "whitewater" / "usd_0123456789ab")
    first = _points_files(surge, folder, "/SurgeWhitewater_foam", name="foam", radius=0.005)
    whitewater._show_kind(scene, "foam", first, False, 1.0)
    whitewater.apply_display(scene)
    foam = scene.surge.whitewater.foam_object

    def stage_hash():
        return stages.settings_hash(dataclasses.asdict(whitewater.whitewater_settings(scene)))

    before = stage_hash()
    scene.surge.whitewater.foam_size = 0.02
    scene.surge.whitewater.viewport_percentage = 50.0
    points = evaluated_points(foam, 1)
    np.testing.assert_allclose(points["radius"], 0.02, rtol=1e-6)
    assert 140 <= points["count"] <= 260  # 200 expected, standard deviation 10
    assert stage_hash() == before


def test_releasing_the_files_prints_no_cache_reader_warning(scene, surge, liquid, capfd):
    """Free Bake and Free Surface point the objects away from their files first: Blender must not complain
    about the empty file name on every redraw."""
    liquid_mod = submodule(surge, "bridge.liquid")
    evaluated_points(liquid, 1)
    capfd.readouterr()
    liquid_mod.release_files(scene)
    bpy.context.evaluated_depsgraph_get().update()
    evaluated_points(liquid, 2)
    out, err = capfd.readouterr()
    assert "Could not create cache reader" not in out + err, out + err
    assert liquid_mod.current_file(scene) is None
