"""Benchmark: the cost of a mesh collider in the solvers.

A cube of liquid (spacing dx, ~64k particles by default) in a box tank, with a ~100k-triangle
torus standing in it as a SOLID mesh collider (the particles inside the torus are removed). Prints
the collider's grid build time and memory at the bake's cell size (dx / 2), then the PBF substep
time with the collider and, on the very same particles, without it; the difference per particle is
the cost of collisions per particle per substep (density term, wall push in every iteration,
contact projection and friction). The two kernels are also timed alone over all particles.

Run: ``.venv/bin/python bench/bench_collision.py [--n 40] [--triangles 100000] [--steps 20]``
"""

from __future__ import annotations

import argparse
import os
import sys
import time

import numba
import numpy as np

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

from bench_sdf import torus  # noqa: E402
from engine.collision import queries as collider_kernels
from engine import assemble  # noqa: E402
from engine.core.particles import Particles  # noqa: E402
from engine.scene import BoxContainer, FluidObject, MeshCollider, SceneDescription, TriangleMesh  # noqa: E402
from engine.settings import ColliderSettings, SimulationSettings  # noqa: E402


def lattice(n: int, dx: float) -> np.ndarray:
    g = (np.arange(n) + 0.5) * dx
    return np.stack(np.meshgrid(g, g, g, indexing="ij"), -1).reshape(-1, 3)


def time_steps(solver, steps: int, dt: float) -> tuple[float, float]:
    for _ in range(3):
        solver.step(dt)
    t0, c0 = time.perf_counter(), time.process_time()
    for _ in range(steps):
        solver.step(dt)
    return (time.perf_counter() - t0) / steps, (time.process_time() - c0) / steps


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--n", type=int, default=40, help="particles per block edge")
    ap.add_argument("--dx", type=float, default=0.01)
    ap.add_argument("--triangles", type=int, default=100_000)
    ap.add_argument("--steps", type=int, default=20)
    args = ap.parse_args()
    dx, n = args.dx, args.n
    edge = n * dx
    nv = int(round(np.sqrt(args.triangles / 2 / 1.25)))
    nu = int(round(args.triangles / 2 / nv))
    t = torus(0.3 * edge, 0.12 * edge, nu, nv)
    mesh = TriangleMesh(t.vertices + [0.5 * edge, 0.5 * edge, 0.5 * edge], t.triangles)
    col = MeshCollider("Torus", mesh, ColliderSettings(collider_mode="SOLID", friction=0.1))
    # the smallest tolerance makes both runs spend the full 4 iterations: the same work apart from collisions
    settings = SimulationSettings(solver="PBF", particle_spacing=dx, pbf_density_tolerance=0.01)
    scene = SceneDescription(fluids=[FluidObject("Block", TriangleMesh(np.zeros((0, 3)), np.zeros((0, 3))))],
                             containers=[BoxContainer("Tank", [0, 0, 0], [4 * edge, 3 * edge, 1.5 * edge])],
                             colliders=[col])
    x = lattice(n, dx)
    print(f"collider: torus, {len(mesh.triangles)} triangles, {np.ptp(mesh.vertices, axis=0).max():.3f} m across; "
          f"cell size {settings.collider_cell_size * dx:.4f} m")
    for label in ("first (compiles unless cached)", "second"):
        t0, c0 = time.perf_counter(), time.process_time()
        world = assemble.make_collision(scene, settings, x, grid_dir=None)
        print(f"grid build, {label}: {time.perf_counter() - t0:.2f} s wall, {time.process_time() - c0:.2f} s CPU")
    report = world.reports[0]
    print(f"grid: {report['cells']} stored nodes, {report['memory'] / 2**20:.1f} MiB")
    keep = ~world.inside(x)
    x = x[keep]
    print(f"particles: {len(x)} (removed {int((~keep).sum())} inside the torus)")

    results = {}
    for label, w in (("with torus", world), ("without", None)):
        parts = Particles.create(x, np.zeros_like(x), settings.rest_density)
        solver = assemble.make_solver(scene, settings, parts, w)
        results[label] = time_steps(solver, args.steps, 0.002)
        wall, cpu = results[label]
        print(f"PBF substep {label}: {wall * 1e3:.1f} ms wall, {cpu * 1e3:.1f} ms CPU, "
              f"{len(x) / wall / 1e6:.3f} M particle-steps/s, {solver.iterations} iterations in the last substep, "
              f"phases (s) {', '.join(f'{k} {v * 1e3:.1f} ms' for k, v in solver.timings.items())}")
    d_wall = results["with torus"][0] - results["without"][0]
    d_cpu = results["with torus"][1] - results["without"][1]
    print(f"collision cost: {d_wall / len(x) * 1e9:.0f} ns per particle per substep wall, "
          f"{d_cpu / len(x) * 1e9:.0f} ns CPU")

    # the kernels alone, over every particle
    xs = np.ascontiguousarray(solver.particles.x)
    v = np.zeros_like(xs)
    args_ = world.args
    collider_kernels.project(xs, xs.copy(), v, 0.25 * dx, 0.0, 500.0, True, args_)
    t0 = time.perf_counter()
    for _ in range(args.steps):
        collider_kernels.project(xs, xs.copy(), v, 0.25 * dx, 0.0, 500.0, True, args_)
    print(f"project alone: {(time.perf_counter() - t0) / args.steps / len(xs) * 1e9:.0f} ns per particle")
    inside = np.empty(len(xs), dtype=np.bool_)
    collider_kernels.inside_any(xs, args_, inside)
    t0 = time.perf_counter()
    for _ in range(args.steps):
        collider_kernels.inside_any(xs, args_, inside)
    print(f"one distance query: {(time.perf_counter() - t0) / args.steps / len(xs) * 1e9:.0f} ns per particle")
    print(f"numba threads {numba.get_num_threads()}, load average {os.getloadavg()[0]:.1f}")


if __name__ == "__main__":
    main()
