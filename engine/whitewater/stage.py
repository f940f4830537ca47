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
                                                (:func:`engine.io.usd.write_points`), a new folder each
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
from ..io.cache import SDF_DIR, CacheReader
from .. import stages
from ..stages import USD_DIR_RE as _USD_DIR_RE, USD_KEPT_RE, Stage, StageRunner, read_manifest, write_atomic
from . import model
from .obstacles import Obstacles

NAME = "whitewater"
KINDS = model.KIND_NAMES  # spray, foam, bubbles: kind 0, 1, 2
FILE_RE = re.compile(r"^(frames/whitewater_\d{6}(\.tmp)?\.npz|"
                     r"usd_[0-9a-f]{12}/(spray|foam|bubbles)_\d{6}(\.tmp)?\.usdc)$")

#: Id of the one invisible point (radius 0, at the origin) in the point file of a kind that has no
#: particle at that frame: Cycles in Blender 5.0 stops a render on an empty point cloud.
EMPTY_ID = -1

#: Radius (m) each kind's points carry in the USD files. How big whitewater looks is the host's display
#: setting (Blender sets the radius of each kind in a display modifier, without running the stage again);
#: these are the defaults it starts from, for readers of the files that draw the radius as it is.
NOMINAL_SIZES = {"spray": 0.003, "foam": 0.005, "bubbles": 0.003}

#: name -> (dtype, trailing shape, unit, description) of the arrays of a frame file
ATTRIBUTES = {
    "position": ("float32", (3,), "m", "world-space position"),
    "velocity": ("float32", (3,), "m/s", "velocity"),
    "age": ("float32", (), "s", "time since the particle was emitted"),
    "lifetime": ("float32", (), "s",
                 "time left before the particle dissolves (runs down while it is foam or spray on a wall)"),
    "kind": ("uint8", (), "", "0 spray, 1 foam, 2 bubble"),
    "id": ("int32", (), "", "stable particle id"),
}


def frame_name(frame: int) -> str:
    return f"frames/whitewater_{frame:06d}.npz"


def usd_name(kind: str, frame: int) -> str:
    return f"{kind}_{frame:06d}.usdc"


def load_scene(job_dir: str):
    """The scene and settings of the job the cache was baked from (:func:`engine.scene.load_job`), or
    (None, None) when ``job_dir`` holds none (a cache written without a job: no colliders are known and
    gravity is the default)."""
    if not os.path.isfile(os.path.join(job_dir, "scene.json")):
        return None, None
    from ..scene import load_job

    return load_job(job_dir)


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
    job_dir : str, optional
        The job the cache was baked from (its colliders, containers and gravity); default
        ``<cache>/job``.
    in_bake : bool
        The stage runs inside the particle bake, each frame as soon as it is simulated
        (:func:`engine.stages.follow_bake`): automatic thresholds can then only look at the frames
        simulated so far, so each frame's are the mean of the per-frame maxima up to it (the stage over a
        finished cache uses the whole shot's).
    """

    name = NAME
    file_re = FILE_RE
    kept_on_restart = USD_KEPT_RE
    sequential = True

    def __init__(self, settings: settings_mod.WhitewaterSettings, particle_spacing: float, fps: float,
                 use_usd: bool = False, job_dir: str | None = None, in_bake: bool = False):
        self.ww = settings
        self.spacing = float(particle_spacing)
        self.fps = float(fps)
        self.gravity = np.array([0.0, 0.0, -9.81])  # the bake's, read in begin()
        self.scene = None
        self.obstacles: Obstacles | None = None
        self.job_dir = job_dir
        #: automatic thresholds from the frames so far (inside the bake) instead of the whole shot
        self.causal = bool(in_bake and settings.use_auto_thresholds)
        self.settings = dict(dataclasses.asdict(settings), particle_spacing=self.spacing, fps=self.fps)
        if settings.use_auto_thresholds:
            # the rule that turns the shot's potentials into thresholds is part of the result: whitewater
            # made by an earlier rule is made again, not kept
            self.settings["auto_thresholds"] = model.AUTO_RULE
        if self.causal:
            # another result than the same settings over the finished cache: another hash
            self.settings["thresholds_from"] = "frames so far"
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
        self._load_scene(cache_dir)
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
            for key in ("next_id", "stats", "maxima"):
                state[key] = {k: v for k, v in state.get(key, {}).items() if int(k) <= last}
        else:
            self.thresholds = None if self.causal else self._thresholds(cache_dir)
            state.clear()
            state.update(thresholds=self.thresholds.to_dict() if self.thresholds else None, next_id={}, stats={},
                         maxima={})
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
        liquid = self._liquid(frame, arrays)
        if self.causal:
            # inside the bake: the mean of the per-frame maxima of the frames so far, this one included
            self.state["maxima"][str(frame)] = [float(m) for m in model.frame_maxima(liquid)]
            self.thresholds = model.auto_thresholds(np.array(list(self.state["maxima"].values())), self.spacing,
                                                    self._gravity(frame))
            self.state["thresholds"] = self.thresholds.to_dict()
        self.diffuse, self.next_id, stats = model.step(self.diffuse, liquid, frame, dt, self.next_id, self.ww,
                                                       self.thresholds, self.spacing, self._gravity(frame))
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

    def _load_scene(self, cache_dir: str) -> None:
        """Gravity, containers and colliders of the bake, from its job (see :func:`load_scene`)."""
        scene, simulation = load_scene(self.job_dir or os.path.join(cache_dir, "job"))
        self.scene = scene
        if scene is None:
            return
        self.gravity = np.asarray(scene.gravity, dtype=np.float64).reshape(3)
        if scene.containers or scene.colliders:
            reader = CacheReader(cache_dir)
            first = reader.read_frame(reader.frames[0])["position"] if reader.frames else np.zeros((0, 3))
            self.obstacles = Obstacles(scene, simulation, first, os.path.join(cache_dir, SDF_DIR))

    def _gravity(self, frame: int) -> np.ndarray:
        """The bake's gravity at ``frame`` (animated gravity: that frame's value)."""
        track = self.scene.tracks.get("gravity") if self.scene is not None else None
        if track is None:
            return self.gravity
        index = min(max(frame - self.scene.frame_start, 0), len(track) - 1)
        return np.asarray(track[index], dtype=np.float64).reshape(3)

    def _liquid(self, frame: int, arrays: dict) -> model.LiquidFrame:
        """One cached frame's liquid, with the colliders posed at that frame."""
        if self.obstacles is not None:
            self.obstacles.set_frame(frame)
        return model.LiquidFrame(arrays["position"], arrays["velocity"], arrays["id"], self.spacing, self.obstacles)

    def _thresholds(self, cache_dir: str) -> model.Thresholds:
        """The settings' own thresholds, or (automatic) from the potentials of up to 48 frames of the shot."""
        if not self.ww.use_auto_thresholds:
            return model.Thresholds.manual(self.ww)
        reader = CacheReader(cache_dir)
        frames = reader.frames
        stride = max(1, len(frames) // 48)
        maxima = [model.frame_maxima(self._liquid(f, reader.read_frame(f))) for f in frames[::stride]]
        return model.auto_thresholds(np.array(maxima).reshape(-1, 3), self.spacing, self.gravity)

    def _write_usd(self, frame: int, arrays: dict, folder: str) -> None:
        from ..io import usd

        kind = arrays["kind"]
        for k, name in enumerate(KINDS):
            sel = kind == k
            part = {key: arrays[key][sel] for key in ("position", "velocity", "id", "age", "lifetime")}
            size = NOMINAL_SIZES[name]
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
    frame rate from the cache's manifest; options: ``usd=1`` writes the point files, ``job=DIR`` names the
    job folder (default ``<cache>/job``), ``in_bake=1`` runs inside the particle bake."""
    ww = settings_mod.whitewater_from_dict(settings, owner="Whitewater")
    spacing = float(cache_manifest.get("particle_spacing") or cache_manifest["settings"]["particle_spacing"])
    fps = float(cache_manifest.get("fps") or 24.0)
    return WhitewaterStage(ww, spacing, fps, use_usd=options.get("usd") == "1", job_dir=options.get("job") or None,
                           in_bake=options.get("in_bake") == "1")


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
    return stages.read_frame(cache_dir, NAME, frame_name(frame))


def usd_folder(cache_dir: str) -> str | None:
    """The folder of the whitewater's USD files in ``cache_dir`` (absolute), or None."""
    return stages.usd_folder(cache_dir, NAME)

