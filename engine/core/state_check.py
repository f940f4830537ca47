"""Per-substep checks of the particle state in one pass: all finite, and the fastest speed.

The driver checks the state after every substep (:func:`engine.driver._check_state`) and PBF
picks its substep from the fastest particle; with numpy each is several passes over the arrays
and temporary arrays.
"""

from __future__ import annotations

import math

import numpy as np
from numba import njit, prange

#: Particles per block of the reduction (a fixed partition: the result does not depend on threads).
BLOCK = 8192


@njit(parallel=True, cache=True)
def _block_max_speed2(x, v, block,
                      # outputs
                      out):
    """out[b] = max |v|^2 over block b, or -1 if any position or velocity in it is not finite."""
    n = x.shape[0]
    for b in prange(out.shape[0]):
        m = 0.0
        bad = False
        for i in range(b * block, min(n, (b + 1) * block)):
            s = 0.0
            for k in range(3):
                xk = np.float64(x[i, k])
                vk = np.float64(v[i, k])
                if not (math.isfinite(xk) and math.isfinite(vk)):
                    bad = True
                s += vk * vk
            if s > m:
                m = s
        out[b] = -1.0 if bad else m


def max_speed(x: np.ndarray, v: np.ndarray) -> float:
    """Largest particle speed, m/s; ``nan`` if any position or velocity is not finite; 0 for no particles.

    Parameters
    ----------
    x, v : ndarray, shape (N, 3), float32 or float64, m and m/s
    """
    if x.shape != v.shape or x.ndim != 2 or x.shape[1] != 3:
        raise ValueError(f"positions and velocities must both have shape (N, 3), got {x.shape} and {v.shape}")
    n = x.shape[0]
    if n == 0:
        return 0.0
    out = np.empty((n + BLOCK - 1) // BLOCK, dtype=np.float64)
    _block_max_speed2(x, v, BLOCK, out)
    if np.any(out < 0.0):
        return math.nan
    return math.sqrt(float(out.max()))


@njit(parallel=True, cache=True)
def _block_max_norms2(v, a, kind, max_kind, block,
                      # outputs
                      out):
    """out[b] = max |v|^2 and out[blocks + b] = max |a|^2 over block b (the latter only over rows
    with kind[i] <= max_kind when ``kind`` has rows)."""
    n = v.shape[0]
    blocks = out.shape[0] // 2
    every = kind.shape[0] == 0
    for b in prange(blocks):
        vm = 0.0
        am = 0.0
        for i in range(b * block, min(n, (b + 1) * block)):
            sv = 0.0
            for k in range(3):
                vk = np.float64(v[i, k])
                sv += vk * vk
            vm = max(vm, sv)
            if every or kind[i] <= max_kind:
                sa = 0.0
                for k in range(3):
                    ak = np.float64(a[i, k])
                    sa += ak * ak
                am = max(am, sa)
        out[b] = vm
        out[blocks + b] = am


def max_speed_and_acceleration(v: np.ndarray, a: np.ndarray, kind: np.ndarray | None = None,
                               max_kind: int = 0) -> tuple[float, float]:
    """Largest |v| (m/s) and |a| (m/s^2) over the particles in one pass (a solver's time-step
    limits); with ``kind``, |a| only over the particles whose kind is at most ``max_kind`` (the
    hybrid's SPH and MIXA particles). (0, 0) for no particles; non-finite values are
    :func:`max_speed`'s to report."""
    n = v.shape[0]
    if n == 0:
        return 0.0, 0.0
    blocks = (n + BLOCK - 1) // BLOCK
    out = np.empty(2 * blocks, dtype=np.float64)
    _block_max_norms2(v, a, _EVERY if kind is None else kind, max_kind, BLOCK, out)
    return math.sqrt(float(out[:blocks].max())), math.sqrt(float(out[blocks:].max()))


_EVERY = np.zeros(0, dtype=np.int8)
