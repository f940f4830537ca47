"""Fixtures for tests inside real Blender (the ``bpy`` module, one Blender per test process).

The add-on is installed once per session the way a user installs it: the extension zip built by
``tools/build_extension.py``, installed with ``extensions.package_install_files`` and enabled.
Until that tool exists, or with ``SURGE_TEST_FROM_SOURCE=1`` (quicker while developing), the source
tree is enabled through a local extension repository instead. Tests take the module name from the
``surge`` fixture and never assume it: it is ``bl_ext.user_default.surge`` when installed and
``bl_ext.dev.<folder>`` from source.

Every test that uses ``scene`` starts from an empty file (``read_homefile(use_empty=True)``, which
keeps the add-on enabled).
"""

from __future__ import annotations

import importlib
import importlib.util
import os
import tempfile

import numba
import pytest

# Engine kernels compiled inside this process for the add-on from source (bl_ext.dev.<folder>.engine)
# have the source tree's file names: numba's cache records the module name, and a cache they share
# with the plain `engine` of the tests (tests/conftest.py) would later be loaded by a plain `engine`
# process and fail to import bl_ext. Keep them in a folder of their own; it must be set before the
# add-on's engine modules are imported. (The installed add-on's files have names of their own.)
if os.environ.get("SURGE_TEST_FROM_SOURCE"):
    numba.config.CACHE_DIR = os.path.join(tempfile.gettempdir(), "surge_blender_tests_numba_cache")

bpy = pytest.importorskip("bpy")
import addon_utils  # noqa: E402  (part of Blender: only importable once bpy is)

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
DEV_REPO_MODULE = "dev"


def _build_tool():
    """``tools/build_extension.py``'s ``build`` function, or None while the tool does not exist."""
    path = os.path.join(ROOT, "tools", "build_extension.py")
    if os.environ.get("SURGE_TEST_FROM_SOURCE") or not os.path.isfile(path):
        return None
    spec = importlib.util.spec_from_file_location("surge_build_extension", path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return getattr(module, "build", None)


def _raise(exc):
    raise RuntimeError(f"Surge could not be enabled: {exc}") from exc


def _install_zip(build, out_dir: str) -> str:
    zips = build(out_dir, platforms=["current"])
    assert len(zips) == 1, f"expected one zip for this platform, got {zips}"
    result = bpy.ops.extensions.package_install_files(filepath=zips[0], repo="user_default",
                                                      enable_on_install=True)
    assert result == {"FINISHED"}, result
    _keep_source_times(importlib.import_module("bl_ext.user_default.surge"))
    return "bl_ext.user_default.surge"


def _keep_source_times(module) -> None:
    """Give the installed add-on's Python files the modification times of the files they were built from.

    Installing unpacks the zip with the current time; numba's cache of a kernel is valid only for the
    source file's size and time it was compiled from. With the source's times, the kernels the last test
    run compiled (kept in the add-on's user folder, see ``tests/conftest.py``) load instead of compiling
    again, for every file that did not change since.
    """
    installed = os.path.dirname(module.__file__)
    for base, _dirs, names in os.walk(installed):
        for name in names:
            if name.endswith(".py"):
                path = os.path.join(base, name)
                source = os.path.join(ROOT, os.path.relpath(path, installed))
                if os.path.isfile(source) and os.path.getsize(source) == os.path.getsize(path):
                    st = os.stat(source)
                    os.utime(path, ns=(st.st_atime_ns, st.st_mtime_ns))


def _enable_from_source() -> str:
    repos = bpy.context.preferences.extensions.repos
    if not any(r.module == DEV_REPO_MODULE for r in repos):
        repos.new(name="Dev", module=DEV_REPO_MODULE, custom_directory=os.path.dirname(ROOT), source="USER")
    module = f"bl_ext.{DEV_REPO_MODULE}.{os.path.basename(ROOT)}"
    addon_utils.enable(module, default_set=True, handle_error=_raise)
    return module


@pytest.fixture(scope="session")
def surge(tmp_path_factory):
    """The enabled add-on's top-level module (its name says how it was installed)."""
    build = _build_tool()
    if build is not None:
        name = _install_zip(build, str(tmp_path_factory.mktemp("dist")))
    else:
        name = _enable_from_source()
    module = importlib.import_module(name)
    assert hasattr(bpy.types.Scene, "surge"), f"{name} is enabled but Scene.surge is missing"
    return module


@pytest.fixture
def scene(surge):
    """An empty scene with frames 1-3 at 24 fps, the add-on enabled."""
    bpy.ops.wm.read_homefile(use_empty=True)
    sc = bpy.context.scene
    sc.frame_start, sc.frame_end = 1, 3
    sc.render.fps, sc.render.fps_base = 24, 1.0
    return sc
