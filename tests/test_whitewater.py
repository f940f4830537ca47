"""Whitewater (engine.whitewater, Ihmsen et al. 2012): potentials, classification, advection, the stage.

Fast tests run on liquids written straight into a cache (a lattice at rest, two blocks colliding);
the dam-break tests bake real liquids and are marked slow.
"""


import os

import numpy as np
import pytest

from engine import settings as sm
from engine.io.cache import CacheReader, CacheWriter
from engine import stages
from engine.errors import BakeCancelled, InvalidSettingsError
from engine.whitewater import kernels, model, stage

DX = 0.02
G = np.array([0.0, 0.0, -9.81])


def lattice(nx, ny, nz, origin=(0.0, 0.0, 0.0), dx=DX):
    g = np.mgrid[0:nx, 0:ny, 0:nz].reshape(3, -1).T.astype(np.float64)
    return (g * dx + np.asarray(origin)).astype(np.float32)


def write_cache(path, frames, fps=24.0, dx=DX):
    """A liquid cache of the given frames (list of (position, velocity) pairs), frame numbers from 1."""
    header = {"frame_start": 1, "frame_end": len(frames), "fps": fps, "particle_spacing": dx,
              "particle_radius": dx / 2, "settings_hash": "test", "scene_hash": "test"}
    w = CacheWriter(str(path), header)
    for f, (x, v) in enumerate(frames, start=1):
        n = len(x)
        w.write_frame(f, {"position": x, "velocity": v, "density": np.full(n, 1000.0), "id": np.arange(n),
                          "age": np.zeros(n)})
    w.finish("complete")
    return str(path)


def colliding_blocks(frames=8, speed=3.0):
    """Two blocks of liquid meeting head-on at ``speed`` each (trapped air where they meet)."""
    a = lattice(8, 8, 8)
    b = lattice(8, 8, 8, origin=(8.6 * DX, 0.0, 0.0))
    out = []
    for f in range(frames):
        shift = speed * f / 24.0
        # the blocks interpenetrate after contact: enough for a potential, not meant as physics
        x = np.concatenate([a + [min(shift, 0.05), 0, 0], b - [min(shift, 0.05), 0, 0]]).astype(np.float32)
        v = np.concatenate([np.tile([speed, 0, 0], (len(a), 1)), np.tile([-speed, 0, 0], (len(b), 1))])
        out.append((x, v.astype(np.float32)))
    return out


MANUAL = sm.WhitewaterSettings(use_auto_thresholds=False, trapped_air_min=1.0, trapped_air_max=8.0,
                               energy_min=0.5, energy_max=4.0, trapped_air_rate=40.0, wave_crest_rate=40.0)


# -- model pieces ------------------------------------------------------------------------------------------

def test_clamp_is_eq1():
    # Phi = (min(I, tmax) - min(I, tmin)) / (tmax - tmin): 0 below, linear between, 1 above
    for value, want in ((0.5, 0.0), (1.0, 0.0), (2.0, 0.25), (5.0, 1.0), (9.0, 1.0)):
        assert kernels.clamp_potential(value, 1.0, 5.0) == pytest.approx(want, abs=1e-12)


def test_trapped_air_matches_brute_force():
    rng = np.random.default_rng(3)
    x = lattice(6, 6, 6) + rng.normal(0, 0.1 * DX, (216, 3)).astype(np.float32)
    v = rng.normal(0, 1.0, (216, 3)).astype(np.float32)
    liquid = model.LiquidFrame(x, v, np.arange(216), DX)
    ta, _wc, ke = liquid.potentials()
    R = 2 * DX
    xs, raw = liquid.x.astype(np.float64), liquid.v.astype(np.float64)
    vs = np.zeros_like(raw)
    for i in range(len(xs)):  # the W-averaged velocity field the potentials read
        w = np.maximum(0.0, 1 - np.linalg.norm(xs[i] - xs, axis=1) / R)
        vs[i] = w @ raw / w.sum()
    want = np.zeros(len(xs))
    for i in range(len(xs)):
        d = xs[i] - xs
        r = np.linalg.norm(d, axis=1)
        m = (r < R) & (r > 0)
        u = vs[i] - vs[m]
        un = np.linalg.norm(u, axis=1)
        want[i] = np.sum(un * (1 - np.sum(u * d[m], 1) / (un * r[m])) * (1 - r[m] / R))  # Eq. 2 with Eq. 3
    # float32 positions and velocities: relative rounding ~1e-6 per term, sums of ~30 terms
    np.testing.assert_allclose(ta, want, rtol=1e-4, atol=1e-5)
    np.testing.assert_allclose(ke, 0.5 * np.sum(vs ** 2, 1), rtol=1e-6, atol=1e-9)


def test_rest_tank_makes_no_whitewater(tmp_path):
    # a resting liquid (with the small velocity noise a settled bake keeps, 1 mm/s) in automatic
    # and manual mode: every potential stays under its minimum
    rng = np.random.default_rng(0)
    x = lattice(20, 10, 10)
    frames = [(x, rng.normal(0, 1e-3, x.shape).astype(np.float32)) for _ in range(6)]
    cache = write_cache(tmp_path / "rest", frames)
    for settings in (sm.WhitewaterSettings(), MANUAL):
        result = stage.run(cache, settings)
        assert result["emitted"] == 0 and result["particles"] == 0


def test_automatic_thresholds_are_scale_free(tmp_path):
    # the same splash L = 100 times larger (a 15 cm pair of blocks and a 15 m one): lengths and the spacing
    # times L, velocities times sqrt(L), time times sqrt(L) (frames 1/2.4 s apart instead of 1/24), the same
    # gravity (Froude similarity). Its potentials are those of the small one times sqrt(L) (trapped air,
    # m/s), 1 (wave crest) and L (energy, J/kg), and so must be the automatic thresholds: the same places
    # of the motion make whitewater at both sizes, with no setting changed
    L = 100.0
    small = colliding_blocks()
    large = [((x * L).astype(np.float32), (v * np.sqrt(L)).astype(np.float32)) for x, v in small]
    settings = sm.WhitewaterSettings()
    runs = {}
    for name, frames, dx, fps in (("small", small, DX, 24.0), ("large", large, DX * L, 24.0 / np.sqrt(L))):
        cache = write_cache(tmp_path / name, frames, fps=fps, dx=dx)
        result = stage.run(cache, settings)
        stats = manifest(cache)["state"]["stats"]
        runs[name] = (result, {int(f) for f, s in stats.items() if s["emitted"]})
    (a, emitting_a), (b, emitting_b) = runs["small"], runs["large"]
    assert a["emitted"] > 0 and emitting_a == emitting_b
    # float32 positions and velocities rounded at both sizes: ~1e-7 relative per value, sums of ~30 terms
    for name, ratio in (("trapped_air", np.sqrt(L)), ("wave_crest", 1.0), ("energy", L)):
        np.testing.assert_allclose(np.array(b["thresholds"][name]), ratio * np.array(a["thresholds"][name]),
                                   rtol=1e-5, atol=0.0)
    # the same liquid particles emit at both sizes (each emits rate x dt, and dt is sqrt(L) times longer):
    # about sqrt(L) times as many particles per frame
    assert 0.7 * np.sqrt(L) * a["emitted"] < b["emitted"] < 1.3 * np.sqrt(L) * a["emitted"], (a, b)


def test_classification_against_the_liquid_surface():
    # a slab with its top layer at z = 9 dx; points above and below it at three places across a cell
    liquid = model.LiquidFrame(lattice(20, 20, 10), np.zeros((4000, 3), np.float32), np.arange(4000), DX)
    top = 9 * DX
    heights = np.array([-4.0, -2.0, -1.0, -0.5, 0.5, 0.8, 1.0, 1.2, 1.9, 2.5, 4.0])
    for offset in (10.0, 10.3, 10.5):
        p = np.array([[offset * DX, offset * DX, top + h * DX] for h in heights], np.float32)
        count, _ = liquid.query(p)
        kind = np.zeros(len(p), np.uint8)
        kernels.classify(count, 6, 20, kind)
        for h, c in zip(heights, kind):
            if h <= -0.5:
                assert c == kernels.BUBBLE, (offset, h, c)  # inside the liquid
            elif h <= 1.2:
                assert c == kernels.FOAM, (offset, h, c)  # within about 1.5 spacings above the surface layer
            else:
                assert c == kernels.SPRAY, (offset, h, c)  # in the air


def test_query_counts_match_brute_force():
    rng = np.random.default_rng(5)
    x = lattice(10, 10, 10) + rng.normal(0, 0.2 * DX, (1000, 3)).astype(np.float32)
    v = rng.normal(0, 1, (1000, 3)).astype(np.float32)
    liquid = model.LiquidFrame(x, v, np.arange(1000), DX)
    p = rng.uniform(-3 * DX, 13 * DX, (400, 3)).astype(np.float32)
    count, vel = liquid.query(p)
    R = 2 * DX
    for q in range(len(p)):
        r = np.linalg.norm(x.astype(np.float64) - p[q], axis=1)
        assert count[q] == np.sum(r < R)
        if count[q]:
            w = np.where(r < R, 1 - r / R, 0.0)
            np.testing.assert_allclose(vel[q], w @ v / w.sum(), rtol=1e-4, atol=1e-5)  # float32 sums


def advance_one(kind, x, v, liquid_v, dt, s):
    x = np.array([x], np.float32)
    v = np.array([v], np.float32)
    life, age = np.ones(1, np.float32), np.zeros(1, np.float32)
    kernels.advance(x, v, np.array([kind], np.uint8), np.array([liquid_v], np.float32), life, age, dt,
                    G[0], G[1], G[2], s.spray_drag, s.buoyancy, s.bubble_drag)
    return x[0].astype(np.float64), v[0].astype(np.float64)


def test_spray_follows_the_drag_arc():
    # dv/dt = g - k v from v0: x(t) = x0 + g t / k + (v0 - g / k)(1 - e^{-kt}) / k, checked frame by frame
    s = sm.WhitewaterSettings(spray_drag=1.5)
    x0, v0 = np.array([0.0, 0.0, 1.0]), np.array([2.0, 0.5, 3.0])
    x, v = x0.copy(), v0.copy()
    k, dt = s.spray_drag, 1 / 24
    for n in range(1, 25):
        x, v = advance_one(kernels.SPRAY, x, v, (0, 0, 0), dt, s)
        t = n * dt
        e = -np.expm1(-k * t)
        want_x = x0 + G * t / k + (v0 - G / k) * e / k
        want_v = G / k + (v0 - G / k) * np.exp(-k * t)
        # float32 state re-rounded every frame: 24 roundings of ~1e-7 relative each
        np.testing.assert_allclose(x, want_x, rtol=1e-5, atol=1e-5)
        np.testing.assert_allclose(v, want_v, rtol=1e-5, atol=1e-5)
    # and without drag the arc is the parabola
    s0 = sm.WhitewaterSettings(spray_drag=0.0)
    x, v = advance_one(kernels.SPRAY, x0, v0, (0, 0, 0), 0.5, s0)
    np.testing.assert_allclose(x, x0 + v0 * 0.5 + 0.5 * G * 0.25, rtol=1e-6, atol=1e-6)


def test_bubble_rises_in_still_liquid(tmp_path):
    # a bubble released at rest deep in a still tank rises toward the terminal speed k_b |g| / k_d
    s = sm.WhitewaterSettings(buoyancy=2.0, bubble_drag=8.0)
    liquid = model.LiquidFrame(lattice(20, 20, 20), np.zeros((8000, 3), np.float32), np.arange(8000), DX)
    state = model.Diffuse.empty(1)
    state.position[0] = (10.3 * DX, 10.3 * DX, 5 * DX)
    state.kind[0] = kernels.BUBBLE
    state.lifetime[0] = 1.0
    z = [float(state.position[0, 2])]
    for f in range(2, 6):
        state, _, _ = model.step(state, liquid, f, 1 / 24, 1, sm.WhitewaterSettings(
            trapped_air_rate=0.0, wave_crest_rate=0.0, buoyancy=2.0, bubble_drag=8.0), model.Thresholds.manual(s),
            DX, G)
        z.append(float(state.position[0, 2]))
    assert np.all(np.diff(z) > 0)
    # dv/dt = k_b |g| - k_d v from rest: z(t) - z0 = u t - u (1 - e^{-k_d t}) / k_d, u = k_b |g| / k_d
    u, kd, t = s.buoyancy * 9.81 / s.bubble_drag, s.bubble_drag, 4 / 24
    # float32 positions of about 0.1 m re-rounded each frame: ~1e-8 m each
    assert z[-1] - z[0] == pytest.approx(u * t + u * np.expm1(-kd * t) / kd, rel=1e-5, abs=1e-6)
    assert state.kind[0] == kernels.BUBBLE  # still inside the liquid


def test_foam_moves_with_the_liquid_and_dissolves():
    v = np.tile(np.float32([0.5, 0.0, 0.0]), (2000, 1))
    liquid = model.LiquidFrame(lattice(20, 20, 5), v, np.arange(2000), DX)
    state = model.Diffuse.empty(1)
    state.position[0] = (5 * DX, 10 * DX, 4.2 * DX)
    state.kind[0] = kernels.FOAM
    state.lifetime[0] = 0.1
    s = sm.WhitewaterSettings(trapped_air_rate=0.0, wave_crest_rate=0.0)
    state, _, _ = model.step(state, liquid, 2, 1 / 24, 1, s, model.Thresholds.manual(s), DX, G)
    np.testing.assert_allclose(state.position[0], (5 * DX + 0.5 / 24, 10 * DX, 4.2 * DX), rtol=1e-6, atol=1e-6)
    assert state.kind[0] == kernels.FOAM and state.lifetime[0] == pytest.approx(0.1 - 1 / 24, abs=1e-6)
    for f in range(3, 6):
        state, _, _ = model.step(state, liquid, f, 1 / 24, 1, s, model.Thresholds.manual(s), DX, G)
    assert len(state) == 0


# -- the stage ---------------------------------------------------------------------------------------------

def manifest(cache):
    return stages.read_manifest(cache, stage.NAME)


def test_colliding_liquid_makes_whitewater_and_reruns_bit_identical(tmp_path):
    cache = write_cache(tmp_path / "c", colliding_blocks())
    liquid_before = {f: open(CacheReader(cache).frame_path(f), "rb").read() for f in CacheReader(cache).frames}
    a = stage.run(cache, MANUAL)
    assert a["emitted"] > 0 and a["processed"] == 8
    first = {f: stage.read_frame(cache, f) for f in range(1, 9)}
    b = stage.run(cache, MANUAL, restart=True)
    assert b["processed"] == 8 and a["emitted"] == b["emitted"]
    for f in range(1, 9):
        again = stage.read_frame(cache, f)
        for name in stage.ATTRIBUTES:
            assert np.array_equal(first[f][name], again[name]), (f, name)
    # the liquid's cache is untouched by whitewater runs
    assert {f: open(CacheReader(cache).frame_path(f), "rb").read() for f in CacheReader(cache).frames} == liquid_before
    # the same settings again keep every frame; another seed redoes them and places the particles differently
    assert stage.run(cache, MANUAL)["processed"] == 0
    assert stage.run(cache, sm.WhitewaterSettings(**{**MANUAL.__dict__, "seed": 7}))["processed"] == 8
    assert not np.array_equal(stage.read_frame(cache, 8)["position"], first[8]["position"])


def test_cancel_keeps_frames_and_resume_matches(tmp_path):
    cache = write_cache(tmp_path / "c", colliding_blocks())
    stage.run(cache, MANUAL)
    whole = {f: stage.read_frame(cache, f) for f in range(1, 9)}
    calls = []

    def cancel():
        calls.append(1)
        return len(calls) > 5  # after five frames

    with pytest.raises(BakeCancelled):
        stage.run(cache, MANUAL, cancel=cancel, restart=True)
    doc = manifest(cache)
    assert doc["status"] == "cancelled" and doc["frames"] == [1, 2, 3, 4, 5]
    resumed = stage.run(cache, MANUAL)
    assert resumed["kept"] == 5 and resumed["processed"] == 3
    doc = manifest(cache)
    assert doc["status"] == "complete" and doc["frames"] == list(range(1, 9))
    for f in range(1, 9):
        again = stage.read_frame(cache, f)
        for name in stage.ATTRIBUTES:
            assert np.array_equal(whole[f][name], again[name]), (f, name)


def test_sequential_stage_redoes_everything_after_a_changed_frame(tmp_path):
    cache = write_cache(tmp_path / "c", colliding_blocks())
    stage.run(cache, MANUAL)
    # frame 4 of the liquid changes (a resumed bake rewrote it): frames 4-8 depend on it, 1-3 do not
    reader = CacheReader(cache)
    arrays = reader.read_frame(4)
    with open(reader.frame_path(4), "wb") as fh:
        np.savez(fh, **dict(arrays, velocity=arrays["velocity"] * 1.5))
    again = stage.run(cache, MANUAL)
    assert again["kept"] == 3 and again["processed"] == 5


def test_amounts_per_kind_and_cap(tmp_path):
    cache = write_cache(tmp_path / "c", colliding_blocks())
    base = stage.run(cache, MANUAL)
    foam_only = stage.run(cache, sm.WhitewaterSettings(**{**MANUAL.__dict__, "spray_amount": 0.0,
                                                         "bubble_amount": 0.0}))
    assert 0 < foam_only["emitted"] < base["emitted"]
    doc = manifest(cache)
    # newborns are all foam: every particle's kind at its first frame
    for f in doc["frames"]:
        ww = stage.read_frame(cache, f)
        assert np.all(ww["kind"][ww["age"] == 0] == kernels.FOAM)
    assert sum(doc["state"]["stats"][str(f)]["emitted"] for f in doc["frames"]) == foam_only["emitted"]
    # twice every amount: about twice the particles (the draws differ, so not exactly)
    double = stage.run(cache, sm.WhitewaterSettings(**{**MANUAL.__dict__, "spray_amount": 2.0, "foam_amount": 2.0,
                                                      "bubble_amount": 2.0}))
    assert 1.6 * base["emitted"] < double["emitted"] < 2.4 * base["emitted"]
    capped = stage.run(cache, sm.WhitewaterSettings(**{**MANUAL.__dict__, "max_particles": 10}))
    assert capped["capped"] > 0 and "cap of 10" in capped["message"]
    assert all(len(stage.read_frame(cache, f)["id"]) <= 10 for f in range(1, 9))


def test_settings_validation_names_the_setting():
    with pytest.raises(InvalidSettingsError, match="Trapped Air Max"):
        sm.whitewater_from_dict({"use_auto_thresholds": False, "trapped_air_min": 5.0, "trapped_air_max": 2.0})
    with pytest.raises(InvalidSettingsError, match="unknown setting"):
        sm.whitewater_from_dict({"foam": 1.0})
    assert sm.whitewater_from_dict({"seed": 4}).seed == 4


def test_bytes_per_particle():
    state = model.Diffuse.empty(1000)
    assert state.nbytes / 1000 == 37


# -- colliders and containers -----------------------------------------------------------------------------

#: Inner corners of a tank half a spacing outside the colliding blocks (the gap a baked liquid keeps to
#: its walls): the blocks fly apart along x at 3 m/s, so spray crosses these walls within a frame.
TANK_LO = np.full(3, -0.5 * DX)
TANK_HI = np.array([16.1 * DX, 7.5 * DX, 7.5 * DX])


def _walls(kind):
    """The tank of the colliding blocks as a box container, as a mesh container (a convex polytope) or
    as two open sheets across x (shells: distance grids)."""
    from helpers import box_mesh, quad

    from engine.scene import BoxContainer, MeshCollider

    if kind == "box":
        return {"containers": [BoxContainer("Tank", TANK_LO, TANK_HI)]}
    if kind == "mesh":
        return {"colliders": [MeshCollider("Tank", box_mesh(TANK_LO, TANK_HI),
                                           sm.ColliderSettings(collider_mode="CONTAINER"))]}
    span = (0.0, 0.8, 0.0), (0.0, 0.0, 0.8)
    return {"colliders": [MeshCollider(f"Sheet{i}", quad((x, -0.3, -0.3), *span, n=4),
                                       sm.ColliderSettings(collider_mode="SHELL"))
                          for i, x in enumerate((TANK_LO[0], TANK_HI[0]))]}


def _save_job(cache, frames, **objects):
    from engine.scene import SceneDescription, save_job

    scene = SceneDescription(frame_start=1, frame_end=frames, fps=24.0, **objects)
    save_job(os.path.join(cache, "job"), scene, sm.SimulationSettings(particle_spacing=DX))


@pytest.mark.parametrize("kind", ["box", "mesh", "shell"])
def test_whitewater_stays_inside_the_bakes_walls(tmp_path, kind):
    # the same splash with and without the job's walls: without them spray leaves the tank (so the
    # check below would see a leak), with them no diffuse particle of any frame is past a wall
    cache = write_cache(tmp_path / "c", colliding_blocks())
    free = stage.run(cache, MANUAL)
    outside = [np.sum((ww["position"][:, 0] < TANK_LO[0]) | (ww["position"][:, 0] > TANK_HI[0]))
               for ww in (stage.read_frame(cache, f) for f in range(1, 9))]
    assert free["emitted"] > 0 and sum(outside) > 100, outside
    _save_job(cache, 8, **_walls(kind))
    walled = stage.run(cache, MANUAL, restart=True)  # the same liquid frames: only the job is new
    assert walled["processed"] == 8 and walled["emitted"] > 0
    # no particle past a wall (or a sheet); float32 positions round by ~2e-8 m
    lo, hi = TANK_LO[0] - 1e-6, TANK_HI[0] + 1e-6
    stats = manifest(cache)["state"]["stats"]
    for f in range(1, 9):
        x = stage.read_frame(cache, f)["position"].astype(np.float64)
        assert np.all((x[:, 0] >= lo) & (x[:, 0] <= hi)), (kind, f, x[:, 0].min(), x[:, 0].max())
        if kind != "shell":  # the closed tanks hold every side
            assert np.all((x >= TANK_LO - 1e-6) & (x <= TANK_HI + 1e-6)), (kind, f)
    assert sum(s["contacts"] for s in stats.values()) > 0
    # the walls changed nothing but the contacts: a rerun is bit-identical
    first = stage.read_frame(cache, 8)
    stage.run(cache, MANUAL, restart=True)
    for name in stage.ATTRIBUTES:
        assert np.array_equal(stage.read_frame(cache, 8)[name], first[name]), name


def test_spray_on_a_wall_dissolves():
    # one spray particle thrown at a tank wall: it stays on the wall and its lifetime runs down there
    from engine.scene import BoxContainer, SceneDescription
    from engine.whitewater.obstacles import Obstacles

    x = lattice(6, 6, 3)
    scene = SceneDescription(containers=[BoxContainer("Tank", [-0.5 * DX] * 3, [0.2, 0.2, 0.3])])
    walls = Obstacles(scene, sm.SimulationSettings(particle_spacing=DX), x)
    walls.set_frame(1)
    liquid = model.LiquidFrame(x, np.zeros_like(x), np.arange(len(x)), DX, walls)
    state = model.Diffuse.empty(1)
    state.position[0] = (0.15, 0.1, 0.2)
    state.velocity[0] = (4.0, 0.0, 0.0)
    state.lifetime[0] = 0.1
    s = sm.WhitewaterSettings(trapped_air_rate=0.0, wave_crest_rate=0.0, spray_drag=0.0)
    state, _, stats = model.step(state, liquid, 2, 1 / 24, 1, s, model.Thresholds.manual(s), DX, G)
    assert stats.contacts == 1 and state.position[0, 0] == pytest.approx(0.2, abs=1e-7)
    assert state.lifetime[0] == pytest.approx(0.1 - 1 / 24, abs=1e-6)  # wet: running down
    # it slides down the wall (no contact while it only touches it), lands on the floor and dissolves there
    for f in range(3, 20):
        state, _, _ = model.step(state, liquid, f, 1 / 24, 1, s, model.Thresholds.manual(s), DX, G)
        if len(state) == 0:
            break
        assert state.position[0, 0] == pytest.approx(0.2, abs=1e-7) and state.position[0, 2] >= -0.5 * DX - 1e-7
    assert len(state) == 0


def test_walls_are_not_a_free_surface():
    # a block resting on a tank's floor against three of its walls: without the walls every face of the
    # block is surface; with them only the top is (the floor and walls make no crest or curvature)
    from engine.scene import BoxContainer, SceneDescription
    from engine.whitewater.obstacles import Obstacles

    x = lattice(10, 10, 6)
    scene = SceneDescription(containers=[BoxContainer("Tank", [-0.5 * DX] * 3, [0.5, 9.5 * DX, 0.5])])
    walls = Obstacles(scene, sm.SimulationSettings(particle_spacing=DX), x)
    walls.set_frame(1)
    v = np.zeros_like(x)
    free = model.LiquidFrame(x, v, np.arange(len(x)), DX)
    walled = model.LiquidFrame(x, v, np.arange(len(x)), DX, walls)
    free.potentials(), walled.potentials()
    surface = lambda lf: np.any(lf.normal != 0.0, axis=1)  # noqa: E731
    assert np.any(surface(free) & (free.x[:, 2] < 2 * DX))  # the bottom counts without the floor
    # against the floor and the walls at x = 0, y = 0 and y = 9.5 dx nothing is surface; the side facing
    # the open tank (x = 9 dx; the tank goes on to 0.5 m) and the top stay surface
    low = walled.x[:, 2] < 3.5 * DX
    assert not np.any(surface(walled) & low & (walled.x[:, 0] < 7.5 * DX))
    assert np.any(surface(walled) & low & (walled.x[:, 0] > 8.5 * DX))
    top = ((walled.x[:, 2] > 4.5 * DX) & (np.abs(walled.x[:, 1] - 4.5 * DX) < 2 * DX)
           & (np.abs(walled.x[:, 0] - 4.5 * DX) < 2 * DX))
    assert np.all(surface(walled)[top])
    np.testing.assert_array_equal(walled.normal[top], free.normal[top])


# -- inside the particle bake -----------------------------------------------------------------------------

#: Low thresholds for the small, coarse splash below (a 0.2 m column at 2.5 cm spacing, 96 particles).
SPLASH = sm.WhitewaterSettings(use_auto_thresholds=False, trapped_air_min=0.2, trapped_air_max=2.0,
                               wave_crest_min=0.2, wave_crest_max=1.0, energy_min=0.1, energy_max=2.0,
                               trapped_air_rate=400.0, wave_crest_rate=400.0)


@pytest.mark.slow  # a bake of many frames: in the full suite, not the fast layer
def test_whitewater_inside_the_bake_equals_the_stage_afterwards(tmp_path):
    # engine.cli bake --whitewater makes every frame's whitewater as the frame is written; with the same
    # (manual) thresholds it is bit for bit what the stage over the finished cache makes. Automatic
    # thresholds inside the bake come from the frames so far: a different run, so another settings hash
    import json
    import subprocess
    import sys

    from helpers import column_scene

    from engine.scene import save_job

    root = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
    cache = str(tmp_path / "cache")
    job = os.path.join(cache, "job")  # where a bake from Blender keeps it, and where the stage looks
    save_job(job, column_scene(water=(0.1, 0.075, 0.2), tank=(0.4, 0.075, 0.3), frames=(1, 9)),
             sm.SimulationSettings(particle_spacing=0.025))
    settings_file = str(tmp_path / "whitewater.json")
    with open(settings_file, "w") as fh:
        json.dump(SPLASH.__dict__, fh)
    out = subprocess.run([sys.executable, "-m", "engine.cli", "bake", job, cache, "--whitewater", settings_file],
                         cwd=root, env=dict(os.environ, PYTHONPATH=root), capture_output=True, text=True,
                         timeout=600)
    assert out.returncode == 0, out.stderr
    frames = [json.loads(line) for line in out.stdout.splitlines() if '"frame"' in line]
    assert [e["frame"] for e in frames] == list(range(2, 10)) and all("whitewater_seconds" in e for e in frames)
    doc = manifest(cache)
    assert doc["frames"] == list(range(1, 10)) and doc["status"] == "complete"
    made = {f: stage.read_frame(cache, f) for f in doc["frames"]}
    assert sum(e["whitewater_emitted"] for e in frames) > 0
    # the tank is known inside the bake as afterwards: nothing outside it
    for f, ww in made.items():
        assert np.all((ww["position"] >= -1e-6) & (ww["position"] <= np.array([0.4, 0.075, 0.3]) + 1e-6)), f
    # the same settings over the finished cache: nothing to redo, and redone from scratch the same bits
    assert stage.run(cache, SPLASH)["processed"] == 0
    assert stage.run(cache, SPLASH, restart=True)["processed"] == 9
    for f, ww in made.items():
        again = stage.read_frame(cache, f)
        for name in stage.ATTRIBUTES:
            assert np.array_equal(ww[name], again[name]), (f, name)
    # automatic thresholds from the frames so far, frame by frame
    auto = stage.make_stage(CacheReader(cache).manifest, {}, {"in_bake": "1"})
    assert auto.settings["thresholds_from"] == "frames so far"
    assert "thresholds_from" not in stage.make_stage(CacheReader(cache).manifest, {}, {}).settings


# -- dam breaks (baked; slow) -----------------------------------------------------------------------------

#: Thresholds for the dam breaks, fixed so that the columns are measured with the same yardstick
#: (automatic thresholds scale with each shot). The rates are raised: at 1.6 cm spacing the columns
#: have 400 to 800 particles, and the default rates make too few whitewater particles to count on.
DAM = sm.WhitewaterSettings(use_auto_thresholds=False, trapped_air_min=0.8, trapped_air_max=4.0, wave_crest_min=0.6,
                            wave_crest_max=3.0, energy_min=0.8, energy_max=8.0, trapped_air_rate=400.0,
                            wave_crest_rate=400.0)
TANK = 0.48  # m, length of the tank; the column stands against x = 0

#: For the impact test: minima between what the collapse makes and what the impact makes, measured on
#: these dam breaks (with the tank's walls): while a column only collapses and runs along the floor
#: its trapped-air potential peaks at 1.50-1.61 m/s whatever its height (the shear of the collapse)
#: and the running surge's tip reaches a wave crest of 0.42-0.91; when the surge hits the far wall the
#: trapped air jumps to 3.0-3.7 m/s and the overturning wave's crests reach 1.0-1.9. Rates four
#: times DAM's: more particles to count at this coarse spacing (emission is proportional to them).
IMPACT = sm.WhitewaterSettings(**{**DAM.__dict__, "trapped_air_min": 2.0, "wave_crest_min": 1.0,
                                  "trapped_air_rate": 1600.0, "wave_crest_rate": 1600.0})


HEIGHTS = (0.16, 0.24, 0.32)  # m, the columns (0.12 m wide) of the three dam breaks


def _dam_break(tmp_path_factory, height):
    from helpers import column_scene

    from engine import driver
    from engine.scene import save_job

    cache = str(tmp_path_factory.mktemp(f"dam_{height}"))
    job = str(tmp_path_factory.mktemp(f"job_{height}"))
    scene = column_scene(water=(0.12, 0.08, height), tank=(TANK, 0.08, 0.4), frames=(1, 25))
    settings = sm.SimulationSettings(particle_spacing=0.016)
    save_job(job, scene, settings)
    driver.bake(scene, settings, cache,
                job_dir=job)  # records the job (the tank) in <cache>/job, as a bake from Blender
    return cache


@pytest.fixture(scope="module")
def dam_breaks(tmp_path_factory):
    return {h: _dam_break(tmp_path_factory, h) for h in HEIGHTS}


def _impact_frame(cache):
    """First frame at which the surge front reaches the far wall (within two spacings)."""
    r = CacheReader(cache)
    for f in r.frames:
        if r.read_frame(f)["position"][:, 0].max() > TANK - 0.032:
            return f
    return None


def _check_impact(cache, height, settings):
    """Run the stage over one dam break; check that nothing is made before the surge reaches the far wall
    and nothing in the calm region behind the wave; return how many particles were made."""
    result = stage.run(cache, settings, restart=True)
    stats = manifest(cache)["state"]["stats"]
    per_frame = {int(f): s["emitted"] for f, s in stats.items()}
    impact = _impact_frame(cache)
    assert impact is not None
    # (almost) nothing before the surge reaches the far wall: the collapsing column and the surge
    # running along the floor are no splash (the floor and the walls make no wave crest). A few
    # particles may come from the thin tip of the surge: which ones is chaotic at this coarse spacing
    # (the same bake with the correction's kernel slopes stored in float32 instead of uint16, i.e. only
    # float rounding changed, made 0, 1 or 23 of a shot's 280-840 before the impact, at most 3 %); the
    # earlier rule made 1,070-3,043 before it, more than the whole shot makes now
    before = sum(n for f, n in per_frame.items() if f < impact)
    assert before <= 0.05 * result["emitted"], (height, impact, per_frame)
    # none in the calm region behind the wave: the back of the reservoir while the wave climbs the far wall
    for f in range(impact, min(impact + 6, max(per_frame) + 1)):
        ww = stage.read_frame(cache, f)
        assert not np.any((ww["age"] == 0) & (ww["position"][:, 0] < 0.06)), (height, f)
    return result["emitted"]


#: What an artist gets: every setting at its default, automatic thresholds.
AUTO_DAM = sm.WhitewaterSettings()


@pytest.mark.slow
def test_dam_break_whitewater_follows_the_impact(dam_breaks):
    # the automatic thresholds come from each shot's own peak (engine.whitewater.model.auto_thresholds):
    # the impact on the far wall sets it, the column's collapse reaches at most about half of it (the
    # earlier rule, a tenth of the mean per-frame maximum, made 1,070-3,043 particles before the impact)
    emitted = {height: _check_impact(cache, height, AUTO_DAM) for height, cache in dam_breaks.items()}
    # every shot makes whitewater at its impact, the highest column more than the lowest. Each shot is
    # measured against its own peak, so the counts follow the liquid that takes part in the impact, and
    # at this coarse spacing that is chaotic in the middle: float rounding alone (the density pass's
    # sums in another order) moved them from 322, 507 and 818 particles to 325, 771 and 498. The
    # manual thresholds below, one yardstick for the three, check the growth with the height.
    counts = [emitted[h] for h in HEIGHTS]
    assert 0 < counts[0] < counts[2] and counts[1] > 0, emitted


@pytest.mark.slow
def test_dam_break_whitewater_follows_the_impact_manual_thresholds(dam_breaks):
    # the same with the thresholds set by hand (IMPACT), the same yardstick for the three columns
    emitted = {height: _check_impact(cache, height, IMPACT) for height, cache in dam_breaks.items()}
    # a higher column hits harder (the front's kinetic energy per mass grows with the height): more
    # whitewater each time, and faster than the height (measured: 0-3, 23-28 and 86-101 particles,
    # the spread from float rounding alone, see _check_impact: the lowest column's impact sits at
    # these thresholds)
    counts = [emitted[h] for h in HEIGHTS]
    assert 0 < counts[1] and 2 * counts[0] < counts[1] and 2 * counts[1] < counts[2], emitted


@pytest.mark.slow
def test_dam_break_classification_against_the_liquid(dam_breaks):
    cache = dam_breaks[0.32]
    stage.run(cache, DAM)
    reader = CacheReader(cache)
    dx = 0.016
    nearest = {0: [], 1: [], 2: []}
    for f in manifest(cache)["frames"]:
        ww = stage.read_frame(cache, f)
        liquid = reader.read_frame(f)["position"].astype(np.float64)
        for p, kind in zip(ww["position"].astype(np.float64), ww["kind"]):
            r = np.linalg.norm(liquid - p, axis=1)
            n = int(np.sum(r < 2 * dx))
            if kind == kernels.SPRAY:
                assert n < 6  # outside the liquid
            elif kind == kernels.FOAM:
                assert 6 <= n <= 20
            else:
                assert n > 20
            nearest[int(kind)].append(r.min() / dx)
    spray, foam, bubbles = (np.array(nearest[k]) for k in (0, 1, 2))
    assert len(spray) and len(foam) and len(bubbles)
    # foam at the surface: every foam particle within 2 spacings of a liquid particle's centre and 95 %
    # within 1.5 (measured: median 0.76, 95th percentile 1.23, largest 1.67); bubbles among the liquid
    # particles (largest 0.88); spray away from it, farther than the foam. The spray's median distance
    # is chaotic at this coarse spacing: the same bake with gravity scaled by 1 +- 1e-5 to 2e-4 gave
    # medians of 1.46-2.80 spacings in ten runs of the engine before XSPH read its kernel values from
    # the density pass's slope codes, 1.20-2.28 in ten runs after (a bound of 2 failed 4 of the ten
    # before); hence 1.0, above the foam's median and the bubbles' largest distance
    assert foam.max() < 2.0 and np.percentile(foam, 95) < 1.5
    assert bubbles.max() < 1.0
    assert np.median(spray) > 1.0 and np.median(spray) > np.median(foam)
