"""Operators: thin wrappers that check, call the bridge, and report."""

from . import bake, keyframes, setup, surface, terminal, wedge, whitewater
from .bake import HANDLERS

CLASSES = (setup.CLASSES + bake.CLASSES + terminal.CLASSES + keyframes.CLASSES + surface.CLASSES
           + whitewater.CLASSES + wedge.CLASSES)

__all__ = ["CLASSES", "HANDLERS"]
