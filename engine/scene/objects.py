"""Scene description: what the host exports and the engine simulates.

Everything is in world space, SI units (metres, seconds), Z up. The host (the Blender bridge)
applies object transforms and the scene unit scale before building these objects; the engine
never sees host data. A scene is saved into a job folder by :mod:`engine.scene.job`.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np

from . import animation
from ..errors import InvalidSceneError
from .. import settings as settings_mod
from ..core.particles import check_channel_name



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
        get 0); they reach the cache as attributes (see :mod:`engine.core.particles`).
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
    ``tracks`` fields (collider, inflow, outflow; see :mod:`engine.scene.animation`)."""

    def __post_init__(self):
        _init_motion(self)

    @property
    def motion(self) -> str:
        """'STATIC', 'RIGID' or 'DEFORMING'."""
        return _motion(self)


@dataclass(frozen=True)
class InflowObject(_Moving):
    """A mesh that emits liquid during the bake (see :mod:`engine.sources.inflow`).

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
        (see :mod:`engine.scene.animation`); None for an inflow that stays where it is.
    tracks : dict of str -> ndarray
        Per-frame values of animated settings (``use_flow``, ``normal_speed``, ``velocity``; see
        :data:`engine.scene.animation.ANIMATABLE`), shape (F,) or (F, 3).
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
    """A collider of any shape, turned into a signed distance grid (see :mod:`engine.collision.world`).

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


@dataclass(frozen=True)
class RigidBodyObject(_Moving):
    """A closed mesh whose motion the bake computes (see :mod:`engine.rigid`): it floats, sinks, tumbles and
    collides, and the liquid meets it as a solid collider.

    Attributes
    ----------
    name : str
    mesh : TriangleMesh
        World-space surface at ``frame_start``, metres; closed (its volume gives the mass properties).
    settings : RigidBodySettings
        Mass, contact friction and bounce, the liquid's friction and bounce, initial velocities, damping.
    transforms : ndarray, shape (F, 4, 4), float64, or None
        The object's own animation (rest pose to world, per frame, identity at the first frame): followed
        while the body is not Dynamic, and the source of Use Object Motion.
    frame_vertices : None
        A rigid body keeps its shape (a deforming mesh is refused).
    tracks : dict of str -> ndarray
        Per-frame ``use_dynamic`` (on/off), ``friction`` and ``bounce`` when animated, shape (F,).
    """

    name: str
    mesh: TriangleMesh
    settings: settings_mod.RigidBodySettings = field(default_factory=settings_mod.RigidBodySettings)
    transforms: np.ndarray | None = None
    frame_vertices: np.ndarray | None = None
    tracks: dict = field(default_factory=dict)

    def problems(self, n_frames: int, containers=()) -> list[str]:
        """Why this body cannot be baked: bad settings, an open or flat mesh, a deforming mesh, bad
        motion arrays, crossing a box container's walls at the first frame."""
        from ..rigid.mass import solid_problems  # numpy only

        owner = f"Rigid body '{self.name}'"
        problems = settings_mod.validate_object(self.settings, owner)
        problems += animation.check_tracks(self.tracks, "rigid_body", n_frames, owner)
        mesh = _mesh_problems(self.mesh, owner)
        problems += mesh or solid_problems(self.mesh.vertices, self.mesh.triangles, owner)
        if self.frame_vertices is not None:
            problems.append(f"{owner} deforms during the shot (a modifier, shape key or armature changes its mesh); "
                            f"a rigid body keeps its shape: apply the deformation or make it a Collider")
        problems += _motion_problems(self, owner, n_frames)
        if not mesh:
            v = self.mesh.vertices
            for c in containers:
                inside = np.all((v > c.lower) & (v < c.upper), axis=1)
                if inside.any() and not inside.all():
                    problems.append(f"{owner} crosses the walls of container '{c.name}' at the first frame; move it "
                                    f"inside the container")
        return problems


#: Force field types (Blender's names) :mod:`engine.sources.forces` simulates.
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
    """A Blender force field acting on the liquid (see :mod:`engine.sources.forces`).

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
        ``pbf_velocity_smoothing``, ``surface_tension`` (F,); see :mod:`engine.scene.animation`). A
        setting without a track keeps its value (``gravity`` above, the others in the settings).
    force_fields : tuple of ForceField
    bodies : tuple of RigidBodyObject
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
    bodies: tuple = ()

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
        object.__setattr__(self, "bodies", tuple(self.bodies))
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
            motion_problems = _motion_problems(f, owner, n_frames)
            problems += motion_problems + animation.check_tracks(f.tracks, "inflow", n_frames, owner,
                                                                                self.frame_start)
            if (not mesh_problems and not motion_problems and f.settings.inflow_mode == "SURFACE"
                    and not _has_area(f)):
                problems.append(f"{owner} has no area: every face is flat to a line or a point (a scale of 0 on "
                                f"an axis, or all its vertices in a row), so there is no surface to emit from; give "
                                f"it faces with an area, or use Emit From: Volume with a closed mesh")
            elif not problems and f.settings.inflow_mode == "SURFACE" and f.motion == "STATIC":
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
                                                                                     owner, self.frame_start)
        problems += animation.check_tracks(self.tracks, "scene", n_frames, "Scene", self.frame_start)
        for c in self.containers:
            problems += animation.check_tracks(c.tracks, "collider", n_frames, f"Container '{c.name}'",
                                               self.frame_start)
        for ff in self.force_fields:
            problems += ff.problems(n_frames)
        for c in self.containers:
            if np.any(c.upper <= c.lower):
                problems.append(f"Container '{c.name}' has no inside (its size is zero along an axis)")
        for c in self.colliders:
            owner = f"Collider '{c.name}'"
            problems += settings_mod.validate_collider(c.settings, owner)
            problems += animation.check_tracks(c.tracks, "collider", n_frames, owner, self.frame_start)
            if len(c.mesh.triangles) == 0:
                problems.append(f"{owner} has no faces")
            elif not np.all(np.isfinite(c.mesh.vertices)):
                problems.append(f"{owner} has non-finite vertex coordinates")
            elif c.mesh.triangles.min() < 0 or c.mesh.triangles.max() >= len(c.mesh.vertices):
                problems.append(f"{owner} has faces that refer to missing vertices")
            problems += _motion_problems(c, owner, n_frames)
        for c in self.containers:
            problems += settings_mod.validate_collider(c.settings, f"Container '{c.name}'")
        for b in self.bodies:
            problems += b.problems(n_frames, self.containers)
        names = [o.name for o in self.colliders + self.bodies]
        for name in sorted({n for n in names if names.count(n) > 1}):
            problems.append(f"Two colliders or rigid bodies are named '{name}'; give each its own name")
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


def _has_area(inflow) -> bool:
    """True if the inflow's faces have an area at some frame (a mesh scaled to 0 on an axis has none)."""
    meshes = [inflow.mesh.vertices]
    if inflow.frame_vertices is not None:
        meshes = list(inflow.frame_vertices)
    elif inflow.transforms is not None:
        meshes = [inflow.mesh.vertices @ m[:3, :3].T + m[:3, 3] for m in inflow.transforms]
    extent = max(float(np.ptp(inflow.mesh.vertices, axis=0).max(initial=0.0)), 1e-300)
    for vertices in meshes:
        area = face_areas_normals(TriangleMesh(vertices, inflow.mesh.triangles))[0].sum()
        # float64 rounding of the cross products of a flattened mesh stays ~1e-16 of extent^2
        if area > 1e-12 * extent * extent:
            return True
    return False


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
