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

from . import atomic, jobcheck
from .errors import InvalidSceneError
from . import settings as settings_mod
from .particles import check_channel_name

JOB_FORMAT_VERSION = 3


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
        Initial velocity of the liquid.
    settings : FluidSettings
        Per-object settings (the spacing factor of its particles).
    channels : dict of str -> float
        Values of named extra particle channels for the liquid of this object (other particles
        get 0); they reach the cache as attributes (see :mod:`engine.particles`).
    """

    name: str
    mesh: TriangleMesh
    velocity: np.ndarray = field(default_factory=lambda: np.zeros(3))
    settings: settings_mod.FluidSettings = field(default_factory=settings_mod.FluidSettings)
    channels: dict = field(default_factory=dict)

    def __post_init__(self):
        object.__setattr__(self, "velocity", np.asarray(self.velocity, dtype=np.float64).reshape(3))
        object.__setattr__(self, "channels", {str(k): float(v) for k, v in dict(self.channels).items()})


@dataclass(frozen=True)
class InflowObject:
    """A mesh that emits liquid during the bake (see :mod:`engine.emit`).

    Attributes
    ----------
    name : str
    mesh : TriangleMesh
        World-space surface, metres. SURFACE mode emits from its faces along their outward normals
        (the winding of the triangles); VOLUME mode needs a closed mesh.
    settings : InflowSettings
        Mode, speed, velocity, frame window and spacing factor.
    channels : dict of str -> float
        Values of named extra particle channels for the emitted liquid.
    """

    name: str
    mesh: TriangleMesh
    settings: settings_mod.InflowSettings = field(default_factory=settings_mod.InflowSettings)
    channels: dict = field(default_factory=dict)

    def __post_init__(self):
        object.__setattr__(self, "channels", {str(k): float(v) for k, v in dict(self.channels).items()})

    @property
    def velocity(self) -> np.ndarray:
        """World-space velocity of the settings, (3,) float64, m/s."""
        st = self.settings
        return np.array(st.velocity, dtype=np.float64)


@dataclass(frozen=True)
class OutflowObject:
    """A closed mesh that removes every particle inside it (generalised winding number above 1/2).

    Attributes
    ----------
    name : str
    mesh : TriangleMesh
        World-space surface, metres.
    """

    name: str
    mesh: TriangleMesh


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
    """

    name: str
    lower: np.ndarray
    upper: np.ndarray
    settings: settings_mod.ColliderSettings = field(
        default_factory=lambda: settings_mod.ColliderSettings(collider_mode="CONTAINER"))

    def __post_init__(self):
        object.__setattr__(self, "lower", np.asarray(self.lower, dtype=np.float64).reshape(3))
        object.__setattr__(self, "upper", np.asarray(self.upper, dtype=np.float64).reshape(3))


@dataclass(frozen=True)
class MeshCollider:
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
    """

    name: str
    mesh: TriangleMesh
    settings: settings_mod.ColliderSettings = field(default_factory=settings_mod.ColliderSettings)
    transforms: np.ndarray | None = None
    frame_vertices: np.ndarray | None = None

    def __post_init__(self):
        if self.transforms is not None:
            object.__setattr__(self, "transforms",
                               np.ascontiguousarray(self.transforms, dtype=np.float64).reshape(-1, 4, 4))
        if self.frame_vertices is not None:
            object.__setattr__(self, "frame_vertices", np.ascontiguousarray(
                self.frame_vertices, dtype=np.float64).reshape(-1, self.mesh.vertices.shape[0], 3))

    @property
    def motion(self) -> str:
        """'STATIC', 'RIGID' or 'DEFORMING'."""
        if self.frame_vertices is not None:
            return "DEFORMING"
        return "RIGID" if self.transforms is not None else "STATIC"


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

    def __post_init__(self):
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
        for f in self.inflows:
            owner = f"Inflow '{f.name}'"
            problems += settings_mod.validate_object(f.settings, owner)
            problems += _channel_problems(f.channels, owner)
            problems += _mesh_problems(f.mesh, owner)
            if not problems and f.settings.inflow_mode == "SURFACE":
                if surface_flux(f.mesh, f.velocity, f.settings.normal_speed) <= 0.0:
                    problems.append(f"{owner} emits nothing: no face moves liquid outward (raise its Normal "
                                    f"Speed, or turn its Velocity toward the way its faces point)")
        for f in self.outflows:
            problems += _mesh_problems(f.mesh, f"Outflow '{f.name}'")
        for c in self.containers:
            if np.any(c.upper <= c.lower):
                problems.append(f"Container '{c.name}' has no inside (its size is zero along an axis)")
        n_frames = self.frame_end - self.frame_start + 1
        for c in self.colliders:
            owner = f"Collider '{c.name}'"
            problems += settings_mod.validate_collider(c.settings, owner)
            if len(c.mesh.triangles) == 0:
                problems.append(f"{owner} has no faces")
            elif not np.all(np.isfinite(c.mesh.vertices)):
                problems.append(f"{owner} has non-finite vertex coordinates")
            elif c.mesh.triangles.min() < 0 or c.mesh.triangles.max() >= len(c.mesh.vertices):
                problems.append(f"{owner} has faces that refer to missing vertices")
            for label, arr in (("transforms", c.transforms), ("frame_vertices", c.frame_vertices)):
                if arr is None:
                    continue
                if arr.shape[0] != n_frames:
                    problems.append(f"{owner} has {label} for {arr.shape[0]} frames; the frame range "
                                    f"{self.frame_start}-{self.frame_end} has {n_frames}")
                elif not np.all(np.isfinite(arr)):
                    problems.append(f"{owner} has non-finite {label}")
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


def _arrays_and_json(scene: SceneDescription):
    arrays = {"gravity": scene.gravity}
    fluids = []
    for i, f in enumerate(scene.fluids):
        arrays[f"fluid{i}_vertices"] = f.mesh.vertices
        arrays[f"fluid{i}_triangles"] = f.mesh.triangles
        arrays[f"fluid{i}_velocity"] = f.velocity
        fluids.append({"name": f.name, "vertices": f"fluid{i}_vertices", "triangles": f"fluid{i}_triangles",
                       "velocity": f"fluid{i}_velocity", "settings": settings_mod.to_dict(f.settings),
                       "channels": dict(f.channels)})
    inflows = []
    for i, f in enumerate(scene.inflows):
        arrays[f"inflow{i}_vertices"] = f.mesh.vertices
        arrays[f"inflow{i}_triangles"] = f.mesh.triangles
        inflows.append({"name": f.name, "vertices": f"inflow{i}_vertices", "triangles": f"inflow{i}_triangles",
                        "settings": settings_mod.to_dict(f.settings), "channels": dict(f.channels)})
    outflows = []
    for i, f in enumerate(scene.outflows):
        arrays[f"outflow{i}_vertices"] = f.mesh.vertices
        arrays[f"outflow{i}_triangles"] = f.mesh.triangles
        outflows.append({"name": f.name, "vertices": f"outflow{i}_vertices", "triangles": f"outflow{i}_triangles"})
    containers = []
    for i, c in enumerate(scene.containers):
        arrays[f"container{i}_lower"] = c.lower
        arrays[f"container{i}_upper"] = c.upper
        containers.append({"name": c.name, "type": "BOX", "lower": f"container{i}_lower",
                           "upper": f"container{i}_upper", "settings": settings_mod.to_dict(c.settings)})
    colliders = []
    for i, c in enumerate(scene.colliders):
        entry = {"name": c.name, "vertices": f"collider{i}_vertices", "triangles": f"collider{i}_triangles",
                 "settings": settings_mod.to_dict(c.settings)}
        arrays[entry["vertices"]] = c.mesh.vertices
        arrays[entry["triangles"]] = c.mesh.triangles
        if c.transforms is not None:
            entry["transforms"] = f"collider{i}_transforms"
            arrays[entry["transforms"]] = c.transforms
        if c.frame_vertices is not None:
            entry["frame_vertices"] = f"collider{i}_frame_vertices"
            arrays[entry["frame_vertices"]] = c.frame_vertices
        colliders.append(entry)
    doc = {"format": "surge-job", "format_version": JOB_FORMAT_VERSION, "frame_start": int(scene.frame_start),
           "frame_end": int(scene.frame_end), "fps": float(scene.fps), "gravity": "gravity",
           "fluids": fluids, "containers": containers, "colliders": colliders, "inflows": inflows,
           "outflows": outflows}
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
                              f.get("channels", {})) for f in doc["fluids"]]
        inflows = [InflowObject(f["name"], TriangleMesh(arrays[f["vertices"]], arrays[f["triangles"]]),
                                settings_mod.inflow_from_dict(f["settings"], f"Inflow '{f['name']}'"),
                                f.get("channels", {})) for f in doc["inflows"]]
        outflows = [OutflowObject(f["name"], TriangleMesh(arrays[f["vertices"]], arrays[f["triangles"]]))
                    for f in doc["outflows"]]
        containers = []
        for c in doc["containers"]:
            if c.get("type") != "BOX":
                raise InvalidSceneError(f"Container '{c['name']}' has unknown type {c.get('type')!r}")
            containers.append(BoxContainer(c["name"], arrays[c["lower"]], arrays[c["upper"]],
                                           settings_mod.collider_from_dict(c["settings"], f"Container '{c['name']}'")))
        colliders = []
        for c in doc.get("colliders", []):
            colliders.append(MeshCollider(
                c["name"], TriangleMesh(arrays[c["vertices"]], arrays[c["triangles"]]),
                settings_mod.collider_from_dict(c["settings"], f"Collider '{c['name']}'"),
                transforms=arrays[c["transforms"]] if "transforms" in c else None,
                frame_vertices=arrays[c["frame_vertices"]] if "frame_vertices" in c else None))
        scene = SceneDescription(fluids=fluids, containers=containers, colliders=colliders,
                                 gravity=arrays[doc["gravity"]],
                                 frame_start=int(doc["frame_start"]), frame_end=int(doc["frame_end"]),
                                 fps=float(doc["fps"]), inflows=inflows, outflows=outflows)
    except KeyError as exc:
        raise InvalidSceneError(f"Job folder '{job_dir}' is incomplete: missing {exc}") from exc
    return scene, settings_mod.from_dict(sdict)
