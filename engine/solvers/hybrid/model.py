"""The hybrid's model: its static parameters (:class:`HybridModel`), the constants of the substep, and
the small groups of arrays and numbers its kernels take (:class:`GridFrame`, :class:`Bands`,
:class:`Faces`, :class:`BoxWalls`). See :mod:`engine.solvers.hybrid` for the method (Suárez & Susín
2006, "Mesh-particle model for fluid animation", §4).
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import NamedTuple

import numpy as np

from ...core.compile import FASTMATH  # noqa: F401 (the hybrid's kernels import it from here)
from ... import settings as settings_mod
from . import mac
from ..wcsph import WCSPHModel


#: Particle kinds (``HybridSolver.kind``), §4.2 and Fig. 3 of the paper.
SPH, MIXA, MIXB, MAC = 0, 1, 2, 3
KIND_NAMES = ("SPH", "MIXA", "MIXB", "MAC")

#: Substeps between two measurements of the free surface (automatic interface).
INTERFACE_EVERY = 10

#: Percentile of the wet columns' surface heights the automatic interface follows (a few low
#: columns, a splash landing on a dry floor, do not pull the interface down).
SURFACE_PERCENTILE = 10.0

#: Most substeps the markers outside the neighbour search (rows from ``n_sub`` on, deeper than the
#: MIXB band and its skin) wait before they move, all at once by the grid's displacement over the
#: time they waited, sampled at their midpoint (:func:`move_markers`); they also move once that time
#: at their last speed would reach MARKER_REACH smoothing lengths (with the rebuild's trigger at half
#: the skin, 0.075 h, a marker that waits cannot reach the MIXB band unlisted: 0.075 + 0.05 < 0.15),
#: before every neighbour-list rebuild, and on :meth:`HybridSolver.flush` (before a frame is
#: written). Nothing reads them in between: they have no neighbours, and their p and rho are set
#: from the grid by the flushes of a rebuild or a frame. In a stirred tank (tests/test_hybrid.py)
#: they stand within 1.3 um of markers moved every substep after 200 substeps, whether they wait 4
#: or 16 substeps; moved with the last half-step velocity at their start (Euler), they were 3.6 um
#: off after waiting 4 and 17 um after waiting 16 (a vortex's Euler steps spiral outwards).
MARKER_EVERY = 16
MARKER_REACH = 0.05

#: Weight of the last change of the grid pressure in the pressure solve's start guess
#: (:func:`extrapolate_pressure`).
PRESSURE_EXTRAPOLATION = 0.4

#: Particles per chunk of the pass before the SPH sums (:func:`advance`).
CHUNK = 1024

#: Fewest computed grid rows under the MIXB band for the MAC part to be used at all.
MIN_MAC_ROWS = 2

#: The interface modes (engine/settings/simulation.py holds them).
INTERFACE_MODES = settings_mod.names(settings_mod.HYBRID_INTERFACE_MODES)

#: Parts of the particle arrays :func:`engine.solvers.hybrid.kinds.column_tops` scans in parallel, each
#: into its own grid of tops.
TOP_PARTS = 8


class GridFrame(NamedTuple):
    """Where the grid lies, for the kernels that sample it.

    Attributes
    ----------
    ox, oy, oz : float
        Lower corner of the grid, metres.
    inv : float
        1 / cell edge, 1/m.
    hi0, hi1 : float
        x and y where the grid's columns end, metres.
    """

    ox: float
    oy: float
    oz: float
    inv: float
    hi0: float
    hi1: float


class Bands(NamedTuple):
    """The particle kinds' bands (module docstring of :mod:`engine.solvers.hybrid`): ``n_sub`` rows in the
    neighbour search (the others are markers), the interface height ``l`` (m; -inf: no MAC part) and
    the smoothing length ``h`` (m)."""

    n_sub: int
    l: float
    h: float


class Faces(NamedTuple):
    """A staggered field on the grid's faces (velocity, m/s, or displacement, m), float64: ``u`` (ni + 1,
    nj, nk), ``v`` (ni, nj + 1, nk), ``w`` (ni, nj, nk + 1)."""

    u: np.ndarray
    v: np.ndarray
    w: np.ndarray


class BoxWalls(NamedTuple):
    """Box containers for :func:`engine.collision.walls.clamp_into_boxes`: ``boxes`` (K, 2, 3) float64 inner corners,
    m; ``margin`` how far outside a box its walls still act, m; ``friction`` and ``bounce`` (K,)."""

    boxes: np.ndarray
    margin: float
    friction: np.ndarray
    bounce: np.ndarray


@dataclass(frozen=True)
class HybridModel:
    """Static parameters of one hybrid bake (SI units).

    Attributes
    ----------
    sph : WCSPHModel
        Parameters of the SPH part (smoothing length, mass, sound speed, walls, tables).
    cell : float
        Edge of a grid cell, metres.
    origin : ndarray, shape (3,), float64, metres
        Lower corner of the grid.
    shape : tuple of 3 ints
        Cells along i, j, k.
    interface_mode : str
        'AUTO' (a depth below the free surface) or 'FIXED' (a world height).
    interface_depth : float
        Depth of l below the free surface for 'AUTO', metres (at least :attr:`min_depth` is used).
    interface_height : float
        World Z of l for 'FIXED', metres.
    pressure_solver : str
        'SOR' or 'RBSOR' (:mod:`engine.solvers.hybrid.mac`).
    omega : float
        Over-relaxation factor of the pressure solve.
    tolerance : float
        Largest velocity divergence the pressure solve may leave, 1/s.
    max_iterations : int
        Most sweeps of one pressure solve.
    nu : float
        Kinematic viscosity of the grid part, m^2/s.
    """

    sph: WCSPHModel
    cell: float
    origin: np.ndarray
    shape: tuple
    interface_mode: str
    interface_depth: float
    interface_height: float
    pressure_solver: str
    omega: float
    tolerance: float
    max_iterations: int
    nu: float

    @property
    def h(self) -> float:
        return self.sph.h

    @property
    def min_depth(self) -> float:
        """Shallowest interface depth that keeps the boundary row's nodes and their 2h neighbourhoods
        under the free surface: 4h plus two cells, metres."""
        return 4.0 * self.sph.h + 2.0 * self.cell


#: make_model's options and the fields of :class:`engine.settings.HybridSettings` that hold their defaults
SETTING_OF_OPTION = {"cell_factor": "cell_factor", "interface_mode": "interface_mode",
                     "interface_depth": "interface_depth", "interface_height": "interface_height",
                     "pressure_solver": "pressure_solver", "omega": "sor_omega", "tolerance": "pressure_tolerance",
                     "max_iterations": "max_iterations"}


def make_model(sph: WCSPHModel, *, lower, upper, **options) -> HybridModel:
    """A :class:`HybridModel` whose grid of cells ``cell_factor * sph.dx`` covers the box [lower, upper]
    (rounded out to whole cells).

    ``options`` (:data:`SETTING_OF_OPTION`): ``cell_factor``, ``interface_mode``, ``interface_depth``,
    ``interface_height``, ``pressure_solver``, ``omega``, ``tolerance``, ``max_iterations``; one not
    given takes the default of its setting in :class:`engine.settings.HybridSettings`.
    """
    unknown = sorted(set(options) - set(SETTING_OF_OPTION))
    if unknown:
        raise TypeError(f"make_model() got unknown options {', '.join(unknown)}")
    defaults = settings_mod.HybridSettings()
    o = {name: options[name] if name in options else getattr(defaults, setting)
         for name, setting in SETTING_OF_OPTION.items()}
    if o["interface_mode"] not in INTERFACE_MODES:
        raise ValueError(f"unknown interface mode {o['interface_mode']!r}; choose one of {', '.join(INTERFACE_MODES)}")
    if o["pressure_solver"] not in mac.POISSON_SOLVERS:
        raise ValueError(f"unknown pressure solver {o['pressure_solver']!r}")
    cell = float(o["cell_factor"]) * sph.dx
    lower = np.asarray(lower, dtype=np.float64).reshape(3)
    upper = np.asarray(upper, dtype=np.float64).reshape(3)
    shape = tuple(int(max(1, math.ceil((upper[a] - lower[a]) / cell - 1e-9))) for a in range(3))
    # one spare row on top: the boundary row needs the face above it
    shape = (shape[0], shape[1], shape[2] + 1)
    return HybridModel(sph=sph, cell=cell, origin=lower.copy(), shape=shape, interface_mode=o["interface_mode"],
                       interface_depth=float(o["interface_depth"]), interface_height=float(o["interface_height"]),
                       pressure_solver=o["pressure_solver"], omega=float(o["omega"]), tolerance=float(o["tolerance"]),
                       max_iterations=int(o["max_iterations"]), nu=float(sph.nu))
