"""Headless bakes: the environment's command (tools/bake.py) and "Bake in a Terminal" from the UI."""

from __future__ import annotations

import os
import re
import subprocess
import sys

import bpy
import pytest

from blender_helpers import add_box, bake_state, column_scene, evaluated_points, submodule

pytestmark = pytest.mark.blender

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))


def _saved_scene(scene, tmp_path, name="shot.blend"):
    """A PBF water column (250 particles, frames 1-3) saved with a cache folder next to it."""
    column_scene(scene, "//surge_cache/")
    scene.surge.solver = "PBF"
    blend = str(tmp_path / name)
    bpy.ops.wm.save_as_mainfile(filepath=blend)
    return blend


def _tool(*args):
    return subprocess.run([sys.executable, os.path.join(ROOT, "tools", "bake.py"), *args], capture_output=True,
                          text=True, timeout=900, cwd=str(ROOT))


@pytest.mark.slow  # a bake in a child process or a fresh Blender
def test_tool_bakes_a_blend_with_progress_lines_and_saves_it(scene, surge, tmp_path):
    blend = _saved_scene(scene, tmp_path)
    out = _tool(blend, "--save")
    assert out.returncode == 0, out.stdout[-2000:] + out.stderr[-2000:]
    lines = out.stdout.splitlines()
    for frame in (2, 3):
        assert any(line.startswith(f"Surge: Frame {frame} of 3: 250 particles") for line in lines), frame
    assert any(line.startswith("Surge: Baked frames 1-3") for line in lines)
    reader = submodule(surge, "engine.io.cache").CacheReader(str(tmp_path / "surge_cache"))
    assert reader.frames == [1, 2, 3] and reader.manifest["status"] == "complete"
    # saved: the file opens on the liquid that plays the new cache
    bpy.ops.wm.open_mainfile(filepath=blend)
    liquid = bpy.context.scene.surge.liquid_object
    assert liquid is not None and evaluated_points(liquid, 3)["count"] == 250


@pytest.mark.slow  # a bake in a child process or a fresh Blender
def test_tool_fails_with_a_message_on_a_broken_scene(scene, surge, tmp_path):
    column_scene(scene, "//surge_cache/")
    add_box("Sheet", (0.0, 0.0, 0.1), (0.05, 0.05, 0.1), role="FLUID")  # flat: no volume to fill
    bpy.data.objects["Water"].surge.role = "NONE"
    bpy.data.objects["Sheet"].data.clear_geometry()
    blend = str(tmp_path / "broken.blend")
    bpy.ops.wm.save_as_mainfile(filepath=blend)
    out = _tool(blend)
    assert out.returncode == 1, out.stdout[-2000:] + out.stderr[-2000:]
    assert "Surge: error:" in out.stderr and "Fluid 'Sheet' has no faces" in out.stderr
    assert not os.path.exists(tmp_path / "surge_cache" / "manifest.json")

    missing = _tool(str(tmp_path / "nowhere.blend"))
    assert missing.returncode == 1 and "no such file" in missing.stderr


@pytest.mark.slow  # a bake in a child process or a fresh Blender
def test_bake_in_a_terminal_runs_apart_and_load_baked_shows_it(scene, surge, tmp_path):
    blend = _saved_scene(scene, tmp_path)
    saved = os.path.getmtime(blend)
    # a change the artist has not saved: the terminal bakes it (from a copy) and leaves the file alone
    scene.frame_end = 4
    assert bpy.ops.surge.bake_in_terminal() == {"FINISHED"}
    assert os.path.getmtime(blend) == saved and bpy.data.filepath == blend
    copy = tmp_path / "surge_cache" / "terminal_bake.blend"
    assert copy.is_file()
    status = bake_state(surge, scene).status
    pid = int(re.search(r"process \(id (\d+)\)", status).group(1))
    _pid, code = os.waitpid(pid, 0)  # the test waits; the artist goes on working meanwhile
    log = (tmp_path / "surge_cache" / "terminal_bake.log").read_text()
    assert os.waitstatus_to_exitcode(code) == 0, log[-3000:]
    assert "Surge: Frame 4 of 4" in log  # the unsaved frame range
    assert scene.surge.liquid_object is None  # this file learns of the result only when asked
    assert bpy.ops.surge.load_baked() == {"FINISHED"}
    liquid = scene.surge.liquid_object
    assert evaluated_points(liquid, 4)["count"] == 250
    assert liquid.modifiers["Surge Cache"].cache_file.filepath.startswith("//surge_cache")
    assert blend == bpy.data.filepath
    # the log is Surge's own file: Free Bake removes it with the rest
    assert bpy.ops.surge.free_bake() == {"FINISHED"}
    assert not (tmp_path / "surge_cache" / "terminal_bake.log").exists() and not copy.exists()


def test_load_baked_without_a_bake_is_refused(scene, surge, tmp_path):
    scene.surge.cache_directory = str(tmp_path / "cache")
    with pytest.raises(RuntimeError, match="holds no baked liquid yet"):
        bpy.ops.surge.load_baked()
    scene.surge.cache_directory = ""  # the default folder is named after the file, which has no name yet
    with pytest.raises(RuntimeError, match="has not been saved yet"):
        bpy.ops.surge.bake_in_terminal()


@pytest.mark.slow  # bakes and meshes in child processes
def test_tool_meshes_the_surface_of_a_baked_file_and_refuses_an_unbaked_one(scene, surge, tmp_path):
    blend = _saved_scene(scene, tmp_path)
    out = _tool(blend, "--surface")
    assert out.returncode == 1 and "Surge: error:" in out.stderr and "bake the liquid first" in out.stderr
    out = _tool(blend, "--with-surface", "--save")
    assert out.returncode == 0, out.stdout[-2000:] + out.stderr[-2000:]
    stages = submodule(surge, "engine.stages")
    cache = str(tmp_path / "surge_cache")
    assert stages.done_frames(cache, "surface") == [1, 2, 3]
    before = stages.read_manifest(cache, "surface")["settings_hash"]
    # re-mesh the baked file with other surface settings, without simulating
    bpy.ops.wm.open_mainfile(filepath=blend)
    bpy.context.scene.surge.surface_iso = 0.5
    bpy.ops.wm.save_mainfile()
    out = _tool(blend, "--surface", "--save")
    assert out.returncode == 0, out.stdout[-2000:] + out.stderr[-2000:]
    assert any(line.startswith("Surge: Surface of 3 frames ready") for line in out.stdout.splitlines())
    manifest = stages.read_manifest(cache, "surface")
    assert manifest["settings_hash"] != before and manifest["frames"] == [1, 2, 3]
    bpy.ops.wm.open_mainfile(filepath=blend)
    assert bpy.context.scene.surge.surface_object is not None
