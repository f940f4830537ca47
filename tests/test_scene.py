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
    text = (tmp_path / "scene.json").read_text().replace(f'"format_version": {sc.JOB_FORMAT_VERSION}',
                                                         '"format_version": 7')
    (tmp_path / "scene.json").write_text(text)
    with pytest.raises(InvalidSceneError, match="version 7"):
        sc.load_job(str(tmp_path))
    with pytest.raises(InvalidSceneError, match="cannot be read"):
        sc.load_job(str(tmp_path / "missing"))


def test_colliders_round_trip_through_a_job_folder(tmp_path):
    from engine.scene import MeshCollider
    from engine.settings import ColliderSettings
    from helpers import uv_sphere

    base = column_scene(frames=(1, 3))
    moving = np.tile(np.eye(4), (3, 1, 1))
    moving[:, 0, 3] = [0.0, 0.01, 0.02]
    ball = uv_sphere(0.02, (0.05, 0.05, 0.05), 6, 12)
    scene = sc.SceneDescription(
        fluids=base.fluids,
        containers=[sc.BoxContainer("Tank", [0, 0, 0], [0.1, 0.1, 0.3], ColliderSettings(collider_mode="CONTAINER",
                                                                                          friction=0.25, bounce=0.5))],
        colliders=[MeshCollider("Ball", ball, ColliderSettings(collider_mode="SOLID", surface_offset=0.002),
                                transforms=moving),
                   MeshCollider("Skin", box_mesh([0, 0, 0], [0.01, 0.01, 0.01]), ColliderSettings(),
                                frame_vertices=np.stack([box_mesh([0, 0, 0], [0.01, 0.01, 0.01 + k * 1e-3]).vertices
                                                         for k in range(3)]))],
        frame_start=1, frame_end=3)
    sc.save_job(str(tmp_path), scene, SimulationSettings())
    back, _ = sc.load_job(str(tmp_path))
    assert sc.scene_hash(back) == sc.scene_hash(scene)
    assert back.containers[0].settings.bounce == 0.5 and back.containers[0].settings.friction == 0.25
    assert [c.motion for c in back.colliders] == ["RIGID", "DEFORMING"]
    np.testing.assert_array_equal(back.colliders[0].transforms, moving)
    assert back.colliders[0].settings.surface_offset == 0.002


def test_collider_problems_name_the_object():
    from engine.scene import MeshCollider
    from engine.settings import ColliderSettings

    base = column_scene(frames=(1, 3))
    bad = sc.SceneDescription(
        fluids=base.fluids,
        colliders=[MeshCollider("Empty", sc.TriangleMesh(np.zeros((0, 3)), np.zeros((0, 3)))),
                   MeshCollider("Slippy", base.fluids[0].mesh, ColliderSettings(friction=2.0)),
                   MeshCollider("Short", base.fluids[0].mesh, transforms=np.tile(np.eye(4), (2, 1, 1)))],
        frame_start=1, frame_end=3)
    with pytest.raises(InvalidSceneError) as info:
        bad.validate()
    text = str(info.value)
    assert "Collider 'Empty' has no faces" in text
    assert "Collider 'Slippy': setting 'Friction'" in text
    assert "Collider 'Short' has transforms for 2 frames" in text
