"""Particle kinds and markers of the hybrid (Suárez & Susín 2006, "Mesh-particle model for fluid
animation", §4.2 and Fig. 3): each particle's kind from its height, the passes over the particles
before and after the SPH sums (eq. 10 and 11: the grid's velocity for MIXA, MIXB and markers, the
leap-frog kicks, the drift, pressure and density from the grid), the markers' catch-up, and the
free surface the automatic interface follows.

One pass before and one after the SPH sums: each parallel region costs a thread wake-up, which on a
loaded machine outweighs the work of a light per-particle loop.
"""

from __future__ import annotations

import math

import numpy as np
from numba import njit, prange

from . import mac_sampling
from ...collision.walls import clamp_into_boxes
from ..sph import tait_density_ratio
from .model import CHUNK, FASTMATH, MAC, MIXA, MIXB, SPH, TOP_PARTS


@njit(parallel=True, cache=True, fastmath=FASTMATH)
def classify(x, bands, frame,
             # outputs
             kind):
    """Kind of every particle from its height (§4.2, Fig. 3): rows below ``bands.n_sub`` by the bands
    of :class:`Bands` (outside the grid's horizontal extent or below it, :class:`GridFrame`: SPH); the
    others are MAC."""
    for n in prange(x.shape[0]):
        kind[n] = _kind_of(x[n, 0], x[n, 1], x[n, 2], n, bands, frame)


@njit(parallel=True, cache=True)
def column_tops(x, ox, oy, inv, ni, nj,
                # outputs
                top):
    """Highest particle z in every grid column (i, j), -inf where none: :data:`TOP_PARTS` parts of
    the particles scanned in parallel into their own tops, then the largest of those."""
    n = x.shape[0]
    size = (n + TOP_PARTS - 1) // TOP_PARTS
    part = np.full((TOP_PARTS, ni, nj), -np.inf)
    for b in prange(TOP_PARTS):
        for t in range(b * size, min(n, (b + 1) * size)):
            i = int(math.floor((x[t, 0] - ox) * inv))
            j = int(math.floor((x[t, 1] - oy) * inv))
            if 0 <= i < ni and 0 <= j < nj and x[t, 2] > part[b, i, j]:
                part[b, i, j] = x[t, 2]
    for i in range(ni):
        for j in range(nj):
            m = -np.inf
            for b in range(TOP_PARTS):
                m = max(m, part[b, i, j])
            top[i, j] = m


@njit(inline="always", cache=True)
def _kind_of(x0, x1, z, n, bands, frame):
    n_sub, l, h = bands
    lo0, lo1, lo2 = frame.ox, frame.oy, frame.oz
    hi0, hi1 = frame.hi0, frame.hi1
    if n >= n_sub:
        return MAC
    if x0 < lo0 or x0 > hi0 or x1 < lo1 or x1 > hi1 or z >= l or z < lo2:
        return SPH
    if z >= l - 2.0 * h:
        return MIXA
    if z >= l - 4.0 * h:
        return MIXB
    return MAC


@njit(parallel=True, cache=True, fastmath=FASTMATH)
def advance(x, v, a, x_ref, bands, frame, dt, use_grid, half, new, walls,
            # outputs
            kind, disp):
    """Per particle, in the order of §4.2 of the paper: its kind from its height (:func:`classify`); with
    the grid, the MAC part of MIXA velocities, v = beta u_MAC^(n+1) + (1 - beta) v, v holding the SPH
    part (eq. 11), and for MIXB and MAC markers the half-step velocity u^(n+1/2) = u^n + a dt / 2 with
    a = (u^(n+1) - u^n) / dt sampled at the particle (eq. 10; MIXB carry it into the SPH sums); the
    leap-frog half kick of SPH and MIXA particles (eq. 8); the drift, particles that crossed a box
    wall put back on it (normal velocity reversed and scaled by the bounce, tangential by 1 -
    friction). ``disp[c]`` receives the largest squared move from ``x_ref`` in chunk c of :data:`CHUNK`
    particles (for the neighbour list). Only the first ``n_sub`` rows: the markers after them move
    in :func:`move_markers`. ``half`` and ``new`` are the grid's u^(n+1/2) and u^(n+1) (:class:`Faces`),
    ``walls`` the box containers (:class:`BoxWalls`)."""
    n_sub, l, h = bands
    ox, oy, oz, inv = frame.ox, frame.oy, frame.oz, frame.inv
    uh, vh, wh = half
    u1, v1, w1 = new
    boxes, margin, friction, bounce = walls
    n_all = n_sub
    chunks = (n_all + CHUNK - 1) // CHUNK
    half = (chunks + 1) // 2
    for t in prange(chunks):
        # each thread's contiguous share of t takes every other chunk: the MIXA and MIXB rows, which
        # sample the grid, are not spread evenly along the Morton order (seen 8,200 against 3,800
        # in the two halves of the blocks scene)
        c = 2 * t if t < half else 2 * (t - half) + 1
        m = 0.0
        for n in range(c * CHUNK, min(n_all, (c + 1) * CHUNK)):
            pz = x[n, 2]
            kd = _kind_of(x[n, 0], x[n, 1], pz, n, bands, frame)
            kind[n] = kd
            if use_grid and kd == MAC:
                # markers only drift with u^(n+1/2) (one sample of the averaged face field); their
                # acceleration is needed only once they are MIXB, whose branch below computes it
                c0, c1, c2 = mac_sampling.velocity_at(uh, vh, wh, ox, oy, oz, inv, x[n, 0], x[n, 1], pz)
                v[n, 0] = c0
                v[n, 1] = c1
                v[n, 2] = c2
            elif use_grid and kd == MIXA:
                b0, b1, b2 = mac_sampling.velocity_at(u1, v1, w1, ox, oy, oz, inv, x[n, 0], x[n, 1], pz)
                beta = min(max((l - pz) / (2.0 * h), 0.0), 1.0)
                v[n, 0] = beta * b0 + (1.0 - beta) * v[n, 0]
                v[n, 1] = beta * b1 + (1.0 - beta) * v[n, 1]
                v[n, 2] = beta * b2 + (1.0 - beta) * v[n, 2]
            elif use_grid and kd == MIXB:
                # u^(n+1/2) from the averaged face field: trilinear sampling is linear, so this
                # equals (u^n(x) + u^(n+1)(x)) / 2 with one sample instead of two; both fields
                # share the interpolation weights
                b0, b1, b2, c0, c1, c2 = mac_sampling.velocity_pair_at(u1, v1, w1, uh, vh, wh, ox, oy, oz, inv, x[n, 0],
                                                              x[n, 1], pz)
                a[n, 0] = 2.0 * (b0 - c0) / dt
                a[n, 1] = 2.0 * (b1 - c1) / dt
                a[n, 2] = 2.0 * (b2 - c2) / dt
                v[n, 0] = c0
                v[n, 1] = c1
                v[n, 2] = c2
            if kd == SPH or kd == MIXA:
                for k in range(3):
                    v[n, k] += a[n, k] * (0.5 * dt)
            for k in range(3):
                x[n, k] += v[n, k] * dt
            clamp_into_boxes(x, v, n, boxes, margin, friction, bounce)
            d0 = x[n, 0] - x_ref[n, 0]
            d1 = x[n, 1] - x_ref[n, 1]
            d2 = x[n, 2] - x_ref[n, 2]
            m = max(m, d0 * d0 + d1 * d1 + d2 * d2)
        disp[c] = m


@njit(parallel=True, cache=True, fastmath=FASTMATH)
def finish(x, a, kind, bands, rho0, p0, dt, use_grid, frame, pg,
           # outputs
           v, p, rho):
    """After the SPH sums: the closing half kick of SPH and MIXA particles (eq. 8); then (§4.2)
    MIXB and MAC markers take p = rho0 P_grid at their new position, MIXA p = beta rho0 P_grid
    + (1 - beta) p_SPH (eq. 11's blend), and the density follows from the Tait equation inverted,
    rho = rho0 (1 + p / P0)^(1/7) (eq. 6). Markers keep the velocity they moved with, u^(n+1/2)
    (the next substep sets it again from the grid before anything reads it). Rows from ``n_sub`` on
    are left to :func:`move_markers`. Chunks are shared between the threads as in :func:`advance`."""
    n_sub, l, h = bands
    ox, oy, oz, inv = frame.ox, frame.oy, frame.oz, frame.inv
    chunks = (n_sub + CHUNK - 1) // CHUNK
    half = (chunks + 1) // 2
    for t in prange(chunks):
        c = 2 * t if t < half else 2 * (t - half) + 1
        for n in range(c * CHUNK, min(n_sub, (c + 1) * CHUNK)):
            kd = kind[n]
            if kd == SPH or kd == MIXA:
                for k in range(3):
                    v[n, k] += a[n, k] * (0.5 * dt)
            if kd == SPH or not use_grid:
                continue
            px = x[n, 0]
            py = x[n, 1]
            pz = x[n, 2]
            pgrid = rho0 * mac_sampling.pressure_at(pg, ox, oy, oz, inv, px, py, pz)
            if kd == MIXA:
                beta = min(max((l - pz) / (2.0 * h), 0.0), 1.0)
                pn = beta * pgrid + (1.0 - beta) * p[n]
            else:
                pn = pgrid
            if pn < 0.0:
                pn = 0.0
            p[n] = pn
            rho[n] = rho0 * tait_density_ratio(pn / p0)


@njit(parallel=True, cache=True, fastmath=FASTMATH)
def move_markers(x, x_ref, n_sub, dt, pressure, frame, moved, pg, rho0, p0, walls,
                 # outputs
                 v, p, rho, disp):
    """The markers outside the neighbour search (rows ``n_sub`` on) catch up the time ``dt`` they
    waited (one or more substeps; none when 0): each moves by the displacement field (``moved``,
    :class:`Faces`: the sum of dt u^(n+1/2) over those substeps, eq. 10) sampled at the midpoint of
    its move (x + m(x + m(x) / 2), second order in the move, where a sample at the start spirals
    outwards in a vortex), takes the mean velocity of that move, and is put back into the boxes like every particle;
    with
    ``pressure`` they take p = rho0 P_grid and rho from the equation of state inverted (eq. 6), as
    MIXB markers do in :func:`finish`. ``disp[c]`` receives the largest squared move from ``x_ref``
    in chunk c of 4096 markers and ``disp[chunks + c]`` their largest squared speed."""
    ox, oy, oz, inv = frame.ox, frame.oy, frame.oz, frame.inv
    mu, mv, mw = moved
    boxes, margin, friction, bounce = walls
    n_all = x.shape[0]
    count = n_all - n_sub
    chunks = (count + 4095) // 4096
    inv_dt = 1.0 / dt if dt > 0.0 else 0.0
    for c in prange(chunks):
        far = 0.0
        fast = 0.0
        for n in range(n_sub + c * 4096, min(n_all, n_sub + (c + 1) * 4096)):
            if dt > 0.0:
                m0, m1, m2 = mac_sampling.velocity_at(mu, mv, mw, ox, oy, oz, inv, x[n, 0], x[n, 1], x[n, 2])
                m0, m1, m2 = mac_sampling.velocity_at(mu, mv, mw, ox, oy, oz, inv, x[n, 0] + 0.5 * m0, x[n,
                                                                                                         1] + 0.5 * m1,
                                             x[n, 2] + 0.5 * m2)
                v[n, 0] = m0 * inv_dt
                v[n, 1] = m1 * inv_dt
                v[n, 2] = m2 * inv_dt
                fast = max(fast, (m0 * m0 + m1 * m1 + m2 * m2) * inv_dt * inv_dt)
                x[n, 0] += m0
                x[n, 1] += m1
                x[n, 2] += m2
                clamp_into_boxes(x, v, n, boxes, margin, friction, bounce)
            if pressure:
                pn = rho0 * mac_sampling.pressure_at(pg, ox, oy, oz, inv, x[n, 0], x[n, 1], x[n, 2])
                if pn < 0.0:
                    pn = 0.0
                p[n] = pn
                rho[n] = rho0 * tait_density_ratio(pn / p0)
            d0 = x[n, 0] - x_ref[n, 0]
            d1 = x[n, 1] - x_ref[n, 1]
            d2 = x[n, 2] - x_ref[n, 2]
            far = max(far, d0 * d0 + d1 * d1 + d2 * d2)
        disp[c] = far
        disp[chunks + c] = fast


@njit(cache=True)
def grid_pressure(x, rows, frame, pg, rho0, p0,
                  # outputs
                  p, rho):
    """p = rho0 P_grid and rho from the equation of state inverted (eq. 6) at the particles ``rows``
    (markers that join the neighbour search at a rebuild, as MIXB particles or markers of its skin:
    the SPH sums may read them before :func:`finish` sets them)."""
    ox, oy, oz, inv = frame.ox, frame.oy, frame.oz, frame.inv
    for t in range(rows.shape[0]):
        n = rows[t]
        pn = rho0 * mac_sampling.pressure_at(pg, ox, oy, oz, inv, x[n, 0], x[n, 1], x[n, 2])
        if pn < 0.0:
            pn = 0.0
        p[n] = pn
        rho[n] = rho0 * tait_density_ratio(pn / p0)


@njit(cache=True)
def sph_rows(kind, p, rho, n_sub,
             # outputs
             rows, pr):
    """The rows of SPH and MIXA particles among the first ``n_sub`` (into ``rows``; returns how
    many), and pr = p / rho^2 of the others, which carry the grid's p and rho into the SPH sums (a
    serial pass: a few microseconds, less than the temporaries of the numpy equivalent)."""
    count = 0
    for n in range(n_sub):
        if kind[n] <= MIXA:
            rows[count] = n
            count += 1
        else:
            r = rho[n]
            pr[n] = p[n] / (r * r)
    return count


def percentile(values: np.ndarray, q: float) -> float:
    """``np.percentile(values, q)`` (its default, linear method) from a partial sort: a tenth of the
    time on the few hundred column heights of the automatic interface."""
    pos = q / 100.0 * (values.size - 1)
    lo = int(math.floor(pos))
    hi = min(lo + 1, values.size - 1)
    part = np.partition(values, [lo, hi])
    a, b = float(part[lo]), float(part[hi])
    t = pos - lo
    # numpy's lerp: from the lower value below t = 0.5, from the upper one above (same rounding)
    return a + (b - a) * t if t < 0.5 else b - (b - a) * (1.0 - t)
