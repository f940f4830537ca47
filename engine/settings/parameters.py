"""The typed description every setting is declared with: :class:`Parameter` (label, unit, range,
tooltip, enum items, solvers and roles that read it, animatable) and the generic validation and
strict construction from JSON shared by the scene, role and stage settings."""

from __future__ import annotations

import dataclasses
import math
from dataclasses import dataclass, field
from typing import Any

from ..errors import InvalidSettingsError


def names(items) -> tuple:
    """The identifiers of an enum's ``(identifier, label, tooltip)`` items."""
    return tuple(item[0] for item in items)


@dataclass(frozen=True)
class Parameter:
    """Metadata of one setting, as read by validation, the Blender UI and the manifest.

    ``solvers`` names the solvers that read the setting (empty: every solver), ``roles`` the object
    roles it belongs to (per-object settings only; empty for scene settings), ``requires`` the
    ``(setting, value)`` pairs under which it acts (the Hybrid's interface depth only with the Auto
    interface, for instance). ``animatable`` says whether a bake reads it at every frame, so that a
    keyframe or driver on it is obeyed; the others are read once and must not be keyed. ``size`` is
    0 for a scalar and 3 for a vector (a tuple of three floats, each within ``min`` and ``max``).
    """

    name: str
    kind: type
    default: Any
    label: str
    tooltip: str
    unit: str = ""  # SI unit symbol in ASCII: "m", "m/s", "kg/m3", "m2/s"; "" for ratios
    min: float | None = None
    max: float | None = None
    soft_min: float | None = None
    soft_max: float | None = None
    items: tuple = ()
    group: str = "Simulation"
    solvers: tuple = ()
    roles: tuple = ()
    requires: tuple = ()
    animatable: bool = False
    size: int = 0

    def is_used_by(self, solver: str) -> bool:
        """True if ``solver`` reads this setting."""
        return not self.solvers or solver in self.solvers

    def acts_with(self, values) -> bool:
        """True if the setting acts given the current ``values`` (anything with the settings as
        attributes: engine settings, or the Blender property group mirroring them): the solver
        reads it and every condition of ``requires`` holds."""
        solver = getattr(values, "solver", None)
        if solver is not None and not self.is_used_by(solver):
            return False
        return all(getattr(values, name) == value for name, value in self.requires)


def _param(default, *, label, tooltip, unit="", min=None, max=None, soft_min=None, soft_max=None,
           items=(), group=None, requires=(), animatable=False):
    """One setting's field; ``group`` (the heading the panels list it under) defaults to the ``GROUP`` of
    the dataclass that declares it (see :func:`_group_of`)."""
    size = len(default) if isinstance(default, tuple) else 0
    meta = dict(label=label, tooltip=tooltip, unit=unit, min=min, max=max, soft_min=soft_min,
                soft_max=soft_max, items=tuple(items), group=group, requires=tuple(requires),
                animatable=animatable, size=size)
    return field(default=default, metadata=meta)


def _group_of(cls, f) -> str:
    """The heading of field ``f`` of settings dataclass ``cls``: its own ``group``, else the class's ``GROUP``."""
    return f.metadata.get("group") or getattr(cls, "GROUP", "Simulation")


def _parameters_of(cls) -> list[Parameter]:
    """Metadata of every field of a settings dataclass, in declaration order (a vector field, typed
    ``tuple``, has ``kind`` float and ``size`` 3)."""
    hints = {"str": str, "float": float, "int": int, "bool": bool, "tuple": float}
    return [Parameter(name=f.name, kind=hints[f.type] if isinstance(f.type, str) else f.type, default=f.default,
                      **dict(f.metadata, group=_group_of(cls, f))) for f in dataclasses.fields(cls)]


def _problems_in(settings, owner: str) -> list[str]:
    """Every problem with the fields of a settings dataclass (owner names it in the messages)."""
    problems: list[str] = []
    for p in _parameters_of(type(settings)):
        problems += _problems_for(p, getattr(settings, p.name), owner)
    return problems


def _strict_from_dict(cls, data: dict, owner: str):
    """Build ``cls`` from a dict, strictly (unknown keys are errors, missing ones take defaults; ints are
    accepted for float fields), and validate it; raises one :class:`InvalidSettingsError`."""
    known = {p.name: p for p in _parameters_of(cls)}
    problems = [f"{owner}: unknown setting '{k}'" for k in data if k not in known]
    if problems:
        raise InvalidSettingsError(problems)
    values = {k: _from_json(known[k], v) for k, v in data.items()}
    try:
        settings = cls(**values)
    except TypeError as exc:
        raise InvalidSettingsError([f"{owner}: {exc}"]) from exc
    problems = _problems_in(settings, owner)
    if problems:
        raise InvalidSettingsError(problems)
    return settings


def _number_from_json(kind: type, value):
    # ints are accepted for float settings (JSON writes 2.0 as 2 in some tools); bools are not numbers
    return float(value) if kind is float and isinstance(value, int) and not isinstance(value, bool) else value


def _from_json(p: Parameter, value):
    """A setting's value as read from JSON: a vector's list becomes a tuple (validation checks its length)."""
    if p.size and isinstance(value, list):
        return tuple(_number_from_json(p.kind, v) for v in value)
    return _number_from_json(p.kind, value)


def _problems_for(p: Parameter, value, owner: str) -> list[str]:
    where = f"{owner}: setting '{p.label}' ({p.name})"
    if p.size:
        if not isinstance(value, tuple) or len(value) != p.size:
            return [f"{where} must be {p.size} numbers (X, Y, Z), got {value!r}"]
        scalar = dataclasses.replace(p, size=0)
        return [problem for axis, v in zip("XYZ", value)
                for problem in _problems_for(dataclasses.replace(scalar, label=f"{p.label} {axis}"), v, owner)]
    if p.kind is bool:
        return [] if isinstance(value, bool) else [f"{where} must be true or false, got {value!r}"]
    if p.kind is str:
        if not isinstance(value, str):
            return [f"{where} must be text, got {value!r}"]
        names = [i[0] for i in p.items]
        if names and value not in names:
            return [f"{where} is {value!r}; choose one of {', '.join(names)}"]
        return []
    if p.kind is int and (isinstance(value, bool) or not isinstance(value, int)):
        return [f"{where} must be a whole number, got {value!r}"]
    if p.kind is float and (isinstance(value, bool) or not isinstance(value, (int, float))):
        return [f"{where} must be a number, got {value!r}"]
    if not math.isfinite(value):
        return [f"{where} must be finite, got {value!r}"]
    unit = f" {p.unit}" if p.unit else ""
    if p.min is not None and value < p.min:
        return [f"{where} is {value:g}{unit}, below the minimum {p.min:g}{unit}"]
    if p.max is not None and value > p.max:
        return [f"{where} is {value:g}{unit}, above the maximum {p.max:g}{unit}"]
    return []
