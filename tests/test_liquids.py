"""Liquid presets: measured values turned into valid engine settings."""

import dataclasses

import numpy as np
import pytest

from engine.settings import liquids
from engine import settings as st
from engine.errors import InvalidSettingsError


@pytest.mark.parametrize("item", liquids.LIQUIDS, ids=lambda i: i.name)
def test_every_preset_gives_valid_settings(item):
    values = liquids.settings_for(item, 0.01)
    assert set(values) == set(liquids.PRESET_SETTINGS)
    settings = dataclasses.replace(st.SimulationSettings(), **values)
    st.validate(settings)  # raises if a value is out of its setting's range
    assert values["rest_density"] == item.density
    # kinematic = dynamic / density (relative rounding of one division)
    np.testing.assert_allclose(values["viscosity"], item.dynamic_viscosity / item.density, rtol=1e-15, atol=0)


def test_thicker_liquids_get_more_viscosity_in_both_solvers():
    by_mu = sorted(liquids.LIQUIDS, key=lambda i: i.dynamic_viscosity)
    assert [i.name for i in by_mu] == ["WATER", "MILK", "OIL", "CHOCOLATE", "HONEY"]
    kinematic = [liquids.settings_for(i)["viscosity"] for i in by_mu]
    xsph = [liquids.settings_for(i)["pbf_xsph_viscosity"] for i in by_mu]
    assert kinematic == sorted(kinematic) and xsph == sorted(xsph)


def test_surface_tension_is_the_inverse_bond_number_at_the_spacing():
    water = liquids.liquid("WATER")
    coarse = liquids.settings_for(water, 0.02)["pbf_surface_tension"]
    fine = liquids.settings_for(water, 0.01)["pbf_surface_tension"]
    np.testing.assert_allclose(fine, 4.0 * coarse, rtol=1e-12, atol=0)  # kappa ~ 1 / dx^2
    np.testing.assert_allclose(coarse, 0.0728 / (998.2 * 9.81 * 0.02 ** 2), rtol=1e-12, atol=0)
    # at a spacing far below the capillary length the pull is clamped to the setting's maximum
    limit = next(p.max for p in st.parameters() if p.name == "pbf_surface_tension")
    assert liquids.settings_for(water, 0.0005)["pbf_surface_tension"] == limit


def test_unknown_preset_and_bad_spacing_are_refused():
    with pytest.raises(InvalidSettingsError, match="Unknown liquid preset 'LAVA'.*WATER"):
        liquids.liquid("LAVA")
    with pytest.raises(InvalidSettingsError, match="must be positive"):
        liquids.settings_for(liquids.liquid("WATER"), 0.0)
