"""The live session's operators: Live (start and stop; Esc stops), Pause, Step, Reset, Record and
Bake From Here. Thin: the work is in ``bridge.live``.

``surge.live`` from a script (or in background mode) starts the session and returns; it then runs on
its timer until ``surge.live_stop`` (background scripts call ``bridge.live.update`` themselves, since
timers do not fire without a window). From the button it also watches for Esc while it runs.
"""

from __future__ import annotations

import bpy
from bpy.app.handlers import persistent
from bpy.props import BoolProperty

from .bake import SURGE_OT_bake
from .common import SceneIdle, StageOperator, is_cancel_key, redraw_sidebars
from ..bridge import bake_state, files, live
from ..bridge.bake import BakeSession
from ..bridge.paths import ADDON_ROOT
from ..bridge.progress_text import describe
from ..engine.io.cache import check_writable
from ..engine.errors import EngineError


class _Running:
    """poll(): the scene has a live session running."""

    @classmethod
    def poll(cls, context):
        if context.scene is None or live.get(context.scene) is None:
            cls.poll_message_set("No live session is running in this scene; press Live")
            return False
        return True


class SURGE_OT_live(SceneIdle, bpy.types.Operator):
    """Simulate the liquid live in the viewport while you work: move colliders and it reacts; Esc or the button
    stops it"""

    bl_idname = "surge.live"
    bl_label = "Live"
    bl_options = set()
    busy_message = "This scene is baking; wait for the bake to end or cancel it"

    paused: BoolProperty(
        name="Paused", default=False, options={"SKIP_SAVE"},
        description="Start paused on the first frame (Step advances one frame)")

    def execute(self, context):
        scene = context.scene
        if live.get(scene) is not None:
            live.stop(scene)
            self.report({"INFO"}, "Live session stopped")
            return {"FINISHED"}
        try:
            live.start(scene, context.evaluated_depsgraph_get(), paused=self.paused)
        except (EngineError, OSError) as exc:
            self.report({"ERROR"}, str(exc))
            return {"CANCELLED"}
        return {"FINISHED"}

    def invoke(self, context, event):
        result = self.execute(context)
        if bpy.app.background or "FINISHED" not in result or live.get(context.scene) is None:
            return result
        self._scene_key = bake_state.scene_key(context.scene)
        context.window_manager.modal_handler_add(self)
        redraw_sidebars(context)
        return {"RUNNING_MODAL"}

    def _session(self):
        scene = bake_state.scene_by_key(self._scene_key)
        return live.get(scene) if scene is not None else None

    def modal(self, context, event):
        session = self._session()
        if session is None:
            return {"FINISHED"}  # stopped by the button, a restart that failed, or an error
        if is_cancel_key(context, event):
            live.stop(session.scene())
            redraw_sidebars(context)
            self.report({"INFO"}, "Live session stopped")
            return {"FINISHED"}
        return {"PASS_THROUGH"}

    def cancel(self, context):
        # Blender ends the operator (the window closes): the session ends with it
        session = self._session()
        if session is not None:
            session.stop()


class SURGE_OT_live_stop(_Running, bpy.types.Operator):
    """Stop the live session; the liquid stays where it is on screen"""

    bl_idname = "surge.live_stop"
    bl_label = "Stop Live"
    bl_options = set()

    def execute(self, context):
        live.stop(context.scene)
        return {"FINISHED"}


class SURGE_OT_live_pause(_Running, bpy.types.Operator):
    """Pause the live liquid, or run it again"""

    bl_idname = "surge.live_pause"
    bl_label = "Pause"
    bl_options = set()

    def execute(self, context):
        session = live.get(context.scene)
        session.set_paused(not session.paused)
        return {"FINISHED"}


class SURGE_OT_live_step(_Running, bpy.types.Operator):
    """Pause and simulate one frame"""

    bl_idname = "surge.live_step"
    bl_label = "Step"
    bl_options = set()

    def execute(self, context):
        live.get(context.scene).step()
        return {"FINISHED"}


class SURGE_OT_live_reset(_Running, bpy.types.Operator):
    """Back to the first frame: the liquid as the Fluid objects hold it now (a changed scene starts a new
    session)"""

    bl_idname = "surge.live_reset"
    bl_label = "Reset"
    bl_options = set()

    def execute(self, context):
        scene = context.scene
        session = live.get(scene)
        try:
            live.reset(session, context.evaluated_depsgraph_get())
        except (EngineError, OSError) as exc:
            self.report({"ERROR"}, str(exc))
            return {"CANCELLED"}
        return {"FINISHED"}


class SURGE_OT_live_record(_Running, bpy.types.Operator):
    """Record the live frames from now on into the scene's cache folder, replacing its bake; press again to stop.
    The recording then plays like a bake"""

    bl_idname = "surge.live_record"
    bl_label = "Record"
    bl_options = set()

    def execute(self, context):
        scene = context.scene
        session = live.get(scene)
        if session.recording:
            session.stop_recording()
            self.report({"INFO"}, "Recording stopped")
            return {"FINISHED"}
        try:
            cache_dir = files.resolve_cache_dir(scene, ADDON_ROOT)
            check_writable(cache_dir)
        except (EngineError, OSError) as exc:
            self.report({"ERROR"}, str(exc))
            return {"CANCELLED"}
        session.start_recording(cache_dir)
        self.report({"INFO"}, f"Recording into '{cache_dir}'")
        return {"FINISHED"}


class SURGE_OT_live_bake_from_here(StageOperator, bpy.types.Operator):
    """Bake from the live liquid as it is now: its state becomes the first frame of a normal bake of the frame
    range (with the scene's bake settings and the live particle spacing); the live session stops"""

    bl_idname = "surge.live_bake_from_here"
    bl_label = "Bake From Here"
    bl_options = set()  # as surge.bake: not repeatable
    busy_message = SURGE_OT_bake.busy_message
    describe = staticmethod(describe)

    @classmethod
    def poll(cls, context):
        if context.scene is None or live.get(context.scene) is None:
            cls.poll_message_set("No live session is running in this scene; press Live")
            return False
        return super().poll(context)

    def make_session(self, context) -> BakeSession:
        scene = context.scene
        session = live.get(scene)
        cache_dir = files.resolve_cache_dir(scene, ADDON_ROOT)
        check_writable(cache_dir)
        saved = session.save_for_bake(cache_dir)
        override = {"particle_spacing": session.settings.particle_spacing, "solver": session.settings.solver}
        live.stop(scene)  # the bake needs the processor the live engine used
        return BakeSession(scene, context.evaluated_depsgraph_get(), resume=True, resume_frame=int(saved["frame"]),
                           if_settings_changed="RESUME", settings_override=override)


CLASSES = (SURGE_OT_live, SURGE_OT_live_stop, SURGE_OT_live_pause, SURGE_OT_live_step, SURGE_OT_live_reset,
           SURGE_OT_live_record, SURGE_OT_live_bake_from_here)


@persistent
def stop_live_sessions(_filepath) -> None:
    """No live session survives loading a file: its scene is about to go."""
    live.stop_all()


#: (handler list name in bpy.app.handlers, function) pairs that register() adds and unregister() removes.
HANDLERS = (("load_pre", stop_live_sessions),)
