"""The default cache folder of a scene: one per .blend file and scene.

A scene whose Cache Directory is empty bakes into ``<root>/<file>/<scene>/``, where ``<root>`` is
the preferences' cache root, or ``//surge_cache`` beside the .blend file, and ``<scene>`` the scene's
name when it first baked (:func:`folder_name`: renaming the scene later keeps its cache). Names are made safe for
every file system; when that changes a name (two scenes "Shot 1" and "Shot_1"), a short hash of
the exact name keeps them apart. With a cache root of its own, the file's folder name also carries
a hash of the file's full path, so that two files of the same name in different folders do not
share a cache.
"""

from __future__ import annotations

import hashlib
import os

import bpy

from . import preferences

#: Folder of the default caches beside the .blend file, when no cache root is set.
BESIDE_FILE_ROOT = "//surge_cache"


def _short_hash(text: str) -> str:
    return hashlib.sha256(text.encode("utf-8")).hexdigest()[:8]


def safe_name(name: str) -> str:
    """``name`` as a folder name: only letters, digits, '-' and '_'; a hash suffix when that changed it."""
    clean = "".join(c if c.isalnum() or c in "-_" else "_" for c in name) or "_"
    return clean if clean == name else f"{clean}_{_short_hash(name)}"


def folder_name(scene) -> str:
    """The name the scene's default folder is made from: the scene's name when its first bake started (kept
    in ``Scene.surge.cache_folder_name``, so that renaming the scene later keeps its cache), else its name.

    A copy of the scene (Blender copies the stored name with it) goes by its own name while the original,
    still called by the stored name, keeps the folder.
    """
    stored = scene.surge.cache_folder_name
    if not stored or stored == scene.name:
        return scene.name
    original = any(other != scene and other.name == stored and other.surge.cache_folder_name == stored
                   for other in bpy.data.scenes)
    return scene.name if original else stored


def keep_folder_name(scene) -> None:
    """Fix the name of the scene's default folder (at its first bake): renaming the scene afterwards keeps it."""
    if not scene.surge.cache_folder_name:
        scene.surge.cache_folder_name = folder_name(scene)


def default_cache_dir(scene) -> str:
    """The default Cache Directory of ``scene`` as Blender would store it (``//...`` beside the file when no
    cache root is set), or '' while the file has never been saved (its name is not known yet)."""
    blend = bpy.data.filepath
    if not blend:
        return ""
    stem = safe_name(os.path.splitext(os.path.basename(blend))[0])
    root = preferences.cache_root()
    if root:
        # files of the same name in different folders share a cache root: tell them apart by their path
        folder = f"{stem}_{_short_hash(os.path.normcase(os.path.abspath(blend)))}"
        return os.path.join(root, folder, safe_name(folder_name(scene))) + os.sep
    return f"{BESIDE_FILE_ROOT}/{stem}/{safe_name(folder_name(scene))}/"


def cache_directory(scene) -> str:
    """The Cache Directory ``scene`` bakes into: its own setting, or the default one."""
    return scene.surge.cache_directory.strip() or default_cache_dir(scene)
