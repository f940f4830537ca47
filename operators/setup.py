"""Setting a scene up: one-click roles, liquid presets (built in and the artist's own).

* ``surge.make_fluid``, ``surge.make_inflow``, ``surge.make_collider``, ``surge.make_outflow``
  give every selected object with geometry that role and a display that says so;
  ``surge.clear_role`` takes the role away again.
* ``surge.apply_liquid`` sets density, viscosity and surface tension from a measured liquid
  (:mod:`engine.settings.liquids`); ``surge.liquid_preset_add`` saves the current values as the artist's
  own preset with Blender's preset system (files in the user's ``scripts/presets/surge/liquids``).
"""

from __future__ import annotations

import bpy
from bl_operators.presets import AddPresetBase
from bpy.props import EnumProperty

from .common import SceneIdle
from ..bridge.export import GEOMETRY_TYPES, unit_scale
from ..engine.settings import liquids
from ..bridge.paths import PRESET_SUBDIR
from ..engine.errors import EngineError

#: Scene settings an artist's liquid preset stores: the liquid's material, not the bake's resolution.
PRESET_VALUES = tuple(f"surge.{name}" for name in liquids.PRESET_SETTINGS + ("artificial_viscosity",))

#: Role -> (viewport display, hidden in renders). The liquid replaces fluid and inflow meshes in
#: renders; an outflow is a bookkeeping volume. Colliders keep rendering (a glass, a rock) but are
#: drawn as wire so the liquid inside or behind them stays visible while setting up.
ROLE_DISPLAY = {
    "FLUID": ("WIRE", True),
    "INFLOW": ("WIRE", True),
    "COLLIDER": ("WIRE", False),
    "OUTFLOW": ("WIRE", True),
}


def _selected(context) -> list:
    """Selected objects of the view layer (not ``context.selected_objects``: background mode has no screen)."""
    return list(context.view_layer.objects.selected)


class _MakeRole(SceneIdle):
    bl_options = {"REGISTER", "UNDO"}
    role = "NONE"

    def execute(self, context):
        objects = _selected(context)
        if not objects:
            self.report({"ERROR"}, f"Select the objects to make {self.role.title()}")
            return {"CANCELLED"}
        display, hide_render = ROLE_DISPLAY[self.role]
        done, skipped = [], []
        for obj in objects:
            if obj.type not in GEOMETRY_TYPES:
                skipped.append(obj)
                continue
            obj.surge.role = self.role
            obj.display_type = display
            obj.hide_render = hide_render
            done.append(obj.name)
        if skipped:
            names = ", ".join(f"'{o.name}' ({o.type.lower()})" for o in skipped)
            level = {"WARNING"} if done else {"ERROR"}
            self.report(level, f"Only objects with geometry can be {self.role.title()}; left unchanged: {names}")
            if not done:
                return {"CANCELLED"}
        else:
            what = f"'{done[0]}'" if len(done) == 1 else f"{len(done)} objects"
            self.report({"INFO"}, f"{what} {'is' if len(done) == 1 else 'are'} now {self.role.title()}")
        return {"FINISHED"}


def _role_operator(role: str, description: str):
    name = role.lower()
    return type(f"SURGE_OT_make_{name}", (_MakeRole, bpy.types.Operator), {
        "__doc__": description,
        "bl_idname": f"surge.make_{name}",
        "bl_label": f"Make {role.title()}",
        "role": role,
    })


SURGE_OT_make_fluid = _role_operator(
    "FLUID", "Fill the selected closed meshes with liquid at the first frame; they are drawn as wire and hidden "
             "in renders, where the liquid takes their place")
SURGE_OT_make_inflow = _role_operator(
    "INFLOW", "Make the selected meshes emit liquid during the bake; they are drawn as wire and hidden in renders")
SURGE_OT_make_collider = _role_operator(
    "COLLIDER", "Make the selected meshes hold back the liquid (a glass, an obstacle); they are drawn as wire and "
                "still render")
SURGE_OT_make_outflow = _role_operator(
    "OUTFLOW", "Make the selected meshes remove the liquid that enters them; they are drawn as wire and hidden in "
               "renders")


class SURGE_OT_clear_role(SceneIdle, bpy.types.Operator):
    """Take the selected objects out of the simulation: role None, drawn and rendered normally again"""

    bl_idname = "surge.clear_role"
    bl_label = "Clear Role"
    bl_options = {"REGISTER", "UNDO"}

    def execute(self, context):
        cleared = 0
        for obj in _selected(context):
            if obj.surge.role == "NONE":
                continue  # never touch the display of objects Surge did not set up
            obj.surge.role = "NONE"
            obj.display_type = "TEXTURED"
            obj.hide_render = False
            cleared += 1
        self.report({"INFO"}, f"Cleared the role of {cleared} object{'s' if cleared != 1 else ''}")
        return {"FINISHED"}


def liquid_items():
    return [(item.name, item.label, item.description) for item in liquids.LIQUIDS]


class SURGE_OT_apply_liquid(SceneIdle, bpy.types.Operator):
    """Set the liquid's density, viscosity and surface tension from measured values of a real liquid"""

    bl_idname = "surge.apply_liquid"
    bl_label = "Apply Liquid Preset"
    bl_options = {"REGISTER", "UNDO"}

    liquid: EnumProperty(
        name="Liquid", items=liquid_items(), default="WATER",
        description="Real liquid whose density, viscosity and surface tension the simulation takes; the surface "
                    "tension is scaled to the current particle spacing")

    def execute(self, context):
        scene = context.scene
        item = liquids.liquid(self.liquid)
        try:
            values = liquids.settings_for(item, scene.surge.particle_spacing * unit_scale(scene))
        except EngineError as exc:
            self.report({"ERROR"}, str(exc))
            return {"CANCELLED"}
        # none of these settings is a length: they are stored as they are, whatever the unit scale
        for name, value in values.items():
            setattr(scene.surge, name, value)
        # Blender's preset menus show the last preset used as their label
        menu = getattr(bpy.types, "SURGE_MT_liquid_presets", None)
        if menu is not None:
            menu.bl_label = item.label
        self.report({"INFO"}, f"{item.description}; PBF surface tension {values['pbf_surface_tension']:.3g} at "
                              f"this particle spacing")
        return {"FINISHED"}


class SURGE_OT_liquid_preset_add(AddPresetBase, bpy.types.Operator):
    """Save the liquid's density, viscosity and surface tension as a preset of your own, or remove one"""

    bl_idname = "surge.liquid_preset_add"
    bl_label = "Add Liquid Preset"
    preset_menu = "SURGE_MT_liquid_presets"
    preset_subdir = PRESET_SUBDIR
    preset_defines = ["surge = bpy.context.scene.surge"]
    preset_values = list(PRESET_VALUES)


class SURGE_OT_earth_gravity(SceneIdle, bpy.types.Operator):
    """Set the scene's gravity to Earth's, 9.81 m/s² straight down, at the scene's unit scale (Blender's
    Gravity is in scene units: at a unit scale of 0.01 its default is 100 times too weak)"""

    bl_idname = "surge.earth_gravity"
    bl_label = "Set Earth Gravity"
    bl_options = {"REGISTER", "UNDO"}

    def execute(self, context):
        from ..bridge.export import earth_gravity

        context.scene.use_gravity = True
        context.scene.gravity = earth_gravity(context.scene)
        return {"FINISHED"}


CLASSES = (SURGE_OT_earth_gravity, SURGE_OT_make_fluid, SURGE_OT_make_inflow, SURGE_OT_make_collider,
           SURGE_OT_make_outflow, SURGE_OT_clear_role, SURGE_OT_apply_liquid, SURGE_OT_liquid_preset_add)
