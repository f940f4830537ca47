"""The hybrid's time-varying state beyond the particle arrays: what the markers outside the neighbour
search still owe (:class:`MarkerDebt`), the memory of the pressure solve's start guess
(:class:`PressureGuess`, :func:`extrapolate_pressure`), and the whole of it as a checkpoint keeps it
(:class:`HybridState`).
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np
from numba import njit

from . import mac
from .model import Faces


@njit(cache=True)
def extrapolate_pressure(p, p_last, solid, ktop, beta, last_shift):
    """Start guess of the pressure solve, in the computed rows (k < ktop), from p^n (in ``p``), p^(n-1)
    (in ``p_last``) and the boundary row just filled (row ``ktop`` of ``p``; ``p_last`` holds the
    previous one):

        p <- p^n + s + beta (p^n - p^(n-1) - s_last)

    s, the mean change of the boundary row over its open cells, moves every column with it (a
    uniform change of a Dirichlet top under Neumann walls moves the whole solution by as much); the
    rest of the last change, p^n - p^(n-1) less the shift it had then (``last_shift``), is
    extrapolated in time. Updates ``p_last`` (rows up to ``ktop``) and returns s.

    Red-black SOR sweeps per substep in bench_hybrid's drop / blocks / deep tank (600 substeps):
    from p^n alone 19 / 19 / 21 (130 substeps); p^n + 0.5 (p^n - p^(n-1)) 12.8 / 9.7 / 11.6 (the
    boundary row's mean change, which the sweeps spread down the columns slowest, was left almost
    wholly to them); this guess with beta = 0.4: 6.3 / 6.2 / 6.3; beta = 0.5 sets the deep tank's
    pressure ringing at the start (44 sweeps)."""
    ni, nj, nk = p.shape
    if ktop >= nk:
        return 0.0
    total = 0.0
    count = 0
    for i in range(ni):
        for j in range(nj):
            if solid[i, j, ktop] == 0:
                total += p[i, j, ktop] - p_last[i, j, ktop]
                count += 1
    shift = total / count if count > 0 else 0.0
    for i in range(ni):
        for j in range(nj):
            for k in range(ktop):
                c = p[i, j, k]
                p[i, j, k] = c + shift + beta * (c - p_last[i, j, k] - last_shift)
                p_last[i, j, k] = c
            p_last[i, j, ktop] = p[i, j, ktop]
    return shift


@dataclass
class MarkerDebt:
    """What the markers outside the neighbour search still owe (see :data:`MARKER_EVERY`).

    Attributes
    ----------
    dt : float
        Time they still have to move, s.
    steps : int
        Substeps that time spans.
    speed : float
        Their fastest speed when they last moved, m/s.
    disp2 : float
        Their largest squared move since the last neighbour-list build, m^2.
    p_stale : bool
        Their p and rho not yet taken from the grid where they stand.
    moved : Faces, metres
        The displacement field since they last moved: the sum of dt u^(n+1/2) (from mac.step's projection).
    fresh : bool
        The next substep starts that sum afresh.
    """

    dt: float
    steps: int
    speed: float
    disp2: float
    p_stale: bool
    moved: Faces
    fresh: bool

    @classmethod
    def create(cls, grid: mac.MACGrid) -> MarkerDebt:
        return cls(0.0, 0, 0.0, 0.0, False, Faces(np.zeros_like(grid.u), np.zeros_like(grid.v), np.zeros_like(grid.w)),
                   True)


@dataclass
class PressureGuess:
    """The pressure solve's memory for its start guess (:func:`extrapolate_pressure`): ``p_last`` the grid
    pressure one substep back (the grid's shape, P = p / rho, m^2/s^2), ``ktop`` the boundary row it was
    solved under (-1: none), ``shift`` the mean change of the boundary row then."""

    p_last: np.ndarray
    ktop: int
    shift: float

    @classmethod
    def create(cls, grid: mac.MACGrid) -> PressureGuess:
        return cls(np.zeros_like(grid.p), -1, 0.0)


@dataclass
class HybridState:
    """The hybrid's state beyond the particle arrays, for checkpoints: the grid's velocities and
    pressure, the interface height l (-inf: no MAC part), substeps so far, the neighbour search's
    subset size, the interface it was built for (None: not built), the particles' kinds (N,) int8,
    the build positions (N, 3) float32 (None: no build yet), the pressure guess and the markers' debt."""

    grid_u: np.ndarray
    grid_v: np.ndarray
    grid_w: np.ndarray
    grid_p: np.ndarray
    interface: float
    steps: int
    n_sub: int
    l_built: float | None
    kind: np.ndarray
    x_ref: np.ndarray | None
    guess: PressureGuess
    markers: MarkerDebt

    def arrays(self) -> dict:
        m = self.markers
        out = {"grid_u": self.grid_u, "grid_v": self.grid_v, "grid_w": self.grid_w, "grid_p": self.grid_p,
               "interface": np.float64(self.interface), "steps": np.int64(self.steps), "n_sub": np.int64(self.n_sub),
               "l_built": np.float64(self.l_built if self.l_built is not None else math.nan), "kind": self.kind,
               "grid_p_last": self.guess.p_last, "p_last_ktop": np.int64(self.guess.ktop),
               "p_shift": np.float64(self.guess.shift), "marker_dt": np.float64(m.dt),
               "marker_steps": np.int64(m.steps), "marker_speed": np.float64(m.speed),
               "marker_disp2": np.float64(m.disp2), "marker_p_stale": np.bool_(m.p_stale),
               "marker_moved_u": m.moved[0], "marker_moved_v": m.moved[1], "marker_moved_w": m.moved[2],
               "marker_moved_fresh": np.bool_(m.fresh)}
        if self.x_ref is not None:
            out["x_ref"] = self.x_ref
        return out

    @classmethod
    def from_arrays(cls, a: dict) -> HybridState:
        """The state of :meth:`arrays` (copies); raises KeyError naming a missing array."""
        l_built = float(a["l_built"])
        markers = MarkerDebt(dt=float(a["marker_dt"]), steps=int(a["marker_steps"]), speed=float(a["marker_speed"]),
                             disp2=float(a["marker_disp2"]), p_stale=bool(a["marker_p_stale"]),
                             moved=Faces(*(np.array(a[f"marker_moved_{c}"], dtype=np.float64) for c in "uvw")),
                             fresh=bool(a["marker_moved_fresh"]))
        guess = PressureGuess(p_last=np.array(a["grid_p_last"], dtype=np.float64), ktop=int(a["p_last_ktop"]),
                              shift=float(a["p_shift"]))
        return cls(grid_u=a["grid_u"], grid_v=a["grid_v"], grid_w=a["grid_w"], grid_p=a["grid_p"],
                   interface=float(a["interface"]), steps=int(a["steps"]), n_sub=int(a["n_sub"]),
                   l_built=None if math.isnan(l_built) else l_built, kind=np.array(a["kind"], dtype=np.int8),
                   x_ref=a.get("x_ref"), guess=guess, markers=markers)
