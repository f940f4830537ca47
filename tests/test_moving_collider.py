"""PBF against a moving solid collider at large substeps: bounded speeds and nothing left inside.

Reproduces the instability that stopped the live benchmark (a paddle swept into the liquid, "a particle
moves at 213 m/s"): a convex solid's velocity-aware ejection (Gourlay 2012) chose the face from the
particle's accumulated velocity, so a particle a constraint iteration had nudged into the paddle while it
moved away from it was thrown out through the paddle's far face.
"""

import numpy as np
import pytest

from engine.collision import queries as collider_kernels
from engine import driver
from engine.errors import SimulationDivergedError
from engine.scene import BoxContainer, FluidObject, MeshCollider, SceneDescription
from engine.settings import ColliderSettings, SimulationSettings
from helpers import box_mesh
from test_collision import query, world_of


def test_iteration_push_leaves_a_convex_solid_through_the_face_it_entered():
    """Without the velocity response (PBF's iterations), the face is chosen by this pass's move x - x_start."""
    slab = MeshCollider("Slab", box_mesh([-0.2, -0.2, -0.01], [0.2, 0.2, 0.01]),
                        ColliderSettings(collider_mode="SOLID"))
    world = world_of([slab])
    # an iteration moved the particle from 1 mm above the top face to 1 mm below it, while its velocity
    # points up (away from the top face, into the bottom one)
    start = np.array([[0.0, 0.0, 0.011]], dtype=np.float32)
    x = np.array([[0.0, 0.0, 0.009]], dtype=np.float32)
    v = np.array([[0.0, 0.0, 1.0]], dtype=np.float32)
    inv_dt = 100.0
    collider_kernels.project(start, x, v, 0.0, 0.0, inv_dt, False, world.args)
    # out through the top face (float32 positions: 1e-6 m), not 2 cm through the slab to the bottom one
    np.testing.assert_allclose(x[0], [0.0, 0.0, 0.01], rtol=0, atol=1e-6)
    # the push (1 mm up) enters the velocity as dx / dt: 0.1 m/s, float32 rounding of 1 mm at 1 cm
    np.testing.assert_allclose(v[0], [0.0, 0.0, 1.1], rtol=0, atol=1e-4)


def test_velocity_response_ejects_only_through_faces_the_substep_can_have_crossed():
    """With the response, a face deeper than the substep's relative travel |u| dt is not a candidate."""
    slab = MeshCollider("Slab", box_mesh([-0.2, -0.2, -0.01], [0.2, 0.2, 0.01]),
                        ColliderSettings(collider_mode="SOLID"))
    world = world_of([slab])
    # 1 mm below the top face, moving up at 0.5 m/s for a 4 ms substep (2 mm): it cannot have come in
    # through the bottom face 19 mm away, whatever its velocity says
    x = np.array([[0.0, 0.0, 0.009]], dtype=np.float32)
    v = np.array([[0.0, 0.0, 0.5]], dtype=np.float32)
    collider_kernels.project(x.copy(), x, v, 0.0, 0.0, 250.0, True, world.args)
    np.testing.assert_allclose(x[0], [0.0, 0.0, 0.01], rtol=0, atol=1e-6)


def _paddle_scene():
    fps, frames, speed = 24.0, 13, 1.0
    t = np.arange(frames) / fps
    transforms = np.tile(np.eye(4), (frames, 1, 1))
    transforms[:, 0, 3] = speed * np.minimum(t, 0.35)          # 35 cm through the block, then it stops
    # a 4 cm thick convex box (a Gourlay polytope), 10 cm wide in a 20 cm wide tank: the liquid
    # flows around it on both sides and under it
    paddle = box_mesh([0.05, 0.05, 0.02], [0.09, 0.15, 0.35])
    scene = SceneDescription(
        fluids=[FluidObject("Water", box_mesh([0.0, 0.0, 0.0], [0.6, 0.2, 0.25]))],
        containers=[BoxContainer("Tank", [0.0, 0.0, 0.0], [0.6, 0.2, 0.4])],
        colliders=[MeshCollider("Paddle", paddle, ColliderSettings(collider_mode="SOLID"), transforms=transforms)],
        frame_start=1, frame_end=frames, fps=fps)
    return scene, speed


@pytest.mark.parametrize("max_dt", [1.0 / 60.0])
def test_paddle_swept_through_a_resting_block_at_large_substeps_stays_bounded(max_dt):
    """A paddle at 1 m/s through a 25 cm deep resting block, PBF with 3 iterations and substeps of up to
    1/60 s (Macklin & Mueller 2013 ran a few per 1/60 s frame): here the collider limits them to 10 ms
    (0.4 spacings of its travel each), 6 to 9 a frame. Before the fix a particle reached 38.7 m/s at
    frame 10."""
    scene, speed = _paddle_scene()
    settings = SimulationSettings(solver="PBF", particle_spacing=0.025, pbf_time_step=max_dt, pbf_iterations=3)
    sim = driver.Simulation.start(scene, settings)
    world = sim.solver.collision
    count = len(sim.solver.particles)
    assert world.reports[0]["shape"] == "CONVEX"
    g, tank_height = 9.81, 0.4
    # The fastest a particle can honestly move: twice the paddle speed (an elastic hit on a wall moving
    # at U, the most a moving wall gives; the liquid also streams past a bluff body at up to about 2U),
    # plus a free fall from the tank's lid, sqrt(2 g H). 2 + 2.8 = 4.8 m/s. With the fix the fastest
    # particle of any frame end moves at 2.4 m/s (with 2 ms substeps it is about as fast); the
    # instability gave tens to hundreds of m/s.
    bound = 2.0 * speed + np.sqrt(2.0 * g * tank_height)
    fastest = 0.0
    for frame in range(1, scene.frame_end):
        try:
            sim.advance_frame(frame, 1.0 / scene.fps)
        except SimulationDivergedError as exc:  # the state check stops past fifty times free fall
            pytest.fail(f"diverged at frame {frame}: {exc}")
        pt = sim.solver.particles
        fastest = max(fastest, float(np.linalg.norm(pt.v, axis=1).max()))
        assert fastest <= bound, (frame, fastest, bound)
        # nobody inside the paddle at a frame's end: a particle pushed onto its surface may sit a few
        # float32 roundings (6e-8 m at 0.6 m) inside it, so 1e-6 m (4e-5 spacings) is allowed
        phi, _, _ = query(world, pt.x)
        assert float(phi.min()) >= -1e-6, (frame, float(phi.min()))
    assert len(sim.solver.particles) == count  # no outflow: every particle is still there
