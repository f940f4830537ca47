"""Attributes for shading (velocity, density, id, age), the geometry-nodes surface preview, motion blur."""

from __future__ import annotations


import bpy
import numpy as np
import pytest

from blender_helpers import evaluated_points, run_fresh_blender, submodule

pytestmark = pytest.mark.blender


def _show(surge, scene, cache_dir, frames: dict, radius=0.01, fps=24.0, ages: dict | None = None):
    """Write ``frames`` ({frame: (ids, positions, velocities)}) as a cache, with the particle ages
    ``ages`` ({frame: (N,) seconds}, zero if not given), and play it on the liquid."""
    cache_mod = submodule(surge, "engine.io.cache")
    bake = submodule(surge, "bridge.bake")
    writer = cache_mod.CacheWriter(cache_dir, {"particle_radius": radius, "fps": fps,
                                               "frame_start": min(frames), "frame_end": max(frames)})
    for frame, (ids, x, v) in frames.items():
        age = ages[frame] if ages else np.zeros(len(ids))
        writer.write_frame(frame, {"position": x, "velocity": v, "density": np.full(len(ids), 1000.0),
                                   "id": np.asarray(ids), "age": age})
    writer.finish("complete")
    scene.surge.cache_directory = cache_dir
    session = bake.BakeSession.playback(scene, cache_dir, radius=radius)
    # what the bake process does as it caches the frames: write their USD point files
    points = submodule(surge, "engine.io.usd").PointsWriter(session.usd_dir, radius)
    reader = cache_mod.CacheReader(cache_dir)
    for frame in sorted(frames):
        points(frame, reader.read_frame(frame))
    session._convert(budget=float("inf"))
    return scene.surge.liquid_object


def test_age_reaches_the_liquid_as_baked(scene, surge, tmp_path):
    rng = np.random.default_rng(5)
    present = {1: [0, 1, 2], 2: [0, 1, 2, 7], 3: [1, 2, 7, 8]}
    born = {0: 1, 1: 1, 2: 1, 7: 2, 8: 3}
    ages = {f: np.array([(f - born[i]) / 12.0 for i in ids], dtype=np.float32) for f, ids in present.items()}
    liquid = _show(surge, scene, str(tmp_path / "cache"),
                   {f: (ids, rng.random((len(ids), 3)), np.zeros((len(ids), 3))) for f, ids in present.items()},
                   fps=12.0, ages=ages)
    for frame, ids in present.items():
        points = evaluated_points(liquid, frame)
        assert {"velocity", "density", "id", "age"} <= set(points)
        want = np.array([(frame - born[int(i)]) / 12.0 for i in points["id"]])
        np.testing.assert_allclose(points["age"], want, rtol=1e-6, atol=1e-7)  # float32 seconds


def _lattice(n=5, spacing=0.02):
    g = (np.arange(n) + 0.5) * spacing
    return np.stack(np.meshgrid(g, g, g, indexing="ij"), -1).reshape(-1, 3)


def _surface_mesh(obj):
    depsgraph = bpy.context.evaluated_depsgraph_get()
    evaluated = obj.evaluated_get(depsgraph)
    geometry = evaluated.evaluated_geometry()
    mesh = geometry.mesh
    if mesh is None:
        return None
    co = np.empty(len(mesh.vertices) * 3)
    mesh.vertices.foreach_get("co", co)
    return co.reshape(-1, 3)


def test_surface_preview_wraps_the_points_and_follows_its_settings(scene, surge, tmp_path):
    x = _lattice()
    liquid = _show(surge, scene, str(tmp_path / "cache"), {1: (np.arange(len(x)), x, np.zeros_like(x))})
    scene.frame_set(1)
    assert _surface_mesh(liquid) is None  # off by default: points only
    scene.surge.surface_radius, scene.surge.surface_smoothing = 0.02, 0
    scene.surge.use_surface_preview = True
    co = _surface_mesh(liquid)
    assert co is not None and len(co) > 100
    # the surface encloses the points at about the radius: within a voxel (radius / 3) of it
    voxel = 0.02 / 3.0
    np.testing.assert_allclose(co.min(axis=0), x.min(axis=0) - 0.02, atol=voxel, rtol=0)
    np.testing.assert_allclose(co.max(axis=0), x.max(axis=0) + 0.02, atol=voxel, rtol=0)
    scene.surge.surface_radius = 0.03
    wider = _surface_mesh(liquid)
    # 1 cm more radius: about 2 cm wider
    assert (wider.max(axis=0) - wider.min(axis=0) > co.max(axis=0) - co.min(axis=0) + 0.01).all()
    scene.surge.surface_smoothing = 10  # smoothing pulls the corners of the block inward
    smooth = _surface_mesh(liquid)
    assert np.abs(smooth).max() < np.abs(wider).max()

    blend = str(tmp_path / "surface.blend")
    bpy.ops.wm.save_as_mainfile(filepath=blend)
    script = f"""
import bpy
bpy.ops.wm.open_mainfile(filepath={blend!r})
assert not hasattr(bpy.types.Scene, "surge")
bpy.context.scene.frame_set(1)
obj = bpy.data.objects["Surge Liquid"]
depsgraph = bpy.context.evaluated_depsgraph_get()
evaluated = obj.evaluated_get(depsgraph)
geometry = evaluated.evaluated_geometry()
mesh = geometry.mesh
print("RESULT", len(mesh.vertices) if mesh is not None else 0)
"""
    proc = run_fresh_blender(script)
    assert proc.returncode == 0, proc.stderr[-3000:]
    line = [x for x in proc.stdout.splitlines() if x.startswith("RESULT ")][-1]
    assert int(line.split()[1]) == len(smooth)  # the same surface without Surge

    scene.surge.use_surface_preview = False
    assert _surface_mesh(liquid) is None and evaluated_points(liquid, 1)["count"] == len(x)


def _render(scene, path, blur: bool) -> np.ndarray:
    scene.render.use_motion_blur = blur
    scene.render.filepath = path
    bpy.ops.render.render(write_still=True)
    image = bpy.data.images.load(path)
    pixels = np.array(image.pixels[:])
    bpy.data.images.remove(image)
    return pixels


@pytest.mark.slow  # a Cycles render
def test_cycles_renders_two_frames_with_motion_blur_from_velocity(scene, surge, tmp_path):
    x = np.array([[0.0, 0.0, 0.0], [0.3, 0.0, 0.1]])
    fast = np.array([[12.0, 0.0, 0.0], [0.0, 0.0, 12.0]])  # half a metre per frame at 24 fps
    liquid = _show(surge, scene, str(tmp_path / "cache"),
                   {1: ([0, 1], x, fast), 2: ([0, 1], x + fast / 24.0, fast)}, radius=0.08)
    camera = bpy.data.objects.new("Camera", bpy.data.cameras.new("Camera"))
    scene.collection.objects.link(camera)
    camera.location = (0.15, -3.0, 0.1)
    camera.rotation_euler = (np.pi / 2, 0.0, 0.0)
    scene.camera = camera
    scene.render.engine = "CYCLES"
    scene.cycles.samples, scene.cycles.device = 4, "CPU"
    scene.render.resolution_x = scene.render.resolution_y = 48
    scene.render.image_settings.file_format = "PNG"
    glow = bpy.data.materials.new("Glow")  # emissive points on black: any blur shows in the pixels
    bsdf = glow.node_tree.nodes["Principled BSDF"]
    bsdf.inputs["Emission Color"].default_value = (1.0, 1.0, 1.0, 1.0)
    bsdf.inputs["Emission Strength"].default_value = 5.0
    liquid.material_slots[0].material = glow
    images = {}
    for frame in (1, 2):
        scene.frame_set(frame)
        sharp = _render(scene, str(tmp_path / f"sharp_{frame}.png"), blur=False)
        blurred = _render(scene, str(tmp_path / f"blur_{frame}.png"), blur=True)
        images[frame] = (sharp, blurred)
        # the blur comes from the velocity attribute alone: the cached points do not move within a frame
        assert np.abs(sharp - blurred).max() > 0.05, frame
    assert np.abs(images[1][0] - images[2][0]).max() > 0.05  # and the frames differ
