"""The baked surface in real Blender: Bake Surface over a bake, meshing inside the bake, display, Free
Surface, the saved file playing the surface without Surge, a Cycles frame with motion blur."""

import json
import os

import bpy
import pytest

from blender_helpers import column_scene, run_fresh_blender, snapshot, submodule

pytestmark = pytest.mark.blender


def _surface_frame(surge, cache_dir, frame):
    return submodule(surge, "engine.surface.stage").read_frame(cache_dir, frame)


def _particle_files(cache_dir):
    snap = snapshot(cache_dir)
    return {k: v for k, v in snap.items() if k.split(os.sep)[0] in ("frames", "manifest.json")}


def test_bake_surface_over_a_bake_and_free_it_alone(scene, surge, tmp_path):
    cache_dir = str(tmp_path / "cache")
    column_scene(scene, cache_dir, frames=(1, 3))
    assert bpy.ops.surge.bake() == {"FINISHED"}
    particles = _particle_files(cache_dir)
    assert scene.surge.surface_object is None
    assert bpy.ops.surge.bake_surface() == {"FINISHED"}
    assert "Surface of 3 frames ready" in submodule(surge, "bridge.bake_state").status(scene)
    obj = scene.surge.surface_object
    assert obj is not None and obj.type == "MESH"
    for frame in (1, 3):
        scene.frame_set(frame)
        mesh = obj.evaluated_get(bpy.context.evaluated_depsgraph_get()).data
        stored = _surface_frame(surge, cache_dir, frame)
        assert len(mesh.vertices) == len(stored["vertices"]) > 0
        assert len(mesh.polygons) == len(stored["triangles"])
        assert "velocity" in mesh.attributes
    # the small drops the surface hands to the spray (the default): a point cloud playing the same files,
    # one point per spray particle (or one invisible point in a frame without any)
    spray = scene.surge.surface_spray_object
    assert spray is not None and spray.type == "POINTCLOUD"
    scene.frame_set(3)
    cloud = spray.evaluated_get(bpy.context.evaluated_depsgraph_get()).data
    assert len(cloud.points) == max(1, len(_surface_frame(surge, cache_dir, 3)["spray_position"]))
    # the display choices hide and show the objects, in the viewport and in renders (the spray with the surface)
    liquid = scene.surge.liquid_object
    assert (liquid.hide_render, obj.hide_render, spray.hide_render) == (True, False, False)
    scene.surge.liquid_display = scene.surge.liquid_display_render = "BOTH"
    assert (liquid.hide_render, obj.hide_render, spray.hide_render) == (False, False, False)
    scene.surge.liquid_display = scene.surge.liquid_display_render = "POINTS"
    assert (liquid.hide_render, obj.hide_render, spray.hide_render) == (False, True, True)
    assert (liquid.hide_viewport, obj.hide_viewport, spray.hide_viewport) == (False, True, True)
    # re-meshing with other settings leaves the particle cache byte-identical
    scene.surge.surface_cell_size = 1.0
    assert bpy.ops.surge.bake_surface() == {"FINISHED"}
    assert _particle_files(cache_dir) == particles
    # Free Bake offers to free the surface alone (the dialog's choice): the particles stay and play
    assert bpy.ops.surge.free_bake(what="SURFACE") == {"FINISHED"}
    assert not os.path.exists(os.path.join(cache_dir, "surface"))
    assert _particle_files(cache_dir) == particles
    assert not liquid.hide_render


@pytest.mark.slow  # a bake of many frames: in the full suite, not the fast layer
def test_surface_meshed_inside_the_bake_and_a_nothing_baked_refusal(scene, surge, tmp_path):
    cache_dir = str(tmp_path / "cache")
    column_scene(scene, cache_dir, frames=(1, 3))
    with pytest.raises(RuntimeError, match="bake the liquid first"):
        bpy.ops.surge.bake_surface()
    scene.surge.use_surface_in_bake = True
    assert bpy.ops.surge.bake() == {"FINISHED"}
    stages = submodule(surge, "engine.stages")
    assert stages.done_frames(cache_dir, "surface") == [1, 2, 3]
    assert scene.surge.surface_object is not None
    # the points' USD files come from the bake process: one per frame
    usd_dir = submodule(surge, "bridge.files").usd_bake_dirs(cache_dir)
    assert len(usd_dir) == 1 and len(os.listdir(usd_dir[0])) == 3
    # Free Surface deletes the surface alone; Free Bake deletes everything Surge wrote
    particles = _particle_files(cache_dir)
    assert bpy.ops.surge.free_surface() == {"FINISHED"}
    assert not os.path.exists(os.path.join(cache_dir, "surface"))
    assert _particle_files(cache_dir) == particles
    assert bpy.ops.surge.bake_surface() == {"FINISHED"}
    assert bpy.ops.surge.free_bake() == {"FINISHED"}
    assert not os.path.exists(os.path.join(cache_dir, "surface"))
    assert _particle_files(cache_dir) == {}


@pytest.mark.slow
def test_saved_file_plays_the_surface_without_surge_and_renders_with_motion_blur(scene, surge, tmp_path):
    blend = str(tmp_path / "shot.blend")
    column_scene(scene, "//surge_cache/", frames=(1, 45), water_top=0.2)
    bpy.data.objects["Water"].scale = (0.6, 1.0, 1.0)  # a narrower column that falls and spreads
    scene.surge.use_surface_in_bake = True
    bpy.ops.wm.save_as_mainfile(filepath=blend)
    assert bpy.ops.surge.bake() == {"FINISHED"}
    cam = bpy.data.objects.new("Camera", bpy.data.cameras.new("Camera"))
    scene.collection.objects.link(cam)
    cam.location = (0.35, -0.35, 0.3)
    cam.rotation_euler = (1.1, 0.0, 0.8)
    scene.camera = cam
    bpy.ops.wm.save_as_mainfile(filepath=blend)
    cache_dir = str(tmp_path / "surge_cache")
    expect = {f: len(_surface_frame(surge, cache_dir, f)["vertices"]) for f in (1, 20, 45)}
    png = str(tmp_path / "blur.png")
    script = f"""
import json, sys
import bpy
import numpy as np
bpy.ops.wm.open_mainfile(filepath={blend!r})
assert not hasattr(bpy.types.Scene, "surge"), "Surge is installed in the fresh Blender"
scene = bpy.context.scene
obj = bpy.data.objects["Surge Surface"]
out = {{}}
for frame in (1, 20, 45):
    scene.frame_set(frame)
    mesh = obj.evaluated_get(bpy.context.evaluated_depsgraph_get()).data
    v = np.zeros(len(mesh.vertices) * 3)
    if "velocity" in mesh.attributes:
        mesh.attributes["velocity"].data.foreach_get("vector", v)
    out[frame] = {{"vertices": len(mesh.vertices), "velocity": "velocity" in mesh.attributes,
                  "speed": float(np.linalg.norm(v.reshape(-1, 3), axis=1).max()) if len(v) else 0.0}}
scene.frame_set(20)
scene.render.engine = "CYCLES"
scene.cycles.samples = 2
scene.render.resolution_x, scene.render.resolution_y = 64, 48
scene.render.use_motion_blur = True
scene.render.filepath = {png!r}
bpy.ops.render.render(write_still=True)
print("RESULT " + json.dumps(out))
"""
    proc = run_fresh_blender(script)
    assert proc.returncode == 0, proc.stderr[-3000:]
    result = json.loads([x for x in proc.stdout.splitlines() if x.startswith("RESULT ")][-1][len("RESULT "):])
    for frame, count in expect.items():
        got = result[str(frame)]
        assert got["vertices"] == count > 0 and got["velocity"]
    assert result["20"]["speed"] > 0.05  # the column is falling and spreading at frame 20
    assert os.path.getsize(png) > 0
