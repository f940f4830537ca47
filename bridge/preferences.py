"""The add-on's preferences (``props.SurgePreferences``) as the rest of the add-on reads them.

Outside an installed add-on (the preferences are not registered, e.g. a script importing the
package) every function returns the default.
"""

from __future__ import annotations

import bpy

#: The add-on's top-level package: the key of its preferences.
ADDON_PACKAGE = __package__.rpartition(".")[0]


def get():
    """The add-on's preferences, or None if they are not registered."""
    addon = bpy.context.preferences.addons.get(ADDON_PACKAGE)
    return addon.preferences if addon is not None else None


def bake_threads() -> int:
    """Most threads a bake may use; 0 lets it use every core."""
    prefs = get()
    return int(prefs.bake_threads) if prefs is not None else 0


def cache_root() -> str:
    """Folder that holds the default cache folders, '' for ``surge_cache`` beside each .blend file."""
    prefs = get()
    return prefs.cache_root.strip() if prefs is not None else ""
