"""What a new user trips on: keyframes on settings the bake reads once, bound messages that disagree with
the bound, settings the solver ignores (``--set``, wedges and the Wedge panel say so), the wedge's setting
picked from a list, labels that say one thing in one place, operators named for what they do."""

from __future__ import annotations

import json
import os
import sys
import types

import bpy
import pytest

from blender_helpers import add_box, draw, submodule

pytestmark = pytest.mark.blender


def _groups():
    """Every Surge property group an artist or a script can key, with its path for messages."""
    scene = bpy.context.scene
    obj = add_box("Keyed", (0, 0, 0), (1, 1, 1), role="FLUID")
    channel = obj.surge.channels.add()
    variation = scene.surge_wedge.variations.add()
    return [("Scene.surge", scene.surge), ("Scene.surge.whitewater", scene.surge.whitewater),
            ("Scene.surge_live", scene.surge_live), ("Scene.surge_wedge", scene.surge_wedge),
            ("Object.surge", obj.surge), ("Object.surge.channels[0]", channel),
            ("Scene.surge_wedge.variations[0]", variation)]


def test_only_the_settings_the_bake_reads_per_frame_can_be_keyed(scene, surge):
    """The panel offers a keyframe only where the bake reads the setting at every frame (the settings
    description's ``animatable``), and the API agrees: keying any other Surge property is refused."""
    settings = submodule(surge, "engine.settings")
    keyable = {p.name for p in (settings.parameters() + settings.object_parameters() + settings.live_parameters()
                                + settings.whitewater_parameters() + settings.surface_parameters())
               if p.animatable}
    checked = 0
    for path, group in _groups():
        for prop in group.bl_rna.properties:
            name = prop.identifier
            if name in ("rna_type",) or prop.type in ("POINTER", "COLLECTION") or prop.is_readonly:
                continue
            checked += 1
            if name in keyable:
                assert prop.is_animatable, f"{path}.{name}"
                continue
            assert not prop.is_animatable, f"{path}.{name} can be keyed but is read once per bake"
            with pytest.raises(TypeError, match="not animatable"):
                group.keyframe_insert(name)
    assert checked > 100


def test_a_bound_message_agrees_with_the_bound(scene, surge):
    headless = submodule(surge, "bridge.headless")
    headless.apply_settings(scene, ["particle_spacing=0.0005"])  # the minimum itself is allowed
    assert scene.surge.particle_spacing == pytest.approx(0.0005, rel=1e-6)
    with pytest.raises(Exception, match=r"must lie between 0\.0005 and 10 \(both included\); 0\.0004 is outside"):
        headless.apply_settings(scene, ["particle_spacing=0.0004"])


def test_set_says_when_the_solver_does_not_read_the_setting(scene, surge):
    headless = submodule(surge, "bridge.headless")
    water = add_box("Water", (0, 0, 0), (1, 1, 1), role="FLUID")
    scene.surge.solver = "PBF"
    warnings = headless.apply_settings(scene, ["artificial_viscosity=0.05", "pbf_velocity_smoothing=0.05"])
    assert len(warnings) == 1 and "'Artificial Viscosity' (artificial_viscosity) does not act with the PBF solver" in \
        warnings[0]
    assert "WCSPH, Hybrid" in warnings[0]
    # with the solver that reads it, set in the same breath: nothing to say
    assert headless.apply_settings(scene, ["solver=WCSPH", "artificial_viscosity=0.05"]) == []
    # an object's setting for another role
    warnings = headless.apply_settings(scene, [f"friction@{water.name}=0.5"])
    assert len(warnings) == 1 and "the object is Fluid" in warnings[0] and "Collider" in warnings[0]


def test_the_wedge_setting_is_picked_from_a_list_and_the_panel_says_when_it_does_not_act(scene, surge):
    props = submodule(surge, "props")
    wedge = scene.surge_wedge
    variation = wedge.variations.add()
    names = [name for name, _text in props._wedge_settings(variation, bpy.context, "")]
    assert {"particle_spacing", "dynamic_viscosity", "pbf_velocity_smoothing", "solver"} <= set(names)
    found = props._wedge_settings(variation, bpy.context, "spacing")  # what the search field shows as one types
    assert "particle_spacing" in [name for name, _text in found] and "solver" not in [name for name, _text in found]
    assert all("spacing" in name or "spacing" in text.lower() for name, text in found)
    variation.target = add_box("Rock", (0, 0, 0), (1, 1, 1), role="COLLIDER")
    names = [name for name, _text in props._wedge_settings(variation, bpy.context, "")]
    assert "friction" in names and "particle_spacing" not in names and "normal_speed" not in names

    variation.target, variation.setting, variation.values = None, "artificial_viscosity", "0.01,0.05"
    scene.surge.solver = "PBF"
    notes = [r["text"] for r in draw(bpy.types.VIEW3D_PT_surge_wedge.draw).find("label", icon="ERROR")]
    assert len(notes) == 1 and "does not act with the PBF solver" in notes[0]
    solver = wedge.variations.add()  # a wedge over the solver too: artificial viscosity acts under WCSPH
    solver.setting, solver.values = "solver", "PBF,WCSPH"
    assert not draw(bpy.types.VIEW3D_PT_surge_wedge.draw).find("label", icon="ERROR")
    variation.setting = "no_such"
    notes = [r["text"] for r in draw(bpy.types.VIEW3D_PT_surge_wedge.draw).find("label", icon="ERROR")]
    assert notes == ["'no_such' is no setting a wedge can vary"]


def test_the_wedge_panel_reads_its_file_only_when_it_changed(scene, surge, tmp_path, monkeypatch):
    cache_state = submodule(surge, "bridge.cache_state")
    scene.surge_wedge.output_directory = str(tmp_path)
    with open(tmp_path / "wedge.json", "w") as fh:
        json.dump({"format": "surge-wedge", "combinations": [{"status": "complete"}, {"status": "failed"}]}, fh)
    loads = []
    real = cache_state.json.load
    monkeypatch.setattr(cache_state.json, "load", lambda fh: loads.append(1) or real(fh))
    for _ in range(3):
        drawn = draw(bpy.types.VIEW3D_PT_surge_wedge.draw)
    assert "1 of 2 complete, 1 failed" in drawn.texts() and len(loads) == 1


def test_one_label_says_one_thing(scene, surge):
    """The Bake panel draws no two settings under the same label (the surface preview's radius and smoothing
    were both 'Surface ...' beside the baked surface's), and the live surface's radius, a multiple of the
    spacing, is not called by the name of a length."""
    scene.surge.liquid_object = bpy.data.objects.new("L", bpy.data.pointclouds.new("L"))
    scene.surge.surface_object = bpy.data.objects.new("S", bpy.data.meshes.new("S"))
    labels = [r["label"] for r in draw(bpy.types.VIEW3D_PT_surge_bake.draw).find("prop")]
    assert len(labels) > 20 and len(labels) == len(set(labels)), sorted(lab for lab in labels if labels.count(lab) > 1)
    live_radius = scene.surge_live.bl_rna.properties["surface_radius"]
    length = scene.surge.bl_rna.properties["surface_radius"]
    assert length.unit == "LENGTH" and live_radius.unit == "NONE" and live_radius.name != length.name
    assert "Spacing" in live_radius.name


def test_the_live_stop_button_and_the_background_bake_are_named_for_what_they_do(scene, surge, monkeypatch):
    live_panel = submodule(surge, "panels.live")
    figures = {"ratio": 1.0, "frame": 3, "particles": 10, "fps": 60.0, "engine_ms": 5.0, "substeps": 2}
    session = types.SimpleNamespace(paused=False, recording=False, status="Running", figures=figures, notice="")
    monkeypatch.setattr(live_panel.live, "get", lambda _scene: session)
    stop = draw(bpy.types.VIEW3D_PT_surge_live.draw).find("operator", "surge.live_stop")
    assert stop and stop[0]["icon"] not in ("SNAP_FACE", "NONE")
    if sys.platform != "win32":  # no terminal opens: the bake runs in the background, its log in the cache
        for op in (bpy.types.SURGE_OT_bake_in_terminal, bpy.types.SURGE_OT_wedge_in_terminal):
            assert "Terminal" not in op.bl_label and "Background" in op.bl_label


def test_every_tools_bake_option_is_documented(surge):
    """Every option of tools/bake.py is in the farm guide (docs/farm.md), and its help says what it does."""
    root = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
    sys.path.insert(0, os.path.join(root, "tools"))
    try:
        import importlib.util

        spec = importlib.util.spec_from_file_location("surge_tools_bake", os.path.join(root, "tools", "bake.py"))
        module = importlib.util.module_from_spec(spec)
        spec.loader.exec_module(module)
    finally:
        sys.path.pop(0)
    with open(os.path.join(root, "docs", "farm.md"), encoding="utf-8") as fh:
        guide = fh.read()
    options = []
    real_parse = module.argparse.ArgumentParser.parse_args

    def capture(parser, argv=None, namespace=None):
        options.extend(o for action in parser._actions for o in action.option_strings if o.startswith("--"))
        raise SystemExit(0)

    module.argparse.ArgumentParser.parse_args = capture
    try:
        with pytest.raises(SystemExit):
            module.main(["x.blend"])
    finally:
        module.argparse.ArgumentParser.parse_args = real_parse
    missing = [o for o in options if o != "--help" and f"`{o}" not in guide]
    assert options and missing == [], missing
