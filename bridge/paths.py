"""Where the add-on lives: its package name, its folder (which holds ``engine/``, run by the child
processes) and its user folder for numba's compiled kernels. Imported by every bridge module that
starts a child process; imports nothing of the add-on.
"""

from __future__ import annotations

import os
import tempfile

import bpy

#: The add-on's package (``bl_ext.<repo>.surge`` when installed); never hard-coded, since it depends
#: on the repository the extension was installed into.
ADDON_PACKAGE = __package__.rpartition(".")[0]

#: The add-on's folder: it holds ``engine/``, which the child process runs.
ADDON_ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))

#: Folder of the liquid presets in Blender's preset folders (``scripts/presets/surge/liquids``).
PRESET_SUBDIR = "surge/liquids"


def numba_cache_dir() -> str:
    """A writable folder for numba's compiled kernels, kept between bakes and Blender sessions."""
    try:
        return bpy.utils.extension_path_user(ADDON_PACKAGE, path="numba_cache", create=True)
    except ValueError:
        # not loaded as an extension (a legacy add-on install): no per-extension user folder exists
        path = os.path.join(tempfile.gettempdir(), "surge_numba_cache")
        os.makedirs(path, exist_ok=True)
        return path
