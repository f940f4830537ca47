"""Scenes of rigid bodies in liquid shared by the physics tests (a tank of water at rest, a body in it)."""

from __future__ import annotations

import numpy as np

from engine.driver import Simulation
from engine.scene import BoxContainer, FluidObject, RigidBodyObject, SceneDescription
from engine.settings import RigidBodySettings, SimulationSettings
from tests.helpers import box_mesh

DX = 0.02


def tank_scene(bodies, half_width=0.18, depth=0.3, length=None, gravity=(0.0, 0.0, -9.81), fluids=None,
               frames=48, fps=24.0) -> SceneDescription:
    """A box tank of still water, ``depth`` deep (its walls on the particle lattice, so the first
    particles sit half a spacing from them), and the given bodies."""
    hx = half_width if length is None else length
    tank = BoxContainer("Tank", [-hx, -half_width, 0.0], [hx, half_width, max(1.0, 3 * depth)])
    water = fluids if fluids is not None else [FluidObject("Water", box_mesh([-hx, -half_width, 0.0],
                                                                            [hx, half_width, depth]))]
    return SceneDescription(fluids=water, containers=[tank], bodies=bodies, gravity=np.asarray(gravity),
                            frame_start=1, frame_end=1 + frames, fps=fps)


def crate(name, lo, hi, **settings) -> RigidBodyObject:
    return RigidBodyObject(name, box_mesh(lo, hi), RigidBodySettings(**settings))


def run(scene, seconds=None, settings=None, every=None):
    """Simulate ``scene`` frame by frame; returns (simulation, samples) with one sample per frame: time,
    the bodies' centres (B, 3), orientations (B, 4) and velocities, and the particles' positions."""
    settings = settings or SimulationSettings(particle_spacing=DX)
    sim = Simulation.start(scene, settings)
    frames = scene.frame_end - scene.frame_start if seconds is None else int(round(seconds * scene.fps))
    out = []
    for k in range(frames):
        sim.advance_frame(scene.frame_start + k + 1, 1.0 / scene.fps)
        b = sim.bodies.state
        out.append({"t": sim.solver.time, "x": b.x.copy(), "q": b.q.copy(), "v": b.v.copy(), "w": b.w.copy(),
                    "particles": sim.solver.particles.x.astype(np.float64)})
    return sim, out


def held_crate(name, lo, hi, hold, frames, fps=24.0, **settings) -> RigidBodyObject:
    """A box body that stands still (kinematic, at its mesh's pose) until ``hold`` seconds, then is released."""
    dynamic = (np.arange(frames + 1) / fps >= hold).astype(np.float64)
    return RigidBodyObject(name, box_mesh(lo, hi), RigidBodySettings(**settings),
                           transforms=np.tile(np.eye(4), (frames + 1, 1, 1)), tracks={"use_dynamic": dynamic})


def hydrostatic_level(particles: np.ndarray, centre: np.ndarray, half_width: float, tank_area: float,
                      height: float) -> float:
    """The liquid's level outside a floating box, from its mass: ``z + M / (rho0 A)``, with M the liquid's mass
    above the height ``z`` in the tank outside the box's footprint (the square of ``half_width`` about
    ``centre``'s x and y), A that region's area (``tank_area`` less the footprint) and a particle of
    mass rho0 dx^3 taken as a layer dx thick (the part of it above ``z`` counted).

    This is the level that sets the pressure at ``z`` (hydrostatics: the liquid above weighs on it,
    walls take no vertical load), whatever the liquid's packing: the highest particles are not, because a
    resting particle liquid sits closer to the walls and its upper layers closer together than on the
    lattice, so the columns' tops stand a few tenths of a spacing below this level and a strip beside a
    wall holds fewer particles than the columns next to it."""
    x = particles
    out = np.max(np.abs(x[:, :2] - np.asarray(centre)[:2]), axis=1) >= half_width
    above = np.clip((x[out, 2] + 0.5 * DX - height) / DX, 0.0, 1.0).sum()
    return height + above * DX**3 / (tank_area - 4.0 * half_width * half_width)
