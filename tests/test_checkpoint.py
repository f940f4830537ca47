"""Checkpoints and resume: a resumed bake equals an uninterrupted one; a killed bake stays readable."""

import dataclasses
import json
import os
import signal
import subprocess
import sys

import numpy as np
import pytest

from engine.io import checkpoint
from engine import driver
from engine import scene as sc
from engine.io.cache import CacheReader
from engine.errors import BakeCancelled, InvalidSceneError, InvalidSettingsError
from engine import settings as settings_mod
from engine.settings import SimulationSettings
from helpers import column_scene

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
FRAMES = (1, 8)


def _settings(solver):
    if solver == "WCSPH-SUMMATION":
        return SimulationSettings(solver="WCSPH", particle_spacing=0.02, wcsph_density="SUMMATION")
    return SimulationSettings(solver=solver, particle_spacing=0.02)


def _scene(frames):
    """45 particles (3 x 3 x 5) standing in a tank: small, so the tests stay quick."""
    return column_scene(water=(0.06, 0.06, 0.1), frames=frames)


def _cancel_after(frame):
    seen = []

    def progress(event):
        if event.get("event") == "frame":
            seen.append(event["frame"])

    return progress, (lambda: bool(seen) and seen[-1] >= frame)


def _assert_same_frames(a, b, frames):
    ra, rb = CacheReader(a), CacheReader(b)
    assert ra.frames == rb.frames == list(frames)
    for f in frames:
        fa, fb = ra.read_frame(f), rb.read_frame(f)
        for name in ("position", "velocity", "density", "id"):
            # deterministic mode: bit-identical, not merely close
            np.testing.assert_array_equal(fa[name], fb[name], err_msg=f"frame {f} {name}")


@pytest.mark.parametrize("solver", ["WCSPH", "WCSPH-SUMMATION", "PBF"])
def test_resume_after_cancel_equals_an_uninterrupted_bake(tmp_path, solver):
    scene, settings = _scene(FRAMES), _settings(solver)
    whole, parts = str(tmp_path / "whole"), str(tmp_path / "parts")
    driver.bake(scene, settings, whole, checkpoint_every=3)
    assert checkpoint.frames_on_disk(whole) == [4, 7]

    progress, cancel = _cancel_after(5)
    with pytest.raises(BakeCancelled):
        driver.bake(scene, settings, parts, progress=progress, cancel=cancel, checkpoint_every=3)
    reader = CacheReader(parts)
    assert reader.frames == list(range(1, 6)) and reader.manifest["status"] == "cancelled"
    assert checkpoint.resumable_frames(parts) == [4, 5]  # the regular one, and the cancel's own at its last frame

    summary = driver.bake(scene, settings, parts, resume_from="latest", checkpoint_every=3)
    assert summary["frames"] == 8
    _assert_same_frames(whole, parts, range(1, 9))
    manifest = CacheReader(parts).manifest
    assert manifest["status"] == "complete"
    assert [g["from_frame"] for g in manifest["segments"]] == [1, 6]
    assert manifest["segments"][0]["settings_hash"] == manifest["segments"][1]["settings_hash"]


def test_resume_with_new_settings_records_them_and_fixed_settings_are_refused(tmp_path):
    scene, settings = _scene((1, 8)), _settings("PBF")
    cache = str(tmp_path / "cache")
    driver.bake(scene, settings, cache, checkpoint_every=3)
    thicker = dataclasses.replace(settings, pbf_velocity_smoothing=1.0)
    manifest = CacheReader(cache).manifest
    assert checkpoint.changed_settings(manifest, settings_mod.to_dict(thicker)) == ["pbf_velocity_smoothing"]

    driver.bake(scene, thicker, cache, resume_from=4)
    manifest = CacheReader(cache).manifest
    segments = manifest["segments"]
    assert [(g["from_frame"], g["settings"]["pbf_velocity_smoothing"]) for g in segments] == [(1, 0.02), (5, 1.0)]
    assert manifest["settings"]["pbf_velocity_smoothing"] == 1.0 and CacheReader(cache).frames == list(range(1, 9))
    assert checkpoint.frames_on_disk(cache) == [4]  # the later checkpoints belonged to the replaced frames

    before = json.dumps(CacheReader(cache).manifest, sort_keys=True)
    coarser = dataclasses.replace(settings, particle_spacing=0.025, solver="WCSPH")
    with pytest.raises(InvalidSettingsError) as info:
        driver.bake(scene, coarser, cache, resume_from=4)
    assert "'Particle Spacing' changed" in str(info.value) and "'Solver' changed" in str(info.value)
    with pytest.raises(InvalidSceneError, match="no checkpoint at frame 6"):
        driver.bake(scene, settings, cache, resume_from=6)
    assert json.dumps(CacheReader(cache).manifest, sort_keys=True) == before  # refused: nothing changed


def test_a_bake_killed_mid_frame_leaves_a_readable_cache_that_resumes(tmp_path):
    scene, settings = _scene((1, 400)), _settings("PBF")
    job, cache = str(tmp_path / "job"), str(tmp_path / "cache")
    sc.save_job(job, scene, settings)
    env = dict(os.environ, PYTHONPATH=ROOT)
    proc = subprocess.Popen([sys.executable, "-m", "engine.cli", "bake", job, cache, "--checkpoint-every", "2"],
                            cwd=ROOT, env=env, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True)
    for line in proc.stdout:
        event = json.loads(line)
        if event["event"] == "frame" and event["frame"] >= 6:
            proc.send_signal(signal.SIGKILL)  # in the middle of the next frame, with no chance to clean up
            break
    proc.wait()
    proc.stdout.close()
    assert proc.returncode == -signal.SIGKILL

    reader = CacheReader(cache)
    assert reader.manifest["status"] == "baking"  # nobody recorded an end
    assert reader.frames[:6] == list(range(1, 7))
    for f in reader.frames:
        assert len(reader.read_frame(f)["id"]) == 45
    last = checkpoint.resumable_frames(cache)[-1]
    assert last >= 5 and (last - 1) % 2 == 0  # checkpoints at 3, 5, 7...; frame 6 was reported, so 5 is saved

    kept = {f: reader.read_frame(f) for f in range(1, last + 1)}
    # resume in this process, over a shorter range (the last frame may change on resume)
    shorter = dataclasses.replace(scene, frame_end=last + 3)
    driver.bake(shorter, settings, cache, resume_from=last)
    reader = CacheReader(cache)
    assert reader.frames == list(range(1, last + 4)) and reader.manifest["status"] == "complete"
    for f, arrays in kept.items():
        np.testing.assert_array_equal(reader.read_frame(f)["position"], arrays["position"], err_msg=str(f))


def test_a_summation_checkpoint_resumes_with_continuity_density(tmp_path):
    # The checkpoint of a summation bake holds no liquid density of its own: the continuity solver
    # takes it from the saved density, less the walls' part, and carries on.
    scene = _scene((1, 8))
    settings = _settings("WCSPH-SUMMATION")
    cache = str(tmp_path / "cache")
    driver.bake(scene, settings, cache, checkpoint_every=3)
    assert "solver_rho_liquid" not in checkpoint.load(cache, 4)
    driver.bake(scene, dataclasses.replace(settings, wcsph_density="CONTINUITY"), cache, resume_from=4,
                checkpoint_every=3)
    reader = CacheReader(cache)
    assert reader.frames == list(range(1, 9))
    rho = reader.read_frame(8)["density"]
    assert np.all(np.isfinite(rho))
    # the continuity bake's own checkpoint holds the liquid's density, one value per particle
    assert checkpoint.load(cache, 7)["solver_rho_liquid"].shape == rho.shape
