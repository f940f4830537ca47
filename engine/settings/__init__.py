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
bounce, the liquid's viscosity and surface tension, PBF's velocity smoothing and legacy surface pull;
Blender's scene gravity is animatable too. Everything else (particle
spacing, solver, rest density, resolutions, solver controls) is read once at the start of a bake,
and the Blender properties do not offer keyframes for it.

Units are SI. Enum values are strings, never integer codes; each enum is declared once here.
"""

from __future__ import annotations

from .parameters import (
    names,
    Parameter,
)
from .simulation import (
    SOLVERS,
    HYBRID_INTERFACE_MODES,
    HYBRID_PRESSURE_SOLVERS,
    WCSPH_DENSITY_MODES,
    SUPPORTED_SOLVERS,
    MULTI_RESOLUTION_SOLVERS,
    CommonSettings,
    SPHSettings,
    WCSPHSettings,
    PBFSettings,
    HybridSettings,
    RemovalSettings,
    SettingsGroup,
    SETTINGS_GROUPS,
    SimulationSettings,
    COLLIDER_MODES,
    ColliderSettings,
    FluidSettings,
    INFLOW_MODES,
    InflowSettings,
    OutflowSettings,
    MASS_MODES,
    RigidBodySettings,
    rigid_body_parameters,
    rigid_body_from_dict,
    ROLE_SETTINGS,
    parameters,
    object_parameters,
    animatable_names,
    collider_parameters,
    fluid_parameters,
    inflow_parameters,
    validate_collider,
    collider_from_dict,
    validate_object,
    fluid_from_dict,
    inflow_from_dict,
    to_dict,
    settings_hash,
    validate,
    check_supported,
    from_dict,
)
from .whitewater import (
    WhitewaterSettings,
    whitewater_parameters,
    validate_whitewater,
    whitewater_from_dict,
    whitewater_hash,
)
from .surface import (
    SurfaceSettings,
    surface_parameters,
    surface_from_dict,
)
from .live import (
    LiveSettings,
    live_parameters,
    LIVE_CHANGEABLE,
    live_simulation_settings,
    validate_live,
)

__all__ = [
    "names",
    "Parameter",
    "SOLVERS",
    "HYBRID_INTERFACE_MODES",
    "HYBRID_PRESSURE_SOLVERS",
    "WCSPH_DENSITY_MODES",
    "SUPPORTED_SOLVERS",
    "MULTI_RESOLUTION_SOLVERS",
    "CommonSettings",
    "SPHSettings",
    "WCSPHSettings",
    "PBFSettings",
    "HybridSettings",
    "RemovalSettings",
    "SettingsGroup",
    "SETTINGS_GROUPS",
    "SimulationSettings",
    "COLLIDER_MODES",
    "ColliderSettings",
    "FluidSettings",
    "INFLOW_MODES",
    "InflowSettings",
    "OutflowSettings",
    "MASS_MODES",
    "RigidBodySettings",
    "rigid_body_parameters",
    "rigid_body_from_dict",
    "ROLE_SETTINGS",
    "parameters",
    "object_parameters",
    "animatable_names",
    "collider_parameters",
    "fluid_parameters",
    "inflow_parameters",
    "validate_collider",
    "collider_from_dict",
    "validate_object",
    "fluid_from_dict",
    "inflow_from_dict",
    "to_dict",
    "settings_hash",
    "validate",
    "check_supported",
    "from_dict",
    "WhitewaterSettings",
    "whitewater_parameters",
    "validate_whitewater",
    "whitewater_from_dict",
    "whitewater_hash",
    "SurfaceSettings",
    "surface_parameters",
    "surface_from_dict",
    "LiveSettings",
    "live_parameters",
    "LIVE_CHANGEABLE",
    "live_simulation_settings",
    "validate_live",
]
