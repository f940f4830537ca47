"""Wedges on a Dask cluster with real processes (localhost only): tools/wedge.py, tools/bake.py --set.

Each bake is a separate headless Blender running ``tools/bake.py``, as on a farm; the shot is the
250-particle column of ``blender_helpers.column_scene``.
"""

from __future__ import annotations

import json
import re
import os
import signal
import subprocess
import sys
import time

import bpy
import pytest

from blender_helpers import column_scene, submodule

pytestmark = [pytest.mark.blender, pytest.mark.slow]

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
BIN = os.path.dirname(sys.executable)


def _shot(scene, tmp_path, frames=(1, 3), name="shot.blend", spacing=0.02):
    column_scene(scene, "//surge_cache/", frames=frames, spacing=spacing)
    scene.surge.solver = "PBF"
    path = str(tmp_path / name)
    bpy.ops.wm.save_as_mainfile(filepath=path)
    return path


def _wedge(*args, timeout=900):
    return subprocess.run([sys.executable, os.path.join(ROOT, "tools", "wedge.py"), *args], capture_output=True,
                          text=True, timeout=timeout, cwd=ROOT)


def _manifest(cache_dir):
    with open(os.path.join(cache_dir, "manifest.json")) as f:
        return json.load(f)


def _doc(out):
    with open(os.path.join(out, "wedge.json")) as f:
        return json.load(f)


def test_apply_settings_checks_every_assignment_before_making_any(scene, surge, tmp_path):
    column_scene(scene, "//surge_cache/")
    headless = submodule(surge, "bridge.headless")
    errors = submodule(surge, "engine.errors")
    headless.apply_settings(scene, ["particle_spacing=0.03", "solver=WCSPH", "Scene.surge.dynamic_viscosity=0.002"])
    assert scene.surge.particle_spacing == pytest.approx(0.03) and scene.surge.solver == "WCSPH"
    assert scene.surge.dynamic_viscosity == pytest.approx(0.002)
    with pytest.raises(errors.InvalidSettingsError) as info:
        headless.apply_settings(scene, ["particle_spacing=0.05", "no_such=1", "dynamic_viscosity=5000000",
                                        "solver=FLIP",
                                        "spacing_factor@Nobody=2", "max_substeps=many"])
    text = str(info.value)
    for part in ("no Surge setting 'no_such'", "'dynamic_viscosity' must lie between", "'solver' is one of",
                 "No object 'Nobody'", "'max_substeps' takes a whole number"):
        assert part in text, (part, text)
    assert scene.surge.particle_spacing == pytest.approx(0.03)  # nothing was applied


def test_a_2x2_wedge_on_a_local_cluster_bakes_each_combination_with_its_settings(scene, surge, tmp_path):
    shot = _shot(scene, tmp_path)
    out = str(tmp_path / "wedge")
    sets = ["--set", "particle_spacing=0.02,0.025", "--set", "dynamic_viscosity=0.0,0.002"]
    run = _wedge(shot, *sets, "--out", out, "--workers", "2")
    assert run.returncode == 0, run.stdout[-3000:] + run.stderr[-3000:]
    doc = _doc(out)
    combos = doc["combinations"]
    assert [c["settings"] for c in combos] == [{"particle_spacing": a, "dynamic_viscosity": b}
                                               for a in ("0.02", "0.025") for b in ("0.0", "0.002")]
    workers = set()
    for c in combos:
        assert c["status"] == "complete" and c["frames"] == [1, 2, 3], c
        assert c["bake_time"] > 0 and c["host"] and c["worker"].startswith("tcp://127.0.0.1")
        workers.add(c["worker"])
        m = _manifest(c["cache_dir"])
        assert m["status"] == "complete" and m["frames"] == [1, 2, 3]
        assert m["settings"]["particle_spacing"] == pytest.approx(float(c["settings"]["particle_spacing"]), rel=1e-6)
        assert m["settings"]["dynamic_viscosity"] == pytest.approx(float(c["settings"]["dynamic_viscosity"]), rel=1e-6,
                                                                   abs=1e-12)
        assert os.path.isfile(c["blend"])
        # progress per task on the console
        assert f"[{c['name']}] Surge: Frame 3 of 3" in run.stdout
    assert len(workers) == 2  # both workers took combinations
    # the combination's own .blend opens on its settings and plays its cache
    bpy.ops.wm.open_mainfile(filepath=combos[3]["blend"])
    sc = bpy.context.scene
    assert sc.surge.particle_spacing == pytest.approx(0.025) and sc.surge.dynamic_viscosity == pytest.approx(0.002)
    assert os.path.samefile(sc.surge.cache_directory, combos[3]["cache_dir"])
    assert sc.surge.liquid_object is not None

    # the same command again: everything complete, nothing baked
    again = _wedge(shot, *sets, "--out", out)
    assert again.returncode == 0, again.stdout[-3000:] + again.stderr[-3000:]
    assert again.stdout.count("complete earlier; skipped") == 4 and "Surge: Frame" not in again.stdout


def test_a_refused_combination_is_reported_failed_and_the_others_complete(scene, surge, tmp_path):
    shot = _shot(scene, tmp_path)
    out = str(tmp_path / "wedge")
    run = _wedge(shot, "--set", "dynamic_viscosity=0.001,5000000", "--out", out, "--workers", "2")
    assert run.returncode == 1, run.stdout[-3000:] + run.stderr[-3000:]
    ok, bad = _doc(out)["combinations"]
    assert ok["status"] == "complete" and _manifest(ok["cache_dir"])["status"] == "complete"
    assert bad["status"] == "failed" and "'dynamic_viscosity' must lie between" in bad["message"], bad
    assert not os.path.exists(os.path.join(bad["cache_dir"], "manifest.json"))


@pytest.fixture
def dask_cluster(tmp_path):
    """A scheduler and two workers started with Dask's own commands on 127.0.0.1; stopped afterwards."""
    info = str(tmp_path / "scheduler.json")
    procs = [subprocess.Popen([os.path.join(BIN, "dask"), "scheduler", "--host", "127.0.0.1", "--port", "0",
                               "--no-dashboard", "--scheduler-file", info],
                              stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, start_new_session=True)]
    deadline = time.monotonic() + 120
    while not os.path.exists(info) and time.monotonic() < deadline:
        time.sleep(0.2)
    assert os.path.exists(info), "the dask scheduler did not start"
    for _ in range(2):
        procs.append(subprocess.Popen([os.path.join(BIN, "dask"), "worker", "--scheduler-file", info, "--nthreads",
                                       "1", "--nworkers", "1", "--host", "127.0.0.1", "--no-dashboard"],
                                      stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, start_new_session=True))
    with open(info) as f:
        address = json.load(f)["address"]
    from distributed import Client

    with Client(address, timeout="60s") as client:
        client.wait_for_workers(2, timeout=120)
    yield address
    for p in procs:
        try:
            os.killpg(p.pid, signal.SIGTERM)
        except ProcessLookupError:
            pass
    for p in procs:
        try:
            p.wait(timeout=30)
        except subprocess.TimeoutExpired:
            os.killpg(p.pid, signal.SIGKILL)
            p.wait()


def test_the_wedge_runs_on_a_scheduler_and_workers_started_apart(scene, surge, tmp_path, dask_cluster):
    shot = _shot(scene, tmp_path)
    out = str(tmp_path / "wedge")
    run = _wedge(shot, "--set", "particle_spacing=0.02,0.025", "--scheduler", dask_cluster, "--out", out)
    assert run.returncode == 0, run.stdout[-3000:] + run.stderr[-3000:]
    doc = _doc(out)
    assert doc["scheduler"] == dask_cluster
    for c in doc["combinations"]:
        assert c["status"] == "complete" and _manifest(c["cache_dir"])["frames"] == [1, 2, 3]
        assert c["worker"].startswith("tcp://127.0.0.1")


def _pid_alive(pid):
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    return True


def test_a_worker_killed_mid_bake_loses_only_its_task_which_resumes_elsewhere(scene, surge, tmp_path, dask_cluster):
    shot = _shot(scene, tmp_path, frames=(1, 30))
    scene.surge.checkpoint_interval = 2
    bpy.ops.wm.save_mainfile()
    out = str(tmp_path / "wedge")
    wedge = subprocess.Popen([sys.executable, os.path.join(ROOT, "tools", "wedge.py"), shot, "--set",
                              "dynamic_viscosity=0.0", "--scheduler", dask_cluster, "--out", out],
                             stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, cwd=ROOT)
    try:
        folder = None
        deadline = time.monotonic() + 600
        killed = None
        while time.monotonic() < deadline and killed is None:
            time.sleep(0.2)
            try:
                folder = _doc(out)["combinations"][0]["folder"]
                task = json.load(open(os.path.join(folder, "task.json")))
                frames = _manifest(os.path.join(folder, "cache"))["frames"]
            except (OSError, ValueError, KeyError):
                continue
            if len(frames) >= 5:
                bake_pid = task["pid"]
                worker_pid = int(open(f"/proc/{bake_pid}/stat").read().rsplit(")", 1)[1].split()[1])
                os.kill(worker_pid, signal.SIGKILL)  # the worker process dies; its nanny starts a new one
                killed = (bake_pid, len(frames))
        assert killed, "the bake never got going"
        output, _ = wedge.communicate(timeout=900)
    finally:
        if wedge.poll() is None:
            wedge.kill()
    assert wedge.returncode == 0, output[-4000:]
    combo = _doc(out)["combinations"][0]
    assert combo["status"] == "complete", combo
    m = _manifest(combo["cache_dir"])
    assert m["status"] == "complete" and m["frames"] == list(range(1, 31))
    assert "Surge: resuming from the cache's last checkpoint" in output, output[-4000:]
    assert not _pid_alive(killed[0])  # the orphaned bake stopped itself


def test_the_wedge_panel_launches_a_wedge_and_loads_a_result(scene, surge, tmp_path):
    shot = _shot(scene, tmp_path)
    wedge_settings = scene.surge_wedge
    wedge_settings.output_directory = "//variants/"
    assert bpy.ops.surge.wedge_add() == {"FINISHED"}
    item = wedge_settings.variations[0]
    item.setting, item.values = "viscossity", "0.0,0.002"
    bpy.ops.wm.save_mainfile()
    with pytest.raises(RuntimeError, match="no Surge setting 'viscossity'"):  # refused before anything starts
        bpy.ops.surge.wedge_in_terminal()
    item.setting = "dynamic_viscosity"
    scene.surge.max_substeps = 1999  # an unsaved change: the wedge bakes the file as it is now
    assert bpy.ops.surge.wedge_in_terminal() == {"FINISHED"}
    assert not bpy.data.is_dirty or bpy.data.filepath == shot  # the artist's file stays where it was
    out = str(tmp_path / "variants")
    log = os.path.join(out, "wedge.log")
    deadline = time.monotonic() + 900
    while time.monotonic() < deadline:
        text = open(log).read() if os.path.exists(log) else ""
        if "Wedge: 2 of 2 complete" in text or "failed;" in text or "Traceback" in text:
            break
        time.sleep(0.5)
    assert "Wedge: 2 of 2 complete, 0 failed" in text, text[-3000:]
    # a result loads into the open file: its settings, its cache, its liquid
    assert bpy.ops.surge.load_wedge_result(combination="1") == {"FINISHED"}
    assert scene.surge.dynamic_viscosity == pytest.approx(0.002)
    combo = _doc(out)["combinations"][1]
    assert _manifest(combo["cache_dir"])["settings"]["max_substeps"] == 1999
    assert os.path.samefile(scene.surge.cache_directory, combo["cache_dir"])
    from blender_helpers import evaluated_points

    assert evaluated_points(scene.surge.liquid_object, 3)["count"] == 250
    with pytest.raises(TypeError):
        bpy.ops.surge.load_wedge_result(combination="7")


def test_surface_frames_on_a_cluster_equal_the_local_surface(scene, surge, tmp_path):
    import shutil

    import numpy as np

    shot = _shot(scene, tmp_path, frames=(1, 4))
    bake = subprocess.run([sys.executable, os.path.join(ROOT, "tools", "bake.py"), shot], capture_output=True,
                          text=True, timeout=900, cwd=ROOT)
    assert bake.returncode == 0, bake.stdout[-2000:] + bake.stderr[-2000:]
    local_cache = str(tmp_path / "surge_cache")
    # the same particle frames (times kept: the stage records their size and modification time)
    cluster_cache = str(tmp_path / "cluster_cache")
    shutil.copytree(local_cache, cluster_cache, copy_function=shutil.copy2)
    other = str(tmp_path / "cluster.blend")
    shutil.copy2(shot, other)
    tool = [sys.executable, os.path.join(ROOT, "tools", "bake.py")]
    local = subprocess.run(tool + [shot, "--surface"], capture_output=True, text=True, timeout=900, cwd=ROOT)
    assert local.returncode == 0, local.stdout[-2000:] + local.stderr[-2000:]
    bpy.ops.wm.open_mainfile(filepath=other)
    bpy.context.scene.surge.cache_directory = cluster_cache
    bpy.ops.wm.save_mainfile()
    spread = subprocess.run(tool + [other, "--surface", "--scheduler", "local", "--workers", "2", "--save"],
                            capture_output=True, text=True, timeout=900, cwd=ROOT)
    assert spread.returncode == 0, spread.stdout[-3000:] + spread.stderr[-3000:]
    workers = set(re.findall(r"\(worker (tcp://[0-9.:]+)\)", spread.stdout))
    assert len(workers) == 2, spread.stdout  # both workers meshed frames
    stage = submodule(surge, "engine.stages")
    assert stage.done_frames(cluster_cache, "surface") == stage.done_frames(local_cache, "surface") == [1, 2, 3, 4]
    assert stage.read_manifest(cluster_cache, "surface")["status"] == "complete"
    for frame in (1, 2, 3, 4):
        name = os.path.join("surface", "frames", f"surface_{frame:06d}.npz")
        with np.load(os.path.join(local_cache, name)) as a, np.load(os.path.join(cluster_cache, name)) as b:
            assert sorted(a.files) == sorted(b.files)
            assert a["triangles"].shape == b["triangles"].shape, frame
            # the same code on the same particles: the same mesh; the reconstruction's threads may number
            # the vertices differently, so they are compared as sets (sorted rows); atol 1e-6 m covers a few
            # float32 ulps of smoothing sums added in another order (coordinates below 1 m, ulp ~6e-8)
            va, vb = a["vertices"], b["vertices"]
            np.testing.assert_allclose(va[np.lexsort(va.T[::-1])], vb[np.lexsort(vb.T[::-1])], rtol=0, atol=1e-6,
                                       err_msg=f"frame {frame}")
    # the saved file plays the cluster's surface
    bpy.ops.wm.open_mainfile(filepath=other)
    assert bpy.context.scene.surge.surface_object is not None


def test_ctrl_c_cancels_cleanly_and_the_same_command_resumes(scene, surge, tmp_path):
    # both bakes must be running when Ctrl-C comes: 2,000 particles (1 cm spacing) over 400 frames take
    # tens of seconds each once compiled, where the two workers' starts (kernel compilation included)
    # differ by a few seconds; the 250-particle column baked 150 frames in 4 s, before the other began
    last = 400
    shot = _shot(scene, tmp_path, frames=(1, last), spacing=0.01)
    scene.surge.checkpoint_interval = 2
    bpy.ops.wm.save_mainfile()
    out = str(tmp_path / "wedge")
    args = [sys.executable, os.path.join(ROOT, "tools", "wedge.py"), shot, "--set", "dynamic_viscosity=0.0,0.001",
            "--out", out, "--workers", "2"]
    # the wedge gets Ctrl-C's default handling even when this test runs in the background of a
    # non-interactive shell, which starts its jobs with SIGINT ignored (inherited: Python would then
    # install no KeyboardInterrupt handler and the Ctrl-C below would do nothing)
    wedge = subprocess.Popen(args, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, cwd=ROOT,
                             preexec_fn=lambda: signal.signal(signal.SIGINT, signal.SIG_DFL))
    try:
        deadline = time.monotonic() + 600
        while time.monotonic() < deadline:
            time.sleep(0.2)
            try:
                frames = [len(_manifest(c["cache_dir"])["frames"]) for c in _doc(out)["combinations"]]
            except (OSError, ValueError, KeyError):
                continue
            if min(frames) >= 5:
                break
        assert max(frames) < last, "a bake ended before the test could cancel it"
        wedge.send_signal(signal.SIGINT)  # Ctrl-C
        output, _ = wedge.communicate(timeout=600)
    finally:
        if wedge.poll() is None:
            wedge.kill()
    assert wedge.returncode == 3, output[-3000:]
    for c in _doc(out)["combinations"]:
        assert c["status"] == "cancelled", c
        m = _manifest(c["cache_dir"])
        assert m["status"] != "complete" and 5 <= len(m["frames"]) < last  # frames kept
        assert not os.path.exists(os.path.join(c["folder"], "task.json"))  # no bake left running
    again = subprocess.run(args, capture_output=True, text=True, timeout=900, cwd=ROOT)
    assert again.returncode == 0, again.stdout[-3000:] + again.stderr[-3000:]
    assert again.stdout.count("Surge: resuming from the cache's last checkpoint") == 2
    for c in _doc(out)["combinations"]:
        assert c["status"] == "complete" and _manifest(c["cache_dir"])["frames"] == list(range(1, last + 1))
