"""Filling FLUID objects with liquid at the first frame.

A FLUID mesh is filled with a simple cubic lattice of spacing dx aligned to the world grid
(sites at (i + 1/2) dx), keeping the sites inside the mesh. Inside means a generalised winding
number above 1/2 (Jacobson et al. 2013, "Robust Inside-Outside Segmentation using Generalized
Winding Numbers"): the sum over triangles of the signed solid angle (Van Oosterom & Strackee 1983)
divided by 4 pi. Unlike a single ray parity test it gives the expected answer for meshes with small
holes, duplicated faces or self-intersections.
"""

from __future__ import annotations

import numpy as np

from ..scene import TriangleMesh
from ..collision.sdf.winding import winding_numbers


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
    # |w|: a closed mesh mirrored (negative scale) or with flipped normals has w = -1 inside, not +1
    inside = np.abs(winding_numbers(pts, mesh)) > 0.5
    return pts[inside]


def inside_mesh(x: np.ndarray, mesh: TriangleMesh) -> np.ndarray:
    """bool (N,): generalised winding number of each point above 1/2 in magnitude (only points within the
    mesh's bounding box are computed)."""
    out = np.zeros(len(x), dtype=bool)
    if len(x) == 0 or len(mesh.triangles) == 0:
        return out
    lo, hi = mesh.vertices.min(axis=0), mesh.vertices.max(axis=0)
    cand = np.nonzero(np.all((x >= lo) & (x <= hi), axis=1))[0]
    if len(cand):
        out[cand] = np.abs(winding_numbers(x[cand], mesh)) > 0.5
    return out
