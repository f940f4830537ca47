"""A wedge on a Dask LocalCluster against the same bakes one after the other with tools/bake.py.

The 97,336-particle dam break of ``bench/bench_blender.py`` (n = 46), 12 frames at 24 fps, in four
combinations (``viscosity`` x ``pbf_velocity_smoothing``, which leave the particle count alone). Both
runs bake the same four caches from the same saved shot, each in a fresh headless Blender
(``tools/bake.py``); a two-frame bake first compiles the kernels into the shared numba cache, so
neither run pays for compiling. Prints figures, asserts nothing.

    .venv/bin/python bench/bench_wedge.py                  # n = 46, 12 frames, 2 workers
    .venv/bin/python bench/bench_wedge.py --n 30 --frames 6

The wedge's start-up (starting the cluster's worker processes) is printed apart. On this 2-core
machine two workers bake two combinations at once with one numba thread each, where the
one-after-the-other bakes use both cores each: the wedge can only gain what one bake leaves
unused (serial parts: export, Blender start, cache writing).
"""

from __future__ import annotations

import argparse
import os
import re
import subprocess
import sys
import tempfile
import time

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, os.path.join(ROOT, "tools"))
sys.path.insert(0, os.path.join(ROOT, "bench"))

SETS = ("viscosity=0.001,0.01", "pbf_velocity_smoothing=0.01,0.02")


def make_shot(n: int, frames: int, folder: str) -> str:
    from bench_blender import build_scene  # imports bpy (and enables Surge from this tree)
    from blender_session import enable_from_source

    import bpy

    enable_from_source(ROOT, tempfile.mkdtemp(prefix="surge_bench_repo_"))
    build_scene(n, frames, "PBF", "//surge_cache/")
    path = os.path.join(folder, "dam_break.blend")
    bpy.ops.wm.save_as_mainfile(filepath=path)
    return path


def bake(shot: str, cache: str, *settings: str) -> float:
    command = [sys.executable, os.path.join(ROOT, "tools", "bake.py"), shot, "--cache-dir", cache]
    for s in settings:
        command += ["--set", s]
    t0 = time.perf_counter()
    out = subprocess.run(command, capture_output=True, text=True)
    if out.returncode != 0:
        raise SystemExit(f"bake failed: {out.stderr[-2000:]}")
    return time.perf_counter() - t0


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--n", type=int, default=46, help="particles along the block's edge")
    ap.add_argument("--frames", type=int, default=12)
    ap.add_argument("--workers", type=int, default=2)
    args = ap.parse_args(argv)
    folder = tempfile.mkdtemp(prefix="surge_bench_wedge_")
    shot = make_shot(args.n, args.frames, folder)
    # compile once into the numba cache every later bake shares
    bake(shot, os.path.join(folder, "warm"), "particle_spacing=0.05")

    values = [v.split("=")[1].split(",") for v in SETS]
    names = [v.split("=")[0] for v in SETS]
    sequential = []
    t0 = time.perf_counter()
    for a in values[0]:
        for b in values[1]:
            sequential.append(bake(shot, os.path.join(folder, f"seq_{a}_{b}"), f"{names[0]}={a}", f"{names[1]}={b}"))
    t_seq = time.perf_counter() - t0

    command = [sys.executable, os.path.join(ROOT, "tools", "wedge.py"), shot, "--out", os.path.join(folder, "wedge"),
               "--workers", str(args.workers)]
    for s in SETS:
        command += ["--set", s]
    t0 = time.perf_counter()
    out = subprocess.run(command, capture_output=True, text=True)
    t_wedge = time.perf_counter() - t0
    if out.returncode != 0:
        raise SystemExit(f"wedge failed: {out.stdout[-2000:]}{out.stderr[-2000:]}")
    startup = float(re.search(r"started in ([0-9.]+) s", out.stdout).group(1))
    bakes = [float(x) for x in re.findall(r"complete in ([0-9.]+) s", out.stdout)]

    n = args.n ** 3
    print(f"Dam break, {n:,} particles, {args.frames} frames, 4 combinations ({', '.join(SETS)}), "
          f"{os.cpu_count()} cores")
    bakes = ", ".join(f"{s:.1f}" for s in sequential)
    print(f"  one after the other (tools/bake.py)   {t_seq:8.1f} s   (bakes: {bakes} s)")
    print(f"  wedge, LocalCluster {args.workers} workers         {t_wedge:8.1f} s   (bakes: "
          f"{', '.join(f'{s:.1f}' for s in bakes)} s)")
    print(f"  cluster start-up                      {startup:8.1f} s")
    print(f"  wedge / one after the other           {t_wedge / t_seq:8.2f}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
