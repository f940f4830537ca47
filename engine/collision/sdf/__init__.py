"""Narrow-band signed distance grids from triangle meshes.

Modules: :mod:`~engine.collision.sdf.grid` (the grid type and its block layout), :mod:`~engine.collision.sdf.distance`
(point-triangle distances), :mod:`~engine.collision.sdf.winding` (exact and fast winding numbers),
:mod:`~engine.collision.sdf.build` (mesh -> grid), :mod:`~engine.collision.sdf.query` (sampling) and
:mod:`~engine.collision.sdf.storage` (cache key and files); every public name is importable from here.

Alduán, Tena & Otaduy 2015, "Efficient and Robust Position-Based Fluids for VFX", §4 (VDB collision fields):
a distance field is stored only in a
narrow band around the surface, with the index of the closest triangle kept beside the distance
(so a velocity or friction field can later be read off the closest primitive), in one of three
modes:

``'SOLID_INSIDE'``
    The inside of the mesh is solid (an obstacle): ``phi < 0`` inside.
``'SOLID_OUTSIDE'``
    The outside of the mesh is solid (an inside-out container, Gourlay 2012): ``phi < 0`` outside.
``'SHELL'``
    The surface itself is solid (open sheets, single-sided cups): ``phi = |d| - thickness``.

In every mode ``phi`` is the distance to the solid minus ``thickness``, so ``thickness`` inflates
the solid by that much on every side (a sheet in SHELL mode becomes a slab ``2 thickness`` thick).

Storage
-------
Grid nodes sit at ``origin + (i, j, k) * cell_size``. Nodes are grouped into blocks of 8^3; a block
exists only if one of its nodes lies within ``band + sqrt(3) cell_size`` of the surface, so memory
follows the surface area, not the bounding box. Blocks are kept in the ascending order of the 64-bit
Morton key of their block coordinates (as in :mod:`engine.core.cell_grid`); queries find them through a
three-level index in the spirit of VDB (Museth 2013) rather than a binary search: a dense int32
table with one entry per *tile* of 8^3 blocks (64^3 cells, so 4 bytes per 262144 cells), and for
each tile the band passes through (a number that follows the surface area) a table of its 512
blocks holding the block's row. Entries without a block hold the side instead (-1 for phi > 0, -2
for phi < 0): a tile without stored blocks has no surface inside it, so one side serves it all.

Every point within ``band`` of the surface has all eight corners of its cell stored and is
interpolated trilinearly; the gradient returned is the exact gradient of that interpolant.
Anything farther answers "far" (``+band`` outside, ``-band`` inside, minus ``thickness``), the
side read from a stored corner of its cell or else from the index.

Distances
---------
At every stored node the distance is exact to the mesh (closest point on a triangle by Voronoi
regions of its vertices, edges and face, Ericson 2004, *Real-Time Collision Detection* §5.1.5),
computed by "rasterising" each triangle into the nodes of its band-dilated bounding box. Blocks are
processed in parallel and each block owns its nodes, so nothing is scattered across threads.

Sign
----
The side is the generalised winding number w (Jacobson, Kavan & Sorkine-Hornung 2013): the sum of
the signed solid angles of all triangles over 4 pi, about 1 inside a closed outward-facing mesh and
0 outside, and well behaved for holes, duplicated, overlapping, self-intersecting and
non-manifold meshes. A node is inside when ``|w| > 1/2`` (so a mesh whose normals all point inward
still reads as solid, and overlapping copies, w = 2, stay solid).

w is evaluated with the fast winding numbers of Barill, Dickson, Schmidt, Levin & Jacobson 2018
(*Fast Winding Numbers for Soups and Clouds*, §3-4): a bounding volume hierarchy over the triangles
(median splits, leaves of at most 8 triangles) stores per cluster its area-weighted centre p, exact
radius r, and the moments of the Taylor expansion of the dipole kernel g(x) = (x - q)/|x - q|^3
about p, integrated over the cluster's flat triangles::

    N = sum a_t n_t,   S = sym(sum a_t n_t (c_t - p)^T),
    C = sym3(sum a_t n_t [(c_t - p)(c_t - p)^T + sum_v (v - c_t)(v - c_t)^T / 12])

so that a cluster with |p - q| > beta r contributes, with r_q = p - q and r = |r_q|::

    4 pi w_c = N.r_q / r^3 + tr(S) / r^3 - 3 r_q.S.r_q / r^5 + 15/2 C:r_q r_q r_q / r^7 - 9/2 r_q.tr(C) / r^5

(Barill et al.'s three-term expansion; tr(C)_k = sum_i C_iik); nearer clusters are opened down
to leaves, whose triangles are summed exactly (Van Oosterom & Strackee 1983). With ``beta = 2``
the error against the exact sum (:func:`winding_numbers`), measured on 2k-100k-triangle
spheres, tori and a sphere with a hole, is at most 0.0073 and 0.001 on average
(``tests/test_sdf.py`` holds it below 0.01). The side can therefore only come out wrong where the
exact w is itself within 0.01 of 1/2, i.e. on the "virtual surface" spanning a hole, where neither
side is right. Inside the band, w is evaluated at about half of the nodes and copied to the others
across grid edges the surface cannot cross (see :func:`_block_windings`); the index takes one
evaluation per empty tile and per empty block of the other tiles, at their centres.
"""

from .build import build_sdf
from .distance import triangle_distances_kernel
from .grid import BLOCK, BLOCK_NODES, MODES, SDF_FORMAT_VERSION, SignedDistanceGrid, grid_nbytes, kernel_args
from .query import node_positions, sample, sample_flat, sample_kernel, sample_point
from .storage import load_sdf, save_sdf, sdf_key
from .winding import (WINDING_BETA, WindingTree, build_winding_tree, exact_winding_kernel, fast_winding_kernel,
                      fast_winding_numbers, solid_angle, winding_numbers)

__all__ = [
    "BLOCK", "BLOCK_NODES", "MODES", "SDF_FORMAT_VERSION", "WINDING_BETA", "SignedDistanceGrid", "WindingTree",
    "build_sdf", "build_winding_tree", "exact_winding_kernel", "fast_winding_kernel", "fast_winding_numbers",
    "grid_nbytes", "kernel_args", "load_sdf", "node_positions", "sample", "sample_flat", "sample_kernel",
    "sample_point", "save_sdf", "sdf_key", "solid_angle", "triangle_distances_kernel", "winding_numbers",
]
