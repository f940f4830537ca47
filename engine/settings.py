"""Simulation settings: one typed description of every parameter.

Each field carries its metadata (label, unit, range, tooltip, enum items, the solvers and roles that
read it, whether it may be animated) in ``dataclasses.field(metadata=...)``, read back as
:class:`Parameter`. The scene's settings are declared in groups (:data:`SETTINGS_GROUPS`: settings
every solver reads, the SPH particles of WCSPH and Hybrid, then WCSPH, PBF and Hybrid alone, and
removal); :class:`SimulationSettings` is generated from them with flat names, the form the Blender
properties, job folders and cache manifests use. Per-object settings are one dataclass per role
(:data:`ROLE_SETTINGS`). That single description feeds

* :func:`validate` (every problem collected, then one :class:`InvalidSettingsError`),
* the Blender properties and panels (the add-on builds its PropertyGroups from :func:`parameters`
  and :func:`object_parameters`, and shows a setting only where :meth:`Parameter.acts_with` says it
  acts),
* the cache manifest (:func:`to_dict` and :func:`settings_hash`).

Animatable settings (``Parameter.animatable``) are those a bake reads at every frame: an inflow's
on/off switch (Use Flow, an outflow's too), normal speed and velocity, a collider's friction and
bounce, the liquid's viscosity (SPH and PBF) and PBF surface tension; Blender's scene gravity is animatable too. Everything else (particle
spacing, solver, rest density, resolutions, solver controls) is read once at the start of a bake,
and the Blender properties do not offer keyframes for it.

Units are SI. Enum values are strings, never integer codes; each enum is declared once here.
"""

from __future__ import annotations

import dataclasses
import hashlib
import json
import math
from dataclasses import dataclass, field
from typing import Any, ClassVar

from .errors import InvalidSettingsError

SOLVERS = (
    ("WCSPH", "WCSPH", "Weakly-compressible SPH: Tait equation of state, leap-frog time stepping"),
    ("PBF", "PBF", "Position-Based Fluids with the production extensions of Alduan et al. 2015"),
    ("HYBRID", "Hybrid", "MAC grid in the deep liquid, SPH particles near the surface (Suarez & Susin 2006)"),
)

HYBRID_INTERFACE_MODES = (
    ("AUTO", "Auto", "A fixed depth under the free surface, measured on the grid; follows a tank that fills or "
                     "empties"),
    ("FIXED", "Fixed", "A fixed world height"),
)

HYBRID_PRESSURE_SOLVERS = (
    ("RBSOR", "Red-Black SOR", "Successive over-relaxation over the two colours of a checkerboard, in parallel"),
    ("SOR", "SOR", "Successive over-relaxation in grid order, as in Suarez & Susin 2006 (one core)"),
)

WCSPH_DENSITY_MODES = (
    ("CONTINUITY", "Continuity", "Each particle's density follows the flow around it (the continuity equation), "
                                 "smoothed by a little density diffusion; the free surface keeps full density"),
    ("SUMMATION", "Summation", "Each particle's density is the kernel sum over its neighbours; surface particles "
                               "read low and close up until it reaches the rest density"),
)


def names(items) -> tuple:
    """The identifiers of an enum's ``(identifier, label, tooltip)`` items."""
    return tuple(item[0] for item in items)


#: Solvers this engine version can bake: every one of :data:`SOLVERS`, the only list of them.
SUPPORTED_SOLVERS = names(SOLVERS)


@dataclass(frozen=True)
class Parameter:
    """Metadata of one setting, as read by validation, the Blender UI and the manifest.

    ``solvers`` names the solvers that read the setting (empty: every solver), ``roles`` the object
    roles it belongs to (per-object settings only; empty for scene settings), ``requires`` the
    ``(setting, value)`` pairs under which it acts (the Hybrid's interface depth only with the Auto
    interface, for instance). ``animatable`` says whether a bake reads it at every frame, so that a
    keyframe or driver on it is obeyed; the others are read once and must not be keyed. ``size`` is
    0 for a scalar and 3 for a vector (a tuple of three floats, each within ``min`` and ``max``).
    """

    name: str
    kind: type
    default: Any
    label: str
    tooltip: str
    unit: str = ""  # SI unit symbol in ASCII: "m", "m/s", "kg/m3", "m2/s"; "" for ratios
    min: float | None = None
    max: float | None = None
    soft_min: float | None = None
    soft_max: float | None = None
    items: tuple = ()
    group: str = "Simulation"
    solvers: tuple = ()
    roles: tuple = ()
    requires: tuple = ()
    animatable: bool = False
    size: int = 0

    def is_used_by(self, solver: str) -> bool:
        """True if ``solver`` reads this setting."""
        return not self.solvers or solver in self.solvers

    def acts_with(self, values) -> bool:
        """True if the setting acts given the current ``values`` (anything with the settings as
        attributes: engine settings, or the Blender property group mirroring them): the solver
        reads it and every condition of ``requires`` holds."""
        solver = getattr(values, "solver", None)
        if solver is not None and not self.is_used_by(solver):
            return False
        return all(getattr(values, name) == value for name, value in self.requires)


def _param(default, *, label, tooltip, unit="", min=None, max=None, soft_min=None, soft_max=None,
           items=(), group=None, requires=(), animatable=False):
    """One setting's field; ``group`` (the heading the panels list it under) defaults to the ``GROUP`` of
    the dataclass that declares it (see :func:`_group_of`)."""
    size = len(default) if isinstance(default, tuple) else 0
    meta = dict(label=label, tooltip=tooltip, unit=unit, min=min, max=max, soft_min=soft_min,
                soft_max=soft_max, items=tuple(items), group=group, requires=tuple(requires),
                animatable=animatable, size=size)
    return field(default=default, metadata=meta)


# --- Settings groups ---------------------------------------------------------------------------
# Each group declares its settings once (default, unit, range, tooltip, enum items). The scene's
# SimulationSettings is generated from them with flat names (the group's prefix + the field name:
# PBFSettings.iterations is SimulationSettings.pbf_iterations and Scene.surge.pbf_iterations), which
# is also the form stored in job folders and cache manifests; ``settings.pbf`` (and ``.sph``,
# ``.wcsph``, ``.hybrid``) gives a solver its own group back as a frozen dataclass. A solver's model
# is built from its group (``hybrid.make_model(sph_model, settings.hybrid, ...)``), so the defaults
# below are the only ones: a model constructor declares none of its own.


@dataclass(frozen=True)
class CommonSettings:
    """Settings every solver reads."""

    GROUP: ClassVar[str] = "Simulation"

    solver: str = _param(
        "PBF", label="Solver", items=SOLVERS,
        tooltip="Method that moves the liquid")
    particle_spacing: float = _param(
        0.025, label="Particle Spacing", unit="m", min=0.0005, max=10.0, soft_min=0.002, soft_max=0.2,
        tooltip="Distance between neighbouring particles at rest, in metres; halving it makes 8 times more particles")
    rest_density: float = _param(
        1000.0, label="Rest Density", unit="kg/m3", min=1.0, max=25000.0, soft_min=100.0, soft_max=5000.0,
        tooltip="Density of the liquid at rest, in kilograms per cubic metre (water: 1000)")
    max_substeps: int = _param(
        2000, label="Max Substeps", min=1, max=100000,
        tooltip="Most substeps one frame may take; a frame needing more stops the bake with an error")
    collider_cell_size: float = _param(
        0.5, label="Collider Resolution", min=0.1, max=2.0, group="Colliders",
        tooltip="Cell size of the distance fields sampled from collider meshes, as a fraction of the particle "
                "spacing; smaller follows fine detail more closely and costs more memory and build time")


@dataclass(frozen=True)
class SPHSettings:
    """The weakly-compressible SPH particles of the WCSPH and Hybrid solvers (Suarez & Susin 2006)."""

    GROUP: ClassVar[str] = "SPH"

    smoothing_length_factor: float = _param(
        1.2, label="Smoothing Length", min=0.8, max=2.5,
        tooltip="Kernel smoothing length h as a multiple of the particle spacing; particles interact within 2h")
    viscosity: float = _param(
        1.0e-6, label="Viscosity", unit="m2/s", min=0.0, max=100.0, soft_max=0.1, animatable=True,
        tooltip="Kinematic viscosity in square metres per second (water: 0.000001, honey: about 0.005)")
    artificial_viscosity: float = _param(
        0.02, label="Artificial Viscosity", min=0.0, max=1.0, soft_max=0.2,
        tooltip="Monaghan's artificial viscosity alpha; damps particle noise, larger values make the liquid thicker")
    sound_speed: float = _param(
        0.0, label="Speed of Sound", unit="m/s", min=0.0, max=10000.0, soft_max=200.0,
        tooltip="Numerical speed of sound of the weakly-compressible liquid in m/s; 0 picks ten times the fastest "
                "free-fall speed the scene allows, which keeps density errors near 1 %")
    cfl_number: float = _param(
        0.3, label="CFL Number", min=0.01, max=1.0,
        tooltip="Fraction of a smoothing length a pressure wave may travel per substep; smaller is safer and slower")


@dataclass(frozen=True)
class WCSPHSettings:
    """Settings of the WCSPH solver alone (Suarez & Susin 2006; the Hybrid always sums densities)."""

    GROUP: ClassVar[str] = "WCSPH"

    density: str = _param(
        "CONTINUITY", label="Density", items=WCSPH_DENSITY_MODES,
        tooltip="How each particle's density is found: by the continuity equation, which keeps the free "
                "surface at full density and the pressure right up to it, or by summing over the neighbours, "
                "cheaper by a fifth (the Hybrid solver always sums)")


@dataclass(frozen=True)
class PBFSettings:
    """Position-Based Fluids (Alduan, Tena & Otaduy 2015)."""

    GROUP: ClassVar[str] = "PBF"

    iterations: int = _param(
        4, label="PBF Iterations", min=1, max=100, soft_max=20,
        tooltip="Most density-constraint iterations per substep; more iterations make the liquid less "
                "compressible and cost proportionally more time")
    density_tolerance: float = _param(
        0.5, label="PBF Density Tolerance", unit="%", min=0.01, max=10.0, soft_max=3.0,
        tooltip="Iterations stop once the liquid is compressed by less than this percentage on average; "
                "smaller values settle calmer but need more iterations")
    time_step: float = _param(
        0.002, label="PBF Max Substep", unit="s", min=1.0e-5, max=0.04, soft_max=0.01,
        tooltip="Longest substep in seconds; shorter substeps follow fast splashes more closely")
    cfl_number: float = _param(
        0.5, label="PBF Max Travel", min=0.05, max=2.0,
        tooltip="Fraction of the particle spacing a particle may travel in one substep; fast liquid takes "
                "shorter substeps so that no particle jumps past its neighbours")
    stiffness: float = _param(
        0.6, label="PBF Stiffness", min=0.05, max=0.75,
        tooltip="Scale of each density correction (beta); lower is softer and steadier, above 0.75 the "
                "corrections overshoot and the liquid boils")
    xsph_viscosity: float = _param(
        0.02, label="PBF Viscosity", min=0.0, max=50.0, soft_max=10.0, animatable=True,
        tooltip="XSPH velocity smoothing: 0.01-0.05 for water, about 1 for oil, 5-20 for toothpaste-like "
                "liquids; values above 0.5 are applied in several stable passes")
    surface_tension: float = _param(
        0.0, label="PBF Surface Tension", min=0.0, max=2.0, soft_max=1.0, animatable=True,
        tooltip="Strength of the pull that keeps the liquid together and rounds off drops; 1 pulls the surface "
                "inward as strongly as gravity pulls down. Use 0 for large-scale water, more for small drops")


@dataclass(frozen=True)
class HybridSettings:
    """The MAC grid + SPH hybrid (Suarez & Susin 2006); its particles also read :class:`SPHSettings`."""

    GROUP: ClassVar[str] = "Hybrid"

    interface_mode: str = _param(
        "AUTO", label="Interface", items=HYBRID_INTERFACE_MODES,
        tooltip="Where the grid takes over from the particles: a fixed depth under the free surface that "
                "follows the liquid as it fills or empties a tank (Auto), or a fixed height (Fixed)")
    interface_depth: float = _param(
        0.15, label="Interface Depth", unit="m", min=0.0, max=1000.0, soft_max=2.0,
        requires=(("hybrid_interface_mode", "AUTO"),),
        tooltip="Auto interface: depth under the free surface below which the liquid is simulated on the grid, "
                "in metres; deeper keeps more particles near the surface (more detail, slower). At least four "
                "smoothing lengths plus two grid cells are kept")
    interface_height: float = _param(
        0.0, label="Interface Height", unit="m", min=-1.0e6, max=1.0e6,
        requires=(("hybrid_interface_mode", "FIXED"),),
        tooltip="Fixed interface: world Z below which the liquid is simulated on the grid, in metres; it must "
                "stay under the free surface by at least four smoothing lengths plus two grid cells")
    cell_factor: float = _param(
        2.0, label="Grid Cell Size", min=1.0, max=4.0,
        tooltip="Edge of the grid cells as a multiple of the particle spacing; larger cells make the deep "
                "liquid cheaper and smoother")
    pressure_solver: str = _param(
        "RBSOR", label="Pressure Solver", items=HYBRID_PRESSURE_SOLVERS,
        tooltip="Method that solves the grid's pressure equation: red-black SOR runs on every core; SOR is the "
                "paper's serial method, for comparison")
    sor_omega: float = _param(
        1.7, label="SOR Relaxation", min=1.0, max=1.99,
        tooltip="Over-relaxation factor of the pressure solve; 1.6-1.9 converges fastest on most grids, 1 is "
                "plain Gauss-Seidel")
    pressure_tolerance: float = _param(
        1.0e-3, label="Pressure Tolerance", unit="1/s", min=1.0e-9, max=1.0,
        tooltip="The pressure solve stops once the grid's velocity divergence is below this, per second; "
                "smaller keeps the deep liquid's volume more exact and costs more iterations")
    max_iterations: int = _param(
        200, label="Pressure Iterations", min=1, max=100000, soft_max=2000,
        tooltip="Most sweeps of one pressure solve per substep; the solve stops earlier once it meets the "
                "Pressure Tolerance")


@dataclass(frozen=True)
class RemovalSettings:
    """Removal of liquid by age or position (every solver)."""

    GROUP: ClassVar[str] = "Removal"

    particle_lifetime: float = _param(
        0.0, label="Lifetime", unit="s", min=0.0, max=1.0e6, soft_max=60.0,
        tooltip="Particles older than this many seconds are removed (age counts from emission, or from the "
                "first frame for the liquid of Fluid objects); 0 keeps every particle")
    use_kill_box: bool = _param(
        False, label="Kill Box",
        tooltip="Remove every particle that leaves the box between Kill Box Min and Kill Box Max (world space)")
    kill_box_min: tuple = _param(
        (-10.0, -10.0, -10.0), label="Kill Box Min", unit="m", min=-1.0e6, max=1.0e6,
        requires=(("use_kill_box", True),),
        tooltip="Lowest corner of the kill box in world space, in metres; particles below it on any axis are "
                "removed")
    kill_box_max: tuple = _param(
        (10.0, 10.0, 10.0), label="Kill Box Max", unit="m", min=-1.0e6, max=1.0e6,
        requires=(("use_kill_box", True),),
        tooltip="Highest corner of the kill box in world space, in metres; particles above it on any axis are "
                "removed")


@dataclass(frozen=True)
class SettingsGroup:
    """One group of :class:`SimulationSettings`: its dataclass, the prefix of its flat names, the
    solvers that read it (empty: every solver) and the attribute that gives it back."""

    attribute: str
    cls: type
    prefix: str
    solvers: tuple


#: The groups of SimulationSettings, in the order the UI lists them.
SETTINGS_GROUPS = (
    SettingsGroup("common", CommonSettings, "", ()),
    SettingsGroup("sph", SPHSettings, "", ("WCSPH", "HYBRID")),
    SettingsGroup("wcsph", WCSPHSettings, "wcsph_", ("WCSPH",)),
    SettingsGroup("pbf", PBFSettings, "pbf_", ("PBF",)),
    SettingsGroup("hybrid", HybridSettings, "hybrid_", ("HYBRID",)),
    SettingsGroup("removal", RemovalSettings, "", ()),
)


def _group_view(group: SettingsGroup):
    names = [f.name for f in dataclasses.fields(group.cls)]

    def view(self):
        return group.cls(**{n: getattr(self, group.prefix + n) for n in names})

    view.__doc__ = f"The {group.cls.__name__} of these settings (fields ``{group.prefix}*``)."
    return property(view)


def _group_of(cls, f) -> str:
    """The heading of field ``f`` of settings dataclass ``cls``: its own ``group``, else the class's ``GROUP``."""
    return f.metadata.get("group") or getattr(cls, "GROUP", "Simulation")


def _flat_fields() -> list:
    out = []
    for group in SETTINGS_GROUPS:
        for f in dataclasses.fields(group.cls):
            meta = dict(f.metadata, solvers=group.solvers, group=_group_of(group.cls, f))
            meta["requires"] = tuple(meta["requires"])
            out.append((group.prefix + f.name, f.type, field(default=f.default, metadata=meta)))
    return out


#: Every parameter of a bake, flat: construct with keywords (``SimulationSettings(solver="HYBRID",
#: hybrid_sor_omega=1.5)``), check with :func:`validate`. Generated from :data:`SETTINGS_GROUPS`; a
#: group comes back as an attribute (``settings.pbf.iterations == settings.pbf_iterations``).
SimulationSettings = dataclasses.make_dataclass(
    "SimulationSettings", _flat_fields(), frozen=True,
    namespace={"__doc__": "Every parameter of a bake, flattened from the settings groups (engine.settings."
                          "SETTINGS_GROUPS); each group also comes back whole as an attribute.",
               "__module__": __name__,
               **{g.attribute: _group_view(g) for g in SETTINGS_GROUPS}})


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


#: Object role -> the dataclass of its per-object settings (``Object.surge`` holds them all).
ROLE_SETTINGS = {"COLLIDER": ColliderSettings, "FLUID": FluidSettings, "INFLOW": InflowSettings,
                 "OUTFLOW": OutflowSettings}


def _parameters_of(cls) -> list[Parameter]:
    """Metadata of every field of a settings dataclass, in declaration order (a vector field, typed
    ``tuple``, has ``kind`` float and ``size`` 3)."""
    hints = {"str": str, "float": float, "int": int, "bool": bool, "tuple": float}
    return [Parameter(name=f.name, kind=hints[f.type] if isinstance(f.type, str) else f.type, default=f.default,
                      **dict(f.metadata, group=_group_of(cls, f))) for f in dataclasses.fields(cls)]


def parameters() -> list[Parameter]:
    """Metadata of every setting, in declaration order."""
    return _parameters_of(SimulationSettings)


def object_parameters() -> list[Parameter]:
    """Every per-object setting of every role, each once, with ``roles`` naming the roles that read it
    (a setting shared by two roles, such as ``spacing_factor``, is declared alike in both)."""
    out: dict[str, Parameter] = {}
    for role, cls in ROLE_SETTINGS.items():
        for p in _parameters_of(cls):
            known = out.get(p.name)
            if known is not None and dataclasses.replace(known, roles=()) != p:
                raise TypeError(f"Setting '{p.name}' is declared twice with different metadata")
            out[p.name] = dataclasses.replace(p, roles=(known.roles if known else ()) + (role,))
    return list(out.values())


def animatable_names() -> dict[str, tuple]:
    """Names of the settings a bake reads at every frame: ``{"scene": (...), "object": (...)}``."""
    return {"scene": tuple(p.name for p in parameters() if p.animatable),
            "object": tuple(p.name for p in object_parameters() if p.animatable)}


def collider_parameters() -> list[Parameter]:
    """Metadata of every per-collider setting, in declaration order."""
    return _parameters_of(ColliderSettings)


def fluid_parameters() -> list[Parameter]:
    """Metadata of every per-object setting of a FLUID object, in declaration order."""
    return _parameters_of(FluidSettings)


def inflow_parameters() -> list[Parameter]:
    """Metadata of every per-object setting of an INFLOW object, in declaration order."""
    return _parameters_of(InflowSettings)


def _problems_in(settings, owner: str) -> list[str]:
    """Every problem with the fields of a settings dataclass (owner names it in the messages)."""
    problems: list[str] = []
    for p in _parameters_of(type(settings)):
        problems += _problems_for(p, getattr(settings, p.name), owner)
    return problems


def _strict_from_dict(cls, data: dict, owner: str):
    """Build ``cls`` from a dict, strictly (unknown keys are errors, missing ones take defaults; ints are
    accepted for float fields), and validate it; raises one :class:`InvalidSettingsError`."""
    known = {p.name: p for p in _parameters_of(cls)}
    problems = [f"{owner}: unknown setting '{k}'" for k in data if k not in known]
    if problems:
        raise InvalidSettingsError(problems)
    values = {k: _from_json(known[k], v) for k, v in data.items()}
    try:
        settings = cls(**values)
    except TypeError as exc:
        raise InvalidSettingsError([f"{owner}: {exc}"]) from exc
    problems = _problems_in(settings, owner)
    if problems:
        raise InvalidSettingsError(problems)
    return settings


def _number_from_json(kind: type, value):
    # ints are accepted for float settings (JSON writes 2.0 as 2 in some tools); bools are not numbers
    return float(value) if kind is float and isinstance(value, int) and not isinstance(value, bool) else value


def _from_json(p: Parameter, value):
    """A setting's value as read from JSON: a vector's list becomes a tuple (validation checks its length)."""
    if p.size and isinstance(value, list):
        return tuple(_number_from_json(p.kind, v) for v in value)
    return _number_from_json(p.kind, value)


def validate_collider(settings: ColliderSettings, owner: str) -> list[str]:
    """Problems with one collider's settings (``owner`` names it, e.g. "Collider 'Cup'")."""
    return _problems_in(settings, owner)


def collider_from_dict(data: dict, owner: str) -> ColliderSettings:
    """Strict construction of :class:`ColliderSettings` (unknown keys are errors), validated."""
    return _strict_from_dict(ColliderSettings, data, owner)


def validate_object(settings, owner: str) -> list[str]:
    """Problems with one object's settings (ColliderSettings, FluidSettings or InflowSettings; ``owner``
    names it, e.g. "Inflow 'Tap'"), including the cross-field checks of an inflow."""
    problems = _problems_in(settings, owner)
    if isinstance(settings, InflowSettings) and not problems:
        if settings.emit_end != 0 and settings.emit_end < settings.emit_start:
            problems.append(f"{owner}: setting 'End Frame' (emit_end) is {settings.emit_end}, before the Start "
                            f"Frame {settings.emit_start}; use 0 to emit until the end of the bake")
    return problems


def fluid_from_dict(data: dict, owner: str) -> FluidSettings:
    """Strict construction of :class:`FluidSettings` (unknown keys are errors), validated."""
    return _strict_from_dict(FluidSettings, data, owner)


def inflow_from_dict(data: dict, owner: str) -> InflowSettings:
    """Strict construction of :class:`InflowSettings` (unknown keys are errors), validated."""
    settings = _strict_from_dict(InflowSettings, data, owner)
    problems = validate_object(settings, owner)
    if problems:
        raise InvalidSettingsError(problems)
    return settings


def to_dict(settings: SimulationSettings) -> dict:
    """Plain dict of the settings as stored in a job folder and cache manifest (JSON types: a vector is a
    list), so that it compares equal to the dict read back from there."""
    return {k: list(v) if isinstance(v, tuple) else v for k, v in dataclasses.asdict(settings).items()}


def settings_hash(settings: SimulationSettings) -> str:
    """SHA-256 of the canonical JSON of the settings."""
    text = json.dumps(to_dict(settings), sort_keys=True, separators=(",", ":"))
    return hashlib.sha256(text.encode("utf-8")).hexdigest()


def _problems_for(p: Parameter, value, owner: str) -> list[str]:
    where = f"{owner}: setting '{p.label}' ({p.name})"
    if p.size:
        if not isinstance(value, tuple) or len(value) != p.size:
            return [f"{where} must be {p.size} numbers (X, Y, Z), got {value!r}"]
        scalar = dataclasses.replace(p, size=0)
        return [problem for axis, v in zip("XYZ", value)
                for problem in _problems_for(dataclasses.replace(scalar, label=f"{p.label} {axis}"), v, owner)]
    if p.kind is bool:
        return [] if isinstance(value, bool) else [f"{where} must be true or false, got {value!r}"]
    if p.kind is str:
        if not isinstance(value, str):
            return [f"{where} must be text, got {value!r}"]
        names = [i[0] for i in p.items]
        if names and value not in names:
            return [f"{where} is {value!r}; choose one of {', '.join(names)}"]
        return []
    if p.kind is int and (isinstance(value, bool) or not isinstance(value, int)):
        return [f"{where} must be a whole number, got {value!r}"]
    if p.kind is float and (isinstance(value, bool) or not isinstance(value, (int, float))):
        return [f"{where} must be a number, got {value!r}"]
    if not math.isfinite(value):
        return [f"{where} must be finite, got {value!r}"]
    unit = f" {p.unit}" if p.unit else ""
    if p.min is not None and value < p.min:
        return [f"{where} is {value:g}{unit}, below the minimum {p.min:g}{unit}"]
    if p.max is not None and value > p.max:
        return [f"{where} is {value:g}{unit}, above the maximum {p.max:g}{unit}"]
    return []


def validate(settings: SimulationSettings, owner: str = "Scene") -> None:
    """Check every setting; raise one :class:`InvalidSettingsError` listing all problems.

    Parameters
    ----------
    settings : SimulationSettings
    owner : str
        Name used in messages (the Blender scene name, for instance).
    """
    problems = _problems_in(settings, owner)
    if not problems and settings.use_kill_box:
        for axis, lo, hi in zip("XYZ", settings.kill_box_min, settings.kill_box_max):
            if hi <= lo:
                problems.append(f"{owner}: setting 'Kill Box Max {axis}' (kill_box_max) is {hi:g} m, "
                                f"not above Kill Box Min {axis} ({lo:g} m); the kill box would be empty")
    if problems:
        raise InvalidSettingsError(problems)


def check_supported(settings: SimulationSettings, owner: str = "Scene") -> None:
    """Refuse settings this engine version cannot bake yet (never silently ignore them)."""
    if settings.solver not in SUPPORTED_SOLVERS:
        raise InvalidSettingsError([
            f"{owner}: solver '{settings.solver}' is not available in this version of Surge; "
            f"use {' or '.join(SUPPORTED_SOLVERS)}"])


def from_dict(data: dict, owner: str = "Scene") -> SimulationSettings:
    """Build settings from a dict, strictly: unknown keys are errors, missing keys take defaults.

    Integral floats such as ``2.0`` are accepted for float fields and ints for float fields;
    the result is validated before it is returned.
    """
    return _strict_from_dict(SimulationSettings, data, owner)


# ---------------------------------------------------------------------------------------------------
# Whitewater (spray, foam and bubbles over a baked cache; engine.whitewater). A block of its own:
# its settings are not simulation settings (changing them never touches the liquid's cache), and
# they live in ``Scene.surge.whitewater`` in Blender.
# ---------------------------------------------------------------------------------------------------

@dataclass(frozen=True)
class WhitewaterSettings:
    """Every parameter of a whitewater stage (Ihmsen et al. 2012). Construct with keywords."""

    GROUP: ClassVar[str] = "Whitewater"

    use_auto_thresholds: bool = _param(
        True, label="Automatic Thresholds",
        tooltip="Set the potentials' thresholds from the shot's own range (a tenth of the average per-frame "
                "maximum to that maximum), so a glass and an ocean wave both get whitewater without tuning; "
                "off uses the thresholds below")
    trapped_air_min: float = _param(
        1.0, label="Trapped Air Min", unit="m/s", min=0.0, max=1.0e4, soft_max=50.0,
        tooltip="Trapped-air potential (how fast neighbouring liquid collides) below which no whitewater is made")
    trapped_air_max: float = _param(
        8.0, label="Trapped Air Max", unit="m/s", min=1.0e-6, max=1.0e4, soft_max=100.0,
        tooltip="Trapped-air potential at and above which emission is strongest")
    wave_crest_min: float = _param(
        0.3, label="Wave Crest Min", min=0.0, max=1.0e3, soft_max=10.0,
        tooltip="Wave-crest potential (curvature of a surface moving outward) below which no whitewater is made")
    wave_crest_max: float = _param(
        2.0, label="Wave Crest Max", min=1.0e-6, max=1.0e3, soft_max=20.0,
        tooltip="Wave-crest potential at and above which emission is strongest")
    energy_min: float = _param(
        0.5, label="Energy Min", unit="J/kg", min=0.0, max=1.0e6, soft_max=100.0,
        tooltip="Kinetic energy per kilogram (half the speed squared) below which liquid makes no whitewater")
    energy_max: float = _param(
        4.0, label="Energy Max", unit="J/kg", min=1.0e-6, max=1.0e6, soft_max=500.0,
        tooltip="Kinetic energy per kilogram at and above which liquid makes the most whitewater")
    trapped_air_rate: float = _param(
        40.0, label="Trapped Air Rate", unit="1/s", min=0.0, max=1.0e5, soft_max=1000.0,
        tooltip="Whitewater particles one liquid particle makes per second at full trapped-air and energy potential")
    wave_crest_rate: float = _param(
        40.0, label="Wave Crest Rate", unit="1/s", min=0.0, max=1.0e5, soft_max=1000.0,
        tooltip="Whitewater particles one liquid particle makes per second at full wave-crest and energy potential")
    spray_amount: float = _param(
        1.0, label="Spray Amount", min=0.0, max=10.0,
        tooltip="Share of the new particles born in the air that are kept as spray (1 keeps all, 0 makes no spray)")
    foam_amount: float = _param(
        1.0, label="Foam Amount", min=0.0, max=10.0,
        tooltip="Share of the new particles born at the liquid's surface that are kept as foam")
    bubble_amount: float = _param(
        1.0, label="Bubble Amount", min=0.0, max=10.0,
        tooltip="Share of the new particles born inside the liquid that are kept as bubbles")
    lifetime: float = _param(
        3.0, label="Foam Lifetime", unit="s", min=0.01, max=1.0e4, soft_max=30.0,
        tooltip="Average seconds a particle lasts as foam before it dissolves; the energy of the splash that made "
                "it lengthens it (half of this for the weakest splash, all of it for the strongest)")
    lifetime_variation: float = _param(
        0.5, label="Lifetime Variation", min=0.0, max=1.0,
        tooltip="Random spread of each particle's lifetime around its value (0.5: from half to one and a half "
                "times), so foam fades gradually instead of all at once")
    buoyancy: float = _param(
        2.0, label="Bubble Buoyancy", min=0.0, max=100.0, soft_max=10.0,
        tooltip="Upward pull on bubbles as a multiple of gravity")
    bubble_drag: float = _param(
        8.0, label="Bubble Drag", unit="1/s", min=0.0, max=1.0e4, soft_max=100.0,
        tooltip="How quickly bubbles take on the velocity of the liquid around them, per second; with the buoyancy "
                "it sets their rising speed (buoyancy times gravity over drag)")
    spray_drag: float = _param(
        0.5, label="Spray Drag", unit="1/s", min=0.0, max=1.0e4, soft_max=20.0,
        tooltip="Air drag on spray, per second: 0 flies on a ballistic arc, larger values slow spray down "
                "sooner (falling speed at most gravity over drag)")
    spray_size: float = _param(
        0.003, label="Spray Size", unit="m", min=1.0e-6, max=10.0, soft_max=0.1,
        tooltip="Radius at which spray particles render")
    foam_size: float = _param(
        0.005, label="Foam Size", unit="m", min=1.0e-6, max=10.0, soft_max=0.1,
        tooltip="Radius at which foam particles render")
    bubble_size: float = _param(
        0.003, label="Bubble Size", unit="m", min=1.0e-6, max=10.0, soft_max=0.1,
        tooltip="Radius at which bubbles render")
    max_particles: int = _param(
        5_000_000, label="Max Particles", min=1, max=100_000_000,
        tooltip="Most whitewater particles alive at once; while the cap binds no new particles are made and the "
                "stage reports it")
    spray_neighbours: int = _param(
        6, label="Spray Below", min=0, max=200,
        tooltip="A particle with fewer liquid particles than this within two particle spacings is spray")
    bubble_neighbours: int = _param(
        20, label="Bubbles Above", min=1, max=200,
        tooltip="A particle with more liquid particles than this within two particle spacings is a bubble; "
                "between the two limits it is foam")
    seed: int = _param(
        0, label="Seed", min=0, max=2**31 - 1,
        tooltip="Seed of the random placement; the same cache, settings and seed give the same whitewater")


def whitewater_parameters() -> list[Parameter]:
    """Metadata of every whitewater setting, in declaration order."""
    return _parameters_of(WhitewaterSettings)


def validate_whitewater(settings: WhitewaterSettings, owner: str = "Whitewater") -> None:
    """Check every whitewater setting; raise one :class:`InvalidSettingsError` listing all problems."""
    problems = _problems_in(settings, owner)
    if not problems:
        for low, high, label in (("trapped_air_min", "trapped_air_max", "Trapped Air"),
                                 ("wave_crest_min", "wave_crest_max", "Wave Crest"),
                                 ("energy_min", "energy_max", "Energy")):
            if not settings.use_auto_thresholds and getattr(settings, high) <= getattr(settings, low):
                problems.append(f"{owner}: setting '{label} Max' ({high}) is {getattr(settings, high):g}, not above "
                                f"'{label} Min' ({getattr(settings, low):g}); raise the maximum")
        if settings.bubble_neighbours <= settings.spray_neighbours:
            problems.append(f"{owner}: setting 'Bubbles Above' (bubble_neighbours) is {settings.bubble_neighbours}, "
                            f"not above 'Spray Below' ({settings.spray_neighbours}); foam would have no room")
    if problems:
        raise InvalidSettingsError(problems)


def whitewater_from_dict(data: dict, owner: str = "Whitewater") -> WhitewaterSettings:
    """Strict construction of :class:`WhitewaterSettings` (unknown keys are errors), validated."""
    settings = _strict_from_dict(WhitewaterSettings, data, owner)
    validate_whitewater(settings, owner)
    return settings


def whitewater_hash(settings: WhitewaterSettings) -> str:
    """SHA-256 of the canonical JSON of the whitewater settings."""
    text = json.dumps(dataclasses.asdict(settings), sort_keys=True, separators=(",", ":"))
    return hashlib.sha256(text.encode("utf-8")).hexdigest()


# --- The liquid surface (engine.surface): a stage over the baked particles, with settings of its own ---

@dataclass(frozen=True)
class SurfaceSettings:
    """Settings of the surface mesh made from each baked frame (:mod:`engine.surface`).

    Lengths are multiples of the particle spacing, so a surface set up on a coarse preview keeps its
    look when the spacing is refined. A change re-meshes without simulating again.
    """

    GROUP: ClassVar[str] = "Surface"

    surface_cell_size: float = _param(
        0.5, label="Surface Resolution", min=0.1, max=2.0, soft_min=0.25,
        tooltip="Edge of the surface mesh's cells as a fraction of the particle spacing; smaller shows finer detail "
                "and makes heavier meshes (0.5 gives about 4 times the triangles of 1)")
    surface_kernel_radius: float = _param(
        2.0, label="Surface Kernel Radius", min=1.0, max=4.0,
        tooltip="Reach of each particle into the surface, as a multiple of the particle spacing; larger rounds off "
                "bumps and merges close drops, smaller keeps separate drops and sharp crests")
    surface_iso: float = _param(
        0.6, label="Surface Iso Level", min=0.05, max=0.95,
        tooltip="Where the surface lies between empty space (0) and the inside of the liquid (1); lower wraps the "
                "particles more loosely, higher more tightly")
    surface_smoothing_iterations: int = _param(
        25, label="Surface Smoothing", min=0, max=500, soft_max=100,
        tooltip="Passes of volume-preserving smoothing over the mesh (weighted Laplacian smoothing of Loeschner et "
                "al. 2023); removes the bumps of single particles without shrinking thin parts")
    surface_thin_sheets: bool = _param(
        False, label="Keep Thin Sheets",
        tooltip="Bridge the gaps between particles that the flow has pulled apart into sheets and jets, so they stay "
                "closed instead of tearing into holes and beads; costs a little time on splashy frames")
    surface_vertex_attributes: bool = _param(
        False, label="Density, Age and Channels",
        tooltip="Also give the surface's vertices the particles' density, age and named channels (velocity is "
                "always there, for motion blur); makes the surface files larger")


def surface_parameters() -> list[Parameter]:
    """Metadata of every surface setting, in declaration order."""
    return _parameters_of(SurfaceSettings)


def surface_from_dict(data: dict, owner: str = "Scene") -> SurfaceSettings:
    """Strict construction of :class:`SurfaceSettings` (unknown keys are errors), validated."""
    return _strict_from_dict(SurfaceSettings, data, owner)


# --- The live session (engine.live): the liquid simulated while the artist works --------------------

@dataclass(frozen=True)
class LiveSettings:
    """How a live session simulates (``Scene.surge_live`` in Blender; :mod:`engine.live`).

    Unless ``use_scene_settings`` is on, the session runs PBF with these settings in place of the
    scene's solver, substep, iterations and spacing. Everything else is the scene's. The default
    substep is the longest that stayed stable with a solid paddle swept through the liquid at 0.5 m/s
    (1/240 s diverged within a third of a second of it, 1/120 s within a second, in a bake of the same
    motion as well as live); three iterations, since the density tolerance ends most substeps after two
    or three anyway.
    """

    use_scene_settings: bool = _param(
        False, label="Use Bake Settings", group="Live",
        tooltip="Simulate live with exactly the bake's settings (solver, substep, iterations, spacing), so that "
                "the live liquid matches a bake frame for frame; off uses the faster live settings below")
    spacing_factor: float = _param(
        1.0, label="Live Spacing", min=0.25, max=8.0, soft_max=4.0, group="Live",
        tooltip="Particle spacing of the live session as a multiple of the scene's; 2 makes 8 times fewer particles "
                "and a session about 8 times faster")
    time_step: float = _param(
        0.002, label="Live Max Substep", unit="s", min=1.0e-4, max=0.04, group="Live",
        tooltip="Longest PBF substep of the live session in seconds; fast liquid takes shorter ones (PBF Max "
                "Travel). Longer substeps are cheaper and softer")
    iterations: int = _param(
        3, label="Live Iterations", min=1, max=20, group="Live",
        tooltip="Density-constraint iterations per live substep; fewer are faster and make the liquid a little "
                "more compressible")
    speed: float = _param(
        1.0, label="Speed", min=0.05, max=4.0, group="Live",
        tooltip="Simulated time per second of wall time the session aims for: 1 is real time, 0.5 slow motion; "
                "a scene too heavy for the machine runs slower and the panel says by how much")
    collider_substeps: int = _param(
        8, label="Collider Substeps", min=1, max=100, group="Live",
        tooltip="Most substeps one displayed frame takes to follow a collider moved fast (a collider surface "
                "moves at most 0.4 particle spacings per substep); a collider moved faster follows at the speed "
                "this allows and catches up over the next frames")
    max_particles: int = _param(
        200_000, label="Max Particles", min=1000, max=50_000_000, group="Live",
        tooltip="Most particles the live session holds; inflows stop emitting while it is full (the shared "
                "buffers Blender reads are sized for it)")


def live_parameters() -> list[Parameter]:
    """Metadata of every live setting, in declaration order."""
    return _parameters_of(LiveSettings)


#: Scene settings a running live session takes on at once; a change of any other restarts it.
LIVE_CHANGEABLE = ("viscosity", "pbf_xsph_viscosity", "pbf_surface_tension")


def live_simulation_settings(settings: SimulationSettings, live: LiveSettings) -> SimulationSettings:
    """The settings a live session simulates with: the scene's, or PBF with the live substep,
    iterations and spacing (see :class:`LiveSettings`)."""
    if live.use_scene_settings:
        return settings
    return dataclasses.replace(settings, solver="PBF", particle_spacing=settings.particle_spacing * live.spacing_factor,
                               pbf_time_step=live.time_step, pbf_iterations=live.iterations)


def validate_live(settings: LiveSettings, owner: str = "Live") -> None:
    """Check every live setting; raise one :class:`InvalidSettingsError` listing all problems."""
    problems = _problems_in(settings, owner)
    if problems:
        raise InvalidSettingsError(problems)
