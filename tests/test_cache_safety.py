"""A bake never destroys what was baked: locks, ownership, transactional re-bakes and resumes,
checked resumes, job-folder validation, status and leftovers.

Each test names in its docstring what the code before these safeguards did.
"""

import dataclasses
import errno
import json
import os
import re
import signal
import socket
import subprocess
import sys

import numpy as np
import pytest

from engine.io import atomic, cache, lock as cachelock, checkpoint
from engine import driver
from engine import scene as sc
from engine.io.cache import CacheLock, CacheReader
from engine.errors import (BakeCancelled, CacheFormatError, CacheLockedError, ForeignFolderError,
                           InvalidSceneError)
from engine.scene.job import JOB_FORMAT_VERSION
from engine.settings import SimulationSettings
from helpers import column_scene

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
SETTINGS = SimulationSettings(solver="PBF", particle_spacing=0.02)


def _scene(frames=(1, 8), tank=(0.1, 0.1, 0.3)):
    """45 particles (3 x 3 x 5) standing in a tank: small, so the tests stay quick."""
    return column_scene(water=(0.06, 0.06, 0.1), tank=tank, frames=frames)


def _cli(*args, timeout=600):
    env = dict(os.environ, PYTHONPATH=ROOT)
    return subprocess.run([sys.executable, "-m", "engine.cli", *args], cwd=ROOT, env=env, capture_output=True,
                          text=True, timeout=timeout)


def _events(out):
    return [json.loads(line) for line in out.stdout.splitlines() if line.startswith("{")]


def _tree(folder):
    """Relative path -> bytes of every file under ``folder``."""
    out = {}
    for base, _dirs, names in os.walk(folder):
        for n in names:
            with open(os.path.join(base, n), "rb") as fh:
                out[os.path.relpath(os.path.join(base, n), folder)] = fh.read()
    return out


def _dead_pid():
    proc = subprocess.run([sys.executable, "-c", "import os; print(os.getpid())"], capture_output=True, text=True)
    return int(proc.stdout)


# -- locks -----------------------------------------------------------------------------------------------


@pytest.mark.skipif(not hasattr(signal, "SIGSTOP"), reason="holds the first bake with SIGSTOP (POSIX)")
def test_a_second_bake_into_a_folder_a_live_bake_holds_is_refused(tmp_path):
    """Before: both bakes wrote into the folder, sharing one manifest temp name and clearing each
    other's frames; either could report 'complete' over frames of the other scene.

    The first bake is stopped (SIGSTOP) after its first frame while the second one tries: a 40-frame
    bake of 45 particles can otherwise finish, and free the folder, before the second process has
    started, and the second bake then rightly succeeds."""
    cache_dir = str(tmp_path / "cache")
    job_a, job_b = str(tmp_path / "a"), str(tmp_path / "b")
    sc.save_job(job_a, _scene((1, 40)), SETTINGS)
    sc.save_job(job_b, column_scene(frames=(1, 5)), SETTINGS)  # 250 particles: another scene
    env = dict(os.environ, PYTHONPATH=ROOT)
    first = subprocess.Popen([sys.executable, "-m", "engine.cli", "bake", job_a, cache_dir], cwd=ROOT, env=env,
                             stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True)
    for line in first.stdout:
        if json.loads(line)["event"] == "frame":
            break  # the first bake is simulating
    os.kill(first.pid, signal.SIGSTOP)  # alive, holding the lock, until the second bake has tried
    try:
        second = _cli("bake", job_b, cache_dir)
    finally:
        os.kill(first.pid, signal.SIGCONT)
    rest = first.stdout.read()
    first.wait()
    first.stdout.close()
    assert second.returncode == 1
    error = _events(second)[-1]
    assert error["error"] == "CacheLockedError"
    assert f"process {first.pid} on '{socket.gethostname()}'" in error["message"] and cache_dir in error["message"]
    assert first.returncode == 0 and json.loads(rest.splitlines()[-1])["status"] == "complete"
    reader = CacheReader(cache_dir)
    assert reader.frames == list(range(1, 41)) and reader.manifest["status"] == "complete"
    assert all(len(reader.read_frame(f)["id"]) == 45 for f in reader.frames)  # all the first scene's
    assert not os.path.exists(os.path.join(cache_dir, cache.LOCK_FILE))


def test_a_stale_lock_is_taken_over_and_its_bake_marked_failed(tmp_path):
    """Before: there was no lock; a bake killed mid-way left its manifest saying 'baking' for ever."""
    cache_dir = str(tmp_path / "cache")
    w = cache.CacheWriter(cache_dir, {"frame_start": 1})
    with open(cachelock.lock_path(cache_dir), "w") as fh:
        json.dump({"purpose": "bake", "pid": _dead_pid(), "host": socket.gethostname(), "token": "x" * 32}, fh)
    with CacheLock(cache_dir) as lock:
        assert lock.took_over["pid"] and lock.still_held()
    assert CacheReader(cache_dir).manifest["status"] == w.manifest["status"] == "baking"
    # a bake that takes a dead holder's lock over records how that holder's bake ended
    with open(cachelock.lock_path(cache_dir), "w") as fh:
        json.dump({"purpose": "bake", "pid": _dead_pid(), "host": socket.gethostname(), "token": "y" * 32}, fh)
    with pytest.raises(BakeCancelled, match="before its first frame"):
        driver.bake(_scene((1, 3)), SETTINGS, cache_dir, cancel=lambda: True)
    assert CacheReader(cache_dir).manifest["status"] == "failed"
    assert not os.path.exists(cachelock.lock_path(cache_dir))


def test_a_lock_held_from_another_host_is_refused_naming_the_file(tmp_path):
    cache_dir = str(tmp_path / "cache")
    os.makedirs(cache_dir)
    with open(cachelock.lock_path(cache_dir), "w") as fh:
        json.dump({"purpose": "bake", "pid": 1, "host": "render-node-7", "token": "z" * 32}, fh)
    with pytest.raises(CacheLockedError, match="render-node-7.*delete '.*surge.lock'"):
        CacheLock(cache_dir).acquire()


def test_a_lock_of_this_process_refuses_a_second_holder_and_is_released(tmp_path):
    cache_dir = str(tmp_path / "cache")
    with CacheLock(cache_dir, "surface stage"):
        with pytest.raises(CacheLockedError, match="in use by surface stage"):
            CacheLock(cache_dir, "bake").acquire()
    with CacheLock(cache_dir, "bake"):
        pass


# -- ownership -------------------------------------------------------------------------------------------


@pytest.mark.parametrize("foreign", [{"manifest.json": b'{"my": "project"}'},
                                     {"notes.txt": b"mine", "job/settings.json": b"[1, 2]", "cancel.flag": b"x"}],
                         ids=["user-manifest", "user-files"])
def test_a_folder_with_foreign_files_is_refused_and_untouched(tmp_path, foreign):
    """Before: any manifest.json, job/settings.json or cancel.flag was overwritten or deleted by name."""
    cache_dir = tmp_path / "home"
    for rel, data in foreign.items():
        (cache_dir / rel).parent.mkdir(parents=True, exist_ok=True)
        (cache_dir / rel).write_bytes(data)
    with pytest.raises(ForeignFolderError, match="not a Surge|not Surge's"):
        driver.bake(_scene((1, 2)), SETTINGS, str(cache_dir))
    with pytest.raises(ForeignFolderError):
        cache.clear(str(cache_dir), include_grids=True)
    assert _tree(str(cache_dir)) == {os.path.normpath(k): v for k, v in foreign.items()}


def test_foreign_files_inside_a_cache_folder_survive_rebakes_and_clear(tmp_path):
    cache_dir = str(tmp_path / "cache")
    driver.bake(_scene((1, 3)), SETTINGS, cache_dir)
    mine = {"notes.txt": b"mine", os.path.join("frames", "keep.npz"): b"not a frame",
            os.path.join("frames", "frame_12.npz"): b"not ours either"}
    for rel, data in mine.items():
        with open(os.path.join(cache_dir, rel), "wb") as fh:
            fh.write(data)
    driver.bake(_scene((1, 3)), SETTINGS, cache_dir)
    cache.clear(cache_dir, include_grids=True)
    assert _tree(cache_dir) == mine


# -- transactional re-bakes and resumes ---------------------------------------------------------------------


def test_a_rebake_whose_old_files_cannot_be_deleted_keeps_the_previous_bake_until_its_first_frame(tmp_path):
    """Before: the re-bake deleted the manifest first, then failed on a file it could not delete, and
    the previous frames were gone. Now nothing changes before the new bake's first frame, and an old
    file that cannot be deleted no longer fails the bake (the manifest has stopped listing it)."""
    cache_dir = str(tmp_path / "cache")
    driver.bake(_scene((1, 8)), SETTINGS, cache_dir, checkpoint_every=3)
    # a file Surge would delete that cannot be deleted (on Windows: one another program holds open)
    os.makedirs(os.path.join(cache_dir, "frames", "frame_000020.npz", "held"))
    before = _tree(cache_dir)
    with pytest.raises(BakeCancelled, match="previous bake is kept"):
        driver.bake(_scene((1, 8), tank=(0.2, 0.1, 0.3)), SETTINGS, cache_dir, cancel=lambda: True)
    assert _tree(cache_dir) == before
    assert checkpoint.resumable_frames(cache_dir) == [4, 7]
    driver.bake(_scene((1, 5)), SETTINGS, cache_dir)  # and a re-bake goes through
    reader = CacheReader(cache_dir)
    assert reader.frames == [1, 2, 3, 4, 5] and reader.manifest["status"] == "complete"
    assert checkpoint.resumable_frames(cache_dir) == [] and checkpoint.frames_on_disk(cache_dir) == []


def test_a_resume_over_an_unreadable_early_frame_is_refused_and_changes_nothing(tmp_path):
    """Before: the resume went ahead and dropped the frames after the checkpoint; Blender then hit
    the truncated frame converting it and failed with an uncaught BadZipFile, the old USD gone."""
    cache_dir = str(tmp_path / "cache")
    driver.bake(_scene((1, 8)), SETTINGS, cache_dir, checkpoint_every=3)
    path = CacheReader(cache_dir).frame_path(2)
    with open(path, "r+b") as fh:
        fh.truncate(100)
    before = _tree(cache_dir)
    with pytest.raises(CacheFormatError, match=r"frame_000002\.npz.*bake again from the start"):
        driver.bake(_scene((1, 8)), SETTINGS, cache_dir, resume_from="latest")
    assert _tree(cache_dir) == before


def test_a_truncated_latest_checkpoint_falls_back_to_the_one_before(tmp_path):
    """Before: the resume failed on the truncated checkpoint instead of using the previous one."""
    whole, parts = str(tmp_path / "whole"), str(tmp_path / "parts")
    driver.bake(_scene((1, 8)), SETTINGS, whole)
    events = []
    with pytest.raises(BakeCancelled):
        driver.bake(_scene((1, 8)), SETTINGS, parts, checkpoint_every=3, progress=events.append,
                    cancel=lambda: any(e.get("frame", 0) >= 7 for e in events))
    assert checkpoint.resumable_frames(parts) == [4, 7]
    with open(checkpoint.checkpoint_path(parts, 7), "r+b") as fh:
        fh.truncate(200)
    events.clear()
    driver.bake(_scene((1, 8)), SETTINGS, parts, resume_from="latest", progress=events.append)
    warnings = [e["message"] for e in events if e["event"] == "warning"]
    assert len(warnings) == 1 and "checkpoint_000007.npz" in warnings[0] and "frame 4 instead" in warnings[0]
    assert [e["frame"] for e in events if e["event"] == "frame"] == [5, 6, 7, 8]
    a, b = CacheReader(whole), CacheReader(parts)
    for f in range(1, 9):
        np.testing.assert_array_equal(a.read_frame(f)["position"], b.read_frame(f)["position"], err_msg=str(f))


def test_a_resume_after_a_moved_wall_is_refused_unless_accepted(tmp_path):
    """Before: the manifest's scene hash was never compared; the resume went ahead silently."""
    cache_dir = str(tmp_path / "cache")
    driver.bake(_scene((1, 8)), SETTINGS, cache_dir, checkpoint_every=3)
    before = _tree(cache_dir)
    moved = _scene((1, 8), tank=(0.05, 0.1, 0.3))  # the wall now cuts through the liquid
    with pytest.raises(InvalidSceneError, match="Container 'Tank' changed since the cached frames were baked"):
        driver.bake(moved, SETTINGS, cache_dir, resume_from=7)
    assert _tree(cache_dir) == before
    driver.bake(moved, SETTINGS, cache_dir, resume_from=7, accept_scene_change=True)
    reader = CacheReader(cache_dir)
    assert reader.frames == list(range(1, 9)) and reader.manifest["status"] == "complete"
    # the frame count may grow on resume without counting as a scene change
    driver.bake(_scene((1, 10), tank=(0.05, 0.1, 0.3)), SETTINGS, cache_dir, resume_from=7)


def test_a_refused_resume_in_the_child_leaves_the_recorded_job(tmp_path):
    """Before: the host wrote the new job over job/ before the child refused it, so job/ no longer
    matched the frames."""
    cache_dir = str(tmp_path / "cache")
    job = os.path.join(cache_dir, "job")
    sc.save_job(job, _scene((1, 6)), SETTINGS)
    assert _cli("bake", job, cache_dir, "--checkpoint-every", "2").returncode == 0
    recorded = _tree(job)
    pending = os.path.join(job, "pending")
    sc.save_job(pending, _scene((1, 6)), dataclasses.replace(SETTINGS, particle_spacing=0.03))
    out = _cli("bake", pending, cache_dir, "--resume-from", "latest")
    assert out.returncode == 1 and "'Particle Spacing' changed" in _events(out)[-1]["message"]
    assert {k: v for k, v in _tree(job).items() if not k.startswith("pending")} == recorded
    sc.save_job(pending, _scene((1, 6), tank=(0.2, 0.1, 0.3)), SETTINGS)
    assert _cli("bake", pending, cache_dir).returncode == 0  # a new bake records its job
    assert _tree(job)["scene.npz"] == _tree(pending)["scene.npz"] != recorded["scene.npz"]


# -- status and leftovers ------------------------------------------------------------------------------------


def test_an_interrupted_write_leaves_no_temporary_file_and_names_the_file(tmp_path, monkeypatch):
    """Before: the temporary frame stayed behind and a full disk's message named no file."""
    target = str(tmp_path / "frame_000001.npz")

    def full_disk(fh):
        fh.write(b"partial")
        raise OSError(errno.ENOSPC, "No space left on device")

    with pytest.raises(OSError, match=r"Cannot write '.*frame_000001\.npz': the disk is full .*"
                                         r"\(No space left on device\)") as info:
        atomic.write_file(target, full_disk)
    assert info.value.errno == errno.ENOSPC
    assert os.listdir(tmp_path) == []


def test_a_killed_bake_is_marked_failed_and_its_leftovers_cleared_by_the_next(tmp_path):
    """Before: the manifest said 'baking' for ever and the killed writer's temporary files stayed."""
    cache_dir = str(tmp_path / "cache")
    job = str(tmp_path / "job")
    sc.save_job(job, _scene((1, 400)), SETTINGS)
    env = dict(os.environ, PYTHONPATH=ROOT)
    proc = subprocess.Popen([sys.executable, "-m", "engine.cli", "bake", job, cache_dir, "--checkpoint-every", "2"],
                            cwd=ROOT, env=env, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True)
    for line in proc.stdout:
        if json.loads(line).get("frame", 0) >= 4:
            proc.send_signal(signal.SIGKILL)
            break
    proc.wait()
    proc.stdout.close()
    leftover = os.path.join(cache_dir, "frames", atomic.temporary_name("frame_000009.npz"))
    with open(leftover, "wb") as fh:
        fh.write(b"PK half a frame")
    assert CacheReader(cache_dir).manifest["status"] == "baking"
    # a refused resume takes the dead bake's lock over and records how it ended
    with pytest.raises(InvalidSceneError, match="no checkpoint at frame 2"):
        driver.bake(_scene((1, 400)), SETTINGS, cache_dir, resume_from=2)
    manifest = CacheReader(cache_dir).manifest
    assert manifest["status"] == "failed" and "stopped unexpectedly" in manifest["message"]
    driver.bake(_scene((1, 6)), SETTINGS, cache_dir, resume_from="latest")
    assert not [n for n in os.listdir(os.path.join(cache_dir, "frames")) if atomic.is_temporary(n)]


# -- malformed job folders ------------------------------------------------------------------------------------


def _spoil_arrays(job, **changes):
    path = os.path.join(job, "scene.npz")
    with np.load(path) as z:
        arrays = {k: z[k] for k in z.files}
    arrays.update(changes)
    np.savez(path, **arrays)


def _spoil_json(job, name, edit):
    path = os.path.join(job, name)
    with open(path) as fh:
        doc = json.load(fh)
    with open(path, "w") as fh:
        json.dump(edit(doc), fh)


def _triangle_index(value):
    def spoil(job):
        with np.load(os.path.join(job, "scene.npz")) as z:
            tris = z["fluid0_triangles"].copy()
        tris[3, 1] = value
        _spoil_arrays(job, fluid0_triangles=tris)
    return spoil


@pytest.mark.parametrize("spoil, message", [
    (_triangle_index(10**6), "Fluid 'Water': a face refers to vertex 1000000, but the mesh has 8 vertices"),
    (_triangle_index(-3), "Fluid 'Water': a face refers to vertex -3"),
    (lambda job: _spoil_json(job, "settings.json", lambda d: []), "settings.json holds list"),
    (lambda job: _spoil_json(job, "settings.json", lambda d: None), "settings.json holds NoneType"),
    (lambda job: _spoil_json(job, "scene.json", lambda d: dict(d, frame_start="1")),
     "'frame_start' should be a whole number, not '1'"),
    (lambda job: _spoil_arrays(job, fluid0_vertices=np.zeros((8, 2))),
     r"Fluid 'Water': 'vertices' has shape \(8, 2\)"),
    (lambda job: _spoil_arrays(job, fluid0_vertices=np.full((8, 3), np.nan)), "'vertices' holds values that are "
                                                                             "not finite"),
    (lambda job: _spoil_json(job, "scene.json", lambda d: dict(d, fluids=[dict(d["fluids"][0], settings=[])])),
     "Fluid 'Water': 'settings' should be a JSON object"),
    (lambda job: _spoil_json(job, "scene.json", lambda d: dict(d, containers="Tank")), "'containers' should be a "
                                                                                    "list"),
    (lambda job: open(os.path.join(job, "scene.npz"), "r+b").truncate(50), "cannot be read"),
    # the fields of job format 4: animated settings, force fields, a fluid's velocity gradient
    (lambda job: _spoil_json(job, "scene.json", lambda d: dict(d, tracks={"gravity": "no_such_array"})),
     "Scene: 'tracks.gravity' names the array 'no_such_array', which scene.npz lacks"),
    (lambda job: _spoil_json(job, "scene.json", lambda d: dict(d, containers=[dict(d["containers"][0],
                                                                                   tracks=["friction"])])),
     "Container 'Tank': 'tracks' should map names to arrays"),
    (lambda job: _spoil_json(job, "scene.json", lambda d: dict(d, fluids=[dict(d["fluids"][0],
                                                                               velocity_gradient="gravity")])),
     r"Fluid 'Water': 'velocity_gradient' has shape \(3,\); it should be \(3, 3\)"),
    (lambda job: _spoil_json(job, "scene.json", lambda d: dict(d, force_fields=[
        {"name": "Wind", "kind": "WIND", "shape": "POINT", "flags": {}, "unit": "one", "matrices": "gravity",
         "values": {}}])),
     r"Force field 'Wind': 'unit' should be a number, not 'one'.*Force field 'Wind': 'matrices' has shape \(3,\)"),
    (lambda job: _spoil_json(job, "scene.json", lambda d: dict(d, force_fields=None)),
     "'force_fields' should be a list of objects, not NoneType"),
    (lambda job: _spoil_json(job, "scene.json", lambda d: dict(d, format_version=3)),
     f"has format 'surge-job' version 3; this engine reads surge-job version {JOB_FORMAT_VERSION}"),
], ids=["index-too-large", "index-negative", "settings-list", "settings-null", "frame-start-text",
        "vertices-2d", "vertices-nan", "object-settings-list", "containers-not-a-list", "npz-truncated",
        "track-missing-array", "tracks-not-a-map", "velocity-gradient-shape", "force-field-fields",
        "force-fields-null", "job-version-3"])
def test_a_malformed_job_gives_an_error_event_not_a_crash(tmp_path, spoil, message):
    """Before: an index out of range crashed the engine (exit -11), a negative one wrapped around
    silently, and the others ended in a traceback instead of an error event."""
    job, cache_dir = str(tmp_path / "job"), str(tmp_path / "cache")
    sc.save_job(job, _scene((1, 2)), SETTINGS)
    spoil(job)
    out = _cli("bake", job, cache_dir)
    assert out.returncode == 1, (out.returncode, out.stderr[-2000:])
    event = _events(out)[-1]
    assert event["event"] == "error" and event["error"] in ("InvalidSceneError", "InvalidSettingsError")
    assert job in event["message"] or "settings" in event["message"]
    assert re.search(message, event["message"]), event["message"]
    assert "Traceback" not in out.stderr
    assert not os.path.exists(cache_dir)  # refused before the cache folder was touched


# -- versioned formats ------------------------------------------------------------------------------------


def test_a_version_1_cache_is_refused_by_readers_and_replaced_by_a_bake(tmp_path):
    """Version 1 caches could lack ``age`` (it was added without a new version) and the playback
    guessed it; now the reader refuses them, and a bake may replace one (its marker proves it Surge's)."""
    cache_dir = tmp_path / "cache"
    (cache_dir / "frames").mkdir(parents=True)
    (cache_dir / "manifest.json").write_text(json.dumps({"format": "surge-cache", "format_version": 1,
                                                         "frames": [1], "attributes": {}}))
    (cache_dir / "frames" / "frame_000001.npz").write_bytes(b"old")
    with pytest.raises(CacheFormatError, match="format version 1; this version of Surge reads version 2"):
        CacheReader(str(cache_dir))
    driver.bake(_scene((1, 2)), SETTINGS, str(cache_dir))
    reader = CacheReader(str(cache_dir))
    assert reader.frames == [1, 2] and "age" in reader.read_frame(2) and reader.manifest["cache_id"]


def test_checkpoints_carry_a_format_version_and_others_are_refused(tmp_path):
    cache_dir = str(tmp_path / "cache")
    driver.bake(_scene((1, 4)), SETTINGS, cache_dir, checkpoint_every=3)
    state = checkpoint.load(cache_dir, 4)
    assert str(state["format"]) == "surge-checkpoint" and int(state["format_version"]) == 1
    for change in ({"format_version": np.int64(99)}, {"format": np.array("something")}):
        atomic.write_npz(checkpoint.checkpoint_path(cache_dir, 4), dict(state, **change))
        with pytest.raises(CacheFormatError, match="this version of Surge reads surge-checkpoint version 1"):
            checkpoint.load(cache_dir, 4)
    unversioned = {k: v for k, v in state.items() if k not in ("format", "format_version")}
    atomic.write_npz(checkpoint.checkpoint_path(cache_dir, 4), unversioned)
    with pytest.raises(CacheFormatError, match="format None version None"):
        checkpoint.load(cache_dir, 4)


def test_a_lock_joined_by_a_child_stays_held_while_the_child_lives(tmp_path):
    """A bake process whose Blender died keeps writing: its folder is not free for another bake."""
    cache_dir = str(tmp_path / "cache")
    os.makedirs(cache_dir)
    dead = _dead_pid()
    token = "t" * 32
    with open(cachelock.lock_path(cache_dir), "w") as fh:
        json.dump({"purpose": "bake", "pid": dead, "host": socket.gethostname(), "token": token}, fh)
    joined = CacheLock.join(cache_dir, token)  # this process plays the child
    assert cachelock.read_holder(cache_dir)["child_pid"] == os.getpid()
    with pytest.raises(CacheLockedError, match=f"process {dead}"):
        CacheLock(cache_dir).acquire()
    joined.release()  # the parent's to release: the file stays
    assert os.path.exists(cachelock.lock_path(cache_dir))
    with pytest.raises(CacheLockedError, match="not locked for this bake"):
        CacheLock.join(cache_dir, "u" * 32)


def test_a_changed_force_field_or_animation_counts_as_a_scene_change():
    """A resume compares every object of the job, force fields and animated settings included."""
    from engine.scene import jobcheck

    base = _scene((1, 4))
    before = jobcheck.scene_object_hashes(base)
    windy = dataclasses.replace(base, tracks={"gravity": np.tile([0.0, 0.0, -9.81], (4, 1))})
    assert jobcheck.scene_changes(before, jobcheck.scene_object_hashes(windy)) == [
        "the scene's gravity, first frame or frame rate changed"]
    assert jobcheck.scene_changes(before, jobcheck.scene_object_hashes(dataclasses.replace(base, frame_end=9))) == []


# -- stages and wedges respect the lock ---------------------------------------------------------------------


def test_a_stage_over_a_folder_a_bake_holds_is_refused_and_writes_nothing(tmp_path):
    """Before: a surface or whitewater stage wrote into a cache folder a bake was baking into."""
    cache_dir = str(tmp_path / "cache")
    driver.bake(_scene((1, 2)), SETTINGS, cache_dir)
    before = _tree(cache_dir)
    env = dict(os.environ, PYTHONPATH=ROOT)
    with CacheLock(cache_dir, "a bake of scene 'Shot'"):
        out = subprocess.run([sys.executable, "-m", "engine.stages", "run", "whitewater", cache_dir], cwd=ROOT,
                             env=env, capture_output=True, text=True, timeout=600)
        after = {k: v for k, v in _tree(cache_dir).items() if k != cache.LOCK_FILE}
    assert out.returncode == 1, out.stderr[-2000:]
    event = _events(out)[-1]
    assert event["error"] == "CacheLockedError"
    assert f"in use by a bake of scene 'Shot' (process {os.getpid()}" in event["message"]
    assert after == before  # no stage folder, no settings, nothing


def test_a_stage_joins_the_lock_its_starter_holds(tmp_path):
    cache_dir = str(tmp_path / "cache")
    driver.bake(_scene((1, 2)), SETTINGS, cache_dir)
    env = dict(os.environ, PYTHONPATH=ROOT)
    with CacheLock(cache_dir, "the whitewater of scene 'Shot' in Blender") as lock:
        out = subprocess.run([sys.executable, "-m", "engine.stages", "run", "whitewater", cache_dir,
                              "--lock-token", lock.token], cwd=ROOT, env=env, capture_output=True, text=True,
                             timeout=600)
        assert lock.still_held()  # the child's end does not release its starter's lock
    assert out.returncode == 0, out.stderr[-2000:]
    assert _events(out)[-1]["status"] == "complete"
    assert not os.path.exists(cachelock.lock_path(cache_dir))


def test_a_wedge_task_waits_for_a_bake_holding_its_cache_and_leaves_it_alone(tmp_path, monkeypatch):
    """A retried combination finds its cache held by the orphaned bake of a dead worker on another
    host: it waits for that bake to let go, and never takes or deletes the lock itself."""
    import threading
    import time

    from farm import wedge

    cache_dir = str(tmp_path / "cache")
    lines = []
    lock = CacheLock(cache_dir, "bake").acquire()
    releaser = threading.Timer(1.0, lock.release)
    releaser.start()
    t0 = time.monotonic()
    wedge._wait_for_cache_lock(cache_dir, lines.append)
    assert time.monotonic() - t0 >= 0.9 and not os.path.exists(cachelock.lock_path(cache_dir))
    assert "is held by bake (process" in lines[0]
    # a holder that stays: the task gives up waiting and the lock stays for the bake to refuse
    monkeypatch.setattr(wedge, "ORPHAN_WAIT", 1.0)
    with open(cachelock.lock_path(cache_dir), "w") as fh:
        json.dump({"purpose": "bake", "pid": 1, "host": "render-node-7", "token": "z" * 32}, fh)
    wedge._wait_for_cache_lock(cache_dir, lines.append)
    assert cachelock.read_holder(cache_dir)["host"] == "render-node-7"
    # a stale lock (its process is gone): no wait at all, the bake takes it over
    with open(cachelock.lock_path(cache_dir), "w") as fh:
        json.dump({"purpose": "bake", "pid": _dead_pid(), "host": socket.gethostname(), "token": "y" * 32}, fh)
    t0 = time.monotonic()
    wedge._wait_for_cache_lock(cache_dir, lines.append)
    assert time.monotonic() - t0 < 0.5


def test_only_the_atomic_module_renames_files_into_place():
    """The atomic-write pattern (temporary name, flush, rename) exists once: engine/io/atomic.py."""
    found = []
    for folder in ("engine", "bridge", "farm", "operators", "panels", "tools"):
        for base, _dirs, names in os.walk(os.path.join(ROOT, folder)):
            for n in names:
                path = os.path.join(base, n)
                if n.endswith(".py") and os.path.relpath(path, ROOT) != os.path.join("engine", "io", "atomic.py"):
                    with open(path, encoding="utf-8") as fh:
                        if "os.replace(" in fh.read():
                            found.append(os.path.relpath(path, ROOT))
    # the extension build moves downloaded wheels between its own folders, not files others read
    assert found == [os.path.join("tools", "build_extension.py")]


def test_a_wedge_task_needs_nothing_of_surge_on_the_worker(tmp_path):
    """The wedge's task code goes to a Dask worker by value with the engine modules it uses (atomic
    writes, the lock checks): a worker that cannot import Surge runs it."""
    cloudpickle = pytest.importorskip("cloudpickle")
    from farm import wedge

    cache_dir = str(tmp_path / "cache")
    os.makedirs(cache_dir)
    with open(cachelock.lock_path(cache_dir), "w") as fh:  # left by a bake that died
        json.dump({"purpose": "bake", "pid": _dead_pid(), "host": socket.gethostname(), "token": "y" * 32}, fh)
    for module in wedge.by_value_modules():
        cloudpickle.register_pickle_by_value(module)
    try:
        blob = cloudpickle.dumps(lambda folder: (wedge._wait_for_cache_lock(folder, print),
                                                 wedge.write_json_atomic(os.path.join(folder, "task.json"),
                                                                         {"pid": 1})))
    finally:
        for module in wedge.by_value_modules():
            cloudpickle.unregister_pickle_by_value(module)
    (tmp_path / "task.pkl").write_bytes(blob)
    script = ("import pickle, sys\n"
              "task = pickle.load(open('task.pkl', 'rb'))\n"
              "task(sys.argv[1])\n"
              "surge = ('engine', 'bridge', 'farm')\n"
              "assert not [m for m in sys.modules if m.split('.')[0] in surge], 'imported Surge'\n")
    # -I: no PYTHONPATH, no working folder on the path; the repository cannot be imported
    out = subprocess.run([sys.executable, "-I", "-c", script, cache_dir], cwd=str(tmp_path), capture_output=True,
                         text=True, timeout=120)
    assert out.returncode == 0, out.stderr[-3000:]
    with open(os.path.join(cache_dir, "task.json")) as fh:
        assert json.load(fh) == {"pid": 1}
