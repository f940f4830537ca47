"""Position-Based Fluids with the production extensions of Alduán, Tena & Otaduy 2015.

Alduán, Tena & Otaduy 2015, "Efficient and Robust Position-Based Fluids for VFX", §3, builds on
Macklin & Müller 2013 (PBF). One substep of length dt:

1. predict: v += g dt, x* = x + v dt (projected into box containers);
2. neighbour grid on x* (cells of edge 2h, Morton order), then a compact per-step neighbour list
   (:class:`engine.core.neighbour_list.NeighbourList`) so the iterations never rescan the 27 cells.
   It is a *half list* over blocks of consecutive particles (:func:`half_block`): a pair inside a
   block is listed once and each pass visits it once, adding its share to both particles (W_ij =
   W_ji for the density and XSPH, grad_j W_ji = -grad_i W_ij for the correction); one thread walks a
   block in order, so there is no race and the sums do not depend on the number of threads;
3. Jacobi iterations of the density constraint, until the mean compression is below the
   tolerance or the iteration budget is spent:

   * mass-aware constraint, eq. 1:     C_i = sum_j m_j W(x_i - x_j, h) / rho0 - 1
     (its gradient is eq. 2; particles of different mass and spacing couple through m_j);
   * regularised stiffness, eq. 3-4:   k = 1 / sum_k |grad_k C_i|^2 from a filled prototype
     neighbourhood (once per resolution), lambda_i = -beta k C_i. Jacobi iterations converge only
     for beta < 2 / (k mu_max), mu_max the largest eigenvalue of J J^T (J = dC/dx); on a filled
     lattice at h = dx, k mu_max = 2.65, so beta must stay below 0.75 (the paper's beta = 1 makes a
     resting tank explode); the default 0.6 damps the fastest mode by |1 - 0.6 * 2.65| = 0.59;
   * position correction, eq. 5:       dx_i = 1/rho0 sum_j m_j (lambda_i + lambda_j - s_corr) grad W_ij;
   * container walls and mesh colliders (:mod:`engine.collision`) add the kernel mass of a solid
     half-space, rho0 psi(d), to the density (as in :mod:`engine.solvers.wcsph`) and push with
     lambda_i grad psi; walls never pull; every iterate is pushed out of mesh colliders;

   the velocity follows the positions, v += dx_i / dt, so v = (x*_final - x) / dt;
4. the liquid's viscosity, in Pa s, solved implicitly (Weiler et al. 2018,
   :mod:`engine.solvers.viscosity_weiler2018`), and its surface tension in N/m with adhesion to the
   walls (Akinci et al. 2013, :mod:`engine.solvers.surface_tension_akinci2013`), as velocity changes
   at the final positions (:mod:`engine.solvers.liquid_forces`);
5. velocity smoothing: XSPH, eq. 6, split into N = ceil(c / 0.5) passes of c / N each
   (v_i += c/N sum_j m_j / rho_j (v_j - v_i) W_ij): each pass is a convex average, so it cannot
   add energy however large c is. It has no physical unit; a little calms particle noise;
6. the legacy surface pull, eq. 7, from one coefficient kappa (0, the default, turns it off; files
   made before the surface tension in N/m keep theirs): the multiplier may pull only up to
   lambda_i <= f(kappa) (kappa = 0 makes the constraint one-sided: no attraction, no clumping),
   and the tensile term s_corr = -g(kappa) W(x_i - x_j) / W(dq), dq = h (the rest spacing), is
   subtracted from the multipliers, i.e. it attracts neighbours (with MM13's sign convention the
   paper's "subtracted from the Lagrange multipliers" is a cohesive pull, which makes a liquid
   round up). f and g are linear in kappa as in the paper, and scaled so that each pulls a particle
   of a flat surface inward by kappa g0 dt^2 / 2 per substep (g0 = 9.81 m/s^2): kappa = 1 is a
   surface pull as strong as gravity, whatever the substep. A weightless drop swells slowly under
   it, because the nearly one-sided constraint cannot hold the bulk against jitter.

Kernel: cubic spline (Monaghan 1992, :func:`engine.core.kernels.cubic_w`) with h = dx and support
2h, 27-29 neighbours in the bulk. At h = dx the lattice sum of the cubic spline is 0.99997 of the
integral (mass m = rho0 dx^3 within 3e-5), and the regularised stiffness needs no per-particle
gradient sums, so the two passes per iteration touch each pair once (twice across blocks). The
pair passes and their memory layout are described in :mod:`engine.solvers.pbf_passes`; the
corrections use the cubic spline's own gradient.

Resolutions: each particle has a level l (uint8) with its own spacing, mass, h and stiffness;
a pair uses h_ij = (h_i + h_j) / 2 so that W_ij = W_ji and momentum is conserved. A single
level takes a fast path with no per-neighbour lookups.

Time step: PBF has no sound speed; the substep only limits how far a particle moves,
(|v|max + |g| dt) dt <= cfl h, and never exceeds ``max_dt``.

The neighbour list is rebuilt every substep (WCSPH keeps one over several, with a skin): a PBF
substep is long, so particles move far in one (up to about 0.3 h in a dam break at dt = 2 ms), and
a skin serving a second substep would need about twice the pairs in each of a substep's pair
passes to save one build that costs about as much as one correction pass.
"""

from __future__ import annotations

import logging
import math
import time
from dataclasses import dataclass, replace

import numpy as np

from ..rigid.coupling import add_wall_reaction, project_with_bodies
from ..collision.world import CollisionWorld, SWEEP_STEP, empty_world_args
from ..core.kernels import CUBIC_SIGMA as _SIGMA
from ..core.cell_grid import CellGrid, build_grid
from ..core.cluster_list import ClusterList, clusters_of, octant_order
from ..core.neighbour_list import NeighbourList
from ..core.particles import Particles
from ..core.state_check import max_speed
from . import SolverSetup, SpeedLimit
from .liquid_forces import LiquidForces
from .pbf_boundary import boundary_flags, boundary_walls, number_flagged, predict
from .pbf_model import (H_FACTOR, SURFACE_ACCELERATION, XSPH_PASS_LIMIT, PBFModel, make_model,  # noqa: F401
                        prototype_stiffness, surface_gradients)
from . import pbf_cluster_passes as clusters
from .pbf_passes import (FLAG_ITERATIONS, MAX_MOVE, constraint, copy_xyz, correct, finish, kernel_of_slope,
                         velocity_rows, xsph_pass)

log = logging.getLogger(__name__)


#: Scale of the wall push lambda_i grad psi. 1 is the constraint gradient itself (dx = J^T lambda);
#: a mirrored wall (2, lambda_wall = lambda_i) overshoots: a 0.3 m resting tank kept boiling at
#: 0.2 m/s mean speed instead of settling below 0.01 m/s.
WALL_FACTOR = 1.0



#: The pair lists of a PBF solver (``pairs`` of :class:`PBFSolver`): particle pairs
#: (:class:`engine.core.neighbour_list.NeighbourList`), or, with one level, clusters of four particles
#: and quads of their neighbours (:mod:`engine.solvers.pbf_cluster_passes`; the same pairs, 16 a vector
#: step; as fast as the particle list on the benchmark, see docs/performance-history.md).
PAIR_LISTS = ("particles", "clusters")

#: Most particles in one block of the half neighbour list (see :func:`half_block`).
HALF_BLOCK = 16384

#: The blocks of a substep number a multiple of this (at least this many), so that a small scene
#: still spreads over the threads and 2, 4 or 8 threads get equal shares.
BLOCK_MULTIPLE = 8

#: Fewest particles in a block.
MIN_HALF_BLOCK = 256


def half_block(n: int) -> int:
    """Particles per block of the half neighbour list for n particles.

    One thread walks a block in order and visits each pair inside it once (see
    :class:`engine.core.neighbour_list.NeighbourList`); a pair across two blocks is visited from both
    sides. Larger blocks leave fewer such pairs (7-8 % of a dam break's pairs at blocks of up to
    :data:`HALF_BLOCK`), smaller ones spread a small scene over more threads; a block's particles
    (16-byte rows read and written, the densities) still fit in a core's second-level cache. The
    blocks are of equal size, their number a multiple of :data:`BLOCK_MULTIPLE`, so that 2, 4 or 8
    threads get equal shares. The block depends on n only, never on the number of threads, so a
    substep's sums are the same on any machine.
    """
    blocks = -(-max(n, 1) // HALF_BLOCK)
    blocks = -(-blocks // BLOCK_MULTIPLE) * BLOCK_MULTIPLE
    return max(MIN_HALF_BLOCK, -(-n // blocks))

@dataclass
class PBFState:
    """PBF's state beyond the particle arrays, for checkpoints: ``level`` (N,) uint8, each particle's
    resolution level, in the particles' order."""

    level: np.ndarray

    def arrays(self) -> dict:
        return {"level": self.level}

    @classmethod
    def from_arrays(cls, arrays: dict) -> PBFState:
        return cls(level=np.ascontiguousarray(arrays["level"], dtype=np.uint8))


class PBFSolver:
    """Advances a :class:`Particles` set with PBF (see the module docstring).

    Parameters
    ----------
    model : PBFModel
    particles : Particles
        Arrays are replaced (reordered) every step; read them through ``solver.particles``. The
        count may change between substeps through :meth:`add_particles` and :meth:`remove_particles`,
        which keep ``level`` in step with the particles.
    level : ndarray, shape (N,), uint8, optional
        Resolution level of each particle (index into ``model.level_*``); default all 0.

    Attributes
    ----------
    iterations : int
        Constraint iterations (position corrections) of the last substep.
    density_error : float
        Mean of max(rho / rho0 - 1, 0) over all particles at the last density evaluation of the
        last substep (before its last correction when the budget ran out, so an upper bound).
    density_error_max : float
        Largest relative compression at that evaluation.
    grid : CellGrid or None
        Neighbour grid of the last substep.
    """

    name = "PBF"

    #: The animated settings PBF reads (:meth:`set_animated`) and the model field each sets.
    ANIMATED = {"gravity": "gravity", "pbf_velocity_smoothing": "xsph", "pbf_surface_tension": "kappa"}

    @classmethod
    def from_settings(cls, setup: SolverSetup, particles: Particles, collision: CollisionWorld | None = None,
                      level: np.ndarray | None = None) -> PBFSolver:
        """The PBF solver of a bake (see :meth:`engine.solvers.Solver.from_settings`)."""
        s = setup.settings
        model = make_model(dx=float(setup.spacings[0]), spacings=setup.spacings, rho0=s.rest_density,
                           iterations=s.pbf_iterations, tolerance=s.pbf_density_tolerance / 100.0,
                           beta=s.pbf_stiffness, xsph=s.pbf_velocity_smoothing, kappa=s.pbf_surface_tension,
                           gravity=setup.gravity, boxes=setup.boxes, friction=setup.box_friction,
                           bounce=setup.box_bounce, cfl=s.pbf_cfl_number, max_dt=s.pbf_time_step,
                           # the bound WCSPH has with its automatic sound speed: 50 times the fastest
                           # free-fall speed
                           speed_limit=5.0 * setup.auto_sound_speed, liquid=setup.liquid, walls=setup.walls)
        log.info("PBF: %d particles, h=%.4g m, mass=%.4g kg, %d iterations", len(particles), model.h,
                 model.level_mass[0], model.iterations)
        return cls(model, particles, level=level, collision=collision)

    @classmethod
    def kernel_support(cls, settings, spacing: float) -> float:
        """2h = 2 :data:`H_FACTOR` dx, m."""
        return 2.0 * H_FACTOR * spacing

    def set_animated(self, values: dict) -> None:
        """Gravity, the velocity smoothing (:data:`ANIMATED`) and the scene liquid's viscosity and surface
        tension (row 0 of the liquid table)."""
        changes = {field: values[name] for name, field in self.ANIMATED.items() if name in values}
        liquid = self.model.liquid.with_animated(values)
        if liquid is not None:
            changes["liquid"] = liquid
        if changes:
            self.model = replace(self.model, **changes)

    def set_box_response(self, k: int, friction: float | None = None, bounce: float | None = None) -> None:
        if friction is not None:
            self.model.box_friction[k] = friction
        if bounce is not None:
            self.model.box_bounce[k] = bounce

    def __init__(self, model: PBFModel, particles: Particles, level: np.ndarray | None = None,
                 collision: CollisionWorld | None = None, pairs: str = "particles"):
        n = len(particles)
        if level is None:
            level = np.zeros(n, dtype=np.uint8)
        level = np.ascontiguousarray(level, dtype=np.uint8).reshape(-1)
        if level.shape[0] != n:
            raise ValueError(f"level has {level.shape[0]} entries for {n} particles")
        if n and int(level.max()) >= len(model.level_h):
            raise ValueError(f"level {int(level.max())} is not one of the model's {len(model.level_h)} levels")
        self.model = model
        self.particles = particles
        self.collision = collision
        #: seconds since the first frame (colliders move with it)
        self.time = 0.0
        self.level = level
        self.grid: CellGrid | None = None
        self.iterations = 0
        self.density_error = 0.0
        self.density_error_max = 0.0
        self._uniform = len(model.level_h) == 1
        # single-precision per-level constants of the iteration kernels
        self._lh = model.level_h.astype(np.float32)
        self._lmass = (model.level_mass / model.level_mass[0]).astype(np.float32)
        self._boxes32 = model.boxes.astype(np.float32)
        self._no_friction = np.zeros(model.boxes.shape[0], dtype=np.float64)
        # the pairs of the last substep (sorted order): with one level a list of cluster pairs
        # (:mod:`engine.solvers.pbf_cluster_passes`), else a list of particle pairs
        if pairs not in PAIR_LISTS:
            raise ValueError(f"pairs must be one of {PAIR_LISTS}, got {pairs!r}")
        self.pairs = pairs
        self._clusters = ClusterList() if self._uniform and pairs == "clusters" else None
        self._particle_list = NeighbourList(half=HALF_BLOCK)
        self._listed = -1  # the substep whose pairs self._particle_list holds
        self._substeps = 0
        self._changed = True
        self._bidx = np.zeros(0, dtype=np.int32)
        self._flagged = np.zeros(0, dtype=np.int32)
        self._x_buf = np.empty((0, 3), dtype=np.float32)
        self._xq = np.empty((0, 4), dtype=np.float32)
        self._xq_out = np.empty((0, 4), dtype=np.float32)
        self._slope = np.empty(0, dtype=np.uint16)
        self._rho = np.empty(0, dtype=np.float32)
        self._share = np.empty((0, 4), dtype=np.float32)
        self._w_of_slope = kernel_of_slope()
        #: the liquid's viscosity and surface tension
        self.liquid_forces = LiquidForces(H_FACTOR)
        self._ensure_capacity()
        #: seconds spent in the last substep, by phase (the benchmark reads it)
        self.timings = {"predict": 0.0, "grid": 0.0, "neighbours": 0.0, "solve": 0.0, "viscosity": 0.0}

    def speed_limit(self) -> SpeedLimit:
        """A particle faster than ``model.speed_limit`` means the simulation diverged."""
        m = self.model
        return SpeedLimit(m.speed_limit, f"more than {m.speed_limit:.3g} m/s, fifty times the fastest free fall the "
                                         f"scene allows", f"Lower the PBF Max Substep (now {m.max_dt:g} s) or raise "
                                                          f"the PBF Iterations.")

    def nonfinite_advice(self) -> str:
        return f"Lower the PBF Max Substep (now {self.model.max_dt:g} s) or the PBF Stiffness."

    def flush(self) -> None:
        """Nothing to bring up to date: every particle moves every substep."""

    def save_state(self) -> PBFState:
        """The particles' resolution levels (the neighbour search is rebuilt every substep)."""
        return PBFState(level=self.level)

    def resume(self, particles: Particles, arrays: dict, time: float) -> PBFSolver:
        """A solver with this one's model and colliders continuing from a checkpoint (see
        :meth:`engine.solvers.Solver.resume`)."""
        state = PBFState.from_arrays(arrays)
        fresh = PBFSolver(self.model, particles, level=state.level, collision=self.collision, pairs=self.pairs)
        fresh.time = time
        return fresh

    def _ensure_capacity(self) -> None:
        """Size the per-particle buffers for the current particle count (it changes when particles
        are emitted or removed between substeps)."""
        n = len(self.particles)
        if self.level.shape[0] != n:
            raise ValueError(f"the solver holds levels for {self.level.shape[0]} particles, the particle set has "
                             f"{n}; add and remove particles through the solver")
        if self._x_buf.shape[0] == n:
            return
        self._x_buf = np.empty((n, 3), dtype=np.float32)  # start of the collider sweep, then XSPH's double buffer
        # positions with lambda (the iterations) or 1 / rho (XSPH) beside them: one 16-byte row per
        # neighbour; two of them for the Jacobi iterations (read one, write the other)
        if self._clusters is not None:
            # room for the last cluster's four rows, each cluster's rows one cache line; densities and the
            # XSPH shares likewise
            self._xq = clusters.cluster_rows(n)
            self._xq_out = clusters.cluster_rows(n)
            self._share = clusters.cluster_rows(n)
            self._rho = np.zeros(self._xq.shape[0], dtype=np.float32)
        else:
            self._xq = np.zeros((n, 4), dtype=np.float32)
            self._xq_out = np.zeros((n, 4), dtype=np.float32)
        self._wall_free = np.ones(n, dtype=np.float32)
        self._slot = np.full(n, -1, dtype=np.int32)
        self._flagged = np.empty(n, dtype=np.int32)  # the particles near a wall: _bidx is its start
        # blocks of the half neighbour list: also the fixed partition of the error sums
        self._particle_list.half = half_block(n)
        self._cluster_block = -(-self._particle_list.half // 4)
        if self._clusters is not None:
            blocks = -(-clusters_of(n) // self._cluster_block)
        else:
            blocks = -(-n // self._particle_list.half)
        self._block_err = np.zeros(blocks, dtype=np.float64)
        self._block_max = np.zeros_like(self._block_err)

    def add_particles(self, x: np.ndarray, v: np.ndarray, level: int | np.ndarray = 0, **kwargs) -> np.ndarray:
        """Append particles of resolution ``level`` (one for all or one each) between substeps;
        ``kwargs`` go to :meth:`engine.core.particles.Particles.add`. Returns their ids."""
        x = np.asarray(x).reshape(-1, 3)
        lev = np.broadcast_to(np.asarray(level, dtype=np.uint8), (x.shape[0],))
        if lev.shape[0] and int(lev.max()) >= len(self.model.level_h):
            raise ValueError(f"level {int(lev.max())} is not one of the model's {len(self.model.level_h)} levels")
        ids = self.particles.add(x, v, **kwargs)
        self.level = np.concatenate([self.level, lev])
        self._changed = True
        self._ensure_capacity()
        return ids

    def remove_particles(self, mask: np.ndarray) -> int:
        """Delete the particles where ``mask`` is True between substeps; returns how many."""
        mask = np.asarray(mask, dtype=bool).reshape(-1)
        removed = self.particles.remove(mask)
        if removed:
            self.level = np.ascontiguousarray(self.level[~mask])
            self._changed = True
            self._ensure_capacity()
        return removed

    def stable_dt(self) -> float:
        """Longest substep with (|v|max + |g| dt) dt <= cfl h, at most ``model.max_dt``, s."""
        m, pt = self.model, self.particles
        if len(pt) == 0:
            return m.max_dt
        vmax = max_speed(pt.x, pt.v)
        if not math.isfinite(vmax):
            return m.max_dt  # diverged: let the driver's state check report it at the frame's end
        g = float(np.linalg.norm(m.gravity))
        travel = m.cfl * m.h
        if g > 0.0:
            dt = (-vmax + math.sqrt(vmax * vmax + 4.0 * g * travel)) / (2.0 * g)
        elif vmax > 0.0:
            dt = travel / vmax
        else:
            dt = m.max_dt
        if self.collision is not None:
            dt = min(dt, self.collision.dt_limit(self.time))
        dt = min(dt, self.liquid_forces.dt_limit(m.liquid, float(m.level_dx[0])))
        return min(dt, m.max_dt)

    def _neighbours(self) -> None:
        """Grid on the predicted positions, reorder every array, then the CSR neighbour list."""
        m, pt = self.model, self.particles
        t0 = time.perf_counter()
        grid = build_grid(pt.x, m.cell_size, previous=self.grid)
        self._substeps += 1
        if self._clusters is not None:
            octant_order(pt.x, grid.order, grid.cell_start, m.cell_size)  # compact clusters of four
        pt.reorder(grid.order)
        if not self._uniform:  # one level: every particle's is 0, in any order
            self.level = np.ascontiguousarray(self.level[grid.order])
        # the order and the particle -> cell map are not needed after the reorder: don't hold them
        self.grid = grid._replace(order=None, particle_cell=None)
        self.timings["grid"] = time.perf_counter() - t0
        if self._clusters is not None:
            copy_xyz(pt.x, self._xq)
            self._clusters.build(self._xq, len(pt), m.h, grid.cell_start, grid.cell_nbr, grid.particle_cell,
                                 self._cluster_block)
            return
        if self._changed:
            grid = grid._replace(order=None)  # other particles than last substep: count afresh
            self._changed = False
        self._particle_list.build(pt.x, self._lh[:1] if self._uniform else self._lh[self.level], grid)
        self._listed = self._substeps

    @property
    def neighbours(self) -> NeighbourList:
        """The particle pairs of the last substep as a :class:`engine.core.neighbour_list.NeighbourList` (a
        half list over blocks of :func:`half_block` particles). With one level the passes walk a list of
        cluster pairs instead; this list is then built when asked for (for tools and tests), from the
        last substep's grid and positions."""
        if self._listed != self._substeps and self.grid is not None:
            self._particle_list.build(self.particles.x, self._lh[:1], self.grid._replace(order=None))
            self._listed = self._substeps
        return self._particle_list

    def _boundary(self, cset: tuple) -> None:
        """Pick the particles near a wall for this substep (see :func:`boundary_flags`)."""
        m, pt = self.model, self.particles
        if m.boxes.shape[0] == 0 and cset.colliders.shape[0] == 0:
            self._wall_free[:] = 1.0
            self._slot[:] = -1
            self._bidx = np.zeros(0, dtype=np.int32)
            return
        # the kernel support plus the most FLAG_ITERATIONS iterations can move a particle (MAX_MOVE h each)
        reach = 2.0 + min(m.iterations, FLAG_ITERATIONS) * MAX_MOVE
        boundary_flags(pt.x, self.level, m.level_h, reach, m.boxes, cset, self._wall_free, self._slot)
        self._bidx = self._flagged[:number_flagged(self._slot, self._flagged)]

    def step(self, dt: float) -> None:
        """Advance one substep of length dt, s (see the module docstring for the stages)."""
        m, pt = self.model, self.particles
        n = len(pt)
        if n == 0:
            self.time += dt  # colliders keep moving while the liquid has not been emitted yet
            return
        self._ensure_capacity()
        t0 = time.perf_counter()
        margin = m.cell_size
        inv_dt = 1.0 / dt
        cset = self.collision.args if self.collision is not None else _NO_COLLIDERS
        if self.collision is not None:
            self._x_buf[:] = pt.x
        predict(pt.x, pt.v, m.gravity[0], m.gravity[1], m.gravity[2], dt, m.boxes, self._no_friction, m.box_bounce,
                margin, pt.a)
        self.time += dt
        if self.collision is not None:
            self.collision.update(self.time)
            cset = self.collision.args
            project_with_bodies(self.collision, self._x_buf, pt.x, pt.v, SWEEP_STEP * m.dx, 0.0, inv_dt, True,
                                self.level, m.level_mass)
        t1 = time.perf_counter()
        self._neighbours()
        self._boundary(cset)
        t2 = time.perf_counter()
        wall_grad = np.empty((self._bidx.shape[0], 3), dtype=np.float32)
        lam_max = m.attraction_limit(dt).astype(np.float32)
        cohesion = m.cohesion(dt).astype(np.float32)
        rho_unit = _SIGMA * float(m.level_mass[0])
        scale = _SIGMA * float(m.level_mass[0]) / m.rho0
        level_k = m.level_k.astype(np.float32)
        used = 0
        # whether the last pass over the pairs was a constraint pass at the final positions: its slopes
        # then give XSPH the kernel values (the particle list's passes with one level)
        slopes_fresh = False
        xq, xq_out = self._xq, self._xq_out
        copy_xyz(pt.x, xq)
        cl, nl = self._clusters, self._particle_list
        if cl is None and self._slope.shape[0] != nl.nbr.shape[0]:
            # one kernel slope per listed pair, written by the constraint pass for the correction
            self._slope = np.empty(nl.nbr.shape[0], dtype=np.uint16)
        for it in range(m.iterations):
            if self._bidx.shape[0]:
                boundary_walls(xq, self._bidx, self.level, m.level_h, m.boxes, m.table_q0, m.table_step, m.psi,
                               m.dpsi, cset, self._wall_free, wall_grad)
            if cl is not None:
                clusters.constraint(xq, n, cl.start, cl.count, cl.local, cl.nbr, cl.mask, m.h, level_k[0],
                                    lam_max[0], rho_unit, m.rho0, m.beta, self._wall_free, cl.block, self._rho,
                                    self._block_err, self._block_max)
            else:
                constraint(xq, self.level, nl.start, nl.count, nl.local, nl.nbr, self._lh, self._lmass, level_k,
                           lam_max, self._uniform, rho_unit, m.rho0, m.beta, self._wall_free, nl.half, pt.rho,
                           self._block_err, self._block_max, self._slope)
            self.density_error = float(np.sum(self._block_err)) / n
            self.density_error_max = float(np.max(self._block_max))
            # At least one correction per substep: skipping it lets gravity build momentum in a
            # liquid whose mean error is small only because the compressed layer is thin.
            if it > 0 and self.density_error <= m.tolerance:
                slopes_fresh = self._uniform
                break
            # the rigid bodies' share of this correction's wall push, charged to them (engine.rigid.coupling)
            add_wall_reaction(self.collision, xq, self._bidx, self.level, m.level_h, m.level_mass, self._wall_free,
                              WALL_FACTOR, inv_dt, m)
            if cl is not None:
                clusters.correct(xq, n, cl.start, cl.count, cl.local, cl.nbr, cl.mask, m.h, scale, cohesion[0],
                                 self._slot, wall_grad, WALL_FACTOR, MAX_MOVE, self._boxes32, margin,
                                 it >= FLAG_ITERATIONS, inv_dt, cl.block, xq_out, pt.v)
            else:
                correct(xq, self.level, nl.start, nl.count, nl.local, nl.nbr, self._lh, self._lmass, cohesion,
                        self._uniform, scale, self._slot, wall_grad, WALL_FACTOR, MAX_MOVE, self._boxes32, margin,
                        it >= FLAG_ITERATIONS, inv_dt, nl.half, self._slope,
                        xq_out, pt.v)
            if self.collision is not None:
                # keep every iterate out of the colliders; the push moves the velocity with it
                project_with_bodies(self.collision, xq[:n], xq_out[:n], pt.v, 0.0, 0.0, inv_dt, False, self.level,
                                    m.level_mass)
            xq, xq_out = xq_out, xq
            used += 1
        copy_xyz(xq[:n], pt.x)
        if cl is not None:
            pt.rho[:] = self._rho[:n]
        self.iterations = used
        self._liquid_forces(dt, cset)
        t3 = time.perf_counter()
        passes = m.xsph_passes
        # collider friction acts between the viscosity and the box walls' friction: then finish alone
        fused = not (self.collision is not None and self.collision.has_friction)
        for k in range(passes):
            last = fused and k == passes - 1
            if cl is not None:
                velocity_rows(pt.v, self._rho, xq_out)  # free after the iterations
                clusters.xsph_pass(pt.x, xq, xq_out, n, cl.start, cl.count, cl.local, cl.nbr, cl.mask, m.h,
                                   m.xsph / passes * rho_unit, last, self.level, m.level_h, m.boxes, m.box_friction,
                                   inv_dt, cl.block, self._share, self._x_buf, pt.a)
            else:
                velocity_rows(pt.v, pt.rho, xq_out)  # free after the iterations
                xsph_pass(pt.x, xq, xq_out, self.level, nl.start, nl.count, nl.local, nl.nbr, self._lh, self._lmass,
                          self._uniform, m.xsph / passes * rho_unit, last, m.level_h, m.boxes, m.box_friction, inv_dt,
                          nl.half, slopes_fresh, self._slope, self._w_of_slope, self._x_buf, pt.a)
            pt.v, self._x_buf = self._x_buf, pt.v
        if not fused:
            # friction (relative to the moving surface) within h/4 of a collider, as for box walls
            project_with_bodies(self.collision, pt.x, pt.x, pt.v, 0.0, 0.25 * m.h, inv_dt, True, self.level,
                                m.level_mass)
        if not (fused and passes):
            finish(pt.x, self.level, m.level_h, m.boxes, m.box_friction, inv_dt, pt.v, pt.a)
        t4 = time.perf_counter()
        grid_time = self.timings["grid"]
        self.timings = {"predict": t1 - t0, "grid": grid_time, "neighbours": t2 - t1 - grid_time,
                        "solve": t3 - t2, "viscosity": t4 - t3}

    def _liquid_forces(self, dt: float, cset) -> None:
        """Viscosity and surface tension at the final positions (:mod:`engine.solvers.liquid_forces`)."""
        m, pt = self.model, self.particles
        if not (m.liquid.has_viscosity or m.liquid.has_surface_tension):
            return
        h = self._lh[:1].repeat(len(pt)) if self._uniform else self._lh[self.level]
        rel = self._lmass[:1].repeat(len(pt)) if self._uniform else self._lmass[self.level]
        self.liquid_forces.apply(m.liquid, pt.x, pt.v, h, rel, rel, float(m.level_mass[0]) / m.rho0,
                                 float(m.level_mass[0]), None, pt.age, dt, self.neighbours, m.boxes, m.walls, cset,
                                 rho=pt.rho, smoothing=m.xsph)

    def memory_bytes(self) -> int:
        """Bytes held by the particle state (every channel at its capacity), the solver's buffers and
        the last grid."""
        arrays = [self.level, self._x_buf, self._xq, self._xq_out, self._slope, self._rho, self._share,
                  self._block_err, self._block_max, self._wall_free, self._slot, self._flagged]
        if self.grid is not None:
            g = self.grid
            arrays += [g.cell_key, g.cell_start, g.cell_nbr]
        pairs = self._clusters.nbytes() if self._clusters is not None else self._particle_list.nbytes()
        return self.particles.nbytes() + pairs + self.liquid_forces.nbytes() + int(sum(a.nbytes for a in arrays))


_NO_COLLIDERS = empty_world_args()
