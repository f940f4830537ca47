"""The hybrid solver: one substep in the order of Suárez & Susín 2006, "Mesh-particle model for fluid
animation", §4.2 (see :mod:`engine.solvers.hybrid` for the method), the interface, the neighbour
search over the particles near the surface, and the solver contract of :mod:`engine.solvers`.
"""

from __future__ import annotations

import dataclasses
import logging
import math

import numpy as np

from ...collision.queries import project
from ...collision.world import SWEEP_STEP, CollisionWorld, empty_world_args
from ...core.neighbour_list import NeighbourList
from ...core.cell_grid import build_grid
from ...core.particles import Particles
from ...core.state_check import max_speed_and_acceleration
from .. import SolverSetup, SpeedLimit
from . import mac
from ..sph import SKIN, accelerations, density_pressure, max_displacement2
from ..wcsph import WCSPHSolver, sound_speed_advice, sound_speed_limit
from .boundary import BoundaryRow
from .kinds import advance, classify, column_tops, finish, grid_pressure, move_markers, percentile, sph_rows
from .model import (CHUNK, INTERFACE_EVERY, KIND_NAMES, MAC, MARKER_EVERY, MARKER_REACH, MIN_MAC_ROWS, MIXA,
                    PRESSURE_EXTRAPOLATION, SURFACE_PERCENTILE, Bands, BoxWalls, Faces, GridFrame, HybridModel,
                    make_model)
from .state import HybridState, MarkerDebt, PressureGuess, extrapolate_pressure

log = logging.getLogger("engine.solvers.hybrid")


class HybridSolver:
    """Advances a :class:`Particles` set with the MAC-SPH hybrid (see the module docstring).

    Attributes
    ----------
    particles : Particles
    grid : mac.MACGrid
        The staggered grid (rows ``k < ktop`` computed, row ``ktop`` the boundary row).
    kind : ndarray, shape (N,), int8
        Kind of each particle at the last substep (SPH, MIXA, MIXB, MAC).
    interface : float
        Height l of the SPH / MIXA limit, metres (-inf: no MAC part, every particle is SPH).
    ktop : int
        The grid's boundary row (0: no MAC part).
    n_sub : int
        Particles in the neighbour search (SPH, MIXA, MIXB and a skin), the first rows.
    pressure_iterations : int
        Sweeps of the last pressure solve.
    """

    name = "HYBRID"

    @classmethod
    def from_settings(cls, setup: SolverSetup, particles: Particles, collision: CollisionWorld | None = None,
                      level: np.ndarray | None = None) -> HybridSolver:
        """The hybrid solver of a bake (see :meth:`engine.solvers.Solver.from_settings`): its SPH part is
        WCSPH with summation density (the kernels it mirrors), its grid spans the box containers' extent
        or, without any, the initial liquid's bounding box grown by a quarter of its size each way."""
        s = setup.settings
        sph_model = WCSPHSolver.model_from_settings(setup, "summation")
        boxes = setup.boxes
        if len(boxes):
            lower, upper = boxes[:, 0].min(axis=0), boxes[:, 1].max(axis=0)
        elif len(particles):
            lower, upper = particles.x.min(axis=0).astype(np.float64), particles.x.max(axis=0).astype(np.float64)
            pad = 0.25 * (upper - lower) + 2.0 * s.particle_spacing
            lower, upper = lower - pad, upper + pad
        else:
            lower, upper = np.zeros(3), np.full(3, s.particle_spacing)
        model = make_model(sph_model, lower=lower, upper=upper, cell_factor=s.hybrid_cell_factor,
                           interface_mode=s.hybrid_interface_mode, interface_depth=s.hybrid_interface_depth,
                           interface_height=s.hybrid_interface_height, pressure_solver=s.hybrid_pressure_solver,
                           omega=s.hybrid_sor_omega, tolerance=s.hybrid_pressure_tolerance,
                           max_iterations=s.hybrid_max_iterations)
        solver = cls(model, particles, collision=collision)
        log.info("HYBRID: %d particles, h=%.4g m, c0=%.4g m/s, grid %s of %.4g m cells, interface at %.4g m (%s)",
                 len(particles), sph_model.h, sph_model.c0, "x".join(map(str, model.shape)), model.cell,
                 solver.interface, solver.kind_counts())
        return solver

    @classmethod
    def kernel_support(cls, settings, spacing: float) -> float:
        """2h of the SPH part, as WCSPH's, m."""
        return WCSPHSolver.kernel_support(settings, spacing)

    def set_animated(self, values: dict) -> None:
        """Gravity (the SPH part's, which is the grid's too) and the kinematic viscosity of both parts."""
        model = self.model
        sph = {}
        if "dynamic_viscosity" in values:  # Pa s: the grid's and the particles' kinematic viscosity is mu / rho0
            nu = values["dynamic_viscosity"] / model.sph.rho0
            model = dataclasses.replace(model, nu=nu)
            sph["nu"] = nu
        if "gravity" in values:
            sph["gravity"] = values["gravity"]
        if sph:
            model = dataclasses.replace(model, sph=dataclasses.replace(model.sph, **sph))
        self.model = model

    def set_box_response(self, k: int, friction: float | None = None, bounce: float | None = None) -> None:
        if friction is not None:
            self.model.sph.box_friction[k] = friction
        if bounce is not None:
            self.model.sph.box_bounce[k] = bounce

    def __init__(self, model: HybridModel, particles: Particles, collision: CollisionWorld | None = None,
                 start: bool = True):
        """``start``: place the interface, build the neighbour search, fill the grid from the particles
        and evaluate their forces (False: they continue a saved state, see :meth:`resume`)."""
        self.model = model
        self.particles = particles
        self.collision = collision
        self.time = 0.0
        self.steps = 0
        self.grid = mac.MACGrid.create(model.origin, model.cell, model.shape)
        self.scratch = mac.MACScratch(self.grid)
        #: the half-step velocity (u^n + u^(n+1)) / 2 of the last MAC step (eq. 10)
        self._half = Faces(np.zeros_like(self.grid.u), np.zeros_like(self.grid.v), np.zeros_like(self.grid.w))
        g = self.grid
        top_corner = g.origin + np.array(g.shape) * g.cell
        self.frame = GridFrame(float(g.origin[0]), float(g.origin[1]), float(g.origin[2]), 1.0 / g.cell,
                               float(top_corner[0]), float(top_corner[1]))
        s = model.sph
        self._walls = BoxWalls(s.boxes, 2.0 * model.h, s.box_friction, s.box_bounce)
        self._disp_chunks = np.zeros(0, dtype=np.float64)  # advance's largest moves per chunk
        #: the markers outside the neighbour search: the time and displacement they still owe
        self.markers = MarkerDebt.create(self.grid)
        #: the last grid pressure and boundary-row shift, for the pressure solve's start guess
        self.guess = PressureGuess.create(self.grid)
        self._box_solid = self._solid_of_boxes()
        self.neighbours = NeighbourList()
        self.rebuilds = 0
        self.n_sub = 0
        self._x_ref: np.ndarray | None = None
        self._disp2: float | None = None  # largest squared move since the last build, from advance()
        self._l_built = None
        self._changed = True
        self.interface = -math.inf
        self.ktop = 0
        self.pressure_iterations = 0
        self.pressure_residual = 0.0
        n = len(particles)
        self.kind = np.zeros(n, dtype=np.int8)
        self._rows = np.zeros(n, dtype=np.int32)  # scratch: the rows of SPH and MIXA particles
        self._pr = np.zeros(n, dtype=np.float32)
        self._near = np.zeros(n, dtype=np.bool_)
        self._wall_grad = np.zeros((n, 3), dtype=np.float32)
        #: eq. 9: the boundary row's node lists and the fill of whole rows
        self.boundary = BoundaryRow()
        self.head_reorders = 0  # rebuilds that reordered only the subset
        self._update_solid()
        if n and start:
            self._set_interface(self._interface_target(), force=True)
            self._rebuild()
            self._classify()
            self._fill(0, self.ktop, every_particle=True)
            self._evaluate()

    # -- set-up ----------------------------------------------------------------------------------

    @property
    def _cset(self) -> tuple:
        return self.collision.args if self.collision is not None else _NO_COLLIDERS

    def _solid_of_boxes(self) -> np.ndarray:
        """1 where a cell centre lies outside every box container (or everywhere inside when there
        is none: the grid then spans the liquid and mesh colliders)."""
        boxes = self.model.sph.boxes
        c = self.grid.cell_centres()
        if len(boxes) == 0:
            return np.zeros(self.grid.shape, dtype=np.uint8)
        inside = np.zeros(len(c), dtype=bool)
        for lo, hi in boxes:
            inside |= np.all((c >= lo) & (c <= hi), axis=1)
        # the rows above the boxes' tops stay open: liquid may rise over a container
        top = max(float(b[1, 2]) for b in boxes)
        inside |= c[:, 2] > top
        return (~inside).reshape(self.grid.shape).astype(np.uint8)

    def _update_solid(self) -> None:
        """Solid cells: outside the boxes, or inside a mesh collider's solid at the current time."""
        solid = self._box_solid.copy()
        if self.collision is not None:
            inside = self.collision.inside(self.grid.cell_centres().astype(np.float32))
            solid |= inside.reshape(self.grid.shape).astype(np.uint8)
        self.grid.solid[:] = solid
        self._open_columns = ~np.all(solid.astype(bool), axis=2)  # columns with a liquid cell

    # -- interface ---------------------------------------------------------------------------------

    def _interface_target(self) -> float:
        m, g = self.model, self.grid
        ni, nj, nk = g.shape
        if m.interface_mode == "FIXED":
            return m.interface_height
        pt = self.particles
        if len(pt) == 0:
            return -math.inf
        top = np.empty((ni, nj), dtype=np.float64)
        column_tops(pt.x, g.origin[0], g.origin[1], 1.0 / g.cell, ni, nj, top)
        heights = top[np.isfinite(top) & self._open_columns]
        if heights.size == 0:
            return -math.inf
        surface = percentile(heights, SURFACE_PERCENTILE)
        return surface - max(m.interface_depth, m.min_depth)

    def _set_interface(self, target: float, force: bool = False) -> bool:
        """Move l to ``target`` (by at least half a cell unless forced); returns True if it moved."""
        m, g = self.model, self.grid
        h, cell = m.h, g.cell
        z0 = g.origin[2]
        nk = g.shape[2]
        # the boundary row must fit under the grid's top face
        target = min(target, z0 + (nk - 1) * cell - 2.0 * h)
        if target - 4.0 * h < z0 + MIN_MAC_ROWS * cell:
            target = -math.inf
        if not force and (target == self.interface or (math.isfinite(target) and math.isfinite(self.interface)
                                                      and abs(target - self.interface) < 0.5 * cell)):
            return False
        old_ktop = self.ktop
        self.interface = target
        self.ktop = (min(int(math.ceil((target + 2.0 * h - z0) / cell - 1e-9)), nk - 1)
                     if math.isfinite(target) else 0)
        if not force and self.ktop > old_ktop and len(self.particles):
            self._fill(old_ktop, self.ktop)  # rows the MAC part takes over start from the particles
        log.debug("hybrid interface at %.4g m, boundary row %d", target, self.ktop)
        return True

    # -- neighbours --------------------------------------------------------------------------------

    def _reach(self) -> float:
        return self.model.h * (1.0 + 0.5 * SKIN)

    def _rebuild(self) -> None:
        """Subset (every particle within the skin of the MIXB band or above), Morton order first,
        markers after; neighbour list over the subset (only when a particle moved half the skin, the
        particle set changed or the interface moved)."""
        pt, h = self.particles, self.model.h
        n = len(pt)
        skin = SKIN * h
        if (not self._changed and self._x_ref is not None and self._x_ref.shape[0] == n
                and self._l_built == self.interface):
            disp2 = self._disp2 if self._disp2 is not None else max_displacement2(pt.x, self._x_ref)
            if disp2 <= (0.5 * skin) ** 2:
                return
        # the markers catch up before the subset is chosen again; the p and rho of those that join
        # it are taken from the grid below, the others' wait for a frame's flush
        self._move_markers(False)
        g = self.grid
        hi = g.origin + np.array(g.shape) * g.cell
        x = pt.x
        outside = ((x[:, 0] < g.origin[0]) | (x[:, 0] > hi[0]) | (x[:, 1] < g.origin[1]) | (x[:, 1] > hi[1])
                   | (x[:, 2] < g.origin[2]))
        sub = (x[:, 2] >= self.interface - 4.0 * h - skin) | outside
        idx_sub = np.flatnonzero(sub)
        idx_rest = np.flatnonzero(~sub)
        reach = self._reach()
        if len(idx_sub):
            grid = build_grid(x[idx_sub], 2.0 * reach)
            order = np.concatenate([idx_sub[grid.order], idx_rest])
        else:
            grid = None
            order = idx_rest
        # the list's slices are sized from the last build's counts (particles that join the subset
        # are guessed at the largest of them): a counting pass over the subset cost a third of a build
        old_n_sub, old_counts = self.n_sub, self.neighbours.count
        hint = None
        if len(idx_sub) and old_n_sub and old_counts.shape[0] == old_n_sub:
            came_from = order[:len(idx_sub)]
            known = came_from < old_n_sub
            hint = np.full(len(idx_sub), int(old_counts.max()), dtype=np.int64)
            hint[known] = old_counts[came_from[known]]
        if len(idx_sub) == old_n_sub and (len(idx_rest) == 0 or idx_rest[0] == old_n_sub):
            # the same particles in the subset (the markers are rows old_n_sub on, in order): only
            # the subset is sorted again, the markers' rows stay
            pt.reorder(order[:old_n_sub], head=old_n_sub)
            self.head_reorders += 1
        else:
            pt.reorder(order)
        self.n_sub = len(idx_sub)
        if self.markers.p_stale and self.ktop > 0:
            joined = np.flatnonzero(order[:self.n_sub] >= old_n_sub).astype(np.int64)
            grid_pressure(pt.x, joined, self.frame, self.grid.p, self.model.sph.rho0,
                          self.model.sph.pressure_constant, pt.p, pt.rho)
        if grid is not None:
            self.neighbours.build(pt.x[:self.n_sub], np.full(self.n_sub, reach, dtype=np.float32),
                                  grid._replace(order=None), counts_hint=hint)
        else:
            self.neighbours = NeighbourList()
        self.kind[self.n_sub:] = MAC
        if self._x_ref is not None and self._x_ref.shape == pt.x.shape:
            self._x_ref[:] = pt.x  # into the same buffer: no fresh pages to fault in
        else:
            self._x_ref = pt.x.copy()
        self._build_node_lists(grid)
        self._disp2 = 0.0
        self.markers.disp2 = 0.0
        self._l_built = self.interface
        self._changed = False
        self.rebuilds += 1

    def _build_node_lists(self, cells) -> None:
        """The boundary row's node lists from the positions of this build, found in its cell grid
        ``cells`` (:meth:`BoundaryRow.build`; None: no particle in the neighbour search)."""
        m = self.model
        self.boundary.build(self.grid, self._x_ref[:self.n_sub], cells, m.h * (2.0 + 0.5 * SKIN), int(self.ktop))

    def save_state(self) -> HybridState:
        """The grid, the interface, the neighbour search's subset and build positions, the particles'
        kinds, the pressure solve's start guess and the markers' debt (:class:`HybridState`)."""
        g = self.grid
        return HybridState(grid_u=g.u, grid_v=g.v, grid_w=g.w, grid_p=g.p, interface=self.interface, steps=self.steps,
                           n_sub=self.n_sub, l_built=self._l_built, kind=self.kind, x_ref=self._x_ref,
                           guess=self.guess, markers=self.markers)

    def resume(self, particles: Particles, arrays: dict, time: float) -> HybridSolver:
        """A solver with this one's model and colliders continuing from a checkpoint (see
        :meth:`engine.solvers.Solver.resume`): the neighbour list and the boundary row's node lists
        are rebuilt from the saved build positions, so the sums run in the order they ran."""
        state = HybridState.from_arrays(arrays)
        fresh = HybridSolver(self.model, particles, collision=self.collision, start=False)
        fresh.time = time
        if fresh.collision is not None:
            fresh.collision.update(time)
        g = fresh.grid
        for dst, src in ((g.u, state.grid_u), (g.v, state.grid_v), (g.w, state.grid_w), (g.p, state.grid_p)):
            dst[:] = src
        fresh.steps = state.steps
        fresh._set_interface(state.interface, force=True)
        fresh.interface = state.interface
        fresh.n_sub = state.n_sub
        fresh._l_built = state.l_built
        fresh.kind[:] = state.kind
        fresh.guess = state.guess
        fresh.markers = state.markers
        n = len(particles)
        if state.x_ref is not None and state.x_ref.shape[0] == n and fresh.n_sub:
            fresh._x_ref = np.array(state.x_ref, dtype=np.float32, order="C")  # a copy: rebuilds write into it
            reach = fresh._reach()
            xs = fresh._x_ref[:fresh.n_sub]
            grid = build_grid(xs, 2.0 * reach)
            if not np.array_equal(grid.order, np.arange(fresh.n_sub)):
                raise ValueError("the saved neighbour-list positions are not in the particles' order")
            fresh.neighbours.build(xs, np.full(fresh.n_sub, reach, dtype=np.float32), grid._replace(order=None))
            fresh._build_node_lists(grid)
            fresh._changed = False
        fresh._update_solid()
        return fresh

    def speed_limit(self) -> SpeedLimit:
        """Five times the speed of sound, as for WCSPH."""
        s = self.model.sph
        return sound_speed_limit(s.c0, s.cfl)

    def nonfinite_advice(self) -> str:
        return sound_speed_advice(self.model.sph.cfl)

    # -- pieces of a substep -------------------------------------------------------------------------

    def _bands(self) -> Bands:
        return Bands(int(self.n_sub), float(self.interface), float(self.model.h))

    def _classify(self) -> None:
        classify(self.particles.x, self._bands(), self.frame, self.kind)

    def _fill(self, k0: int, k1: int, every_particle: bool = False) -> None:
        """Rows k0..k1 of the grid from the SPH particles around them (eq. 9); with ``every_particle``
        from the markers too (the first fill of the whole grid: the liquid's initial velocity reaches
        the deep rows). The boundary row alone is filled from the node lists of the last build when
        it has them, other rows from the particles searched afresh in a cell grid."""
        if self.ktop <= 0:
            return
        m, pt = self.model, self.particles
        self.boundary.fill(self.grid, pt.x, pt.v, pt.p, pt.rho, len(pt) if every_particle else self.n_sub,
                           m.sph.mass, m.h, k0, k1, use_lists=not every_particle)

    def _evaluate(self) -> None:
        """Density and pressure of SPH and MIXA particles, then their accelerations."""
        s, pt = self.model.sph, self.particles
        ns = self.n_sub
        if ns == 0:
            return
        nl = self.neighbours
        x, v = pt.x[:ns], pt.v[:ns]
        # SPH and MIXA rows; MIXB (and markers not yet moved out of the list) carry p and rho from the grid
        rows = self._rows[:sph_rows(self.kind, pt.p, pt.rho, ns, self._rows, self._pr)]
        cset = self._cset
        n_col = cset.colliders.shape[0]
        wall_grad = self._wall_grad[:ns] if n_col else _NO_GRADIENT
        density_pressure(x, rows, False, nl.start, nl.count, nl.nbr, s.h, s.mass, s.rho0, s.pressure_constant,
                         s.boxes, s.table_d0, s.table_step, s.psi, s.dpsi, cset,
                         pt.rho[:ns], pt.p[:ns], self._pr[:ns], self._near[:ns], wall_grad)
        accelerations(x, v, rows, False, pt.rho[:ns], pt.p[:ns], self._pr[:ns], self._near[:ns], nl.start,
                      nl.count, nl.nbr, s.h, s.mass, s.rho0, s.c0, s.alpha, s.nu, s.gravity[0], s.gravity[1],
                      s.gravity[2], s.boxes, s.table_d0, s.table_step, s.psi, s.dpsi, s.tau_n, s.tau_t, n_col,
                      wall_grad, pt.a[:ns])

    def _ensure_capacity(self) -> None:
        n = len(self.particles)
        if self.kind.shape[0] != n:
            self.kind = np.zeros(n, dtype=np.int8)
            self._rows = np.zeros(n, dtype=np.int32)
            self._pr = np.zeros(n, dtype=np.float32)
            self._near = np.zeros(n, dtype=np.bool_)
            self._wall_grad = np.zeros((n, 3), dtype=np.float32)

    # -- public ------------------------------------------------------------------------------------

    def step(self, dt: float) -> None:
        """One substep of length dt in the order of §4.2 of the paper (see the module docstring)."""
        m, pt, g = self.model, self.particles, self.grid
        s = m.sph
        if len(pt) == 0:
            self.time += dt
            return
        self._ensure_capacity()
        if m.interface_mode == "AUTO" and self.steps % INTERFACE_EVERY == 0 and self.steps > 0:
            self._set_interface(self._interface_target())
        self._rebuild()
        use_grid = self.ktop > 0
        # 1-2: boundary row from SPH (eq. 9), MAC step (eq. 2-4)
        if use_grid:
            self._fill(self.ktop, self.ktop)
            if self.guess.ktop == self.ktop:
                self.guess.shift = extrapolate_pressure(g.p, self.guess.p_last, g.solid, self.ktop,
                                                        PRESSURE_EXTRAPOLATION,
                                                     self.guess.shift)
            else:  # the rows changed: start from p^n alone this once
                self.guess.p_last[:] = g.p
                self.guess.shift = 0.0
            self.guess.ktop = self.ktop
            # the projection also leaves the half-step field (u^n + u^(n+1)) / 2 of eq. 10 in _half and
            # adds dt times it to the markers' displacement
            self.pressure_iterations, self.pressure_residual = mac.step(
                g, self.scratch, self.ktop, dt, m.nu, s.gravity, m.pressure_solver, m.omega, m.tolerance,
                m.max_iterations, half_step=(*self._half, *self.markers.moved, self.markers.fresh))
            self.markers.fresh = False
        # 3-4: kinds; MAC part of MIXA (eq. 11), half-step velocities of MIXB and markers (eq. 10); SPH
        # and MIXA half kick; everything drifts
        x_start = pt.x.copy() if self.collision is not None else pt.x
        chunks = (self.n_sub + CHUNK - 1) // CHUNK  # advance writes every one of them
        if self._disp_chunks.shape[0] < chunks:
            self._disp_chunks = np.zeros(2 * chunks, dtype=np.float64)
        disp = self._disp_chunks[:chunks]
        advance(pt.x, pt.v, pt.a, self._x_ref, self._bands(), self.frame, dt, use_grid, self._half,
                Faces(g.u, g.v, g.w), self._walls, self.kind, disp)
        self._disp2 = float(disp.max()) if chunks else 0.0
        self.time += dt
        self.markers.dt += dt
        self.markers.steps += 1
        # the first substep's half-step field holds the projection of the initial velocity (which
        # need not be divergence-free): the markers take that substep with it
        if (self.markers.steps >= MARKER_EVERY or self.steps == 0
                or (self.markers.dt + dt) * self.markers.speed > MARKER_REACH * m.h):
            self._move_markers(False)
        self._disp2 = max(self._disp2, self.markers.disp2)
        if self.collision is not None:
            self.collision.update(self.time)
            project(x_start, pt.x, pt.v, SWEEP_STEP * s.dx, 0.0, 1.0 / dt, True, self._cset)
            self._disp2 = None  # the push-out moved particles after the measurement
            if self.collision.max_speed() > 0.0:
                self._update_solid()
        # 4: SPH sums of SPH and MIXA particles (MIXB neighbours with their old p and rho)
        self._evaluate()
        # 4-5: closing half kick; pressure and density of MIXA, MIXB and markers from the grid
        finish(pt.x, pt.a, self.kind, self._bands(), s.rho0, s.pressure_constant, dt, use_grid, self.frame, g.p,
               pt.v, pt.p, pt.rho)
        self.steps += 1

    def kick_grid(self, acceleration, dt: float) -> None:
        """Add dt times an external acceleration field (force fields, :meth:`engine.sources.forces.Forces.kick`)
        to the grid's face velocities of the computed rows (k < ktop; the boundary row takes its velocity
        from the SPH particles, which get the field themselves).

        ``acceleration(x, v, ids)`` maps face centres x (M, 3) float32, m, the velocity there v (M, 3)
        float32, m/s (the face's own component, the other two averaged from the neighbouring cell
        centres) and ids (M,) int64 (a face number, for the fields' noise) to accelerations (M, 3), m/s^2.
        The projection of the next MAC step then keeps what of it the liquid can follow (a push into a
        wall becomes pressure), as it does with gravity (eq. 3).
        """
        kt = int(self.ktop)
        if kt <= 0:
            return
        g = self.grid
        centre = [0.5 * (f[:-1] if a == 0 else (f[:, :-1] if a == 1 else f[:, :, :-1]))
                  + 0.5 * (f[1:] if a == 0 else (f[:, 1:] if a == 1 else f[:, :, 1:]))
                  for a, f in enumerate((g.u, g.v, g.w))]
        first = 0
        for axis, faces in enumerate((g.u, g.v, g.w)):
            rows = faces[:, :, :kt]
            shape = rows.shape
            coords = [g.origin[a] + (np.arange(shape[a]) + (0.0 if a == axis else 0.5)) * g.cell for a in range(3)]
            x = np.stack(np.meshgrid(*coords, indexing="ij"), axis=-1).reshape(-1, 3).astype(np.float32)
            v = np.empty((x.shape[0], 3), dtype=np.float32)
            for other in range(3):
                if other == axis:
                    v[:, other] = rows.reshape(-1)
                else:
                    v[:, other] = _to_faces(centre[other], axis)[:, :, :kt].reshape(-1)
            a = acceleration(x, v, np.arange(first, first + x.shape[0], dtype=np.int64))
            rows += dt * np.asarray(a[:, axis], dtype=np.float64).reshape(shape)
            first += x.shape[0]

    def flush(self) -> None:
        """Move the markers outside the neighbour search by the time they still owe (see
        :data:`MARKER_EVERY`), with the last half-step grid velocity, and give them their p and rho
        from the grid. The bake calls it before it writes a frame; it changes nothing when they are
        up to date."""
        self._move_markers(True)

    def _move_markers(self, pressure: bool) -> None:
        """:meth:`flush`; without ``pressure`` the markers' p and rho are left for a later flush
        (nothing reads them before: the substep's own catch-up skips them)."""
        if self.markers.dt == 0.0 and not (pressure and self.markers.p_stale):
            return
        pt, g, s = self.particles, self.grid, self.model.sph
        count = len(pt) - self.n_sub
        if count > 0 and self._x_ref is not None and self._x_ref.shape[0] == len(pt):
            chunks = (count + 4095) // 4096
            out = np.zeros(2 * chunks, dtype=np.float64)
            move_markers(pt.x, self._x_ref, self.n_sub, self.markers.dt, pressure, self.frame, self.markers.moved, g.p,
                         s.rho0, s.pressure_constant, self._walls, pt.v, pt.p, pt.rho, out)
            self.markers.disp2 = max(self.markers.disp2, float(out[:chunks].max()))
            if self.markers.dt > 0.0:
                self.markers.speed = math.sqrt(float(out[chunks:].max()))
        self.markers.p_stale = not pressure
        if self.markers.dt > 0.0:
            self.markers.fresh = True  # the displacement field starts again at the next substep
        self.markers.dt = 0.0
        self.markers.steps = 0

    def stable_dt(self) -> float:
        """Largest time step for the current state, s: the WCSPH criteria (CFL with the speed of sound,
        force and viscous limits) over SPH and MIXA particles, and the grid's CFL."""
        s, pt = self.model.sph, self.particles
        if len(pt) == 0:
            return math.inf
        vmax, amax = max_speed_and_acceleration(pt.v, pt.a, self.kind, MIXA)  # |a| of SPH and MIXA only
        dt = s.cfl * s.h / (s.c0 + vmax)
        if amax > 0.0:
            dt = min(dt, 0.25 * math.sqrt(s.h / amax))
        if s.nu > 0.0:
            dt = min(dt, 0.125 * s.h * s.h / s.nu, self.grid.cell ** 2 / (6.0 * s.nu))
        if vmax > 0.0:
            dt = min(dt, 0.5 * self.grid.cell / vmax)
        if self.collision is not None:
            dt = min(dt, self.collision.dt_limit(self.time))
        return dt

    def add_particles(self, x: np.ndarray, v: np.ndarray, level: int | np.ndarray = 0, **kwargs) -> np.ndarray:
        """Append particles between substeps (they join as SPH particles or markers by height at the
        next substep); returns their ids. The hybrid has a single resolution."""
        if np.any(np.asarray(level) != 0):
            raise ValueError("the hybrid solver has a single resolution; every particle has level 0")
        self.flush()  # the new rows come after the markers, which must not lend them their debt
        self.boundary.forget()
        n = len(self.particles)
        ids = self.particles.add(x, v, **kwargs)
        self.particles.a[n:] = self.model.sph.gravity
        self._changed = True
        self._ensure_capacity()
        return ids

    def remove_particles(self, mask: np.ndarray) -> int:
        """Delete the particles where ``mask`` is True between substeps; returns how many."""
        if np.any(mask):
            self.flush()
        removed = self.particles.remove(mask)
        if removed:
            self._changed = True
            self.n_sub = 0
            self.boundary.forget()
        self._ensure_capacity()
        return removed

    def kind_counts(self) -> dict:
        """Particles of each kind at the last substep."""
        counts = np.bincount(self.kind, minlength=4)
        return {name: int(c) for name, c in zip(KIND_NAMES, counts)}

    def memory_bytes(self) -> int:
        """Bytes held by the particle buffers, the grid, its work arrays and the neighbour list."""
        return (self.particles.nbytes() + self.grid.nbytes() + self.scratch.nbytes()
                + sum(a.nbytes for a in self._half) + self.guess.p_last.nbytes + self.neighbours.nbytes()
                + self.kind.nbytes
                + self._rows.nbytes + self._pr.nbytes + self._near.nbytes + self._wall_grad.nbytes
                + sum(a.nbytes for a in self.markers.moved) + self.boundary.nbytes())


def _to_faces(cells: np.ndarray, axis: int) -> np.ndarray:
    """Cell-centred values (ni, nj, nk) averaged onto the faces normal to ``axis`` (one more along it;
    the outermost faces take their one cell's value)."""
    c = np.moveaxis(cells, axis, 0)
    padded = np.concatenate([c[:1], c, c[-1:]], axis=0)
    return np.moveaxis(0.5 * (padded[:-1] + padded[1:]), 0, axis)


_NO_COLLIDERS = empty_world_args()
_NO_GRADIENT = np.zeros((0, 3), dtype=np.float32)
