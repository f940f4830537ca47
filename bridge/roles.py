"""Giving objects their role in the simulation, taking it away, and the Quick Liquid set-up.

A role changes how the object is drawn (wire, so the liquid inside or behind it stays visible) and
whether it renders (the liquid takes the place of a fluid or an inflow). The object's own display is
remembered when Surge first changes it (``Object.surge.previous_display_type`` and
``previous_hide_render``) and given back when the role is cleared, so that Clear Role leaves an object
as the artist had it, not textured and rendered whatever it was before.

:func:`quick_liquid` is Surge's *Quick Liquid* (*Object > Quick Effects*), after Blender's own: the
selected meshes become Fluid, a Container box is added around them when the scene has none, and the
particle spacing is set from their size.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import bpy
import numpy as np

from .export import GEOMETRY_TYPES

#: Role -> (viewport display, hidden in renders). The liquid replaces fluid and inflow meshes in
#: renders; an outflow is a bookkeeping volume. Colliders keep rendering (a glass, a rock) but are
#: drawn as wire so the liquid inside or behind them stays visible while setting up.
ROLE_DISPLAY = {
    "FLUID": ("WIRE", True),
    "INFLOW": ("WIRE", True),
    "COLLIDER": ("WIRE", False),
    "OUTFLOW": ("WIRE", True),
    "RIGID_BODY": ("TEXTURED", False),
}

#: Quick Liquid's spacing: about this many particles in the fluids' bounding boxes ...
QUICK_PARTICLES = 30_000
#: ... and at least this many particles across the thinnest fluid.
QUICK_ACROSS = 8

#: Quick Liquid's container: room around the fluids as a fraction of their extent, per side (the top
#: gets more, for splashes), and the floor this many spacings below them.
QUICK_MARGIN = 0.5
QUICK_HEADROOM = 1.0
QUICK_FLOOR_SPACINGS = 2.0

CONTAINER_NAME = "Surge Container"


def can_take_role(obj) -> bool:
    """True for objects with geometry Surge can turn into a triangle mesh (meshes, curves, text, ...)."""
    return obj is not None and obj.type in GEOMETRY_TYPES


def assign_role(obj, role: str) -> None:
    """Give ``obj`` the ``role`` and the display that says so, remembering its own display first."""
    if not obj.surge.has_previous_display:
        obj.surge.previous_display_type = obj.display_type
        obj.surge.previous_hide_render = obj.hide_render
        obj.surge.has_previous_display = True
    display, hide_render = ROLE_DISPLAY[role]
    obj.surge.role = role
    obj.display_type = display
    obj.hide_render = hide_render
    if role == "RIGID_BODY":
        take_blender_rigid_body(obj)


def take_blender_rigid_body(obj) -> bool:
    """Copy the mass, friction, bounce and damping of ``obj``'s own active Blender Rigid Body (if it has one)
    into its Surge settings; returns whether it had one. Blender's rigid body world does not step it
    during a Surge bake: Surge's bake moves it."""
    rb = obj.rigid_body
    if rb is None or rb.type != "ACTIVE":
        return False
    st = obj.surge
    st.mass_mode = "MASS"
    st.mass = rb.mass
    st.contact_friction = rb.friction
    st.contact_bounce = rb.restitution
    st.linear_damping = rb.linear_damping
    st.angular_damping = rb.angular_damping
    st.use_dynamic = bool(rb.enabled) and not rb.kinematic
    return True


def clear_role(obj) -> bool:
    """Take ``obj`` out of the simulation and give it back the display it had before Surge changed it;
    False if it had no role (its display is then left alone)."""
    if obj.surge.role == "NONE":
        return False
    obj.surge.role = "NONE"
    if obj.surge.has_previous_display:
        obj.display_type = obj.surge.previous_display_type
        obj.hide_render = obj.surge.previous_hide_render
        obj.surge.has_previous_display = False
    return True


def _world_bounds(objects) -> tuple[np.ndarray, np.ndarray]:
    """Lower and upper corners (Blender units) of the world-space bounding boxes of ``objects``."""
    corners = np.array([[tuple(obj.matrix_world @ _vector(c)) for c in obj.bound_box] for obj in objects])
    corners = corners.reshape(-1, 3)
    return corners.min(axis=0), corners.max(axis=0)


def _vector(corner):
    from mathutils import Vector

    return Vector(corner)


def _round_spacing(value: float) -> float:
    """``value`` rounded down to two significant digits (0.0137 -> 0.013): a spacing people can read."""
    digits = 1 - math.floor(math.log10(value))
    return math.floor(value * 10 ** digits) / 10 ** digits


def quick_spacing(objects) -> float:
    """A particle spacing (Blender units) for ``objects``' liquid: about :data:`QUICK_PARTICLES` particles in
    their bounding boxes, and at least :data:`QUICK_ACROSS` across the thinnest of them."""
    volume = 0.0
    thinnest = math.inf
    for obj in objects:
        lo, hi = _world_bounds([obj])
        extent = np.maximum(hi - lo, 1e-9)
        volume += float(np.prod(extent))
        thinnest = min(thinnest, float(extent.min()))
    return _round_spacing(min((volume / QUICK_PARTICLES) ** (1.0 / 3.0), thinnest / QUICK_ACROSS))


def _box_mesh(name: str, lower, upper):
    mesh = bpy.data.meshes.new(name)
    verts = [(upper[0] if i & 1 else lower[0], upper[1] if i & 2 else lower[1], upper[2] if i & 4 else lower[2])
             for i in range(8)]
    faces = [(0, 2, 3, 1), (4, 5, 7, 6), (0, 1, 5, 4), (2, 6, 7, 3), (0, 4, 6, 2), (1, 3, 7, 5)]
    mesh.from_pydata(verts, [], faces)
    mesh.update()
    return mesh


def _contains(obj, lower, upper) -> bool:
    lo, hi = _world_bounds([obj])
    return bool(np.all(lo <= lower) and np.all(hi >= upper))


@dataclass
class QuickLiquid:
    """What :func:`quick_liquid` did: the new fluids, the container added (None: one was there) and the spacing."""

    fluids: list
    skipped: list
    container: object
    spacing: float


def quick_liquid(scene, objects) -> QuickLiquid:
    """Make the objects with geometry among ``objects`` Fluid, add a Container box around them unless a
    collider of the scene already holds them all, and set the particle spacing from their size.

    Returns what was done; ``fluids`` is empty (and nothing changed) when no object has geometry.
    """
    fluids = [obj for obj in objects if can_take_role(obj)]
    skipped = [obj for obj in objects if not can_take_role(obj)]
    if not fluids:
        return QuickLiquid([], skipped, None, 0.0)
    spacing = quick_spacing(fluids)
    for obj in fluids:
        assign_role(obj, "FLUID")
    lower, upper = _world_bounds(fluids)
    holders = [obj for obj in scene.objects if obj.surge.role == "COLLIDER" and obj not in fluids
               and _contains(obj, lower, upper)]
    container = None
    if not holders:
        extent = upper - lower
        margin = np.maximum(QUICK_MARGIN * extent, 4 * spacing)
        box_lower = lower - margin
        box_upper = upper + margin
        box_lower[2] = lower[2] - QUICK_FLOOR_SPACINGS * spacing
        box_upper[2] = upper[2] + max(QUICK_HEADROOM * extent[2], 4 * spacing)
        container = bpy.data.objects.new(CONTAINER_NAME, _box_mesh(CONTAINER_NAME, box_lower, box_upper))
        scene.collection.objects.link(container)
        assign_role(container, "COLLIDER")
        container.surge.collider_mode = "CONTAINER"
        container.hide_render = True  # a boundary, not a glass: the liquid renders, the box does not
    prop = scene.surge.bl_rna.properties["particle_spacing"]
    scene.surge.particle_spacing = min(max(spacing, prop.hard_min), prop.hard_max)
    return QuickLiquid(fluids, skipped, container, float(scene.surge.particle_spacing))
