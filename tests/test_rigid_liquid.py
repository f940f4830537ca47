"""Rigid bodies in the liquid (PBF): momentum exchanged and not created, a heavy body that sinks and
rests on the floor."""

import dataclasses

import numpy as np
import pytest

from engine.scene import BoxContainer, FluidObject
from tests.helpers import box_mesh
from tests.rigid_scenes import DX, crate, run, tank_scene

pytestmark = pytest.mark.slow


def test_jet_hitting_a_free_body_exchanges_momentum_with_it():
    # gravity off: a block of water at 2 m/s hits a free crate in a tank too large to reach. What the
    # liquid loses the crate gains: the total (with the crate's impulse of the last substep, applied at the
    # next) changes by less than 1 % of the jet's momentum (the band); the PBF correction's clamp
    # on a collapsed neighbourhood and the contact sweep are the only parts not charged to the body
    jet = FluidObject("Jet", box_mesh([-0.16, -0.06, -0.06], [0.0, 0.06, 0.06]), velocity=np.array([2.0, 0.0, 0.0]))
    body = crate("Crate", [0.08, -0.08, -0.08], [0.24, 0.08, 0.08], density=700.0, linear_damping=0.0,
                 angular_damping=0.0)
    scene = tank_scene([body], half_width=1.0, depth=0.0, fluids=[jet], gravity=(0.0, 0.0, 0.0), frames=6)
    scene = dataclasses.replace(scene, containers=(BoxContainer("Tank", [-1.0, -1.0, -1.0], [1.0, 1.0, 1.0]),))
    sim, out = run(scene)
    m = sim.solver.model.level_mass[0]
    jet_momentum = m * len(sim.solver.particles) * 2.0
    bodies = sim.bodies
    liquid = m * sim.solver.particles.v.astype(np.float64).sum(axis=0)
    body_momentum = bodies.model.mass[0] * bodies.state.v[0] + bodies.state.impulse[0]
    assert out[-1]["v"][0, 0] > 0.3                    # the crate was hit
    total = liquid + body_momentum
    np.testing.assert_allclose(total, [jet_momentum, 0.0, 0.0], rtol=0.0, atol=0.01 * jet_momentum)


def test_heavy_body_sinks_and_rests_on_the_floor():
    # a crate of twice the liquid's density released at the surface sinks, lands and stays: over its
    # last second on the floor it moves less than 0.1 spacing (no jitter, no tunnelling), and it rests
    # on the floor (within the contact's overlap allowance, 0.01 spacing)
    s = 6 * DX
    body = crate("Stone", [-s / 2, -s / 2, 0.3 - s / 2], [s / 2, s / 2, 0.3 + s / 2], density=2000.0)
    scene = tank_scene([body], frames=60)
    sim, out = run(scene)
    z = np.array([o["x"][0, 2] for o in out])
    t = np.array([o["t"] for o in out])
    last = t > t[-1] - 1.0
    np.testing.assert_allclose(z[last], s / 2, rtol=0.0, atol=0.1 * DX)
    assert np.ptp(z[last]) < 0.1 * DX
