"""Settings: one typed description; validation names the setting; strict round trips."""

import dataclasses
import json

import pytest

from engine import settings as st
from engine.errors import InvalidSettingsError


def test_defaults_validate_and_every_parameter_is_documented():
    st.validate(st.SimulationSettings())
    for p in st.parameters():
        assert p.label and len(p.tooltip) > 20, p.name
        if p.kind in (int, float):
            assert p.min is not None and p.max is not None and p.min <= p.default <= p.max, p.name
        if p.kind is str:
            assert p.default in [i[0] for i in p.items]


@pytest.mark.parametrize("name,value,fragment", [
    ("particle_spacing", 0.0, "below the minimum"),
    ("particle_spacing", 50.0, "above the maximum"),
    ("rest_density", -3.0, "below the minimum"),
    ("cfl_number", float("nan"), "finite"),
    ("max_substeps", 2.5, "whole number"),
    ("solver", "FLIP", "choose one of"),
    ("smoothing_length_factor", "big", "must be a number"),
])
def test_out_of_range_values_are_rejected_by_name(name, value, fragment):
    bad = dataclasses.replace(st.SimulationSettings(), **{name: value})
    with pytest.raises(InvalidSettingsError) as info:
        st.validate(bad, owner="Scene 'Shot 12'")
    msg = str(info.value)
    assert name in msg and fragment in msg and "Shot 12" in msg


def test_all_problems_are_reported_at_once():
    bad = st.SimulationSettings(particle_spacing=-1.0, rest_density=0.0, cfl_number=5.0)
    with pytest.raises(InvalidSettingsError) as info:
        st.validate(bad)
    assert len(info.value.problems) == 3


def test_dict_round_trip_and_hash():
    s = st.SimulationSettings(particle_spacing=0.01, viscosity=0.5)
    d = json.loads(json.dumps(st.to_dict(s)))
    assert st.from_dict(d) == s
    assert st.settings_hash(st.from_dict(d)) == st.settings_hash(s)
    assert st.settings_hash(s) != st.settings_hash(st.SimulationSettings())


def test_from_dict_is_strict():
    with pytest.raises(InvalidSettingsError, match="unknown setting 'particle_spacin'"):
        st.from_dict({"particle_spacin": 0.1})
    with pytest.raises(InvalidSettingsError, match="particle_spacing"):
        st.from_dict({"particle_spacing": 0.0})
    assert st.from_dict({"max_substeps": 10}).max_substeps == 10
    assert st.from_dict({"particle_spacing": 1}).particle_spacing == 1.0


def test_every_solver_is_supported_and_an_unknown_one_is_refused():
    for solver in ("WCSPH", "PBF", "HYBRID"):
        st.check_supported(st.SimulationSettings(solver=solver))
    bad = dataclasses.replace(st.SimulationSettings(), solver="FLIP")
    with pytest.raises(InvalidSettingsError, match="solver 'FLIP' is not available"):
        st.check_supported(bad)


def test_hybrid_settings_have_units_ranges_and_choices():
    by_name = {p.name: p for p in st.parameters()}
    assert by_name["hybrid_interface_depth"].unit == "m" and by_name["hybrid_interface_height"].unit == "m"
    assert {i[0] for i in by_name["hybrid_pressure_solver"].items} == {"SOR", "RBSOR"}
    assert {i[0] for i in by_name["hybrid_interface_mode"].items} == {"AUTO", "FIXED"}
    with pytest.raises(InvalidSettingsError, match="hybrid_sor_omega"):
        st.validate(st.SimulationSettings(hybrid_sor_omega=2.5))
