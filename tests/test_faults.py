"""Faults and bad input that used to lose a bake or end in a traceback: a full disk at a re-bake's first
frame, a bake stopped between two checkpoints, a bake whose parent process died, malformed manifests.

Each test names in its docstring what the engine did before.
"""

import errno
import json
import os
import subprocess
import sys
import time

import numpy as np
import pytest

from engine import driver
from engine import scene as sc
from engine.errors import BakeCancelled
from engine.io import checkpoint
from engine.io.cache import CacheReader
from engine.settings import SimulationSettings
from helpers import column_scene

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
SETTINGS = SimulationSettings(solver="PBF", particle_spacing=0.02)


def _scene(frames=(1, 8), tank=(0.1, 0.1, 0.3)):
    """45 particles (3 x 3 x 5) standing in a tank: small, so the tests stay quick."""
    return column_scene(water=(0.06, 0.06, 0.1), tank=tank, frames=frames)


def _tree(folder):
    """Relative path -> bytes of every file under ``folder``."""
    out = {}
    for base, _dirs, names in os.walk(folder):
        for n in names:
            with open(os.path.join(base, n), "rb") as fh:
                out[os.path.relpath(os.path.join(base, n), folder)] = fh.read()
    return out


def _events(text):
    return [json.loads(line) for line in text.splitlines() if line.startswith("{")]


def _cli_env():
    return dict(os.environ, PYTHONPATH=ROOT)


def test_a_full_disk_at_a_rebakes_first_frame_keeps_the_previous_bake(tmp_path, monkeypatch):
    """Before: the new manifest (no frames) was written and the old frames and checkpoints deleted before
    the first frame was; the frame's write then failed ('Cannot write ...frame_000001.npz') and the
    folder was left empty, the manifest saying 'baking' and resume finding nothing to resume.

    The disk fills up as the first frame is written (the same fault from a real file size limit, in a
    bake process started by Blender, is tests/blender/test_faults_in_blender.py's)."""
    cache_dir = str(tmp_path / "cache")
    driver.bake(_scene((1, 8)), SETTINGS, cache_dir, checkpoint_every=3)
    before = _tree(cache_dir)
    savez = np.savez

    def full_disk(fh, **arrays):
        if "position" in arrays:  # a frame: half of it fits
            fh.write(b"\0" * 1000)
            raise OSError(errno.ENOSPC, "No space left on device")
        savez(fh, **arrays)

    monkeypatch.setattr(np, "savez", full_disk)
    with pytest.raises(OSError) as info:
        driver.bake(_scene((1, 8), tank=(0.2, 0.1, 0.3)), SETTINGS, cache_dir, checkpoint_every=3)
    message = str(info.value)
    assert "frame_000001.npz': the disk is full or a file size limit was reached (No space left on" in message
    assert "[Errno" not in message and "previous bake" in message and "is kept" in message
    assert info.value.errno == errno.ENOSPC
    assert _tree(cache_dir) == before  # not a byte changed: frames, checkpoints, manifest, no temporary file
    assert CacheReader(cache_dir).manifest["status"] == "complete"
    assert checkpoint.resumable_frames(cache_dir) == [4, 7]


def test_a_bake_stopped_between_checkpoints_resumes_where_it_stopped_bit_for_bit(tmp_path):
    """Before: a bake cancelled at frame 3 of checkpoints every 10 frames held no checkpoint, and Resume
    said 'nothing to resume ... no checkpoint'."""
    whole, parts = str(tmp_path / "whole"), str(tmp_path / "parts")
    driver.bake(_scene(), SETTINGS, whole)
    seen = []
    with pytest.raises(BakeCancelled):
        driver.bake(_scene(), SETTINGS, parts, checkpoint_every=10, progress=seen.append,
                    cancel=lambda: any(e.get("frame", 0) >= 3 for e in seen))
    manifest = CacheReader(parts).manifest
    assert manifest["status"] == "cancelled" and manifest["frames"] == [1, 2, 3]
    assert "a checkpoint at frame 3 resumes it from there" in manifest["message"]
    assert checkpoint.resumable_frames(parts) == [3]
    seen.clear()
    driver.bake(_scene(), SETTINGS, parts, checkpoint_every=10, resume_from="latest", progress=seen.append)
    assert [e["frame"] for e in seen if e["event"] == "frame"] == [4, 5, 6, 7, 8]
    a, b = CacheReader(whole), CacheReader(parts)
    assert a.frames == b.frames == list(range(1, 9))
    for f in range(1, 9):
        fa, fb = a.read_frame(f), b.read_frame(f)
        for name in ("position", "velocity", "density", "id"):
            # deterministic mode, state restored exactly: bit-identical, not merely close
            np.testing.assert_array_equal(fa[name], fb[name], err_msg=f"frame {f} {name}")


@pytest.mark.skipif(sys.platform == "win32", reason="an orphan is adopted by another parent (POSIX)")
@pytest.mark.slow  # a bake process of its own, compiled kernels loaded again: in the full suite
def test_a_bake_whose_parent_dies_stops_cleanly_and_resumes(tmp_path):
    """Before: the orphaned bake died on a broken pipe with a traceback in its log and the manifest said
    'failed' (or, while it was not printing, it baked on unseen); no checkpoint marked where it stopped."""
    cache_dir, job = str(tmp_path / "cache"), str(tmp_path / "job")
    sc.save_job(job, _scene((1, 2000)), SETTINGS)
    log = str(tmp_path / "bake.log")
    # a parent that starts the bake as Blender does (progress on a pipe, --watch-parent), waits for its
    # second frame, prints the bake's process id and dies without a word
    parent = (
        "import subprocess, sys\n"
        f"p = subprocess.Popen([sys.executable, '-m', 'engine.cli', 'bake', {job!r}, {cache_dir!r}, '--watch-parent',"
        f" '--checkpoint-every', '100'], stdout=subprocess.PIPE, stderr=open({log!r}, 'w'), text=True)\n"
        "for line in p.stdout:\n"
        "    if '\"frame\": 3,' in line:\n"
        "        break\n"
        "print(p.pid, flush=True)\n"
        "import os; os._exit(0)\n")
    out = subprocess.run([sys.executable, "-c", parent], cwd=ROOT, env=_cli_env(), capture_output=True, text=True,
                         timeout=600)
    child = int(out.stdout.strip())
    deadline = time.monotonic() + 120
    while time.monotonic() < deadline:
        try:
            os.kill(child, 0)
        except ProcessLookupError:
            break
        time.sleep(0.2)
    else:
        pytest.fail("the orphaned bake did not stop")
    manifest = CacheReader(cache_dir).manifest
    assert manifest["status"] == "stopped", manifest["message"]
    assert "went away" in manifest["message"] and len(manifest["frames"]) < 2000
    last = manifest["frames"][-1]
    assert checkpoint.resumable_frames(cache_dir) == [last]
    with open(log, encoding="utf-8") as fh:
        text = fh.read()
    assert "Traceback" not in text and "went away" in text
    driver.bake(_scene((1, last + 2)), SETTINGS, cache_dir, resume_from="latest")
    assert CacheReader(cache_dir).frames == list(range(1, last + 3))


def test_animated_values_that_are_not_numbers_or_out_of_range_name_the_setting_and_frame():
    """Before: a track with a NaN was refused as "has non-finite values" (no frame named), and a negative
    viscosity or a bounce of 3 in a job's tracks was baked as given."""
    from engine.errors import InvalidSceneError

    scene = _scene((1, 4))
    gravity = np.tile([0.0, 0.0, -9.81], (4, 1))
    gravity[2, 2] = np.nan
    scene = sc.SceneDescription(fluids=scene.fluids, containers=scene.containers, frame_start=1, frame_end=4,
                                tracks={"gravity": gravity, "dynamic_viscosity": np.array([1e-3, 1e-3, 1e-3, -1.0])})
    with pytest.raises(InvalidSceneError) as info:
        scene.validate()
    text = str(info.value)
    assert "Scene: the animation of 'Gravity' (gravity) is not a number at frame 3 (0, 0, nan)" in text
    assert "Scene: the animation of 'Viscosity' (dynamic_viscosity) is -1 at frame 4, outside its range (0 to" in text
