"""The solver contract of engine/solvers/__init__.py: what the frame loop and checkpoints may use."""

import os

import numpy as np
import pytest

from engine.io import checkpoint
from engine import assemble
from engine.errors import CacheFormatError
from engine.settings import SimulationSettings
from engine.solvers import SOLVER_TYPES, Solver, SolverState, SpeedLimit, solver_type
from helpers import column_scene


def _solver(name):
    scene = column_scene(water=(0.06, 0.06, 0.1), frames=(1, 3))
    settings = SimulationSettings(solver=name, particle_spacing=0.02)
    particles, level = assemble.fill_fluids(scene, settings)
    return assemble.make_solver(scene, settings, particles, None, level)


@pytest.mark.parametrize("name", ["WCSPH", "PBF", "HYBRID"])
def test_every_solver_keeps_the_contract_and_its_state_continues_bit_identically(tmp_path, name):
    s = _solver(name)
    assert isinstance(s, Solver) and s.name == name
    assert isinstance(s.save_state(), SolverState)
    limit = s.speed_limit()
    assert isinstance(limit, SpeedLimit) and limit.speed > 0.0 and limit.reason and limit.advice
    assert s.nonfinite_advice()
    for _ in range(6):
        s.step(s.stable_dt())
    s.flush()
    checkpoint.save(str(tmp_path), 2, s)
    resumed = checkpoint.restore(s, checkpoint.load(str(tmp_path), 2))
    assert resumed is not s and resumed.time == s.time
    for _ in range(6):
        dt = s.stable_dt()
        assert resumed.stable_dt() == dt
        s.step(dt)
        resumed.step(dt)
    s.flush()
    resumed.flush()
    # the same substeps on the same state in deterministic kernels: bit-identical
    for channel in ("x", "v", "rho", "p", "id"):
        np.testing.assert_array_equal(getattr(resumed.particles, channel), getattr(s.particles, channel),
                                      err_msg=f"{name} {channel}")


def test_a_checkpoint_without_the_solver_state_is_refused_with_a_clear_message(tmp_path):
    s = _solver("HYBRID")
    s.step(s.stable_dt())
    checkpoint.save(str(tmp_path), 2, s)
    state = checkpoint.load(str(tmp_path), 2)
    del state["solver_marker_dt"]
    with pytest.raises(CacheFormatError, match="lacks the HYBRID solver's state"):
        checkpoint.restore(s, state)


@pytest.mark.parametrize("name", sorted(SOLVER_TYPES))
def test_each_solver_builds_itself_and_takes_the_animated_settings_it_reads(name):
    """The contract's construction and animation: every registered solver comes from the settings through
    the driver's one path, and animated values reach exactly the parameters the settings say it reads."""
    s = _solver(name)
    assert type(s) is solver_type(name) and s.name == name
    settings = SimulationSettings(solver=name, particle_spacing=0.02)
    assert solver_type(name).kernel_support(settings, 0.02) == pytest.approx(assemble.kernel_support(settings))
    g = np.array([0.5, -0.25, -4.0])
    s.set_animated({"gravity": g, "dynamic_viscosity": 0.25, "pbf_velocity_smoothing": 0.5, "surface_tension": 0.0125,
                    "pbf_surface_tension": 0.75, "a_setting_no_solver_reads": 1.0})
    s.set_box_response(0, friction=0.3, bounce=0.2)
    walls = s.model.sph if name == "HYBRID" else s.model
    np.testing.assert_array_equal(walls.gravity, g)
    assert walls.box_friction[0] == 0.3 and walls.box_bounce[0] == 0.2
    if name == "PBF":
        assert s.model.xsph == 0.5 and s.model.kappa == 0.75
    else:  # the viscosity in Pa s: the SPH particles' and the grid's kinematic one is mu / rho0
        nu = 0.25 / walls.rho0
        assert walls.nu == pytest.approx(nu) and (name != "HYBRID" or s.model.nu == pytest.approx(nu))
    if name != "HYBRID":  # the scene's liquid, row 0 of the liquid table (the hybrid keeps explicit viscosity)
        assert (s.model.liquid.viscosity[0], s.model.liquid.surface_tension[0]) == (0.25, 0.0125)
    # the solver keeps stepping with the new model
    s.step(s.stable_dt())
    assert np.all(np.isfinite(s.particles.x))


def test_the_frame_loop_and_the_animation_branch_on_no_solver_name():
    """Construction and animated settings go through the contract: the modules that drive a solver name
    none (a new solver needs an entry in SOLVER_TYPES, not a branch in each of them)."""
    root = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
    for path in ("engine/driver.py", "engine/assemble.py", "engine/scene/animation.py", "engine/live/session.py",
                 "engine/io/checkpoint.py"):
        with open(os.path.join(root, path), encoding="utf-8") as fh:
            text = fh.read()
        for name in SOLVER_TYPES:
            assert f'"{name}"' not in text and f"'{name}'" not in text, f"{path} names the {name} solver"
