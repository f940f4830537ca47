"""Collider kernels: what the solvers ask of the mesh colliders, per point and per particle.

Queries over every collider of a bake at once, packed as one :class:`~engine.collision.colliders.ColliderSet`
(``cset``; built by :class:`engine.collision.world.CollisionWorld`, whose docstring gives the model):
the signed distance and surface velocity (:func:`collider_phi`, :func:`collider_velocity`), the
wall-mass fraction and its gradient for the density sums (:func:`collider_free`), a cheap broad
phase (:func:`collider_near`), the contact response after each substep (:func:`project`: push-out,
damped reflection, friction, swept paths) and an inside test (:func:`inside_any`).

The per-point helpers are plain @njit functions, called rather than inlined at the numba-IR level:
inlining the grid lookup into every solver kernel (density, forces, each PBF pass, projection) made
the first bake compile for minutes; a call costs a few nanoseconds per query.
"""

from __future__ import annotations

import math

import numpy as np
from numba import njit, prange

from . import sdf
from .colliders import KIND_POLYTOPE
from .walls import table, wall_free_gradient


@njit(cache=True)
def _sample_grid(rx, ry, rz, g, cset):
    gr = cset.grids[g]
    o, n = gr.origin, gr.tiles
    return sdf.sample_flat(rx, ry, rz, o[0], o[1], o[2], gr.inv_cell, cset.block_phi, cset.block_tri, cset.tile_flat,
                           gr.tile_start, n[0], n[1], n[2], cset.tile_block, gr.band, gr.thickness, gr.outside_sign)


@njit(inline="always", cache=True)
def _near(px, py, pz, col):
    """Broad phase: True if the point lies in the collider's world box (``box_lo``, ``box_hi``)."""
    lo, hi = col.box_lo, col.box_hi
    return (lo[0] <= px <= hi[0] and lo[1] <= py <= hi[1] and lo[2] <= pz <= hi[2])


@njit(cache=True)
def _polytope_phi(r0, r1, r2, col, planes):
    """Contact distance of Gourlay 2012: parity * max_k (n_k . r - d_k), with the gradient parity * n_k.

    Exact inside a hole (the distance to the nearest face) and inside a solid; outside a solid it
    is a lower bound of the distance (exact facing a face, short of it near edges and corners). The
    broad phase (inscribed sphere of a hole, circumscribed sphere of a solid) answers with a lower
    bound of the distance and no gradient for points that cannot touch a face.
    """
    parity = col.parity
    cen = col.centre
    e0 = r0 - cen[0]
    e1 = r1 - cen[1]
    e2 = r2 - cen[2]
    dc = math.sqrt(e0 * e0 + e1 * e1 + e2 * e2)
    if parity < 0.0:
        if dc < col.r_in - col.reach:
            return col.r_in - dc, 0.0, 0.0, 0.0
    elif dc > col.r_out + col.reach:
        return dc - col.r_out, 0.0, 0.0, 0.0
    best = -1e300
    k_best = 0
    for k in range(col.plane_start, col.plane_start + col.plane_count):
        dist = planes[k, 0] * r0 + planes[k, 1] * r1 + planes[k, 2] * r2 - planes[k, 3]
        if dist > best:
            best = dist
            k_best = k
    return parity * best, parity * planes[k_best, 0], parity * planes[k_best, 1], parity * planes[k_best, 2]


@njit(cache=True)
def rest_phi(r0, r1, r2, c, cset):
    """Collider ``c``'s distance at the rest-space point r (metres, negative in the solid, before its surface
    offset), its rest-space gradient and closest triangle (-1 for a polytope): ``(phi, g0, g1, g2, tri)``.

    What :func:`collider_phi` looks up once the world point is in the rest frame; a rigid body's contacts
    call it with the rest point of the body's own pose (:mod:`engine.rigid.contacts`). A deforming
    collider answers from the grid of its current frame, unshifted in time."""
    col = cset.colliders[c]
    if col.kind == KIND_POLYTOPE:
        phi, g0, g1, g2 = _polytope_phi(r0, r1, r2, col, cset.planes)
        return phi, g0, g1, g2, -1
    return _sample_grid(r0, r1, r2, col.grid, cset)


@njit(cache=True)
def collider_phi(px, py, pz, c, cset):
    """Distance to collider ``c``'s surface (metres, negative in the solid), its world unit normal,
    the closest triangle and the rest-space point: ``(phi, n0, n1, n2, tri, r0, r1, r2)``.

    The normal is zero beyond the grid's band (no contact can happen there)."""
    col = cset.colliders[c]
    a = col.world_to_rest
    r0 = a[0, 0] * px + a[0, 1] * py + a[0, 2] * pz + a[0, 3]
    r1 = a[1, 0] * px + a[1, 1] * py + a[1, 2] * pz + a[1, 3]
    r2 = a[2, 0] * px + a[2, 1] * py + a[2, 2] * pz + a[2, 3]
    g = col.grid
    phi, g0, g1, g2, tri = rest_phi(r0, r1, r2, c, cset)
    shift = 0.0 if col.kind == KIND_POLYTOPE else col.time_shift
    if shift != 0.0 and tri >= 0:
        # deforming: the grid is of the nearest frame; the surface has moved since with the
        # velocity of the nearest triangle, so look where the point was relative to it then
        u0, u1, u2 = collider_velocity(c, tri, r0, r1, r2, cset)
        phi, g0, g1, g2, tri2 = _sample_grid(r0 - u0 * shift, r1 - u1 * shift, r2 - u2 * shift, g, cset)
        if tri2 >= 0:
            tri = tri2
    m = col.grad_to_world
    n0 = m[0, 0] * g0 + m[0, 1] * g1 + m[0, 2] * g2
    n1 = m[1, 0] * g0 + m[1, 1] * g1 + m[1, 2] * g2
    n2 = m[2, 0] * g0 + m[2, 1] * g1 + m[2, 2] * g2
    nn = math.sqrt(n0 * n0 + n1 * n1 + n2 * n2)
    if nn > 0.0:
        n0 /= nn
        n1 /= nn
        n2 /= nn
    return phi - col.offset, n0, n1, n2, tri, r0, r1, r2


@njit(cache=True)
def collider_velocity(c, tri, r0, r1, r2, cset):
    """World velocity (m/s) of collider ``c``'s surface near rest-space point r with closest triangle tri."""
    tris, vvel = cset.tris, cset.vvel
    col = cset.colliders[c]
    if col.deforming:
        if tri < 0:
            return 0.0, 0.0, 0.0
        t = col.tri_start + tri
        o = col.vel_start
        a, b, e = o + tris[t, 0], o + tris[t, 1], o + tris[t, 2]
        third = 1.0 / 3.0
        return ((vvel[a, 0] + vvel[b, 0] + vvel[e, 0]) * third, (vvel[a, 1] + vvel[b, 1] + vvel[e, 1]) * third,
                (vvel[a, 2] + vvel[b, 2] + vvel[e, 2]) * third)
    d = col.rest_velocity
    return (d[0, 0] * r0 + d[0, 1] * r1 + d[0, 2] * r2 + d[0, 3],
            d[1, 0] * r0 + d[1, 1] * r1 + d[1, 2] * r2 + d[1, 3],
            d[2, 0] * r0 + d[2, 1] * r1 + d[2, 2] * r2 + d[2, 3])


@njit(inline="always", cache=True)
def _times_wall(f_all, d0, d1, d2, phi, n0, n1, n2, inv_scale, t0, step, psi, dpsi):
    """(F, grad F) times one wall's free fraction f = 1 - psi(phi) at unit normal n (phi grows along n):
    grad (F f) = f grad F + F f'(phi) n."""
    t = phi * inv_scale
    f = 1.0 - table(psi, t0, step, t)
    df = -table(dpsi, t0, step, t) * inv_scale
    return f_all * f, f * d0 + f_all * df * n0, f * d1 + f_all * df * n1, f * d2 + f_all * df * n2


@njit(inline="always", cache=True)
def _deep_in_hole(px, py, pz, col, reach):
    """True if the point lies so deep inside a convex container's inscribed sphere that no face is
    within ``reach`` of it (the broad phase of Gourlay 2012 for holes)."""
    a, cen = col.world_to_rest, col.centre
    e0 = a[0, 0] * px + a[0, 1] * py + a[0, 2] * pz + a[0, 3] - cen[0]
    e1 = a[1, 0] * px + a[1, 1] * py + a[1, 2] * pz + a[1, 3] - cen[1]
    e2 = a[2, 0] * px + a[2, 1] * py + a[2, 2] * pz + a[2, 3] - cen[2]
    return math.sqrt(e0 * e0 + e1 * e1 + e2 * e2) < col.r_in - reach - abs(col.offset)


@njit(cache=True)
def _hole_free(px, py, pz, col, planes, support, inv_scale, t0, step, psi, dpsi, f_all, d0, d1, d2):
    """Multiply the free fraction (f_all, gradient d) by 1 - psi of every face of a convex container."""
    if _deep_in_hole(px, py, pz, col, support):
        return f_all, d0, d1, d2                      # inscribed sphere: no face within reach
    a = col.world_to_rest
    r0 = a[0, 0] * px + a[0, 1] * py + a[0, 2] * pz + a[0, 3]
    r1 = a[1, 0] * px + a[1, 1] * py + a[1, 2] * pz + a[1, 3]
    r2 = a[2, 0] * px + a[2, 1] * py + a[2, 2] * pz + a[2, 3]
    m = col.grad_to_world
    for k in range(col.plane_start, col.plane_start + col.plane_count):
        phi = planes[k, 3] - (planes[k, 0] * r0 + planes[k, 1] * r1 + planes[k, 2] * r2) - col.offset
        if phi >= support:
            continue
        # inward normal (the direction phi grows) in world space
        n0 = -(m[0, 0] * planes[k, 0] + m[0, 1] * planes[k, 1] + m[0, 2] * planes[k, 2])
        n1 = -(m[1, 0] * planes[k, 0] + m[1, 1] * planes[k, 1] + m[1, 2] * planes[k, 2])
        n2 = -(m[2, 0] * planes[k, 0] + m[2, 1] * planes[k, 1] + m[2, 2] * planes[k, 2])
        nn = math.sqrt(n0 * n0 + n1 * n1 + n2 * n2)
        f_all, d0, d1, d2 = _times_wall(f_all, d0, d1, d2, phi, n0 / nn, n1 / nn, n2 / nn, inv_scale, t0, step,
                                        psi, dpsi)
    return f_all, d0, d1, d2


@njit(cache=True)
def collider_free(px, py, pz, support, inv_scale, t0, step, psi, dpsi, cset):
    """``F = prod_c (1 - psi(phi_c))`` over mesh colliders within ``support``, and its gradient (1/m).

    ``psi`` and ``dpsi`` are tabulated in t = phi * inv_scale (see :mod:`engine.collision.walls`). The wall
    mass of the colliders is ``1 - F``; combined with box walls of free fraction F_b it is
    ``1 - F_b F``.
    """
    f_all = 1.0
    d0 = 0.0
    d1 = 0.0
    d2 = 0.0
    cols = cset.colliders
    for c in range(cols.shape[0]):
        col = cols[c]
        if not _near(px, py, pz, col):
            continue
        if col.kind == KIND_POLYTOPE and col.parity < 0.0:
            # a convex container: every face is a wall, combined like the walls of a box
            f_all, d0, d1, d2 = _hole_free(px, py, pz, col, cset.planes, support, inv_scale, t0, step, psi, dpsi,
                                           f_all, d0, d1, d2)
            continue
        phi, n0, n1, n2, tri, r0, r1, r2 = collider_phi(px, py, pz, c, cset)
        if phi >= support:
            continue
        f_all, d0, d1, d2 = _times_wall(f_all, d0, d1, d2, phi, n0, n1, n2, inv_scale, t0, step, psi, dpsi)
    return f_all, d0, d1, d2


@njit(inline="always", cache=True)
def free_fraction(px, py, pz, boxes, support, inv_scale, t0, step, psi, dpsi, cset, colliders):
    """The part of a particle's kernel support free of solid, F = F_b F_c, with F_b the box walls' free
    fraction (:func:`engine.collision.walls.wall_free_gradient`) and F_c the mesh colliders'
    (:func:`collider_free`, only when ``colliders``), and the gradient of the wall mass 1 - F,
    grad (1 - F) = F_c grad (1 - F_b) - F_b grad F_c (1/m).

    The solvers add the wall mass to the density as rho0 (1 - F) and push along its gradient. Returns
    ``(F, F_c, g0, g1, g2)``.
    """
    free_box, w0, w1, w2 = wall_free_gradient(px, py, pz, boxes, support, inv_scale, t0, step, psi, dpsi)
    free_col = 1.0
    g0 = 0.0
    g1 = 0.0
    g2 = 0.0
    if colliders:
        free_col, g0, g1, g2 = collider_free(px, py, pz, support, inv_scale, t0, step, psi, dpsi, cset)
    return (free_box * free_col, free_col, free_col * w0 - free_box * g0, free_col * w1 - free_box * g1,
            free_col * w2 - free_box * g2)


@njit(cache=True)
def collider_near(px, py, pz, reach, cset):
    """True if some collider's surface may lie within ``reach`` metres of the point (a conservative
    test: used to pick the particles that need the wall queries of :func:`collider_free`)."""
    cols = cset.colliders
    for c in range(cols.shape[0]):
        col = cols[c]
        if not _near(px, py, pz, col):
            continue
        if col.kind == KIND_POLYTOPE and col.parity < 0.0:
            if _deep_in_hole(px, py, pz, col, reach):
                continue  # inside the inscribed sphere, farther than reach from every face
            return True
        phi = collider_phi(px, py, pz, c, cset)[0]
        if phi < reach:
            return True
    return False


@njit(cache=True)
def _solid_eject(r0, r1, r2, u0, u1, u2, travel, col, planes, phi, n0, n1, n2):
    """Gourlay's (2012) collision distance for a point inside a convex solid that came in by a move along u
    (relative to the solid) of ``travel`` metres: the face it is least deep behind among those it is
    moving deeper through (u . n <= 0) and no deeper than ``travel``, so it leaves the way it came in.
    Falls back to the contact distance (phi, n) when no face qualifies.

    The depth bound keeps the choice to faces the move can have crossed. Without it, a particle that a
    constraint iteration had nudged a millimetre into a moving paddle while it moved away from the paddle
    (u . n > 0 on the near face) left through the far face, tenths of a metre away, and PBF's velocity
    update v += dx / dt turned that jump into tens of metres per second.
    """
    m = col.grad_to_world
    best = -1e300
    found = False
    b0 = b1 = b2 = 0.0
    for k in range(col.plane_start, col.plane_start + col.plane_count):
        dist = planes[k, 0] * r0 + planes[k, 1] * r1 + planes[k, 2] * r2 - planes[k, 3]
        w0 = m[0, 0] * planes[k, 0] + m[0, 1] * planes[k, 1] + m[0, 2] * planes[k, 2]
        w1 = m[1, 0] * planes[k, 0] + m[1, 1] * planes[k, 1] + m[1, 2] * planes[k, 2]
        w2 = m[2, 0] * planes[k, 0] + m[2, 1] * planes[k, 1] + m[2, 2] * planes[k, 2]
        ww = math.sqrt(w0 * w0 + w1 * w1 + w2 * w2)
        w0 /= ww
        w1 /= ww
        w2 /= ww
        if dist > best and dist - col.offset >= -travel and u0 * w0 + u1 * w1 + u2 * w2 <= 0.0:
            best = dist
            found = True
            b0, b1, b2 = w0, w1, w2
    if not found:
        return phi, n0, n1, n2
    return best - col.offset, b0, b1, b2


@njit(cache=True)
def _first_hit(ax, ay, az, bx, by, bz, sweep, cset):
    """Along the segment a -> b, sampled every ``sweep`` metres, the first sample inside a collider,
    or b itself when none is."""
    ex = bx - ax
    ey = by - ay
    ez = bz - az
    length = math.sqrt(ex * ex + ey * ey + ez * ez)
    if length <= sweep:
        return bx, by, bz
    # broad phase: a segment whose box meets no collider's world box cannot enter one (most of the
    # liquid, which moves farther than a sweep step every substep at large substeps)
    hit = False
    for c in range(cset.colliders.shape[0]):
        lo, hi = cset.colliders[c].box_lo, cset.colliders[c].box_hi
        if (min(ax, bx) <= hi[0] and max(ax, bx) >= lo[0] and min(ay, by) <= hi[1] and max(ay, by) >= lo[1]
                and min(az, bz) <= hi[2] and max(az, bz) >= lo[2]):
            hit = True
            break
    if not hit:
        return bx, by, bz
    k = int(math.ceil(length / sweep))
    for m in range(1, k):
        f = m / k
        px = ax + f * ex
        py = ay + f * ey
        pz = az + f * ez
        for c in range(cset.colliders.shape[0]):
            if not _near(px, py, pz, cset.colliders[c]):
                continue
            phi, n0, n1, n2, tri, r0, r1, r2 = collider_phi(px, py, pz, c, cset)
            if phi < 0.0:
                return px, py, pz
    return bx, by, bz


@njit(parallel=True, cache=True)
def project(x_start, x, v, sweep, contact, inv_dt, use_response, cset):
    """Push particles out of every collider; respond with bounce and friction, or move v with x.

    x_start : (N, 3) positions at the start of the move (for the sweep, and without ``use_response`` for
        the face a particle entered a convex solid by); may equal x.
    x, v : (N, 3) float32, updated in place.
    sweep : float, metres; moves longer than this are sampled along their path (0: no sweep).
    contact : float, metres; friction acts on particles closer than this to a surface (or inside).
    inv_dt : float, 1/s; with ``use_response`` False, v += (push) * inv_dt (position-based solvers).
    use_response : bool; True applies the velocity response of the module docstring.
    """
    cols = cset.colliders
    n_col = cols.shape[0]
    if n_col == 0:
        return
    for i in prange(x.shape[0]):
        px = np.float64(x[i, 0])
        py = np.float64(x[i, 1])
        pz = np.float64(x[i, 2])
        if sweep > 0.0:
            px, py, pz = _first_hit(np.float64(x_start[i, 0]), np.float64(x_start[i, 1]),
                                    np.float64(x_start[i, 2]), px, py, pz, sweep, cset)
        vx = np.float64(v[i, 0])
        vy = np.float64(v[i, 1])
        vz = np.float64(v[i, 2])
        ox = np.float64(x[i, 0])
        oy = np.float64(x[i, 1])
        oz = np.float64(x[i, 2])
        # three rounds: a particle in a corner (of a convex container, or between colliders) is
        # pushed out through each wall in turn
        for _ in range(3):
            pushed = False
            for c in range(n_col):
                col = cols[c]
                if not _near(px, py, pz, col):
                    continue
                phi, n0, n1, n2, tri, r0, r1, r2 = collider_phi(px, py, pz, c, cset)
                if phi >= contact or (n0 == 0.0 and n1 == 0.0 and n2 == 0.0):
                    continue
                pushed = pushed or phi < 0.0
                cv0, cv1, cv2 = collider_velocity(c, tri, r0, r1, r2, cset)
                if phi < 0.0 and col.kind == KIND_POLYTOPE and col.parity > 0.0:
                    # Gourlay's (2012) collision distance: eject through the face the particle came in by.
                    # What brought it in: with the response (after the prediction), the substep's motion
                    # relative to the collider, u dt; without it (a constraint iteration, the collider
                    # standing still), this pass's own move x - x_start, never the accumulated velocity.
                    if use_response:
                        m0 = vx - cv0
                        m1 = vy - cv1
                        m2 = vz - cv2
                        travel = math.sqrt(m0 * m0 + m1 * m1 + m2 * m2)
                        travel = travel / inv_dt if inv_dt > 0.0 else math.inf
                    else:
                        m0 = ox - np.float64(x_start[i, 0])
                        m1 = oy - np.float64(x_start[i, 1])
                        m2 = oz - np.float64(x_start[i, 2])
                        travel = math.sqrt(m0 * m0 + m1 * m1 + m2 * m2)
                    phi, n0, n1, n2 = _solid_eject(r0, r1, r2, m0, m1, m2, travel, col, cset.planes, phi, n0, n1, n2)
                if phi < 0.0:
                    px -= phi * n0
                    py -= phi * n1
                    pz -= phi * n2
                if not use_response:
                    continue
                u0 = vx - cv0
                u1 = vy - cv1
                u2 = vz - cv2
                un = u0 * n0 + u1 * n1 + u2 * n2
                if un < 0.0 and phi < 0.0:
                    # approaching a surface it touched: reflect the normal part with the bounce
                    k = -(1.0 + col.bounce) * un
                    u0 += k * n0
                    u1 += k * n1
                    u2 += k * n2
                    un = -col.bounce * un
                keep = 1.0 - col.friction
                vx = cv0 + un * n0 + keep * (u0 - un * n0)
                vy = cv1 + un * n1 + keep * (u1 - un * n1)
                vz = cv2 + un * n2 + keep * (u2 - un * n2)
            if not pushed:
                break                                 # nothing moved: later rounds would find the same
        x[i, 0] = px
        x[i, 1] = py
        x[i, 2] = pz
        if use_response:
            v[i, 0] = vx
            v[i, 1] = vy
            v[i, 2] = vz
        else:
            v[i, 0] += (px - ox) * inv_dt
            v[i, 1] += (py - oy) * inv_dt
            v[i, 2] += (pz - oz) * inv_dt


@njit(parallel=True, cache=True)
def inside_any(x, cset, out):
    """out[i] = True where particle i lies inside some collider's solid (phi_eff < 0)."""
    for i in prange(x.shape[0]):
        hit = False
        for c in range(cset.colliders.shape[0]):
            px, py, pz = np.float64(x[i, 0]), np.float64(x[i, 1]), np.float64(x[i, 2])
            if not _near(px, py, pz, cset.colliders[c]):
                continue
            phi, n0, n1, n2, tri, r0, r1, r2 = collider_phi(px, py, pz, c, cset)
            if phi < 0.0:
                hit = True
        out[i] = hit
