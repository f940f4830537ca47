"""What the liquid's viscosity costs a PBF bake: Weiler et al. 2018's implicit solve
(``engine/solvers/viscosity_weiler2018.py``) on the step benchmarks' dam break (``bench/step_scene.py``:
an n^3 block at dx = 0.025 m in the corner of a box, 4 iterations).

1. Fixed substeps of 2 ms, the liquid without viscosity, with water's (1.0e-3 Pa s, a single explicit
   pass: the substep is short against water's viscous time) and with honey's (10 Pa s, the conjugate-
   gradient solve): particle-steps per second, the viscosity's share of the step and the solve's
   iterations. Runs alternate (none, water, honey); the median of ``--repeats``.
2. One simulated second with the substeps the solver picks (``stable_dt``: the same CFL rule for every
   viscosity, the solve being implicit), water against honey: wall seconds, substeps and the solve's
   iterations a substep (mean, most).

    .venv/bin/python bench/bench_viscosity.py                  # 64,000 particles
    .venv/bin/python bench/bench_viscosity.py --n 27000 --repeats 1 --seconds 0.5

Prints figures, asserts nothing.
"""

from __future__ import annotations

import argparse
import os
import statistics
import subprocess
import sys
import time

import numpy as np

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

from engine.solvers.liquid_forces import LiquidTable  # noqa: E402
from engine.solvers import pbf  # noqa: E402
from engine.core.particles import Particles  # noqa: E402

from step_scene import DX, G, scene  # noqa: E402  (bench/ is the script's folder, first on sys.path)

#: The liquids compared: name, dynamic viscosity (Pa s; water at 20 C, honey of the presets' order).
LIQUIDS = (("none", 0.0), ("water", 1.0e-3), ("honey", 10.0))


def make_solver(x, box, mu: float, tolerance: float) -> pbf.PBFSolver:
    """The step benchmarks' PBF solver (``step_scene.make_pbf``'s settings) with a liquid of viscosity mu."""
    model = pbf.make_model(dx=DX, rho0=1000.0, iterations=4, tolerance=tolerance, beta=0.6, xsph=0.02,
                           kappa=0.0, gravity=G, boxes=box, friction=0.0, cfl=0.5, max_dt=0.002, speed_limit=1000.0,
                           liquid=LiquidTable.single(1000.0, mu))
    return pbf.PBFSolver(model, Particles.create(x, np.zeros_like(x), 1000.0))


def fixed_steps(x, box, mu: float, warm: int, steps: int) -> dict:
    """``steps`` substeps of 2 ms after ``warm``, every iteration: seconds, the viscosity's seconds, CG iterations."""
    s = make_solver(x, box, mu, tolerance=0.0)
    for _ in range(warm):
        s.step(0.002)
    visc, iters = 0.0, []
    t0 = time.perf_counter()
    for _ in range(steps):
        s.step(0.002)
        visc += s.liquid_forces.seconds if mu > 0.0 else 0.0
        iters.append(s.liquid_forces.viscosity.iterations)
    return dict(seconds=time.perf_counter() - t0, viscosity=visc, iterations=iters, n=len(s.particles))


def one_second(x, box, mu: float, seconds: float) -> dict:
    """``seconds`` of simulated time with the solver's own substeps (tolerance 0.5 %, as a bake)."""
    s = make_solver(x, box, mu, tolerance=0.005)
    t, substeps, iters, visc = 0.0, 0, [], 0.0
    t0 = time.perf_counter()
    while t < seconds - 1e-9:
        dt = min(s.stable_dt(), seconds - t)
        s.step(dt)
        t += dt
        substeps += 1
        iters.append(s.liquid_forces.viscosity.iterations)
        visc += s.liquid_forces.seconds
    return dict(seconds=time.perf_counter() - t0, substeps=substeps, iterations=iters, viscosity=visc,
                top=float(s.particles.x[:, 2].max()), front=float(s.particles.x[:, 0].max()))


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--n", type=int, default=64000, help="particles (a cube of about this many)")
    ap.add_argument("--repeats", type=int, default=3)
    ap.add_argument("--warm", type=int, default=10)
    ap.add_argument("--steps", type=int, default=60)
    ap.add_argument("--seconds", type=float, default=1.0, help="simulated seconds of part 2")
    args = ap.parse_args()
    print("uptime:", subprocess.run(["uptime"], capture_output=True, text=True).stdout.strip(), flush=True)
    x, box = scene(args.n)
    make_solver(x[:1000], box, 10.0, 0.0).step(0.002)  # compile the kernels outside the timings

    runs = {name: [] for name, _ in LIQUIDS}
    for _ in range(args.repeats):
        for name, mu in LIQUIDS:
            runs[name].append(fixed_steps(x, box, mu, args.warm, args.steps))
    n = runs["none"][0]["n"]
    print(f"\n1. PBF, N={n:,}, substeps of 2 ms, 4 iterations always, {args.steps} steps after {args.warm}; "
          f"median of {args.repeats} (runs alternate)")
    base = statistics.median(r["seconds"] for r in runs["none"])
    for name, mu in LIQUIDS:
        med = sorted(runs[name], key=lambda r: r["seconds"])[len(runs[name]) // 2]
        it = med["iterations"]
        each = ", ".join(f"{r['seconds'] / args.steps * 1e3:.2f}" for r in runs[name])
        print(f"  {name:6s} {mu:8.3g} Pa s  {n * args.steps / med['seconds'] / 1e6:6.3f} M particle-steps/s  "
              f"{med['seconds'] / args.steps * 1e3:7.2f} ms a step  x{med['seconds'] / base:5.2f} of no viscosity  "
              f"viscosity {med['viscosity'] / med['seconds'] * 100:5.1f} % of the step  "
              f"CG iterations {np.mean(it):5.1f} (most {max(it)})  "
              f"(runs: {each} ms)")

    print(f"\n2. {args.seconds:g} s simulated, substeps from stable_dt (CFL 0.5, at most 2 ms), tolerance 0.5 %")
    out = {}
    for name, mu in LIQUIDS[1:]:
        r = out[name] = one_second(x, box, mu, args.seconds)
        it = r["iterations"]
        print(f"  {name:6s} {r['seconds']:7.2f} s wall  {r['substeps']} substeps  CG iterations a substep "
              f"{np.mean(it):5.1f} (most {max(it)})  viscosity {r['viscosity'] / r['seconds'] * 100:5.1f} % of the "
              f"time  front x {r['front']:.3f} m, top z {r['top']:.3f} m")
    print(f"  honey / water wall time: {out['honey']['seconds'] / out['water']['seconds']:.2f}x")
    return 0


if __name__ == "__main__":
    sys.exit(main())
