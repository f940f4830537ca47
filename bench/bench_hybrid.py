"""Time per substep of the MAC-SPH hybrid against pure WCSPH on the same scene; prints figures,
asserts nothing.

Scenes (Suárez & Susín 2006, "Mesh-Particle Model for Fluid Animation" (Eurographics 2006), §4.3), particle
spacing 1 cm, both solvers with the same model (spacing,
smoothing length, sound speed, walls) and the same time step (WCSPH's stable step at the start):

* ``drop``:   a drop (sphere, radius 10 cm) falling into a 0.6 x 0.4 x 0.25 m receptacle at rest
              (the paper's Fig. 4; ~64k particles, about half of them SPH or MIXA at the start, like
              the paper's 39,673 of 70,883);
* ``blocks``: two 10 cm cubes of liquid raised above the same receptacle and falling back into it
              (the paper's Fig. 5, with the cubes starting in the air instead of being lifted by
              forces; ~62k particles);
* ``deep``:   the drop scene with the receptacle twice as deep (0.5 m, ~124k particles).

WCSPH runs with summation density, as the hybrid's particles do (its default, continuity density,
adds a pair loop to every substep and would flatter the hybrid).

The interface is automatic, ``--depth`` below the free surface (default 0.1 m). Each solver runs
``--warm`` substeps, then ``--blocks`` blocks of ``--steps`` substeps, the two solvers' blocks
interleaved so that both see the same machine load; the figure is the mean time per substep.

    .venv/bin/python bench/bench_hybrid.py                 # all three scenes
    .venv/bin/python bench/bench_hybrid.py --scene deep --solver SOR
    .venv/bin/python bench/bench_hybrid.py --quick         # 2 cm spacing, a smoke test
    .venv/bin/python bench/bench_hybrid.py --scene blocks --phases   # + the hybrid's time per kernel
    .venv/bin/python bench/bench_hybrid.py --warm 10 --steps 50 --blocks 32   # through the impact

The default times 100 substeps from rest (the drop and blocks falling, few neighbour-list
rebuilds). The paper averages over whole animations; the last line times 1,610 substeps, through
the drop's and the blocks' impact (at about 0.14 s), where the particles rebuild their neighbour
lists every few substeps.
"""

from __future__ import annotations

import argparse
import os
import sys
import time

import numpy as np

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

from engine.core.particles import Particles  # noqa: E402
from engine.solvers import hybrid, wcsph  # noqa: E402

G = np.array([0.0, 0.0, -9.81])


def lattice(lo, hi, dx):
    axes = [np.arange(lo[a] + 0.5 * dx, hi[a] - 1e-9, dx) for a in range(3)]
    gx, gy, gz = np.meshgrid(*axes, indexing="ij")
    return np.stack([gx.ravel(), gy.ravel(), gz.ravel()], axis=1)


def sphere(centre, radius, dx):
    c = np.asarray(centre, dtype=np.float64)
    x = lattice(c - radius, c + radius, dx)
    return x[np.linalg.norm(x - c, axis=1) <= radius]


def scene(name: str, dx: float):
    """Particle positions (N, 3) and the box container (1, 2, 3) of a benchmark scene."""
    w, d = 0.6, 0.4
    depth = 0.5 if name == "deep" else 0.25
    pool = lattice([0.0, 0.0, 0.0], [w, d, depth], dx)
    if name in ("drop", "deep"):
        extra = sphere([0.3, 0.2, depth + 0.2], 0.1, dx)
    elif name == "blocks":
        extra = np.concatenate([lattice([0.1, 0.15, depth + 0.1], [0.2, 0.25, depth + 0.2], dx),
                                lattice([0.4, 0.15, depth + 0.1], [0.5, 0.25, depth + 0.2], dx)])
    else:
        raise ValueError(name)
    box = np.array([[[0.0, 0.0, 0.0], [w, d, depth + 0.35]]])
    return np.concatenate([pool, extra]), box


def make(kind: str, x, box, dx, depth, solver):
    c0 = wcsph.auto_sound_speed(x, np.zeros_like(x), G, box)
    # summation density for both: the hybrid's particles use it, so the two run the same SPH
    model = wcsph.make_model(dx=dx, h_factor=1.2, rho0=1000.0, c0=c0, alpha=0.02, nu=1e-6, gravity=G, boxes=box,
                             cfl=0.3, density="summation")
    pt = Particles.create(x, np.zeros_like(x), 1000.0)
    if kind == "WCSPH":
        return wcsph.WCSPHSolver(model, pt)
    hm = hybrid.make_model(model, lower=box[0, 0], upper=box[0, 1], interface_depth=depth, pressure_solver=solver)
    return hybrid.HybridSolver(hm, pt)


def run(name, dx, depth, solver, warm, steps, blocks):
    x, box = scene(name, dx)
    solvers = {k: make(k, x, box, dx, depth, solver) for k in ("WCSPH", "HYBRID")}
    dt = solvers["WCSPH"].stable_dt()
    hyb = solvers["HYBRID"]
    kinds0 = hyb.kind_counts()
    for s in solvers.values():
        for _ in range(warm):
            s.step(dt)
    spent = dict.fromkeys(solvers, 0.0)
    iters = []
    for _ in range(blocks):
        for k, s in solvers.items():
            t0 = time.perf_counter()
            for _ in range(steps):
                s.step(dt)
                if k == "HYBRID":
                    iters.append(s.pressure_iterations)
            spent[k] += time.perf_counter() - t0
    n = steps * blocks
    ms = {k: 1e3 * v / n for k, v in spent.items()}
    saving = 100.0 * (1.0 - ms["HYBRID"] / ms["WCSPH"])
    shape = "x".join(map(str, hyb.model.shape))
    print(f"\n{name}: {len(x):,} particles, dx = {dx:g} m, dt = {dt * 1e3:.3f} ms, grid {shape}"
          f" of {hyb.model.cell:g} m cells, interface at {hyb.interface:.3f} m")
    sph0 = kinds0["SPH"] + kinds0["MIXA"]
    print(f"  kinds at the start        SPH {kinds0['SPH']:,}  MIXA {kinds0['MIXA']:,}  MIXB {kinds0['MIXB']:,}  "
          f"MAC {kinds0['MAC']:,}  (SPH + MIXA {sph0:,}, {100.0 * sph0 / len(x):.0f} %)")
    print(f"  WCSPH                     {ms['WCSPH']:8.2f} ms per substep")
    print(f"  HYBRID ({solver:5s})           {ms['HYBRID']:8.2f} ms per substep   "
          f"(pressure sweeps per substep: mean {np.mean(iters):.1f}, max {max(iters)})")
    print(f"  saving                    {saving:8.1f} %   (paper: 32 % drop, 37 % blocks; target >= 50 % deep)")
    return saving


def phases(name, dx, depth, solver, warm, steps):
    """The hybrid's time per substep in each compiled kernel (each wrapped in a timer; the rest is
    Python between them)."""
    from engine.solvers.hybrid import mac
    x, box = scene(name, dx)
    hyb = make("HYBRID", x, box, dx, depth, solver)
    dt = make("WCSPH", x, box, dx, depth, solver).stable_dt()
    spent = {}

    def timed(module, fname):
        f = getattr(module, fname)

        def wrapper(*args):
            t0 = time.perf_counter()
            out = f(*args)
            spent[fname] = spent.get(fname, 0.0) + time.perf_counter() - t0
            return out
        setattr(module, fname, wrapper)
        return module, fname, f

    # each kernel where the hybrid's modules look it up
    wrapped = [timed(hybrid.boundary, f) for f in ("node_candidates", "fill_rows", "fill_row_listed")]
    wrapped += [timed(hybrid.solver, f) for f in ("advance", "sph_rows", "density_pressure", "accelerations", "finish",
                                                  "move_markers")]
    wrapped += [timed(mac, f) for f in ("predictor_serial", "predictor_parallel", "poisson_rhs_serial",
                                        "poisson_rhs_parallel", "solve_pressure", "project_serial",
                                        "project_parallel")]
    try:
        for _ in range(warm):
            hyb.step(dt)
        spent.clear()
        t0 = time.perf_counter()
        for _ in range(steps):
            hyb.step(dt)
        total = time.perf_counter() - t0
    finally:
        for module, fname, f in wrapped:
            setattr(module, fname, f)
    print(f"\n{name}: hybrid, ms per substep by kernel ({steps} substeps)")
    for fname, t in sorted(spent.items(), key=lambda kv: -kv[1]):
        print(f"  {fname:22s} {1e3 * t / steps:7.3f}")
    print(f"  {'Python between them':22s} {1e3 * (total - sum(spent.values())) / steps:7.3f}")
    print(f"  {'total':22s} {1e3 * total / steps:7.3f}")


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--scene", choices=("drop", "blocks", "deep", "all"), default="all")
    ap.add_argument("--dx", type=float, default=0.01)
    ap.add_argument("--depth", type=float, default=0.1, help="interface depth below the free surface, m")
    ap.add_argument("--solver", choices=("RBSOR", "SOR"), default="RBSOR")
    ap.add_argument("--warm", type=int, default=10)
    ap.add_argument("--steps", type=int, default=10)
    ap.add_argument("--blocks", type=int, default=3)
    ap.add_argument("--quick", action="store_true", help="2 cm spacing, 3 warm-up and 2 x 5 timed substeps")
    ap.add_argument("--phases", action="store_true", help="also time the hybrid's kernels one by one")
    args = ap.parse_args(argv)
    if args.quick:
        args.dx, args.warm, args.steps, args.blocks = 0.02, 3, 5, 2
    names = ("drop", "blocks", "deep") if args.scene == "all" else (args.scene,)
    print(f"numba threads: {os.environ.get('NUMBA_NUM_THREADS', 'default')}, cpus: {os.cpu_count()}")
    for name in names:
        run(name, args.dx, args.depth, args.solver, args.warm, args.steps, args.blocks)
        if args.phases:
            phases(name, args.dx, args.depth, args.solver, args.warm, args.steps * args.blocks)


if __name__ == "__main__":
    main()
