"""Distance grids on disk: the cache key of a grid's inputs, and ``.npz`` files without pickles."""

from __future__ import annotations

import zipfile

import numpy as np

from ...io.hashing import canonical_hash
from ...io import atomic
from ...errors import CacheFormatError
from ...scene import TriangleMesh
from .grid import _ARRAY_DTYPES, _ARRAY_FIELDS, BLOCK, SDF_FORMAT_VERSION, SignedDistanceGrid
from .winding import WINDING_BETA


def sdf_key(mesh: TriangleMesh, cell_size: float, band: float, mode: str, thickness: float = 0.0) -> str:
    """Cache key of a grid: SHA-256 (hex) of everything that shapes it.

    That is the format version, the winding-number accuracy, the mesh's vertices (metres) and
    triangles, ``cell_size`` and ``band`` (metres), ``mode`` and ``thickness`` (metres); the same
    arguments as :func:`build_sdf`. The object name is not part of it.
    """
    doc = {"format": "surge-sdf", "format_version": SDF_FORMAT_VERSION, "winding_beta": WINDING_BETA,
           "block": BLOCK, "cell": float(cell_size), "band": float(band), "mode": mode,
           "thickness": float(thickness)}
    return canonical_hash(doc, {"vertices": mesh.vertices, "triangles": mesh.triangles})


def save_sdf(grid: SignedDistanceGrid, path: str) -> None:
    """Write ``grid`` to ``path`` (an ``.npz`` without pickles), atomically."""
    arrays = {f: getattr(grid, f) for f in _ARRAY_FIELDS}
    arrays.update(format=np.array("surge-sdf"), format_version=np.array(SDF_FORMAT_VERSION, dtype=np.int64),
                  name=np.array(grid.name), mode=np.array(grid.mode),
                  cell_size=np.array(grid.cell_size, dtype=np.float64), band=np.array(grid.band, dtype=np.float64),
                  thickness=np.array(grid.thickness, dtype=np.float64),
                  outside_sign=np.array(grid.outside_sign, dtype=np.float64))
    atomic.write_npz(path, arrays)


def load_sdf(path: str) -> SignedDistanceGrid:
    """Read a grid written by :func:`save_sdf`.

    Raises
    ------
    CacheFormatError
        If the file is missing, unreadable, or not a surge-sdf of this format version.
    """
    try:
        with np.load(path, allow_pickle=False) as z:
            data = {k: z[k] for k in z.files}
    except (OSError, ValueError, zipfile.BadZipFile) as exc:   # missing, not an npz, or truncated
        raise CacheFormatError(f"Distance-field cache '{path}' cannot be read: {exc}") from exc
    if str(data.get("format", "")) != "surge-sdf" or int(data.get("format_version", -1)) != SDF_FORMAT_VERSION:
        raise CacheFormatError(f"Distance-field cache '{path}' is not a surge-sdf file of version "
                               f"{SDF_FORMAT_VERSION}; delete it to rebuild")
    try:
        arrays = {f: np.ascontiguousarray(data[f]) for f in _ARRAY_FIELDS}
        grid = SignedDistanceGrid(
            name=str(data["name"]), mode=str(data["mode"]), cell_size=float(data["cell_size"]),
            band=float(data["band"]), thickness=float(data["thickness"]),
            outside_sign=float(data["outside_sign"]), **arrays)
    except KeyError as exc:
        raise CacheFormatError(f"Distance-field cache '{path}' is incomplete: missing {exc}") from exc
    for f, dt in _ARRAY_DTYPES.items():
        if getattr(grid, f).dtype != dt:
            raise CacheFormatError(f"Distance-field cache '{path}': array {f} has dtype "
                                   f"{getattr(grid, f).dtype}, expected {np.dtype(dt)}")
    return grid
