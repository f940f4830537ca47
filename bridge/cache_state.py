"""What the scene's cache folder holds and whether it still matches the scene, for ``poll()`` and the panels.

Everything here is cheap enough to run on every redraw: a few ``stat`` calls, and the manifest read again
only when its file changed (kept by path, modification time and size). It never writes Blender data.

* ``has_*``: whether a button has something to act on (Resume a checkpoint, Bake Surface a bake, ...);
* :func:`outdated`: what changed since the cached frames were baked, shown before the artist presses
  anything. The settings are compared with those the manifest records (the same comparison the resume
  dialog makes); the objects with a signature of each object that takes part (role, Surge settings,
  transform, mesh, modifiers), written beside the job when the bake starts (:func:`write_objects`);
* :func:`playing`: which cache the liquid object plays (the bake, its preview, another folder).

The object signature is computed from Blender's data, not from the exported scene (that would step
through every frame of the range on each redraw): it sees what an artist edits (moving, reshaping,
adding modifiers, changing roles and settings, keying) and not the inside of a modifier's settings.
"""

from __future__ import annotations

import hashlib
import json
import os

import numpy as np

from ..engine import settings as settings_mod
from ..engine.errors import EngineError
from ..engine.io import atomic
from ..engine.io import cache as cache_mod
from ..engine.io import checkpoint
from ..engine.surface import stage as surface_stage
from ..engine.whitewater import stage as ww_stage
from . import files

_manifests: dict[str, tuple] = {}  # path -> ((mtime_ns, size), document)


def cache_dir(scene, addon_root: str) -> str | None:
    """The scene's cache folder, or None while it cannot be resolved (an unsaved file, say)."""
    try:
        return files.resolve_cache_dir(scene, addon_root)
    except (EngineError, OSError):
        return None


def read_json(path: str):
    """The JSON document at ``path``, read again only when the file changed; None if it cannot be read."""
    try:
        st = os.stat(path)
    except OSError:
        _manifests.pop(path, None)
        return None
    stamp = (st.st_mtime_ns, st.st_size)
    known = _manifests.get(path)
    if known is not None and known[0] == stamp:
        return known[1]
    try:
        with open(path, encoding="utf-8") as fh:
            doc = json.load(fh)
    except (OSError, ValueError):
        doc = None
    _manifests[path] = (stamp, doc)
    return doc


def manifest(folder: str) -> dict | None:
    """The particle cache's manifest in ``folder`` (cached), or None."""
    doc = read_json(os.path.join(folder, cache_mod.MANIFEST))
    return doc if isinstance(doc, dict) and doc.get("format") == cache_mod.FORMAT_NAME else None


# -- what a button can act on ----------------------------------------------------------------------------

def has_frames(scene, addon_root: str) -> bool:
    """True if the scene's cache folder holds a particle cache (Bake Surface and the like have work)."""
    folder = cache_dir(scene, addon_root)
    return folder is not None and os.path.isfile(os.path.join(folder, cache_mod.MANIFEST))


def has_checkpoint(scene, addon_root: str) -> bool:
    """True if the scene's cache folder holds a checkpoint file (Resume has something to start from; its
    dialog then checks that the frames before it are all there)."""
    folder = cache_dir(scene, addon_root)
    if folder is None:
        return False
    sub = os.path.join(folder, cache_mod.CHECKPOINT_DIR)
    return os.path.isdir(sub) and any(cache_mod.CHECKPOINT_RE.match(n) for n in os.listdir(sub))


def has_usd(scene, addon_root: str) -> bool:
    """True if the scene's cache folder holds a bake's point files (Load Baked Liquid has something to show)."""
    folder = cache_dir(scene, addon_root)
    return folder is not None and bool(files.usd_bake_dirs(folder))


def has_bake(scene, addon_root: str) -> bool:
    """True if the scene's cache folder holds anything: Free Bake has work, or a reason to refuse (a folder
    that is not a Surge cache's is refused when pressed, with the files that make it so)."""
    folder = cache_dir(scene, addon_root)
    return folder is not None and os.path.isdir(folder) and bool(os.listdir(folder))


def _has_stage(scene, addon_root: str, name: str) -> bool:
    folder = cache_dir(scene, addon_root)
    return folder is not None and os.path.isdir(os.path.join(folder, name))


def has_surface(scene, addon_root: str) -> bool:
    """True if the scene's cache folder holds surface files: Free Surface has work."""
    return _has_stage(scene, addon_root, surface_stage.NAME)


def has_whitewater(scene, addon_root: str) -> bool:
    """True if the scene's cache folder holds whitewater files: Free Whitewater has work."""
    return _has_stage(scene, addon_root, ww_stage.NAME)


# -- the objects' signatures -------------------------------------------------------------------------------

def _digest(*parts) -> str:
    # BLAKE2 rather than SHA-256: about twice as fast, and this runs on redraws
    h = hashlib.blake2b(digest_size=8)
    for part in parts:
        h.update(part if isinstance(part, bytes) else repr(part).encode("utf-8"))
    return h.hexdigest()


def object_signature(obj) -> str:
    """A short hash of what a bake reads from ``obj`` and an artist edits: role and Surge settings, the
    transform (the action instead, for an animated object: its frames are the bake's business), the
    mesh's vertices and faces, the modifiers' types and switches."""
    group = obj.surge
    values = []
    for prop in group.bl_rna.properties:
        name = prop.identifier
        if name in ("rna_type", "collider_resolved", "channels", "name") or prop.is_hidden:
            continue  # what the bake wrote back, the list's selection, the display Surge remembers
        value = getattr(group, name)
        values.append((name, tuple(value) if hasattr(value, "__len__") and not isinstance(value, str) else value))
    values.append(("channels", [(c.name, round(c.value, 6)) for c in group.channels]))
    animation = obj.animation_data
    action = animation.action.name if animation is not None and animation.action is not None else None
    transform = action or np.array(obj.matrix_basis, dtype=np.float32).tobytes()
    parent = obj.parent.name if obj.parent is not None else None
    geometry = (obj.type,)
    data = obj.data
    if obj.type == "MESH" and data is not None:
        # the vertices' positions, and the topology by its counts (reading every face corner would double
        # the time of a redraw for a large collider, and an edit that keeps every count moves vertices too)
        co = np.empty(len(data.vertices) * 3, dtype=np.float32)
        data.vertices.foreach_get("co", co)
        geometry = (obj.type, co.tobytes(), len(data.edges), len(data.polygons), len(data.loops),
                    data.shape_keys is not None)
    elif data is not None:
        geometry = (obj.type, data.name, tuple(round(d, 6) for d in obj.dimensions))
    modifiers = [(m.type, m.name, m.show_viewport, m.show_render) for m in obj.modifiers]
    constraints = [(c.type, c.name, c.enabled) for c in obj.constraints]
    return _digest(values, transform, parent, *geometry, modifiers, constraints)


def objects_signature(scene) -> dict[str, str]:
    """``{object name: signature}`` of every object of ``scene`` that takes part in the simulation."""
    return {obj.name: object_signature(obj) for obj in sorted(scene.objects, key=lambda o: o.name)
            if obj.surge.role != "NONE"}


def objects_path(folder: str) -> str:
    return os.path.join(files.job_dir(folder), files.OBJECTS_FILE)


def write_objects(folder: str, signature: dict) -> None:
    """Record the objects' signatures of the bake now in ``folder`` (called once the bake replaced the
    previous one in the folder, from the signatures taken when it started)."""
    os.makedirs(files.job_dir(folder), exist_ok=True)
    atomic.write_json(objects_path(folder), signature)


# -- outdated -------------------------------------------------------------------------------------------------

def _animated(scene) -> set[str]:
    """Names of the scene's Surge settings driven by keyframes or drivers: the bake reads them per frame, so
    the value at the current frame says nothing about the set-up."""
    animation = scene.animation_data
    if animation is None:
        return set()
    paths = {d.data_path for d in animation.drivers}
    if animation.action is not None:
        from bpy_extras import anim_utils

        bag = anim_utils.action_get_channelbag_for_slot(animation.action, animation.action_slot)
        if bag is not None:
            paths |= {fc.data_path for fc in bag.fcurves}
    return {p.removeprefix("surge.") for p in paths if p.startswith("surge.")}


def outdated(scene, addon_root: str, settings=None, frame_range: tuple[int, int] | None = None,
             fps: float | None = None) -> list[str]:
    """What changed since the frames in the scene's cache folder were baked, as phrases for the panel
    (empty: nothing, or no bake to compare with).

    ``settings`` are the scene's engine settings now (``bridge.export.settings_from_scene``) and
    ``frame_range`` the frames the next bake would simulate, ``fps`` its frames per simulated second (the
    frame rate over the time scale).
    """
    folder = cache_dir(scene, addon_root)
    doc = manifest(folder) if folder is not None else None
    if doc is None:
        return []
    out = []
    if settings is not None:
        animated = _animated(scene)
        names = [n for n in checkpoint.changed_settings(doc, settings_mod.to_dict(settings)) if n not in animated]
        if names:
            labels = {p.name: p.label for p in settings_mod.parameters()}
            out.append("settings " + ", ".join(labels.get(n, n) for n in names))
    if frame_range is not None and "frame_start" in doc and "frame_end" in doc:
        if (int(doc["frame_start"]), int(doc["frame_end"])) != tuple(frame_range):
            out.append(f"frame range (baked {doc['frame_start']}-{doc['frame_end']})")
    if fps is not None and doc.get("fps") and abs(float(doc["fps"]) - fps) > 1e-6 * fps:
        out.append("frame rate or time scale")
    baked = read_json(objects_path(folder))
    if isinstance(baked, dict):
        now = objects_signature(scene)
        changed = sorted(n for n in set(now) | set(baked) if now.get(n) != baked.get(n))
        if changed:
            shown = ", ".join(f"'{n}'" for n in changed[:3]) + (f" and {len(changed) - 3} more" if len(changed) > 3
                                                                 else "")
            out.append(f"object{'s' if len(changed) > 1 else ''} {shown}")
    return out


# -- which cache the liquid plays -------------------------------------------------------------------------------

def playing(scene, addon_root: str, shown_file: str | None) -> str:
    """One line on what the liquid object plays (``shown_file``: the file its cache points at), or ''."""
    if not shown_file:
        return ""
    usd_root = files.usd_cache_folder(shown_file)
    folder = cache_dir(scene, addon_root)
    if usd_root is None:
        return f"Playing '{os.path.dirname(shown_file)}', outside a Surge cache folder"
    doc = manifest(usd_root) or {}
    frames = doc.get("frames") or []
    span = f"frames {frames[0]}-{frames[-1]}" if frames else "no frames"
    status = doc.get("status")
    ended = "" if status in ("complete", None) else f", {status}"
    if folder is not None and os.path.normpath(usd_root) == os.path.normpath(files.preview_dir(folder)):
        return f"Playing the preview ({span}, coarser particles); Bake replaces it"
    if folder is None or os.path.normpath(usd_root) != os.path.normpath(folder):
        return f"Playing the bake in '{usd_root}' ({span}{ended}), not this scene's cache folder"
    newest = max(files.usd_bake_dirs(folder), key=os.path.getmtime, default=None)
    if newest is not None and os.path.normpath(newest) != os.path.normpath(os.path.dirname(shown_file)):
        return f"Playing an older bake than the cache's latest ({span}{ended}); Load Baked Liquid shows the latest"
    return f"Playing the bake of {span}{ended}"
