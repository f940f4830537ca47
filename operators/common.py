"""What several operators share."""

from __future__ import annotations


def animation_playing(context) -> bool:
    """True while Blender plays the animation in any window (Esc then stops playback, not a bake)."""
    wm = context.window_manager
    return any(window.screen is not None and window.screen.is_animation_playing for window in wm.windows)


def is_cancel_key(context, event) -> bool:
    """True for an Esc press a running bake or live session takes as Cancel.

    While the animation plays, Esc stops playback, as everywhere in Blender: the bake lets it through
    (the Cancel buttons of the panel and the status bar still cancel it).
    """
    return event.type == "ESC" and event.value == "PRESS" and not animation_playing(context)


class SceneIdle:
    """poll(): a scene that is not baking (scene data only, so that background mode works).

    ``busy_message`` is shown in the tooltip of a greyed-out button while the scene bakes.
    """

    busy_message = "Wait for the bake to end, or press Cancel (or Esc) to stop it"

    @classmethod
    def poll(cls, context):
        from ..bridge import bake_state

        scene = context.scene
        if scene is None:
            return False
        if bake_state.is_baking(scene):
            cls.poll_message_set(cls.busy_message)
            return False
        return True


class NeedsBake(SceneIdle):
    """poll(): the scene is not baking and its cache folder holds a bake (what the operator works on);
    greyed out with the reason otherwise."""

    @classmethod
    def poll(cls, context):
        if not super().poll(context):
            return False
        from ..bridge import cache_state
        from ..bridge.paths import ADDON_ROOT

        if not cache_state.has_frames(context.scene, ADDON_ROOT):
            cls.poll_message_set("The cache folder holds no baked frame yet: bake the liquid first")
            return False
        return True


class FreeOperator(SceneIdle):
    """A Free button: greyed out (with the reason) while the scene bakes or when there is nothing to free;
    from the button it asks first, naming the folder, how many files go and their size on disk
    (``invoke_confirm``), so that one click never deletes hours of baking. ``execute`` (scripts) deletes
    without asking.

    A subclass sets ``kind_words`` (for the greyed button's tooltip) and implements :meth:`has_files` and
    :meth:`summary` (a :class:`bridge.freeing.FreeSummary`).
    """

    kind_words = "baked files"

    @classmethod
    def has_files(cls, scene) -> bool:
        raise NotImplementedError

    def summary(self, scene):
        raise NotImplementedError

    @classmethod
    def poll(cls, context):
        if not super().poll(context):
            return False
        if not cls.has_files(context.scene):
            cls.poll_message_set(f"Nothing to free: the cache folder holds no {cls.kind_words}")
            return False
        return True

    def invoke(self, context, event):
        from ..engine.errors import EngineError

        try:
            summary = self.summary(context.scene)
        except (EngineError, OSError) as exc:
            self.report({"ERROR"}, str(exc))
            return {"CANCELLED"}
        return context.window_manager.invoke_confirm(self, event, title=self.bl_label, message=summary.message,
                                                     confirm_text="Delete", icon="WARNING")


def redraw_sidebars(context) -> None:
    for window in context.window_manager.windows:
        for area in window.screen.areas:
            if area.type == "VIEW_3D":
                area.tag_redraw()


class StageOperator(SceneIdle):
    """An operator running a session in a child process: the particle bake, or a stage over the baked
    cache (surface, whitewater).

    ``execute`` blocks and prints progress (scripts and ``blender -b``, where an ERROR report makes the
    call raise); ``invoke`` (a button) runs modal on a timer, and Esc cancels, keeping the frames done
    (except while the animation plays: Esc then stops playback, see :func:`is_cancel_key`).
    A subclass implements :meth:`make_session` (a session with ``poll``, ``finished``, ``cancel``,
    ``finish`` and ``abort``; ``finish`` and ``abort`` give the cache folder's lock back) and
    ``describe`` (event -> line). The result's ``warnings`` (if any) are reported before its message.
    """

    busy_message = "This scene is baking; wait for it to end or press Cancel to stop it"
    poll_interval = 0.1

    def make_session(self, context):
        raise NotImplementedError

    @staticmethod
    def describe(event: dict) -> str | None:
        return None

    def _finish(self, session) -> set:
        import bpy

        result = session.finish()
        if bpy.app.background:
            print(f"Surge: {result.message}", flush=True)
        for text in getattr(result, "warnings", ()):
            self.report({"WARNING"}, text)
        self.report({"INFO"} if result.status == "complete" and not getattr(result, "cap_message", "")
                    else {"WARNING"}, result.message)
        return {"FINISHED"}

    def execute(self, context):
        import bpy

        from ..engine.errors import EngineError

        try:
            session = self.make_session(context)
        except (EngineError, OSError) as exc:
            self.report({"ERROR"}, str(exc))
            return {"CANCELLED"}
        try:
            while not session.finished:
                for event in session.poll(timeout=0.5):
                    text = self.describe(event)
                    if text and bpy.app.background:
                        print(f"Surge: {text}", flush=True)
            return self._finish(session)
        except (EngineError, OSError) as exc:
            self.report({"ERROR"}, str(exc))
            return {"CANCELLED"}
        finally:
            if not session.finished:  # an error above or Ctrl+C in a terminal: leave no process behind
                session.abort()

    def invoke(self, context, event):
        import bpy

        from ..engine.errors import EngineError

        if bpy.app.background:
            return self.execute(context)
        try:
            self._session = self.make_session(context)
        except (EngineError, OSError) as exc:
            self.report({"ERROR"}, str(exc))
            return {"CANCELLED"}
        wm = context.window_manager
        self._timer = wm.event_timer_add(self.poll_interval, window=context.window)
        wm.modal_handler_add(self)
        return {"RUNNING_MODAL"}

    def modal(self, context, event):
        from ..engine.errors import EngineError

        if is_cancel_key(context, event):
            self._session.cancel()
            return {"RUNNING_MODAL"}
        if event.type != "TIMER":
            return {"PASS_THROUGH"}
        try:
            self._session.poll()
            redraw_sidebars(context)
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
        # Blender ends the operator (a file is loaded, the window closes): stop the child with it
        self._stop(context)

    def _stop(self, context) -> None:
        if not self._session.finished:
            self._session.abort()
        context.window_manager.event_timer_remove(self._timer)
        redraw_sidebars(context)
