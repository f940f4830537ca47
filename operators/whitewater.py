"""``surge.bake_whitewater`` and ``surge.free_whitewater``: spray, foam and bubbles over an existing bake.

``bpy.ops.surge.bake_whitewater()`` blocks and prints progress from a script or in background mode
(``blender -b shot.blend --python-exit-code 1 --python-expr "import bpy; bpy.ops.surge.bake_whitewater()"``
fails visibly: an ERROR report makes the call raise); the sidebar button runs modal, and Esc cancels,
keeping the frames made so far. A run reports a WARNING when the particle cap bound.
"""

from __future__ import annotations

import bpy
from bpy.props import BoolProperty

from .common import FreeOperator, NeedsBake, StageOperator
from ..bridge import cache_state, freeing
from ..bridge.paths import ADDON_ROOT
from ..bridge.whitewater import WhitewaterSession, describe, free_whitewater
from ..engine.errors import EngineError


class SURGE_OT_bake_whitewater(NeedsBake, StageOperator, bpy.types.Operator):
    """Make spray, foam and bubbles from the baked liquid (the liquid stays as it is); frames already made
    with the same settings are kept"""

    bl_idname = "surge.bake_whitewater"
    bl_label = "Bake Whitewater"
    # not REGISTER: Repeat Last and Adjust Last Operation would run the blocking stage again
    bl_options = set()

    restart: BoolProperty(
        name="Make Every Frame Again", default=False, options={"SKIP_SAVE"},
        description="Make the whitewater of every frame again, even those already made with the current settings")

    describe = staticmethod(describe)

    def make_session(self, context):
        return WhitewaterSession(context.scene, restart=self.restart)


class SURGE_OT_free_whitewater(FreeOperator, bpy.types.Operator):
    """Delete the baked whitewater only (asks first, naming how many files go and their size); the baked liquid
    stays and plays"""

    bl_idname = "surge.free_whitewater"
    bl_label = "Free Whitewater"
    bl_options = {"REGISTER"}
    kind_words = "baked whitewater"

    @classmethod
    def has_files(cls, scene) -> bool:
        return cache_state.has_whitewater(scene, ADDON_ROOT)

    def summary(self, scene):
        return freeing.whitewater_summary(scene, ADDON_ROOT)

    def execute(self, context):
        try:
            cache_dir, count = free_whitewater(context.scene)
        except (EngineError, OSError) as exc:
            self.report({"ERROR"}, str(exc))
            return {"CANCELLED"}
        self.report({"INFO"}, f"Removed {count} whitewater files from '{cache_dir}'")
        return {"FINISHED"}


CLASSES = (SURGE_OT_bake_whitewater, SURGE_OT_free_whitewater)
