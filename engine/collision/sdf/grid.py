"""The narrow-band distance grid: its type, block layout and the arguments its kernels take.

See :mod:`engine.collision.sdf` for the storage scheme (blocks of 8^3 nodes in Morton order, a tile index).
"""

from __future__ import annotations

from typing import NamedTuple

import numpy as np

#: Distance-field modes (see :mod:`engine.collision.sdf`).
MODES = ("SOLID_INSIDE", "SOLID_OUTSIDE", "SHELL")

#: Version of the on-disk format and of everything that shapes a grid's values; part of
#: :func:`~engine.collision.sdf.storage.sdf_key`, so a change in the method invalidates cached grids.
SDF_FORMAT_VERSION = 1

#: Nodes per block edge (8^3 = 512 nodes per block) and its log2.
BLOCK = 8
_BLOCK_SHIFT = 3
BLOCK_NODES = BLOCK ** 3


class SignedDistanceGrid(NamedTuple):
    """A narrow-band distance field in the mesh's own space.

    Attributes
    ----------
    name : str
        Object name, for messages.
    mode : str
        One of :data:`MODES`.
    cell_size : float
        Node spacing, metres.
    band : float
        Half-width of the band of exact distances around the surface, metres (at least
        ``thickness + 2 cell_size``; farther queries answer "far").
    thickness : float
        Surface offset subtracted from every distance, metres.
    outside_sign : float
        Sign of ``phi`` far from the mesh: +1 for SOLID_INSIDE and SHELL, -1 for SOLID_OUTSIDE.
    origin : ndarray, shape (3,), float64, metres
        Position of node (0, 0, 0).
    block_coord : ndarray, shape (B, 3), int32
        Block coordinates; block b holds nodes ``8 block_coord[b] + (0..7)``.
    block_key : ndarray, shape (B,), uint64
        Morton key of each block, ascending.
    block_phi : ndarray, shape (B, 512), float32, metres
        ``phi`` at the nodes of each block, local node ``(a * 8 + b) * 8 + c``.
    block_tri : ndarray, shape (B, 512), int32
        Closest triangle of each node, -1 where none is within ``band + sqrt(3) cell_size`` (such
        nodes hold that distance, clamped).
    tile_index : ndarray, shape (NX, NY, NZ), int32
        Per tile of 8^3 blocks covering the bounding box dilated by the band: its row in
        ``tile_block``, or the side of the whole tile (-1: phi > 0, -2: phi < 0) when no block is
        stored in it. Beyond the table the side is ``outside_sign``.
    tile_block : ndarray, shape (M, 512), int32
        Per tile with stored blocks, per local block ``(a * 8 + b) * 8 + c``: the block's row in
        ``block_phi``, or its side (-1 / -2) when it is not stored.
    """

    name: str
    mode: str
    cell_size: float
    band: float
    thickness: float
    outside_sign: float
    origin: np.ndarray
    block_coord: np.ndarray
    block_key: np.ndarray
    block_phi: np.ndarray
    block_tri: np.ndarray
    tile_index: np.ndarray
    tile_block: np.ndarray


_ARRAY_FIELDS = ("origin", "block_coord", "block_key", "block_phi", "block_tri", "tile_index", "tile_block")
_ARRAY_DTYPES = {"origin": np.float64, "block_coord": np.int32, "block_key": np.uint64,
                 "block_phi": np.float32, "block_tri": np.int32, "tile_index": np.int32, "tile_block": np.int32}

#: Side codes in ``tile_index`` and ``tile_block`` for places without a stored block.
_SIDE_POSITIVE = -1
_SIDE_NEGATIVE = -2


def grid_nbytes(grid: SignedDistanceGrid) -> int:
    """Bytes held by all arrays of ``grid``."""
    return int(sum(getattr(grid, f).nbytes for f in _ARRAY_FIELDS))


def kernel_args(grid: SignedDistanceGrid) -> tuple:
    """The arguments :func:`sample_point` and :func:`sample_kernel` take after the point(s).

    Returns ``(origin, inv_h, block_phi, block_tri, tile_index, tile_block, far, thickness,
    outside_sign)``, plain arrays and floats a solver can pass into its own numba kernels.
    """
    return (grid.origin, 1.0 / grid.cell_size, grid.block_phi, grid.block_tri, grid.tile_index, grid.tile_block,
            float(grid.band), float(grid.thickness), float(grid.outside_sign))

