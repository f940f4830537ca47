"""What a run of a child process polled from Blender does on every poll, whatever the child computes.

:class:`bridge.bake.BakeSession` (the particle bake) and :class:`bridge.stage_session.StageSession` (a stage
over the baked cache: the surface, whitewater) both start a :class:`bridge.process.BakeProcess` and are
polled from a modal operator's timer or a blocking loop. :class:`ChildSession` holds what they share:
publishing status and progress to the scene's bake state (:mod:`bridge.bake_state`), the Cancel button,
the kill of a child that ignores a cancel, and the cancel itself.
"""

from __future__ import annotations

from . import bake_state


def _differs(old, new) -> bool:
    """True if a bake-state value must be written: float properties are float32, so floats compare with a
    relative tolerance above its rounding; everything else exactly."""
    if isinstance(new, float):
        return abs(old - new) > 1e-6 * max(1.0, abs(new))
    return old != new


class ChildSession:
    """Mixin of the sessions over a child process.

    A subclass sets ``process`` (:class:`bridge.process.BakeProcess`), ``status`` (str), ``progress``
    (0 to 1) and ``figures`` (``SurgeBakeState`` property name -> value: what runs, its own frame range,
    the last frame done, the time left and whether it is estimated yet, ...), and defines ``scene()``
    (its scene, raising when it was deleted).
    """

    figures: dict = {}

    def _publish(self) -> None:
        self._publish_state()

    def _publish_state(self):
        """Copy ``status``, ``progress`` and ``figures`` into the scene's bake state for the panels and the
        status bar; returns that state.

        Only changed values are written: every write tags the scene for re-evaluation, and this runs ten
        times a second during a modal run.
        """
        state = bake_state.ensure(self.scene())
        if not state.is_baking:
            state.is_baking = True
            state.cancel_requested = False  # a request left from an earlier run
        if abs(state.progress - self.progress) > 1e-4:  # the property is float32
            state.progress = self.progress
        if state.status != self.status:
            state.status = self.status
        for name, value in self.figures.items():
            if _differs(getattr(state, name), value):
                setattr(state, name, value)
        return state

    def _watch_process(self) -> None:
        """Once per poll: cancel when the Cancel button of the sidebar or the status bar asked for it, and
        kill a child that did not stop within its time after a cancel."""
        if bake_state.ensure(self.scene()).cancel_requested and self.process.cancel_requested_at is None:
            self.cancel()
        self.process.kill_if_overdue()

    @property
    def finished(self) -> bool:
        return self.process.finished

    def cancel(self) -> None:
        """Ask the child to stop; the frames it finished are kept and still shown."""
        self.process.request_cancel()
        self.status = "Cancelling"
        self._publish()
