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
from bpy.props import BoolProperty, EnumProperty, IntProperty

from .common import FreeOperator, SceneIdle, StageOperator
from ..bridge import bake_state, cache_state, export, files, freeing, rigid
from ..bridge.bake import (IF_SETTINGS_CHANGED, PREVIEW_FRAMES, BakeSession, free_bake, remove_unused_usd, resume_state,
                           setting_labels)
from ..bridge.paths import ADDON_ROOT
from ..bridge.progress_text import describe
from ..engine.errors import EngineError


class SURGE_OT_bake(StageOperator, bpy.types.Operator):
    """Simulate the liquid over the scene's frame range and play the result as the Surge Liquid object"""

    bl_idname = "surge.bake"
    busy_message = "This scene is already baking; press Esc to cancel that bake"
    bl_label = "Bake Liquid"
    # not REGISTER: Repeat Last and Adjust Last Operation would run a long, blocking bake again
    bl_options = set()

    resume: BoolProperty(
        name="Resume", default=False, options={"SKIP_SAVE"},
        description="Continue the bake in the cache folder from a checkpoint instead of starting over")
    resume_frame: IntProperty(
        name="From Frame", default=0, min=0, options={"SKIP_SAVE"},
        description="Checkpoint frame to resume from; 0 takes the latest one")
    if_settings_changed: EnumProperty(
        name="If Settings Changed", items=IF_SETTINGS_CHANGED, default="REFUSE", options={"SKIP_SAVE"},
        description="What resuming does when the settings differ from those that baked the cached frames")

    preview: BoolProperty(
        name="Preview", default=False, options={"SKIP_SAVE"},
        description="Bake the first frames at twice the particle spacing into a preview folder of the cache, "
                    "to check the set-up in seconds; the full bake's cache is left alone")

    describe = staticmethod(describe)

    @classmethod
    def description(cls, context, properties):
        if properties.preview:
            return (f"Bake a quick preview: the first {PREVIEW_FRAMES} frames at twice the particle spacing (8 times "
                    f"fewer particles), into a preview folder of the cache; the full bake's cache is left alone, and "
                    f"the liquid plays the preview until the next full bake")
        return cls.__doc__

    def make_session(self, context) -> BakeSession:
        names = rigid.blender_rigid_bodies(context.scene)
        if names:
            self.report({"WARNING"}, f"Blender's rigid body world does not step {', '.join(repr(n) for n in names)} "
                                     f"during the liquid bake: Surge's bake moves them, and their Blender rigid "
                                     f"body follows the baked motion afterwards")
        return BakeSession(context.scene, context.evaluated_depsgraph_get(), resume=self.resume and not self.preview,
                           resume_frame=self.resume_frame, if_settings_changed=self.if_settings_changed,
                           preview=self.preview)


class SURGE_OT_free_bake(FreeOperator, bpy.types.Operator):
    """Delete Surge's baked files from the cache directory (asks first, naming how many files go and their size);
    other files in that folder are left alone"""

    bl_idname = "surge.free_bake"
    bl_label = "Free Bake"
    bl_options = {"REGISTER"}
    kind_words = "bake"

    what: EnumProperty(
        name="Free", default="ALL", options={"SKIP_SAVE"},
        items=(("ALL", "Everything", "The baked particles and everything made from them (surface, whitewater)"),
               ("SURFACE", "Surface Only", "The baked surface mesh only; the particles stay and play")),
        description="What to delete")

    @classmethod
    def has_files(cls, scene) -> bool:
        return cache_state.has_bake(scene, ADDON_ROOT)

    def summary(self, scene):
        if self.what == "SURFACE":
            return freeing.surface_summary(scene, ADDON_ROOT)
        return freeing.bake_summary(scene, ADDON_ROOT)

    def execute(self, context):
        from ..bridge.surface_bake import free_surface

        try:
            if self.what == "SURFACE":
                cache_dir, count = free_surface(context.scene)
                self.report({"INFO"}, f"Removed {count} surface files from '{cache_dir}'")
                return {"FINISHED"}
            cache_dir, count = free_bake(context.scene)
        except (EngineError, OSError) as exc:
            self.report({"ERROR"}, str(exc))
            return {"CANCELLED"}
        self.report({"INFO"}, f"Removed {count} Surge files from '{cache_dir}'")
        return {"FINISHED"}


class SURGE_OT_resume_bake(SceneIdle, bpy.types.Operator):
    """Continue a cancelled or crashed bake from its last checkpoint; asks what to do if settings changed"""

    bl_idname = "surge.resume_bake"
    bl_label = "Resume Bake"
    bl_options = set()  # as surge.bake: not repeatable

    frame: IntProperty(
        name="From Frame", default=0, min=0, options={"SKIP_SAVE"},
        description="Checkpoint frame to resume from; 0 takes the latest one")
    if_settings_changed: EnumProperty(
        name="Settings Changed", items=IF_SETTINGS_CHANGED, default="RESUME", options={"SKIP_SAVE"},
        description="The settings differ from those that baked the cached frames: resume with the new settings "
                    "from a frame, or bake everything again")

    busy_message = "This scene is already baking"

    @classmethod
    def poll(cls, context):
        if not super().poll(context):
            return False
        if not cache_state.has_checkpoint(context.scene, ADDON_ROOT):
            cls.poll_message_set("Nothing to resume: the cache folder holds no checkpoint (Checkpoint Every saves "
                                 "them during a bake); bake from the start")
            return False
        return True

    def _bake(self, context, mode: str) -> set:
        result = bpy.ops.surge.bake(mode, resume=True, resume_frame=self.frame,
                                    if_settings_changed=self.if_settings_changed)
        # a modal bake is running: this operator's part is done
        return {"FINISHED"} if result & {"FINISHED", "RUNNING_MODAL"} else {"CANCELLED"}

    def _find_checkpoints(self, context) -> bool:
        """Set ``_frames`` (checkpoints to resume from) and ``_changed`` (what changed since the cached
        frames were baked); False once the reason there is nothing to resume is reported."""
        try:
            description, settings = export.export_scene(context.scene, context.evaluated_depsgraph_get())
            self._frames, self._changed = resume_state(files.resolve_cache_dir(context.scene, ADDON_ROOT), settings,
                                                       description)
        except (EngineError, OSError) as exc:
            self.report({"ERROR"}, str(exc))
            return False
        if not self._frames:
            self.report({"ERROR"}, "Nothing to resume: the cache holds no checkpoint; bake from the start")
        return bool(self._frames)

    def invoke(self, context, event):
        if bpy.app.background:
            return self.execute(context)
        if not self._find_checkpoints(context):
            return {"CANCELLED"}
        if not self._changed:
            return self._bake(context, "INVOKE_DEFAULT")
        self.frame = self._frames[-1]
        return context.window_manager.invoke_props_dialog(self, title="Settings Changed", confirm_text="Continue")

    def draw(self, context):
        layout = self.layout
        layout.label(text=f"Changed since the cached frames were baked: {setting_labels(self._changed)}")
        layout.prop(self, "if_settings_changed", expand=True)
        row = layout.row()
        row.active = self.if_settings_changed == "RESUME"
        row.prop(self, "frame")
        layout.label(text=f"Checkpoints: frames {', '.join(map(str, self._frames))}")

    def execute(self, context):
        # from the dialog (the UI) the bake runs modal; from a script it blocks like surge.bake
        try:
            return self._bake(context, "EXEC_DEFAULT" if bpy.app.background else "INVOKE_DEFAULT")
        except RuntimeError as exc:  # the bake operator's ERROR report, passed on as this one's
            self.report({"ERROR"}, str(exc).removeprefix("Error: ").strip())
            return {"CANCELLED"}


class SURGE_OT_cancel_bake(bpy.types.Operator):
    """Stop the running bake after its current substep; the frames baked so far are kept"""

    bl_idname = "surge.cancel_bake"
    bl_label = "Cancel Bake"
    bl_options = {"REGISTER"}

    @classmethod
    def poll(cls, context):
        scene = context.scene
        if not bake_state.is_baking(scene):
            cls.poll_message_set("No bake is running in this scene")
            return False
        return True

    def execute(self, context):
        # the bake operator's session notices this at its next poll (it owns the child process)
        bake_state.ensure(context.scene).cancel_requested = True
        return {"FINISHED"}


@persistent
def remove_replaced_bakes(_filepath) -> None:
    """The saved file now points at the newest bakes: the USD files of the ones they replaced can go."""
    remove_unused_usd()


@persistent
def clear_interrupted_bakes(_filepath) -> None:
    """No bake survives loading a file: forget the bake state of the scenes of the previous one."""
    bake_state.clear_all()


CLASSES = (SURGE_OT_bake, SURGE_OT_free_bake, SURGE_OT_resume_bake, SURGE_OT_cancel_bake)

#: (handler list name in bpy.app.handlers, function) pairs that register() adds and unregister() removes.
HANDLERS = (("load_post", clear_interrupted_bakes), ("save_post", remove_replaced_bakes))
