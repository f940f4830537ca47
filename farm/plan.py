"""Planning a wedge: the ``--set`` options, the combinations and their folders, ``wedge.json``.

Standard library only, so that Blender's own process (the Wedge panel, :mod:`bridge.wedge`) and the
Dask programs of this package (:mod:`farm.wedge`) read and plan wedges with the same code. The file
layout of a wedge folder is described in :mod:`farm.wedge`.
"""

from __future__ import annotations

import hashlib
import itertools
import json
import os
import re
import time
from dataclasses import dataclass, field

WEDGE_FILE = "wedge.json"
WEDGE_FORMAT = "surge-wedge"
WEDGE_FORMAT_VERSION = 1
CANCEL_FLAG = "cancel.flag"
TASK_FILE = "task.json"
#: The bake's output (progress lines and errors), in the combination's folder.
BAKE_LOG = "bake_output.log"
#: Topic of the progress events the tasks send to the client.
PROGRESS_TOPIC = "surge-wedge-progress"
#: Exit statuses (as for a bake: 0 complete, 1 failed, 3 cancelled).
EXIT_DONE, EXIT_FAILED, EXIT_USAGE, EXIT_CANCELLED = 0, 1, 2, 3
#: Seconds a retried task waits for an orphaned bake of the same combination to cancel itself.
ORPHAN_WAIT = 120.0
#: Seconds a cancelled wedge waits for its running bakes to stop after the current substep.
CANCEL_WAIT = 120.0

_SETTING_RE = re.compile(r"^(?:(?:Scene|Object)\.surge\.)?([A-Za-z_][A-Za-z0-9_]*)(?:@(.+))?$")


class WedgeError(Exception):
    """A wedge that cannot start: bad ``--set`` options, or an output folder holding another wedge."""


@dataclass(frozen=True)
class Variation:
    """One ``--set``: a setting and the values to try.

    ``obj`` is None for a setting of the scene (``Scene.surge.NAME``), else the object's name
    (``Object.surge.NAME`` of that object).
    """

    name: str
    obj: str | None
    values: tuple[str, ...]

    @property
    def key(self) -> str:
        return self.name if self.obj is None else f"{self.name}@{self.obj}"


def parse_set(text: str) -> Variation:
    """``NAME=V1,V2`` or ``NAME@OBJECT=V1,V2`` (a ``Scene.surge.`` / ``Object.surge.`` prefix is allowed).

    Values are split at commas; a vector value writes its components with ``:`` (``0:0:-9.81``).
    """
    key, sep, values = text.partition("=")
    match = _SETTING_RE.match(key.strip())
    if not sep or match is None:
        raise WedgeError(f"--set {text!r}: expected NAME=V1,V2 or NAME@OBJECT=V1,V2")
    items = tuple(v.strip() for v in values.split(","))
    if not values.strip() or any(not v for v in items):
        raise WedgeError(f"--set {text!r}: every value must be non-empty (values are separated by commas)")
    if len(set(items)) != len(items):
        raise WedgeError(f"--set {text!r}: a value is listed twice")
    return Variation(match.group(1), match.group(2), items)


@dataclass
class Combination:
    """One combination of a wedge and what happened to it (one row of ``wedge.json``)."""

    index: int
    name: str
    settings: dict  # key ("NAME" or "NAME@OBJECT") -> value as given
    folder: str
    cache_dir: str
    blend: str
    status: str = "pending"  # pending, running, complete, failed, cancelled
    message: str = ""
    bake_time: float | None = None
    host: str | None = None
    worker: str | None = None
    attempts: int = 0
    frames: list = field(default_factory=list)

    def to_dict(self) -> dict:
        return {k: getattr(self, k) for k in ("index", "name", "settings", "folder", "cache_dir", "blend", "status",
                                              "message", "bake_time", "host", "worker", "attempts", "frames")}


def _slug(text: str) -> str:
    return re.sub(r"[^A-Za-z0-9.+-]+", "-", text).strip("-")[:40] or "x"


def combinations(blend: str, variations: list[Variation], out: str) -> list[Combination]:
    """Every combination of ``variations``, in a fixed order, each with its folder under ``out``.

    Folder names are made from the index, the values and a short hash of the settings, so the
    same command finds the same folders again.
    """
    if not variations:
        raise WedgeError("a wedge needs at least one --set")
    keys = [v.key for v in variations]
    if len(set(keys)) != len(keys):
        raise WedgeError(f"a setting is given twice: {', '.join(sorted(k for k in keys if keys.count(k) > 1))}")
    stem = os.path.splitext(os.path.basename(blend))[0]
    result = []
    for index, values in enumerate(itertools.product(*(v.values for v in variations))):
        settings = dict(zip(keys, values))
        digest = hashlib.sha256(json.dumps(settings, sort_keys=True).encode()).hexdigest()[:6]
        name = f"{index:03d}_" + "_".join(_slug(f"{v.name}-{value}") for v, value in zip(variations, values))
        name = f"{name[:100]}_{digest}"
        folder = os.path.join(out, name)
        result.append(Combination(index, name, settings, folder, os.path.join(folder, "cache"),
                                  os.path.join(folder, f"{stem}.blend")))
    return result


# --- wedge.json -------------------------------------------------------------------------------------

def wedge_document(blend: str, variations: list[Variation], combos: list[Combination], scheduler: str) -> dict:
    return {"format": WEDGE_FORMAT, "format_version": WEDGE_FORMAT_VERSION, "blend": blend,
            "variations": [{"setting": v.key, "values": list(v.values)} for v in variations],
            "scheduler": scheduler, "updated": time.strftime("%Y-%m-%dT%H:%M:%S%z"),
            "combinations": [c.to_dict() for c in combos]}


def read_wedge(out: str) -> dict | None:
    """The ``wedge.json`` in ``out``, or None when there is none.

    Raises
    ------
    WedgeError
        The file is not a wedge file of a version this code reads.
    """
    path = os.path.join(out, WEDGE_FILE)
    if not os.path.exists(path):
        return None
    try:
        with open(path, encoding="utf-8") as f:
            doc = json.load(f)
    except (OSError, ValueError) as exc:
        raise WedgeError(f"'{path}' cannot be read as a wedge file: {exc}") from exc
    if not isinstance(doc, dict) or doc.get("format") != WEDGE_FORMAT:
        raise WedgeError(f"'{path}' is not a Surge wedge file; choose another output folder")
    if doc.get("format_version") != WEDGE_FORMAT_VERSION:
        raise WedgeError(f"'{path}' has wedge format version {doc.get('format_version')!r}; this Surge reads "
                         f"version {WEDGE_FORMAT_VERSION}")
    return doc


def cache_complete(cache_dir: str) -> bool:
    """True when the cache's manifest says its bake completed."""
    try:
        with open(os.path.join(cache_dir, "manifest.json"), encoding="utf-8") as f:
            return json.load(f).get("status") == "complete"
    except (OSError, ValueError, AttributeError):
        return False


def merge_previous(doc: dict | None, blend: str, variations: list[Variation], combos: list[Combination]) -> None:
    """Carry over what an earlier run of the same wedge recorded (skipping completed combinations).

    Raises
    ------
    WedgeError
        The output folder holds a wedge of another shot or other settings.
    """
    if doc is None:
        return
    asked = [{"setting": v.key, "values": list(v.values)} for v in variations]
    if os.path.abspath(doc.get("blend", "")) != os.path.abspath(blend) or doc.get("variations") != asked:
        raise WedgeError("the output folder holds another wedge (another shot or other --set values); "
                         "choose another --out, or repeat that wedge's own options to resume it")
    previous = {c.get("name"): c for c in doc.get("combinations", []) if isinstance(c, dict)}
    for c in combos:
        old = previous.get(c.name)
        if not old:
            continue
        for key in ("status", "message", "bake_time", "host", "worker", "attempts", "frames"):
            if key in old:
                setattr(c, key, old[key])
        if c.status == "complete" and not cache_complete(c.cache_dir):
            c.status = "pending"  # the cache was deleted or changed since: bake it again
        elif c.status in ("running", "cancelled", "failed"):
            c.status = "pending"


def summary(doc: dict | None) -> str:
    """'3 of 4 complete, 1 failed' for a ``wedge.json`` document, or '' without one."""
    if not doc:
        return ""
    statuses = [c.get("status") for c in doc.get("combinations", []) if isinstance(c, dict)]
    parts = [f"{statuses.count('complete')} of {len(statuses)} complete"]
    parts += [f"{statuses.count(s)} {s}" for s in ("running", "failed", "cancelled") if statuses.count(s)]
    return ", ".join(parts)
