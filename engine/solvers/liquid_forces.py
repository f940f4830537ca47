"""The liquid's own forces beyond pressure, shared by the particle solvers: implicit viscosity
(:mod:`engine.solvers.viscosity_weiler2018`) and surface tension with adhesion
(:mod:`engine.solvers.surface_tension_akinci2013`), from each particle's liquid.

A bake's liquids are a :class:`LiquidTable`: one row per liquid (row 0 the scene's liquid, the
others the Fluid and Inflow objects that bring their own), each with its density, dynamic viscosity,
surface tension and, for lava, the temperature law of :class:`engine.settings.liquids.Liquid`. Each
particle carries its row in the particle channel ``liquid`` (uint8). :class:`LiquidForces` turns the
table into per-particle arrays at every substep and applies both terms to the velocities, after the
solver's pressure or density step, with the solver's neighbour list of the current positions.
"""

from __future__ import annotations

import dataclasses
import time
from dataclasses import dataclass

import numpy as np

from ..settings.liquids import KELVIN, MAX_VISCOSITY, VFT_A
from . import surface_tension_akinci2013 as surface_tension
from . import viscosity_weiler2018 as viscosity


@dataclass(frozen=True)
class LiquidTable:
    """The liquids of one bake, one row each (SI units; temperatures in degrees Celsius).

    Attributes
    ----------
    density, viscosity, surface_tension : ndarray, shape (L,), float64
        kg/m^3, Pa s (at ``temperature``), N/m.
    vft_b, vft_c : ndarray, shape (L,), float64
        B and C (K) of a temperature law of the viscosity, 0 for a constant one (see
        :meth:`engine.settings.liquids.Liquid.viscosity_at`).
    temperature, cooling_time, ambient : ndarray, shape (L,), float64
        C, s (0: no cooling), C.
    names : tuple of str
        A name per row, for messages and the cache manifest.
    """

    density: np.ndarray
    viscosity: np.ndarray
    surface_tension: np.ndarray
    vft_b: np.ndarray
    vft_c: np.ndarray
    temperature: np.ndarray
    cooling_time: np.ndarray
    ambient: np.ndarray
    names: tuple = ("Scene",)

    @classmethod
    def single(cls, density: float, viscosity: float = 0.0, surface_tension: float = 0.0) -> "LiquidTable":
        """One liquid of constant viscosity."""
        one = lambda value: np.array([float(value)])  # noqa: E731
        return cls(one(density), one(viscosity), one(surface_tension), one(0.0), one(0.0), one(20.0), one(0.0),
                   one(20.0))

    @classmethod
    def of(cls, rows: list, names: tuple) -> "LiquidTable":
        """A table from ``rows``: :class:`engine.settings.liquids.Liquid` objects."""
        col = lambda f: np.array([float(getattr(r, f)) for r in rows])  # noqa: E731
        return cls(col("density"), col("dynamic_viscosity"), col("surface_tension"), col("vft_b"), col("vft_c"),
                   col("temperature"), col("cooling_time"), col("ambient"), tuple(names))

    def __len__(self) -> int:
        return self.density.shape[0]

    def with_scene(self, **values) -> "LiquidTable":
        """The table with row 0 (the scene's liquid) changed: ``viscosity=`` (Pa s), ``surface_tension=``
        (N/m)."""
        changes = {}
        for name, value in values.items():
            column = getattr(self, name).copy()
            column[0] = float(value)
            changes[name] = column
        return dataclasses.replace(self, **changes)

    def with_animated(self, values: dict) -> "LiquidTable | None":
        """The table with row 0 following the animated scene settings in ``values`` (``dynamic_viscosity``,
        ``surface_tension``: :mod:`engine.scene.animation`), or None if ``values`` has neither."""
        liquid = {column: values[name] for name, column in (("dynamic_viscosity", "viscosity"),
                                                            ("surface_tension", "surface_tension")) if name in values}
        return self.with_scene(**liquid) if liquid else None

    @property
    def has_viscosity(self) -> bool:
        return bool(np.any(self.viscosity > 0.0) or np.any(self.vft_b > 0.0))

    @property
    def has_surface_tension(self) -> bool:
        return bool(np.any(self.surface_tension > 0.0))

    def particle_viscosity(self, liquid: np.ndarray | None, age: np.ndarray) -> np.ndarray:
        """Dynamic viscosity (Pa s) of each particle, (N,) float32: its liquid's, at its temperature
        after ``age`` seconds for a liquid with a temperature law."""
        n = age.shape[0]
        if liquid is None or len(self) == 1:
            mu = np.full(n, self.viscosity[0], dtype=np.float64)
            rows = np.zeros(n, dtype=np.intp) if self.vft_b[0] > 0.0 else None
        else:
            rows = liquid.astype(np.intp)
            mu = self.viscosity[rows]
        if rows is not None and np.any(self.vft_b > 0.0):
            hot = self.vft_b[rows] > 0.0
            r = rows[hot]
            a = age[hot].astype(np.float64)
            cooling = self.cooling_time[r]
            decay = np.where(cooling > 0.0, np.exp(-a / np.maximum(cooling, 1e-30)), 1.0)
            kelvin = self.ambient[r] + (self.temperature[r] - self.ambient[r]) * decay + KELVIN
            kelvin = np.maximum(kelvin, self.vft_c[r] + 1.0)
            exponent = np.minimum(VFT_A + self.vft_b[r] / (kelvin - self.vft_c[r]), np.log10(MAX_VISCOSITY))
            mu[hot] = 10.0 ** exponent
        return mu.astype(np.float32)


@dataclass(frozen=True)
class WallResponse:
    """How box containers and mesh colliders meet the liquid's viscosity and surface tension:
    ``box_no_slip`` (K,) and ``collider_no_slip`` (C,), 1.0 for a no-slip wall, 0.0 for a slip one;
    ``box_adhesion`` (K,) and ``collider_adhesion`` (C,), the walls' adhesion (0: none)."""

    box_no_slip: np.ndarray
    collider_no_slip: np.ndarray
    box_adhesion: np.ndarray | None = None
    collider_adhesion: np.ndarray | None = None

    def __post_init__(self):
        for name, like in (("box_adhesion", "box_no_slip"), ("collider_adhesion", "collider_no_slip")):
            if getattr(self, name) is None:
                object.__setattr__(self, name, np.zeros_like(np.asarray(getattr(self, like), dtype=np.float64)))

    @classmethod
    def none(cls, boxes: int = 0) -> "WallResponse":
        """Every wall no-slip (the default of the collider setting), no adhesion."""
        return cls(np.ones(boxes), np.zeros(0))


class LiquidForces:
    """Viscosity (and surface tension) of a particle solver's liquid over one substep.

    Parameters
    ----------
    h_factor : float
        The solver kernel's smoothing length in particle spacings.
    """

    def __init__(self, h_factor: float):
        self.viscosity = viscosity.ImplicitViscosity(viscosity.make_model(h_factor))
        self.surface_tension = surface_tension.SurfaceTension()
        #: seconds spent in the last :meth:`apply`
        self.seconds = 0.0

    def nbytes(self) -> int:
        return self.viscosity.nbytes() + self.surface_tension.nbytes()

    @staticmethod
    def dt_limit(table: LiquidTable, dx: float) -> float:
        """Longest substep the explicit surface tension allows at particle spacing ``dx`` (m), s."""
        return surface_tension.capillary_dt(table.density, table.surface_tension, dx)

    def apply(self, table: LiquidTable, x, v, h, vol, mass, volume0, mass0, liquid, age, dt, neighbours, boxes,
              walls: WallResponse, cset, rho=None, smoothing: float = 0.0) -> np.ndarray:
        """Update the velocities ``v`` (N, 3) float32 in place over a substep of ``dt`` seconds and return
        them.

        ``h`` (N,) float32 smoothing lengths (m); ``vol``, ``mass`` (N,) float32 each particle's volume
        and mass relative to ``volume0`` (m^3) and ``mass0`` (kg) (the mass ratio includes the liquid's
        density); ``liquid`` (N,) uint8 rows of ``table`` or None (every particle of row 0); ``age`` (N,)
        float32, s; ``neighbours`` the solver's list at ``x``; ``boxes`` (K, 2, 3) box containers; ``rho``
        (N,) float32 the particles' densities (kg/m^3) from the solver's last evaluation, for the surface
        tension; ``smoothing`` the solver's own velocity smoothing per substep (PBF's XSPH coefficient), below
        a fraction of which the viscosity is not resolved and is skipped
        (:data:`engine.solvers.viscosity_weiler2018.UNRESOLVED_FRACTION`).
        """
        t0 = time.perf_counter()
        if table.has_viscosity:
            mu = table.particle_viscosity(liquid, age)
            out = self.viscosity.apply(x, v, h, mu, vol, mass, volume0, mass0, dt, neighbours,
                                       (boxes, walls.box_no_slip, walls.collider_no_slip, cset), smoothing)
            if out is not v:
                v[:] = out
        if table.has_surface_tension and rho is not None:
            rows = np.zeros(len(age), dtype=np.intp) if liquid is None else liquid.astype(np.intp)
            rho0 = table.density[rows].astype(np.float32)
            sigma = table.surface_tension[rows].astype(np.float32)
            rel_rho = (rho0 / np.float32(mass0 / volume0))
            self.surface_tension.apply(x, v, h, (mass0 * vol * rel_rho).astype(np.float32), rho, rho0, sigma, dt,
                                       neighbours, boxes, walls.box_adhesion, walls.collider_adhesion, cset)
        self.seconds = time.perf_counter() - t0
        return v
