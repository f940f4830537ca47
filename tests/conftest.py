"""Shared pytest set-up.

Blender (the ``bpy`` module) reads its user configuration from ``BLENDER_USER_RESOURCES``; point
it at a temporary folder before any test imports ``bpy`` so that tests never touch ``~``.
"""

import os
import sys
import tempfile

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
if ROOT not in sys.path:
    sys.path.insert(0, ROOT)

if "BLENDER_USER_RESOURCES" not in os.environ:
    os.environ["BLENDER_USER_RESOURCES"] = tempfile.mkdtemp(prefix="surge_blender_user_")


def pytest_configure(config):
    config.addinivalue_line("markers", "slow: physics validation and long bakes; `pytest -m 'not slow'` is the fast "
                                       "layer to run on every change, the full suite is what CI runs")
    config.addinivalue_line("markers", "blender: runs inside real Blender (the bpy module)")
