"""Shared pytest set-up.

Blender (the ``bpy`` module) reads its user configuration from ``BLENDER_USER_RESOURCES``; point
it at a folder of the test run before any test imports ``bpy`` so that tests never touch ``~``.

That folder is the same for every run of this repository (one per checkout, in the system's temporary
folder) and emptied at the start of each run except for the add-on's user data, which holds the
numba cache of the kernels its bakes compile (:func:`blender_user_folder`): the add-on is installed
there afresh every run, and its compiled kernels from the last run stay valid as long as its source
files did not change. A second run of the same checkout while one is running gets a fresh folder.
"""

import hashlib
import os
import shutil
import sys
import tempfile

import pytest

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
if ROOT not in sys.path:
    sys.path.insert(0, ROOT)

def blender_user_folder() -> str:
    """This checkout's Blender user folder for tests (one per test process of a run: ``gw0``, ``gw1``, ...
    under pytest-xdist), emptied but for the add-on's user data; held for this process (a lock file), or
    a new temporary folder when another run of this checkout holds it."""
    digest = hashlib.sha256(ROOT.encode("utf-8")).hexdigest()[:10]
    worker = os.environ.get("PYTEST_XDIST_WORKER") or "main"
    folder = os.path.join(tempfile.gettempdir(), f"surge_blender_user_{digest}_{worker}")
    os.makedirs(folder, exist_ok=True)
    lock = open(os.path.join(folder, ".test_run.lock"), "w")
    try:
        import fcntl

        fcntl.flock(lock, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except (ImportError, OSError):  # held by another run (or no fcntl): a folder of this run's own
        lock.close()
        return tempfile.mkdtemp(prefix="surge_blender_user_")
    globals()["_LOCK"] = lock  # held until this process ends
    for name in os.listdir(folder):
        path = os.path.join(folder, name)
        if name == ".test_run.lock":
            continue
        if name == "extensions":  # keep extensions/.user (the add-on's user data: its kernel cache)
            for sub in os.listdir(path):
                if sub != ".user":
                    shutil.rmtree(os.path.join(path, sub), ignore_errors=True)
            continue
        if os.path.isdir(path) and not os.path.islink(path):
            shutil.rmtree(path, ignore_errors=True)
        else:
            os.remove(path)
    return folder


# Every process that runs tests gets a Blender user folder of its own (two Blenders sharing one lock each
# other out of its extension repository): a test process of pytest-xdist replaces the folder it inherited
# from the process that started it. Set before anything imports bpy (tests/blender/conftest.py does).
if ("BLENDER_USER_RESOURCES" not in os.environ
        or os.environ.get("SURGE_TEST_BLENDER_USER") == os.environ["BLENDER_USER_RESOURCES"]
        and os.environ.get("PYTEST_XDIST_WORKER")):
    os.environ["BLENDER_USER_RESOURCES"] = os.environ["SURGE_TEST_BLENDER_USER"] = blender_user_folder()

# One numba cache for the engine's kernels in the test processes and in the bakes they start as child
# processes (which inherit this environment): compiled once per source change, not once per process
# kind. Kept in the system's temporary folder, per checkout (numba names its folders after the source
# folders). Set before anything imports numba.
if "NUMBA_CACHE_DIR" not in os.environ:
    os.environ["NUMBA_CACHE_DIR"] = os.path.join(tempfile.gettempdir(), "surge_tests_numba_cache")


@pytest.hookimpl(tryfirst=True)  # before pytest-xdist reads the groups
def pytest_collection_modifyitems(config, items):
    """Every test inside Blender goes to one process when the suite runs in several (``tools/test.sh``
    runs two, ``--dist loadgroup``): they share one installed add-on and its compiled kernels, while
    the engine's tests run beside them in the other process."""
    blender = os.path.join("tests", "blender") + os.sep
    for item in items:
        if os.path.relpath(str(item.path), ROOT).startswith(blender):
            item.add_marker(pytest.mark.xdist_group("blender"))


def pytest_configure(config):
    config.addinivalue_line("markers", "slow: physics validation and long bakes; `pytest -m 'not slow'` is the fast "
                                       "layer to run on every change, the full suite is what CI runs")
    config.addinivalue_line("markers", "blender: runs inside real Blender (the bpy module)")
