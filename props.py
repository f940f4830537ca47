"""Blender properties: the scripting interface of Surge.

``Object.surge`` holds an object's role in the simulation and the settings of each role, generated
from :func:`engine.settings.object_parameters`, plus the collider mode the last bake used;
``Scene.surge`` holds every engine setting, generated from :func:`engine.settings.parameters`, and
the cache folder. Names, defaults, limits, tooltips, enum items and whether a setting may be
animated thus have one source of truth: only the settings the engine reads at every frame
(``Parameter.animatable``) offer keyframes and drivers.

The state of a running bake (progress figures written up to ten times a second) is not scene data:
it lives on the window manager (``WindowManager.surge_bakes``, one :class:`SurgeBakeState` per
scene name; see ``bridge.bake_state``), which is never saved, so a bake does not mark the file as
changed and a file saved mid-bake does not claim to be baking.

Values with a length unit are stored in Blender units, as every Blender length is; the bridge
multiplies them by the scene's unit scale to get metres (see ``bridge.export``).
"""

from __future__ import annotations

import math

import bpy
from bpy.props import (BoolProperty, CollectionProperty, EnumProperty, FloatProperty, FloatVectorProperty,
                       IntProperty, PointerProperty, StringProperty)

from .engine import settings as settings_mod

ROLE_ITEMS = (
    ("NONE", "None", "This object takes no part in the Surge simulation"),
    ("FLUID", "Fluid", "The closed volume of this mesh is filled with liquid at the first frame of the bake"),
    ("INFLOW", "Inflow", "Emits liquid during the bake, from its surface or filling its volume"),
    ("COLLIDER", "Collider", "The liquid cannot pass through this object; its collider mode says how"),
    ("OUTFLOW", "Outflow", "Removes the liquid that enters the closed volume of this mesh"),
    ("RIGID_BODY", "Rigid Body", "A closed mesh the bake moves: it floats, sinks, tumbles and collides, and pushes the "
                                 "liquid back; after the bake it plays its motion as keyframes"),
)

#: Engine unit symbol -> Blender FloatProperty unit. Units Blender has no type for stay 'NONE' (angular
#: velocity: Blender's ROTATION unit would show degrees, the engine takes radians per second).
#: Seconds are absolute time (not frames), so they do not depend on the scene's frame rate.
BLENDER_UNITS = {"m": "LENGTH", "m/s": "VELOCITY", "s": "TIME_ABSOLUTE", "rad/s": "NONE"}

#: Engine unit symbol -> FloatProperty subtype, for units shown as a suffix rather than converted.
BLENDER_SUBTYPES = {"%": "PERCENTAGE"}


def _display_precision(p: settings_mod.Parameter) -> int:
    """Decimal digits that show the default and the limits without rounding them away.

    Blender shows at most 6 decimals; 1e-6 needs all of them.
    """
    digits = 3
    default = max(map(abs, p.default)) if p.size else p.default
    for value in (default, p.min, p.soft_min):
        if value:
            digits = max(digits, -math.floor(math.log10(abs(value))) + 1)
    return min(digits, 6)


#: Engine unit symbol -> FloatVectorProperty subtype of a vector setting.
BLENDER_VECTOR_SUBTYPES = {"m": "XYZ_LENGTH", "m/s": "VELOCITY"}

#: ``options`` of a property the engine reads once per bake: no keyframes, no drivers.
STATIC = set()
#: ``options`` of a property the engine reads at every frame.
ANIMATABLE = {"ANIMATABLE"}


def _property_for(p: settings_mod.Parameter):
    """The bpy.props definition mirroring one engine parameter."""
    limits = {k: getattr(p, k) for k in ("min", "max", "soft_min", "soft_max") if getattr(p, k) is not None}
    common = dict(name=p.label, description=p.tooltip, default=p.default,
                  options=ANIMATABLE if p.animatable else STATIC)
    if p.kind is float and p.size:
        return FloatVectorProperty(**common, size=p.size, **{k: float(v) for k, v in limits.items()},
                                   unit=BLENDER_UNITS.get(p.unit, "NONE"),
                                   subtype=BLENDER_VECTOR_SUBTYPES.get(p.unit, "XYZ"), precision=_display_precision(p))
    if p.kind is bool:
        return BoolProperty(**common)
    if p.kind is int:
        return IntProperty(**common, **{k: int(v) for k, v in limits.items()})
    if p.kind is float:
        return FloatProperty(**common, **{k: float(v) for k, v in limits.items()},
                             unit=BLENDER_UNITS.get(p.unit, "NONE"), subtype=BLENDER_SUBTYPES.get(p.unit, "NONE"),
                             precision=_display_precision(p))
    if p.kind is str and p.items:
        return EnumProperty(items=[tuple(i) for i in p.items], **common)
    if p.kind is str:
        return StringProperty(**common)
    raise TypeError(f"Engine parameter '{p.name}' has a type ({p.kind!r}) the add-on cannot show")


def object_parameters() -> list[settings_mod.Parameter]:
    """Every per-object engine parameter ``Object.surge`` holds (a name shared by two roles, such as
    ``spacing_factor``, is one property); see :func:`engine.settings.object_parameters`."""
    return settings_mod.object_parameters()


class SurgeParticleChannel(bpy.types.PropertyGroup):
    """One named particle channel an object sets on its liquid (``Object.surge.channels``).

    ``name`` (the PropertyGroup's own) is the channel's name: a cache attribute of that name holds
    ``value`` for the particles of this object and 0 for the others.
    """

    value: FloatProperty(
        name="Value", default=0.0, options=STATIC,
        description="Value this object's liquid carries in the channel; particles of other objects carry 0")


def _object_annotations() -> dict:
    ann = {"role": EnumProperty(
        name="Role", items=ROLE_ITEMS, default="NONE", options=STATIC,
        description="What this object does in the Surge liquid simulation")}
    for p in object_parameters():
        ann[p.name] = _property_for(p)
    ann["channels"] = CollectionProperty(
        type=SurgeParticleChannel, name="Particle Channels",
        description="Named values the liquid of this Fluid or Inflow object carries into the cache as particle "
                    "attributes (for shading: which source a drop came from, a colour to mix)")
    ann["active_channel"] = IntProperty(
        name="Active Channel", default=0, min=0, options={"HIDDEN", "SKIP_SAVE"},
        description="The particle channel selected in the list (the one Remove Channel removes)")
    ann["has_previous_display"] = BoolProperty(
        name="Display Remembered", default=False, options={"HIDDEN"},
        description="True while Surge has changed this object's display for its role and remembers the one the "
                    "artist gave it (Clear Role gives it back)")
    ann["previous_display_type"] = StringProperty(
        name="Previous Display", default="TEXTURED", options={"HIDDEN"},
        description="How the viewport drew this object before Surge drew it as wire for its role")
    ann["previous_hide_render"] = BoolProperty(
        name="Previously Hidden in Renders", default=False, options={"HIDDEN"},
        description="Whether this object was hidden in renders before Surge changed that for its role")
    # a rigid body's own animation and transform, kept while its baked motion plays (bridge.rigid)
    ann["rigid_saved_action"] = PointerProperty(
        name="Own Animation", type=bpy.types.Action, options=STATIC,
        description="The action this rigid body had before its baked motion replaced it; Free Bake gives it back")
    ann["rigid_saved_matrix"] = FloatVectorProperty(
        name="Own Transform", size=16, default=(0.0,) * 16, options=STATIC,
        description="This rigid body's transform (location, rotation, scale) before its baked motion; Free Bake "
                    "puts it back")
    ann["rigid_saved_rotation_mode"] = StringProperty(
        name="Own Rotation Mode", default="", options=STATIC,
        description="This rigid body's rotation mode before its baked motion; empty while no baked motion plays")
    ann["collider_resolved"] = StringProperty(
        name="Acts As", default="", options=STATIC,
        description="How the last bake treated this collider (the mode Auto picked, for instance); set by the "
                    "bake, empty until the collider has been baked")
    return ann


def _surface_changed(settings, context) -> None:
    from .bridge import export, surface

    scene = settings.id_data
    surface.sync(scene, export.unit_scale(scene))


def _display_changed(settings, context) -> None:
    from .bridge import liquid

    liquid.apply_display(settings.id_data)


#: Scene.surge.liquid_display items.
LIQUID_DISPLAYS = (
    ("SURFACE", "Surface", "Show and render the baked surface mesh (the points if no surface is baked)"),
    ("POINTS", "Points", "Show and render the particles"),
    ("BOTH", "Both", "Show and render the surface and the particles"),
)


def _surface_annotations() -> dict:
    """The baked surface's settings (engine.settings.SurfaceSettings) and its display."""
    ann = {p.name: _property_for(p) for p in settings_mod.surface_parameters()}
    ann.update(
        use_surface_in_bake=BoolProperty(
            name="Mesh During Bake", default=False, options=STATIC,
            description="Make the surface mesh of each frame inside the bake, as soon as the frame is simulated; "
                        "off, press Bake Surface after the bake (or to re-mesh with new surface settings)"),
        liquid_display=EnumProperty(
            name="Viewport", items=LIQUID_DISPLAYS, default="SURFACE", update=_display_changed, options=STATIC,
            description="What of the baked liquid the viewport shows (renders follow Render)"),
        liquid_display_render=EnumProperty(
            name="Render", items=LIQUID_DISPLAYS, default="SURFACE", update=_display_changed, options=STATIC,
            description="What of the baked liquid renders show (the viewport follows Viewport)"),
        display_percentage=FloatProperty(
            name="Viewport Amount", default=100.0, min=0.0, max=100.0, subtype="PERCENTAGE", precision=0,
            update=_display_changed, options=STATIC,
            description="Share of the baked particles the viewport draws, the same particles in every frame; "
                        "renders draw them all"),
        point_scale=FloatProperty(
            name="Point Size", default=1.0, min=0.0, soft_min=0.1, soft_max=4.0, precision=2,
            update=_display_changed, options=STATIC,
            description="Size of the particles' spheres in the viewport and in renders, as a multiple of the "
                        "particle radius (half the particle spacing); no new bake needed"),
        surface_object=PointerProperty(
            name="Surface Object", type=bpy.types.Object,
            description="The mesh object that plays the baked surface; meshing again updates it"),
        surface_spray_object=PointerProperty(
            name="Surface Spray Object", type=bpy.types.Object,
            description="The point-cloud object that plays the small drops the surface hands to the spray (Small "
                        "Drops: Spray), spheres of their volume in the water material"),
    )
    return ann


def _whitewater_display_changed(settings, context) -> None:
    from .bridge import whitewater

    whitewater.apply_display(settings.id_data)


def _whitewater_annotations() -> dict:
    """Whitewater settings (engine.settings.WhitewaterSettings), its display (sizes and viewport amount, set
    without making it again) and the three objects that play it."""
    from .engine.whitewater.stage import NOMINAL_SIZES

    ann = {p.name: _property_for(p) for p in settings_mod.whitewater_parameters()}
    for kind, name, label in (("spray", "spray_size", "Spray"), ("foam", "foam_size", "Foam"),
                              ("bubbles", "bubble_size", "Bubble")):
        ann[name] = FloatProperty(
            name=f"{label} Size", default=NOMINAL_SIZES[kind], min=1e-6, soft_max=0.1, unit="LENGTH", precision=4,
            update=_whitewater_display_changed, options=STATIC,
            description=f"Radius at which {kind} particles are drawn and render; a display setting: changing it "
                        f"makes no whitewater again")
    ann["viewport_percentage"] = FloatProperty(
        name="Whitewater in Viewport", default=100.0, min=0.0, max=100.0, subtype="PERCENTAGE", precision=0,
        update=_whitewater_display_changed, options=STATIC,
        description="Share of the whitewater particles the viewport draws, the same ones in every frame; renders "
                    "draw them all")
    for kind, label in (("spray", "Spray"), ("foam", "Foam"), ("bubbles", "Bubbles")):
        ann[f"{kind}_object"] = PointerProperty(
            name=f"{label} Object", type=bpy.types.Object,
            description=f"The point-cloud object that plays the baked {kind}; baking whitewater again updates it")
    ann["use_in_bake"] = BoolProperty(
        name="Make During Bake", default=False, options=STATIC,
        description="Make the whitewater of each frame inside the particle bake, as soon as the frame is simulated "
                    "(automatic thresholds then come from the frames simulated so far); off, press Bake Whitewater "
                    "after the bake (or to make it again with new settings)")
    ann["summary"] = StringProperty(
        name="Last Whitewater", default="",
        description="What the last Bake Whitewater made: particles, the thresholds it used, whether the cap bound")
    return ann


#: ``Scene.surge.whitewater``: spray, foam and bubbles made over the baked liquid (a group of its own:
#: these settings never change the liquid's cache).
SurgeWhitewaterSettings = type("SurgeWhitewaterSettings", (bpy.types.PropertyGroup,), {
    "__doc__": "Whitewater settings of a scene (``Scene.surge.whitewater``), mirroring "
               "engine.settings.WhitewaterSettings, and the objects that play it.",
    "__annotations__": _whitewater_annotations(),
})


def _scene_annotations() -> dict:
    ann = {p.name: _property_for(p) for p in settings_mod.parameters()}
    ann.update(_surface_annotations())
    ann["whitewater"] = PointerProperty(
        type=SurgeWhitewaterSettings, name="Whitewater",
        description="Spray, foam and bubbles made from the baked liquid (Bake Whitewater)")
    ann.update(
        cache_directory=StringProperty(
            name="Cache Directory", subtype="DIR_PATH", default="",
            options={"PATH_SUPPORTS_BLEND_RELATIVE"},
            description="Folder where Surge writes the baked frames and the point cache Blender plays back; empty "
                        "picks a folder of its own for this file and scene (in the preferences' cache root, or in "
                        "surge_cache beside the .blend file); a path starting with // is relative to the .blend file"),
        use_frame_range=BoolProperty(
            name="Own Frame Range", default=False, options=STATIC,
            description="Simulate its own frames (Start to End) instead of the scene's frame range"),
        frame_start=IntProperty(
            name="Start", default=1, min=0, max=999_999, options=STATIC,
            description="First frame of the simulation (the liquid's state as the Fluid objects hold it), with Own "
                        "Frame Range"),
        frame_end=IntProperty(
            name="End", default=250, min=0, max=999_999, options=STATIC,
            description="Last frame the simulation bakes, with Own Frame Range; frames past the scene's range are "
                        "baked but never played"),
        time_scale=FloatProperty(
            name="Time Scale", default=1.0, min=0.01, max=100.0, soft_min=0.1, soft_max=4.0, precision=3,
            options=STATIC,
            description="Simulated time per frame, as a share of the frame's real time: 0.5 is slow motion at half "
                        "speed (the liquid, colliders and inflows all move half as far per frame), 2 fast motion"),
        cache_folder_name=StringProperty(
            name="Default Folder Name", default="", options={"HIDDEN"},
            description="The scene's name when it first baked: its default cache folder keeps this name, so that "
                        "renaming the scene does not lose its cache; empty until the first bake"),
        checkpoint_interval=IntProperty(
            name="Checkpoint Every", default=10, min=0, soft_max=100, options=STATIC,
            description="Save the simulation state every this many frames, so that a cancelled or crashed bake "
                        "can resume from the last save instead of starting over; 0 saves none"),
        keyframe_instance=PointerProperty(
            name="Particle Mesh", type=bpy.types.Object, poll=lambda _self, obj: obj.type == "MESH",
            options=STATIC,
            description="Mesh every particle object shares when baking to keyframes as objects; empty makes a "
                        "small sphere of the particle radius"),
        use_surface_preview=BoolProperty(
            name="Surface Preview", default=False, update=_surface_changed, options=STATIC,
            description="Show the liquid as a smooth surface made by geometry nodes from the baked points (also in "
                        "renders); off shows the points"),
        surface_radius=FloatProperty(
            name="Preview Radius", default=0.02, min=1e-4, soft_max=1.0, unit="LENGTH", precision=4,
            update=_surface_changed, options=STATIC,
            description="Radius of the sphere around each particle that the surface wraps; about the particle "
                        "spacing gives a closed surface, smaller shows separate drops"),
        surface_smoothing=IntProperty(
            name="Preview Smoothing", default=2, min=0, soft_max=20, update=_surface_changed, options=STATIC,
            description="Smoothing passes over the surface mesh; more passes round off the bumps of single particles"),
        liquid_object=PointerProperty(
            name="Liquid Object", type=bpy.types.Object, options=STATIC,
            description="The point-cloud object that plays the baked liquid; baking again updates it"),
    )
    return ann


class SurgeBakeState(bpy.types.PropertyGroup):
    """The state of one scene's bake (``WindowManager.surge_bakes[scene name]``), drawn by the sidebar and
    the status bar. On the window manager, so never saved and never marking the file as changed."""

    is_baking: BoolProperty(
        name="Is Baking", default=False, options=STATIC,
        description="True while a bake of this scene is running")
    progress: FloatProperty(
        name="Bake Progress", default=0.0, min=0.0, max=1.0, subtype="FACTOR", options=STATIC,
        description="Fraction of the frame range baked so far")
    status: StringProperty(
        name="Bake Status", default="", options=STATIC,
        description="What the last or current bake is doing, or how it ended")
    cancel_requested: BoolProperty(
        name="Cancel Requested", default=False, options=STATIC,
        description="Set by the Cancel button; the running bake stops after its current substep and keeps "
                    "the frames baked so far")
    kind: StringProperty(
        name="Running", default="", options=STATIC,
        description="What runs or ran last: Bake, Preview, or a stage over the cache (Surface, Whitewater)")
    frame_start: IntProperty(
        name="First Frame", default=0, options=STATIC,
        description="First frame of what runs: the bake's range, a preview's first frames, or the frames a stage "
                    "works through")
    frame_end: IntProperty(
        name="Last Frame", default=0, options=STATIC,
        description="Last frame of what runs (a preview stops after its first frames, a stage at the last baked "
                    "frame)")
    frame: IntProperty(
        name="Frame", default=0, options=STATIC,
        description="Last frame the running bake finished")
    substeps: IntProperty(
        name="Substeps", default=0, min=0, options=STATIC,
        description="Substeps the last baked frame took; many substeps mean fast liquid or a fine spacing")
    particles: IntProperty(
        name="Particles", default=0, min=0, options=STATIC,
        description="Particles in the last baked frame")
    elapsed: FloatProperty(
        name="Elapsed", default=0.0, min=0.0, unit="TIME_ABSOLUTE", options=STATIC,
        description="Time since the running bake started")
    remaining: FloatProperty(
        name="Remaining", default=0.0, min=0.0, unit="TIME_ABSOLUTE", options=STATIC,
        description="Estimated time until the running bake ends, from the speed of the frames baked so far")
    is_estimated: BoolProperty(
        name="Time Left Known", default=False, options=STATIC,
        description="True once frames after the first (which compiles the kernels) have been timed, so that "
                    "the time left means something")
    memory: FloatProperty(
        name="Memory", default=0.0, min=0.0, options=STATIC,
        description="Memory the bake process holds, in mebibytes (MiB)")


#: ``Object.surge``: the role, and the collider, fluid and inflow settings generated from the
#: engine's parameter lists (see :func:`object_parameters`; each used when the role matches).
SurgeObjectSettings = type("SurgeObjectSettings", (bpy.types.PropertyGroup,), {
    "__doc__": "Per-object Surge settings (``Object.surge``): role, and the settings of each role, mirroring "
               "engine.settings.ColliderSettings, FluidSettings and InflowSettings.",
    "__annotations__": _object_annotations(),
})

#: ``Scene.surge``: generated so that adding an engine setting needs no change here.
SurgeSceneSettings = type("SurgeSceneSettings", (bpy.types.PropertyGroup,), {
    "__doc__": "Per-scene Surge settings (``Scene.surge``), mirroring engine.settings.SimulationSettings.",
    "__annotations__": _scene_annotations(),
})



class SurgePreferences(bpy.types.AddonPreferences):
    """Surge's add-on preferences (*Edit > Preferences > Add-ons > Surge*): bake threads, default cache root."""

    bl_idname = __package__

    bake_threads: IntProperty(
        name="Bake Threads", default=0, min=0, max=1024, soft_max=64, options=STATIC,
        description="Most processor threads a bake may use, so that Blender and other programs stay responsive; "
                    "0 uses every core")
    cache_root: StringProperty(
        name="Cache Root", subtype="DIR_PATH", default="", options={"PATH_SUPPORTS_BLEND_RELATIVE"},
        description="Folder that holds the default cache folders of scenes without a Cache Directory of their "
                    "own, one per .blend file and scene; empty keeps them in surge_cache beside each .blend file")

    def draw(self, context):
        layout = self.layout
        layout.use_property_split = True
        layout.prop(self, "bake_threads")
        layout.prop(self, "cache_root")


CLASSES = (SurgeParticleChannel, SurgeObjectSettings, SurgeWhitewaterSettings, SurgeSceneSettings, SurgeBakeState,
           SurgePreferences)


def _wedge_settings(variation, context, edit_text):
    """The settings a wedge can vary, offered by the Setting field's search list: the scene's, or those of the
    variation's object (its role's)."""
    from .bridge import setting_checks

    text = edit_text.lower()
    return [item for item in setting_checks.variable_settings(variation.target)
            if text in item[0] or text in item[1].lower()]


class SurgeWedgeVariation(bpy.types.PropertyGroup):
    """One setting of a wedge and the values to try (``Scene.surge_wedge.variations``)."""

    setting: StringProperty(
        name="Setting", default="pbf_velocity_smoothing", options=STATIC, search=_wedge_settings,
        description="The Surge setting to vary, picked from the list (its name as in Python): a scene setting "
                    "(particle_spacing, dynamic_viscosity, ...) or, with an object, that object's setting "
                    "(normal_speed, friction, ...)")
    target: PointerProperty(
        type=bpy.types.Object, name="Object", options=STATIC,
        description="The object whose setting varies; empty for a setting of the scene")
    values: StringProperty(
        name="Values", default="0.01,0.1", options=STATIC,
        description="The values to try, separated by commas; a vector's components separated by colons (0:0:-9.81)")


class SurgeWedgeSettings(bpy.types.PropertyGroup):
    """A wedge of this scene (``Scene.surge_wedge``): the variations and where and how to bake them."""

    variations: CollectionProperty(type=SurgeWedgeVariation, name="Variations",
                                   description="The settings the wedge varies, each with the values to try")
    active: IntProperty(name="Active Variation", default=0, min=0, options={"SKIP_SAVE"},
                        description="The variation selected in the list (the one Remove Variation removes)")
    output_directory: StringProperty(
        name="Wedge Folder", default="//wedge/", subtype="DIR_PATH", options={"PATH_SUPPORTS_BLEND_RELATIVE"},
        description="Folder receiving one sub-folder per combination (its .blend and cache) and wedge.json; "
                    "// is the .blend file's folder")
    workers: IntProperty(
        name="Workers", default=2, min=1, max=256, options=STATIC,
        description="Combinations baked at once on this machine (each a separate Blender); ignored with a scheduler")
    scheduler: StringProperty(
        name="Scheduler", default="", options=STATIC,
        description="Address of a running Dask scheduler of a farm (tcp://host:8786); empty bakes on this machine")


WEDGE_CLASSES = (SurgeWedgeVariation, SurgeWedgeSettings)
CLASSES = CLASSES + WEDGE_CLASSES


def _live_display_changed(settings, context) -> None:
    from .bridge import live

    live.sync_display(settings.id_data)


def _live_annotations() -> dict:
    """The live session's settings (engine.settings.LiveSettings) and how its liquid is drawn."""
    ann = {p.name: _property_for(p) for p in settings_mod.live_parameters()}
    ann.update(
        show_surface=BoolProperty(
            name="Surface", default=False, update=_live_display_changed, options=STATIC,
            description="Draw the live liquid as a smooth surface around the particles (a union of spheres, "
                        "smoothed) instead of as points"),
        surface_radius=FloatProperty(
            name="Radius in Spacings", default=1.0, min=0.25, max=4.0, update=_live_display_changed, options=STATIC,
            description="Radius of the sphere around each particle that the live surface wraps, as a multiple of "
                        "the particle spacing; about 1 gives a closed surface, smaller shows separate drops"),
        surface_smoothness=IntProperty(
            name="Smoothness", default=2, min=0, max=20, update=_live_display_changed, options=STATIC,
            description="Passes of smoothing over the live surface's distance field; more passes round off the "
                        "bumps of single particles and merge close drops"),
    )
    return ann


#: ``Scene.surge_live``: how the live session simulates and draws (mirroring engine.settings.LiveSettings).
SurgeLiveSettings = type("SurgeLiveSettings", (bpy.types.PropertyGroup,), {
    "__doc__": "Live session settings of a scene (``Scene.surge_live``), mirroring engine.settings.LiveSettings, "
               "and the live liquid's display.",
    "__annotations__": _live_annotations(),
})

CLASSES = CLASSES + (SurgeLiveSettings,)
