"""PBF step before and after a change, alternating: a ratio that survives a busy machine.

Exports ``engine/`` at a git revision (default ``main``) into a temporary folder and times the
benchmark's dam break (``bench/bench_step.py``'s scene, 4 iterations always) with that engine and
with the working tree's, each in a process of its own, alternating (before, after, before, after,
...). Prints each engine's time per step (mean and best of the runs) and the ratio of the means.
With ``--threads 1`` (the default) a run measures the CPU time of its one thread, which other
programs on the machine disturb far less than wall time: each parallel region of a multi-threaded
run waits for a thread the system may have parked. Asserts nothing.

(Both engines in one process would be simpler, but the engine imported second ran up to 40 %
slower there, whichever it was, while two solvers of one engine ran equally fast.)

    .venv/bin/python bench/bench_ab.py                      # main against the working tree, 64,000 particles
    .venv/bin/python bench/bench_ab.py --rev HEAD~3 --n 125000 --runs 4 --steps 20
"""

from __future__ import annotations

import argparse
import os
import subprocess
import sys
import tempfile

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))

#: One timed run, in a child process whose sys.path starts with the tree to time.
CHILD = r"""
import os, sys, time
tree, n, steps, bench_dir = sys.argv[1], int(sys.argv[2]), int(sys.argv[3]), sys.argv[4]
sys.path.insert(0, tree)
sys.path.append(bench_dir)  # after the tree: step_scene imports the engine being timed
from engine.solvers import pbf
from step_scene import make_pbf, scene
assert os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(pbf.__file__)))) == os.path.abspath(tree)
x, box = scene(n)
s = make_pbf(x, box, 4, tolerance=0.0)
for _ in range(10):
    s.step(0.002)
import numba
clock = time.process_time if numba.get_num_threads() == 1 else time.perf_counter
t0 = clock()
for _ in range(steps):
    s.step(0.002)
print((clock() - t0) / steps, len(x))
"""


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--rev", default="main", help="git revision of the engine to compare with (default main)")
    ap.add_argument("--n", type=int, default=64000, help="particles (a cube)")
    ap.add_argument("--runs", type=int, default=3, help="runs of each engine, alternating")
    ap.add_argument("--steps", type=int, default=30, help="timed steps per run (after 10 untimed)")
    ap.add_argument("--threads", type=int, default=1, help="numba threads; 1 (the default) times CPU time")
    args = ap.parse_args(argv)
    env = dict(os.environ, NUMBA_NUM_THREADS=str(args.threads))
    with tempfile.TemporaryDirectory(prefix="surge_ab_") as before_tree:
        archive = subprocess.run(["git", "-C", REPO, "archive", args.rev, "engine"], capture_output=True, check=True)
        subprocess.run(["tar", "-x", "-C", before_tree], input=archive.stdout, check=True)
        trees = {f"before ({args.rev})": before_tree, "after (working tree)": REPO}
        times = {k: [] for k in trees}
        n = args.n
        for _ in range(args.runs):
            for k, tree in trees.items():
                out = subprocess.run([sys.executable, "-c", CHILD, tree, str(args.n), str(args.steps),
                                      os.path.join(REPO, "bench")],
                                     capture_output=True, text=True, env=env, check=True).stdout
                seconds, n = out.split()[-2:]
                times[k].append(float(seconds))
                n = int(n)
    print(f"PBF N={n:,}, 4 iterations, dt 2 ms; {args.threads} threads, {'CPU' if args.threads == 1 else 'wall'} "
          f"time; {args.runs} runs of {args.steps} steps per engine, alternating")
    for k, t in times.items():
        mean = sum(t) / len(t)
        print(f"  {k:24s} mean {mean * 1e3:8.2f} ms/step   best {min(t) * 1e3:8.2f}   "
              f"({n / mean / 1e6:.3f} M particle-steps/s)   runs: {', '.join(f'{v * 1e3:.1f}' for v in t)}")
    before, after = (sum(t) / len(t) for t in times.values())
    print(f"  after / before (means)   {after / before:8.3f}")


if __name__ == "__main__":
    main()
