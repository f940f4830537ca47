"""``surge.bake`` and ``surge.free_bake``.

Bake runs in two ways. ``execute`` blocks until the bake ends and prints progress; it is what
``bpy.ops.surge.bake()`` runs from a script and in background mode (a render farm:
``blender -b shot.blend --python-expr "import bpy; bpy.ops.surge.bake()"`` then fails visibly,
because an ERROR report makes the call raise ``RuntimeError``). ``invoke`` (the sidebar button)
runs modal on a timer so the interface stays live; Esc cancels and keeps the frames baked so far.
"""

from __future__ import annotations

import bpy
from bpy.app.handlers import persistent

from ..bridge.bake import BakeSession, describe, free_bake
from ..engine.errors import EngineError

#: Seconds between two polls of a modal bake: often enough for a smooth progress bar, rare enough
#: to cost nothing while the child process does the work.
POLL_INTERVAL = 0.1


def _redraw_sidebars(context) -> None:
    for window in context.window_manager.windows:
        for area in window.screen.areas:
            if area.type == "VIEW_3D":
                area.tag_redraw()


class SURGE_OT_bake(bpy.types.Operator):
    """Simulate the liquid over the scene's frame range and play the result as the Surge Liquid object"""

    bl_idname = "surge.bake"
    bl_label = "Bake Liquid"
    bl_options = {"REGISTER", "UNDO"}

    @classmethod
    def poll(cls, context):
        # scene data only: no area or region, so that background mode works
        scene = context.scene
        if scene is None:
            return False
        if scene.surge.is_baking:
            cls.poll_message_set("This scene is already baking; press Esc to cancel that bake")
            return False
        return True

    def _report_result(self, result) -> set:
        self.report({"INFO"} if result.status == "complete" else {"WARNING"}, result.message)
        return {"FINISHED"}

    def execute(self, context):
        try:
            session = BakeSession(context.scene, context.evaluated_depsgraph_get())
        except (EngineError, OSError) as exc:
            self.report({"ERROR"}, str(exc))
            return {"CANCELLED"}
        try:
            while not session.finished:
                for event in session.poll(timeout=0.5):
                    text = describe(event)
                    if text and bpy.app.background:
                        print(f"Surge: {text}", flush=True)
            result = session.finish()
        except (EngineError, OSError) as exc:
            self.report({"ERROR"}, str(exc))
            return {"CANCELLED"}
        finally:
            if not session.finished:  # an error above or Ctrl+C in a terminal: leave no process behind
                session.abort()
        if bpy.app.background:
            print(f"Surge: {result.message}", flush=True)
        return self._report_result(result)

    def invoke(self, context, event):
        if bpy.app.background:
            return self.execute(context)
        try:
            self._session = BakeSession(context.scene, context.evaluated_depsgraph_get())
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
            result = self._session.finish()
        except (EngineError, OSError) as exc:
            self._stop(context)
            self.report({"ERROR"}, str(exc))
            return {"CANCELLED"}
        self._stop(context)
        return self._report_result(result)

    def cancel(self, context):
        # Blender ends the operator (a file is loaded, the window closes): stop the child with it
        self._stop(context)

    def _stop(self, context) -> None:
        if not self._session.finished:
            self._session.abort()
        context.window_manager.event_timer_remove(self._timer)
        _redraw_sidebars(context)


class SURGE_OT_free_bake(bpy.types.Operator):
    """Delete Surge's baked files from the cache directory; other files in that folder are left alone"""

    bl_idname = "surge.free_bake"
    bl_label = "Free Bake"
    bl_options = {"REGISTER"}

    @classmethod
    def poll(cls, context):
        scene = context.scene
        if scene is None:
            return False
        if scene.surge.is_baking:
            cls.poll_message_set("Wait for the bake to end, or press Esc to cancel it")
            return False
        return True

    def execute(self, context):
        try:
            cache_dir, count = free_bake(context.scene)
        except (EngineError, OSError) as exc:
            self.report({"ERROR"}, str(exc))
            return {"CANCELLED"}
        self.report({"INFO"}, f"Removed {count} Surge files from '{cache_dir}'")
        return {"FINISHED"}


class SURGE_OT_cancel_bake(bpy.types.Operator):
    """Stop the running bake after its current substep; the frames baked so far are kept"""

    bl_idname = "surge.cancel_bake"
    bl_label = "Cancel Bake"
    bl_options = {"REGISTER"}

    @classmethod
    def poll(cls, context):
        scene = context.scene
        if scene is None or not scene.surge.is_baking:
            cls.poll_message_set("No bake is running in this scene")
            return False
        return True

    def execute(self, context):
        # the bake operator's session notices this at its next poll (it owns the child process)
        context.scene.surge.bake_cancel_requested = True
        return {"FINISHED"}


@persistent
def clear_interrupted_bakes(_filepath) -> None:
    """A file saved during a bake says it is baking; no bake survives loading it, so say so."""
    for scene in bpy.data.scenes:
        if scene.surge.is_baking:
            scene.surge.is_baking = False
            scene.surge.bake_cancel_requested = False
            scene.surge.bake_status = "The bake was interrupted; bake again"


CLASSES = (SURGE_OT_bake, SURGE_OT_free_bake, SURGE_OT_cancel_bake)

#: (handler list name in bpy.app.handlers, function) pairs that register() adds and unregister() removes.
HANDLERS = (("load_post", clear_interrupted_bakes),)
