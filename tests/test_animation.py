"""Moving and deforming inflows and outflows, animated settings, initial velocity (engine side)."""

import dataclasses

import numpy as np
import pytest
from numpy.testing import assert_allclose, assert_array_equal

from engine.scene import animation
from engine.sources import inflow
from engine import scene as scene_mod
from engine.errors import InvalidSceneError
from engine.io.cache import CacheReader
from engine.assemble import Sources, fill_fluids
from engine.driver import bake
from engine.scene import (FluidObject, ForceField, InflowObject, OutflowObject, SceneDescription, load_job,
                          save_job, scene_hash)
from engine.settings import InflowSettings, SimulationSettings
from helpers import box_mesh, quad


def _translation(frames: int, step) -> np.ndarray:
    """Rigid motion: translation by ``step`` per frame."""
    t = np.tile(np.eye(4), (frames, 1, 1))
    t[:, :3, 3] = np.arange(frames)[:, None] * np.asarray(step, float)
    return t


def test_tracks_interpolate_linearly_and_switches_hold():
    track = np.array([0.0, 2.0, 4.0, 0.0])
    assert animation.sample(track, 0.5 / 24, 24.0) == pytest.approx(1.0, abs=1e-12)
    assert animation.sample(track, 2.25 / 24, 24.0) == pytest.approx(3.0, abs=1e-12)
    assert animation.sample(track, 99.0, 24.0) == 0.0  # clamped to the last frame
    switch = np.array([1.0, 0.0, 0.0, 1.0])
    assert animation.sample(switch, 0.99 / 24, 24.0, switch=True) == 1.0
    assert animation.sample(switch, 2.5 / 24, 24.0, switch=True) == 0.0
    assert animation.sample(switch, 3.0 / 24, 24.0, switch=True) == 1.0


def test_mesh_motion_rigid_and_deforming_poses():
    mesh = box_mesh([0, 0, 0], [1, 1, 1])
    rigid = animation.MeshMotion(mesh.vertices, _translation(3, [0.1, 0, 0]), None, 10.0)
    verts, vel = rigid.pose(0.15)  # frame position 1.5
    assert_allclose(verts, mesh.vertices + [0.15, 0, 0], rtol=0, atol=1e-12)
    assert_allclose(vel, np.tile([1.0, 0, 0], (8, 1)), rtol=0, atol=1e-12)  # 0.1 m per frame at 10 fps
    frames = np.stack([mesh.vertices * (1 + 0.5 * k) for k in range(3)])
    deforming = animation.MeshMotion(mesh.vertices, None, frames, 10.0)
    verts, vel = deforming.pose(0.05)
    assert_allclose(verts, mesh.vertices * 1.25, rtol=0, atol=1e-12)
    assert_allclose(vel, mesh.vertices * 5.0, rtol=0, atol=1e-12)


def _hose(motion_frames=48, speed=1.0, fps=24.0, tracks=None, normal_speed=1.0):
    """A 4 x 4 cm square nozzle facing -Z at z = 0.5, carried along +X at ``speed`` m/s."""
    mesh = quad([0.0, 0.0, 0.5], [0.0, 0.04, 0.0], [0.04, 0.0, 0.0], n=2)  # normal -Z
    transforms = _translation(motion_frames, [speed / fps, 0.0, 0.0]) if speed else None
    return InflowObject("Hose", mesh, InflowSettings(normal_speed=normal_speed), transforms=transforms,
                        tracks=tracks or {})


def test_moving_hose_emits_from_its_surface_and_pours_a_v_t():
    dx, fps = 0.01, 24.0
    hose = _hose()
    assert hose.motion == "RIGID"
    emitter = inflow.make_emitter(hose, dx, 0, 1, fps)
    assert emitter.is_dynamic
    dt, t, total = 0.002, 0.0, 0
    for _ in range(500):  # 1 s
        x, v, age = emitter.emit(t, dt, np.zeros((0, 3)))
        t += dt
        total += len(x)
        if len(x):
            # the nozzle at the end of the substep: x in [t, t + 0.04], y in [0, 0.04], z = 0.5
            assert np.all(np.abs(x[:, 2] - 0.5) <= 0.5 * dx)
            assert np.all((x[:, 0] >= t - 1e-9) & (x[:, 0] <= t + 0.04 + 1e-9))
            # the liquid leaves at the surface's velocity plus the set velocity along the normal
            assert_allclose(v, np.tile([1.0, 0.0, -1.0], (len(v), 1)), rtol=0, atol=1e-9)
    # A v t / dx^3 = 0.0016 * 1 * 1 / 1e-6 = 1600, less at most one particle owed per stream
    k = len(emitter.owed)
    assert 1600 - k <= total <= 1600
    assert 12 <= k <= 24  # about one stream per dx^2


def test_inflow_switched_off_between_frames_20_and_40_emits_nothing_then():
    fps, dx = 24.0, 0.01
    switch = np.ones(60)
    switch[19:39] = 0.0  # frames 20..39 off (frame_start 1: index = frame - 1)
    hose = _hose(motion_frames=60, speed=0.0, tracks={"use_flow": switch})
    emitter = inflow.make_emitter(hose, dx, 0, 1, fps)
    counts = {}
    t, dt, total = 0.0, 1.0 / fps / 20, 0
    for step in range(59 * 20):
        x, _v, _age = emitter.emit(t, dt, np.zeros((0, 3)))
        t += dt
        total += len(x)
        if (step + 1) % 20 == 0:
            counts[1 + (step + 1) // 20] = total
    assert counts[20] == counts[40]  # nothing emitted between frames 20 and 40
    assert counts[20] > counts[19] > 0 and counts[41] > counts[40]


def test_keyed_rate_ramp_emits_its_integral():
    fps, dx = 24.0, 0.01
    ramp = np.linspace(0.0, 2.0, 25)  # 0 -> 2 m/s over frames 1..25
    hose = _hose(motion_frames=25, speed=0.0, tracks={"normal_speed": ramp}, normal_speed=0.0)
    emitter = inflow.make_emitter(hose, dx, 0, 1, fps)
    t, dt, total = 0.0, 1.0 / fps / 16, 0
    for _ in range(24 * 16):
        total += len(emitter.emit(t, dt, np.zeros((0, 3)))[0])
        t += dt
    expected = 0.0016 * 1.0 * 1.0 / dx ** 3  # A * mean speed (1 m/s) * 1 s / dx^3 = 1600
    k = len(emitter.owed)
    assert expected - k <= total <= expected


def test_outflow_moving_through_the_liquid_removes_exactly_what_it_passes(tmp_path):
    """A 4 cm drain box swept along X through a lattice of resting particles (no gravity, spaced
    beyond the kernel support so that they do not interact) removes exactly those in its path."""
    dx = 0.01
    g = (np.arange(20) + 0.5) * 0.025  # lattice spacing 2.5 dx > the PBF support 2 dx
    lattice = np.stack(np.meshgrid(g, g[:8], g[:8], indexing="ij"), -1).reshape(-1, 3)
    blobs = [FluidObject(f"P{i}", box_mesh(p - 0.004, p + 0.004)) for i, p in enumerate(lattice)]
    drain = OutflowObject("Drain", box_mesh([0.0, 0.05, 0.05], [0.04, 0.15, 0.15]),
                          transforms=_translation(13, [0.03, 0.0, 0.0]))  # 0.36 m over 12 frames
    sc = SceneDescription(fluids=blobs, outflows=[drain], gravity=[0, 0, 0], frame_start=1, frame_end=13,
                          fps=24.0)
    settings = SimulationSettings(solver="PBF", particle_spacing=dx)
    particles, _ = fill_fluids(sc, settings)
    assert len(particles) == len(lattice)
    bake(sc, settings, str(tmp_path / "cache"))
    last = CacheReader(str(tmp_path / "cache")).read_frame(13)
    swept = ((lattice[:, 0] < 0.40) & (lattice[:, 1] > 0.05) & (lattice[:, 1] < 0.15)
             & (lattice[:, 2] > 0.05) & (lattice[:, 2] < 0.15))
    assert swept.sum() == 16 * 4 * 4
    assert_array_equal(np.sort(last["id"]), np.nonzero(~swept)[0])


def test_moving_and_animated_scene_survives_the_job_folder(tmp_path):
    frames = 5
    hose = _hose(motion_frames=frames, tracks={"normal_speed": np.linspace(1, 2, frames),
                                               "velocity": np.zeros((frames, 3)), "use_flow": np.ones(frames)})
    drain = OutflowObject("Drain", box_mesh([0, 0, 0], [0.1, 0.1, 0.1]),
                          frame_vertices=np.stack([box_mesh([0, 0, 0], [0.1, 0.1, 0.1 + 0.01 * k]).vertices
                                                   for k in range(frames)]), tracks={"use_flow": np.ones(frames)})
    wind = ForceField("Wind", "WIND", "PLANE", matrices=np.tile(np.eye(4), (frames, 1, 1)),
                      values={"strength": np.linspace(0, 3, frames), "flow": 1.0}, flags={"seed": 7}, unit=0.5)
    fluid = FluidObject("Water", box_mesh([0, 0, 0], [0.05, 0.05, 0.05]), velocity=[1, 0, 0],
                        velocity_gradient=[[0, -2, 0], [2, 0, 0], [0, 0, 0]])
    sc = SceneDescription(fluids=[fluid], inflows=[hose], outflows=[drain], force_fields=[wind],
                          frame_start=1, frame_end=frames, tracks={"gravity": np.zeros((frames, 3))})
    sc.validate()
    save_job(str(tmp_path), sc, SimulationSettings())
    back, _settings = load_job(str(tmp_path))
    assert scene_hash(back) == scene_hash(sc)
    assert back.inflows[0].motion == "RIGID" and back.outflows[0].motion == "DEFORMING"
    assert_array_equal(back.inflows[0].tracks["normal_speed"], np.linspace(1, 2, frames))
    assert_array_equal(back.force_fields[0].values["strength"], np.linspace(0, 3, frames))
    assert back.force_fields[0].flags["seed"] == 7 and back.force_fields[0].unit == 0.5
    assert_allclose(back.fluids[0].velocity_at([[1.0, 0.0, 0.0]]), [[1.0, 2.0, 0.0]], rtol=0, atol=1e-12)


def test_bad_tracks_are_refused_naming_the_object():
    hose = _hose(motion_frames=3, tracks={"normal_speed": np.ones(2), "spacing_factor": np.ones(3)})
    sc = SceneDescription(inflows=[hose], frame_start=1, frame_end=3)
    with pytest.raises(InvalidSceneError) as info:
        sc.validate()
    text = str(info.value)
    assert "Inflow 'Hose': setting 'spacing_factor' cannot be animated" in text
    assert "Inflow 'Hose': the animation of 'normal_speed' has shape (2,)" in text


def test_fluid_starts_with_its_initial_velocity_field():
    fluid = FluidObject("Water", box_mesh([0, 0, 0], [0.1, 0.1, 0.1]), velocity=[0.5, 0, 0],
                        velocity_gradient=[[0, -1, 0], [1, 0, 0], [0, 0, 0]])  # spin about Z at 1 rad/s
    sc = SceneDescription(fluids=[fluid], frame_start=1, frame_end=2)
    pt, _ = fill_fluids(sc, SimulationSettings(particle_spacing=0.02))
    x = pt.x.astype(np.float64)
    expected = np.column_stack([0.5 - x[:, 1], x[:, 0], np.zeros(len(x))])
    assert_allclose(pt.v, expected, rtol=0, atol=1e-6)  # float32 storage


def _animated_scene(frames=12):
    ramp = np.linspace(0.5, 1.5, frames)
    hose = InflowObject("Hose", quad([0.02, 0.02, 0.25], [0.0, 0.04, 0.0], [0.04, 0.0, 0.0], n=2),
                        InflowSettings(normal_speed=0.5), transforms=_translation(frames, [0.004, 0.0, 0.0]),
                        tracks={"normal_speed": ramp})
    g = np.zeros((frames, 3))
    g[:, 2] = np.linspace(-9.81, -4.0, frames)
    wind = ForceField("Wind", "WIND", "POINT", matrices=np.tile(np.eye(4), (frames, 1, 1)),
                      values={"strength": np.linspace(0.0, 2.0, frames), "flow": 1.0, "noise": 0.5},
                      flags={"seed": 3})
    container = scene_mod.BoxContainer("Tank", [0, 0, 0], [0.12, 0.1, 0.3],
                                       tracks={"friction": np.linspace(0, 0.5, frames)})
    return SceneDescription(fluids=[FluidObject("Water", box_mesh([0, 0, 0], [0.06, 0.1, 0.06]))],
                            containers=[container], inflows=[hose], force_fields=[wind], frame_start=1,
                            frame_end=frames, tracks={"gravity": g, "pbf_velocity_smoothing": np.linspace(0.02, 1.0,
                                                                                                      frames)})


def test_resume_across_animated_settings_is_bit_identical(tmp_path):
    sc = _animated_scene()
    settings = SimulationSettings(solver="PBF", particle_spacing=0.02)
    full, part = str(tmp_path / "full"), str(tmp_path / "part")
    bake(sc, settings, full)
    bake(sc, settings, part, checkpoint_every=5)
    bake(sc, settings, part, resume_from=6)
    a, b = CacheReader(full), CacheReader(part)
    assert a.frames == b.frames == list(range(1, 13))
    for frame in (7, 12):
        fa, fb = a.read_frame(frame), b.read_frame(frame)
        assert len(fa["id"]) > 0
        for key in ("position", "velocity", "id"):
            assert_array_equal(fa[key], fb[key])


def test_animated_settings_reach_the_solver():
    sc = _animated_scene()
    settings = SimulationSettings(solver="PBF", particle_spacing=0.02)
    from engine.scene.animation import SceneAnimation
    from engine.assemble import make_solver

    particles, level = fill_fluids(sc, settings)
    solver = make_solver(sc, settings, particles, None, level)
    anim = SceneAnimation(sc, solver)
    anim.apply(solver, 5.5 / 24.0)  # halfway between frames 6 and 7 (indices 5 and 6)
    g = sc.tracks["gravity"][:, 2]
    assert solver.model.gravity[2] == pytest.approx(0.5 * (g[5] + g[6]), abs=1e-12)
    xs = sc.tracks["pbf_velocity_smoothing"]
    assert solver.model.xsph == pytest.approx(0.5 * (xs[5] + xs[6]), abs=1e-12)
    fr = sc.containers[0].tracks["friction"]
    assert solver.model.box_friction[0] == pytest.approx(0.5 * (fr[5] + fr[6]), abs=1e-12)


def test_hybrid_accepts_force_fields_and_animated_gravity():
    sc = _animated_scene()
    from engine.assemble import check_job

    sc = dataclasses.replace(sc, inflows=())
    assert sc.force_fields and "gravity" in sc.tracks
    check_job(sc, SimulationSettings(solver="HYBRID", particle_spacing=0.02))  # no refusal


def test_automatic_sound_speed_bounds_the_strongest_animated_gravity():
    """WCSPH's automatic speed of sound is ten times the fastest fall: with gravity keyed from g to 4 g it
    is sized for 4 g (twice the speed), not for the first frame's gravity."""
    from engine.assemble import _auto_sound_speed
    from engine.solvers import wcsph

    x = np.array([[0.0, 0.0, 0.0], [0.0, 0.0, 0.2]])
    v = np.zeros_like(x)
    boxes = np.zeros((0, 2, 3))
    g = np.array([0.0, 0.0, -9.81])
    track = np.outer(np.linspace(1.0, 4.0, 5), g)
    steady = SceneDescription(frame_start=1, frame_end=5)
    keyed = SceneDescription(frame_start=1, frame_end=5, tracks={"gravity": track})
    one = wcsph.auto_sound_speed(x, v, g, boxes)
    assert _auto_sound_speed(steady, x, v, boxes, 0.0) == one
    # c0 = 10 sqrt(2 |g| H): four times the gravity, twice the speed (exact up to rounding)
    assert _auto_sound_speed(keyed, x, v, boxes, 0.0) == pytest.approx(2.0 * one, rel=1e-12)


def test_moving_outflow_limits_the_substep():
    drain = OutflowObject("Drain", box_mesh([0, 0, 0], [0.04, 0.1, 0.1]), transforms=_translation(3, [0.1, 0, 0]))
    sc = SceneDescription(fluids=[FluidObject("W", box_mesh([0, 0, 0], [0.1, 0.1, 0.1]))], outflows=[drain],
                          frame_start=1, frame_end=3, fps=10.0)
    sources = Sources(sc, SimulationSettings(particle_spacing=0.01))
    # 1 m/s: 0.4 spacings of 1 cm take 4 ms
    assert sources.dt_limit(0.05) == pytest.approx(0.004, rel=1e-12)


def test_particle_budget_bounds_an_animated_rate():
    """The memory check counts a ramped or moving inflow at its fastest rate (an upper bound)."""
    from engine.scene.budget import inflow_particle_count

    ramp = _hose(motion_frames=25, speed=0.0, tracks={"normal_speed": np.linspace(0.0, 2.0, 25)}, normal_speed=0.0)
    sc = SceneDescription(inflows=[ramp], frame_start=1, frame_end=25)
    # 0.0016 m^2 at 2 m/s for 1 s at 1 cm: 3200 (the ramp emits 1600)
    assert inflow_particle_count(ramp, 0.01, sc) == pytest.approx(3200.0, rel=1e-9)
    moving = _hose(motion_frames=25)
    assert inflow_particle_count(moving, 0.01, sc) == pytest.approx(1600.0, rel=1e-9)
