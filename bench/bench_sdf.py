"""Benchmark: narrow-band signed distance grid of a ~100k-triangle torus.

Prints build time (the first call includes numba compilation unless cached, so it is built
twice), memory of the grid's arrays against a dense grid of the same bounding box, and the cost of
``sample`` per point over 1M points near the surface and 1M uniform in the bounding box, each in
Morton order (as solvers query) and in random order. Wall and CPU times are both printed because
a shared machine makes wall times noisy.

Run: ``.venv/bin/python bench/bench_sdf.py [--triangles N] [--cells-across C]``
"""

from __future__ import annotations

import argparse
import os
import sys
import time

import numba
import numpy as np

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

from engine.collision import sdf  # noqa: E402
from engine.core.cell_grid import build_grid  # noqa: E402
from engine.scene import TriangleMesh  # noqa: E402


def torus(major: float, minor: float, nu: int, nv: int) -> TriangleMesh:
    """Closed outward-facing torus around Z with nu x nv quads (2 nu nv triangles)."""
    u = 2 * np.pi * np.arange(nu) / nu
    v = 2 * np.pi * np.arange(nv) / nv
    uu, vv = np.meshgrid(u, v, indexing="ij")
    rr = major + minor * np.cos(vv)
    verts = np.stack([rr * np.cos(uu), rr * np.sin(uu), minor * np.sin(vv)], -1).reshape(-1, 3)
    i, j = np.meshgrid(np.arange(nu), np.arange(nv), indexing="ij")
    a = i * nv + j
    b = ((i + 1) % nu) * nv + j
    c = ((i + 1) % nu) * nv + (j + 1) % nv
    d = i * nv + (j + 1) % nv
    tris = np.concatenate([np.stack([a, b, c], -1).reshape(-1, 3), np.stack([a, c, d], -1).reshape(-1, 3)])
    return TriangleMesh(verts, tris)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--triangles", type=int, default=100_000)
    ap.add_argument("--cells-across", type=float, default=200.0)
    ap.add_argument("--band-cells", type=float, default=3.0)
    ap.add_argument("--queries", type=int, default=1_000_000)
    args = ap.parse_args()

    nv = int(round(np.sqrt(args.triangles / 2 / 1.25)))
    nu = int(round(args.triangles / 2 / nv))
    mesh = torus(1.0, 0.4, nu, nv)
    extent = float(np.max(mesh.vertices.max(0) - mesh.vertices.min(0)))
    h = extent / args.cells_across
    band = args.band_cells * h
    print(f"mesh: torus R=1 r=0.4, {len(mesh.triangles)} triangles, extent {extent:.3f} m")
    print(f"cell size {h:.5f} m (extent / {args.cells_across:g}), band {band:.5f} m ({args.band_cells:g} cells)")

    for mode in ("SOLID_INSIDE", "SHELL"):
        t0 = time.perf_counter()
        sdf.build_sdf(mesh, h, band, "Torus", mode=mode)
        t1, c1 = time.perf_counter(), time.process_time()
        sdf.build_sdf(mesh, h, band, "Torus", mode=mode, thickness=h if mode == "SHELL" else 0.0)
        t2, c2 = time.perf_counter(), time.process_time()
        print(f"[{mode}] build: first call {t1 - t0:.2f} s (includes compilation unless cached), "
              f"second {t2 - t1:.2f} s wall, {c2 - c1:.2f} s CPU")
    grid = sdf.build_sdf(mesh, h, band, "Torus")
    t0 = time.perf_counter()
    tree = sdf.build_winding_tree(mesh)
    print(f"winding tree alone: {time.perf_counter() - t0:.2f} s, {len(tree.node_int)} clusters")

    nodes = grid.block_phi.size
    dense = int(np.prod(np.ceil((mesh.vertices.max(0) - mesh.vertices.min(0) + 2 * band) / h) + 1))
    print(f"blocks {grid.block_key.size}, nodes {nodes} ({nodes / dense:.3%} of the dense bounding box, "
          f"{dense} nodes)")
    print(f"memory: {sdf.grid_nbytes(grid) / 2**20:.1f} MiB "
          f"(phi {grid.block_phi.nbytes / 2**20:.1f}, tri {grid.block_tri.nbytes / 2**20:.1f}, "
          f"tile index {(grid.tile_index.nbytes + grid.tile_block.nbytes) / 2**10:.1f} KiB); "
          f"dense float32+int32 would be "
          f"{dense * 8 / 2**20:.1f} MiB")

    rng = np.random.default_rng(0)
    n = args.queries
    lo, hi = mesh.vertices.min(0) - band, mesh.vertices.max(0) + band
    uniform = rng.uniform(lo, hi, (n, 3))
    # near the surface: points on the torus pushed along the normal by up to the band
    u, v = rng.uniform(0, 2 * np.pi, (2, n))
    off = rng.uniform(-band, band, n)
    rr = 1.0 + (0.4 + off) * np.cos(v)
    near = np.stack([rr * np.cos(u), rr * np.sin(u), (0.4 + off) * np.sin(v)], -1)
    for label, pts in (("near surface", near), ("uniform in box", uniform)):
        # solvers query particles sorted along the Morton curve (engine.core.cell_grid); random order
        # is the worst case for the caches
        order = build_grid(pts, 4 * h).order
        for order_label, p in (("Morton-sorted", np.ascontiguousarray(pts[order])), ("random order", pts)):
            sdf.sample(grid, p[:10])
            best_wall = best_cpu = np.inf
            for _ in range(3):
                t0, c0 = time.perf_counter(), time.process_time()
                sdf.sample(grid, p)
                best_wall = min(best_wall, time.perf_counter() - t0)
                best_cpu = min(best_cpu, time.process_time() - c0)
            print(f"sample, {label}, {order_label}: {best_wall / n * 1e9:.0f} ns per point wall, "
                  f"{best_cpu / n * 1e9:.0f} ns CPU ({n} points, best of 3)")
    q = np.ascontiguousarray(near[build_grid(near, 4 * h).order][:200_000])
    t0 = time.perf_counter()
    sdf.fast_winding_numbers(mesh, q, tree)
    print(f"fast winding numbers near the surface (sorted): {(time.perf_counter() - t0) / len(q) * 1e9:.0f} ns "
          f"per point")
    print(f"numba threads {numba.get_num_threads()}, load average {os.getloadavg()[0]:.1f}")


if __name__ == "__main__":
    main()
