"""Job folders: a scene and its settings saved so that a bake can run without Blender
(``python -m engine.cli bake <job folder>``)::

    <job>/settings.json     SimulationSettings as a dict
    <job>/scene.json        names, scalars, and for each object the keys of its arrays
    <job>/scene.npz         the arrays (numpy .npz, no pickles)

Every file is checked before an array is used (:mod:`engine.scene.jobcheck`).
"""

from __future__ import annotations

import json
import os
import zipfile

import numpy as np

from ..errors import InvalidSceneError
from ..io import atomic
from ..io.hashing import canonical_hash
from .. import settings as settings_mod
from . import jobcheck
from .objects import (BoxContainer, FluidObject, ForceField, InflowObject, MeshCollider, OutflowObject,
                      RigidBodyObject, SceneDescription, TriangleMesh)

#: The job format this engine writes and reads (4: moving inflows and outflows, animated settings,
#: force fields and the initial velocity gradient of fluids; 5: rigid bodies; 6: the liquid in physical
#: units, the dynamic viscosity in Pa s and the surface tension in N/m, with their tracks). A job folder
#: is written for each bake, so no other version is read.
JOB_FORMAT_VERSION = 6


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
    bodies = []
    for i, b in enumerate(scene.bodies):
        entry = {"name": b.name, "vertices": f"body{i}_vertices", "triangles": f"body{i}_triangles",
                 "settings": settings_mod.to_dict(b.settings)}
        arrays[entry["vertices"]] = b.mesh.vertices
        arrays[entry["triangles"]] = b.mesh.triangles
        bodies.append(_put_motion(entry, arrays, f"body{i}", b))
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
           "outflows": outflows, "force_fields": fields, "bodies": bodies}
    _put_motion(doc, arrays, "scene", scene)
    return doc, arrays


def scene_hash(scene: SceneDescription) -> str:
    """SHA-256 over the scene's JSON and the bytes of every array."""
    doc, arrays = _arrays_and_json(scene)
    return canonical_hash(doc, arrays)


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
        bodies = [RigidBodyObject(b["name"], TriangleMesh(arrays[b["vertices"]], arrays[b["triangles"]]),
                                  settings_mod.rigid_body_from_dict(b["settings"], f"Rigid body '{b['name']}'"),
                                  **_get_motion(b, arrays)) for b in doc["bodies"]]
        scene = SceneDescription(fluids=fluids, containers=containers, colliders=colliders, bodies=bodies,
                                 gravity=arrays[doc["gravity"]],
                                 frame_start=int(doc["frame_start"]), frame_end=int(doc["frame_end"]),
                                 fps=float(doc["fps"]), inflows=inflows, outflows=outflows,
                                 force_fields=force_fields, **_get_motion(doc, arrays, with_motion=False))
    except KeyError as exc:
        raise InvalidSceneError(f"Job folder '{job_dir}' is incomplete: missing {exc}") from exc
    return scene, settings_mod.from_dict(sdict)
