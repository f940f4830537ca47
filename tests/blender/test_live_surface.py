"""The live surface in real Blender meets the colliders as the baked one does: no vertex inside a solid, beyond
a container's wall or within a shell, the Inside mode's offset as asked, and without Mesh Against Colliders
the surface pokes through (so the checks can fail).

The tolerance. Grid to Mesh (OpenVDB's volume-to-mesh at adaptivity 0) puts one vertex per voxel at the mean
of the points where the zero level crosses the voxel's edges, each found by linear interpolation of the
field at the voxel's corners. The field is max(phi_liquid, -phi_solid) with phi_solid the collider mesh's
exact distance, so along an edge the interpolated field is at least the interpolated -phi_solid: for a
plane wall (the tank's) every crossing, and so every vertex, lies on or outside it, to float32 rounding
(positions of 0.1 m: 1e-8 m). For a curved solid of radius R a crossing may lie inside by the error of
interpolating its distance along an edge, and the mean of crossings on the wall within one voxel lies
inside by at most the sagitta of a chord across the voxel's diagonal: sqrt(3) h for voxel h, a depth of
(sqrt(3) h)^2 / (8 R) = 3 h^2 / (8 R); the ball's polygons add the crease between two faces at the exterior
angle theta between them, the diagonal's half times sin(theta / 2). h is half the live Radius (one spacing,
2 cm here): 1 cm.
"""

from __future__ import annotations

import math

import bpy
import bmesh
import numpy as np
import pytest
from mathutils import Vector
from mathutils.bvhtree import BVHTree

from blender_helpers import add_box, submodule

pytestmark = pytest.mark.blender

SPACING = 0.02
TANK = (np.array([0.0, 0.0, 0.0]), np.array([0.3, 0.2, 0.3]))
WATER_TOP = 0.1
BALL_CENTRE, BALL_RADIUS, BALL_SEGMENTS = (0.1, 0.1, 0.085), 0.035, 64
SHELL_X = 0.24  # a baffle hanging into the water, halfway between two columns of particles
#: A point deep in the water: farther from every collider than the colliders' distance bands reach
DEEP = (0.17, 0.1, 0.05)


@pytest.fixture
def live(surge):
    module = submodule(surge, "bridge.live")
    yield module
    module.stop_all()


def _ball():
    bm = bmesh.new()
    bmesh.ops.create_uvsphere(bm, u_segments=BALL_SEGMENTS, v_segments=BALL_SEGMENTS // 2, radius=BALL_RADIUS)
    mesh = bpy.data.meshes.new("Ball")
    bm.to_mesh(mesh)
    bm.free()
    obj = bpy.data.objects.new("Ball", mesh)
    bpy.context.scene.collection.objects.link(obj)
    obj.location = BALL_CENTRE
    obj.surge.role = "COLLIDER"  # Auto: the engine picks Solid and reports it
    return obj


def _baffle():
    mesh = bpy.data.meshes.new("Baffle")
    mesh.from_pydata([(SHELL_X, 0.0, 0.05), (SHELL_X, 0.2, 0.05), (SHELL_X, 0.2, 0.2), (SHELL_X, 0.0, 0.2)], [],
                     [(0, 1, 2, 3)])
    obj = bpy.data.objects.new("Baffle", mesh)
    bpy.context.scene.collection.objects.link(obj)
    obj.surge.role = "COLLIDER"  # Auto: an open mesh is a shell
    return obj


def _surface(obj) -> tuple[np.ndarray, list]:
    """The live object's evaluated vertices in world space (m: the scene's unit scale is 1) and its faces."""
    evaluated = obj.evaluated_get(bpy.context.evaluated_depsgraph_get())
    mesh = evaluated.to_mesh()
    try:
        v = np.empty(len(mesh.vertices) * 3, np.float64)
        mesh.vertices.foreach_get("co", v)
        faces = [tuple(p.vertices) for p in mesh.polygons]
    finally:
        evaluated.to_mesh_clear()
    m = np.array(obj.matrix_world)
    return v.reshape(-1, 3) @ m[:3, :3].T + m[:3, 3], faces


def _crossings_above(point, v: np.ndarray, faces: list) -> int:
    """How many times the surface crosses the vertical ray up from ``point``: odd inside the liquid."""
    tree = BVHTree.FromPolygons([tuple(p) for p in v], faces)
    origin, up, count = Vector(point), Vector((0.0, 0.0, 1.0)), 0
    while True:
        hit, _normal, _index, _dist = tree.ray_cast(origin, up)
        if hit is None:
            return count
        count += 1
        origin = hit + up * 1e-6


def _depths(v: np.ndarray, ball_tree: BVHTree) -> dict:
    """How far vertices lie in each solid (m, positive inside, 0 outside): beyond the tank's walls, inside the ball
    (against its polygons), and within the baffle's half thickness of it."""
    lo, hi = TANK
    beyond = np.maximum(np.max(lo - v, axis=1), np.max(v - hi, axis=1))
    ball = np.zeros(len(v))
    for i, p in enumerate(v - np.asarray(BALL_CENTRE)):  # the tree is in the ball's own space (not rotated)
        loc, normal, _index, dist = ball_tree.find_nearest(Vector(p))
        if loc is not None and (Vector(p) - loc).dot(normal) < 0.0:
            ball[i] = dist
    over = (v[:, 1] > 0.0) & (v[:, 1] < 0.2) & (v[:, 2] > 0.05) & (v[:, 2] < 0.2)
    baffle = np.where(over, 0.5 * SPACING - np.abs(v[:, 0] - SHELL_X), -np.inf)
    return {"tank": beyond, "ball": ball, "baffle": baffle}


def test_live_surface_meets_the_colliders(live, scene, tmp_path):
    add_box("Water", (0.0, 0.0, 0.0), (0.3, 0.2, WATER_TOP), role="FLUID")
    add_box("Tank", *TANK, role="COLLIDER", collider_mode="CONTAINER")
    ball = _ball()
    _baffle()
    scene.surge.particle_spacing = SPACING
    scene.surge.cache_directory = str(tmp_path / "cache")
    scene.surge_live.show_surface = True
    session = live.start(scene, bpy.context.evaluated_depsgraph_get(), paused=True)
    for k in (1, 2):
        session.step()
        assert session.wait_for_frame(k, timeout=600), session.error
    live.update(scene.name)
    assert session.collider_modes == {"Tank": "CONTAINER", "Ball": "SOLID", "Baffle": "SHELL"}
    obj = bpy.data.objects[session.object_name]
    tree = BVHTree.FromObject(ball, bpy.context.evaluated_depsgraph_get())

    # the tolerance of the module docstring: voxel h, the ball's radius and the exterior angle of its polygons
    h = 0.5 * scene.surge_live.surface_radius * SPACING
    theta = 2.0 * math.pi / BALL_SEGMENTS

    def curved(radius):  # of the meeting surface: the ball's, or the ball shrunk by the Inside mode's offset
        return 3.0 * h * h / (8.0 * radius) + 0.5 * math.sqrt(3.0) * h * math.sin(0.5 * theta)

    flat = 1e-6  # float32 positions of 0.1 m, and the grid's transform (1e-8 m): 1 um is far above both

    v, faces = _surface(obj)
    assert len(v) > 100
    # one closed surface around the water, no surface inside it (the colliders' fields keep their insides)
    assert _crossings_above(DEEP, v, faces) == 1
    d = _depths(v, tree)
    assert d["tank"].max() <= flat, f"{d['tank'].max() / SPACING:.3f} spacings beyond the tank's walls"
    assert d["ball"].max() <= curved(BALL_RADIUS), f"{d['ball'].max() / SPACING:.3f} spacings inside the ball"
    assert d["baffle"].max() <= flat, f"{d['baffle'].max() / SPACING:.3f} spacings within the baffle"
    # the liquid meets the walls (no film of air under it): its bottom face lies on the tank's floor
    assert v[:, 2].min() == pytest.approx(0.0, abs=flat)

    # Inside with an offset of a quarter spacing: the surface goes that far into the solids, no farther
    offset = 0.25 * SPACING
    scene.surge.surface_collider_mode = "INSIDE"
    scene.surge.surface_collider_offset = 0.25
    live.update(scene.name)
    v, faces = _surface(obj)
    assert _crossings_above(DEEP, v, faces) == 1
    d = _depths(v, tree)
    assert d["tank"].max() == pytest.approx(offset, abs=flat)
    assert offset - curved(BALL_RADIUS) <= d["ball"].max() <= offset + curved(BALL_RADIUS - offset)
    assert d["baffle"].max() <= offset + flat

    # without meeting the colliders the union of spheres pokes through all three (the checks above can fail)
    scene.surge.surface_use_colliders = False
    live.update(scene.name)
    d = _depths(_surface(obj)[0], tree)
    assert d["tank"].max() > 0.25 * SPACING and d["ball"].max() > 0.25 * SPACING and d["baffle"].max() > 0.0
