"""Whitewater as a stage over a particle cache (:mod:`engine.stages`): spray, foam and bubbles made from
the baked liquid, re-run with new settings without simulating again.

Files in ``<cache>/whitewater/`` (the particle cache itself is only read):

==============================================  ===================================================
path                                            what
==============================================  ===================================================
``manifest.json``                               format ``surge-stage``, stage ``whitewater``, its
                                                settings (:class:`engine.settings.WhitewaterSettings`
                                                plus the cache's spacing and frame rate)
                                                and their SHA-256, the frames done and the particle
                                                frame each was made from; ``state`` holds the
                                                thresholds used, the next free id after each frame
                                                and each frame's figures
``frames/whitewater_NNNNNN.npz``                every diffuse particle of the frame (the model's
                                                whole state, see :mod:`.model`): ``position``,
                                                ``velocity``, ``age``, ``lifetime``, ``kind``, ``id``
``usd_XXXXXXXXXXXX/<kind>_NNNNNN.usdc``         with option ``usd=1``: one point file per kind
                                                (``spray``, ``foam``, ``bubbles``) for Blender
                                                (:func:`engine.usd.write_points`), a new folder each
                                                time the stage starts over; a kind without particles
                                                at a frame holds one point of radius 0 and id
                                                :data:`EMPTY_ID` (Blender 5.0's Cycles stops on an
                                                empty point cloud)
==============================================  ===================================================

The model carries its particles from frame to frame, so the stage is *sequential*: a run keeps the
frames done before the first one that must be redone, restores the particles of the last kept frame
and continues from there. A resumed run gives the same files, bit for bit, as an uninterrupted one.
"""

from __future__ import annotations

import dataclasses
import os
import re
import time
import uuid

import numpy as np

from .. import settings as settings_mod
from ..cache import CacheReader
from ..errors import CacheFormatError
from ..stages import Stage, StageRunner, read_manifest, write_atomic
from . import model

NAME = "whitewater"
KINDS = model.KIND_NAMES  # spray, foam, bubbles: kind 0, 1, 2
FILE_RE = re.compile(r"^(frames/whitewater_\d{6}(\.tmp)?\.npz|"
                     r"usd_[0-9a-f]{12}/(spray|foam|bubbles)_\d{6}(\.tmp)?\.usdc)$")
_USD_DIR_RE = re.compile(r"^usd_[0-9a-f]{12}$")

#: Id of the one invisible point (radius 0, at the origin) in the point file of a kind that has no
#: particle at that frame: Cycles in Blender 5.0 stops a render on an empty point cloud.
EMPTY_ID = -1

#: name -> (dtype, trailing shape, unit, description) of the arrays of a frame file
ATTRIBUTES = {
    "position": ("float32", (3,), "m", "world-space position"),
    "velocity": ("float32", (3,), "m/s", "velocity"),
    "age": ("float32", (), "s", "time since the particle was emitted"),
    "lifetime": ("float32", (), "s", "time left before the particle dissolves (runs down while it is foam)"),
    "kind": ("uint8", (), "", "0 spray, 1 foam, 2 bubble"),
    "id": ("int32", (), "", "stable particle id"),
}


def frame_name(frame: int) -> str:
    return f"frames/whitewater_{frame:06d}.npz"


def usd_name(kind: str, frame: int) -> str:
    return f"{kind}_{frame:06d}.usdc"


def job_gravity(cache_dir: str) -> np.ndarray:
    """The bake's gravity, from the job folder saved beside the cache (the default if there is none)."""
    path = os.path.join(cache_dir, "job", "scene.npz")
    if os.path.isfile(path):
        try:
            with np.load(path, allow_pickle=False) as z:
                if "gravity" in z.files:
                    return np.asarray(z["gravity"], dtype=np.float64).reshape(3)
        except (OSError, ValueError) as exc:
            raise CacheFormatError(f"The job '{path}' cannot be read: {exc}") from exc
    return np.array([0.0, 0.0, -9.81])


class WhitewaterStage(Stage):
    """Spray, foam and bubbles from each particle frame (see the module docstring).

    Parameters
    ----------
    settings : engine.settings.WhitewaterSettings
    particle_spacing : float
        Of the particle cache, m.
    fps : float
        Frames per second of the cache (frame f is at time f / fps).
    use_usd : bool
        Also write the three point files per frame for Blender.
    """

    name = NAME
    file_re = FILE_RE
    sequential = True

    def __init__(self, settings: settings_mod.WhitewaterSettings, particle_spacing: float, fps: float,
                 use_usd: bool = False):
        self.ww = settings
        self.spacing = float(particle_spacing)
        self.fps = float(fps)
        self.gravity = np.array([0.0, 0.0, -9.81])  # the bake's, read in begin()
        self.settings = dict(dataclasses.asdict(settings), particle_spacing=self.spacing, fps=self.fps)
        self.use_usd = bool(use_usd)
        self.usd_dir_name: str | None = None
        self.thresholds: model.Thresholds | None = None
        self.diffuse = model.Diffuse.empty()
        self.next_id = 0
        self.previous: int | None = None
        self.state: dict = {}

    # -- Stage -------------------------------------------------------------------------------------

    def begin(self, folder: str, state: dict, resumed: bool) -> None:
        self.state = state
        cache_dir = os.path.dirname(os.path.normpath(folder))
        self.gravity = job_gravity(cache_dir)
        kept = []
        if resumed:
            manifest = read_manifest(cache_dir, NAME) or {}
            kept = sorted(manifest.get("frames", []))
        if kept and "thresholds" in state:
            self.thresholds = model.Thresholds.from_dict(state["thresholds"])
            last = kept[-1]
            with np.load(os.path.join(folder, frame_name(last)), allow_pickle=False) as z:
                self.diffuse = model.Diffuse.from_arrays({k: z[k] for k in z.files})
            self.next_id = int(state["next_id"][str(last)])
            self.previous = last
            state["next_id"] = {k: v for k, v in state["next_id"].items() if int(k) <= last}
            state["stats"] = {k: v for k, v in state.get("stats", {}).items() if int(k) <= last}
        else:
            self.thresholds = self._thresholds(cache_dir)
            state.clear()
            state.update(thresholds=self.thresholds.to_dict(), next_id={}, stats={})
        if self.use_usd:
            name = state.get("usd_dir")
            if not (kept and isinstance(name, str) and _USD_DIR_RE.match(name)):
                name = f"usd_{uuid.uuid4().hex[:12]}"
            state["usd_dir"] = name
            self.usd_dir_name = name

    def frame_files(self, frame: int) -> list[str]:
        files = [frame_name(frame)]
        if self.use_usd and self.usd_dir_name:
            files += [f"{self.usd_dir_name}/{usd_name(kind, frame)}" for kind in KINDS]
        return files

    def process_frame(self, frame: int, arrays: dict, folder: str) -> dict:
        t0 = time.perf_counter()
        dt = 0.0 if self.previous is None else (frame - self.previous) / self.fps
        liquid = model.LiquidFrame(arrays["position"], arrays["velocity"], arrays["id"], self.spacing)
        self.diffuse, self.next_id, stats = model.step(self.diffuse, liquid, frame, dt, self.next_id, self.ww,
                                                       self.thresholds, self.spacing, self.gravity)
        self.previous = frame
        out = self.diffuse.arrays()
        with write_atomic(os.path.join(folder, frame_name(frame))) as tmp:
            with open(tmp, "wb") as fh:
                np.savez(fh, **out)
        if self.use_usd:
            self._write_usd(frame, out, folder)
        self.state["next_id"][str(frame)] = int(self.next_id)
        figures = stats.to_dict()
        self.state["stats"][str(frame)] = dict(figures, seconds=round(time.perf_counter() - t0, 4))
        if stats.capped:
            self.state["capped"] = int(self.state.get("capped", 0)) + stats.capped
        return dict(figures, whitewater=int(len(self.diffuse)))

    # -- helpers -----------------------------------------------------------------------------------

    def _thresholds(self, cache_dir: str) -> model.Thresholds:
        """The settings' own thresholds, or (automatic) from the potentials of up to 48 frames of the shot."""
        if not self.ww.use_auto_thresholds:
            return model.Thresholds.manual(self.ww)
        reader = CacheReader(cache_dir)
        frames = reader.frames
        stride = max(1, len(frames) // 48)
        maxima = []
        for f in frames[::stride]:
            a = reader.read_frame(f)
            maxima.append(model.frame_maxima(model.LiquidFrame(a["position"], a["velocity"], a["id"], self.spacing)))
        return model.auto_thresholds(np.array(maxima).reshape(-1, 3), self.spacing, self.gravity)

    def _write_usd(self, frame: int, arrays: dict, folder: str) -> None:
        from .. import usd

        sizes = (self.ww.spray_size, self.ww.foam_size, self.ww.bubble_size)
        kind = arrays["kind"]
        for k, name in enumerate(KINDS):
            sel = kind == k
            part = {key: arrays[key][sel] for key in ("position", "velocity", "id", "age", "lifetime")}
            size = sizes[k]
            if not len(part["id"]):
                # Cycles in Blender 5.0 stops the render on an empty point cloud: a frame without any
                # particle of this kind holds one invisible point (radius 0, id -1) instead
                part = {"position": np.zeros((1, 3), np.float32), "velocity": np.zeros((1, 3), np.float32),
                        "id": np.full(1, EMPTY_ID, np.int32), "age": np.zeros(1, np.float32),
                        "lifetime": np.zeros(1, np.float32)}
                size = 0.0
            path = os.path.join(folder, self.usd_dir_name, usd_name(name, frame))
            os.makedirs(os.path.dirname(path), exist_ok=True)
            usd.write_points(path, part["position"], part["velocity"], part["id"], size,
                             {"age": part["age"], "lifetime": part["lifetime"]}, frame,
                             prim_path=f"/SurgeWhitewater_{name}")


def make_stage(cache_manifest: dict, settings: dict, options: dict) -> WhitewaterStage:
    """The factory :data:`engine.stages.STAGE_TYPES` names: settings from a dict (strict), the spacing and
    frame rate from the cache's manifest; option ``usd=1`` writes the point files."""
    ww = settings_mod.whitewater_from_dict(settings, owner="Whitewater")
    spacing = float(cache_manifest.get("particle_spacing") or cache_manifest["settings"]["particle_spacing"])
    fps = float(cache_manifest.get("fps") or 24.0)
    return WhitewaterStage(ww, spacing, fps, use_usd=options.get("usd") == "1")


def run(cache_dir: str, settings: settings_mod.WhitewaterSettings, progress=None, cancel=None,
        restart: bool = False, use_usd: bool = False) -> dict:
    """Run the stage over ``cache_dir`` in this process (:class:`engine.stages.StageRunner`); frames done
    with the same settings from the same particle frames are kept unless ``restart``.

    Returns the runner's summary plus ``emitted`` (all frames), ``particles`` (alive at the last frame),
    ``capped`` (newborns the cap refused) and ``thresholds``.
    """
    reader = CacheReader(cache_dir)
    stage = make_stage(reader.manifest, dataclasses.asdict(settings), {"usd": "1" if use_usd else "0"})
    summary = StageRunner(cache_dir, stage, progress=progress, cancel=cancel, restart=restart).run()
    return dict(summary, **figures(cache_dir))


def figures(cache_dir: str) -> dict:
    """Totals of the whitewater in ``cache_dir``: ``emitted``, ``particles`` alive at the last frame,
    ``capped``, ``thresholds`` and, when the cap bound, a ``message`` that says so."""
    manifest = read_manifest(cache_dir, NAME)
    if manifest is None:
        return {"emitted": 0, "particles": 0, "capped": 0, "thresholds": None, "message": ""}
    state = manifest.get("state", {})
    stats = state.get("stats", {})
    frames = manifest.get("frames", [])
    last = stats.get(str(frames[-1]), {}) if frames else {}
    capped = int(state.get("capped", 0))
    cap = int(manifest.get("settings", {}).get("max_particles", 0))
    message = (f"The cap of {cap:,} whitewater particles was reached: {capped:,} new particles were not made; "
               f"raise Max Particles or lower the amounts") if capped else ""
    return {"emitted": sum(int(s["emitted"]) for s in stats.values()),
            "particles": int(last.get("spray", 0) + last.get("foam", 0) + last.get("bubbles", 0)),
            "capped": capped, "thresholds": state.get("thresholds"), "message": message}


def read_frame(cache_dir: str, frame: int) -> dict:
    """Arrays of one whitewater frame (see :data:`ATTRIBUTES`)."""
    path = os.path.join(cache_dir, NAME, frame_name(frame))
    try:
        with np.load(path, allow_pickle=False) as z:
            return {k: z[k] for k in z.files}
    except (OSError, ValueError) as exc:
        raise CacheFormatError(f"Whitewater frame {frame} in '{cache_dir}' cannot be read: {exc}") from exc


def usd_folder(cache_dir: str) -> str | None:
    """The folder of the whitewater's USD files in ``cache_dir`` (absolute), or None."""
    manifest = read_manifest(cache_dir, NAME)
    name = (manifest or {}).get("state", {}).get("usd_dir")
    return os.path.join(cache_dir, NAME, name) if name and _USD_DIR_RE.match(name) else None

