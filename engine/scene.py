"""Scene description: what the host exports and the engine simulates.

Everything is in world space, SI units (metres, seconds), Z up. The host (the Blender bridge)
applies object transforms and the scene unit scale before building these objects; the engine
never sees host data.

A scene is saved into a *job folder* so that a bake can run without Blender
(``python -m engine.cli bake <job folder>``)::

    <job>/settings.json     SimulationSettings as a dict
    <job>/scene.json        names, scalars, and for each object the keys of its arrays
    <job>/scene.npz         the arrays (numpy .npz, no pickles)
"""

from __future__ import annotations

import hashlib
import json
import os
import zipfile
from dataclasses import dataclass, field

import numpy as np

from . import animation, atomic, jobcheck
from .errors import InvalidSceneError
from . import settings as settings_mod
from .particles import check_channel_name

#: The job format this engine writes and reads (4: moving inflows and outflows, animated settings,
#: force fields and the initial velocity gradient of fluids). A job folder is written for each bake,
#: so no other version is read.
JOB_FORMAT_VERSION = 4


@dataclass(frozen=True)
class TriangleMesh:
    """A triangle mesh in world space.

    Attributes
    ----------
    vertices : ndarray, shape (V, 3), float64, metres
    triangles : ndarray, shape (T, 3), int32, indices into ``vertices``
    """

    vertices: np.ndarray
    triangles: np.ndarray

    def __post_init__(self):
        object.__setattr__(self, "vertices", np.ascontiguousarray(self.vertices, dtype=np.float64).reshape(-1, 3))
        object.__setattr__(self, "triangles", np.ascontiguousarray(self.triangles, dtype=np.int32).reshape(-1, 3))


@dataclass(frozen=True)
class FluidObject:
    """A mesh whose closed volume is filled with liquid at the start of the bake.

    Attributes
    ----------
    name : str
        Object name, used in messages.
    mesh : TriangleMesh
        World-space surface of the volume.
    velocity : ndarray, shape (3,), float64, m/s
        Initial velocity of the liquid (at the world origin, see ``velocity_gradient``).
    settings : FluidSettings
        Per-object settings (the spacing factor of its particles).
    channels : dict of str -> float
        Values of named extra particle channels for the liquid of this object (other particles
        get 0); they reach the cache as attributes (see :mod:`engine.particles`).
    velocity_gradient : ndarray, shape (3, 3), float64, 1/s
        The initial velocity at a point x (world, metres) is ``velocity + velocity_gradient @ x``:
        zero for a uniform initial velocity; the object's own rotation at the first frame when the
        host passes on its motion ("use object motion").
    """

    name: str
    mesh: TriangleMesh
    velocity: np.ndarray = field(default_factory=lambda: np.zeros(3))
    settings: settings_mod.FluidSettings = field(default_factory=settings_mod.FluidSettings)
    channels: dict = field(default_factory=dict)
    velocity_gradient: np.ndarray = field(default_factory=lambda: np.zeros((3, 3)))

    def __post_init__(self):
        object.__setattr__(self, "velocity", np.asarray(self.velocity, dtype=np.float64).reshape(3))
        object.__setattr__(self, "velocity_gradient",
                           np.asarray(self.velocity_gradient, dtype=np.float64).reshape(3, 3))
        object.__setattr__(self, "channels", {str(k): float(v) for k, v in dict(self.channels).items()})

    def velocity_at(self, x: np.ndarray) -> np.ndarray:
        """Initial velocity (N, 3), m/s, of liquid at the points x (N, 3), metres."""
        x = np.asarray(x, dtype=np.float64).reshape(-1, 3)
        return self.velocity[None, :] + x @ self.velocity_gradient.T


class _Moving:
    """Motion over the frame range of a mesh object with ``transforms``, ``frame_vertices`` and
    ``tracks`` fields (collider, inflow, outflow; see :mod:`engine.animation`)."""

    def __post_init__(self):
        _init_motion(self)

    @property
    def motion(self) -> str:
        """'STATIC', 'RIGID' or 'DEFORMING'."""
        return _motion(self)


@dataclass(frozen=True)
class InflowObject(_Moving):
    """A mesh that emits liquid during the bake (see :mod:`engine.emit`).

    Attributes
    ----------
    name : str
    mesh : TriangleMesh
        World-space surface, metres. SURFACE mode emits from its faces along their outward normals
        (the winding of the triangles); VOLUME mode needs a closed mesh.
    settings : InflowSettings
        Mode, speed, velocity, frame window and spacing factor (the first frame's values).
    channels : dict of str -> float
        Values of named extra particle channels for the emitted liquid.
    transforms, frame_vertices : ndarray or None
        Rigid motion or deformation over the frame range, as for :class:`MeshCollider`
        (see :mod:`engine.animation`); None for an inflow that stays where it is.
    tracks : dict of str -> ndarray
        Per-frame values of animated settings (``use_flow``, ``normal_speed``, ``velocity``; see
        :data:`engine.animation.ANIMATABLE`), shape (F,) or (F, 3).
    """

    name: str
    mesh: TriangleMesh
    settings: settings_mod.InflowSettings = field(default_factory=settings_mod.InflowSettings)
    channels: dict = field(default_factory=dict)
    transforms: np.ndarray | None = None
    frame_vertices: np.ndarray | None = None
    tracks: dict = field(default_factory=dict)

    def __post_init__(self):
        object.__setattr__(self, "channels", {str(k): float(v) for k, v in dict(self.channels).items()})
        super().__post_init__()

    @property
    def velocity(self) -> np.ndarray:
        """World-space velocity of the settings, (3,) float64, m/s."""
        st = self.settings
        return np.array(st.velocity, dtype=np.float64)


@dataclass(frozen=True)
class OutflowObject(_Moving):
    """A closed mesh that removes every particle inside it (generalised winding number above 1/2).

    Attributes
    ----------
    name : str
    mesh : TriangleMesh
        World-space surface at the first frame, metres.
    transforms, frame_vertices : ndarray or None
        Rigid motion or deformation over the frame range, as for :class:`MeshCollider`.
    tracks : dict of str -> ndarray
        Per-frame values of animated settings (``use_flow``: 1 removes, 0 does not), shape (F,).
    """

    name: str
    mesh: TriangleMesh
    transforms: np.ndarray | None = None
    frame_vertices: np.ndarray | None = None
    tracks: dict = field(default_factory=dict)


def _init_motion(obj) -> None:
    """Normalise the motion arrays and tracks of a moving object."""
    if obj.transforms is not None:
        object.__setattr__(obj, "transforms", np.ascontiguousarray(obj.transforms, dtype=np.float64).reshape(-1, 4, 4))
    if obj.frame_vertices is not None:
        object.__setattr__(obj, "frame_vertices", np.ascontiguousarray(
            obj.frame_vertices, dtype=np.float64).reshape(-1, obj.mesh.vertices.shape[0], 3))
    object.__setattr__(obj, "tracks", animation.clean_tracks(obj.tracks))


def _motion(obj) -> str:
    if obj.frame_vertices is not None:
        return "DEFORMING"
    return "RIGID" if obj.transforms is not None else "STATIC"


@dataclass(frozen=True)
class BoxContainer:
    """An axis-aligned box that keeps the liquid inside (the exact fast path for box containers).

    Attributes
    ----------
    name : str
    lower, upper : ndarray, shape (3,), float64, metres
        Inner corners of the box.
    settings : ColliderSettings
        Friction and bounce of its walls (its mode is CONTAINER; its offset is not used).
    tracks : dict of str -> ndarray
        Per-frame ``friction`` and ``bounce`` when animated, shape (F,).
    """

    name: str
    lower: np.ndarray
    upper: np.ndarray
    settings: settings_mod.ColliderSettings = field(
        default_factory=lambda: settings_mod.ColliderSettings(collider_mode="CONTAINER"))
    tracks: dict = field(default_factory=dict)

    def __post_init__(self):
        object.__setattr__(self, "lower", np.asarray(self.lower, dtype=np.float64).reshape(3))
        object.__setattr__(self, "upper", np.asarray(self.upper, dtype=np.float64).reshape(3))
        object.__setattr__(self, "tracks", animation.clean_tracks(self.tracks))


@dataclass(frozen=True)
class MeshCollider(_Moving):
    """A collider of any shape, turned into a signed distance grid (see :mod:`engine.collision`).

    The grid is built once from ``mesh``, the rest pose: the world-space surface at the first frame.
    Motion over the frame range is given in one of two ways (or neither, for a static collider):

    Attributes
    ----------
    name : str
    mesh : TriangleMesh
        World-space surface at ``frame_start``, metres. May be open, non-manifold,
        self-intersecting or hold duplicated faces.
    settings : ColliderSettings
        Mode, friction, bounce and surface offset.
    transforms : ndarray, shape (F, 4, 4), float64, or None
        Rigid motion: per frame ``frame_start .. frame_end`` (F frames), the matrix taking rest-pose
        points to world space at that frame (rotation and translation, metres). Identity at the first frame.
    frame_vertices : ndarray, shape (F, V, 3), float64, or None
        Deforming surface: world-space vertices per frame (same triangles as ``mesh``), metres.
        A grid is built per frame and the liquid takes the surface velocity from them.
    tracks : dict of str -> ndarray
        Per-frame ``friction`` and ``bounce`` when animated, shape (F,).
    """

    name: str
    mesh: TriangleMesh
    settings: settings_mod.ColliderSettings = field(default_factory=settings_mod.ColliderSettings)
    transforms: np.ndarray | None = None
    frame_vertices: np.ndarray | None = None
    tracks: dict = field(default_factory=dict)


#: Force field types (Blender's names) :mod:`engine.forces` simulates.
FIELD_TYPES = ("FORCE", "WIND", "VORTEX", "TURBULENCE", "DRAG")

#: Field shapes it simulates (Blender's Surface and Every Point shapes are not available).
FIELD_SHAPES = ("POINT", "LINE", "PLANE")

#: Numeric field settings (Blender's names), each stored per frame; lengths in Blender units.
FIELD_VALUES = ("strength", "flow", "noise", "falloff_power", "distance_min", "distance_max", "radial_min",
                "radial_max", "radial_falloff", "size", "linear_drag", "quadratic_drag")

#: Switches and choices of a field (Blender's names), read at the first frame.
FIELD_FLAGS = {"falloff_type": ("SPHERE", "TUBE", "CONE"), "z_direction": ("BOTH", "POSITIVE", "NEGATIVE"),
               "use_min_distance": bool, "use_max_distance": bool, "use_radial_min": bool, "use_radial_max": bool,
               "use_global_coords": bool, "use_gravity_falloff": bool, "seed": int}


@dataclass(frozen=True)
class ForceField:
    """A Blender force field acting on the liquid (see :mod:`engine.forces`).

    Attributes
    ----------
    name : str
    kind : str
        One of :data:`FIELD_TYPES`.
    shape : str
        One of :data:`FIELD_SHAPES`.
    matrices : ndarray, shape (F, 4, 4) or (1, 4, 4), float64
        The field object's world matrix per frame (one for a static field); translation in metres.
    values : dict of str -> ndarray, shape (F,) or (1,)
        Every name of :data:`FIELD_VALUES`, per frame, in Blender's units (lengths in Blender units).
    flags : dict
        Every name of :data:`FIELD_FLAGS`.
    unit : float
        Metres per Blender unit: the field is evaluated in Blender units, as Blender's particles feel it.
    """

    name: str
    kind: str
    shape: str = "POINT"
    matrices: np.ndarray = field(default_factory=lambda: np.eye(4)[None])
    values: dict = field(default_factory=dict)
    flags: dict = field(default_factory=dict)
    unit: float = 1.0

    def __post_init__(self):
        object.__setattr__(self, "matrices", np.ascontiguousarray(self.matrices, dtype=np.float64).reshape(-1, 4, 4))
        defaults = {"strength": 1.0, "flow": 0.0, "noise": 0.0, "falloff_power": 0.0, "distance_min": 0.0,
                    "distance_max": 0.0, "radial_min": 0.0, "radial_max": 0.0, "radial_falloff": 0.0, "size": 0.0,
                    "linear_drag": 1.0, "quadratic_drag": 1.0}
        values = {k: np.atleast_1d(np.asarray(self.values.get(k, defaults[k]), dtype=np.float64))
                  for k in FIELD_VALUES}
        object.__setattr__(self, "values", values)
        flag_defaults = {"falloff_type": "SPHERE", "z_direction": "BOTH", "seed": 0}
        flags = {k: self.flags.get(k, flag_defaults.get(k, False)) for k in FIELD_FLAGS}
        flags = {k: (str(v) if isinstance(FIELD_FLAGS[k], tuple) else FIELD_FLAGS[k](v)) for k, v in flags.items()}
        object.__setattr__(self, "flags", flags)

    def problems(self, n_frames: int) -> list[str]:
        owner = f"Force field '{self.name}'"
        out = []
        if self.kind not in FIELD_TYPES:
            out.append(f"{owner} is of type {self.kind!r}; Surge simulates {', '.join(FIELD_TYPES)}")
        if self.shape not in FIELD_SHAPES:
            out.append(f"{owner} has the shape {self.shape!r}; Surge simulates {', '.join(FIELD_SHAPES)} shapes")
        for k, items in FIELD_FLAGS.items():
            if isinstance(items, tuple) and self.flags[k] not in items:
                out.append(f"{owner}: '{k}' is {self.flags[k]!r}; choose one of {', '.join(items)}")
        if self.matrices.shape[0] not in (1, n_frames) or not np.all(np.isfinite(self.matrices)):
            out.append(f"{owner} has {self.matrices.shape[0]} matrices (non-finite or not one per frame)")
        for k, v in self.values.items():
            if v.shape[0] not in (1, n_frames) or not np.all(np.isfinite(v)):
                out.append(f"{owner}: '{k}' has {v.shape[0]} values (non-finite or not one per frame)")
        if not (self.unit > 0.0 and np.isfinite(self.unit)):
            out.append(f"{owner}: unit scale {self.unit!r} is not positive")
        return out


@dataclass(frozen=True)
class SceneDescription:
    """Everything the engine simulates apart from the settings.

    Attributes
    ----------
    fluids : tuple of FluidObject
    containers : tuple of BoxContainer
    colliders : tuple of MeshCollider
    inflows : tuple of InflowObject
    outflows : tuple of OutflowObject
    gravity : ndarray, shape (3,), float64, m/s^2
    frame_start, frame_end : int
        Inclusive frame range; the state at ``frame_start`` is the initial state.
    fps : float
        Frames per second (Blender's ``fps / fps_base``).
    tracks : dict of str -> ndarray
        Per-frame values of the animated scene settings (``gravity`` (F, 3), ``viscosity``,
        ``pbf_xsph_viscosity``, ``pbf_surface_tension`` (F,); see :mod:`engine.animation`). A
        setting without a track keeps its value (``gravity`` above, the others in the settings).
    force_fields : tuple of ForceField
    """

    fluids: tuple = ()
    containers: tuple = ()
    colliders: tuple = ()
    gravity: np.ndarray = field(default_factory=lambda: np.array([0.0, 0.0, -9.81]))
    frame_start: int = 1
    frame_end: int = 72
    fps: float = 24.0
    inflows: tuple = ()
    outflows: tuple = ()
    tracks: dict = field(default_factory=dict)
    force_fields: tuple = ()

    @property
    def n_frames(self) -> int:
        return self.frame_end - self.frame_start + 1

    def __post_init__(self):
        object.__setattr__(self, "tracks", animation.clean_tracks(self.tracks))
        object.__setattr__(self, "force_fields", tuple(self.force_fields))
        object.__setattr__(self, "fluids", tuple(self.fluids))
        object.__setattr__(self, "inflows", tuple(self.inflows))
        object.__setattr__(self, "outflows", tuple(self.outflows))
        object.__setattr__(self, "containers", tuple(self.containers))
        object.__setattr__(self, "colliders", tuple(self.colliders))
        object.__setattr__(self, "gravity", np.asarray(self.gravity, dtype=np.float64).reshape(3))

    def validate(self) -> None:
        """Raise :class:`InvalidSceneError` listing every structural problem."""
        problems = []
        if not self.fluids and not self.inflows:
            problems.append("The scene has no object with the role Fluid or Inflow")
        for f in self.fluids:
            problems += settings_mod.validate_object(f.settings, f"Fluid '{f.name}'")
            problems += _channel_problems(f.channels, f"Fluid '{f.name}'")
            if len(f.mesh.triangles) == 0:
                problems.append(f"Fluid '{f.name}' has no faces, so it has no volume to fill")
            elif not np.all(np.isfinite(f.mesh.vertices)):
                problems.append(f"Fluid '{f.name}' has non-finite vertex coordinates")
        n_frames = self.frame_end - self.frame_start + 1
        for f in self.inflows:
            owner = f"Inflow '{f.name}'"
            problems += settings_mod.validate_object(f.settings, owner)
            problems += _channel_problems(f.channels, owner)
            mesh_problems = _mesh_problems(f.mesh, owner)
            problems += mesh_problems
            problems += _motion_problems(f, owner, n_frames) + animation.check_tracks(f.tracks, "inflow", n_frames, owner)
            if not problems and f.settings.inflow_mode == "SURFACE" and f.motion == "STATIC":
                speeds = f.tracks.get("normal_speed", np.array([f.settings.normal_speed]))
                velocities = f.tracks.get("velocity", f.velocity[None, :])
                if max(surface_flux(f.mesh, u, s) for u, s in
                       zip(np.broadcast_to(velocities, (max(len(speeds), len(velocities)), 3)),
                           np.broadcast_to(speeds, (max(len(speeds), len(velocities)),)))) <= 0.0:
                    problems.append(f"{owner} emits nothing: no face moves liquid outward (raise its Normal "
                                    f"Speed, or turn its Velocity toward the way its faces point)")
        for f in self.outflows:
            owner = f"Outflow '{f.name}'"
            problems += _mesh_problems(f.mesh, owner)
            problems += _motion_problems(f, owner, n_frames) + animation.check_tracks(f.tracks, "outflow", n_frames,
                                                                                     owner)
        problems += animation.check_tracks(self.tracks, "scene", n_frames, "Scene")
        for c in self.containers:
            problems += animation.check_tracks(c.tracks, "collider", n_frames, f"Container '{c.name}'")
        for ff in self.force_fields:
            problems += ff.problems(n_frames)
        for c in self.containers:
            if np.any(c.upper <= c.lower):
                problems.append(f"Container '{c.name}' has no inside (its size is zero along an axis)")
        for c in self.colliders:
            owner = f"Collider '{c.name}'"
            problems += settings_mod.validate_collider(c.settings, owner)
            problems += animation.check_tracks(c.tracks, "collider", n_frames, owner)
            if len(c.mesh.triangles) == 0:
                problems.append(f"{owner} has no faces")
            elif not np.all(np.isfinite(c.mesh.vertices)):
                problems.append(f"{owner} has non-finite vertex coordinates")
            elif c.mesh.triangles.min() < 0 or c.mesh.triangles.max() >= len(c.mesh.vertices):
                problems.append(f"{owner} has faces that refer to missing vertices")
            problems += _motion_problems(c, owner, n_frames)
        for c in self.containers:
            problems += settings_mod.validate_collider(c.settings, f"Container '{c.name}'")
        if self.frame_end <= self.frame_start:
            problems.append(f"The frame range {self.frame_start}-{self.frame_end} is empty; the end must be "
                            f"after the start")
        if not (self.fps > 0 and np.isfinite(self.fps)):
            problems.append(f"Frame rate {self.fps} is not positive")
        if not np.all(np.isfinite(self.gravity)):
            problems.append("Gravity is not finite")
        if problems:
            raise InvalidSceneError(problems)


def _motion_problems(obj, owner: str, n_frames: int) -> list[str]:
    """Problems with the per-frame motion arrays of a collider, inflow or outflow."""
    problems = []
    for label, arr in (("transforms", obj.transforms), ("frame_vertices", obj.frame_vertices)):
        if arr is None:
            continue
        if arr.shape[0] != n_frames:
            problems.append(f"{owner} has {label} for {arr.shape[0]} frames; the frame range has {n_frames}")
        elif not np.all(np.isfinite(arr)):
            problems.append(f"{owner} has non-finite {label}")
    return problems


def face_areas_normals(mesh: TriangleMesh) -> tuple[np.ndarray, np.ndarray]:
    """Area (T,), m^2, and unit outward normal (T, 3) of each triangle (zero normal for a degenerate one)."""
    v = mesh.vertices
    t = mesh.triangles
    cross = np.cross(v[t[:, 1]] - v[t[:, 0]], v[t[:, 2]] - v[t[:, 0]])
    norm = np.linalg.norm(cross, axis=1)
    normals = np.divide(cross, norm[:, None], out=np.zeros_like(cross), where=norm[:, None] > 0.0)
    return 0.5 * norm, normals


def surface_flux(mesh: TriangleMesh, velocity: np.ndarray, normal_speed: float) -> float:
    """Volume of liquid a SURFACE inflow emits per second, m^3/s: the sum over faces of
    A max((velocity + normal_speed n) . n, 0) = A max(velocity . n + normal_speed, 0)."""
    if len(mesh.triangles) == 0:
        return 0.0
    area, n = face_areas_normals(mesh)
    return float(np.sum(area * np.maximum(n @ np.asarray(velocity, dtype=np.float64) + normal_speed, 0.0)))


def _mesh_problems(mesh: TriangleMesh, owner: str) -> list[str]:
    if len(mesh.triangles) == 0:
        return [f"{owner} has no faces"]
    if not np.all(np.isfinite(mesh.vertices)):
        return [f"{owner} has non-finite vertex coordinates"]
    if mesh.triangles.min() < 0 or mesh.triangles.max() >= len(mesh.vertices):
        return [f"{owner} has faces that refer to missing vertices"]
    return []


def _channel_problems(channels: dict, owner: str) -> list[str]:
    problems = []
    for name, value in channels.items():
        why = check_channel_name(name)
        if why:
            problems.append(f"{owner}: particle channel {why}")
        elif not np.isfinite(value):
            problems.append(f"{owner}: particle channel '{name}' has a non-finite value {value!r}")
    return problems


def channel_names(scene: SceneDescription) -> list[str]:
    """Every named extra particle channel the scene's objects set, sorted."""
    names = set()
    for obj in scene.fluids + scene.inflows:
        names.update(obj.channels)
    return sorted(names)


def _put_motion(entry: dict, arrays: dict, prefix: str, obj) -> dict:
    """Store the motion arrays and tracks of ``obj`` (those it has) under keys starting with ``prefix``."""
    for label in ("transforms", "frame_vertices"):
        arr = getattr(obj, label, None)
        if arr is not None:
            entry[label] = f"{prefix}_{label}"
            arrays[entry[label]] = arr
    if obj.tracks:
        entry["tracks"] = {}
        for name, values in obj.tracks.items():
            entry["tracks"][name] = f"{prefix}_track_{name}"
            arrays[entry["tracks"][name]] = values
    return entry


def _get_motion(entry: dict, arrays: dict, with_motion: bool = True) -> dict:
    """Keyword arguments (motion arrays, tracks) of an object stored by :func:`_put_motion`."""
    out = {"tracks": {name: arrays[key] for name, key in entry.get("tracks", {}).items()}}
    if with_motion:
        out.update({label: arrays[entry[label]] if label in entry else None
                    for label in ("transforms", "frame_vertices")})
    return out


def _arrays_and_json(scene: SceneDescription):
    arrays = {"gravity": scene.gravity}
    fluids = []
    for i, f in enumerate(scene.fluids):
        arrays[f"fluid{i}_vertices"] = f.mesh.vertices
        arrays[f"fluid{i}_triangles"] = f.mesh.triangles
        arrays[f"fluid{i}_velocity"] = f.velocity
        entry = {"name": f.name, "vertices": f"fluid{i}_vertices", "triangles": f"fluid{i}_triangles",
                 "velocity": f"fluid{i}_velocity", "settings": settings_mod.to_dict(f.settings),
                 "channels": dict(f.channels)}
        if np.any(f.velocity_gradient != 0.0):
            entry["velocity_gradient"] = f"fluid{i}_velocity_gradient"
            arrays[entry["velocity_gradient"]] = f.velocity_gradient
        fluids.append(entry)
    inflows = []
    for i, f in enumerate(scene.inflows):
        arrays[f"inflow{i}_vertices"] = f.mesh.vertices
        arrays[f"inflow{i}_triangles"] = f.mesh.triangles
        inflows.append(_put_motion({"name": f.name, "vertices": f"inflow{i}_vertices",
                                    "triangles": f"inflow{i}_triangles", "settings": settings_mod.to_dict(f.settings),
                                    "channels": dict(f.channels)}, arrays, f"inflow{i}", f))
    outflows = []
    for i, f in enumerate(scene.outflows):
        arrays[f"outflow{i}_vertices"] = f.mesh.vertices
        arrays[f"outflow{i}_triangles"] = f.mesh.triangles
        outflows.append(_put_motion({"name": f.name, "vertices": f"outflow{i}_vertices",
                                     "triangles": f"outflow{i}_triangles"}, arrays, f"outflow{i}", f))
    containers = []
    for i, c in enumerate(scene.containers):
        arrays[f"container{i}_lower"] = c.lower
        arrays[f"container{i}_upper"] = c.upper
        containers.append(_put_motion({"name": c.name, "type": "BOX", "lower": f"container{i}_lower",
                                       "upper": f"container{i}_upper", "settings": settings_mod.to_dict(c.settings)},
                                      arrays, f"container{i}", c))
    colliders = []
    for i, c in enumerate(scene.colliders):
        entry = {"name": c.name, "vertices": f"collider{i}_vertices", "triangles": f"collider{i}_triangles",
                 "settings": settings_mod.to_dict(c.settings)}
        arrays[entry["vertices"]] = c.mesh.vertices
        arrays[entry["triangles"]] = c.mesh.triangles
        colliders.append(_put_motion(entry, arrays, f"collider{i}", c))
    fields = []
    for i, ff in enumerate(scene.force_fields):
        entry = {"name": ff.name, "kind": ff.kind, "shape": ff.shape, "flags": dict(ff.flags), "unit": float(ff.unit),
                 "matrices": f"field{i}_matrices", "values": {}}
        arrays[entry["matrices"]] = ff.matrices
        for name, values in ff.values.items():
            entry["values"][name] = f"field{i}_value_{name}"
            arrays[entry["values"][name]] = values
        fields.append(entry)
    doc = {"format": "surge-job", "format_version": JOB_FORMAT_VERSION, "frame_start": int(scene.frame_start),
           "frame_end": int(scene.frame_end), "fps": float(scene.fps), "gravity": "gravity",
           "fluids": fluids, "containers": containers, "colliders": colliders, "inflows": inflows,
           "outflows": outflows, "force_fields": fields}
    _put_motion(doc, arrays, "scene", scene)
    return doc, arrays


def scene_hash(scene: SceneDescription) -> str:
    """SHA-256 over the scene's JSON and the bytes of every array."""
    doc, arrays = _arrays_and_json(scene)
    h = hashlib.sha256(json.dumps(doc, sort_keys=True).encode("utf-8"))
    for k in sorted(arrays):
        a = np.ascontiguousarray(arrays[k])
        h.update(k.encode("utf-8"))
        h.update(str(a.dtype).encode("ascii"))
        h.update(a.tobytes())
    return h.hexdigest()


def save_job(job_dir: str, scene: SceneDescription, settings: settings_mod.SimulationSettings) -> None:
    """Write settings and scene into ``job_dir`` (created if missing)."""
    os.makedirs(job_dir, exist_ok=True)
    doc, arrays = _arrays_and_json(scene)
    atomic.write_npz(os.path.join(job_dir, "scene.npz"), arrays)
    atomic.write_json(os.path.join(job_dir, "scene.json"), doc, sort_keys=False)
    atomic.write_json(os.path.join(job_dir, "settings.json"), settings_mod.to_dict(settings))


def load_job(job_dir: str) -> tuple[SceneDescription, settings_mod.SimulationSettings]:
    """Read a job folder written by :func:`save_job`.

    Raises
    ------
    InvalidSceneError
        If a file is missing or the job format is not one this engine reads.
    InvalidSettingsError
        If the stored settings do not validate.
    """
    try:
        with open(os.path.join(job_dir, "scene.json"), encoding="utf-8") as fh:
            doc = json.load(fh)
        with open(os.path.join(job_dir, "settings.json"), encoding="utf-8") as fh:
            sdict = json.load(fh)
        with np.load(os.path.join(job_dir, "scene.npz"), allow_pickle=False) as z:
            arrays = {k: z[k] for k in z.files}
    except (OSError, ValueError, KeyError, EOFError, zipfile.BadZipFile) as exc:
        raise InvalidSceneError(f"Job folder '{job_dir}' cannot be read: {exc}") from exc
    doc = doc if isinstance(doc, dict) else {"format": f"a JSON {type(doc).__name__}"}
    if doc.get("format") != "surge-job" or doc.get("format_version") != JOB_FORMAT_VERSION:
        raise InvalidSceneError(f"Job folder '{job_dir}' has format {doc.get('format')!r} version "
                                f"{doc.get('format_version')!r}; this engine reads surge-job version "
                                f"{JOB_FORMAT_VERSION}")
    jobcheck.check_job_files(job_dir, doc, sdict, arrays)  # every array checked before one is used
    try:
        fluids = [FluidObject(f["name"], TriangleMesh(arrays[f["vertices"]], arrays[f["triangles"]]),
                              arrays[f["velocity"]],
                              settings_mod.fluid_from_dict(f["settings"], f"Fluid '{f['name']}'"),
                              f.get("channels", {}),
                              velocity_gradient=(arrays[f["velocity_gradient"]] if "velocity_gradient" in f
                                                 else np.zeros((3, 3))))
                  for f in doc["fluids"]]
        inflows = [InflowObject(f["name"], TriangleMesh(arrays[f["vertices"]], arrays[f["triangles"]]),
                                settings_mod.inflow_from_dict(f["settings"], f"Inflow '{f['name']}'"),
                                f.get("channels", {}), **_get_motion(f, arrays)) for f in doc["inflows"]]
        outflows = [OutflowObject(f["name"], TriangleMesh(arrays[f["vertices"]], arrays[f["triangles"]]),
                                  **_get_motion(f, arrays))
                    for f in doc["outflows"]]
        force_fields = [ForceField(f["name"], f["kind"], f["shape"], arrays[f["matrices"]],
                                   {k: arrays[v] for k, v in f["values"].items()}, f["flags"], float(f["unit"]))
                        for f in doc["force_fields"]]
        containers = []
        for c in doc["containers"]:
            if c.get("type") != "BOX":
                raise InvalidSceneError(f"Container '{c['name']}' has unknown type {c.get('type')!r}")
            containers.append(BoxContainer(c["name"], arrays[c["lower"]], arrays[c["upper"]],
                                           settings_mod.collider_from_dict(c["settings"], f"Container '{c['name']}'"),
                                           **_get_motion(c, arrays, with_motion=False)))
        colliders = []
        for c in doc["colliders"]:
            colliders.append(MeshCollider(
                c["name"], TriangleMesh(arrays[c["vertices"]], arrays[c["triangles"]]),
                settings_mod.collider_from_dict(c["settings"], f"Collider '{c['name']}'"), **_get_motion(c, arrays)))
        scene = SceneDescription(fluids=fluids, containers=containers, colliders=colliders,
                                 gravity=arrays[doc["gravity"]],
                                 frame_start=int(doc["frame_start"]), frame_end=int(doc["frame_end"]),
                                 fps=float(doc["fps"]), inflows=inflows, outflows=outflows,
                                 force_fields=force_fields, **_get_motion(doc, arrays, with_motion=False))
    except KeyError as exc:
        raise InvalidSceneError(f"Job folder '{job_dir}' is incomplete: missing {exc}") from exc
    return scene, settings_mod.from_dict(sdict)
