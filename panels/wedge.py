"""The Wedge sub-panel of the Bake panel: variations of the scene's settings, baked side by side. Drawing only."""

from __future__ import annotations

import bpy

from ..bridge.wedge import summary, variation_note


class SURGE_UL_wedge_variations(bpy.types.UIList):
    """One row per varied setting: object (or the scene), setting name, values"""

    def draw_item(self, context, layout, data, item, icon, active_data, active_propname, index):
        row = layout.row(align=True)
        row.label(text=item.target.name if item.target else "Scene",
                  icon="OBJECT_DATA" if item.target else "SCENE_DATA")
        row.alert = variation_note(context.scene, item) is not None
        row.prop(item, "setting", text="", emboss=False)
        row.prop(item, "values", text="")


class VIEW3D_PT_surge_wedge(bpy.types.Panel):
    """Bake every combination of a few settings, each as its own bake, on this machine or a Dask farm"""

    bl_label = "Wedge"
    bl_space_type = "VIEW_3D"
    bl_region_type = "UI"
    bl_category = "Surge"
    bl_parent_id = "VIEW3D_PT_surge_bake"
    bl_options = {"DEFAULT_CLOSED"}

    def draw(self, context):
        settings = context.scene.surge_wedge
        layout = self.layout
        row = layout.row()
        row.template_list("SURGE_UL_wedge_variations", "", settings, "variations", settings, "active", rows=2)
        col = row.column(align=True)
        col.operator("surge.wedge_add", text="", icon="ADD")
        col.operator("surge.wedge_remove", text="", icon="REMOVE")
        if 0 <= settings.active < len(settings.variations):
            item = settings.variations[settings.active]
            col = layout.column()
            col.use_property_split = True
            col.prop(item, "target")
            col.prop(item, "setting")
            col.prop(item, "values")
        for item in settings.variations:
            note = variation_note(context.scene, item)
            if note:
                layout.label(text=note, icon="ERROR")
        col = layout.column()
        col.use_property_split = True
        col.prop(settings, "output_directory")
        col.prop(settings, "scheduler")
        sub = col.column()
        sub.active = not settings.scheduler.strip()
        sub.prop(settings, "workers")
        layout.operator("surge.wedge_in_terminal", icon="CONSOLE")
        text = summary(context.scene)
        if text:
            layout.label(text=text, icon="INFO")
        layout.operator("surge.load_wedge_result", icon="FILE_REFRESH")


CLASSES = (SURGE_UL_wedge_variations, VIEW3D_PT_surge_wedge)
