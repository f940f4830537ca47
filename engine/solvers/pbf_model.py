"""The static model of a PBF bake: per-resolution masses, smoothing lengths and constraint
stiffness, the scales of the legacy surface pull kappa (Alduán, Tena & Otaduy 2015, "Efficient and
Robust Position-Based Fluids for VFX", eq. 3-4 and 7), and the liquids with their viscosity and
surface tension (:mod:`engine.solvers.liquid_forces`). The substep that uses it is
:mod:`engine.solvers.pbf`.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np

from ..core.kernels import cubic_dwdr, cubic_w, half_space_tables, lattice_sum
from .liquid_forces import LiquidTable, WallResponse

#: Smoothing length as a multiple of the particle spacing (see the module docstring).
H_FACTOR = 1.0

#: XSPH coefficient above which one pass is split into several (Alduán et al. 2015, §3.2).
XSPH_PASS_LIMIT = 0.5

#: Surface acceleration per unit kappa, m/s^2, shared equally by the clamp f and the cohesion g of eq. 7.
SURFACE_ACCELERATION = 9.81

@dataclass(frozen=True)
class PBFModel:
    """Static parameters of one PBF bake (SI units).

    Per-resolution arrays have shape (L,), float64; level 0 is the settings' particle spacing.
    """

    h: float                  # smoothing length of level 0, m (support 2h)
    dx: float                 # particle spacing of level 0, m
    rho0: float               # rest density, kg/m^3
    level_dx: np.ndarray      # (L,) particle spacing, m
    level_h: np.ndarray       # (L,) smoothing length, m
    level_mass: np.ndarray    # (L,) particle mass, kg
    level_k: np.ndarray       # (L,) prototype constraint stiffness k of eq. 3, m^2
    level_grad_s: np.ndarray  # (L,) |grad_i C_i| of a particle on a flat free surface, 1/m
    level_grad_c: np.ndarray  # (L,) the same with each pair weighted by W / W(dq) (cohesion), 1/m
    iterations: int           # most constraint iterations per substep
    tolerance: float          # mean relative compression that ends the iterations (0.01 = 1 %)
    beta: float               # stiffness scale of eq. 4
    xsph: float               # XSPH coefficient c of eq. 6 (total over all passes): velocity smoothing
    kappa: float              # legacy surface pull of eq. 7, dimensionless (0: off, the default)
    gravity: np.ndarray       # (3,) float64, m/s^2
    boxes: np.ndarray         # (K, 2, 3) float64, inner lower/upper corners of box containers, m
    box_friction: np.ndarray  # (K,) fraction of tangential velocity lost in contact with each box's walls
    box_bounce: np.ndarray    # (K,) fraction of the normal velocity kept, reversed, on hitting a box wall
    cfl: float                # fraction of h a particle may travel per substep
    max_dt: float             # longest substep, s
    speed_limit: float        # a particle faster than this means the simulation diverged, m/s
    table_q0: float           # first tabulated wall distance, in units of h (= -2)
    table_step: float         # spacing of the wall tables, in units of h
    psi: np.ndarray           # (S,) kernel mass of the solid half-space at distance q h
    dpsi: np.ndarray          # (S,) d psi / d q
    liquid: LiquidTable       # the bake's liquids (density, viscosity, surface tension)
    walls: WallResponse       # no-slip or slip, per box and collider

    @property
    def cell_size(self) -> float:
        """Neighbour-grid cell edge: the largest kernel support, m."""
        return 2.0 * float(np.max(self.level_h))

    @property
    def xsph_passes(self) -> int:
        """N of eq. 6: passes of at most :data:`XSPH_PASS_LIMIT` each."""
        return max(1, math.ceil(self.xsph / XSPH_PASS_LIMIT - 1e-12)) if self.xsph > 0.0 else 0

    def attraction_limit(self, dt: float) -> np.ndarray:
        """f(kappa) per level for a substep dt: upper bound of lambda, m^2 (0 = one-sided constraint)."""
        return 0.5 * SURFACE_ACCELERATION * self.kappa * dt * dt / self.level_grad_s

    def cohesion(self, dt: float) -> np.ndarray:
        """g(kappa) per level of eq. 7 for a substep dt, m^2."""
        return 0.5 * SURFACE_ACCELERATION * self.kappa * dt * dt / self.level_grad_c


def prototype_stiffness(h: float, dx: float, mass: float, rho0: float) -> float:
    """Eq. 3: k = 1 / sum_k |grad_k C_i|^2 for particle i inside a filled simple cubic lattice.

    By symmetry grad_i C_i = 0 there, so the sum runs over the neighbours k != i of
    |m grad W(x_i - x_k) / rho0|^2 (eq. 2). Returns m^2.
    """
    n = int(math.ceil(2.0 * h / dx)) + 1
    rng = np.arange(-n, n + 1) * dx
    gx, gy, gz = np.meshgrid(rng, rng, rng, indexing="ij")
    r = np.sqrt(gx * gx + gy * gy + gz * gz).ravel()
    r = r[(r > 0.0) & (r < 2.0 * h)]
    dw = np.array([cubic_dwdr(float(ri), h) for ri in r])
    return 1.0 / float(np.sum((mass / rho0 * dw) ** 2))


def surface_gradients(h: float, dx: float, mass: float, rho0: float) -> tuple[float, float]:
    """|grad_i C_i| (eq. 2) of a particle in the top layer of a half-filled lattice, 1/m, and the same
    sum with each pair weighted by W / W(h) (the cohesion term of eq. 7)."""
    n = int(math.ceil(2.0 * h / dx)) + 1
    rng = np.arange(-n, n + 1) * dx
    gx, gy, gz = np.meshgrid(rng, rng, rng, indexing="ij")
    d = np.stack([gx.ravel(), gy.ravel(), gz.ravel()], axis=1)
    d = d[d[:, 2] <= 0.0]  # neighbours x_j on and below the surface layer, d = x_j - x_i
    r = np.linalg.norm(d, axis=1)
    keep = (r > 0.0) & (r < 2.0 * h)
    d, r = d[keep], r[keep]
    dw = np.array([cubic_dwdr(float(ri), h) for ri in r])
    w = np.array([cubic_w(float(ri), h) for ri in r]) / cubic_w(h, h)
    grad = (mass / rho0 * dw / r)[:, None] * -d  # grad_i W_ij = dW/dr (x_i - x_j) / r
    return float(np.linalg.norm(grad.sum(axis=0))), float(np.linalg.norm((w[:, None] * grad).sum(axis=0)))


def make_model(*, dx, rho0, iterations, tolerance, beta, xsph, gravity, boxes, friction=0.0, bounce=0.0,
               cfl, max_dt, speed_limit, spacings=None, h_factor=H_FACTOR, kappa=0.0,
               liquid: LiquidTable | None = None, walls: WallResponse | None = None) -> PBFModel:
    """Build a :class:`PBFModel`.

    Parameters
    ----------
    dx : float
        Particle spacing of level 0, m.
    tolerance : float
        Mean relative compression that ends the iterations (0.01 = 1 %).
    spacings : sequence of float, optional
        Particle spacing of each resolution level, m; default ``(dx,)``.
    speed_limit : float
        Speed above which the driver reports divergence, m/s.
    friction, bounce : float or sequence of float
        Per box container (one value for all, or one per box).
    kappa : float
        The legacy surface pull of eq. 7 (a multiple of gravity; 0 turns it off).
    liquid : LiquidTable, optional
        The liquids; default one of density ``rho0``, no viscosity and no surface tension.
    walls : WallResponse, optional
        No-slip or slip per box and collider; default every wall no-slip.
    """
    spacings = np.asarray([dx] if spacings is None else spacings, dtype=np.float64).reshape(-1)
    if len(spacings) == 0 or len(spacings) > 255 or np.any(spacings <= 0.0):
        raise ValueError(f"spacings must hold 1 to 255 positive values, got {spacings}")
    level_h = h_factor * spacings
    # The lattice sum and psi are scale-free at a fixed h/dx: W(r, h) = W(r/h, 1) / h^3.
    norm = lattice_sum("cubic", 1.0, 1.0 / h_factor)
    level_mass = rho0 * level_h ** 3 / norm
    level_k = np.array([prototype_stiffness(h, d, m, rho0) for h, d, m in zip(level_h, spacings, level_mass)])
    grads = np.array([surface_gradients(h, d, m, rho0) for h, d, m in zip(level_h, spacings, level_mass)])
    q, psi, dpsi = half_space_tables("cubic", 1.0, 1.0 / h_factor)
    boxes = np.asarray(boxes, dtype=np.float64).reshape(-1, 2, 3)
    k = boxes.shape[0]
    return PBFModel(h=float(level_h[0]), dx=float(spacings[0]), rho0=float(rho0), level_dx=spacings,
                    level_h=level_h, level_mass=level_mass, level_k=level_k,
                    level_grad_s=grads[:, 0], level_grad_c=grads[:, 1], iterations=int(iterations),
                    tolerance=float(tolerance), beta=float(beta), xsph=float(xsph), kappa=float(kappa),
                    gravity=np.asarray(gravity, dtype=np.float64).reshape(3), boxes=boxes,
                    box_friction=np.broadcast_to(np.asarray(friction, dtype=np.float64), (k,)).copy(),
                    box_bounce=np.broadcast_to(np.asarray(bounce, dtype=np.float64),
                                               (k,)).copy(), cfl=float(cfl), max_dt=float(max_dt),
                    speed_limit=float(speed_limit), table_q0=float(q[0]), table_step=float(q[1] - q[0]),
                    psi=psi, dpsi=dpsi, liquid=liquid if liquid is not None else LiquidTable.single(rho0),
                    walls=walls if walls is not None else WallResponse.none(k))
