"""Cost of the whitewater stage against the particle bake it runs over, and its memory per particle.

1. The dam break of ``bench/bench_blender.py`` (n = 46: 97,336 particles, PBF, 1 s at 24 fps) is baked
   through Blender (``bpy.ops.surge.bake()``, timed as there: export, child process, stepping, cache
   and USD writing), after a two-frame bake that compiles the kernels.
2. Bake Whitewater runs over that cache (``bpy.ops.surge.bake_whitewater()``: a child process running
   the stage, writing its frames and USD files, and the three objects pointed at them), after a run
   over the two-frame cache that compiles its kernels; the figure is its wall time over the bake's.
   Per frame: particles emitted and alive by kind, seconds.
3. Memory: 10 million live diffuse particles (foam, spray and bubbles around a liquid of the same
   97k particles, in a tank whose walls every particle is checked against) stepped through one frame; prints the
   state's bytes per particle and the
   peak of numpy allocations during the step (tracemalloc) per particle.

    .venv/bin/python bench/bench_whitewater.py            # all three
    .venv/bin/python bench/bench_whitewater.py --memory-only --live 10000000

Prints figures, asserts nothing.
"""

from __future__ import annotations

import argparse
import os
import sys
import tempfile
import time
import tracemalloc

import numpy as np

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def _cpu() -> float:
    """User and system CPU seconds of this process and of its children that have ended (the bake's and
    the stage's child processes): less sensitive than wall time to what else runs on the machine."""
    import resource

    own, children = resource.getrusage(resource.RUSAGE_SELF), resource.getrusage(resource.RUSAGE_CHILDREN)
    return own.ru_utime + own.ru_stime + children.ru_utime + children.ru_stime


def bake_and_stage(n: int) -> None:
    sys.path.insert(0, os.path.join(ROOT, "bench"))
    import bench_blender  # noqa: E402  (Blender as a module)
    from blender_session import enable_from_source  # noqa: E402  (bench_blender put tools/ on the path)

    import bpy  # noqa: E402

    enable_from_source(ROOT, tempfile.mkdtemp(prefix="surge_bench_repo_"))
    frames = 25
    bench_blender.bake(n, 2, "PBF")  # compiles the solver kernels ...
    bpy.ops.surge.bake_whitewater()  # ... and the whitewater kernels
    cpu0 = _cpu()
    bake_seconds, count = bench_blender.bake(n, frames, "PBF")
    cpu1 = _cpu()
    t0 = time.perf_counter()
    bpy.ops.surge.bake_whitewater()  # blocks in background mode, like the bake
    stage_seconds = time.perf_counter() - t0
    cpu2 = _cpu()
    from importlib import import_module

    stages = import_module("bl_ext.surge_source.surge.engine.stages")
    cache = bpy.path.abspath(bpy.context.scene.surge.cache_directory)
    manifest = stages.read_manifest(cache, "whitewater")
    stats = manifest["state"]["stats"]
    print(f"dam break: {count:,} particles, {frames - 1} frames at 24 fps (frame 1 is the initial state)")
    print(f"  particle bake (bpy.ops.surge.bake)                  {bake_seconds:8.1f} s")
    print(f"  whitewater stage (bpy.ops.surge.bake_whitewater)    {stage_seconds:8.1f} s")
    print(f"  stage / bake                                        {stage_seconds / bake_seconds:8.1%}")
    print(f"  CPU seconds (this process and its children): bake {cpu1 - cpu0:.1f}, stage {cpu2 - cpu1:.1f}, "
          f"stage / bake {(cpu2 - cpu1) / (cpu1 - cpu0):.1%}")
    print(f"  thresholds (automatic): {manifest['state']['thresholds']}")
    print("  frame  emitted    spray     foam  bubbles  seconds (model and files)")
    for f in manifest["frames"]:
        s = stats[str(f)]
        print(f"  {f:5d} {s['emitted']:8d} {s['spray']:8d} {s['foam']:8d} {s['bubbles']:8d} {s['seconds']:8.3f}")
    total = sum(s["seconds"] for s in stats.values())
    print(f"  mean seconds per frame in the stage {total / max(1, len(stats)):.3f}")


def memory(live: int, n: int) -> None:
    sys.path.insert(0, ROOT)
    from engine.scene import BoxContainer, SceneDescription
    from engine.settings import SimulationSettings, WhitewaterSettings
    from engine.whitewater import kernels, model
    from engine.whitewater.obstacles import Obstacles

    dx = 0.025
    g = np.mgrid[0:n, 0:n, 0:n].reshape(3, -1).T.astype(np.float32) * dx
    # a sheared liquid (layers sliding at up to 2 m/s) so that every frame also emits
    v = np.zeros_like(g)
    v[:, 0] = 2.0 * np.sin(2.0 * np.pi * g[:, 2] / (6 * dx))
    edge = n * dx
    # in a tank (a box container) reaching above the spray: every particle is checked against its walls
    tank = BoxContainer("Tank", [-0.5 * dx] * 3, [edge - 0.5 * dx, edge - 0.5 * dx, edge + 0.6])
    walls = Obstacles(SceneDescription(containers=[tank]), SimulationSettings(particle_spacing=dx), g)
    walls.set_frame(1)
    liquid = model.LiquidFrame(g, v, np.arange(len(g)), dx, walls)
    rng = np.random.default_rng(1)
    state = model.Diffuse.empty(live)
    # a third inside the liquid, a third in its top layer, a third in the air above
    state.position[:, :2] = rng.uniform(0, edge, (live, 2)).astype(np.float32)
    state.position[:, 2] = np.choose(np.arange(live) % 3, [rng.uniform(0, edge * 0.8, live),
                                                           np.full(live, edge - dx * 0.5),
                                                           rng.uniform(edge + 3 * dx, edge + 0.5, live)])
    state.kind[:] = np.array([kernels.BUBBLE, kernels.FOAM, kernels.SPRAY], np.uint8)[np.arange(live) % 3]
    state.lifetime[:] = 5.0
    state.id[:] = np.arange(live)
    # rates of 40 per second: the frame emits a few tens of thousands (the cap, 5 % above the live count,
    # never binds), so the figures are those of carrying the live particles
    settings = WhitewaterSettings(use_auto_thresholds=False, trapped_air_min=0.5, trapped_air_max=4.0,
                                  energy_min=0.1, energy_max=2.0, trapped_air_rate=40.0, wave_crest_rate=40.0,
                                  max_particles=int(live * 1.05))
    thresholds = model.Thresholds.manual(settings)
    gravity = np.array([0.0, 0.0, -9.81])
    # compile on a small copy first
    model.step(state.take(np.arange(1000)), liquid, 2, 1 / 24, live, settings, thresholds, dx, gravity)
    next_id = live
    for frame in (3, 4):  # the first step gives the state its buffers; the second is the steady state
        tracemalloc.start()
        t0 = time.perf_counter()
        state, next_id, stats = model.step(state, liquid, frame, 1 / 24, next_id, settings, thresholds, dx, gravity)
        seconds = time.perf_counter() - t0
        _current, peak = tracemalloc.get_traced_memory()
        tracemalloc.stop()
    print(f"memory: {len(state):,} live diffuse particles over {len(g):,} liquid particles "
          f"({stats.emitted:,} emitted, {stats.removed:,} removed in the measured frame)")
    print(f"  state bytes per particle (arrays)                   {state.nbytes / len(state):8.1f}")
    print(f"  state bytes per particle (buffers, spare rows too)  {state.capacity_bytes / len(state):8.1f}")
    print(f"  peak numpy allocations in a frame step, per particle {peak / len(state):8.1f}")
    print(f"  one frame step                                      {seconds:8.2f} s")


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--n", type=int, default=46, help="particles along the dam-break block's edge")
    ap.add_argument("--live", type=int, default=10_000_000, help="live diffuse particles for the memory run")
    ap.add_argument("--memory-only", action="store_true")
    ap.add_argument("--no-memory", action="store_true")
    args = ap.parse_args(argv)
    if not args.memory_only:
        bake_and_stage(args.n)
    if not args.no_memory:
        memory(args.live, args.n)
    return 0


if __name__ == "__main__":
    sys.exit(main())
