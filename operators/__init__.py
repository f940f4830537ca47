"""Operators: thin wrappers that check, call the bridge, and report."""

from . import bake, keyframes, setup, surface, terminal, whitewater
from .bake import HANDLERS

CLASSES = (setup.CLASSES + bake.CLASSES + terminal.CLASSES + keyframes.CLASSES + surface.CLASSES
           + whitewater.CLASSES)

__all__ = ["CLASSES", "HANDLERS"]
