"""Print docs/settings.md: every Surge setting by the label the panels show, with its Python name, unit,
range, the solvers or roles that read it and whether it can be keyed, from the settings description
(``engine/settings/``), so that the table cannot drift from the code.

    .venv/bin/python tools/settings_table.py > docs/settings.md

``tests/test_settings_table.py`` checks that docs/settings.md is what this prints.
"""

from __future__ import annotations

import os
import sys

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, ROOT)

from engine import settings as settings_mod  # noqa: E402  (the repository root first)

HEADER = """# Settings by label

Every setting of the Surge panels, by the label the panel shows, with the name Python and `--set` use
(`Scene.surge.<name>`, `Object.surge.<name>`, `Scene.surge.whitewater.<name>`,
`Scene.surge_live.<name>`), its unit (lengths and speeds in Blender units times the scene's unit
scale), its range, what reads it, and whether it can be keyed (the bake reads it at every frame).
Blender shows the Python name in a setting's tooltip too, with *Edit › Preferences › Interface ›
Python Tooltips* on. Generated from `engine/settings/` by `tools/settings_table.py`.
"""


def _number(value) -> str:
    return f"{value:g}" if isinstance(value, float) else str(value)


def _range(p) -> str:
    if p.items:
        return ", ".join(f"`{i[0]}`" for i in p.items)
    if p.kind is bool:
        return "on / off"
    if p.min is None and p.max is None:
        return ""
    low = _number(p.min) if p.min is not None else "−∞"
    high = _number(p.max) if p.max is not None else "∞"
    return f"{low} – {high}"


def _table(params, reader) -> list[str]:
    lines = ["| label | Python name | unit | range | read by | keyable |", "|---|---|---|---|---|---|"]
    for p in sorted(params, key=lambda p: p.label.lower()):
        lines.append(f"| {p.label} | `{p.name}` | {p.unit} | {_range(p)} | {reader(p)} | "
                     f"{'yes' if p.animatable else ''} |")
    return lines


def _solvers(p) -> str:
    labels = {identifier: label for identifier, label, _tooltip in settings_mod.SOLVERS}
    return ", ".join(labels[s] for s in p.solvers) if p.solvers else "every solver"


def _roles(p) -> str:
    return ", ".join(r.title() for r in p.roles) + (f" ({_solvers(p)})" if p.solvers else "")


def render() -> str:
    out = [HEADER.rstrip("\n")]
    sections = (
        ("Scene (`Scene.surge`)", settings_mod.parameters(), _solvers),
        ("Objects (`Object.surge`)", settings_mod.object_parameters(), _roles),
        ("Baked surface (`Scene.surge`)", settings_mod.surface_parameters(), lambda p: "Bake Surface"),
        ("Whitewater (`Scene.surge.whitewater`)", settings_mod.whitewater_parameters(), lambda p: "Bake Whitewater"),
        ("Live (`Scene.surge_live`)", settings_mod.live_parameters(), lambda p: "the live session"),
    )
    for title, params, reader in sections:
        out += ["", f"## {title}", ""] + _table(params, reader)
    return "\n".join(out) + "\n"


if __name__ == "__main__":
    sys.stdout.write(render())
