"""Panels: the Surge tab in the 3D view's sidebar, and the bake's progress in the status bar. Drawing only."""

from .sidebar import CLASSES, HEADER_DRAWS

__all__ = ["CLASSES", "HEADER_DRAWS"]
