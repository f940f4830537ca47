"""Progress events of the engine's child processes (:mod:`engine.io.child`) as text for people: the
lines the panels, the status bar and headless bakes show.
"""

from __future__ import annotations

from ..engine import settings as settings_mod


def duration(seconds: float) -> str:
    """A duration for people: '42 s', '3 min 5 s', '2 h 10 min'."""
    seconds = max(0, int(round(seconds)))
    if seconds < 60:
        return f"{seconds} s"
    minutes, seconds = divmod(seconds, 60)
    if minutes < 60:
        return f"{minutes} min {seconds} s"
    hours, minutes = divmod(minutes, 60)
    return f"{hours} h {minutes} min"


def time_left(eta: float | None) -> str:
    """'3 min 5 s left', or what is said while no frame but the first (which compiles) has been timed."""
    return "estimating the time left" if eta is None else f"{duration(eta)} left"


#: Collider mode identifier -> the label the sidebar shows for it.
MODE_LABELS = {identifier: label for identifier, label, _tooltip in settings_mod.COLLIDER_MODES}

#: Collider motion (engine.scene.MeshCollider.motion) -> words for the user.
MOTION_WORDS = {"STATIC": "static", "RIGID": "moving", "DEFORMING": "deforming"}


def resolved_text(mode: str, requested: str) -> str:
    """What ``Object.surge.collider_resolved`` shows: the mode a collider acts in, and whether Auto chose it."""
    label = MODE_LABELS.get(mode, mode.title())
    return f"{label} (picked by Auto)" if requested == "AUTO" and mode != "AUTO" else label


def describe(event: dict) -> str | None:
    """One line for the user about a progress event, or None for events not worth showing."""
    kind = event.get("event")
    if kind == "stage":
        return {"fill": "Filling the fluid volumes with particles",
                "colliders": "Building the colliders' distance fields",
                "compile": "Compiling the simulation kernels (first bake after an update)",
                "simulate": "Simulating"}.get(event.get("stage"), f"Stage {event.get('stage')}")
    if kind == "frame":
        memory = f", {event['memory'] / 2**20:.0f} MiB" if event.get("memory") else ""
        return (f"Frame {event['frame']} of {event['frame_end']}: {event['particles']} particles, "
                f"{event['substeps']} substeps{memory}, {duration(event.get('elapsed', 0.0))} elapsed, "
                f"{time_left(event.get('eta'))}")
    if kind == "collider":
        grid = (f"{event.get('cells', 0)} cells, {event.get('memory', 0) / 2**20:.1f} MiB, "
                + ("from the cache" if event.get("cached") else f"built in {event.get('seconds', 0.0):.1f} s"))
        return (f"Collider '{event.get('name')}': {resolved_text(event.get('mode', ''), event.get('requested', ''))}, "
                f"{MOTION_WORDS.get(event.get('motion'), 'static')} ({grid})")
    if kind == "error":
        return f"Error: {event.get('message', '')}"
    if kind == "warning":
        return f"Warning: {event.get('message', '')}"
    if kind == "output":
        return event.get("text") or None
    return None
