"""One frame of particles -> one closed, smoothed triangle mesh with per-vertex attributes.

The pipeline is splashsurf's (Löschner et al., the field's reference reconstruction; Python bindings
``pysplashsurf``, kept as the reference in ``bench/bench_surface.py``), in Surge's own parallel kernels
over the engine's neighbour grid, because they measure faster (:mod:`.field`, :mod:`.marching`,
:mod:`.smoothing`):

1. **Particle volumes.** V_j = m_j / rho_j with rho_j = m_j sum_k W(|x_j - x_k|), the SPH number
   density with the cubic spline of support ``kernel_radius`` (the mass cancels: V_j = 1 / sum_k W_jk),
   exactly splashsurf's definition, from one gather over :func:`engine.core.cell_grid.build_grid`'s cells.
   (The cache's own densities come from the solver's kernel and spacing, not this one: used for the
   colour field they would move the surface where the sums are truncated, at the free surface.)
2. **Colour field** c(p) = sum_j V_j W(|p - x_j|) (Löschner, Böttcher, Jeske & Bender 2023, "Weighted
   Laplacian Smoothing for Surface Reconstruction of Particle-based Fluids", eq. 1) on a dense grid of
   cell ``cell_size`` over the particles' bounding box (:func:`.field.colour_field`, parallel over
   slabs). A frame whose box would hold more than :func:`dense_limit` grid points (drops flung far
   apart) is meshed by splashsurf's sparse pipeline instead (``reconstruction_pipeline``, its
   subdomain grid), which gives the same surface.
3. **Marching cubes** at c = iso (:func:`.marching.marching_cubes`, parallel over slabs). The field is
   zero on the grid's border, so the mesh is closed.
4. **Weighted Laplacian smoothing** (ibid., eq. 5-7; :func:`.smoothing.smooth`): each vertex moves
   towards the mean of its neighbours by a weight w_v = smootherstep(n_v / 13), n_v the particles'
   distance-weighted neighbour counts averaged at the vertex (:func:`smoothing_weights`): vertices over
   the bulk are smoothed, vertices over sparse particles are not, so the volume is kept. The counts
   come with the volumes of step 1.

What Surge adds:

* **Vertex attributes.** ``velocity`` (for motion blur), and on request the particles' ``density``,
  ``age`` and named channels, each the kernel-weighted (Shepard) average of the particles within the
  kernel support of the vertex: a_v = sum_j W(|x_v - x_j|, h) a_j / sum_j W(|x_v - x_j|, h) with the
  cubic spline of Monaghan 1992 (:func:`engine.core.kernels.cubic_w`). The average is normalised, so a
  surface vertex moves at the speed of the liquid under it (an unnormalised SPH sum would give it
  about the iso level times that speed). A vertex with no particle within the support (the weighted
  smoothing can move one out a little) takes the nearest particle's value.
* **Thin sheets and jets** (``thin_sheets``). Where the liquid stretches into a sheet or a jet its
  particles drift apart beyond the kernel support and an isotropic colour field tears into holes
  and beads. Yu & Turk (2013, "Reconstructing Surfaces of Particle-Based Fluids Using Anisotropic
  Kernels") stretch each sparse particle's kernel along the directions of its neighbours; Surge gets
  the same effect with the isotropic kernel by adding, for the reconstruction only, a point
  half-way between every two *sparse* particles (fewer than :data:`SPARSE_NEIGHBOURS` neighbours
  within the support) that are between :data:`BRIDGE_MIN` and :data:`BRIDGE_MAX` spacings apart. The
  bridges lie along the neighbour directions and never across the sheet, so a sheet stays as thin as
  its particles; the bulk (dense particles) is unchanged. The tests show a sheet one particle thick at
  1.8 spacings and a jet at 2.2 spacings that tear without it stay closed with it.

Result for degenerate input: no particles, or particles too sparse to reach the iso level anywhere,
give an empty mesh (zero vertices, zero triangles); a single particle gives a small closed blob or
nothing, depending on the iso level; particles far apart give one blob each.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass, field
from typing import NamedTuple

import numpy as np
from numba import njit

from ..settings.surface import meeting_distance
from .anisotropy import (MAX_STRETCH, KernelShapes, add_ellipsoids, ellipsoid_bounds, kernel_shapes, neighbourhoods,
                         smoothed_centres)
from .drops import drop_meshes, drop_radius, small_clusters, vertices_per_drop
from .field import DenseGrid, ParticleGrid, colour_field, pair_midpoints, point_averages, self_sums
from .marching import marching_cubes
from .smoothing import smooth
from .solids import Solids, meet_field, project_vertices, wall_planes

log = logging.getLogger(__name__)

#: Thin-sheet bridges: a particle is sparse below this many neighbours within the kernel support
#: (a particle inside a resting block at the default support of 2 spacings has 32; one on a flat
#: free surface about 21; on an edge of a sheet one particle thick about 12).
SPARSE_NEIGHBOURS = 16
#: ... and two sparse particles get a bridge point if they are this many spacings apart or more (closer
#: ones already overlap) ...
BRIDGE_MIN = 1.2
#: ... and less than this (further apart, they are separate drops).
BRIDGE_MAX = 2.6

#: Vertex smoothing weights (Löschner et al. 2023): w = smootherstep(n_v / WEIGHT_NORMALISATION);
#: splashsurf's default normalisation.
WEIGHT_NORMALISATION = 13.0

#: A frame's dense colour-field grid may hold up to DENSE_POINTS_MIN points, or DENSE_POINTS_PER_PARTICLE
#: per particle if that is more (4 bytes each: 128 MiB at the minimum); beyond, the frame goes to splashsurf's
#: sparse grid, without the stretched kernels and the meeting with the solids. The minimum keeps a splashing
#: frame of about 100,000 particles dense (the benchmark's dam break at frame 25: 17.7 M points once its
#: stretched kernels widen the box).
DENSE_POINTS_MIN = 1 << 25
DENSE_POINTS_PER_PARTICLE = 48


@dataclass
class SurfaceParameters:
    """Parameters of one reconstruction, in metres (see :class:`engine.settings.SurfaceSettings`)."""

    particle_spacing: float
    cell_size: float                # marching-cubes cell edge, m
    kernel_radius: float            # compact support of the colour-field kernel, m
    iso: float = 0.6                # level of the colour field (1 inside the liquid)
    smoothing_iterations: int = 25  # weighted Laplacian smoothing passes
    rest_density: float = 1000.0
    thin_sheets: bool = False
    attributes: tuple = ("velocity",)  # particle arrays to put on the vertices
    collider_mode: str = "ON"       # where the surface meets the solids (engine.settings.surface)
    collider_offset: float = 0.0    # by how much with INSIDE and OUTSIDE, m
    anisotropic: bool = False       # stretched kernels (engine.surface.anisotropy)
    max_stretch: float = MAX_STRETCH
    centre_smoothing: float = 0.0   # Yu & Turk's lambda
    isolated: str = "FIELD"         # small clusters (engine.surface.drops): FIELD (beads of the field), DROPS, SPRAY
    drop_particles: int = 3         # most particles of a small cluster

    @property
    def particle_radius(self) -> float:
        return 0.5 * self.particle_spacing


@dataclass
class SurfaceMesh:
    """A triangle mesh with per-vertex attributes.

    Attributes
    ----------
    vertices : ndarray, shape (V, 3), float32, m
    triangles : ndarray, shape (T, 3), int32, indices into ``vertices``, counter-clockwise seen from
        outside (normals point out of the liquid)
    attributes : dict of str -> ndarray, shape (V,) or (V, 3), float32
        ``velocity`` (m/s) and any other interpolated particle attribute.
    spray : dict of str -> ndarray
        The isolated particles handed to the spray (``isolated`` SPRAY, :mod:`.drops`): ``position`` (S, 3)
        float32 m, ``velocity`` (S, 3) float32 m/s, ``id`` (S,) int32 (when the frame has ids); empty
        otherwise.
    """

    vertices: np.ndarray
    triangles: np.ndarray
    attributes: dict = field(default_factory=dict)
    spray: dict = field(default_factory=dict)

    @staticmethod
    def empty(attribute_shapes: dict | None = None) -> "SurfaceMesh":
        attrs = {k: np.zeros((0, *tail), np.float32) for k, tail in (attribute_shapes or {}).items()}
        return SurfaceMesh(np.zeros((0, 3), np.float32), np.zeros((0, 3), np.int32), attrs)


# -- the steps ---------------------------------------------------------------------------------------

class ParticleSums(NamedTuple):
    """Step 1's per-particle figures, in the grid's order, shape (N,).

    volume : float64, m^3 -- V_j = 1 / sum_k W_jk
    count : int32 -- neighbours within the support (itself not counted)
    weighted_count : float64 -- sum_k (1 - r_jk^2 / support^2) over those neighbours
    """

    volume: np.ndarray
    count: np.ndarray
    weighted_count: np.ndarray


def particle_sums(particles: ParticleGrid) -> ParticleSums:
    """Step 1: volumes and neighbour counts of the particles (see :class:`ParticleSums`)."""
    wsum, count, wcount = self_sums(particles)
    # each particle is within its own support: wsum >= W(0) > 0, and it adds 1 to both counts
    return ParticleSums(1.0 / wsum, count - 1, wcount - 1.0)


def bridge_points(x: np.ndarray, spacing: float, kernel_radius: float) -> np.ndarray:
    """Points added between sparse particles for the thin-sheet reconstruction (see the module docstring).

    Parameters
    ----------
    x : ndarray, shape (N, 3), float32, m
    spacing, kernel_radius : float, m

    Returns
    -------
    ndarray, shape (B, 3), float32, m
    """
    if len(x) < 2:
        return np.zeros((0, 3), np.float32)
    rmax = BRIDGE_MAX * spacing
    particles = ParticleGrid.build(x, kernel_radius, cell_size=rmax)
    counts = particle_sums(particles).count
    # the neighbour count that marks a sparse particle scales with the kernel's volume in spacings
    threshold = SPARSE_NEIGHBOURS * (kernel_radius / (2.0 * spacing)) ** 3
    return pair_midpoints(particles, counts < threshold, BRIDGE_MIN * spacing, rmax)


def interpolate(particle_x: np.ndarray, values: np.ndarray, vertices: np.ndarray, kernel_radius: float) -> np.ndarray:
    """Kernel-weighted (Shepard) average of per-particle ``values`` at ``vertices``.

    Parameters
    ----------
    particle_x : ndarray, shape (N, 3), m
    values : ndarray, shape (N, K), float32
    vertices : ndarray, shape (V, 3), m
    kernel_radius : float
        Support of the cubic spline, m (h = kernel_radius / 2).

    Returns
    -------
    ndarray, shape (V, K), float32
    """
    k = np.asarray(values).reshape(len(particle_x), -1).shape[1]
    if len(vertices) == 0 or len(particle_x) == 0:
        return np.zeros((len(vertices), k), np.float32)
    particles = ParticleGrid.build(particle_x, kernel_radius)
    return point_averages(particles, vertices, particles.sorted(values))


def smoothing_weights(particles: ParticleGrid, sums: ParticleSums, vertices: np.ndarray) -> np.ndarray:
    """Step 4's per-vertex weights w_v = smootherstep(n_v / 13), n_v the particles' distance-weighted
    neighbour counts averaged at the vertex with their volumes as weights (splashsurf's definition):
    n_v = sum_j V_j n_j W(|x_v - x_j|) / sum_j V_j W(|x_v - x_j|), 0 where no particle reaches.

    Returns
    -------
    ndarray, shape (V,), float32, in [0, 1]
    """
    vals = np.ascontiguousarray(np.stack([sums.volume * sums.weighted_count, sums.volume], axis=1), np.float32)
    n_v = point_averages(particles, vertices, vals, denominator=1, use_nearest=False)[:, 0]
    t = np.clip(n_v / np.float32(WEIGHT_NORMALISATION), 0.0, 1.0)
    return (t * t * t * (t * (6.0 * t - 15.0) + 10.0)).astype(np.float32)


def dense_limit(particles: int) -> int:
    """Most points of a frame's dense colour-field grid (see :data:`DENSE_POINTS_MIN`)."""
    return max(DENSE_POINTS_MIN, DENSE_POINTS_PER_PARTICLE * int(particles))


def _import_splashsurf():
    try:
        import pysplashsurf
    except ImportError as exc:  # the extension bundles it; a bare engine checkout may lack it
        raise ImportError("Surface reconstruction needs the 'pysplashsurf' package (pip install "
                          "pysplashsurf==0.14.1)") from exc
    return pysplashsurf


class FieldParticles(NamedTuple):
    """What the colour field is made of: kernel centres (grid order, the isolated particles left out),
    their volumes and, with anisotropy, the stretched kernels among them (indices into these rows)."""

    x: np.ndarray
    volume: np.ndarray
    shapes: KernelShapes | None


def field_particles(particles: ParticleGrid, sums: ParticleSums, params: SurfaceParameters, keep: np.ndarray
                    ) -> FieldParticles:
    """The kernels of the colour field: the particles ``keep`` marks (grid order), with Yu & Turk's
    stretched kernels and smoothed centres when ``params.anisotropic`` (:mod:`.anisotropy`)."""
    x, volume = particles.x, sums.volume
    if not params.anisotropic:
        return FieldParticles(np.ascontiguousarray(x[keep]), np.ascontiguousarray(volume[keep]), None)
    support, spacing = params.kernel_radius, params.particle_spacing
    hoods = neighbourhoods(particles)
    centres = smoothed_centres(x, hoods, support, spacing, params.centre_smoothing)
    shapes = kernel_shapes(hoods, support, spacing, params.max_stretch)
    # renumber the stretched kernels into the kept rows (isolated particles are never stretched)
    row = np.cumsum(keep) - 1
    shapes = shapes._replace(index=row[shapes.index])
    return FieldParticles(np.ascontiguousarray(centres[keep]), np.ascontiguousarray(volume[keep]), shapes)


def raw_mesh(kernels: FieldParticles, params: SurfaceParameters, solids: Solids | None = None
             ) -> tuple[np.ndarray, np.ndarray]:
    """Steps 2 and 3: the unsmoothed iso-surface, ``(vertices (V, 3) float32, triangles (T, 3) int32)``; with
    ``solids``, of the colour field combined with them (:func:`.solids.meet_field`)."""
    x, support = kernels.x, params.kernel_radius
    if len(x) == 0:
        return np.zeros((0, 3), np.float32), np.zeros((0, 3), np.int32)
    lo = x.min(axis=0).astype(np.float64) - support
    hi = x.max(axis=0).astype(np.float64) + support
    stretched = kernels.shapes is not None and len(kernels.shapes.index) > 0
    if stretched:
        elo, ehi = ellipsoid_bounds(x, kernels.shapes)
        lo, hi = np.minimum(lo, elo), np.maximum(hi, ehi)
    grid = DenseGrid.spanning(lo, hi, params.cell_size)
    if grid.points <= dense_limit(len(x)):
        plain = np.ones(len(x), np.bool_)
        if stretched:
            plain[kernels.shapes.index] = False
        field = colour_field(x[plain], kernels.volume[plain], grid, support)
        if stretched:
            add_ellipsoids(field, grid, x, kernels.volume, kernels.shapes, support)
        if solids is not None:
            meet_field(field.values, field.row_lo, field.row_hi, grid.origin, params.cell_size, params.iso, solids,
                       meeting_distance(params.collider_mode, params.collider_offset), params.particle_spacing)
        return marching_cubes(field.values, params.iso, grid.origin, params.cell_size, field.row_lo, field.row_hi)
    log.info("surface: %d particles over a box of %d grid points; splashsurf's sparse grid meshes them "
             "(isotropic kernels; the solids only push vertices out)", len(x), grid.points)
    ps = _import_splashsurf()
    r = params.particle_radius
    # splashsurf's lengths are in particle radii; its smoothing length is half the kernel support
    mesh, _rec = ps.reconstruction_pipeline(
        np.ascontiguousarray(x, np.float32), particle_radius=r, rest_density=params.rest_density,
        smoothing_length=0.5 * params.kernel_radius / r, cube_size=params.cell_size / r,
        iso_surface_threshold=params.iso, mesh_smoothing_iters=None, mesh_smoothing_weights=False,
        subdomain_grid=True)
    return (np.ascontiguousarray(mesh.mesh.vertices, dtype=np.float32).reshape(-1, 3),
            np.ascontiguousarray(mesh.mesh.triangles).astype(np.int32).reshape(-1, 3))


def _vertex_attributes(arrays: dict, params: SurfaceParameters, n: int, source: ParticleGrid, vertices: np.ndarray
                       ) -> dict:
    """The particles' attributes at the vertices (kernel-weighted averages over ``source``)."""
    columns, layout = [], []
    for name in params.attributes:
        a = np.asarray(arrays[name], dtype=np.float32).reshape(n, -1)
        layout.append((name, a.shape[1], a.shape[1:] if np.asarray(arrays[name]).ndim > 1 else ()))
        columns.append(a)
    out = {}
    if columns:
        values = point_averages(source, vertices, source.sorted(np.concatenate(columns, axis=1)))
        col = 0
        for name, width, shape in layout:
            out[name] = np.ascontiguousarray(values[:, col:col + width]).reshape((len(vertices), *shape))
            col += width
    return out


def _with_drops(mesh: SurfaceMesh, arrays: dict, params: SurfaceParameters, rows: np.ndarray, label: np.ndarray,
                solids: Solids | None) -> SurfaceMesh:
    """The small clusters as round drops in the mesh, or as spray (:mod:`.drops`): ``rows`` (the frame's rows
    of their particles) and ``label`` (each one's cluster)."""
    if params.isolated == "SPRAY":
        spray = {"position": np.ascontiguousarray(np.asarray(arrays["position"], np.float32).reshape(-1, 3)[rows]),
                 "velocity": np.ascontiguousarray(np.asarray(arrays["velocity"], np.float32).reshape(-1, 3)[rows])}
        if "id" in arrays:
            spray["id"] = np.ascontiguousarray(np.asarray(arrays["id"], np.int32)[rows])
        return SurfaceMesh(mesh.vertices, mesh.triangles, mesh.attributes, spray)
    _, cluster, size = np.unique(label, return_inverse=True, return_counts=True)

    def mean(values):
        a = np.asarray(values, np.float64)[rows].reshape(len(rows), -1)
        out = np.zeros((len(size), a.shape[1]))
        np.add.at(out, cluster, a)
        return out / size[:, None]

    radius = np.array([drop_radius(k * params.particle_spacing ** 3) for k in size])
    dv, dt = drop_meshes(mean(arrays["position"]), radius, first_vertex=len(mesh.vertices))
    if solids is not None:  # a drop against a wall does not poke through it either
        meet = meeting_distance(params.collider_mode, params.collider_offset)
        dv = project_vertices(dv, np.zeros(len(dv), np.bool_), solids, meet)
    per = vertices_per_drop()
    attributes = {}
    for name, values in mesh.attributes.items():
        own = mean(arrays[name]).astype(np.float32).reshape((len(size), *values.shape[1:]))
        attributes[name] = np.concatenate([values, np.repeat(own, per, axis=0)])
    return SurfaceMesh(np.concatenate([mesh.vertices, dv]), np.concatenate([mesh.triangles, dt]), attributes)


def reconstruct(arrays: dict, params: SurfaceParameters, solids: Solids | None = None) -> SurfaceMesh:
    """Mesh one frame of particles.

    Parameters
    ----------
    arrays : dict
        One frame of the particle cache (:mod:`engine.io.cache`): ``position`` (N, 3) float32 m,
        ``velocity`` (N, 3) float32 m/s, and every attribute named in ``params.attributes``
        ((N,) or (N, 3) float arrays).
    params : SurfaceParameters
    solids : Solids, optional
        The colliders and containers posed at the frame (:mod:`.solids`): the surface meets them.

    Returns
    -------
    SurfaceMesh
        Closed (every edge shared by two triangles) wherever the liquid is; empty if no particle
        reaches the iso level.
    """
    x = np.ascontiguousarray(arrays["position"], dtype=np.float32).reshape(-1, 3)
    shapes = {name: np.asarray(arrays[name]).shape[1:] for name in params.attributes}
    if len(x) == 0:
        return _with_drops(SurfaceMesh.empty(shapes), arrays, params, np.zeros(0, np.int64), np.zeros(0, np.int64),
                           None) if params.isolated == "SPRAY" else SurfaceMesh.empty(shapes)
    points = x
    if params.thin_sheets:
        extra = bridge_points(x, params.particle_spacing, params.kernel_radius)
        if len(extra):
            points = np.concatenate([x, extra])
    support = params.kernel_radius
    particles = ParticleGrid.build(points, support)
    sums = particle_sums(particles)
    keep = np.ones(len(points), np.bool_)
    rows = label = np.zeros(0, np.int64)
    if params.isolated != "FIELD":
        clusters = small_clusters(particles, sums.count, params.drop_particles)
        keep = clusters < 0
        frame_rows = particles.grid.order[~keep]  # the frame's rows, bridge points beyond them
        real = frame_rows < len(x)
        rows, label = frame_rows[real], clusters[~keep][real]
    vertices, triangles = raw_mesh(field_particles(particles, sums, params, keep), params, solids)
    mesh = SurfaceMesh.empty(shapes)
    if len(triangles):
        walls = None
        if solids is not None:
            meet = meeting_distance(params.collider_mode, params.collider_offset)
            walls = wall_planes(vertices, solids, meet, params.cell_size)
        if params.smoothing_iterations > 0:
            weights = smoothing_weights(particles, sums, vertices)
            vertices = smooth(vertices, triangles, weights, int(params.smoothing_iterations), walls=walls)
        if solids is not None:
            vertices = project_vertices(vertices, walls[:, 3] > -np.inf, solids, meet)
        # the attributes come from the particles alone (bridge points carry none)
        source = particles if points is x else ParticleGrid.build(x, support)
        mesh = SurfaceMesh(vertices, triangles, _vertex_attributes(arrays, params, len(x), source, vertices))
    if len(rows) or params.isolated == "SPRAY":  # a spray frame holds the spray's arrays, empty or not
        mesh = _with_drops(mesh, arrays, params, rows, label, solids)
    return mesh


# -- measures of a mesh (tests, benchmark) -----------------------------------------------------------

def edge_use_counts(triangles: np.ndarray) -> np.ndarray:
    """How many triangles use each distinct undirected edge (2 everywhere on a closed manifold mesh)."""
    t = np.asarray(triangles, dtype=np.int64)
    if len(t) == 0:
        return np.zeros(0, np.int64)
    e = np.sort(np.concatenate([t[:, [0, 1]], t[:, [1, 2]], t[:, [2, 0]]]), axis=1)
    _, counts = np.unique(e[:, 0] * (int(t.max()) + 1) + e[:, 1], return_counts=True)
    return counts


def euler_characteristic(triangles: np.ndarray) -> int:
    """V - E + F over the vertices the triangles use: 2 per closed component without holes or handles."""
    t = np.asarray(triangles, dtype=np.int64)
    if len(t) == 0:
        return 0
    return int(len(np.unique(t)) - len(edge_use_counts(t)) + len(t))


def enclosed_volume(vertices: np.ndarray, triangles: np.ndarray) -> float:
    """Volume enclosed by a closed, outward-oriented mesh (divergence theorem), m^3."""
    v = np.asarray(vertices, dtype=np.float64)
    t = np.asarray(triangles, dtype=np.int64)
    if len(t) == 0:
        return 0.0
    a, b, c = v[t[:, 0]], v[t[:, 1]], v[t[:, 2]]
    return float(np.einsum("ij,ij->i", a, np.cross(b, c)).sum() / 6.0)


@njit(cache=True)
def _root(parent, a):
    while parent[a] != a:
        parent[a] = parent[parent[a]]
        a = parent[a]
    return a


@njit(cache=True)
def _piece_labels(t, nv):
    parent = np.arange(nv)
    for m in range(t.shape[0]):
        a = _root(parent, t[m, 0])
        for c in range(1, 3):
            b = _root(parent, t[m, c])
            if a != b:
                parent[max(a, b)] = min(a, b)
                a = min(a, b)
    out = np.empty(nv, np.int64)
    for v in range(nv):
        out[v] = _root(parent, v)
    return out


class MeshPieces(NamedTuple):
    """The connected pieces of a closed mesh: ``volume`` (P,) m^3 enclosed by each, ``centre`` (P, 3) m, the
    mean of its vertices, and ``piece_of`` (V,) int64, each vertex's piece (-1 for a vertex no triangle uses)."""

    volume: np.ndarray
    centre: np.ndarray
    piece_of: np.ndarray


def mesh_pieces(vertices: np.ndarray, triangles: np.ndarray) -> MeshPieces:
    """The pieces of a mesh (triangles sharing vertices), each with its volume and centre."""
    v = np.asarray(vertices, np.float64).reshape(-1, 3)
    t = np.ascontiguousarray(triangles, np.int64).reshape(-1, 3)
    if len(t) == 0:
        return MeshPieces(np.zeros(0), np.zeros((0, 3)), np.full(len(v), -1, np.int64))
    used = np.unique(t)
    _, piece = np.unique(_piece_labels(t, len(v))[used], return_inverse=True)
    of_vertex = np.full(len(v), -1, np.int64)
    of_vertex[used] = piece
    count = piece.max() + 1
    a, b, c = v[t[:, 0]], v[t[:, 1]], v[t[:, 2]]
    volume = np.bincount(of_vertex[t[:, 0]], weights=np.einsum("ij,ij->i", a, np.cross(b, c)) / 6.0,
                         minlength=count)
    centre = np.stack([np.bincount(piece, weights=v[used, k], minlength=count) for k in range(3)], 1)
    return MeshPieces(volume, centre / np.bincount(piece, minlength=count)[:, None], of_vertex)
