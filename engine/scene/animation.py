"""Animated scene data: settings that change during the shot and meshes that move, per substep.

The host samples every animated value once per frame of the bake, ``frame_start .. frame_end``
(F values; Blender evaluates them through the depsgraph, so keyframes, drivers and constraints all
count), and stores them as *tracks*: arrays of shape (F,) or (F, 3) in the job folder. The engine
interpolates a track at the time of each substep:

* numbers (a rate, a velocity, gravity, friction) linearly between the two frames around it;
* on/off switches (``use_flow``) hold the value of the frame before (Blender's constant
  interpolation, the only one a boolean property has).

Between two sampled frames a keyframed curve is thus followed as the chord through its per-frame
values: exact for linear keys, within a frame's worth of curvature for Bezier keys.

Which settings may be animated (everything else is read once, at the first frame):

================  ==========================================================================
scene             ``gravity`` (3,), ``dynamic_viscosity`` and ``surface_tension`` (the scene's
                  liquid), ``pbf_velocity_smoothing`` and ``pbf_surface_tension`` (PBF)
inflow            ``use_flow`` (on/off), ``normal_speed``, ``velocity`` (3,)
outflow           ``use_flow`` (on/off)
collider          ``friction``, ``bounce`` (mesh colliders and box containers)
rigid body        ``use_dynamic`` (on/off: simulated, or following its animation), ``friction``, ``bounce``
force field       see :mod:`engine.sources.forces`
================  ==========================================================================

Meshes move in one of two ways, as colliders do (:mod:`engine.collision.world`): rigidly, one 4 x 4
matrix per frame taking the first frame's world-space vertices to that frame's, or by deforming,
one set of world-space vertices per frame (same triangles). :class:`MeshMotion` gives the
vertices and their velocities at any time; the velocity is the derivative of the linear
interpolation, constant over each frame interval.

Time ``t`` is seconds after the first frame of the bake; ``t * fps`` is the frame position.
"""

from __future__ import annotations

import math

import numpy as np


#: Names of the tracks each kind of object may carry, with the shape of one frame's value.
ANIMATABLE = {
    "scene": {"gravity": (3,), "dynamic_viscosity": (), "surface_tension": (), "pbf_velocity_smoothing": (),
              "pbf_surface_tension": ()},
    "inflow": {"use_flow": (), "normal_speed": (), "velocity": (3,)},
    "outflow": {"use_flow": ()},
    "collider": {"friction": (), "bounce": ()},
    "rigid_body": {"use_dynamic": (), "friction": (), "bounce": ()},
}

#: The Blender properties behind those tracks, by owner: the ones an artist may keyframe or drive
#: (every other property of ``Scene.surge`` and ``Object.surge`` is read once, at the first frame).
#: ``Scene.gravity`` is Blender's own; force fields' settings are Blender's ``Object.field``.
ANIMATABLE_PROPERTIES = {
    "Scene": ("gravity",),
    "Scene.surge": ("dynamic_viscosity", "surface_tension", "pbf_velocity_smoothing", "pbf_surface_tension"),
    "Object.surge": ("use_flow", "normal_speed", "velocity", "friction", "bounce", "use_dynamic"),
}

#: Tracks that are on/off switches: held, not interpolated.
SWITCHES = frozenset({"use_flow", "use_dynamic"})

#: Largest distance, in particle spacings, an outflow's surface may move in one substep, so that a
#: moving outflow removes every particle it passes over (its own extent along the motion is at
#: least a spacing, so no particle lies between two of its substep poses).
MAX_OUTFLOW_TRAVEL = 0.4


def frame_interval(t: float, fps: float, n_frames: int) -> tuple[int, float]:
    """The frame interval [f, f + 1] holding time t and the fraction s of it passed (clamped to the range)."""
    if n_frames < 2:
        return 0, 0.0
    u = max(t, 0.0) * fps
    f = int(math.floor(u))
    if f >= n_frames - 1:
        return n_frames - 2, 1.0
    return f, min(max(u - f, 0.0), 1.0)


def sample(track: np.ndarray, t: float, fps: float, switch: bool = False):
    """Value of a per-frame ``track`` (F, ...) at time t: linear between frames, or held for a switch."""
    track = np.asarray(track)
    n = track.shape[0]
    if n == 1:
        return track[0]
    if switch:
        u = max(t, 0.0) * fps
        return track[min(int(math.floor(u + 1e-9)), n - 1)]
    f, s = frame_interval(t, fps, n)
    return (1.0 - s) * track[f] + s * track[f + 1]


def _ranges(kind: str) -> dict:
    """name -> (label, min, max) of the settings a track of ``kind`` may animate (from engine.settings)."""
    from .. import settings as settings_mod  # the settings import nothing from here

    params = {"scene": settings_mod.parameters, "collider": settings_mod.collider_parameters,
              "inflow": settings_mod.inflow_parameters, "outflow": lambda: []}[kind]()
    return {p.name: (p.label, p.min, p.max) for p in params if p.name in ANIMATABLE[kind]}


def check_tracks(tracks: dict, kind: str, n_frames: int, owner: str, frame_start: int = 0) -> list[str]:
    """Problems with the tracks of one object: unknown names, wrong shapes, values that are not finite or
    outside the setting's range; each value problem names the first frame it happens at (track row k is
    frame ``frame_start + k``)."""
    problems = []
    allowed = ANIMATABLE[kind]
    ranges = _ranges(kind) if tracks else {}
    for name, values in tracks.items():
        if name not in allowed:
            problems.append(f"{owner}: setting '{name}' cannot be animated; animatable: {', '.join(allowed)}")
            continue
        values = np.asarray(values)
        label, low, high = ranges.get(name, (name.replace("_", " ").title(), None, None))
        if values.shape != (n_frames,) + allowed[name]:
            problems.append(f"{owner}: the animation of '{name}' has shape {values.shape}; the frame range needs "
                            f"{(n_frames,) + allowed[name]}")
            continue
        rows = values.reshape(n_frames, -1)
        bad = ~np.all(np.isfinite(rows), axis=1)
        if bad.any():
            k = int(np.argmax(bad))
            problems.append(f"{owner}: the animation of '{label}' ({name}) is not a number at frame "
                            f"{frame_start + k} ({_shown(values[k])}); check its keyframes or driver")
            continue
        out = np.zeros(n_frames, dtype=bool)
        if low is not None:
            out |= np.any(rows < low, axis=1)
        if high is not None:
            out |= np.any(rows > high, axis=1)
        if out.any():
            k = int(np.argmax(out))
            allowed_range = (f"{low:g} to {high:g}" if low is not None and high is not None else
                             f"at least {low:g}" if low is not None else f"at most {high:g}")
            problems.append(f"{owner}: the animation of '{label}' ({name}) is {_shown(values[k])} at frame "
                            f"{frame_start + k}, outside its range ({allowed_range}); check its keyframes or "
                            f"driver")
    return problems


def _shown(value) -> str:
    return ", ".join(f"{v:g}" for v in np.ravel(value))


def clean_tracks(tracks: dict | None) -> dict:
    """Tracks as float64 arrays (switches as 0/1), in name order."""
    return {str(k): np.ascontiguousarray(np.asarray(v, dtype=np.float64)) for k, v in sorted((tracks or {}).items())}


class MeshMotion:
    """World-space vertices and vertex velocities of a moving mesh at any time.

    Parameters
    ----------
    vertices : ndarray, shape (V, 3), float64, metres
        The mesh at the first frame (the rest pose).
    transforms : ndarray, shape (F, 4, 4), or None
        Rigid motion: per frame, the matrix taking rest-pose points to world space (metres).
    frame_vertices : ndarray, shape (F, V, 3), or None
        Deformation: per frame, the world-space vertices.
    fps : float
    """

    def __init__(self, vertices: np.ndarray, transforms, frame_vertices, fps: float):
        self.rest = np.asarray(vertices, dtype=np.float64)
        self.transforms = transforms
        self.frame_vertices = frame_vertices
        self.fps = float(fps)
        if frame_vertices is not None:
            self.n_frames = frame_vertices.shape[0]
            steps = np.linalg.norm(np.diff(frame_vertices, axis=0), axis=2)
        else:
            self.n_frames = transforms.shape[0]
            world = np.einsum("fij,vj->fvi", transforms[:, :3, :3], self.rest) + transforms[:, None, :3, 3]
            steps = np.linalg.norm(np.diff(world, axis=0), axis=2)
        #: fastest vertex speed in each frame interval, m/s, shape (F - 1,)
        self.speeds = (steps.max(axis=1) if steps.size else np.zeros(max(self.n_frames - 1, 0))) * self.fps

    @property
    def is_rigid(self) -> bool:
        return self.frame_vertices is None

    def matrix(self, t: float) -> tuple[np.ndarray, np.ndarray]:
        """Rigid motion at t: the rest-to-world matrix (4, 4) and its time derivative (4, 4), 1/s."""
        f, s = frame_interval(t, self.fps, self.n_frames)
        a = self.transforms[f]
        b = self.transforms[min(f + 1, self.n_frames - 1)]
        return (1.0 - s) * a + s * b, (b - a) * self.fps

    def pose(self, t: float) -> tuple[np.ndarray, np.ndarray]:
        """World vertices (V, 3) and their velocities (V, 3), m/s, at time t."""
        if self.is_rigid:
            m, dm = self.matrix(t)
            return self.rest @ m[:3, :3].T + m[:3, 3], self.rest @ dm[:3, :3].T + dm[:3, 3]
        f, s = frame_interval(t, self.fps, self.n_frames)
        a = self.frame_vertices[f]
        b = self.frame_vertices[min(f + 1, self.n_frames - 1)]
        return (1.0 - s) * a + s * b, (b - a) * self.fps

    def speed_at(self, t: float) -> float:
        """Fastest vertex speed over the frame interval holding t and the next one, m/s (a substep
        starting at t may cross into the next interval)."""
        if len(self.speeds) == 0:
            return 0.0
        f, _ = frame_interval(t, self.fps, self.n_frames)
        return float(self.speeds[f:f + 2].max())


def make_motion(mesh, transforms, frame_vertices, fps: float) -> MeshMotion | None:
    """A :class:`MeshMotion` for an object that moves, None for a static one."""
    if transforms is None and frame_vertices is None:
        return None
    return MeshMotion(mesh.vertices, transforms, frame_vertices, fps)


class SceneAnimation:
    """Applies the scene's and the colliders' animated settings to a solver before each substep.

    Parameters
    ----------
    scene : SceneDescription
    solver : a solver of :mod:`engine.solvers`, with the collision world it was made with
    """

    def __init__(self, scene, solver):
        self.fps = float(scene.fps)
        self.tracks = dict(scene.tracks)
        self.boxes = [(k, c.tracks) for k, c in enumerate(scene.containers) if c.tracks]
        self.colliders = [(k, c.tracks) for k, c in enumerate(scene.colliders) if c.tracks]
        # a rigid body is the collider after the scene's colliders (engine.assemble.make_collision)
        first = len(scene.colliders)
        self.colliders += [(first + k, {n: v for n, v in b.tracks.items() if n in ("friction", "bounce")})
                           for k, b in enumerate(scene.bodies) if "friction" in b.tracks or "bounce" in b.tracks]

    @property
    def is_active(self) -> bool:
        return bool(self.tracks or self.boxes or self.colliders)

    def _value(self, tracks: dict, name: str, t: float):
        return sample(tracks[name], t, self.fps, name in SWITCHES)

    def apply(self, solver, t: float) -> None:
        """Set the solver's animated parameters to their values at time t (seconds after the first frame):
        every animated scene setting goes to :meth:`engine.solvers.Solver.set_animated` (each solver takes
        those it reads), the box containers' friction and bounce to ``set_box_response``."""
        if not self.is_active:
            return
        values = {}
        for name in self.tracks:
            value = self._value(self.tracks, name, t)
            values[name] = (np.asarray(value, dtype=np.float64) if name == "gravity"
                            else max(float(value), 0.0))  # a viscosity or tension is never negative
        if values:
            solver.set_animated(values)
        for k, tracks in self.boxes:
            solver.set_box_response(k, friction=self._value(tracks, "friction", t) if "friction" in tracks else None,
                                    bounce=self._value(tracks, "bounce", t) if "bounce" in tracks else None)
        if self.colliders and solver.collision is not None:
            for k, tracks in self.colliders:
                friction = self._value(tracks, "friction", t) if "friction" in tracks else None
                bounce = self._value(tracks, "bounce", t) if "bounce" in tracks else None
                solver.collision.set_response(k, friction=friction, bounce=bounce)
