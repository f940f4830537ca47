"""The taichi PBF reference, run as a peer beside Surge's own figures.

The peer is a script that runs Position-Based Fluids in taichi 1.7.4 on the CPU on the common
benchmark scene (a cube block of n^3 particles at dx = 0.025 m, support 2 dx, in a box of
4 x 3 x 1.5 block edges, dt = 2 ms, 4 iterations; taichi's per-step cell lists and fixed-size
neighbour arrays) and prints one line::

    taichi PBF3D N=64000 threads=2: 1.530 M particle-steps/s, 164 ns/particle/iteration (...)

and before it the state the block reached (``state after 310 steps: mean neighbours 33.1, block top z
0.412 m, x extent 2.000 m``): a block that blew apart does less work a step and is no benchmark, so
the benchmarks print it beside Surge's own state after as many steps.

taichi is not a dependency of Surge: it lives in an environment of its own, outside the repository
(``python3.11 -m venv ENV && ENV/bin/pip install taichi==1.7.4 "numpy<2"``). The benchmarks take
that environment's interpreter and the script's path from options (``--peer-python``,
``--peer-script``) or from the environment variables ``SURGE_PEER_PYTHON`` and
``SURGE_PEER_SCRIPT``; without them, or when the peer cannot run, they print why and skip it.
"""

from __future__ import annotations

import argparse
import os
import re
import subprocess
from dataclasses import dataclass

#: Time step of the peer script, s (the common scene's).
PEER_DT = 0.002

_STATE = re.compile(r"state after (\d+) steps: mean neighbours ([0-9.]+), block top z ([0-9.eE+-]+) m, "
                    r"x extent ([0-9.eE+-]+) m")
_LINE = re.compile(r"N=(\d+) threads=(\d+): ([0-9.]+) M particle-steps/s, ([0-9.]+) ns/particle/iteration")


@dataclass(frozen=True)
class PeerResult:
    """One run of the peer: particle count, threads, particle-steps per second, ns per particle and iteration."""

    n: int
    threads: int
    steps_per_s: float
    ns_per_iteration: float
    #: The state the peer's block reached, when it prints one: :class:`BlockState`.
    state: BlockState | None = None


@dataclass(frozen=True)
class BlockState:
    """Where a benchmark's block stands after ``steps`` steps: the mean number of neighbours within the
    support (the particle itself not counted), the highest particle's z and the largest x, m."""

    steps: int
    neighbours: float
    top_z: float
    x_extent: float

    def line(self) -> str:
        return (f"after {self.steps} steps: {self.neighbours:.1f} neighbours a particle, top z {self.top_z:.3f} m, "
                f"x extent {self.x_extent:.3f} m")


class PeerUnavailable(Exception):
    """The peer cannot run here; the message says why (printed, then the peer is skipped)."""


def add_options(ap: argparse.ArgumentParser) -> None:
    """The ``--peer``, ``--peer-python`` and ``--peer-script`` options of a benchmark."""
    ap.add_argument("--peer", choices=("taichi",), default=None,
                    help="also run the taichi PBF reference on the same scene, one after the other, and print "
                         "the ratio")
    ap.add_argument("--peer-python", default=os.environ.get("SURGE_PEER_PYTHON"), metavar="PATH",
                    help="Python interpreter of the environment with taichi 1.7.4 (default: $SURGE_PEER_PYTHON)")
    ap.add_argument("--peer-script", default=os.environ.get("SURGE_PEER_SCRIPT"), metavar="PATH",
                    help="the taichi PBF script taichi_pbf3d.py (default: $SURGE_PEER_SCRIPT)")
    ap.add_argument("--peer-timeout", type=float, default=1800.0, metavar="S",
                    help="seconds before a peer run is abandoned")


def check(python: str | None, script: str | None) -> None:
    """Raise :class:`PeerUnavailable` unless the interpreter and script exist and taichi imports."""
    if not python:
        raise PeerUnavailable("no peer interpreter: pass --peer-python or set SURGE_PEER_PYTHON")
    if not script:
        raise PeerUnavailable("no peer script: pass --peer-script or set SURGE_PEER_SCRIPT")
    if not os.path.isfile(script):
        raise PeerUnavailable(f"peer script {script!r} does not exist")
    if not (os.path.isfile(python) and os.access(python, os.X_OK)):
        raise PeerUnavailable(f"peer interpreter {python!r} is not an executable file")
    try:
        probe = subprocess.run([python, "-c", "import taichi"], capture_output=True, text=True, timeout=300)
    except (OSError, subprocess.TimeoutExpired) as exc:
        raise PeerUnavailable(f"peer interpreter {python!r} does not run: {exc}") from exc
    if probe.returncode != 0:
        last = (probe.stderr.strip().splitlines() or ["no message"])[-1]
        raise PeerUnavailable(f"taichi does not import in {python!r}: {last}")


def run(python: str, script: str, edge: int, threads: int, timeout: float) -> PeerResult:
    """Run the peer on a block of ``edge``^3 particles with ``threads`` threads and parse its line."""
    try:
        proc = subprocess.run([python, script, str(edge), str(threads)], capture_output=True, text=True,
                              timeout=timeout)
    except (OSError, subprocess.TimeoutExpired) as exc:
        raise PeerUnavailable(f"the peer run failed: {exc}") from exc
    match = _LINE.search(proc.stdout)
    if proc.returncode != 0 or match is None:
        tail = (proc.stderr.strip() or proc.stdout.strip()).splitlines()[-3:]
        raise PeerUnavailable(f"the peer exited with status {proc.returncode} and no figure: {' | '.join(tail)}")
    found = _STATE.search(proc.stdout)
    state = None if found is None else BlockState(int(found.group(1)), float(found.group(2)), float(found.group(3)),
                                                   float(found.group(4)))
    return PeerResult(int(match.group(1)), int(match.group(2)), float(match.group(3)) * 1e6, float(match.group(4)),
                      state)
