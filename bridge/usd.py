"""Baked frames as USD files, the form Blender plays back without Surge.

The writers live in :mod:`engine.io.usd` (the bake's child process writes the files, not Blender's
process; see the file formats there); this module finds the ``pxr`` that ships inside Blender, which
Blender as a Python module does not put on ``sys.path``, so that both this process and the child
(whose ``PYTHONPATH`` is this process's ``sys.path``) can import it.
"""

from __future__ import annotations

from ..engine.io import usd as _engine_usd
from ..engine.io.usd import (PRIM_PATH, SURFACE_PRIM_PATH, SURFACE_SPRAY_PRIM_PATH, read_mesh,  # noqa: F401
                             write_frame, write_mesh)


def import_pxr():
    """The ``pxr`` modules the writers use, from Blender's bundled copy if needed.

    Returns
    -------
    tuple
        ``(Sdf, Usd, UsdGeom, Vt)``.

    Raises
    ------
    OSError
        If no ``pxr`` can be found (a Blender build without USD).
    """
    import bpy  # only to locate Blender's bundled Python; the writer itself needs no Blender

    _engine_usd.ensure_pxr(python_root=bpy.utils.system_resource("PYTHON"))
    return _engine_usd.import_pxr()
