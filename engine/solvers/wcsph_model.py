"""The static model of a WCSPH bake: particle mass, speed of sound, viscosities, box walls and the
wall tables (Suárez & Susín 2006, "Mesh-Particle Model for Fluid Animation", §3; the walls after
Adami, Hu & Adams 2012). The substep that uses it is :mod:`engine.solvers.wcsph`; the hybrid solver's
SPH part is one too.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from ..core.kernels import half_space_tables, lattice_sum, wall_moment_tables
from .liquid_forces import LiquidTable, WallResponse
from .sph import GAMMA

#: How the density is found: "continuity" integrates d rho / dt (Suárez & Susín 2006, eq. 5), "summation" sums the
# kernel.
DENSITY_MODES = ("continuity", "summation")
DEFAULT_DENSITY = "continuity"


@dataclass(frozen=True)
class WCSPHModel:
    """Static parameters of one WCSPH bake (SI units)."""

    h: float              # smoothing length, m (support 2h)
    dx: float             # particle spacing, m
    mass: float           # particle mass, kg
    rho0: float           # rest density, kg/m^3
    c0: float             # speed of sound, m/s
    alpha: float          # artificial viscosity coefficient
    nu: float             # kinematic viscosity, m^2/s
    gravity: np.ndarray   # (3,) float64, m/s^2
    boxes: np.ndarray     # (K, 2, 3) float64, inner lower/upper corners of box containers, m
    box_friction: np.ndarray  # (K,) fraction of tangential velocity lost on contact with each box's walls
    box_bounce: np.ndarray    # (K,) fraction of the normal velocity kept, reversed, on contact
    cfl: float
    table_d0: float       # first tabulated wall distance, m (= -2h)
    table_step: float     # spacing of the wall tables, m
    psi: np.ndarray       # (S,) float64, kernel mass of the solid half-space at distance d
    dpsi: np.ndarray      # (S,) float64, its derivative, 1/m
    tau_n: np.ndarray     # (S,) float64, normal gradient moment of the wall lattice (kernels.wall_moment_tables)
    tau_t: np.ndarray     # (S,) float64, tangential gradient moment of the wall lattice
    density: str = DEFAULT_DENSITY  # one of DENSITY_MODES: "continuity" (Suárez & Susín 2006, eq. 5) or "summation"
    delta: float = 0.1    # density-diffusion coefficient of the continuity mode (Molteni & Colagrossi 2009)
    liquid: LiquidTable | None = None   # the liquids; None: the explicit laminar term of nu (the hybrid's)
    walls: WallResponse | None = None   # no-slip or slip per box and collider (with ``liquid``)

    @property
    def pressure_constant(self) -> float:
        """P0 = rho0 c0^2 / gamma of the Tait equation (Suárez & Susín 2006, eq. 6), Pa."""
        return self.rho0 * self.c0 * self.c0 / GAMMA


def make_model(*, dx, h_factor, rho0, c0, alpha, nu, gravity, boxes, friction=0.0, bounce=0.0,
               cfl, density=DEFAULT_DENSITY, delta=0.1, liquid: LiquidTable | None = None,
               walls: WallResponse | None = None) -> WCSPHModel:
    """``friction`` and ``bounce``: one value for every box, or one per box. ``density``: one of
    :data:`DENSITY_MODES`; ``delta``: the density-diffusion coefficient of the continuity mode."""
    if density not in DENSITY_MODES:
        raise ValueError(f"density must be one of {', '.join(DENSITY_MODES)}, not {density!r}")
    if not delta >= 0.0:
        raise ValueError(f"delta must be >= 0, not {delta!r}")
    h = h_factor * dx
    mass = rho0 / lattice_sum("cubic", h, dx)
    d, psi, dpsi = half_space_tables("cubic", h, dx)
    _, _, tau_n, tau_t = wall_moment_tables("cubic", h, dx)
    boxes = np.asarray(boxes, dtype=np.float64).reshape(-1, 2, 3)
    k = boxes.shape[0]
    return WCSPHModel(h=h, dx=dx, mass=mass, rho0=rho0, c0=c0, alpha=alpha, nu=nu,
                      gravity=np.asarray(gravity, dtype=np.float64).reshape(3), boxes=boxes,
                      box_friction=np.broadcast_to(np.asarray(friction, dtype=np.float64), (k,)).copy(),
                      box_bounce=np.broadcast_to(np.asarray(bounce, dtype=np.float64), (k,)).copy(), cfl=cfl,
                      table_d0=float(d[0]), table_step=float(d[1] - d[0]),
                      psi=psi, dpsi=dpsi, tau_n=tau_n, tau_t=tau_t, density=density, delta=float(delta),
                      liquid=liquid, walls=walls if walls is not None or liquid is None else WallResponse.none(k))
