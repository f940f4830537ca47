"""Bad input and faults, seen from Blender: what each one did before it was closed, and that nothing
already baked is lost and every refusal names its reason.

Each test names in its docstring what the add-on did before.
"""

from __future__ import annotations

import os
import re
import subprocess

import bpy
import numpy as np
import pytest

from blender_helpers import add_box, column_scene, evaluated_points, run_fresh_blender, snapshot, submodule

pytestmark = pytest.mark.blender


def test_free_surface_and_free_whitewater_delete_nothing_in_a_folder_that_is_not_a_cache(scene, surge, tmp_path):
    """Before: Free Surface deleted surface/manifest.json, surface/frames/surface_000001.npz and
    job/surface.json from a folder that was never a Surge cache, and Free Whitewater
    whitewater/manifest.json and job/whitewater.log (Free Bake refused the same folder)."""
    home = tmp_path / "home"
    mine = {name: name.encode() for name in (
        "notes.txt", os.path.join("surface", "manifest.json"), os.path.join("surface", "frames", "surface_000001.npz"),
        os.path.join("job", "surface.json"), os.path.join("whitewater", "manifest.json"),
        os.path.join("job", "whitewater.log"))}
    for rel, data in mine.items():
        os.makedirs(home / os.path.dirname(rel), exist_ok=True)
        (home / rel).write_bytes(data)
    scene.surge.cache_directory = str(home)
    for op, options in ((bpy.ops.surge.free_surface, {}), (bpy.ops.surge.free_whitewater, {}),
                        (bpy.ops.surge.free_bake, {}), (bpy.ops.surge.free_bake, {"what": "SURFACE"})):
        # refused by the ownership check, or greyed out before it (the folder holds nothing Surge baked)
        with pytest.raises(RuntimeError, match=r"holds files that are not Surge's \('job', 'notes.txt', 'surface'"
                                               r"|Nothing to free"):
            op(**options)
    assert snapshot(str(home)) == mine
    # an empty or missing folder holds nothing to free: the buttons are greyed out, nothing is made
    scene.surge.cache_directory = str(tmp_path / "new")
    for op in (bpy.ops.surge.free_surface, bpy.ops.surge.free_whitewater):
        with pytest.raises(RuntimeError, match="Nothing to free"):
            op()
    assert not os.path.exists(tmp_path / "new")


def test_bake_to_keyframes_replaces_only_what_it_made(scene, surge, tmp_path):
    """Before: a new run deleted every object of the collection 'Surge Keyframes' and any object called
    'Surge Liquid Keys', the user's own included."""
    column_scene(scene, str(tmp_path / "cache"), frames=(1, 2), spacing=0.05)
    assert bpy.ops.surge.bake() == {"FINISHED"}
    assert bpy.ops.surge.bake_to_keyframes(mode="OBJECTS") == {"FINISHED"}
    collection = bpy.data.collections["Surge Keyframes"]
    made = len(collection.objects)
    lamp = add_box("My Lamp", (0, 0, 0), (1, 1, 1))
    collection.objects.link(lamp)
    mine = add_box("Surge Liquid Keys", (0, 0, 0), (1, 1, 1))
    assert bpy.ops.surge.bake_to_keyframes(mode="OBJECTS") == {"FINISHED"}
    assert "My Lamp" in collection.objects and len(collection.objects) == made + 1
    assert bpy.ops.surge.bake_to_keyframes(mode="SHAPE_KEYS") == {"FINISHED"}
    assert bpy.data.objects.get("Surge Liquid Keys") == mine and len(mine.data.polygons) == 6
    keys = [o for o in bpy.data.objects if o.name.startswith("Surge Liquid Keys.")]
    assert len(keys) == 1 and keys[0].data.shape_keys is not None
    assert bpy.ops.surge.bake_to_keyframes(mode="SHAPE_KEYS") == {"FINISHED"}  # replaces its own, not the user's
    assert [o.name for o in bpy.data.objects if o.name.startswith("Surge Liquid Keys")].count("Surge Liquid Keys") == 1
    assert len([o for o in bpy.data.objects if o.name.startswith("Surge Liquid Keys.")]) == 1


@pytest.mark.skipif(not hasattr(os, "getuid"), reason="a file size limit (RLIMIT_FSIZE) stands in for a full disk")
def test_a_full_disk_at_a_rebakes_first_frame_keeps_the_previous_bake_its_log_and_resume(scene, surge, tmp_path):
    """Before: "Cannot write ...frame_000001.npz" (with the path twice and an errno), then frames/ and
    checkpoints/ were empty, the manifest said 'baking' with no frames, Resume said 'nothing to resume',
    and the refused bake's log had replaced the previous bake's job/bake.log."""
    import resource

    cache_mod = submodule(surge, "engine.io.cache")
    cache_dir = str(tmp_path / "cache")
    column_scene(scene, cache_dir, frames=(1, 12))
    scene.surge.checkpoint_interval = 4
    assert bpy.ops.surge.bake() == {"FINISHED"}
    log = os.path.join(cache_dir, "job", "bake.log")
    with open(log, "a", encoding="utf-8") as fh:
        fh.write("the log of the bake that made these frames\n")
    before = {k: v for k, v in snapshot(cache_dir).items() if not k.startswith(os.path.join("job", "pending"))}
    frame_size = os.path.getsize(cache_mod.CacheReader(cache_dir).frame_path(1))
    soft, hard = resource.getrlimit(resource.RLIMIT_FSIZE)
    # the bake process inherits the limit: room for its lock and job files, not for a frame
    resource.setrlimit(resource.RLIMIT_FSIZE, (frame_size // 2, hard))
    try:
        with pytest.raises(RuntimeError) as info:
            bpy.ops.surge.bake()
    finally:
        resource.setrlimit(resource.RLIMIT_FSIZE, (soft, hard))
    assert "frame_000001.npz': the disk is full or a file size limit was reached" in str(info.value)
    assert "[Errno" not in str(info.value) and "is kept" in str(info.value)
    after = {k: v for k, v in snapshot(cache_dir).items() if not k.startswith(os.path.join("job", "pending"))}
    assert after == before  # frames, checkpoints, manifest, point files and the previous bake's log
    assert evaluated_points(scene.surge.liquid_object, 12)["count"] == 250
    assert bpy.ops.surge.resume_bake() == {"FINISHED"}  # from the checkpoint at frame 9
    assert cache_mod.CacheReader(cache_dir).manifest["status"] == "complete"


def test_the_bake_process_stops_by_itself_if_blender_dies(scene, surge, tmp_path):
    """Before: the engine process had no way to know; killed, Blender left it baking unseen or dying on a
    broken pipe (the engine's side is tests/test_faults.py::test_a_bake_whose_parent_dies_stops_cleanly...)."""
    bake = submodule(surge, "bridge.bake")
    column_scene(scene, str(tmp_path / "cache"), frames=(1, 2))
    session = bake.BakeSession(scene, bpy.context.evaluated_depsgraph_get())
    try:
        assert "--watch-parent" in session.process._proc.args
        while not session.finished:
            session.poll(timeout=0.5)
        assert session.finish().status == "complete"
    finally:
        session.release()


def test_a_damaged_manifest_or_another_version_is_named_not_a_traceback(scene, surge, tmp_path):
    """Before: frames [1, 2, "../../x"] or checkpoints ["../x"] in the manifest made Resume and Bake to
    Keyframes fail with raw TypeErrors and ValueErrors; a cache of format version 99 made Resume say it
    'holds no checkpoint'."""
    import json

    cache_dir = str(tmp_path / "cache")
    column_scene(scene, cache_dir, frames=(1, 4), spacing=0.05)
    scene.surge.checkpoint_interval = 2
    assert bpy.ops.surge.bake() == {"FINISHED"}
    path = os.path.join(cache_dir, "manifest.json")
    with open(path, encoding="utf-8") as fh:
        good = json.load(fh)
    cases = ((dict(good, frames=[1, 2, "../../x"]), r"'frames' holds \"../../x\", not a frame number"),
             (dict(good, checkpoints=["../x"]), r"'checkpoints' holds \"../x\", not a frame number"),
             (dict(good, frames="1-4"), r"'frames' holds \"1-4\", not a list of frame numbers"))
    for manifest, words in cases:
        with open(path, "w", encoding="utf-8") as fh:
            json.dump(manifest, fh)
        for op in (bpy.ops.surge.resume_bake, bpy.ops.surge.bake_to_keyframes):
            with pytest.raises(RuntimeError, match=f"manifest '{re.escape(path)}' is damaged: {words}"):
                op()
    with open(path, "w", encoding="utf-8") as fh:
        json.dump(dict(good, format_version=99), fh)
    with pytest.raises(RuntimeError, match="has format version 99; this version of Surge reads version 2"):
        bpy.ops.surge.resume_bake()


def test_an_inflow_without_area_is_named_for_its_area(scene, surge, tmp_path):
    """Before: a plane inflow scaled to 0 along one of its sides was refused for its speed ('emits nothing:
    no face moves liquid outward (raise its Normal Speed ...)')."""
    column_scene(scene, str(tmp_path / "cache"))
    mesh = bpy.data.meshes.new("Tap")
    mesh.from_pydata([(0.02, 0.02, 0.25), (0.04, 0.02, 0.25), (0.04, 0.04, 0.25), (0.02, 0.04, 0.25)], [],
                     [(0, 3, 2, 1)])  # facing down, into the tank
    tap = bpy.data.objects.new("Tap", mesh)
    scene.collection.objects.link(tap)
    tap.surge.role = "INFLOW"
    tap.surge.normal_speed = 1.0
    tap.scale.x = 0.0
    with pytest.raises(RuntimeError, match="Inflow 'Tap' has no area") as info:
        bpy.ops.surge.bake()
    assert "Normal Speed" not in str(info.value)


@pytest.mark.parametrize("flip", ["mirrored", pytest.param("normals flipped", marks=pytest.mark.slow)])
def test_a_mirrored_fluid_fills_as_its_unmirrored_twin(scene, surge, tmp_path, flip):
    """Before: a box Fluid with scale (-1, 1, 1), or with its normals flipped, was refused as 'open, flat
    or thinner than the spacing' (its winding number inside is -1), while scale (-1, -1, 1) baked."""
    cache_mod = submodule(surge, "engine.io.cache")
    column_scene(scene, str(tmp_path / "cache"), frames=(1, 2))
    water = bpy.data.objects["Water"]
    if flip == "mirrored":
        # mirrored about its origin (the mesh as it is, its faces now wound inward) and moved back into the tank
        water.scale.x = -1.0
        water.location.x = 0.1
    else:
        for polygon in water.data.polygons:
            polygon.flip()
    assert bpy.ops.surge.bake() == {"FINISHED"}
    reader = cache_mod.CacheReader(str(tmp_path / "cache"))
    assert len(reader.read_frame(1)["id"]) == 250  # 5 x 5 x 10, as the box unmirrored


def _render_in_child(blend: str, frame: int, out: str, shown: tuple) -> subprocess.CompletedProcess:
    """Render ``frame`` of ``blend`` with Cycles in a fresh Python (no Surge), the objects named in ``shown``
    visible in the render and the liquid's other object hidden (what the Display setting does): a crash
    of Cycles must not take the test process with it."""
    script = f"""
import bpy
import numpy as np
bpy.ops.wm.open_mainfile(filepath={blend!r})
scene = bpy.context.scene
for name in ("Surge Liquid", "Surge Surface"):
    if name in bpy.data.objects:
        bpy.data.objects[name].hide_render = name not in {tuple(shown)!r}
scene.render.engine = "CYCLES"
scene.cycles.samples, scene.cycles.device = 1, "CPU"
scene.render.resolution_x = scene.render.resolution_y = 16
scene.render.image_settings.file_format = "PNG"
scene.render.filepath = {out!r}
scene.frame_set({frame})
bpy.ops.render.render(write_still=True)
"""
    return run_fresh_blender(script)


@pytest.mark.parametrize("shown", [
    pytest.param(("Surge Liquid",), id="points"),
    # two more renders in child processes each: in the full suite
    pytest.param(("Surge Surface",), id="surface", marks=pytest.mark.slow),
    pytest.param(("Surge Liquid", "Surge Surface"), id="both", marks=pytest.mark.slow)])
def test_cycles_renders_a_frame_without_liquid(scene, surge, tmp_path, shown):
    """Before: Cycles aborted on the empty point cloud the liquid is outside the baked frames and when its
    cache folder is gone ("Malloc returns null ... std::bad_alloc", exit status 134)."""
    cache_dir = tmp_path / "cache"
    column_scene(scene, str(cache_dir), frames=(1, 2), spacing=0.05)
    scene.surge.use_surface_in_bake = True
    camera = bpy.data.objects.new("Camera", bpy.data.cameras.new("Camera"))
    scene.collection.objects.link(camera)
    camera.location = (0.05, -1.0, 0.1)
    camera.rotation_euler = (1.5708, 0.0, 0.0)
    scene.camera = camera
    blend = str(tmp_path / "shot.blend")
    bpy.ops.wm.save_as_mainfile(filepath=blend)
    assert bpy.ops.surge.bake() == {"FINISHED"}
    bpy.ops.wm.save_mainfile()
    out = str(tmp_path / "after.png")
    proc = _render_in_child(blend, 5, out, shown)  # after the last baked frame
    assert proc.returncode == 0 and os.path.isfile(out), proc.stderr[-2000:]
    os.rename(cache_dir, tmp_path / "moved")  # the cache folder gone
    out = str(tmp_path / "moved.png")
    proc = _render_in_child(blend, 2, out, shown)
    assert proc.returncode == 0 and os.path.isfile(out), proc.stderr[-2000:]


def _surface_vertices(frame: int) -> int:
    scene = bpy.context.scene
    scene.frame_set(frame)
    obj = scene.surge.surface_object
    return len(obj.evaluated_get(bpy.context.evaluated_depsgraph_get()).data.vertices)


@pytest.mark.slow  # three meshing runs and three file loads: in the full suite
def test_remeshing_keeps_the_surface_files_a_saved_blend_plays(scene, surge, tmp_path):
    """Before: meshing the surface again (tools/bake.py --surface --restart, not saved) deleted
    surface/usd_<id>/, which the saved file pointed at: every later open showed 'Could not create cache
    reader' and no surface."""
    blend = str(tmp_path / "shot.blend")
    column_scene(scene, "//cache", frames=(1, 2))
    scene.surge.use_surface_in_bake = True
    bpy.ops.wm.save_as_mainfile(filepath=blend)
    assert bpy.ops.surge.bake() == {"FINISHED"}
    bpy.ops.wm.save_mainfile()
    saved_folder = os.path.dirname(submodule(surge, "bridge.liquid").object_file(scene.surge.surface_object))
    assert _surface_vertices(2) > 0
    scene.surge.surface_smoothing_iterations = 3  # new settings: every frame meshed again, into a new folder
    assert bpy.ops.surge.bake_surface(restart=True) == {"FINISHED"}
    assert os.path.isdir(saved_folder) and len(os.listdir(os.path.dirname(saved_folder))) >= 3  # manifest, 2 usd
    bpy.ops.wm.open_mainfile(filepath=blend)  # the file as saved, before the re-mesh
    assert _surface_vertices(2) > 0
    assert bpy.ops.surge.bake_surface(restart=True) == {"FINISHED"}
    bpy.ops.wm.save_mainfile()  # now nothing points at the saved folder: it goes, the new one stays
    shown = os.path.dirname(submodule(surge, "bridge.liquid").object_file(bpy.context.scene.surge.surface_object))
    assert not os.path.exists(saved_folder) and os.path.isdir(shown)
    assert [n for n in os.listdir(os.path.dirname(shown)) if n.startswith("usd_")] == [os.path.basename(shown)]
    bpy.ops.wm.open_mainfile(filepath=blend)
    assert _surface_vertices(2) > 0


@pytest.mark.parametrize("expression, words", [
    ("float('nan') if frame >= 3 else -9.81", "gives nan at frame 3"),
    ("-9.81 if frame < 3 else 1 / 0", "fails at frame 3")], ids=["nan", "raises"])
def test_a_driver_that_fails_or_gives_nan_is_refused_naming_setting_and_frame(scene, surge, tmp_path, expression,
                                                                              words):
    """Before: a gravity driver returning NaN from frame 3, or raising, baked as 0 (the exported gravity
    was [-9.81, -9.81, 0, 0, 0, 0]) and the bake said 'complete'."""
    cache_dir = str(tmp_path / "cache")
    column_scene(scene, cache_dir, frames=(1, 6), spacing=0.05)
    driver = scene.driver_add("gravity", 2).driver
    driver.type = "SCRIPTED"
    driver.expression = expression
    with pytest.raises(RuntimeError, match=f"Scene 'Scene': the driver of 'Gravity Z' {words}"):
        bpy.ops.surge.bake()
    assert not os.path.exists(cache_dir)  # refused before anything was written
    driver.expression = "-9.81 if frame < 3 else -5.0"  # a driver that works bakes, and bakes what it says
    export = submodule(surge, "bridge.export")
    description, _settings = export.export_scene(scene, bpy.context.evaluated_depsgraph_get())
    np.testing.assert_allclose(description.tracks["gravity"][:, 2], [-9.81, -9.81, -5, -5, -5, -5],
                               rtol=1e-6, atol=0)  # float32 of the driver's value


def test_a_fluid_outside_its_container_is_warned_about_naming_both(scene, surge, tmp_path):
    """Before: a fluid entirely outside its container baked without a word and fell out of the world."""
    bake = submodule(surge, "bridge.bake")
    add_box("Water", (0.3, 0, 0), (0.4, 0.1, 0.1), role="FLUID")  # beside the tank, not in it
    add_box("Tank", (0, 0, 0), (0.1, 0.1, 0.3), role="COLLIDER", collider_mode="CONTAINER")
    scene.frame_start, scene.frame_end = 1, 2
    scene.surge.particle_spacing = 0.05
    scene.surge.cache_directory = str(tmp_path / "cache")
    session = bake.BakeSession(scene, bpy.context.evaluated_depsgraph_get())
    try:
        assert session.warnings == [
            "Fluid 'Water' lies entirely outside the container 'Tank': outside a container is solid, so this liquid "
            "starts inside a wall and falls out of the world; move it into the container"]
        while not session.finished:
            session.poll(timeout=0.5)
        result = session.finish()
    finally:
        session.release()
    assert result.warnings == session.warnings  # said once, though the bake process says it too
    bpy.data.objects["Water"].location.x = -0.25  # now inside: nothing to say
    session = bake.BakeSession(scene, bpy.context.evaluated_depsgraph_get())
    try:
        assert session.warnings == []
    finally:
        session.abort()


def test_gravity_at_a_unit_scale_is_what_blender_shows_and_the_default_is_warned_about(scene, surge, tmp_path):
    """Before: at a unit scale of 0.01 the default gravity baked as 0.0981 m/s^2 without a word (the liquid
    fell a hundred times too slowly); nothing said what Surge takes Scene > Gravity to mean."""
    bake = submodule(surge, "bridge.bake")
    export = submodule(surge, "bridge.export")
    column_scene(scene, str(tmp_path / "cache"), frames=(1, 2), spacing=0.05)
    scene.unit_settings.scale_length = 0.01
    for obj in bpy.data.objects:  # the same 10 cm tank and water, modelled in centimetres
        obj.scale = (100.0, 100.0, 100.0)
    scene.surge.particle_spacing = 5.0
    description, _settings = export.export_scene(scene, bpy.context.evaluated_depsgraph_get())
    # Blender's gravity is in scene units per s^2 and Blender itself shows it times the unit scale
    np.testing.assert_allclose(description.gravity, [0, 0, -0.0981], rtol=1e-6, atol=0)
    session = bake.BakeSession(scene, bpy.context.evaluated_depsgraph_get())
    try:
        assert any("gravity is 0.0981 m/s^2, Blender's default" in w and "Set Earth Gravity" in w
                   for w in session.warnings), session.warnings
    finally:
        session.abort()
    assert bpy.ops.surge.earth_gravity() == {"FINISHED"}
    description, _settings = export.export_scene(scene, bpy.context.evaluated_depsgraph_get())
    np.testing.assert_allclose(description.gravity, [0, 0, -9.81], rtol=1e-6, atol=0)  # float32 of -981
    session = bake.BakeSession(scene, bpy.context.evaluated_depsgraph_get())
    try:
        assert not any("gravity" in w for w in session.warnings)
    finally:
        session.abort()
