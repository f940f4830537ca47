"""Progress of a modal bake (sidebar figures and status bar) and the Cancel button."""

from __future__ import annotations

import time
import types

import bpy
import pytest

from blender_helpers import bake_state, column_scene, evaluated_points, submodule

pytestmark = pytest.mark.blender


class _WindowManager:
    windows = ()

    def __init__(self):
        self.removed = []

    def event_timer_remove(self, timer):
        self.removed.append(timer)


class _Recorder:
    """A UILayout stand-in that records labels, progress texts and operators."""

    def __init__(self, log):
        self.log = log

    def row(self, **_kw):
        return self

    column = row

    def panel(self, _idname, **_kw):
        return self, self

    def label(self, text="", **_kw):
        self.log.append(("label", text))

    def progress(self, text="", factor=0.0, **_kw):
        assert 0.0 <= factor <= 1.0
        self.log.append(("progress", text))

    def operator(self, idname, **_kw):
        self.log.append(("operator", idname))
        return types.SimpleNamespace()

    def prop(self, _data, name, **_kw):
        self.log.append(("prop", name))


def _draw(function, context) -> list:
    log = []
    function(types.SimpleNamespace(layout=_Recorder(log)), context)
    return log


@pytest.mark.slow  # a bake in a child process or a fresh Blender
def test_modal_bake_reports_figures_and_the_cancel_button_keeps_frames(scene, surge, tmp_path):
    bake = submodule(surge, "bridge.bake")
    sidebar = submodule(surge, "panels.sidebar")
    op_cls = bpy.types.SURGE_OT_bake
    cache_dir = str(tmp_path / "cache")
    column_scene(scene, cache_dir, frames=(1, 200))
    reports = []
    op = types.SimpleNamespace(_session=bake.BakeSession(scene, bpy.context.evaluated_depsgraph_get()),
                               _timer=object(), report=lambda kind, text: reports.append((kind, text)))
    op._stop = types.MethodType(op_cls._stop, op)
    op._finish = types.MethodType(op_cls._finish, op)
    context = types.SimpleNamespace(window_manager=_WindowManager(), scene=scene)
    timer = types.SimpleNamespace(type="TIMER", value="NOTHING")
    assert bpy.ops.surge.cancel_bake.poll()  # the button is live while the scene bakes

    seen, status_bars, result = [], [], {"PASS_THROUGH"}
    while result == {"PASS_THROUGH"}:
        time.sleep(0.05)
        result = op_cls.modal(op, context, timer)
        s = bake_state(surge, scene)
        if result == {"PASS_THROUGH"} and s.particles:
            seen.append((s.frame, s.substeps, s.particles, s.elapsed, s.remaining, s.memory, s.is_estimated))
            status_bars.append(_draw(sidebar.draw_status_bar, bpy.context))
            if s.frame >= 4 and not s.cancel_requested:
                assert bpy.ops.surge.cancel_bake() == {"FINISHED"}  # what the button does
    assert result == {"FINISHED"} and context.window_manager.removed == [op._timer]
    assert reports[-1][0] == {"WARNING"} and "Bake cancelled" in reports[-1][1]

    assert seen, "no frame was reported during the bake"
    frames = [f[0] for f in seen]
    assert frames == sorted(frames) and 2 <= frames[0] < 200
    for frame, substeps, particles, _elapsed, remaining, memory, estimated in seen:
        assert particles == 250 and substeps >= 1 and memory > 1.0, (frame, substeps, memory)
        # frame 2, the first simulated, carries the kernels' compile: no estimate from it; then one
        assert estimated == (frame > 2) and (remaining > 0.0 or not estimated), (frame, remaining, estimated)
    elapsed = [f[3] for f in seen]
    assert elapsed == sorted(elapsed)
    first = status_bars[0]
    assert first[0][0] == "progress" and first[0][1].startswith(f"Surge: Frame {frames[0]} of 200, ")
    assert first[0][1].endswith("estimating the time left" if frames[0] == 2 else " left")
    assert ("operator", "surge.cancel_bake") in first

    # the frames baked before the cancel are kept and shown; the request is cleared for the next bake
    assert not bake_state(surge, scene).is_baking and not bake_state(surge, scene).cancel_requested
    assert not bpy.ops.surge.cancel_bake.poll()
    assert _draw(sidebar.draw_status_bar, bpy.context) == []  # nothing in the status bar once it ended
    cached = submodule(surge, "engine.io.cache").CacheReader(cache_dir)
    assert cached.manifest["status"] == "cancelled" and 4 <= len(cached.frames) < 200  # frames 1-4 at least
    assert evaluated_points(scene.surge.liquid_object, cached.frames[-1])["count"] == 250


def test_sidebar_lists_the_figures_while_baking(scene, surge):
    s = bake_state(surge, scene)
    s.is_baking, s.progress = True, 0.25
    s.frame, s.substeps, s.particles = 7, 12, 12345
    s.elapsed, s.remaining, s.memory = 75.0, 3725.0, 812.4
    s.kind, s.frame_start, s.frame_end, s.is_estimated = "Bake", 1, 25, True
    drawn = _draw(bpy.types.VIEW3D_PT_surge_bake.draw, bpy.context)
    assert ("progress", "Frame 7 of 25") in drawn
    labels = [text for kind, text in drawn if kind == "label"]
    for name, value in (("Frame", "7 of 25"), ("Substeps", "12"), ("Particles", "12,345"), ("Elapsed", "1 min 15 s"),
                        ("Remaining", "1 h 2 min"), ("Memory", "812 MiB")):
        assert labels[labels.index(name) + 1] == value, name
    assert ("operator", "surge.cancel_bake") in drawn
    s.is_baking = False
