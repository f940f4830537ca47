"""The pair passes of Position-Based Fluids over cluster pairs: one resolution level (every particle
with the same h and mass), the list of :class:`engine.core.cluster_list.ClusterList`.

The same passes as :mod:`engine.solvers.pbf_passes` (the density constraint with its multipliers, eq. 1
and 4 with the clamp of eq. 7, the position correction of eq. 5 with the wall push, XSPH of eq. 6;
equations of Alduán, Tena & Otaduy 2015, "Efficient and Robust Position-Based Fluids for VFX") over the
same pairs, computed 16 pairs at a time for two clusters of four particles
(:mod:`engine.solvers.pbf_cluster_lanes`; Páll & Hess 2013, "A flexible algorithm for calculating pair
interactions on SIMD architectures"). One thread walks a block of clusters in order; a local cluster
pair (both in the block) is visited once and each of its clusters gets its share; pairs across blocks
are listed from both sides. No two threads write one particle, and the sums do not depend on the
number of threads.

The particle rows (N, 4) float32 (position and lambda, or velocity and 1 / rho) have room for the
last cluster's four particles (:func:`cluster_rows`): a cluster's rows are one 64-byte line. Every
kernel writes only the rows of the first ``n`` particles past its pair sums.

The correction computes each pair's kernel slope from the positions (the particle-list passes store it
per pair in the constraint pass and read it back): in 16 lanes the square root and the spline cost
less than the stored slopes' memory, and XSPH likewise computes its kernel values.
"""

from __future__ import annotations


import numpy as np
from numba import njit, prange

from ..core.cluster_lanes import CLUSTER
from .pbf_cluster_lanes import cluster_density, cluster_push, cluster_xsph
from .pbf_passes import FASTMATH, _finish_particle, move_particle as _move

#: Bytes of one cache line: a cluster's four 16-byte rows start at a multiple of it.
_LINE = 64


def cluster_rows(n: int) -> np.ndarray:
    """Zeroed (4 C, 4) float32 rows for n particles, C = ceil(n / 4) clusters, starting on a 64-byte
    boundary (a cluster's rows are then one cache line)."""
    rows = CLUSTER * -(-n // CLUSTER)
    buf = np.zeros(rows * 4 + _LINE // 4, dtype=np.float32)
    skip = (-buf.ctypes.data % _LINE) // 4
    return buf[skip:skip + rows * 4].reshape(rows, 4)


@njit(inline="always", cache=True)
def _block(b, block, nc):
    """Clusters c0:c1 of block b."""
    c0 = b * block
    return c0, min(nc, c0 + block)


@njit(inline="always", cache=True)
def _zero_rows(rows, c0, c1):
    """Zero the rows of clusters c0:c1 (the shares of the block's clusters, added during the walk)."""
    for i in range(np.uintp(CLUSTER * c0), np.uintp(CLUSTER * c1)):
        for k in range(4):
            rows[i, k] = np.float32(0.0)


@njit(inline="always", cache=True, fastmath=FASTMATH)
def _density(i, n, sums, unit, rho0, lam, top, wall_free, rho, xq, s_err, m_err):
    """rho, C and lambda of particle i (nothing past the n particles) from its kernel sums; the error sums
    with its C added."""
    if i >= n:
        return s_err, m_err
    # w(0) = 1: the particle itself
    r = unit * (np.float32(1.0) + sums) + rho0 * (np.float32(1.0) - wall_free[i])
    rho[i] = r
    cc = r / rho0 - np.float32(1.0)
    lm = lam * cc
    xq[i, 3] = lm if lm < top else top
    if cc > 0.0:
        s_err += cc
        if cc > m_err:
            m_err = cc
    return s_err, m_err


@njit(parallel=True, cache=True, fastmath=FASTMATH)
def constraint(xq, n, start, count, local, nbr, mask, h, stiffness, lam_max, rho_unit, rho0, beta, wall_free, block,
               # outputs
               rho, block_err, block_max):
    """Density, constraint and multiplier of the first n particles: eq. 1 and eq. 4 with the clamp of
    eq. 7 (:func:`engine.solvers.pbf_passes.constraint` for one level).

    rho_i = rho_unit / h^3 sum_j w(|x_i - x_j| / h) + rho0 (1 - F_i) (the particle itself included),
    C_i = rho_i / rho0 - 1, lambda_i = min(-beta k C_i, lam_max), written into ``xq[i, 3]``. ``rho`` has
    a value per row of ``xq`` (4 C); ``block_err[b]`` / ``block_max[b]`` are the sum / largest of
    max(C_i, 0) over block b of ``block`` clusters."""
    xf = xq.reshape(-1)
    nc = start.shape[0]
    h32 = np.float32(h)
    inv_h = np.float32(1.0) / h32
    unit = np.float32(rho_unit) * inv_h * inv_h * inv_h
    rho0_ = np.float32(rho0)
    lam = -np.float32(beta) * np.float32(stiffness)
    top = np.float32(lam_max)
    for b in prange(block_err.shape[0]):
        c0, c1 = _block(b, block, nc)
        for i in range(np.uintp(CLUSTER * c0), np.uintp(CLUSTER * c1)):
            rho[i] = np.float32(0.0)
        s_err = 0.0
        m_err = 0.0
        for c in range(c0, c1):
            t0 = start[c]
            r0, r1, r2, r3 = cluster_density(xf, rho, nbr, mask, t0, t0 + local[c], t0 + count[c], c, inv_h)
            i = CLUSTER * c
            s_err, m_err = _density(i, n, r0, unit, rho0_, lam, top, wall_free, rho, xq, s_err, m_err)
            s_err, m_err = _density(i + 1, n, r1, unit, rho0_, lam, top, wall_free, rho, xq, s_err, m_err)
            s_err, m_err = _density(i + 2, n, r2, unit, rho0_, lam, top, wall_free, rho, xq, s_err, m_err)
            s_err, m_err = _density(i + 3, n, r3, unit, rho0_, lam, top, wall_free, rho, xq, s_err, m_err)
        block_err[b] = s_err
        block_max[b] = m_err


@njit(parallel=True, cache=True, fastmath=FASTMATH)
def correct(xq, n, start, count, local, nbr, mask, h, scale, cohesion, slot, wall_grad, wall_factor, max_move, boxes32,
            margin, test_all, inv_dt, block,
            # outputs
            x_out, v):
    """Eq. 5 with the tensile term of eq. 7 and the wall push; x_out = x + dx, v += dx / dt, for the first n
    particles (:func:`engine.solvers.pbf_passes.correct` for one level).

    dx_i = -scale / h^5 sum_j (lambda_i + lambda_j + g w(q_ij)) s(q_ij) (x_i - x_j) + wall_factor
    min(lambda_i, 0) grad psi_walls, s = -w'(q) / q (so that grad W_ij = -sigma / h^5 s (x_i - x_j)),
    ``scale`` = sigma m / rho0, g = ``cohesion`` / w(1) (W(dq) of eq. 7 with dq = h); limited to
    ``max_move h`` in length, then projected into every box container x_i was near (only particles with
    ``slot`` >= 0 are tested unless ``test_all``). ``xq`` holds positions and lambda (:func:`constraint`);
    ``x_out``'s rows hold the shares of the block's earlier clusters until their turn, then the new
    positions (fourth values 0)."""
    xf = xq.reshape(-1)
    of = x_out.reshape(-1)
    nc = start.shape[0]
    h32 = np.float32(h)
    inv_h = np.float32(1.0) / h32
    sc = -np.float32(scale) * inv_h * inv_h * inv_h * inv_h * inv_h
    idt = np.float32(inv_dt)
    margin32 = np.float32(margin)
    lim = np.float32(max_move) * h32
    g = np.float32(cohesion) * np.float32(4.0)  # 1 / w(1) = 4
    for b in prange((nc + block - 1) // block):
        c0, c1 = _block(b, block, nc)
        _zero_rows(x_out, c0, c1)
        for c in range(c0, c1):
            t0 = start[c]
            d = cluster_push(xf, of, nbr, mask, t0, t0 + local[c], t0 + count[c], c, inv_h, h32, g)
            i = CLUSTER * c
            _move(i, d[0], d[1], d[2], n, sc, xq, slot, wall_grad, wall_factor, lim, boxes32, margin32, test_all, idt,
                  x_out, v)
            _move(i + 1, d[3], d[4], d[5], n, sc, xq, slot, wall_grad, wall_factor, lim, boxes32, margin32, test_all,
                  idt, x_out, v)
            _move(i + 2, d[6], d[7], d[8], n, sc, xq, slot, wall_grad, wall_factor, lim, boxes32, margin32, test_all,
                  idt, x_out, v)
            _move(i + 3, d[9], d[10], d[11], n, sc, xq, slot, wall_grad, wall_factor, lim, boxes32, margin32,
                  test_all, idt, x_out, v)


@njit(parallel=True, cache=True, fastmath=FASTMATH)
def xsph_pass(x, xq, vq, n, start, count, local, nbr, mask, h, c_unit, is_last, level, level_h, boxes, friction,
              inv_dt, block,
              # outputs
              share, v_out, a):
    """One XSPH pass, eq. 6, for the first n particles: v_out_i = v_i + c_unit / h^3 sum_j w(q_ij) / rho_j
    (v_j - v_i) (:func:`engine.solvers.pbf_passes.xsph_pass` for one level). ``xq`` holds the positions
    (first three values of its rows), ``vq`` the rows (v, 1 / rho); ``share``'s rows (4 C, 4) hold the
    shares of the block's earlier clusters until their turn. With ``is_last`` the pass also does
    :func:`engine.solvers.pbf_passes.finish`'s work on v_out and ``a`` (``x`` (N, 3): the positions)."""
    xf = xq.reshape(-1)
    qf = vq.reshape(-1)
    sf = share.reshape(-1)
    nc = start.shape[0]
    inv_h = np.float32(1.0) / np.float32(h)
    k = np.float32(c_unit) * inv_h * inv_h * inv_h
    for b in prange((nc + block - 1) // block):
        c0, c1 = _block(b, block, nc)
        _zero_rows(share, c0, c1)
        for c in range(c0, c1):
            t0 = start[c]
            d = cluster_xsph(xf, qf, sf, nbr, mask, t0, t0 + local[c], t0 + count[c], c, inv_h)
            i = CLUSTER * c
            _viscous(i, d[0], d[1], d[2], n, k, vq, is_last, x, level, level_h, boxes, friction, inv_dt, v_out, a)
            _viscous(i + 1, d[3], d[4], d[5], n, k, vq, is_last, x, level, level_h, boxes, friction, inv_dt, v_out, a)
            _viscous(i + 2, d[6], d[7], d[8], n, k, vq, is_last, x, level, level_h, boxes, friction, inv_dt, v_out, a)
            _viscous(i + 3, d[9], d[10], d[11], n, k, vq, is_last, x, level, level_h, boxes, friction, inv_dt, v_out,
                     a)


@njit(inline="always", cache=True, fastmath=FASTMATH)
def _viscous(i, s0, s1, s2, n, k, vq, is_last, x, level, level_h, boxes, friction, inv_dt, v_out, a):
    """v_out_i = v_i + k (s0, s1, s2) (nothing past the n particles), and the end of the substep with
    ``is_last``."""
    if i >= n:
        return
    v_out[i, 0] = vq[i, 0] + k * s0
    v_out[i, 1] = vq[i, 1] + k * s1
    v_out[i, 2] = vq[i, 2] + k * s2
    if is_last:
        _finish_particle(i, x, level, level_h, boxes, friction, inv_dt, v_out, a)
