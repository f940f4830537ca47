"""The Surge tab in the 3D view's sidebar (press N): object role, simulation settings, bake; the object
panel also in Properties > Physics. What is drawn follows the settings description (engine.settings):
a setting shows only for the solver and role that read it, greyed out where its mode makes it idle."""

from __future__ import annotations

import bpy

from ..bridge import bake_state, cache_state, default_cache, export, liquid, roles
from ..bridge.paths import ADDON_ROOT
from ..bridge.progress_text import duration, time_left
from ..engine.settings import liquids
from ..engine import settings as settings_mod
from ..bridge.paths import PRESET_SUBDIR

#: Scene settings grouped under the headings engine.settings gives them: ((heading, (Parameter, ...)), ...).
GROUPS = tuple(
    (group, tuple(p for p in settings_mod.parameters() if p.group == group))
    for group in dict.fromkeys(p.group for p in settings_mod.parameters())
)

#: Every per-object setting, with the roles (and solvers) that read it.
OBJECT_SETTINGS = tuple(settings_mod.object_parameters())


def shown_scene_settings(settings) -> list[tuple[str, list]]:
    """The scene settings the Simulation panel draws for the chosen solver, by heading: each as
    (Parameter, active). A setting the solver does not read is not drawn; one that does not act in the
    current modes (the Hybrid's interface depth with a Fixed interface) is drawn greyed out."""
    out = []
    for group, params in GROUPS:
        shown = [(p, p.acts_with(settings)) for p in params if p.is_used_by(settings.solver)]
        if shown:
            out.append((group, shown))
    return out


def shown_object_settings(obj, solver: str) -> list[tuple]:
    """The per-object settings drawn for ``obj``'s role under ``solver``: (Parameter, active) each."""
    return [(p, p.acts_with(obj.surge)) for p in OBJECT_SETTINGS
            if obj.surge.role in p.roles and p.is_used_by(solver)]


def progress_text(scene) -> str:
    """'Frame 12 of 96' once a frame is done ('Preview frame 5 of 12', 'Surface frame 3 of 72': the running
    session's own range), else what the session is doing."""
    state = bake_state.get(scene)
    if state is not None and state.particles:
        kind = state.kind or "Bake"
        return f"{'Frame' if kind == 'Bake' else kind + ' frame'} {state.frame} of {state.frame_end}"
    return (state.status if state is not None else "") or "Baking"


def remaining_text(state) -> str:
    """The time left, or 'estimating' while only the first frame (which compiles the kernels) is done."""
    return duration(state.remaining) if state.is_estimated else "estimating"


def bake_figures(state) -> list[tuple[str, str]]:
    """(name, value) of each figure of the running bake or stage (a ``SurgeBakeState``), as the sidebar lists
    them; a stage has no substeps of its own."""
    figures = [("Frame", f"{state.frame} of {state.frame_end}")]
    if state.kind in ("", "Bake", "Preview"):
        figures.append(("Substeps", str(state.substeps)))
    figures += [("Particles", f"{state.particles:,}"), ("Elapsed", duration(state.elapsed)),
                ("Remaining", remaining_text(state))]
    if state.memory:
        figures.append(("Memory", f"{state.memory:,.0f} MiB"))
    return figures


def draw_status_bar(self, context) -> None:
    """Appended to Blender's status bar: the running bake's progress and a cancel button."""
    scene = context.scene
    state = bake_state.get(scene)
    if state is None or not state.is_baking:
        return
    row = self.layout.row(align=True)
    text = f"Surge: {progress_text(scene)}"
    if state.particles:
        text += f", {time_left(state.remaining if state.is_estimated else None)}"
    row.progress(factor=state.progress, type="BAR", text=text)
    row.operator("surge.cancel_bake", text="", icon="CANCEL")


def draw_object(layout, context, obj=None) -> None:
    """An object's role, the role buttons and the settings of its role: the active object in the sidebar, where
    the role buttons act on every selected object; ``obj`` in Properties > Physics (the object the editor
    shows, which may be pinned), where they act on that object alone."""
    layout.use_property_split = True
    layout.use_property_decorate = True  # keyframe dots: only the animatable settings offer them
    if obj is not None:
        layout.context_pointer_set("surge_object", obj)  # the role and channel buttons act on it
    obj = obj or context.object
    if obj is None:
        layout.label(text="No active object")
        return
    layout.label(text=obj.name, icon="OBJECT_DATA")
    layout.prop(obj.surge, "role")
    # one click for every selected object (the shown one in Physics), with a display that shows the role
    grid = layout.column(align=True)
    top, bottom = grid.row(align=True), grid.row(align=True)
    top.operator("surge.make_fluid", text="Fluid", icon="MOD_FLUIDSIM")
    top.operator("surge.make_inflow", text="Inflow", icon="IMPORT")
    bottom.operator("surge.make_collider", text="Collider", icon="MOD_PHYSICS")
    bottom.operator("surge.make_outflow", text="Outflow", icon="EXPORT")
    grid.operator("surge.make_rigid_body", text="Rigid Body", icon="RIGID_BODY")
    grid.operator("surge.clear_role", icon="X")
    for p, active in shown_object_settings(obj, context.scene.surge.solver):
        row = layout.row()
        row.active = active
        row.prop(obj.surge, p.name)
    if obj.surge.role == "COLLIDER" and obj.surge.collider_resolved:
        # what the last bake made of this collider (the mode Auto picked)
        layout.label(text=f"Last bake: {obj.surge.collider_resolved}", icon="INFO")
    if obj.surge.role in {"FLUID", "INFLOW"}:
        layout.label(text="Particle Channels")
        row = layout.row()
        row.template_list("SURGE_UL_channels", "", obj.surge, "channels", obj.surge, "active_channel", rows=2)
        col = row.column(align=True)
        col.operator("surge.channel_add", text="", icon="ADD")
        col.operator("surge.channel_remove", text="", icon="REMOVE")
    elif obj.surge.role == "OUTFLOW":
        layout.label(text="Removes the liquid inside this closed mesh", icon="INFO")
    elif obj.surge.role == "RIGID_BODY" and obj.surge.rigid_saved_rotation_mode:
        layout.label(text="Plays its baked motion (Free Bake restores its own)", icon="INFO")
    if obj.surge.role == "NONE" and obj.rigid_body is not None and obj.rigid_body.type == "ACTIVE":
        # Blender's own rigid body world is not stepped inside a liquid bake: offer Surge's
        layout.label(text="Blender's rigid body does not feel the liquid;", icon="INFO")
        layout.operator("surge.make_rigid_body", text="Make Surge Rigid Body (keeps its mass)")


class SURGE_UL_channels(bpy.types.UIList):
    """One row per particle channel of the object: its name and the value its liquid carries"""

    def draw_item(self, context, layout, data, item, icon, active_data, active_propname, index):
        row = layout.row(align=True)
        row.prop(item, "name", text="", emboss=False, icon="PARTICLE_DATA")
        row.prop(item, "value", text="")


class SurgeSidebarPanel:
    bl_space_type = "VIEW_3D"
    bl_region_type = "UI"
    bl_category = "Surge"


class VIEW3D_PT_surge_object(SurgeSidebarPanel, bpy.types.Panel):
    """The active object's role in the simulation"""

    bl_label = "Object"

    def draw(self, context):
        draw_object(self.layout, context)


class PHYSICS_PT_surge(bpy.types.Panel):
    """The Surge role and settings of the object Properties shows, in its Physics tab beside Blender's own
    physics; only for objects that can take a role (those with geometry: not cameras, lights or empties)"""

    bl_label = "Surge Liquid"
    bl_space_type = "PROPERTIES"
    bl_region_type = "WINDOW"
    bl_context = "physics"

    @classmethod
    def poll(cls, context):
        return roles.can_take_role(context.object)

    def draw(self, context):
        draw_object(self.layout, context, context.object)


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


def draw_simulation(layout, context) -> None:
    """The scene's simulation settings by heading, drawn from the engine's parameter list (the sidebar's
    Simulation panel and Properties > Scene)."""
    settings = context.scene.surge
    layout.use_property_split = True
    layout.use_property_decorate = True  # keyframe dots: only the animatable settings offer them
    layout.enabled = not bake_state.is_baking(context.scene)
    row = layout.row(align=True)
    row.menu("SURGE_MT_liquid_presets", text=SURGE_MT_liquid_presets.bl_label)
    row.operator("surge.liquid_preset_add", text="", icon="ADD")
    row.operator("surge.liquid_preset_add", text="", icon="REMOVE").remove_active = True
    # Blender's own unit scale: every Surge length is in Blender units times this
    layout.prop(context.scene.unit_settings, "scale_length", text="World Scale (m per unit)")
    draw_gravity(layout, context.scene)
    header, body = layout.panel("surge_settings_frames", default_closed=True)
    header.label(text="Frames and Time")
    if body is not None:
        body.prop(settings, "use_frame_range")
        col = body.column(align=True)
        col.active = settings.use_frame_range
        col.prop(settings, "frame_start")
        col.prop(settings, "frame_end")
        body.prop(settings, "time_scale")
        note = export.frame_range_note(context.scene) if settings.use_frame_range else ""
        if note:
            body.label(text=note.partition(": ")[2], icon="ERROR")
    for group, shown in shown_scene_settings(settings):
        header, body = layout.panel(f"surge_settings_{group.lower().replace(' ', '_')}")
        header.label(text=group)
        if body is None:
            continue
        for p, active in shown:
            row = body.row()
            row.active = active
            row.prop(settings, p.name)


class VIEW3D_PT_surge_simulation(SurgeSidebarPanel, bpy.types.Panel):
    """Simulation settings of the scene, drawn from the engine's parameter list"""

    bl_label = "Simulation"

    def draw(self, context):
        draw_simulation(self.layout, context)


class SCENE_PT_surge(bpy.types.Panel):
    """The scene's Surge liquid in Properties > Scene: its simulation settings, cache folder and bake buttons
    (the same as the sidebar's Surge tab)"""

    bl_label = "Surge Liquid"
    bl_space_type = "PROPERTIES"
    bl_region_type = "WINDOW"
    bl_context = "scene"
    bl_options = {"DEFAULT_CLOSED"}

    def draw(self, context):
        layout = self.layout
        draw_bake_buttons(layout, context.scene)
        draw_simulation(layout.column(), context)


def draw_gravity(layout, scene) -> None:
    """The gravity the bake uses, in m/s² (Blender's Gravity times the unit scale), with an alert and the fix
    when Blender's default was left at a unit scale other than 1."""
    from ..bridge.export import gravity, gravity_warnings

    g = float(sum(v * v for v in gravity(scene)) ** 0.5)
    row = layout.row()
    row.alert = bool(gravity_warnings(scene))
    row.label(text=f"Gravity: {g:.3g} m/s² (Scene > Gravity)", icon="ERROR" if row.alert else "NONE")
    if row.alert:
        row.operator("surge.earth_gravity", text="Set Earth Gravity")


def surface_setting_acts(settings, name: str) -> bool:
    """False for a surface setting that does nothing with the others as they are (drawn greyed out)."""
    if name in ("surface_collider_mode", "surface_collider_offset"):
        return settings.surface_use_colliders and (name == "surface_collider_mode"
                                                   or settings.surface_collider_mode != "ON")
    if name in ("surface_max_stretch", "surface_centre_smoothing"):
        return settings.surface_anisotropic
    if name == "surface_isolated":
        return settings.surface_drop_particles > 0
    return True


def draw_surface(layout, settings, baking: bool) -> None:
    """The baked surface: its settings, Bake Surface and Free Surface, and what the liquid shows."""
    header, body = layout.panel("surge_bake_surface", default_closed=False)
    header.label(text="Surface")
    if body is None:
        return
    col = body.column()
    col.enabled = not baking
    for p in settings_mod.surface_parameters():
        row = col.row()
        row.active = surface_setting_acts(settings, p.name)
        row.prop(settings, p.name)
    col.prop(settings, "use_surface_in_bake")
    body.operator("surge.bake_surface", icon="MOD_FLUIDSIM")
    row = body.row()
    row.alert = True
    row.operator("surge.free_surface", icon="TRASH")


def draw_display(layout, settings) -> None:
    """How the baked liquid shows: points or surface in the viewport and in renders, each on its own, the
    viewport's share of the points and their size, and the Surface Preview (geometry nodes over the points)."""
    header, body = layout.panel("surge_bake_display", default_closed=False)
    header.label(text="Display")
    if body is None:
        return
    body.use_property_split = True
    body.prop(settings, "liquid_object", text="Liquid")
    if settings.surface_object is not None:
        body.prop(settings, "liquid_display")
        body.prop(settings, "liquid_display_render")
    body.prop(settings, "display_percentage")
    body.prop(settings, "point_scale")
    body.prop(settings, "use_surface_preview")
    sub = body.column()
    sub.active = settings.use_surface_preview
    sub.prop(settings, "surface_radius")
    sub.prop(settings, "surface_smoothing")


#: The whitewater settings as the panel groups them (every engine.settings.WhitewaterSettings field once).
WHITEWATER_GROUPS = (
    ("Amount", ("spray_amount", "foam_amount", "bubble_amount", "trapped_air_rate", "wave_crest_rate")),
    ("Thresholds", ("use_auto_thresholds", "trapped_air_min", "trapped_air_max", "wave_crest_min", "wave_crest_max",
                    "energy_min", "energy_max")),
    ("Motion", ("lifetime", "lifetime_variation", "buoyancy", "bubble_drag", "spray_drag")),
    ("Display", ("spray_size", "foam_size", "bubble_size", "viewport_percentage")),
    ("Limits", ("max_particles", "spray_neighbours", "bubble_neighbours", "seed")),
)


def draw_whitewater(layout, settings, baking: bool) -> None:
    """Whitewater: its settings by group, Bake Whitewater and Free Whitewater, what the last run made."""
    header, body = layout.panel("surge_bake_whitewater", default_closed=True)
    header.label(text="Whitewater")
    if body is None:
        return
    ww = settings.whitewater
    for title, names in WHITEWATER_GROUPS:
        col = body.column(heading=title)
        col.enabled = not baking
        for name in names:
            row = col.row()
            if name.endswith(("_min", "_max")):
                row.active = not ww.use_auto_thresholds
            row.prop(ww, name)
    row = body.row()
    row.enabled = not baking
    row.prop(ww, "use_in_bake")
    body.operator("surge.bake_whitewater", icon="MOD_OCEAN")
    row = body.row()
    row.alert = True
    row.operator("surge.free_whitewater", icon="TRASH")
    if ww.summary:
        body.label(text=ww.summary, icon="INFO")


def draw_cache_lines(layout, scene) -> None:
    """What the liquid plays, and an Outdated mark when the set-up changed since the cached frames were baked
    (the comparison the resume dialog makes, shown before anything is pressed)."""
    reasons = cache_state.outdated(scene, ADDON_ROOT, export.settings_from_scene(scene), export.bake_range(scene),
                                   export.simulated_fps(scene))
    if reasons:
        layout.label(text=f"Outdated: {'; '.join(reasons)} changed since the bake", icon="ERROR")
    line = cache_state.playing(scene, ADDON_ROOT, liquid.current_file(scene))
    if line:
        layout.label(text=line, icon="PLAY")


def draw_bake_buttons(layout, scene) -> None:
    """Bake, Resume and Preview in a row; Free Bake apart and in red (it deletes, after asking); the cache
    folder above them."""
    col = layout.column()
    col.enabled = not bake_state.is_baking(scene)
    col.prop(scene.surge, "cache_directory", text="")
    if not scene.surge.cache_directory.strip():
        default = default_cache.default_cache_dir(scene)
        col.label(text=f"Default: {default}" if default else "Save the file, or choose a folder", icon="FILE_FOLDER")
    row = layout.row(align=True)
    row.operator("surge.bake", icon="PHYSICS")
    row.operator("surge.resume_bake", text="Resume", icon="PLAY")
    row.operator("surge.bake", text="Preview", icon="HIDE_OFF").preview = True
    row = layout.row()
    row.alert = True
    row.operator("surge.free_bake", icon="TRASH")


class VIEW3D_PT_surge_bake(SurgeSidebarPanel, bpy.types.Panel):
    """Cache folder, bake and free buttons, and the progress of a running bake"""

    bl_label = "Bake"

    def draw(self, context):
        scene = context.scene
        settings = scene.surge
        state = bake_state.get(scene)
        baking = state is not None and state.is_baking
        layout = self.layout
        draw_bake_buttons(layout, scene)
        col = layout.column()
        col.enabled = not baking
        col.prop(settings, "checkpoint_interval")
        row = col.row(align=True)
        row.operator("surge.bake_in_terminal", icon="CONSOLE")
        row.operator("surge.load_baked", icon="FILE_REFRESH")
        if baking:
            layout.progress(factor=state.progress, type="BAR", text=progress_text(scene))
            if state.particles:
                grid = layout.column(align=True)
                for name, value in bake_figures(state):
                    row = grid.row()
                    row.label(text=name)
                    row.label(text=value)
            else:
                layout.label(text=state.status)
            layout.operator("surge.cancel_bake", icon="CANCEL")
            layout.label(text="Esc also cancels when the animation is not playing; baked frames are kept",
                         icon="INFO")
        elif state is not None and state.status:
            layout.label(text=state.status)
        if not baking:
            draw_cache_lines(layout, scene)
        if settings.liquid_object is not None:
            draw_display(layout, settings)
        draw_surface(layout, settings, baking)
        draw_whitewater(layout, settings, baking)
        header, body = layout.panel("surge_bake_keyframes", default_closed=True)
        header.label(text="Bake to Keyframes")
        if body is not None:
            body.enabled = not baking
            body.prop(settings, "keyframe_instance")
            row = body.row(align=True)
            row.operator("surge.bake_to_keyframes", text="Objects").mode = "OBJECTS"
            row.operator("surge.bake_to_keyframes", text="Shape Keys").mode = "SHAPE_KEYS"


CLASSES = (SURGE_MT_liquid_presets, SURGE_UL_channels, VIEW3D_PT_surge_object, PHYSICS_PT_surge,
           VIEW3D_PT_surge_simulation, SCENE_PT_surge, VIEW3D_PT_surge_bake)

#: (header class, draw function) pairs that register() appends and unregister() removes.
HEADER_DRAWS = ((bpy.types.STATUSBAR_HT_header, draw_status_bar),)
