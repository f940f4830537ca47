"""Settings: one typed description; validation names the setting; strict round trips."""

import dataclasses
import json

import numpy as np
import pytest

from engine import settings as st
from engine.errors import InvalidSettingsError


def test_defaults_validate_and_every_parameter_is_documented():
    st.validate(st.SimulationSettings())
    for p in st.parameters():
        assert p.label and len(p.tooltip) > 20, p.name
        if p.kind in (int, float):
            values = p.default if p.size else (p.default,)
            assert p.min is not None and p.max is not None, p.name
            assert all(p.min <= v <= p.max for v in values), p.name
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
    s = st.SimulationSettings(particle_spacing=0.01, dynamic_viscosity=0.5)
    d = json.loads(json.dumps(st.to_dict(s)))
    assert st.from_dict(d) == s
    assert st.settings_hash(st.from_dict(d)) == st.settings_hash(s)
    assert st.settings_hash(s) != st.settings_hash(st.SimulationSettings())


def test_settings_of_earlier_versions_load_with_their_meaning():
    """The XSPH smoothing was renamed (same meaning): it loads under its new name; the kinematic viscosity
    (m^2/s, named ``viscosity``) of earlier versions becomes the dynamic one (Pa s, ``dynamic_viscosity``)
    through the rest density, or the default rest density when the dict has none; the legacy PBF surface
    pull keeps its name and meaning. A dict of this version loads as it is."""
    s = st.from_dict({"pbf_xsph_viscosity": 0.5, "viscosity": 0.005, "rest_density": 1400.0,
                      "pbf_surface_tension": 0.3})
    assert s.pbf_velocity_smoothing == 0.5 and s.pbf_surface_tension == 0.3
    np.testing.assert_allclose(s.dynamic_viscosity, 7.0, rtol=1e-12, atol=0)  # mu = rho nu
    np.testing.assert_allclose(st.from_dict({"viscosity": 1e-6}).dynamic_viscosity, 1e-3, rtol=1e-12, atol=0)
    now = st.SimulationSettings(dynamic_viscosity=0.5, rest_density=1400.0)
    assert st.from_dict(st.to_dict(now)) == now
    with pytest.raises(InvalidSettingsError, match="unknown setting 'viscosity'"):  # never both
        st.from_dict({"viscosity": 0.5, "dynamic_viscosity": 0.5})


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


def test_groups_flatten_into_the_settings_and_come_back_whole():
    """Each group declares its settings once; SimulationSettings holds them with the group's prefix,
    with the same defaults, and gives each group back as a dataclass."""
    flat = {p.name: p for p in st.parameters()}
    seen = []
    for group in st.SETTINGS_GROUPS:
        for f in dataclasses.fields(group.cls):
            p = flat[group.prefix + f.name]
            assert p.default == f.default and p.solvers == group.solvers, p.name
            seen.append(p.name)
    assert seen == list(flat), "every flat setting comes from exactly one group, in the groups' order"
    s = st.SimulationSettings(solver="HYBRID", hybrid_sor_omega=1.5, pbf_iterations=7, dynamic_viscosity=0.002)
    assert s.hybrid == st.HybridSettings(sor_omega=1.5)
    assert s.pbf.iterations == 7 and s.common.dynamic_viscosity == 0.002 and s.wcsph == st.WCSPHSettings()
    assert st.SimulationSettings().hybrid == st.HybridSettings()


def test_each_enum_is_declared_once():
    assert st.SUPPORTED_SOLVERS == st.names(st.SOLVERS) == ("WCSPH", "PBF", "HYBRID")
    by_name = {p.name: p for p in st.parameters()}
    assert by_name["solver"].items is st.SOLVERS
    assert by_name["hybrid_pressure_solver"].items is st.HYBRID_PRESSURE_SOLVERS
    assert by_name["wcsph_density"].items is st.WCSPH_DENSITY_MODES


def test_the_solvers_that_read_each_setting():
    """The four SPH settings act under WCSPH and Hybrid, never under PBF (the default solver); the liquid's
    density, viscosity and surface tension under every solver."""
    by_name = {p.name: p for p in st.parameters()}
    for name in ("smoothing_length_factor", "artificial_viscosity", "sound_speed", "cfl_number"):
        assert not by_name[name].is_used_by("PBF") and by_name[name].is_used_by("WCSPH"), name
        assert by_name[name].is_used_by("HYBRID"), name
    assert by_name["wcsph_density"].solvers == ("WCSPH",)
    assert all(p.solvers == ("PBF",) for p in st.parameters() if p.name.startswith("pbf_"))
    assert all(p.solvers == ("HYBRID",) for p in st.parameters() if p.name.startswith("hybrid_"))
    for name in ("particle_spacing", "rest_density", "dynamic_viscosity", "surface_tension", "particle_lifetime",
                 "use_kill_box", "collider_cell_size"):
        assert by_name[name].solvers == (), name
    hybrid = st.SimulationSettings(solver="HYBRID")
    assert by_name["hybrid_interface_depth"].acts_with(hybrid)
    assert not by_name["hybrid_interface_height"].acts_with(hybrid)
    assert by_name["hybrid_interface_height"].acts_with(dataclasses.replace(hybrid, hybrid_interface_mode="FIXED"))
    assert not by_name["hybrid_interface_depth"].acts_with(st.SimulationSettings(solver="PBF"))
    assert not by_name["kill_box_min"].acts_with(st.SimulationSettings())
    assert by_name["kill_box_min"].acts_with(st.SimulationSettings(use_kill_box=True))


def test_animatable_settings_are_those_read_every_frame():
    """What the artist may key: the liquid's viscosity and surface tension, collider friction and bounce,
    an inflow's rate and velocity. What is fixed for a bake is not animatable."""
    names = st.animatable_names()
    assert set(names["scene"]) == {"dynamic_viscosity", "surface_tension", "pbf_velocity_smoothing",
                                   "pbf_surface_tension"}
    assert {"friction", "bounce", "normal_speed", "velocity"} <= set(names["object"])
    fixed = {p.name for p in st.parameters() + st.object_parameters() if not p.animatable}
    assert {"particle_spacing", "solver", "rest_density", "collider_mode", "inflow_mode", "spacing_factor",
            "smoothing_length_factor", "hybrid_cell_factor"} <= fixed


def test_object_settings_know_their_roles():
    roles = {p.name: p.roles for p in st.object_parameters()}
    # a rigid body is a collider to the liquid: its liquid friction and bounce are the collider's settings
    assert roles["friction"] == ("COLLIDER", "RIGID_BODY") and roles["velocity"] == ("INFLOW",)
    assert roles["density"] == ("RIGID_BODY",) and roles["use_dynamic"] == ("RIGID_BODY",)
    assert roles["spacing_factor"] == ("FLUID", "INFLOW")
    # the on/off switch of inflows and outflows is one setting; Use Object Motion belongs to Fluid objects
    assert roles["use_flow"] == ("INFLOW", "OUTFLOW") and roles["use_object_motion"] == ("FLUID",)
    assert st.object_parameters()[[p.name for p in st.object_parameters()].index("use_flow")].animatable
    # each setting's heading: its own group, else its class's
    groups = {p.name: p.group for p in st.parameters()}
    assert groups["pbf_iterations"] == "PBF" and groups["collider_cell_size"] == "Colliders"
    assert groups["dynamic_viscosity"] == "Liquid" and groups["solver"] == "Simulation"
    assert {p.group for p in st.whitewater_parameters()} == {"Whitewater"}
    normal_speed = next(p for p in st.object_parameters() if p.name == "normal_speed")
    assert normal_speed.acts_with(st.InflowSettings()) and not normal_speed.acts_with(
        st.InflowSettings(inflow_mode="VOLUME"))


def test_vector_settings_validate_per_axis_and_round_trip():
    s = st.SimulationSettings(use_kill_box=True, kill_box_min=(-1.0, -2.0, 0.0), kill_box_max=(1.0, 2.0, 3.0))
    st.validate(s)
    d = json.loads(json.dumps(st.to_dict(s)))
    assert d["kill_box_min"] == [-1.0, -2.0, 0.0]
    assert st.from_dict(d) == s
    with pytest.raises(InvalidSettingsError, match=r"Kill Box Max Y' \(kill_box_max\) is -3 m, not above"):
        st.validate(dataclasses.replace(s, kill_box_max=(1.0, -3.0, 3.0)))
    with pytest.raises(InvalidSettingsError, match=r"'Velocity Z' \(velocity\) is 2000 m/s, above the maximum"):
        st.inflow_from_dict({"velocity": [0, 0, 2000]}, "Inflow 'Tap'")
    with pytest.raises(InvalidSettingsError, match=r"must be 3 numbers"):
        st.inflow_from_dict({"velocity": [0, 1]}, "Inflow 'Tap'")
    assert st.inflow_from_dict({"velocity": [0, 0, 1]}, "Inflow 'Tap'").velocity == (0.0, 0.0, 1.0)
