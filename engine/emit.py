"""Filling fluid volumes, emitting liquid from INFLOW objects and removing it in OUTFLOW objects.

A FLUID mesh is filled with a simple cubic lattice of spacing dx aligned to the world grid
(sites at (i + 1/2) dx), keeping the sites inside the mesh. Inside means a generalised winding
number above 1/2 (Jacobson et al. 2013): the sum over triangles of the signed solid angle
(Van Oosterom & Strackee 1983) divided by 4 pi. Unlike a single ray parity test it gives the
expected answer for meshes with small holes, duplicated faces or self-intersections.

INFLOW, SURFACE mode (:class:`SurfaceEmitter`): the surface is covered once with emission points
about one spacing dx apart (random sequential adsorption of area-weighted samples, minimum
distance 0.85 dx, which leaves about one point per dx^2). Every sample is then given to its
nearest point with its share of the volume flux, A_s max((u + s n) . n, 0) (u the world
velocity, s the normal speed); the points' fluxes add up to the surface's flux exactly. Each
point keeps a running count c += q dt / dx^3 and releases a particle whenever c passes a whole
number, placed where it has travelled since it crossed the surface (age = (c - 1) dx^3 / q):
a steady stream one particle wide per point, whose emitted volume matches A v t on average to
within one particle per point. Each point is credited with the mean area A / K (K points) rather
than the area nearest to it, which varies from 0.3 to 2 dx^2, so that every stream of a uniform
surface is spaced alike, about dx. A point whose next
particle would land within 0.6 dx of liquid already there waits at the surface without building
up a backlog (a blocked nozzle does not stack particles).

INFLOW, VOLUME mode (:class:`VolumeEmitter`): the lattice sites of the closed mesh (as for
FLUID) receive a particle whenever no particle lies within 0.9 dx of them, so the volume stays full.

OUTFLOW: every particle whose winding number with respect to the mesh is above 1/2 is removed
(only particles in the mesh's bounding box are tested).
"""

from __future__ import annotations

import math

import numpy as np
from numba import njit

from .neighbors import build_grid
from .scene import InflowObject, TriangleMesh, face_areas_normals
from .sdf.winding import winding_numbers

#: Smallest distance between two emission points of a surface, in particle spacings.
POINT_SPACING = 0.85

#: A surface point waits while liquid lies closer than this to its next particle, in spacings.
SURFACE_CLEARANCE = 0.6

#: A volume site receives a particle only when no particle lies closer than this, in spacings.
VOLUME_CLEARANCE = 0.9


@njit(inline="always", cache=True)
def _nearest_marked(s, x, mark, cell_start, cell_nbr, particle_cell):
    """Nearest row j with ``mark[j]`` to row s of a neighbour grid (:func:`engine.neighbors.build_grid`,
    rows in sorted order), among the 27 cells around s: (j, squared distance), or (-1, inf)."""
    cell = particle_cell[s]
    best = -1
    best_d = np.inf
    for q in range(27):
        nc = cell_nbr[cell, q]
        if nc < 0:
            continue
        for j in range(cell_start[nc], cell_start[nc + 1]):
            if mark[j]:
                d0 = x[s, 0] - x[j, 0]
                d1 = x[s, 1] - x[j, 1]
                d2 = x[s, 2] - x[j, 2]
                d = d0 * d0 + d1 * d1 + d2 * d2
                if d < best_d:
                    best_d = d
                    best = j
    return best, best_d


@njit(cache=True)
def _adsorb(cand_sorted, order, cell_start, cell_nbr, particle_cell, r,
            # outputs
            kept, owner):
    """Greedy random sequential adsorption: candidate c (in the order of ``cand``, already random)
    is kept when no kept one lies within r; then every candidate goes to its nearest kept point.

    cand_sorted (N, 3) float64 and the grid (cells of edge r) are those of
    :func:`engine.neighbors.build_grid` over the candidates; ``order`` maps sorted rows to candidates.
    Outputs: kept (N,) int64, the kept candidates in the order they were kept (the count is
    returned); owner (N,) int64, per candidate the position in ``kept`` of its nearest kept point.
    """
    n = cand_sorted.shape[0]
    row = np.empty(n, dtype=np.int64)        # sorted row of each candidate
    for s in range(n):
        row[order[s]] = s
    is_kept = np.zeros(n, dtype=np.bool_)    # per sorted row
    slot = np.empty(n, dtype=np.int64)       # per kept sorted row: its position in ``kept``
    nk = 0
    r2 = r * r
    for c in range(n):
        s = row[c]
        if _nearest_marked(s, cand_sorted, is_kept, cell_start, cell_nbr, particle_cell)[1] >= r2:
            is_kept[s] = True
            slot[s] = nk
            kept[nk] = c
            nk += 1
    for s in range(n):
        # every candidate lies within r of a kept one (or is kept itself)
        j = _nearest_marked(s, cand_sorted, is_kept, cell_start, cell_nbr, particle_cell)[0]
        owner[order[s]] = slot[j]
    return nk


def _sequential_points(cand: np.ndarray, r: float):
    """Random sequential adsorption of ``cand`` (N, 3) float64, in its (random) order, at minimum
    distance r. Returns (kept candidate indices (K,) int64, owner point in 0..K-1 of each candidate)."""
    grid = build_grid(cand, r)
    kept = np.empty(cand.shape[0], dtype=np.int64)
    owner = np.empty(cand.shape[0], dtype=np.int64)
    nk = _adsorb(np.ascontiguousarray(cand[grid.order]), grid.order, grid.cell_start, grid.cell_nbr,
                 grid.particle_cell, float(r), kept, owner)
    return kept[:nk].copy(), owner


@njit(cache=True)
def _near_any_sorted(x_sorted, order, n_points, cell_start, cell_nbr, particle_cell, r,
                     # outputs
                     out):
    """Rows of ``order`` below ``n_points`` are points, the others queries ``order - n_points``:
    out[q] = True where a point lies closer than r to query q (grid of cells of edge r)."""
    is_point = order < n_points
    r2 = r * r
    for s in range(x_sorted.shape[0]):
        if not is_point[s]:
            out[order[s] - n_points] = _nearest_marked(s, x_sorted, is_point, cell_start, cell_nbr,
                                                       particle_cell)[1] < r2


#: Largest dense grid (cells of edge r over the queries' bounding box) :func:`near_any` builds;
#: beyond it, the queries are spread over too large a box and a neighbour grid over the points near them is used.
MAX_QUERY_CELLS = 1 << 22


@njit(cache=True)
def _query_cells(queries, inv, lo, dims,
                 # outputs
                 start, idx):
    """CSR of the queries lying in the 27 cells around each cell of a dense grid (cells of edge r
    from ``lo``): a point then finds every query within r of it in its own cell."""
    nq = queries.shape[0]
    fill = np.zeros(start.shape[0], dtype=np.int64)
    for sweep in range(2):  # 0: count the entries of each cell, 1: write them
        for q in range(nq):
            c0 = int(math.floor(queries[q, 0] * inv)) - lo[0]
            c1 = int(math.floor(queries[q, 1] * inv)) - lo[1]
            c2 = int(math.floor(queries[q, 2] * inv)) - lo[2]
            for a in range(c0 - 1, c0 + 2):
                for b in range(c1 - 1, c1 + 2):
                    for e in range(c2 - 1, c2 + 2):
                        c = (a * dims[1] + b) * dims[2] + e
                        if sweep == 0:
                            fill[c + 1] += 1
                        else:
                            idx[fill[c]] = q
                            fill[c] += 1
        if sweep == 0:
            start[0] = 0
            for c in range(1, start.shape[0]):
                start[c] = start[c - 1] + fill[c]
            fill[:] = start


@njit(cache=True)
def _near_any_stream(points, queries, r, lo, dims, start, idx,
                     # outputs
                     out):
    """One pass over the points: each point inside the grid tests the queries listed for its cell."""
    inv = 1.0 / r
    r2 = r * r
    # the grid's extent in metres, a cell wider on every side than the cell test needs
    x_lo, y_lo, z_lo = (lo[0] - 1) * r, (lo[1] - 1) * r, (lo[2] - 1) * r
    x_hi, y_hi, z_hi = (lo[0] + dims[0] + 1) * r, (lo[1] + dims[1] + 1) * r, (lo[2] + dims[2] + 1) * r
    for i in range(points.shape[0]):
        p0 = np.float64(points[i, 0])
        p1 = np.float64(points[i, 1])
        p2 = np.float64(points[i, 2])
        if p0 < x_lo or p1 < y_lo or p2 < z_lo or p0 > x_hi or p1 > y_hi or p2 > z_hi:
            continue  # most of the liquid: three comparisons, no cell arithmetic
        c0 = math.floor(p0 * inv) - lo[0]
        c1 = math.floor(p1 * inv) - lo[1]
        c2 = math.floor(p2 * inv) - lo[2]
        if c0 < 0 or c1 < 0 or c2 < 0 or c0 >= dims[0] or c1 >= dims[1] or c2 >= dims[2]:
            continue
        c = (int(c0) * dims[1] + int(c1)) * dims[2] + int(c2)
        for t in range(start[c], start[c + 1]):
            q = idx[t]
            d0 = queries[q, 0] - p0
            d1 = queries[q, 1] - p1
            d2 = queries[q, 2] - p2
            if d0 * d0 + d1 * d1 + d2 * d2 < r2:
                out[q] = True


def near_any(points: np.ndarray, queries: np.ndarray, radius: float) -> np.ndarray:
    """For each query, whether any of ``points`` lies closer than ``radius`` (bool (Q,)).

    Emitters ask this every substep with a few emission sites (queries) against the whole liquid
    (points): the queries are listed in a dense grid of cells of edge ``radius`` over their own
    bounding box, and the points are streamed once, each testing the queries of its cell (no copy
    or conversion of the liquid's arrays: 200k particles cost well under a millisecond). Queries
    spread over a box of more than :data:`MAX_QUERY_CELLS` cells share a neighbour grid
    (:func:`engine.neighbors.build_grid`) with the points near them.
    """
    queries = np.ascontiguousarray(queries, dtype=np.float64).reshape(-1, 3)
    out = np.zeros(queries.shape[0], dtype=np.bool_)
    pts = np.asarray(points).reshape(-1, 3)
    if not (len(pts) and len(queries)):
        return out
    inv = 1.0 / float(radius)
    lo = np.floor(queries.min(axis=0) * inv).astype(np.int64) - 1
    hi = np.floor(queries.max(axis=0) * inv).astype(np.int64) + 1
    dims = hi - lo + 1
    cells = int(np.prod(dims))
    if cells <= MAX_QUERY_CELLS:
        start = np.empty(cells + 1, dtype=np.int64)
        idx = np.empty(27 * queries.shape[0], dtype=np.int64)
        _query_cells(queries, inv, lo, dims, start, idx)
        if pts.dtype not in (np.float32, np.float64) or not pts.flags.c_contiguous:
            pts = np.ascontiguousarray(pts, dtype=np.float64)
        _near_any_stream(pts, queries, float(radius), lo, dims, start, idx, out)
        return out
    lo_m = queries.min(axis=0) - radius
    hi_m = queries.max(axis=0) + radius
    sel = np.all((pts >= lo_m) & (pts <= hi_m), axis=1)
    if sel.any():
        both = np.concatenate([np.asarray(pts[sel], dtype=np.float64), queries])
        grid = build_grid(both, float(radius))
        _near_any_sorted(np.ascontiguousarray(both[grid.order]), grid.order, int(sel.sum()), grid.cell_start,
                         grid.cell_nbr, grid.particle_cell, float(radius), out)
    return out


def _lattice_axes(lo: np.ndarray, hi: np.ndarray, dx: float):
    first = np.floor(lo / dx - 0.5) + 0.5
    last = np.ceil(hi / dx - 0.5) + 0.5
    return [np.arange(first[k], last[k] + 0.25) * dx for k in range(3)]


def fill_volume(mesh: TriangleMesh, dx: float) -> np.ndarray:
    """Lattice sites of spacing ``dx`` inside ``mesh``.

    Returns
    -------
    ndarray, shape (P, 3), float64, metres. Empty if the mesh encloses no site.
    """
    if len(mesh.triangles) == 0:
        return np.zeros((0, 3))
    lo, hi = mesh.vertices.min(axis=0), mesh.vertices.max(axis=0)
    ax = _lattice_axes(lo, hi, dx)
    gx, gy, gz = np.meshgrid(*ax, indexing="ij")
    pts = np.stack([gx.ravel(), gy.ravel(), gz.ravel()], axis=1)
    inside = winding_numbers(pts, mesh) > 0.5
    return pts[inside]


def surface_points(mesh: TriangleMesh, dx: float, velocity: np.ndarray, normal_speed: float, seed: int = 0):
    """Emission points about ``dx`` apart on a mesh surface and the volume flux each one carries.

    Returns
    -------
    points : ndarray, shape (K, 3), float64, metres
    flux : ndarray, shape (K,), float64, m^3/s (sums to :func:`engine.scene.surface_flux`)
    normals : ndarray, shape (K, 3), float64, unit flux-weighted outward normal at each point

    Points whose faces emit nothing (facing against the flow) are left out.
    """
    area, normal = face_areas_normals(mesh)
    face_flux = area * np.maximum(normal @ np.asarray(velocity, dtype=np.float64) + normal_speed, 0.0)
    faces = np.nonzero(face_flux > 0.0)[0]
    if len(faces) == 0:
        return np.zeros((0, 3)), np.zeros(0), np.zeros((0, 3))
    # about 16 samples per dx^2, at least one per face, stratified by face
    per_face = np.maximum(1, np.ceil(16.0 * area[faces] / (dx * dx))).astype(np.int64)
    face_of = np.repeat(faces, per_face)
    rng = np.random.default_rng(seed)
    u, v = rng.random(len(face_of)), rng.random(len(face_of))
    flip = u + v > 1.0
    u[flip], v[flip] = 1.0 - u[flip], 1.0 - v[flip]
    tri = mesh.vertices[mesh.triangles[face_of]]
    cand = tri[:, 0] + u[:, None] * (tri[:, 1] - tri[:, 0]) + v[:, None] * (tri[:, 2] - tri[:, 0])
    per = np.bincount(face_of, minlength=len(area)).clip(min=1)
    weight = (face_flux / per)[face_of]
    area_w = (area / per)[face_of]
    order = rng.permutation(len(cand))
    cand, weight, area_w, face_of = np.ascontiguousarray(cand[order]), weight[order], area_w[order], face_of[order]
    kept, owner = _sequential_points(cand, POINT_SPACING * dx)
    # Each point carries the mean area A / K times the flux density of the samples it owns, scaled
    # so that the points' fluxes add up to the surface's flux exactly. The areas the points own
    # themselves vary (0.3-2 dx^2 after the adsorption); with them a stream's spacing dx^3 / (area dx)
    # would vary as much, and a dense stream would crowd itself.
    owned_flux = np.bincount(owner, weights=weight, minlength=len(kept))
    owned_area = np.bincount(owner, weights=area_w, minlength=len(kept))
    flux = owned_flux / np.maximum(owned_area, 1e-300) * (float(np.sum(area_w)) / len(kept))
    flux *= float(np.sum(face_flux)) / float(np.sum(flux))
    nsum = np.stack([np.bincount(owner, weights=weight * normal[face_of, k], minlength=len(kept))
                     for k in range(3)], axis=1)
    nlen = np.linalg.norm(nsum, axis=1)
    normals = np.divide(nsum, nlen[:, None], out=np.zeros_like(nsum), where=nlen[:, None] > 0.0)
    return cand[kept], flux, normals


def _window(settings, frame_start: int, fps: float) -> tuple[float, float]:
    """Time interval (s, from the first frame) during which an inflow emits."""
    t0 = (settings.emit_start - 1 - frame_start) / fps
    t1 = math.inf if settings.emit_end == 0 else (settings.emit_end - frame_start) / fps
    return t0, t1


class SurfaceEmitter:
    """Continuous emission from an INFLOW surface (see the module docstring).

    Parameters
    ----------
    inflow : InflowObject
    dx : float
        Particle spacing of its liquid, m.
    level : int
        Resolution level of its particles (PBF).
    frame_start : int
    fps : float
    """

    def __init__(self, inflow: InflowObject, dx: float, level: int, frame_start: int, fps: float):
        st = inflow.settings
        self.name = inflow.name
        self.dx = float(dx)
        self.level = int(level)
        self.channels = dict(inflow.channels)
        self.points, flux, self.normals = surface_points(inflow.mesh, dx, inflow.velocity, st.normal_speed)
        self.rate = flux / dx ** 3  # particles per second per point
        self.velocity = inflow.velocity[None, :] + st.normal_speed * self.normals
        self.owed = np.zeros(len(self.points))
        self.window = _window(st, frame_start, fps)
        self.lo = self.points.min(axis=0) if len(self.points) else np.zeros(3)
        self.hi = self.points.max(axis=0) if len(self.points) else np.zeros(3)

    @property
    def flux(self) -> float:
        """Emitted volume per second, m^3/s."""
        return float(np.sum(self.rate)) * self.dx ** 3

    def emit(self, t: float, dt: float, liquid: np.ndarray):
        """Particles released during the substep [t, t + dt] (positions at t + dt).

        Returns (x (k, 3), v (k, 3), age (k,)), float64.
        """
        active = min(t + dt, self.window[1]) - max(t, self.window[0])
        if active <= 0.0 or len(self.points) == 0:
            return np.zeros((0, 3)), np.zeros((0, 3)), np.zeros(0)
        self.owed += self.rate * active
        due = np.nonzero(self.owed >= 1.0)[0]
        if len(due) == 0:
            return np.zeros((0, 3)), np.zeros((0, 3)), np.zeros(0)
        # the oldest particle owed by each point: it crossed the surface (owed - 1) / rate ago
        age = (self.owed[due] - 1.0) / self.rate[due]
        age = np.minimum(age, active)
        x = self.points[due] + self.velocity[due] * age[:, None]
        blocked = near_any(liquid, x, SURFACE_CLEARANCE * self.dx)
        # a blocked point waits, ready to release one particle at the surface once there is room
        self.owed[due[blocked]] = 1.0
        go = due[~blocked]
        xs, vs, ages = [x[~blocked]], [self.velocity[go]], [age[~blocked]]
        self.owed[go] -= 1.0
        # a point owing more than one particle (a substep longer than its period) releases them in a row
        while True:
            more = go[self.owed[go] >= 1.0]
            if len(more) == 0:
                break
            a = np.minimum((self.owed[more] - 1.0) / self.rate[more], active)
            xs.append(self.points[more] + self.velocity[more] * a[:, None])
            vs.append(self.velocity[more])
            ages.append(a)
            self.owed[more] -= 1.0
            go = more
        return np.concatenate(xs), np.concatenate(vs), np.concatenate(ages)


class VolumeEmitter:
    """Keeps the closed volume of an INFLOW object full (see the module docstring)."""

    def __init__(self, inflow: InflowObject, dx: float, level: int, frame_start: int, fps: float):
        self.name = inflow.name
        self.dx = float(dx)
        self.level = int(level)
        self.channels = dict(inflow.channels)
        self.sites = fill_volume(inflow.mesh, dx)
        self.velocity = inflow.velocity
        self.window = _window(inflow.settings, frame_start, fps)

    def emit(self, t: float, dt: float, liquid: np.ndarray):
        """Particles placed on the free sites at the end of the substep [t, t + dt]."""
        active = min(t + dt, self.window[1]) - max(t, self.window[0])
        if active <= 0.0 or len(self.sites) == 0:
            return np.zeros((0, 3)), np.zeros((0, 3)), np.zeros(0)
        free = ~near_any(liquid, self.sites, VOLUME_CLEARANCE * self.dx)
        x = self.sites[free]
        return x, np.broadcast_to(self.velocity, x.shape), np.zeros(len(x))


def make_emitter(inflow: InflowObject, dx: float, level: int, frame_start: int, fps: float):
    """The emitter of an INFLOW object's mode."""
    cls = SurfaceEmitter if inflow.settings.inflow_mode == "SURFACE" else VolumeEmitter
    return cls(inflow, dx, level, frame_start, fps)


def inside_mesh(x: np.ndarray, mesh: TriangleMesh) -> np.ndarray:
    """bool (N,): generalised winding number of each point above 1/2 (only points within the
    mesh's bounding box are computed)."""
    out = np.zeros(len(x), dtype=bool)
    if len(x) == 0 or len(mesh.triangles) == 0:
        return out
    lo, hi = mesh.vertices.min(axis=0), mesh.vertices.max(axis=0)
    cand = np.nonzero(np.all((x >= lo) & (x <= hi), axis=1))[0]
    if len(cand):
        out[cand] = winding_numbers(x[cand], mesh) > 0.5
    return out


def removal_mask(x: np.ndarray, age: np.ndarray, outflows, lifetime: float, kill_box) -> np.ndarray:
    """Particles to remove: inside an OUTFLOW mesh, older than ``lifetime`` (s, 0 = never) or outside
    ``kill_box`` ((2, 3) lower/upper corners, m, or None)."""
    mask = np.zeros(len(x), dtype=bool)
    for o in outflows:
        mask |= inside_mesh(x, o.mesh)
    if lifetime > 0.0:
        mask |= age > lifetime
    if kill_box is not None:
        mask |= np.any((x < kill_box[0]) | (x > kill_box[1]), axis=1)
    return mask
