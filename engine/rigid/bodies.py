"""Rigid bodies as the engine takes them: mass properties, contact samples, the model and the state.

:class:`RigidModel` holds what does not change during a bake (per body: mass, inertia, centre of mass
in the rest frame, contact samples, friction, bounce, damping, animation for the kinematic phase),
:class:`RigidState` what does (centre of mass, orientation, velocities, the liquid's impulses not yet
applied). Arrays are per body, in the scene's order of bodies.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np

from .mass import MassProperties, mass_properties, volume_integrals
from .motion import quaternion_of

#: Most contact samples on one body: a finer surface is sampled more coarsely than the spacing.
MAX_SAMPLES = 6000


def surface_samples(vertices: np.ndarray, triangles: np.ndarray, spacing: float) -> tuple[np.ndarray, np.ndarray]:
    """Points on a mesh's surface at most ``spacing`` apart along each triangle (its vertices, points along
    its edges and a barycentric lattice across it), each once, and the outward unit normal there (the
    area-weighted mean of the normals of the triangles a point lies on: a box's corner gets the diagonal).
    At most :data:`MAX_SAMPLES` points (the spacing grows until they fit). Returns (S, 3), (S, 3) float64."""
    v = np.asarray(vertices, dtype=np.float64)
    t = np.asarray(triangles, dtype=np.int64)
    a, b, c = v[t[:, 0]], v[t[:, 1]], v[t[:, 2]]
    cross = np.cross(b - a, c - a)               # outward normal times twice the area
    longest = np.max(np.stack([np.linalg.norm(b - a, axis=1), np.linalg.norm(c - b, axis=1),
                               np.linalg.norm(a - c, axis=1)]), axis=0)
    step = float(spacing)
    while True:
        n = np.maximum(1, np.ceil(longest / step - 1e-9)).astype(np.int64)
        if int(np.sum((n + 1) * (n + 2) // 2)) <= 4 * MAX_SAMPLES:
            break
        step *= 1.5
    pts, nrm = [], []
    for k in np.unique(n):
        rows = np.nonzero(n == k)[0]
        i, j = np.meshgrid(np.arange(k + 1), np.arange(k + 1), indexing="ij")
        keep = i + j <= k
        u, w = i[keep] / k, j[keep] / k
        pts.append((a[rows, None] * (1.0 - u - w)[None, :, None] + b[rows, None] * u[None, :, None]
                    + c[rows, None] * w[None, :, None]).reshape(-1, 3))
        nrm.append(np.repeat(cross[rows], len(u), axis=0))
    pts, nrm = np.concatenate(pts), np.concatenate(nrm)
    key = np.round(pts / (1e-6 * step)).astype(np.int64)
    _, first, inverse = np.unique(key, axis=0, return_index=True, return_inverse=True)
    summed = np.zeros((len(first), 3))
    np.add.at(summed, inverse.reshape(-1), nrm)
    order = np.argsort(first)
    pts, summed = pts[first[order]], summed[order]
    length = np.linalg.norm(summed, axis=1)
    normals = np.divide(summed, length[:, None], out=np.zeros_like(summed), where=length[:, None] > 0.0)
    if len(pts) > MAX_SAMPLES:
        keep = np.linspace(0, len(pts) - 1, MAX_SAMPLES).astype(np.int64)
        pts, normals = pts[keep], normals[keep]
    return pts, normals


def body_mass(mesh, settings) -> MassProperties:
    """Mass properties of a body from its closed mesh and its settings (density, or a total mass spread
    uniformly over the volume)."""
    unit = mass_properties(mesh.vertices, mesh.triangles, 1.0)
    if unit.volume <= 0.0:
        return unit
    density = settings.density if settings.mass_mode == "DENSITY" else settings.mass / unit.volume
    return MassProperties(unit.volume, density * unit.volume, unit.centre, density * unit.inertia)


@dataclass(frozen=True)
class RigidModel:
    """What a bake's rigid bodies keep for the whole bake (B bodies, S samples in all).

    Attributes
    ----------
    names : tuple of str
    mass : ndarray (B,), kg
    inertia : ndarray (B, 3, 3), kg m^2, about the centre of mass, rest-frame axes
    inv_inertia : ndarray (B, 3, 3), 1 / (kg m^2)
    centre : ndarray (B, 3), m: the centre of mass in the rest frame
    samples : ndarray (S, 3), m: contact samples, rest frame, from the centre of mass
    normals : ndarray (S, 3): the outward surface normal at each sample, rest frame
    sample_start : ndarray (B + 1,), int64: body b's samples are ``samples[sample_start[b]:sample_start[b + 1]]``
    radius : ndarray (B,), m: the farthest sample from the centre of mass
    friction, bounce : ndarray (B,): contact friction coefficient and restitution
    linear_damping, angular_damping : ndarray (B,): fraction of the velocity lost per second
    """

    names: tuple
    mass: np.ndarray
    inertia: np.ndarray
    inv_inertia: np.ndarray
    centre: np.ndarray
    samples: np.ndarray
    normals: np.ndarray
    sample_start: np.ndarray
    radius: np.ndarray
    friction: np.ndarray
    bounce: np.ndarray
    linear_damping: np.ndarray
    angular_damping: np.ndarray
    volume: np.ndarray = field(default_factory=lambda: np.zeros(0))

    def __len__(self) -> int:
        return len(self.names)


def make_model(names, meshes, masses: list[MassProperties], friction, bounce, linear_damping, angular_damping,
               spacing: float) -> RigidModel:
    """The :class:`RigidModel` of bodies given by their rest meshes and mass properties."""
    samples, normals, starts, radius = [], [], [0], []
    for mesh, mp in zip(meshes, masses):
        s, nrm = surface_samples(mesh.vertices, mesh.triangles, spacing)
        s = s - mp.centre
        if volume_integrals(mesh.vertices - mp.centre, mesh.triangles)[0] < 0.0:  # wound inward
            nrm = -nrm
        samples.append(s)
        normals.append(nrm)
        starts.append(starts[-1] + len(s))
        radius.append(float(np.max(np.linalg.norm(s, axis=1))))
    inertia = np.array([mp.inertia for mp in masses]).reshape(-1, 3, 3)
    return RigidModel(names=tuple(names), mass=np.array([mp.mass for mp in masses], dtype=np.float64),
                      inertia=inertia, inv_inertia=np.array([np.linalg.inv(i) for i in inertia]).reshape(-1, 3, 3),
                      centre=np.array([mp.centre for mp in masses]).reshape(-1, 3),
                      samples=np.ascontiguousarray(np.concatenate(samples) if samples else np.zeros((0, 3))),
                      normals=np.ascontiguousarray(np.concatenate(normals) if normals else np.zeros((0, 3))),
                      sample_start=np.array(starts, dtype=np.int64), radius=np.array(radius, dtype=np.float64),
                      friction=np.asarray(friction, dtype=np.float64).reshape(-1),
                      bounce=np.asarray(bounce, dtype=np.float64).reshape(-1),
                      linear_damping=np.asarray(linear_damping, dtype=np.float64).reshape(-1),
                      angular_damping=np.asarray(angular_damping, dtype=np.float64).reshape(-1),
                      volume=np.array([mp.volume for mp in masses], dtype=np.float64))


@dataclass
class RigidState:
    """What changes: per body the centre of mass ``x`` (B, 3) m, orientation ``q`` (B, 4) (w, x, y, z) from
    the rest frame, velocity ``v`` (B, 3) m/s, angular velocity ``w`` (B, 3) rad/s (world axes), and the
    liquid's impulse ``impulse`` (B, 3) N s and angular impulse ``angular_impulse`` (B, 3) N m s about
    the centre of mass, received in the last substep and applied at the next."""

    x: np.ndarray
    q: np.ndarray
    v: np.ndarray
    w: np.ndarray
    impulse: np.ndarray
    angular_impulse: np.ndarray

    @classmethod
    def at_rest(cls, centre: np.ndarray) -> RigidState:
        n = centre.shape[0]
        q = np.zeros((n, 4))
        q[:, 0] = 1.0
        return cls(np.array(centre, dtype=np.float64).reshape(-1, 3), q, np.zeros((n, 3)), np.zeros((n, 3)),
                   np.zeros((n, 3)), np.zeros((n, 3)))

    def arrays(self) -> dict:
        return {"x": self.x, "q": self.q, "v": self.v, "w": self.w, "impulse": self.impulse,
                "angular_impulse": self.angular_impulse}

    @classmethod
    def from_arrays(cls, arrays: dict) -> RigidState:
        return cls(*(np.array(arrays[k], dtype=np.float64) for k in
                     ("x", "q", "v", "w", "impulse", "angular_impulse")))


def pose_from_matrix(matrix: np.ndarray, centre: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Centre of mass (3,) and orientation (4,) of a body whose rest-to-world matrix is ``matrix``."""
    m = np.asarray(matrix, dtype=np.float64)
    return m[:3, :3] @ centre + m[:3, 3], quaternion_of(m[:3, :3])
