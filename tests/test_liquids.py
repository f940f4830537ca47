"""Liquid presets: measured values turned into valid engine settings, in physical units."""

import dataclasses

import numpy as np
import pytest

from engine.settings import liquids
from engine import settings as st
from engine.errors import InvalidSettingsError
from engine.solvers.liquid_forces import LiquidTable


@pytest.mark.parametrize("item", liquids.LIQUIDS, ids=lambda i: i.name)
def test_every_preset_gives_valid_settings_in_physical_units(item):
    values = liquids.settings_for(item)
    assert set(values) == set(liquids.PRESET_SETTINGS)
    settings = dataclasses.replace(st.SimulationSettings(), **values)
    st.validate(settings)  # raises if a value is out of its setting's range
    # the measured values as they are: no spacing, no unit conversion (exact copies)
    assert values["rest_density"] == item.density and values["dynamic_viscosity"] == item.dynamic_viscosity
    assert values["surface_tension"] == item.surface_tension and values["pbf_surface_tension"] == 0.0


def test_presets_are_ordered_as_the_measured_viscosities():
    by_mu = sorted(liquids.LIQUIDS, key=lambda i: i.dynamic_viscosity)
    assert [i.name for i in by_mu] == ["WATER", "MILK", "OIL", "CHOCOLATE", "HONEY", "LAVA"]


def test_lava_stiffens_as_it_cools():
    """Giordano, Russell & Dingwell 2008, eq. 1: log10 mu = -4.55 + B / (T - C), T in kelvin, the lava
    cooling toward the air with its age; the per-particle table gives the same law."""
    lava = liquids.liquid("LAVA")
    age = np.array([0.0, 2.0, 10.0, 600.0])
    kelvin = 20.0 + 1130.0 * np.exp(-age / 60.0) + 273.15
    want = np.minimum(10.0 ** (-4.55 + 6000.0 / (kelvin - 560.0)), 1.0e6)
    want[kelvin < 561.0] = 1.0e6  # cooled below the law's C: solid (the setting's maximum)
    # rtol: float64 rounding of exp and pow
    np.testing.assert_allclose(lava.viscosity_at(age), want, rtol=1e-12, atol=0)
    assert 100.0 < lava.dynamic_viscosity < 1000.0  # basaltic flows at eruption: 10^2-10^3 Pa s
    assert np.all(np.diff(lava.viscosity_at(age)) > 0.0)
    table = LiquidTable.of([liquids.liquid("WATER"), lava], ("Water", "Lava"))
    mu = table.particle_viscosity(np.array([0, 1, 1, 1, 1], dtype=np.uint8),
                                  np.array([5.0, *age], dtype=np.float32))
    # rtol: the table works in float64 and returns float32 (6e-8), ages in float32
    np.testing.assert_allclose(mu, [1.002e-3, *want], rtol=1e-6, atol=0)


def test_unknown_preset_is_refused():
    with pytest.raises(InvalidSettingsError, match="Unknown liquid preset 'SLIME'.*WATER"):
        liquids.liquid("SLIME")
