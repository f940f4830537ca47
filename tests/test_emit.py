"""Filling volumes: lattice counts, winding numbers on broken meshes, the memory guard."""

import numpy as np
import pytest
from numpy.testing import assert_allclose, assert_array_equal

from engine.scene import budget
from engine.sources import fill, outflow
from engine.sources import inflow as emitters
from engine.collision.sdf import winding
from engine.errors import InvalidSceneError
from engine.scene import TriangleMesh
from helpers import box_mesh, column_scene, uv_sphere


def test_box_fill_is_the_exact_lattice():
    pts = fill.fill_volume(box_mesh([0, 0, 0], [0.1, 0.2, 0.3]), 0.01)
    assert len(pts) == 10 * 20 * 30
    assert_allclose(pts.min(axis=0), [0.005] * 3, rtol=0, atol=1e-12)
    assert_allclose(pts.max(axis=0), [0.095, 0.195, 0.295], rtol=0, atol=1e-12)


def test_sphere_fill_matches_volume():
    r, dx = 0.5, 0.02
    pts = fill.fill_volume(uv_sphere(r), dx)
    # the UV sphere (24 x 48) is inscribed: its volume is ~0.6 % below 4/3 pi r^3; lattice
    # counting noise at r/dx = 25 is ~1/(r/dx) ~ 1 %, so 2 % covers both.
    assert_allclose(len(pts) * dx ** 3, 4 / 3 * np.pi * r ** 3, rtol=0.02, atol=0)
    assert np.all(np.linalg.norm(pts, axis=1) < r)


def test_winding_number_on_broken_meshes():
    sphere = uv_sphere(1.0)
    inside, outside = np.array([[0.1, 0.2, -0.3]]), np.array([[1.5, 0.0, 0.0]])
    # a duplicated overlapping copy doubles the winding number inside (still "inside")
    dup = TriangleMesh(np.concatenate([sphere.vertices, sphere.vertices]),
                       np.concatenate([sphere.triangles, sphere.triangles + len(sphere.vertices)]))
    assert_allclose(winding.winding_numbers(inside, dup), [2.0], rtol=0, atol=1e-9)
    assert_allclose(winding.winding_numbers(outside, dup), [0.0], rtol=0, atol=1e-9)
    # a mesh with a hole (a few faces removed) still classifies points far from the hole
    holed = TriangleMesh(sphere.vertices, sphere.triangles[10:])
    assert winding.winding_numbers(np.array([[0.0, 0.0, -0.5]]), holed)[0] > 0.5
    assert winding.winding_numbers(outside, holed)[0] < 0.5
    # a zero-area face changes nothing
    degenerate = TriangleMesh(sphere.vertices, np.concatenate([sphere.triangles, [[0, 0, 1]]]))
    assert_allclose(winding.winding_numbers(inside, degenerate), [1.0], rtol=0, atol=1e-9)


def test_particle_budget_refuses_with_a_fix():
    scene = column_scene()
    assert budget.check_particle_budget(scene, 0.01, memory=2**30) > 0
    with pytest.raises(InvalidSceneError) as info:
        budget.check_particle_budget(scene, 1e-5, memory=2**30)
    msg = str(info.value)
    assert "Fluid 'Water'" in msg and "Increase the particle spacing to at least" in msg
    # the suggested spacing indeed fits
    dx_min = float(msg.rsplit("at least ", 1)[1].split(" m")[0])
    budget.check_particle_budget(scene, dx_min * 1.01, memory=2**30)


# ----------------------------------------------------------------------------------------------
# inflow, outflow, lifetime, kill box

from engine import driver  # noqa: E402
from engine import assemble
from engine import settings as settings_mod  # noqa: E402
from engine.io.cache import CacheReader  # noqa: E402
from engine.errors import InvalidSettingsError  # noqa: E402
from engine.scene import (BoxContainer, FluidObject, InflowObject, OutflowObject, SceneDescription,  # noqa: E402
                          load_job, save_job, surface_flux)
from helpers import quad  # noqa: E402


def _run_emitter(emitter, duration, dt):
    """Emit for ``duration`` s with the liquid flying ballistically (nothing ever blocks a point)."""
    xs, vs = np.zeros((0, 3)), np.zeros((0, 3))
    t = 0.0
    steps = int(round(duration / dt))
    for _ in range(steps):
        xs = xs + vs * dt
        x, v, age = emitter.emit(t, dt, xs)
        assert np.all((age >= 0.0) & (age <= dt * (1 + 1e-9)))  # active time t + dt - t rounds
        xs, vs = np.concatenate([xs, x]), np.concatenate([vs, v])
        t += dt
    return xs, vs


@pytest.mark.parametrize("dt", [0.0007, 0.004])
def test_surface_flux_matches_area_times_speed(dt):
    """Emitted count over 0.5 s = A v t / dx^3 within one particle per emission point."""
    dx = 0.01
    tap = quad([0.0, 0.0, 0.0], [0.0, 0.05, 0.0], [0.04, 0.0, 0.0], n=3)  # 0.04 x 0.05 m, normal -z
    inflow = InflowObject("Tap", tap, settings_mod.InflowSettings(normal_speed=2.0))
    em = emitters.make_emitter(inflow, dx, 0, 1, 24.0)
    x, v = _run_emitter(em, 0.5, dt)
    expected = 0.04 * 0.05 * 2.0 * 0.5 / dx ** 3  # 2000 particles
    # each point holds back less than one particle owed: the deficit is in [0, points)
    assert expected - len(em.points) <= len(x) <= expected
    assert_allclose(em.flux, 0.04 * 0.05 * 2.0, rtol=1e-12, atol=0)
    assert_allclose(v, np.broadcast_to([0.0, 0.0, -2.0], v.shape), rtol=0, atol=1e-12)
    # about one point per dx^2 (random sequential adsorption at 0.85 dx fills ~0.95 per dx^2)
    assert 0.7 * 20 <= len(em.points) <= 1.3 * 20


def test_curved_surface_flux_with_world_velocity():
    """A sphere with a sideways world velocity and a normal speed: only faces with (u + s n).n > 0 emit,
    and the count matches the summed face flux."""
    dx = 0.02
    sphere = uv_sphere(0.1)
    st = settings_mod.InflowSettings(normal_speed=0.5, velocity=(1.0, 0.0, 0.0))
    inflow = InflowObject("Ball", sphere, st)
    em = emitters.make_emitter(inflow, dx, 0, 1, 24.0)
    flux = surface_flux(sphere, inflow.velocity, 0.5)
    # analytic flux of a sphere: integral of max(cos(t) + 0.5, 0) over it = 2 pi r^2 * 1.5^2 / 2
    assert_allclose(flux, np.pi * 0.1 ** 2 * 1.5 ** 2, rtol=0.01, atol=0)  # 1 %: the UV sphere's facets
    x, v = _run_emitter(em, 0.3, 0.002)
    expected = flux * 0.3 / dx ** 3
    assert expected - len(em.points) <= len(x) <= expected
    # particles leave with u + s n: their speed along the local normal is positive
    normal = x / np.linalg.norm(x, axis=1, keepdims=True)
    assert np.all(np.einsum("ij,ij->i", v, normal) > 0.0)


def test_stream_particles_do_not_overlap():
    dx = 0.01
    tap = quad([0.0, 0.0, 0.0], [0.0, 0.04, 0.0], [0.04, 0.0, 0.0], n=2)
    em = emitters.make_emitter(InflowObject("Tap", tap, settings_mod.InflowSettings(normal_speed=1.0)), dx, 0, 1, 24.0)
    x, _v = _run_emitter(em, 0.1, 0.001)
    d = np.linalg.norm(x[:, None, :] - x[None, :, :], axis=2)
    np.fill_diagonal(d, np.inf)
    # points are >= 0.85 dx apart on the surface and each point's stream is dx apart: nearest
    # neighbours can only come closer through rounding of the release times (< 1e-9 m)
    assert d.min() >= 0.85 * dx - 1e-9


def test_blocked_point_waits():
    """A particle sitting in front of the nozzle stops its point without a burst afterwards."""
    dx = 0.01
    tap = quad([0.0, 0.0, 0.0], [0.0, 0.01, 0.0], [0.01, 0.0, 0.0])
    em = emitters.make_emitter(InflowObject("Tap", tap, settings_mod.InflowSettings(normal_speed=1.0)), dx, 0, 1, 24.0)
    plug = np.concatenate([em.points + [0.0, 0.0, -0.002 * k] for k in range(6)])
    total = 0
    for k in range(100):
        x, _v, _a = em.emit(k * 0.001, 0.001, plug)
        total += len(x)
    assert total == 0
    assert np.all(em.owed <= 1.0)  # no backlog: once free, one particle per point
    x, _v, age = em.emit(0.1, 0.001, np.zeros((0, 3)))
    # each point was ready at the start of the substep: its particle is one substep old
    assert len(x) == len(em.points)
    assert_allclose(age, 0.001, rtol=1e-9, atol=0)


def test_emission_window_in_frames():
    dx, fps = 0.01, 24.0
    tap = quad([0.0, 0.0, 0.0], [0.0, 0.02, 0.0], [0.02, 0.0, 0.0])
    st = settings_mod.InflowSettings(normal_speed=1.0, emit_start=5, emit_end=8)
    em = emitters.make_emitter(InflowObject("Tap", tap, st), dx, 0, 1, fps)
    # frames 5..8 are computed over t in [3/24, 7/24] with frame_start 1: 4 frames of emission
    x, _v = _run_emitter(em, 0.5, 1 / 240)
    expected = 0.02 * 0.02 * 1.0 * (4 / fps) / dx ** 3
    assert expected - len(em.points) <= len(x) <= expected
    assert_allclose(em.window, (3 / fps, 7 / fps), rtol=1e-12, atol=1e-12)


def test_volume_inflow_fills_only_free_sites():
    dx = 0.01
    em = emitters.make_emitter(InflowObject("Box", box_mesh([0, 0, 0], [0.05, 0.05, 0.05]),
                                        settings_mod.InflowSettings(inflow_mode="VOLUME")), dx, 0, 1, 24.0)
    assert len(em.sites) == 125
    liquid = em.sites[:60] + 0.001
    x, _v, _a = em.emit(0.0, 0.01, liquid)
    assert len(x) == 65  # the other sites: none of them has a particle within 0.9 dx
    assert not np.any(emitters.near_any(liquid, x, 0.9 * dx))


def test_removal_by_outflow_age_and_kill_box():
    rng = np.random.default_rng(3)
    x = rng.uniform(-0.5, 0.5, (4000, 3))
    age = rng.uniform(0.0, 3.0, 4000)
    drain = OutflowObject("Drain", box_mesh([-0.2, -0.1, -0.3], [0.1, 0.3, 0.0]))
    # the winding number decides exactly for points not within 1e-9 of the faces
    inside = np.all((x > [-0.2, -0.1, -0.3]) & (x < [0.1, 0.3, 0.0]), axis=1)
    assert_array_equal(outflow.removal_mask(x, age, [drain], 0.0, None), inside)
    assert_array_equal(outflow.removal_mask(x, age, [], 2.0, None), age > 2.0)
    box = np.array([[-0.4, -0.3, -0.45], [0.45, 0.2, 0.3]])
    outside = np.any((x < box[0]) | (x > box[1]), axis=1)
    assert_array_equal(outflow.removal_mask(x, age, [], 0.0, box), outside)
    assert_array_equal(outflow.removal_mask(x, age, [drain], 2.0, box), inside | (age > 2.0) | outside)


def _tap_scene(frames=(1, 10), **inflow):
    tap = quad([0.08, 0.08, 0.25], [0.0, 0.04, 0.0], [0.04, 0.0, 0.0], n=2)
    st = settings_mod.InflowSettings(**{"normal_speed": 1.0, **inflow})
    return SceneDescription(
        fluids=[FluidObject("Pool", box_mesh([0, 0, 0], [0.2, 0.2, 0.03]))],
        inflows=[InflowObject("Tap", tap, st, channels={"tint": 1.0})],
        outflows=[OutflowObject("Drain", box_mesh([0.15, 0.15, -0.01], [0.21, 0.21, 0.05]))],
        containers=[BoxContainer("Tank", [0, 0, 0], [0.2, 0.2, 0.4])],
        frame_start=frames[0], frame_end=frames[1])


@pytest.mark.slow  # an end-to-end bake checked for leaks or volume: physics validation
def test_bake_with_inflow_and_outflow(tmp_path):
    """Varying counts per frame, fresh ids for emitted particles, the channel and age in the cache,
    nothing left inside the drain."""
    scene = _tap_scene()
    st = settings_mod.SimulationSettings(solver="PBF", particle_spacing=0.01)
    driver.bake(scene, st, str(tmp_path))
    reader = CacheReader(str(tmp_path))
    assert {"age", "tint"} <= set(reader.manifest["attributes"])
    first = reader.read_frame(1)
    n_pool = len(first["id"])
    assert n_pool == 20 * 20 * 3  # the first frame is the filled pool, drain corner included
    counts, last_id = [], 0
    for f in reader.frames:
        fr = reader.read_frame(f)
        counts.append(len(fr["id"]))
        assert len(np.unique(fr["id"])) == len(fr["id"])
        emitted = fr["id"] >= n_pool
        assert_array_equal(fr["tint"], emitted.astype(np.float32))
        assert np.all(fr["age"] <= (f - 1) / 24.0 + 1e-6)
        inside = np.all((fr["position"] > [0.15, 0.15, -0.01]) & (fr["position"] < [0.21, 0.21, 0.05]), axis=1)
        assert f == 1 or not inside.any()
        last_id = max(last_id, int(fr["id"].max()))
    assert len(set(counts)) > 3
    # ids are handed out in order: the emitted count is A v t / dx^3 = 0.0016 * 1 * (9 / 24) / 1e-6 = 600,
    # less at most one particle per emission point (about 15 here) still owed at the end
    assert 600 - 20 <= last_id + 1 - n_pool <= 600


def test_job_round_trip_and_refusals(tmp_path):
    scene = _tap_scene(emit_start=3, emit_end=6, velocity=(0.5, 0.0, 0.0))
    st = settings_mod.SimulationSettings(solver="PBF", particle_spacing=0.01, particle_lifetime=2.0,
                                         use_kill_box=True)
    save_job(str(tmp_path), scene, st)
    scene2, st2 = load_job(str(tmp_path))
    assert st2 == st
    assert scene2.inflows[0].settings == scene.inflows[0].settings
    assert scene2.inflows[0].channels == {"tint": 1.0}
    assert_array_equal(scene2.outflows[0].mesh.vertices, scene.outflows[0].mesh.vertices)
    assert scene2.fluids[0].settings == scene.fluids[0].settings

    bad = SceneDescription(inflows=[InflowObject("Tap", box_mesh([0, 0, 0], [0, 0, 0]).__class__(
        np.zeros((0, 3)), np.zeros((0, 3))))])
    with pytest.raises(InvalidSceneError, match="Inflow 'Tap' has no faces"):
        bad.validate()
    away = SceneDescription(inflows=[InflowObject("Tap", quad([0, 0, 0], [0, 0.1, 0], [0.1, 0, 0]),
                                                  settings_mod.InflowSettings(normal_speed=0.0, velocity=(0.0, 0.0,
                                                                                                          1.0)))])
    with pytest.raises(InvalidSceneError, match="Inflow 'Tap' emits nothing"):
        away.validate()
    with pytest.raises(InvalidSettingsError, match="Inflow 'Tap': setting 'End Frame'"):
        settings_mod.inflow_from_dict({"emit_start": 10, "emit_end": 4}, "Inflow 'Tap'")
    coarse = SceneDescription(fluids=[FluidObject("Pool", box_mesh([0, 0, 0], [0.1, 0.1, 0.1]),
                                                  settings=settings_mod.FluidSettings(spacing_factor=2.0))])
    with pytest.raises(InvalidSceneError, match="Fluid 'Pool': setting 'Spacing Factor'.*single resolution"):
        assemble.check_job(coarse, settings_mod.SimulationSettings(solver="WCSPH"))
    flat = SceneDescription(inflows=[InflowObject("Sheet", quad([0, 0, 0], [0, 0.1, 0], [0.1, 0, 0]),
                                                  settings_mod.InflowSettings(inflow_mode="VOLUME"))])
    with pytest.raises(InvalidSceneError, match=r"Inflow 'Sheet' \(Emit From: Volume\) holds no particle"):
        driver.bake(flat, settings_mod.SimulationSettings(solver="PBF", particle_spacing=0.01), str(tmp_path / "c"))
    with pytest.raises(InvalidSceneError, match="channel '2x' is not a valid channel name"):
        SceneDescription(fluids=[FluidObject("Pool", box_mesh([0, 0, 0], [0.1, 0.1, 0.1]),
                                             channels={"2x": 1.0})]).validate()


def test_particle_budget_counts_what_inflows_emit():
    big = quad([0, 0, 1], [0, 2.0, 0], [2.0, 0, 0])  # 4 m^2 facing down
    tap = InflowObject("Waterfall", big, settings_mod.InflowSettings(normal_speed=2.0))
    scene = SceneDescription(inflows=[tap], frame_start=1, frame_end=241)  # 10 s
    # 4 m^2 * 2 m/s * 10 s / (0.01 m)^3 = 8e7 particles: more than 1 GiB holds
    assert_allclose(budget.inflow_particle_count(tap, 0.01, scene), 8e7, rtol=1e-9, atol=0)
    with pytest.raises(InvalidSceneError, match="Inflow 'Waterfall'"):
        budget.check_particle_budget(scene, 0.01, memory=2**30)
    # a lifetime of 0.1 s keeps at most 1/100 of them; a drain makes the count unknowable: both pass
    assert_allclose(budget.check_particle_budget(scene, 0.01, memory=2**30, lifetime=0.1), 8e5, rtol=1e-9, atol=0)
    assert budget.check_particle_budget(scene, 0.01, memory=2**30, drained=True) == 0


@pytest.mark.slow  # an end-to-end bake checked for leaks or volume: physics validation
def test_lifetime_and_kill_box_in_a_bake(tmp_path):
    """Through the driver: no frame holds a particle older than the lifetime or outside the kill box."""
    scene = _tap_scene(frames=(1, 8), velocity=(1.0, 0.0, 0.0))  # the stream leans towards +x
    st = settings_mod.SimulationSettings(solver="PBF", particle_spacing=0.01, particle_lifetime=0.15,
                                         use_kill_box=True, kill_box_min=(-1.0, -1.0, 0.1),
                                         kill_box_max=(0.15, 1.0, 1.0))
    driver.bake(scene, st, str(tmp_path))
    reader = CacheReader(str(tmp_path))
    emitted_any = False
    for f in reader.frames[1:]:
        fr = reader.read_frame(f)
        assert np.all(fr["age"] <= 0.15)
        x = fr["position"]
        assert np.all((x[:, 0] <= 0.15) & (x[:, 2] >= 0.1))  # the pool (z < 0.03) went at the first substep
        emitted_any |= len(x) > 0
    assert emitted_any
    # the stream is removed as fast as it comes once the oldest particles pass 0.15 s: the count stops growing
    counts = [len(reader.read_frame(f)["id"]) for f in reader.frames]
    assert counts[-1] <= max(counts[1:-1]) + 5


@pytest.mark.parametrize("spread", [0.1, 3.0])
def test_near_any_equals_brute_force(spread):
    """Dense query grid (a nozzle-sized patch) and the neighbour-grid search (queries spread over a box of
    more than MAX_QUERY_CELLS cells of edge r): both answer exactly like brute force, for float32
    points as the solvers hold them."""
    rng = np.random.default_rng(11)
    r = 0.01
    queries = rng.uniform(0.0, spread, (400, 3))
    points = np.concatenate([rng.uniform(-0.5, spread + 0.5, (20000, 3)),
                             queries[::3] + rng.normal(scale=0.6 * r, size=(134, 3))]).astype(np.float32)
    cells = np.prod(np.floor(queries.max(0) / r) - np.floor(queries.min(0) / r) + 3)
    assert (cells > emitters.MAX_QUERY_CELLS) == (spread > 1.0)  # both paths are exercised
    d2 = ((queries[:, None, :] - points[None, :, :].astype(np.float64)) ** 2).sum(-1)
    want = (d2 < r * r).any(axis=1)
    assert 0 < want.sum() < len(want)
    np.testing.assert_array_equal(emitters.near_any(points, queries, r), want)
