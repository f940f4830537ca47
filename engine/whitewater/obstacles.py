"""The bake's colliders and containers as the whitewater sees them.

Spray, foam and bubbles stay out of every solid the liquid stayed out of: the box containers
(:mod:`engine.collision.walls`) and the mesh colliders (signed distance grids and convex polytopes,
:mod:`engine.collision.world`), read from the job the particles were baked from (``<cache>/job``), posed at
each frame as the bake posed them, with the same friction and bounce (their animated values at the
frame). Each frame, after a diffuse particle has moved:

* a particle that crossed a box container's wall is put back on it (:func:`engine.collision.walls.clamp_into_boxes`,
  reached as far as the particle travelled in the frame, so fast spray cannot skip over a wall);
* a particle inside a mesh collider's solid is pushed out along the distance field's gradient, its path
  over the frame swept so that it cannot tunnel through a thin wall (:func:`engine.collision.queries.project`,
  the bake's own contact response: the approaching normal speed reflected with the collider's bounce,
  the sliding speed reduced by its friction).

A particle so moved is *in contact*; the stage lets the lifetime of spray in contact run down (a drop
that lands on a wall wets it and is gone once its lifetime is over), see :mod:`engine.whitewater.model`.

The surface normals of the wave-crest potential use the obstacles too: a liquid particle whose
neighbours are missing on one side because a wall is there (the floor under the liquid, a tank wall)
is not at a free surface (:meth:`Obstacles.solid_at`).
"""

from __future__ import annotations

import math

import numpy as np
from numba import njit, prange

from ..collision.walls import clamp_into_boxes


@njit(parallel=True, cache=True)
def contain_in_boxes(x_start, x, v, boxes, friction, bounce, reach, travel_dt,
                     # outputs
                     contact):
    """Put every particle that crossed a box container's wall back on it (see the module docstring).

    x_start, x, v : (N, 3) float32; x and v are changed in place. boxes : (B, 2, 3) float64, the inner
    corners; friction, bounce : (B,). A wall acts on a particle outside its box by at most the distance
    the particle moved (|x - x_start|) plus ``reach`` plus |v| ``travel_dt`` (m, m, s). contact : (N,)
    bool, set True where the particle was moved (left alone elsewhere).
    """
    for i in prange(x.shape[0]):
        d0 = np.float64(x[i, 0]) - x_start[i, 0]
        d1 = np.float64(x[i, 1]) - x_start[i, 1]
        d2 = np.float64(x[i, 2]) - x_start[i, 2]
        s2 = np.float64(v[i, 0]) ** 2 + np.float64(v[i, 1]) ** 2 + np.float64(v[i, 2]) ** 2
        margin = math.sqrt(d0 * d0 + d1 * d1 + d2 * d2) + reach + math.sqrt(s2) * travel_dt
        p0, p1, p2 = x[i, 0], x[i, 1], x[i, 2]
        clamp_into_boxes(x, v, i, boxes, margin, friction, bounce)
        if x[i, 0] != p0 or x[i, 1] != p1 or x[i, 2] != p2:
            contact[i] = True


@njit(parallel=True, cache=True)
def outside_boxes(p, boxes, reach,
                  # outputs
                  out):
    """out[i] = True where point i lies outside some box container, within ``reach`` (m) of its walls."""
    for i in prange(p.shape[0]):
        hit = False
        for b in range(boxes.shape[0]):
            inside = True
            near = True
            for k in range(3):
                if p[i, k] < boxes[b, 0, k] or p[i, k] > boxes[b, 1, k]:
                    inside = False
                if p[i, k] < boxes[b, 0, k] - reach or p[i, k] > boxes[b, 1, k] + reach:
                    near = False
            if near and not inside:
                hit = True
        out[i] = hit


def _at_frame(track, index: int, default: float) -> float:
    """A per-frame track's value at frame index ``index`` (clamped), or ``default`` without a track."""
    if track is None:
        return float(default)
    values = np.asarray(track, dtype=np.float64).reshape(-1)
    return float(values[min(max(index, 0), len(values) - 1)])


class Obstacles:
    """Box containers and mesh colliders of one baked scene, posed frame by frame.

    Parameters
    ----------
    scene : engine.scene.SceneDescription
    settings : engine.settings.SimulationSettings
        The bake's (particle spacing, collider resolution and the solver's kernel support shape the
        distance grids exactly as in the bake, so the cached grids are found again).
    liquid : ndarray, shape (N, 3)
        The liquid at the first frame (Auto collider modes are resolved from it, as the bake does).
    grid_dir : str, optional
        The cache's folder of distance grids; grids found there are read, missing ones are built in
        memory (nothing is written into the particle cache).
    """

    def __init__(self, scene, settings, liquid: np.ndarray, grid_dir: str | None = None):
        self.frame_start = int(scene.frame_start)
        self.fps = float(scene.fps)
        self.dx = float(settings.particle_spacing)
        self.containers = list(scene.containers)
        self.boxes = np.array([[c.lower, c.upper] for c in self.containers], dtype=np.float64).reshape(-1, 2, 3)
        self.friction = np.array([c.settings.friction for c in self.containers], dtype=np.float64)
        self.bounce = np.array([c.settings.bounce for c in self.containers], dtype=np.float64)
        self.world = None
        if scene.colliders:
            from ..assemble import make_collision

            self.world = make_collision(scene, settings, np.asarray(liquid, dtype=np.float32).reshape(-1, 3),
                                        grid_dir=grid_dir, store_grids=False)
        self.frame = None

    def __bool__(self) -> bool:
        return bool(len(self.boxes) or self.world is not None)

    def set_frame(self, frame: int) -> None:
        """Pose the colliders at ``frame`` and take their friction and bounce at that frame."""
        if frame == self.frame:
            return
        self.frame = frame
        index = frame - self.frame_start
        for b, c in enumerate(self.containers):
            self.friction[b] = _at_frame(c.tracks.get("friction"), index, c.settings.friction)
            self.bounce[b] = _at_frame(c.tracks.get("bounce"), index, c.settings.bounce)
        if self.world is not None:
            self.world.update(index / self.fps)
            for k, e in enumerate(self.world.entries):
                col = e.collider
                if col.tracks:
                    self.world.set_response(k, friction=_at_frame(col.tracks.get("friction"), index,
                                                                  col.settings.friction),
                                            bounce=_at_frame(col.tracks.get("bounce"), index, col.settings.bounce))

    def push_out(self, x_start: np.ndarray, x: np.ndarray, v: np.ndarray, reach: float = 0.0,
                 travel_dt: float = 0.0) -> np.ndarray:
        """Move the particles that ended a move from ``x_start`` to ``x`` inside a solid back out of it,
        in place, at the pose of the last :meth:`set_frame`; returns the contact mask (N,) bool.

        ``reach`` and ``travel_dt`` widen the box walls' reach for particles without a known start
        (new particles, given ``x_start = x``): see :func:`contain_in_boxes`.
        """
        n = len(x)
        contact = np.zeros(n, np.bool_)
        if n == 0:
            return contact
        if len(self.boxes):
            contain_in_boxes(x_start, x, v, self.boxes, self.friction, self.bounce, float(reach), float(travel_dt),
                             contact)
        if self.world is not None:
            from ..collision.queries import project
            from ..collision.world import SWEEP_STEP

            before = x.copy()
            # the bake's own contact response (bounce and friction, velocity relative to the collider);
            # paths longer than a quarter spacing are swept so that nothing tunnels through a shell
            project(x_start, x, v, SWEEP_STEP * self.dx, 0.0, 0.0, True, self.world.args)
            contact |= np.any(x != before, axis=1)
        return contact

    def solid_at(self, points: np.ndarray, reach: float) -> np.ndarray:
        """True where a point lies in a solid: outside a box container (within ``reach`` m of its walls)
        or inside a mesh collider's solid, at the pose of the last :meth:`set_frame`."""
        p = np.ascontiguousarray(points, dtype=np.float32).reshape(-1, 3)
        out = np.zeros(len(p), np.bool_)
        if len(p) == 0:
            return out
        if len(self.boxes):
            outside_boxes(p, self.boxes, float(reach), out)
        if self.world is not None:
            out |= self.world.inside(p)
        return out
