"""Where the state of a running bake lives: the window manager, not the scene.

A modal bake publishes its progress up to ten times a second. Written into ``Scene`` data, those
figures would be saved with the file and make every bake mark it as changed; the window manager's
properties are never saved. ``WindowManager.surge_bakes`` holds one ``props.SurgeBakeState`` per
scene, keyed by the scene's ``session_uid`` (:func:`scene_key`): it survives renaming the scene and undo
(Blender pointers do not), so a scene renamed during its bake keeps its bake, its progress and its state.

:func:`get` only reads (panels and ``poll`` functions may not write Blender data); :func:`ensure`
creates the entry and is for the code that changes it.
"""

from __future__ import annotations

import bpy


def _window_manager():
    # bpy.context.window_manager is None in some contexts (a timer before any window exists)
    return bpy.context.window_manager or bpy.data.window_managers[0]


def scene_key(scene) -> str:
    """What a running bake calls its scene by: the scene's ``session_uid``, the same across renaming and undo
    for as long as the file is open (a copy of the scene gets its own)."""
    return str(scene.session_uid)


def scene_by_key(key: str):
    """The scene whose :func:`scene_key` is ``key``, or None once it was deleted (or the file closed)."""
    return next((s for s in bpy.data.scenes if str(s.session_uid) == key), None)


def get(scene):
    """The bake state of ``scene``, or None if it never baked in this session."""
    if scene is None:
        return None
    return _window_manager().surge_bakes.get(scene_key(scene))


def ensure(scene):
    """The bake state of ``scene``, created if needed."""
    bakes = _window_manager().surge_bakes
    state = bakes.get(scene_key(scene))
    if state is None:
        state = bakes.add()
        state.name = scene_key(scene)
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
