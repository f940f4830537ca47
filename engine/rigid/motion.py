"""Rigid-body kinematics: unit quaternions, poses and the numba helpers the contact solver shares.

A body's pose maps its rest frame (the world frame at the first frame of the bake, where its mesh
was given) to the world: a rest point r goes to ``x + R(q) (r - c0)``, with ``x`` the centre of mass
now, ``c0`` the centre of mass in the rest frame and ``q = (w, x, y, z)`` the unit quaternion of the
rotation since the first frame. As a 4 x 4 matrix (what colliders and Blender take)::

    T = [[R, x - R c0], [0, 1]]

The orientation is advanced by the exact rotation of the angular velocity over the substep,
``q <- exp(w dt / 2) q`` (a unit quaternion stays unit; the first-order update ``q + dt/2 [w, 0] q``
of Müller et al. 2020 drifts off the unit sphere with the substep squared), and the angular velocity
back from two orientations is ``w = 2 vec(q1 q0^-1) / dt`` (Müller, Macklin, Chentanez, Jeschke & Kim
2020, "Detailed Rigid Body Simulation with Extended Position Based Dynamics", Algorithm 2).
"""

from __future__ import annotations

import math

import numpy as np
from numba import njit


@njit(inline="always", cache=True)
def quat_mul(a0, a1, a2, a3, b0, b1, b2, b3):
    """The Hamilton product a b of two quaternions (w, x, y, z)."""
    return (a0 * b0 - a1 * b1 - a2 * b2 - a3 * b3,
            a0 * b1 + a1 * b0 + a2 * b3 - a3 * b2,
            a0 * b2 - a1 * b3 + a2 * b0 + a3 * b1,
            a0 * b3 + a1 * b2 - a2 * b1 + a3 * b0)


@njit(cache=True)
def quat_matrix(q, out):
    """out (3, 3) = the rotation matrix of the unit quaternion q (w, x, y, z)."""
    w, x, y, z = q[0], q[1], q[2], q[3]
    out[0, 0] = 1.0 - 2.0 * (y * y + z * z)
    out[0, 1] = 2.0 * (x * y - w * z)
    out[0, 2] = 2.0 * (x * z + w * y)
    out[1, 0] = 2.0 * (x * y + w * z)
    out[1, 1] = 1.0 - 2.0 * (x * x + z * z)
    out[1, 2] = 2.0 * (y * z - w * x)
    out[2, 0] = 2.0 * (x * z - w * y)
    out[2, 1] = 2.0 * (y * z + w * x)
    out[2, 2] = 1.0 - 2.0 * (x * x + y * y)


@njit(cache=True)
def rotate_by(q, a0, a1, a2, scale):
    """q <- exp(scale a / 2) q in place: turn q by the rotation vector ``scale * a`` (radians), exactly."""
    t0 = a0 * scale
    t1 = a1 * scale
    t2 = a2 * scale
    angle = math.sqrt(t0 * t0 + t1 * t1 + t2 * t2)
    if angle < 1e-300:
        return
    s = math.sin(0.5 * angle) / angle
    r0, r1, r2, r3 = quat_mul(math.cos(0.5 * angle), t0 * s, t1 * s, t2 * s, q[0], q[1], q[2], q[3])
    norm = math.sqrt(r0 * r0 + r1 * r1 + r2 * r2 + r3 * r3)
    q[0] = r0 / norm
    q[1] = r1 / norm
    q[2] = r2 / norm
    q[3] = r3 / norm


@njit(cache=True)
def angular_velocity(q1, q0, inv_dt):
    """The angular velocity (rad/s, world axes) that turns q0 into q1 in one substep: 2 vec(q1 q0^-1) / dt,
    taking the shorter way round."""
    d0, d1, d2, d3 = quat_mul(q1[0], q1[1], q1[2], q1[3], q0[0], -q0[1], -q0[2], -q0[3])
    s = 2.0 * inv_dt if d0 >= 0.0 else -2.0 * inv_dt
    return d1 * s, d2 * s, d3 * s


def matrix_of(q: np.ndarray) -> np.ndarray:
    """Rotation matrix (3, 3) of a unit quaternion (w, x, y, z)."""
    out = np.empty((3, 3))
    quat_matrix(np.asarray(q, dtype=np.float64), out)
    return out


def quaternion_of(m: np.ndarray) -> np.ndarray:
    """Unit quaternion (w, x, y, z), w >= 0, of a rotation matrix (3, 3) (Shepperd's method: the largest of
    the four squared components is taken first, so no division by a small number)."""
    m = np.asarray(m, dtype=np.float64)
    tr = m[0, 0] + m[1, 1] + m[2, 2]
    k = int(np.argmax([tr, m[0, 0], m[1, 1], m[2, 2]]))
    if k == 0:
        s = 2.0 * math.sqrt(max(1.0 + tr, 0.0))
        q = [0.25 * s, (m[2, 1] - m[1, 2]) / s, (m[0, 2] - m[2, 0]) / s, (m[1, 0] - m[0, 1]) / s]
    elif k == 1:
        s = 2.0 * math.sqrt(max(1.0 + m[0, 0] - m[1, 1] - m[2, 2], 0.0))
        q = [(m[2, 1] - m[1, 2]) / s, 0.25 * s, (m[0, 1] + m[1, 0]) / s, (m[0, 2] + m[2, 0]) / s]
    elif k == 2:
        s = 2.0 * math.sqrt(max(1.0 + m[1, 1] - m[0, 0] - m[2, 2], 0.0))
        q = [(m[0, 2] - m[2, 0]) / s, (m[0, 1] + m[1, 0]) / s, 0.25 * s, (m[1, 2] + m[2, 1]) / s]
    else:
        s = 2.0 * math.sqrt(max(1.0 + m[2, 2] - m[0, 0] - m[1, 1], 0.0))
        q = [(m[1, 0] - m[0, 1]) / s, (m[0, 2] + m[2, 0]) / s, (m[1, 2] + m[2, 1]) / s, 0.25 * s]
    q = np.array(q)
    q /= np.linalg.norm(q)
    return -q if q[0] < 0.0 else q


def pose_matrix(x: np.ndarray, q: np.ndarray, c0: np.ndarray) -> np.ndarray:
    """The 4 x 4 rest-to-world matrix of a body with centre of mass x, orientation q and rest centre c0."""
    r = matrix_of(q)
    out = np.eye(4)
    out[:3, :3] = r
    out[:3, 3] = np.asarray(x, dtype=np.float64) - r @ np.asarray(c0, dtype=np.float64)
    return out
