"""docs/settings.md (every setting by its panel label, with its Python name) is what the settings description
gives: a setting added, renamed or relabelled fails here until the table is made again."""

import importlib.util
import os

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def test_the_settings_table_matches_the_settings_description():
    spec = importlib.util.spec_from_file_location("settings_table", os.path.join(ROOT, "tools", "settings_table.py"))
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    with open(os.path.join(ROOT, "docs", "settings.md"), encoding="utf-8") as fh:
        assert fh.read() == module.render(), "run: .venv/bin/python tools/settings_table.py > docs/settings.md"
    # the label a new user sees in the panel finds the name a script needs
    assert "| PBF Velocity Smoothing | `pbf_velocity_smoothing` |" in module.render()
