"""Colliders of any shape: what the bridge exports (boxes, meshes, motion, settings, units), what the
engine makes of Suzanne, and a bake of water falling onto her."""

from __future__ import annotations

import math
import os
import time
import types

import bpy
import numpy as np
import pytest

from blender_helpers import add_box, bake_state, column_scene, submodule

pytestmark = pytest.mark.blender


def _export(surge, scene):
    export = submodule(surge, "bridge.export")
    return export.export_scene(scene, bpy.context.evaluated_depsgraph_get())[0]


def _key_every_frame(obj, path: str, values: dict) -> None:
    """Keyframe ``obj.<path>`` at each frame of ``values`` (frame -> value): exact at every frame."""
    for frame, value in values.items():
        setattr(obj, path, value)
        obj.keyframe_insert(path, frame=frame)


def _by_name(items, name):
    return next(i for i in items if i.name == name)


def test_keyframed_collider_exports_one_rigid_matrix_per_frame(scene, surge, tmp_path):
    column_scene(scene, str(tmp_path / "cache"), frames=(1, 5))
    scene.unit_settings.scale_length = 0.5  # metres per Blender unit
    paddle = add_box("Paddle", (-0.02, -0.02, -0.01), (0.02, 0.02, 0.01), role="COLLIDER", collider_mode="SOLID")
    _key_every_frame(paddle, "location", {f: (0.3 + 0.01 * (f - 1), 0.05, 0.4 + 0.02 * (f - 1)) for f in range(1, 6)})
    _key_every_frame(paddle, "rotation_euler", {f: (0.0, 0.0, 0.2 * (f - 1)) for f in range(1, 6)})
    scene.frame_set(4)

    description = _export(surge, scene)
    assert scene.frame_current == 4  # the user's frame is restored
    assert [c.name for c in description.containers] == ["Tank"]  # still the box fast path
    collider = _by_name(description.colliders, "Paddle")
    assert collider.motion == "RIGID" and collider.frame_vertices is None
    assert collider.transforms.shape == (5, 4, 4)
    np.testing.assert_array_equal(collider.transforms[0], np.eye(4))
    # rest pose: the paddle at frame 1, in metres
    local = np.array([v.co for v in paddle.data.vertices])
    np.testing.assert_allclose(collider.mesh.vertices, (local + (0.3, 0.05, 0.4)) * 0.5, rtol=0, atol=1e-7)
    for frame in (2, 3, 5):
        # the world matrix at that frame, built by hand (float32 matrices: 1e-7 m at these sizes)
        angle = 0.2 * (frame - 1)
        rot = np.array([[math.cos(angle), -math.sin(angle), 0], [math.sin(angle), math.cos(angle), 0], [0, 0, 1]])
        where = np.array([0.3 + 0.01 * (frame - 1), 0.05, 0.4 + 0.02 * (frame - 1)])
        expected = (local @ rot.T + where) * 0.5
        matrix = collider.transforms[frame - 1]
        moved = collider.mesh.vertices @ matrix[:3, :3].T + matrix[:3, 3]
        np.testing.assert_allclose(moved, expected, rtol=0, atol=1e-6)
        np.testing.assert_allclose(matrix[:3, :3], rot, rtol=0, atol=1e-6)
    # the pure translation of frame 3 relative to frame 1 when the rotation is taken out (metres)
    expected_shift = (np.array([0.02, 0.0, 0.04]) + (np.eye(3) - _rz(0.4)) @ (0.3, 0.05, 0.4)) * 0.5
    np.testing.assert_allclose(collider.transforms[2][:3, 3], expected_shift, rtol=0, atol=1e-6)


def _rz(angle):
    return np.array([[math.cos(angle), -math.sin(angle), 0], [math.sin(angle), math.cos(angle), 0], [0, 0, 1]])


def _squash_shape_key(obj) -> None:
    """A shape key lowering the top face by 0.02, its value keyed 0, 0.5, 1 over frames 1-3."""
    obj.shape_key_add(name="Basis")
    squash = obj.shape_key_add(name="Squash", from_mix=False)
    for point in squash.data:
        if point.co.z > 0:
            point.co.z -= 0.02
    _key_every_frame(squash, "value", {1: 0.0, 2: 0.5, 3: 1.0})


def _grow(obj) -> None:
    """Scale keyed 1, 1, 1.5 over frames 1-3: a world matrix that is not a rigid motion."""
    _key_every_frame(obj, "scale", {1: (1.0, 1.0, 1.0), 2: (1.0, 1.0, 1.0), 3: (1.5, 1.0, 1.0)})


@pytest.mark.parametrize("deform", [_squash_shape_key, _grow], ids=["shape-key", "animated-scale"])
def test_deforming_collider_exports_world_vertices_per_frame(scene, surge, tmp_path, deform):
    column_scene(scene, str(tmp_path / "cache"))
    scene.unit_settings.scale_length = 0.01  # centimetres
    pad = add_box("Pad", (-2.0, -2.0, -1.0), (2.0, 2.0, 1.0), role="COLLIDER", collider_mode="SOLID")
    pad.location = (5.0, 5.0, 10.0)
    deform(pad)

    collider = _by_name(_export(surge, scene).colliders, "Pad")
    assert collider.motion == "DEFORMING" and collider.transforms is None
    assert collider.frame_vertices.shape == (3, 8, 3)
    np.testing.assert_array_equal(collider.frame_vertices[0], collider.mesh.vertices)
    local = np.array([v.co for v in pad.data.vertices])
    # world coordinates are float32 in Blender (11 BU: 1e-6 BU, 1e-8 m): compared to that rounding
    np.testing.assert_allclose(collider.mesh.vertices, (local + pad.location) * 0.01, rtol=0, atol=1e-8)
    top = local[:, 2] > 0
    if deform is _squash_shape_key:
        for frame, drop in ((2, 0.01), (3, 0.02)):
            shift = collider.frame_vertices[frame - 1] - collider.mesh.vertices
            np.testing.assert_allclose(shift[top], [[0, 0, -drop * 0.01]] * 4, rtol=0, atol=1e-8)
            np.testing.assert_allclose(shift[~top], 0.0, rtol=0, atol=1e-8)
    else:
        np.testing.assert_array_equal(collider.frame_vertices[1], collider.frame_vertices[0])
        np.testing.assert_allclose(collider.frame_vertices[2][:, 0], (local[:, 0] * 1.5 + 5.0) * 0.01, rtol=0,
                                   atol=1e-8)


def test_rotated_container_is_a_static_mesh_collider(scene, surge, tmp_path):
    column_scene(scene, str(tmp_path / "cache"))
    bpy.data.objects.remove(bpy.data.objects["Tank"])
    tilted = add_box("Tilted Tank", (-0.1, -0.1, -0.1), (0.2, 0.2, 0.4), role="COLLIDER", collider_mode="CONTAINER")
    tilted.rotation_euler.z = 0.5
    description = _export(surge, scene)
    assert description.containers == ()
    collider = _by_name(description.colliders, "Tilted Tank")
    assert collider.motion == "STATIC" and collider.settings.collider_mode == "CONTAINER"
    local = np.array([v.co for v in tilted.data.vertices])
    np.testing.assert_allclose(collider.mesh.vertices, local @ _rz(0.5).T, rtol=0, atol=1e-7)
    assert len(collider.mesh.triangles) == 12


def test_axis_aligned_boxes_take_the_fast_path_only_when_static_and_holding_the_liquid(scene, surge, tmp_path):
    column_scene(scene, str(tmp_path / "cache"))
    engine_scene = submodule(surge, "engine.scene")
    tank = bpy.data.objects["Tank"]
    tank.modifiers.new("Nothing", "WEIGHTED_NORMAL")  # a modifier makes it a candidate for motion: still static
    assert isinstance(_by_name(_export(surge, scene).containers, "Tank"), engine_scene.BoxContainer)
    tank.surge.collider_mode = "AUTO"  # around the liquid: Auto is a container, the fast path
    box = _by_name(_export(surge, scene).containers, "Tank")
    assert box.settings.collider_mode == "CONTAINER"
    np.testing.assert_allclose(box.upper, [0.1, 0.1, 0.3], rtol=0, atol=1e-7)

    add_box("Stool", (0.5, 0.5, 0), (0.6, 0.6, 0.1), role="COLLIDER")  # Auto, not around the liquid
    lid = add_box("Lid", (0, 0, 0.3), (0.1, 0.1, 0.32), role="COLLIDER", collider_mode="CONTAINER")
    _key_every_frame(lid, "location", {1: (0, 0, 0), 2: (0, 0, -0.01), 3: (0, 0, -0.02)})
    description = _export(surge, scene)
    assert [c.name for c in description.containers] == ["Tank"]
    stool, moving = _by_name(description.colliders, "Stool"), _by_name(description.colliders, "Lid")
    assert isinstance(stool, engine_scene.MeshCollider) and stool.settings.collider_mode == "AUTO"
    assert stool.motion == "STATIC"
    assert moving.motion == "RIGID"
    np.testing.assert_allclose(moving.transforms[2][:3, 3], [0, 0, -0.02], rtol=0, atol=1e-7)


def test_collider_settings_reach_the_engine_in_metres(scene, surge, tmp_path):
    column_scene(scene, str(tmp_path / "cache"))
    scene.unit_settings.scale_length = 0.01  # centimetres
    tank = bpy.data.objects["Tank"]
    tank.surge.friction, tank.surge.bounce, tank.surge.surface_offset = 0.25, 0.5, 0.5
    rock = add_box("Rock", (0.04, 0.04, 0.0), (0.06, 0.06, 0.02), role="COLLIDER", collider_mode="SOLID")
    rock.surge.friction, rock.surge.bounce, rock.surge.surface_offset = 0.75, 0.125, -0.25
    description = _export(surge, scene)
    box, mesh = _by_name(description.containers, "Tank"), _by_name(description.colliders, "Rock")
    assert (box.settings.friction, box.settings.bounce, box.settings.surface_offset) == (0.25, 0.5, 0.005)
    assert box.settings.collider_mode == "CONTAINER"
    assert (mesh.settings.friction, mesh.settings.bounce, mesh.settings.surface_offset) == (0.75, 0.125, -0.0025)
    assert mesh.settings.collider_mode == "SOLID"
    # vertices are float32 in Blender: equal to their rounding (6e-8 relative)
    np.testing.assert_allclose(box.upper, [0.001, 0.001, 0.003], rtol=1e-7, atol=1e-12)
    np.testing.assert_allclose(mesh.mesh.vertices.min(axis=0), [0.0004, 0.0004, 0.0], rtol=1e-7, atol=1e-12)
    np.testing.assert_allclose(mesh.mesh.vertices.max(axis=0), [0.0006, 0.0006, 0.0002], rtol=1e-7, atol=1e-12)
    # the defaults are the engine's
    settings = submodule(surge, "engine.settings")
    rock.surge.property_unset("friction")
    rock.surge.property_unset("bounce")
    rock.surge.property_unset("surface_offset")
    defaults = _by_name(_export(surge, scene).colliders, "Rock").settings
    assert defaults == settings.ColliderSettings(collider_mode="SOLID")


def _without_faces():
    mesh = bpy.data.meshes.new("Wire")
    mesh.from_pydata([(0.01, 0.01, 0.25), (0.05, 0.01, 0.25)], [(0, 1)], [])
    obj = bpy.data.objects.new("Wire", mesh)
    bpy.context.scene.collection.objects.link(obj)
    obj.surge.role = "COLLIDER"


def test_colliders_that_cannot_be_simulated_are_named(scene, surge, tmp_path):
    column_scene(scene, str(tmp_path / "cache"))
    _without_faces()
    growing = add_box("Growing", (0.02, 0.02, 0.22), (0.04, 0.04, 0.24), role="COLLIDER", collider_mode="SOLID")
    array = growing.modifiers.new("More", "ARRAY")
    array.relative_offset_displace = (2.0, 0.0, 0.0)
    _key_every_frame(array, "count", {1: 1, 2: 1, 3: 2})
    scene.frame_set(2)
    with pytest.raises(RuntimeError) as info:
        bpy.ops.surge.bake()
    text = str(info.value)
    assert "Collider 'Wire' has no faces" in text
    assert "Collider 'Growing' changes its vertices or faces between frames 1 and 3" in text
    assert scene.frame_current == 2
    assert not os.path.exists(tmp_path / "cache")  # refused before the folder was created


# --- Suzanne ------------------------------------------------------------------------------------------

#: Points of Suzanne's head (primitive_monkey_add, size 2, object space) at least 0.15 from her
#: surface, and points well outside her; the inside ones hold a winding number of 1.02-1.06.
SUZANNE_INSIDE = np.array([[0.0, 0.0, 0.0], [0.0, 0.2, 0.2], [0.0, 0.3, 0.4], [0.4, 0.2, 0.2], [-0.4, 0.2, 0.2],
                           [0.0, 0.3, -0.3], [0.0, 0.0, 0.6]])
SUZANNE_OUTSIDE = np.array([[0.0, 0.0, 1.6], [2.0, 0.0, 0.0], [0.0, -1.5, 0.0], [0.0, 1.6, 0.0], [0.0, 0.0, -1.4],
                            [1.3, 0.5, 0.8]])


def _suzanne(size: float, location, rotation_z: float = 0.0):
    bpy.ops.mesh.primitive_monkey_add(size=size, location=location, rotation=(0.0, 0.0, rotation_z))
    monkey = bpy.context.active_object
    monkey.name = "Suzanne"
    monkey.surge.role = "COLLIDER"
    return monkey


def _to_world(points, size, location, rotation_z):
    return (points * size / 2.0) @ _rz(rotation_z).T + np.asarray(location)


@pytest.mark.slow  # a bake of many frames: in the full suite, not the fast layer
def test_suzanne_as_shipped_is_solid_inside(scene, surge, tmp_path):
    """Suzanne is open (eye sockets) and non-manifold; her distance field must still know her inside."""
    column_scene(scene, str(tmp_path / "cache"))
    size, location, turn = 0.3, (0.5, 0.2, 0.2), math.radians(-90)
    _suzanne(size, location, turn)
    collider = _by_name(_export(surge, scene).colliders, "Suzanne")
    assert collider.motion == "STATIC" and collider.settings.collider_mode == "AUTO"
    assert collider.mesh.triangles.shape == (968, 3)  # 500 faces, quads split in two

    sdf = submodule(surge, "engine.collision.sdf")
    cell = 0.005
    grid = sdf.build_sdf(collider.mesh, cell, 4 * cell, "Suzanne", mode="SOLID_INSIDE")
    inside, _grad, _tri = sdf.sample(grid, _to_world(SUZANNE_INSIDE, size, location, turn))
    outside, _grad, _tri = sdf.sample(grid, _to_world(SUZANNE_OUTSIDE, size, location, turn))
    assert np.all(inside < -cell), inside
    assert np.all(outside > cell), outside


def _bake_scene(scene, cache_dir: str, spacing: float):
    """A 0.3 x 0.2 x 0.4 m tank, Suzanne (0.16 m) on its floor and a block of water above her."""
    add_box("Tank", (0.0, 0.0, 0.0), (0.3, 0.2, 0.4), role="COLLIDER", collider_mode="CONTAINER")
    add_box("Water", (0.06, 0.04, 0.22), (0.24, 0.16, 0.32), role="FLUID")
    monkey = _suzanne(0.16, (0.15, 0.1, 0.09))  # her ears along X, 0.04-0.26 m: clear of the walls
    scene.frame_start, scene.frame_end = 1, 9
    scene.surge.particle_spacing = spacing
    scene.surge.cache_directory = cache_dir
    return monkey


@pytest.mark.slow  # a bake in a child process or a fresh Blender
def test_water_falling_onto_suzanne_stays_out_of_her_head(scene, surge, tmp_path):
    spacing = 0.02
    cache_dir = str(tmp_path / "cache")
    monkey = _bake_scene(scene, cache_dir, spacing)
    description = _export(surge, scene)
    assert bpy.ops.surge.bake() == {"FINISHED"}
    assert monkey.surge.collider_resolved == "Solid (picked by Auto)"

    sdf = submodule(surge, "engine.collision.sdf")
    reader = submodule(surge, "engine.io.cache").CacheReader(cache_dir)
    assert reader.frames == list(range(1, 10))
    grid = sdf.build_sdf(_by_name(description.colliders, "Suzanne").mesh, 0.25 * spacing, 2 * spacing, "Suzanne",
                         mode="SOLID_INSIDE")
    touching = 0
    for frame in reader.frames:
        phi, _grad, _tri = sdf.sample(grid, reader.read_frame(frame)["position"])
        # half a spacing deep counts as inside: the response keeps particles on the surface to
        # within the distance field's interpolation error, far less than that
        assert np.count_nonzero(phi < -0.5 * spacing) == 0, frame
        touching = max(touching, np.count_nonzero(phi < spacing))
    assert touching >= 10  # the water did reach her

    # the grid is cached in the bake folder for the next bake; Free Bake deletes it, and only it
    grids = os.path.join(cache_dir, "sdf")
    assert any(name.endswith(".npz") for name in os.listdir(grids))
    with open(os.path.join(grids, "notes.txt"), "w", encoding="utf-8") as fh:
        fh.write("mine")
    assert bpy.ops.surge.free_bake() == {"FINISHED"}
    assert os.listdir(grids) == ["notes.txt"]


def test_collider_events_set_what_the_object_acts_as(scene, surge, tmp_path):
    """The engine's 'collider' event, fed to a session directly: the object shows the resolved mode."""
    bake = submodule(surge, "bridge.bake")
    progress_text = submodule(surge, "bridge.progress_text")
    monkey = _suzanne(0.3, (0.0, 0.0, 0.0))
    events = [{"event": "collider", "name": "Suzanne", "mode": "SOLID", "requested": "AUTO", "motion": "STATIC",
               "cells": 12345, "memory": 3 * 2**20, "seconds": 1.5, "cached": False},
              {"event": "collider", "name": "Deleted meanwhile", "mode": "SHELL", "requested": "SHELL",
               "motion": "RIGID", "cells": 1, "memory": 1, "seconds": 0.0, "cached": True}]
    session = bake.BakeSession.__new__(bake.BakeSession)
    session.scene_name, session.first_new, session.progress, session.status = scene.name, None, 0.0, ""
    session.scene_key = submodule(surge, "bridge.bake_state").scene_key(scene)
    session.figures, session.started = {}, time.monotonic()
    session.process = types.SimpleNamespace(events=lambda timeout: events, kill_if_overdue=lambda: False,
                                            cancel_requested_at=None)
    session.poll()
    assert monkey.surge.collider_resolved == "Solid (picked by Auto)"
    assert bake_state(surge, scene).status == progress_text.describe(events[-1])
    assert progress_text.describe(events[0]) == ("Collider 'Suzanne': Solid (picked by Auto), static "
                                                 "(12345 cells, 3.0 MiB, built in 1.5 s)")
    assert progress_text.describe(events[1]) == ("Collider 'Deleted meanwhile': Shell, moving (1 cells, 0.0 MiB, "
                                                 "from the cache)")
    bake_state(surge, scene).is_baking = False
