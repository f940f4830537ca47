"""End-to-end bake speed through Blender: export, child process, stepping and cache writing.

The common scene of ``bench/bench_step.py`` (a cube block of liquid at spacing dx = 0.025 m in the
corner of a box container of 4 x 3 x 1.5 block edges), built in Blender with an edge of n particles,
baked with ``bpy.ops.surge.bake()`` for one second of liquid at 24 fps. A first, two-frame bake of
the same scene compiles the kernels (the figure is for a bake with compiled kernels); the timed bake
then starts from an empty cache. Prints figures, asserts nothing.

    .venv/bin/python bench/bench_blender.py                 # n = 46 (97,336 particles), PBF
    .venv/bin/python bench/bench_blender.py --n 30 --solver WCSPH
    .venv/bin/python bench/bench_blender.py --peer taichi --peer-python ENV/bin/python --peer-script PATH

Figure of merit: simulated particle-seconds per wall-clock second, N x simulated time / bake time.

``--peer taichi`` then runs the taichi PBF reference (``bench/peer_taichi.py``: taichi 1.7.4 in an
environment of its own, outside the repository; interpreter and script from ``--peer-python`` /
``--peer-script`` or ``SURGE_PEER_PYTHON`` / ``SURGE_PEER_SCRIPT``) on a block of the same n^3
particles in the same tank, with as many threads as the bake used, and prints its stepping loop's
figure, its particle-steps per second times its 2 ms step (the loop alone: no export, no process, no
cache), the wall time 1 s of liquid would take it at that rate, and Surge's ratio to it. Without a
usable peer it says why and prints Surge's figures alone.
"""

from __future__ import annotations

import argparse
import os
import sys
import tempfile
import time

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, os.path.join(ROOT, "tools"))

import peer_taichi  # noqa: E402  (bench/ is the script's folder, first on sys.path)

from blender_session import enable_from_source  # noqa: E402  (needs sys.path above)
from demo import _box  # noqa: E402  (the demo's box maker: a cube scaled to the corners, scale applied)

import bpy  # noqa: E402

DX = 0.025


def build_scene(n: int, frames: int, solver: str, cache: str) -> None:
    bpy.ops.wm.read_homefile(use_empty=True)
    scene = bpy.context.scene
    scene.frame_start, scene.frame_end = 1, frames
    scene.render.fps, scene.render.fps_base = 24, 1.0
    edge = n * DX
    tank = _box("Tank", (0.0, 0.0, 0.0), (4.0 * edge, 3.0 * edge, 1.5 * edge))
    tank.surge.role = "COLLIDER"
    tank.surge.collider_mode = "CONTAINER"
    block = _box("Block", (0.0, 0.0, 0.0), (edge, edge, edge))
    block.surge.role = "FLUID"
    scene.surge.solver = solver
    scene.surge.particle_spacing = DX
    scene.surge.cache_directory = cache


def bake(n: int, frames: int, solver: str) -> tuple[float, int]:
    cache = tempfile.mkdtemp(prefix="surge_bench_cache_")
    build_scene(n, frames, solver, cache)
    t0 = time.perf_counter()
    bpy.ops.surge.bake()  # blocks in background mode
    seconds = time.perf_counter() - t0
    liquid = [o for o in bpy.data.objects if o.type == "POINTCLOUD"]
    scene = bpy.context.scene
    scene.frame_set(frames)
    depsgraph = bpy.context.evaluated_depsgraph_get()
    count = len(liquid[0].evaluated_get(depsgraph).data.points) if liquid else 0
    return seconds, count


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--n", type=int, default=46, help="particles along the block's edge")
    ap.add_argument("--solver", default="PBF", choices=("PBF", "WCSPH"))
    ap.add_argument("--seconds", type=float, default=1.0, help="simulated time, s (24 fps)")
    peer_taichi.add_options(ap)
    args = ap.parse_args(argv)
    if args.peer:
        try:
            peer_taichi.check(args.peer_python, args.peer_script)
        except peer_taichi.PeerUnavailable as exc:
            print(f"peer taichi skipped: {exc}")
            args.peer = None
    enable_from_source(ROOT, tempfile.mkdtemp(prefix="surge_bench_repo_"))
    frames = int(round(args.seconds * 24)) + 1  # frame 1 is the initial state
    bake(args.n, 2, args.solver)  # compiles (or loads) the kernels in the bake process's cache
    seconds, count = bake(args.n, frames, args.solver)
    simulated = (frames - 1) / 24.0
    print(f"{args.solver}: {count:,} particles, {simulated:.3f} s of liquid at 24 fps baked in {seconds:.1f} s "
          f"(export, child process, stepping and cache writing)")
    print(f"  simulated particle-seconds per second   {count * simulated / seconds:10.0f}")
    print(f"  wall seconds per simulated second       {seconds / simulated:10.1f}")
    if args.peer:
        compare_with_peer(args, count, simulated, count * simulated / seconds)
    return 0


def compare_with_peer(args, count: int, simulated: float, surge_rate: float) -> None:
    """The taichi reference's stepping loop on a block of the same particles, after Surge's bake."""
    import multiprocessing
    threads = int(os.environ.get("NUMBA_NUM_THREADS", multiprocessing.cpu_count()))
    try:
        peer = peer_taichi.run(args.peer_python, args.peer_script, args.n, threads, args.peer_timeout)
    except peer_taichi.PeerUnavailable as exc:
        print(f"taichi: skipped ({exc})")
        return
    rate = peer.steps_per_s * peer_taichi.PEER_DT
    print(f"taichi PBF stepping loop: {peer.n:,} particles, 4 iterations, dt 2 ms, {peer.threads} threads "
          f"(median of 3 x 100 steps)")
    print(f"  simulated particle-seconds per second   {rate:10.0f}   ({peer.steps_per_s / 1e6:.3f} M particle-steps/s)")
    print(f"  wall seconds for {simulated:.3f} s of liquid      {peer.n * simulated / rate:10.1f}   (at that rate)")
    print(f"  Surge / taichi                          {surge_rate / rate:10.2f}x")


if __name__ == "__main__":
    sys.exit(main())
