"""Rigid bodies in Blender: their baked motion as plain keyframes, and their own animation kept aside.

After a bake, each object with the role Rigid Body plays the motion the cache records
(:func:`engine.rigid.trajectory.read_trajectory`) as a new action of linear keyframes on its location
and rotation (a quaternion), one key per cached frame, written in bulk: no Python runs on frame change,
the .blend plays in a Blender without Surge, and renders get motion blur from the keys. The action,
rotation mode and transform the object had are kept on ``Object.surge`` (``rigid_saved_*``) and come
back with Free Bake (:func:`restore`); a bake exports the body from them (:func:`own_motion`), never from
its baked keys.

An object with Blender's own active Rigid Body is switched to Animated (kinematic) while its baked
motion plays, so that Blender's rigid body world follows the keys instead of simulating it again; Free
Bake switches it back.

The cache's matrix T takes the first frame's world-space mesh (metres) to the frame's; the object's world
matrix at that frame is T (its translation in Blender units) times its world matrix at the first frame.
A parented body's keys are relative to its parent's transform at the first frame.
"""

from __future__ import annotations

import contextlib

import bpy
import mathutils
import numpy as np

from ..engine.errors import CacheFormatError
from .keyframes import _channelbag, _linear_curve

#: Name of the action that plays a body's baked motion: "<prefix><object name>".
ACTION_PREFIX = "Surge Motion "

#: Custom property holding an object's Blender rigid body's Animated flag while its baked motion plays.
KINEMATIC_KEY = "surge_rigid_body_kinematic"


def body_objects(scene) -> list:
    """The scene's objects with the role Rigid Body, by name."""
    return sorted((o for o in scene.objects if o.surge.role == "RIGID_BODY"), key=lambda o: o.name)


def blender_rigid_bodies(scene) -> list[str]:
    """Names of the Surge rigid bodies that also have Blender's own active Rigid Body (the bake tells the
    artist that Blender's rigid body world does not step them during the bake)."""
    return [o.name for o in body_objects(scene) if o.rigid_body is not None and o.rigid_body.type == "ACTIVE"]


def is_playing_bake(obj) -> bool:
    """True while ``obj`` plays its baked motion (its own animation is kept aside)."""
    return bool(obj.surge.rigid_saved_rotation_mode)


def _saved_matrix(obj) -> mathutils.Matrix:
    """The transform kept by :func:`_save` (stored row by row)."""
    return mathutils.Matrix(np.array(obj.surge.rigid_saved_matrix, dtype=np.float64).reshape(4, 4).tolist())


def _save(obj) -> None:
    st = obj.surge
    if is_playing_bake(obj):
        return                                 # a second bake: what is kept is still the object's own
    ad = obj.animation_data
    st.rigid_saved_action = ad.action if ad is not None else None
    st.rigid_saved_matrix = [v for row in obj.matrix_basis for v in row]
    st.rigid_saved_rotation_mode = obj.rotation_mode
    if obj.rigid_body is not None:
        obj[KINEMATIC_KEY] = bool(obj.rigid_body.kinematic)


def restore(obj) -> bool:
    """Give ``obj`` back its own action, rotation mode and transform and remove its baked motion; returns
    whether it was playing one."""
    st = obj.surge
    if not is_playing_bake(obj):
        return False
    baked = obj.animation_data.action if obj.animation_data is not None else None
    if obj.animation_data is not None:
        obj.animation_data.action = st.rigid_saved_action
    obj.rotation_mode = st.rigid_saved_rotation_mode
    obj.matrix_basis = _saved_matrix(obj)
    if obj.rigid_body is not None and KINEMATIC_KEY in obj:
        obj.rigid_body.kinematic = bool(obj[KINEMATIC_KEY])
        del obj[KINEMATIC_KEY]
    st.rigid_saved_action = None
    st.rigid_saved_rotation_mode = ""
    if baked is not None and baked.name.startswith(ACTION_PREFIX) and baked.users == 0:
        bpy.data.actions.remove(baked)
    return True


def restore_all(scene) -> int:
    """:func:`restore` every rigid body of ``scene`` (Free Bake); returns how many played a baked motion."""
    return sum(restore(o) for o in scene.objects if is_playing_bake(o))


@contextlib.contextmanager
def own_motion(scene):
    """Within the block, every body playing a baked motion has its own animation and transform back (what
    a bake exports); afterwards the baked motion plays again."""
    playing = [o for o in body_objects(scene) if is_playing_bake(o)]
    kept = []
    for obj in playing:
        ad = obj.animation_data
        kept.append((obj, ad.action if ad is not None else None, obj.rotation_mode, obj.matrix_basis.copy()))
        if ad is not None:
            ad.action = obj.surge.rigid_saved_action
        obj.rotation_mode = obj.surge.rigid_saved_rotation_mode
        obj.matrix_basis = _saved_matrix(obj)
    try:
        yield
    finally:
        for obj, action, mode, basis in kept:
            if obj.animation_data is not None:
                obj.animation_data.action = action
            obj.rotation_mode = mode
            obj.matrix_basis = basis


def _quaternion_rows(matrices: np.ndarray) -> np.ndarray:
    """Unit quaternions (w, x, y, z) of rotation matrices (F, 3, 3), each on the side of the one before
    (so that linear keys between frames never turn the long way round)."""
    from ..engine.rigid.motion import quaternion_of  # loads numba: only once a bake has bodies

    out = np.array([quaternion_of(m) for m in matrices])
    for k in range(1, len(out)):
        if out[k] @ out[k - 1] < 0.0:
            out[k] = -out[k]
    return out


def show_motion(scene, cache_dir: str, scale_length: float) -> list[str]:
    """Key every rigid body of ``scene`` that the cache in ``cache_dir`` records with its baked motion;
    returns the names keyed. Bodies the cache does not name keep what they have."""
    from ..engine.rigid.trajectory import read_trajectory  # numpy only (no compiled kernels)

    try:
        traj = read_trajectory(cache_dir)
    except (CacheFormatError, OSError):
        return []
    frames = traj.frames.astype(np.float64)
    keyed = []
    for obj in body_objects(scene):
        if obj.name not in traj.names or len(frames) == 0:
            continue
        motion = traj.of(obj.name)
        _save(obj)
        own = np.array(obj.surge.rigid_saved_matrix, dtype=np.float64).reshape(4, 4)
        parent = np.eye(4)
        if obj.parent is not None:
            parent = np.array(obj.parent.matrix_world, dtype=np.float64) @ np.array(obj.matrix_parent_inverse)
        first_world = parent @ own
        t = motion["matrix"].copy()
        t[:, :3, 3] /= scale_length                         # metres -> Blender units
        basis = np.linalg.inv(parent)[None] @ t @ first_world[None]
        size = np.linalg.norm(basis[:, :3, :3], axis=1)     # column lengths: the object's scale
        rotation = basis[:, :3, :3] / size[:, None, :]
        quat = _quaternion_rows(rotation)
        old = obj.animation_data.action if obj.animation_data is not None else None
        obj.rotation_mode = "QUATERNION"
        fcurves = _channelbag(obj, ACTION_PREFIX + obj.name).fcurves
        for axis in range(3):
            _linear_curve(fcurves, "location", axis, frames, basis[:, axis, 3])
        for k in range(4):
            _linear_curve(fcurves, "rotation_quaternion", k, frames, quat[:, k])
        obj.scale = size[0].tolist()
        if old is not None and old.name.startswith(ACTION_PREFIX) and old.users == 0:
            bpy.data.actions.remove(old)                    # the previous bake's motion
        if obj.rigid_body is not None:
            obj.rigid_body.kinematic = True                  # Blender's rigid body world follows the keys
        keyed.append(obj.name)
    if keyed:
        scene.frame_set(scene.frame_current)
    return keyed
