"""A panel that tells the truth: progress text from the running session's own figures, each operator its own
tooltip, buttons greyed out with the reason when they cannot act, an Outdated mark once the set-up changed
since the bake, and a line saying which cache the liquid plays."""

from __future__ import annotations

import os

import bpy
import pytest

from blender_helpers import bake_state, column_scene, draw, fake_cache, submodule

pytestmark = pytest.mark.blender


class _ScriptedProcess:
    """Stands in for bridge.process.BakeProcess: hands out the events of ``script`` one poll at a time."""

    script: list = []

    def __init__(self, *args, **kwargs):
        self.polls = [list(batch) for batch in self.script]
        self.cancel_requested_at = None
        self.killed = False

    def events(self, timeout=0.0):
        return self.polls.pop(0) if self.polls else []

    @property
    def finished(self):
        return self.killed

    def request_cancel(self):
        self.cancel_requested_at = 0.0

    def kill_if_overdue(self):
        return False

    def kill(self):
        self.killed = True

    def wait(self):
        return -9


def test_a_stage_shows_its_own_frames_not_the_bakes(scene, surge, tmp_path, monkeypatch):
    """Bake Surface after a 96-frame bake: the panel and the status bar say 'Surface frame 1 of 3' (the
    stage's frames), and no time left until a frame after the first (which compiles) has been timed."""
    stage_session = submodule(surge, "bridge.stage_session")
    sidebar = submodule(surge, "panels.sidebar")
    scene.surge.cache_directory = str(tmp_path / "cache")
    fake_cache(surge, scene.surge.cache_directory, frames=(1, 2, 3))
    state = bake_state(surge, scene)  # what the particle bake left
    state.kind, state.frame_start, state.frame_end, state.frame = "Bake", 1, 96, 96
    state.particles, state.remaining, state.is_estimated = 7680, 0.0, True
    frame = {"event": "frame", "stage": "surface", "frame_start": 1, "frame_end": 3, "particles": 20,
             "seconds": 0.5, "triangles": 100, "memory": 2**27}
    _ScriptedProcess.script = [[{"event": "stage", "stage": "surface", "frames": 3, "kept": 0}],
                               [dict(frame, frame=1, eta=None, elapsed=90.0)],
                               [dict(frame, frame=2, eta=0.5, elapsed=90.5)]]
    monkeypatch.setattr(stage_session, "BakeProcess", _ScriptedProcess)
    session = submodule(surge, "bridge.surface_bake").SurfaceSession(scene)
    try:
        session.poll()
        assert "Meshing 3 frames" in sidebar.progress_text(scene)
        session.poll()
        assert sidebar.progress_text(scene) == "Surface frame 1 of 3"
        bar = draw(sidebar.draw_status_bar)
        assert bar.texts() == ["Surge: Surface frame 1 of 3, estimating the time left"]
        figures = dict(sidebar.bake_figures(state))
        assert figures["Frame"] == "1 of 3" and figures["Remaining"] == "estimating" and "Substeps" not in figures
        session.poll()
        assert draw(sidebar.draw_status_bar).texts() == ["Surge: Surface frame 2 of 3, 0 s left"]
    finally:
        session.abort()


def test_no_time_left_is_made_up_while_the_kernels_compile(surge):
    """The first frame of a fresh process carries the kernels' compile (tens of seconds after an update): the
    status names the compile, and the frame line gives no time left until a later frame has been timed."""
    describe = submodule(surge, "bridge.progress_text").describe
    assert describe({"event": "stage", "stage": "compile"}) == (
        "Compiling the simulation kernels (first bake after an update)")
    frame = {"event": "frame", "frame": 2, "frame_start": 1, "frame_end": 12, "particles": 10, "substeps": 3,
             "elapsed": 42.0}
    assert describe(dict(frame, eta=None)).endswith("42 s elapsed, estimating the time left")
    assert describe(dict(frame, frame=3, eta=4.2)).endswith("4 s left")


def test_a_preview_bake_counts_its_own_frames(scene, surge):
    """A preview of a 250-frame scene stops after its first frames: its progress says so."""
    sidebar = submodule(surge, "panels.sidebar")
    bake = submodule(surge, "bridge.bake")
    state = bake_state(surge, scene)
    scene.frame_end = 250
    # what BakeSession publishes for a preview (a bake of bake.PREVIEW_FRAMES frames)
    state.kind, state.frame_start, state.frame_end = "Preview", 1, bake.PREVIEW_FRAMES
    state.frame, state.particles, state.is_baking = 5, 100, True
    try:
        assert sidebar.progress_text(scene) == f"Preview frame 5 of {bake.PREVIEW_FRAMES}"
    finally:
        state.is_baking = False


def test_preview_and_bake_have_their_own_tooltips(scene, surge):
    op = bpy.types.SURGE_OT_bake
    bake_props = bpy.ops.surge.bake.get_rna_type()
    full = op.description(bpy.context, type("Props", (), {"preview": False})())
    preview = op.description(bpy.context, type("Props", (), {"preview": True})())
    assert full != preview
    assert "preview" in preview.lower() and "twice the particle spacing" in preview, preview
    assert "preview" not in full.lower(), full
    assert bake_props.description  # the class docstring stays the tooltip Blender shows in menus


def test_resume_is_greyed_out_without_a_checkpoint(scene, surge, tmp_path):
    scene.surge.cache_directory = str(tmp_path / "cache")
    assert not bpy.ops.surge.resume_bake.poll()
    with pytest.raises(RuntimeError, match="no checkpoint"):
        bpy.ops.surge.resume_bake()
    fake_cache(surge, scene.surge.cache_directory)
    assert not bpy.ops.surge.resume_bake.poll()  # frames, but still no checkpoint
    folder = os.path.join(scene.surge.cache_directory, "checkpoints")
    os.makedirs(folder)
    open(os.path.join(folder, "checkpoint_000002.npz"), "wb").close()
    assert bpy.ops.surge.resume_bake.poll()


def test_stage_buttons_are_greyed_out_until_a_bake_exists(scene, surge, tmp_path):
    scene.surge.cache_directory = str(tmp_path / "cache")
    for name in ("bake_surface", "bake_whitewater", "load_baked", "bake_to_keyframes"):
        assert not getattr(bpy.ops.surge, name).poll(), name
    with pytest.raises(RuntimeError, match="bake the liquid first"):
        bpy.ops.surge.bake_surface()
    fake_cache(surge, scene.surge.cache_directory)
    for name in ("bake_surface", "bake_whitewater", "bake_to_keyframes"):
        assert getattr(bpy.ops.surge, name).poll(), name


def test_a_keyed_setting_does_not_mark_the_bake_outdated(scene, surge, tmp_path):
    """Viscosity keyed over the shot differs from the baked first-frame value at other frames: the bake
    read it per frame, so that is no change of the set-up."""
    export = submodule(surge, "bridge.export")
    settings_mod = submodule(surge, "engine.settings")
    cache_state = submodule(surge, "bridge.cache_state")
    paths = submodule(surge, "bridge.paths")
    scene.surge.cache_directory = str(tmp_path / "cache")
    scene.surge.solver = "WCSPH"
    fake_cache(surge, scene.surge.cache_directory,
               header={"settings": settings_mod.to_dict(export.settings_from_scene(scene))})
    assert cache_state.outdated(scene, paths.ADDON_ROOT, export.settings_from_scene(scene)) == []
    scene.surge.dynamic_viscosity = 0.5
    assert cache_state.outdated(scene, paths.ADDON_ROOT, export.settings_from_scene(scene)) == [
        "settings Viscosity"]
    scene.surge.keyframe_insert("dynamic_viscosity", frame=1)
    assert cache_state.outdated(scene, paths.ADDON_ROOT, export.settings_from_scene(scene)) == []


@pytest.mark.slow  # a bake in a child process
def test_outdated_mark_and_the_cache_the_liquid_plays(scene, surge, tmp_path):
    """After a bake the panel says the liquid plays it; changing a setting, an object or the solver marks it
    Outdated before anything is pressed; a preview bake is named as what plays."""
    sidebar = submodule(surge, "panels.sidebar")
    column_scene(scene, str(tmp_path / "cache"), frames=(1, 2))
    assert bpy.ops.surge.bake() == {"FINISHED"}

    def texts():
        return draw(bpy.types.VIEW3D_PT_surge_bake.draw).texts()

    assert any(t.startswith("Playing the bake of frames 1-2") for t in texts()), texts()
    assert not [t for t in texts() if "Outdated" in t]
    scene.surge.dynamic_viscosity = 0.01
    assert any(t.startswith("Outdated:") and "Viscosity" in t for t in texts()), texts()
    group = bpy.types.Scene.bl_rna.properties["surge"].fixed_type
    scene.surge.dynamic_viscosity = group.properties["dynamic_viscosity"].default
    assert not [t for t in texts() if "Outdated" in t], texts()
    bpy.data.objects["Water"].location.x += 0.01
    assert any(t.startswith("Outdated:") and "'Water'" in t for t in texts()), texts()
    bpy.data.objects["Water"].location.x -= 0.01
    scene.surge.solver = "WCSPH"
    assert any(t.startswith("Outdated:") and "Solver" in t for t in texts()), texts()
    scene.surge.solver = "PBF"
    assert bpy.ops.surge.bake(preview=True) == {"FINISHED"}
    assert any(t.startswith("Playing the preview") for t in texts()), texts()
    assert sidebar is not None
