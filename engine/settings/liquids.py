"""Liquid presets: measured material properties of common liquids, and the settings they give.

Each :class:`Liquid` holds values measured at room temperature (melted chocolate at working
temperature, lava at eruption temperature) with the source of each. :func:`settings_for` turns one
into engine settings, all in physical units: ``rest_density`` (kg/m^3), ``dynamic_viscosity`` (Pa s,
solved implicitly: :mod:`engine.solvers.viscosity_weiler2018`) and ``surface_tension`` (N/m,
:mod:`engine.solvers.surface_tension_akinci2013`); ``pbf_velocity_smoothing`` (PBF's XSPH smoothing,
which has no physical unit) is set to the small value that calms particle noise, the same for every
liquid. None of them depends on the particle spacing.

Lava's viscosity depends on its temperature (:meth:`Liquid.viscosity_at`), the Vogel-Fulcher-Tammann
law of silicate melts, log10 mu = A + B / (T - C) with T in kelvin (Giordano, Russell & Dingwell 2008,
"Viscosity of magmatic liquids: a model", Earth Planet. Sci. Lett. 271, eq. 1, A = -4.55 for every
melt); the liquid cools with its age toward the air's temperature (Newton's law of cooling, time
constant ``cooling_time``), so lava stiffens as it flows.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from ..errors import InvalidSettingsError
from . import parameters

#: A of the Vogel-Fulcher-Tammann law of silicate melts (Giordano, Russell & Dingwell 2008, eq. 1).
VFT_A = -4.55

#: Kelvin at 0 degrees Celsius.
KELVIN = 273.15


@dataclass(frozen=True)
class Liquid:
    """Material properties of one liquid (SI units; temperatures in degrees Celsius).

    ``vft_b`` and ``vft_c`` (kelvin) are the B and C of a temperature-dependent viscosity (0: the
    viscosity is ``dynamic_viscosity`` whatever the temperature); ``temperature`` is the liquid's
    temperature as it leaves its object and ``cooling_time`` (s) how fast it cools toward
    ``ambient`` (0: it keeps its temperature).
    """

    name: str                 # identifier, upper case: 'WATER'
    label: str
    density: float            # kg/m^3
    dynamic_viscosity: float  # Pa s (at ``temperature``)
    surface_tension: float    # N/m
    description: str
    temperature: float = 20.0   # C
    vft_b: float = 0.0          # K
    vft_c: float = 0.0          # K
    cooling_time: float = 0.0   # s
    ambient: float = 20.0       # C

    def temperature_at(self, age):
        """Temperature (C) after ``age`` seconds (scalar or array): Newton's cooling toward ``ambient``."""
        if self.cooling_time <= 0.0:
            return self.temperature + 0.0 * np.asarray(age, dtype=np.float64)
        return self.ambient + (self.temperature - self.ambient) * np.exp(-np.asarray(age, dtype=np.float64)
                                                                        / self.cooling_time)

    def viscosity_at(self, age):
        """Dynamic viscosity (Pa s) after ``age`` seconds: constant, or the VFT law at the liquid's
        temperature then, at most :data:`MAX_VISCOSITY`."""
        if self.vft_b <= 0.0:
            return self.dynamic_viscosity + 0.0 * np.asarray(age, dtype=np.float64)
        kelvin = np.maximum(self.temperature_at(age) + KELVIN, self.vft_c + 1.0)
        return 10.0 ** np.minimum(VFT_A + self.vft_b / (kelvin - self.vft_c), np.log10(MAX_VISCOSITY))


#: Most viscosity a temperature law gives, Pa s (the Viscosity setting's maximum: solid rock, to the eye).
MAX_VISCOSITY = 1.0e6


LIQUIDS = (
    # Water at 20 C: density 998.2 kg/m^3, viscosity 1.002 mPa s, surface tension 72.8 mN/m
    # (CRC Handbook of Chemistry and Physics, 97th ed., 2016, sections 6 "Properties of water"
    # and "Surface tension of common liquids").
    Liquid("WATER", "Water", 998.2, 1.002e-3, 0.0728,
           "Water at 20 °C: 998 kg/m³, 1 mPa·s, 73 mN/m"),
    # Whole milk at 20 C: density 1030 kg/m^3, viscosity about 2.0 mPa s, surface tension about
    # 47 mN/m (Walstra, Wouters & Geurts, Dairy Science and Technology, 2nd ed., 2006, ch. 4,
    # Table 4.2 "Physical properties of milk").
    Liquid("MILK", "Milk", 1030.0, 2.0e-3, 0.047,
           "Whole milk at 20 °C: 1030 kg/m³, 2 mPa·s, 47 mN/m"),
    # Olive oil at 20 C: density 912 kg/m^3, viscosity 84 mPa s, surface tension 32 mN/m
    # (Sahasrabudhe et al., "Density, viscosity, and surface tension of five vegetable oils at
    # elevated temperatures", Int. J. Food Properties 20(2), 2017, extrapolated to 20 C; the CRC
    # Handbook gives 84 mPa s for olive oil at 20 C).
    Liquid("OIL", "Oil", 912.0, 0.084, 0.032,
           "Olive oil at 20 °C: 912 kg/m³, 84 mPa·s, 32 mN/m"),
    # Melted milk chocolate at 40 C: density about 1270 kg/m^3, Casson plastic viscosity 2-5 Pa s
    # (Beckett, Industrial Chocolate Manufacture and Use, 4th ed., 2009, ch. 10 "Flow properties
    # of liquid chocolate"; 3 Pa s taken here); surface tension of cocoa butter about 35 mN/m
    # (the continuous phase; Beckett, ch. 10). Chocolate's yield stress is not modelled.
    Liquid("CHOCOLATE", "Chocolate", 1270.0, 3.0, 0.035,
           "Melted chocolate at 40 °C: 1270 kg/m³, 3 Pa·s, 35 mN/m"),
    # Honey at 20 C with 17 % water: density 1420 kg/m^3 (National Honey Board, "Honey: a reference
    # guide to nature's sweetener"), viscosity about 10 Pa s (Yanniotis, Skaltsi & Karaburnioti,
    # "Effect of moisture content on the viscosity of honey at different temperatures", J. Food
    # Engineering 72, 2006, Fig. 2), surface tension about 50 mN/m (Lazaridou et al., J. Food
    # Engineering 64, 2004, "Thermophysical properties of chestnut, fir and thyme honeys").
    Liquid("HONEY", "Honey", 1420.0, 10.0, 0.050,
           "Honey at 20 °C: 1420 kg/m³, 10 Pa·s, 50 mN/m"),
    # Basaltic lava at 1150 C: melt density about 2650 kg/m^3 and surface tension about 0.35 N/m
    # (Murase & McBirney, "Properties of some common igneous rocks and their melts at high
    # temperatures", Geol. Soc. America Bulletin 84, 1973, basalt melts near 1200 C). Viscosity by the
    # VFT law of Giordano, Russell & Dingwell 2008 (A = -4.55) with B = 6000 K and C = 560 K, picked in
    # the range their model gives for basalts: 250 Pa s at 1150 C (within the 10^2-10^3 Pa s of basaltic
    # flows at eruption), 1.7e5 Pa s at 900 C. The cooling time (60 s: 500 Pa s after 2 s, 14,000 Pa s
    # after 10 s) is an artist's control, not a measurement: a flow's skin cools in seconds, its core
    # over hours.
    Liquid("LAVA", "Lava", 2650.0, float(10.0 ** (VFT_A + 6000.0 / (1150.0 + KELVIN - 560.0))), 0.35,
           "Basaltic lava at 1150 °C: 2650 kg/m³, 250 Pa·s stiffening as it cools, 350 mN/m",
           temperature=1150.0, vft_b=6000.0, vft_c=560.0, cooling_time=60.0, ambient=20.0),
)

#: Engine settings a preset sets; every other setting is left as it is.
PRESET_SETTINGS = ("rest_density", "dynamic_viscosity", "surface_tension", "pbf_velocity_smoothing",
                   "pbf_surface_tension")

#: PBF velocity smoothing every preset sets: enough to calm particle noise, no visible thickening.
CALM_SMOOTHING = 0.02


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


def settings_for(item: Liquid) -> dict:
    """Engine setting values (SI) for ``item``, keyed by setting name (the names in
    :data:`PRESET_SETTINGS`, each within its setting's limits)."""
    values = {
        "rest_density": item.density,
        "dynamic_viscosity": item.dynamic_viscosity,
        "surface_tension": item.surface_tension,
        "pbf_velocity_smoothing": CALM_SMOOTHING,
        "pbf_surface_tension": 0.0,  # the legacy pull off: the surface tension is the liquid's, in N/m
    }
    return {name: _clamp(name, value) for name, value in values.items()}
