"""Operators: thin wrappers that check, call the bridge, and report."""

from . import bake, keyframes, setup
from .bake import HANDLERS

CLASSES = setup.CLASSES + bake.CLASSES + keyframes.CLASSES

__all__ = ["CLASSES", "HANDLERS"]
