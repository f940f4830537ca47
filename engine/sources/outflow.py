"""Removing liquid: OUTFLOW objects, the lifetime and the kill box.

OUTFLOW (:class:`Drain`): every particle whose winding number with respect to the mesh, where it
is at the end of the substep, is above 1/2 is removed (only particles in the mesh's bounding box are
tested), while its Use Flow is on.
"""

from __future__ import annotations

import math

import numpy as np

from ..scene import TriangleMesh, animation
from .fill import inside_mesh
from .inflow import _Animated


class Drain:
    """An OUTFLOW object over time: where its surface is, and whether it removes liquid."""

    def __init__(self, outflow, fps: float):
        self.name = outflow.name
        self.mesh = outflow.mesh
        self.anim = _Animated(outflow, fps)

    def mesh_at(self, t: float) -> TriangleMesh | None:
        """The surface at time t (s after the first frame), or None while the outflow is off."""
        if not self.anim.is_on(t):
            return None
        if self.anim.motion is None:
            return self.mesh
        return TriangleMesh(self.anim.motion.pose(t)[0], self.mesh.triangles)

    def dt_limit(self, t: float, dx: float) -> float:
        """Longest substep from t in which the surface moves at most
        :data:`engine.scene.animation.MAX_OUTFLOW_TRAVEL` spacings, s."""
        speed = self.anim.motion.speed_at(t) if self.anim.motion is not None else 0.0
        return animation.MAX_OUTFLOW_TRAVEL * dx / speed if speed > 0.0 else math.inf


def removal_mask(x: np.ndarray, age: np.ndarray, outflows, lifetime: float, kill_box, t: float = 0.0,
                 fps: float = 24.0) -> np.ndarray:
    """Particles to remove at time t: inside an OUTFLOW mesh (where it is then, while it is on), older
    than ``lifetime`` (s, 0 = never) or outside ``kill_box`` ((2, 3) lower/upper corners, m, or None)."""
    mask = np.zeros(len(x), dtype=bool)
    for o in outflows:
        mesh = (o if isinstance(o, Drain) else Drain(o, fps)).mesh_at(t)
        if mesh is not None:
            mask |= inside_mesh(x, mesh)
    if lifetime > 0.0:
        mask |= age > lifetime
    if kill_box is not None:
        mask |= np.any((x < kill_box[0]) | (x > kill_box[1]), axis=1)
    return mask
