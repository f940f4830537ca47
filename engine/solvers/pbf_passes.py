"""The pair passes of Position-Based Fluids (:mod:`engine.solvers.pbf`): the density constraint
with its multipliers, the position correction, the XSPH pass and the end of a substep.

Each pass walks the half neighbour list of :class:`engine.core.neighbour_list.NeighbourList` (``half=B``):
one thread takes a block of consecutive particles in order, visits each pair inside the block
once and adds its share to both particles (W_ij = W_ji for the density and XSPH,
grad_j W_ji = -grad_i W_ij for the correction); pairs across blocks are listed from both sides.
No two threads write one particle, and the sums do not depend on the number of threads. Equation
numbers are those of Alduán, Tena & Otaduy 2015, "Efficient and Robust Position-Based Fluids for
VFX"; the solver's module docstring says what each pass computes and what bounds it.
"""

from __future__ import annotations

import math

import numpy as np
from numba import njit, prange

from ..core.compile import FASTMATH
from ..core.kernels import cubic_dshape32 as _dw32, cubic_shape32 as _w32, cubic_shape_table
from .pbf_lanes import (density_lanes, density_lanes8, kernel_lanes, kernel_lanes8, push_range, push_range_shared,
                        xsph_range, xsph_range_shared)
from ..collision.walls import clamp_point_into_boxes, near_box


#: Largest correction of one iteration, in units of h (see :func:`correct`).
MAX_MOVE = 0.25

#: Fixed-point unit of the kernel slopes -w'(q) / q that :func:`constraint` stores per listed pair for
#: :func:`correct` (which then needs no square root, division or spline of its own). The slope is
#: 3 - 2.25 q below q = 1 and 0.75 (2 - q)^2 / q above, in [0, 3]; float32 rounding near q = 0, where it is computed as
#: (0.75 (2 - q)^2 - 3 (1 - q)^2) / q, can take it a little outside, hence the room up to 3.5. A
#: uint16 (2 bytes per pair; float32 would take the engine past 250 bytes per particle at 1M) keeps it
#: within 2.7e-5, and a pair's push, proportional to q times the slope, within 5.4e-5 of the largest
#: push a pair can give (-w'(q) = 1 at q = 2/3): far below the density tolerance the iterations
#: work to. Pairs closer than 4e-7 h, whose slope could fall outside the range, push by less than
#: 2e-6 of that largest push whatever is stored.
SLOPE_UNIT = 3.5 / 65535.0

def kernel_of_slope() -> np.ndarray:
    """w(q) for every stored slope code of :data:`SLOPE_UNIT` (65,536 float32, 256 KB): the slope
    -w'(q) / q falls strictly from 3 at q = 0 to 0 at q = 2, so it names q. Below q = 1 the slope is
    3 - 2.25 q; above, 0.75 (2 - q)^2 / q, whose root in [1, 2] is q = ((3 + s) - sqrt((3 + s)^2 - 9)) /
    1.5. For :func:`xsph_pass`: the kernel values of the pairs at the positions the last
    constraint pass saw, without their distances. A code's rounding (half a unit, 2.7e-5) moves w by
    at most 4e-5 (|dw/ds| <= 1.5, at q = 2 - 0.01 where the slope is 3.75e-5) of w(0) = 1."""
    s = np.arange(65536, dtype=np.float64) * SLOPE_UNIT
    inner = (3.0 - np.minimum(s, 3.0)) / 2.25
    outer = ((3.0 + s) - np.sqrt(np.maximum((3.0 + s) ** 2 - 9.0, 0.0))) / 1.5
    return cubic_shape_table(np.where(s >= 0.75, inner, outer)).astype(np.float32)


#: Iterations whose moves the near-wall flags of a substep cover (the solver's boundary pass):
#: within them only flagged particles can feel or reach a wall.
FLAG_ITERATIONS = 4

@njit(inline="always", cache=True)
def _corner(boxes, b, c):
    """Corner c (0 lower, 1 upper) of box b as a tuple of floats. A slice ``boxes[b, 0]`` would be a
    new array view, whose reference count numba updates atomically on every particle: in a parallel
    loop that costs about 30 ns per particle."""
    return (boxes[b, c, 0], boxes[b, c, 1], boxes[b, c, 2])


@njit(inline="always", cache=True)
def _offset(xf, nbr, t, xi, yi, zi):
    """Neighbour j = nbr[t] of a particle at (xi, yi, zi): j, the start r = 4 j of its row in the
    flattened (4 N,) ``xf``, x_i - x_j and |x_i - x_j|^2.

    Unsigned, flattened indices: a signed one costs a negative-index test per value read, a 2-D one a
    multiplication by the run-time row stride (together about a third of a pass's instructions). The
    list position t comes from a signed range: it is read as unsigned too."""
    j = np.uintp(nbr[np.uintp(t)])
    r = j * np.uintp(4)
    dx = xi - xf[r]
    dy = yi - xf[r + np.uintp(1)]
    dz = zi - xf[r + np.uintp(2)]
    return j, r, dx, dy, dz, dx * dx + dy * dy + dz * dz


@njit(inline="always", cache=True)
def _pair_level(level, lh, lmass, j, hi_):
    """Neighbour j's level, 1 / h_ij with h_ij = (h_i + h_j) / 2 (so that W_ij = W_ji), and m_j / m_0."""
    lj = level[j]
    return lj, np.float32(2.0) / (hi_ + lh[lj]), lmass[lj]


@njit(inline="always", cache=True)
def _open_block(b, block, n, acc):
    """Particles i0:i1 of block b of the half list, with the first three columns of their rows of
    ``acc`` (the shares of the block's earlier particles, added during the walk) set to zero."""
    i0 = b * block
    i1 = min(n, i0 + block)
    for i in range(i0, i1):
        acc[i, 0] = np.float32(0.0)
        acc[i, 1] = np.float32(0.0)
        acc[i, 2] = np.float32(0.0)
    return i0, i1


@njit(inline="always", cache=True)
def _vec3(a, i):
    """The first three values of row i of ``a``."""
    return a[i, 0], a[i, 1], a[i, 2]


@njit(inline="always", cache=True)
def _row(xq, i):
    """Position and fourth value (lambda or 1 / rho) of particle i."""
    return xq[i, 0], xq[i, 1], xq[i, 2], xq[i, 3]


#: Pairs per step of the density and XSPH pair loops (:func:`engine.solvers.pbf_lanes.density_lanes`): 16
#: float32 lanes fill one AVX-512 register (two AVX2 ones).
LANES = 16

#: Particles whose kernel values :func:`xsph_pass` computes before their velocity sums: about 32 x
#: 16.5 pairs x 4 bytes stay in the L1 cache (particle by particle, each would wait for its own
#: values); the density pass, whose sums come out of the vector step, goes particle by particle.
STAGE_GROUP = 32


@njit(inline="always", cache=True)
def _density_range(xf, nbr, p0, m, xi, yi, zi, inv_h, h, inv_unit, bw, slope):
    """The sum of w(q) over the m list entries from p0 of a particle at (xi, yi, zi), their values in
    ``bw[:m]`` and their slope codes in ``slope`` (:data:`engine.solvers.pbf_lanes.density_lanes`): 16 entries a
    step while more than 8 are left, then one step of 8.

    16 lanes of float32 are two halves of the work of 8 where the vector unit is 256 bits wide (AVX-512
    on AMD Zen 4, or AVX2): lanes past the range cost as much as lanes in it, and a third of the lanes
    of 16-entry steps to the end of each range would be past it (about 15 entries a particle)."""
    acc = np.float32(0.0)
    c = 0
    while m - c > 8:
        acc += density_lanes(xf, nbr, p0 + c, m - c, xi, yi, zi, inv_h, h, inv_unit, bw, c, slope)
        c += LANES
    if m - c > 0:
        acc += density_lanes8(xf, nbr, p0 + c, m - c, xi, yi, zi, inv_h, h, inv_unit, bw, c, slope)
    return acc


@njit(inline="always", cache=True)
def _kernel_range(xf, nbr, p0, m, xi, yi, zi, inv_h, bw, at):
    """w(q) of the m list entries from p0 of a particle at (xi, yi, zi) into ``bw[at : at + m]``, in the
    steps of :func:`_density_range` (values past the range: 0, up to 7 of them)."""
    c = 0
    while m - c > 8:
        kernel_lanes(xf, nbr, p0 + c, m - c, xi, yi, zi, inv_h, bw, at + c)
        c += LANES
    if m - c > 0:
        kernel_lanes8(xf, nbr, p0 + c, m - c, xi, yi, zi, inv_h, bw, at + c)


@njit(inline="always", cache=True)
def _kernel_buffer(nbr_count, i0, i1, particles):
    """Kernel values of the pairs of ``particles`` particles of block i0:i1, one range after the other:
    room for that many times the block's longest range, plus one step of :data:`LANES`."""
    most = 0
    for i in range(i0, i1):
        most = max(most, np.int64(nbr_count[i]))
    return np.empty(particles * most + LANES, dtype=np.float32)


@njit(inline="always", cache=True)
def _velocity_row(qf, j, v0, v1, v2):
    """v_j - v_i and 1 / rho_j from the flattened (4 N,) rows of :func:`velocity_rows` (``j`` unsigned,
    see :func:`_offset`)."""
    r = j * np.uintp(4)
    return qf[r] - v0, qf[r + np.uintp(1)] - v1, qf[r + np.uintp(2)] - v2, qf[r + np.uintp(3)]


@njit(inline="always", cache=True)
def _xsph_pair(qf, af, j, w, shared, v0, v1, v2, inv_rho_i, a0, a1, a2):
    """One pair of the single-level XSPH sum with kernel value w: particle i's sums (a0, a1, a2) with
    w / rho_j (v_j - v_i) added, returned; with ``shared`` (a pair of i's block, visited once) the later
    particle j gets -w / rho_i (v_j - v_i) in its row of ``af``."""
    e0, e1, e2, inv_rho_j = _velocity_row(qf, j, v0, v1, v2)
    wi = w * inv_rho_j
    if shared:
        _add_share(af, j, -w * inv_rho_i, e0, e1, e2)
    return a0 + wi * e0, a1 + wi * e1, a2 + wi * e2


@njit(inline="always", cache=True)
def _add_share(af, j, w, e0, e1, e2):
    """Add w (e0, e1, e2) to row j of the flattened (3 N,) ``af`` (``j`` unsigned)."""
    r = j * np.uintp(3)
    af[r] += w * e0
    af[r + np.uintp(1)] += w * e1
    af[r + np.uintp(2)] += w * e2


@njit(inline="always", cache=True)
def _walk(nbr_start, nbr_count, nbr_local, i):
    """Particle i's half list (see :class:`engine.core.neighbour_list.NeighbourList`): its later neighbours of
    its own block are ``nbr[p0:mid]`` (a pair there is visited once, for both), the others
    ``nbr[mid:end]`` (visited for i only)."""
    p0 = nbr_start[i]
    return p0, p0 + np.int64(nbr_local[i]), p0 + np.int64(nbr_count[i])


@njit(parallel=True, cache=True, fastmath=FASTMATH)
def constraint(xq, level, nbr_start, nbr_count, nbr_local, nbr, lh, lmass, level_k, lam_max, uniform, rho_unit, rho0,
               beta, wall_free, block,
               # outputs
               rho, block_err, block_max, slope):
    """Density, constraint and multiplier of every particle: eq. 1 and eq. 4 with the clamp of eq. 7.

    rho_i = sum_j m_j W_ij + rho0 (1 - F_i); C_i = rho_i / rho0 - 1; lambda_i = min(-beta k C_i, f),
    written into ``xq[i, 3]`` (``xq`` (N, 4) float32: position and lambda, so that :func:`correct`
    reads a neighbour's four values from one 16-byte row).
    The neighbour list is a half list over blocks of ``block`` particles; one thread walks a block in
    order and adds W_ij to both particles of a pair of the block (``rho`` holds the partial sums until
    each particle's turn).
    Single precision: ``lh`` (smoothing lengths) and ``lmass`` (masses relative to level 0) per level,
    float32; ``rho_unit`` = sigma m_0 (so that m_j W_ij = rho_unit * lmass_j * w(q) / h^3); ``wall_free``
    is F_i of :func:`boundary_walls` (1 away from walls). ``block_err[b]`` / ``block_max[b]`` are the sum
    / largest of max(C_i, 0) over block b: a fixed partition, so the sums are the same whatever the
    number of threads. With one level the pass takes a particle's pairs 16 at a time
    (:func:`engine.solvers.pbf_lanes.density_lanes`: the neighbours' rows one 16-byte load each, the kernel
    and the slope -w'(q) / q of each pair, see :data:`SLOPE_UNIT`, stored for :func:`correct`), with no
    staged copy of the coordinates. A row's fourth
    value, the lambda this pass writes (other threads too, for their blocks), is loaded along with the
    position and never used.
    """
    n = xq.shape[0]
    xf = xq.reshape(-1)
    h0 = lh[0]
    inv_h0 = np.float32(1.0) / h0
    unit0 = np.float32(rho_unit) * inv_h0 * inv_h0 * inv_h0
    unit = np.float32(rho_unit)
    rho0_ = np.float32(rho0)
    zero = np.float32(0.0)
    inv_unit = np.float32(1.0 / SLOPE_UNIT)
    for b in prange(block_err.shape[0]):
        i0 = b * block
        i1 = min(n, i0 + block)
        for i in range(np.uintp(i0), np.uintp(i1)):  # unsigned: a signed index made this loop scatters
            rho[i] = zero
        if uniform:
            bw = _kernel_buffer(nbr_count, i0, i1, 1)
        s_err = 0.0
        m_err = 0.0
        for i in range(i0, i1):
            li = level[i]
            xi = xq[i, 0]
            yi = xq[i, 1]
            zi = xq[i, 2]
            p0, mid, end = _walk(nbr_start, nbr_count, nbr_local, i)
            if uniform:
                m = end - p0
                # w(0) = 1: the particle itself
                acc = np.float32(1.0) + rho[i] + _density_range(xf, nbr, p0, m, xi, yi, zi, inv_h0, h0, inv_unit, bw,
                                                                slope)
                for t in range(mid - p0):  # the later particles of i's block get their share
                    rho[np.uintp(nbr[np.uintp(p0 + t)])] += bw[np.uintp(t)]
                dens = unit0 * acc
            else:
                hi_ = lh[li]
                mi = lmass[li]
                acc = mi / (hi_ * hi_ * hi_) + rho[i]
                for t in range(p0, mid):
                    j, r, dx, dy, dz, r2 = _offset(xf, nbr, t, xi, yi, zi)
                    lj, inv_h, mj = _pair_level(level, lh, lmass, j, hi_)
                    w = _w32(math.sqrt(r2) * inv_h) * inv_h * inv_h * inv_h
                    acc += mj * w
                    rho[j] += mi * w
                for t in range(mid, end):
                    j, r, dx, dy, dz, r2 = _offset(xf, nbr, t, xi, yi, zi)
                    lj, inv_h, mj = _pair_level(level, lh, lmass, j, hi_)
                    acc += mj * _w32(math.sqrt(r2) * inv_h) * inv_h * inv_h * inv_h
                dens = unit * acc
            r = dens + rho0_ * (np.float32(1.0) - wall_free[i])
            rho[i] = r
            c = r / rho0_ - np.float32(1.0)
            lm = -np.float32(beta) * np.float32(level_k[li]) * c
            if lm > lam_max[li]:
                lm = np.float32(lam_max[li])
            xq[i, 3] = lm
            if c > 0.0:
                s_err += c
                if c > m_err:
                    m_err = c
        block_err[b] = s_err
        block_max[b] = m_err


@njit(inline="always", cache=True, fastmath=FASTMATH)
def move_particle(i, s0, s1, s2, n, sc, xq, slot, wall_grad, wall_factor, lim, boxes32, margin32, test_all, idt,
                  x_out, v):
    """Particle i's correction from its pair sums (s0, s1, s2) of eq. 5 (nothing past the n particles):
    times ``sc``, the wall push, the clamp to ``lim`` (the robustness clamp of :func:`correct`), the box
    containers; x_out_i and v_i. Shared by :func:`correct` and the cluster passes
    (:mod:`engine.solvers.pbf_cluster_passes`)."""
    if i >= n:
        return
    xi = xq[i, 0]
    yi = xq[i, 1]
    zi = xq[i, 2]
    lami = xq[i, 3]
    d0 = s0 * sc
    d1 = s1 * sc
    d2 = s2 * sc
    s = slot[i]
    if s >= 0 and lami < 0.0:
        wf = np.float32(wall_factor) * lami
        d0 += wf * wall_grad[s, 0]
        d1 += wf * wall_grad[s, 1]
        d2 += wf * wall_grad[s, 2]
    # the robustness clamp of pbf_passes.correct: one correction moves a particle at most max_move h
    dd = d0 * d0 + d1 * d1 + d2 * d2
    if dd > lim * lim:
        k = lim / math.sqrt(dd)
        d0 *= k
        d1 *= k
        d2 *= k
    n0 = xi + d0
    n1 = yi + d1
    n2 = zi + d2
    if s >= 0 or test_all:
        n0, n1, n2 = clamp_point_into_boxes(n0, n1, n2, boxes32, margin32)
    x_out[i, 0] = n0
    x_out[i, 1] = n1
    x_out[i, 2] = n2
    v[i, 0] += (n0 - xi) * idt
    v[i, 1] += (n1 - yi) * idt
    v[i, 2] += (n2 - zi) * idt


@njit(parallel=True, cache=True, fastmath=FASTMATH)
def correct(xq, level, nbr_start, nbr_count, nbr_local, nbr, lh, lmass, cohesion, uniform, scale, slot, wall_grad,
            wall_factor, max_move, boxes32, margin, test_all, inv_dt, block, slope,
            # outputs
            x_out, v):
    """Eq. 5 with the tensile term of eq. 7 and the wall push; x_out = x + dx, v += dx / dt.

    dx_i = 1/rho0 sum_j m_j (lambda_i + lambda_j + g_ij W_ij / W(h_ij)) grad W_ij
           + wall_factor min(lambda_i, 0) grad psi_walls,
    limited to ``max_move h_i`` in length, then projected into every box container x_i was near
    (no leak, even mid-iteration; :func:`engine.collision.walls.clamp_point_into_boxes`); with ``test_all``
    False only particles with ``slot`` >= 0 are tested. ``xq`` (N, 4) float32 holds positions and
    lambda (:func:`constraint`); ``x_out`` (N, 4) receives the positions (its fourth column is left
    alone). A pair of one block of the half list is visited once: the pair term is antisymmetric
    (grad_j W_ji = -grad_i W_ij), so the later particle gets its share with the opposite sign, kept in
    ``x_out`` until its turn. ``scale`` = sigma m_0 / rho0; ``slot[i]`` >= 0 indexes ``wall_grad`` for
    particles near a wall (:func:`boundary_walls`).
    """
    n = xq.shape[0]
    xf = xq.reshape(-1)
    of = x_out.reshape(-1)
    inv_h0 = np.float32(1.0) / lh[0]
    slope_scale = np.float32(-SLOPE_UNIT) * inv_h0 * inv_h0 * inv_h0 * inv_h0 * inv_h0
    inv_w_dq = np.float32(4.0)  # 1 / w(1): W(dq) of eq. 7 with dq = h = the rest spacing (shape only)
    tiny = np.float32(1e-30)
    sc = np.float32(scale)
    idt = np.float32(inv_dt)
    margin32 = np.float32(margin)
    for b in prange((n + block - 1) // block):
        i0, i1 = _open_block(b, block, n, x_out)
        for i in range(i0, i1):
            li = level[i]
            hi_ = lh[li]
            xi, yi, zi, lami = _row(xq, i)
            gi = cohesion[li] * inv_w_dq
            d0, d1, d2 = _vec3(x_out, i)  # the shares of the block's earlier particles
            p0, mid, end = _walk(nbr_start, nbr_count, nbr_local, i)
            if uniform and gi == 0.0:
                # Single level, no cohesion: the pair term of eq. 5 from the slope the constraint pass
                # stored, (lambda_i + lambda_j) (-w'(q) / q) (x_i - x_j) in units of SLOPE_UNIT (a pair
                # at r = 0 gets no push: x_i - x_j = 0). The pairs of i's block (i's share, and j's
                # with the opposite sign), then the others.
                a0, a1, a2 = push_range_shared(xf, of, nbr, slope, p0, mid, xi, yi, zi, lami)
                b0, b1, b2 = push_range(xf, of, nbr, slope, mid, end, xi, yi, zi, lami)
                # grad W = sigma / h^4 w'(q) (x_i - x_j) / r = -sigma / h^5 (-w'(q) / q) (x_i - x_j)
                d0 = (d0 + a0 + b0) * slope_scale
                d1 = (d1 + a1 + b1) * slope_scale
                d2 = (d2 + a2 + b2) * slope_scale
            else:
                mi = lmass[li]
                for t in range(p0, end):
                    j, r, dx, dy, dz, r2 = _offset(xf, nbr, t, xi, yi, zi)
                    lj, inv_h, mj = _pair_level(level, lh, lmass, j, hi_)
                    r2 = max(r2, tiny)
                    ir = np.float32(1.0) / math.sqrt(r2)
                    q = r2 * ir * inv_h
                    coef = lami + xf[r + np.uintp(3)] + np.float32(0.5) * (gi + cohesion[lj] * inv_w_dq) * _w32(q)
                    ih2 = inv_h * inv_h
                    g = coef * _dw32(q) * ir * ih2 * ih2
                    d0 += mj * g * dx
                    d1 += mj * g * dy
                    d2 += mj * g * dz
                    if t < mid:
                        of[r] -= mi * g * dx
                        of[r + np.uintp(1)] -= mi * g * dy
                        of[r + np.uintp(2)] -= mi * g * dz
            # Robustness clamp: one correction moves a particle at most max_move h. It only acts on
            # pathological neighbourhoods (two particles nearly on top of each other after a violent
            # impact), where the linearised constraint asks for a jump of several h. Only particles
            # flagged near a wall (slot >= 0) can reach one in the first FLAG_ITERATIONS iterations (see
            # PBFSolver._boundary); later iterations test every particle. boxes32: the box corners rounded
            # to float32, as the float64 clamp's result was when stored.
            move_particle(i, d0, d1, d2, n, sc, xq, slot, wall_grad, wall_factor, np.float32(max_move) * hi_,
                          boxes32, margin32, test_all, idt, x_out, v)


@njit(parallel=True, cache=True, fastmath=FASTMATH)
def xsph_pass(x, xq, vq, level, nbr_start, nbr_count, nbr_local, nbr, lh, lmass, uniform, c_unit,
              is_last, level_h, boxes, friction, inv_dt, block, from_slopes, slope, w_of_slope,
              # outputs
              v_out, a):
    """One XSPH pass, eq. 6: v_out_i = v_i + c sum_j m_j / rho_j (v_j - v_i) W_ij.

    ``x`` (N, 3) holds the positions (for the wall friction of ``is_last``) and so do the first three
    columns of ``xq`` (N, 4) float32, for the kernel; ``vq`` (N, 4) float32 the
    velocities and 1 / rho (a product per pair instead of a division, read with the velocity from one
    row: :func:`velocity_rows`); ``c_unit`` = c sigma m_0 (the pass's coefficient times the kernel and
    mass constants). A pair of one block of the half list is visited once; the later
    particle's share, m_i / rho_i (v_i - v_j) W_ij, waits in ``v_out`` until its turn. With ``is_last``
    the pass also does :func:`finish`'s work on v_out and ``a`` (the same particle's own values: one
    pass over the particles fewer). With one level the kernel values of a group of
    :data:`STAGE_GROUP` particles' pairs are computed first, 16 at a time
    (:func:`engine.solvers.pbf_lanes.kernel_lanes`), then the velocity sums read them pair by pair.

    With ``from_slopes`` (one level, and the last pass over the pairs was :func:`constraint` at these
    positions: the iterations stopped on the tolerance) a pair's kernel value is read from the slope
    code that pass stored in ``slope``, through ``w_of_slope`` (:func:`kernel_of_slope`): no position
    is read, no distance or spline computed. The positions in ``xq`` are then not needed: its rows hold the
    later particles' shares instead (``xq`` is overwritten), so that a neighbour's velocity row and
    its share are each one 16-byte access (:func:`engine.solvers.pbf_lanes.xsph_range_shared`; in the
    three-float rows of ``v_out`` a 16-byte update overlaps the next row and stalls the next read of
    it: slower than scalar code). One kernel for both ways, so that a bake compiles it once.
    """
    n = xq.shape[0]
    xf = xq.reshape(-1)
    qf = vq.reshape(-1)
    af = v_out.reshape(-1)
    inv_h0 = np.float32(1.0) / lh[0]
    cu = np.float32(c_unit)
    for b in prange((n + block - 1) // block):
        i0, i1 = _open_block(b, block, n, xq if uniform and from_slopes else v_out)
        staged = uniform and not from_slopes
        if staged:
            bw = _kernel_buffer(nbr_count, i0, i1, STAGE_GROUP)
        for g0 in range(i0, i1, STAGE_GROUP):
            g1 = min(i1, g0 + STAGE_GROUP)
            if staged:
                # the kernel values of every pair of the group first, 16 at a time
                o = 0
                for i in range(g0, g1):
                    xi, yi, zi = _vec3(xq, i)
                    p0 = nbr_start[i]
                    m = np.int64(nbr_count[i])
                    # values past the range are 0, overwritten by the next particle's
                    _kernel_range(xf, nbr, p0, m, xi, yi, zi, inv_h0, bw, o)
                    o += m
            o = 0
            for i in range(g0, g1):
                li = level[i]
                hi_ = lh[li]
                v0, v1, v2, inv_rho_i = _row(vq, i)
                p0, mid, end = _walk(nbr_start, nbr_count, nbr_local, i)
                if uniform and from_slopes:
                    # the shares of the block's earlier particles wait in the rows of xq
                    a0, a1, a2 = _vec3(xq, i)
                    s0, s1, s2 = xsph_range_shared(qf, xf, nbr, slope, w_of_slope, p0, mid, v0, v1, v2, inv_rho_i)
                    u0, u1, u2 = xsph_range(qf, xf, nbr, slope, w_of_slope, mid, end, v0, v1, v2, inv_rho_i)
                    a0 += s0 + u0
                    a1 += s1 + u1
                    a2 += s2 + u2
                    k = cu * inv_h0 * inv_h0 * inv_h0
                elif uniform:
                    a0, a1, a2 = _vec3(v_out, i)  # the shares of the block's earlier particles
                    for t in range(p0, end):
                        j = np.uintp(nbr[np.uintp(t)])
                        w = bw[np.uintp(o + t - p0)]
                        a0, a1, a2 = _xsph_pair(qf, af, j, w, t < mid, v0, v1, v2, inv_rho_i, a0, a1, a2)
                    o += end - p0
                    k = cu * inv_h0 * inv_h0 * inv_h0
                else:
                    xi, yi, zi = _vec3(xq, i)
                    a0, a1, a2 = _vec3(v_out, i)
                    mi = lmass[li]
                    for t in range(p0, end):
                        j, r, dx, dy, dz, r2 = _offset(xf, nbr, t, xi, yi, zi)
                        lj, inv_h, mj = _pair_level(level, lh, lmass, j, hi_)
                        w = _w32(math.sqrt(r2) * inv_h) * inv_h * inv_h * inv_h
                        e0, e1, e2, inv_rho_j = _velocity_row(qf, j, v0, v1, v2)
                        wi = mj * w * inv_rho_j
                        a0 += wi * e0
                        a1 += wi * e1
                        a2 += wi * e2
                        if t < mid:
                            _add_share(af, j, -mi * w * inv_rho_i, e0, e1, e2)
                    k = cu
                v_out[i, 0] = v0 + k * a0
                v_out[i, 1] = v1 + k * a1
                v_out[i, 2] = v2 + k * a2
                if is_last:
                    _finish_particle(i, x, level, level_h, boxes, friction, inv_dt, v_out, a)


@njit(parallel=True, cache=True)
def velocity_rows(v, rho,
                  # outputs
                  vq):
    """vq[i] = (v_i, 1 / rho_i): the rows :func:`xsph_pass` reads."""
    for i in prange(v.shape[0]):
        vq[i, 0] = v[i, 0]
        vq[i, 1] = v[i, 1]
        vq[i, 2] = v[i, 2]
        vq[i, 3] = np.float32(1.0) / rho[i]


@njit(cache=True)
def copy_xyz(src,
             # outputs
             dst):
    """dst[i, :3] = src[i, :3] for every row: positions into and out of the (N, 4) rows of the
    iterations (numpy copies a 3-of-4-column slice element by element, a tenth as fast). Serial on purpose: a parallel
    region costs more than the copy when another program holds a core (each region then waits for a
    time slice)."""
    for i in range(src.shape[0]):
        dst[i, 0] = src[i, 0]
        dst[i, 1] = src[i, 1]
        dst[i, 2] = src[i, 2]


@njit(parallel=True, cache=True, fastmath=FASTMATH)
def finish(x, level, level_h, boxes, friction, inv_dt,
           # outputs
           v, a):
    """Wall friction for particles within h/4 of a box wall they were projected into; a = (v - a) / dt.

    ``friction`` holds one value per box. On entry ``a`` holds the velocity at the start of the
    substep (see :func:`predict`).
    """
    for i in prange(x.shape[0]):
        _finish_particle(i, x, level, level_h, boxes, friction, inv_dt, v, a)


@njit(inline="always", cache=True)
def _finish_particle(i, x, level, level_h, boxes, friction, inv_dt, v, a):
    """:func:`finish` for particle i."""
    contact = 0.25 * level_h[level[i]]
    for b in range(boxes.shape[0]):
        # per box, by index: ``friction > 0.0`` on the whole array would build a temporary
        # boolean array for every particle (it did: 50 ns per particle)
        if friction[b] <= 0.0:
            continue
        lo = _corner(boxes, b, 0)
        hi = _corner(boxes, b, 1)
        if not near_box(x[i, 0], x[i, 1], x[i, 2], lo, hi, contact):
            continue
        for k in range(3):
            if x[i, k] - lo[k] < contact or hi[k] - x[i, k] < contact:
                for t in range(3):
                    if t != k:
                        v[i, t] *= 1.0 - friction[b]
    for k in range(3):
        a[i, k] = (v[i, k] - a[i, k]) * inv_dt


# ----------------------------------------------------------------------------------------------
