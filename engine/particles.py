"""Structure-of-arrays particle storage.

The skeleton keeps one array per quantity, all of the same length N (the active particles).
Particles are reordered along the Morton curve whenever the neighbour grid is rebuilt; the stable
``id`` survives reordering so that the cache, motion blur and attributes can follow a particle.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np


@dataclass
class Particles:
    """Per-particle state.

    Attributes
    ----------
    x : ndarray, shape (N, 3), float32, metres
    v : ndarray, shape (N, 3), float32, m/s
    a : ndarray, shape (N, 3), float32, m/s^2 (acceleration of the last force evaluation)
    rho : ndarray, shape (N,), float32, kg/m^3
    p : ndarray, shape (N,), float32, Pa
    id : ndarray, shape (N,), int32, stable id
    """

    x: np.ndarray
    v: np.ndarray
    a: np.ndarray
    rho: np.ndarray
    p: np.ndarray
    id: np.ndarray

    @classmethod
    def create(cls, x: np.ndarray, v: np.ndarray, rho0: float, first_id: int = 0) -> "Particles":
        n = x.shape[0]
        return cls(
            x=np.ascontiguousarray(x, dtype=np.float32).reshape(n, 3),
            v=np.ascontiguousarray(v, dtype=np.float32).reshape(n, 3),
            a=np.zeros((n, 3), dtype=np.float32),
            rho=np.full(n, rho0, dtype=np.float32),
            p=np.zeros(n, dtype=np.float32),
            id=np.arange(first_id, first_id + n, dtype=np.int32),
        )

    def __len__(self) -> int:
        return self.x.shape[0]

    def reorder(self, order: np.ndarray) -> None:
        """Apply a permutation to every array (after a grid build)."""
        for name in ("x", "v", "a", "rho", "p", "id"):
            setattr(self, name, np.ascontiguousarray(getattr(self, name)[order]))

    def frame_arrays(self) -> dict:
        """Arrays for one cache frame, sorted by id (see engine.cache)."""
        order = np.argsort(self.id, kind="stable")
        return {"position": self.x[order], "velocity": self.v[order], "density": self.rho[order],
                "id": self.id[order]}
