"""The kill box drawn in the 3D viewport while it is on, so the artist sees where liquid is removed.

A draw handler on the 3D view (``register`` adds it, ``unregister`` removes it). The ``gpu``
module is imported only when drawing: background mode registers the handler but never draws.
Kill box corners are Blender lengths (the bridge converts them to metres), so they are drawn as
they are, in world space.
"""

from __future__ import annotations

import bpy

#: Colour of the kill box's edges (RGBA, linear): the red Blender uses for things that remove or delete.
COLOR = (0.9, 0.2, 0.15, 1.0)

#: The corner pairs of a box's 12 edges; corner i has bit 0 for X, bit 1 for Y, bit 2 for Z (1: the max).
EDGES = ((0, 1), (2, 3), (4, 5), (6, 7), (0, 2), (1, 3), (4, 6), (5, 7), (0, 4), (1, 5), (2, 6), (3, 7))

#: The handle of the draw handler while the add-on is registered (None otherwise).
_handler = None


def kill_box_lines(lower, upper) -> list[tuple[float, float, float]]:
    """The 24 end points of the 12 edges of the box from ``lower`` to ``upper`` (for a LINES batch)."""
    corners = [tuple(upper[a] if i >> a & 1 else lower[a] for a in range(3)) for i in range(8)]
    return [corners[i] for edge in EDGES for i in edge]


def draw_kill_box(scene=None) -> None:
    """Draw ``scene``'s kill box (the context's scene by default) when it is on."""
    scene = scene or bpy.context.scene
    if scene is None or not scene.surge.use_kill_box:
        return
    import gpu
    from gpu_extras.batch import batch_for_shader

    shader = gpu.shader.from_builtin("UNIFORM_COLOR")
    batch = batch_for_shader(shader, "LINES",
                             {"pos": kill_box_lines(scene.surge.kill_box_min, scene.surge.kill_box_max)})
    shader.uniform_float("color", COLOR)
    gpu.state.depth_test_set("LESS_EQUAL")
    batch.draw(shader)
    gpu.state.depth_test_set("NONE")


def register() -> None:
    global _handler
    if _handler is None:
        _handler = bpy.types.SpaceView3D.draw_handler_add(draw_kill_box, (), "WINDOW", "POST_VIEW")


def unregister() -> None:
    global _handler
    if _handler is not None:
        bpy.types.SpaceView3D.draw_handler_remove(_handler, "WINDOW")
        _handler = None


def is_registered() -> bool:
    """True while the kill box's draw handler is installed."""
    return _handler is not None
