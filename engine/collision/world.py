"""Mesh colliders in the particle solvers: distance grids, motion, contact response.

Every :class:`~engine.scene.MeshCollider` becomes a narrow-band signed distance grid
(:mod:`engine.collision.sdf`; Alduán, Tena & Otaduy 2015, "Efficient and Robust Position-Based Fluids for VFX",
§4) sampled in the collider's rest pose (its world-space surface at the first frame), in one of three modes:

* ``SOLID``: the inside of the mesh is solid (grid mode ``SOLID_INSIDE``);
* ``CONTAINER``: the outside is solid, the liquid stays in (``SOLID_OUTSIDE``, the inside-out
  container of Gourlay 2012, "Fluid Simulation for Video Games (part 14)");
* ``SHELL``: the surface itself is a wall half a particle spacing thick on each side (``SHELL``).

``AUTO`` is resolved from the mesh (:func:`resolve_mode`): a closed mesh (its generalised winding
number is near 0 or 1 almost everywhere in its bounding box) is a container when most of the
liquid starts inside it and a solid otherwise; an open mesh is a shell.

The liquid meets the surface ``phi_eff = phi - offset = 0``, where ``offset`` is the collider's
surface offset (plus the half thickness of a shell). Two things act on a particle:

1. *Density* (both solvers): the solid behind the surface holds the kernel mass of a half-space,
   ``rho0 psi(phi_eff)`` (the same tables as box walls, :mod:`engine.collision.walls`), combined over walls as
   ``1 - prod (1 - psi)``. Its gradient ``psi'(phi_eff) n`` gives the wall pressure force (WCSPH) or
   the wall push of the density constraint (PBF), so walls are neither sticky nor leaky.
2. *Contact* (push-out and damped reflection as in Hussain, "Smoothed Particle Hydrodynamics for
   Real-Time Fluid Simulation for Unity"): a particle with
   ``phi_eff < 0`` is moved back along the normal ``n = grad phi / |grad phi|`` onto the surface; its
   velocity relative to the collider loses its approaching normal part, which is reflected with the
   collider's ``bounce``, and a fraction ``friction`` of its tangential part. A particle that moved
   farther than a quarter of the particle spacing in one substep is swept: the path is sampled at
   that step and the first sample inside the solid is taken, so nothing tunnels through a thin shell.

Motion (Alduán et al. 2015, §4, Fig. 7):

* rigid (``transforms``): one grid; per substep the world->rest map is the inverse of the matrix
  interpolated linearly between frames, and the surface velocity at a point is the derivative of
  that interpolation, ``(T_{f+1} - T_f) fps`` applied to the rest-space point;
* deforming (``frame_vertices``): one grid per frame. The surface velocity is that of the nearest
  triangle, the mean of its three vertex velocities over the frame; between frames a point is
  looked up in the grid of the nearer frame, moved back by that velocity times the time since
  that frame (exact for pieces that translate over the frame; blending the distances of two frames
  instead would put a sheet that sweeps past a particle at the wrong distance).

Convex meshes (every vertex on the inner side of every face plane) in SOLID or CONTAINER mode
skip the grid and are used exactly as half-space polytopes, after Gourlay 2012: the contact distance is
``parity * max_k (n_k . x - d_k)`` with parity +1 for a solid and -1 for a hole (a container), a
container's faces add wall mass face by face like a box's walls, the broad phase is the inscribed
sphere of a hole and the circumscribed sphere of a solid, and a particle found inside a solid is
ejected through the face it is least deep behind among those it is moving deeper through (the
velocity-aware collision distance), so a fast particle leaves the way it came.

Substeps are short enough that no collider surface moves more than :data:`MAX_SURFACE_TRAVEL`
particle spacings in one (:meth:`CollisionWorld.dt_limit`): less than the half thickness of a shell,
so a fast paddle cannot jump over particles.

Grids are cached in ``<cache>/sdf/<key>.npz`` under :func:`engine.collision.sdf.sdf_key`, a hash of everything
that shapes them, and reused by later bakes.

Packing
-------
The kernels take every collider of a bake as one :class:`~engine.collision.colliders.ColliderSet` (``cset``
below): named record arrays per grid and per collider, the grids' arrays stacked.
"""

from __future__ import annotations

import logging
import math
import os
import time

import numpy as np

from . import sdf
from .queries import inside_any
from ..io.cache import SDF_DIR  # noqa: F401  (re-exported: where grids are cached)
from .colliders import COLLIDER_DTYPE, KIND_GRID, KIND_POLYTOPE, ColliderSet, empty_world_args, pack_grids
from ..errors import CacheFormatError
from ..scene import MeshCollider

log = logging.getLogger(__name__)


#: Largest distance, in particle spacings, a collider surface may move in one substep.
MAX_SURFACE_TRAVEL = 0.4

#: Half thickness of a shell, in particle spacings (added to its surface offset).
SHELL_HALF_THICKNESS = 0.5

#: Sweep step, in particle spacings: a particle that moved farther in one substep has its path sampled.
SWEEP_STEP = 0.25

#: AUTO: a mesh is closed when fewer than this fraction of probe points in its bounding box have an
#: ambiguous winding number (between :data:`_AMBIGUOUS_LOW` and :data:`_AMBIGUOUS_HIGH`).
CLOSED_AMBIGUOUS_FRACTION = 0.02
_AMBIGUOUS_LOW = 0.2
_AMBIGUOUS_HIGH = 0.8
_PROBES_PER_AXIS = 12

GRID_MODES = {"SOLID": "SOLID_INSIDE", "CONTAINER": "SOLID_OUTSIDE", "SHELL": "SHELL"}

#: A vertex may stand this far (relative to the mesh size) outside a face plane of a convex mesh.
CONVEX_TOLERANCE = 1e-6

#: Convex meshes with more distinct face planes than this get a distance grid instead: every query
#: of a polytope visits all its planes, a grid query costs the same whatever the detail.
MAX_POLYTOPE_PLANES = 64


# ---------------------------------------------------------------------------------------------
# AUTO mode
# ---------------------------------------------------------------------------------------------

def inverse3(a: np.ndarray) -> np.ndarray:
    """Inverse of the 3 x 3 matrix ``a`` by its adjugate, float64.

    Not ``np.linalg.inv``: LAPACK's inverse in numpy's bundled OpenBLAS wakes OpenBLAS's own thread pool,
    which then competes for the cores with numba's threads just back from a parallel region (a 3 x 3
    inverse then costs hundreds of times its arithmetic); it runs for every moving collider at every
    substep.
    """
    (a00, a01, a02), (a10, a11, a12), (a20, a21, a22) = np.asarray(a, dtype=np.float64).tolist()
    # the adjugate (the transposed matrix of cofactors) over the determinant
    adj = np.array([[a11 * a22 - a12 * a21, a02 * a21 - a01 * a22, a01 * a12 - a02 * a11],
                    [a12 * a20 - a10 * a22, a00 * a22 - a02 * a20, a02 * a10 - a00 * a12],
                    [a10 * a21 - a11 * a20, a01 * a20 - a00 * a21, a00 * a11 - a01 * a10]])
    det = a00 * adj[0, 0] + a01 * adj[1, 0] + a02 * adj[2, 0]
    if det == 0.0 or not math.isfinite(det):
        raise np.linalg.LinAlgError("Singular matrix")
    return adj / det


def is_closed(mesh) -> bool:
    """True if ``mesh`` encloses a volume: its winding number is near 0 or 1 almost everywhere.

    Probes a 12^3 lattice of cell centres in the bounding box. An open sheet, a single-sided cup or
    a bowl leave large regions with winding numbers near 1/2; a closed mesh with small defects
    (Suzanne's eye sockets, a duplicated face, a pin hole) leaves only a thin region near the defect.
    A flat mesh is open.
    """
    v = mesh.vertices
    if len(mesh.triangles) == 0:
        return False
    lo, hi = v.min(axis=0), v.max(axis=0)
    ext = hi - lo
    if float(ext.min()) <= 1e-6 * float(ext.max()):
        return False
    u = (np.arange(_PROBES_PER_AXIS) + 0.5) / _PROBES_PER_AXIS
    g = np.stack(np.meshgrid(u, u, u, indexing="ij"), -1).reshape(-1, 3)
    w = np.abs(sdf.fast_winding_numbers(mesh, lo + g * ext))
    ambiguous = (w > _AMBIGUOUS_LOW) & (w < _AMBIGUOUS_HIGH)
    return float(np.mean(ambiguous)) < CLOSED_AMBIGUOUS_FRACTION


def resolve_mode(collider: MeshCollider, liquid: np.ndarray) -> str:
    """The mode a collider acts in: its own, or for 'AUTO' the one picked from the mesh.

    Parameters
    ----------
    liquid : ndarray, shape (N, 3), metres
        The liquid's initial particle positions (a closed mesh holding most of them is a container).
    """
    mode = collider.settings.collider_mode
    if mode != "AUTO":
        return mode
    if not is_closed(collider.mesh):
        return "SHELL"
    if len(liquid) == 0:
        return "SOLID"
    pts = np.asarray(liquid, dtype=np.float64)
    if len(pts) > 4096:
        pts = pts[np.linspace(0, len(pts) - 1, 4096).astype(np.int64)]
    inside = np.abs(sdf.fast_winding_numbers(collider.mesh, pts)) > 0.5
    return "CONTAINER" if float(np.mean(inside)) > 0.5 else "SOLID"


def convex_planes(mesh, mode: str) -> np.ndarray | None:
    """Face planes of a convex mesh as rows (n, d) with unit outward normals (n.x <= d inside), or None.

    A mesh is used as a convex polytope (Gourlay 2012) when it has at most :data:`MAX_POLYTOPE_PLANES`
    distinct face planes and every vertex lies on the inner side of every one (within
    :data:`CONVEX_TOLERANCE` of its size). A SOLID must also be closed (a missing
    face would leave the solid unbounded); a CONTAINER may be open (an open-topped tank has no lid).
    Shells and degenerate (flat) meshes are never polytopes.
    """
    if mode not in ("SOLID", "CONTAINER") or len(mesh.triangles) < 4:
        return None
    v = mesh.vertices
    size = float(np.max(np.ptp(v, axis=0)))
    if size <= 0.0 or float(np.min(np.ptp(v, axis=0))) <= 1e-6 * size:
        return None
    xyz = v[mesh.triangles]
    cross = np.cross(xyz[:, 1] - xyz[:, 0], xyz[:, 2] - xyz[:, 0])
    length = np.linalg.norm(cross, axis=1)
    ok = length > 1e-12 * size * size
    n = cross[ok] / length[ok, None]
    d = np.einsum("ij,ij->i", n, xyz[ok, 0])
    centre = v.mean(axis=0)
    flip = n @ centre - d > 0.0           # orient outward: the vertex centroid of a convex mesh is inside
    n[flip], d[flip] = -n[flip], -d[flip]
    # coplanar triangles (the two halves of a quad) give one plane
    key = np.round(np.column_stack([n, d / size]) * 1e6).astype(np.int64)
    _, first = np.unique(key, axis=0, return_index=True)
    if len(first) > MAX_POLYTOPE_PLANES:
        return None
    planes = np.column_stack([n, d])[np.sort(first)]
    if np.any(v @ planes[:, :3].T - planes[:, 3] > CONVEX_TOLERANCE * size):
        return None
    if mode == "SOLID" and not is_closed(mesh):
        return None
    return np.ascontiguousarray(planes)


# ---------------------------------------------------------------------------------------------
# The world: grids, packing, motion
# ---------------------------------------------------------------------------------------------

class _Entry:
    """One collider's grids and motion inside a :class:`CollisionWorld`."""

    def __init__(self, collider, mode, grid_index, tri_offset, vel_offset, offset, planes=None, plane_offset=0):
        self.collider = collider
        self.mode = mode
        self.planes = planes              # (K, 4) face planes of a convex polytope, or None
        self.plane_offset = plane_offset
        v = collider.frame_vertices.reshape(-1, 3) if collider.frame_vertices is not None else collider.mesh.vertices
        #: corners of the rest-space box beyond which it cannot act, set by the world (m)
        self.rest_lo, self.rest_hi = v.min(axis=0), v.max(axis=0)
        self.corners = None
        self.grid_index = grid_index      # first grid (one per frame when deforming)
        self.tri_offset = tri_offset
        self.vel_offset = vel_offset
        self.offset = offset
        #: motion given while simulating (:meth:`CollisionWorld.drive`): rest-to-world matrices (4, 4)
        #: at times t0 and t1, as (a, b, t0, t1), and the fastest point of its box then, m/s; or None
        self.driven = None
        self.driven_speed = 0.0


class CollisionWorld:
    """Every mesh collider of a bake, packed for the solvers' kernels.

    Parameters
    ----------
    colliders : sequence of MeshCollider
    liquid : ndarray, shape (N, 3)
        Initial particle positions (to resolve AUTO modes).
    dx : float
        Particle spacing, m.
    support : float
        Kernel support (2h) of the solver, m: grids are exact at least this far from the surface.
    cell_factor : float
        Grid cell size as a fraction of ``dx``.
    fps : float
        Frames per second: motion is given per frame.
    grid_dir : str, optional
        Folder of cached grids (read and written); None builds every grid.
    progress : callable, optional
        Receives one ``{"event": "collider", ...}`` dict per collider.
    store_grids : bool
        Write the grids built here into ``grid_dir`` (False only reads it: a stage over a finished cache).
    """

    def __init__(self, colliders, liquid, *, dx, support, cell_factor, fps, grid_dir=None, progress=None,
                 store_grids=True, n_bodies=0):
        self.dx = float(dx)
        self.fps = float(fps)
        self.entries: list[_Entry] = []
        self.reports: list[dict] = []
        grids, tris, vvel, planes = [], [], [], []
        n_tri = n_vel = n_planes = 0
        cell = float(cell_factor) * self.dx
        for col in colliders:
            t0 = time.perf_counter()
            mode = resolve_mode(col, liquid)
            offset = col.settings.surface_offset + (SHELL_HALF_THICKNESS * self.dx if mode == "SHELL" else 0.0)
            band = float(support) + 2.0 * cell + max(offset, 0.0)
            meshes = [col.mesh]
            if col.motion == "DEFORMING":
                meshes = [type(col.mesh)(fv, col.mesh.triangles) for fv in col.frame_vertices]
            poly = convex_planes(col.mesh, mode) if col.motion != "DEFORMING" else None
            if poly is not None:
                meshes = []                    # exact half-space polytope: no grid needed
            first = len(grids)
            cached = True
            cells = memory = 0
            for mesh in meshes:
                grid, hit = _grid(mesh, cell, band, GRID_MODES[mode], col.name, grid_dir, store_grids)
                cached = cached and hit
                grids.append(grid)
                cells += grid.block_phi.size
                memory += sdf.grid_nbytes(grid)
            entry = _Entry(col, mode, first, n_tri, n_vel, offset, poly, n_planes)
            # beyond the band (grids) or the kernel support plus the offset, nothing acts
            margin = band + 2.0 * cell + abs(offset)
            lo, hi = entry.rest_lo - margin, entry.rest_hi + margin
            entry.corners = np.array([[hi[0] if k & 1 else lo[0], hi[1] if k & 2 else lo[1],
                                       hi[2] if k & 4 else lo[2]] for k in range(8)])
            if poly is not None:
                planes.append(poly)
                n_planes += len(poly)
                memory = poly.nbytes
            if col.motion == "DEFORMING":
                tris.append(col.mesh.triangles)
                n_tri += col.mesh.triangles.shape[0]
                vel = np.diff(col.frame_vertices, axis=0) * self.fps       # (F-1, V, 3), m/s per frame
                vvel.append(vel.reshape(-1, 3).astype(np.float32))
                n_vel += vel.shape[0] * vel.shape[1]
            self.entries.append(entry)
            report = {"event": "collider", "name": col.name, "mode": mode,
                      "requested": col.settings.collider_mode, "motion": col.motion,
                      "shape": "CONVEX" if poly is not None else "GRID", "cells": int(cells),
                      "memory": int(memory), "seconds": round(time.perf_counter() - t0, 3), "cached": cached}
            self.reports.append(report)
            log.info("collider %s: %s (%s), %s, %.3g MiB, %.2f s%s", col.name, mode, col.motion,
                     f"convex polytope of {len(poly)} faces" if poly is not None else f"{len(meshes)} grid(s)",
                     memory / 2**20, report["seconds"], " (cached)" if cached else "")
            if progress is not None:
                progress(report)
        packed = pack_grids(grids) if grids else empty_world_args()[:5]
        self._reach = float(support) + 2.0 * self.dx   # broad-phase margin of polytopes
        self._speeds = [self._frame_speeds(e) for e in self.entries]
        self._constant = np.zeros(len(self.entries), dtype=COLLIDER_DTYPE)
        for c, e in enumerate(self.entries):
            self._set_constant(c, e)
        colliders = self._constant.copy()
        self._args = ColliderSet(
            *packed, colliders,
            tris=np.ascontiguousarray(np.concatenate(tris), dtype=np.int32) if tris else np.zeros((0, 3), np.int32),
            vvel=np.ascontiguousarray(np.concatenate(vvel)) if vvel else np.zeros((0, 3), dtype=np.float32),
            planes=np.ascontiguousarray(np.concatenate(planes)) if planes else np.zeros((0, 4)))
        for c, e in enumerate(self.entries):
            self._set_pose(colliders, c, e, 0.0)
        self.time = 0.0
        #: the last ``n_bodies`` colliders are rigid bodies (:mod:`engine.rigid`): their pose comes from the
        #: rigid-body solver (:meth:`move`), and the solvers add the liquid's push on them to ``reaction``
        #: (an :class:`engine.rigid.coupling.LiquidReaction`, set by the rigid bodies' world)
        self.n_bodies = int(n_bodies)
        self.first_body = len(self.entries) - self.n_bodies
        self.reaction = None

    @property
    def has_friction(self) -> bool:
        """True if some collider removes sliding speed (a contact pass is needed after each substep)."""
        return any(e.collider.settings.friction > 0.0 or np.any(np.asarray(e.collider.tracks.get("friction",
                                                                                                 0.0)) > 0.0)
                   for e in self.entries)

    def set_response(self, c: int, friction: float | None = None, bounce: float | None = None) -> None:
        """Set collider ``c``'s friction and bounce (animated settings, :mod:`engine.scene.animation`)."""
        # both the constant records (copied into the set at each pose) and the set the kernels read now
        for records in (self._constant, self._args.colliders):
            if friction is not None:
                records["friction"][c] = friction
            if bounce is not None:
                records["bounce"][c] = bounce

    @property
    def fixed_args(self) -> ColliderSet:
        """The ``cset`` of the colliders that are not rigid bodies (views of :attr:`args`' records)."""
        return self._args._replace(colliders=self._args.colliders[:self.first_body])

    @property
    def body_args(self) -> ColliderSet:
        """The ``cset`` of the rigid bodies alone; collider k of it is body k."""
        return self._args._replace(colliders=self._args.colliders[self.first_body:])

    @property
    def args(self) -> ColliderSet:
        """The ``cset`` the kernels take, at the time of the last :meth:`update` (its arrays are
        updated in place)."""
        return self._args

    def _frame_speeds(self, e: _Entry) -> np.ndarray:
        """Fastest surface speed of a collider in each frame interval, m/s (shape (F-1,) or (0,))."""
        col = e.collider
        if col.motion == "DEFORMING":
            d = np.linalg.norm(np.diff(col.frame_vertices, axis=0), axis=2)
            return d.max(axis=1) * self.fps
        if col.motion == "RIGID":
            v = col.mesh.vertices
            world = np.einsum("fij,vj->fvi", col.transforms[:, :3, :3], v) + col.transforms[:, None, :3, 3]
            d = np.linalg.norm(np.diff(world, axis=0), axis=2)
            return d.max(axis=1) * self.fps
        return np.zeros(0)

    def max_speed(self) -> float:
        """Fastest surface speed of any collider over the whole bake, m/s."""
        return float(max((s.max() for s in self._speeds if len(s)), default=0.0))

    def _frame(self, t: float, n_frames: int) -> tuple[int, float]:
        u = max(t, 0.0) * self.fps
        f = int(math.floor(u + 1e-9))
        if f >= n_frames - 1:
            return max(n_frames - 2, 0), 1.0 if n_frames > 1 else 0.0
        return f, min(max(u - f, 0.0), 1.0)

    def dt_limit(self, t: float) -> float:
        """Longest substep starting at time t (s after the first frame) that keeps every collider
        surface within :data:`MAX_SURFACE_TRAVEL` particle spacings, s."""
        limit = math.inf
        for e in self.entries:
            if e.driven is not None and e.driven_speed > 0.0 and t < e.driven[3]:
                limit = min(limit, MAX_SURFACE_TRAVEL * self.dx / e.driven_speed)
        for s in self._speeds:
            if len(s) == 0:
                continue
            f, _ = self._frame(t, len(s) + 1)
            v = float(s[f])
            if f + 1 < len(s):
                v = max(v, float(s[f + 1]))   # the substep may cross into the next frame
            if v > 0.0:
                limit = min(limit, MAX_SURFACE_TRAVEL * self.dx / v)
        return limit

    def drive(self, c: int, matrix: np.ndarray, t_end: float) -> None:
        """Move collider ``c`` from its pose at the current time to ``matrix`` at time ``t_end``, at a
        constant rate; it stands still there afterwards.

        For motion known only while simulating (a live session, where the artist moves colliders):
        ``matrix`` (4, 4) takes rest-pose points to world space (metres), as a row of
        ``MeshCollider.transforms`` does, and replaces whatever motion the collider had. The surface
        velocity is the rate of change of the interpolated matrix, as between two frames of a baked
        motion. The matrix may also scale or shear (an artist scaling the object): the contact surface
        and its normals follow exactly, while distances away from it are those of the rest pose
        mapped by the matrix. Deforming colliders cannot be driven.
        """
        e = self.entries[c]
        if e.collider.motion == "DEFORMING":
            raise ValueError(f"collider '{e.collider.name}' deforms; only rigid motion can be driven")
        matrix = np.asarray(matrix, dtype=np.float64).reshape(4, 4)
        now = self._pose_matrix(e, self.time)[0]
        span = float(t_end) - self.time
        e.driven = (now, matrix, self.time, float(t_end))
        lo, hi = e.rest_lo, e.rest_hi
        corners = np.array([[hi[0] if k & 1 else lo[0], hi[1] if k & 2 else lo[1], hi[2] if k & 4 else lo[2], 1.0]
                            for k in range(8)])
        # a map affine in the point moves no point of the box farther than one of its corners
        travel = float(np.max(np.linalg.norm(corners @ (matrix - now)[:3].T, axis=1)))
        e.driven_speed = travel / span if span > 0.0 else 0.0
        records = self._args.colliders
        records[c] = self._constant[c]
        self._set_pose(records, c, e, self.time)

    def move(self, c: int, start: np.ndarray, end: np.ndarray, t0: float, t1: float) -> None:
        """Move collider ``c`` from the rest-to-world matrix ``start`` (4, 4) at time ``t0`` to ``end`` at
        ``t1`` at a constant rate, and pose it for the current time; it stands at ``end`` afterwards.

        :meth:`drive` with the start given, for motion computed while simulating: a rigid body's
        substep (:mod:`engine.rigid`), whose mover keeps its own substep limit (none is added here)."""
        e = self.entries[c]
        if e.collider.motion == "DEFORMING":
            raise ValueError(f"collider '{e.collider.name}' deforms; only rigid motion can be driven")
        e.driven = (np.asarray(start, dtype=np.float64).reshape(4, 4),
                    np.asarray(end, dtype=np.float64).reshape(4, 4), float(t0), float(t1))
        e.driven_speed = 0.0
        records = self._args.colliders
        records[c] = self._constant[c]
        self._set_pose(records, c, e, self.time)

    def _pose_matrix(self, e: _Entry, t: float) -> tuple[np.ndarray, np.ndarray]:
        """Rest-to-world matrix (4, 4) of a rigid or driven collider at time t, and its rate of change, 1/s."""
        if e.driven is not None:
            a, b, t0, t1 = e.driven
            if t1 <= t0 or t > t1 + 1e-9 * max(1.0, abs(t1)):
                return b, np.zeros((4, 4))
            s = min(max((t - t0) / (t1 - t0), 0.0), 1.0)
            return (1.0 - s) * a + s * b, (b - a) / (t1 - t0)
        col = e.collider
        if col.motion == "RIGID":
            f, s = self._frame(t, col.transforms.shape[0])
            a, b = col.transforms[f], col.transforms[min(f + 1, col.transforms.shape[0] - 1)]
            return (1.0 - s) * a + s * b, (b - a) * self.fps
        return np.eye(4), np.zeros((4, 4))

    def _set_constant(self, c: int, e: _Entry) -> None:
        """The fields of collider c's record that do not change during the bake."""
        col = e.collider
        rec = self._constant[c]
        rec["friction"] = col.settings.friction
        rec["bounce"] = col.settings.bounce
        rec["offset"] = e.offset
        rec["grid"] = e.grid_index
        rec["tri_start"] = e.tri_offset
        rec["kind"] = KIND_GRID
        if e.planes is not None:
            v = col.mesh.vertices
            centre = v.mean(axis=0)
            rec["kind"] = KIND_POLYTOPE
            rec["plane_start"] = e.plane_offset
            rec["plane_count"] = len(e.planes)
            rec["parity"] = -1.0 if e.mode == "CONTAINER" else 1.0
            rec["centre"] = centre
            rec["r_in"] = float(np.min(e.planes[:, 3] - e.planes[:, :3] @ centre))
            rec["r_out"] = float(np.max(np.linalg.norm(v - centre, axis=1)))
            rec["reach"] = self._reach + abs(e.offset)

    def _set_pose(self, records: np.ndarray, c: int, e: _Entry, t: float) -> None:
        """Fill the time-dependent fields of collider c's record for time t."""
        rec = records[c]
        col = e.collider
        rest_to_world = np.eye(4)
        velocity = np.zeros((3, 4))
        if col.motion == "RIGID" or e.driven is not None:
            rest_to_world, rate = self._pose_matrix(e, t)
            velocity = rate[:3]
        elif col.motion == "DEFORMING":
            n = col.frame_vertices.shape[0]
            f, s = self._frame(t, n)
            # the grid of the nearer frame, and the time since that frame (negative before it)
            near = f if s < 0.5 else min(f + 1, n - 1)
            rec["grid"] = e.grid_index + near
            rec["time_shift"] = (f + s - near) / self.fps
            rec["deforming"] = True
            rec["vel_start"] = e.vel_offset + f * col.mesh.vertices.shape[0]
        linear = rest_to_world[:3, :3]
        inv = inverse3(linear)
        world_to_rest = np.concatenate([inv, (-inv @ rest_to_world[:3, 3])[:, None]], axis=1)
        rec["world_to_rest"] = world_to_rest
        if e.mode == "CONTAINER":
            # outside a container is solid, however far: no box bounds where it acts
            rec["box_lo"] = -np.inf
            rec["box_hi"] = np.inf
        else:
            # the rest box of a deforming collider already spans every frame
            world = e.corners if col.motion == "DEFORMING" else e.corners @ linear.T + rest_to_world[:3, 3]
            rec["box_lo"] = world.min(axis=0)
            rec["box_hi"] = world.max(axis=0)
        rec["grad_to_world"] = inv.T
        rec["rest_velocity"] = velocity

    def update(self, t: float) -> None:
        """Set every moving collider's pose and velocity for time t, seconds after the first frame
        (static colliders keep the rows set when the world was built)."""
        if t == self.time:
            return
        self.time = t
        records = self._args.colliders
        for c, e in enumerate(self.entries):
            if e.collider.motion != "STATIC" or e.driven is not None:
                records[c] = self._constant[c]
                self._set_pose(records, c, e, t)

    def inside(self, x: np.ndarray) -> np.ndarray:
        """Boolean mask (N,) of points inside some collider's solid at the current time."""
        out = np.zeros(x.shape[0], dtype=np.bool_)
        if self.entries and len(x):
            inside_any(np.ascontiguousarray(x, dtype=np.float32), self.args, out)
        return out


def _grid(mesh, cell, band, mode, name, grid_dir, store=True):
    """Load a grid from the cache folder or build (and, with ``store``, save) it; returns (grid, was_cached)."""
    path = None
    if grid_dir is not None:
        path = os.path.join(grid_dir, sdf.sdf_key(mesh, cell, band, mode) + ".npz")
        if os.path.isfile(path):
            try:
                grid = sdf.load_sdf(path)
                return grid._replace(name=name), True
            except CacheFormatError as exc:
                log.warning("rebuilding the distance grid of %s: %s", name, exc)
    grid = sdf.build_sdf(mesh, cell, band, name, mode=mode)
    if path is not None and store:
        os.makedirs(grid_dir, exist_ok=True)
        sdf.save_sdf(grid, path)
    return grid, False
