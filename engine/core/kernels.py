"""Smoothing kernels, as scalar numba functions of the distance r and smoothing length h.

Every kernel has compact support of radius 2h (so one neighbour-grid cell of edge 2h holds all
interactions) and integrates to one over 3D space. ``*_dwdr`` is the radial derivative dW/dr;
the gradient with respect to x_i is ``dwdr * (x_i - x_j) / r``.

* cubic spline, Monaghan 1992 (the default for WCSPH density and forces);
* the kernel of Suárez & Susín 2006, "Mesh-Particle Model for Fluid Animation" (Eurographics 2006),
  eq. 7: W = 15 / (pi (4h)^3) (2 - r/h)^3
  (a "spiky" kernel whose gradient does not vanish at r -> 0, avoiding clustering);
* poly6 of Mueller et al. 2003 (as in Gard & Bäck 2017, "Water Simulation for Maya using Smoothed
  Particle Hydrodynamics", eq. 3), rescaled to support 2h.
"""

from __future__ import annotations

import math

import numpy as np
from numba import njit

#: All kernels vanish at and beyond SUPPORT * h.
SUPPORT = 2.0

#: Normalisation of the cubic spline in 3D times h^3: W = CUBIC_SIGMA w(q) / h^3 (Monaghan 1992).
CUBIC_SIGMA = 1.0 / math.pi


@njit(inline="always", cache=True)
def cubic_shape(q):
    """The cubic B-spline's shape (Monaghan 1992), the one formula every kernel sum uses:
    w(q) = (2 - q)+^3 / 4 - (1 - q)+^3, q = r / h, with W = w(q) / (pi h^3) (:data:`CUBIC_SIGMA`);
    w(0) = 1, zero from q = 2 on.

    Written without branches (it equals 1 - 1.5 q^2 + 0.75 q^3 for q < 1): neighbour distances are
    random, so a two-branch form mispredicts about every other pair. :func:`cubic_shape32` is the same
    formula in single precision for the float32 pair loops.
    """
    t = max(2.0 - q, 0.0)
    s = max(1.0 - q, 0.0)
    return 0.25 * t * t * t - s * s * s


@njit(inline="always", cache=True)
def cubic_dshape(q):
    """dw/dq of :func:`cubic_shape` (<= 0; 0 at q = 0 and from q = 2 on)."""
    t = max(2.0 - q, 0.0)
    s = max(1.0 - q, 0.0)
    return -0.75 * t * t + 3.0 * s * s


@njit(inline="always", cache=True)
def cubic_w(r, h):
    """Cubic B-spline kernel W(r, h) = :func:`cubic_shape` (r / h) / (pi h^3), 1/m^3."""
    return cubic_shape(r / h) / (math.pi * h * h * h)


@njit(inline="always", cache=True)
def cubic_w_scaled(r, inv_h, sigma):
    """:func:`cubic_w` with 1/h and sigma = 1/(pi h^3) computed once by the caller: no division in a hot
    loop (equal to it within rounding)."""
    return sigma * cubic_shape(r * inv_h)


@njit(inline="always", cache=True)
def cubic_dwdr(r, h):
    """dW/dr of :func:`cubic_w` (negative inside the support), 1/m^4."""
    return cubic_dshape(r / h) / (math.pi * h * h * h * h)


@njit(cache=True)
def cubic_shape_table(q):
    """:func:`cubic_shape` at every entry of the float64 array ``q`` (for tables built in Python)."""
    out = np.empty(q.shape[0], dtype=np.float64)
    for i in range(q.shape[0]):
        out[i] = cubic_shape(q[i])
    return out


@njit(inline="always", cache=True)
def spiky_w(r, h):
    """Suárez & Susín 2006, eq. 7: 15 / (pi (4h)^3) (2 - r/h)^3 for r <= 2h."""
    if r >= 2.0 * h:
        return 0.0
    t = 2.0 - r / h
    return 15.0 / (math.pi * 64.0 * h * h * h) * t * t * t


@njit(inline="always", cache=True)
def spiky_dwdr(r, h):
    """dW/dr of :func:`spiky_w`; tends to -45/(16 pi h^4) at r -> 0, which keeps particles apart."""
    if r >= 2.0 * h:
        return 0.0
    t = 2.0 - r / h
    return -45.0 / (math.pi * 64.0 * h * h * h * h) * t * t


@njit(inline="always", cache=True)
def poly6_w(r, h):
    """Mueller 2003 poly6 (Gard & Bäck 2017, eq. 3) with support H = 2h: 315/(64 pi H^9) (H^2 - r^2)^3."""
    big = 2.0 * h
    if r >= big:
        return 0.0
    t = big * big - r * r
    return 315.0 / (64.0 * math.pi * big ** 9) * t * t * t


@njit(inline="always", cache=True)
def poly6_dwdr(r, h):
    """dW/dr of :func:`poly6_w`."""
    big = 2.0 * h
    if r >= big:
        return 0.0
    t = big * big - r * r
    return -6.0 * r * 315.0 / (64.0 * math.pi * big ** 9) * t * t


KERNELS = {
    "cubic": (cubic_w, cubic_dwdr),
    "spiky": (spiky_w, spiky_dwdr),
    "poly6": (poly6_w, poly6_dwdr),
}


def lattice_sum(kernel: str, h: float, dx: float) -> float:
    """Sum of W over a simple cubic lattice of spacing dx around one site (the site included).

    Used to pick the particle mass so that a filled lattice has exactly the rest density:
    m = rho0 / lattice_sum (the discrete sum differs from the integral by a few per cent).
    """
    w, _ = KERNELS[kernel]
    n = int(math.ceil(SUPPORT * h / dx)) + 1
    rng = np.arange(-n, n + 1) * dx
    gx, gy, gz = np.meshgrid(rng, rng, rng, indexing="ij")
    r = np.sqrt(gx * gx + gy * gy + gz * gz).ravel()
    return float(sum(w(float(ri), h) for ri in r))


def half_space_tables(kernel: str, h: float, dx: float, samples: int = 512):
    """Kernel mass of a solid wall, for boundary walls filled with an imaginary particle lattice.

    For a particle at signed distance d from a flat wall (d > 0 on the liquid side), ``psi(d)`` is
    the normalised kernel sum over the lattice sites of spacing dx that continue the liquid's
    lattice behind the wall (layers at d + (k + 1/2) dx, k = 0, 1, ...):

        psi(d) = (1 / L) sum_k P(d + (k + 1/2) dx),   P(s) = sum_(t in 2D lattice) W(sqrt(s^2 + |t|^2)),

    with L = :func:`lattice_sum`. A liquid particle of a resting lattice at d = dx/2 then gets
    exactly the rest density (the continuous half-space integral would be off by about 2 % at
    h = 1.2 dx because the liquid's own sum is discrete). ``dpsi`` = d psi / d d.

    Returns
    -------
    d : ndarray, shape (samples,), float64, metres, uniform on [-2h, 2h]
    psi : ndarray, shape (samples,), dimensionless, decreasing to 0 at d = 2h
    dpsi : ndarray, shape (samples,), 1/m, <= 0
    """
    w, _ = KERNELS[kernel]
    big = SUPPORT * h
    n = int(math.ceil(big / dx)) + 1
    t = np.arange(-n, n + 1) * dx
    tx, ty = np.meshgrid(t, t, indexing="ij")
    t2 = (tx * tx + ty * ty).ravel()
    t2 = t2[t2 < big * big]

    def plane(s):
        r = np.sqrt(s * s + t2)
        return sum(w(float(ri), h) for ri in r[r < big])

    d = np.linspace(-big, big, samples)
    norm = lattice_sum(kernel, h, dx)
    psi = np.empty(samples)
    for i, di in enumerate(d):
        total = 0.0
        k = 0
        while True:
            s = di + (k + 0.5) * dx
            if s >= big:
                break
            total += plane(abs(s))
            k += 1
        psi[i] = total / norm
    # Behind the wall (d < 0) the layer sums are not monotone (the particle passes through the
    # imaginary layers). Extend psi by point reflection about d = 0 instead, so the wall force
    # keeps growing with penetration: psi(-d) = 2 psi(0) - psi(d).
    mid = samples // 2
    psi0 = np.interp(0.0, d, psi)
    neg = d < 0.0
    psi[neg] = 2.0 * psi0 - np.interp(-d[neg], d[mid:], psi[mid:])
    dpsi = np.gradient(psi, d)
    return d, psi, dpsi


def wall_moment_tables(kernel: str, h: float, dx: float, samples: int = 512):
    """Moments of the imaginary wall lattice of :func:`half_space_tables`, for hydrostatic walls.

    A particle at distance d from a flat wall with unit normal n (pointing into the liquid) sees
    the wall sites x_j = x_i - s n - t (depth s = d + (k + 1/2) dx behind the particle, t in the
    wall's plane). With m / rho0 = 1 / L (L = :func:`lattice_sum`) this returns, per unit of the
    lattice:

        mu(d)    = (1 / L) sum_j W_ij s                  first moment, m: sum_j m W_ij (x_j - x_i) = -rho0 mu n
        tau_n(d) = -(1 / L) sum_j W'(r) s^2 / r          normal gradient moment (>= 0)
        tau_t(d) = -(1 / L) sum_j W'(r) t_e^2 / r        tangential gradient moment, per in-plane axis e

    so that sum_j (m / rho0) (c . (x_j - x_i)) grad_i W_ij = (c . n) tau_n n + tau_t (c - (c . n) n)
    for any constant vector c. These close the pressure gradient of a particle near a wall whose
    imaginary particles carry a hydrostatically extrapolated pressure (Adami, Hu & Adams 2012,
    eq. 27); deep in the liquid tau_n and tau_t tend to the full lattice moment (0.98 for the
    cubic spline at h = 1.2 dx). For d < 0 (a particle inside the wall) the values at d = 0 are used.

    Returns
    -------
    d : ndarray, shape (samples,), float64, metres, uniform on [-2h, 2h] (the grid of half_space_tables)
    mu : ndarray, shape (samples,), metres
    tau_n, tau_t : ndarray, shape (samples,), dimensionless
    """
    w, dw = KERNELS[kernel]
    big = SUPPORT * h
    n = int(math.ceil(big / dx)) + 1
    t = np.arange(-n, n + 1) * dx
    tx, ty = np.meshgrid(t, t, indexing="ij")
    tx = tx.ravel()
    t2 = tx * tx + (ty * ty).ravel()
    keep = t2 < big * big
    tx2, t2 = tx[keep] ** 2, t2[keep]
    norm = lattice_sum(kernel, h, dx)
    d = np.linspace(-big, big, samples)
    mu = np.zeros(samples)
    tau_n = np.zeros(samples)
    tau_t = np.zeros(samples)
    for i, di in enumerate(d):
        di = max(di, 0.0)
        k = 0
        while True:
            s = di + (k + 0.5) * dx
            if s >= big:
                break
            r = np.sqrt(s * s + t2)
            inside = (r < big) & (r > 0.0)
            for rj, txj in zip(r[inside], tx2[inside]):
                wj = w(float(rj), h)
                gj = dw(float(rj), h) / rj
                mu[i] += wj * s
                tau_n[i] -= gj * s * s
                tau_t[i] -= gj * txj
            k += 1
    return d, mu / norm, tau_n / norm, tau_t / norm


@njit(inline="always", cache=True)
def cubic_shape32(q):
    """:func:`cubic_shape` in single precision (float32 in, float32 out), for the pair loops of the
    solvers, which run in float32 vector registers; the tests compare it with :func:`cubic_shape`."""
    t = max(np.float32(2.0) - q, np.float32(0.0))
    s = max(np.float32(1.0) - q, np.float32(0.0))
    return np.float32(0.25) * t * t * t - s * s * s


@njit(inline="always", cache=True)
def cubic_dshape32(q):
    """:func:`cubic_dshape` in single precision (dW/dr = dw/dq / (pi h^4)), <= 0; 0 at q = 0."""
    t = max(np.float32(2.0) - q, np.float32(0.0))
    s = max(np.float32(1.0) - q, np.float32(0.0))
    return np.float32(-0.75) * t * t + np.float32(3.0) * s * s
