"""``surge.bake_to_keyframes``: the cached liquid as plain keyframes (see ``bridge.keyframes``)."""

from __future__ import annotations

import bpy
from bpy.props import EnumProperty

from .common import SceneIdle
from ..bridge import files, keyframes
from ..bridge.paths import ADDON_ROOT
from ..bridge.export import unit_scale
from ..engine.io.cache import CacheReader
from ..engine.errors import EngineError

KEYFRAME_MODES = (
    ("OBJECTS", "Objects", f"One object per particle, an instance of the chosen mesh, with location keyframes; at "
                           f"most {keyframes.MAX_OBJECTS} particles"),
    ("SHAPE_KEYS", "Shape Keys", "One mesh with a vertex per particle and a shape key per frame, played by a "
                                 "single curve; for any particle count"),
)


class SURGE_OT_bake_to_keyframes(SceneIdle, bpy.types.Operator):
    """Turn the baked liquid into plain Blender animation that plays and renders without Surge"""

    bl_idname = "surge.bake_to_keyframes"
    bl_label = "Bake to Keyframes"
    bl_options = {"REGISTER", "UNDO"}

    mode: EnumProperty(
        name="As", items=KEYFRAME_MODES, default="SHAPE_KEYS",
        description="Form of the animation: animated objects or one mesh with shape keys")

    busy_message = "Wait for the bake to end"

    def execute(self, context):
        scene = context.scene
        try:
            cache_dir = files.resolve_cache_dir(scene, ADDON_ROOT)
            reader = CacheReader(cache_dir)
            frames = reader.frames
            if not frames:
                self.report({"ERROR"}, f"The cache '{cache_dir}' holds no baked frame; bake first")
                return {"CANCELLED"}
            arrays = [reader.read_frame(f) for f in frames]
        except (EngineError, OSError) as exc:
            self.report({"ERROR"}, str(exc))
            return {"CANCELLED"}
        scale = unit_scale(scene)
        try:
            if self.mode == "OBJECTS":
                radius = float(reader.manifest.get("particle_radius", 0.5 * scene.surge.particle_spacing * scale))
                made = keyframes.keyframe_objects(scene, frames, arrays, scale, radius,
                                                  instance=scene.surge.keyframe_instance)
                what = f"{len(made.objects)} objects in the collection '{made.name}'"
            else:
                made = keyframes.keyframe_shape_keys(scene, frames, arrays, scale)
                what = f"the mesh '{made.name}' ({len(made.data.vertices)} vertices)"
        except keyframes.KeyframeError as exc:
            self.report({"ERROR"}, str(exc))
            return {"CANCELLED"}
        self.report({"INFO"}, f"Keyframed frames {frames[0]}-{frames[-1]} as {what}")
        return {"FINISHED"}


CLASSES = (SURGE_OT_bake_to_keyframes,)
