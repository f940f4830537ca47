"""Monaghan's elliptical drop, WCSPH, against the semi-analytic solution.

Reference: ``tests/data/elliptical_drop_monaghan1994_analytic.csv`` (Monaghan 1994,
J. Comput. Phys. 110, 399-406; see tests/data/README.md): a 2D unit circle of inviscid liquid with no
gravity and no walls, initial velocity u = -100 x, v = +100 y (1/s), p = 0 on the free surface.
It stays an ellipse with semi-axes a(t) along x and b(t) = 1 / a(t) along y; at t = 0.0076 s,
a = 0.5143 and b = 1.9445.

Scene: the engine is 3D and has no periodic boundaries, so the 2D problem is a layer of particles
one spacing thick, periodic in z: the real layer (a disc of the square lattice of spacing dx, 1/dx
= 20) and 2L image layers on each side at z = k dx, L the number of layers within the kernel
support. The images are copies of the real layer and are written back from it (position, velocity,
acceleration, density, pressure) after every substep, so in the next substep the real particles
see exact periodic images up to L layers away, and those images' own densities are complete (their
neighbours reach L layers further). A slab between two free-slip box walls would be cheaper, but
the continuous wall adds the kernel mass of a full half-space behind the wall, also beyond the
drop's free edge, where the 2D problem has none. A long cylinder is no option either: its free ends
let the liquid escape along z within a sound crossing (c0 t = 7.6 m here).

Solver settings: continuity density (the default), the automatic sound speed (10 x the fastest
initial speed, 100 m/s: c0 = 1000 m/s; pysph uses 1400), alpha = 0.02 (the default), nu = 0, CFL
0.3 (the default), h = 1.6 dx. The smoothing length is larger than the default 1.2 dx on purpose:
the flow stretches the particle lattice affinely to spacings 0.51 dx along x and 1.94 dx along y.
The summation density of such a lattice at equal area reads 14.6 % high at h = 1.2 dx (8.9 % at
1.3, 2.1 % at 1.5, 0.8 % at 1.6, lattice sums of the cubic spline), and the excess pressure holds
the drop open (seen at h = 1.2 dx, 1/dx = 20: a +12.7 %, a b - 1 = +13 %). Continuity density does
not escape it: its divergence sum_j m v_ij . grad W_ij on that lattice weighs the compression
along x more than the stretching along y (the kernel-gradient moments of the two axes differ), so
the density falls, the pressure is clamped at zero and the drop opens just as much (h = 1.2 dx: a
+14.3 %, a b - 1 = +15 %). Negative pressures stay clamped at zero: allowing them (no other
change) at h = 1.5 dx let the surface particles, whose truncated kernel sums read ~20 % low, pull
together and the tips fly off (a from the extremes +45 %).
"""

import io
import math
import os

import numpy as np
import pytest
from numpy.testing import assert_allclose

from engine.core.particles import Particles
from engine.solvers import wcsph

REFERENCE = os.path.join(os.path.dirname(__file__), "data", "elliptical_drop_monaghan1994_analytic.csv")
T_END = 0.0076
A0 = 100.0  # initial strain rate, 1/s


def _reference(t):
    with open(REFERENCE, encoding="utf-8") as fh:
        text = "".join(line for line in fh if not line.startswith("#"))
    ref = np.genfromtxt(io.StringIO(text), delimiter=",", names=True)
    return float(np.interp(t, ref["t_s"], ref["a_semi_x"])), float(np.interp(t, ref["t_s"], ref["b_semi_y"]))


def _periodic_drop(res, h_factor):
    """Solver for the drop at spacing 1 / res, periodic in z; returns (solver, real count, sync)."""
    dx = 1.0 / res
    r = np.arange(-res, res + 1) * dx
    gx, gy = np.meshgrid(r, r, indexing="ij")
    inside = gx ** 2 + gy ** 2 < 1.0 - 1e-9
    xy = np.stack([gx[inside], gy[inside]], axis=1)
    n = xy.shape[0]
    within = int(math.ceil(2.0 * h_factor) - 1)  # layers k dx < 2h
    layers = [0] + [k for k in range(-2 * within, 2 * within + 1) if k != 0]
    x = np.concatenate([np.column_stack([xy, np.full(n, k * dx)]) for k in layers])
    v = np.tile(np.column_stack([-A0 * xy[:, 0], A0 * xy[:, 1], np.zeros(n)]), (len(layers), 1))
    source = np.tile(np.arange(n), len(layers))        # particle id -> id of its real particle
    z_shift = np.repeat(np.array(layers, dtype=np.float64) * dx, n).astype(np.float32)
    c0 = wcsph.auto_sound_speed(x[:n], v[:n], np.zeros(3), np.zeros((0, 2, 3)))
    model = wcsph.make_model(dx=dx, h_factor=h_factor, rho0=1000.0, c0=c0, alpha=0.02, nu=0.0,
                             gravity=[0.0, 0.0, 0.0], boxes=np.zeros((0, 2, 3)), cfl=0.3)
    solver = wcsph.WCSPHSolver(model, Particles.create(x, v, 1000.0))

    def sync():
        """Copy the real layer onto its images (the solver reorders particles: go through the ids)."""
        pt = solver.particles
        where = np.empty(len(pt), dtype=np.int64)
        where[pt.id] = np.arange(len(pt))
        src = where[source]
        for arr in (pt.v, pt.a, pt.rho, pt.p, solver.rho_liquid):
            if len(arr):  # rho_liquid: continuity density only
                arr[where] = arr[src]
        pt.x[where, :2] = pt.x[src, :2]
        pt.x[where, 2] = pt.x[src, 2] + z_shift

    sync()
    return solver, n, sync


@pytest.mark.slow  # 9 s on the idle 2-core machine, 23 s when it is shared
def test_wcsph_elliptical_drop_semi_axes_follow_monaghan():
    res = 20
    solver, n, sync = _periodic_drop(res, h_factor=1.6)
    pt = solver.particles

    def real_x():
        where = np.empty(len(pt), dtype=np.int64)
        where[pt.id] = np.arange(len(pt))
        return pt.x[where[:n]].astype(np.float64)

    xy0 = real_x()[:, :2]
    t = 0.0
    while t < T_END - 1e-12:
        dt = min(solver.stable_dt(), T_END - t)
        solver.step(dt)
        sync()
        t += dt
    x = real_x()
    xy = x[:, :2]
    a_ref, b_ref = _reference(T_END)

    # Semi-axes from second moments, relative to the initial lattice: the exact motion is the
    # affine map (x, y) -> (a x, y / a), under which <x^2> scales by exactly a^2 and <y^2> by b^2,
    # whatever the lattice's ragged edge (the uniform-ellipse formula <x^2> = a^2 / 4 would carry
    # that edge's discretisation error, 0.3 % here). Every particle counts, so one stray tip
    # particle cannot decide the result. The centre stays at the origin by symmetry.
    a_m = math.sqrt(np.mean(xy[:, 0] ** 2) / np.mean(xy0[:, 0] ** 2))
    b_m = math.sqrt(np.mean(xy[:, 1] ** 2) / np.mean(xy0[:, 1] ** 2))
    msg = f"a = {a_m:.4f} (ref {a_ref:.4f}), b = {b_m:.4f} (ref {b_ref:.4f})"
    # rtol 2 %: the acceptance (the guide proposes 1-2 %). Seen: a +0.75 %, b -0.24 % at
    # 1/dx = 20 (summation density: a +0.76 %, b -0.31 %; at 1/dx = 30 a +0.89 %, b -0.20 %). atol 0:
    # the bound is relative.
    assert_allclose(a_m, a_ref, rtol=0.02, atol=0.0, err_msg=msg)
    assert_allclose(b_m, b_ref, rtol=0.02, atol=0.0, err_msg=msg)
    # The area is conserved (incompressible limit): a b = 1 within 1 % (weak compressibility at
    # c0 = 10 |v|max allows density changes near 1 %; seen: +0.5 %, summation +0.4 %). atol 0.
    assert_allclose(a_m * b_m, 1.0, rtol=0.01, atol=0.0, err_msg=msg)

    # Extremes, as pysph measures them: the largest |x| and |y| plus half a spacing (particles are
    # cell centres). A single tip particle decides these, so the tolerance is one spacing more:
    # rtol 2 % plus atol dx = 0.05 (seen: a +1.1 %, b -1.2 %; summation a +1.9 %, b -2.0 %).
    dx = 1.0 / res
    assert_allclose(np.abs(xy[:, 0]).max() + 0.5 * dx, a_ref, rtol=0.02, atol=dx, err_msg=msg)
    assert_allclose(np.abs(xy[:, 1]).max() + 0.5 * dx, b_ref, rtol=0.02, atol=dx, err_msg=msg)

    # The drop stayed one layer: the images kept the real particles in their plane (z = 0 up to
    # single-precision rounding; atol a thousandth of a spacing, rtol 0 as the reference is 0).
    assert np.all(np.isfinite(x))
    assert_allclose(x[:, 2], 0.0, rtol=0.0, atol=1e-3 * dx)
