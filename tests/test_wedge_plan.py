"""Planning a wedge (farm.plan and farm.wedge, no Blender and no cluster): options, combinations, wedge.json, resume."""

from __future__ import annotations

import json
import os

import pytest

from farm import plan, wedge


def test_parse_set_reads_scene_and_object_settings_and_refuses_malformed_options():
    v = plan.parse_set("particle_spacing=0.02, 0.03")
    assert (v.name, v.obj, v.values, v.key) == ("particle_spacing", None, ("0.02", "0.03"), "particle_spacing")
    v = plan.parse_set("Object.surge.normal_speed@Tap 2=1,2,3")
    assert (v.name, v.obj, v.values, v.key) == ("normal_speed", "Tap 2", ("1", "2", "3"), "normal_speed@Tap 2")
    assert plan.parse_set("gravity=0:0:-9.81,0:0:-4").values == ("0:0:-9.81", "0:0:-4")
    for bad in ("viscosity", "=1,2", "viscosity=", "viscosity=1,,2", "vis cosity=1", "viscosity=1,1"):
        with pytest.raises(plan.WedgeError):
            plan.parse_set(bad)


def test_combinations_cover_the_product_in_order_with_stable_distinct_folders(tmp_path):
    sets = [plan.parse_set("particle_spacing=0.02,0.03"), plan.parse_set("viscosity@Water=0,0.001,0.01")]
    combos = plan.combinations("/shots/pour.blend", sets, str(tmp_path))
    assert [c.settings for c in combos] == [
        {"particle_spacing": a, "viscosity@Water": b} for a in ("0.02", "0.03") for b in ("0", "0.001", "0.01")]
    assert [c.index for c in combos] == list(range(6))
    assert len({c.folder for c in combos}) == 6
    assert all(c.cache_dir == os.path.join(c.folder, "cache") and c.blend == os.path.join(c.folder, "pour.blend")
               for c in combos)
    # the same command finds the same folders
    assert [c.folder for c in plan.combinations("/shots/pour.blend", sets,
                                                 str(tmp_path))] == [c.folder for c in combos]
    with pytest.raises(plan.WedgeError, match="given twice"):
        plan.combinations("/s.blend", [sets[0], sets[0]], str(tmp_path))
    with pytest.raises(plan.WedgeError, match="at least one"):
        plan.combinations("/s.blend", [], str(tmp_path))


def _cache(folder, status):
    os.makedirs(folder, exist_ok=True)
    with open(os.path.join(folder, "manifest.json"), "w") as f:
        json.dump({"status": status, "frames": [1, 2]}, f)


def test_a_second_run_skips_what_completed_and_retries_the_rest(tmp_path):
    sets = [plan.parse_set("viscosity=0,0.001,0.01,0.1")]
    combos = plan.combinations("/s.blend", sets, str(tmp_path))
    combos[0].status = "complete"
    _cache(combos[0].cache_dir, "complete")
    combos[1].status = "complete"  # listed complete, but its cache was baked again and left unfinished
    _cache(combos[1].cache_dir, "baking")
    combos[2].status, combos[2].message = "failed", "refused"
    combos[3].status = "cancelled"
    wedge.write_json_atomic(str(tmp_path / plan.WEDGE_FILE), plan.wedge_document("/s.blend", sets, combos, "x"))
    again = plan.combinations("/s.blend", sets, str(tmp_path))
    plan.merge_previous(plan.read_wedge(str(tmp_path)), "/s.blend", sets, again)
    assert [c.status for c in again] == ["complete", "pending", "pending", "pending"]
    # another wedge in the same folder is refused, not mixed in
    with pytest.raises(plan.WedgeError, match="another wedge"):
        plan.merge_previous(plan.read_wedge(str(tmp_path)), "/s.blend", [plan.parse_set("viscosity=0,1")], again)
    (tmp_path / plan.WEDGE_FILE).write_text('{"format": "something else"}')
    with pytest.raises(plan.WedgeError, match="not a Surge wedge file"):
        plan.read_wedge(str(tmp_path))


def test_the_bake_command_carries_the_combination(tmp_path):
    c = plan.combinations("/s.blend", [plan.parse_set("viscosity@Water=0.5")], str(tmp_path))[0]
    repo = tmp_path / "repo"
    (repo / "tools").mkdir(parents=True)
    (repo / "tools" / "bake.py").write_text("")
    spec = wedge._spec(wedge.WedgeRun(blend="/s.blend", variations=[], out=str(tmp_path), root=str(repo),
                                      python="/py"), c)
    cmd = wedge.bake_command(spec)
    assert cmd[:3] == ["/py", str(repo / "tools" / "bake.py"), "/s.blend"]
    assert cmd[cmd.index("--cache-dir") + 1] == c.cache_dir and cmd[cmd.index("--save-as") + 1] == c.blend
    assert cmd[cmd.index("--set") + 1] == "viscosity@Water=0.5"
    assert "--resume-if-possible" in cmd and "--watch-parent" in cmd and "--save" in cmd
    # an installed add-on without the repository's tools: Blender as a module with Surge enabled
    spec["root"] = str(tmp_path / "installed")
    cmd = wedge.bake_command(spec)
    assert cmd[:2] == ["/py", "-c"] and "addon_utils.enable('bl_ext.user_default.surge'" in cmd[2]
    assert "viscosity@Water=0.5" in cmd[2] and "resume='auto'" in cmd[2] and c.cache_dir in cmd[2]
    spec["blender"] = "/opt/blender/blender"
    cmd = wedge.bake_command(spec)
    assert cmd[:4] == ["/opt/blender/blender", "-b", "/s.blend", "--python-exit-code"]
    assert "viscosity@Water=0.5" in cmd[-1] and "resume='auto'" in cmd[-1]
