"""``surge.bake_to_keyframes``: the cached liquid as plain keyframes (see ``bridge.keyframes``)."""

from __future__ import annotations

import bpy
from bpy.props import EnumProperty

from .common import NeedsBake
from ..bridge import keyframes
from ..engine.errors import EngineError

KEYFRAME_MODES = (
    ("OBJECTS", "Objects", f"One object per particle, an instance of the chosen mesh, with location keyframes; at "
                           f"most {keyframes.MAX_OBJECTS} particles"),
    ("SHAPE_KEYS", "Shape Keys", "One mesh with a vertex per particle and a shape key per frame, played by a "
                                 "single curve; for any particle count"),
)


class SURGE_OT_bake_to_keyframes(NeedsBake, bpy.types.Operator):
    """Turn the baked liquid into plain Blender animation that plays and renders without Surge"""

    bl_idname = "surge.bake_to_keyframes"
    bl_label = "Bake to Keyframes"
    # undoable, but not REGISTER: Adjust Last Operation would read every cached frame again
    bl_options = {"UNDO"}

    mode: EnumProperty(
        name="As", items=KEYFRAME_MODES, default="SHAPE_KEYS",
        description="Form of the animation: animated objects or one mesh with shape keys")

    busy_message = "Wait for the bake to end"

    def execute(self, context):
        try:
            text = keyframes.bake_to_keyframes(context.scene, self.mode)
        except (EngineError, OSError, keyframes.KeyframeError) as exc:
            self.report({"ERROR"}, str(exc))
            return {"CANCELLED"}
        self.report({"INFO"}, text)
        return {"FINISHED"}


CLASSES = (SURGE_OT_bake_to_keyframes,)
