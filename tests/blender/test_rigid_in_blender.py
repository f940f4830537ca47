"""Rigid bodies in Blender: the role and Make Rigid Body (with Blender's own rigid body's mass), a bake
whose crate plays its motion as keyframes (in a Blender without Surge too), and Free Bake giving the
crate its own animation back."""

from __future__ import annotations

import json

import bpy
import numpy as np
import pytest

from blender_helpers import add_box, run_fresh_blender, submodule

pytestmark = pytest.mark.blender


def _tank_scene(sc, cache_dir: str, frames=(1, 48)):
    """Water 0.2 x 0.2 x 0.1 m in a tank, and a crate of pine (500 kg/m3) held above it."""
    add_box("Water", (0, 0, 0), (0.2, 0.2, 0.1), role="FLUID")
    add_box("Tank", (0, 0, 0), (0.2, 0.2, 0.4), role="COLLIDER", collider_mode="CONTAINER")
    crate = add_box("Crate", (-0.03, -0.03, -0.03), (0.03, 0.03, 0.03))
    crate.location = (0.1, 0.1, 0.2)
    crate.rotation_euler = (0.3, 0.0, 0.2)
    sc.frame_start, sc.frame_end = frames
    sc.surge.particle_spacing = 0.02
    sc.surge.cache_directory = cache_dir
    return crate


def _select_only(obj):
    bpy.context.view_layer.update()  # objects linked since the last update are not in the view layer yet
    for o in bpy.context.view_layer.objects:
        o.select_set(o == obj)
    bpy.context.view_layer.objects.active = obj


def test_make_rigid_body_takes_blenders_rigid_body_settings(scene, surge):
    crate = add_box("Crate", (0, 0, 0), (0.1, 0.1, 0.1))
    _select_only(crate)
    bpy.ops.rigidbody.object_add()
    crate.rigid_body.mass = 3.5
    crate.rigid_body.friction = 0.8
    crate.rigid_body.restitution = 0.25
    assert bpy.ops.surge.make_rigid_body() == {"FINISHED"}
    st = crate.surge
    assert st.role == "RIGID_BODY" and st.mass_mode == "MASS"
    assert st.mass == pytest.approx(3.5) and st.contact_friction == pytest.approx(0.8)
    assert st.contact_bounce == pytest.approx(0.25)
    assert not crate.hide_render                              # a rigid body renders as itself


def test_baked_crate_plays_as_keyframes_also_without_surge_and_free_bake_restores_it(scene, surge, tmp_path):
    blend = str(tmp_path / "shot.blend")
    crate = _tank_scene(scene, "//surge_cache/")
    _select_only(crate)
    bpy.ops.surge.make_rigid_body()
    # the crate's own animation: a key on its scale (kept aside while the baked motion plays)
    crate.keyframe_insert("scale", frame=1)
    own_action = crate.animation_data.action
    own_basis = np.array(crate.matrix_basis)
    bpy.ops.wm.save_as_mainfile(filepath=blend)
    assert bpy.ops.surge.bake() == {"FINISHED"}
    bpy.ops.wm.save_as_mainfile(filepath=blend)

    trajectory = submodule(surge, "engine.rigid.trajectory").read_trajectory(str(tmp_path / "surge_cache"))
    matrices = trajectory.of("Crate")["matrix"]
    # the cache: the crate fell into the water and floats (pine floats: its centre ends above the floor)
    assert matrices[-1][2, 3] < -0.05 and trajectory.of("Crate")["position"][-1, 2] > 0.03
    assert crate.animation_data.action is not own_action
    expected = {f: matrices[f - 1] @ own_basis for f in (1, 24, 48)}
    for f, want in expected.items():
        scene.frame_set(f)
        # float32 keys: 1e-6 of a unit
        np.testing.assert_allclose(np.array(crate.matrix_world), want, rtol=0.0, atol=2e-6)

    script = f"""
import json, sys
import bpy
bpy.ops.wm.open_mainfile(filepath={blend!r})
assert not hasattr(bpy.types.Scene, "surge"), "Surge is installed in the fresh Blender"
scene = bpy.context.scene
obj = bpy.data.objects["Crate"]
out = {{}}
for frame in (1, 24, 48):
    scene.frame_set(frame)
    out[frame] = [list(row) for row in obj.matrix_world]
print("RESULT " + json.dumps(out))
"""
    proc = run_fresh_blender(script)
    assert proc.returncode == 0, proc.stderr[-3000:]
    line = [x for x in proc.stdout.splitlines() if x.startswith("RESULT ")][-1]
    result = json.loads(line[len("RESULT "):])
    for f, want in expected.items():
        np.testing.assert_allclose(np.array(result[str(f)]), want, rtol=0.0, atol=2e-6)

    assert bpy.ops.surge.free_bake() == {"FINISHED"}
    assert crate.animation_data.action is own_action
    assert crate.rotation_mode == "XYZ" and not crate.surge.rigid_saved_rotation_mode
    scene.frame_set(30)
    np.testing.assert_allclose(np.array(crate.matrix_basis), own_basis, rtol=0.0, atol=1e-6)
    assert not [a for a in bpy.data.actions if a.name.startswith("Surge Motion")]


def test_open_rigid_body_is_refused_by_name(scene, surge, tmp_path):
    crate = _tank_scene(scene, str(tmp_path / "cache"), frames=(1, 3))
    import bmesh

    bm = bmesh.new()
    bm.from_mesh(crate.data)
    bm.faces.ensure_lookup_table()
    bmesh.ops.delete(bm, geom=[bm.faces[0]], context="FACES_ONLY")
    bm.to_mesh(crate.data)
    bm.free()
    crate.surge.role = "RIGID_BODY"
    with pytest.raises(RuntimeError, match="Rigid body 'Crate' is not a closed mesh"):
        bpy.ops.surge.bake()
    assert json.dumps(sorted(p.name for p in tmp_path.iterdir())) == "[]"
