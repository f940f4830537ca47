"""Scene description: job folder round trip and structural validation."""

import numpy as np
import pytest

from engine import scene as sc
from engine.errors import InvalidSceneError
from engine.settings import SimulationSettings
from helpers import box_mesh, column_scene


def test_job_round_trip(tmp_path):
    s = column_scene()
    settings = SimulationSettings(particle_spacing=0.01)
    sc.save_job(str(tmp_path), s, settings)
    s2, settings2 = sc.load_job(str(tmp_path))
    assert settings2 == settings
    assert sc.scene_hash(s2) == sc.scene_hash(s)
    np.testing.assert_array_equal(s2.fluids[0].mesh.vertices, s.fluids[0].mesh.vertices)
    assert s2.containers[0].name == "Tank" and s2.frame_end == s.frame_end


def test_scene_hash_changes_with_geometry():
    a = column_scene()
    b = column_scene(water=(0.1, 0.1, 0.21))
    assert sc.scene_hash(a) != sc.scene_hash(b)


def test_validation_names_objects():
    empty = sc.FluidObject("Puddle", sc.TriangleMesh(np.zeros((0, 3)), np.zeros((0, 3))))
    s = sc.SceneDescription(fluids=[empty], containers=[sc.BoxContainer("Flat", [0, 0, 0], [1, 1, 0])],
                            frame_start=5, frame_end=5)
    with pytest.raises(InvalidSceneError) as info:
        s.validate()
    text = str(info.value)
    assert "Fluid 'Puddle' has no faces" in text and "Container 'Flat'" in text and "frame range" in text
    with pytest.raises(InvalidSceneError, match="no object with the role Fluid"):
        sc.SceneDescription().validate()


def test_unknown_job_version_refused(tmp_path):
    sc.save_job(str(tmp_path), column_scene(), SimulationSettings())
    text = (tmp_path / "scene.json").read_text().replace('"format_version": 1', '"format_version": 7')
    (tmp_path / "scene.json").write_text(text)
    with pytest.raises(InvalidSceneError, match="version 7"):
        sc.load_job(str(tmp_path))
    with pytest.raises(InvalidSceneError, match="cannot be read"):
        sc.load_job(str(tmp_path / "missing"))
