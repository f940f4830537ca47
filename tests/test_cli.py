"""The command-line bake: JSON-lines progress, exit codes, cancel keeps frames, engine purity."""

import json
import os
import subprocess
import sys


from engine import scene as sc
from engine.io.cache import CacheReader
from engine.settings import SimulationSettings
from helpers import column_scene

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def _run(*args, timeout=600):
    env = dict(os.environ, PYTHONPATH=ROOT)
    return subprocess.run([sys.executable, "-m", "engine.cli", *args], cwd=ROOT, env=env, capture_output=True,
                          text=True, timeout=timeout)


def test_cli_bakes_and_reports_json_lines(tmp_path):
    sc.save_job(str(tmp_path / "job"), column_scene(frames=(3, 5)), SimulationSettings(particle_spacing=0.02))
    out = _run("bake", str(tmp_path / "job"), str(tmp_path / "cache"))
    assert out.returncode == 0, out.stderr
    events = [json.loads(line) for line in out.stdout.splitlines()]
    assert [e["frame"] for e in events if e["event"] == "frame"] == [4, 5]
    assert {"fill", "compile", "simulate"} <= {e["stage"] for e in events if e["event"] == "stage"}
    done = events[-1]
    assert done["event"] == "done" and done["status"] == "complete" and done["particles"] == 5 * 5 * 10
    frame, second = [e for e in events if e["event"] == "frame"]
    assert frame["particles"] == 250 and frame["substeps"] > 0
    # the first frame carries the kernels' compile: no estimate from it; the next frame's is the last one's 0
    assert frame["eta"] is None and second["eta"] == 0
    assert frame["memory"] > 2**20  # a Python process with numpy and numba holds far more than 1 MiB
    r = CacheReader(str(tmp_path / "cache"))
    assert r.frames == [3, 4, 5] and r.manifest["status"] == "complete"


def test_cli_cancel_keeps_written_frames(tmp_path):
    sc.save_job(str(tmp_path / "job"), column_scene(frames=(1, 40)), SimulationSettings(particle_spacing=0.02))
    flag = tmp_path / "cancel.flag"
    proc = subprocess.Popen([sys.executable, "-m", "engine.cli", "bake", str(tmp_path / "job"),
                             str(tmp_path / "cache"), "--cancel-file", str(flag)], cwd=ROOT,
                            env=dict(os.environ, PYTHONPATH=ROOT), stdout=subprocess.PIPE, text=True)
    seen = []
    for line in proc.stdout:
        e = json.loads(line)
        seen.append(e)
        if e["event"] == "frame" and e["frame"] == 3:
            flag.write_text("stop")
    assert proc.wait(timeout=600) == 3
    assert seen[-1]["event"] == "done" and seen[-1]["status"] == "cancelled"
    r = CacheReader(str(tmp_path / "cache"))
    assert r.manifest["status"] == "cancelled"
    assert r.frames[:3] == [1, 2, 3] and r.frames[-1] < 40
    for f in r.frames:
        assert len(r.read_frame(f)["id"]) == 250


def test_cli_reports_engine_errors(tmp_path):
    sc.save_job(str(tmp_path / "job"), column_scene(), SimulationSettings(solver="HYBRID", hybrid_sor_omega=1.5))
    settings_file = tmp_path / "job" / "settings.json"
    data = json.loads(settings_file.read_text())
    data["hybrid_sor_omega"] = 2.5  # outside 1 .. 1.99: SOR diverges
    settings_file.write_text(json.dumps(data))
    out = _run("bake", str(tmp_path / "job"), str(tmp_path / "cache"))
    assert out.returncode == 1
    err = json.loads(out.stdout.splitlines()[-1])
    assert err["event"] == "error" and err["error"] == "InvalidSettingsError" and "hybrid_sor_omega" in err["message"]
    assert not (tmp_path / "cache").exists()
    assert _run("bake").returncode == 2


def test_cli_bakes_the_hybrid_solver(tmp_path):
    """HYBRID was refused before this engine version; now it bakes like the other solvers."""
    sc.save_job(str(tmp_path / "job"), column_scene(frames=(1, 2)),
                SimulationSettings(solver="HYBRID", particle_spacing=0.02))
    out = _run("bake", str(tmp_path / "job"), str(tmp_path / "cache"))
    assert out.returncode == 0, out.stderr
    r = CacheReader(str(tmp_path / "cache"))
    assert r.frames == [1, 2] and r.manifest["solver"] == "HYBRID" and r.manifest["status"] == "complete"
    assert len(r.read_frame(2)["id"]) == 250


BLOCKER = """
import sys, importlib.abc
class Block(importlib.abc.MetaPathFinder):
    def find_spec(self, name, path=None, target=None):
        if name.split('.')[0] in ('bpy', 'mathutils', 'bmesh', 'gpu', 'bl_math'):
            raise ImportError('Blender module imported by the engine: ' + name)
sys.meta_path.insert(0, Block())
import pkgutil, importlib, engine
for m in pkgutil.walk_packages(engine.__path__, 'engine.'):
    importlib.import_module(m.name)
print('ok')
"""


def test_engine_imports_without_blender():
    out = subprocess.run([sys.executable, "-c", BLOCKER], cwd=ROOT, capture_output=True, text=True, timeout=300,
                         env=dict(os.environ, PYTHONPATH=ROOT))
    assert out.returncode == 0 and out.stdout.strip() == "ok", out.stderr


def test_engine_source_has_no_blender_or_absolute_imports():
    import re
    bad = re.compile(r"^\s*(import|from)\s+(bpy|mathutils|bmesh|gpu|engine)\b", re.M)
    for dirpath, _, files in os.walk(os.path.join(ROOT, "engine")):
        for name in files:
            if name.endswith(".py"):
                with open(os.path.join(dirpath, name), encoding="utf-8") as fh:
                    assert not bad.search(fh.read()), f"{name} imports Blender or uses an absolute engine import"


def test_pre_bake_checks_do_not_load_numba():
    """The host calls assemble.check_job inside Blender before every bake: it must stay light."""
    code = "import sys, engine.driver, engine.assemble; sys.exit(1 if 'numba' in sys.modules else 0)"
    out = subprocess.run([sys.executable, "-c", code], cwd=ROOT, env=dict(os.environ, PYTHONPATH=ROOT), timeout=120)
    assert out.returncode == 0


def test_cli_meshes_the_surface_inside_the_bake(tmp_path):
    from engine import stages
    from engine.surface import stage as surface_stage

    sc.save_job(str(tmp_path / "job"), column_scene(frames=(1, 3)), SimulationSettings(particle_spacing=0.02))
    settings = tmp_path / "surface.json"
    settings.write_text(json.dumps({"surface_vertex_attributes": True}))
    out = _run("bake", str(tmp_path / "job"), str(tmp_path / "cache"), "--surface", str(settings))
    assert out.returncode == 0, out.stderr
    events = [json.loads(line) for line in out.stdout.splitlines()]
    frames = [e for e in events if e["event"] == "frame"]
    assert [e["frame"] for e in frames] == [2, 3] and all(e["surface_triangles"] > 0 for e in frames)
    cache = str(tmp_path / "cache")
    assert stages.done_frames(cache, "surface") == [1, 2, 3]
    mesh = surface_stage.read_frame(cache, 3)
    assert {"vertices", "triangles", "velocity", "density", "age"} <= set(mesh)
    assert stages.read_manifest(cache, "surface")["status"] == "complete"
