"""Mesh colliders in the solvers: packing, motion, AUTO modes, and no leaks in short bakes.

References: analytic distances of spheres and planes, the grids' own ``sdf.sample`` (for packing),
finite differences of the prescribed motion (for collider velocities), and particle counts on the
wrong side of a wall (for leaks, where the right answer is exactly zero).
"""

import os

import numpy as np
import pytest
from numba import njit, prange
from numpy.testing import assert_allclose

from engine.io import cache
from engine.collision import queries as collider_kernels, sdf, world as collision
from engine import driver
from engine import assemble
from engine.io.cache import CacheReader
from engine.errors import InvalidSceneError
from engine.scene import BoxContainer, FluidObject, MeshCollider, SceneDescription, TriangleMesh
from engine.settings import ColliderSettings, SimulationSettings
from helpers import box_mesh, open_cup, quad, uv_sphere
from test_sdf import concat, torus_mesh, torus_sdf


@njit(parallel=True)
def _query(points, cset, c, phi, normal, vel):
    for i in prange(points.shape[0]):
        p, n0, n1, n2, tri, r0, r1, r2 = collider_kernels.collider_phi(points[i, 0], points[i, 1], points[i, 2], c,
                                                                       cset)
        phi[i] = p
        normal[i, 0] = n0
        normal[i, 1] = n1
        normal[i, 2] = n2
        v0, v1, v2 = collider_kernels.collider_velocity(c, tri, r0, r1, r2, cset)
        vel[i, 0] = v0
        vel[i, 1] = v1
        vel[i, 2] = v2


def query(world, points, c=0):
    points = np.ascontiguousarray(points, dtype=np.float64)
    phi = np.empty(len(points))
    normal = np.empty((len(points), 3))
    vel = np.empty((len(points), 3))
    _query(points, world.args, c, phi, normal, vel)
    return phi, normal, vel


def shell_points(centre, radius, n, rng):
    d = rng.normal(size=(n, 3))
    d /= np.linalg.norm(d, axis=1, keepdims=True)
    return np.asarray(centre) + d * radius[:, None] if np.ndim(radius) else np.asarray(centre) + d * radius


DX = 0.01


def world_of(colliders, liquid=np.zeros((0, 3)), fps=24.0, grid_dir=None):
    return collision.CollisionWorld(colliders, liquid, dx=DX, support=2.4 * DX, cell_factor=0.5, fps=fps,
                                    grid_dir=grid_dir)


# ---------------------------------------------------------------------------------------------
# Packing and motion
# ---------------------------------------------------------------------------------------------

def test_packed_grids_answer_like_their_own_grids():
    """Two colliders packed into one set of arrays each answer exactly as their grid alone."""
    a = MeshCollider("A", torus_mesh(0.1, 0.04, 32, 12), ColliderSettings(collider_mode="SOLID"))
    # two spheres in one mesh: not convex, so it gets a grid (a convex mesh would be a polytope)
    b = MeshCollider("B", concat(uv_sphere(0.06, (0.35, 0.0, 0.0)), uv_sphere(0.06, (0.5, 0.0, 0.0))),
                     ColliderSettings(collider_mode="SOLID", surface_offset=0.004))
    world = world_of([a, b])
    rng = np.random.default_rng(1)
    pts = rng.uniform([-0.2, -0.2, -0.2], [0.7, 0.2, 0.2], size=(4000, 3))
    for c, col in enumerate([a, b]):
        grid = sdf.build_sdf(col.mesh, 0.5 * DX, 2.4 * DX + 2 * 0.5 * DX + col.settings.surface_offset, "x",
                             mode="SOLID_INSIDE")
        ref_phi, ref_grad, _ = sdf.sample(grid, pts)
        phi, normal, vel = query(world, pts, c)
        # identical arithmetic on identical node values: equal to float64 rounding
        assert_allclose(phi, ref_phi - col.settings.surface_offset, rtol=0, atol=1e-12)
        near = np.linalg.norm(ref_grad, axis=1) > 0
        assert_allclose(normal[near], ref_grad[near] / np.linalg.norm(ref_grad[near], axis=1, keepdims=True),
                        rtol=0, atol=1e-9)
        assert np.all(vel == 0.0)


def rigid_transforms(n, fps, velocity, omega):
    """Rest -> world matrices for a rotation about Z at omega rad/s and a translation at velocity m/s."""
    out = np.zeros((n, 4, 4))
    for f in range(n):
        t = f / fps
        c, s = np.cos(omega * t), np.sin(omega * t)
        out[f] = [[c, -s, 0, velocity[0] * t], [s, c, 0, velocity[1] * t], [0, 0, 1, velocity[2] * t], [0, 0, 0, 1]]
    return out


def test_rigid_motion_moves_the_field_and_gives_the_surface_velocity():
    fps = 24.0
    ring = torus_mesh(0.1, 0.03, 64, 24)
    v = np.array([0.6, 0.0, -0.3])
    col = MeshCollider("Ring", ring, ColliderSettings(collider_mode="SOLID"),
                       transforms=rigid_transforms(5, fps, v, 0.0))
    world = world_of([col], fps=fps)
    t = 2.5 / fps
    world.update(t)
    rng = np.random.default_rng(2)
    rest = rng.uniform([-0.15, -0.15, -0.05], [0.15, 0.15, 0.05], size=(6000, 3))
    ref = torus_sdf(rest, 0.1, 0.03)
    phi, normal, vel = query(world, rest + v * t)
    near = np.abs(ref) < 2 * DX
    # trilinear interpolation of exact node distances of a 64 x 24 faceted torus: within half a
    # cell (2.5 mm) of the smooth torus' distance (the facets' sagitta is 0.4 mm)
    assert_allclose(phi[near], ref[near], rtol=0, atol=0.5 * DX)
    # the velocity of a translating body is its translation speed everywhere (float64 rounding only)
    assert_allclose(vel[near], np.broadcast_to(v, vel[near].shape), rtol=0, atol=1e-9)
    assert world.max_speed() == pytest.approx(np.linalg.norm(v), rel=1e-9)
    # a substep may move the surface by at most MAX_SURFACE_TRAVEL particle spacings
    assert world.dt_limit(t) == pytest.approx(collision.MAX_SURFACE_TRAVEL * DX / np.linalg.norm(v), rel=1e-9)


def test_rotating_collider_velocity_is_omega_cross_r():
    fps = 240.0  # small rotation per frame: the interpolated motion is nearly a rotation
    omega = 3.0
    col = MeshCollider("Blade", box_mesh([-0.3, -0.02, -0.05], [0.3, 0.02, 0.05]),
                       ColliderSettings(collider_mode="SHELL"), transforms=rigid_transforms(3, fps, [0, 0, 0], omega))
    world = world_of([col], fps=fps)
    world.update(0.0)
    pts = np.array([[0.2, 0.02 + 0.2 * DX, 0.0], [-0.25, -0.02 - 0.2 * DX, 0.01]])
    phi, normal, vel = query(world, pts)
    expect = np.cross([0, 0, omega], pts)
    # the motion between frames is the chord of the rotation: it misses the tangent velocity by the
    # centripetal term omega^2 |r| dt / 2 (3.9 mm/s at |r| = 0.25 m, dt = 1/240 s) -> atol 5 mm/s;
    # rtol 1 % covers the chord's sin(omega dt) / (omega dt) shortening (3e-5) with room
    assert_allclose(vel, expect, rtol=0.01, atol=0.005)


def test_deforming_collider_blends_frames_and_takes_vertex_velocities():
    fps = 24.0
    sheet = quad([-0.2, -0.2, 0.0], [0.4, 0, 0], [0, 0.4, 0], n=4)
    height = np.array([0.0, 0.012, 0.060])         # metres at frames 0, 1, 2: the sheet rises
    frames = np.stack([sheet.vertices + [0.0, 0.0, z] for z in height])
    col = MeshCollider("Sheet", sheet, ColliderSettings(collider_mode="SHELL"), frame_vertices=frames)
    world = world_of([col], fps=fps)
    world.update(1.25 / fps)                       # a quarter into the frame 1 -> 2 interval
    z_sheet = 0.012 + 0.25 * 0.048
    pts = np.array([[0.0, 0.0, z_sheet + 0.015], [0.05, -0.05, z_sheet - 0.015]])
    phi, normal, vel = query(world, pts)
    # a shell is SHELL_HALF_THICKNESS spacings thick on each side; the blended plane is exact
    assert_allclose(phi, 0.015 - collision.SHELL_HALF_THICKNESS * DX, rtol=0, atol=1e-6)
    assert_allclose(normal[:, 2], [1.0, -1.0], rtol=0, atol=1e-6)
    assert_allclose(vel, [[0, 0, 0.048 * fps]] * 2, rtol=1e-6, atol=1e-9)


def rotation_z(angle):
    c, s_ = np.cos(angle), np.sin(angle)
    return np.array([[c, -s_, 0], [s_, c, 0], [0, 0, 1.0]])


def test_convex_meshes_become_exact_polytopes():
    """A rotated box (convex) is a polytope: its distance is exact inside, like Gourlay's (2012) containers."""
    rot = rotation_z(np.radians(30))
    box = box_mesh([-0.1, -0.05, 0.0], [0.1, 0.05, 0.1])
    rotated = TriangleMesh(box.vertices @ rot.T, box.triangles)
    planes = collision.convex_planes(rotated, "CONTAINER")
    assert planes is not None and len(planes) == 6
    assert collision.convex_planes(uv_sphere(0.1, rings=4, segments=8), "SOLID") is not None  # 40 planes
    assert collision.convex_planes(uv_sphere(0.1), "SOLID") is None   # convex, but 1104 planes: a grid
    assert collision.convex_planes(torus_mesh(0.1, 0.03, 16, 8), "SOLID") is None  # not convex
    assert collision.convex_planes(open_cup(), "SOLID") is None                    # open: not a solid
    assert collision.convex_planes(rotated, "SHELL") is None
    tank = MeshCollider("Tank", rotated, ColliderSettings(collider_mode="CONTAINER"))
    world = world_of([tank])
    assert world.reports[0]["shape"] == "CONVEX"
    rng = np.random.default_rng(4)
    local = rng.uniform([-0.1, -0.05, 0.0], [0.1, 0.05, 0.1], size=(2000, 3))
    phi, normal, _ = query(world, local @ rot.T)
    ref = np.min(np.column_stack([local[:, 0] + 0.1, 0.1 - local[:, 0], local[:, 1] + 0.05, 0.05 - local[:, 1],
                                  local[:, 2], 0.1 - local[:, 2]]), axis=1)
    # plane distances in float64: exact to rounding wherever a wall can act (within the kernel
    # support); deeper inside, the inscribed-sphere broad phase answers a lower bound instead
    reach = ref < 2.4 * DX
    assert_allclose(phi[reach], ref[reach], rtol=0, atol=1e-12)
    assert np.all(phi <= ref + 1e-12) and np.all(phi[~reach] >= 2.4 * DX - 1e-12)
    assert_allclose(np.linalg.norm(normal[ref < 0.04], axis=1), 1.0, rtol=0, atol=1e-12)


def test_solid_polytope_ejects_a_fast_particle_the_way_it_came():
    """Gourlay 2012: a particle that went past the middle of a thin slab leaves through the face it entered."""
    slab = MeshCollider("Slab", box_mesh([-0.2, -0.2, -0.01], [0.2, 0.2, 0.01]),
                        ColliderSettings(collider_mode="SOLID"))
    world = world_of([slab])
    # 3 mm below the middle, coming down: the nearest face is the bottom one, the right one the top
    x = np.array([[0.0, 0.0, -0.003]], dtype=np.float32)
    v = np.array([[0.0, 0.0, -2.0]], dtype=np.float32)
    collider_kernels.project(x.copy(), x, v, 0.0, 0.0, 1.0, True, world.args)
    assert_allclose(x[0], [0.0, 0.0, 0.01], rtol=0, atol=1e-6)   # float32 positions
    assert v[0, 2] == 0.0                                          # no bounce: normal velocity removed
    # coming up instead: out through the bottom
    x = np.array([[0.0, 0.0, 0.003]], dtype=np.float32)
    v = np.array([[0.0, 0.0, 2.0]], dtype=np.float32)
    collider_kernels.project(x.copy(), x, v, 0.0, 0.0, 1.0, True, world.args)
    assert_allclose(x[0], [0.0, 0.0, -0.01], rtol=0, atol=1e-6)


@pytest.mark.slow  # an end-to-end bake checked for leaks or volume: physics validation
def test_liquid_stays_in_a_rotated_convex_tank(tmp_path):
    rot = rotation_z(np.radians(30))
    box = box_mesh([-0.1, -0.05, 0.0], [0.1, 0.05, 0.15])
    tank = TriangleMesh(box.vertices @ rot.T, box.triangles)
    water = TriangleMesh(box_mesh([-0.1, -0.05, 0.0], [0.0, 0.05, 0.08]).vertices @ rot.T, box.triangles)
    scene = SceneDescription(fluids=[FluidObject("Water", water)],
                             colliders=[MeshCollider("Tank", tank)], frame_start=1, frame_end=9)
    reader, events = bake(tmp_path, scene)
    assert [(e["mode"], e["shape"]) for e in events if e["event"] == "collider"] == [("CONTAINER", "CONVEX")]
    for f in (5, 9):
        local = reader.read_frame(f)["position"].astype(np.float64) @ rot  # back into the box's frame
        assert local[:, 0].min() >= -0.1 - 1e-6 and local[:, 0].max() <= 0.1 + 1e-6
        assert local[:, 1].min() >= -0.05 - 1e-6 and local[:, 1].max() <= 0.05 + 1e-6
        assert local[:, 2].min() >= -1e-6
    # the column collapsed along the tank (dam break): liquid reached the far half
    assert local[:, 0].max() > 0.05


# ---------------------------------------------------------------------------------------------
# AUTO
# ---------------------------------------------------------------------------------------------

def test_auto_picks_solid_container_or_shell_from_the_mesh():
    sphere = uv_sphere(0.1)
    inside = np.random.default_rng(3).uniform(-0.04, 0.04, size=(200, 3))
    outside = inside + [0.5, 0, 0]
    auto = ColliderSettings(collider_mode="AUTO")
    assert collision.resolve_mode(MeshCollider("S", sphere, auto), outside) == "SOLID"
    assert collision.resolve_mode(MeshCollider("S", sphere, auto), inside) == "CONTAINER"
    assert collision.resolve_mode(MeshCollider("Cup", open_cup(), auto), inside) == "SHELL"
    assert collision.resolve_mode(MeshCollider("Sheet", quad([0, 0, 0], [1, 0, 0], [0, 1, 0]), auto), inside) == "SHELL"
    # a sphere with a small hole (one pole fan removed) is still closed enough to hold liquid
    holed = TriangleMesh(sphere.vertices, sphere.triangles[48:])
    assert collision.resolve_mode(MeshCollider("Holed", holed, auto), inside) == "CONTAINER"
    # an explicit mode is never overridden
    assert collision.resolve_mode(MeshCollider("S", sphere, ColliderSettings(collider_mode="SHELL")), inside) == "SHELL"


# ---------------------------------------------------------------------------------------------
# Bakes: no leaks, moving and deforming colliders
# ---------------------------------------------------------------------------------------------

def bake(tmp_path, scene, solver="PBF", spacing=0.006, **kw):
    settings = SimulationSettings(solver=solver, particle_spacing=spacing, **kw)
    events = []
    out = str(tmp_path / "cache")
    driver.bake(scene, settings, out, progress=events.append)
    return CacheReader(out), events


@pytest.mark.slow  # an end-to-end bake checked for leaks or volume: physics validation
def test_liquid_poured_into_a_single_sided_cup_stays_in_it(tmp_path):
    cup = open_cup(radius=0.05, height=0.08, base=(0.0, 0.0, 0.02))
    water = box_mesh([-0.025, -0.025, 0.06], [0.025, 0.025, 0.11])
    scene = SceneDescription(fluids=[FluidObject("Water", water)],
                             containers=[BoxContainer("Tank", [-0.12, -0.12, 0.0], [0.12, 0.12, 0.2])],
                             colliders=[MeshCollider("Cup", cup)], frame_start=1, frame_end=13)
    reader, events = bake(tmp_path, scene)
    resolved = [e for e in events if e["event"] == "collider"]
    assert resolved[0]["mode"] == "SHELL" and resolved[0]["requested"] == "AUTO"
    frames = [reader.read_frame(f) for f in range(1, 14)]
    assert all(np.array_equal(fr["id"], frames[0]["id"]) for fr in frames)  # nothing lost, same order
    z = np.stack([fr["position"][:, 2] for fr in frames]).astype(np.float64)
    x = frames[-1]["position"].astype(np.float64)
    r = np.hypot(x[:, 0], x[:, 1])
    # A particle can only get outside the cup below its rim by leaking through the wall, or by
    # splashing over the rim (the impact throws a few corner particles above it): count those
    # outside below the rim that were never above the rim in any frame. Zero means no leak.
    never_over = z.max(axis=0) < 0.1
    assert int(((r > 0.05) & (x[:, 2] < 0.1) & never_over).sum()) == 0
    # nearly all of the liquid stays in (splashes are a few particles of 512)
    assert int(((r < 0.05) & (x[:, 2] > 0.02)).sum()) >= 0.95 * len(x)
    # the liquid has settled into the cup (not hovering where it started)
    assert np.median(x[:, 2]) < 0.06


@pytest.mark.slow  # an end-to-end bake checked for leaks or volume: physics validation
def test_liquid_dropped_on_a_thin_plane_does_not_pass_through(tmp_path):
    plane = quad([-0.08, -0.08, 0.05], [0.16, 0, 0], [0, 0.16, 0])
    water = box_mesh([-0.03, -0.03, 0.1], [0.03, 0.03, 0.16])
    scene = SceneDescription(fluids=[FluidObject("Water", water)],
                             containers=[BoxContainer("Tank", [-0.2, -0.2, 0.0], [0.2, 0.2, 0.3])],
                             colliders=[MeshCollider("Plane", plane, ColliderSettings(collider_mode="SHELL"))],
                             frame_start=1, frame_end=9)
    reader, _ = bake(tmp_path, scene)
    # Most of the water runs off the sheet's edges onto the tank's floor, 5 cm below, and spreads there,
    # under the sheet too. A particle below the sheet's area that has never been beyond its edges can
    # only have come through it: zero such crossings in every frame. (The ids keep their order.)
    beyond, ids = np.zeros(0, dtype=bool), reader.read_frame(1)["id"]
    for f in range(1, 10):
        frame = reader.read_frame(f)
        assert np.array_equal(frame["id"], ids)  # nothing lost, same order
        x = frame["position"].astype(np.float64)
        over = (np.abs(x[:, 0]) < 0.08 - 0.5 * 0.006) & (np.abs(x[:, 1]) < 0.08 - 0.5 * 0.006)
        beyond = ~over if f == 1 else beyond | ~over
        assert int((over & ~beyond & (x[:, 2] < 0.05)).sum()) == 0, f
    assert int(beyond.sum()) > 0  # some of it did run off the sheet (the check above means something)


@pytest.mark.slow  # an end-to-end bake checked for leaks or volume: physics validation
def test_fast_paddle_pushes_liquid_without_particles_crossing(tmp_path):
    fps = 24.0
    frames = 9
    speed = 1.0                                        # m/s: 42 mm per frame, 7 spacings
    # the paddle reaches past the tank's walls, floor and lid: liquid cannot go around or over it
    # (at 1 m/s the run-up on its face sprays to the lid, 6 times the depth)
    paddle = quad([0.02, -0.08, -0.02], [0, 0.16, 0], [0, 0, 0.34])
    transforms = rigid_transforms(frames, fps, [speed, 0, 0], 0.0)
    water = box_mesh([0.03, -0.06, 0.0], [0.2, 0.06, 0.05])
    scene = SceneDescription(
        fluids=[FluidObject("Water", water)],
        containers=[BoxContainer("Tank", [0.0, -0.06, 0.0], [0.5, 0.06, 0.3])],
        colliders=[MeshCollider("Paddle", paddle, ColliderSettings(collider_mode="SHELL"), transforms=transforms)],
        frame_start=1, frame_end=frames, fps=fps)
    reader, _ = bake(tmp_path, scene)
    for f in range(1, frames + 1):
        x = reader.read_frame(f)["position"].astype(np.float64)
        wall = 0.02 + speed * (f - 1) / fps
        assert int((x[:, 0] < wall).sum()) == 0, (f, x[x[:, 0] < wall])
    # the paddle moved 0.33 m: the liquid in front of it was pushed along
    assert x[:, 0].min() >= wall


@pytest.mark.slow  # an end-to-end bake checked for leaks or volume: physics validation
def test_box_lowered_into_a_pool_raises_the_level_by_its_volume(tmp_path):
    """Archimedes: a solid box pushed 4 cm into a pool raises the free surface by V / A."""
    fps = 24.0
    frames = 17
    tank_lo, tank_hi = np.array([0.0, 0.0, 0.0]), np.array([0.2, 0.2, 0.3])
    depth = 0.06
    block = box_mesh([0.06, 0.06, depth + 0.01], [0.14, 0.14, depth + 0.11])
    # lowered by 5 cm over the first 8 frames, then held
    z = np.minimum(np.arange(frames) / 8.0, 1.0) * -0.05
    transforms = np.tile(np.eye(4), (frames, 1, 1))
    transforms[:, 2, 3] = z
    scene = SceneDescription(
        fluids=[FluidObject("Pool", box_mesh(tank_lo, [0.2, 0.2, depth]))],
        containers=[BoxContainer("Tank", tank_lo, tank_hi)],
        colliders=[MeshCollider("Block", block, ColliderSettings(collider_mode="SOLID"), transforms=transforms)],
        frame_start=1, frame_end=frames, fps=fps)
    reader, _ = bake(tmp_path, scene, spacing=0.008)
    first = reader.read_frame(1)["position"].astype(np.float64)
    last = reader.read_frame(frames)["position"].astype(np.float64)
    inside = (np.abs(last[:, 0] - 0.1) < 0.04) & (np.abs(last[:, 1] - 0.1) < 0.04) & (last[:, 2] > depth - 0.04)
    assert int(inside.sum()) == 0
    # surface height: mean z of the top layer in the open part of the tank, against the rise V / A_free
    # (the pool surface starts at depth; the block's bottom ends 4 cm below it)
    open_part = (np.abs(last[:, 0] - 0.1) > 0.06) | (np.abs(last[:, 1] - 0.1) > 0.06)
    top = lambda x, m: np.sort(x[m, 2])[-int(0.05 * m.sum()):].mean()  # noqa: E731
    rise = top(last, open_part) - top(first, np.ones(len(first), bool))
    expect = 0.08 * 0.08 * 0.04 / (0.2 * 0.2 - 0.08 * 0.08)
    # the free surface is still sloshing after the push (+-3 mm seen) and the top-layer estimate
    # has about half a spacing of bias: atol 4 mm on a 7.6 mm rise
    assert_allclose(rise, expect, rtol=0, atol=0.004)


@pytest.mark.slow  # an end-to-end bake checked for leaks or volume: physics validation
def test_rising_bending_sheet_carries_the_liquid_on_it(tmp_path):
    """A sheet bent into a shallow bowl rises at 0.3 m/s while bending deeper: the liquid in it rides along."""
    fps = 24.0
    frames = 9
    sheet = quad([-0.08, -0.08, 0.05], [0.16, 0, 0], [0, 0.16, 0], n=8)
    v = sheet.vertices
    t = np.arange(frames)[:, None] / fps
    r2 = v[None, :, 0] ** 2 + v[None, :, 1] ** 2

    def height(r2_, t_):
        return 0.05 + 0.3 * t_ + (8.0 + 6.0 * t_) * r2_

    fv = np.repeat(v[None], frames, axis=0)
    fv[:, :, 2] = height(r2, t)
    water = box_mesh([-0.03, -0.03, 0.066], [0.03, 0.03, 0.09])
    scene = SceneDescription(
        fluids=[FluidObject("Water", water)],
        containers=[BoxContainer("Tank", [-0.2, -0.2, 0.0], [0.2, 0.2, 0.4])],
        colliders=[MeshCollider("Sheet", TriangleMesh(fv[0], sheet.triangles),
                                ColliderSettings(collider_mode="SHELL"), frame_vertices=fv)],
        frame_start=1, frame_end=frames, fps=fps)
    reader, _ = bake(tmp_path, scene)
    first = reader.read_frame(1)["position"].astype(np.float64)
    last = reader.read_frame(frames)["position"].astype(np.float64)
    # nothing fell through the moving sheet (its facets lie within 0.4 mm of the smooth bowl)
    over = (np.abs(last[:, 0]) < 0.075) & (np.abs(last[:, 1]) < 0.075)
    below = last[:, 2] < height(last[:, 0] ** 2 + last[:, 1] ** 2, t[-1, 0]) - 0.0004
    assert int((over & below).sum()) == 0
    # and the liquid was lifted with it: the bowl's centre rose 0.1 m; the liquid settles a few
    # millimetres deeper into the bowl as it deepens, hence rtol 15 %
    lift = np.median(last[:, 2]) - np.median(first[:, 2])
    assert_allclose(lift, 0.3 * t[-1, 0], rtol=0.15, atol=0.0)


@pytest.mark.slow  # an end-to-end bake checked for leaks or volume: physics validation
def test_wcsph_keeps_liquid_out_of_a_solid_sphere(tmp_path):
    ball = uv_sphere(0.05, (0.1, 0.1, 0.05), 16, 32)
    scene = SceneDescription(fluids=[FluidObject("Water", box_mesh([0.05, 0.05, 0.12], [0.15, 0.15, 0.17]))],
                             containers=[BoxContainer("Tank", [0, 0, 0], [0.2, 0.2, 0.25])],
                             colliders=[MeshCollider("Ball", ball)], frame_start=1, frame_end=5)
    reader, events = bake(tmp_path, scene, solver="WCSPH", spacing=0.008)
    assert [e["mode"] for e in events if e["event"] == "collider"] == ["SOLID"]
    for f in range(1, 6):
        x = reader.read_frame(f)["position"].astype(np.float64)
        d = np.linalg.norm(x - [0.1, 0.1, 0.05], axis=1)
        # a 32-segment sphere's facets lie up to 0.25 mm inside the true sphere
        assert int((d < 0.05 - 0.0005).sum()) == 0, f


# ---------------------------------------------------------------------------------------------
# Start-up, cache reuse
# ---------------------------------------------------------------------------------------------

def test_particles_starting_inside_a_solid_are_removed_and_grids_are_reused(tmp_path):
    t = torus_mesh(0.05, 0.02, 24, 12)                       # not convex: it gets a grid
    ring = TriangleMesh(t.vertices + [0.1, 0.1, 0.05], t.triangles)
    scene = SceneDescription(fluids=[FluidObject("Water", box_mesh([0.02, 0.02, 0.0], [0.18, 0.18, 0.1]))],
                             containers=[BoxContainer("Tank", [0, 0, 0], [0.2, 0.2, 0.2])],
                             colliders=[MeshCollider("Ring", ring, ColliderSettings(collider_mode="SOLID"))],
                             frame_start=1, frame_end=2)
    reader, events = bake(tmp_path, scene, spacing=0.01)
    x = reader.read_frame(1)["position"].astype(np.float64)
    # none inside the tube (the 24 x 12 facets lie up to 0.7 mm inside the smooth torus)
    assert torus_sdf(x - [0.1, 0.1, 0.05], 0.05, 0.02).min() >= -0.0007
    assert len(x) < len(assemble.initial_particles(scene, SimulationSettings(particle_spacing=0.01)))
    assert [e["cached"] for e in events if e["event"] == "collider"] == [False]
    grids = os.listdir(tmp_path / "cache" / "sdf")
    assert len(grids) == 1
    _, events = bake(tmp_path, scene, spacing=0.01)          # a re-bake clears frames, keeps grids
    assert [e["cached"] for e in events if e["event"] == "collider"] == [True]
    assert cache.clear(str(tmp_path / "cache"), include_grids=True) >= 3
    assert not os.path.exists(tmp_path / "cache" / "sdf")


def test_liquid_entirely_inside_a_solid_is_refused(tmp_path):
    scene = SceneDescription(fluids=[FluidObject("Water", box_mesh([0.05, 0.05, 0.05], [0.1, 0.1, 0.1]))],
                             containers=[BoxContainer("Tank", [0, 0, 0], [0.2, 0.2, 0.2])],
                             colliders=[MeshCollider("Rock", box_mesh([0.0, 0.0, 0.0], [0.15, 0.15, 0.15]),
                                                     ColliderSettings(collider_mode="SOLID"))],
                             frame_start=1, frame_end=2)
    with pytest.raises(InvalidSceneError, match="'Rock'"):
        bake(tmp_path, scene, spacing=0.01)


def test_inverse3_matches_lapack_and_refuses_a_singular_matrix():
    """The 3 x 3 inverse of a collider's pose (closed form, see ``engine.collision.world.inverse3``) against
    numpy's LAPACK inverse, for rotations times scales and shears like an artist's transforms."""
    from engine.collision.world import inverse3

    rng = np.random.default_rng(7)
    for _ in range(200):
        q, _r = np.linalg.qr(rng.normal(size=(3, 3)))
        a = q @ np.diag(rng.uniform(0.2, 5.0, 3)) @ (np.eye(3) + 0.3 * np.triu(rng.normal(size=(3, 3)), 1))
        # rtol 1e-12, atol 1e-12: both are float64 and the condition number stays below ~100 here, so
        # either result is within cond * 2.2e-16 ~ 2e-14 of the exact inverse, relative to its size
        np.testing.assert_allclose(inverse3(a), np.linalg.inv(a), rtol=1e-12, atol=1e-12)
    with pytest.raises(np.linalg.LinAlgError):
        inverse3(np.diag([1.0, 0.0, 2.0]))
