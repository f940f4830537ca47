"""The frame loop: divergence caught at the substep it happens, frames before it kept; determinism."""

import numpy as np
import pytest

from engine import driver
from engine.io.cache import CacheReader
from engine.errors import SimulationDivergedError
from engine.scene import MeshCollider, SceneDescription
from engine.settings import ColliderSettings, SimulationSettings
from engine.solvers import pbf
from helpers import column_scene, open_cup


def test_divergence_stops_at_the_substep_and_keeps_earlier_frames(tmp_path, monkeypatch):
    """A NaN injected in the middle of frame 3 stops the bake right after that substep."""
    calls = {"n": 0, "after_nan": 0, "poisoned": False}
    real_step = pbf.PBFSolver.step

    def step(self, dt):
        real_step(self, dt)
        calls["n"] += 1
        if calls["poisoned"]:
            calls["after_nan"] += 1
        # frame 2 takes 21 substeps of at most 2 ms at 24 fps; poison the 5th substep of frame 3
        if calls["n"] == 26:
            self.particles.v[0, 2] = np.nan
            calls["poisoned"] = True

    monkeypatch.setattr(pbf.PBFSolver, "step", step)
    scene = column_scene(frames=(1, 6))
    out = str(tmp_path / "cache")
    with pytest.raises(SimulationDivergedError, match="at frame 3 "):
        driver.bake(scene, SimulationSettings(solver="PBF", particle_spacing=0.02), out)
    assert calls["after_nan"] == 0          # checked after the very substep that went wrong
    reader = CacheReader(out)
    assert reader.frames == [1, 2]
    assert reader.manifest["status"] == "failed" and "frame 3" in reader.manifest["message"]
    assert np.all(np.isfinite(reader.read_frame(2)["position"]))


def test_pbf_with_a_moving_mesh_collider_is_bit_identical_twice(tmp_path):
    scene = column_scene(water=(0.1, 0.1, 0.1), tank=(0.2, 0.2, 0.3), frames=(1, 4))
    transforms = np.tile(np.eye(4), (4, 1, 1))
    transforms[:, 0, 3] = np.arange(4) * 0.01
    cup = open_cup(radius=0.03, height=0.05, base=(0.15, 0.1, 0.0))
    scene = SceneDescription(fluids=scene.fluids, containers=scene.containers, frame_start=1, frame_end=4,
                             colliders=[MeshCollider("Cup", cup, ColliderSettings(friction=0.2),
                                                     transforms=transforms)])
    settings = SimulationSettings(solver="PBF", particle_spacing=0.01)
    for name in ("a", "b"):
        driver.bake(scene, settings, str(tmp_path / name))
    a, b = CacheReader(str(tmp_path / "a")), CacheReader(str(tmp_path / "b"))
    for f in range(1, 5):
        fa, fb = a.read_frame(f), b.read_frame(f)
        for key in fa:
            np.testing.assert_array_equal(fa[key], fb[key])
