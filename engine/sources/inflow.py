"""Emitting liquid from INFLOW objects.

The Volume mode fills its mesh's lattice sites as FLUID objects are filled
(:mod:`engine.sources.fill`).

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

A SURFACE inflow that moves, deforms, or has an animated Normal Speed or Velocity (see
:mod:`engine.scene.animation`) covers all its faces with points once, in the first frame's pose, and
keeps each point's triangle and barycentric coordinates; every substep then finds the points'
positions, face normals and surface velocities where the surface is. Each point stands for the
mean area A / K (scaled with its triangle's area when the mesh deforms), and pours A_k max(u . n +
s, 0) per second with u and s the settings at the substep's middle: the volume is measured relative
to the moving surface, so carrying a tap around does not change how much it pours. A particle
leaves from where the surface is at the end of the substep, ahead of it by (u + s n) age, at the
surface's velocity plus u + s n.

The Use Flow switch (animatable) stops emission while it is off.

INFLOW, VOLUME mode (:class:`VolumeEmitter`): the lattice sites of the closed mesh (as for
FLUID) receive a particle whenever no particle lies within 0.9 dx of them, so the volume stays full.

A moving volume carries its sites rigidly, or is filled again each substep when it deforms.
"""

from __future__ import annotations

import math

import numpy as np
from numba import njit

from ..scene import animation
from ..core.cell_grid import build_grid
from ..scene import InflowObject, TriangleMesh, face_areas_normals
from .fill import fill_volume

#: Smallest distance between two emission points of a surface, in particle spacings.
POINT_SPACING = 0.85

#: A surface point waits while liquid lies closer than this to its next particle, in spacings.
SURFACE_CLEARANCE = 0.6

#: A flat region of a moving or animated surface inflow needs this many emission points for its points
#: to share its own area (see :func:`surface_sites`).
MIN_REGION_POINTS = 4

#: A volume site receives a particle only when no particle lies closer than this, in spacings.
VOLUME_CLEARANCE = 0.9


@njit(inline="always", cache=True)
def _nearest_marked(s, x, mark, cell_start, cell_nbr, particle_cell):
    """Nearest row j with ``mark[j]`` to row s of a neighbour grid (:func:`engine.core.cell_grid.build_grid`,
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
    :func:`engine.core.cell_grid.build_grid` over the candidates; ``order`` maps sorted rows to candidates.
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
    (:func:`engine.core.cell_grid.build_grid`) with the points near them.
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


def _adsorbed_samples(mesh: TriangleMesh, faces: np.ndarray, area: np.ndarray, dx: float, seed: int):
    """Area-weighted random samples on ``faces`` (about 16 per dx^2, at least one per face), in random
    order, and the points kept by random sequential adsorption among them.

    Returns (cand (S, 3), face_of (S,), u (S,), v (S,), per (T,) samples per face, kept, owner); a
    sample lies at ``a + u (b - a) + v (c - a)`` of its triangle (a, b, c)."""
    per_face = np.maximum(1, np.ceil(16.0 * area[faces] / (dx * dx))).astype(np.int64)
    face_of = np.repeat(faces, per_face)
    rng = np.random.default_rng(seed)
    u, v = rng.random(len(face_of)), rng.random(len(face_of))
    flip = u + v > 1.0
    u[flip], v[flip] = 1.0 - u[flip], 1.0 - v[flip]
    tri = mesh.vertices[mesh.triangles[face_of]]
    cand = tri[:, 0] + u[:, None] * (tri[:, 1] - tri[:, 0]) + v[:, None] * (tri[:, 2] - tri[:, 0])
    per = np.bincount(face_of, minlength=len(area)).clip(min=1)
    order = rng.permutation(len(cand))
    cand, face_of, u, v = np.ascontiguousarray(cand[order]), face_of[order], u[order], v[order]
    kept, owner = _sequential_points(cand, POINT_SPACING * dx)
    return cand, face_of, u, v, per, kept, owner


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
    cand, face_of, _u, _v, per, kept, owner = _adsorbed_samples(mesh, faces, area, dx, seed)
    weight = (face_flux / per)[face_of]
    area_w = (area / per)[face_of]
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


def surface_sites(mesh: TriangleMesh, dx: float, seed: int = 0):
    """Emission points about ``dx`` apart over every face of a surface, for an inflow that moves,
    deforms or has animated rates: where it emits is found per substep.

    Returns
    -------
    face : ndarray, shape (K,), int64: the triangle each point lies on
    bary : ndarray, shape (K, 2), float64: (u, v), the point is ``a + u (b - a) + v (c - a)``
    share : ndarray, shape (K,), float64: the area the point stands for over its triangle's area
        (see below)

    Each point stands for the mean area of the points of its flat region (the faces of one normal,
    such as the cap of a nozzle or the side of a box: A_region / K_region), so that the streams of a
    region are spaced alike and a region pours its area's flux exactly; points of regions with fewer
    than :data:`MIN_REGION_POINTS` points (the facets of a curved surface) stand for the mean area
    of the whole surface, A / K, as for :func:`surface_points`.
    """
    area, normal = face_areas_normals(mesh)
    faces = np.nonzero(area > 0.0)[0]
    if len(faces) == 0:
        return np.zeros(0, dtype=np.int64), np.zeros((0, 2)), np.zeros(0)
    _keys, region = np.unique(np.round(normal * 1000.0).astype(np.int64), axis=0, return_inverse=True)
    region = region.reshape(-1)
    region_area = np.bincount(region[faces], weights=area[faces], minlength=len(_keys))
    # points are spread over each large flat region on its own (points of a side would otherwise keep
    # those of the cap away from their shared edge), over the rest of the surface together
    large = region_area >= MIN_REGION_POINTS * dx * dx
    groups = [faces[region[faces] == g] for g in np.nonzero(large)[0]]
    groups.append(faces[~large[region[faces]]])
    parts = []
    for i, group in enumerate(g for g in groups if len(g)):
        _cand, face_of, u, v, _per, kept, _owner = _adsorbed_samples(mesh, group, area, dx, seed + i)
        parts.append((face_of[kept], u[kept], v[kept]))
    face = np.concatenate([p[0] for p in parts])
    u = np.concatenate([p[1] for p in parts])
    v = np.concatenate([p[2] for p in parts])
    kept = np.arange(len(face))
    region_points = np.bincount(region[face], minlength=len(_keys))
    mean = float(np.sum(area[faces])) / len(kept)
    r = region[face]
    stands_for = np.where(region_points[r] >= MIN_REGION_POINTS,
                          region_area[r] / np.maximum(region_points[r], 1), mean)
    return face, np.column_stack([u, v]), stands_for / area[face]


def _window(settings, frame_start: int, fps: float) -> tuple[float, float]:
    """Time interval (s, from the first frame) during which an inflow emits."""
    t0 = (settings.emit_start - 1 - frame_start) / fps
    t1 = math.inf if settings.emit_end == 0 else (settings.emit_end - frame_start) / fps
    return t0, t1


def _empty():
    return np.zeros((0, 3)), np.zeros((0, 3)), np.zeros(0)


class _Animated:
    """The animated settings and motion of an INFLOW or OUTFLOW object (see :mod:`engine.scene.animation`)."""

    def __init__(self, obj, fps: float):
        self.fps = float(fps)
        self.tracks = obj.tracks
        self.motion = animation.make_motion(obj.mesh, obj.transforms, obj.frame_vertices, fps)

    def value(self, name: str, t: float, default):
        if name in self.tracks:
            return animation.sample(self.tracks[name], t, self.fps, name in animation.SWITCHES)
        return default

    def is_on(self, t: float, default: bool = True) -> bool:
        """The on/off switch at time t (held over each frame interval)."""
        return bool(self.value("use_flow", t, 1.0 if default else 0.0) > 0.5)


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
        self.use_flow = bool(st.use_flow)
        self.anim = _Animated(inflow, fps)
        #: emission points found per substep: the inflow moves, deforms or has animated rates
        self.is_dynamic = self.anim.motion is not None or bool({"normal_speed", "velocity"} & set(inflow.tracks))
        self.normal_speed = float(st.normal_speed)
        self.set_velocity = inflow.velocity
        self.mesh = inflow.mesh
        if self.is_dynamic:
            self.face, self.bary, self.share = surface_sites(inflow.mesh, dx)
            self.owed = np.zeros(len(self.face))
            pts = self._pose(0.0)[0] if len(self.face) else np.zeros((0, 3))
        else:
            self.points, flux, self.normals = surface_points(inflow.mesh, dx, inflow.velocity, st.normal_speed)
            self.rate = flux / dx ** 3  # particles per second per point
            self.velocity = inflow.velocity[None, :] + st.normal_speed * self.normals
            self.owed = np.zeros(len(self.points))
            pts = self.points
        self.window = _window(st, frame_start, fps)
        self.lo = pts.min(axis=0) if len(pts) else np.zeros(3)
        self.hi = pts.max(axis=0) if len(pts) else np.zeros(3)

    @property
    def flux(self) -> float:
        """Emitted volume per second at the first frame, m^3/s."""
        if self.is_dynamic:
            return float(np.sum(self._rates(0.0))) * self.dx ** 3
        return float(np.sum(self.rate)) * self.dx ** 3

    def _pose(self, t: float):
        """Points (K, 3), unit outward normals (K, 3), surface velocities (K, 3) and the area each
        point stands for (K,), m^2, at time t."""
        if self.anim.motion is not None:
            verts, vvel = self.anim.motion.pose(t)
        else:
            verts, vvel = self.mesh.vertices, np.zeros_like(self.mesh.vertices)
        tri = self.mesh.triangles[self.face]
        a, b, c = verts[tri[:, 0]], verts[tri[:, 1]], verts[tri[:, 2]]
        u, v = self.bary[:, 0:1], self.bary[:, 1:2]
        points = a + u * (b - a) + v * (c - a)
        w = 1.0 - u - v
        velocity = w * vvel[tri[:, 0]] + u * vvel[tri[:, 1]] + v * vvel[tri[:, 2]]
        cross = np.cross(b - a, c - a)
        twice_area = np.linalg.norm(cross, axis=1)
        normals = np.divide(cross, twice_area[:, None], out=np.zeros_like(cross), where=twice_area[:, None] > 0.0)
        return points, normals, velocity, 0.5 * twice_area * self.share

    def _settings_at(self, t: float) -> tuple[float, np.ndarray]:
        """Normal speed (m/s) and set world velocity (3,), m/s, at time t."""
        s = float(self.anim.value("normal_speed", t, self.normal_speed))
        u = np.asarray(self.anim.value("velocity", t, self.set_velocity), dtype=np.float64)
        return s, u

    def _rates(self, t: float) -> np.ndarray:
        """Particles per second each point emits at time t: its area times the set velocity along its
        normal relative to the surface, A (u . n + s), over dx^3."""
        _points, normals, _vel, area = self._pose(t)
        s, u = self._settings_at(t)
        return area * np.maximum(normals @ u + s, 0.0) / self.dx ** 3

    def emit(self, t: float, dt: float, liquid: np.ndarray):
        """Particles released during the substep [t, t + dt] (positions at t + dt).

        Returns (x (k, 3), v (k, 3), age (k,)), float64.
        """
        active = min(t + dt, self.window[1]) - max(t, self.window[0])
        if active <= 0.0 or len(self.owed) == 0 or not self.anim.is_on(t + 0.5 * dt, self.use_flow):
            return _empty()
        if self.is_dynamic:
            # the volume is measured relative to the surface at the substep's middle; the particles
            # start from where the surface is at its end, with the surface's own velocity added
            rate = self._rates(t + 0.5 * dt)
            points, normals, surface_velocity, _area = self._pose(t + dt)
            s, u = self._settings_at(t + dt)
            relative = u[None, :] + s * normals
        else:
            rate, points, relative = self.rate, self.points, self.velocity
            surface_velocity = None
        self.owed += rate * active
        due = np.nonzero((self.owed >= 1.0) & (rate > 0.0))[0]
        if len(due) == 0:
            return _empty()
        # the oldest particle owed by each point: it crossed the surface (owed - 1) / rate ago
        age = (self.owed[due] - 1.0) / rate[due]
        age = np.minimum(age, active)
        x = points[due] + relative[due] * age[:, None]
        blocked = near_any(liquid, x, SURFACE_CLEARANCE * self.dx)
        # a blocked point waits, ready to release one particle at the surface once there is room
        self.owed[due[blocked]] = 1.0
        go = due[~blocked]
        xs, idx, ages = [x[~blocked]], [go], [age[~blocked]]
        self.owed[go] -= 1.0
        # a point owing more than one particle (a substep longer than its period) releases them in a row
        while True:
            more = go[self.owed[go] >= 1.0]
            if len(more) == 0:
                break
            a = np.minimum((self.owed[more] - 1.0) / rate[more], active)
            xs.append(points[more] + relative[more] * a[:, None])
            idx.append(more)
            ages.append(a)
            self.owed[more] -= 1.0
            go = more
        idx = np.concatenate(idx)
        v = relative[idx] if surface_velocity is None else relative[idx] + surface_velocity[idx]
        return np.concatenate(xs), v, np.concatenate(ages)


class VolumeEmitter:
    """Keeps the closed volume of an INFLOW object full (see the module docstring)."""

    def __init__(self, inflow: InflowObject, dx: float, level: int, frame_start: int, fps: float):
        self.name = inflow.name
        self.dx = float(dx)
        self.level = int(level)
        self.channels = dict(inflow.channels)
        self.mesh = inflow.mesh
        self.sites = fill_volume(inflow.mesh, dx)
        self.velocity = inflow.velocity
        self.use_flow = bool(inflow.settings.use_flow)
        self.anim = _Animated(inflow, fps)
        self.window = _window(inflow.settings, frame_start, fps)

    def _sites(self, t: float) -> tuple[np.ndarray, np.ndarray]:
        """Lattice sites (P, 3) of the volume at time t and the velocity (P, 3) of the object there:
        a rigid motion carries the first frame's sites; a deforming volume is filled again, and its
        liquid takes the mean velocity of its vertices."""
        motion = self.anim.motion
        if motion is None:
            return self.sites, np.zeros_like(self.sites)
        if motion.is_rigid:
            m, dm = motion.matrix(t)
            return self.sites @ m[:3, :3].T + m[:3, 3], self.sites @ dm[:3, :3].T + dm[:3, 3]
        verts, vvel = motion.pose(t)
        sites = fill_volume(TriangleMesh(verts, self.mesh.triangles), self.dx)
        return sites, np.broadcast_to(vvel.mean(axis=0), sites.shape)

    def emit(self, t: float, dt: float, liquid: np.ndarray):
        """Particles placed on the free sites at the end of the substep [t, t + dt]."""
        active = min(t + dt, self.window[1]) - max(t, self.window[0])
        if active <= 0.0 or len(self.sites) == 0 or not self.anim.is_on(t + 0.5 * dt, self.use_flow):
            return _empty()
        sites, carried = self._sites(t + dt)
        free = ~near_any(liquid, sites, VOLUME_CLEARANCE * self.dx)
        x = sites[free]
        u = np.asarray(self.anim.value("velocity", t + dt, self.velocity), dtype=np.float64)
        return x, carried[free] + u, np.zeros(len(x))


def make_emitter(inflow: InflowObject, dx: float, level: int, frame_start: int, fps: float):
    """The emitter of an INFLOW object's mode."""
    cls = SurfaceEmitter if inflow.settings.inflow_mode == "SURFACE" else VolumeEmitter
    return cls(inflow, dx, level, frame_start, fps)
