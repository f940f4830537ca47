"""The particle solvers and the contract the frame loop (:mod:`engine.driver`) and checkpoints
(:mod:`engine.io.checkpoint`) hold them to.

One module per method: ``wcsph`` (Tait EOS, leap-frog; Suárez & Susín 2006, "Mesh-particle model
for fluid animation", §3), ``pbf`` (Position-Based Fluids with the mass-aware constraints,
regularised stiffness, iterative XSPH and surface tension of Alduán, Tena & Otaduy 2015), ``mac``
(staggered marker-and-cell grid; Suárez & Susín 2006 §2) and ``hybrid`` (the MAC-SPH model of
Suárez & Susín 2006 §4: the grid in the deep liquid, WCSPH near the surface). ``sph`` is the SPH
core WCSPH and the hybrid share (density, equation of state, forces over a subset of rows);
:mod:`engine.collision.walls` the box walls of all three.

Every solver satisfies :class:`Solver`; the driver calls nothing else, and branches on no solver's
name: :func:`solver_type` finds a solver's class by the name the settings give, the class builds
itself from the settings (:meth:`Solver.from_settings`, from a :class:`SolverSetup`) and takes the
animated settings it reads (:meth:`Solver.set_animated`). Its time-varying state beyond the
particle arrays (neighbour-list positions, the liquid's own density, grid fields, levels, ...) is one
object, :class:`SolverState`, that turns itself into
named arrays for a checkpoint; :meth:`Solver.resume` builds the solver that continues from them.
"""

from __future__ import annotations

import importlib
from dataclasses import dataclass
from typing import Any, NamedTuple, Protocol, runtime_checkable

import numpy as np

#: Each solver's class by the name the settings give it (``SimulationSettings.solver``), as
#: ``module:class`` in this package (imported when asked for: the modules bring in numba).
SOLVER_TYPES = {"PBF": "pbf:PBFSolver", "WCSPH": "wcsph:WCSPHSolver", "HYBRID": "hybrid:HybridSolver"}


def solver_type(name: str) -> type:
    """The class of the solver ``name`` (a key of :data:`SOLVER_TYPES`); ``KeyError`` for another name."""
    module_name, _, class_name = SOLVER_TYPES[name].partition(":")
    return getattr(importlib.import_module(f".{module_name}", __name__), class_name)


@dataclass(frozen=True)
class SolverSetup:
    """What a solver is built from (:meth:`Solver.from_settings`), gathered from the scene by
    :func:`engine.assemble.make_solver`. SI units.

    Attributes
    ----------
    settings : engine.settings.SimulationSettings
    gravity : ndarray, shape (3,), float64, m/s^2 (the first frame's)
    boxes : ndarray, shape (K, 2, 3), float64, inner lower/upper corners of the box containers, m
    box_friction, box_bounce : ndarray, shape (K,), float64, each box's friction and bounce
    spacings : ndarray, shape (L,), float64, the particle spacing of each resolution level (ascending), m
    auto_sound_speed : float
        The speed of sound WCSPH picks for this scene (:func:`engine.solvers.wcsph_model.auto_sound_speed`
        over the initial liquid, the inflows and the colliders), m/s; PBF bounds speeds with it too.
    liquid : engine.solvers.liquid_forces.LiquidTable or None
        The bake's liquids (None: the settings' one liquid).
    walls : engine.solvers.liquid_forces.WallResponse or None
        No-slip or slip and the adhesion of each box and collider (None: no-slip, no adhesion).
    """

    settings: Any
    gravity: np.ndarray
    boxes: np.ndarray
    box_friction: np.ndarray
    box_bounce: np.ndarray
    spacings: np.ndarray
    auto_sound_speed: float
    liquid: Any = None
    walls: Any = None


class SpeedLimit(NamedTuple):
    """Above ``speed`` (m/s) a particle means the simulation diverged; ``reason`` says what the
    limit is, ``advice`` what the artist can change (both sentences for an error message)."""

    speed: float
    reason: str
    advice: str


@runtime_checkable
class SolverState(Protocol):
    """A solver's time-varying state beyond the particle arrays, as a checkpoint keeps it."""

    def arrays(self) -> dict[str, np.ndarray]:
        """Named arrays (scalars as 0-d arrays), all that :meth:`Solver.resume` needs."""
        ...


@runtime_checkable
class Solver(Protocol):
    """What the frame loop and checkpoints may use of a solver.

    Attributes
    ----------
    name : str
        The solver's name as the settings spell it ('WCSPH', 'PBF', 'HYBRID'); checkpoints record it.
    model
        The frozen parameters of the bake.
    particles : engine.core.particles.Particles
        The particle state, in the solver's order (it may reorder them at any substep).
    collision : engine.collision.world.CollisionWorld or None
        Mesh colliders.
    time : float
        Seconds since the first frame.
    """

    name: str
    model: Any
    particles: Any
    collision: Any
    time: float

    @classmethod
    def from_settings(cls, setup: SolverSetup, particles: Any, collision: Any = None,
                      level: np.ndarray | None = None) -> "Solver":
        """The solver for a bake: its model from ``setup`` and the particles to start from (``level``:
        each particle's resolution level, for solvers with several)."""
        ...

    @classmethod
    def kernel_support(cls, settings: Any, spacing: float) -> float:
        """Interaction radius 2h at particle spacing ``spacing`` (m) with these settings, m."""
        ...

    def set_animated(self, values: dict[str, Any]) -> None:
        """Take the values of animated scene settings at the coming substep, keyed by their names in
        the settings (``gravity`` as (3,) float64, scalars as float); a solver uses those it reads and
        ignores the others."""
        ...

    def set_box_response(self, k: int, friction: float | None = None, bounce: float | None = None) -> None:
        """The friction and bounce of box container ``k`` from the coming substep (None keeps one)."""
        ...

    def step(self, dt: float) -> None:
        """Advance by one substep of ``dt`` seconds."""
        ...

    def stable_dt(self) -> float:
        """Largest substep the current state allows, s."""
        ...

    def speed_limit(self) -> SpeedLimit:
        """The speed above which the simulation has diverged (checked after every substep)."""
        ...

    def nonfinite_advice(self) -> str:
        """What the artist can change when positions or velocities stopped being finite."""
        ...

    def flush(self) -> None:
        """Bring every particle up to date before a frame is written (particles a solver moves only
        every few substeps catch up); a no-op for solvers that move every particle every substep."""
        ...

    def add_particles(self, x: np.ndarray, v: np.ndarray, level: int | np.ndarray = 0, **kwargs) -> np.ndarray:
        """Append particles between substeps; returns their ids."""
        ...

    def remove_particles(self, mask: np.ndarray) -> int:
        """Delete the particles where ``mask`` is True between substeps; returns how many."""
        ...

    def memory_bytes(self) -> int:
        """Bytes held by the particle state, the solver's buffers and its search structures."""
        ...

    def save_state(self) -> SolverState:
        """The state a checkpoint keeps beside the particle arrays (copies are not required: the
        checkpoint writes it at once)."""
        ...

    def resume(self, particles: Any, arrays: dict[str, np.ndarray], time: float) -> "Solver":
        """A solver with this one's model and colliders that continues from a checkpoint: the saved
        ``particles`` (in their saved order, with the accelerations of the last force evaluation),
        the arrays of :meth:`save_state` and the time. Raises ``KeyError`` naming a missing array."""
        ...
