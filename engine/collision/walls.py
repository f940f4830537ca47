"""Box-container walls as continuous solid, shared by the particle solvers.

A wall at distance d from a particle contributes the kernel mass of an imaginary particle lattice
behind it, psi(d) (see :func:`engine.core.kernels.half_space_tables`). The walls of boxes meet at edges
and corners; they are combined as 1 - prod_k (1 - psi_k), exact for a kernel that factorises along
the axes, instead of a plain sum that would count a corner up to three times. The walls of several
boxes combine the same way, and :func:`wall_gradient` is the exact gradient of that product. This
is the one walls module of the particle solvers (WCSPH, the hybrid's SPH part and PBF).

Tables are uniform in a variable t = d * inv_scale (metres for WCSPH, d / h for PBF), so one
lookup serves both; gradients are returned per metre.
"""

from __future__ import annotations

from numba import njit


@njit(inline="always", cache=True)
def table(values, t0, step, t):
    """Linear interpolation in a uniform table, clamped at both ends."""
    u = (t - t0) / step
    if u <= 0.0:
        return values[0]
    last = values.shape[0] - 1
    if u >= last:
        return values[last]
    k = int(u)
    f = u - k
    return values[k] * (1.0 - f) + values[k + 1] * f


@njit(inline="always", cache=True)
def near_box(x0, x1, x2, lo, hi, margin):
    """True if the point lies inside the box grown by ``margin`` (the box's walls can act on it)."""
    return (lo[0] - margin <= x0 <= hi[0] + margin and lo[1] - margin <= x1 <= hi[1] + margin
            and lo[2] - margin <= x2 <= hi[2] + margin)


@njit(inline="always", cache=True)
def box_clamps(p0, p1, p2, boxes, c, margin):
    """True if box container c must put the point (p0, p1, p2) back: the point is outside the box
    but within ``margin`` of it (inside, or farther out, its walls do nothing). Scalars only, so a
    point inside the box (almost every particle) is done after the first test."""
    l0 = boxes[c, 0, 0]
    l1 = boxes[c, 0, 1]
    l2 = boxes[c, 0, 2]
    h0 = boxes[c, 1, 0]
    h1 = boxes[c, 1, 1]
    h2 = boxes[c, 1, 2]
    if l0 <= p0 <= h0 and l1 <= p1 <= h1 and l2 <= p2 <= h2:
        return False  # inside: nothing to put back
    return (l0 - margin <= p0 <= h0 + margin and l1 - margin <= p1 <= h1 + margin
            and l2 - margin <= p2 <= h2 + margin)


@njit(inline="always", cache=True)
def clamp_into_boxes(x, v, i, boxes, margin, friction, bounce):
    """Put particle i back on the wall of every box container it crossed: the normal velocity into
    the wall is reversed and scaled by the box's bounce (0: removed), the other components scaled
    by 1 - friction. The last line of defence against leaks when pressure alone did not stop it;
    the solvers call it after their drift. A particle inside a box (almost every one) leaves it at
    the first test, on scalars (a fifth of the WCSPH drift pass and the hybrid's advance)."""
    p0 = x[i, 0]
    p1 = x[i, 1]
    p2 = x[i, 2]
    for c in range(boxes.shape[0]):
        if not box_clamps(p0, p1, p2, boxes, c, margin):
            continue
        hit = False
        for k in range(3):
            lo = boxes[c, 0, k]
            hi = boxes[c, 1, k]
            if x[i, k] < lo:
                x[i, k] = lo
                if v[i, k] < 0.0:
                    v[i, k] *= -bounce[c]
                hit = True
            elif x[i, k] > hi:
                x[i, k] = hi
                if v[i, k] > 0.0:
                    v[i, k] *= -bounce[c]
                hit = True
        if hit and friction[c] > 0.0:
            for k in range(3):
                if not (x[i, k] == boxes[c, 0, k] or x[i, k] == boxes[c, 1, k]):
                    v[i, k] *= 1.0 - friction[c]
        p0 = x[i, 0]
        p1 = x[i, 1]
        p2 = x[i, 2]


@njit(inline="always", cache=True)
def clamp_point_into_boxes(p0, p1, p2, boxes, margin):
    """The point (p0, p1, p2) put back on the wall of every box container it crossed, positions only
    (a solver that derives the velocity from the move, as PBF's position corrections do, calls this
    instead of :func:`clamp_into_boxes`); the same inside and margin tests as that function. Returns
    the point as three scalars of the boxes' type."""
    for c in range(boxes.shape[0]):
        if not box_clamps(p0, p1, p2, boxes, c, margin):
            continue
        p0 = min(max(p0, boxes[c, 0, 0]), boxes[c, 1, 0])
        p1 = min(max(p1, boxes[c, 0, 1]), boxes[c, 1, 1])
        p2 = min(max(p2, boxes[c, 0, 2]), boxes[c, 1, 2])
    return p0, p1, p2


@njit(inline="always", cache=True)
def near_walls(x0, x1, x2, boxes, support):
    """True if a wall of some box lies within ``support`` of the point (elsewhere every wall term is
    exactly zero, so only such particles need the wall queries)."""
    for b in range(boxes.shape[0]):
        lo = boxes[b, 0]
        hi = boxes[b, 1]
        if near_box(x0, x1, x2, lo, hi, support):
            if (x0 - lo[0] < support or hi[0] - x0 < support or x1 - lo[1] < support or hi[1] - x1 < support
                    or x2 - lo[2] < support or hi[2] - x2 < support):
                return True
    return False


@njit(inline="always", cache=True)
def wall_mass(x0, x1, x2, boxes, support, inv_scale, t0, step, psi):
    """1 - prod_k (1 - psi_k) over the walls of every box within ``support`` (dimensionless)."""
    free = 1.0
    for b in range(boxes.shape[0]):
        lo = boxes[b, 0]
        hi = boxes[b, 1]
        if not near_box(x0, x1, x2, lo, hi, support):
            continue
        for k in range(3):
            xk = x0 if k == 0 else (x1 if k == 1 else x2)
            d = xk - lo[k]
            if d < support:
                free *= 1.0 - table(psi, t0, step, d * inv_scale)
            d = hi[k] - xk
            if d < support:
                free *= 1.0 - table(psi, t0, step, d * inv_scale)
    return 1.0 - free


@njit(inline="always", cache=True)
def _wall_factor(d, support, inv_scale, t0, step, psi, dpsi):
    """(1 - psi, dpsi) of a wall at distance d; (1, 0) beyond the support, without a lookup."""
    if d >= support:
        return 1.0, 0.0
    t = d * inv_scale
    return 1.0 - table(psi, t0, step, t), table(dpsi, t0, step, t)


@njit(inline="always", cache=True)
def wall_free_gradient(x0, x1, x2, boxes, support, inv_scale, t0, step, psi, dpsi):
    """Free fraction F = 1 - :func:`wall_mass` and the gradient of the wall mass (-grad F, 1/m) with
    respect to the particle position, in one pass over the walls: ``(F, g0, g1, g2)``.

    F = prod_b F_b is the product of the boxes' free fractions F_b = prod_k (1 - psi_k); grad F =
    sum_b grad F_b prod_(c != b) F_c, the product rule across boxes as well as within one
    (accumulated box by box: G <- G F_b + F grad F_b, F <- F F_b). A sum of the boxes' own gradients
    would not be the gradient of the mass the density adds where the walls of two boxes act on a
    particle: two boxes crossing at a corner would push harder than one box's corner
    (tests/test_walls.py checks both against a brute-force sum over the wall lattice). ``dpsi`` is
    d psi / d t; it is <= 0, so the gradient points from the liquid into the wall. A wall farther than
    the support is skipped, as in :func:`wall_mass` (most particles near a wall are near one of a
    box's six): F equals 1 - :func:`wall_mass` up to the rounding of the products' order.
    """
    free = 1.0
    g0 = 0.0  # grad F so far
    g1 = 0.0
    g2 = 0.0
    for b in range(boxes.shape[0]):
        lo = boxes[b, 0]
        hi = boxes[b, 1]
        if not near_box(x0, x1, x2, lo, hi, support):
            continue
        # l_k = 1 - psi(x_k - lo_k), u_k = 1 - psi(hi_k - x_k) and their slopes dl_k, du_k (of psi)
        l0, dl0 = _wall_factor(x0 - lo[0], support, inv_scale, t0, step, psi, dpsi)
        l1, dl1 = _wall_factor(x1 - lo[1], support, inv_scale, t0, step, psi, dpsi)
        l2, dl2 = _wall_factor(x2 - lo[2], support, inv_scale, t0, step, psi, dpsi)
        u0, du0 = _wall_factor(hi[0] - x0, support, inv_scale, t0, step, psi, dpsi)
        u1, du1 = _wall_factor(hi[1] - x1, support, inv_scale, t0, step, psi, dpsi)
        u2, du2 = _wall_factor(hi[2] - x2, support, inv_scale, t0, step, psi, dpsi)
        # d/dx_k of (l_k u_k) * (the other factors): d l_k / dx_k = -dpsi(x - lo), d u_k / dx_k = +dpsi(hi - x)
        d0 = inv_scale * l1 * u1 * l2 * u2 * (l0 * du0 - u0 * dl0)
        d1 = inv_scale * l0 * u0 * l2 * u2 * (l1 * du1 - u1 * dl1)
        d2 = inv_scale * l0 * u0 * l1 * u1 * (l2 * du2 - u2 * dl2)
        fb = l0 * u0 * l1 * u1 * l2 * u2
        g0 = g0 * fb + free * d0
        g1 = g1 * fb + free * d1
        g2 = g2 * fb + free * d2
        free *= fb
    return free, -g0, -g1, -g2


@njit(inline="always", cache=True)
def wall_gradient(x0, x1, x2, boxes, support, inv_scale, t0, step, psi, dpsi):
    """Gradient of :func:`wall_mass` with respect to the particle position, 1/m (see
    :func:`wall_free_gradient`)."""
    _, g0, g1, g2 = wall_free_gradient(x0, x1, x2, boxes, support, inv_scale, t0, step, psi, dpsi)
    return g0, g1, g2


@njit(inline="always", cache=True)
def wall_hydrostatic(x0, x1, x2, boxes, support, t0, step, tau_n, tau_t, gx, gy, gz):
    """Hydrostatic part of the wall pressure force (tables in metres), m/s^2.

    The walls' imaginary particles carry the pressure p_w + rho g . (x_j - x_i), extrapolated
    from the liquid (Adami, Hu & Adams 2012, eq. 27). Its varying part gives the acceleration -G,

        G = sum_j (m / rho0) (g . (x_j - x_i)) grad_i W_ij = (g . n) tau_n n + tau_t (g - (g . n) n)

    per wall (:func:`engine.core.kernels.wall_moment_tables`): the part of the pressure gradient that
    the truncated kernel of a particle near a wall misses. The walls are summed (near an edge the
    imaginary particles of the edge's quarter-space count twice; that region is a few per cent of
    a corner particle's kernel).
    """
    G0 = 0.0
    G1 = 0.0
    G2 = 0.0
    for b in range(boxes.shape[0]):
        lo = boxes[b, 0]
        hi = boxes[b, 1]
        if not near_box(x0, x1, x2, lo, hi, support):
            continue
        n0 = table(tau_n, t0, step, x0 - lo[0]) + table(tau_n, t0, step, hi[0] - x0)
        t0_ = table(tau_t, t0, step, x0 - lo[0]) + table(tau_t, t0, step, hi[0] - x0)
        n1 = table(tau_n, t0, step, x1 - lo[1]) + table(tau_n, t0, step, hi[1] - x1)
        t1_ = table(tau_t, t0, step, x1 - lo[1]) + table(tau_t, t0, step, hi[1] - x1)
        n2 = table(tau_n, t0, step, x2 - lo[2]) + table(tau_n, t0, step, hi[2] - x2)
        t2_ = table(tau_t, t0, step, x2 - lo[2]) + table(tau_t, t0, step, hi[2] - x2)
        G0 += gx * (n0 + t1_ + t2_)
        G1 += gy * (t0_ + n1 + t2_)
        G2 += gz * (t0_ + t1_ + n2)
    return G0, G1, G2
