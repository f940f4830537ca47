"""MAC-SPH hybrid: a staggered grid in the deep liquid, SPH particles near the surface.

Suárez & Susín 2006, "Mesh-particle model for fluid animation", §4. Below an interface height l the liquid is solved
on the MAC grid of
:mod:`engine.solvers.hybrid.mac` (eq. 2-4); above it by WCSPH (§3: eq. 5 pressure force, eq. 6 Tait
equation of state, eq. 8 leap-frog; the SPH core of :mod:`engine.solvers.sph` that WCSPH uses too,
over the SPH and MIXA rows, with summation density, clamped pressure and the box walls of
:mod:`engine.collision.walls`). Every particle has a kind, from its
height z (Surge's Z is the paper's y):

============  ======================  =====================================================
kind          band                    moved by
============  ======================  =====================================================
SPH           z >= l                  SPH forces (leap-frog)
MIXA          l - 2h <= z < l         u = beta u_MAC + (1 - beta) u_SPH, beta = (l - z) / 2h (eq. 11)
MIXB          l - 4h <= z < l - 2h    the grid; carry p = rho P_grid, rho and the half-step
                                      velocity u^(n+1/2) = u^n + a dt / 2, a = (u^(n+1) - u^n) / dt
                                      (eq. 10) so that SPH and MIXA particles see them as neighbours
MAC           z < l - 4h              the grid (markers: no neighbours, no SPH sums)
============  ======================  =====================================================

Kinds are set from the positions at the start of every substep, so particles change kind as they
cross the layers. The grid's computed rows reach up to the first row whose lower face is at least
2h above l (``ktop``); that boundary row takes P = p / rho and the velocity from the SPH particles
by kernel interpolation at its fixed nodes (eq. 9, Shepard-normalised; the nodes are the boundary
row's own staggered positions, and every particle within 2h of them is an SPH particle).

Order of a substep (§4.2):

1. boundary row of the grid from the SPH particles (eq. 9);
2. MAC step u^n -> u^(n+1) (eq. 2-4);
3. MIXA: the MAC part of eq. 11 with u_MAC^(n+1); MIXB and MAC markers: the half-step
   velocity of eq. 10 (MIXB carry it into the SPH sums);
4. SPH step of the SPH and MIXA particles (kick-drift-kick; their neighbours include MIXB
   particles with their old density and pressure); markers drift with the grid velocity;
5. after the SPH step, pressure and density of MIXB (and MAC markers) from the grid, MIXA
   pressure blended like eq. 11, density from the equation of state (eq. 6) inverted — the
   variant the paper suggests at the end of §4.2; MIXA velocity's SPH part is now up to date.

Beyond the paper (its §5 future work):

* ``interface_mode='AUTO'`` places l a fixed depth below the free surface measured on the grid
  (per grid column the highest particle; l follows the 10th percentile of the wet columns), and
  moves it, by at least half a cell, as a tank fills or empties; without enough liquid for a MAC
  part (fewer than a few cells under the MIXB band) every particle is SPH.
* the grid's solid cells are those whose centre lies outside every box container or inside a
  mesh collider's solid (:meth:`engine.collision.world.CollisionWorld.inside`), the same distance fields
  the particles collide with; moving colliders are re-voxelised every substep.

The neighbour search covers only SPH, MIXA and MIXB particles (a Verlet list with a skin, as in
WCSPH); after each rebuild they occupy the first ``n_sub`` rows of the particle arrays in Morton
order, the markers follow. Those markers move every few substeps (:data:`MARKER_EVERY`), with the
time they waited and the current half-step grid velocity, and always before a rebuild or a frame
(:meth:`HybridSolver.flush`), by the displacement the grid accumulated meanwhile, sampled at the
midpoint of the move: nothing reads them in between, and moving them every substep cost about 5 %
of the substep. Their p and rho are taken from the grid only by a rebuild's or a frame's
flush (before anything reads them). The boundary row's nodes keep, from one neighbour-list build to the
next, the list of particles within 2h + SKIN h / 2 of them (:class:`boundary.BoundaryRow`),
so eq. 9 needs no search each substep. The pressure solve starts from the last grid pressure moved
with the boundary row's mean change and extrapolated in time (:func:`extrapolate_pressure`). The free surface is
measured every
:data:`INTERFACE_EVERY` substeps.

Where this differs from the paper: density is the kernel sum (WCSPH's "summation" mode; WCSPH's
default now follows the continuity equation of §3, which the hybrid does not yet); eq. 9 is
normalised by the kernel sum of the particle volumes (exact for linear fields, and the nodes'
neighbourhoods are full anyway); the boundary row's nodes are its own
staggered positions rather than nodes averaged onto them; markers keep the velocity they moved
with (the half-step velocity inside the neighbour search, the mean velocity of their last catch-up
below it; the cache shows it); grid walls are free-slip at the grid's sides and have zero face
velocity next to a solid cell.

Modules: :mod:`.model` (parameters, constants, the kernels' argument groups), :mod:`.kinds` (particle
kinds, the passes before and after the SPH sums, markers, the free surface), :mod:`.boundary` (eq. 9,
the boundary row), :mod:`.state` (markers' debt, pressure guess, checkpoint state) and
:mod:`.solver` (:class:`HybridSolver`).
"""

from .boundary import BoundaryRow, NodeLists, fill_row_listed, fill_rows, node_candidates, row_nodes
from .kinds import advance, classify, column_tops, finish, grid_pressure, move_markers, percentile, sph_rows
from .model import (INTERFACE_EVERY, INTERFACE_MODES, KIND_NAMES, MAC, MARKER_EVERY, MIXA, MIXB, SPH, Bands,
                    BoxWalls, Faces, GridFrame, HybridModel, make_model)
from .solver import HybridSolver
from .state import HybridState, MarkerDebt, PressureGuess, extrapolate_pressure
from ..sph import SKIN

__all__ = ["BoundaryRow", "Bands", "BoxWalls", "Faces", "GridFrame", "HybridModel", "HybridSolver", "HybridState",
           "INTERFACE_EVERY", "INTERFACE_MODES", "KIND_NAMES", "MAC", "MARKER_EVERY", "MIXA", "MIXB",
           "MarkerDebt", "PressureGuess", "NodeLists", "SKIN", "SPH", "advance", "classify", "column_tops",
           "extrapolate_pressure", "fill_row_listed", "fill_rows", "finish", "grid_pressure", "make_model",
           "move_markers", "node_candidates", "percentile", "row_nodes", "sph_rows"]
