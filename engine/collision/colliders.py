"""The packed collider data the collision kernels read (:mod:`engine.collision.world`).

All grids of a bake are concatenated into one set of arrays so that numba kernels loop over
colliders without Python objects: a :class:`ColliderSet`, a NamedTuple of arrays. Per grid and per
collider it holds a record array (:data:`GRID_DTYPE`, :data:`COLLIDER_DTYPE`) whose named fields
the kernels read (``cset.colliders[c].friction``, ``cset.grids[g].origin``), integers stored as
integers and one collider's fields next to each other in memory; the grids' block and tile arrays
stacked; and the triangles, vertex velocities and face planes of the colliders that need them.
"""

from __future__ import annotations

from typing import NamedTuple

import numpy as np

from . import sdf

#: One record per grid of a :class:`ColliderSet`: where its tile index starts in ``tile_flat``, its
#: tile counts (x, y, z), origin (m), 1 / cell size (1/m), band (m), thickness (m) and outside sign
#: (the arguments of :func:`engine.collision.sdf.sample_flat`).
GRID_DTYPE = np.dtype([("tile_start", np.int64), ("tiles", np.int64, (3,)), ("origin", np.float64, (3,)),
                       ("inv_cell", np.float64), ("band", np.float64), ("thickness", np.float64),
                       ("outside_sign", np.float64)], align=True)

#: One record per collider of a :class:`ColliderSet`; :meth:`engine.collision.world.CollisionWorld.update`
#: rewrites the pose fields every substep.
#:
#: * ``kind``: :data:`KIND_GRID` or :data:`KIND_POLYTOPE`;
#: * ``grid``: the grid sampled now (a deforming collider has one per frame: the nearest frame's);
#: * ``deforming``; ``time_shift`` (s): time since the frame of that grid (deforming colliders);
#: * ``vel_start``: first row of the current frame's vertex velocities in ``vvel``; ``tri_start``:
#:   first row of its triangles in ``tris`` (deforming colliders);
#: * ``friction``, ``bounce``; ``offset`` (m): surface offset, plus a shell's half thickness;
#: * ``world_to_rest`` (3 x 4): world point -> rest point, affine; ``grad_to_world`` (3 x 3): rest
#:   gradient -> world gradient; ``rest_velocity`` (3 x 4, 1/s and m/s): rest point -> world velocity;
#: * ``box_lo``, ``box_hi`` (m): world-space box outside which the collider cannot act on a particle
#:   (the broad phase every query starts with, so particles far from a collider cost a few comparisons);
#: * convex polytopes (Gourlay 2012): ``plane_start``, ``plane_count`` (its rows of ``planes``),
#:   ``parity`` (+1 solid, -1 hole), ``centre`` (rest space, m), ``r_in`` (inscribed radius, the
#:   broad phase of holes), ``r_out`` (circumscribed radius, the broad phase of solids), ``reach``
#:   (their broad-phase margin), all m.
COLLIDER_DTYPE = np.dtype([
    ("kind", np.int64), ("grid", np.int64), ("deforming", np.bool_), ("vel_start", np.int64),
    ("tri_start", np.int64), ("plane_start", np.int64), ("plane_count", np.int64),
    ("time_shift", np.float64), ("friction", np.float64), ("bounce", np.float64), ("offset", np.float64),
    ("world_to_rest", np.float64, (3, 4)), ("grad_to_world", np.float64, (3, 3)),
    ("rest_velocity", np.float64, (3, 4)), ("box_lo", np.float64, (3,)), ("box_hi", np.float64, (3,)),
    ("parity", np.float64), ("centre", np.float64, (3,)), ("r_in", np.float64), ("r_out", np.float64),
    ("reach", np.float64)], align=True)

#: ``kind`` values.
KIND_GRID = 0
KIND_POLYTOPE = 1


class ColliderSet(NamedTuple):
    """Every mesh collider of a bake as arrays the numba kernels take (``cset``).

    Attributes
    ----------
    grids : ndarray, shape (G,), :data:`GRID_DTYPE`
        One record per distance grid (a deforming collider has one per frame).
    block_phi : ndarray, shape (B, 512), float32, metres
        The grids' ``block_phi`` stacked.
    block_tri : ndarray, shape (B, 512), int32
        The grids' ``block_tri`` stacked.
    tile_flat : ndarray, shape (T,), int32
        The grids' ``tile_index`` flattened one after another, rows shifted into ``tile_block``.
    tile_block : ndarray, shape (M, 512), int32
        The grids' ``tile_block`` stacked, block rows shifted into ``block_phi``.
    colliders : ndarray, shape (C,), :data:`COLLIDER_DTYPE`
        One record per collider, its pose at the current time.
    tris : ndarray, shape (K, 3), int32
        Triangles of the deforming colliders.
    vvel : ndarray, shape (W, 3), float32, m/s
        Per-frame vertex velocities of the deforming colliders.
    planes : ndarray, shape (P, 4), float64
        Face planes (unit outward normal n, offset d; n . x <= d inside) of the convex polytopes.
    """

    grids: np.ndarray
    block_phi: np.ndarray
    block_tri: np.ndarray
    tile_flat: np.ndarray
    tile_block: np.ndarray
    colliders: np.ndarray
    tris: np.ndarray
    vvel: np.ndarray
    planes: np.ndarray


def empty_world_args() -> ColliderSet:
    """The ``cset`` of a scene without mesh colliders."""
    return ColliderSet(np.zeros(0, dtype=GRID_DTYPE), np.zeros((0, sdf.BLOCK_NODES), dtype=np.float32),
                       np.zeros((0, sdf.BLOCK_NODES), dtype=np.int32), np.zeros(0, dtype=np.int32),
                       np.zeros((0, sdf.BLOCK_NODES), dtype=np.int32), np.zeros(0, dtype=COLLIDER_DTYPE),
                       np.zeros((0, 3), dtype=np.int32), np.zeros((0, 3), dtype=np.float32), np.zeros((0, 4)))


def pack_grids(grids) -> tuple:
    """The grid fields of a :class:`ColliderSet` for a list of
    :class:`~engine.collision.sdf.SignedDistanceGrid`: (grids, block_phi, block_tri, tile_flat, tile_block)."""
    records = np.zeros(len(grids), dtype=GRID_DTYPE)
    phis, tris, tiles, rows = [], [], [], []
    tile_off = block_off = row_off = 0
    for g, grid in enumerate(grids):
        records["tile_start"][g] = tile_off
        records["tiles"][g] = grid.tile_index.shape
        records["origin"][g] = grid.origin
        records["inv_cell"][g] = 1.0 / grid.cell_size
        records["band"][g] = grid.band
        records["thickness"][g] = grid.thickness
        records["outside_sign"][g] = grid.outside_sign
        t = grid.tile_index.reshape(-1).copy()
        t[t >= 0] += row_off
        tb = grid.tile_block.copy()
        tb[tb >= 0] += block_off
        tiles.append(t)
        rows.append(tb)
        phis.append(grid.block_phi)
        tris.append(grid.block_tri)
        tile_off += t.shape[0]
        row_off += tb.shape[0]
        block_off += grid.block_phi.shape[0]
    cat = lambda parts, shape, dtype: (np.ascontiguousarray(np.concatenate(parts)) if parts  # noqa: E731
                                       else np.zeros(shape, dtype=dtype))
    return (records, cat(phis, (0, sdf.BLOCK_NODES), np.float32), cat(tris, (0, sdf.BLOCK_NODES), np.int32),
            cat(tiles, (0,), np.int32), cat(rows, (0, sdf.BLOCK_NODES), np.int32))
