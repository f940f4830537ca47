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

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
if ROOT not in sys.path:
    sys.path.insert(0, ROOT)

def blender_user_folder() -> str:
    """This checkout's Blender user folder for tests, emptied but for :data:`KEPT`; held for this process
    (a lock file), or a new temporary folder when another run of this checkout holds it."""
    digest = hashlib.sha256(ROOT.encode("utf-8")).hexdigest()[:10]
    folder = os.path.join(tempfile.gettempdir(), f"surge_blender_user_{digest}")
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


if "BLENDER_USER_RESOURCES" not in os.environ:
    os.environ["BLENDER_USER_RESOURCES"] = blender_user_folder()


def pytest_configure(config):
    config.addinivalue_line("markers", "slow: physics validation and long bakes; `pytest -m 'not slow'` is the fast "
                                       "layer to run on every change, the full suite is what CI runs")
    config.addinivalue_line("markers", "blender: runs inside real Blender (the bpy module)")
