"""The solver contract of engine/solvers/__init__.py: what the frame loop and checkpoints may use."""

import numpy as np
import pytest

from engine.io import checkpoint
from engine import assemble
from engine.errors import CacheFormatError
from engine.settings import SimulationSettings
from engine.solvers import Solver, SolverState, SpeedLimit
from helpers import column_scene


def _solver(name):
    scene = column_scene(water=(0.06, 0.06, 0.1), frames=(1, 3))
    settings = SimulationSettings(solver=name, particle_spacing=0.02)
    particles, level = assemble.fill_fluids(scene, settings)
    return assemble._make_solver(scene, settings, particles, None, level)


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
