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
(T, 3) integers in [0, V), ``transforms`` and a force field's ``matrices`` (F, 4, 4) finite,
``velocity``, ``lower``, ``upper`` and ``gravity`` (3,) finite, ``velocity_gradient`` (3, 3)
finite; the named arrays of ``tracks`` (animated settings) and of a force field's ``values`` and
any other array a job names must be numeric and finite (their lengths against the frame range are
:meth:`engine.scene.SceneDescription.validate`'s).

:func:`object_hashes` and :func:`scene_changes` tell a resume which objects changed since the
cached frames were baked.
"""

from __future__ import annotations

import numbers
import os
import shutil

import numpy as np

from ..io.hashing import canonical_hash
from ..io import atomic
from ..errors import InvalidSceneError

#: Lists of objects in a job's ``scene.json`` and the word each object is called by in messages.
OBJECT_LISTS = {"fluids": "Fluid", "inflows": "Inflow", "outflows": "Outflow", "containers": "Container",
                "colliders": "Collider", "force_fields": "Force field", "bodies": "Rigid body"}
#: The files of a job folder.
JOB_FILES = ("scene.json", "scene.npz", "settings.json")

_VECTORS = ("velocity", "lower", "upper", "gravity")
_TEXT_FIELDS = ("name", "type", "kind", "shape")
#: Fields that map names to arrays: ``{"velocity": "inflow0_track_velocity", ...}``.
_ARRAY_MAPS = ("tracks", "values")
#: Fields that hold plain JSON values: name -> what the value must be.
_PLAIN = {"settings": "a JSON object", "channels": "a JSON object", "flags": "a JSON object", "unit": "a number"}


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
    expected = {"vertices": "(V, 3)", "frame_vertices": "(F, V, 3)", "transforms": "(F, 4, 4)",
                "matrices": "(F, 4, 4)", "velocity_gradient": "(3, 3)"}.get(field,
                                                                            "(3,)" if field in _VECTORS else None)
    if field == "vertices" and (a.ndim != 2 or a.shape[1] != 3):
        return [f"{owner}: 'vertices' has shape {a.shape}; it should be {expected}"]
    if field == "frame_vertices" and (a.ndim != 3 or a.shape[2] != 3
                                      or (vertex_count is not None and a.shape[1] != vertex_count)):
        return [f"{owner}: 'frame_vertices' has shape {a.shape}; it should be {expected} with V = "
                f"{vertex_count} vertices"]
    if field in ("transforms", "matrices") and (a.ndim != 3 or a.shape[1:] != (4, 4)):
        return [f"{owner}: '{field}' has shape {a.shape}; it should be {expected}"]
    if field == "velocity_gradient" and a.shape != (3, 3):
        return [f"{owner}: 'velocity_gradient' has shape {a.shape}; it should be {expected}"]
    if field in _VECTORS and a.shape != (3,):
        return [f"{owner}: '{field}' has shape {a.shape}; it should be {expected}"]
    if not np.all(np.isfinite(a)):
        return [f"{owner}: '{field}' holds values that are not finite (NaN or infinite)"]
    return []


def _map_problems(entry: dict, arrays: dict, owner: str) -> list[str]:
    """Problems with the name -> array maps of ``entry`` (``tracks``, a force field's ``values``)."""
    problems = []
    for fld in _ARRAY_MAPS:
        if fld not in entry:
            continue
        named = entry[fld]
        if not isinstance(named, dict) or not all(isinstance(k, str) for k in named):
            problems.append(f"{owner}: '{fld}' should map names to arrays, not {named!r}")
            continue
        for name, key in named.items():
            problems += _array_problems(arrays, key, f"{fld}.{name}", owner, None)
    return problems


def _plain_problems(entry: dict, owner: str) -> list[str]:
    problems = []
    for fld in _TEXT_FIELDS:
        if fld in entry and not isinstance(entry[fld], str):
            problems.append(f"{owner}: '{fld}' should be text, not {entry[fld]!r}")
    for fld, what in _PLAIN.items():
        if fld not in entry:
            continue
        ok = (_is_number(entry[fld]) and np.isfinite(entry[fld])) if what == "a number" else isinstance(entry[fld],
                                                                                                        dict)
        if not ok:
            problems.append(f"{owner}: '{fld}' should be {what}, not {entry[fld]!r}")
    channels = entry.get("channels", {})
    if isinstance(channels, dict) and not all(isinstance(k, str) and _is_number(v) for k, v in channels.items()):
        problems.append(f"{owner}: 'channels' should map names to numbers, not {channels!r}")
    return problems


def _object_problems(entry, kind: str, index: int, arrays: dict) -> list[str]:
    if not isinstance(entry, dict):
        return [f"{kind} {index + 1}: not a JSON object but {type(entry).__name__}"]
    name = entry.get("name")
    if not isinstance(name, str):
        return [f"{kind} {index + 1}: 'name' should be text, not {name!r}"]
    owner = f"{kind} '{name}'"
    problems = _plain_problems(entry, owner) + _map_problems(entry, arrays, owner)
    vertex_count = None
    if "vertices" in entry:
        found = _array_problems(arrays, entry["vertices"], "vertices", owner, None)
        problems += found
        if not found:
            vertex_count = len(arrays[entry["vertices"]])
    for fld, key in entry.items():
        if fld in ("vertices",) + _TEXT_FIELDS + _ARRAY_MAPS + tuple(_PLAIN):
            continue
        if fld == "triangles" or fld in _VECTORS or fld in ("transforms", "frame_vertices", "matrices",
                                                              "velocity_gradient"):
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
    problems += _map_problems(doc, arrays, "Scene")
    for key, kind in OBJECT_LISTS.items():
        entries = doc.get(key)
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


def _named_arrays(entry: dict, arrays: dict) -> dict[str, str]:
    """The arrays an entry names, directly or through its ``tracks`` and ``values`` maps:
    ``{"vertices": key, "tracks.velocity": key, ...}``."""
    out = {k: v for k, v in entry.items() if isinstance(v, str) and v in arrays}
    for fld in _ARRAY_MAPS:
        if isinstance(entry.get(fld), dict):
            out.update({f"{fld}.{k}": v for k, v in entry[fld].items() if isinstance(v, str) and v in arrays})
    return out


def _digest(entry: dict, arrays: dict) -> str:
    """SHA-256 of an entry: its JSON without the array keys (which carry the object's index: what they
    hold counts, not how they are named), and the dtype, shape and bytes of every array it names."""
    named = _named_arrays(entry, arrays)
    plain = {k: v for k, v in entry.items() if k not in named and k not in _ARRAY_MAPS}
    plain["arrays"] = sorted(named)
    return canonical_hash(plain, {fld: arrays[key] for fld, key in named.items()})


def object_hashes(doc: dict, arrays: dict) -> dict[str, str]:
    """SHA-256 of each object of a job (its JSON entry and the bytes of its arrays), keyed by the
    object's label ("Collider 'Tank'"); "Scene" covers the rest (gravity and its animation, first
    frame, frame rate)."""
    # the last frame may move (a bake extended by a resume); everything else of the scene counts
    out = {"Scene": _digest({k: v for k, v in doc.items() if k not in OBJECT_LISTS and k != "frame_end"}, arrays)}
    for key, kind in OBJECT_LISTS.items():
        for entry in doc.get(key, []):
            out[f"{kind} '{entry.get('name')}'"] = _digest(entry, arrays)
    return out


def scene_object_hashes(scene) -> dict[str, str]:
    """:func:`object_hashes` of an :class:`engine.scene.SceneDescription`, as its job folder would hold it."""
    from . import _arrays_and_json  # the job's own serialisation: the hashes match a saved job's

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
