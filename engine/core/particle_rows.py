"""Parallel row gathers for :meth:`engine.core.particles.Particles.reorder` (numba; imported only when
reordering, so that importing ``engine.core.particles`` does not load numba)."""

from numba import njit, prange


@njit(parallel=True, cache=True)
def _take_rows_2d(src, order, out):
    """out[i] = src[order[i]] for rows of a 2-D array, in parallel (numpy's take copies 12-byte rows
    one at a time on one core)."""
    for i in prange(order.shape[0]):
        j = order[i]
        for k in range(src.shape[1]):
            out[i, k] = src[j, k]


@njit(parallel=True, cache=True)
def _take_rows_1d(src, order, out):
    """out[i] = src[order[i]], in parallel."""
    for i in prange(order.shape[0]):
        out[i] = src[order[i]]
