"""Numba kernels of the whitewater model (Ihmsen, Akinci, Gissler & Teschner 2012).

Every kernel is a plain function over arrays; outputs come last after a ``# outputs`` comment.
Liquid arrays are in the order of a :class:`engine.core.cell_grid.CellGrid` built with cell size R (the
interaction radius, two particle spacings), so the liquid particles of a cell are contiguous; the
liquid's passes read one :class:`engine.core.neighbour_list.NeighbourList` of it, and points that are not liquid
particles find their cells with :func:`engine.core.cell_grid.find_cell`.

Random numbers are counter-based: a SplitMix64 hash of (seed, frame, liquid particle id, sample,
stream) gives each draw, so results do not depend on thread count or scheduling and a resumed
stage draws exactly what an uninterrupted one draws.
"""

from __future__ import annotations

import math

import numpy as np
from numba import njit, prange

from ..core.cell_grid import around_cell, cell_coords, find_cell

SPRAY, FOAM, BUBBLE = 0, 1, 2

#: Surface detection: a particle is at the surface when the kernel-weighted mean offset of its
#: neighbours exceeds this fraction of R (about 0.3 at a flat surface, below 0.05 inside a resting
#: liquid). Only surface particles get a normal (interior normals would be noise, and noise makes
#: curvature).
SURFACE_OFFSET = 0.15

#: Eq. 7 of the paper: a particle is a wave-crest candidate when its velocity direction is within
#: acos(0.6) = 53 degrees of its surface normal.
CREST_ALIGNMENT = 0.6


# -- counter-based random numbers -------------------------------------------------------------------

@njit(inline="always", cache=True)
def _mix64(z):
    """SplitMix64 finaliser (Steele, Lea & Flood 2014): a bijective avalanche of 64 bits."""
    z = (z ^ (z >> np.uint64(30))) * np.uint64(0xBF58476D1CE4E5B9)
    z = (z ^ (z >> np.uint64(27))) * np.uint64(0x94D049BB133111EB)
    return z ^ (z >> np.uint64(31))


@njit(inline="always", cache=True)
def uniform(seed, frame, pid, sample, stream):
    """A uniform number in [0, 1) fixed by its five integer arguments."""
    z = _mix64(np.uint64(seed) + np.uint64(0x9E3779B97F4A7C15))
    z = _mix64(z ^ (np.uint64(frame & 0xFFFFFFFF) * np.uint64(0xD1B54A32D192ED03)))
    z = _mix64(z ^ (np.uint64(pid & 0xFFFFFFFF) * np.uint64(0xABC98388FB8FAC03)))
    z = _mix64(z ^ (np.uint64(sample & 0xFFFFFFFF) * np.uint64(0x8CB92BA72F3D8DD7)) ^ np.uint64(stream))
    return np.float64(z >> np.uint64(11)) * (1.0 / 9007199254740992.0)


@njit(parallel=True, cache=True)
def fill_uniform(seed, frame, out):
    """out[i] = a uniform number fixed by (seed, frame, i), for draws not tied to a liquid particle."""
    for i in prange(out.shape[0]):
        out[i] = uniform(seed, frame, i, 0, 6)


@njit(inline="always", cache=True)
def clamp_potential(value, tmin, tmax):
    """Eq. 1: Phi(I, tau_min, tau_max) = (min(I, tau_max) - min(I, tau_min)) / (tau_max - tau_min), in [0, 1]."""
    return (min(value, tmax) - min(value, tmin)) / (tmax - tmin)


@njit(inline="always", cache=True)
def _weight(r, R):
    """Eq. 3: W(x_ij, h) = 1 - |x_ij| / h for |x_ij| <= h, else 0 (h here is R)."""
    return 1.0 - r / R if r < R else 0.0


# -- potentials of the liquid particles -------------------------------------------------------------
# Each pass reads the liquid neighbours within R from one :class:`engine.core.neighbour_list.NeighbourList` built
# per frame (``start``, ``count``, ``nbr``: the neighbours j != i of i are nbr[start[i]:start[i]+count[i]]).

@njit(inline="always", cache=True)
def _pair(x, i, j, R):
    """Offset x_i - x_j (three components), its length r and the weight W(r) of Eq. 3."""
    dx = x[i, 0] - x[j, 0]
    dy = x[i, 1] - x[j, 1]
    dz = x[i, 2] - x[j, 2]
    r = math.sqrt(dx * dx + dy * dy + dz * dz)
    return dx, dy, dz, r, _weight(r, R)


@njit(parallel=True, cache=True)
def surface_normals(x, start, count, nbr, R,
                    # outputs
                    normal, n_nbr):
    """Unit surface normal of surface particles (0 inside the liquid) and liquid neighbours within R.

    The normal is the direction of sum_j (x_i - x_j) W_ij: away from the neighbours' weighted centre.
    """
    for i in prange(x.shape[0]):
        sx = sy = sz = 0.0
        wsum = 0.0
        n = np.int64(count[i])
        for m in range(start[i], start[i] + n):
            dx, dy, dz, _r, w = _pair(x, i, nbr[m], R)
            sx += dx * w
            sy += dy * w
            sz += dz * w
            wsum += w
        n_nbr[i] = n
        norm = math.sqrt(sx * sx + sy * sy + sz * sz)
        if n == 0 or norm > SURFACE_OFFSET * R * wsum:
            # a lone particle (n == 0) has no direction; give it none
            if norm > 0.0:
                normal[i, 0] = sx / norm
                normal[i, 1] = sy / norm
                normal[i, 2] = sz / norm
                continue
        normal[i, 0] = 0.0
        normal[i, 1] = 0.0
        normal[i, 2] = 0.0


@njit(parallel=True, cache=True)
def smoothed_velocity(x, v, start, count, nbr, R,
                      # outputs
                      out):
    """The velocity field averaged with W over R around each particle: sum_j v_j W_ij / sum_j W_ij (j = i
    included, W_ii = 1). Position-based solvers leave each particle's velocity with noise at the scale
    of the spacing, which Eq. 2 would read as colliding liquid; the average keeps motions of the scale of R."""
    for i in prange(x.shape[0]):
        s0 = np.float64(v[i, 0])
        s1 = np.float64(v[i, 1])
        s2 = np.float64(v[i, 2])
        wsum = 1.0
        for m in range(start[i], start[i] + np.int64(count[i])):
            j = nbr[m]
            _dx, _dy, _dz, _r, w = _pair(x, i, j, R)
            wsum += w
            s0 += w * v[j, 0]
            s1 += w * v[j, 1]
            s2 += w * v[j, 2]
        out[i, 0] = s0 / wsum
        out[i, 1] = s1 / wsum
        out[i, 2] = s2 / wsum


@njit(parallel=True, cache=True)
def potentials(x, v, normal, start, count, nbr, R,
               # outputs
               trapped_air, wave_crest, energy):
    """Raw (unclamped) potentials of every liquid particle.

    trapped_air : Eq. 2, v_i^diff = sum_j |v_ij| (1 - v^_ij . x^_ij) W_ij (m/s).
    wave_crest  : Eqs. 4-7, kappa_i delta_i^vn with kappa_i = sum_j (1 - n^_i . n^_j) W_ij over the
                  surface neighbours j behind the particle (x^_ji . n^_i < 0, convex crests only) and
                  delta^vn = 1 where v^_i . n^_i >= 0.6, else 0 (dimensionless).
    energy      : kinetic energy per unit mass, |v_i|^2 / 2 (J/kg); the paper uses m |v|^2 / 2, which
                  ties the thresholds to the particle mass (and so to the spacing).
    """
    for i in prange(x.shape[0]):
        vi0, vi1, vi2 = v[i, 0], v[i, 1], v[i, 2]
        ni0, ni1, ni2 = normal[i, 0], normal[i, 1], normal[i, 2]
        at_surface = ni0 != 0.0 or ni1 != 0.0 or ni2 != 0.0
        ta = 0.0
        kappa = 0.0
        for m in range(start[i], start[i] + np.int64(count[i])):
            j = nbr[m]
            dx, dy, dz, r, w = _pair(x, i, j, R)
            if r == 0.0:
                continue  # two particles on one spot: no direction between them
            ux = vi0 - v[j, 0]
            uy = vi1 - v[j, 1]
            uz = vi2 - v[j, 2]
            u = math.sqrt(ux * ux + uy * uy + uz * uz)
            if u > 0.0:
                ta += u * (1.0 - (ux * dx + uy * dy + uz * dz) / (u * r)) * w
            if at_surface:
                nj0, nj1, nj2 = normal[j, 0], normal[j, 1], normal[j, 2]
                # x^_ji . n^_i < 0: j lies behind i's surface (dx = x_i - x_j = -x_ji)
                if (nj0 != 0.0 or nj1 != 0.0 or nj2 != 0.0) and (dx * ni0 + dy * ni1 + dz * ni2) > 0.0:
                    kappa += (1.0 - (ni0 * nj0 + ni1 * nj1 + ni2 * nj2)) * w
        trapped_air[i] = ta
        speed2 = vi0 * vi0 + vi1 * vi1 + vi2 * vi2
        energy[i] = 0.5 * speed2
        crest = 0.0
        if at_surface and speed2 > 0.0:
            if (vi0 * ni0 + vi1 * ni1 + vi2 * ni2) / math.sqrt(speed2) >= CREST_ALIGNMENT:
                crest = kappa
        wave_crest[i] = crest


# -- emission -------------------------------------------------------------------------------------------

@njit(parallel=True, cache=True)
def emission_counts(trapped_air, wave_crest, energy, ids, thresholds, rates, dt, seed, frame,
                    # outputs
                    counts, strength):
    """Section 4.2: n_d = Phi_k (k_ta Phi_ta + k_wc Phi_wc) dt diffuse particles per liquid particle.

    ``thresholds`` holds (ta_min, ta_max, wc_min, wc_max, ke_min, ke_max), ``rates`` (k_ta, k_wc).
    The fractional part is drawn (stochastic rounding with the particle's own random number) so
    that small rates still emit on average what they say. ``strength`` receives Phi_k (it shapes the
    lifetime).
    """
    for i in prange(trapped_air.shape[0]):
        pk = clamp_potential(energy[i], thresholds[4], thresholds[5])
        strength[i] = pk
        if pk <= 0.0:
            counts[i] = 0
            continue
        pta = clamp_potential(trapped_air[i], thresholds[0], thresholds[1])
        pwc = clamp_potential(wave_crest[i], thresholds[2], thresholds[3])
        n = pk * (rates[0] * pta + rates[1] * pwc) * dt
        whole = math.floor(n)
        if uniform(seed, frame, ids[i], 0, 1) < n - whole:
            whole += 1
        counts[i] = np.int64(whole)


@njit(inline="always", cache=True)
def _orthonormal(d0, d1, d2):
    """Two unit vectors perpendicular to the unit vector d and to each other."""
    if abs(d0) < 0.9:
        a0, a1, a2 = 0.0, d2, -d1  # d x (1, 0, 0)
    else:
        a0, a1, a2 = d2, 0.0, -d0  # d x (0, 1, 0)
    n = math.sqrt(a0 * a0 + a1 * a1 + a2 * a2)
    a0, a1, a2 = a0 / n, a1 / n, a2 / n
    b0 = d1 * a2 - d2 * a1
    b1 = d2 * a0 - d0 * a2
    b2 = d0 * a1 - d1 * a0
    return a0, a1, a2, b0, b1, b2


@njit(parallel=True, cache=True)
def emit(x, v, ids, counts, offsets, strength, radius, dt, spread, lifetime, variation, seed, frame,
         # outputs
         out_x, out_v, out_life):
    """Section 4.3: new diffuse particles sampled uniformly in a cylinder around each liquid particle.

    The cylinder has the radius ``radius`` (the particle radius) and runs from the particle along
    its velocity for |v| dt: with X_r, X_theta, X_h uniform in [0, 1], r = radius sqrt(X_r),
    theta = 2 pi X_theta, h = X_h |v| dt, and x_d = x + r cos(theta) e1 + r sin(theta) e2 + h v^.
    The new particle moves with the liquid particle plus a sideways part along its radial offset of
    ``spread`` |v| at the rim (the paper adds the offset itself, in metres, to the velocity).
    Its lifetime is ``lifetime`` (0.5 + 0.5 Phi_k) (1 + variation (2 X - 1)).
    """
    for i in prange(x.shape[0]):
        n = counts[i]
        if n == 0:
            continue
        vx, vy, vz = np.float64(v[i, 0]), np.float64(v[i, 1]), np.float64(v[i, 2])
        speed = math.sqrt(vx * vx + vy * vy + vz * vz)
        if speed > 0.0:
            d0, d1, d2 = vx / speed, vy / speed, vz / speed
        else:
            d0, d1, d2 = 0.0, 0.0, 1.0
        e10, e11, e12, e20, e21, e22 = _orthonormal(d0, d1, d2)
        base = offsets[i]
        pid = ids[i]
        for s in range(n):
            r = math.sqrt(uniform(seed, frame, pid, s, 2))
            th = 2.0 * math.pi * uniform(seed, frame, pid, s, 3)
            h = uniform(seed, frame, pid, s, 4) * speed * dt
            c, sn = r * math.cos(th), r * math.sin(th)
            o0 = c * e10 + sn * e20
            o1 = c * e11 + sn * e21
            o2 = c * e12 + sn * e22
            k = base + s
            out_x[k, 0] = x[i, 0] + radius * o0 + h * d0
            out_x[k, 1] = x[i, 1] + radius * o1 + h * d1
            out_x[k, 2] = x[i, 2] + radius * o2 + h * d2
            side = spread * speed
            out_v[k, 0] = vx + side * o0
            out_v[k, 1] = vy + side * o1
            out_v[k, 2] = vz + side * o2
            jitter = 1.0 + variation * (2.0 * uniform(seed, frame, pid, s, 5) - 1.0)
            out_life[k] = lifetime * (0.5 + 0.5 * strength[i]) * jitter


# -- queries of whitewater particles against the liquid -------------------------------------------------

@njit(parallel=True, cache=True)
def query(p, lx, lv, cell_key, cell_start, cell_nbr, R, skip_kind, kind,
          # outputs
          count, velocity):
    """Liquid neighbours within R of each point, and the liquid velocity there (Section 5).

    velocity is the W-weighted mean of the liquid velocities around the point (the paper's
    v~_f = sum_f v_f K(x_d - x_f) / sum_f K(x_d - x_f)), 0 where no liquid is near. Points whose
    ``kind`` equals ``skip_kind`` are skipped when ``skip_kind`` >= 0 (spray needs no liquid
    velocity). A ``velocity`` of another length than ``p`` asks for the counts only.
    """
    inv = 1.0 / R
    R2 = R * R
    for q in prange(p.shape[0]):
        if skip_kind >= 0 and kind[q] == skip_kind:
            continue
        px, py, pz = np.float64(p[q, 0]), np.float64(p[q, 1]), np.float64(p[q, 2])
        ci, cj, ck = cell_coords(px, py, pz, inv)
        own = find_cell(cell_key, ci, cj, ck)
        n = 0
        wsum = 0.0
        sx = sy = sz = 0.0
        for k in range(27):
            # an occupied cell knows its neighbour cells; around an empty one they are looked up
            cc = cell_nbr[own, k] if own >= 0 else around_cell(cell_key, ci, cj, ck, k)
            if cc < 0:
                continue
            for j in range(cell_start[cc], cell_start[cc + 1]):
                dx = px - lx[j, 0]
                dy = py - lx[j, 1]
                dz = pz - lx[j, 2]
                r2 = dx * dx + dy * dy + dz * dz
                if r2 >= R2:
                    continue
                n += 1
                w = _weight(math.sqrt(r2), R)
                wsum += w
                sx += w * lv[j, 0]
                sy += w * lv[j, 1]
                sz += w * lv[j, 2]
        count[q] = n
        if velocity.shape[0] != p.shape[0]:
            continue  # counts only
        if wsum > 0.0:
            velocity[q, 0] = sx / wsum
            velocity[q, 1] = sy / wsum
            velocity[q, 2] = sz / wsum
        else:
            velocity[q, 0] = 0.0
            velocity[q, 1] = 0.0
            velocity[q, 2] = 0.0


@njit(parallel=True, cache=True)
def classify(count, spray_below, bubble_above,
             # outputs
             kind):
    """Section 5: spray with fewer than ``spray_below`` liquid neighbours, bubbles with more than
    ``bubble_above``, foam in between."""
    for q in prange(count.shape[0]):
        n = count[q]
        kind[q] = SPRAY if n < spray_below else (BUBBLE if n > bubble_above else FOAM)


# -- advection ---------------------------------------------------------------------------------------

@njit(inline="always", cache=True)
def _relax(rate, dt):
    """(1 - exp(-rate dt)) / rate, the time a velocity relaxing at ``rate`` per second covers in dt."""
    if rate * dt < 1e-6:
        return dt
    return -math.expm1(-rate * dt) / rate


@njit(parallel=True, cache=True)
def advance(x, v, kind, liquid_v, life, age, dt, g0, g1, g2, spray_drag, buoyancy, bubble_drag):
    """Move every diffuse particle by one frame of ``dt`` seconds, in place (Section 5).

    Spray: dv/dt = g - k_s v (linear air drag; the paper's spray is ballistic, k_s = 0), integrated
    exactly: v(t) = g/k_s + (v0 - g/k_s) e^{-k_s t}, x(t) = x0 + g t/k_s + (v0 - g/k_s)(1 - e^{-k_s t})/k_s.
    Foam: carried by the liquid, x += dt v~_f, v = v~_f; its lifetime runs down.
    Bubbles: dv/dt = -k_b g + k_d (v~_f - v): buoyancy and a drag toward the liquid's velocity (the
    paper's k_d is a share per time step; here it is a rate per second, so the result does not
    depend on the step), integrated exactly over the frame with v~_f and g held constant.
    Every particle ages by dt.
    """
    for q in prange(x.shape[0]):
        age[q] += dt
        t = kind[q]
        if t == FOAM:
            for a in range(3):
                v[q, a] = liquid_v[q, a]
                x[q, a] += dt * liquid_v[q, a]
            life[q] -= dt
            continue
        if t == SPRAY:
            k = spray_drag
            f0, f1, f2 = g0, g1, g2
            target0 = target1 = target2 = 0.0
        else:
            k = bubble_drag
            f0, f1, f2 = -buoyancy * g0, -buoyancy * g1, -buoyancy * g2
            target0, target1, target2 = liquid_v[q, 0], liquid_v[q, 1], liquid_v[q, 2]
        # dv/dt = f + k (target - v): steady velocity u = target + f / k, v(t) = u + (v0 - u) e^{-kt}
        if k * dt < 1e-6:  # no drag: the ballistic arc
            x[q, 0] += dt * v[q, 0] + 0.5 * f0 * dt * dt
            x[q, 1] += dt * v[q, 1] + 0.5 * f1 * dt * dt
            x[q, 2] += dt * v[q, 2] + 0.5 * f2 * dt * dt
            v[q, 0] += f0 * dt
            v[q, 1] += f1 * dt
            v[q, 2] += f2 * dt
            continue
        tau = _relax(k, dt)  # integral of e^{-k s} over the frame
        decay = math.exp(-k * dt)
        u0, u1, u2 = target0 + f0 / k, target1 + f1 / k, target2 + f2 / k
        w0, w1, w2 = np.float64(v[q, 0]) - u0, np.float64(v[q, 1]) - u1, np.float64(v[q, 2]) - u2
        x[q, 0] += u0 * dt + w0 * tau
        x[q, 1] += u1 * dt + w1 * tau
        x[q, 2] += u2 * dt + w2 * tau
        v[q, 0] = u0 + w0 * decay
        v[q, 1] = u1 + w1 * decay
        v[q, 2] = u2 + w2 * decay


@njit(parallel=True, cache=True)
def wet(contact, kind, dt, life):
    """Spray in contact with a collider or container wall (``contact``) runs its lifetime down by dt, as
    foam does: a drop that lands on a wall wets it and is gone once its lifetime is over."""
    for q in prange(contact.shape[0]):
        if contact[q] and kind[q] == SPRAY:
            life[q] -= dt


@njit(cache=True)
def survivors(x, v, kind, life, spray_floor,
              # outputs
              keep):
    """Which particles stay: foam and spray with lifetime left (spray's runs down only on a wall, see
    :func:`wet`), finite state, spray not below ``spray_floor`` (the lowest liquid minus R: under every
    liquid there is nothing to land in). Returns how many."""
    n = 0
    for q in range(x.shape[0]):
        ok = True
        for a in range(3):
            if not (math.isfinite(x[q, a]) and math.isfinite(v[q, a])):
                ok = False
        if (kind[q] == FOAM or kind[q] == SPRAY) and life[q] <= 0.0:
            ok = False
        if kind[q] == SPRAY and x[q, 2] < spray_floor:
            ok = False
        keep[q] = ok
        n += ok
    return n


@njit(cache=True)
def compact(keep, x, v, life, age, kind, ids):
    """Move the kept particles to the front of every array, in order, in place (no copies)."""
    m = 0
    for q in range(keep.shape[0]):
        if keep[q]:
            if m != q:
                for a in range(3):
                    x[m, a] = x[q, a]
                    v[m, a] = v[q, a]
                life[m] = life[q]
                age[m] = age[q]
                kind[m] = kind[q]
                ids[m] = ids[q]
            m += 1
    return m


@njit(cache=True)
def count_kinds(kind, out):
    """out[t] = how many particles are of kind t (t = 0, 1, 2)."""
    for q in range(kind.shape[0]):
        out[kind[q]] += 1
