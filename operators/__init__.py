"""Operators: thin wrappers that check, call the bridge, and report."""

from . import bake, keyframes, live, setup, surface, terminal, wedge, whitewater
from .bake import HANDLERS as _BAKE_HANDLERS

CLASSES = (setup.CLASSES + bake.CLASSES + terminal.CLASSES + keyframes.CLASSES + surface.CLASSES
           + whitewater.CLASSES + wedge.CLASSES + live.CLASSES)

#: (handler list name in bpy.app.handlers, function) pairs that register() adds and unregister() removes.
HANDLERS = _BAKE_HANDLERS + live.HANDLERS

__all__ = ["CLASSES", "HANDLERS"]
