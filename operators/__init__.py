"""Operators: thin wrappers that check, call the bridge, and report."""

from .bake import CLASSES, HANDLERS

__all__ = ["CLASSES", "HANDLERS"]
