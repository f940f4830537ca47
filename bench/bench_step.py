"""Time one solver substep on the common scene; prints figures, asserts nothing.

Scene: a cube block of liquid at spacing dx = 0.025 m in the corner of a box container of
4 x 3 x 1.5 block edges (a dam break). PBF at dt = 2 ms with 4 iterations, WCSPH at dt = 0.5 ms.
Both use the kernel support 2 dx of the common scene (cubic spline, h = dx, ~28 neighbours in the
bulk); ``--wcsph-h 1.2`` times WCSPH at the add-on's default smoothing length instead, and
``--wcsph-density summation`` WCSPH with kernel-summation density (default: continuity).

    .venv/bin/python bench/bench_step.py            # N = 64,000 and 125,000; 10 warm-up + 100 timed steps, median of 3
    .venv/bin/python bench/bench_step.py --quick    # 3 + 15 steps, one run
    .venv/bin/python bench/bench_step.py --n 125000 --solver PBF --memory 1000000
    .venv/bin/python bench/bench_step.py --n --solver WCSPH --memory 1000000   # WCSPH at 1M (h = dx)
    .venv/bin/python bench/bench_step.py --solver WCSPH --wcsph-h 1.2
    .venv/bin/python bench/bench_step.py --peer taichi --peer-python ENV/bin/python --peer-script PATH
    .venv/bin/python bench/bench_step.py --solver PBF --pairs clusters   # PBF over cluster pairs

``--peer taichi`` runs, for each N, Surge's PBF with 4 iterations always and the taichi PBF
reference on the same scene (``bench/peer_taichi.py``: taichi 1.7.4 in an environment of its own,
outside the repository; its interpreter and script come from ``--peer-python`` / ``--peer-script`` or
``SURGE_PEER_PYTHON`` / ``SURGE_PEER_SCRIPT``) in turn, a Surge run then a taichi run, ``--repeats``
times, with the same number of threads, and prints both figures and the median of the pairs' ratios;
nothing else runs then. Without a usable peer it says why and prints Surge's figures alone.

Targets (not asserted): PBF with 4 iterations at least twice taichi's particle-steps/s and at most
50 ns per particle per iteration; WCSPH >= 1.4 M particle-steps/s.
"""

from __future__ import annotations

import argparse
import os
import sys
import time

import numpy as np

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

from engine.core.particles import Particles  # noqa: E402
from engine.solvers import wcsph  # noqa: E402

import peer_taichi  # noqa: E402  (bench/ is the script's folder, first on sys.path)
from step_scene import DX, G, make_pbf, scene  # noqa: E402


def make_wcsph(x, box, h_factor=1.0, density=wcsph.DEFAULT_DENSITY):
    c0 = wcsph.auto_sound_speed(x, np.zeros_like(x), G, box)
    model = wcsph.make_model(dx=DX, h_factor=h_factor, rho0=1000.0, c0=c0, alpha=0.02, nu=1e-6, gravity=G,
                             boxes=box, friction=0.0, cfl=0.3, density=density)
    return wcsph.WCSPHSolver(model, Particles.create(x, np.zeros_like(x), 1000.0))


def _median_entry(results):
    """The (seconds, phases dict, extra dict) of ``results`` with the median time."""
    return sorted(results, key=lambda r: r[0])[len(results) // 2]


def _median_run(run, repeats):
    """``run()`` returns (seconds, phases dict, extra dict); the run with the median time is kept."""
    results = [run() for _ in range(repeats)]
    return _median_entry(results), sorted(r[0] for r in results)


def pbf_run(x, box, warm, steps, iterations, tolerance_stop, pairs="particles"):
    """One timed run of Surge's PBF on the scene (x, box): (seconds, phases dict, extra dict)."""
    s = make_pbf(x, box, iterations, pairs=pairs)
    if not tolerance_stop:
        object.__setattr__(s.model, "tolerance", 0.0)  # always the full budget: a fixed cost per step
    for _ in range(warm):
        s.step(0.002)
    phases = dict.fromkeys(s.timings, 0.0)
    iters = []
    errors = []
    t0 = time.perf_counter()
    for _ in range(steps):
        s.step(0.002)
        for k, v in s.timings.items():
            phases[k] += v
        iters.append(s.iterations)
        errors.append(s.density_error)
    total = time.perf_counter() - t0
    extra = dict(n=len(s.particles), iters=iters, errors=errors, nbrs=s.neighbours.pairs / len(s.particles),
                 entries=int(s.neighbours.count.sum(dtype=np.int64)) / len(s.particles),
                 bytes=s.memory_bytes() / len(s.particles))
    if s._clusters is not None:
        extra["clusters"] = (s._clusters.entries / len(s.particles), s._clusters.lane_use())
    return total, phases, extra


def report_pbf(results, steps, iterations, tolerance_stop):
    """Print the figures of the run with the median time among ``results`` (from :func:`pbf_run`; each
    run's own figure too, in the order run); return its particle-steps/s."""
    total, phases, extra = _median_entry(results)
    npart = extra["n"]
    solve = phases["solve"]
    iters = extra["iters"]
    mean_it = float(np.mean(iters))
    print(f"PBF  N={npart:,}  dt=2 ms  iterations max {iterations}"
          f"{' (tolerance 0.5 %)' if tolerance_stop else ' (always all)'}  median of {len(results)}")
    print(f"  particle-steps/s          {npart * steps / total / 1e6:8.3f} M   "
          f"(runs: {', '.join(f'{npart * steps / r[0] / 1e6:.3f}' for r in results)})")
    print(f"  ms per step               {total / steps * 1e3:8.2f}")
    print(f"  s per simulated second    {total / (steps * 0.002):8.2f}")
    print(f"  iterations per substep    {mean_it:8.2f}   (mean density error {np.mean(extra['errors']) * 100:.3f} %)")
    per_run = [r[1]["solve"] / max(sum(r[2]["iters"]), 1) / npart * 1e9 for r in results]
    print(f"  ns / particle / iteration {solve / max(sum(iters), 1) / npart * 1e9:8.1f}   "
          f"(wall queries, constraint and correction passes; runs: {', '.join(f'{v:.1f}' for v in per_run)})")
    share = {k: v / total * 100 for k, v in phases.items()}
    print(f"  time shares: grid+reorder {share['grid']:.1f} %, neighbour list {share['neighbours']:.1f} %, "
          f"solve {share['solve']:.1f} %, XSPH+finish {share['viscosity']:.1f} %, predict {share['predict']:.1f} %")
    print(f"  neighbour-search share    {share['grid'] + share['neighbours']:8.1f} %")
    print(f"  neighbours per particle   {extra['nbrs']:8.1f}   "
          f"({extra['entries']:.1f} half-list entries: a pair inside "
          f"a block of particles is listed and visited once)")
    if "clusters" in extra:
        entries, use = extra["clusters"]
        print(f"  cluster pairs             {entries:8.2f}   entries per particle (a cluster of 4 and 4 neighbours: "
              f"16 pairs a step); {use * 100:.1f} % of the lanes hold a pair, {100 - use * 100:.1f} % masked out")
    print(f"  bytes per particle        {extra['bytes']:8.1f}   (state + solver buffers + grid)")
    return npart * steps / total


def bench_pbf(n, warm, steps, iterations, tolerance_stop, repeats, pairs="particles"):
    x, box = scene(n)
    results = [pbf_run(x, box, warm, steps, iterations, tolerance_stop, pairs) for _ in range(repeats)]
    return report_pbf(results, steps, iterations, tolerance_stop)


def block_state(x, box, iterations, steps, pairs="particles") -> peer_taichi.BlockState:
    """Surge's block after ``steps`` steps of 2 ms with every iteration (as the peer's): the state the
    peer prints after its own, so that a ratio compares the same work."""
    s = make_pbf(x, box, iterations, pairs=pairs)
    object.__setattr__(s.model, "tolerance", 0.0)
    for _ in range(steps):
        s.step(0.002)
    xs = s.particles.x
    return peer_taichi.BlockState(steps, s.neighbours.pairs / len(xs), float(xs[:, 2].max()), float(xs[:, 0].max()))


def compare_with_peer(n, warm, steps, iterations, repeats, args):
    """Surge's PBF (all ``iterations`` always) and the taichi reference on the same scene, in turn:
    Surge's run 1, taichi's run 1, Surge's run 2, ... The ratio printed first is the median of the
    ratios of each Surge run to the taichi run right after it: a slower spell of the machine (both
    engines' figures move 10-30 % between minutes here) then lands on both sides of a ratio, not on
    one engine's runs only as when all of Surge's runs came first."""
    x, box = scene(n)
    edge = int(round(n ** (1.0 / 3.0)))
    import numba
    results, peers = [], []
    for _ in range(repeats):
        results.append(pbf_run(x, box, warm, steps, iterations, tolerance_stop=False, pairs=args.pairs))
        if args.peer_python is None:
            continue
        try:
            if iterations != 4:
                raise peer_taichi.PeerUnavailable(f"the taichi script runs 4 iterations, not {iterations}")
            peers.append(peer_taichi.run(args.peer_python, args.peer_script, edge, numba.get_num_threads(),
                                         args.peer_timeout))
        except peer_taichi.PeerUnavailable as exc:
            print(f"taichi N={edge ** 3:,}: skipped ({exc})")
            args.peer_python = None
    surge = report_pbf(results, steps, iterations, tolerance_stop=False)
    if not peers or len(peers) != len(results):
        return
    if peers[0].state is not None:
        print(f"state, Surge   {block_state(x, box, iterations, peers[0].state.steps, args.pairs).line()}")
        print(f"state, taichi  {peers[0].state.line()}  (the same scene: the work a step compares when these agree)")
    npart = results[0][2]["n"]
    rates = [npart * steps / r[0] for r in results]
    ratios = [s / p.steps_per_s for s, p in zip(rates, peers)]
    peer_rates = sorted(p.steps_per_s for p in peers)
    peer_median = peer_rates[len(peer_rates) // 2]
    threads = peers[0].threads
    print(f"taichi PBF  N={peers[0].n:,}  dt=2 ms  4 iterations  {threads} threads  "
          f"({len(peers)} runs, each the median of 3 x 100 steps)")
    print(f"  particle-steps/s          {peer_median / 1e6:8.3f} M   (runs in turn with Surge's: "
          f"{', '.join(f'{p.steps_per_s / 1e6:.3f}' for p in peers)}; "
          f"{1e9 / peer_median / 4:.0f} ns per particle and iteration, whole step / 4)")
    print(f"  Surge / taichi            {float(np.median(ratios)):8.2f}x  particle-steps/s, N={peers[0].n:,}: "
          f"median of the side-by-side pairs ({', '.join(f'{r:.2f}' for r in ratios)}); "
          f"medians' ratio {surge / peer_median:.2f}")


def neighbours_within_support(s) -> float:
    """Mean number of neighbours within the kernel support 2h (the Verlet list reaches a skin further)."""
    nl, x = s.neighbours, s.particles.x.astype(np.float64)
    owner = np.repeat(np.arange(len(x)), nl.count.astype(np.int64))
    slot = np.concatenate([np.arange(a, a + c) for a, c in zip(nl.start, nl.count.astype(np.int64))])
    d2 = np.sum((x[owner] - x[nl.nbr[slot]]) ** 2, axis=1)
    return float(np.count_nonzero(d2 < (2.0 * s.model.h) ** 2)) / len(x)


def bench_wcsph(n, warm, steps, repeats, h_factor, density=wcsph.DEFAULT_DENSITY):
    x, box = scene(n)

    def run():
        s = make_wcsph(x, box, h_factor, density)
        for _ in range(warm):
            s.step(0.0005)
        s.timings = dict.fromkeys(s.timings, 0.0)
        rebuilds = s.rebuilds
        t0 = time.perf_counter()
        for _ in range(steps):
            s.step(0.0005)
        total = time.perf_counter() - t0
        extra = dict(n=len(s.particles), stable=s.stable_dt(), nbrs=neighbours_within_support(s),
                     listed=s.neighbours.pairs / len(s.particles), rebuilds=s.rebuilds - rebuilds,
                     bytes=s.memory_bytes() / len(s.particles))
        return total, dict(s.timings), extra

    (total, phases, extra), totals = _median_run(run, repeats)
    npart = extra["n"]
    print(f"WCSPH N={npart:,}  dt=0.5 ms  h = {h_factor:g} dx (support {2 * h_factor:g} dx)  {density} density"
          f"  median of {repeats}"
          f"  (stable_dt now {extra['stable'] * 1e3:.3f} ms)")
    print(f"  particle-steps/s          {npart * steps / total / 1e6:8.3f} M   "
          f"(runs: {', '.join(f'{npart * steps / t / 1e6:.3f}' for t in totals)})")
    print(f"  ms per step               {total / steps * 1e3:8.2f}")
    print(f"  s per simulated second    {total / (steps * 0.0005):8.2f}")
    share = {k: v / total * 100 for k, v in phases.items()}
    print(f"  time shares: neighbour search {share['neighbours']:.1f} % ({extra['rebuilds']} list builds in {steps} "
          f"steps), density+pressure {share['density']:.1f} %, forces {share['forces']:.1f} %, "
          f"kick/drift {share['integrate']:.1f} %")
    print(f"  neighbours per particle   {extra['nbrs']:8.1f}   within 2h ({extra['listed']:.1f} listed with the skin)")
    print(f"  bytes per particle        {extra['bytes']:8.1f}   (state + neighbour list + solver buffers + grid)")


def bench_memory(n, steps, solver="PBF", h_factor=1.0, density=wcsph.DEFAULT_DENSITY):
    """A dam break of about n particles for a few steps of ``solver``: bytes per particle and the
    process's peak."""
    import resource
    x, box = scene(n)
    if solver == "PBF":
        s, dt, label = make_pbf(x, box, 4), 0.002, "PBF"
    else:
        s, dt, label = make_wcsph(x, box, h_factor, density), 0.0005, f"WCSPH ({density}, h = {h_factor:g} dx)"
    s.particles.fit()  # no spare rows, as the driver leaves a scene without inflows (assemble.fill_fluids)
    t0 = time.perf_counter()
    for _ in range(steps):
        s.step(dt)
    total = time.perf_counter() - t0
    npart = len(s.particles)
    peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024
    print(f"{label} memory  N={npart:,}  {steps} steps in {total:.1f} s "
          f"({npart * steps / total / 1e6:.3f} M particle-steps/s)")
    print(f"  bytes per particle        {s.memory_bytes() / npart:8.1f}   "
          "(engine arrays: state + solver buffers + grid)")
    print(f"  process peak RSS          {peak / 2**20:8.0f} MiB   "
          f"({peak / npart:.0f} B/particle incl. Python, numba, numpy)")


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--quick", action="store_true", help="3 warm-up and 15 timed steps, one run")
    ap.add_argument("--n", type=int, nargs="*", default=[64000, 125000], help="particle counts (cubes)")
    ap.add_argument("--solver", choices=("PBF", "WCSPH", "both"), default="both")
    ap.add_argument("--iterations", type=int, default=4)
    ap.add_argument("--wcsph-h", type=float, default=1.0, metavar="FACTOR",
                    help="WCSPH smoothing length in particle spacings (1.0: the common scene's support 2 dx)")
    ap.add_argument("--wcsph-density", choices=wcsph.DENSITY_MODES, default=wcsph.DEFAULT_DENSITY,
                    help="WCSPH density: continuity equation or kernel summation")
    ap.add_argument("--repeats", type=int, default=3, help="runs per figure; the median is printed")
    ap.add_argument("--memory", type=int, default=0, metavar="N",
                    help="also run N particles (e.g. 1000000) for a few steps and print the memory per particle")
    ap.add_argument("--pairs", choices=("particles", "clusters"), default="particles",
                    help="PBF's pair list: particle pairs, or clusters of four and quads of their neighbours")
    peer_taichi.add_options(ap)
    args = ap.parse_args(argv)
    warm, steps = (3, 15) if args.quick else (10, 100)
    repeats = 1 if args.quick else args.repeats
    import numba
    print(f"numba {numba.__version__}, {numba.get_num_threads()} threads, {os.cpu_count()} CPUs; "
          f"{warm} warm-up + {steps} timed steps (first call compiles; warm-up absorbs it)")
    if args.peer:
        try:
            peer_taichi.check(args.peer_python, args.peer_script)
        except peer_taichi.PeerUnavailable as exc:
            print(f"peer taichi skipped: {exc}")
            args.peer_python = None
        for n in args.n:
            compare_with_peer(n, warm, steps, args.iterations, repeats, args)
        return
    for n in args.n:
        if args.solver in ("PBF", "both"):
            bench_pbf(n, warm, steps, args.iterations, tolerance_stop=False, repeats=repeats, pairs=args.pairs)
            bench_pbf(n, warm, steps, args.iterations, tolerance_stop=True, repeats=repeats, pairs=args.pairs)
        if args.solver in ("WCSPH", "both"):
            bench_wcsph(n, warm, steps, repeats, args.wcsph_h, args.wcsph_density)
    if args.memory:
        for solver in ("PBF", "WCSPH"):
            if args.solver in (solver, "both"):
                bench_memory(args.memory, 5, solver, args.wcsph_h, args.wcsph_density)


if __name__ == "__main__":
    main()
