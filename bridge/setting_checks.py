"""Whether a Surge setting acts in a scene, and what can be varied: the checks behind ``--set``, wedges and the
Wedge panel, from the settings description (:class:`engine.settings.Parameter`: the solvers that read a
setting, the roles it belongs to, the modes it needs).

A setting the scene's solver does not read bakes bit-identical results whatever its value: a wedge over it
wastes its bakes, and a ``--set`` of it changes nothing. They are not refused (a scene may switch solver
later), but said, naming the setting, the solver and those that read it.
"""

from __future__ import annotations

from ..engine import settings as settings_mod

#: Solver identifier -> its label (PBF, WCSPH, Hybrid).
SOLVER_LABELS = {identifier: label for identifier, label, _tooltip in settings_mod.SOLVERS}


def scene_parameter(name: str):
    """The scene setting called ``name`` (a :class:`Parameter`), or None."""
    return next((p for p in settings_mod.parameters() if p.name == name), None)


def object_parameter(name: str):
    """The per-object setting called ``name``, or None."""
    return next((p for p in settings_mod.object_parameters() if p.name == name), None)


def does_not_act(name: str, solver: str, obj=None) -> str | None:
    """Why the setting ``name`` (of ``obj``'s ``Object.surge``, or of the scene's when ``obj`` is None) does not
    act with ``solver``, as a sentence; None when it acts (or is not an engine setting)."""
    p = object_parameter(name) if obj is not None else scene_parameter(name)
    if p is None:
        return None
    owner = f"Object '{obj.name}': setting" if obj is not None else "Setting"
    if not p.is_used_by(solver):
        readers = ", ".join(SOLVER_LABELS.get(s, s) for s in p.solvers)
        return (f"{owner} '{p.label}' ({name}) does not act with the {SOLVER_LABELS.get(solver, solver)} solver (only "
                f"{readers} read{'s' if len(p.solvers) == 1 else ''} it): every value bakes the same")
    if obj is not None and p.roles and obj.surge.role not in p.roles:
        roles = ", ".join(r.title() for r in p.roles)
        return (f"{owner} '{p.label}' ({name}) does not act: the object is "
                f"{obj.surge.role.title() if obj.surge.role != 'NONE' else 'not part of the simulation'}, and the "
                f"setting is read for {roles} objects")
    return None


def variable_settings(obj=None) -> list[tuple[str, str]]:
    """The settings a wedge can vary, as ``(name, label: tooltip)``: the scene's, or those of ``obj``'s role
    (every role's when it has none)."""
    if obj is None:
        params = settings_mod.parameters()
    else:
        params = [p for p in settings_mod.object_parameters() if obj.surge.role in p.roles or obj.surge.role == "NONE"]
    return [(p.name, f"{p.label}: {p.tooltip}") for p in params]
