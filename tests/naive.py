"""Slow reference implementations the tests compare the engine's fast paths with."""

from __future__ import annotations

import numpy as np
from numba import njit

from engine.core.cell_grid import CellGrid


@njit(cache=True)
def _count_pairs(x, radius, cell_start, cell_nbr, particle_cell, counts):
    r2 = radius * radius
    for i in range(x.shape[0]):
        c = particle_cell[i]
        k = 0
        for q in range(27):
            nc = cell_nbr[c, q]
            if nc < 0:
                continue
            for j in range(cell_start[nc], cell_start[nc + 1]):
                dx = x[i, 0] - x[j, 0]
                dy = x[i, 1] - x[j, 1]
                dz = x[i, 2] - x[j, 2]
                if dx * dx + dy * dy + dz * dz < r2:
                    k += 1
        counts[i] = k


@njit(cache=True)
def _fill_pairs(x, radius, cell_start, cell_nbr, particle_cell, offsets, out):
    r2 = radius * radius
    for i in range(x.shape[0]):
        c = particle_cell[i]
        k = offsets[i]
        for q in range(27):
            nc = cell_nbr[c, q]
            if nc < 0:
                continue
            for j in range(cell_start[nc], cell_start[nc + 1]):
                dx = x[i, 0] - x[j, 0]
                dy = x[i, 1] - x[j, 1]
                dz = x[i, 2] - x[j, 2]
                if dx * dx + dy * dy + dz * dz < r2:
                    out[k, 0] = i
                    out[k, 1] = j
                    k += 1


def neighbour_pairs(x_sorted: np.ndarray, grid: CellGrid, radius: float) -> np.ndarray:
    """All ordered pairs (i, j), i != j included both ways and i == j included, with |x_i - x_j| < radius.

    A slow helper for tests and tools (the solvers loop over cells directly).

    Returns
    -------
    ndarray, shape (P, 2), int64, indices into the *sorted* order, rows sorted lexicographically.
    """
    if radius > grid.cell_size * (1 + 1e-12):
        raise ValueError(f"radius {radius} exceeds the cell size {grid.cell_size}")
    n = x_sorted.shape[0]
    counts = np.zeros(n, dtype=np.int64)
    _count_pairs(x_sorted, radius, grid.cell_start, grid.cell_nbr, grid.particle_cell, counts)
    offsets = np.concatenate([[0], np.cumsum(counts)[:-1]]).astype(np.int64) if n else np.zeros(0, np.int64)
    out = np.empty((int(counts.sum()), 2), dtype=np.int64)
    _fill_pairs(x_sorted, radius, grid.cell_start, grid.cell_nbr, grid.particle_cell, offsets, out)
    idx = np.lexsort((out[:, 1], out[:, 0]))
    return out[idx]
