"""The static model of a WCSPH bake: particle mass, speed of sound, viscosities, box walls and the
wall tables (Suárez & Susín 2006, "Mesh-Particle Model for Fluid Animation", §3; the walls after
Adami, Hu & Adams 2012), and what a bake's start needs of it: the speed of sound picked for the scene
(:func:`auto_sound_speed`) and the liquid's hydrostatic density at rest (:func:`hydrostatic_density` at
:func:`liquid_depth`). The substep that uses it is :mod:`engine.solvers.wcsph`; the hybrid solver's SPH
part is one too.
"""

from __future__ import annotations

import math
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


def hydrostatic_density(depth, rho0: float, c0: float, g: float) -> np.ndarray:
    """Density of liquid at rest ``depth`` metres under its free surface, kg/m^3 (float64):
    rho0 (1 + rho0 g depth / B)^(1 / gamma), B = rho0 c0^2 / gamma, the Tait equation (Suárez & Susín 2006, eq. 6)
    solved for p = rho0 g depth."""
    b = rho0 * c0 * c0 / GAMMA
    return rho0 * (1.0 + rho0 * g * np.maximum(np.asarray(depth, dtype=np.float64), 0.0) / b) ** (1.0 / GAMMA)


def liquid_depth(x: np.ndarray, gravity: np.ndarray, dx: float) -> np.ndarray:
    """Depth of every particle under the free surface of the liquid above it, m (float64): particles
    are grouped in columns of width dx along gravity; in each column a run of particles without a
    gap wider than 1.5 dx shares one surface, dx / 2 above its highest particle (a drop above a
    pool is a run of its own, and the pool's depth starts again under the gap). Zeros without gravity.
    """
    x = np.asarray(x, dtype=np.float64)
    g = np.asarray(gravity, dtype=np.float64)
    n = len(x)
    gn = float(np.linalg.norm(g))
    if n == 0 or gn == 0.0:
        return np.zeros(n)
    down = g / gn
    e1 = np.cross(down, [1.0, 0.0, 0.0] if abs(down[0]) < 0.9 else [0.0, 1.0, 0.0])
    e1 /= np.linalg.norm(e1)
    e2 = np.cross(down, e1)
    height = -(x @ down)
    c1 = np.floor(x @ e1 / dx).astype(np.int64)
    c2 = np.floor(x @ e2 / dx).astype(np.int64)
    order = np.lexsort((-height, c2, c1))  # by column, then from the top down
    hs, k1, k2 = height[order], c1[order], c2[order]
    new_run = np.ones(n, dtype=bool)
    new_run[1:] = (k1[1:] != k1[:-1]) | (k2[1:] != k2[:-1]) | (hs[:-1] - hs[1:] > 1.5 * dx)
    run_top = hs[np.flatnonzero(new_run)][np.cumsum(new_run) - 1]
    depth = np.empty(n)
    depth[order] = run_top - hs + 0.5 * dx
    return depth


def auto_sound_speed(x: np.ndarray, v: np.ndarray, gravity: np.ndarray, boxes: np.ndarray,
                     collider_speed: float = 0.0) -> float:
    """Ten times the fastest speed the liquid can reach: c0 = 10 (sqrt(2 |g| H) + |v0|max + |v_c|max).

    H is the drop from the highest particle to the lowest point of the liquid or its containers,
    measured along gravity; v_c the fastest collider surface. Ten times the flow speed keeps
    density variations near 1 % (Monaghan 1994).
    """
    g = float(np.linalg.norm(gravity))
    vmax = float(np.sqrt(np.max(np.sum(v.astype(np.float64) ** 2, axis=1)))) if len(v) else 0.0
    fall = 0.0
    if g > 0.0 and len(x):
        down = gravity / g
        height = -(x.astype(np.float64) @ down)
        low = height.min()
        if len(boxes):
            corners = np.array([[b[i, 0], b[j, 1], b[k, 2]] for b in boxes for i in (0, 1)
                                for j in (0, 1) for k in (0, 1)])
            low = min(low, float((-(corners @ down)).min()))
        fall = math.sqrt(2.0 * g * max(height.max() - low, 0.0))
    return max(10.0 * (fall + vmax + collider_speed), 1.0)
