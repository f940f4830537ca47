"""Blender properties: the scripting interface of Surge.

``Object.surge`` holds an object's role in the simulation and the settings of each role, generated
from :func:`engine.settings.collider_parameters`, :func:`engine.settings.fluid_parameters` and
:func:`engine.settings.inflow_parameters` (see :func:`object_parameters`), plus the collider mode
the last bake used;
``Scene.surge`` holds every engine setting, generated from :func:`engine.settings.parameters`.
Names, defaults, limits, tooltips and enum items thus have one source of truth. ``Scene.surge``
also holds the cache folder and the bake state the sidebar draws.

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
)

#: Engine unit symbol -> Blender FloatProperty unit. Units Blender has no type for stay 'NONE'.
#: Seconds are absolute time (not frames), so they do not depend on the scene's frame rate.
BLENDER_UNITS = {"m": "LENGTH", "m/s": "VELOCITY", "s": "TIME_ABSOLUTE"}

#: Engine unit symbol -> FloatProperty subtype, for units shown as a suffix rather than converted.
BLENDER_SUBTYPES = {"%": "PERCENTAGE"}


def _display_precision(p: settings_mod.Parameter) -> int:
    """Decimal digits that show the default and the limits without rounding them away.

    Blender shows at most 6 decimals; 1e-6 (water's viscosity) needs all of them.
    """
    digits = 3
    for value in (p.default, p.min, p.soft_min):
        if value:
            digits = max(digits, -math.floor(math.log10(abs(value))) + 1)
    return min(digits, 6)


def _property_for(p: settings_mod.Parameter):
    """The bpy.props definition mirroring one engine parameter."""
    limits = {k: getattr(p, k) for k in ("min", "max", "soft_min", "soft_max") if getattr(p, k) is not None}
    common = dict(name=p.label, description=p.tooltip, default=p.default)
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
    """Every per-object engine parameter ``Object.surge`` holds: collider, fluid and inflow settings
    (a name shared by two roles, such as ``spacing_factor``, is one property)."""
    out: dict[str, settings_mod.Parameter] = {}
    for p in (settings_mod.collider_parameters() + settings_mod.fluid_parameters()
              + settings_mod.inflow_parameters()):
        if p.name in out and out[p.name] != p:
            raise TypeError(f"Engine parameter '{p.name}' is declared twice with different metadata")
        out[p.name] = p
    return list(out.values())


class SurgeParticleChannel(bpy.types.PropertyGroup):
    """One named particle channel an object sets on its liquid (``Object.surge.channels``).

    ``name`` (the PropertyGroup's own) is the channel's name: a cache attribute of that name holds
    ``value`` for the particles of this object and 0 for the others.
    """

    value: FloatProperty(
        name="Value", default=0.0,
        description="Value this object's liquid carries in the channel; particles of other objects carry 0")


def _object_annotations() -> dict:
    ann = {"role": EnumProperty(
        name="Role", items=ROLE_ITEMS, default="NONE",
        description="What this object does in the Surge liquid simulation")}
    for p in object_parameters():
        ann[p.name] = _property_for(p)
    ann["channels"] = CollectionProperty(
        type=SurgeParticleChannel, name="Particle Channels",
        description="Named values the liquid of this Fluid or Inflow object carries into the cache as particle "
                    "attributes (for shading: which source a drop came from, a colour to mix)")
    # the initial velocity of a Fluid object: a vector the engine's per-setting description has no kind for
    ann["initial_velocity"] = FloatVectorProperty(
        name="Initial Velocity", size=3, default=(0.0, 0.0, 0.0), subtype="VELOCITY", unit="VELOCITY",
        description="World-space velocity the liquid of this Fluid object starts with, at the first frame of the "
                    "bake")
    ann["use_object_motion"] = BoolProperty(
        name="Use Object Motion", default=False,
        description="Add this Fluid object's own motion over the first frame of the bake (its keyframes, path, "
                    "parent or constraints; translation and rotation) to the Initial Velocity, so that liquid "
                    "carried by an animated object starts moving with it")
    ann["collider_resolved"] = StringProperty(
        name="Acts As", default="",
        description="How the last bake treated this collider (the mode Auto picked, for instance); set by the "
                    "bake, empty until the collider has been baked")
    return ann


def _surface_changed(settings, context) -> None:
    from .bridge import export, surface

    scene = settings.id_data
    surface.sync(scene, export.unit_scale(scene))


def _scene_annotations() -> dict:
    ann = {p.name: _property_for(p) for p in settings_mod.parameters()}
    ann.update(
        cache_directory=StringProperty(
            name="Cache Directory", subtype="DIR_PATH", default="//surge_cache/",
            options={"PATH_SUPPORTS_BLEND_RELATIVE"},
            description="Folder where Surge writes the baked frames and the point cache Blender plays back; "
                        "a path starting with // is relative to the saved .blend file"),
        checkpoint_interval=IntProperty(
            name="Checkpoint Every", default=10, min=0, soft_max=100,
            description="Save the simulation state every this many frames, so that a cancelled or crashed bake "
                        "can resume from the last save instead of starting over; 0 saves none"),
        keyframe_instance=PointerProperty(
            name="Particle Mesh", type=bpy.types.Object, poll=lambda _self, obj: obj.type == "MESH",
            description="Mesh every particle object shares when baking to keyframes as objects; empty makes a "
                        "small sphere of the particle radius"),
        use_surface_preview=BoolProperty(
            name="Surface Preview", default=False, update=_surface_changed,
            description="Show the liquid as a smooth surface made by geometry nodes from the baked points (also in "
                        "renders); off shows the points"),
        surface_radius=FloatProperty(
            name="Surface Radius", default=0.02, min=1e-4, soft_max=1.0, unit="LENGTH", precision=4,
            update=_surface_changed,
            description="Radius of the sphere around each particle that the surface wraps; about the particle "
                        "spacing gives a closed surface, smaller shows separate drops"),
        surface_smoothing=IntProperty(
            name="Surface Smoothing", default=2, min=0, soft_max=20, update=_surface_changed,
            description="Smoothing passes over the surface mesh; more passes round off the bumps of single particles"),
        liquid_object=PointerProperty(
            name="Liquid Object", type=bpy.types.Object,
            description="The point-cloud object that plays the baked liquid; baking again updates it"),
        is_baking=BoolProperty(
            name="Is Baking", default=False, options={"SKIP_SAVE"},
            description="True while a bake of this scene is running"),
        bake_progress=FloatProperty(
            name="Bake Progress", default=0.0, min=0.0, max=1.0, subtype="FACTOR", options={"SKIP_SAVE"},
            description="Fraction of the frame range baked so far"),
        bake_status=StringProperty(
            name="Bake Status", default="",
            description="What the last or current bake is doing, or how it ended"),
        bake_cancel_requested=BoolProperty(
            name="Cancel Requested", default=False, options={"SKIP_SAVE"},
            description="Set by the Cancel button; the running bake stops after its current substep and keeps "
                        "the frames baked so far"),
        # figures of the running bake, drawn by the sidebar and the status bar
        bake_frame=IntProperty(
            name="Frame", default=0, options={"SKIP_SAVE"},
            description="Last frame the running bake finished"),
        bake_substeps=IntProperty(
            name="Substeps", default=0, min=0, options={"SKIP_SAVE"},
            description="Substeps the last baked frame took; many substeps mean fast liquid or a fine spacing"),
        bake_particles=IntProperty(
            name="Particles", default=0, min=0, options={"SKIP_SAVE"},
            description="Particles in the last baked frame"),
        bake_elapsed=FloatProperty(
            name="Elapsed", default=0.0, min=0.0, unit="TIME_ABSOLUTE", options={"SKIP_SAVE"},
            description="Time since the running bake started"),
        bake_remaining=FloatProperty(
            name="Remaining", default=0.0, min=0.0, unit="TIME_ABSOLUTE", options={"SKIP_SAVE"},
            description="Estimated time until the running bake ends, from the speed of the frames baked so far"),
        bake_memory=FloatProperty(
            name="Memory", default=0.0, min=0.0, options={"SKIP_SAVE"},
            description="Memory the bake process holds, in mebibytes (MiB)"),
    )
    return ann


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

CLASSES = (SurgeParticleChannel, SurgeObjectSettings, SurgeSceneSettings)
