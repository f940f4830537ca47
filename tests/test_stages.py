"""Stages over an existing cache (engine.stages) with the surface stage: resume, re-mesh, cancel, kill,
exit codes, and the stage run inside a bake."""

import hashlib
import json
import os
import signal
import subprocess
import sys
import time

import numpy as np
import pytest

from engine import driver, stages
from engine.io.cache import CacheReader, CacheWriter
from engine.errors import BakeCancelled
from engine.settings import SimulationSettings
from engine.surface import stage as surface_stage
from helpers import column_scene

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
DX = 0.01


def _write_cache(path, frames=4, n=12):
    """A block of n^3 particles at spacing DX sliding along x by one spacing a frame."""
    g = np.stack(np.meshgrid(*[np.arange(n) * DX] * 3, indexing="ij"), -1).reshape(-1, 3).astype(np.float32)
    w = CacheWriter(str(path), {"frame_start": 1, "frame_end": frames, "fps": 24.0, "particle_spacing": DX,
                                "settings": {"particle_spacing": DX, "rest_density": 1000.0}})
    for f in range(1, frames + 1):
        x = g + np.float32([DX * (f - 1), 0, 0])
        w.write_frame(f, {"position": x, "velocity": np.tile(np.float32([0.24, 0, 0]), (len(g), 1)),
                          "density": np.full(len(g), 1000.0, np.float32), "id": np.arange(len(g), dtype=np.int32),
                          "age": np.full(len(g), (f - 1) / 24.0, np.float32)})
    w.finish("complete")
    return str(path)


def _stage(cache_dir, **settings):
    return stages.make_stage("surface", CacheReader(cache_dir).manifest, settings)


def _digest(folder):
    """SHA-256 of every file of the particle cache (manifest, frames), by relative path."""
    out = {}
    for root, _dirs, names in os.walk(folder):
        if os.path.relpath(root, folder).split(os.sep)[0] == "surface":
            continue
        for n in names:
            p = os.path.join(root, n)
            out[os.path.relpath(p, folder)] = hashlib.sha256(open(p, "rb").read()).hexdigest()
    return out


def test_stage_meshes_every_frame_with_progress_and_a_manifest(tmp_path):
    cache = _write_cache(tmp_path / "c")
    events = []
    summary = stages.StageRunner(cache, _stage(cache), progress=events.append).run()
    assert summary["frames"] == 4 and summary["processed"] == 4
    assert [e["frame"] for e in events if e["event"] == "frame"] == [1, 2, 3, 4]
    assert all(e["vertices"] > 0 and e["triangles"] > 0 for e in events if e["event"] == "frame")
    manifest = stages.read_manifest(cache, "surface")
    assert manifest["status"] == "complete" and manifest["frames"] == [1, 2, 3, 4]
    assert manifest["settings"]["surface_cell_size"] == 0.5 and len(manifest["settings_hash"]) == 64
    mesh = surface_stage.read_frame(cache, 3)
    # the mesh moves with its particles: every vertex at the particles' 0.24 m/s
    np.testing.assert_allclose(mesh["velocity"], np.tile([0.24, 0, 0], (len(mesh["vertices"]), 1)),
                               rtol=0, atol=1e-6)


def test_same_settings_keep_every_frame_new_settings_remesh_and_the_particles_stay_byte_identical(tmp_path):
    cache = _write_cache(tmp_path / "c")
    stages.StageRunner(cache, _stage(cache)).run()
    before = _digest(cache)
    again = stages.StageRunner(cache, _stage(cache)).run()
    assert again["processed"] == 0 and again["kept"] == 4
    coarse = stages.StageRunner(cache, _stage(cache, surface_cell_size=1.0)).run()
    assert coarse["processed"] == 4 and coarse["kept"] == 0
    assert _digest(cache) == before
    assert stages.read_manifest(cache, "surface")["settings"]["surface_cell_size"] == 1.0


def test_a_frame_baked_again_is_meshed_again(tmp_path):
    cache = _write_cache(tmp_path / "c")
    stages.StageRunner(cache, _stage(cache)).run()
    time.sleep(0.01)
    _write_cache(tmp_path / "c")  # the particles were baked again: same names, new files
    assert stages.StageRunner(cache, _stage(cache)).run()["processed"] == 4


def test_cancel_keeps_the_meshed_frames_and_a_second_run_finishes(tmp_path):
    cache = _write_cache(tmp_path / "c")
    done = []

    def cancel():
        return len(done) >= 2

    runner = stages.StageRunner(cache, _stage(cache), progress=lambda e: done.append(e) if e["event"] == "frame"
                                else None, cancel=cancel)
    with pytest.raises(BakeCancelled):
        runner.run()
    manifest = stages.read_manifest(cache, "surface")
    assert manifest["status"] == "cancelled" and manifest["frames"] == [1, 2]
    rest = stages.StageRunner(cache, _stage(cache)).run()
    assert rest["kept"] == 2 and rest["processed"] == 2


def _cli(*args, **kw):
    env = dict(os.environ, PYTHONPATH=ROOT)
    return subprocess.Popen([sys.executable, "-m", "engine.stages", *args], cwd=ROOT, env=env,
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, **kw)


def test_cli_exit_codes_and_events(tmp_path):
    cache = _write_cache(tmp_path / "c", frames=2)
    settings = tmp_path / "s.json"
    settings.write_text(json.dumps({"surface_smoothing_iterations": 5}))
    p = _cli("run", "surface", cache, "--settings", str(settings), "--quiet")
    out, _err = p.communicate(timeout=300)
    events = [json.loads(line) for line in out.splitlines()]
    assert p.returncode == 0 and events[-1]["event"] == "done" and events[-1]["status"] == "complete"
    assert [e["frame"] for e in events if e["event"] == "frame"] == [1, 2]
    flag = tmp_path / "cancel.flag"
    flag.write_text("cancel")
    p = _cli("run", "surface", cache, "--restart", "--cancel-file", str(flag), "--quiet")
    out, _err = p.communicate(timeout=300)
    assert p.returncode == 3 and json.loads(out.splitlines()[-1])["status"] == "cancelled"
    p = _cli("run", "surface", str(tmp_path / "nothing"), "--quiet")
    out, _err = p.communicate(timeout=300)
    assert p.returncode == 1 and json.loads(out.splitlines()[-1])["event"] == "error"
    settings.write_text(json.dumps({"surface_iso": 7.0}))
    p = _cli("run", "surface", cache, "--settings", str(settings), "--quiet")
    out, _err = p.communicate(timeout=300)
    assert p.returncode == 1 and "Surface Iso Level" in json.loads(out.splitlines()[-1])["message"]
    p = _cli("run", "nosuchstage", cache)
    p.communicate(timeout=300)
    assert p.returncode == 2


def test_a_killed_stage_resumes_where_it_stopped(tmp_path):
    cache = _write_cache(tmp_path / "c", frames=30, n=16)
    p = _cli("run", "surface", cache, "--quiet")
    try:
        deadline = time.monotonic() + 240
        while time.monotonic() < deadline:
            m = stages.read_manifest(cache, "surface") if os.path.exists(os.path.join(cache, "surface",
                                                                                      "manifest.json")) else None
            if m and len(m["frames"]) >= 3:
                break
            time.sleep(0.02)
        os.kill(p.pid, signal.SIGKILL)
    finally:
        p.communicate(timeout=60)
    killed = stages.read_manifest(cache, "surface")
    assert killed["status"] == "running" and 3 <= len(killed["frames"]) < 30
    summary = stages.StageRunner(cache, _stage(cache)).run()
    assert summary["kept"] == len(killed["frames"]) and summary["frames"] == 30
    assert summary["processed"] == 30 - len(killed["frames"])


def test_free_the_stage_alone(tmp_path):
    cache = _write_cache(tmp_path / "c", frames=2)
    stages.StageRunner(cache, _stage(cache)).run()
    user_file = os.path.join(cache, "surface", "notes.txt")
    with open(user_file, "w") as fh:
        fh.write("mine")
    before = _digest(cache)
    removed = stages.clear_stage(cache, "surface", surface_stage.FILE_RE)
    assert removed == 3  # manifest and two meshes
    assert os.path.exists(user_file) and _digest(cache) == before
    assert stages.read_manifest(cache, "surface") is None


def test_surface_inside_a_bake_meshes_every_frame_as_it_is_written(tmp_path):
    cache = str(tmp_path / "bake")
    scene = column_scene(water=(0.1, 0.1, 0.1), tank=(0.2, 0.1, 0.2), frames=(1, 3))
    settings = SimulationSettings(particle_spacing=0.02)
    stage = surface_stage.make_stage({"particle_spacing": 0.02, "settings": {"rest_density": 1000.0}}, {}, {})
    events = []
    progress = stages.follow_bake(cache, [stage], events.append)
    driver.bake(scene, settings, cache, progress=progress)
    progress.finish("complete")
    frames = [e for e in events if e.get("event") == "frame"]
    assert [e["frame"] for e in frames] == [2, 3]
    assert all(e["surface_triangles"] > 0 and e["surface_seconds"] >= 0 for e in frames)
    assert stages.done_frames(cache, "surface") == CacheReader(cache).frames == [1, 2, 3]
    assert stages.read_manifest(cache, "surface")["status"] == "complete"
