"""Whitewater in real Blender: Bake Whitewater over a bake, the three point clouds and their attributes,
re-runs that leave the liquid's cache alone, the cap's message, Free Whitewater, and the saved file
playing the whitewater without Surge."""

import json
import os
import subprocess
import sys

import bpy
import numpy as np
import pytest

from blender_helpers import add_box, evaluated_points, run_fresh_blender, snapshot, submodule

pytestmark = pytest.mark.blender

KINDS = ("spray", "foam", "bubbles")
ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))


def splash_scene(sc, cache_dir, frames=(1, 10)):
    """A block of water dropped 12 cm into a shallow pool: 250 + 125 particles at 2 cm."""
    add_box("Pool", (0, 0, 0), (0.2, 0.1, 0.05), role="FLUID")
    add_box("Drop", (0.06, 0.0, 0.16), (0.16, 0.1, 0.26), role="FLUID")
    add_box("Tank", (0, 0, 0), (0.2, 0.1, 0.4), role="COLLIDER", collider_mode="CONTAINER")
    sc.frame_start, sc.frame_end = frames
    sc.surge.particle_spacing = 0.02
    sc.surge.cache_directory = cache_dir
    ww = sc.surge.whitewater
    # fixed, low thresholds and high rates: a 375-particle splash is small
    ww.use_auto_thresholds = False
    ww.trapped_air_min, ww.trapped_air_max = 0.2, 2.0
    ww.wave_crest_min, ww.wave_crest_max = 0.2, 2.0
    ww.energy_min, ww.energy_max = 0.1, 1.0
    ww.trapped_air_rate = ww.wave_crest_rate = 600.0
    return sc


def _liquid_files(cache_dir):
    snap = snapshot(cache_dir)
    return {k: v for k, v in snap.items() if k.split(os.sep)[0] in ("frames", "manifest.json")}


@pytest.mark.slow  # a bake of many frames: in the full suite, not the fast layer
def test_bake_whitewater_objects_attributes_and_free(scene, surge, tmp_path):
    cache_dir = str(tmp_path / "cache")
    splash_scene(scene, cache_dir)
    with pytest.raises(RuntimeError, match="bake the liquid first"):
        bpy.ops.surge.bake_whitewater()
    assert bpy.ops.surge.bake() == {"FINISHED"}
    liquid = _liquid_files(cache_dir)
    assert bpy.ops.surge.bake_whitewater() == {"FINISHED"}
    assert "Whitewater of 10 frames ready" in submodule(surge, "bridge.bake_state").status(scene)
    assert "particles made" in scene.surge.whitewater.summary
    stage = submodule(surge, "engine.whitewater.stage")
    ww = scene.surge.whitewater
    objects = {k: getattr(ww, f"{k}_object") for k in KINDS}
    assert all(o is not None and o.type == "POINTCLOUD" for o in objects.values())
    assert {o.name for o in objects.values()} == {"Surge Spray", "Surge Foam", "Surge Bubbles"}
    seen = {k: 0 for k in KINDS}
    for frame in range(1, 11):
        stored = stage.read_frame(cache_dir, frame)
        for k, kind in enumerate(KINDS):
            points = evaluated_points(objects[kind], frame)
            want = int(np.sum(stored["kind"] == k))
            seen[kind] += want
            if not want:
                # no particle of this kind: one invisible point, as Cycles stops on an empty point cloud
                assert points["count"] == 1 and points["radius"][0] == 0.0 and points["id"][0] == -1
                continue
            assert points["count"] == want, (frame, kind)
            for name in ("velocity", "age", "lifetime"):
                assert name in points, (frame, kind, name)
            sel = stored["kind"] == k
            np.testing.assert_allclose(np.sort(points["age"]), np.sort(stored["age"][sel]), rtol=0, atol=1e-6)
            np.testing.assert_allclose(points["radius"], getattr(ww, f"{'bubble' if kind == 'bubbles' else kind}_size"),
                                       rtol=1e-6, atol=0)
    assert seen["spray"] > 0 and seen["foam"] > 0, seen
    # a re-run with other settings leaves the liquid's cache byte-identical
    ww.foam_size = 0.008
    assert bpy.ops.surge.bake_whitewater() == {"FINISHED"}
    assert _liquid_files(cache_dir) == liquid
    # the cap: a clear message, as a warning, and never more particles than it allows
    ww.max_particles = 3
    assert bpy.ops.surge.bake_whitewater() == {"FINISHED"}
    assert "cap of 3 whitewater particles was reached" in submodule(surge, "bridge.bake_state").status(scene)
    assert all(len(stage.read_frame(cache_dir, f)["id"]) <= 3 for f in range(1, 11))
    # Free Whitewater deletes the whitewater alone
    assert bpy.ops.surge.free_whitewater() == {"FINISHED"}
    assert not os.path.exists(os.path.join(cache_dir, "whitewater"))
    assert _liquid_files(cache_dir) == liquid
    assert all(o.hide_render for o in objects.values())


@pytest.mark.slow  # a bake of many frames: in the full suite, not the fast layer
def test_headless_whitewater_and_the_saved_file_plays_it_without_surge(scene, surge, tmp_path):
    blend = str(tmp_path / "shot.blend")
    splash_scene(scene, "//surge_cache/")
    bpy.ops.wm.save_as_mainfile(filepath=blend)
    assert bpy.ops.surge.bake() == {"FINISHED"}
    bpy.ops.wm.save_as_mainfile(filepath=blend)
    # headless, as on a render node: tools/bake.py --whitewater makes it and saves the file
    proc = subprocess.run([sys.executable, os.path.join(ROOT, "tools", "bake.py"), blend, "--whitewater", "--save"],
                          capture_output=True, text=True, timeout=600, cwd=str(tmp_path))
    assert proc.returncode == 0, proc.stderr[-3000:]
    assert "Surge: Whitewater frame 10 of 10" in proc.stdout
    cache_dir = str(tmp_path / "surge_cache")
    stage = submodule(surge, "engine.whitewater.stage")
    png = str(tmp_path / "ww")
    # a kind without particles plays one invisible point (see engine.whitewater.stage.EMPTY_ID)
    expect = {f: np.maximum(1, np.bincount(stage.read_frame(cache_dir, f)["kind"], minlength=3)).tolist()
              for f in (4, 8, 10)}
    script = f"""
import json
import bpy
bpy.ops.wm.open_mainfile(filepath={blend!r})
assert not hasattr(bpy.types.Scene, "surge"), "Surge is installed in the fresh Blender"
scene = bpy.context.scene
out = {{}}
for frame in (4, 8, 10):
    scene.frame_set(frame)
    dg = bpy.context.evaluated_depsgraph_get()
    row = []
    for name in ("Surge Spray", "Surge Foam", "Surge Bubbles"):
        data = bpy.data.objects[name].evaluated_get(dg).data
        row.append([len(data.points), sorted(a.name for a in data.attributes)])
    out[frame] = row
# renders in Cycles and EEVEE, on the first frame (no whitewater yet: every kind holds its invisible point)
# and on one with whitewater
cam = bpy.data.objects.new("Camera", bpy.data.cameras.new("Camera"))
scene.collection.objects.link(cam)
cam.location = (0.1, -0.6, 0.2)
cam.rotation_euler = (1.45, 0.0, 0.0)
scene.camera = cam
scene.render.resolution_x, scene.render.resolution_y = 48, 32
for engine in ("CYCLES", "BLENDER_EEVEE"):
    scene.render.engine = engine
    if engine == "CYCLES":
        scene.cycles.samples = 1
    for frame in (1, 8):
        scene.frame_set(frame)
        scene.render.filepath = {png!r} + f"_{{engine}}_{{frame}}.png"
        bpy.ops.render.render(write_still=True)
print("RESULT " + json.dumps(out))
"""
    proc = run_fresh_blender(script)
    assert proc.returncode == 0, proc.stderr[-3000:]
    result = json.loads([x for x in proc.stdout.splitlines() if x.startswith("RESULT ")][-1][len("RESULT "):])
    for frame, counts in expect.items():
        got = result[str(frame)]
        assert [c for c, _names in got] == counts, (frame, got, counts)
        for _count, names in got:
            assert {"velocity", "age", "lifetime"} <= set(names), names
    for engine in ("CYCLES", "BLENDER_EEVEE"):
        for frame in (1, 8):
            assert os.path.getsize(f"{png}_{engine}_{frame}.png") > 0


def test_whitewater_made_during_the_bake(scene, surge, tmp_path):
    """Make During Bake: the bake's child makes each frame's whitewater as it simulates it; the three
    objects play it when the bake ends, every particle inside the tank, and Bake Whitewater afterwards
    with the same (manual) thresholds has nothing to redo."""
    cache_dir = str(tmp_path / "cache")
    splash_scene(scene, cache_dir)
    scene.surge.whitewater.use_in_bake = True
    assert bpy.ops.surge.bake() == {"FINISHED"}
    stage = submodule(surge, "engine.whitewater.stage")
    stages = submodule(surge, "engine.stages")
    assert stages.done_frames(cache_dir, stage.NAME) == list(range(1, 11))
    assert "particles made" in scene.surge.whitewater.summary
    ww = scene.surge.whitewater
    assert all(getattr(ww, f"{k}_object") is not None for k in KINDS)
    made = 0
    for frame in range(1, 11):
        x = stage.read_frame(cache_dir, frame)["position"]
        made += len(x)
        assert np.all((x >= -1e-6) & (x <= np.array([0.2, 0.1, 0.4]) + 1e-6)), frame  # the tank's walls
        points = evaluated_points(ww.foam_object, frame)
        assert points["count"] == max(1, int(np.sum(stage.read_frame(cache_dir, frame)["kind"] == 1)))
    assert made > 0
    assert bpy.ops.surge.bake_whitewater() == {"FINISHED"}
    assert "Whitewater of 10 frames ready" in submodule(surge, "bridge.bake_state").status(scene)
    assert stages.read_manifest(cache_dir, stage.NAME)["frames"] == list(range(1, 11))
