"""Blender force fields acting on the liquid: Force, Wind, Vortex, Turbulence and Drag.

Each field (:class:`engine.scene.ForceField`) gives every particle the acceleration Blender's own
particle system gets from it (a particle of Blender's default mass, 1 kg: force and acceleration
are the same number), following ``do_physical_effector``, ``effector_falloff`` and
``get_effector_data`` in Blender's ``source/blender/blenkernel/intern/effect.cc`` (Blender 4.x-5.0)
and the manual's *Physics > Force Fields* pages. The field is evaluated in Blender units (positions
and velocities divided by the scene's unit scale, the acceleration multiplied by it), so a field
acts on the liquid at any unit scale as it acts on Blender's particles in the same scene.

Notation (per particle p with velocity v, field object at origin o with unit Z axis n):

* ``vec2 = p - o``; the field's *location* l is o for the Point shape; for Line, and for a Vortex
  of any shape but Point, the point of the Z axis nearest p, ``o + (vec2 . n) n``; for Plane the
  point of the XY plane nearest p, ``p - (vec2 . n) n``. ``vec = p - l``, ``d = |vec|``.
* falloff f: 0 on the excluded side of the Z Direction; else by Falloff type, with
  ``F(x, min, max, power) = 0 if use_max and x > max, 1 if use_min and x < min, else
  (1 + x - min)^-power`` (min = 0 when not used): Sphere ``F(d)``; Tube ``F(|vec2 . n|) F_r(r)`` with
  r the distance from the Z axis; Cone ``F(|vec2 . n|) F_r(angle from the axis, degrees)``.
* noise: the strength (and a Drag's quadratic term) each get ``sign * k / (1 + u) * noise / 128``
  added, k in 0..127 and u in [0, 1) random, sign + for k > 64 (Blender's ``wind_func``).

Forces, s the strength:

* Force: ``s f vec / d`` (with Gravitation: ``s f vec / d^3``);
* Wind: ``s f n``;
* Vortex: Point shape ``s f d (n x vec) / |n x vec|``; other shapes
  ``w = s f (n x vec2); s f (n x w) + w - v`` (it drives the velocity toward the swirl w);
* Turbulence: per axis ``s f (2 T - 1)`` with T the three-octave turbulence of gradient noise at
  ``(vec2 + n) / size`` (at ``p / size`` with Global coordinates), the axes read at (x, y, z),
  (y, z, x) and (z, x, y), as Blender does;
* Drag: ``-f (s |v| + q) v`` with s = Linear Drag and q = Quadratic Drag, each at most 2. (This is
  the formula ``effect.cc`` evaluates; it multiplies the property named Linear Drag by |v|^2.)
* every type but Drag also gets ``-flow f v`` (Wind's Flow, Vortex's Inflow): the force then
  tends to a velocity instead of accelerating without bound.

Where Surge differs from Blender's particles:

* the noise draws come from a hash of the seed, the frame and the particle's id, not from one
  random sequence in the order particles are visited: the same statistics, and a resumed bake
  draws the same numbers;
* Turbulence uses Perlin's improved gradient noise (Perlin 2002, "Improving Noise", SIGGRAPH) over
  a permutation table of its own: the same octaves, scale and range as Blender's noise basis, not
  the same pattern;
* Blender's Field Weights of the affected system, Absorption (force blocked by colliders) and the
  Surface and Every Point shapes are not simulated; the last two are refused by the export.

Fields are static or animated: the world matrix and every numeric setting are sampled per frame
by the host and interpolated linearly at each substep (:mod:`engine.scene.animation`). The force is
applied as a velocity change ``v += a dt`` before each substep of the solver.
"""

from __future__ import annotations

import math

import numpy as np
from numba import njit, prange

from ..scene import animation
from ..scene import FIELD_TYPES

#: ``kind`` codes of :data:`FIELD_DTYPE`, in the order of :data:`engine.scene.FIELD_TYPES`.
KINDS = {name: i for i, name in enumerate(FIELD_TYPES)}
FORCE, WIND, VORTEX, TURBULENCE, DRAG = (KINDS[k] for k in FIELD_TYPES)
#: ``shape``, ``falloff`` and ``z_direction`` codes.
SHAPES = {"POINT": 0, "LINE": 1, "PLANE": 2}
FALLOFFS = {"SPHERE": 0, "TUBE": 1, "CONE": 2}
Z_DIRECTIONS = {"BOTH": 0, "POSITIVE": 1, "NEGATIVE": 2}

#: One record per force field at one time (:func:`field_params`), Blender's names in brackets:
#:
#: * ``kind``, ``shape``, ``falloff`` (Falloff type), ``z_direction``: codes of :data:`KINDS`,
#:   :data:`SHAPES`, :data:`FALLOFFS`, :data:`Z_DIRECTIONS`;
#: * ``strength`` (Strength; Drag: Linear), ``flow`` (Flow; Vortex: Inflow), ``noise`` (Noise Amount),
#:   ``power`` (Falloff power), ``damp`` (Drag: Quadratic), ``size`` (Turbulence: Size), in Blender units;
#: * ``use_min``/``dist_min``, ``use_max``/``dist_max`` (Min and Max Distance), ``use_rmin``/``radial_min``,
#:   ``use_rmax``/``radial_max``, ``radial_power`` (the tube's or cone's radial falloff);
#: * ``use_global`` (Turbulence: Global), ``gravitation`` (Force: Gravitation); ``seed`` (the field's
#:   seed plus the frame: Blender reseeds every frame);
#: * ``unit``: metres per Blender unit (the field's formulas work in Blender units);
#: * ``origin`` (m) and ``axis`` (unit Z axis of the field's world matrix).
FIELD_DTYPE = np.dtype([
    ("kind", np.int64), ("shape", np.int64), ("falloff", np.int64), ("z_direction", np.int64),
    ("strength", np.float64), ("flow", np.float64), ("noise", np.float64), ("power", np.float64),
    ("use_min", np.bool_), ("dist_min", np.float64), ("use_max", np.bool_), ("dist_max", np.float64),
    ("use_rmin", np.bool_), ("radial_min", np.float64), ("use_rmax", np.bool_), ("radial_max", np.float64),
    ("radial_power", np.float64), ("size", np.float64), ("use_global", np.bool_), ("gravitation", np.bool_),
    ("damp", np.float64), ("seed", np.int64), ("unit", np.float64), ("origin", np.float64, (3,)),
    ("axis", np.float64, (3,))], align=True)

#: The gradient-noise permutation table (256 entries, repeated): a fixed shuffle of 0..255.
PERMUTATION = np.tile(np.random.default_rng(16).permutation(256), 2).astype(np.int64)

_FLT_EPSILON = 1.1920929e-07


# ---------------------------------------------------------------------------------------------
# Noise
# ---------------------------------------------------------------------------------------------

@njit(inline="always", cache=True)
def _fade(t):
    return t * t * t * (t * (t * 6.0 - 15.0) + 10.0)


@njit(inline="always", cache=True)
def _grad(h, x, y, z):
    """Dot product of (x, y, z) with one of Perlin's 12 edge gradients (16 with repeats), chosen by h."""
    h = h & 15
    u = x if h < 8 else y
    v = y if h < 4 else (x if h == 12 or h == 14 else z)
    return (u if (h & 1) == 0 else -u) + (v if (h & 2) == 0 else -v)


@njit(cache=True)
def gradient_noise(x, y, z, perm):
    """Perlin's (2002) improved gradient noise at (x, y, z), in about [-1, 1]; 0 at integer points."""
    fx, fy, fz = math.floor(x), math.floor(y), math.floor(z)
    xi, yi, zi = int(fx) & 255, int(fy) & 255, int(fz) & 255
    x, y, z = x - fx, y - fy, z - fz
    u, v, w = _fade(x), _fade(y), _fade(z)
    a = perm[xi] + yi
    aa = perm[a] + zi
    ab = perm[a + 1] + zi
    b = perm[xi + 1] + yi
    ba = perm[b] + zi
    bb = perm[b + 1] + zi
    x1 = _grad(perm[aa], x, y, z) + u * (_grad(perm[ba], x - 1.0, y, z) - _grad(perm[aa], x, y, z))
    x2 = (_grad(perm[ab], x, y - 1.0, z)
          + u * (_grad(perm[bb], x - 1.0, y - 1.0, z) - _grad(perm[ab], x, y - 1.0, z)))
    y1 = x1 + v * (x2 - x1)
    x3 = (_grad(perm[aa + 1], x, y, z - 1.0)
          + u * (_grad(perm[ba + 1], x - 1.0, y, z - 1.0) - _grad(perm[aa + 1], x, y, z - 1.0)))
    x4 = (_grad(perm[ab + 1], x, y - 1.0, z - 1.0)
          + u * (_grad(perm[bb + 1], x - 1.0, y - 1.0, z - 1.0) - _grad(perm[ab + 1], x, y - 1.0, z - 1.0)))
    y2 = x3 + v * (x4 - x3)
    return y1 + w * (y2 - y1)


@njit(cache=True)
def turbulence(size, x, y, z, perm):
    """Three octaves (amplitudes 1, 1/2, 1/4 at frequencies 1, 2, 4) of gradient noise mapped to
    [0, 1], at (x, y, z) / size, normalised by 4/7 to [0, 1]: Blender's turbulence with 2 octaves
    past the first, soft."""
    if size != 0.0:
        x, y, z = x / size, y / size, z / size
    total = 0.0
    amp = 1.0
    scale = 1.0
    for _ in range(3):
        total += (0.5 + 0.5 * gradient_noise(scale * x, scale * y, scale * z, perm)) * amp
        amp *= 0.5
        scale *= 2.0
    return total * (4.0 / 7.0)


@njit(inline="always", cache=True)
def _mix(z):
    """splitmix64 finaliser: a well-spread 64-bit hash of z."""
    z = (z ^ (z >> np.uint64(30))) * np.uint64(0xBF58476D1CE4E5B9)
    z = (z ^ (z >> np.uint64(27))) * np.uint64(0x94D049BB133111EB)
    return z ^ (z >> np.uint64(31))


@njit(cache=True)
def noise_draw(seed, pid, k, amount):
    """Blender's ``wind_func`` for draw k of particle ``pid`` in the frame keyed by ``seed``:
    ``sign * r / (1 + u) * amount / 128`` with r in 0..127 and u in [0, 1)."""
    key = (np.uint64(seed) * np.uint64(0x9E3779B97F4A7C15)) ^ (np.uint64(pid) * np.uint64(4) + np.uint64(k))
    h1 = _mix(key)
    h2 = _mix(h1 ^ np.uint64(0xD1B54A32D192ED03))
    r = float((h1 >> np.uint64(33)) % np.uint64(128))  # (a 31-bit integer + 1) % 128 in Blender
    u = float(h2 >> np.uint64(11)) * (1.0 / 9007199254740992.0)
    sign = 1.0 if r > 64.0 else -1.0
    return sign * (r / (u + 1.0)) * amount / 128.0


# ---------------------------------------------------------------------------------------------
# Falloff and forces
# ---------------------------------------------------------------------------------------------

@njit(inline="always", cache=True)
def _falloff_func(fac, use_min, mindist, use_max, maxdist, power):
    if use_max and fac > maxdist:
        return 0.0
    if use_min and fac < mindist:
        return 1.0
    if not use_min:
        mindist = 0.0
    return (1.0 + fac - mindist) ** (-power)


@njit(cache=True)
def field_acceleration(px, py, pz, vx, vy, vz, pid, fp, perm):
    """Acceleration (m/s^2) field ``fp`` (a :data:`FIELD_DTYPE` record) gives a particle at p (m) moving
    at v (m/s)."""
    unit = fp.unit
    inv = 1.0 / unit
    # Blender units
    px, py, pz, vx, vy, vz = px * inv, py * inv, pz * inv, vx * inv, vy * inv, vz * inv
    ox, oy, oz = fp.origin[0] * inv, fp.origin[1] * inv, fp.origin[2] * inv
    nx, ny, nz = fp.axis[0], fp.axis[1], fp.axis[2]
    kind = fp.kind
    shape = fp.shape
    # vec_to_point2 and the field's location
    ax, ay, az = px - ox, py - oy, pz - oz
    along = ax * nx + ay * ny + az * nz
    if shape == 1 or (shape == 2 and kind == VORTEX):
        lx, ly, lz = ox + along * nx, oy + along * ny, oz + along * nz
    elif shape == 2:
        lx, ly, lz = px - along * nx, py - along * ny, pz - along * nz
    else:
        lx, ly, lz = ox, oy, oz
    wx, wy, wz = px - lx, py - ly, pz - lz
    dist = math.sqrt(wx * wx + wy * wy + wz * wz)
    # falloff
    zdir = fp.z_direction
    if (zdir == 1 and along < 0.0) or (zdir == 2 and along > 0.0):
        return 0.0, 0.0, 0.0
    fall_type = fp.falloff
    if fall_type == 0:
        falloff = _falloff_func(dist, fp.use_min, fp.dist_min, fp.use_max, fp.dist_max, fp.power)
    else:
        falloff = _falloff_func(abs(along), fp.use_min, fp.dist_min, fp.use_max, fp.dist_max, fp.power)
        if falloff != 0.0:
            if fall_type == 1:
                rx, ry, rz = ax - along * nx, ay - along * ny, az - along * nz
                r = math.sqrt(rx * rx + ry * ry + rz * rz)
            else:
                length = math.sqrt(ax * ax + ay * ay + az * az)
                c = along / length if length > 0.0 else 1.0
                r = math.degrees(math.acos(min(max(c, -1.0), 1.0)))
            falloff *= _falloff_func(r, fp.use_rmin, fp.radial_min, fp.use_rmax, fp.radial_max, fp.radial_power)
    if not falloff > 0.0:
        return 0.0, 0.0, 0.0
    strength = fp.strength
    damp = fp.damp
    if fp.noise > 0.0:
        strength += noise_draw(fp.seed, pid, 0, fp.noise)
        if kind == DRAG:
            damp += noise_draw(fp.seed, pid, 1, fp.noise)
    sf = strength * falloff
    fx = fy = fz = 0.0
    if kind == WIND:
        fx, fy, fz = nx * sf, ny * sf, nz * sf
    elif kind == FORCE:
        if fp.gravitation:
            sf = 0.0 if dist < _FLT_EPSILON else sf / (dist * dist)
        if dist > 0.0:
            fx, fy, fz = wx / dist * sf, wy / dist * sf, wz / dist * sf
    elif kind == VORTEX:
        if shape == 0:
            cx, cy, cz = ny * wz - nz * wy, nz * wx - nx * wz, nx * wy - ny * wx
            cl = math.sqrt(cx * cx + cy * cy + cz * cz)
            if cl > 0.0:
                scale = sf * dist / cl
                fx, fy, fz = cx * scale, cy * scale, cz * scale
        else:
            tx, ty, tz = (ny * az - nz * ay) * sf, (nz * ax - nx * az) * sf, (nx * ay - ny * ax) * sf
            fx, fy, fz = (ny * tz - nz * ty) * sf, (nz * tx - nx * tz) * sf, (nx * ty - ny * tx) * sf
            fx, fy, fz = fx + tx - vx, fy + ty - vy, fz + tz - vz
    elif kind == TURBULENCE:
        if fp.use_global:
            qx, qy, qz = px, py, pz
        else:
            qx, qy, qz = ax + nx, ay + ny, az + nz
        size = fp.size
        fx = (-1.0 + 2.0 * turbulence(size, qx, qy, qz, perm)) * sf
        fy = (-1.0 + 2.0 * turbulence(size, qy, qz, qx, perm)) * sf
        fz = (-1.0 + 2.0 * turbulence(size, qz, qx, qy, perm)) * sf
    elif kind == DRAG:
        speed = math.sqrt(vx * vx + vy * vy + vz * vz)
        c = -falloff * (min(strength, 2.0) * speed + min(damp, 2.0))
        fx, fy, fz = c * vx, c * vy, c * vz
    if kind != DRAG and fp.flow != 0.0:
        c = fp.flow * falloff
        fx, fy, fz = fx - c * vx, fy - c * vy, fz - c * vz
    return fx * unit, fy * unit, fz * unit


@njit(parallel=True, cache=True)
def _accelerations(x, v, pid, params, perm,
                   # outputs
                   out):
    for i in prange(x.shape[0]):
        ax = ay = az = 0.0
        for f in range(params.shape[0]):
            fx, fy, fz = field_acceleration(np.float64(x[i, 0]), np.float64(x[i, 1]), np.float64(x[i, 2]),
                                            np.float64(v[i, 0]), np.float64(v[i, 1]), np.float64(v[i, 2]),
                                            pid[i], params[f], perm)
            ax += fx
            ay += fy
            az += fz
        out[i, 0] = ax
        out[i, 1] = ay
        out[i, 2] = az


def field_params(ff, t: float, fps: float, frame: int) -> np.ndarray:
    """The :data:`FIELD_DTYPE` record (a 0-d array) of force field ``ff`` at time t (s after the first frame).

    ``frame`` is the scene frame the noise is drawn for (Blender reseeds each frame with seed + frame).
    """
    def val(name):
        return float(animation.sample(ff.values[name], t, fps))

    m = animation.sample(ff.matrices, t, fps)
    axis = m[:3, 2]
    norm = float(np.linalg.norm(axis))
    axis = axis / norm if norm > 0.0 else np.array([0.0, 0.0, 1.0])
    fl = ff.flags
    row = np.zeros((), dtype=FIELD_DTYPE)
    row["kind"] = KINDS[ff.kind]
    row["shape"] = SHAPES[ff.shape]
    row["falloff"] = FALLOFFS[fl["falloff_type"]]
    row["z_direction"] = Z_DIRECTIONS[fl["z_direction"]]
    row["strength"] = val("linear_drag") if ff.kind == "DRAG" else val("strength")
    row["flow"] = val("flow")
    row["noise"] = val("noise")
    row["power"] = val("falloff_power")
    row["use_min"], row["dist_min"] = bool(fl["use_min_distance"]), val("distance_min")
    row["use_max"], row["dist_max"] = bool(fl["use_max_distance"]), val("distance_max")
    row["use_rmin"], row["radial_min"] = bool(fl["use_radial_min"]), val("radial_min")
    row["use_rmax"], row["radial_max"] = bool(fl["use_radial_max"]), val("radial_max")
    row["radial_power"] = val("radial_falloff")
    row["size"] = val("size")
    row["use_global"] = bool(fl["use_global_coords"])
    row["gravitation"] = bool(fl["use_gravity_falloff"])
    row["damp"] = val("quadratic_drag")
    row["seed"] = int(fl["seed"]) + int(frame)
    row["unit"] = float(ff.unit)
    row["origin"] = m[:3, 3]
    row["axis"] = axis
    return row


def accelerations(x: np.ndarray, v: np.ndarray, pid: np.ndarray, params: np.ndarray) -> np.ndarray:
    """Acceleration (N, 3), float64, m/s^2, of particles at x (N, 3), m, moving at v (N, 3), m/s, with
    ids ``pid`` (N,), from the fields of ``params`` ((K,) :data:`FIELD_DTYPE` records of :func:`field_params`)."""
    out = np.zeros((len(x), 3))
    params = np.ascontiguousarray(params, dtype=FIELD_DTYPE).reshape(-1)
    if len(x) and len(params):
        _accelerations(x, v, np.ascontiguousarray(pid, dtype=np.int64), params, PERMUTATION, out)
    return out


class Forces:
    """The scene's force fields, applied to a solver's particles before each substep."""

    def __init__(self, scene):
        self.fields = tuple(scene.force_fields)
        self.fps = float(scene.fps)
        self.frame_start = int(scene.frame_start)

    def __bool__(self) -> bool:
        return bool(self.fields)

    def params(self, t: float) -> np.ndarray:
        """The :data:`FIELD_DTYPE` records of every field at time t, (K,)."""
        frame = self.frame_start + int(math.floor(max(t, 0.0) * self.fps + 1e-9))
        return np.array([field_params(ff, t, self.fps, frame) for ff in self.fields], dtype=FIELD_DTYPE).reshape(-1)

    def kick(self, solver, t: float, dt: float) -> None:
        """v += a dt with the fields' acceleration at the middle of the substep [t, t + dt], on the
        solver's particles and, for a solver that moves liquid on a grid (the hybrid's
        ``kick_grid``), on the grid's velocities too."""
        if not self.fields:
            return
        params = self.params(t + 0.5 * dt)
        particles = solver.particles
        if len(particles):
            a = accelerations(particles.x, particles.v, particles.id, params)
            particles.v += (a * dt).astype(particles.v.dtype)
        kick_grid = getattr(solver, "kick_grid", None)
        if kick_grid is not None:
            kick_grid(lambda x, v, pid: accelerations(x, v, pid, params), dt)
