"""One frame of particles -> one closed, smoothed triangle mesh with per-vertex attributes.

The mesh comes from ``pysplashsurf`` (Python bindings of splashsurf, Löschner et al.): the SPH
"colour field" c(x) = sum_j (m_j / rho_j) W(x - x_j, h) of the particles, with the particles' own
densities found by splashsurf, on a sparse grid of dense blocks; marching cubes at c = iso; weighted
Laplacian smoothing of the vertices (Löschner, Böttcher, Jeske & Bender 2023, "Weighted Laplacian
Smoothing for Surface Reconstruction of Particle-based Fluids", eq. 5-7: vertices near the
bulk are smoothed, vertices over sparse particles are not, so the volume is kept).

What Surge adds:

* **Vertex attributes.** ``velocity`` (for motion blur), and on request the particles' ``density``,
  ``age`` and named channels, each the kernel-weighted (Shepard) average of the particles within the
  kernel support of the vertex: a_v = sum_j W(|x_v - x_j|, h) a_j / sum_j W(|x_v - x_j|, h) with the
  cubic spline of Monaghan 1992 (:func:`engine.kernels.cubic_w`). The average is normalised, so a
  surface vertex moves at the speed of the liquid under it (an unnormalised SPH sum would give it
  about the iso level times that speed). A vertex with no particle within the support (the weighted
  smoothing can move one out a little) takes the nearest particle's value.
* **Thin sheets and jets** (``thin_sheets``). Where the liquid stretches into a sheet or a jet its
  particles drift apart beyond the kernel support and an isotropic colour field tears into holes
  and beads. Yu & Turk (2013, "Reconstructing Surfaces of Particle-Based Fluids Using Anisotropic
  Kernels") stretch each sparse particle's kernel along the directions of its neighbours; Surge gets
  the same effect with splashsurf's isotropic kernel by adding, for the reconstruction only, a point
  half-way between every two *sparse* particles (fewer than :data:`SPARSE_NEIGHBOURS` neighbours
  within the support) that are between :data:`BRIDGE_MIN` and :data:`BRIDGE_MAX` spacings apart. The
  bridges lie along the neighbour directions and never across the sheet, so a sheet stays as thin as
  its particles; the bulk (dense particles) is unchanged. The tests show a sheet one particle thick at
  1.8 spacings and a jet at 2.2 spacings that tear without it stay closed with it.

Result for degenerate input: no particles, or particles too sparse to reach the iso level anywhere,
give an empty mesh (zero vertices, zero triangles); a single particle gives a small closed blob or
nothing, depending on the iso level (splashsurf's answer); particles far apart give one blob each.
"""

from __future__ import annotations

import logging
import math
from dataclasses import dataclass, field

import numpy as np
from numba import njit, prange

from ..kernels import cubic_w
from ..neighbors import build_grid

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
    library_weights: bool = False   # let splashsurf find the smoothing weights (the benchmark's reference)

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
    """

    vertices: np.ndarray
    triangles: np.ndarray
    attributes: dict = field(default_factory=dict)

    @staticmethod
    def empty(attribute_shapes: dict | None = None) -> "SurfaceMesh":
        attrs = {k: np.zeros((0, *tail), np.float32) for k, tail in (attribute_shapes or {}).items()}
        return SurfaceMesh(np.zeros((0, 3), np.float32), np.zeros((0, 3), np.int32), attrs)


# -- thin-sheet bridges ------------------------------------------------------------------------------

@njit(cache=True, parallel=True)
def _neighbour_counts(x, radius, cell_start, cell_nbr, particle_cell, counts):
    r2 = radius * radius
    for i in prange(x.shape[0]):
        c = particle_cell[i]
        k = 0
        for q in range(27):
            nc = cell_nbr[c, q]
            if nc < 0:
                continue
            for j in range(cell_start[nc], cell_start[nc + 1]):
                d0 = x[i, 0] - x[j, 0]
                d1 = x[i, 1] - x[j, 1]
                d2 = x[i, 2] - x[j, 2]
                if d0 * d0 + d1 * d1 + d2 * d2 < r2:
                    k += 1
        counts[i] = k - 1  # not itself


@njit(cache=True)
def _bridges(x, sparse, rmin, rmax, cell_start, cell_nbr, particle_cell, out, count_only):
    """Mid-points of sparse pairs i < j with rmin <= |x_i - x_j| < rmax; returns how many."""
    lo2, hi2 = rmin * rmin, rmax * rmax
    k = 0
    for i in range(x.shape[0]):
        if not sparse[i]:
            continue
        c = particle_cell[i]
        for q in range(27):
            nc = cell_nbr[c, q]
            if nc < 0:
                continue
            for j in range(max(i + 1, cell_start[nc]), cell_start[nc + 1]):
                if not sparse[j]:
                    continue
                d0 = x[j, 0] - x[i, 0]
                d1 = x[j, 1] - x[i, 1]
                d2 = x[j, 2] - x[i, 2]
                d = d0 * d0 + d1 * d1 + d2 * d2
                if lo2 <= d < hi2:
                    if not count_only:
                        out[k, 0] = x[i, 0] + 0.5 * d0
                        out[k, 1] = x[i, 1] + 0.5 * d1
                        out[k, 2] = x[i, 2] + 0.5 * d2
                    k += 1
    return k


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
    cell = max(kernel_radius, rmax)
    grid = build_grid(x, cell)
    xs = np.ascontiguousarray(x[grid.order], dtype=np.float32)
    counts = np.empty(len(xs), np.int64)
    _neighbour_counts(xs, np.float32(kernel_radius), grid.cell_start, grid.cell_nbr, grid.particle_cell, counts)
    # the neighbour count that marks a sparse particle scales with the kernel's volume in spacings
    threshold = SPARSE_NEIGHBOURS * (kernel_radius / (2.0 * spacing)) ** 3
    sparse = counts < threshold
    dummy = np.zeros((0, 3), np.float32)
    args = (xs, sparse, np.float32(BRIDGE_MIN * spacing), np.float32(rmax), grid.cell_start, grid.cell_nbr,
            grid.particle_cell)
    n = _bridges(*args, dummy, True)
    out = np.empty((n, 3), np.float32)
    _bridges(*args, out, False)
    return out


# -- vertex attributes -------------------------------------------------------------------------------

#: Vertices per parallel task of :func:`_shepard` (one accumulator allocation per task, not per vertex).
SHEPARD_CHUNK = 256


@njit(cache=True, parallel=True)
def _shepard(points, rows, targets, values, normalise, h, cell_start, cell_end, cell_nbr, particle_cell, out):
    """Kernel sums of ``values`` (rows of the particles) at the vertex rows ``rows``: normalised (Shepard)
    for the columns where ``normalise`` is True, plain sums sum_j W_ij values_j for the others; row
    ``rows[r]`` goes to ``out[targets[r]]``.

    ``points`` holds particles and vertices together in grid order, each cell's particles first
    (rows ``cell_start[c]:cell_end[c]``; its vertices follow, so they cost nothing as candidates);
    ``values`` is indexed like ``points`` (vertex rows unused). A vertex without a particle in its
    support takes the nearest particle of its 27 cells in the normalised columns (or zeros if none),
    zero in the others.
    """
    nrows, k = rows.shape[0], values.shape[1]
    support2 = (2.0 * h) * (2.0 * h)
    for chunk in prange((nrows + SHEPARD_CHUNK - 1) // SHEPARD_CHUNK):
        acc = np.empty(k, np.float64)
        for r in range(chunk * SHEPARD_CHUNK, min(nrows, (chunk + 1) * SHEPARD_CHUNK)):
            i = rows[r]
            c = particle_cell[i]
            acc[:] = 0.0
            wsum = 0.0
            best, best_d = -1, np.inf
            for q in range(27):
                nc = cell_nbr[c, q]
                if nc < 0:
                    continue
                for j in range(cell_start[nc], cell_end[nc]):
                    d0 = points[i, 0] - points[j, 0]
                    d1 = points[i, 1] - points[j, 1]
                    d2 = points[i, 2] - points[j, 2]
                    d = d0 * d0 + d1 * d1 + d2 * d2
                    if d < best_d:
                        best, best_d = j, d
                    if d < support2:
                        w = cubic_w(math.sqrt(d), h)
                        wsum += w
                        for a in range(k):
                            acc[a] += w * values[j, a]
            t = targets[r]
            for a in range(k):
                if not normalise[a]:
                    out[t, a] = acc[a]
                elif wsum > 0.0:
                    out[t, a] = acc[a] / wsum
                elif best >= 0:
                    out[t, a] = values[best, a]
                else:
                    out[t, a] = 0.0


def interpolate(particle_x: np.ndarray, values: np.ndarray, vertices: np.ndarray, kernel_radius: float,
                normalise: np.ndarray | None = None) -> np.ndarray:
    """Kernel-weighted (Shepard) average of per-particle ``values`` at ``vertices``.

    With ``normalise`` (bool, shape (K,)), the columns where it is False are plain kernel sums
    sum_j W(|x_v - x_j|) values_j instead.

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
    n, v = len(particle_x), len(vertices)
    k = values.shape[1]
    if v == 0 or n == 0:
        return np.zeros((v, k), np.float32)
    points = np.concatenate([np.asarray(particle_x, np.float32), np.asarray(vertices, np.float32)])
    # the grid's sort is stable and the particles come first, so in every cell its particles precede
    # its vertices
    grid = build_grid(points, kernel_radius)
    is_vertex = grid.order >= n
    cell_end = grid.cell_start[:-1] + np.add.reduceat(~is_vertex, grid.cell_start[:-1]).astype(np.int64)
    vals = np.zeros((n + v, k), np.float32)
    vals[:n] = values
    vals = vals[grid.order]
    rows = np.flatnonzero(is_vertex)
    result = np.empty((v, k), np.float32)
    norm = np.ones(k, np.bool_) if normalise is None else np.asarray(normalise, np.bool_)
    _shepard(np.ascontiguousarray(points[grid.order]), rows, grid.order[rows] - n, vals, norm,
             np.float32(0.5 * kernel_radius), grid.cell_start, cell_end, grid.cell_nbr, grid.particle_cell, result)
    return result


# -- the reconstruction ------------------------------------------------------------------------------

#: Vertex smoothing weights (Löschner et al. 2023): w = smootherstep(n_v / WEIGHT_NORMALISATION), where
#: n_v = sum_j (m / rho_j) n_j W(x_v - x_j) is the particles' neighbour counts n_j (within the kernel
#: support) interpolated to the vertex; splashsurf's default normalisation.
WEIGHT_NORMALISATION = 13.0


def neighbour_counts(x: np.ndarray, kernel_radius: float) -> np.ndarray:
    """Neighbours of each particle within ``kernel_radius`` (itself not counted), float32, shape (N,)."""
    if len(x) == 0:
        return np.zeros(0, np.float32)
    grid = build_grid(x, kernel_radius)
    xs = np.ascontiguousarray(x[grid.order], dtype=np.float32)
    counts = np.empty(len(x), np.int64)
    _neighbour_counts(xs, np.float32(kernel_radius), grid.cell_start, grid.cell_nbr, grid.particle_cell, counts)
    out = np.empty(len(x), np.float32)
    out[grid.order] = counts
    return out


def smoothing_weights(x: np.ndarray, density: np.ndarray, vertices: np.ndarray, params: SurfaceParameters
                      ) -> np.ndarray:
    """Per-vertex weights of the weighted Laplacian smoothing (see :data:`WEIGHT_NORMALISATION`).

    The particles' volumes m / rho_j come from the solver's densities (``density``, kg/m^3) with
    m = rho0 dx^3, where splashsurf finds densities of its own with a second neighbour search.

    Returns
    -------
    ndarray, shape (V,), float32, in [0, 1]
    """
    mass = params.rest_density * params.particle_spacing ** 3
    volume = mass / np.maximum(np.asarray(density, np.float32), 1e-6 * params.rest_density)
    counts = neighbour_counts(x, params.kernel_radius)
    n_v = interpolate(x, (volume * counts)[:, None].astype(np.float32), vertices, params.kernel_radius,
                      normalise=np.array([False]))[:, 0]
    t = np.clip(n_v / WEIGHT_NORMALISATION, 0.0, 1.0)
    return (t * t * t * (t * (6.0 * t - 15.0) + 10.0)).astype(np.float32)


def _import_splashsurf():
    try:
        import pysplashsurf
    except ImportError as exc:  # the extension bundles it; a bare engine checkout may lack it
        raise ImportError("Surface reconstruction needs the 'pysplashsurf' package (pip install "
                          "pysplashsurf==0.14.1)") from exc
    return pysplashsurf


def reconstruct(arrays: dict, params: SurfaceParameters) -> SurfaceMesh:
    """Mesh one frame of particles.

    Parameters
    ----------
    arrays : dict
        One frame of the particle cache (:mod:`engine.cache`): ``position`` (N, 3) float32 m,
        ``velocity`` (N, 3) float32 m/s, and every attribute named in ``params.attributes``
        ((N,) or (N, 3) float arrays).
    params : SurfaceParameters

    Returns
    -------
    SurfaceMesh
        Closed (every edge shared by two triangles) wherever the liquid is; empty if no particle
        reaches the iso level.
    """
    x = np.ascontiguousarray(arrays["position"], dtype=np.float32).reshape(-1, 3)
    shapes = {}
    for name in params.attributes:
        a = np.asarray(arrays[name])
        shapes[name] = a.shape[1:]
    if len(x) == 0:
        return SurfaceMesh.empty(shapes)
    ps = _import_splashsurf()
    points = x
    if params.thin_sheets:
        extra = bridge_points(x, params.particle_spacing, params.kernel_radius)
        if len(extra):
            points = np.concatenate([x, extra])
    r = params.particle_radius
    smooth = params.smoothing_iterations > 0
    # splashsurf's lengths are in particle radii; its smoothing length is half the kernel support.
    # With params.library_weights splashsurf also finds the smoothing weights (a neighbour search and
    # an interpolation of its own); otherwise Surge does, from the cached densities, and splashsurf
    # smooths with them (the same weighted Laplacian).
    inside = smooth and params.library_weights
    mesh, _rec = ps.reconstruction_pipeline(
        points, particle_radius=r, rest_density=params.rest_density,
        smoothing_length=0.5 * params.kernel_radius / r, cube_size=params.cell_size / r,
        iso_surface_threshold=params.iso,
        mesh_smoothing_iters=int(params.smoothing_iterations) if inside else None,
        mesh_smoothing_weights=inside, subdomain_grid=True)
    trimesh = mesh.mesh
    triangles = np.ascontiguousarray(trimesh.triangles).astype(np.int32).reshape(-1, 3)
    if len(triangles) == 0:
        return SurfaceMesh.empty(shapes)
    if smooth and not inside:
        density = arrays.get("density")
        if density is None or len(points) != len(x):
            # no cached densities, or bridge points without one: splashsurf's own estimate of rest
            density = np.full(len(points), params.rest_density, np.float32)
        raw = np.ascontiguousarray(trimesh.vertices, dtype=np.float32)
        weights = smoothing_weights(points, density, raw, params)
        ps.laplacian_smoothing_parallel(trimesh, trimesh.vertex_vertex_connectivity(),
                                        iterations=int(params.smoothing_iterations), beta=1.0, weights=weights)
    vertices = np.ascontiguousarray(trimesh.vertices, dtype=np.float32).reshape(-1, 3)
    columns, layout = [], []
    for name in params.attributes:
        a = np.asarray(arrays[name], dtype=np.float32).reshape(len(x), -1)
        layout.append((name, a.shape[1], shapes[name]))
        columns.append(a)
    attributes = {}
    if columns:
        values = interpolate(x, np.ascontiguousarray(np.concatenate(columns, axis=1)), vertices,
                             params.kernel_radius)
        col = 0
        for name, width, shape in layout:
            attributes[name] = np.ascontiguousarray(values[:, col:col + width]).reshape((len(vertices), *shape))
            col += width
    return SurfaceMesh(vertices, triangles, attributes)


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
