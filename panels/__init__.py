"""Panels: the Surge tab in the 3D view's sidebar, Properties > Physics, the bake's progress in the
status bar, and the kill box in the viewport. Drawing only."""

from . import viewport
from .sidebar import CLASSES, HEADER_DRAWS

__all__ = ["CLASSES", "HEADER_DRAWS", "viewport"]
