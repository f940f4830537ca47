"""What several operators share."""

from __future__ import annotations


class SceneIdle:
    """poll(): a scene that is not baking (scene data only, so that background mode works).

    ``busy_message`` is shown in the tooltip of a greyed-out button while the scene bakes.
    """

    busy_message = "Wait for the bake to end, or press Esc to cancel it"

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
