"""Weakly-compressible SPH with the Tait equation of state and leap-frog time stepping.

Suárez & Susín 2006, "Mesh-Particle Model for Fluid Animation" (Eurographics 2006), §3:

* symmetric pressure force, eq. 5:  a_i = -sum_j m_j (p_i / rho_i^2 + p_j / rho_j^2) grad_i W_ij;
* continuity equation, eq. 5:       d rho_i / dt = sum_j m_j (v_i - v_j) . grad_i W_ij;
* Tait equation of state, eq. 6:    p_i = P0 ((rho_i / rho0)^7 - 1), with P0 = rho0 c0^2 / 7;
* leap-frog integration, eq. 8, as kick-drift-kick: v += a dt/2; x += v dt; a = a(x, v); v += a dt/2.

Density, two modes (:data:`DENSITY_MODES`, ``WCSPHModel.density``; cubic spline, Monaghan 1992,
the particle mass chosen so that a filled lattice has exactly rho0):

* ``"continuity"`` (the default): rho_i = rho_f,i + rho0 psi_walls(x_i). The liquid's part rho_f
  follows the continuity equation (Suárez & Susín 2006, eq. 5, "not affected by free surface or density
  discontinuities"), plus the density diffusion of Molteni & Colagrossi (2009), delta = 0.1, with
  the hydrostatic correction of Fourtakas et al. (2019) so that it leaves a resting liquid's density
  gradient alone (:func:`continuity_density`); the walls' part stays a function of position, so
  moving colliders need no wall velocity. In the leap-frog, rho_f drifts like the positions, with
  the half-step velocity: rho_f^{n+1} = rho_f^n + dt (d rho_f / dt)(x^{n+1}, v^{n+1/2}) before the
  forces at n+1 (:meth:`WCSPHSolver.step`). rho_f is kept in float64 by the solver
  (``WCSPHSolver.rho_liquid``, saved with checkpoints); new particles start at the density they are
  given (rho0 by default) less the walls' part, and a liquid at rest can start from
  :func:`engine.solvers.wcsph_model.hydrostatic_density`.
* ``"summation"``: rho_i = sum_j m_j W_ij + rho0 psi_walls(x_i) (:func:`engine.solvers.sph.density_pressure`,
  which the hybrid solver uses too). Near the free surface the truncated sum reads low (79 % of rho0
  on the top layer of a lattice), so the top layers close up until it reaches rho0 and the pressure
  profile of a resting column reads as if the surface were ~0.2 dx lower.

Negative pressures are clamped to zero so the free surface does not clump (no tensile
instability). Viscosity: Monaghan's (1992) artificial viscosity (coefficient alpha) plus Morris et
al.'s (1997) laminar term for a physical kinematic viscosity nu.

Walls of box containers are continuous solid: a wall at distance d contributes the kernel mass of
the solid half-space, rho0 psi(d), to the density (see :func:`engine.core.kernels.half_space_tables`),
in the spirit of Koschier & Bender's density maps (2017) for a flat wall. Its pressure force is
that of imaginary wall particles carrying the pressure p_w + rho_i g . (x_j - x_i) (Adami, Hu &
Adams 2012, eq. 27, with p_w the Shepard average of the liquid's pressure around the particle):
-(p_i + p_w) / rho_i^2 rho0 grad psi - G, G from the wall lattice's gradient moments
(:func:`engine.core.kernels.wall_moment_tables`, :func:`engine.collision.walls.wall_hydrostatic`): with a
one-sided force the liquid's own pair forces would pull particles into the walls, and without G the
liquid along side walls would lack part of its support. A particle that still crosses a wall is
projected back and loses its normal velocity, so nothing leaks.

Time step per substep: dt = min(CFL h / (c0 + v_max), 0.25 sqrt(h / a_max), 0.125 h^2 / nu).

The summation density, the equation of state and the forces are the SPH core shared with the hybrid
solver (:mod:`engine.solvers.sph`); this module adds the continuity density, the time stepping and
the solver. The pair loops run in single precision with fastmath (:data:`FASTMATH`); positions and
velocities are float32 anyway, and densities, accelerations and the integration keep float64 where
sums meet walls and gravity. Only particles with a wall or collider within the kernel support
(``near``, found once per evaluation of the density) query the walls and accumulate the
Shepard pressure the wall terms need. The opening half-kick and the drift are one pass.

Validation (``tests/test_validation_*.py``, figures in ``docs/solvers.md``): dam break against
Martin & Moyce, a resting column against rho g (H - y), and Monaghan's (1994) elliptical drop (which
needs h >= 1.6 dx in both density modes: at h = 1.2 dx the stretched lattice is over-read by the
summation and under-read by the continuity density, and the drop is held open).
"""

from __future__ import annotations

import logging
import math
import time
from dataclasses import dataclass, replace

import numpy as np
from numba import njit, prange

from ..collision.queries import project
from ..collision.world import CollisionWorld, SWEEP_STEP, empty_world_args
from ..core.kernels import cubic_dshape32 as _dw32
from ..core.cell_grid import CellGrid, build_grid
from ..core.neighbour_list import NeighbourList
from ..core.particles import Particles
from ..core.state_check import max_speed_and_acceleration
from ..collision.walls import clamp_into_boxes
from . import SolverSetup, SpeedLimit
from .liquid_forces import LiquidForces
from .wcsph_model import (DEFAULT_DENSITY, DENSITY_MODES, WCSPHModel, auto_sound_speed, hydrostatic_density,  # noqa: F401
                          liquid_depth, make_model)
from .sph import (FASTMATH, SKIN, accelerations, density_pressure, max_displacement2, pair_constants,
                  pair_offset,
                  store_density, walls_at)

log = logging.getLogger(__name__)

#: particles per block of the fused drift pass (one displacement maximum per block)
BLOCK = 4096
@njit(parallel=True, cache=True, fastmath=FASTMATH)
def continuity_density(x, v, rho_old, nbr_start, nbr_count, nbr, dt, h, mass, rho0, p0, c0, delta, gx, gy, gz,
                       boxes, table_d0, table_step, psi, dpsi, cset,
                       # outputs
                       rho_liquid, rho, p, pr, near, wall_grad):
    """rho_liquid += dt (sum_j m v_ij . grad_i W_ij + D_i) (Suárez & Susín 2006, eq. 5);
    rho = rho_liquid + rho0 psi_walls.

    The continuity equation for the liquid's part of the density, with the velocities of the
    half step and the positions at its end (see :meth:`WCSPHSolver.step`). D_i is the density
    diffusion of Molteni & Colagrossi (2009, eq. 8) with the hydrostatic correction of Fourtakas
    et al. (2019, eq. 12), from the densities ``rho_old`` of the previous evaluation:
    D_i = delta h c0 sum_j 2 (rho_j - rho_i - rho^H_ji) (x_j - x_i) . grad_i W_ij / (r^2 + eta^2) m / rho_j,
    rho^H_ji = rho0 g . (x_j - x_i) / c0^2, Fourtakas et al.'s rho0 ((1 + rho0 g z_ij / B)^(1/gamma) - 1)
    to first order (within 2h the two differ by 1e-5 of rho0 with the automatic sound speed). It is
    the Tait profile's slope at the free surface; deeper the slope is (rho0 / rho)^(gamma - 2) times
    that, 3 % less at the floor of a column with the automatic sound speed, so along a truncated
    kernel (the floor, walls) the term still moves density a little. Linearised at each particle's
    own density instead, that residue vanishes, but the resting column's profile came out tilted
    more (bulk layers from +0.2 % at the floor to -1.9 % 3 dx under the surface, against +0.7 % to
    -1.1 % with this form). p and pr as in :func:`engine.solvers.sph.density_pressure`.
    The pair loop runs in single precision; the density is integrated in float64.
    """
    support = 2.0 * h
    r2max, inv_h, eta2, cg = pair_constants(h, mass)  # m dW/dr = cg * dw/dq
    kd = np.float32(2.0 * delta * h * c0)
    hyd = rho0 / (c0 * c0)
    hx = np.float32(hyd * gx)
    hy = np.float32(hyd * gy)
    hz = np.float32(hyd * gz)
    zero = np.float32(0.0)
    n_col = cset.colliders.shape[0]
    for i in prange(x.shape[0]):
        xi = x[i, 0]
        yi = x[i, 1]
        zi = x[i, 2]
        vxi = v[i, 0]
        vyi = v[i, 1]
        vzi = v[i, 2]
        rhoi = rho_old[i]
        s = zero    # sum_j m v_ij . grad_i W_ij
        sd = zero   # sum_j (rho_j - rho_i - rho^H_ji) (x_j - x_i) . m grad_i W_ij / ((r^2 + eta^2) rho_j)
        for t in range(nbr_start[i], nbr_start[i] + nbr_count[i]):
            j = nbr[t]
            dx, dy, dz, r2 = pair_offset(x, j, xi, yi, zi)
            if r2 >= r2max or r2 == zero:  # the list reaches a skin further (see WCSPHSolver)
                continue
            r = math.sqrt(r2)
            g = cg * _dw32(r * inv_h) / r  # m grad_i W = g * (x_i - x_j)
            s += g * ((vxi - v[j, 0]) * dx + (vyi - v[j, 1]) * dy + (vzi - v[j, 2]) * dz)
            rhoj = rho_old[j]
            # rho^H_ji = rho0 g . (x_j - x_i) / c0^2 = -(hx dx + hy dy + hz dz)
            diff = rhoj - rhoi + (hx * dx + hy * dy + hz * dz)
            sd -= diff * g * r2 / ((r2 + eta2) * rhoj)
        r = rho_liquid[i] + dt * (np.float64(s) + np.float64(kd * sd))
        rho_liquid[i] = r
        store_density(i, r, np.float64(xi), np.float64(yi), np.float64(zi), boxes, support, rho0, p0, table_d0,
                      table_step, psi, dpsi, cset, n_col, rho, p, pr, near, wall_grad)


@njit(parallel=True, cache=True)
def wall_density(x, h, rho0, boxes, table_d0, table_step, psi, dpsi, cset,
                 # outputs
                 out):
    """rho0 psi_walls at each point (box walls and mesh colliders), kg/m^3."""
    n_col = cset.colliders.shape[0]
    for i in prange(x.shape[0]):
        _, wall, _, _, _ = walls_at(np.float64(x[i, 0]), np.float64(x[i, 1]), np.float64(x[i, 2]), boxes,
                                     2.0 * h, rho0, table_d0, table_step, psi, dpsi, cset, n_col)
        out[i] = wall


@njit(parallel=True, cache=True)
def kick_drift_clamp(x, v, a, half_dt, dt, boxes, margin, friction, bounce, x_ref,
                     # outputs
                     moved2):
    """v += a dt/2, x += v dt, then project particles that crossed a container wall back onto it.

    The normal velocity into the wall is reversed and scaled by the box's bounce (0: removed) and
    the tangential one scaled by (1 - friction): the last line of defence against leaks when
    pressure alone did not stop a particle. One pass for the opening half-kick and the drift; it
    also finds how far the particles moved since the neighbour list was built: ``moved2[b]`` is the
    largest squared distance from ``x_ref`` in block b of :data:`BLOCK` particles (``x_ref`` with
    fewer rows than ``x``: not measured, 0).
    """
    n = x.shape[0]
    measure = x_ref.shape[0] == n
    for b in prange(moved2.shape[0]):
        far = 0.0
        for i in range(b * BLOCK, min(n, (b + 1) * BLOCK)):
            for k in range(3):
                v[i, k] += a[i, k] * half_dt
                x[i, k] += v[i, k] * dt
            clamp_into_boxes(x, v, i, boxes, margin, friction, bounce)
            if measure:
                dx = x[i, 0] - x_ref[i, 0]
                dy = x[i, 1] - x_ref[i, 1]
                dz = x[i, 2] - x_ref[i, 2]
                far = max(far, dx * dx + dy * dy + dz * dz)
        moved2[b] = far


@njit(parallel=True, cache=True)
def kick(v, a, dt):
    for i in prange(v.shape[0]):
        for k in range(3):
            v[i, k] += a[i, k] * dt


@dataclass
class WCSPHState:
    """WCSPH's state beyond the particle arrays, for checkpoints.

    Attributes
    ----------
    x_ref : ndarray, shape (N, 3), float32, metres, or None
        Positions of the last neighbour-list build (None before any build: no particles yet).
    rho_liquid : ndarray, shape (N,), float64, kg/m^3, or None
        The liquid's part of the density (continuity density only).
    """

    x_ref: np.ndarray | None
    rho_liquid: np.ndarray | None

    def arrays(self) -> dict:
        out = {}
        if self.x_ref is not None:
            out["x_ref"] = self.x_ref
        if self.rho_liquid is not None:
            out["rho_liquid"] = self.rho_liquid
        return out

    @classmethod
    def from_arrays(cls, arrays: dict) -> WCSPHState:
        return cls(x_ref=arrays.get("x_ref"), rho_liquid=arrays.get("rho_liquid"))


def sound_speed_limit(c0: float, cfl: float) -> SpeedLimit:
    """The divergence limit of the weakly-compressible solvers: five times the speed of sound."""
    return SpeedLimit(5.0 * c0, f"more than five times the speed of sound ({c0:.3g} m/s)", sound_speed_advice(cfl))


def sound_speed_advice(cfl: float) -> str:
    return f"Lower the CFL number (now {cfl:g}) or raise the speed of sound."


class WCSPHSolver:
    """Advances a :class:`Particles` set with WCSPH.

    The neighbour list reaches ``SKIN`` smoothing lengths past the kernel support and is kept over
    several substeps (a Verlet list): it is rebuilt, and the particles reordered along the Morton
    curve, only once some particle has moved more than half the skin since the last build (or the
    particle set changed); until then no pair can come within the support unlisted.

    With continuity density the solver keeps the liquid's part of each particle's density,
    :attr:`rho_liquid`, in the particles' order, in float64: in the resting validation column a
    tenth of the particles change it by less than 4e-4 kg/m^3 per substep (median 7e-3), a few
    float32 steps (6.1e-5 at 1000 kg/m^3), so float32 would round off ~10 % of each change, and more
    in a calmer liquid. It starts as the particles' density less the walls' part
    (or :meth:`set_density`) and is saved with checkpoints.
    """

    name = "WCSPH"

    #: The animated settings WCSPH reads (:meth:`set_animated`) and the model field each sets.
    ANIMATED = {"gravity": "gravity"}

    @staticmethod
    def model_from_settings(setup: SolverSetup, density: str) -> WCSPHModel:
        """The WCSPH model of a bake (``density``: one of :data:`DENSITY_MODES`); the sound speed is the
        settings' or, at 0, the automatic one."""
        s = setup.settings
        return make_model(dx=s.particle_spacing, h_factor=s.smoothing_length_factor, rho0=s.rest_density,
                          c0=s.sound_speed or setup.auto_sound_speed, alpha=s.artificial_viscosity,
                          nu=s.dynamic_viscosity / s.rest_density, gravity=setup.gravity, boxes=setup.boxes,
                          friction=setup.box_friction, bounce=setup.box_bounce, cfl=s.cfl_number, density=density,
                          liquid=setup.liquid, walls=setup.walls)

    @classmethod
    def from_settings(cls, setup: SolverSetup, particles: Particles, collision: CollisionWorld | None = None,
                      level: np.ndarray | None = None) -> WCSPHSolver:
        """The WCSPH solver of a bake (see :meth:`engine.solvers.Solver.from_settings`)."""
        model = cls.model_from_settings(setup, setup.settings.wcsph_density.lower())
        log.info("WCSPH: %d particles, h=%.4g m, c0=%.4g m/s, mass=%.4g kg, %s density", len(particles), model.h,
                 model.c0, model.mass, model.density)
        if model.density == "continuity" and len(particles):
            # the liquid starts at rest under gravity: at the density of its depth (the equation of
            # state's hydrostatic pressure) instead of rho0, which would make it sink and ring for the
            # first substeps; continuity density keeps what it is given (summation recomputes it)
            depth = liquid_depth(particles.x, setup.gravity, model.dx)
            particles.rho[:] = hydrostatic_density(depth, model.rho0, model.c0, float(np.linalg.norm(setup.gravity)))
        return cls(model, particles, collision=collision)

    @classmethod
    def kernel_support(cls, settings, spacing: float) -> float:
        """2h = 2 (Smoothing Length) dx, m."""
        return 2.0 * settings.smoothing_length_factor * spacing

    def set_animated(self, values: dict) -> None:
        """Gravity (:data:`ANIMATED`) and the scene liquid's viscosity (Pa s) and surface tension (row 0 of
        the liquid table; nu = mu / rho0 for a model without one)."""
        changes = {field: values[name] for name, field in self.ANIMATED.items() if name in values}
        if "dynamic_viscosity" in values:
            changes["nu"] = values["dynamic_viscosity"] / self.model.rho0
        liquid = self.model.liquid.with_animated(values) if self.model.liquid is not None else None
        if liquid is not None:
            changes["liquid"] = liquid
        if changes:
            self.model = replace(self.model, **changes)

    def set_box_response(self, k: int, friction: float | None = None, bounce: float | None = None) -> None:
        if friction is not None:
            self.model.box_friction[k] = friction
        if bounce is not None:
            self.model.box_bounce[k] = bounce

    def __init__(self, model: WCSPHModel, particles: Particles, collision: CollisionWorld | None = None,
                 evaluate: bool = True):
        """``evaluate``: find the density, pressure and accelerations of ``particles`` at once (False:
        they continue a saved state whose accelerations they hold, see :meth:`resume`)."""
        self.model = model
        self.particles = particles
        self.collision = collision
        #: seconds since the first frame (colliders move with it)
        self.time = 0.0
        self.grid: CellGrid | None = None
        #: neighbour list of the last build (sorted order), reaching 2h + SKIN h
        self.neighbours = NeighbourList()
        #: neighbour-list builds so far
        self.rebuilds = 0
        self._x_ref: np.ndarray | None = None  # positions at the last build
        self._changed = True
        self._pr = np.zeros(len(particles), dtype=np.float32)  # scratch: p / rho^2 in sorted order
        self._near = np.zeros(len(particles), dtype=np.bool_)  # scratch: a wall within the support
        #: (N,) float64, kg/m^3: the liquid's part of the density (continuity mode; empty otherwise)
        self.rho_liquid = self._liquid_part(particles.rho) if model.density == "continuity" else _NO_DENSITY
        #: seconds spent so far, by phase (the benchmark reads and resets it)
        self.timings = dict.fromkeys(("neighbours", "density", "forces", "integrate", "viscosity"), 0.0)
        #: the liquid's implicit viscosity and surface tension (models with a liquid table)
        self.liquid_forces = LiquidForces(model.h / model.dx) if model.liquid is not None else None
        if evaluate and len(particles):
            self._evaluate()

    @property
    def _explicit_nu(self) -> float:
        """Kinematic viscosity of the explicit laminar term: the model's without a liquid table (the
        hybrid's particles), else 0 (the implicit solve carries the viscosity)."""
        return self.model.nu if self.model.liquid is None else 0.0

    @property
    def _cset(self) -> tuple:
        return self.collision.args if self.collision is not None else _NO_COLLIDERS

    def _rebuild(self, moved2: float | None = None) -> None:
        """Grid, Morton reorder and neighbour list, when a particle moved more than half the skin
        (``moved2``: the largest squared displacement since the last build, if already known)."""
        pt, h = self.particles, self.model.h
        n = len(pt)
        skin = SKIN * h
        if not self._changed and self._x_ref is not None and self._x_ref.shape[0] == n:
            if moved2 is None:
                moved2 = max_displacement2(pt.x, self._x_ref)
            if moved2 <= (0.5 * skin) ** 2:
                return
        reach = h + 0.5 * skin  # pairs within 2 * reach = 2h + skin
        grid = build_grid(pt.x, 2.0 * reach, previous=self.grid)
        pt.reorder(grid.order)
        if self.model.density == "continuity":
            self.rho_liquid = self.rho_liquid[grid.order]
        if self._changed:
            grid = grid._replace(order=None)  # other particles than at the last build: count afresh
        self.neighbours.build(pt.x, np.full(1, reach, dtype=np.float32), grid)
        self.grid = grid._replace(order=None, particle_cell=None)
        if self._x_ref is not None and self._x_ref.shape == pt.x.shape:
            self._x_ref[:] = pt.x  # into the same buffer: no fresh pages to fault in
        else:
            self._x_ref = pt.x.copy()
        self._changed = False
        self.rebuilds += 1

    def _restore_neighbours(self, x_ref: np.ndarray) -> None:
        """Rebuild the neighbour list of the last build from the positions it was built at (a resumed
        bake continues with the list the uninterrupted one had, so its sums run in the same order).
        The particles are already in that build's Morton order, so the grid sorts them as they are."""
        pt, h = self.particles, self.model.h
        reach = h + 0.5 * SKIN * h
        grid = build_grid(x_ref, 2.0 * reach)
        if not np.array_equal(grid.order, np.arange(len(pt))):
            raise ValueError("the saved neighbour-list positions are not in the particles' order")
        self.neighbours.build(x_ref, np.full(1, reach, dtype=np.float32), grid._replace(order=None))
        self.grid = grid._replace(order=None, particle_cell=None)
        self._x_ref = x_ref.copy()
        self._changed = False

    def _wall_density(self, x: np.ndarray) -> np.ndarray:
        """rho0 psi_walls at the points ``x`` (N, 3) float32, kg/m^3 (float64)."""
        m = self.model
        out = np.empty(x.shape[0], dtype=np.float64)
        wall_density(x, m.h, m.rho0, m.boxes, m.table_d0, m.table_step, m.psi, m.dpsi, self._cset, out)
        return out

    def _liquid_part(self, rho: np.ndarray) -> np.ndarray:
        """rho - rho0 psi_walls(x) of the current particles (``rho`` (N,) kg/m^3), float64."""
        return np.asarray(rho, dtype=np.float64).reshape(len(self.particles)) - self._wall_density(self.particles.x)

    def set_density(self, rho: np.ndarray) -> None:
        """Continuity mode: give the particles the density ``rho`` (N,) kg/m^3 (the liquid's part
        becomes ``rho - rho0 psi_walls(x)``) and evaluate the forces again. The constructor takes the
        density from the particles' ``rho`` channel; this sets it afterwards."""
        if self.model.density != "continuity":
            raise ValueError("set_density needs the continuity density mode")
        self.rho_liquid = self._liquid_part(rho)
        self.particles.rho[:] = rho
        if len(self.particles):
            self._evaluate()

    def save_state(self) -> WCSPHState:
        """The positions of the last neighbour-list build and, with continuity density, the liquid's
        part of the density (:class:`WCSPHState`)."""
        return WCSPHState(x_ref=self._x_ref, rho_liquid=self.rho_liquid if self.model.density == "continuity" else None)

    def resume(self, particles: Particles, arrays: dict, time: float) -> WCSPHSolver:
        """A solver with this one's model and colliders continuing from a checkpoint (see
        :meth:`engine.solvers.Solver.resume`). A checkpoint without the liquid's density (a bake with
        summation density resumed with continuity density) takes it from the saved density less the
        walls' part."""
        state = WCSPHState.from_arrays(arrays)
        fresh = WCSPHSolver(self.model, particles, collision=self.collision, evaluate=False)
        fresh.time = time
        if self.collision is not None:
            self.collision.update(time)  # the walls' part of the density below needs the colliders' pose
        if state.x_ref is not None:
            fresh._restore_neighbours(np.ascontiguousarray(state.x_ref))
        if self.model.density == "continuity":
            if state.rho_liquid is not None and state.rho_liquid.shape == (len(particles),):
                fresh.rho_liquid = np.array(state.rho_liquid, dtype=np.float64)
            else:
                fresh.rho_liquid = fresh._liquid_part(particles.rho)
        return fresh

    def speed_limit(self) -> SpeedLimit:
        """Five times the speed of sound."""
        return sound_speed_limit(self.model.c0, self.model.cfl)

    def nonfinite_advice(self) -> str:
        return sound_speed_advice(self.model.cfl)

    def flush(self) -> None:
        """Nothing to bring up to date: every particle moves every substep."""

    def _evaluate(self, moved2: float | None = None, dt: float = 0.0) -> None:
        """Neighbour list (rebuilt when needed), then density, pressure and acceleration; in continuity
        mode the density advances by ``dt`` first."""
        t0 = time.perf_counter()
        self._rebuild(moved2)
        self.timings["neighbours"] += time.perf_counter() - t0
        m, pt = self.model, self.particles
        n_col = self._cset.colliders.shape[0]
        wall_grad = np.empty((len(pt), 3), dtype=np.float32) if n_col else _NO_GRADIENT
        nl = self.neighbours
        t0 = time.perf_counter()
        if m.density == "continuity":
            continuity_density(pt.x, pt.v, pt.rho.copy(), nl.start, nl.count, nl.nbr, dt, m.h, m.mass, m.rho0,
                               m.pressure_constant, m.c0, m.delta, m.gravity[0], m.gravity[1], m.gravity[2],
                               m.boxes, m.table_d0, m.table_step, m.psi, m.dpsi, self._cset,
                               self.rho_liquid, pt.rho, pt.p, self._pr, self._near, wall_grad)
        else:
            density_pressure(pt.x, _NO_ROWS, True, nl.start, nl.count, nl.nbr, m.h, m.mass, m.rho0,
                             m.pressure_constant, m.boxes, m.table_d0, m.table_step, m.psi, m.dpsi, self._cset,
                             pt.rho, pt.p, self._pr, self._near, wall_grad)
        t1 = time.perf_counter()
        accelerations(pt.x, pt.v, _NO_ROWS, True, pt.rho, pt.p, self._pr, self._near, nl.start, nl.count, nl.nbr, m.h,
                      m.mass,
                      m.rho0, m.c0, m.alpha, self._explicit_nu, m.gravity[0], m.gravity[1], m.gravity[2], m.boxes,
                      m.table_d0, m.table_step, m.psi, m.dpsi, m.tau_n, m.tau_t, n_col, wall_grad, pt.a)
        self.timings["density"] += t1 - t0
        self.timings["forces"] += time.perf_counter() - t1

    def stable_dt(self) -> float:
        """Largest time step the CFL, force and viscous criteria allow for the current state, s."""
        m, pt = self.model, self.particles
        if len(pt) == 0:
            return math.inf
        vmax, amax = max_speed_and_acceleration(pt.v, pt.a)
        dt = m.cfl * m.h / (m.c0 + vmax)
        if amax > 0.0:
            dt = min(dt, 0.25 * math.sqrt(m.h / amax))
        if self._explicit_nu > 0.0:
            dt = min(dt, 0.125 * m.h * m.h / self._explicit_nu)
        if self.liquid_forces is not None:
            dt = min(dt, self.liquid_forces.dt_limit(m.liquid, m.dx))
        if self.collision is not None:
            dt = min(dt, self.collision.dt_limit(self.time))
        return dt

    def add_particles(self, x: np.ndarray, v: np.ndarray, level: int | np.ndarray = 0, **kwargs) -> np.ndarray:
        """Append particles between substeps (``kwargs`` go to :meth:`engine.core.particles.Particles.add`);
        returns their ids. Only level 0 exists: WCSPH has a single resolution. Their acceleration
        starts as gravity until the next force evaluation. With continuity density their liquid part
        starts as their density (``rho``, default rho0) less the walls' part where they are."""
        if np.any(np.asarray(level) != 0):
            raise ValueError("WCSPH has a single resolution; every particle has level 0")
        n = len(self.particles)
        ids = self.particles.add(x, v, **kwargs)
        self.particles.a[n:] = self.model.gravity
        if self.model.density == "continuity":
            pt = self.particles
            new = pt.rho[n:].astype(np.float64) - self._wall_density(pt.x[n:])
            self.rho_liquid = np.concatenate([self.rho_liquid[:n], new])
        self._changed = True
        self._ensure_capacity()
        return ids

    def remove_particles(self, mask: np.ndarray) -> int:
        """Delete the particles where ``mask`` is True between substeps; returns how many."""
        removed = self.particles.remove(mask)
        if removed:
            self._changed = True
            if self.model.density == "continuity":
                self.rho_liquid = self.rho_liquid[~np.asarray(mask, dtype=bool).reshape(-1)]
        self._ensure_capacity()
        return removed

    def _ensure_capacity(self) -> None:
        """Size the per-particle scratch buffer for the current particle count (and, should the particle
        set have been replaced from outside, take the liquid's density from its density channel)."""
        n = len(self.particles)
        if self.model.density == "continuity" and self.rho_liquid.shape[0] != n:
            self.rho_liquid = self._liquid_part(self.particles.rho)
        if self._pr.shape[0] != n:
            self._pr = np.zeros(n, dtype=np.float32)
            self._near = np.zeros(n, dtype=np.bool_)

    def step(self, dt: float) -> None:
        """One leap-frog substep of length dt (Suárez & Susín 2006, eq. 8, kick-drift-kick).

        v^{n+1/2} = v^n + a^n dt/2 and x^{n+1} = x^n + v^{n+1/2} dt (one pass); in continuity mode
        rho_f^{n+1} = rho_f^n + dt (drho_f/dt)(x^{n+1}, v^{n+1/2}) (Suárez & Susín 2006, eq. 5): the density drifts
        with the half-step velocity like the positions, so the pair (rho, v) is stepped as
        symplectic Euler and sound waves neither grow nor decay (a rate from the previous evaluation,
        v^{n-1/2}, would lag the velocity by a step and pump them); then a^{n+1} from x^{n+1},
        rho^{n+1} and v^{n+1/2}, and v^{n+1} = v^{n+1/2} + a^{n+1} dt/2.
        """
        m, pt = self.model, self.particles
        if len(pt) == 0:
            self.time += dt
            return
        self._ensure_capacity()
        t0 = time.perf_counter()
        x_start = pt.x.copy() if self.collision is not None else pt.x
        x_ref = self._x_ref if self._x_ref is not None and not self._changed else _NO_REF
        moved2 = np.empty((len(pt) + BLOCK - 1) // BLOCK, dtype=np.float64)
        kick_drift_clamp(pt.x, pt.v, pt.a, 0.5 * dt, dt, m.boxes, 2.0 * m.h, m.box_friction, m.box_bounce,
                         x_ref, moved2)
        self.time += dt
        known = None
        if self.collision is None and x_ref.shape[0] == len(pt):
            known = float(moved2.max())  # the colliders' projection below moves particles again
        if self.collision is not None:
            self.collision.update(self.time)
            project(x_start, pt.x, pt.v, SWEEP_STEP * m.dx, 0.0, 1.0 / dt, True, self._cset)
        t1 = time.perf_counter()
        self._evaluate(known, dt)
        t2 = time.perf_counter()
        kick(pt.v, pt.a, 0.5 * dt)
        if self.liquid_forces is not None:
            t3 = time.perf_counter()
            n = len(pt)
            one = np.ones(n, dtype=np.float32)
            self.liquid_forces.apply(m.liquid, pt.x, pt.v, np.full(n, m.h, dtype=np.float32), one, one,
                                     m.mass / m.rho0, m.mass, None, pt.age, dt, self.neighbours, m.boxes, m.walls,
                                     self._cset, rho=pt.rho)
            self.timings["viscosity"] += time.perf_counter() - t3
        self.timings["integrate"] += (t1 - t0) + (time.perf_counter() - t2)

    def memory_bytes(self) -> int:
        """Bytes held by the particle state (every channel at its capacity), the neighbour list, the
        solver's buffers and the last grid."""
        arrays = [self._pr, self._near, self.rho_liquid]
        if self._x_ref is not None:
            arrays.append(self._x_ref)
        if self.grid is not None:
            g = self.grid
            arrays += [g.cell_key, g.cell_start, g.cell_nbr]
        extra = self.liquid_forces.nbytes() if self.liquid_forces is not None else 0
        return self.particles.nbytes() + self.neighbours.nbytes() + extra + int(sum(a.nbytes for a in arrays))


_NO_COLLIDERS = empty_world_args()
_NO_GRADIENT = np.zeros((0, 3), dtype=np.float32)
_NO_REF = np.zeros((0, 3), dtype=np.float32)
_NO_DENSITY = np.zeros(0, dtype=np.float64)
_NO_ROWS = np.zeros(0, dtype=np.int32)
