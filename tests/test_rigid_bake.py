"""Bakes with rigid bodies: the cache records them, checkpoints resume them bit for bit, a job folder
carries them, and bad bodies are refused before anything is baked."""

import dataclasses
import json

import numpy as np
import pytest

from engine import driver
from engine.errors import BakeCancelled, InvalidSceneError
from engine.io import checkpoint
from engine.io.cache import CacheReader
from engine.rigid.trajectory import read_trajectory
from engine.scene import RigidBodyObject, TriangleMesh, load_job, save_job
from engine.settings import RigidBodySettings, SimulationSettings
from helpers import box_mesh, column_scene

FRAMES = (1, 8)


def _scene(frames=FRAMES, body=None):
    """45 particles in a tank and a small crate dropped beside them, tumbling (quick to bake)."""
    base = column_scene(water=(0.06, 0.06, 0.1), tank=(0.2, 0.1, 0.3), frames=frames)
    body = body or RigidBodyObject("Crate", box_mesh([0.09, 0.02, 0.02], [0.15, 0.08, 0.08]),
                                   RigidBodySettings(density=600.0, angular_velocity=(0.0, 4.0, 2.0),
                                                     linear_velocity=(-0.3, 0.0, 0.5)))
    return dataclasses.replace(base, bodies=(body,))


SETTINGS = SimulationSettings(particle_spacing=0.02)


def _cancel_after(frame):
    seen = []

    def progress(event):
        if event.get("event") == "frame":
            seen.append(event["frame"])

    return progress, (lambda: bool(seen) and seen[-1] >= frame)


def test_resume_with_a_body_is_bit_identical_and_the_trajectory_reads_back(tmp_path):
    scene = _scene()
    whole, parts = str(tmp_path / "whole"), str(tmp_path / "parts")
    driver.bake(scene, SETTINGS, whole, checkpoint_every=3)
    progress, cancel = _cancel_after(5)
    with pytest.raises(BakeCancelled):
        driver.bake(scene, SETTINGS, parts, progress=progress, cancel=cancel, checkpoint_every=3)
    driver.bake(scene, SETTINGS, parts, resume_from=4, checkpoint_every=3)
    ra, rb = CacheReader(whole), CacheReader(parts)
    assert ra.frames == rb.frames == list(range(1, 9))
    for f in ra.frames:
        fa, fb = {**ra.read_frame(f), **ra.read_records(f)}, {**rb.read_frame(f), **rb.read_records(f)}
        for name in ("position", "velocity", "body_matrix", "body_position", "body_orientation", "body_velocity",
                     "body_angular_velocity"):
            np.testing.assert_array_equal(fa[name], fb[name], err_msg=f"frame {f} {name}")
    # the manifest names the body and declares its records; the trajectory is the frames' records
    manifest = ra.manifest
    assert manifest["rigid_bodies"]["names"] == ["Crate"]
    np.testing.assert_allclose(manifest["rigid_bodies"]["mass"], [600.0 * 0.06 ** 3], rtol=1e-12)
    assert set(manifest["records"]) == {"body_matrix", "body_position", "body_orientation", "body_velocity",
                                        "body_angular_velocity"}
    path = tmp_path / "whole" / "manifest.json"
    assert json.loads(path.read_text())["records"]["body_matrix"]["shape"] == [4, 4]
    traj = read_trajectory(whole)
    assert traj.names == ("Crate",) and list(traj.frames) == list(range(1, 9))
    crate = traj.of("Crate")
    np.testing.assert_array_equal(crate["matrix"][-1], ra.read_records(8)["body_matrix"][0])
    np.testing.assert_array_equal(crate["matrix"][0], np.eye(4))
    # the matrix takes the first frame's centre of mass to the recorded one
    centre = np.array(manifest["rigid_bodies"]["centre"][0])
    np.testing.assert_allclose(crate["matrix"][-1] @ np.r_[centre, 1.0], np.r_[crate["position"][-1], 1.0],
                               rtol=0.0, atol=1e-12)
    assert crate["position"][-1, 2] < crate["position"][2, 2]      # it flew up, then fell back


def test_a_job_folder_carries_the_bodies(tmp_path):
    transforms = np.tile(np.eye(4), (8, 1, 1))
    transforms[:, 2, 3] = np.linspace(0.0, 0.07, 8)
    body = RigidBodyObject("Lift", box_mesh([0.09, 0.02, 0.02], [0.15, 0.08, 0.08]),
                           RigidBodySettings(mass_mode="MASS", mass=2.5, contact_bounce=0.3),
                           transforms=transforms, tracks={"use_dynamic": np.r_[np.zeros(4), np.ones(4)]})
    scene = _scene(body=body)
    save_job(str(tmp_path / "job"), scene, SETTINGS)
    back, _settings = load_job(str(tmp_path / "job"))
    (got,) = back.bodies
    assert got.name == "Lift" and got.settings == body.settings
    np.testing.assert_array_equal(got.transforms, transforms)
    np.testing.assert_array_equal(got.tracks["use_dynamic"], body.tracks["use_dynamic"])
    np.testing.assert_array_equal(got.mesh.vertices, body.mesh.vertices)


def _refused(tmp_path, body, match):
    """A bake of a scene with ``body`` is refused naming it, and the cache baked before stays as it was."""
    cache = str(tmp_path / "cache")
    if not (tmp_path / "cache").exists():
        driver.bake(_scene(), SETTINGS, cache)
    before = (tmp_path / "cache" / "manifest.json").read_text()
    with pytest.raises(InvalidSceneError) as info:
        driver.bake(_scene(body=body), SETTINGS, cache)
    assert match in str(info.value)
    assert (tmp_path / "cache" / "manifest.json").read_text() == before
    assert CacheReader(cache).frames == list(range(1, 9))


def test_bad_bodies_are_refused_by_name_and_nothing_baked_is_lost(tmp_path):
    mesh = box_mesh([0.09, 0.02, 0.02], [0.15, 0.08, 0.08])
    open_mesh = TriangleMesh(mesh.vertices, mesh.triangles[:-2])
    _refused(tmp_path, RigidBodyObject("Lid", open_mesh), "Rigid body 'Lid' is not a closed mesh")
    _refused(tmp_path, RigidBodyObject("Feather", mesh, RigidBodySettings(mass_mode="MASS", mass=0.0)),
             "Rigid body 'Feather': setting 'Mass' (mass) is 0 kg, below the minimum")
    crossing = RigidBodyObject("Plank", box_mesh([0.15, 0.02, 0.02], [0.25, 0.08, 0.08]))
    _refused(tmp_path, crossing, "Rigid body 'Plank' crosses the walls of container 'Tank'")
    frames = np.repeat(mesh.vertices[None], 8, axis=0) * np.linspace(1.0, 1.1, 8)[:, None, None]
    _refused(tmp_path, RigidBodyObject("Blob", mesh, frame_vertices=frames), "Rigid body 'Blob' deforms")
    assert checkpoint.frames_on_disk(str(tmp_path / "cache")) == []
