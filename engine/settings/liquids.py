"""Liquid presets: measured material properties of common liquids, and the settings they give.

Each :class:`Liquid` holds values measured at room temperature (melted chocolate at working
temperature) with the source of each. :func:`settings_for` turns one into engine settings:

* ``rest_density`` is the density;
* ``viscosity`` (kinematic, m^2/s) is the dynamic viscosity divided by the density;
* ``pbf_surface_tension`` (kappa, the surface pull as a multiple of gravity, see
  :mod:`engine.solvers.pbf`) is the inverse Bond number at the particle spacing,
  sigma / (rho g dx^2): the capillary pressure sigma / dx across one particle layer of mass
  rho dx per unit area, against that layer's weight. It therefore depends on the particle
  spacing: water at 2.5 cm spacing gets 0.012 (surface tension is negligible at that scale), at
  2 mm it gets 1.8. Values above the setting's maximum are clamped to it;
* ``pbf_xsph_viscosity`` is PBF's velocity smoothing, which has no physical unit; each liquid
  carries a value on the scale the setting's tooltip gives (0.01-0.05 for water, about 1 for oil,
  5-20 for paste-like liquids), ordered as the measured viscosities are.
"""

from __future__ import annotations

from dataclasses import dataclass

from ..errors import InvalidSettingsError
from . import SimulationSettings, parameters

#: Standard gravity, m/s^2, the reference of the PBF surface-tension coefficient.
G0 = 9.81


@dataclass(frozen=True)
class Liquid:
    """Material properties of one liquid (SI units)."""

    name: str                 # identifier, upper case: 'WATER'
    label: str
    density: float            # kg/m^3
    dynamic_viscosity: float  # Pa s
    surface_tension: float    # N/m
    pbf_viscosity: float      # XSPH coefficient for the PBF solver (no unit, see the module docstring)
    description: str


LIQUIDS = (
    # Water at 20 C: density 998.2 kg/m^3, viscosity 1.002 mPa s, surface tension 72.8 mN/m
    # (CRC Handbook of Chemistry and Physics, 97th ed., 2016, sections 6 "Properties of water"
    # and "Surface tension of common liquids").
    Liquid("WATER", "Water", 998.2, 1.002e-3, 0.0728, 0.02,
           "Water at 20 °C: 998 kg/m³, 1 mPa·s, 73 mN/m"),
    # Whole milk at 20 C: density 1030 kg/m^3, viscosity about 2.0 mPa s, surface tension about
    # 47 mN/m (Walstra, Wouters & Geurts, Dairy Science and Technology, 2nd ed., 2006, ch. 4,
    # Table 4.2 "Physical properties of milk").
    Liquid("MILK", "Milk", 1030.0, 2.0e-3, 0.047, 0.04,
           "Whole milk at 20 °C: 1030 kg/m³, 2 mPa·s, 47 mN/m"),
    # Olive oil at 20 C: density 912 kg/m^3, viscosity 84 mPa s, surface tension 32 mN/m
    # (Sahasrabudhe et al., "Density, viscosity, and surface tension of five vegetable oils at
    # elevated temperatures", Int. J. Food Properties 20(2), 2017, extrapolated to 20 C; the CRC
    # Handbook gives 84 mPa s for olive oil at 20 C).
    Liquid("OIL", "Oil", 912.0, 0.084, 0.032, 1.0,
           "Olive oil at 20 °C: 912 kg/m³, 84 mPa·s, 32 mN/m"),
    # Melted milk chocolate at 40 C: density about 1270 kg/m^3, Casson plastic viscosity 2-5 Pa s
    # (Beckett, Industrial Chocolate Manufacture and Use, 4th ed., 2009, ch. 10 "Flow properties
    # of liquid chocolate"; 3 Pa s taken here); surface tension of cocoa butter about 35 mN/m
    # (the continuous phase; Beckett, ch. 10). Chocolate's yield stress is not modelled.
    Liquid("CHOCOLATE", "Chocolate", 1270.0, 3.0, 0.035, 5.0,
           "Melted chocolate at 40 °C: 1270 kg/m³, 3 Pa·s, 35 mN/m"),
    # Honey at 20 C with 17 % water: density 1420 kg/m^3 (National Honey Board, "Honey: a reference
    # guide to nature's sweetener"), viscosity about 10 Pa s (Yanniotis, Skaltsi & Karaburnioti,
    # "Effect of moisture content on the viscosity of honey at different temperatures", J. Food
    # Engineering 72, 2006, Fig. 2), surface tension about 50 mN/m (Lazaridou et al., J. Food
    # Engineering 64, 2004, "Thermophysical properties of chestnut, fir and thyme honeys").
    Liquid("HONEY", "Honey", 1420.0, 10.0, 0.050, 10.0,
           "Honey at 20 °C: 1420 kg/m³, 10 Pa·s, 50 mN/m"),
)

#: Engine settings a preset sets; every other setting is left as it is.
PRESET_SETTINGS = ("rest_density", "viscosity", "pbf_xsph_viscosity", "pbf_surface_tension")


def liquid(name: str) -> Liquid:
    """The liquid called ``name`` ('WATER', 'HONEY', ...)."""
    for item in LIQUIDS:
        if item.name == name:
            return item
    raise InvalidSettingsError([f"Unknown liquid preset '{name}'; choose one of "
                                f"{', '.join(i.name for i in LIQUIDS)}"])


def _clamp(name: str, value: float) -> float:
    p = next(p for p in parameters() if p.name == name)
    return min(max(value, p.min), p.max)


def settings_for(item: Liquid, particle_spacing: float = SimulationSettings.particle_spacing) -> dict:
    """Engine setting values (SI) for ``item`` at ``particle_spacing`` (m), keyed by setting name.

    Returns
    -------
    dict
        The names in :data:`PRESET_SETTINGS`, each within its setting's limits.
    """
    if not particle_spacing > 0.0:
        raise InvalidSettingsError([f"The particle spacing must be positive to apply a liquid preset, "
                                    f"got {particle_spacing!r}"])
    kappa = item.surface_tension / (item.density * G0 * particle_spacing ** 2)
    values = {
        "rest_density": item.density,
        "viscosity": item.dynamic_viscosity / item.density,
        "pbf_xsph_viscosity": item.pbf_viscosity,
        "pbf_surface_tension": kappa,
    }
    return {name: _clamp(name, value) for name, value in values.items()}
