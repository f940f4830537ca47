"""Rigid bodies without liquid (engine.rigid.world, engine.rigid.contacts): rest without jitter, stacks,
thin walls, friction, bounce, momentum, free rotation."""

import numpy as np
import pytest

from engine.assemble import make_collision
from engine.rigid.motion import matrix_of
from engine.rigid.world import RigidWorld
from engine.scene import BoxContainer, MeshCollider, RigidBodyObject, SceneDescription, TriangleMesh
from engine.settings import ColliderSettings, RigidBodySettings, SimulationSettings
from tests.helpers import box_mesh

DX = 0.02
G = np.array([0.0, 0.0, -9.81])


def make_world(bodies, colliders=(), containers=(), fps=24.0):
    scene = SceneDescription(containers=containers, colliders=colliders, bodies=bodies, fps=fps)
    settings = SimulationSettings(particle_spacing=DX)
    collision = make_collision(scene, settings, np.zeros((0, 3)))
    return RigidWorld.from_scene(scene, settings, collision)


def run(world, seconds, gravity=G, dt=0.002):
    t = world.time
    while t < seconds - 1e-12:
        h = min(dt, world.dt_limit(), seconds - t)
        world.step(t, h, gravity)
        t += h
    return world


def crate(name, lo, hi, **settings):
    return RigidBodyObject(name, box_mesh(lo, hi), RigidBodySettings(**settings))


TANK = BoxContainer("Tank", [-1.0, -1.0, 0.0], [1.0, 1.0, 2.0])


def test_box_comes_to_rest_on_the_floor_without_jitter():
    world = make_world([crate("Crate", [-0.1, -0.1, 0.01], [0.1, 0.1, 0.21])], containers=[TANK])
    run(world, 0.5)
    z_rest = world.state.x[0, 2]
    run(world, 1.5)
    # the floor holds it where it landed: within the overlap the position pass leaves (SLOP = 0.01 dx)
    np.testing.assert_allclose(world.state.x[0], [0.0, 0.0, 0.1], rtol=0.0, atol=0.01 * DX)
    # warm-started contacts hold it still: no drift and no velocity beyond round-off
    np.testing.assert_allclose(world.state.x[0, 2], z_rest, rtol=0.0, atol=1e-9)
    np.testing.assert_allclose(world.state.v[0], 0.0, rtol=0.0, atol=1e-9)
    np.testing.assert_allclose(world.state.w[0], 0.0, rtol=0.0, atol=1e-8)


def test_three_box_stack_stands_two_seconds():
    gap = 0.005
    bodies = [crate("Bottom", [-0.1, -0.1, 0.0], [0.1, 0.1, 0.2]),
              crate("Middle", [-0.1, -0.1, 0.2 + gap], [0.1, 0.1, 0.4 + gap]),
              crate("Top", [-0.12, -0.08, 0.4 + 2 * gap], [0.08, 0.12, 0.6 + 2 * gap])]
    world = make_world(bodies, containers=[TANK])
    start = world.state.x.copy()
    run(world, 2.0)
    # each box lands on the one below (the gaps close) and nothing slides or tips: a twentieth of a
    # spacing sideways, a hundredth of a radian of turn
    expected = start - np.array([[0.0, 0.0, 0.0], [0.0, 0.0, gap], [0.0, 0.0, 2 * gap]])
    np.testing.assert_allclose(world.state.x, expected, rtol=0.0, atol=0.05 * DX)
    angle = 2.0 * np.arccos(np.clip(np.abs(world.state.q[:, 0]), 0.0, 1.0))
    assert np.all(angle < 0.01)
    np.testing.assert_allclose(world.state.v, 0.0, rtol=0.0, atol=1e-6)


def test_body_thrown_at_a_thin_wall_does_not_pass_it():
    # one quad (two triangles, no thickness): a shell wall the box hits at 6 m/s, gravity off
    quad = TriangleMesh([[0.3, -0.5, -0.5], [0.3, 0.5, -0.5], [0.3, 0.5, 0.5], [0.3, -0.5, 0.5]],
                        [[0, 1, 2], [0, 2, 3]])
    wall = MeshCollider("Wall", quad, ColliderSettings(collider_mode="SHELL"))
    body = crate("Crate", [-0.05, -0.05, -0.05], [0.05, 0.05, 0.05], linear_velocity=(6.0, 0.0, 0.0))
    world = make_world([body], colliders=[wall])
    front = []
    for _ in range(40):
        run(world, world.time + 0.005, gravity=np.zeros(3))
        front.append(world.state.x[0, 0] + 0.05)
    # the shell is half a spacing thick on each side: the box's face stops there, never past the quad
    assert max(front) <= 0.3 - 0.5 * DX + 0.02 * DX
    assert world.state.v[0, 0] <= 0.0


def test_sliding_box_stops_where_coulomb_friction_says():
    # v0^2 / (2 mu g) with mu = 0.3, v0 = 1 m/s: 0.170 m. The substep's first-order friction and the
    # landing make a few millimetres (2 % of the distance); no damping
    mu, v0 = 0.3, 1.0
    body = crate("Crate", [-0.1, -0.1, 0.0], [0.1, 0.1, 0.2], contact_friction=mu, linear_velocity=(v0, 0.0, 0.0),
                 linear_damping=0.0, angular_damping=0.0)
    world = make_world([body], containers=[TANK])
    run(world, 0.6)
    np.testing.assert_allclose(world.state.x[0, 0], v0 * v0 / (2 * mu * 9.81), rtol=0.02, atol=0.0)
    np.testing.assert_allclose(world.state.v[0], 0.0, rtol=0.0, atol=1e-6)


def test_bounce_returns_that_fraction_of_the_impact_speed():
    e = 0.6
    body = crate("Ball", [-0.05, -0.05, 0.5], [0.05, 0.05, 0.6], contact_bounce=e, linear_damping=0.0,
                 angular_damping=0.0)
    world = make_world([body], containers=[TANK])
    impact = np.sqrt(2 * 9.81 * 0.5)
    vz = []
    for _ in range(200):
        run(world, world.time + 0.002)
        vz.append(world.state.v[0, 2])
    # the first upward speed after the impact: e times the impact speed, within the speed gravity gives
    # in two substeps (the impact's substep and the landing's timing)
    up = next(v for v in vz if v > 0.0)
    np.testing.assert_allclose(up, e * impact, rtol=0.0, atol=2 * 9.81 * 0.002 + 0.02 * impact)


def test_collision_of_two_free_bodies_conserves_momentum():
    free = dict(linear_damping=0.0, angular_damping=0.0)
    a = crate("A", [-0.3, -0.05, -0.05], [-0.2, 0.05, 0.05], linear_velocity=(2.0, 0.0, 0.3), contact_friction=0.5,
              **free)
    b = crate("B", [0.0, -0.02, -0.1], [0.2, 0.18, 0.1], density=1500.0, angular_velocity=(0.0, 0.0, 1.0), **free)
    world = make_world([a, b])
    m = world.model.mass
    p0 = (m[:, None] * world.state.v).sum(axis=0)
    run(world, 0.3, gravity=np.zeros(3))
    assert world.state.v[1, 0] > 0.02                  # they did collide
    p1 = (m[:, None] * world.state.v).sum(axis=0)
    # every contact impulse acts on both bodies, equal and opposite: round-off only
    np.testing.assert_allclose(p1, p0, rtol=0.0, atol=1e-12 * np.abs(p0).max())


def test_free_rotation_keeps_angular_momentum():
    # a brick spinning about an axis off its principal axes, no torque: L = I w is constant (the explicit
    # gyroscopic term errs by O(dt) per turn: 1 % of |L| over 40 turns-worth of small substeps)
    body = crate("Brick", [-0.15, -0.05, -0.025], [0.15, 0.05, 0.025], angular_velocity=(3.0, 1.0, 6.0),
                 angular_damping=0.0, linear_damping=0.0)
    world = make_world([body])

    def momentum():
        r = matrix_of(world.state.q[0])
        return r @ world.model.inertia[0] @ r.T @ world.state.w[0]

    l0 = momentum()
    run(world, 1.0, gravity=np.zeros(3), dt=0.001)
    np.testing.assert_allclose(momentum(), l0, rtol=0.0, atol=0.01 * np.linalg.norm(l0))
    assert abs(np.linalg.norm(world.state.q[0]) - 1.0) < 1e-12


@pytest.mark.parametrize("dynamic", [0.0, 1.0])
def test_kinematic_body_follows_its_animation(dynamic):
    # a body that is not Dynamic rides its keyframes exactly; turned dynamic, it falls
    n = 10
    transforms = np.tile(np.eye(4), (n, 1, 1))
    transforms[:, 0, 3] = np.linspace(0.0, 0.9, n)
    body = RigidBodyObject("Lift", box_mesh([-0.05, -0.05, 0.5], [0.05, 0.05, 0.6]), RigidBodySettings(),
                           transforms=transforms, tracks={"use_dynamic": np.full(n, dynamic)})
    scene_fps = 10.0
    world = make_world([body], fps=scene_fps)
    run(world, 0.45)
    if dynamic == 0.0:
        np.testing.assert_allclose(world.state.x[0], [0.45, 0.0, 0.55], rtol=0.0, atol=1e-9)
    else:
        assert world.state.x[0, 2] < 0.55 - 0.9 and abs(world.state.x[0, 0]) < 1e-12
