"""Enable Surge from this source tree inside Blender-as-a-module, without building a zip; build, save
and bake a shot for the scripts that make one (the demo, the showcases).

Blender loads extensions from repositories; a repository is a folder of add-on folders. A
temporary folder holding one link named ``surge`` to the source tree makes the add-on importable
as ``bl_ext.<repo module>.surge`` whatever the checkout folder is called.
"""

from __future__ import annotations

import argparse
import os
import tempfile
import time

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


def shot_parser(description: str, spacing: float, frames: int, out: str) -> argparse.ArgumentParser:
    """The options every shot script takes: ``--spacing`` (m), ``--frames`` (last frame, 24 fps),
    ``--samples``, ``--resolution`` (percentage of 1280 x 720) and ``--out`` (folder)."""
    ap = argparse.ArgumentParser(description=description)
    ap.add_argument("--spacing", type=float, default=spacing, help="particle spacing, m")
    ap.add_argument("--frames", type=int, default=frames, help="last frame (24 fps)")
    ap.add_argument("--samples", type=int, default=32)
    ap.add_argument("--resolution", type=int, default=50, help="percentage of 1280 x 720")
    ap.add_argument("--out", default=out)
    return ap


def bake_shot(root: str, out: str, name: str, build, spacing: float, frames: int) -> tuple[str, float]:
    """Enable Surge from ``root``, build the scene (``build(spacing, frames)``), save it as
    ``<out>/<name>.blend`` and bake it with ``bpy.ops.surge.bake()`` as a render-farm node would
    (it blocks in background mode and raises RuntimeError on failure).

    Returns the path of the .blend and the bake's wall time in seconds.
    """
    out = os.path.abspath(out)
    os.makedirs(out, exist_ok=True)
    enable_from_source(root, tempfile.mkdtemp(prefix=f"{name}_repo_"))
    build(spacing, frames)
    blend = os.path.join(out, f"{name}.blend")
    bpy.ops.wm.save_as_mainfile(filepath=blend)
    t0 = time.perf_counter()
    bpy.ops.surge.bake()
    return blend, time.perf_counter() - t0
