"""Rigid bodies in the liquid (PBF): momentum exchanged and not created, the liquid's weight charged in full
to the body it rests on, boxes that float at their Archimedes draft, a heavy body that sinks and rests on the
floor."""

import dataclasses

import numpy as np
import pytest

from engine.driver import Simulation
from engine.scene import BoxContainer, FluidObject
from engine.settings import SimulationSettings
from tests.helpers import box_mesh
from tests.rigid_scenes import DX, crate, held_crate, hydrostatic_level, run, tank_scene

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


def test_liquid_weight_is_charged_in_full_to_the_body_it_rests_on():
    # a kinematic slab as the whole floor of a tank of still water: what the liquid's wall push and contact
    # pass charge to it (engine.rigid.coupling) is the liquid's weight. rtol 0.02: the tank still sloshes
    # after its first compression (0.25 s means of the push wander by 1.2 %, here averaged over 0.5 s)
    hw = 6 * DX
    slab = crate("Slab", [-hw, -hw, 0.0], [hw, hw, 2 * DX], density=1000.0, use_dynamic=False)
    scene = tank_scene([slab], half_width=hw, depth=10 * DX, frames=36)
    sim = Simulation.start(scene, SimulationSettings(particle_spacing=DX))
    bodies = sim.bodies
    pushes = []
    receive = bodies.receive

    def record(impulse, moment):
        pushes.append((sim.solver.time, impulse[0].copy()))
        receive(impulse, moment)

    bodies.receive = record
    for k in range(36):
        sim.advance_frame(scene.frame_start + k + 1, 1.0 / scene.fps)
    t = np.array([p[0] for p in pushes])
    impulse = np.array([p[1] for p in pushes])
    late = t > t[-1] - 0.5
    force = impulse[late].sum(axis=0) / (t[late][-1] - t[~late][-1])
    weight = sim.solver.model.level_mass[0] * len(sim.solver.particles) * 9.81
    np.testing.assert_allclose(force, [0.0, 0.0, -weight], rtol=0.0, atol=0.02 * weight)


@pytest.mark.parametrize("ratio", [0.25, 0.5, 0.75])
def test_flat_box_floats_at_its_archimedes_draft(ratio):
    # a flat box 12 x 12 x 8 spacings (12 particles across; the issue asks for at least 10) of 0.25, 0.5
    # and 0.75 of the liquid's density, placed at that draft, held 0.25 s while the tank settles, then
    # released: over its last 0.5 s its draft (the hydrostatic level outside it from the liquid's mass,
    # tests.rigid_scenes.hydrostatic_level, less its bottom) is that fraction of its height.
    # atol 0.02 (of the height) is the band. rtol 0.05 is a shortfall of the resting PBF liquid,
    # not of the coupling (the test above charges the full weight): the liquid under a body carries 4-5 %
    # less than the column outside it at the same height (a fixed box at a draft of 0.46 h gets 0.92-0.95
    # of rho g A times that draft; more constraint iterations do not change it), so a body floats 4-5 %
    # deeper. Measured here: 0.261, 0.521, 0.787 h, steady from 1 s to 4 s. A buoyancy 10 % short moves
    # them to 0.289, 0.567, 0.845 h and fails.
    w, hh, hw, depth = 12 * DX, 8 * DX, 10 * DX, 10 * DX
    bottom = depth - ratio * hh
    frames = 48
    body = held_crate("Crate", [-w / 2, -w / 2, bottom], [w / 2, w / 2, bottom + hh], 0.25, frames,
                      density=1000.0 * ratio)
    scene = tank_scene([body], half_width=hw, depth=depth, frames=frames)
    sim, out = run(scene)
    drafts = []
    for o in out:
        if o["t"] > out[-1]["t"] - 0.5 + 1e-9:
            zb = o["x"][0, 2] - hh / 2
            drafts.append((hydrostatic_level(o["particles"], o["x"][0], w / 2, (2 * hw) ** 2, zb) - zb) / hh)
    np.testing.assert_allclose(np.mean(drafts), ratio, rtol=0.05, atol=0.02)
