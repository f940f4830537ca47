"""Files saved by an earlier version open with the meaning they were saved with (bridge.migrate).

``tests/data/old_liquid_settings.blend`` was saved by the version that stored the kinematic viscosity
(m^2/s) as ``Scene.surge.viscosity`` and PBF's smoothing as ``pbf_xsph_viscosity`` (see
tests/data/README.md for what it holds). Opening it must give the same physical viscosity, mu = rho0 nu,
at every frame (keyframes and drivers included), the same smoothing and legacy surface pull, and wedge
variations in the new names and units; saving and opening it again must not convert anything twice.
"""

from __future__ import annotations

import os
import shutil

import bpy
import numpy as np
import pytest

from blender_helpers import submodule

pytestmark = pytest.mark.blender

OLD_FILE = os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))), "data",
                        "old_liquid_settings.blend")


def _at(scene, frame: int, name: str) -> float:
    scene.frame_set(frame)
    return float(getattr(scene.surge, name))


def _check(surge):
    honey, water, oil = (bpy.data.scenes[n] for n in ("Honey", "Water", "Oil"))
    # rtol 1e-6: the values are float32 in the file and in the properties
    rtol = 1e-6
    np.testing.assert_allclose(_at(honey, 1, "dynamic_viscosity"), 0.00704 * 1420.0, rtol=rtol)   # mu = rho0 nu
    np.testing.assert_allclose(_at(honey, 10, "dynamic_viscosity"), 0.01 * 1420.0, rtol=rtol)
    np.testing.assert_allclose(_at(honey, 1, "pbf_velocity_smoothing"), 2.0, rtol=rtol)
    np.testing.assert_allclose(_at(honey, 10, "pbf_velocity_smoothing"), 5.0, rtol=rtol)
    np.testing.assert_allclose(honey.surge.pbf_surface_tension, 0.3, rtol=rtol)   # legacy pull, as it was
    assert honey.surge.surface_tension == 0.0
    # what a bake reads: the keyed value at the first frame, in Pa s
    honey.frame_set(1)
    settings = submodule(surge, "bridge.export").settings_from_scene(honey)
    np.testing.assert_allclose(settings.dynamic_viscosity, 0.00704 * 1420.0, rtol=rtol)
    np.testing.assert_allclose(settings.pbf_velocity_smoothing, 2.0, rtol=rtol)
    # never set: water's default in both versions
    np.testing.assert_allclose(water.surge.dynamic_viscosity, 0.001, rtol=rtol)
    np.testing.assert_allclose(water.surge.particle_spacing, 0.03, rtol=rtol)
    # the driver's expression (m^2/s) is kept; the curve that maps its value onto the property is scaled by rho0
    driver = oil.animation_data.drivers[0]
    assert driver.data_path == "surge.dynamic_viscosity" and driver.driver.expression == "0.02 * 1.5"
    np.testing.assert_allclose(driver.evaluate(0.02 * 1.5), 0.02 * 1.5 * 912.0, rtol=rtol)
    for sc in (honey, water, oil):
        assert not {"viscosity", "pbf_xsph_viscosity"} & set(sc.surge.keys()), sc.name
    wedge = [(v.setting, v.values) for v in honey.surge_wedge.variations]
    assert wedge == [("dynamic_viscosity", "0.00142,1.42"), ("pbf_velocity_smoothing", "0.5,2"),
                     ("Scene.surge.dynamic_viscosity", "2.84")]


def test_a_file_of_the_earlier_version_keeps_its_physical_viscosity(surge, tmp_path):
    path = str(tmp_path / "old.blend")
    shutil.copyfile(OLD_FILE, path)
    bpy.ops.wm.open_mainfile(filepath=path)
    _check(surge)
    # saved by this version and opened again: nothing is converted twice
    again = str(tmp_path / "again.blend")
    bpy.ops.wm.save_as_mainfile(filepath=again)
    bpy.ops.wm.open_mainfile(filepath=again)
    _check(surge)


def test_a_scene_appended_from_an_old_file_is_converted_before_it_bakes(scene, surge, tmp_path):
    """Appending runs no load handler: the export converts the scene before reading it."""
    with bpy.data.libraries.load(OLD_FILE, link=False) as (src, dst):
        dst.scenes = ["Honey"]
    honey = dst.scenes[0]
    assert "viscosity" in honey.surge.keys()  # still the old value, in m^2/s
    honey.frame_start = honey.frame_end = 1
    errors = submodule(surge, "engine.errors")
    with pytest.raises(errors.InvalidSceneError):  # no fluid in that scene: refused, after converting
        submodule(surge, "bridge.export").export_scene(honey, bpy.context.evaluated_depsgraph_get())
    assert "viscosity" not in honey.surge.keys()
    honey.frame_set(1)
    np.testing.assert_allclose(honey.surge.dynamic_viscosity, 0.00704 * 1420.0, rtol=1e-6)
