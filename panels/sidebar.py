"""The Surge tab in the 3D view's sidebar (press N): object role, simulation settings, bake."""

from __future__ import annotations

import bpy

from ..engine import settings as settings_mod

#: Engine settings grouped as engine.settings declares them: ((group, (name, ...)), ...) in order.
GROUPS = tuple(
    (group, tuple(p.name for p in settings_mod.parameters() if p.group == group))
    for group in dict.fromkeys(p.group for p in settings_mod.parameters())
)

#: Per-collider settings drawn for the role Collider, in the engine's order.
COLLIDER_SETTINGS = tuple(p.name for p in settings_mod.collider_parameters())

#: Per-object settings drawn for the roles Fluid and Inflow, in the engine's order.
FLUID_SETTINGS = tuple(p.name for p in settings_mod.fluid_parameters())
INFLOW_SETTINGS = tuple(p.name for p in settings_mod.inflow_parameters())

#: Settings of an inflow that only apply in one of its modes: name -> mode.
INFLOW_MODE_ONLY = {"normal_speed": "SURFACE"}


class SurgeSidebarPanel:
    bl_space_type = "VIEW_3D"
    bl_region_type = "UI"
    bl_category = "Surge"


class VIEW3D_PT_surge_object(SurgeSidebarPanel, bpy.types.Panel):
    """The active object's role in the simulation"""

    bl_label = "Object"

    def draw(self, context):
        layout = self.layout
        layout.use_property_split = True
        layout.use_property_decorate = False
        obj = context.object
        if obj is None:
            layout.label(text="No active object")
            return
        layout.label(text=obj.name, icon="OBJECT_DATA")
        layout.prop(obj.surge, "role")
        if obj.surge.role == "COLLIDER":
            for name in COLLIDER_SETTINGS:
                layout.prop(obj.surge, name)
            if obj.surge.collider_resolved:
                # what the last bake made of this collider (the mode Auto picked)
                layout.label(text=f"Last bake: {obj.surge.collider_resolved}", icon="INFO")
        elif obj.surge.role == "FLUID":
            for name in FLUID_SETTINGS:
                layout.prop(obj.surge, name)
        elif obj.surge.role == "INFLOW":
            for name in INFLOW_SETTINGS:
                row = layout.row()
                row.active = INFLOW_MODE_ONLY.get(name, obj.surge.inflow_mode) == obj.surge.inflow_mode
                row.prop(obj.surge, name)
        if obj.surge.role in {"FLUID", "INFLOW"} and len(obj.surge.channels):
            layout.label(text="Particle Channels")
            for channel in obj.surge.channels:
                row = layout.row()
                row.prop(channel, "name", text="")
                row.prop(channel, "value", text="")
        elif obj.surge.role == "OUTFLOW":
            layout.label(text="Removes the liquid inside this closed mesh", icon="INFO")


class VIEW3D_PT_surge_simulation(SurgeSidebarPanel, bpy.types.Panel):
    """Simulation settings of the scene, drawn from the engine's parameter list"""

    bl_label = "Simulation"

    def draw(self, context):
        settings = context.scene.surge
        layout = self.layout
        layout.use_property_split = True
        layout.use_property_decorate = False
        layout.enabled = not settings.is_baking
        if len(GROUPS) == 1:
            for name in GROUPS[0][1]:
                layout.prop(settings, name)
            return
        solvers = {item[0] for item in settings_mod.SOLVERS}
        for group, names in GROUPS:
            header, body = layout.panel(f"surge_settings_{group.lower().replace(' ', '_')}")
            header.label(text=group)
            if body is not None:
                # a group named after a solver only matters while that solver is chosen
                body.active = group not in solvers or group == settings.solver
                for name in names:
                    body.prop(settings, name)


class VIEW3D_PT_surge_bake(SurgeSidebarPanel, bpy.types.Panel):
    """Cache folder, bake and free buttons, and the progress of a running bake"""

    bl_label = "Bake"

    def draw(self, context):
        settings = context.scene.surge
        layout = self.layout
        col = layout.column()
        col.enabled = not settings.is_baking
        col.prop(settings, "cache_directory", text="")
        row = layout.row(align=True)
        row.operator("surge.bake", icon="PHYSICS")
        row.operator("surge.free_bake", icon="TRASH")
        if settings.is_baking:
            layout.progress(factor=settings.bake_progress, type="BAR", text=settings.bake_status or "Baking")
            layout.label(text="Press Esc to cancel; baked frames are kept", icon="INFO")
        elif settings.bake_status:
            layout.label(text=settings.bake_status)
        if settings.liquid_object is not None:
            layout.prop(settings, "liquid_object", text="Liquid")


CLASSES = (VIEW3D_PT_surge_object, VIEW3D_PT_surge_simulation, VIEW3D_PT_surge_bake)
