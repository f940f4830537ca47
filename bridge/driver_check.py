"""Drivers a bake reads, checked at every frame the export evaluates.

Blender writes 0 where a driver fails: an expression that raises is marked invalid
(``Driver.is_valid``), and one that gives NaN or infinity is only reported on Blender's own standard
error ("driver '<expression>' evaluates to 'nan'") while the driver stays "valid". Either would bake as a
silent 0 (a gravity of 0 from frame 3, say), so the export refuses both, naming the object, the setting
and the first frame.
"""

from __future__ import annotations

import contextlib
import os
import re
import sys
import tempfile

from ..engine import settings as settings_mod


#: What Blender prints (on its C stderr) for a Python driver whose result is not a finite number; the value
#: it then writes is 0, and nothing else tells (the driver stays "valid").
_NOT_FINITE_RE = re.compile(r"driver '(?P<expression>.*)' evaluates to '(?P<value>[^']*)'")


def _drivers(ids) -> list[tuple]:
    """(owner words, the ID, F-curve) of every driver on ``ids`` (the scene, the objects with a role and the
    force fields, their data and shape keys): what a bake reads."""
    out = []
    for words, ident in ids:
        for block in (ident, getattr(ident, "data", None), getattr(getattr(ident, "data", None), "shape_keys", None)):
            animation = getattr(block, "animation_data", None)
            if animation is not None:
                out += [(words, block, fc) for fc in animation.drivers]
    return out


def _setting_label(fc) -> str:
    """A driven property for people: 'Gravity Z', 'Viscosity', 'Location X'."""
    path = fc.data_path
    name = path.rpartition(".")[2]
    labels = {p.name: p.label for p in settings_mod.parameters() + settings_mod.collider_parameters()
              + settings_mod.inflow_parameters() + settings_mod.fluid_parameters()}
    label = labels.get(name) if path.startswith("surge.") else None
    label = label or name.replace("_", " ").title()
    try:
        size = len(fc.id_data.path_resolve(path))
    except (TypeError, ValueError, AttributeError):
        size = 0
    return f"{label} {'XYZW'[fc.array_index]}" if 1 < size <= 4 else label


class DriverCheck:
    """Checks, at every frame the export evaluates, that the drivers of what a bake reads give numbers:
    a driver whose expression fails (Blender marks it invalid and writes 0) or gives NaN or infinity
    (Blender writes 0 and only prints a line) would otherwise bake as a silent 0."""

    def __init__(self, ids):
        self.drivers = _drivers(ids)
        self.problems: dict[tuple, str] = {}
        # the not-finite case is only printed: listen to Blender's stderr, only if a Python expression could
        self.listen = any(fc.driver.type == "SCRIPTED" and not fc.driver.is_simple_expression
                          for _w, _b, fc in self.drivers)

    def frame_set(self, scene, frame: int, subframe: float = 0.0) -> None:
        with _stderr_lines(self.listen) as lines:
            scene.frame_set(frame, subframe=subframe)
        if not self.drivers:
            return
        expressions = {m.group("expression"): m.group("value") for m in map(_NOT_FINITE_RE.search, lines) if m}
        for words, block, fc in self.drivers:
            key = (block.name, fc.data_path, fc.array_index)
            if key in self.problems:
                continue
            if not fc.driver.is_valid:
                self.problems[key] = (f"{words}: the driver of '{_setting_label(fc)}' fails at frame {frame} "
                                      f"(expression '{fc.driver.expression}'; Blender's console says why) and "
                                      f"would bake as 0; fix or remove the driver")
            elif fc.driver.type == "SCRIPTED" and fc.driver.expression in expressions:
                self.problems[key] = (f"{words}: the driver of '{_setting_label(fc)}' gives "
                                      f"{expressions[fc.driver.expression]} at frame {frame} (expression "
                                      f"'{fc.driver.expression}') and would bake as 0; make it give a number")


@contextlib.contextmanager
def _stderr_lines(listen: bool):
    """Lines written to the process's standard error (file descriptor 2, where Blender's C code prints)
    inside the block, passed on to it afterwards; nothing is captured unless ``listen``."""
    lines: list[str] = []
    if not listen:
        yield lines
        return
    try:
        sys.stderr.flush()
        saved = os.dup(2)
    except (OSError, ValueError, AttributeError):
        yield lines  # no descriptor to listen on (an embedded interpreter): invalid drivers are still caught
        return
    with tempfile.TemporaryFile() as tmp:
        os.dup2(tmp.fileno(), 2)
        try:
            yield lines
        finally:
            os.dup2(saved, 2)
            os.close(saved)
            tmp.seek(0)
            data = tmp.read()
            if data:
                os.write(2, data)
                lines += data.decode("utf-8", errors="replace").splitlines()
