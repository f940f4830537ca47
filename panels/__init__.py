"""Panels: the Surge tab in the 3D view's sidebar. Drawing only."""

from .sidebar import CLASSES

__all__ = ["CLASSES"]
