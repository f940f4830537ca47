"""Isolated particles and small clusters as round drops of the right volume, or left to the spray.

A particle with no neighbour within the kernel support gives the colour field a small bump of its
own: marching cubes at half a spacing per cell turns it into a lumpy bead of about 0.8 of its volume
(the cubic spline's ball where it is above the iso level 0.6, cut into a dozen cells); two or three
particles flung off together make a lumpy peanut. A *small cluster* is a group of at most
``surface_drop_particles`` particles linked by distances below the kernel support and to no other
particle (:func:`small_clusters`). The surface takes them out of the field and, by the setting
``surface_isolated`` (:data:`engine.settings.surface.ISOLATED_MODES`), either

* meshes each cluster as a **round drop**: an icosphere (the icosahedron subdivided
  :data:`SUBDIVISIONS` times, its vertices on the sphere) whose enclosed volume is the cluster's volume
  at rest (its particles times m / rho0 = spacing^3), at the cluster's centre, with the cluster's mean
  velocity and attributes on its vertices (surface tension pulls a few particles' worth of liquid into
  one round drop); or
* hands its particles to the **spray**: they leave the mesh and are written beside it as points
  (position, velocity, id), each rendering as a sphere of its own volume, as whitewater spray does.
"""

from __future__ import annotations

import math
from functools import lru_cache

import numpy as np
from numba import njit

#: Subdivisions of the icosahedron of a drop: 2 gives 162 vertices and 320 triangles.
SUBDIVISIONS = 2


@lru_cache(maxsize=4)
def unit_icosphere(subdivisions: int = SUBDIVISIONS) -> tuple[np.ndarray, np.ndarray]:
    """An icosphere of radius 1: ``(vertices (V, 3) float64, triangles (T, 3) int32)``, counter-clockwise seen
    from outside. Each subdivision splits every triangle into four at its edges' midpoints, pushed onto
    the sphere."""
    t = (1.0 + math.sqrt(5.0)) / 2.0
    v = [(-1, t, 0), (1, t, 0), (-1, -t, 0), (1, -t, 0), (0, -1, t), (0, 1, t), (0, -1, -t), (0, 1, -t),
         (t, 0, -1), (t, 0, 1), (-t, 0, -1), (-t, 0, 1)]
    verts = [np.array(p, float) / np.linalg.norm(p) for p in v]
    faces = [(0, 11, 5), (0, 5, 1), (0, 1, 7), (0, 7, 10), (0, 10, 11), (1, 5, 9), (5, 11, 4), (11, 10, 2),
             (10, 7, 6), (7, 1, 8), (3, 9, 4), (3, 4, 2), (3, 2, 6), (3, 6, 8), (3, 8, 9), (4, 9, 5), (2, 4, 11),
             (6, 2, 10), (8, 6, 7), (9, 8, 1)]
    for _ in range(subdivisions):
        mid: dict = {}

        def midpoint(a, b):
            key = (min(a, b), max(a, b))
            if key not in mid:
                p = verts[a] + verts[b]
                verts.append(p / np.linalg.norm(p))
                mid[key] = len(verts) - 1
            return mid[key]

        new = []
        for a, b, c in faces:
            ab, bc, ca = midpoint(a, b), midpoint(b, c), midpoint(c, a)
            new += [(a, ab, ca), (b, bc, ab), (c, ca, bc), (ab, bc, ca)]
        faces = new
    return np.array(verts), np.array(faces, np.int32)


def drop_radius(particle_volume: float, subdivisions: int = SUBDIVISIONS) -> float:
    """Radius of the icosphere that encloses ``particle_volume`` (m^3): a little more than the sphere's, since
    the polyhedron lies inside its sphere."""
    v, t = unit_icosphere(subdivisions)
    a, b, c = v[t[:, 0]], v[t[:, 1]], v[t[:, 2]]
    unit = float(np.einsum("ij,ij->i", a, np.cross(b, c)).sum() / 6.0)
    return (particle_volume / unit) ** (1.0 / 3.0)


def drop_meshes(centres: np.ndarray, radius, first_vertex: int = 0) -> tuple[np.ndarray, np.ndarray]:
    """One icosphere around each of the ``centres`` (D, 3), of ``radius`` (m; one for all or (D,)):
    ``(vertices (D * V, 3) float32, triangles (D * T, 3) int32)``, drop d's vertices the rows
    ``d * V:(d + 1) * V``, its triangles' indices offset by ``first_vertex``."""
    v, t = unit_icosphere()
    c = np.asarray(centres, np.float64).reshape(-1, 1, 3)
    r = np.broadcast_to(np.asarray(radius, np.float64), (len(c),)).reshape(-1, 1, 1)
    vertices = (c + r * v[None]).reshape(-1, 3).astype(np.float32)
    offsets = first_vertex + len(v) * np.arange(len(c), dtype=np.int64)
    triangles = (t[None].astype(np.int64) + offsets[:, None, None]).reshape(-1, 3).astype(np.int32)
    return vertices, triangles


def vertices_per_drop() -> int:
    """Vertices of one drop's icosphere."""
    return len(unit_icosphere()[0])


@njit(cache=True)
def _root(parent, a):
    while parent[a] != a:
        parent[a] = parent[parent[a]]
        a = parent[a]
    return a


@njit(cache=True)
def _clusters(x, candidate, support, cell_start, cell_nbr, max_size,
              # outputs
              label):
    """label[i] = a cluster id (its root particle) for the particles of small clusters, -1 for the others
    (grid order). Union-find over the pairs closer than ``support`` among the ``candidate`` particles (those
    with fewer than ``max_size`` neighbours: a particle with more belongs to a larger cluster); a candidate
    next to another particle marks its cluster as not small. Serial: the candidates are few."""
    n = x.shape[0]
    parent = np.arange(n)
    touches = np.zeros(n, np.bool_)
    s2 = support * support
    for c in range(cell_nbr.shape[0]):
        for i in range(cell_start[c], cell_start[c + 1]):
            if not candidate[i]:
                continue
            for t in range(27):
                nc = cell_nbr[c, t]
                if nc < 0:
                    continue
                for j in range(cell_start[nc], cell_start[nc + 1]):
                    d0 = x[j, 0] - x[i, 0]
                    d1 = x[j, 1] - x[i, 1]
                    d2 = x[j, 2] - x[i, 2]
                    if j == i or d0 * d0 + d1 * d1 + d2 * d2 >= s2:
                        continue
                    if not candidate[j]:
                        touches[i] = True
                    elif j > i:
                        a = _root(parent, i)
                        b = _root(parent, j)
                        if a != b:
                            parent[max(a, b)] = min(a, b)
    size = np.zeros(n, np.int64)
    big = np.zeros(n, np.bool_)
    for i in range(n):
        if candidate[i]:
            r = _root(parent, i)
            size[r] += 1
            big[r] = big[r] or touches[i]
    for i in range(n):
        label[i] = -1
        if candidate[i]:
            r = _root(parent, i)
            if not big[r] and size[r] <= max_size:
                label[i] = r


def small_clusters(particles, count: np.ndarray, max_size: int) -> np.ndarray:
    """The small clusters of a frame (see the module docstring).

    Parameters
    ----------
    particles : engine.surface.field.ParticleGrid -- its cells at least the support wide
    count : ndarray, shape (N,) -- each particle's neighbours within the support (grid order)
    max_size : int -- most particles of a small cluster (0: none)

    Returns
    -------
    ndarray, shape (N,), int64 -- grid order: the cluster's id (equal for the particles of one cluster), or -1
    """
    n = len(particles.x)
    label = np.full(n, -1, np.int64)
    if n and max_size > 0:
        g = particles.grid
        _clusters(particles.x, np.asarray(count) < max_size, np.float32(particles.support), g.cell_start,
                  g.cell_nbr, int(max_size), label)
    return label
