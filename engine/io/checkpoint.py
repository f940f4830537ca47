"""Checkpoints: the solver state at a frame, so a cancelled or crashed bake can resume from it.

A checkpoint is ``checkpoints/checkpoint_NNNNNN.npz`` in the cache folder, written atomically
(:mod:`engine.io.atomic`) like the frames, and counts once the cache manifest lists it
(``checkpoints``). It holds every particle array in the solver's
current order (not sorted by id), so that a solver rebuilt from it takes exactly the substeps the
uninterrupted bake took: in deterministic mode, resuming gives bit-identical frames.

==========  ===========  =======  =================================================
name        shape        dtype    meaning
==========  ===========  =======  =================================================
format      ()           str      'surge-checkpoint'
format_v…   ()           int64    ``format_version``: :data:`FORMAT_VERSION`
x           (N, 3)       float32  position, m
v           (N, 3)       float32  velocity, m/s
a           (N, 3)       float32  acceleration of the last force evaluation, m/s^2
rho         (N,)         float32  density, kg/m^3
p           (N,)         float32  pressure, Pa
id          (N,)         int32    stable particle id
age         (N,)         float32  seconds since the particle was emitted
channel_*   (N,)         float32  the named extra channels (``channel_<name>``)
next_id     ()           int64    id the next emitted particle gets
solver_*    various      various  the solver's own state (``Solver.save_state().arrays()``, see
                                  :mod:`engine.solvers`): PBF ``level`` (N,) uint8; WCSPH ``x_ref``
                                  (N, 3) float32, the positions of the last neighbour-list build, and
                                  with continuity density ``rho_liquid`` (N,) float64, kg/m^3;
                                  HYBRID the grid, interface, kinds, ``x_ref`` and markers
                                  (:class:`engine.solvers.hybrid.HybridState`)
owed_K      (P_K,)       float64  particles inflow K's points owe (surface inflows)
body_*      various      float64  rigid bodies (B of them): ``body_x`` (B, 3), ``body_q`` (B, 4), ``body_v``,
                                  ``body_w``, ``body_impulse``, ``body_angular_impulse`` (B, 3), the contacts'
                                  impulses of the last substep ``body_contact_ids`` (K,) int64,
                                  ``body_contact_pn`` (K,), ``body_contact_pt`` (K, 3), and ``body_time`` ();
                                  see :meth:`engine.rigid.world.RigidWorld.save_arrays`
emitted     ()           int64    particles emitted so far
removed     ()           int64    particles removed so far
time        ()           float64  seconds since the first frame
frame       ()           int64    the frame this state ends
solver      ()           str      the solver's name (a key of ``SOLVER_TYPES``)
==========  ===========  =======  =================================================

Versions: 1 is the first versioned checkpoint (every array above but the solver's own is
required); :func:`load` refuses files of any other format or version.

A resume from the latest checkpoint (:func:`load_latest`) falls back to the one before it when
the latest cannot be read (truncated by a full disk, or a crash of the machine while it was
written), and says so.

Resuming with changed settings is allowed (the cache manifest's ``segments`` records which
settings produced which frames), except for settings the saved state cannot carry over: the
particle spacing and the solver; and the frame rate and first frame must not change.
"""

from __future__ import annotations

import os

import numpy as np

import zipfile

from . import atomic
from .cache import CHECKPOINT_DIR, CHECKPOINT_RE, MANIFEST, CacheReader
from ..errors import CacheFormatError, InvalidSettingsError
from ..core.particles import Particles

FORMAT_NAME = "surge-checkpoint"
FORMAT_VERSION = 1

_PARTICLE_ARRAYS = ("x", "v", "a", "rho", "p", "id")
#: Arrays every checkpoint of this format version holds.
_REQUIRED = _PARTICLE_ARRAYS + ("age", "next_id", "emitted", "removed", "time", "frame", "solver")


def checkpoint_path(cache_dir: str, frame: int) -> str:
    return os.path.join(cache_dir, CHECKPOINT_DIR, f"checkpoint_{int(frame):06d}.npz")


def is_due(frame: int, frame_start: int, every: int) -> bool:
    """True if a bake saving a checkpoint every ``every`` frames saves one at ``frame`` (0: never)."""
    return every > 0 and frame > frame_start and (frame - frame_start) % every == 0


def state(frame: int, solver, sources=None, copy: bool = False, bodies=None) -> dict:
    """The arrays a checkpoint of ``solver`` (and of the emitters, ``sources``, and the rigid bodies,
    ``bodies``) at the end of ``frame`` holds (see the module docstring); with ``copy``, copies that the
    solver's next substeps leave alone (a bake keeps the state of its last frame this way, to checkpoint it
    if it is stopped mid-frame)."""
    pt: Particles = solver.particles
    arrays = {name: getattr(pt, name) for name in _PARTICLE_ARRAYS}
    arrays["age"] = pt.age
    arrays.update({f"channel_{name}": arr for name, arr in pt.extra.items()})
    arrays["next_id"] = np.int64(pt.next_id)
    arrays.update({f"solver_{k}": v for k, v in solver.save_state().arrays().items()})
    if sources is not None:
        for k, e in enumerate(sources.emitters):
            if hasattr(e, "owed"):
                arrays[f"owed_{k}"] = e.owed
    # without sources (a solver stepped on its own) nothing was emitted or removed
    arrays.update(emitted=np.int64(0 if sources is None else sources.emitted),
                  removed=np.int64(0 if sources is None else sources.removed))
    if bodies is not None:
        arrays.update(bodies.save_arrays())
    arrays.update(time=np.float64(solver.time), frame=np.int64(frame), solver=np.array(solver.name),
                  format=np.array(FORMAT_NAME), format_version=np.int64(FORMAT_VERSION))
    return {k: np.array(v, copy=True) for k, v in arrays.items()} if copy else arrays


def write(cache_dir: str, frame: int, arrays: dict) -> str:
    """Write the checkpoint ``arrays`` (from :func:`state`) of ``frame``; returns the file's path."""
    path = checkpoint_path(cache_dir, frame)
    os.makedirs(os.path.dirname(path), exist_ok=True)
    atomic.write_npz(path, arrays)
    return path


def save(cache_dir: str, frame: int, solver, sources=None, bodies=None) -> str:
    """Write the state of ``solver`` (and of the emitters, ``sources``, and the rigid bodies, ``bodies``) at
    the end of ``frame``; returns the file's path."""
    return write(cache_dir, frame, state(frame, solver, sources, bodies=bodies))


def frames_on_disk(cache_dir: str) -> list[int]:
    """Frames that have a checkpoint file, ascending (listed in the manifest or not)."""
    folder = os.path.join(cache_dir, CHECKPOINT_DIR)
    if not os.path.isdir(folder):
        return []
    return sorted(int(m.group(1)) for m in map(CHECKPOINT_RE.match, os.listdir(folder)) if m)


def resumable_frames(cache_dir: str) -> list[int]:
    """Checkpoint frames a bake can resume from: those the manifest lists, whose file exists, and
    whose frame and every frame before it are in the cache (a checkpoint is listed after its
    frame, so a crash between the two leaves a frame without a checkpoint, never the reverse).

    Raises
    ------
    CacheFormatError
        If the folder's manifest exists but cannot be read (another format version, a damaged file): the
        message says why, which "no checkpoint" would not. A folder without a manifest has none: [].
    """
    if not os.path.exists(os.path.join(cache_dir, MANIFEST)):
        return []
    reader = CacheReader(cache_dir)
    listed = set(reader.frames)
    start = int(reader.manifest.get("frame_start", min(listed, default=0)))
    return [frame for frame in reader.checkpoints
            if os.path.isfile(checkpoint_path(cache_dir, frame))
            and all(f in listed for f in range(start, frame + 1))]


def load(cache_dir: str, frame: int) -> dict:
    """Arrays of the checkpoint at ``frame`` (see the module docstring).

    Raises
    ------
    CacheFormatError
        If the file is missing, truncated, of another format or version, or lacks an array; the
        message names the file.
    """
    path = checkpoint_path(cache_dir, frame)
    try:
        with np.load(path, allow_pickle=False) as z:
            state = {k: z[k] for k in z.files}
    except FileNotFoundError as exc:
        raise CacheFormatError(f"No checkpoint at frame {frame} in the cache '{cache_dir}'") from exc
    except (OSError, ValueError, EOFError, zipfile.BadZipFile) as exc:
        raise CacheFormatError(f"The checkpoint '{path}' cannot be read: {exc}") from exc
    fmt = str(state.get("format", "")) if "format" in state else None
    version = int(state["format_version"]) if "format_version" in state else None
    if fmt != FORMAT_NAME or version != FORMAT_VERSION:
        raise CacheFormatError(f"The checkpoint '{path}' has format {fmt!r} version {version!r}; this version of "
                               f"Surge reads {FORMAT_NAME} version {FORMAT_VERSION}. Bake again from the start.")
    missing = [k for k in _REQUIRED if k not in state]
    if missing:
        raise CacheFormatError(f"The checkpoint '{path}' lacks {', '.join(missing)}")
    return state


def load_latest(cache_dir: str, frames: list[int]) -> tuple[int, dict, list[str]]:
    """The newest of the checkpoints at ``frames`` that can be read: ``(frame, state, skipped)``,
    ``skipped`` saying which newer ones could not be read and why.

    Raises
    ------
    CacheFormatError
        If none can be read (the message lists each).
    """
    skipped = []
    for frame in sorted(frames, reverse=True):
        try:
            return frame, load(cache_dir, frame), skipped
        except CacheFormatError as exc:
            skipped.append(str(exc))
    raise CacheFormatError("No checkpoint of the cache can be read: " + "; ".join(skipped) if skipped else
                           f"The cache '{cache_dir}' has no checkpoint to resume from; bake it again")


def particles_of(state: dict, rest_density: float) -> Particles:
    """The particles a checkpoint holds, in its order."""
    pt = Particles.create(state["x"], state["v"], rest_density)
    for name in _PARTICLE_ARRAYS + ("age",):
        if name in state:
            getattr(pt, name)[:] = state[name].reshape(getattr(pt, name).shape)
    for key in state:
        if key.startswith("channel_"):
            pt.add_channel(key[len("channel_"):])[:] = state[key]
    pt.next_id = int(state["next_id"])
    return pt


def restore(solver, state: dict):
    """A solver that continues from ``state``, with the model of ``solver``.

    ``solver`` must be built exactly as the uninterrupted bake built it, from the first frame's
    particles: models take values from the initial state (the automatic speed of sound, PBF's
    speed limit). The new solver holds the checkpoint's particle arrays as they were saved, in
    their order and with the accelerations of the last force evaluation (which WCSPH's closing
    half-kick used and its next opening half-kick uses; evaluating them again from the saved
    velocities would not give the same values), at the checkpoint's time, with moving colliders
    posed for it.
    """
    if str(state["solver"]) != solver.name:
        raise CacheFormatError(f"The checkpoint at frame {int(state['frame'])} was saved by the {state['solver']} "
                               f"solver, not {solver.name}")
    rest = solver.particles.rest_density or float(np.mean(state["rho"]))
    own = {k[len("solver_"):]: v for k, v in state.items() if k.startswith("solver_")}
    try:
        fresh = solver.resume(particles_of(state, rest), own, float(state["time"]))
    except KeyError as exc:
        raise CacheFormatError(f"The checkpoint at frame {int(state['frame'])} lacks the {solver.name} solver's "
                               f"state ({exc.args[0]}); bake again from the start") from exc
    if fresh.collision is not None:
        fresh.collision.update(fresh.time)
    return fresh


def restore_sources(sources, state: dict) -> None:
    """Put the emitters' debts and the emission counters of ``state`` back into ``sources``."""
    for k, e in enumerate(sources.emitters):
        if f"owed_{k}" in state and hasattr(e, "owed"):
            e.owed = np.array(state[f"owed_{k}"], dtype=np.float64)
    sources.emitted = int(state["emitted"])
    sources.removed = int(state["removed"])


def restore_bodies(bodies, state: dict) -> None:
    """Put the rigid bodies' state of ``state`` back into ``bodies`` (an :class:`engine.rigid.world.RigidWorld`)."""
    if "body_x" not in state:
        raise CacheFormatError(f"The checkpoint at frame {int(state['frame'])} holds no rigid-body state, but the "
                               f"scene has rigid bodies; bake again from the start")
    if state["body_x"].shape[0] != len(bodies):
        raise CacheFormatError(f"The checkpoint at frame {int(state['frame'])} holds {state['body_x'].shape[0]} rigid "
                               f"bodies, the scene {len(bodies)}; bake again from the start")
    bodies.restore_arrays(state)


#: Settings a saved state cannot carry over to: (name, label).
FIXED_SETTINGS = (("particle_spacing", "Particle Spacing"), ("solver", "Solver"))


def check_resume(manifest: dict, frame: int, settings: dict, frame_start: int, fps: float, owner: str) -> None:
    """Raise :class:`InvalidSettingsError` if a bake with ``settings`` cannot resume at ``frame`` of the
    cache described by ``manifest`` (listing every reason)."""
    problems = []
    old = manifest.get("settings", {})
    for name, label in FIXED_SETTINGS:
        if name in old and old[name] != settings[name]:
            problems.append(f"{owner}: '{label}' changed from {old[name]!r} to {settings[name]!r} since frame "
                            f"{frame} was baked; a bake cannot resume across that change, bake again from the "
                            f"start")
    if int(manifest.get("frame_start", frame_start)) != int(frame_start):
        problems.append(f"{owner}: the first frame changed from {manifest.get('frame_start')} to {frame_start}; "
                        f"bake again from the start")
    if float(manifest.get("fps", fps)) != float(fps):
        problems.append(f"{owner}: the frame rate changed from {manifest.get('fps')} to {fps} fps; bake again "
                        f"from the start")
    if problems:
        raise InvalidSettingsError(problems)


def changed_settings(manifest: dict, settings: dict) -> list[str]:
    """Names of the settings that differ from those that baked the cache's last frames."""
    old = manifest.get("settings", {})
    return sorted(k for k in settings if old.get(k) != settings[k])
