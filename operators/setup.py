"""Setting a scene up: one-click roles, liquid presets (built in and the artist's own).

* ``surge.make_fluid``, ``surge.make_inflow``, ``surge.make_collider``, ``surge.make_outflow``,
  ``surge.make_rigid_body``
  give every selected object with geometry (or the object the Physics properties show) that role and a
  display that says so; ``surge.clear_role`` takes the role away again and gives the display back;
  ``surge.quick_liquid`` (*Object > Quick Effects*) makes the selected meshes a liquid in a container
  (:mod:`bridge.roles`).
* ``surge.apply_liquid`` sets density, viscosity and surface tension from a measured liquid
  (:mod:`engine.settings.liquids`); ``surge.liquid_preset_add`` saves the current values as the artist's
  own preset with Blender's preset system (files in the user's ``scripts/presets/surge/liquids``).
"""

from __future__ import annotations

import bpy
from bl_operators.presets import AddPresetBase
from bpy.props import EnumProperty

from .common import SceneIdle
from ..bridge import roles
from ..engine.settings import liquids
from ..bridge.paths import PRESET_SUBDIR

#: Scene settings an artist's liquid preset stores: the liquid's material, not the bake's resolution.
PRESET_VALUES = tuple(f"surge.{name}" for name in liquids.PRESET_SETTINGS + ("artificial_viscosity",))

def _label(role: str) -> str:
    """'RIGID_BODY' -> 'Rigid Body'."""
    return role.replace("_", " ").title()


def _targets(context) -> list:
    """The objects a role button acts on: the object the Physics properties show (``surge_object``, set by that
    panel; it may be pinned), else the selected objects of the view layer (not ``context.selected_objects``:
    background mode has no screen)."""
    shown = getattr(context, "surge_object", None)
    if shown is not None:
        return [shown]
    return list(context.view_layer.objects.selected)


class _MakeRole(SceneIdle):
    bl_options = {"REGISTER", "UNDO"}
    role = "NONE"

    def execute(self, context):
        objects = _targets(context)
        if not objects:
            self.report({"ERROR"}, f"Select the objects to make {_label(self.role)}")
            return {"CANCELLED"}
        done, skipped = [], []
        for obj in objects:
            if not roles.can_take_role(obj):
                skipped.append(obj)
                continue
            roles.assign_role(obj, self.role)
            done.append(obj.name)
        if skipped:
            names = ", ".join(f"'{o.name}' ({o.type.lower()})" for o in skipped)
            level = {"WARNING"} if done else {"ERROR"}
            self.report(level, f"Only objects with geometry can be {_label(self.role)}; left unchanged: {names}")
            if not done:
                return {"CANCELLED"}
        else:
            what = f"'{done[0]}'" if len(done) == 1 else f"{len(done)} objects"
            self.report({"INFO"}, f"{what} {'is' if len(done) == 1 else 'are'} now {_label(self.role)}")
        return {"FINISHED"}


def _role_operator(role: str, description: str):
    name = role.lower()
    return type(f"SURGE_OT_make_{name}", (_MakeRole, bpy.types.Operator), {
        "__doc__": description,
        "bl_idname": f"surge.make_{name}",
        "bl_label": f"Make {_label(role)}",
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


SURGE_OT_make_rigid_body = _role_operator(
    "RIGID_BODY", "Make the selected closed meshes rigid bodies the bake moves: they float or sink by their density, "
                  "collide with each other and the colliders, and push the liquid; an object with Blender's own "
                  "active Rigid Body brings its mass, friction, bounce and damping")


class SURGE_OT_clear_role(SceneIdle, bpy.types.Operator):
    """Take the selected objects out of the simulation: role None, drawn and rendered as they were before they
    took a role"""

    bl_idname = "surge.clear_role"
    bl_label = "Clear Role"
    bl_options = {"REGISTER", "UNDO"}

    def execute(self, context):
        cleared = sum(roles.clear_role(obj) for obj in _targets(context))
        self.report({"INFO"}, f"Cleared the role of {cleared} object{'s' if cleared != 1 else ''}")
        return {"FINISHED"}


class SURGE_OT_quick_liquid(SceneIdle, bpy.types.Operator):
    """Make the selected meshes liquid: they become Fluid, a Container box is added around them if no collider
    holds them, and the particle spacing is set from their size"""

    bl_idname = "surge.quick_liquid"
    bl_label = "Quick Liquid (Surge)"
    bl_options = {"REGISTER", "UNDO"}

    def execute(self, context):
        scene = context.scene
        done = roles.quick_liquid(scene, _targets(context))
        if not done.fluids:
            self.report({"ERROR"}, "Select the meshes to fill with liquid (objects with geometry)")
            return {"CANCELLED"}
        what = f"'{done.fluids[0].name}' is" if len(done.fluids) == 1 else f"{len(done.fluids)} objects are"
        box = f", in the new container '{done.container.name}'" if done.container is not None else ""
        skipped = (f"; left unchanged (no geometry): {', '.join(o.name for o in done.skipped)}" if done.skipped
                   else "")
        self.report({"WARNING"} if done.skipped else {"INFO"},
                    f"{what} now Fluid{box}; particle spacing {done.spacing:.4g} (Blender units){skipped}")
        return {"FINISHED"}


def _channel_owner(context):
    """The object whose particle channels the list shows (the Physics tab's, else the active object)."""
    obj = getattr(context, "surge_object", None) or context.object
    return obj if obj is not None and obj.surge.role in {"FLUID", "INFLOW"} else None


class SURGE_OT_channel_add(bpy.types.Operator):
    """Add a particle channel to this Fluid or Inflow object: a named value its liquid carries into the cache"""

    bl_idname = "surge.channel_add"
    bl_label = "Add Particle Channel"
    bl_options = {"REGISTER", "UNDO", "INTERNAL"}

    @classmethod
    def poll(cls, context):
        if _channel_owner(context) is None:
            cls.poll_message_set("Only Fluid and Inflow objects carry particle channels")
            return False
        return True

    def execute(self, context):
        group = _channel_owner(context).surge
        names = {c.name for c in group.channels}
        name = next(n for n in ("channel", *(f"channel_{i}" for i in range(1, len(names) + 2))) if n not in names)
        channel = group.channels.add()
        channel.name = name
        group.active_channel = len(group.channels) - 1
        return {"FINISHED"}


class SURGE_OT_channel_remove(bpy.types.Operator):
    """Remove the selected particle channel of this object"""

    bl_idname = "surge.channel_remove"
    bl_label = "Remove Particle Channel"
    bl_options = {"REGISTER", "UNDO", "INTERNAL"}

    @classmethod
    def poll(cls, context):
        obj = _channel_owner(context)
        if obj is None or not len(obj.surge.channels):
            cls.poll_message_set("This object has no particle channel to remove")
            return False
        return True

    def execute(self, context):
        group = _channel_owner(context).surge
        group.channels.remove(min(group.active_channel, len(group.channels) - 1))
        group.active_channel = max(0, min(group.active_channel, len(group.channels) - 1))
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
        description="Real liquid whose density, viscosity and surface tension the simulation takes")

    def execute(self, context):
        scene = context.scene
        item = liquids.liquid(self.liquid)
        values = liquids.settings_for(item)
        # none of these settings is a length: they are stored as they are, whatever the unit scale
        for name, value in values.items():
            setattr(scene.surge, name, value)
        # Blender's preset menus show the last preset used as their label
        menu = getattr(bpy.types, "SURGE_MT_liquid_presets", None)
        if menu is not None:
            menu.bl_label = item.label
        self.report({"INFO"}, item.description)
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
           SURGE_OT_make_outflow, SURGE_OT_make_rigid_body, SURGE_OT_clear_role, SURGE_OT_quick_liquid,
           SURGE_OT_channel_add, SURGE_OT_channel_remove, SURGE_OT_apply_liquid, SURGE_OT_liquid_preset_add)
