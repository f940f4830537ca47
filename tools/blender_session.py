"""Enable Surge from this source tree inside Blender-as-a-module, without building a zip.

Blender loads extensions from repositories; a repository is a folder of add-on folders. A
temporary folder holding one link named ``surge`` to the source tree makes the add-on importable
as ``bl_ext.<repo module>.surge`` whatever the checkout folder is called.
"""

from __future__ import annotations

import os

import bpy  # first: Blender's own modules (addon_utils) become importable only after bpy

import addon_utils  # noqa: E402

REPO_MODULE = "surge_source"


def enable_from_source(root: str, repo_dir: str) -> str:
    """Register ``root`` as the add-on ``surge`` of a local repository and enable it.

    Returns the add-on's module name (``bl_ext.surge_source.surge``).
    """
    os.makedirs(repo_dir, exist_ok=True)
    link = os.path.join(repo_dir, "surge")
    if not os.path.exists(link):
        os.symlink(root, link, target_is_directory=True)
    repos = bpy.context.preferences.extensions.repos
    if not any(r.module == REPO_MODULE for r in repos):
        repos.new(name="Surge source", module=REPO_MODULE, custom_directory=repo_dir, source="USER")
    module = f"bl_ext.{REPO_MODULE}.surge"
    addon_utils.enable(module, default_set=True, handle_error=_raise)
    return module


def _raise(exc: Exception) -> None:
    raise RuntimeError(f"Surge could not be enabled: {exc}") from exc
