"""The step benchmarks' dam break: an n³ block of water at dx = 0.025 m against the corner of a box
of 4 x 3 x 1.5 block edges, and the PBF solver they time on it.

Shared by ``bench/bench_step.py`` and the child runs of ``bench/bench_ab.py``. It does not touch
``sys.path``: the ``engine`` it imports is whichever the importing script put first (bench_ab's child
times an engine exported at another revision).
"""

from __future__ import annotations

import numpy as np

from engine.core.particles import Particles
from engine.solvers import pbf

DX = 0.025
G = np.array([0.0, 0.0, -9.81])


def scene(n_target: int):
    """Positions (N, 3) of a cube of about ``n_target`` particles and the box (1, 2, 3) holding it."""
    edge_n = int(round(n_target ** (1.0 / 3.0)))
    edge = edge_n * DX
    axis = (np.arange(edge_n) + 0.5) * DX
    gx, gy, gz = np.meshgrid(axis, axis, axis, indexing="ij")
    x = np.stack([gx.ravel(), gy.ravel(), gz.ravel()], axis=1)
    box = np.array([[[0.0, 0.0, 0.0], [4.0 * edge, 3.0 * edge, 1.5 * edge]]])
    return x, box


def make_pbf(x, box, iterations: int, tolerance: float = 0.005, pairs: str = "particles"):
    """The benchmarks' PBF solver over ``x`` at rest in ``box``; tolerance 0 runs every iteration; ``pairs``
    the solver's pair list (``pbf.PAIR_LISTS``)."""
    model = pbf.make_model(dx=DX, rho0=1000.0, iterations=iterations, tolerance=tolerance, beta=0.6, xsph=0.02,
                           gravity=G, boxes=box, friction=0.0, cfl=0.5, max_dt=0.002,
                           speed_limit=1000.0)
    return pbf.PBFSolver(model, Particles.create(x, np.zeros_like(x), 1000.0), pairs=pairs)
