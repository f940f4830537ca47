"""``surge.bake_surface`` and ``surge.free_surface``: the liquid's surface mesh over an existing bake.

Like ``surge.bake``: ``execute`` blocks and prints progress (scripts, ``blender -b ... --python-expr
"import bpy; bpy.ops.surge.bake_surface()"``, where an ERROR report makes the call raise), ``invoke``
(the sidebar button) runs modal on a timer; Esc cancels and keeps the frames meshed so far.
"""

from __future__ import annotations

import bpy
from bpy.props import BoolProperty

from .common import SceneIdle
from ..bridge.surface_bake import SurfaceSession, describe, free_surface
from ..engine.errors import EngineError

POLL_INTERVAL = 0.1


def _redraw_sidebars(context) -> None:
    for window in context.window_manager.windows:
        for area in window.screen.areas:
            if area.type == "VIEW_3D":
                area.tag_redraw()


class SURGE_OT_bake_surface(SceneIdle, bpy.types.Operator):
    """Make the liquid's surface mesh for every baked frame (the particles stay as they are); frames already
    meshed with the same settings are kept"""

    bl_idname = "surge.bake_surface"
    bl_label = "Bake Surface"
    bl_options = {"REGISTER", "UNDO"}
    busy_message = "This scene is baking; wait for it to end or press Esc to cancel it"

    restart: BoolProperty(
        name="Mesh Every Frame Again", default=False, options={"SKIP_SAVE"},
        description="Mesh every frame again, even those already meshed with the current settings")

    def _finish(self, session) -> set:
        result = session.finish()
        if bpy.app.background:
            print(f"Surge: {result.message}", flush=True)
        self.report({"INFO"} if result.status == "complete" else {"WARNING"}, result.message)
        return {"FINISHED"}

    def execute(self, context):
        try:
            session = SurfaceSession(context.scene, restart=self.restart)
        except (EngineError, OSError) as exc:
            self.report({"ERROR"}, str(exc))
            return {"CANCELLED"}
        try:
            while not session.finished:
                for event in session.poll(timeout=0.5):
                    text = describe(event)
                    if text and bpy.app.background:
                        print(f"Surge: {text}", flush=True)
            return self._finish(session)
        except (EngineError, OSError) as exc:
            self.report({"ERROR"}, str(exc))
            return {"CANCELLED"}
        finally:
            if not session.finished:
                session.abort()

    def invoke(self, context, event):
        if bpy.app.background:
            return self.execute(context)
        try:
            self._session = SurfaceSession(context.scene, restart=self.restart)
        except (EngineError, OSError) as exc:
            self.report({"ERROR"}, str(exc))
            return {"CANCELLED"}
        wm = context.window_manager
        self._timer = wm.event_timer_add(POLL_INTERVAL, window=context.window)
        wm.modal_handler_add(self)
        return {"RUNNING_MODAL"}

    def modal(self, context, event):
        if event.type == "ESC" and event.value == "PRESS":
            self._session.cancel()
            return {"RUNNING_MODAL"}
        if event.type != "TIMER":
            return {"PASS_THROUGH"}
        try:
            self._session.poll()
            _redraw_sidebars(context)
            if not self._session.finished:
                return {"PASS_THROUGH"}
            result = self._finish(self._session)
        except (EngineError, OSError) as exc:
            self._stop(context)
            self.report({"ERROR"}, str(exc))
            return {"CANCELLED"}
        self._stop(context)
        return result

    def cancel(self, context):
        self._stop(context)

    def _stop(self, context) -> None:
        if not self._session.finished:
            self._session.abort()
        context.window_manager.event_timer_remove(self._timer)
        _redraw_sidebars(context)


class SURGE_OT_free_surface(SceneIdle, bpy.types.Operator):
    """Delete the baked surface only; the baked particles stay and play"""

    bl_idname = "surge.free_surface"
    bl_label = "Free Surface"
    bl_options = {"REGISTER"}

    def execute(self, context):
        try:
            cache_dir, count = free_surface(context.scene)
        except (EngineError, OSError) as exc:
            self.report({"ERROR"}, str(exc))
            return {"CANCELLED"}
        self.report({"INFO"}, f"Removed {count} surface files from '{cache_dir}'")
        return {"FINISHED"}


CLASSES = (SURGE_OT_bake_surface, SURGE_OT_free_surface)
