"""A baked cache's rigid-body trajectories, for a pipeline that hands them to another tool.

The cache manifest's ``rigid_bodies`` names the bodies (in record order) with their mass properties, and
every frame file holds the bodies' records (:data:`RECORDS`; the format is in
``docs/cache-format.md``). :func:`read_trajectory` gathers them over the cached frames.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from ..errors import CacheFormatError
from ..io.cache import CacheReader

#: Per-frame arrays of the bodies in a cache frame (one row per body, in the manifest's ``rigid_bodies``
#: order): name -> (dtype, shape of a row, unit, description).
RECORDS = {
    "body_matrix": ("float64", (4, 4), "m", "rest-to-world matrix: the first frame's world-space mesh to this frame's"),
    "body_position": ("float64", (3,), "m", "centre of mass, world space"),
    "body_orientation": ("float64", (4,), "", "unit quaternion (w, x, y, z) of the rotation since the first frame"),
    "body_velocity": ("float64", (3,), "m/s", "velocity of the centre of mass"),
    "body_angular_velocity": ("float64", (3,), "rad/s", "angular velocity, world axes"),
}


@dataclass(frozen=True)
class Trajectory:
    """The bodies' motion over the cached frames (F frames, B bodies).

    Attributes
    ----------
    names : tuple of str
        The bodies, in the order of the arrays' second axis.
    frames : ndarray (F,), int64
    matrix : ndarray (F, B, 4, 4), float64
        Rest-to-world matrix: the first frame's world-space mesh to this frame's (metres). A body's object
        matrix at a frame is this times its object matrix at the first frame.
    position : ndarray (F, B, 3), float64, m -- centre of mass
    orientation : ndarray (F, B, 4), float64 -- unit quaternion (w, x, y, z) since the first frame
    velocity : ndarray (F, B, 3), float64, m/s
    angular_velocity : ndarray (F, B, 3), float64, rad/s, world axes
    mass : ndarray (B,), kg
    centre : ndarray (B, 3), m -- centre of mass at the first frame
    """

    names: tuple
    frames: np.ndarray
    matrix: np.ndarray
    position: np.ndarray
    orientation: np.ndarray
    velocity: np.ndarray
    angular_velocity: np.ndarray
    mass: np.ndarray
    centre: np.ndarray

    def of(self, name: str) -> dict:
        """One body's arrays by name: ``matrix`` (F, 4, 4), ``position``, ... (F, ...)."""
        if name not in self.names:
            raise KeyError(f"no rigid body named '{name}' in the cache; it holds {', '.join(self.names) or 'none'}")
        b = self.names.index(name)
        return {k: getattr(self, k)[:, b] for k in ("matrix", "position", "orientation", "velocity",
                                                    "angular_velocity")}


def read_trajectory(cache_dir: str) -> Trajectory:
    """Every cached frame's rigid-body records of the cache in ``cache_dir``.

    Raises
    ------
    CacheFormatError
        If the cache has no rigid bodies, or a listed frame cannot be read or lacks a record.
    """
    reader = CacheReader(cache_dir)
    info = reader.manifest.get("rigid_bodies")
    if not info:
        raise CacheFormatError(f"The cache '{cache_dir}' holds no rigid bodies")
    frames = reader.frames
    arrays = {k: [] for k in RECORDS}
    for f in frames:
        data = reader.read_records(f)
        for k in RECORDS:
            if k not in data:
                raise CacheFormatError(f"Frame {f} of the cache '{cache_dir}' lacks the rigid bodies' '{k}'")
            arrays[k].append(data[k])
    n = len(info["names"])
    out = {k: (np.array(v, dtype=np.float64) if v else np.zeros((0, n) + RECORDS[k][1])) for k, v in arrays.items()}
    return Trajectory(names=tuple(info["names"]), frames=np.array(frames, dtype=np.int64), matrix=out["body_matrix"],
                      position=out["body_position"], orientation=out["body_orientation"],
                      velocity=out["body_velocity"], angular_velocity=out["body_angular_velocity"],
                      mass=np.array(info["mass"], dtype=np.float64), centre=np.array(info["centre"], dtype=np.float64))
