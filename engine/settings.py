"""Simulation settings: one typed description of every parameter.

Each field of :class:`SimulationSettings` carries its metadata (label, unit, range, tooltip, enum
items) in ``dataclasses.field(metadata=...)``. That single description feeds

* :func:`validate` (every problem collected, then one :class:`InvalidSettingsError`),
* the Blender properties (the add-on builds its PropertyGroup from :func:`parameters`),
* the cache manifest (:func:`to_dict` and :func:`settings_hash`).

Units are SI. Enum values are strings, never integer codes.
"""

from __future__ import annotations

import dataclasses
import hashlib
import json
import math
from dataclasses import dataclass, field
from typing import Any

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

#: Solvers this engine version can bake. The others are refused with a clear message.
SUPPORTED_SOLVERS = ("WCSPH", "PBF", "HYBRID")


@dataclass(frozen=True)
class Parameter:
    """Metadata of one setting, as read by validation, the Blender UI and the manifest."""

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


def _param(default, *, label, tooltip, unit="", min=None, max=None, soft_min=None, soft_max=None,
           items=(), group="Simulation"):
    meta = dict(label=label, tooltip=tooltip, unit=unit, min=min, max=max, soft_min=soft_min,
                soft_max=soft_max, items=tuple(items), group=group)
    return field(default=default, metadata=meta)


@dataclass(frozen=True)
class SimulationSettings:
    """Every parameter of a bake. Construct with keywords; check with :func:`validate`."""

    solver: str = _param(
        "PBF", label="Solver", items=SOLVERS,
        tooltip="Method that moves the liquid")
    particle_spacing: float = _param(
        0.025, label="Particle Spacing", unit="m", min=0.0005, max=10.0, soft_min=0.002, soft_max=0.2,
        tooltip="Distance between neighbouring particles at rest, in metres; halving it makes 8 times more particles")
    smoothing_length_factor: float = _param(
        1.2, label="Smoothing Length", min=0.8, max=2.5,
        tooltip="Kernel smoothing length h as a multiple of the particle spacing; particles interact within 2h")
    rest_density: float = _param(
        1000.0, label="Rest Density", unit="kg/m3", min=1.0, max=25000.0, soft_min=100.0, soft_max=5000.0,
        tooltip="Density of the liquid at rest, in kilograms per cubic metre (water: 1000)")
    viscosity: float = _param(
        1.0e-6, label="Viscosity", unit="m2/s", min=0.0, max=100.0, soft_max=0.1,
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
    max_substeps: int = _param(
        2000, label="Max Substeps", min=1, max=100000,
        tooltip="Most substeps one frame may take; a frame needing more stops the bake with an error")
    collider_cell_size: float = _param(
        0.5, label="Collider Resolution", min=0.1, max=2.0, group="Colliders",
        tooltip="Cell size of the distance fields sampled from collider meshes, as a fraction of the particle "
                "spacing; smaller follows fine detail more closely and costs more memory and build time")
    # --- Weakly-compressible SPH (solver 'WCSPH'; Suarez & Susin 2006) ---
    wcsph_density: str = _param(
        "CONTINUITY", label="Density", items=WCSPH_DENSITY_MODES, group="WCSPH",
        tooltip="How each particle's density is found: by the continuity equation, which keeps the free "
                "surface at full density and the pressure right up to it, or by summing over the neighbours, "
                "cheaper by a fifth (the Hybrid solver always sums)")
    # --- Position-Based Fluids (solver 'PBF'; Alduan, Tena & Otaduy 2015) ---
    pbf_iterations: int = _param(
        4, label="PBF Iterations", min=1, max=100, soft_max=20, group="PBF",
        tooltip="Most density-constraint iterations per substep; more iterations make the liquid less "
                "compressible and cost proportionally more time")
    pbf_density_tolerance: float = _param(
        0.5, label="PBF Density Tolerance", unit="%", min=0.01, max=10.0, soft_max=3.0, group="PBF",
        tooltip="Iterations stop once the liquid is compressed by less than this percentage on average; "
                "smaller values settle calmer but need more iterations")
    pbf_time_step: float = _param(
        0.002, label="PBF Max Substep", unit="s", min=1.0e-5, max=0.04, soft_max=0.01, group="PBF",
        tooltip="Longest substep in seconds; shorter substeps follow fast splashes more closely")
    pbf_cfl_number: float = _param(
        0.5, label="PBF Max Travel", min=0.05, max=2.0, group="PBF",
        tooltip="Fraction of the particle spacing a particle may travel in one substep; fast liquid takes "
                "shorter substeps so that no particle jumps past its neighbours")
    pbf_stiffness: float = _param(
        0.6, label="PBF Stiffness", min=0.05, max=0.75, group="PBF",
        tooltip="Scale of each density correction (beta); lower is softer and steadier, above 0.75 the "
                "corrections overshoot and the liquid boils")
    pbf_xsph_viscosity: float = _param(
        0.02, label="PBF Viscosity", min=0.0, max=50.0, soft_max=10.0, group="PBF",
        tooltip="XSPH velocity smoothing: 0.01-0.05 for water, about 1 for oil, 5-20 for toothpaste-like "
                "liquids; values above 0.5 are applied in several stable passes")
    pbf_surface_tension: float = _param(
        0.0, label="PBF Surface Tension", min=0.0, max=2.0, soft_max=1.0, group="PBF",
        tooltip="Strength of the pull that keeps the liquid together and rounds off drops; 1 pulls the surface "
                "inward as strongly as gravity pulls down. Use 0 for large-scale water, more for small drops")
    # --- MAC-SPH hybrid (solver 'HYBRID'; Suarez & Susin 2006) ---
    hybrid_interface_mode: str = _param(
        "AUTO", label="Interface", items=HYBRID_INTERFACE_MODES, group="Hybrid",
        tooltip="Where the grid takes over from the particles: a fixed depth under the free surface that "
                "follows the liquid as it fills or empties a tank (Auto), or a fixed height (Fixed)")
    hybrid_interface_depth: float = _param(
        0.15, label="Interface Depth", unit="m", min=0.0, max=1000.0, soft_max=2.0, group="Hybrid",
        tooltip="Auto interface: depth under the free surface below which the liquid is simulated on the grid, "
                "in metres; deeper keeps more particles near the surface (more detail, slower). At least four "
                "smoothing lengths plus two grid cells are kept")
    hybrid_interface_height: float = _param(
        0.0, label="Interface Height", unit="m", min=-1.0e6, max=1.0e6, group="Hybrid",
        tooltip="Fixed interface: world Z below which the liquid is simulated on the grid, in metres; it must "
                "stay under the free surface by at least four smoothing lengths plus two grid cells")
    hybrid_cell_factor: float = _param(
        2.0, label="Grid Cell Size", min=1.0, max=4.0, group="Hybrid",
        tooltip="Edge of the grid cells as a multiple of the particle spacing; larger cells make the deep "
                "liquid cheaper and smoother")
    hybrid_pressure_solver: str = _param(
        "RBSOR", label="Pressure Solver", items=HYBRID_PRESSURE_SOLVERS, group="Hybrid",
        tooltip="Method that solves the grid's pressure equation: red-black SOR runs on every core; SOR is the "
                "paper's serial method, for comparison")
    hybrid_sor_omega: float = _param(
        1.7, label="SOR Relaxation", min=1.0, max=1.99, group="Hybrid",
        tooltip="Over-relaxation factor of the pressure solve; 1.6-1.9 converges fastest on most grids, 1 is "
                "plain Gauss-Seidel")
    hybrid_pressure_tolerance: float = _param(
        1.0e-3, label="Pressure Tolerance", unit="1/s", min=1.0e-9, max=1.0, group="Hybrid",
        tooltip="The pressure solve stops once the grid's velocity divergence is below this, per second; "
                "smaller keeps the deep liquid's volume more exact and costs more iterations")
    hybrid_max_iterations: int = _param(
        200, label="Pressure Iterations", min=1, max=100000, soft_max=2000, group="Hybrid",
        tooltip="Most sweeps of one pressure solve per substep; the solve stops earlier once it meets the "
                "Pressure Tolerance")

    # --- Removal of emitted liquid ---
    particle_lifetime: float = _param(
        0.0, label="Lifetime", unit="s", min=0.0, max=1.0e6, soft_max=60.0, group="Removal",
        tooltip="Particles older than this many seconds are removed (age counts from emission, or from the "
                "first frame for the liquid of Fluid objects); 0 keeps every particle")
    use_kill_box: bool = _param(
        False, label="Kill Box", group="Removal",
        tooltip="Remove every particle that leaves the box between Kill Box Min and Kill Box Max (world space)")
    kill_box_min_x: float = _param(
        -10.0, label="Kill Box Min X", unit="m", min=-1.0e6, max=1.0e6, group="Removal",
        tooltip="Lowest X of the kill box, in metres; particles with a smaller X are removed")
    kill_box_min_y: float = _param(
        -10.0, label="Kill Box Min Y", unit="m", min=-1.0e6, max=1.0e6, group="Removal",
        tooltip="Lowest Y of the kill box, in metres; particles with a smaller Y are removed")
    kill_box_min_z: float = _param(
        -10.0, label="Kill Box Min Z", unit="m", min=-1.0e6, max=1.0e6, group="Removal",
        tooltip="Lowest Z of the kill box, in metres; particles with a smaller Z are removed")
    kill_box_max_x: float = _param(
        10.0, label="Kill Box Max X", unit="m", min=-1.0e6, max=1.0e6, group="Removal",
        tooltip="Highest X of the kill box, in metres; particles with a larger X are removed")
    kill_box_max_y: float = _param(
        10.0, label="Kill Box Max Y", unit="m", min=-1.0e6, max=1.0e6, group="Removal",
        tooltip="Highest Y of the kill box, in metres; particles with a larger Y are removed")
    kill_box_max_z: float = _param(
        10.0, label="Kill Box Max Z", unit="m", min=-1.0e6, max=1.0e6, group="Removal",
        tooltip="Highest Z of the kill box, in metres; particles with a larger Z are removed")



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

    collider_mode: str = _param(
        "AUTO", label="Collider Mode", items=COLLIDER_MODES, group="Collider",
        tooltip="How this collider holds back the liquid: from outside (solid), from inside (container) or "
                "from both sides (shell); Auto picks from the mesh")
    friction: float = _param(
        0.0, label="Friction", min=0.0, max=1.0, group="Collider",
        tooltip="Fraction of the liquid's sliding speed along this collider removed at each contact; 0 is "
                "slippery, 1 makes the liquid stick")
    bounce: float = _param(
        0.0, label="Bounce", min=0.0, max=1.0, group="Collider",
        tooltip="Fraction of the speed into this collider the liquid keeps, reversed, when it hits it; 0 for "
                "water, which does not bounce off walls")
    surface_offset: float = _param(
        0.0, label="Surface Offset", unit="m", min=-1.0, max=1.0, soft_min=-0.1, soft_max=0.1, group="Collider",
        tooltip="Moves the surface the liquid meets outward from the solid (negative: inward), in metres; "
                "a shell is half a particle spacing thick plus this offset on each side")


def _spacing_factor():
    return _param(
        1.0, label="Spacing Factor", min=0.25, max=4.0, soft_min=0.5, soft_max=2.0, group="Resolution",
        tooltip="Particle spacing of the liquid from this object as a multiple of the scene's Particle Spacing; "
                "below 1 gives finer detail (8 times more particles at 0.5), above 1 coarser, cheaper liquid. "
                "Needs the PBF solver when it is not 1")


@dataclass(frozen=True)
class FluidSettings:
    """Per-object parameters of a FLUID object (``Object.surge`` in Blender). Construct with keywords."""

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

    use_flow: bool = _param(
        True, label="Use Flow", group="Inflow",
        tooltip="While on, this inflow emits liquid and this outflow removes it; keyframe it (or drive it) to open "
                "and close the flow during the shot")
    inflow_mode: str = _param(
        "SURFACE", label="Emit From", items=INFLOW_MODES, group="Inflow",
        tooltip="Where the liquid appears: from the surface of the mesh, or filling its closed volume")
    normal_speed: float = _param(
        1.0, label="Normal Speed", unit="m/s", min=0.0, max=1000.0, soft_max=20.0, group="Inflow",
        tooltip="Speed of the liquid along each face's outward normal, in metres per second (Surface only); "
                "with the velocity it sets how much liquid flows: face area times speed, per second")
    velocity_x: float = _param(
        0.0, label="Velocity X", unit="m/s", min=-1000.0, max=1000.0, soft_min=-20.0, soft_max=20.0, group="Inflow",
        tooltip="X of the world-space velocity given to the emitted liquid, in metres per second")
    velocity_y: float = _param(
        0.0, label="Velocity Y", unit="m/s", min=-1000.0, max=1000.0, soft_min=-20.0, soft_max=20.0, group="Inflow",
        tooltip="Y of the world-space velocity given to the emitted liquid, in metres per second")
    velocity_z: float = _param(
        0.0, label="Velocity Z", unit="m/s", min=-1000.0, max=1000.0, soft_min=-20.0, soft_max=20.0, group="Inflow",
        tooltip="Z of the world-space velocity given to the emitted liquid, in metres per second")
    emit_start: int = _param(
        1, label="Start Frame", min=-1048574, max=1048574, group="Inflow",
        tooltip="First frame during which this object emits liquid")
    emit_end: int = _param(
        0, label="End Frame", min=-1048574, max=1048574, group="Inflow",
        tooltip="Last frame during which this object emits liquid; 0 emits until the end of the bake")
    spacing_factor: float = _spacing_factor()


def _parameters_of(cls) -> list[Parameter]:
    """Metadata of every field of a settings dataclass, in declaration order."""
    hints = {"str": str, "float": float, "int": int, "bool": bool}
    return [Parameter(name=f.name, kind=hints[f.type] if isinstance(f.type, str) else f.type, default=f.default,
                      **f.metadata) for f in dataclasses.fields(cls)]


def parameters() -> list[Parameter]:
    """Metadata of every setting, in declaration order."""
    return _parameters_of(SimulationSettings)


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
    values = {k: (float(v) if known[k].kind is float and isinstance(v, int) and not isinstance(v, bool) else v)
              for k, v in data.items()}
    try:
        settings = cls(**values)
    except TypeError as exc:
        raise InvalidSettingsError([f"{owner}: {exc}"]) from exc
    problems = _problems_in(settings, owner)
    if problems:
        raise InvalidSettingsError(problems)
    return settings


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
    """Plain dict of the settings (JSON-safe), as stored in a job folder and cache manifest."""
    return dataclasses.asdict(settings)


def settings_hash(settings: SimulationSettings) -> str:
    """SHA-256 of the canonical JSON of the settings."""
    text = json.dumps(to_dict(settings), sort_keys=True, separators=(",", ":"))
    return hashlib.sha256(text.encode("utf-8")).hexdigest()


def _problems_for(p: Parameter, value, owner: str) -> list[str]:
    where = f"{owner}: setting '{p.label}' ({p.name})"
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
        for axis in "xyz":
            lo, hi = getattr(settings, f"kill_box_min_{axis}"), getattr(settings, f"kill_box_max_{axis}")
            if hi <= lo:
                problems.append(f"{owner}: setting 'Kill Box Max {axis.upper()}' (kill_box_max_{axis}) is {hi:g} m, "
                                f"not above Kill Box Min {axis.upper()} ({lo:g} m); the kill box would be empty")
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
