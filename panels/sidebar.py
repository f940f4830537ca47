"""The Surge tab in the 3D view's sidebar (press N): object role, simulation settings, bake."""

from __future__ import annotations

import bpy

from ..bridge.bake import duration
from ..engine import liquids
from ..engine import settings as settings_mod
from ..operators.setup import PRESET_SUBDIR

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

#: Groups of settings named after a solver (by its identifier or its label) -> that solver.
SOLVER_GROUPS = {**{item[0]: item[0] for item in settings_mod.SOLVERS},
                 **{item[1]: item[0] for item in settings_mod.SOLVERS}}

#: Solver groups drawn only while their solver is chosen (the others are drawn greyed out).
HIDDEN_UNLESS_CHOSEN = frozenset({"Hybrid"})

#: Hybrid settings that only apply in one interface mode: name -> mode.
HYBRID_MODE_ONLY = {"hybrid_interface_depth": "AUTO", "hybrid_interface_height": "FIXED"}

#: Settings of an inflow that only apply in one of its modes: name -> mode.
INFLOW_MODE_ONLY = {"normal_speed": "SURFACE"}


def progress_text(scene) -> str:
    """'Frame 12 of 96' once a frame is baked, else what the bake is doing."""
    settings = scene.surge
    if settings.bake_particles:
        return f"Frame {settings.bake_frame} of {scene.frame_end}"
    return settings.bake_status or "Baking"


def bake_figures(settings) -> list[tuple[str, str]]:
    """(name, value) of each figure of the running bake, as the sidebar lists them."""
    figures = [("Frame", str(settings.bake_frame)), ("Substeps", str(settings.bake_substeps)),
               ("Particles", f"{settings.bake_particles:,}"), ("Elapsed", duration(settings.bake_elapsed)),
               ("Remaining", duration(settings.bake_remaining))]
    if settings.bake_memory:
        figures.append(("Memory", f"{settings.bake_memory:,.0f} MiB"))
    return figures


def draw_status_bar(self, context) -> None:
    """Appended to Blender's status bar: the running bake's progress and a cancel button."""
    scene = context.scene
    if scene is None or not scene.surge.is_baking:
        return
    settings = scene.surge
    row = self.layout.row(align=True)
    text = f"Surge: {progress_text(scene)}"
    if settings.bake_particles:
        text += f", {duration(settings.bake_remaining)} left"
    row.progress(factor=settings.bake_progress, type="BAR", text=text)
    row.operator("surge.cancel_bake", text="", icon="CANCEL")


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
        # one click for every selected object, with a display that shows the role
        grid = layout.column(align=True)
        top, bottom = grid.row(align=True), grid.row(align=True)
        top.operator("surge.make_fluid", text="Fluid", icon="MOD_FLUIDSIM")
        top.operator("surge.make_inflow", text="Inflow", icon="IMPORT")
        bottom.operator("surge.make_collider", text="Collider", icon="MOD_PHYSICS")
        bottom.operator("surge.make_outflow", text="Outflow", icon="EXPORT")
        grid.operator("surge.clear_role", icon="X")
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


class SURGE_MT_liquid_presets(bpy.types.Menu):
    """Measured liquids, then the artist's own presets"""

    bl_label = "Liquid Presets"
    preset_subdir = PRESET_SUBDIR
    preset_operator = "script.execute_preset"

    def draw(self, context):
        layout = self.layout
        for item in liquids.LIQUIDS:
            layout.operator("surge.apply_liquid", text=item.label).liquid = item.name
        if any(bpy.utils.preset_paths(PRESET_SUBDIR)):
            layout.separator()
            bpy.types.Menu.draw_preset(self, context)


class VIEW3D_PT_surge_simulation(SurgeSidebarPanel, bpy.types.Panel):
    """Simulation settings of the scene, drawn from the engine's parameter list"""

    bl_label = "Simulation"

    def draw(self, context):
        settings = context.scene.surge
        layout = self.layout
        layout.use_property_split = True
        layout.use_property_decorate = False
        layout.enabled = not settings.is_baking
        row = layout.row(align=True)
        row.menu("SURGE_MT_liquid_presets", text=SURGE_MT_liquid_presets.bl_label)
        row.operator("surge.liquid_preset_add", text="", icon="ADD")
        row.operator("surge.liquid_preset_add", text="", icon="REMOVE").remove_active = True
        # Blender's own unit scale: every Surge length is in Blender units times this
        layout.prop(context.scene.unit_settings, "scale_length", text="World Scale (m per unit)")
        if len(GROUPS) == 1:
            for name in GROUPS[0][1]:
                layout.prop(settings, name)
            return
        for group, names in GROUPS:
            solver = SOLVER_GROUPS.get(group)
            if group in HIDDEN_UNLESS_CHOSEN and solver != settings.solver:
                continue
            header, body = layout.panel(f"surge_settings_{group.lower().replace(' ', '_')}")
            header.label(text=group)
            if body is not None:
                # a group named after a solver only matters while that solver is chosen
                body.active = solver is None or solver == settings.solver
                for name in names:
                    row = body.row()
                    mode = HYBRID_MODE_ONLY.get(name)
                    row.active = mode is None or mode == settings.hybrid_interface_mode
                    row.prop(settings, name)


def draw_surface(layout, settings) -> None:
    """The baked surface: its settings, Bake Surface and Free Surface, and what the liquid shows."""
    header, body = layout.panel("surge_bake_surface", default_closed=False)
    header.label(text="Surface")
    if body is None:
        return
    col = body.column()
    col.enabled = not settings.is_baking
    for p in settings_mod.surface_parameters():
        col.prop(settings, p.name)
    col.prop(settings, "use_surface_in_bake")
    row = body.row(align=True)
    row.enabled = not settings.is_baking
    row.operator("surge.bake_surface", icon="MOD_FLUIDSIM")
    row.operator("surge.free_surface", icon="TRASH")
    if settings.surface_object is not None:
        body.prop(settings, "liquid_display", expand=True)


#: The whitewater settings as the panel groups them (every engine.settings.WhitewaterSettings field once).
WHITEWATER_GROUPS = (
    ("Amount", ("spray_amount", "foam_amount", "bubble_amount", "trapped_air_rate", "wave_crest_rate")),
    ("Thresholds", ("use_auto_thresholds", "trapped_air_min", "trapped_air_max", "wave_crest_min", "wave_crest_max",
                    "energy_min", "energy_max")),
    ("Motion", ("lifetime", "lifetime_variation", "buoyancy", "bubble_drag", "spray_drag")),
    ("Look", ("spray_size", "foam_size", "bubble_size")),
    ("Limits", ("max_particles", "spray_neighbours", "bubble_neighbours", "seed")),
)


def draw_whitewater(layout, settings) -> None:
    """Whitewater: its settings by group, Bake Whitewater and Free Whitewater, what the last run made."""
    header, body = layout.panel("surge_bake_whitewater", default_closed=True)
    header.label(text="Whitewater")
    if body is None:
        return
    ww = settings.whitewater
    for title, names in WHITEWATER_GROUPS:
        col = body.column(heading=title)
        col.enabled = not settings.is_baking
        for name in names:
            row = col.row()
            if name.endswith(("_min", "_max")):
                row.active = not ww.use_auto_thresholds
            row.prop(ww, name)
    row = body.row(align=True)
    row.enabled = not settings.is_baking
    row.operator("surge.bake_whitewater", icon="MOD_OCEAN")
    row.operator("surge.free_whitewater", icon="TRASH")
    if ww.summary:
        body.label(text=ww.summary, icon="INFO")


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
        row.operator("surge.resume_bake", text="Resume", icon="PLAY")
        row.operator("surge.bake", text="Preview", icon="HIDE_OFF").preview = True
        row.operator("surge.free_bake", icon="TRASH")
        col = layout.column()
        col.enabled = not settings.is_baking
        col.prop(settings, "checkpoint_interval")
        row = col.row(align=True)
        row.operator("surge.bake_in_terminal", icon="CONSOLE")
        row.operator("surge.load_baked", icon="FILE_REFRESH")
        if settings.is_baking:
            layout.progress(factor=settings.bake_progress, type="BAR", text=progress_text(context.scene))
            if settings.bake_particles:
                grid = layout.column(align=True)
                for name, value in bake_figures(settings):
                    row = grid.row()
                    row.label(text=name)
                    row.label(text=value)
            else:
                layout.label(text=settings.bake_status)
            layout.operator("surge.cancel_bake", icon="CANCEL")
            layout.label(text="Esc also cancels; baked frames are kept", icon="INFO")
        elif settings.bake_status:
            layout.label(text=settings.bake_status)
        if settings.liquid_object is not None:
            layout.prop(settings, "liquid_object", text="Liquid")
            col = layout.column()
            col.prop(settings, "use_surface_preview")
            sub = col.column()
            sub.active = settings.use_surface_preview
            sub.prop(settings, "surface_radius")
            sub.prop(settings, "surface_smoothing")
        draw_surface(layout, settings)
        draw_whitewater(layout, settings)
        header, body = layout.panel("surge_bake_keyframes", default_closed=True)
        header.label(text="Bake to Keyframes")
        if body is not None:
            body.enabled = not settings.is_baking
            body.prop(settings, "keyframe_instance")
            row = body.row(align=True)
            row.operator("surge.bake_to_keyframes", text="Objects").mode = "OBJECTS"
            row.operator("surge.bake_to_keyframes", text="Shape Keys").mode = "SHAPE_KEYS"


CLASSES = (SURGE_MT_liquid_presets, VIEW3D_PT_surge_object, VIEW3D_PT_surge_simulation, VIEW3D_PT_surge_bake)

#: (header class, draw function) pairs that register() appends and unregister() removes.
HEADER_DRAWS = ((bpy.types.STATUSBAR_HT_header, draw_status_bar),)
