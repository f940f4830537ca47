"""Scenes saved by earlier versions of Surge, read with the meaning they were saved with.

Earlier versions stored the liquid's viscosity as a *kinematic* viscosity in m^2/s under
``Scene.surge.viscosity`` and PBF's velocity smoothing as ``Scene.surge.pbf_xsph_viscosity``. This
version stores the *dynamic* viscosity in Pa s as ``Scene.surge.dynamic_viscosity`` (a new name, so
that a stored value can never be read in the wrong unit) and the smoothing as
``Scene.surge.pbf_velocity_smoothing`` (the same value). :func:`migrate_scene` reads the old stored
values once and writes the new ones, with the same physical meaning:

* the stored ID property ``viscosity`` (nu) becomes ``dynamic_viscosity`` = nu rho0, rho0 the scene's
  Rest Density (:func:`engine.settings.simulation.migrated` is the same rule for settings dicts);
  ``pbf_xsph_viscosity`` becomes ``pbf_velocity_smoothing``; the old properties are then deleted,
  so nothing is converted twice;
* keyframes on ``surge.viscosity`` move to ``surge.dynamic_viscosity`` with their values and handles
  multiplied by rho0; a driver on it moves too, with a Generator modifier that multiplies its output
  by rho0 (the driver's own expression is left as the artist wrote it); those on
  ``surge.pbf_xsph_viscosity`` move unchanged;
* wedge variations (``Scene.surge_wedge``) of the old settings are renamed, viscosity values
  multiplied by rho0.

A viscosity never set in the old file was water's default, 1e-6 m^2/s, which is this version's
default, 0.001 Pa s, at the default rest density; it is left at the default.

It runs on every scene of a file when the file is loaded (a ``load_post`` handler), once when the
add-on is enabled with a file open, and on the scene a bake exports (a scene appended from an old
file).
"""

from __future__ import annotations

import bpy
from bpy.app.handlers import persistent
from bpy_extras import anim_utils

from ..engine.settings.simulation import KINEMATIC_VISCOSITY, RENAMED

#: The new name of the kinematic viscosity of earlier versions (its value times the rest density).
DYNAMIC = "dynamic_viscosity"


def _stored(group, name: str):
    """The value stored in ``group``'s ID properties under ``name`` (None if there is none)."""
    try:
        return group.get(name)
    except TypeError:  # a group that holds no ID properties
        return None


def _scaled(text: str, factor: float) -> str:
    """A wedge variation's comma-separated values, each multiplied by ``factor`` (9 significant digits)."""
    out = []
    for value in text.split(","):
        try:
            out.append(f"{float(value) * factor:.9g}")
        except ValueError:
            out.append(value)  # left for the wedge's own check to report
    return ",".join(out)


def _fcurves(scene) -> list:
    """The F-curves of ``scene``'s keyframes (its action's slot) and drivers, as (F-curve, is_driver)."""
    out = []
    anim = scene.animation_data
    if anim is None:
        return out
    bag = anim_utils.action_get_channelbag_for_slot(anim.action, anim.action_slot) if anim.action else None
    if bag is not None:
        out += [(fc, False) for fc in bag.fcurves]
    out += [(fc, True) for fc in anim.drivers]
    return out


def _move_curves(scene, old: str, new: str, factor: float) -> int:
    """Move the F-curves of ``surge.<old>`` to ``surge.<new>``, scaled by ``factor``; how many moved."""
    moved = 0
    for fc, is_driver in _fcurves(scene):
        if fc.data_path != f"surge.{old}":
            continue
        fc.data_path = f"surge.{new}"
        fc.is_valid = True  # the old path failed to resolve on loading, which disables the curve
        if factor != 1.0:
            if is_driver and len(fc.keyframe_points) == 0:
                gen = fc.modifiers.new("GENERATOR")
                gen.mode = "POLYNOMIAL"
                gen.poly_order = 1
                gen.coefficients = (0.0, factor)
            else:
                for key in fc.keyframe_points:
                    for point in (key.co, key.handle_left, key.handle_right):
                        point[1] *= factor
            fc.update()
        moved += 1
    return moved


def migrate_scene(scene) -> list[str]:
    """Bring ``scene``'s Surge settings saved by an earlier version to this version's names and units
    (see the module docstring); returns what changed, one line each (empty if nothing did)."""
    st = scene.surge
    rho0 = float(st.rest_density)
    changes = []
    nu = _stored(st, KINEMATIC_VISCOSITY)
    if nu is not None:
        setattr(st, DYNAMIC, float(nu) * rho0)
        del st[KINEMATIC_VISCOSITY]
        changes.append(f"viscosity {float(nu):.6g} m^2/s -> {float(nu) * rho0:.6g} Pa s")
    for old, new in RENAMED.items():
        value = _stored(st, old)
        if value is not None:
            setattr(st, new, float(value))
            del st[old]
            changes.append(f"{old} -> {new}")
    if _move_curves(scene, KINEMATIC_VISCOSITY, DYNAMIC, rho0):
        changes.append("viscosity keyframes and drivers -> dynamic_viscosity (x rest density)")
    for old, new in RENAMED.items():
        if _move_curves(scene, old, new, 1.0):
            changes.append(f"{old} keyframes and drivers -> {new}")
    wedge = getattr(scene, "surge_wedge", None)
    for item in (wedge.variations if wedge is not None else ()):
        prefix, _, name = item.setting.rpartition(".")
        prefix = f"{prefix}." if prefix else ""
        if item.target is None and name == KINEMATIC_VISCOSITY:
            item.setting = f"{prefix}{DYNAMIC}"
            item.values = _scaled(item.values, rho0)
            changes.append(f"wedge variation {name} -> {DYNAMIC}")
        elif name in RENAMED:
            item.setting = f"{prefix}{RENAMED[name]}"
            changes.append(f"wedge variation {name} -> {RENAMED[name]}")
    return changes


def migrate_all() -> dict:
    """:func:`migrate_scene` on every scene of the open file: {scene name: changes} of those that changed."""
    out = {}
    for scene in bpy.data.scenes:
        changes = migrate_scene(scene)
        if changes:
            out[scene.name] = changes
    return out


@persistent
def migrate_loaded_file(_filepath) -> None:
    """``load_post``: every scene of the loaded file in this version's settings."""
    migrate_all()


def _migrate_once():
    """A timer's callback (the add-on was enabled with a file open): runs once."""
    migrate_all()
    return None


def register() -> None:
    bpy.app.handlers.load_post.append(migrate_loaded_file)
    bpy.app.timers.register(_migrate_once, first_interval=0.0)


def unregister() -> None:
    while migrate_loaded_file in bpy.app.handlers.load_post:
        bpy.app.handlers.load_post.remove(migrate_loaded_file)
    if bpy.app.timers.is_registered(_migrate_once):
        bpy.app.timers.unregister(_migrate_once)
