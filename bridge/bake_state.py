"""Where the state of a running bake lives: the window manager, not the scene.

A modal bake publishes its progress up to ten times a second. Written into ``Scene`` data, those
figures would be saved with the file and make every bake mark it as changed; the window manager's
properties are never saved. ``WindowManager.surge_bakes`` holds one ``props.SurgeBakeState`` per
scene, keyed by the scene's name (as the bake itself refers to its scene: Blender pointers do not
survive undo).

:func:`get` only reads (panels and ``poll`` functions may not write Blender data); :func:`ensure`
creates the entry and is for the code that changes it.
"""

from __future__ import annotations

import bpy


def _window_manager():
    # bpy.context.window_manager is None in some contexts (a timer before any window exists)
    return bpy.context.window_manager or bpy.data.window_managers[0]


def get(scene):
    """The bake state of ``scene``, or None if it never baked in this session."""
    if scene is None:
        return None
    return _window_manager().surge_bakes.get(scene.name)


def ensure(scene):
    """The bake state of ``scene``, created if needed."""
    bakes = _window_manager().surge_bakes
    state = bakes.get(scene.name)
    if state is None:
        state = bakes.add()
        state.name = scene.name
    return state


def is_baking(scene) -> bool:
    """True while a bake of ``scene`` runs in this Blender."""
    state = get(scene)
    return state is not None and state.is_baking


def status(scene) -> str:
    """What the last or current bake of ``scene`` did ('' if none ran in this session)."""
    state = get(scene)
    return state.status if state is not None else ""


def set_status(scene, text: str) -> None:
    ensure(scene).status = text


def clear_all() -> None:
    """Forget every scene's bake state (a file was loaded: no bake survives that)."""
    for wm in bpy.data.window_managers:
        wm.surge_bakes.clear()
