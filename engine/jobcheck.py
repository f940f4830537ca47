"""Checks of a job folder before the engine touches an array, and what a resume compares.

A job folder (:func:`engine.scene.save_job`) may come from anywhere: an older or newer Surge, a
script, a disk that lost a file's end. :func:`check_job_files` checks everything
:func:`engine.scene.load_job` reads, at once, before any array reaches a kernel: the JSON's
types, every referenced array's presence, dtype kind, shape and finiteness, and every triangle
index against its mesh's vertex count (an index out of range would read outside the array in a
compiled kernel). Each problem is named by object and field, and all are raised together as one
:class:`InvalidSceneError`.

The rules go by field name, so objects and fields added to the job format later are checked by
the same rules: ``vertices`` (V, 3) and ``frame_vertices`` (F, V, 3) finite floats, ``triangles``
(T, 3) integers in [0, V), ``transforms`` (F, 4, 4) finite, ``velocity``, ``lower``, ``upper``
and ``gravity`` (3,) finite; any other array a job names must be numeric and finite.

:func:`object_hashes` and :func:`scene_changes` tell a resume which objects changed since the
cached frames were baked.
"""

from __future__ import annotations

import hashlib
import json
import numbers
import os
import shutil

import numpy as np

from . import atomic
from .errors import InvalidSceneError

#: Lists of objects in a job's ``scene.json`` and the word each object is called by in messages.
OBJECT_LISTS = {"fluids": "Fluid", "inflows": "Inflow", "outflows": "Outflow", "containers": "Container",
                "colliders": "Collider"}
#: The files of a job folder.
JOB_FILES = ("scene.json", "scene.npz", "settings.json")

_VECTORS = ("velocity", "lower", "upper", "gravity")
_TEXT_FIELDS = ("name", "type")


def _is_int(value) -> bool:
    return isinstance(value, numbers.Integral) and not isinstance(value, bool)


def _is_number(value) -> bool:
    return isinstance(value, numbers.Real) and not isinstance(value, bool)


def _array_problems(arrays: dict, key, field: str, owner: str, vertex_count: int | None) -> list[str]:
    """Problems with the array ``key`` that ``owner``'s ``field`` names."""
    if not isinstance(key, str):
        return [f"{owner}: '{field}' should name an array, not {key!r}"]
    if key not in arrays:
        return [f"{owner}: '{field}' names the array '{key}', which scene.npz lacks"]
    a = arrays[key]
    if a.dtype.kind not in "biuf":
        return [f"{owner}: '{field}' is an array of {a.dtype}, not of numbers"]
    if field == "triangles":
        if a.dtype.kind not in "iu":
            return [f"{owner}: 'triangles' holds {a.dtype} values, not vertex indices (integers)"]
        if a.ndim != 2 or a.shape[1] != 3:
            return [f"{owner}: 'triangles' has shape {a.shape}; it should be (T, 3)"]
        if a.size and vertex_count is not None:
            lo, hi = int(a.min()), int(a.max())
            if lo < 0 or hi >= vertex_count:
                bad = lo if lo < 0 else hi
                return [f"{owner}: a face refers to vertex {bad}, but the mesh has {vertex_count} vertices "
                        f"(valid: 0-{vertex_count - 1})"]
        return []
    expected = {"vertices": "(V, 3)", "frame_vertices": "(F, V, 3)", "transforms": "(F, 4, 4)"}.get(
        field, "(3,)" if field in _VECTORS else None)
    if field == "vertices" and (a.ndim != 2 or a.shape[1] != 3):
        return [f"{owner}: 'vertices' has shape {a.shape}; it should be {expected}"]
    if field == "frame_vertices" and (a.ndim != 3 or a.shape[2] != 3
                                      or (vertex_count is not None and a.shape[1] != vertex_count)):
        return [f"{owner}: 'frame_vertices' has shape {a.shape}; it should be {expected} with V = "
                f"{vertex_count} vertices"]
    if field == "transforms" and (a.ndim != 3 or a.shape[1:] != (4, 4)):
        return [f"{owner}: 'transforms' has shape {a.shape}; it should be {expected}"]
    if field in _VECTORS and a.shape != (3,):
        return [f"{owner}: '{field}' has shape {a.shape}; it should be {expected}"]
    if not np.all(np.isfinite(a)):
        return [f"{owner}: '{field}' holds values that are not finite (NaN or infinite)"]
    return []


def _object_problems(entry, kind: str, index: int, arrays: dict) -> list[str]:
    if not isinstance(entry, dict):
        return [f"{kind} {index + 1}: not a JSON object but {type(entry).__name__}"]
    name = entry.get("name")
    if not isinstance(name, str):
        return [f"{kind} {index + 1}: 'name' should be text, not {name!r}"]
    owner = f"{kind} '{name}'"
    problems = []
    for fld in _TEXT_FIELDS:
        if fld in entry and not isinstance(entry[fld], str):
            problems.append(f"{owner}: '{fld}' should be text, not {entry[fld]!r}")
    if "settings" in entry and not isinstance(entry["settings"], dict):
        problems.append(f"{owner}: 'settings' should be a JSON object, not {type(entry['settings']).__name__}")
    channels = entry.get("channels", {})
    if not isinstance(channels, dict) or not all(isinstance(k, str) and _is_number(v) for k, v in channels.items()):
        problems.append(f"{owner}: 'channels' should map names to numbers, not {channels!r}")
    vertex_count = None
    if "vertices" in entry:
        found = _array_problems(arrays, entry["vertices"], "vertices", owner, None)
        problems += found
        if not found:
            vertex_count = len(arrays[entry["vertices"]])
    for fld, key in entry.items():
        if fld in ("vertices", "settings", "channels") + _TEXT_FIELDS:
            continue
        if fld == "triangles" or fld in _VECTORS or fld in ("transforms", "frame_vertices"):
            problems += _array_problems(arrays, key, fld, owner, vertex_count)
        elif isinstance(key, str) and key in arrays:
            problems += _array_problems(arrays, key, fld, owner, vertex_count)
    return problems


def check_job_files(job_dir: str, doc, settings, arrays: dict) -> None:
    """Check what a job folder's three files hold; raises one :class:`InvalidSceneError` listing every
    problem (each prefixed with the folder), or returns None.

    Parameters
    ----------
    doc : the parsed ``scene.json``
    settings : the parsed ``settings.json``
    arrays : dict of str -> ndarray, the arrays of ``scene.npz``
    """
    where = f"Job folder '{job_dir}'"
    if not isinstance(doc, dict):
        raise InvalidSceneError(f"{where}: scene.json holds {type(doc).__name__}, not a JSON object")
    problems = []
    if not isinstance(settings, dict):
        problems.append(f"settings.json holds {type(settings).__name__}, not a JSON object of settings")
    for key in ("frame_start", "frame_end"):
        if not _is_int(doc.get(key)):
            problems.append(f"'{key}' should be a whole number, not {doc.get(key)!r}")
    fps = doc.get("fps")
    if not (_is_number(fps) and np.isfinite(fps) and fps > 0):
        problems.append(f"'fps' should be a positive number, not {fps!r}")
    problems += _array_problems(arrays, doc.get("gravity"), "gravity", "Scene", None)
    for key, kind in OBJECT_LISTS.items():
        entries = doc.get(key, [])
        if not isinstance(entries, list):
            problems.append(f"'{key}' should be a list of objects, not {type(entries).__name__}")
            continue
        for i, entry in enumerate(entries):
            problems += _object_problems(entry, kind, i, arrays)
    if problems:
        raise InvalidSceneError([f"{where}: {p}" for p in problems])


def record_job(job_dir: str, cache_dir: str) -> None:
    """Copy the job files of ``job_dir`` into ``<cache_dir>/job``, the job that baked the cache's frames
    (nothing to do when ``job_dir`` is that folder)."""
    target = os.path.join(cache_dir, "job")
    if os.path.normcase(os.path.abspath(job_dir)) == os.path.normcase(os.path.abspath(target)):
        return
    os.makedirs(target, exist_ok=True)
    for name in JOB_FILES:
        source = os.path.join(job_dir, name)
        with open(source, "rb") as src:
            atomic.write_file(os.path.join(target, name), lambda fh, src=src: shutil.copyfileobj(src, fh))


def object_hashes(doc: dict, arrays: dict) -> dict[str, str]:
    """SHA-256 of each object of a job (its JSON entry and the bytes of its arrays), keyed by the
    object's label ("Collider 'Tank'"); "Scene" covers the rest (gravity, first frame, frame rate)."""
    def digest(entry: dict) -> str:
        h = hashlib.sha256(json.dumps(entry, sort_keys=True).encode("utf-8"))
        for key in sorted(v for v in entry.values() if isinstance(v, str) and v in arrays):
            a = np.ascontiguousarray(arrays[key])
            h.update(str(a.dtype).encode("ascii") + str(a.shape).encode("ascii"))
            h.update(a.tobytes())
        return h.hexdigest()

    # the last frame may move (a bake extended by a resume); everything else of the scene counts
    out = {"Scene": digest({k: v for k, v in doc.items() if k not in OBJECT_LISTS and k != "frame_end"})}
    for key, kind in OBJECT_LISTS.items():
        for entry in doc.get(key, []):
            # the array keys carry the object's index: hash what they hold, not how they are named
            named = {k: v for k, v in entry.items() if not (isinstance(v, str) and v in arrays)}
            named["arrays"] = sorted(k for k, v in entry.items() if isinstance(v, str) and v in arrays)
            h = hashlib.sha256(digest(named).encode("ascii"))
            for fld in named["arrays"]:
                a = np.ascontiguousarray(arrays[entry[fld]])
                h.update(fld.encode("utf-8") + str(a.dtype).encode("ascii") + str(a.shape).encode("ascii"))
                h.update(a.tobytes())
            out[f"{kind} '{entry.get('name')}'"] = h.hexdigest()
    return out


def scene_object_hashes(scene) -> dict[str, str]:
    """:func:`object_hashes` of an :class:`engine.scene.SceneDescription`, as its job folder would hold it."""
    from .scene import _arrays_and_json  # the job's own serialisation: the hashes match a saved job's

    doc, arrays = _arrays_and_json(scene)
    return object_hashes(doc, arrays)


def scene_changes(old: dict | None, new: dict) -> list[str]:
    """What changed between two :func:`object_hashes`, for people ("Collider 'Tank' changed")."""
    if old is None:
        return []
    changes = []
    for label in sorted(set(old) | set(new)):
        if label not in new:
            changes.append(f"{label} was removed")
        elif label not in old:
            changes.append(f"{label} was added")
        elif old[label] != new[label]:
            changes.append(f"{label} changed" if label != "Scene" else
                           "the scene's gravity, first frame or frame rate changed")
    return changes
