"""A 1M-particle dam break baked through the engine's driver (frames written to a cache).

A cube of 100 x 100 x 100 particles at dx = 0.025 m in the corner of a box of 4 x 3 x 1.5 block
edges, PBF, a few frames at 24 fps. Prints the bake time, the particle count, the process's peak
memory and the cache size; asserts nothing.

    .venv/bin/python bench/bench_million.py --frames 3
"""

from __future__ import annotations

import argparse
import os
import resource
import sys
import tempfile
import time

import numpy as np

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

from engine import driver  # noqa: E402
from engine.io.cache import CacheReader  # noqa: E402
from engine.scene import BoxContainer, FluidObject, SceneDescription, TriangleMesh  # noqa: E402
from engine.settings import SimulationSettings  # noqa: E402

DX = 0.025


def box_mesh(lo, hi) -> TriangleMesh:
    lo, hi = np.asarray(lo, float), np.asarray(hi, float)
    v = np.array([[x, y, z] for x in (lo[0], hi[0]) for y in (lo[1], hi[1]) for z in (lo[2], hi[2])])
    f = np.array([[0, 1, 3], [0, 3, 2], [4, 6, 7], [4, 7, 5], [0, 4, 5], [0, 5, 1],
                  [2, 3, 7], [2, 7, 6], [0, 2, 6], [0, 6, 4], [1, 5, 7], [1, 7, 3]])
    return TriangleMesh(vertices=v, triangles=f)


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--n", type=int, default=100, help="particles along the block's edge")
    ap.add_argument("--frames", type=int, default=3, help="frames after the first")
    args = ap.parse_args(argv)
    edge = args.n * DX
    scene = SceneDescription(
        fluids=[FluidObject(name="Block", mesh=box_mesh([0, 0, 0], [edge, edge, edge]))],
        containers=[BoxContainer(name="Tank", lower=np.zeros(3), upper=np.array([4 * edge, 3 * edge, 1.5 * edge]))],
        frame_start=1, frame_end=1 + args.frames, fps=24.0)
    cache = tempfile.mkdtemp(prefix="surge_million_")
    t0 = time.perf_counter()
    driver.bake(scene, SimulationSettings(solver="PBF", particle_spacing=DX), cache)
    seconds = time.perf_counter() - t0
    reader = CacheReader(cache)
    n = len(reader.read_frame(reader.frames[-1])["id"])
    size = sum(os.path.getsize(os.path.join(d, f)) for d, _, fs in os.walk(cache) for f in fs)
    peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024
    print(f"PBF dam break: {n:,} particles, {args.frames} frames at 24 fps baked in {seconds:.1f} s "
          f"(filling, kernel compilation if not cached, stepping, cache writing)")
    print(f"  process peak RSS {peak / 2**20:.0f} MiB ({peak / n:.0f} B/particle); cache {size / 2**20:.0f} MiB "
          f"in {cache}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
