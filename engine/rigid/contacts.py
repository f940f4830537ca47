"""Contacts of rigid bodies with containers, colliders and each other: found on distance fields, solved
by sequential impulses.

**Finding contacts** (:func:`find_contacts`). Every body carries sample points on its surface (its
vertices, points along its edges and across its faces, at most a particle spacing apart, each with the
body's outward normal; :mod:`engine.rigid.bodies`). At the start of each substep a sample point p of
body a is in contact with

* a box container where it lies within ``margin`` of one of the box's inner faces;
* a mesh collider (static or animated, at its pose at the substep's end) where the collider's signed
  distance ``phi(p) < margin`` (:func:`engine.collision.queries.collider_phi`, its grid or convex polytope:
  the distance the liquid meets, so bodies and liquid see one surface);
* another body b where b's distance field at p, looked up in b's rest frame at b's pose
  (:func:`engine.collision.queries.rest_phi`), is below ``margin``.

A contact keeps the point on a (in a's frame), the point of the other surface it faces (p moved back
along the normal by its distance), the normal n out of the other surface, and the separation d found.
A body and one surface may share hundreds of contacts (a face resting on a floor); a few on the outline
of the patch hold it as well (:func:`reduce_contacts`).

**Solving** (:func:`solve_velocities`): sequential impulses (Catto 2005, "Iterative Dynamics with Temporal
Coherence", GDC; Gauss-Seidel over the contacts on the velocities), each contact's normal impulse
accumulated and kept >= 0, its friction impulse kept within the Coulomb disc ``|p_t| <= mu p_n``.
The contact is *speculative*: the approach speed may close the gap d within the substep but not more,
``n . v_rel >= -max(d, 0) / dt``, so a body falls onto a floor up to it and never through it, however
thin the floor (a surface moves at most :data:`engine.rigid.world.MAX_BODY_TRAVEL` particle spacings in
a substep, within the margin). An impact faster than ``2 |g| dt`` leaves with the bounce ``-e vn``.
Contacts are warm-started (:func:`warm_start`): one that held in the substep before starts with the
impulses it ended with there, so a resting stack starts its iterations at the answer and does not
jitter. After the poses advance, :func:`push_apart` removes part of any overlap left, as position
constraints (Müller, Macklin, Chentanez, Jeschke & Kim 2020, "Detailed Rigid Body Simulation with
Extended Position Based Dynamics", eq. 2-9) that change no velocity.
"""

from __future__ import annotations

import math

import numpy as np
from numba import njit

from ..collision.queries import collider_phi, collider_velocity, rest_phi
from .motion import quat_matrix, rotate_by

#: One contact (see the module docstring): bodies ``a`` and ``b`` (-1: a container or collider), ``key``
#: naming the other surface (b for a body, negative for a box face or a collider: contacts of a with one
#: surface form a group, see :func:`reduce_contacts`),
#: the points ``ra`` (on a, its frame, from its centre of mass) and ``rb`` (on b likewise, or the
#: world point of the container or collider), the normal ``n`` (world, or b's frame for a body),
#: the other surface's velocity ``vs`` (world, m/s; containers and colliders), the friction ``mu``
#: and bounce ``e``, the normal approach speed ``vn0`` (m/s) before the substep, the separation ``d`` (m)
#: when found, and the impulses ``pn`` (normal, N s) and ``pt`` (friction, world vector, N s) the solver
#: accumulated; ``sid`` is the sample's index (with a and key: the contact's identity from one substep
#: to the next, for warm starting).
CONTACT_DTYPE = np.dtype([("a", np.int64), ("b", np.int64), ("key", np.int64), ("sid", np.int64),
                          ("ra", np.float64, (3,)), ("rb", np.float64, (3,)), ("n", np.float64, (3,)),
                          ("vs", np.float64, (3,)), ("mu", np.float64), ("e", np.float64), ("vn0", np.float64),
                          ("d", np.float64), ("pn", np.float64), ("pt", np.float64, (3,))], align=True)


@njit(inline="always", cache=True)
def _rot(m, a0, a1, a2):
    return (m[0, 0] * a0 + m[0, 1] * a1 + m[0, 2] * a2, m[1, 0] * a0 + m[1, 1] * a1 + m[1, 2] * a2,
            m[2, 0] * a0 + m[2, 1] * a1 + m[2, 2] * a2)


@njit(inline="always", cache=True)
def _rot_t(m, a0, a1, a2):
    return (m[0, 0] * a0 + m[1, 0] * a1 + m[2, 0] * a2, m[0, 1] * a0 + m[1, 1] * a1 + m[2, 1] * a2,
            m[0, 2] * a0 + m[1, 2] * a1 + m[2, 2] * a2)


@njit(inline="always", cache=True)
def _cross(a0, a1, a2, b0, b1, b2):
    return a1 * b2 - a2 * b1, a2 * b0 - a0 * b2, a0 * b1 - a1 * b0


@njit(cache=True)
def world_inverse_inertia(R, inv_i0, out):
    """out = R I0^-1 R^T (3, 3): a body's inverse inertia in world axes."""
    for i in range(3):
        for j in range(3):
            s = 0.0
            for k in range(3):
                for m in range(3):
                    s += R[i, k] * inv_i0[k, m] * R[j, m]
            out[i, j] = s


@njit(inline="always", cache=True)
def _point_velocity(v, w, b, r0, r1, r2):
    c0, c1, c2 = _cross(w[b, 0], w[b, 1], w[b, 2], r0, r1, r2)
    return v[b, 0] + c0, v[b, 1] + c1, v[b, 2] + c2


@njit(cache=True)
def _add(out, count, a, b, key, sid, ra, rb0, rb1, rb2, n0, n1, n2, vs0, vs1, vs2, mu, e, vn0, d):
    if count < out.shape[0]:
        c = out[count]
        c.a = a
        c.b = b
        c.key = key
        c.sid = sid
        c.d = d
        c.pn = 0.0
        c.pt[0], c.pt[1], c.pt[2] = 0.0, 0.0, 0.0
        c.ra[0], c.ra[1], c.ra[2] = ra[0], ra[1], ra[2]
        c.rb[0], c.rb[1], c.rb[2] = rb0, rb1, rb2
        c.n[0], c.n[1], c.n[2] = n0, n1, n2
        c.vs[0], c.vs[1], c.vs[2] = vs0, vs1, vs2
        c.mu = mu
        c.e = e
        c.vn0 = vn0
    return count + 1


@njit(cache=True)
def find_contacts(samples, normals, sample_start, x, R, com0, radius, v, w, inv_mass, body_col, static_cols, boxes,
                  cset, margin, shift, mu, bounce,
                  # outputs
                  out):
    """Contacts of every body's sample points (see the module docstring); returns how many there are
    (more than ``out`` holds means: grow it and call again).

    ``samples`` (S, 3) are body-frame points from the centre of mass, ``normals`` (S, 3) the body's
    outward surface normals there. A contact's normal is the other surface's distance gradient a little
    inside body a, at ``p - shift n_a``: where the sample lies on an edge of the other surface (two
    boxes of one size stacked: each top corner is on a bottom corner of the one above) the gradient at p
    itself may be any of the edge's faces' normals, sideways, and it would push the boxes apart sideways;
    just inside body a it is the normal of the face a presses on.
    """
    nb = x.shape[0]
    count = 0
    ra = np.empty(3)
    p = np.empty(3)
    for a in range(nb):
        s0, s1 = sample_start[a], sample_start[a + 1]
        for s in range(s0, s1):
            ra[0], ra[1], ra[2] = _rot(R[a], samples[s, 0], samples[s, 1], samples[s, 2])
            na0, na1, na2 = _rot(R[a], normals[s, 0], normals[s, 1], normals[s, 2])
            p0 = x[a, 0] + ra[0]
            p1 = x[a, 1] + ra[1]
            p2 = x[a, 2] + ra[2]
            p[0], p[1], p[2] = p0, p1, p2
            h0 = p0 - shift * na0
            h1 = p1 - shift * na1
            h2 = p2 - shift * na2
            va0, va1, va2 = _point_velocity(v, w, a, ra[0], ra[1], ra[2])
            if inv_mass[a] > 0.0:
                # box containers: the inner faces within the margin
                for k in range(boxes.shape[0]):
                    inside = True
                    for ax in range(3):
                        if not (boxes[k, 0, ax] < x[a, ax] < boxes[k, 1, ax]):
                            inside = False
                    if not inside:
                        continue
                    for ax in range(3):
                        for side in range(2):
                            d = p[ax] - boxes[k, 0, ax] if side == 0 else boxes[k, 1, ax] - p[ax]
                            if d >= margin:
                                continue
                            sgn = 1.0 if side == 0 else -1.0
                            n0 = sgn if ax == 0 else 0.0
                            n1 = sgn if ax == 1 else 0.0
                            n2 = sgn if ax == 2 else 0.0
                            vn = va0 * n0 + va1 * n1 + va2 * n2
                            count = _add(out, count, a, -1, -1 - (6 * k + 2 * ax + side), s, ra, p0 - d * n0,
                                         p1 - d * n1, p2 - d * n2, n0, n1, n2, 0.0, 0.0, 0.0, mu[a], bounce[a], vn, d)
                # mesh colliders (at their pose at the end of the substep)
                for k in range(static_cols.shape[0]):
                    c = static_cols[k]
                    col = cset.colliders[c]
                    lo, hi = col.box_lo, col.box_hi
                    if not (lo[0] <= p0 <= hi[0] and lo[1] <= p1 <= hi[1] and lo[2] <= p2 <= hi[2]):
                        continue
                    phi, n0, n1, n2, tri, r0, r1, r2 = collider_phi(p0, p1, p2, c, cset)
                    if phi >= margin:
                        continue
                    m0, m1, m2 = collider_phi(h0, h1, h2, c, cset)[1:4]
                    if m0 != 0.0 or m1 != 0.0 or m2 != 0.0:
                        n0, n1, n2 = m0, m1, m2
                    if n0 == 0.0 and n1 == 0.0 and n2 == 0.0:
                        continue
                    u0, u1, u2 = collider_velocity(c, tri, r0, r1, r2, cset)
                    vn = (va0 - u0) * n0 + (va1 - u1) * n1 + (va2 - u2) * n2
                    count = _add(out, count, a, -1, -1 - (6 * boxes.shape[0] + c), s, ra, p0 - phi * n0, p1 - phi * n1,
                                 p2 - phi * n2, n0, n1, n2, u0, u1, u2, mu[a], bounce[a], vn, phi)
            # other bodies (a kinematic body's samples push dynamic bodies)
            for b in range(nb):
                if b == a or (inv_mass[a] == 0.0 and inv_mass[b] == 0.0):
                    continue
                e0 = p0 - x[b, 0]
                e1 = p1 - x[b, 1]
                e2 = p2 - x[b, 2]
                reach = radius[b] + margin
                if e0 * e0 + e1 * e1 + e2 * e2 > reach * reach:
                    continue
                q0, q1, q2 = _rot_t(R[b], e0, e1, e2)
                c = body_col[b]
                phi = rest_phi(q0 + com0[b, 0], q1 + com0[b, 1], q2 + com0[b, 2], c, cset)[0]
                if phi >= margin:
                    continue
                k0, k1, k2 = _rot_t(R[b], h0 - x[b, 0], h1 - x[b, 1], h2 - x[b, 2])
                g0, g1, g2 = rest_phi(k0 + com0[b, 0], k1 + com0[b, 1], k2 + com0[b, 2], c, cset)[1:4]
                gg = math.sqrt(g0 * g0 + g1 * g1 + g2 * g2)
                if gg == 0.0:
                    continue
                g0 /= gg
                g1 /= gg
                g2 /= gg
                n0, n1, n2 = _rot(R[b], g0, g1, g2)
                vb0, vb1, vb2 = _point_velocity(v, w, b, e0, e1, e2)
                vn = (va0 - vb0) * n0 + (va1 - vb1) * n1 + (va2 - vb2) * n2
                count = _add(out, count, a, b, b, s, ra, q0 - phi * g0, q1 - phi * g1, q2 - phi * g2, g0, g1, g2,
                             0.0, 0.0, 0.0, math.sqrt(mu[a] * mu[b]), math.sqrt(bounce[a] * bounce[b]), vn, phi)
    return count


#: Directions (in the contact plane) along which :func:`reduce_contacts` keeps the farthest contact.
REDUCED_DIRECTIONS = 8


@njit(cache=True)
def reduce_contacts(contacts, x, R,
                    # outputs
                    out):
    """Keep at most ``REDUCED_DIRECTIONS + 1`` contacts of each body with each surface: the deepest, and
    the farthest along each of ``REDUCED_DIRECTIONS`` directions spread around the group's mean normal
    (the corners of a face resting on a floor, the rim of a contact patch). Every sample of a flat face
    lying on another is a contact; a few on the patch's outline hold it as well, and Gauss-Seidel sweeps
    over hundreds of equal contacts converge slowly and let a resting body creep. Returns the count
    written to ``out`` (groups in the order of (a, key), contacts in their found order)."""
    n = contacts.shape[0]
    comp = np.empty(n, dtype=np.int64)
    for k in range(n):
        comp[k] = contacts[k].a * (np.int64(1) << 32) + (contacts[k].key + (np.int64(1) << 31))
    order = np.argsort(comp, kind="mergesort")
    m = 0
    g0 = 0
    pick = np.zeros(REDUCED_DIRECTIONS + 1, dtype=np.int64)
    while g0 < n:
        g1 = g0 + 1
        while g1 < n and comp[order[g1]] == comp[order[g0]]:
            g1 += 1
        if g1 - g0 <= REDUCED_DIRECTIONS + 1:
            for k in range(g0, g1):
                out[m] = contacts[order[k]]
                m += 1
            g0 = g1
            continue
        # mean normal, a tangent basis, the deepest contact
        s0 = s1 = s2 = 0.0
        deepest = -1
        best = 1e300
        for k in range(g0, g1):
            pa0, pa1, pa2, pb0, pb1, pb2, n0, n1, n2 = _ends(contacts[order[k]], x, R)
            s0 += n0
            s1 += n1
            s2 += n2
            d = n0 * (pa0 - pb0) + n1 * (pa1 - pb1) + n2 * (pa2 - pb2)
            if d < best - 1e-12:
                best = d
                deepest = k
        ss = math.sqrt(s0 * s0 + s1 * s1 + s2 * s2)
        s0 /= ss
        s1 /= ss
        s2 /= ss
        if abs(s0) < 0.9:
            u0, u1, u2 = _cross(s0, s1, s2, 1.0, 0.0, 0.0)
        else:
            u0, u1, u2 = _cross(s0, s1, s2, 0.0, 1.0, 0.0)
        uu = math.sqrt(u0 * u0 + u1 * u1 + u2 * u2)
        u0 /= uu
        u1 /= uu
        u2 /= uu
        w0, w1, w2 = _cross(s0, s1, s2, u0, u1, u2)
        pick[0] = deepest
        for j in range(REDUCED_DIRECTIONS):
            ang = 2.0 * math.pi * j / REDUCED_DIRECTIONS
            e0 = math.cos(ang) * u0 + math.sin(ang) * w0
            e1 = math.cos(ang) * u1 + math.sin(ang) * w1
            e2 = math.cos(ang) * u2 + math.sin(ang) * w2
            far = -1e300
            for k in range(g0, g1):
                pa0, pa1, pa2, pb0, pb1, pb2, n0, n1, n2 = _ends(contacts[order[k]], x, R)
                # how far out along e, less twice how far above the deepest: a point a little up the side
                # of a box resting on a floor is never picked over the corner beneath it
                d = n0 * (pa0 - pb0) + n1 * (pa1 - pb1) + n2 * (pa2 - pb2)
                f = e0 * pa0 + e1 * pa1 + e2 * pa2 - 2.0 * (d - best)
                if f > far + 1e-12:
                    far = f
                    pick[j + 1] = k
        for j in range(REDUCED_DIRECTIONS + 1):
            seen = False
            for i in range(j):
                if pick[i] == pick[j]:
                    seen = True
            if not seen:
                out[m] = contacts[order[pick[j]]]
                m += 1
        g0 = g1
    return m


@njit(inline="always", cache=True)
def _ends(c, x, R):
    """World points of a contact on a and b, and the world normal."""
    a, b = c.a, c.b
    ra0, ra1, ra2 = _rot(R[a], c.ra[0], c.ra[1], c.ra[2])
    pa0, pa1, pa2 = x[a, 0] + ra0, x[a, 1] + ra1, x[a, 2] + ra2
    if b < 0:
        return pa0, pa1, pa2, c.rb[0], c.rb[1], c.rb[2], c.n[0], c.n[1], c.n[2]
    rb0, rb1, rb2 = _rot(R[b], c.rb[0], c.rb[1], c.rb[2])
    n0, n1, n2 = _rot(R[b], c.n[0], c.n[1], c.n[2])
    return pa0, pa1, pa2, x[b, 0] + rb0, x[b, 1] + rb1, x[b, 2] + rb2, n0, n1, n2


@njit(inline="always", cache=True)
def _inv_mass_along(b, r0, r1, r2, n0, n1, n2, inv_mass, inv_iw):
    """w = 1/m + (r x n)^T I^-1 (r x n): the inverse mass a unit impulse along n at r meets."""
    if b < 0 or inv_mass[b] == 0.0:
        return 0.0
    c0, c1, c2 = _cross(r0, r1, r2, n0, n1, n2)
    i0, i1, i2 = _rot(inv_iw[b], c0, c1, c2)
    return inv_mass[b] + c0 * i0 + c1 * i1 + c2 * i2


@njit(inline="always", cache=True)
def _kick(b, p0, p1, p2, r0, r1, r2, v, w, inv_mass, inv_iw, sign):
    """Body b's velocities take the impulse sign * p at r (from its centre of mass)."""
    if b < 0 or inv_mass[b] == 0.0:
        return
    im = inv_mass[b] * sign
    v[b, 0] += p0 * im
    v[b, 1] += p1 * im
    v[b, 2] += p2 * im
    c0, c1, c2 = _cross(r0, r1, r2, p0, p1, p2)
    t0, t1, t2 = _rot(inv_iw[b], c0, c1, c2)
    w[b, 0] += t0 * sign
    w[b, 1] += t1 * sign
    w[b, 2] += t2 * sign


@njit(inline="always", cache=True)
def _shift(b, p0, p1, p2, r0, r1, r2, x, q, R, inv_mass, inv_i0, inv_iw, sign):
    """Body b's pose takes the positional impulse sign * p at r (a translation and a turn)."""
    if b < 0 or inv_mass[b] == 0.0:
        return
    im = inv_mass[b] * sign
    x[b, 0] += p0 * im
    x[b, 1] += p1 * im
    x[b, 2] += p2 * im
    c0, c1, c2 = _cross(r0, r1, r2, p0, p1, p2)
    t0, t1, t2 = _rot(inv_iw[b], c0, c1, c2)
    rotate_by(q[b], t0, t1, t2, sign)
    quat_matrix(q[b], R[b])
    world_inverse_inertia(R[b], inv_i0[b], inv_iw[b])


@njit(cache=True)
def contact_ids(contacts):
    """One int64 per contact naming it from one substep to the next: body a, the other surface, the sample."""
    out = np.empty(contacts.shape[0], dtype=np.int64)
    for k in range(contacts.shape[0]):
        c = contacts[k]
        out[k] = ((c.a << np.int64(20)) + (c.key + (np.int64(1) << np.int64(19)))) * (np.int64(1) << np.int64(24)) \
            + c.sid
    return out


@njit(cache=True)
def warm_start(contacts, old_ids, old_pn, old_pt, x, R, v, w, inv_mass, inv_iw):
    """Give each contact that also held in the substep before (same id; ``old_ids`` ascending) the impulses
    it ended with there, and apply them (Catto 2005, "Iterative Dynamics with Temporal Coherence", §6):
    a resting stack then starts its iterations at last substep's answer instead of at zero, and stands."""
    ids = contact_ids(contacts)
    for k in range(contacts.shape[0]):
        c = contacts[k]
        j = np.searchsorted(old_ids, ids[k])
        if j >= old_ids.shape[0] or old_ids[j] != ids[k]:
            continue
        pa0, pa1, pa2, pb0, pb1, pb2, n0, n1, n2 = _ends(c, x, R)
        # the friction impulse kept only across the new normal
        pt0, pt1, pt2 = old_pt[j, 0], old_pt[j, 1], old_pt[j, 2]
        pn_t = pt0 * n0 + pt1 * n1 + pt2 * n2
        pt0 -= pn_t * n0
        pt1 -= pn_t * n1
        pt2 -= pn_t * n2
        c.pn = old_pn[j]
        c.pt[0], c.pt[1], c.pt[2] = pt0, pt1, pt2
        p0 = c.pn * n0 + pt0
        p1 = c.pn * n1 + pt1
        p2 = c.pn * n2 + pt2
        a, b = c.a, c.b
        _kick(a, p0, p1, p2, pa0 - x[a, 0], pa1 - x[a, 1], pa2 - x[a, 2], v, w, inv_mass, inv_iw, 1.0)
        if b >= 0:
            _kick(b, p0, p1, p2, pb0 - x[b, 0], pb1 - x[b, 1], pb2 - x[b, 2], v, w, inv_mass, inv_iw, -1.0)


@njit(cache=True)
def solve_velocities(contacts, x, R, v, w, inv_mass, inv_iw, dt, rest_speed, iterations):
    """Sequential impulses over the contacts (Catto 2005; Gauss-Seidel on the velocities), ``iterations``
    sweeps, alternating in direction.

    Normal: the accumulated impulse stays >= 0 and makes the approach speed at most what closes the gap
    found in this substep, ``n . v_rel >= -max(d, 0) / dt`` (a speculative contact: a body falls onto a
    floor up to it, never through it), or, for an impact faster than ``rest_speed``, at least the
    bounce ``-e vn0``. Friction: the accumulated tangential impulse opposes the sliding velocity and
    stays within the disc ``|p_t| <= mu p_n`` (Coulomb).
    """
    n = contacts.shape[0]
    for it in range(iterations):
        for kk in range(n):
            k = kk if it % 2 == 0 else n - 1 - kk
            c = contacts[k]
            a, b = c.a, c.b
            pa0, pa1, pa2, pb0, pb1, pb2, n0, n1, n2 = _ends(c, x, R)
            ra0, ra1, ra2 = pa0 - x[a, 0], pa1 - x[a, 1], pa2 - x[a, 2]
            u0, u1, u2 = _point_velocity(v, w, a, ra0, ra1, ra2)
            rb0 = rb1 = rb2 = 0.0
            if b >= 0:
                rb0, rb1, rb2 = pb0 - x[b, 0], pb1 - x[b, 1], pb2 - x[b, 2]
                s0, s1, s2 = _point_velocity(v, w, b, rb0, rb1, rb2)
            else:
                s0, s1, s2 = c.vs[0], c.vs[1], c.vs[2]
            u0 -= s0
            u1 -= s1
            u2 -= s2
            vn = u0 * n0 + u1 * n1 + u2 * n2
            target = -max(c.d, 0.0) / dt
            if c.vn0 < -rest_speed and -c.vn0 * dt >= c.d:
                target = -c.e * c.vn0              # it hits within this substep: it leaves with the bounce
            wn = _inv_mass_along(a, ra0, ra1, ra2, n0, n1, n2, inv_mass, inv_iw) + \
                _inv_mass_along(b, rb0, rb1, rb2, n0, n1, n2, inv_mass, inv_iw)
            if wn <= 0.0:
                continue
            pn = max(c.pn + (target - vn) / wn, 0.0)
            dp = pn - c.pn
            c.pn = pn
            if dp != 0.0:
                _kick(a, dp * n0, dp * n1, dp * n2, ra0, ra1, ra2, v, w, inv_mass, inv_iw, 1.0)
                _kick(b, dp * n0, dp * n1, dp * n2, rb0, rb1, rb2, v, w, inv_mass, inv_iw, -1.0)
                u0 += dp * wn * n0
                u1 += dp * wn * n1
                u2 += dp * wn * n2
                vn += dp * wn
            # friction along the sliding direction
            t0 = u0 - vn * n0
            t1 = u1 - vn * n1
            t2 = u2 - vn * n2
            vt = math.sqrt(t0 * t0 + t1 * t1 + t2 * t2)
            if vt <= 1e-300 and c.pt[0] == 0.0 and c.pt[1] == 0.0 and c.pt[2] == 0.0:
                continue
            if vt > 1e-300:
                e0, e1, e2 = t0 / vt, t1 / vt, t2 / vt
                wt = _inv_mass_along(a, ra0, ra1, ra2, e0, e1, e2, inv_mass, inv_iw) + \
                    _inv_mass_along(b, rb0, rb1, rb2, e0, e1, e2, inv_mass, inv_iw)
                step = vt / wt if wt > 0.0 else 0.0
            else:
                e0 = e1 = e2 = step = 0.0
            q0 = c.pt[0] - step * e0
            q1 = c.pt[1] - step * e1
            q2 = c.pt[2] - step * e2
            qq = math.sqrt(q0 * q0 + q1 * q1 + q2 * q2)
            cap = c.mu * c.pn
            if qq > cap:
                f = cap / qq
                q0 *= f
                q1 *= f
                q2 *= f
            d0, d1, d2 = q0 - c.pt[0], q1 - c.pt[1], q2 - c.pt[2]
            c.pt[0], c.pt[1], c.pt[2] = q0, q1, q2
            _kick(a, d0, d1, d2, ra0, ra1, ra2, v, w, inv_mass, inv_iw, 1.0)
            _kick(b, d0, d1, d2, rb0, rb1, rb2, v, w, inv_mass, inv_iw, -1.0)


@njit(cache=True)
def push_apart(contacts, x, q, R, inv_mass, inv_i0, inv_iw, slop, fraction, iterations):
    """After the poses are advanced: move overlapping bodies apart by ``fraction`` of their overlap beyond
    ``slop`` (m), as position constraints (Müller et al. 2020, eq. 2-9 with zero compliance), changing no
    velocity: the non-linear Gauss-Seidel position pass of Catto's solvers, so that overlap left by the
    velocities is corrected without the energy a velocity push (Baumgarte) would add."""
    n = contacts.shape[0]
    for it in range(iterations):
        for kk in range(n):
            k = kk if it % 2 == 0 else n - 1 - kk
            c = contacts[k]
            a, b = c.a, c.b
            pa0, pa1, pa2, pb0, pb1, pb2, n0, n1, n2 = _ends(c, x, R)
            d = n0 * (pa0 - pb0) + n1 * (pa1 - pb1) + n2 * (pa2 - pb2)
            if d >= -slop:
                continue
            ra0, ra1, ra2 = pa0 - x[a, 0], pa1 - x[a, 1], pa2 - x[a, 2]
            rb0 = rb1 = rb2 = 0.0
            if b >= 0:
                rb0, rb1, rb2 = pb0 - x[b, 0], pb1 - x[b, 1], pb2 - x[b, 2]
            wn = _inv_mass_along(a, ra0, ra1, ra2, n0, n1, n2, inv_mass, inv_iw) + \
                _inv_mass_along(b, rb0, rb1, rb2, n0, n1, n2, inv_mass, inv_iw)
            if wn <= 0.0:
                continue
            dl = -fraction * (d + slop) / wn
            _shift(a, dl * n0, dl * n1, dl * n2, ra0, ra1, ra2, x, q, R, inv_mass, inv_i0, inv_iw, 1.0)
            _shift(b, dl * n0, dl * n1, dl * n2, rb0, rb1, rb2, x, q, R, inv_mass, inv_i0, inv_iw, -1.0)
