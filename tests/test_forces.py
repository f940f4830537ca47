"""Blender force fields on the liquid (engine/sources/forces.py) against the formulas of Blender's effect.cc.

The reference below is written point by point from ``get_effector_data``, ``effector_falloff``,
``falloff_func`` and ``do_physical_effector`` (Blender 5.0, source/blender/blenkernel/intern/
effect.cc), in Blender units with vel_to_sec = 1 (Blender's particles). The engine's numba kernel
works in float64 like this reference, so the comparison is to rounding (rtol 1e-12, atol 1e-12
m/s^2). The trajectory tests integrate with the bake's substeps (explicit kick per substep), so
their tolerance comes from that first-order integrator: |error| <= flow dt / 2 relative.
"""

import math

import numpy as np
import pytest
from numpy.testing import assert_allclose

from engine.sources import forces
from engine.io.cache import CacheReader
from engine.driver import bake
from engine.scene import FluidObject, ForceField, SceneDescription
from engine.settings import SimulationSettings
from helpers import box_mesh


def _falloff_func(fac, use_min, mindist, use_max, maxdist, power):
    if use_max and fac > maxdist:
        return 0.0
    if use_min and fac < mindist:
        return 1.0
    if not use_min:
        mindist = 0.0
    return (1.0 + fac - mindist) ** (-power)


def reference(ff: ForceField, p, v):
    """Force per unit mass, in Blender units, of a static field (first frame) on one point."""
    val = {k: float(a[0]) for k, a in ff.values.items()}
    fl = ff.flags
    m = ff.matrices[0]
    o = m[:3, 3] / ff.unit
    n = m[:3, 2] / np.linalg.norm(m[:3, 2])
    p = np.asarray(p, float) / ff.unit
    v = np.asarray(v, float) / ff.unit
    vec2 = p - o
    if ff.shape in ("PLANE", "LINE"):
        translate = np.dot(vec2, n) * n
        loc = o + translate if (ff.kind == "VORTEX" or ff.shape == "LINE") else p - translate
    else:
        loc = o
    vec = p - loc
    distance = np.linalg.norm(vec)
    fac = np.dot(n, vec2)
    if (fl["z_direction"] == "POSITIVE" and fac < 0) or (fl["z_direction"] == "NEGATIVE" and fac > 0):
        return np.zeros(3)
    dist_args = (fl["use_min_distance"], val["distance_min"], fl["use_max_distance"], val["distance_max"],
                 val["falloff_power"])
    rad_args = (fl["use_radial_min"], val["radial_min"], fl["use_radial_max"], val["radial_max"],
                val["radial_falloff"])
    if fl["falloff_type"] == "SPHERE":
        falloff = _falloff_func(distance, *dist_args)
    elif fl["falloff_type"] == "TUBE":
        falloff = _falloff_func(abs(fac), *dist_args)
        if falloff != 0.0:
            falloff *= _falloff_func(np.linalg.norm(vec2 - fac * n), *rad_args)
    else:
        falloff = _falloff_func(abs(fac), *dist_args)
        if falloff != 0.0:
            falloff *= _falloff_func(math.degrees(math.acos(fac / np.linalg.norm(vec2))), *rad_args)
    if falloff <= 0.0:
        return np.zeros(3)
    strength = val["linear_drag"] if ff.kind == "DRAG" else val["strength"]
    if ff.kind == "WIND":
        force = n * strength * falloff
    elif ff.kind == "FORCE":
        if fl["use_gravity_falloff"]:
            strength *= distance ** -2.0
        force = vec / distance * strength * falloff
    elif ff.kind == "VORTEX":
        if ff.shape == "POINT":
            c = np.cross(n, vec)
            force = c / np.linalg.norm(c) * strength * distance * falloff
        else:
            temp = np.cross(n, vec2) * strength * falloff
            force = np.cross(n, temp) * strength * falloff + temp - v
    elif ff.kind == "TURBULENCE":
        q = p if fl["use_global_coords"] else vec2 + n
        size = val["size"]
        turb = [forces.turbulence(size, q[0], q[1], q[2], forces.PERMUTATION),
                forces.turbulence(size, q[1], q[2], q[0], forces.PERMUTATION),
                forces.turbulence(size, q[2], q[0], q[1], forces.PERMUTATION)]
        force = (-1.0 + 2.0 * np.array(turb)) * strength * falloff
    else:  # DRAG
        speed = np.linalg.norm(v)
        force = -(v / speed) * falloff * speed * (min(strength, 2.0) * speed + min(val["quadratic_drag"], 2.0))
    if ff.kind != "DRAG" and val["flow"] != 0.0:
        force = force - v * val["flow"] * falloff
    return force


def _field(kind, shape="POINT", rotation=0.4, unit=1.0, **kw):
    """A field at (0.3, -0.2, 0.1) m whose Z axis is tilted by ``rotation`` about X."""
    m = np.eye(4)
    c, s = math.cos(rotation), math.sin(rotation)
    m[:3, :3] = [[1, 0, 0], [0, c, -s], [0, s, c]]
    m[:3, 3] = [0.3, -0.2, 0.1]
    flags = {k: kw.pop(k) for k in list(kw) if k in ("falloff_type", "z_direction", "use_min_distance",
                                                     "use_max_distance", "use_radial_min", "use_radial_max",
                                                     "use_global_coords", "use_gravity_falloff", "seed")}
    return ForceField(kind.title(), kind, shape, matrices=m[None], values=kw, flags=flags, unit=unit)


CASES = [
    _field("WIND", "PLANE", strength=2.5, flow=1.0),
    _field("WIND", "PLANE", strength=-1.5, flow=0.5, falloff_type="SPHERE", falloff_power=2.0),
    _field("FORCE", "POINT", strength=-3.0, falloff_power=1.5, use_max_distance=True, distance_max=1.2),
    _field("FORCE", "POINT", strength=0.7, use_gravity_falloff=True, flow=0.3),
    _field("FORCE", "LINE", strength=1.0, falloff_type="TUBE", falloff_power=1.0, radial_falloff=2.0,
           use_radial_max=True, radial_max=0.9, use_min_distance=True, distance_min=0.2),
    _field("FORCE", "PLANE", strength=2.0, falloff_type="CONE", radial_falloff=1.0, use_radial_min=True,
           radial_min=20.0, z_direction="POSITIVE"),
    _field("VORTEX", "POINT", strength=1.2, falloff_power=0.5),
    _field("VORTEX", "PLANE", strength=0.8, flow=0.4),
    _field("VORTEX", "LINE", strength=-0.6, z_direction="NEGATIVE"),
    _field("TURBULENCE", "POINT", strength=3.0, size=0.3, flow=0.2),
    _field("TURBULENCE", "PLANE", strength=1.0, size=0.5, use_global_coords=True, falloff_power=1.0),
    _field("DRAG", "POINT", linear_drag=0.8, quadratic_drag=0.3),
    _field("DRAG", "POINT", linear_drag=3.0, quadratic_drag=2.5, falloff_power=1.0),  # both clamped to 2
    _field("WIND", "PLANE", strength=2.0, flow=1.0, unit=0.01),  # a scene modelled in centimetres
]


@pytest.mark.parametrize("ff", CASES, ids=[f"{c.kind}-{c.shape}-{i}" for i, c in enumerate(CASES)])
def test_each_field_matches_blenders_formula(ff):
    rng = np.random.default_rng(5)
    x = rng.uniform(-1.0, 1.0, (40, 3)) * ff.unit
    v = rng.uniform(-2.0, 2.0, (40, 3)) * ff.unit
    got = forces.accelerations(x, v, np.arange(40), forces.field_params(ff, 0.0, 24.0, 1)[None])
    want = np.array([reference(ff, x[i], v[i]) for i in range(40)]) * ff.unit
    assert np.any(np.abs(want) > 0.1 * ff.unit)  # the sample reaches where the field acts
    assert_allclose(got, want, rtol=1e-12, atol=1e-12)


def test_noise_varies_the_strength_as_blenders_wind_func():
    """With noise, the strength of each particle gets sign * r / (1 + u) * noise / 128 added (sign -
    for r <= 64): the force of a Wind (falloff 1) spans [s - noise / 2, s + 127 / 128 noise], differs
    between particles and frames, and is the same for the same particle, seed and frame."""
    ff = _field("WIND", "PLANE", strength=1.0, noise=2.0, seed=11)
    x = np.zeros((4000, 3))
    params = forces.field_params(ff, 0.0, 24.0, 1)[None]
    a = forces.accelerations(x, x, np.arange(4000), params)
    n = ff.matrices[0][:3, 2]
    s = a @ n
    assert -1e-9 <= s.min() < 0.2 and 2.5 < s.max() <= 1.0 + 2.0 * 127 / 128 + 1e-9
    assert_allclose(forces.accelerations(x, x, np.arange(4000), params), a, rtol=0, atol=0)
    other = forces.accelerations(x, x, np.arange(4000), forces.field_params(ff, 0.0, 24.0, 2)[None])
    assert np.mean(np.abs(other - a)) > 0.1
    # the draws: r / (1 + u) with r uniform in 0..127, u in [0, 1): mean |draw| = noise/128 * E[r] E[1/(1+u)]
    mean_abs = 2.0 / 128.0 * 63.5 * math.log(2.0)
    assert np.mean(np.abs(s - 1.0)) == pytest.approx(mean_abs, rel=0.05)  # 4000 draws: ~2 % sampling error


def test_gradient_noise_is_zero_on_the_lattice_and_bounded():
    perm = forces.PERMUTATION
    for p in [(0, 0, 0), (3, -2, 7), (-5, 1, 1)]:
        assert forces.gradient_noise(float(p[0]), float(p[1]), float(p[2]), perm) == 0.0
    rng = np.random.default_rng(1)
    values = np.array([forces.gradient_noise(*q, perm) for q in rng.uniform(-10, 10, (3000, 3))])
    assert np.abs(values).max() <= 1.0 and values.std() > 0.1
    t = np.array([forces.turbulence(0.5, *q, perm) for q in rng.uniform(-10, 10, (3000, 3))])
    assert t.min() >= 0.0 and t.max() <= 1.0 and abs(t.mean() - 0.5) < 0.02


def _one_particle_bake(tmp_path, ff, frames=25, velocity=(0.0, 0.0, 0.0)):
    drop = FluidObject("Drop", box_mesh([0.0, 0.0, 0.0], [0.02, 0.02, 0.02]), velocity=velocity)
    sc = SceneDescription(fluids=[drop], force_fields=[ff], gravity=[0, 0, 0], frame_start=1, frame_end=frames,
                          fps=24.0)
    settings = SimulationSettings(solver="PBF", particle_spacing=0.02, pbf_velocity_smoothing=0.0)
    bake(sc, settings, str(tmp_path))
    reader = CacheReader(str(tmp_path))
    return reader, [reader.read_frame(f) for f in reader.frames]


def test_a_drop_in_a_wind_reaches_the_wind_speed(tmp_path):
    """Wind of strength s and flow k on a particle at rest: dv/dt = s n - k v, v(t) = s/k (1 - e^-kt) n."""
    ff = ForceField("Wind", "WIND", "PLANE", values={"strength": 2.0, "flow": 1.0})
    reader, frames = _one_particle_bake(tmp_path, ff)
    assert len(frames[0]["id"]) == 1
    t = (np.array(reader.frames) - 1) / 24.0
    vz = np.array([f["velocity"][0, 2] for f in frames])
    want = 2.0 * (1.0 - np.exp(-t))
    # explicit kicks of at most 2 ms: relative error below k dt / 2 = 1e-3; float32 velocities
    assert_allclose(vz, want, rtol=1e-3, atol=1e-5)


def test_a_drop_slows_down_in_drag(tmp_path):
    """Drag with only the |v| term (Linear Drag 0): dv/dt = -q v, v(t) = v0 e^-qt."""
    ff = ForceField("Drag", "DRAG", "POINT", values={"linear_drag": 0.0, "quadratic_drag": 1.5})
    reader, frames = _one_particle_bake(tmp_path, ff, velocity=(1.0, 0.0, 0.0))
    t = (np.array(reader.frames) - 1) / 24.0
    vx = np.array([f["velocity"][0, 0] for f in frames])
    # explicit kicks: (1 - q dt)^n against e^-qt is q^2 t dt / 2 relative, 2.25e-3 at t = 1 s with dt = 2 ms
    assert_allclose(vx, np.exp(-1.5 * t), rtol=3e-3, atol=1e-5)


def test_a_drop_is_pushed_around_a_point_vortex(tmp_path):
    """A Point vortex pushes along n x vec with s d: a particle at rest 0.2 m from the axis starts
    moving along that direction at s d t (over 1/6 s it moves 1 cm, so d changes by under 0.1 %
    and the direction by 3 degrees: rtol 5 %)."""
    m = np.eye(4)
    m[:3, 3] = [0.01 - 0.2, 0.01, 0.01]  # the drop's single particle sits 0.2 m along +X from the axis
    ff = ForceField("Vortex", "VORTEX", "POINT", matrices=m[None], values={"strength": -4.0})
    reader, frames = _one_particle_bake(tmp_path, ff, frames=5)
    v = np.array([f["velocity"][0] for f in frames])
    t = (np.array(reader.frames) - 1) / 24.0
    assert_allclose(v[:, 1], -4.0 * 0.2 * t, rtol=0.05, atol=1e-4)  # Z x X = +Y, times s = -4
    assert np.all(np.abs(v[:, 2]) < 1e-6)
