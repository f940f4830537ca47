"""Panels: the Surge tab in the 3D view's sidebar, Properties > Physics and Properties > Scene, the
Object menu's entries (Quick Effects, Surge Liquid), the bake's progress in the status bar, and the
kill box in the viewport. Drawing only."""

from . import live, menus, sidebar, viewport, wedge

# the Wedge panel is a child of the Bake panel: registered after it
CLASSES = sidebar.CLASSES + wedge.CLASSES + live.CLASSES + menus.CLASSES

#: (header or menu class, draw function) pairs that register() appends and unregister() removes.
HEADER_DRAWS = sidebar.HEADER_DRAWS + menus.MENU_DRAWS

__all__ = ["CLASSES", "HEADER_DRAWS", "viewport"]
