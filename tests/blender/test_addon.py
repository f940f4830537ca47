"""Registration, the scripting interface (properties mirror engine settings) and the sidebar."""

from __future__ import annotations

import math
import os
import subprocess
import sys
import types

import addon_utils
import bpy
import pytest

from blender_helpers import add_box, fake_cache, submodule

pytestmark = pytest.mark.blender

OPERATORS = ("bake", "free_bake", "cancel_bake", "resume_bake", "bake_to_keyframes", "bake_in_terminal",
             "load_baked", "make_fluid", "make_inflow", "make_collider", "make_outflow", "clear_role",
             "apply_liquid", "liquid_preset_add", "bake_surface", "free_surface", "bake_whitewater",
             "free_whitewater")
PANELS = ("VIEW3D_PT_surge_object", "VIEW3D_PT_surge_simulation", "VIEW3D_PT_surge_bake")
EXTRA_SCENE_PROPERTIES = {"cache_directory", "cache_folder_name", "liquid_object", "checkpoint_interval",
                          "use_frame_range", "frame_start", "frame_end", "time_scale",
                          "keyframe_instance",
                          "use_surface_preview", "surface_radius", "surface_smoothing", "use_surface_in_bake",
                          "liquid_display", "liquid_display_render", "display_percentage", "point_scale",
                          "surface_object", "surface_spray_object", "whitewater"}
EXTRA_WHITEWATER_PROPERTIES = {"spray_object", "foam_object", "bubbles_object", "summary", "use_in_bake", "spray_size",
                               "foam_size", "bubble_size", "viewport_percentage"}
EXTRA_OBJECT_PROPERTIES = {"role", "collider_resolved", "channels", "active_channel", "has_previous_display",
                           "previous_display_type", "previous_hide_render", "rigid_saved_action", "rigid_saved_matrix",
                           "rigid_saved_rotation_mode"}
BUILTIN = {"rna_type", "name", "bl_idname"}


def _operator_registered(name: str) -> bool:
    try:
        getattr(bpy.ops.surge, name).get_rna_type()
    except KeyError:
        return False
    return True


def _surge_handlers(module_name: str) -> list:
    found = []
    for name in dir(bpy.app.handlers):
        handlers = getattr(bpy.app.handlers, name)
        if isinstance(handlers, list):
            found += [h for h in handlers if getattr(h, "__module__", "").startswith(module_name)]
    return found


def _status_bar_draws(module_name: str) -> list:
    draws = bpy.types.STATUSBAR_HT_header._dyn_ui_initialize()
    return [f for f in draws if getattr(f, "__module__", "").startswith(module_name)]


def _assert_registered(surge) -> None:
    assert "surge" in bpy.types.Scene.bl_rna.properties and "surge" in bpy.types.Object.bl_rna.properties
    for op in OPERATORS:
        assert _operator_registered(op), op
    for panel in PANELS:
        cls = getattr(bpy.types, panel, None)
        assert cls is not None and cls.bl_category == "Surge" and cls.bl_space_type == "VIEW_3D", panel
    physics = getattr(bpy.types, "PHYSICS_PT_surge", None)
    assert physics is not None and (physics.bl_space_type, physics.bl_context) == ("PROPERTIES", "physics")
    assert "surge_bakes" in bpy.types.WindowManager.bl_rna.properties
    assert submodule(surge, "panels.viewport").is_registered(), "the kill box's draw handler is missing"
    assert bpy.context.preferences.addons[surge.__name__].preferences.bl_rna.identifier == "SurgePreferences"
    assert _surge_handlers(surge.__name__), "the load_post handler is missing"
    assert _status_bar_draws(surge.__name__), "the status bar's progress is missing"


def test_operators_panels_and_properties_are_registered(surge):
    _assert_registered(surge)


def test_register_unregister_register_leaves_nothing_behind(surge):
    name = surge.__name__
    viewport = submodule(surge, "panels.viewport")
    addon_utils.disable(name, default_set=True)
    try:
        assert "surge" not in bpy.types.Scene.bl_rna.properties
        assert "surge" not in bpy.types.Object.bl_rna.properties
        assert "surge_bakes" not in bpy.types.WindowManager.bl_rna.properties
        assert not hasattr(bpy.types.Scene, "surge")
        assert not viewport.is_registered()
        for op in OPERATORS:
            assert not _operator_registered(op), op
        for panel in PANELS:
            assert getattr(bpy.types, panel, None) is None, panel
        for cls in ("SurgeSceneSettings", "SurgeObjectSettings", "SurgeBakeState", "SurgePreferences",
                    "PHYSICS_PT_surge", "SURGE_OT_bake", "SURGE_OT_free_bake"):
            assert getattr(bpy.types, cls, None) is None, cls
        assert _surge_handlers(name) == []
        assert _status_bar_draws(name) == []
    finally:
        addon_utils.enable(name, default_set=True)
    _assert_registered(surge)
    # the second registration works as the first: the properties are usable
    bpy.ops.wm.read_homefile(use_empty=True)
    assert bpy.context.scene.surge.cache_directory == ""  # the default folder of this file and scene


def _scene_group():
    return bpy.types.Scene.bl_rna.properties["surge"].fixed_type


def _bake_state_group():
    return bpy.types.WindowManager.bl_rna.properties["surge_bakes"].fixed_type


def _object_group():
    return bpy.types.Object.bl_rna.properties["surge"].fixed_type


@pytest.mark.parametrize("owner", ["Scene", "Object", "Whitewater"])
def test_properties_mirror_engine_settings(surge, owner):
    """Scene.surge mirrors the simulation and surface settings, Object.surge the collider settings,
    Scene.surge.whitewater the whitewater settings."""
    settings = submodule(surge, "engine.settings")
    props = submodule(surge, "props")
    if owner == "Scene":
        rna, params, extras = (_scene_group().properties, settings.parameters() + settings.surface_parameters(),
                               EXTRA_SCENE_PROPERTIES)
    elif owner == "Whitewater":
        rna, params, extras = (_scene_group().properties["whitewater"].fixed_type.properties,
                               settings.whitewater_parameters(), EXTRA_WHITEWATER_PROPERTIES)
    else:
        rna, params, extras = _object_group().properties, settings.object_parameters(), EXTRA_OBJECT_PROPERTIES
    # both directions: every engine parameter is a property, every property is a parameter or a known extra
    assert {p.name for p in params} == set(rna.keys()) - extras - BUILTIN
    for p in params:
        prop = rna[p.name]
        assert prop.name == p.label, p.name
        assert prop.description == p.tooltip, p.name
        # keyframes and drivers only where the bake reads the setting at every frame
        assert prop.is_animatable == p.animatable, p.name
        if p.kind is float and p.size:
            assert prop.type == "FLOAT" and prop.is_array and prop.array_length == p.size, p.name
            assert tuple(prop.default_array) == pytest.approx(p.default, rel=1e-6), p.name
            assert prop.unit == props.BLENDER_UNITS[p.unit], p.name
            assert (prop.hard_min, prop.hard_max) == pytest.approx((p.min, p.max), rel=1e-6), p.name
        elif p.kind is float:
            assert prop.type == "FLOAT" and not prop.is_array, p.name
            # FloatProperty stores float32: compare to float32 resolution (7 significant digits)
            assert prop.default == pytest.approx(p.default, rel=1e-6, abs=1e-12), p.name
            assert prop.unit == props.BLENDER_UNITS.get(p.unit, "NONE"), p.name
            if p.unit in props.BLENDER_SUBTYPES:  # (Blender reports no subtype for a plain unit value)
                assert prop.subtype == props.BLENDER_SUBTYPES[p.unit], p.name
            lowest = -3.4028234663852886e38  # Blender's default hard limits for floats
            for attr, value, default in (("hard_min", p.min, lowest), ("hard_max", p.max, -lowest),
                                         ("soft_min", p.soft_min, p.min if p.min is not None else lowest),
                                         ("soft_max", p.soft_max, p.max if p.max is not None else -lowest)):
                expected = value if value is not None else default
                assert getattr(prop, attr) == pytest.approx(expected, rel=1e-6), (p.name, attr)
        elif p.kind is int:
            assert prop.type == "INT" and prop.default == p.default, p.name
            if p.min is not None:
                assert prop.hard_min == p.min, p.name
            if p.max is not None:
                assert prop.hard_max == p.max, p.name
        elif p.kind is bool:
            assert prop.type == "BOOLEAN" and prop.default == p.default, p.name
        elif p.items:
            assert prop.type == "ENUM" and prop.default == p.default, p.name
            assert [(i.identifier, i.name, i.description) for i in prop.enum_items] == [tuple(i) for i in p.items]
        else:
            assert prop.type == "STRING" and prop.default == p.default, p.name


def test_scene_defaults_make_engine_defaults(scene, surge):
    """A fresh scene exports exactly the engine's default settings (float32 storage rounded back)."""
    export = submodule(surge, "bridge.export")
    settings = submodule(surge, "engine.settings")
    assert export.settings_from_scene(scene) == settings.SimulationSettings()


def test_lengths_follow_the_unit_scale(scene, surge):
    export = submodule(surge, "bridge.export")
    scene.surge.particle_spacing = 0.03
    assert export.settings_from_scene(scene).particle_spacing == 0.03
    scene.unit_settings.scale_length = 0.01  # one Blender unit is a centimetre
    scene.surge.particle_spacing = 2.5
    scene.surge.sound_speed = 1000.0
    out = export.settings_from_scene(scene)
    assert out.particle_spacing == 0.025 and out.sound_speed == 10.0


def test_object_and_cache_properties(surge):
    obj = _object_group().properties
    assert [i.identifier for i in obj["role"].enum_items] == ["NONE", "FLUID", "INFLOW", "COLLIDER", "OUTFLOW",
                                                               "RIGID_BODY"]
    assert obj["role"].default == "NONE"
    assert [i.identifier for i in obj["collider_mode"].enum_items] == ["AUTO", "SOLID", "CONTAINER", "SHELL"]
    assert obj["collider_mode"].default == "AUTO"
    for mode in obj["collider_mode"].enum_items:
        assert "not available" not in mode.description, mode.identifier
    assert obj["surface_offset"].unit == "LENGTH"  # stored in Blender units, exported times the unit scale
    assert obj["collider_resolved"].type == "STRING" and obj["collider_resolved"].default == ""
    cache = _scene_group().properties["cache_directory"]
    assert cache.subtype == "DIR_PATH" and cache.default == ""  # empty: the default folder of the file and scene
    assert cache.is_path_supports_blend_relative  # else Blender 5.0 warns about the // prefix
    progress = _bake_state_group().properties["progress"]
    assert (progress.hard_min, progress.hard_max) == (0.0, 1.0)
    # what the add-on adds to the scene is the artist's set-up, never the state of a bake
    assert not any(name.startswith("bake_") or name == "is_baking" for name in _scene_group().properties.keys())


def test_every_property_has_a_tooltip_sentence(surge):
    groups = [_object_group(), _scene_group(), _bake_state_group(),
              bpy.context.preferences.addons[surge.__name__].preferences.bl_rna]
    for group in groups:
        for prop in group.properties:
            if prop.identifier in BUILTIN:
                continue
            assert len(prop.description.split()) >= 4, (group.identifier, prop.identifier, prop.description)
            for item in getattr(prop, "enum_items", ()):
                assert len(item.description.split()) >= 3, (prop.identifier, item.identifier)
    for op in OPERATORS:
        assert len(getattr(bpy.ops.surge, op).get_rna_type().description.split()) >= 5, op


class _Layout:
    """Stands in for UILayout: records what a panel draws, checks every keyword against the real
    UILayout function, and checks that every property and operator drawn exists."""

    def __init__(self, log, parent_active=True):
        self.log = log
        self.parent_active = parent_active
        self.active = True

    @staticmethod
    def _check(function: str, kw: dict) -> None:
        known = {p.identifier for p in bpy.types.UILayout.bl_rna.functions[function].parameters}
        assert set(kw) <= known, f"UILayout.{function} has no parameter {set(kw) - known}"

    def prop(self, data, name, **kw):
        self._check("prop", kw)
        assert name in data.bl_rna.properties, f"{data.bl_rna.identifier} has no property '{name}'"
        self.log.append(("prop", name))
        if not (self.active and self.parent_active):
            self.log.append(("inactive", name))  # drawn greyed out

    def operator(self, idname, **kw):
        self._check("operator", kw)
        module, name = idname.split(".")
        getattr(getattr(bpy.ops, module), name).get_rna_type()  # raises KeyError if missing
        self.log.append(("operator", idname))
        return types.SimpleNamespace()  # operator properties set by the panel land here

    def menu(self, menu, **kw):
        self._check("menu", kw)
        assert issubclass(getattr(bpy.types, menu), bpy.types.Menu), menu
        self.log.append(("menu", menu))

    def label(self, **kw):
        self._check("label", kw)
        self.log.append(("label", kw.get("text", "")))

    def progress(self, **kw):
        self._check("progress", kw)
        assert 0.0 <= kw.get("factor", 0.0) <= 1.0
        self.log.append(("progress", kw.get("text", "")))

    def panel(self, idname, **kw):
        self._check("panel", kw)
        return _Layout(self.log, self.active), _Layout(self.log, self.active and self.parent_active)

    def row(self, **kw):
        self._check("row", kw)
        return _Layout(self.log, self.active and self.parent_active)

    column = box = row

    def separator(self, **_kw):
        pass

    def template_list(self, list_type, _list_id, data, name, active_data, active_name, **kw):
        self._check("template_list", kw)
        assert name in data.bl_rna.properties and active_name in active_data.bl_rna.properties
        self.log.append(("list", list_type))

    def context_pointer_set(self, name, data):
        self.log.append(("pointer", name))


def _draw(panel_name: str) -> list:
    log = []
    panel = type("FakePanel", (), {"layout": _Layout(log)})()
    getattr(bpy.types, panel_name).draw(panel, bpy.context)
    return log


def _props(drawn) -> list:
    return [n for kind, n in drawn if kind == "prop"]


def test_panels_draw_existing_properties_and_operators(scene, surge):
    settings = submodule(surge, "engine.settings")
    state = submodule(surge, "bridge.bake_state")
    tank = add_box("Tank", (0, 0, 0), (1, 1, 1), role="COLLIDER", collider_mode="CONTAINER")
    bpy.context.view_layer.objects.active = tank

    def of_role(role):
        return [p.name for p in settings.object_parameters() if role in p.roles]

    drawn = _draw("VIEW3D_PT_surge_object")
    assert _props(drawn) == ["role"] + of_role("COLLIDER")
    assert not any(kind == "label" and "not available" in text for kind, text in drawn)
    for role in ("fluid", "inflow", "collider", "outflow"):
        assert ("operator", f"surge.make_{role}") in drawn, role
    tank.surge.collider_resolved = "Container (picked by Auto)"
    assert ("label", "Last bake: Container (picked by Auto)") in _draw("VIEW3D_PT_surge_object")
    tank.surge.role = "INFLOW"
    drawn = _draw("VIEW3D_PT_surge_object")
    assert _props(drawn) == ["role"] + of_role("INFLOW") and ("inactive", "normal_speed") not in drawn
    tank.surge.inflow_mode = "VOLUME"  # a volume inflow has no normal speed: greyed out
    assert ("inactive", "normal_speed") in _draw("VIEW3D_PT_surge_object")
    tank.surge.role = "FLUID"
    drawn = _draw("VIEW3D_PT_surge_object")
    assert _props(drawn) == ["role"] + of_role("FLUID") and "use_object_motion" in of_role("FLUID")
    channel = tank.surge.channels.add()
    channel.name = "tint"
    drawn = _draw("VIEW3D_PT_surge_object")
    assert drawn[-4:] == [("label", "Particle Channels"), ("list", "SURGE_UL_channels"),
                          ("operator", "surge.channel_add"), ("operator", "surge.channel_remove")]
    # Properties > Physics shows the same as the sidebar, its buttons acting on the object it shows
    assert _draw("PHYSICS_PT_surge") == [("pointer", "surge_object")] + drawn
    tank.surge.role = "OUTFLOW"
    drawn = _draw("VIEW3D_PT_surge_object")
    # an outflow's on/off switch (animatable: a drain that opens)
    assert _props(drawn) == ["role", "use_flow"] == ["role"] + of_role("OUTFLOW")
    assert ("label", "Removes the liquid inside this closed mesh") in drawn

    drawn = _draw("VIEW3D_PT_surge_bake")
    assert ("operator", "surge.bake") in drawn and ("operator", "surge.free_bake") in drawn
    assert ("prop", "cache_directory") in drawn
    st = state.ensure(scene)
    st.is_baking, st.progress, st.status = True, 0.5, "Frame 2 of 3"
    assert ("progress", "Frame 2 of 3") in _draw("VIEW3D_PT_surge_bake")
    st.is_baking = False


@pytest.mark.parametrize("solver", ["PBF", "WCSPH", "HYBRID"])
def test_simulation_panel_shows_only_what_the_solver_reads(scene, surge, solver):
    """Walk the settings description: under each solver the panel draws every setting that solver reads,
    in the description's order by heading, and none that it ignores; a setting that does not act in the
    current mode (Hybrid interface depth with a Fixed interface, kill box corners with the kill box off) is
    drawn greyed out."""
    settings = submodule(surge, "engine.settings")
    params = settings.parameters()
    scene.surge.solver = solver
    for mode, use_kill_box in (("AUTO", False), ("FIXED", True)):
        scene.surge.hybrid_interface_mode, scene.surge.use_kill_box = mode, use_kill_box
        drawn = _draw("VIEW3D_PT_surge_simulation")
        used = [p for p in params if p.is_used_by(solver)]
        by_heading = [p.name for g in dict.fromkeys(p.group for p in used) for p in used if p.group == g]
        frames = ["use_frame_range", "frame_start", "frame_end", "time_scale"]
        assert _props(drawn) == ["scale_length"] + frames + by_heading
        ignored = {p.name for p in params if not p.is_used_by(solver)}
        assert not ignored & set(_props(drawn)), ignored & set(_props(drawn))
        engine_values = submodule(surge, "bridge.export").settings_from_scene(scene)
        inactive = {n for kind, n in drawn if kind == "inactive"}
        # the simulation's own Start and End are greyed out until Own Frame Range is on
        assert inactive == {p.name for p in used if not p.acts_with(engine_values)} | {"frame_start", "frame_end"}
    if solver == "PBF":  # the four SPH settings that used to be drawn, active, under PBF
        assert not {"smoothing_length_factor", "artificial_viscosity", "sound_speed",
                    "cfl_number"} & set(_props(drawn))
    else:
        assert "artificial_viscosity" in _props(drawn) and "pbf_iterations" not in _props(drawn)
    # the liquid's physical viscosity and surface tension under every solver
    assert {"dynamic_viscosity", "surface_tension"} <= set(_props(drawn))
    assert ("menu", "SURGE_MT_liquid_presets") in drawn and ("operator", "surge.liquid_preset_add") in drawn


def test_operators_poll_without_a_3d_view(scene, surge, tmp_path):
    # background mode has no area: poll must only need the scene (and Free Bake something to free)
    assert bpy.context.area is None
    scene.surge.cache_directory = str(tmp_path / "cache")
    fake_cache(surge, scene.surge.cache_directory)
    assert bpy.ops.surge.bake.poll() and bpy.ops.surge.free_bake.poll()
    state = submodule(surge, "bridge.bake_state").ensure(scene)
    state.is_baking = True
    assert not bpy.ops.surge.bake.poll() and not bpy.ops.surge.free_bake.poll()
    state.is_baking = False


def test_bake_state_is_not_saved_with_the_file(scene, surge, tmp_path):
    """Progress written during a bake is window-manager state: a file saved mid-bake neither stores it nor
    claims to be baking when opened."""
    bake_state = submodule(surge, "bridge.bake_state")
    state = bake_state.ensure(scene)
    state.is_baking, state.frame, state.particles, state.status = True, 7, 1234, "Frame 7 of 24"
    path = str(tmp_path / "saved_while_baking.blend")
    bpy.ops.wm.save_as_mainfile(filepath=path)
    bpy.ops.wm.open_mainfile(filepath=path)
    assert bake_state.get(bpy.context.scene) is None and not bake_state.is_baking(bpy.context.scene)
    assert len(bpy.context.window_manager.surge_bakes) == 0
    assert bpy.ops.surge.bake.poll()


def test_bake_operator_is_not_repeatable(surge):
    """Repeat Last and Adjust Last Operation must not start a long, blocking bake again."""
    for op in (bpy.types.SURGE_OT_bake, bpy.types.SURGE_OT_resume_bake, bpy.types.SURGE_OT_bake_in_terminal):
        assert not {"REGISTER", "UNDO"} & set(op.bl_options), op


def test_float_display_precision_shows_the_defaults(surge):
    """A default such as 1e-6 must not display as 0.000."""
    settings = submodule(surge, "engine.settings")
    for rna, params in ((_scene_group().properties, settings.parameters()),
                        (_object_group().properties, submodule(surge, "props").object_parameters())):
        for p in params:
            if p.kind is float and not p.size and p.default:
                digits = rna[p.name].precision
                assert round(p.default, digits) != 0 or math.isclose(p.default, 0), (p.name, digits)


def test_installed_from_the_extension_zip_unless_told_otherwise(surge):
    """The session installs the built zip into user_default, as a user does (or the source tree on request)."""
    if os.environ.get("SURGE_TEST_FROM_SOURCE"):
        assert surge.__name__.startswith("bl_ext.dev.")
    else:
        assert surge.__name__ == "bl_ext.user_default.surge"
        assert not os.path.samefile(os.path.dirname(surge.__file__), os.path.dirname(os.path.dirname(
            os.path.dirname(os.path.abspath(__file__)))))


def test_the_package_imports_without_blender(surge):
    """The child process imports only engine/; the add-on's own __init__ must not need bpy either."""
    folder = os.path.dirname(surge.__file__)
    script = (f"import importlib.util, sys\n"
              f"spec = importlib.util.spec_from_file_location('surge_plain', {os.path.join(folder, '__init__.py')!r},"
              f" submodule_search_locations=[{folder!r}])\n"
              f"module = importlib.util.module_from_spec(spec); sys.modules['surge_plain'] = module\n"
              f"spec.loader.exec_module(module)\n"
              f"import surge_plain.engine.driver\n"
              f"assert callable(module.register) and callable(module.unregister)\n"
              f"assert 'bpy' not in sys.modules, 'bpy was imported'\n")
    proc = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, timeout=120)
    assert proc.returncode == 0, proc.stderr
