"""The live session as Blender sees it: displayed frames per second, real-time ratio, where the time goes,
and how long a collider's move takes to reach the liquid.

A block of water (0.5 x 0.4 x 0.4 m) in a 1.0 x 0.4 x 0.6 m tank, and a paddle (a 6 x 20 x 40 cm box
collider held 5 cm above the floor) swept back and forth through it along x at up to 0.5 m/s by a
script, as an artist dragging it would. The particle spacing is chosen for about 10,000 and 30,000 particles; the
session runs with the
live defaults (``engine.settings.LiveSettings``: PBF, substeps of at most 1/60 s with a travel of up to two
spacings, 3 iterations). This
process plays Blender's part exactly as the timer does in the UI: every ``bridge.live.TIMER_INTERVAL``
it sends the paddle's pose and copies any new frame into the *Surge Live* object; here it also makes
Blender evaluate the object (its display modifier), which the viewport would do to draw it.

Printed per size, after a warm-up (the kernels compiled, the liquid settled into motion):

* displayed fps: frames copied into the live object per wall second;
* real-time ratio: simulated seconds per wall second (1 is real time, each displayed frame holds
  1/24 s of liquid);
* split per displayed frame: engine (the child's wall time for the frame, with its substeps), transfer
  (copying the front buffer out of shared memory), Blender update (writing the mesh, then evaluating the
  object), and the frame budget 1/24 s they compare with;
* latency: the paddle jumps every half second; the number of displayed frames from the update that
  sent the jump to the first displayed frame simulated with it (1 = the next frame shown), and the
  wall time in between.

    .venv/bin/python bench/bench_live.py                     # 10k and 30k, 10 s each
    .venv/bin/python bench/bench_live.py --sizes 10000 --seconds 5 --threads 2
    .venv/bin/python bench/bench_live.py --surface on       # drawn as the live surface meeting the tank and
                                                            # the paddle (--surface bare: meeting neither)

The machine's load (``uptime``) is printed first: on a shared machine the absolute figures say little,
the split and the ratios more.
"""

from __future__ import annotations

import argparse
import math
import os
import subprocess
import sys
import tempfile
import time

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, os.path.join(ROOT, "tools"))

from blender_session import enable_from_source  # noqa: E402  (needs sys.path above)
from demo import _box  # noqa: E402  (a cube scaled to the corners, scale applied)

import bpy  # noqa: E402
import numpy as np  # noqa: E402

TANK = (1.0, 0.4, 0.6)
BLOCK = (0.5, 0.4, 0.4)
PADDLE = (0.06, 0.2, 0.4)


def spacing_for(n: int) -> float:
    """Spacing that fills the block with about n particles."""
    return (BLOCK[0] * BLOCK[1] * BLOCK[2] / n) ** (1.0 / 3.0)


def build_scene(n: int, cache: str):
    bpy.ops.wm.read_homefile(use_empty=True)
    scene = bpy.context.scene
    scene.frame_start, scene.frame_end = 1, 250
    scene.render.fps, scene.render.fps_base = 24, 1.0
    tank = _box("Tank", (0.0, 0.0, 0.0), TANK)
    tank.surge.role = "COLLIDER"
    tank.surge.collider_mode = "CONTAINER"
    block = _box("Water", (0.0, 0.0, 0.0), BLOCK)
    block.surge.role = "FLUID"
    paddle = _box("Paddle", (0.6, 0.1, 0.05), (0.6 + PADDLE[0], 0.1 + PADDLE[1], 0.05 + PADDLE[2]))
    paddle.surge.role = "COLLIDER"
    paddle.surge.collider_mode = "SOLID"
    scene.surge.particle_spacing = spacing_for(n)
    scene.surge.cache_directory = cache
    return scene, paddle


def sweep(t: float) -> float:
    """The paddle's x offset at simulated time t: from x = 0.6 m into the water to 0.15 m and back (0.225 m
    amplitude at 0.5 m/s at most), plus a jump of 0.03 m every half second (the latency probe)."""
    omega = 1.0 / 0.45
    return -0.225 * (1.0 - math.cos(omega * t)) + (0.03 if int(t * 2.0) % 2 else 0.0)


def run(live, display, n: int, seconds: float, warmup: float, cache: str, surface: str = "off") -> dict:
    scene, paddle = build_scene(n, cache)
    scene.surge_live.show_surface = surface != "off"
    scene.surge.surface_use_colliders = surface == "on"
    x0 = paddle.location.x
    session = live.start(scene, bpy.context.evaluated_depsgraph_get())
    t_start = time.monotonic()
    # the first simulated frame compiles (or loads) the solver's kernels: only then does the warm-up start
    if not session.wait_for_frame(1, timeout=900):
        raise RuntimeError(f"the live engine did not start: {session.error}")
    compile_s = time.monotonic() - t_start
    stats = {"engine": [], "cpu": [], "substeps": [], "transfer": [], "write": [], "eval": [], "shown": 0}
    latency_frames, latency_ms = [], []
    probe = None            # (control seq of the jump, wall time sent, stale frames shown since)
    jump_state = None
    obj = bpy.data.objects[session.object_name]
    t0 = time.monotonic()
    measuring = False
    sim0 = wall0 = None
    while True:
        now = time.monotonic()
        t = now - t0
        if t > warmup + seconds:
            break
        if not measuring and t >= warmup:
            measuring = True
            stats = {k: ([] if isinstance(v, list) else 0) for k, v in stats.items()}
            latency_frames, latency_ms = [], []
            sim0, wall0 = float(session.state.header["frames"]["time"][int(session.state.header["front"])]), now
        # the paddle follows the simulated clock (the liquid's time on screen): on a machine that keeps up
        # it is the wall clock; on one that does not, the paddle slows down with the liquid instead of
        # racing through it in slow motion
        h = session.state.header
        t_sim = float(h["frames"]["time"][int(h["front"])])
        offset = sweep(t_sim)
        jumped = int(t_sim * 2.0) % 2
        paddle.location.x = x0 + offset
        bpy.context.view_layer.update()
        seq = session.send(scene)
        if jumped != jump_state and probe is None and jump_state is not None:
            probe = (seq, now, 0)
        jump_state = jumped
        h = session.state.header
        if int(h["published"]) != session.shown_published:
            a = time.perf_counter()
            got = session.state.read()
            b = time.perf_counter()
            if got is not None:
                meta, x, v, _ids = got
                display.write(obj, x, v)
                c = time.perf_counter()
                obj.evaluated_get(bpy.context.evaluated_depsgraph_get())
                d = time.perf_counter()
                session.shown_published = int(h["published"])
                stats["shown"] += 1
                stats["engine"].append(meta["engine_seconds"])
                stats["cpu"].append(meta["engine_cpu"])
                stats["substeps"].append(meta["substeps"])
                stats["transfer"].append(b - a)
                stats["write"].append(c - b)
                stats["eval"].append(d - c)
                if probe is not None:
                    if meta["control"] >= probe[0]:
                        if measuring:
                            latency_frames.append(probe[2] + 1)
                            latency_ms.append(1000.0 * (time.monotonic() - probe[1]))
                        probe = None
                    else:
                        probe = (probe[0], probe[1], probe[2] + 1)
        session.poll_events()  # the engine's events (an error ends the run with its message)
        session.sync_display(scene)  # the colliders the surface meets, once their modes are known
        if session.error:
            raise RuntimeError(f"the live engine stopped at {t:.1f} s: {session.error}")
        time.sleep(live.TIMER_INTERVAL)
    wall = time.monotonic() - wall0
    h = session.state.header
    sim = float(h["frames"]["time"][int(h["front"])]) - sim0
    particles = int(h["frames"]["count"][int(h["front"])])
    live.stop(scene)
    ms = lambda key: 1000.0 * float(np.mean(stats[key])) if stats[key] else float("nan")  # noqa: E731
    return {"n": particles, "spacing": spacing_for(n), "compile_s": compile_s, "fps": stats["shown"] / wall,
            "ratio": sim / wall, "engine_ms": ms("engine"), "cpu_ms": ms("cpu"),
            "substeps": float(np.mean(stats["substeps"] or [0])),
            "transfer_ms": ms("transfer"), "write_ms": ms("write"), "eval_ms": ms("eval"),
            "latency_frames": latency_frames, "latency_ms": latency_ms, "wall": wall}


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--sizes", default="10000,30000", help="particle counts, comma-separated")
    parser.add_argument("--seconds", type=float, default=10.0, help="measured wall seconds per size")
    parser.add_argument("--warmup", type=float, default=3.0, help="wall seconds before measuring")
    parser.add_argument("--threads", type=int, default=0, help="engine threads (0: every core)")
    parser.add_argument("--surface", choices=("off", "on", "bare"), default="off",
                        help="draw the live surface (on: meeting the colliders; bare: meeting none) instead of points")
    args = parser.parse_args()
    print("uptime:", subprocess.run(["uptime"], capture_output=True, text=True).stdout.strip(), flush=True)
    out = tempfile.mkdtemp(prefix="surge_bench_live_")
    module = enable_from_source(ROOT, os.path.join(out, "repo"))
    import importlib

    live = importlib.import_module(f"{module}.bridge.live")
    display = importlib.import_module(f"{module}.bridge.live_display")
    settings = importlib.import_module(f"{module}.engine.settings")
    if args.threads:
        bpy.context.preferences.addons[module].preferences.bake_threads = args.threads
    d = settings.LiveSettings()
    print(f"live defaults: PBF, max substep {d.time_step:.5f} s (1/{1 / d.time_step:.0f}), max travel {d.max_travel:g} "
          f"spacings, {d.iterations} iterations, "
          f"spacing x{d.spacing_factor:g} of the scene's, {d.collider_substeps} collider substeps; "
          f"frame budget {1000 / 24:.1f} ms at 24 fps; drawn as "
          f"{dict(off='points', on='the surface meeting the colliders', bare='the surface')[args.surface]}",
          flush=True)
    rows = []
    for n in (int(s) for s in args.sizes.split(",")):
        r = run(live, display, n, args.seconds, args.warmup, os.path.join(out, f"cache{n}"), args.surface)
        rows.append(r)
        lat = r["latency_frames"]
        print(f"\n{r['n']:,} particles (spacing {r['spacing'] * 1000:.1f} mm), kernels ready after "
              f"{r['compile_s']:.1f} s, measured {r['wall']:.1f} s:", flush=True)
        print(f"  displayed fps          {r['fps']:6.1f}")
        print(f"  real-time ratio        {r['ratio']:6.2f}   (simulated s per wall s; 1 = real time)")
        print(f"  engine / frame         {r['engine_ms']:6.1f} ms  ({r['substeps']:.1f} substeps; processor time "
              f"{r['cpu_ms']:.1f} ms over its threads)")
        print(f"  transfer / frame       {r['transfer_ms']:6.2f} ms  (copy out of shared memory)")
        print(f"  Blender update / frame {r['write_ms'] + r['eval_ms']:6.2f} ms  (mesh write {r['write_ms']:.2f}, "
              f"evaluation {r['eval_ms']:.2f})")
        if lat:
            print(f"  latency                {np.mean(lat):.2f} displayed frames mean, {max(lat)} max over {len(lat)} "
                  f"moves; {np.mean(r['latency_ms']):.0f} ms mean, {max(r['latency_ms']):.0f} ms max")
        else:
            print("  latency                no move measured")
    print("\nsummary: " + "; ".join(f"{r['n']:,}: {r['fps']:.1f} fps, ratio {r['ratio']:.2f}, engine "
                                    f"{r['engine_ms']:.0f} ms ({r['cpu_ms']:.0f} ms processor), "
                                    f"transfer {r['transfer_ms']:.1f} ms, Blender "
                                    f"{r['write_ms'] + r['eval_ms']:.1f} ms, latency max "
                                    f"{max(r['latency_frames']) if r['latency_frames'] else 'n/a'} frames"
                                    for r in rows))
    return 0


if __name__ == "__main__":
    sys.exit(main())
