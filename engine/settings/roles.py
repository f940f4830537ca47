"""The per-object role settings: one frozen dataclass per role (collider, fluid, inflow, outflow, rigid
body), each field with its metadata as the scene's settings have (:mod:`engine.settings.parameters`), and
:data:`ROLE_SETTINGS`, role name to class. Read, validated and hashed by :mod:`engine.settings.simulation`."""

from __future__ import annotations

from dataclasses import dataclass
from typing import ClassVar

from .parameters import _param


COLLIDER_MODES = (
    ("AUTO", "Auto", "Picked from the mesh: a closed mesh holding the liquid at the start is a container, "
                     "another closed mesh a solid obstacle, an open mesh a shell"),
    ("SOLID", "Solid", "A solid obstacle the liquid flows around; the inside of the mesh is solid"),
    ("CONTAINER", "Container", "Keeps the liquid inside the mesh: a glass, a tank, a pipe"),
    ("SHELL", "Shell", "The surface itself is a thin wall the liquid cannot cross from either side: a sheet, "
                       "a single-sided cup, a leaf"),
)


@dataclass(frozen=True)
class ColliderSettings:
    """Per-collider parameters (``Object.surge`` in Blender). Construct with keywords."""

    GROUP: ClassVar[str] = "Collider"

    collider_mode: str = _param(
        "AUTO", label="Collider Mode", items=COLLIDER_MODES,
        tooltip="How this collider holds back the liquid: from outside (solid), from inside (container) or "
                "from both sides (shell); Auto picks from the mesh")
    friction: float = _param(
        0.0, label="Friction", min=0.0, max=1.0, animatable=True,
        tooltip="Fraction of the liquid's sliding speed along this collider removed at each contact; 0 is "
                "slippery, 1 makes the liquid stick")
    bounce: float = _param(
        0.0, label="Bounce", min=0.0, max=1.0, animatable=True,
        tooltip="Fraction of the speed into this collider the liquid keeps, reversed, when it hits it; 0 for "
                "water, which does not bounce off walls")
    use_no_slip: bool = _param(
        True, label="No-Slip",
        tooltip="The liquid's viscosity grips this collider's surface (no-slip), so honey clings and creeps; off, "
                "a viscous liquid slides along it as along ice (slip)")
    adhesion: float = _param(
        0.5, label="Adhesion", min=0.0, max=2.0, soft_max=1.0, animatable=False,
        tooltip="How strongly the liquid's surface tension clings to this collider, as a fraction of the liquid's "
                "pull on itself: 0 beads up and rolls off, 0.5 meets the surface at about 90 degrees, 1 wets it "
                "completely. Acts only with a Surface Tension")
    surface_offset: float = _param(
        0.0, label="Surface Offset", unit="m", min=-1.0, max=1.0, soft_min=-0.1, soft_max=0.1,
        tooltip="Moves the surface the liquid meets outward from the solid (negative: inward), in metres; "
                "a shell is half a particle spacing thick plus this offset on each side")


def _spacing_factor():
    return _param(
        1.0, label="Spacing Factor", min=0.25, max=4.0, soft_min=0.5, soft_max=2.0, group="Resolution",
        tooltip="Particle spacing of the liquid from this object as a multiple of the scene's Particle Spacing; "
                "below 1 gives finer detail (8 times more particles at 0.5), above 1 coarser, cheaper liquid. "
                "Needs the PBF solver when it is not 1")


def _use_flow():
    return _param(
        True, label="Use Flow", group="Flow", animatable=True,
        tooltip="While on, an inflow emits liquid and an outflow removes it; keyframe it (or drive it) to open "
                "and close the flow during the shot")


@dataclass(frozen=True)
class FluidSettings:
    """Per-object parameters of a FLUID object (``Object.surge`` in Blender). Construct with keywords."""

    GROUP: ClassVar[str] = "Fluid"

    initial_velocity: tuple = _param(
        (0.0, 0.0, 0.0), label="Initial Velocity", unit="m/s", min=-1000.0, max=1000.0, soft_min=-20.0,
        soft_max=20.0,
        tooltip="World-space velocity the liquid of this Fluid object starts with, at the first frame of the bake, "
                "in metres per second")
    use_object_motion: bool = _param(
        False, label="Use Object Motion",
        tooltip="Add this Fluid object's own motion over the first frame of the bake (its keyframes, path, parent "
                "or constraints; translation and rotation) to the Initial Velocity, so that liquid carried by an "
                "animated object starts moving with it")
    spacing_factor: float = _spacing_factor()


INFLOW_MODES = (
    ("SURFACE", "Surface", "Liquid leaves the mesh surface, one steady stream of particles per patch of surface: "
                           "a tap, a nozzle, a spring. Faces emit along their normal"),
    ("VOLUME", "Volume", "The mesh volume is kept full of liquid: particles are added wherever the volume has "
                         "room for one"),
)


@dataclass(frozen=True)
class InflowSettings:
    """Per-object parameters of an INFLOW object (``Object.surge`` in Blender). Construct with keywords.

    The emitted liquid moves at ``velocity + normal_speed * n`` (n the outward face normal); a
    surface face emits the volume flux A (velocity . n + normal_speed) per second when that is positive.
    """

    GROUP: ClassVar[str] = "Inflow"

    use_flow: bool = _use_flow()
    inflow_mode: str = _param(
        "SURFACE", label="Emit From", items=INFLOW_MODES,
        tooltip="Where the liquid appears: from the surface of the mesh, or filling its closed volume")
    normal_speed: float = _param(
        1.0, label="Normal Speed", unit="m/s", min=0.0, max=1000.0, soft_max=20.0, animatable=True,
        requires=(("inflow_mode", "SURFACE"),),
        tooltip="Speed of the liquid along each face's outward normal, in metres per second (Surface only); "
                "with the velocity it sets how much liquid flows: face area times speed, per second")
    velocity: tuple = _param(
        (0.0, 0.0, 0.0), label="Velocity", unit="m/s", min=-1000.0, max=1000.0, soft_min=-20.0, soft_max=20.0,
        animatable=True,
        tooltip="World-space velocity given to the emitted liquid, in metres per second, added to the normal "
                "speed")
    emit_start: int = _param(
        1, label="Start Frame", min=-1048574, max=1048574,
        tooltip="First frame during which this object emits liquid")
    emit_end: int = _param(
        0, label="End Frame", min=-1048574, max=1048574,
        tooltip="Last frame during which this object emits liquid; 0 emits until the end of the bake")
    spacing_factor: float = _spacing_factor()


@dataclass(frozen=True)
class OutflowSettings:
    """Per-object parameters of an OUTFLOW object (``Object.surge`` in Blender). Construct with keywords."""

    GROUP: ClassVar[str] = "Outflow"

    use_flow: bool = _use_flow()


MASS_MODES = (
    ("DENSITY", "Density", "The mass is the density times the volume the closed mesh encloses"),
    ("MASS", "Mass", "The mass is given; the density is the mass over the enclosed volume"),
)


@dataclass(frozen=True)
class RigidBodySettings:
    """Per-object parameters of a RIGID_BODY object (``Object.surge`` in Blender): a closed mesh whose motion
    the bake computes from gravity, force fields, contacts and the liquid's push (:mod:`engine.rigid`).
    Construct with keywords."""

    GROUP: ClassVar[str] = "Rigid Body"

    use_dynamic: bool = _param(
        True, label="Dynamic", animatable=True,
        tooltip="While on, the bake moves this body (gravity, the liquid, contacts); while off it follows its own "
                "animation and pushes what it meets. Keyframe it to release an animated body at a frame, as "
                "Blender's rigid bodies do")
    mass_mode: str = _param(
        "DENSITY", label="Mass From", items=MASS_MODES,
        tooltip="Whether the body's mass comes from a density or is given directly; the centre of mass and the "
                "inertia come from the closed mesh either way")
    density: float = _param(
        500.0, label="Density", unit="kg/m3", min=0.001, max=1.0e6, soft_min=10.0, soft_max=20000.0,
        requires=(("mass_mode", "DENSITY"),),
        tooltip="Density of the body in kilograms per cubic metre: below the liquid's Rest Density it floats "
                "(pine wood about 500, ice 917), above it sinks (stone about 2500, steel 7850)")
    mass: float = _param(
        1.0, label="Mass", unit="kg", min=1.0e-9, max=1.0e12, soft_max=1000.0,
        requires=(("mass_mode", "MASS"),),
        tooltip="Mass of the body in kilograms, spread evenly through the volume its closed mesh encloses")
    contact_friction: float = _param(
        0.5, label="Contact Friction", min=0.0, max=100.0, soft_max=1.0,
        tooltip="Coulomb friction coefficient against containers, colliders and other bodies (two bodies use the "
                "geometric mean of theirs); Blender's rigid bodies default to 0.5")
    contact_bounce: float = _param(
        0.0, label="Contact Bounce", min=0.0, max=1.0,
        tooltip="Restitution against containers, colliders and other bodies: the fraction of the speed of an "
                "impact kept, reversed; 0 lands dead, 1 bounces back as fast")
    friction: float = _param(
        0.0, label="Friction", min=0.0, max=1.0, animatable=True, group="Collider",
        tooltip="Fraction of the liquid's sliding speed along this collider removed at each contact; 0 is "
                "slippery, 1 makes the liquid stick")
    bounce: float = _param(
        0.0, label="Bounce", min=0.0, max=1.0, animatable=True, group="Collider",
        tooltip="Fraction of the speed into this collider the liquid keeps, reversed, when it hits it; 0 for "
                "water, which does not bounce off walls")
    linear_velocity: tuple = _param(
        (0.0, 0.0, 0.0), label="Initial Velocity", unit="m/s", min=-1000.0, max=1000.0, soft_min=-20.0,
        soft_max=20.0,
        tooltip="World-space velocity of the body's centre of mass at the first frame of the bake, in metres per "
                "second")
    angular_velocity: tuple = _param(
        (0.0, 0.0, 0.0), label="Initial Spin", unit="rad/s", min=-1000.0, max=1000.0, soft_min=-50.0,
        soft_max=50.0,
        tooltip="World-space angular velocity of the body at the first frame of the bake, in radians per second "
                "about the X, Y and Z axes through its centre of mass")
    use_animated_velocity: bool = _param(
        False, label="Use Object Motion",
        tooltip="Start the body with the velocity and spin its own animation has over the first frame of the bake "
                "(added to the Initial Velocity and Spin), so that a thrown object keeps flying")
    linear_damping: float = _param(
        0.04, label="Damping Translation", min=0.0, max=1.0,
        tooltip="Fraction of the body's velocity lost per second besides the liquid's drag (Blender's rigid "
                "bodies default to 0.04)")
    angular_damping: float = _param(
        0.1, label="Damping Rotation", min=0.0, max=1.0,
        tooltip="Fraction of the body's spin lost per second besides the liquid's drag (Blender's rigid bodies "
                "default to 0.1)")


#: Object role -> the dataclass of its per-object settings (``Object.surge`` holds them all).
ROLE_SETTINGS = {"COLLIDER": ColliderSettings, "FLUID": FluidSettings, "INFLOW": InflowSettings,
                 "OUTFLOW": OutflowSettings, "RIGID_BODY": RigidBodySettings}
