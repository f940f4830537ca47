"""USD files of baked frames: particles as points, the surface as a mesh. Written in the bake's process.

Points (one ``.usdc`` per frame, a ``UsdGeomPoints`` prim at :data:`PRIM_PATH`):

=====================  ==============  ======  =================================================
USD property           type            unit    Blender attribute after import
=====================  ==============  ======  =================================================
points                 point3f[]       m       position
velocities             vector3f[]      m/s     velocity
widths (constant)      float[1]        m       radius (half the width): half the particle spacing
primvars:density       float[] vertex  kg/m^3  density
primvars:id            int[] vertex            id
primvars:<name>        float[] vertex          <name>: every other per-particle float attribute of
                                               the cache (``age``, s, and the named extra channels)
ids                    int64[]                 (read by other USD tools as the stable point id)
=====================  ==============  ======  =================================================

Surface (one ``.usdc`` per frame, a ``UsdGeomMesh`` prim at :data:`SURFACE_PRIM_PATH`): ``points``
(m), ``faceVertexCounts`` (all 3), ``faceVertexIndices`` (counter-clockwise seen from outside),
``velocities`` (m/s: Blender's ``velocity`` attribute, which Cycles reads for the motion blur of a
mesh whose topology changes every frame), ``subdivisionScheme`` none, and ``primvars:<name>`` for
every other vertex attribute (density, age, channels). The particles the surface handed to the spray
(:mod:`engine.surface.drops`) are a ``UsdGeomPoints`` prim at :data:`SURFACE_SPRAY_PRIM_PATH` in the
same file (points, velocities, ids, a constant width: a sphere of one particle's volume).

The stage is Z-up with 1 metre per unit, values are SI; the Blender object that plays the files
carries the scene's unit scale. A file per frame keeps memory flat however long the bake, lets
frames appear while the bake runs, and leaves a playable sequence when a bake is cancelled.

``pxr`` ships inside Blender (``bpy``'s bundled site-packages) and as ``usd-core`` on PyPI; this
module imports it from ``sys.path`` only (the host adds Blender's folder before starting the bake
process, whose ``PYTHONPATH`` then holds it), and needs no Blender.
"""

from __future__ import annotations

import importlib.util
import os
import sys

import numpy as np

from . import atomic

PRIM_PATH = "/SurgeLiquid"
SURFACE_PRIM_PATH = "/SurgeSurface"
SURFACE_SPRAY_PRIM_PATH = "/SurgeSurfaceSpray"

#: Cache attributes written as USD properties of their own (see the table above).
_BUILT_IN = frozenset({"position", "velocity", "density", "id"})


def bundled_site_packages(python_root: str | None = None) -> list[str]:
    """Folders that may hold the ``pxr`` that ships inside Blender: the site-packages of Blender's bundled
    Python at ``python_root`` (``bpy.utils.system_resource('PYTHON')``) or, without it, of every version
    folder of the installed ``bpy`` package (found without importing it)."""
    roots = [python_root] if python_root else []
    if not roots:
        spec = importlib.util.find_spec("bpy")
        for base in (spec.submodule_search_locations or []) if spec else []:
            for version in sorted(os.listdir(base)) if os.path.isdir(base) else []:
                roots.append(os.path.join(base, version, "python"))
    folders = []
    for root in roots:
        lib = os.path.join(root, "lib")
        # Linux and macOS lay out lib/pythonX.Y/site-packages, Windows lib/site-packages
        for name in sorted(os.listdir(lib)) if os.path.isdir(lib) else []:
            if name.startswith("python"):
                folders.append(os.path.join(lib, name, "site-packages"))
        folders.append(os.path.join(lib, "site-packages"))
    return folders


def ensure_pxr(extra=(), python_root: str | None = None) -> None:
    """Make ``pxr`` importable if it is not: the first of ``extra``, then of Blender's bundled folders
    (:func:`bundled_site_packages`), that holds it goes at the end of ``sys.path`` (appended, not
    prepended: nothing already importable may be shadowed)."""
    if importlib.util.find_spec("pxr") is not None:
        return
    for path in [*extra, *bundled_site_packages(python_root)]:
        if os.path.isdir(os.path.join(path, "pxr")) and path not in sys.path:
            sys.path.append(path)
            return


def import_pxr():
    """The ``pxr`` modules this writer uses: ``(Sdf, Usd, UsdGeom, Vt)``.

    Raises
    ------
    OSError
        If ``pxr`` is not importable (the host did not put Blender's copy on the path).
    """
    try:
        from pxr import Sdf, Usd, UsdGeom, Vt
    except ImportError as exc:
        raise OSError(f"The USD library (pxr) cannot be imported: {exc}") from exc
    return Sdf, Usd, UsdGeom, Vt


def _new_stage(frame: int, fmt: str):
    """An anonymous .usdc layer and its stage: Z up, metres, the frame and format in the layer's data."""
    Sdf, Usd, UsdGeom, _Vt = import_pxr()
    layer = Sdf.Layer.CreateAnonymous(".usdc")
    stage = Usd.Stage.Open(layer)
    UsdGeom.SetStageUpAxis(stage, UsdGeom.Tokens.z)
    UsdGeom.SetStageMetersPerUnit(stage, 1.0)
    layer.customLayerData = {"surge:frame": int(frame), "surge:format": fmt, "surge:format_version": 1}
    return layer, stage


def _export(layer, path: str) -> None:
    # the temporary name keeps the .usdc extension: USD picks the file format from it
    with atomic.replacing(path, keep_extension=True) as tmp:
        try:
            written = layer.Export(tmp)
        except RuntimeError as exc:  # pxr.Tf.ErrorException: USD reports I/O failures this way
            raise OSError(f"Cannot write the USD file '{path}': {str(exc).strip()}") from exc
        if not written:
            raise OSError(f"Cannot write the USD file '{path}'")


def write_frame(path: str, arrays: dict, frame: int, radius: float) -> None:
    """Write one frame of particles to ``path`` (a ``.usdc`` file), atomically.

    Parameters
    ----------
    path : str
        Destination; written to a temporary name first and renamed into place, so that Blender,
        which may be reading the sequence during the bake, never opens half a file.
    arrays : dict
        One frame of the engine cache: ``position`` (N, 3) float32 m, ``velocity`` (N, 3) float32 m/s,
        ``density`` (N,) float32 kg/m^3, ``id`` (N,) int32, and any other (N,) float array (the
        particle age, extra channels), each written as a float primvar of its own name.
    frame : int
        Frame number, recorded in the layer's metadata.
    radius : float
        Particle radius, metres (half the particle spacing).
    """
    Sdf, Usd, UsdGeom, Vt = import_pxr()
    x = np.ascontiguousarray(arrays["position"], dtype=np.float32).reshape(-1, 3)
    v = np.ascontiguousarray(arrays["velocity"], dtype=np.float32).reshape(-1, 3)
    rho = np.ascontiguousarray(arrays["density"], dtype=np.float32).reshape(-1)
    ids = np.ascontiguousarray(arrays["id"], dtype=np.int32).reshape(-1)

    layer, stage = _new_stage(frame, "surge-points")
    points = UsdGeom.Points.Define(stage, PRIM_PATH)
    stage.SetDefaultPrim(points.GetPrim())
    points.CreatePointsAttr(Vt.Vec3fArray.FromNumpy(x))
    points.CreateVelocitiesAttr(Vt.Vec3fArray.FromNumpy(v))
    width = Vt.FloatArray([2.0 * float(radius)])
    points.CreateWidthsAttr(width)
    points.SetWidthsInterpolation(UsdGeom.Tokens.constant)
    points.CreateIdsAttr(Vt.Int64Array.FromNumpy(ids.astype(np.int64)))
    primvars = UsdGeom.PrimvarsAPI(points)
    primvars.CreatePrimvar("density", Sdf.ValueTypeNames.FloatArray, UsdGeom.Tokens.vertex).Set(
        Vt.FloatArray.FromNumpy(rho))
    primvars.CreatePrimvar("id", Sdf.ValueTypeNames.IntArray, UsdGeom.Tokens.vertex).Set(Vt.IntArray.FromNumpy(ids))
    for name, values in arrays.items():
        if name in _BUILT_IN:
            continue
        values = np.asarray(values)
        if values.shape != (len(x),) or values.dtype.kind != "f":
            raise ValueError(f"Particle attribute '{name}' has shape {values.shape} and type {values.dtype}; "
                             f"extra attributes are one float per particle")
        primvars.CreatePrimvar(name, Sdf.ValueTypeNames.FloatArray, UsdGeom.Tokens.vertex).Set(
            Vt.FloatArray.FromNumpy(np.ascontiguousarray(values, dtype=np.float32)))
    if len(x):
        lo, hi = x.min(axis=0) - radius, x.max(axis=0) + radius
        points.CreateExtentAttr(Vt.Vec3fArray.FromNumpy(np.array([lo, hi], dtype=np.float32)))

    _export(layer, path)


def write_mesh(path: str, vertices: np.ndarray, triangles: np.ndarray, attributes: dict, frame: int,
               spray: dict | None = None, spray_radius: float = 0.0) -> None:
    """Write one frame of the liquid surface to ``path`` (a ``.usdc`` file), atomically.

    Parameters
    ----------
    vertices : ndarray, shape (V, 3), float32, m
    triangles : ndarray, shape (T, 3), int, counter-clockwise seen from outside
    attributes : dict of str -> ndarray
        ``velocity`` (V, 3) float32 m/s is written as ``velocities``; every other (V,) float array as a
        float primvar and every other (V, 3) array as a vector primvar of its name.
    frame : int
        Frame number, recorded in the layer's metadata.
    """
    Sdf, Usd, UsdGeom, Vt = import_pxr()
    v = np.ascontiguousarray(vertices, dtype=np.float32).reshape(-1, 3)
    t = np.ascontiguousarray(triangles, dtype=np.int32).reshape(-1)
    layer, stage = _new_stage(frame, "surge-surface")
    mesh = UsdGeom.Mesh.Define(stage, SURFACE_PRIM_PATH)
    stage.SetDefaultPrim(mesh.GetPrim())
    mesh.CreateSubdivisionSchemeAttr(UsdGeom.Tokens.none)
    mesh.CreatePointsAttr(Vt.Vec3fArray.FromNumpy(v))
    mesh.CreateFaceVertexCountsAttr(Vt.IntArray.FromNumpy(np.full(len(t) // 3, 3, dtype=np.int32)))
    mesh.CreateFaceVertexIndicesAttr(Vt.IntArray.FromNumpy(t))
    primvars = UsdGeom.PrimvarsAPI(mesh)
    for name, values in attributes.items():
        values = np.ascontiguousarray(values, dtype=np.float32)
        if len(values) != len(v):
            raise ValueError(f"Vertex attribute '{name}' has {len(values)} rows for {len(v)} vertices")
        if name == "velocity":
            mesh.CreateVelocitiesAttr(Vt.Vec3fArray.FromNumpy(values.reshape(-1, 3)))
        elif values.ndim == 2 and values.shape[1] == 3:
            primvars.CreatePrimvar(name, Sdf.ValueTypeNames.Vector3fArray, UsdGeom.Tokens.vertex).Set(
                Vt.Vec3fArray.FromNumpy(values))
        else:
            primvars.CreatePrimvar(name, Sdf.ValueTypeNames.FloatArray, UsdGeom.Tokens.vertex).Set(
                Vt.FloatArray.FromNumpy(values.reshape(-1)))
    if len(v):
        mesh.CreateExtentAttr(Vt.Vec3fArray.FromNumpy(np.array([v.min(axis=0), v.max(axis=0)], dtype=np.float32)))
    if spray is not None:
        _spray_points(stage, spray, spray_radius)
    _export(layer, path)


def _spray_points(stage, spray: dict, radius: float) -> None:
    """The surface's spray as points (see :func:`write_mesh`)."""
    _Sdf, _Usd, UsdGeom, Vt = import_pxr()
    x = np.ascontiguousarray(spray.get("position", np.zeros((0, 3))), dtype=np.float32).reshape(-1, 3)
    vel = np.ascontiguousarray(spray.get("velocity", np.zeros((0, 3))), dtype=np.float32).reshape(-1, 3)
    ids = np.asarray(spray.get("id", np.arange(len(x))), dtype=np.int64).reshape(-1)
    if not len(x):  # one invisible point: Cycles in Blender 5.0 stops the render on an empty point cloud
        x, vel, ids, radius = np.zeros((1, 3), np.float32), np.zeros((1, 3), np.float32), np.full(1, -1), 0.0
    points = UsdGeom.Points.Define(stage, SURFACE_SPRAY_PRIM_PATH)
    points.CreatePointsAttr(Vt.Vec3fArray.FromNumpy(x))
    points.CreateVelocitiesAttr(Vt.Vec3fArray.FromNumpy(vel))
    points.CreateWidthsAttr(Vt.FloatArray([2.0 * float(radius)]))
    points.SetWidthsInterpolation(UsdGeom.Tokens.constant)
    points.CreateIdsAttr(Vt.Int64Array.FromNumpy(np.ascontiguousarray(ids)))


def read_mesh(path: str) -> dict:
    """Arrays of a surface file written by :func:`write_mesh`: ``vertices``, ``triangles``, ``velocity``
    and the primvars (for tests and tools)."""
    Sdf, Usd, UsdGeom, Vt = import_pxr()
    stage = Usd.Stage.Open(path)
    mesh = UsdGeom.Mesh(stage.GetPrimAtPath(SURFACE_PRIM_PATH))
    out = {"vertices": np.array(mesh.GetPointsAttr().Get() or [], dtype=np.float32).reshape(-1, 3),
           "triangles": np.array(mesh.GetFaceVertexIndicesAttr().Get() or [], dtype=np.int32).reshape(-1, 3)}
    vel = mesh.GetVelocitiesAttr().Get()
    if vel is not None:
        out["velocity"] = np.array(vel, dtype=np.float32).reshape(-1, 3)
    for pv in UsdGeom.PrimvarsAPI(mesh).GetPrimvars():
        value = pv.Get()
        if value is not None:
            out[pv.GetPrimvarName()] = np.array(value, dtype=np.float32)
    return out


def points_path(usd_dir: str, frame: int) -> str:
    """Path of one frame's point file in ``usd_dir``; the number is the frame, as Blender's sequence reader
    expects."""
    if frame < 0 or frame > 999999:
        raise ValueError(f"Frame {frame} is outside 0-999999")
    return os.path.join(usd_dir, f"liquid_{frame:06d}.usdc")


class PointsWriter:
    """Writes each baked frame's particles to ``usd_dir/liquid_NNNNNN.usdc`` (:func:`write_frame`), as the
    bake's child process caches them (see :func:`engine.stages.follow_bake`).

    Parameters
    ----------
    usd_dir : str
    radius : float
        Particle radius, m.
    """

    def __init__(self, usd_dir: str, radius: float):
        self.usd_dir = usd_dir
        self.radius = float(radius)

    def __call__(self, frame: int, arrays: dict) -> None:
        os.makedirs(self.usd_dir, exist_ok=True)
        write_frame(points_path(self.usd_dir, frame), arrays, frame, self.radius)


def write_points(path: str, position: np.ndarray, velocity: np.ndarray, ids: np.ndarray, radius: float,
                 primvars: dict, frame: int, prim_path: str = PRIM_PATH) -> None:
    """Write a point cloud to ``path`` (a ``.usdc`` file), atomically: any particles, not only the liquid's.

    Parameters
    ----------
    position, velocity : ndarray, shape (N, 3), float32, m and m/s
    ids : ndarray, shape (N,), int
        Stable ids (``ids`` and the ``id`` primvar).
    radius : float
        Radius every point renders at, m (the constant ``widths`` are twice it).
    primvars : dict of str -> ndarray, shape (N,)
        Float attributes, each a vertex primvar of its name (Blender attributes after import).
    frame : int
        Frame number, recorded in the layer's metadata.
    prim_path : str
        Path of the ``UsdGeomPoints`` prim (the object that plays the file looks for it).
    """
    Sdf, Usd, UsdGeom, Vt = import_pxr()
    x = np.ascontiguousarray(position, dtype=np.float32).reshape(-1, 3)
    layer = Sdf.Layer.CreateAnonymous(".usdc")
    stage = Usd.Stage.Open(layer)
    UsdGeom.SetStageUpAxis(stage, UsdGeom.Tokens.z)
    UsdGeom.SetStageMetersPerUnit(stage, 1.0)
    layer.customLayerData = {"surge:frame": int(frame), "surge:format": "surge-points", "surge:format_version": 1}
    points = UsdGeom.Points.Define(stage, prim_path)
    stage.SetDefaultPrim(points.GetPrim())
    points.CreatePointsAttr(Vt.Vec3fArray.FromNumpy(x))
    points.CreateVelocitiesAttr(Vt.Vec3fArray.FromNumpy(np.ascontiguousarray(velocity, dtype=np.float32).reshape(-1,
                                                                                                                 3)))
    points.CreateWidthsAttr(Vt.FloatArray([2.0 * float(radius)]))
    points.SetWidthsInterpolation(UsdGeom.Tokens.constant)
    i32 = np.ascontiguousarray(ids, dtype=np.int32).reshape(-1)
    points.CreateIdsAttr(Vt.Int64Array.FromNumpy(i32.astype(np.int64)))
    api = UsdGeom.PrimvarsAPI(points)
    api.CreatePrimvar("id", Sdf.ValueTypeNames.IntArray, UsdGeom.Tokens.vertex).Set(Vt.IntArray.FromNumpy(i32))
    for name, values in primvars.items():
        values = np.ascontiguousarray(values, dtype=np.float32).reshape(-1)
        if len(values) != len(x):
            raise ValueError(f"Point attribute '{name}' has {len(values)} values for {len(x)} points")
        api.CreatePrimvar(name, Sdf.ValueTypeNames.FloatArray,
                          UsdGeom.Tokens.vertex).Set(Vt.FloatArray.FromNumpy(values))
    if len(x):
        lo, hi = x.min(axis=0) - radius, x.max(axis=0) + radius
        points.CreateExtentAttr(Vt.Vec3fArray.FromNumpy(np.array([lo, hi], dtype=np.float32)))
    _export(layer, path)
