"""The live session's engine side (engine.live.session, engine.live.channel) without Blender: the shared-memory
layout, colliders driven frame by frame against the same motion baked, the saved state a bake continues
from, recording, and the child process's loop over real shared memory."""

import json
import os
import subprocess
import sys
import time

import numpy as np
import pytest

from engine import driver
from engine.live import channel as live_channel, session as live
from engine.io.cache import CacheLock, CacheReader
from engine.errors import CacheLockedError, ForeignFolderError
from engine.scene import MeshCollider, SceneDescription, save_job
from engine.settings import ColliderSettings, LiveSettings, SimulationSettings, live_simulation_settings
from helpers import box_mesh, column_scene, open_cup

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def _by_id(x, ids):
    order = np.argsort(ids, kind="stable")
    return np.asarray(x)[order], np.asarray(ids)[order]


def test_state_block_round_trip_and_double_buffer():
    state = live_channel.StateBlock.create(100)
    try:
        other = live_channel.StateBlock.open(state.shm.name)
        x = np.arange(30, dtype=np.float32).reshape(10, 3)
        state.publish(x, -x, np.arange(10, dtype=np.int32), frame=1, time_=0.5, control=7, engine_seconds=0.01,
                      substeps=3)
        meta, rx, rv, rid = other.read()
        assert meta["frame"] == 1 and meta["count"] == 10 and meta["control"] == 7 and meta["substeps"] == 3
        np.testing.assert_array_equal(rx, x)
        np.testing.assert_array_equal(rv, -x)
        front = int(state.header["front"])
        state.publish(x[:4] + 1, x[:4], np.arange(4, dtype=np.int32), frame=2, time_=1.0, control=8,
                      engine_seconds=0.0, substeps=1)
        assert int(state.header["front"]) == 1 - front      # written into the other buffer
        meta, rx, _, _ = other.read()
        assert meta["frame"] == 2 and rx.shape == (4, 3)
        # a buffer the engine is writing (odd sequence) is never handed out
        state.header["frames"]["seq"][int(state.header["front"])] += 1
        assert other.read(tries=3) is None
        with pytest.raises(ValueError, match="do not fit"):
            state.publish(np.zeros((101, 3), np.float32), np.zeros((101, 3), np.float32), np.zeros(101, np.int32),
                          frame=3, time_=0.0, control=0, engine_seconds=0.0, substeps=0)
        other.close()
    finally:
        shm = state.shm
        state.close()
        live_channel.unlink(shm)
    assert not os.path.exists(f"/dev/shm/{shm.name.lstrip('/')}")


def test_control_block_counters_and_matrices():
    control = live_channel.ControlBlock.create(2)
    try:
        engine = live_channel.ControlBlock.open(control.shm.name)
        assert engine.n_colliders == 2
        m = np.eye(4)
        m[0, 3] = 0.25
        seq = control.write(matrices=np.stack([np.eye(4), m]), gravity=[0, 0, -3.0], text=json.dumps({"a": 1}))
        assert control.bump("step") == 1 and control.bump("step", paused=1) == 2
        snap = engine.snapshot()
        assert snap["seq"] > seq and snap["step"] == 2 and snap["paused"] == 1
        np.testing.assert_array_equal(snap["matrices"][1], m)
        np.testing.assert_array_equal(snap["gravity"], [0, 0, -3.0])
        assert json.loads(snap["text"]) == {"a": 1}
        engine.close()
    finally:
        shm = control.shm
        control.close()
        live_channel.unlink(shm)


def _cup_scene(frames=4, step=0.01):
    scene = column_scene(water=(0.1, 0.1, 0.1), tank=(0.2, 0.2, 0.3), frames=(1, frames))
    transforms = np.tile(np.eye(4), (frames, 1, 1))
    transforms[:, 0, 3] = np.arange(frames) * step
    cup = open_cup(radius=0.03, height=0.05, base=(0.15, 0.1, 0.0))
    moving = SceneDescription(fluids=scene.fluids, containers=scene.containers, frame_start=1, frame_end=frames,
                              colliders=[MeshCollider("Cup", cup, ColliderSettings(friction=0.2),
                                                      transforms=transforms)])
    still = SceneDescription(fluids=scene.fluids, containers=scene.containers, frame_start=1, frame_end=frames,
                             colliders=[MeshCollider("Cup", cup, ColliderSettings(friction=0.2))])
    return moving, still, transforms


def test_driven_collider_follows_the_baked_motion(tmp_path):
    """A collider driven frame by frame to the poses a bake reads from its per-frame matrices gives the
    bake's frames: the same substeps, poses and surface velocities."""
    moving, still, transforms = _cup_scene()
    settings = SimulationSettings(solver="PBF", particle_spacing=0.01)
    driver.bake(moving, settings, str(tmp_path / "bake"))
    reader = CacheReader(str(tmp_path / "bake"))
    sim = live.LiveSimulation(still, settings, capacity=100_000)
    for k in range(1, 4):
        sim.set_colliders(transforms[k][None])
        sim.advance()
        x, ids = _by_id(sim.solver.particles.x, sim.solver.particles.id)
        frame = reader.read_frame(1 + k)
        np.testing.assert_array_equal(ids, frame["id"])
        # rtol 0, atol 1e-6 m: the two runs differ only in how the pose's interpolation weight is
        # computed (time since the window's start over its length, against the frame position),
        # a few ulps of float64 that move a float32 position by at most an ulp or two near 0.1 m
        np.testing.assert_allclose(x, frame["position"], rtol=0.0, atol=1e-6)


def test_fast_collider_is_slowed_to_the_substep_budget():
    _moving, still, _ = _cup_scene()
    # substeps as long as the collider allows: the budget, not the solver's own limit, sets them
    settings = SimulationSettings(solver="PBF", particle_spacing=0.01, pbf_time_step=0.04)
    sim = live.LiveSimulation(still, settings, capacity=100_000, collider_substeps=4)
    far = np.eye(4)
    far[1, 3] = 0.05   # 5 spacings in one frame: the budget allows 4 x 0.4 = 1.6 per frame
    sim.set_colliders(far[None])
    entry = sim.solver.collision.entries[0]
    limit = sim.collider_speed_limit()
    assert entry.driven_speed == pytest.approx(limit, rel=1e-9)
    substeps = sim.advance()
    assert substeps <= 4 + 1
    # it has not arrived after one frame; it keeps going at the limit and arrives
    assert sim.solver.collision._pose_matrix(entry, sim.solver.collision.time)[0][1, 3] < 0.05
    for _ in range(3):
        sim.advance()
    np.testing.assert_allclose(sim.solver.collision._pose_matrix(entry, sim.solver.collision.time)[0], far,
                               atol=1e-12)


def test_a_move_sent_during_a_frame_acts_from_the_next_substep():
    """A pose the host sends while a frame is simulated is taken before the frame's next substep, so the
    frame published next already has the collider moving (the issue's latency of at most two displayed
    frames: the update that sends, then the next frame shown)."""
    _moving, still, _ = _cup_scene()
    settings = SimulationSettings(solver="PBF", particle_spacing=0.01)
    sim = live.LiveSimulation(still, settings, capacity=100_000)
    world = sim.solver.collision
    entry = world.entries[0]
    moved = np.eye(4)
    moved[1, 3] = 0.004   # 0.4 spacings over a frame: well inside the collider's speed budget
    calls, started = [], []

    def host_moves_it():
        calls.append(world.time)
        if len(calls) == 1:
            sim.set_colliders(moved[None])
            started.append(sim.solver.time)

    substeps = sim.advance(host_moves_it)
    assert substeps >= 2 and len(calls) == substeps - 1   # before every substep but the first
    # driven from the pose where it stood (still at rest) to the target over one frame's time from the
    # second substep on: at the frame's end it has covered (end - start) / frame_dt of the way.
    # rtol 0, atol 1e-12 m: float64 interpolation of a 4 mm move
    t_end = sim.solver.time
    expected = 0.004 * (t_end - started[0]) / sim.frame_dt
    assert 0.0 < expected < 0.004
    np.testing.assert_allclose(world._pose_matrix(entry, world.time)[0][1, 3], expected, rtol=0.0, atol=1e-12)
    # without a callback the frame runs as before and a collider left alone stays put
    still_sim = live.LiveSimulation(still, settings, capacity=100_000)
    still_sim.advance()
    assert still_sim.solver.collision.entries[0].driven is None


def test_box_moved_into_the_liquid_pushes_it_out():
    scene = column_scene(water=(0.1, 0.1, 0.1), tank=(0.2, 0.1, 0.3), frames=(1, 2))
    lo, hi = np.array([0.12, 0.0, 0.0]), np.array([0.16, 0.1, 0.08])
    box = MeshCollider("Box", box_mesh(lo, hi), ColliderSettings(collider_mode="SOLID"))
    scene = SceneDescription(fluids=scene.fluids, containers=scene.containers, colliders=[box], frame_start=1,
                             frame_end=2)
    sim = live.LiveSimulation(scene, SimulationSettings(solver="PBF", particle_spacing=0.01), capacity=100_000,
                              collider_substeps=20)
    move = np.eye(4)
    move[0, 3] = -0.06  # into the water column (x < 0.1)
    x0 = sim.solver.particles.x
    inside_before = np.all((x0 > lo + move[:3, 3]) & (x0 < hi + move[:3, 3]), axis=1).sum()
    assert inside_before > 50
    sim.set_colliders(move[None])
    sim.advance()
    x = sim.solver.particles.x
    # a quarter spacing of tolerance: the contact keeps particles on the surface, not beyond it
    tol = 0.0025
    inside = np.all((x > lo + move[:3, 3] + tol) & (x < hi + move[:3, 3] - tol), axis=1)
    assert not inside.any(), f"{inside.sum()} particles inside the moved box"


def test_live_settings_change_the_model():
    scene = column_scene(frames=(1, 2))
    sim = live.LiveSimulation(scene, SimulationSettings(solver="PBF", particle_spacing=0.02), capacity=10_000)
    sim.set_settings(gravity=[0.0, 0.0, -2.0], pbf_velocity_smoothing=0.5, surface_tension=0.03, dynamic_viscosity=2.0,
                     pbf_surface_tension=0.25)
    sim.advance()
    model = sim.solver.model
    np.testing.assert_array_equal(model.gravity, [0.0, 0.0, -2.0])
    assert model.xsph == 0.5 and model.liquid.surface_tension[0] == pytest.approx(0.03)
    assert model.liquid.viscosity[0] == pytest.approx(2.0) and model.kappa == 0.25
    assert sim.settings.pbf_velocity_smoothing == 0.5


def test_live_defaults_replace_solver_substep_travel_iterations_and_spacing():
    scene_settings = SimulationSettings(solver="WCSPH", particle_spacing=0.02)
    live_settings = LiveSettings(spacing_factor=2.0)
    out = live_simulation_settings(scene_settings, live_settings)
    assert (out.solver, out.particle_spacing, out.pbf_time_step, out.pbf_cfl_number, out.pbf_iterations) == (
        "PBF", 0.04, live_settings.time_step, live_settings.max_travel, live_settings.iterations)
    assert live_simulation_settings(scene_settings, LiveSettings(use_scene_settings=True)) == scene_settings


def test_saved_state_is_the_first_frame_of_a_resumed_bake(tmp_path):
    scene = column_scene(frames=(1, 4))
    settings = SimulationSettings(solver="PBF", particle_spacing=0.02)
    sim = live.LiveSimulation(scene, settings, capacity=10_000)
    for _ in range(5):
        sim.advance()
    x, ids = _by_id(sim.solver.particles.x, sim.solver.particles.id)
    cache = str(tmp_path / "cache")
    assert sim.save_for_bake(cache) == 1
    driver.bake(scene, settings, cache, resume_from=1)
    reader = CacheReader(cache)
    assert reader.frames == [1, 2, 3, 4]
    first = reader.read_frame(1)
    np.testing.assert_array_equal(first["id"], ids)
    np.testing.assert_array_equal(first["position"], x)
    # and it went on from there (the liquid had fallen for 5 frames, not 0)
    assert not np.array_equal(reader.read_frame(2)["position"], first["position"])


def test_saving_and_recording_respect_the_cache_folders_lock_and_ownership(tmp_path):
    """Bake From Here and Record write into a cache folder as a bake does: not into one a bake holds,
    not into a folder that is not Surge's (nothing of it deleted), and the lock is free afterwards."""
    scene = column_scene(frames=(1, 3))
    settings = SimulationSettings(solver="PBF", particle_spacing=0.02)
    sim = live.LiveSimulation(scene, settings, capacity=10_000)
    sim.advance()
    cache = str(tmp_path / "cache")
    with CacheLock(cache, "bake"):
        with pytest.raises(CacheLockedError):
            sim.save_for_bake(cache)
        with pytest.raises(CacheLockedError):
            live.Recorder(sim, cache)
    foreign = tmp_path / "photos"
    foreign.mkdir()
    (foreign / "holiday.jpg").write_bytes(b"not a cache")
    with pytest.raises(ForeignFolderError):
        sim.save_for_bake(str(foreign))
    with pytest.raises(ForeignFolderError):
        live.Recorder(sim, str(foreign))
    assert sorted(os.listdir(foreign)) == ["holiday.jpg"]
    # released after each write: a record, then a save, then a bake take the folder in turn
    recorder = live.Recorder(sim, cache)
    recorder.write(sim)
    assert recorder.finish()["frames"] == 1
    assert sim.save_for_bake(cache) == 1
    driver.bake(scene, settings, cache, resume_from=1)
    assert CacheReader(cache).frames == [1, 2, 3]


def test_particle_budget_drops_the_newest(tmp_path):
    scene = column_scene(frames=(1, 2))
    sim = live.LiveSimulation(scene, SimulationSettings(solver="PBF", particle_spacing=0.02), capacity=10_000)
    n = len(sim.solver.particles)
    sim.capacity = n - 5
    sim.advance()
    assert len(sim.solver.particles) == n - 5 and sim.dropped == 5
    assert sim.solver.particles.id.max() == n - 6


def _start_child(tmp_path, scene, settings, capacity=10_000, n_colliders=0, paused=True):
    job = str(tmp_path / "job")
    save_job(job, scene, settings)
    state = live_channel.StateBlock.create(capacity)
    control = live_channel.ControlBlock.create(n_colliders)
    control.write(paused=int(paused), gravity=[0.0, 0.0, -9.81], pbf_velocity_smoothing=settings.pbf_velocity_smoothing,
                  dynamic_viscosity=settings.dynamic_viscosity, surface_tension=settings.surface_tension,
                  pbf_surface_tension=settings.pbf_surface_tension)
    env = dict(os.environ, PYTHONPATH=ROOT)
    proc = subprocess.Popen([sys.executable, "-m", "engine.live.session", "run", job, "--state", state.shm.name,
                             "--control", control.shm.name, "--parent", str(os.getpid())],
                            cwd=ROOT, env=env, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True)
    return proc, state, control


def _wait(predicate, timeout=120.0):
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if predicate():
            return True
        time.sleep(0.005)
    return False


def test_child_steps_resets_records_and_stops(tmp_path):
    scene = column_scene(frames=(1, 3))
    settings = SimulationSettings(solver="PBF", particle_spacing=0.02)
    proc, state, control = _start_child(tmp_path, scene, settings)
    names = [state.shm.name, control.shm.name]
    try:
        h = state.header
        assert _wait(lambda: int(h["published"]) >= 1)
        meta, x0, _, ids0 = state.read()
        assert meta["frame"] == 0
        # paused: nothing moves until a step
        time.sleep(0.2)
        assert int(h["published"]) == 1
        for k in (1, 2):
            control.bump("step")
            assert _wait(lambda: state.read()[0]["frame"] == k)
        assert int(h["status"]) == live_channel.PAUSED or int(h["step_done"]) == 2
        # record two frames (the one on screen, then one step)
        folders = {"cache_dir": str(tmp_path / "rec")}  # no USD files: the Blender test covers them
        control.bump("record", recording=1, text=json.dumps(folders))
        assert _wait(lambda: int(h["recorded"]) == 1)
        control.bump("step")
        assert _wait(lambda: int(h["recorded"]) == 2)
        control.write(recording=0)
        control.bump("reset")
        assert _wait(lambda: int(h["reset_done"]) == 1 and state.read()[0]["frame"] == 0)
        meta, x, _, ids = state.read()
        np.testing.assert_array_equal(_by_id(x, ids)[0], _by_id(x0, ids0)[0])
        reader = CacheReader(folders["cache_dir"])
        assert reader.frames == [1, 2] and reader.manifest["status"] == "complete"
        control.write(stop=1)
        assert proc.wait(timeout=30) == 0
        events = [json.loads(line) for line in proc.stdout.read().splitlines() if line.startswith("{")]
        kinds = [e["event"] for e in events]
        assert "recorded" in kinds and kinds[-1] == "done"
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
        for block in (state, control):
            shm = block.shm
            block.close()
            live_channel.unlink(shm)
    for name in names:
        assert not os.path.exists(f"/dev/shm/{name.lstrip('/')}")


def test_child_exits_when_its_host_is_gone(tmp_path):
    """An engine whose parent died (re-parented) stops by itself and leaves the memory to its owner."""
    if os.name != "posix":
        pytest.skip("the parent check is POSIX only; elsewhere the heartbeat ends it")
    scene = column_scene(frames=(1, 3))
    settings = SimulationSettings(solver="PBF", particle_spacing=0.02)
    job = str(tmp_path / "job")
    save_job(job, scene, settings)
    state = live_channel.StateBlock.create(10_000)
    control = live_channel.ControlBlock.create(0)
    try:
        proc = subprocess.Popen([sys.executable, "-m", "engine.live.session", "run", job, "--state", state.shm.name,
                                 "--control", control.shm.name, "--parent", "1"],  # not our pid: "gone"
                                cwd=ROOT, env=dict(os.environ, PYTHONPATH=ROOT), stdout=subprocess.DEVNULL,
                                stderr=subprocess.DEVNULL)
        assert proc.wait(timeout=120) == 0
        assert int(state.header["status"]) == live_channel.STOPPED
    finally:
        for block in (state, control):
            shm = block.shm
            block.close()
            live_channel.unlink(shm)


def test_pacing_catches_up_a_few_slow_frames_and_no_more():
    """engine.live.session.next_due: frames due every 1/24 s; a slow frame is made up by the next ones as long as
    the session is at most CATCH_UP frames behind; after a long stall it stays behind that much."""
    wall = 1.0 / 24.0
    due = live.next_due(None, 0.0, 0.03, wall)
    assert due == pytest.approx(wall, abs=1e-12)
    # a frame of three budgets (two frames late): the next is due in the past (start at once), still on
    # the real-time grid
    assert live.CATCH_UP >= 2
    due = live.next_due(due, wall, 4.0 * wall, wall)
    assert due == pytest.approx(2.0 * wall, abs=1e-12)
    # frames of half a budget after it run at once until the schedule is met again: real time is kept
    t, frames = 4.0 * wall, 0
    while due < t and frames < 10:
        t0 = max(t, due)
        t = t0 + 0.5 * wall
        due = live.next_due(due, t0, t, wall)
        frames += 1
    assert frames == 5 and due == pytest.approx(7.0 * wall, abs=1e-12)
    # a stall of 40 frames: the session stays CATCH_UP frames behind, no burst of 40 frames
    due = live.next_due(due, due, due + 40.0 * wall, wall)
    assert due == pytest.approx(47.0 * wall - live.CATCH_UP * wall, abs=1e-9)
