"""Operators: thin wrappers that check, call the bridge, and report."""

from . import bake, setup
from .bake import HANDLERS

CLASSES = setup.CLASSES + bake.CLASSES

__all__ = ["CLASSES", "HANDLERS"]
