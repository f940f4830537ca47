"""``bench/bench_step.py --peer``: Surge's runs and the peer's alternate, and the ratio printed is
the median of the side-by-side pairs. The peer here is a stand-in script that prints the peer's
line with a figure that changes from call to call and logs its calls (the real peer, taichi, lives
outside the repository; the benchmark's own figures are not checked, only how they are paired)."""

import os
import re
import subprocess
import sys

import numpy as np
import pytest

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))

PEER = """
import os, sys, time
log = os.environ["PEER_LOG"]
calls = sum(1 for _ in open(log)) if os.path.exists(log) else 0
with open(log, "a") as f:
    f.write(f"{time.time()} {sys.argv[1]} {sys.argv[2]}\\n")
rate = [0.5, 2.0, 1.0][calls % 3]
n = int(sys.argv[1]) ** 3
print(f"taichi PBF3D N={n} threads={sys.argv[2]}: {rate:.3f} M particle-steps/s, 100 ns/particle/iteration (stand-in)")
"""


@pytest.mark.slow
def test_peer_runs_alternate_with_surges_and_the_ratio_is_the_median_of_the_pairs(tmp_path):
    script = tmp_path / "peer.py"
    script.write_text(PEER)
    log = tmp_path / "calls.log"
    # the benchmark first checks that the peer's interpreter imports taichi: an empty module answers
    (tmp_path / "mods").mkdir()
    (tmp_path / "mods" / "taichi.py").write_text("")
    env = dict(os.environ, PEER_LOG=str(log), NUMBA_NUM_THREADS="1", PYTHONPATH=str(tmp_path / "mods"))
    out = subprocess.run([sys.executable, os.path.join(ROOT, "bench", "bench_step.py"), "--n", "1000", "--repeats", "3",
                          "--peer", "taichi", "--peer-python", sys.executable, "--peer-script", str(script)],
                         capture_output=True, text=True, env=env, cwd=ROOT, timeout=900)
    assert out.returncode == 0, out.stderr
    calls = log.read_text().split()
    assert len(calls) == 9 and calls[1::3] == ["10"] * 3 and calls[2::3] == ["1"] * 3  # edge 10, one thread
    # Surge's figures in the order run, and the pairs' ratios: run k against the peer call right after it
    surge = [float(v) for v in re.search(r"particle-steps/s\s+[0-9.]+ M\s+\(runs: ([0-9., ]+)\)", out.stdout)
             .group(1).split(", ")]
    peer = [0.5, 2.0, 1.0]
    printed = re.search(r"median of the side-by-side pairs \(([0-9., ]+)\)", out.stdout).group(1).split(", ")
    # the figures are printed with 3 decimals (M particle-steps/s) and the ratios with 2: 0.005 each
    np.testing.assert_allclose([float(r) for r in printed], np.array(surge) / peer, rtol=1e-3, atol=0.006)
    ratio = float(re.search(r"Surge / taichi\s+([0-9.]+)x", out.stdout).group(1))
    assert ratio == float(np.median([float(r) for r in printed]))
    assert "runs in turn with Surge's: 0.500, 2.000, 1.000" in out.stdout
    # the peer's figure is the median of its runs
    assert re.search(r"taichi PBF.*\n  particle-steps/s\s+1\.000 M", out.stdout)
