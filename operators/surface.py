"""``surge.bake_surface`` and ``surge.free_surface``: the liquid's surface mesh over an existing bake.

Like ``surge.bake``: ``execute`` blocks and prints progress (scripts, ``blender -b ... --python-expr
"import bpy; bpy.ops.surge.bake_surface()"``, where an ERROR report makes the call raise), ``invoke``
(the sidebar button) runs modal on a timer; Esc cancels and keeps the frames meshed so far.
"""

from __future__ import annotations

import bpy
from bpy.props import BoolProperty

from .common import FreeOperator, NeedsBake, StageOperator
from ..bridge import cache_state, freeing
from ..bridge.paths import ADDON_ROOT
from ..bridge.surface_bake import SurfaceSession, describe, free_surface
from ..engine.errors import EngineError


class SURGE_OT_bake_surface(NeedsBake, StageOperator, bpy.types.Operator):
    """Make the liquid's surface mesh for every baked frame (the particles stay as they are); frames already
    meshed with the same settings are kept"""

    bl_idname = "surge.bake_surface"
    bl_label = "Bake Surface"
    # not REGISTER: Repeat Last and Adjust Last Operation would run the blocking stage again
    bl_options = set()

    restart: BoolProperty(
        name="Mesh Every Frame Again", default=False, options={"SKIP_SAVE"},
        description="Mesh every frame again, even those already meshed with the current settings")

    describe = staticmethod(describe)

    def make_session(self, context):
        return SurfaceSession(context.scene, restart=self.restart)


class SURGE_OT_free_surface(FreeOperator, bpy.types.Operator):
    """Delete the baked surface only (asks first, naming how many files go and their size); the baked particles
    stay and play"""

    bl_idname = "surge.free_surface"
    bl_label = "Free Surface"
    bl_options = {"REGISTER"}
    kind_words = "baked surface"

    @classmethod
    def has_files(cls, scene) -> bool:
        return cache_state.has_surface(scene, ADDON_ROOT)

    def summary(self, scene):
        return freeing.surface_summary(scene, ADDON_ROOT)

    def execute(self, context):
        try:
            cache_dir, count = free_surface(context.scene)
        except (EngineError, OSError) as exc:
            self.report({"ERROR"}, str(exc))
            return {"CANCELLED"}
        self.report({"INFO"}, f"Removed {count} surface files from '{cache_dir}'")
        return {"FINISHED"}


CLASSES = (SURGE_OT_bake_surface, SURGE_OT_free_surface)
