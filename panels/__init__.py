"""Panels: the Surge tab in the 3D view's sidebar, Properties > Physics, the bake's progress in the
status bar, and the kill box in the viewport. Drawing only."""

from . import live, sidebar, viewport, wedge
from .sidebar import HEADER_DRAWS

# the Wedge panel is a child of the Bake panel: registered after it
CLASSES = sidebar.CLASSES + wedge.CLASSES + live.CLASSES

__all__ = ["CLASSES", "HEADER_DRAWS", "viewport"]
