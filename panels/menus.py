"""Surge where artists look for it: *Object > Quick Effects > Quick Liquid (Surge)*, and an *Object > Surge
Liquid* menu holding every Surge operator, which also makes each of them searchable with F3 (Blender's
menu search finds what its menus hold). Drawing only: the entries name operators by their idname."""

from __future__ import annotations

import bpy


class SURGE_MT_object(bpy.types.Menu):
    """Object > Surge Liquid: the whole Surge workflow, from setting objects up to baking and live sessions"""

    bl_idname = "SURGE_MT_object"
    bl_label = "Surge Liquid"

    def draw(self, context):
        layout = self.layout
        layout.operator("surge.quick_liquid", icon="MOD_FLUIDSIM")
        layout.separator()
        layout.operator("surge.make_fluid")
        layout.operator("surge.make_inflow")
        layout.operator("surge.make_collider")
        layout.operator("surge.make_outflow")
        layout.operator("surge.make_rigid_body")
        layout.operator("surge.clear_role")
        layout.separator()
        layout.operator_menu_enum("surge.apply_liquid", "liquid", text="Apply Liquid Preset")
        layout.operator("surge.liquid_preset_add")
        layout.operator("surge.earth_gravity")
        layout.separator()
        layout.menu("SURGE_MT_bake")
        layout.menu("SURGE_MT_live")


class SURGE_MT_bake(bpy.types.Menu):
    """Bake the liquid, its surface, whitewater and keyframes, free them, bake on other machines"""

    bl_idname = "SURGE_MT_bake"
    bl_label = "Bake"

    def draw(self, context):
        layout = self.layout
        layout.operator("surge.bake", icon="PHYSICS")
        layout.operator("surge.bake", text="Bake Preview", icon="HIDE_OFF").preview = True
        layout.operator("surge.resume_bake", icon="PLAY")
        layout.operator("surge.cancel_bake", icon="CANCEL")
        layout.operator("surge.bake_in_terminal", icon="CONSOLE")
        layout.operator("surge.load_baked", icon="FILE_REFRESH")
        layout.separator()
        layout.operator("surge.bake_surface", icon="MOD_FLUIDSIM")
        layout.operator("surge.bake_whitewater", icon="MOD_OCEAN")
        layout.operator("surge.bake_to_keyframes", icon="KEYFRAME")
        layout.separator()
        layout.operator("surge.wedge_in_terminal", icon="CONSOLE")
        layout.operator("surge.load_wedge_result", icon="FILE_REFRESH")
        layout.separator()
        layout.operator("surge.free_surface", icon="TRASH")
        layout.operator("surge.free_whitewater", icon="TRASH")
        layout.operator("surge.free_bake", icon="TRASH")


class SURGE_MT_live(bpy.types.Menu):
    """The live session: start it, pause, step, reset, record, bake from where it is"""

    bl_idname = "SURGE_MT_live"
    bl_label = "Live"

    def draw(self, context):
        layout = self.layout
        layout.operator("surge.live", icon="PLAY")
        layout.operator("surge.live_pause", icon="PAUSE")
        layout.operator("surge.live_step", icon="FRAME_NEXT")
        layout.operator("surge.live_reset", icon="FILE_REFRESH")
        layout.operator("surge.live_record", icon="REC")
        layout.operator("surge.live_bake_from_here", icon="PHYSICS")
        layout.operator("surge.live_stop", icon="CANCEL")


def draw_quick_effects(self, context) -> None:
    """Appended to Object > Quick Effects, beside Blender's own Quick Liquid."""
    self.layout.operator("surge.quick_liquid", icon="MOD_FLUIDSIM")


def draw_object_menu(self, context) -> None:
    """Appended to the 3D view's Object menu."""
    self.layout.separator()
    self.layout.menu("SURGE_MT_object", icon="MOD_FLUIDSIM")


CLASSES = (SURGE_MT_object, SURGE_MT_bake, SURGE_MT_live)

#: (menu class, draw function) pairs that register() appends and unregister() removes.
MENU_DRAWS = ((bpy.types.VIEW3D_MT_object_quick_effects, draw_quick_effects),
              (bpy.types.VIEW3D_MT_object, draw_object_menu))
