"""The scene's simulation settings (:class:`SimulationSettings`, flattened from the per-solver
groups of :data:`SETTINGS_GROUPS`), the per-object role settings (:data:`ROLE_SETTINGS`, declared in
:mod:`engine.settings.roles`), their validation, hashing and strict reading from job folders and cache
manifests."""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass, field
from typing import ClassVar

from ..io.hashing import canonical_hash
from ..errors import InvalidSettingsError
from .roles import (COLLIDER_MODES, MASS_MODES, INFLOW_MODES, ROLE_SETTINGS, ColliderSettings, FluidSettings,  # noqa: F401
                    InflowSettings, OutflowSettings, RigidBodySettings)
from .parameters import Parameter, _group_of, _param, _parameters_of, _problems_in, _strict_from_dict, names


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


#: Solvers this engine version can bake: every one of :data:`SOLVERS`, the only list of them.
SUPPORTED_SOLVERS = names(SOLVERS)

#: Solvers that simulate liquids of several particle spacings together (PBF's mass-aware constraint):
#: with the others every Spacing Factor must be 1.
MULTI_RESOLUTION_SOLVERS = ("PBF",)


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
        group="Liquid",
        tooltip="Density of the liquid at rest, in kilograms per cubic metre (water: 1000)")
    dynamic_viscosity: float = _param(
        0.001, label="Viscosity", unit="Pa s", min=0.0, max=1.0e6, soft_max=1000.0, animatable=True,
        group="Liquid",
        tooltip="Dynamic viscosity of the liquid in pascal-seconds (water 0.001, olive oil 0.084, honey about 10, "
                "lava 100 to 10,000); solved implicitly, so a thick liquid bakes at the substeps of water")
    surface_tension: float = _param(
        0.0, label="Surface Tension", unit="N/m", min=0.0, max=100.0, soft_max=1.0, animatable=True,
        group="Liquid",
        tooltip="Surface tension of the liquid in newtons per metre (water 0.073, oil 0.032, honey 0.05); it rounds "
                "off drops and holds thin streams together, and matters at the scale of centimetres. 0 turns it off")
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
    velocity_smoothing: float = _param(
        0.02, label="PBF Velocity Smoothing", min=0.0, max=50.0, soft_max=10.0, animatable=True,
        tooltip="XSPH smoothing of each particle's velocity toward its neighbours' (no physical unit): a little "
                "(0.01-0.05) calms particle noise; more damps the liquid for an artistic look. The liquid's own "
                "viscosity is the Viscosity setting")
    surface_tension: float = _param(
        0.0, label="Legacy Surface Pull", min=0.0, max=2.0, soft_max=1.0, animatable=True,
        tooltip="The earlier PBF surface pull, as a multiple of gravity (1 pulls the surface inward as strongly as "
                "gravity pulls down), kept so that files made with it bake as they did; a weightless drop swells "
                "slowly under it. 0 turns it off: use Surface Tension, in N/m, instead")


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


def validate_collider(settings: ColliderSettings, owner: str) -> list[str]:
    """Problems with one collider's settings (``owner`` names it, e.g. "Collider 'Cup'")."""
    return _problems_in(settings, owner)


def rigid_body_parameters() -> list[Parameter]:
    """Metadata of every per-object setting of a RIGID_BODY object, in declaration order."""
    return _parameters_of(RigidBodySettings)


def rigid_body_from_dict(data: dict, owner: str) -> RigidBodySettings:
    """Strict construction of :class:`RigidBodySettings` (unknown keys are errors), validated."""
    return _strict_from_dict(RigidBodySettings, data, owner)


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
    return canonical_hash(to_dict(settings))


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


#: Settings of earlier versions read under their new name (the same meaning and unit).
RENAMED = {"pbf_xsph_viscosity": "pbf_velocity_smoothing"}

#: The kinematic viscosity (m^2/s) of earlier versions: a setting of this name is always of that version
#: (no setting of that name is written since), read as ``dynamic_viscosity`` = viscosity x rest density.
KINEMATIC_VISCOSITY = "viscosity"

#: The kinematic viscosity of earlier versions when it was never set, m^2/s (their default: water's).
KINEMATIC_DEFAULT = 1.0e-6


def migrated(data: dict) -> dict:
    """Scene settings of any earlier version as this version reads them, with the same meaning: renamed
    settings under their new names, and the kinematic ``viscosity`` (m^2/s) of earlier versions turned
    into the dynamic viscosity ``dynamic_viscosity`` = nu rho0 (Pa s), rho0 the dict's rest density (or
    its default). A dict of this version is returned as it is (a copy)."""
    out = {RENAMED.get(k, k): v for k, v in data.items()}
    if KINEMATIC_VISCOSITY in out and "dynamic_viscosity" not in out:
        nu = out.pop(KINEMATIC_VISCOSITY)
        if isinstance(nu, (int, float)) and not isinstance(nu, bool):
            nu = float(nu) * float(out.get("rest_density", CommonSettings.rest_density))
        out["dynamic_viscosity"] = nu
    return out


def from_dict(data: dict, owner: str = "Scene") -> SimulationSettings:
    """Build settings from a dict, strictly: unknown keys are errors, missing keys take defaults.

    Integral floats such as ``2.0`` are accepted for float fields and ints for float fields;
    the result is validated before it is returned. Settings of earlier versions are read with their
    meaning kept (:func:`migrated`).
    """
    return _strict_from_dict(SimulationSettings, migrated(dict(data)), owner)
