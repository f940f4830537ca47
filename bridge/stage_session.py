"""A stage over the baked cache (:mod:`engine.stages`: the surface, whitewater) run from Blender in a child
process, as a particle bake runs ``engine.cli bake``.

``python -m engine.stages run <stage>`` gets the stage's settings as a JSON file in the job folder and
writes the stage's USD files itself; Blender stays responsive, Esc cancels and keeps the frames done,
a new run with the same settings continues where the last one stopped, and new settings redo every
frame without touching the particles. :class:`StageSession` is polled like
:class:`bridge.bake.BakeSession` (from a modal operator's timer or a blocking loop) and holds names,
never Blender pointers; a subclass names the stage and says how its objects show the files.
"""

from __future__ import annotations

import contextlib
import os
import sys
import time
from dataclasses import dataclass

import bpy

from ..engine.io import atomic
from ..engine import stages
from ..engine.io.cache import CacheLock, CacheReader, check_folder, read_holder
from ..engine.errors import EngineError, InvalidSceneError
from . import bake_state, files, usd
from .child_session import ChildSession
from .progress_text import time_left
from .process import EXIT_CANCELLED, EXIT_COMPLETE, EXIT_ENGINE_ERROR, BakeProcess


class StageFailedError(EngineError):
    """A stage ended with an error or its process stopped unexpectedly."""


@dataclass
class StageResult:
    status: str  # 'complete' or 'cancelled'
    frames: int  # frames done in all
    processed: int  # frames done by this run
    elapsed: float
    cache_dir: str
    title: str  # "Surface", "Whitewater"
    done_words: str = "ready"
    note: str = ""  # a warning to add (the whitewater's cap)

    @property
    def message(self) -> str:
        if self.status == "complete":
            text = (f"{self.title} of {self.frames} frames {self.done_words} ({self.processed} made now, "
                    f"{self.elapsed:.1f} s) in '{self.cache_dir}'")
        else:
            text = f"{self.title} cancelled; {self.frames} frames are kept in '{self.cache_dir}'"
        return f"{text}. {self.note}" if self.note else text


def write_settings(cache_dir: str, name: str, values: dict) -> str:
    """Write a stage's settings file (``job/<name>``) for the child; returns its path."""
    path = os.path.join(files.job_dir(cache_dir), name)
    os.makedirs(os.path.dirname(path), exist_ok=True)
    atomic.write_json(path, values)
    return path


@contextlib.contextmanager
def locked_for(cache_dir: str, purpose: str, held: bool = False):
    """Hold the lock of ``cache_dir`` for ``purpose`` (a Free Surface, say) unless the caller already holds
    it (``held``) or the folder does not exist; raises :class:`CacheLockedError` naming the holder."""
    if held or not os.path.isdir(cache_dir):
        yield
        return
    with CacheLock(cache_dir, purpose):
        yield


def free_job_files(cache_dir: str, names: tuple) -> int:
    """Delete the named files of the job folder (and temporary files of those names a killed writer
    left, :func:`engine.io.atomic.is_temporary`); returns how many went."""
    folder = files.job_dir(cache_dir)
    count = 0
    for entry in sorted(os.listdir(folder)) if os.path.isdir(folder) else ():
        path = os.path.join(folder, entry)
        if atomic.final_name(entry) in names and os.path.isfile(path):
            os.remove(path)
            count += 1
    return count


def describe_event(event: dict, title: str, running: str, frame_words) -> str | None:
    """One line for the user about a stage's progress event, or None for events not worth showing.

    ``running`` opens the line of the stage's start ("Meshing": "Meshing 72 frames (10 kept from the last
    run)"); ``frame_words(event)`` is what a frame line says between the frame number and the time it
    took ("Surface frame 3 of 72: <frame_words>, 0.41 s, 12 s left").
    """
    kind = event.get("event")
    if kind == "stage":
        kept = f" ({event['kept']} kept from the last run)" if event.get("kept") else ""
        return f"{running} {event.get('frames', 0)} frames{kept}"
    if kind == "frame":
        return (f"{title} frame {event['frame']} of {event['frame_end']}: {frame_words(event)}, "
                f"{event.get('seconds', 0.0):.2f} s, {time_left(event.get('eta'))}")
    if kind == "error":
        return f"Error: {event.get('message', '')}"
    return None


def free_stage_files(scene, stage_name: str, file_re, job_files: tuple, release, purpose: str,
                     locked: bool = False) -> tuple[str, int]:
    """Delete a stage's files in the scene's cache folder and its ``job_files`` in the job folder (and
    nothing else); returns the folder and the count.

    ``release(scene)`` first points the scene's objects away from the files (Windows cannot delete a file
    Blender holds open). Holds the folder's lock meanwhile for ``purpose`` ("Free Surface"; ``locked``:
    the caller holds it); raises ``CacheLockedError`` while a bake or a stage writes there.

    As Free Bake, it deletes nothing in a folder that is not a Surge cache folder (``ForeignFolderError``):
    a ``surface/`` or ``job/`` folder of the user's own there is not Surge's to delete.
    """
    from .paths import ADDON_ROOT

    cache_dir = files.resolve_cache_dir(scene, ADDON_ROOT)
    if not check_folder(cache_dir, files.NOT_FOREIGN):
        return cache_dir, 0  # missing or empty: nothing of Surge's there
    with locked_for(cache_dir, f"{purpose} of scene '{scene.name}'", held=locked):
        release(scene)
        count = stages.clear_stage(cache_dir, stage_name, file_re) if os.path.isdir(cache_dir) else 0
        count += free_job_files(cache_dir, job_files)
    return cache_dir, count


def _stage_patterns() -> dict:
    """Stage name -> (its file pattern, its USD folder pattern), for the stages whose USD files Blender plays."""
    from ..engine.surface import stage as surface_stage
    from ..engine.whitewater import stage as ww_stage

    return {m.NAME: (m.FILE_RE, stages.USD_DIR_RE) for m in (surface_stage, ww_stage)}


def _shown_stage_files(scene) -> list[str]:
    """The files the scene's surface and whitewater objects play (absolute paths)."""
    from . import liquid

    ww = scene.surge.whitewater
    objects = [scene.surge.surface_object] + [getattr(ww, f"{kind}_object") for kind in ("spray", "foam", "bubbles")]
    return [f for f in map(liquid.object_file, objects) if f]


def remove_unused_stage_usd(scenes) -> None:
    """Delete the USD folders of the surface and whitewater stages that none of ``scenes``' objects plays: the
    ones a run that started over kept for the saved .blend (:attr:`engine.stages.Stage.kept_on_restart`).
    Call it once no saved file can point at them: after the file is saved, or at once for a file never saved.
    A folder is touched only next to the one an object plays (so only in a cache folder Surge plays from),
    never while a process holds that cache folder, and only the stage's own files in it are deleted."""
    patterns = _stage_patterns()
    shown: dict[tuple, set] = {}
    for scene in scenes:
        for path in _shown_stage_files(scene):
            folder = os.path.dirname(path)
            stage_folder = os.path.dirname(folder)
            stage = os.path.basename(stage_folder)
            if stage in patterns and patterns[stage][1].match(os.path.basename(folder)):
                shown.setdefault((os.path.dirname(stage_folder), stage), set()).add(os.path.normpath(folder))
    for (cache_dir, stage), keep in shown.items():
        if read_holder(cache_dir) is not None:
            continue  # a bake or a stage runs there: it may be writing a new folder
        file_re = patterns[stage][0]
        for folder in stages.usd_folders(cache_dir, stage):
            if os.path.normpath(folder) not in keep:
                stages.remove_usd_folder(folder, file_re)


class StageSession(ChildSession):
    """One run of a stage over the baked particles of a scene (subclass it).

    Class attributes: ``stage`` (the engine stage's name), ``title`` (for messages), ``settings_file``
    and ``log_file`` (names in the job folder). Subclasses implement :meth:`show` (point the scene's
    objects at the stage's files; False while there are none), :meth:`reread` (the current frame's
    file appeared) and :meth:`describe` (one line per progress event).

    Creating it checks the cache (raising before anything is written), writes ``settings`` (a dict)
    for the child and starts it.
    """

    stage = ""
    title = ""
    settings_file = ""
    log_file = ""
    done_words = "ready"
    failed_error = StageFailedError
    #: ``--option`` values the stage's child gets (``usd=1``: the files Blender plays)
    options: tuple = ("usd=1",)

    def __init__(self, scene, settings: dict, restart: bool = False):
        from .paths import ADDON_ROOT, numba_cache_dir

        cache_dir = files.resolve_cache_dir(scene, ADDON_ROOT)
        reader = CacheReader(cache_dir)  # CacheFormatError: nothing baked there
        if not reader.frames:
            raise InvalidSceneError(f"Scene '{scene.name}': the cache '{cache_dir}' holds no baked frame to make the "
                                    f"{self.title.lower()} from; bake the liquid first")
        self.scene_name = scene.name  # for messages; the scene is found again by its key, which renaming keeps
        self.scene_key = bake_state.scene_key(scene)
        self.cache_dir = cache_dir
        self.relative = files.cache_dir_is_relative(scene)
        self.frame_start, self.frame_end = int(reader.frames[0]), int(reader.frames[-1])
        usd.import_pxr()  # puts Blender's pxr on sys.path, which the child inherits
        # held before anything is written: a bake, Free Bake or another stage in the folder refuses
        # this one (CacheLockedError names it), and this one refuses them until its child ends
        self.lock = CacheLock(cache_dir, f"the {self.title.lower()} of scene '{scene.name}' in Blender").acquire()
        try:
            path = write_settings(cache_dir, self.settings_file, settings)
            flag = files.cancel_flag(cache_dir)
            if os.path.exists(flag):
                os.remove(flag)
            command = [sys.executable, "-m", "engine.stages", "run", self.stage, cache_dir, "--settings", path,
                       "--cancel-file", flag, "--lock-token", self.lock.token]
            for option in self.options:
                command += ["--option", option]
            if restart:
                command.append("--restart")
            self.process = BakeProcess(files.job_dir(cache_dir), cache_dir, flag, ADDON_ROOT, numba_cache_dir(),
                                       os.path.join(files.job_dir(cache_dir), self.log_file), command=command)
        except BaseException:
            self.lock.release()
            raise
        self.started = time.monotonic()
        self.error: dict | None = None
        self.shown = False
        self.status = f"Starting the {self.title.lower()} process"
        self.progress = 0.0
        #: figures the panels and the status bar draw (SurgeBakeState.<name>): the stage's own frames, not
        #: those of the particle bake before it
        self.figures = {"kind": self.title, "frame_start": self.frame_start, "frame_end": self.frame_end,
                        "frame": self.frame_start, "substeps": 0, "particles": 0, "elapsed": 0.0, "remaining": 0.0,
                        "is_estimated": False, "memory": 0.0}
        self.summary: dict = {}
        self._publish()

    # -- what a stage adds ---------------------------------------------------------------------------

    def show(self, scene) -> bool:
        raise NotImplementedError

    def reread(self, scene) -> None:
        raise NotImplementedError

    @staticmethod
    def describe(event: dict) -> str | None:
        return None

    def note(self) -> str:
        """A warning the result adds to its message (none by default)."""
        return ""

    def finished_run(self, scene) -> None:
        """Called once a run ended well (complete or cancelled), after the objects show its files."""

    # -- polling -------------------------------------------------------------------------------------

    def scene(self):
        scene = bake_state.scene_by_key(self.scene_key)
        if scene is None:
            self.process.kill()
            raise self.failed_error(f"Scene '{self.scene_name}' was deleted during its {self.title.lower()} run; "
                                    f"the run was stopped")
        return scene

    def poll(self, timeout: float = 0.0) -> list[dict]:
        events = self.process.events(timeout)
        for event in events:
            kind = event.get("event")
            if kind == "frame":
                span = max(1, self.frame_end - self.frame_start)
                self.progress = min(1.0, (event["frame"] - self.frame_start) / span)
                eta = event.get("eta")
                self.figures.update(frame=int(event["frame"]), particles=int(event.get("particles", 0)),
                                    remaining=float(eta or 0.0), is_estimated=eta is not None,
                                    memory=float(event.get("memory", 0)) / 2**20)
                scene = self.scene()
                if not self.shown:
                    self.shown = self.show(scene)
                elif scene.frame_current == event["frame"]:
                    self.reread(scene)  # the viewport sits on a frame that had no file until now
            elif kind == "error":
                self.error = event
            elif kind == "done":
                self.summary = event
            text = self.describe(event)
            if text:
                self.status = text
        self._watch_process()
        self.figures["elapsed"] = float(int(time.monotonic() - self.started))
        self._publish()
        return events

    def finish(self) -> StageResult:
        """Wait for the child and say how the run ended.

        Raises
        ------
        StageFailedError (or the subclass's ``failed_error``)
            If the stage reported an error or its process died; the frames done before stay shown.
        """
        try:
            code = self.process.wait()
            self.poll()
            flag = files.cancel_flag(self.cache_dir)
            if os.path.exists(flag):
                os.remove(flag)
        finally:
            self.lock.release()
        scene = self.scene()
        state = bake_state.ensure(scene)
        state.is_baking = False
        state.cancel_requested = False
        self.show(scene)
        done = len(stages.done_frames(self.cache_dir, self.stage))
        elapsed = time.monotonic() - self.started
        processed = int(self.summary.get("processed", 0))
        if code == EXIT_COMPLETE or code == EXIT_CANCELLED or self.process.cancel_requested_at is not None:
            # a child killed after ignoring the cancel flag also counts as cancelled: the user asked
            status = "complete" if code == EXIT_COMPLETE else "cancelled"
            result = StageResult(status, done, processed, elapsed, self.cache_dir, self.title, self.done_words,
                                 self.note())
        elif code == EXIT_ENGINE_ERROR and self.error:
            state.status = f"{self.title} failed: {self.error.get('message', '')}"
            raise self.failed_error(self.error.get("message") or f"{self.title} failed")
        else:
            tail = self.process.log_tail()
            message = (f"The {self.title.lower()} process stopped unexpectedly (exit status {code})"
                       + (f"; last lines of its log '{self.process.log_path}': {tail}" if tail else ""))
            state.status = message
            raise self.failed_error(message)
        state.status = result.message
        state.progress = done / max(1, self.frame_end - self.frame_start + 1)
        self.finished_run(scene)
        if not bpy.data.filepath:
            remove_unused_stage_usd([scene])  # no saved file can point at the last run's folder
        return result

    def abort(self) -> None:
        """Stop the child at once and clear the scene's state (Blender is cancelling the operator)."""
        self.process.kill()
        self.process.wait()
        self.lock.release()
        scene = bake_state.scene_by_key(self.scene_key)
        if scene is not None:
            state = bake_state.ensure(scene)
            state.is_baking = False
            state.status = f"{self.title} stopped"
