"""Nothing lost to one click: Free asks first (naming the files and their size), Esc stops playback before it
cancels a bake, and no blocking operator can be repeated with Shift+R or Adjust Last Operation.

Blender runs ``execute`` instead of ``invoke`` when there is no event (background mode): ``invoke`` and
``modal`` are called here on the operator class with a stand-in instance (``OperatorStub``), as
test_progress.py does for ``modal``.
"""

from __future__ import annotations

import os
import types

import bpy
import pytest

from blender_helpers import (OperatorStub, WindowManagerStub, bake_state, context_stub, draw, fake_cache,
                             snapshot, submodule)

pytestmark = pytest.mark.blender

ESC = types.SimpleNamespace(type="ESC", value="PRESS")


@pytest.fixture
def baked(scene, surge, tmp_path):
    """The scene with a small cache in its cache folder (written by the engine's cache writer, no bake)."""
    cache_dir = str(tmp_path / "cache")
    scene.surge.cache_directory = cache_dir
    size = fake_cache(surge, cache_dir)
    return cache_dir, size


def _confirm(cls, **props):
    """Press the button: run ``invoke``; returns (result, the popups asked for, the operator stub)."""
    wm = WindowManagerStub()
    op = OperatorStub(cls, **props)
    result = cls.invoke(op, context_stub(window_manager=wm), None)
    return result, wm.calls, op


def test_free_bake_asks_first_naming_the_files_and_their_size(baked, surge):
    cache_dir, size = baked
    before = snapshot(cache_dir)
    result, calls, _op = _confirm(bpy.types.SURGE_OT_free_bake)
    # the button only asked: the artist has not answered yet, nothing is gone
    assert result == {"CANCELLED"} and snapshot(cache_dir) == before
    assert [kind for kind, _kw in calls] == ["confirm"]
    message = calls[0][1]["message"]
    count = len(before)  # the manifest and three frames
    assert f"{count} files" in message and cache_dir in message, message
    assert submodule(surge, "bridge.freeing").size_text(size) in message, (message, size)
    assert calls[0][1]["confirm_text"] == "Delete" and calls[0][1]["icon"] == "WARNING"
    # what "Delete" runs (a script runs it too, without asking)
    assert bpy.ops.surge.free_bake() == {"FINISHED"}
    assert not os.path.exists(os.path.join(cache_dir, "manifest.json"))


def test_free_buttons_are_greyed_out_with_nothing_to_free_or_while_baking(baked, surge):
    cache_dir, _size = baked
    assert bpy.ops.surge.free_bake.poll()
    # no surface or whitewater baked yet: their Free buttons have nothing to delete
    assert not bpy.ops.surge.free_surface.poll() and not bpy.ops.surge.free_whitewater.poll()
    with pytest.raises(RuntimeError, match="Nothing to free"):
        bpy.ops.surge.free_surface()
    state = bake_state(surge, bpy.context.scene)
    state.is_baking = True
    try:
        assert not bpy.ops.surge.free_bake.poll()
    finally:
        state.is_baking = False
    bpy.ops.surge.free_bake()
    assert not bpy.ops.surge.free_bake.poll()  # freed: nothing left


def test_free_surface_and_whitewater_ask_for_their_own_files(baked, surge):
    cache_dir, _size = baked
    for stage in ("surface", "whitewater"):
        folder = os.path.join(cache_dir, stage, "frames")
        os.makedirs(folder)
        with open(os.path.join(cache_dir, stage, "manifest.json"), "w") as fh:
            fh.write("{}")
        with open(os.path.join(folder, f"{stage}_000001.npz"), "wb") as fh:
            fh.write(b"x" * 2500)
    for cls, what in ((bpy.types.SURGE_OT_free_surface, "surface"),
                      (bpy.types.SURGE_OT_free_whitewater, "whitewater")):
        assert cls.poll(bpy.context)
        result, calls, _op = _confirm(cls)
        message = calls[0][1]["message"]
        assert result == {"CANCELLED"} and f"baked {what} (2 files, 2.5 kB)" in message, message
        assert os.path.exists(os.path.join(cache_dir, what, "frames", f"{what}_000001.npz"))


def test_free_is_drawn_apart_from_bake_in_red(baked):
    drawn = draw(bpy.types.VIEW3D_PT_surge_bake.draw)
    bake = drawn.find("operator", "surge.bake")
    free = drawn.find("operator", "surge.free_bake")
    assert bake and free and all(not b["alert"] for b in bake) and all(f["alert"] for f in free)


class _Session:
    def __init__(self):
        self.cancelled = 0
        self.finished = False

    def cancel(self):
        self.cancelled += 1


@pytest.fixture
def playing(scene):
    """The animation playing (as after Space or Shift+Space); stopped afterwards."""
    bpy.ops.screen.animation_play()
    assert bpy.context.screen.is_animation_playing
    yield
    if bpy.context.screen.is_animation_playing:
        bpy.ops.screen.animation_cancel(restore_frame=False)


def test_esc_during_playback_stops_playback_not_the_bake(playing, surge):
    for cls in (bpy.types.SURGE_OT_bake, bpy.types.SURGE_OT_bake_surface, bpy.types.SURGE_OT_bake_whitewater):
        session = _Session()
        op = OperatorStub(cls, _session=session)
        assert cls.modal(op, bpy.context, ESC) == {"PASS_THROUGH"}, cls  # Blender's own Esc handler stops playback
        assert session.cancelled == 0, cls
    bpy.ops.screen.animation_cancel(restore_frame=False)
    # not playing: Esc cancels the bake (keeping its frames), as before
    session = _Session()
    op = OperatorStub(bpy.types.SURGE_OT_bake, _session=session)
    assert bpy.types.SURGE_OT_bake.modal(op, bpy.context, ESC) == {"RUNNING_MODAL"} and session.cancelled == 1


def test_esc_during_playback_leaves_the_live_session_running(playing, surge):
    live = submodule(surge, "bridge.live")
    stopped = []
    session = types.SimpleNamespace(scene=lambda: bpy.context.scene, stop=lambda **_kw: stopped.append(1))
    op = OperatorStub(bpy.types.SURGE_OT_live, _session=lambda: session)
    assert bpy.types.SURGE_OT_live.modal(op, bpy.context, ESC) == {"PASS_THROUGH"}
    assert not stopped and live.get(bpy.context.scene) is None  # nothing was stopped


def test_no_blocking_operator_can_be_repeated(surge):
    """Shift+R (Repeat Last) and Adjust Last Operation re-run REGISTER operators: none that runs a bake, a
    stage, starts a process or reads every cached frame may be one."""
    common = submodule(surge, "operators.common")
    operators = submodule(surge, "operators")
    blocking = {"SURGE_OT_bake_to_keyframes", "SURGE_OT_bake_in_terminal", "SURGE_OT_wedge_in_terminal",
                "SURGE_OT_resume_bake", "SURGE_OT_live"}
    checked = []
    for cls in operators.CLASSES:
        if issubclass(cls, common.StageOperator) or cls.__name__ in blocking:
            assert "REGISTER" not in cls.bl_options, cls.__name__
            checked.append(cls.__name__)
    assert {"SURGE_OT_bake", "SURGE_OT_bake_surface", "SURGE_OT_bake_whitewater",
            "SURGE_OT_live_bake_from_here"} | blocking <= set(checked)
