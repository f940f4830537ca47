"""One bake, from the Blender scene to the liquid object, driven by the bake operator.

Order of work (nothing in the cache folder changes until every check has passed):

1. export the scene and settings, and let the engine check them (:func:`engine.assemble.check_job`:
   settings, scene, supported solver, particle count against memory);
2. resolve the cache folder, check that it is writable and that it is new, empty or a Surge cache
   folder (:func:`engine.io.cache.check_folder`), and check a resume (settings, scene, checkpoints);
3. take the folder's lock (:class:`engine.io.cache.CacheLock`: a second bake into it, from this
   Blender or any other process, is refused naming the holder), write the job into
   ``job/pending`` and start ``engine.cli bake`` in a child process that joins the lock;
4. the child writes each frame's USD point file (and, with *Mesh During Bake*, its surface mesh,
   :mod:`engine.surface`) before reporting the frame; of this bake's frames (the manifest's
   ``run_id``), point the liquid object at the new files once they reach the first frame
   the child simulated: the previous bake plays until then, and stays on disk for as long as the
   saved .blend points at it (until the next save); write on each collider the mode the engine
   treats it in (``Object.surge.collider_resolved``: what Auto picked).

:class:`BakeSession` is polled: from a modal operator's timer in the UI, or in a blocking loop in
background mode. It holds the names of the scene and its objects, never Blender pointers, because
undo can reallocate Blender data between two polls.
"""

from __future__ import annotations

import dataclasses
import os
import time
import uuid
from dataclasses import dataclass

import bpy

from ..engine.io import atomic
from ..engine.io import cache as cache_mod
from ..engine import settings as settings_mod
from ..engine.scene import jobcheck
from ..engine.errors import EngineError
from ..engine.scene import save_job
from ..engine.scene.hints import scene_warnings
from . import (bake_state, cache_state, default_cache, export, files, liquid, preferences, rigid, surface, surface_bake,
               usd, whitewater)
from .child_session import ChildSession
from .paths import ADDON_ROOT, numba_cache_dir
from .process import EXIT_CANCELLED, EXIT_COMPLETE, EXIT_ENGINE_ERROR, BakeProcess
from .progress_text import describe, resolved_text

class BakeFailedError(EngineError):
    """The bake process ended with an error or stopped unexpectedly."""


@dataclass
class BakeResult:
    """How a bake ended (errors are raised instead)."""

    status: str  # 'complete' or 'cancelled'
    frames: list
    particles: int
    elapsed: float
    cache_dir: str
    warnings: list = dataclasses.field(default_factory=list)

    @property
    def message(self) -> str:
        if not self.frames:
            return f"Bake {self.status} before any frame was written"
        span = f"frames {self.frames[0]}-{self.frames[-1]}"
        if self.status == "complete":
            return f"Baked {span} ({self.particles} particles) in {self.elapsed:.1f} s into '{self.cache_dir}'"
        return f"Bake cancelled; {span} are kept in '{self.cache_dir}'"


#: A preview bake: this many times the particle spacing (8 times fewer particles per doubling) ...
PREVIEW_COARSEN = 2.0
#: ... over at most this many frames from the first.
PREVIEW_FRAMES = 12


def preview_job(description, settings):
    """The scene and settings of a preview bake: coarser particles and the first frames only."""
    n = min(PREVIEW_FRAMES, description.frame_end - description.frame_start + 1)

    def first_frames(collider):
        return dataclasses.replace(
            collider,
            transforms=None if collider.transforms is None else collider.transforms[:n],
            frame_vertices=None if collider.frame_vertices is None else collider.frame_vertices[:n])

    description = dataclasses.replace(description, frame_end=description.frame_start + n - 1,
                                      colliders=[first_frames(c) for c in description.colliders])
    spacing = min(settings.particle_spacing * PREVIEW_COARSEN,
                  next(p.max for p in settings_mod.parameters() if p.name == "particle_spacing"))
    return description, dataclasses.replace(settings, particle_spacing=spacing)


#: What to do when resuming a bake whose settings changed since its frames were baked.
IF_SETTINGS_CHANGED = (
    ("REFUSE", "Stop", "Refuse to resume and say which settings changed"),
    ("RESUME", "Resume with New Settings", "Continue from the checkpoint with the new settings; the cache records "
                                           "which settings baked which frames"),
    ("REBAKE", "Bake Again", "Bake the whole frame range again from the start with the new settings"),
)


#: Where an artist makes that choice, named in the message of a refused resume.
CHANGED_CHOICES = ("Resume Bake's dialog in Blender; tools/bake.py --resume --if-settings-changed resume or rebake; "
                   "bpy.ops.surge.bake(resume=True, if_settings_changed='RESUME' or 'REBAKE')")


def setting_labels(names) -> str:
    labels = {p.name: p.label for p in settings_mod.parameters()}
    return ", ".join(labels.get(n, n) for n in names)


def resume_state(cache_dir: str, settings, description=None) -> tuple[list[int], list[str]]:
    """Frames a bake in ``cache_dir`` can resume from, and what changed since it was baked: the names
    of changed settings, then (given the exported scene ``description``) a sentence per changed object."""
    from ..engine.io import checkpoint

    frames = checkpoint.resumable_frames(cache_dir)
    if not frames:
        return [], []
    manifest = cache_mod.CacheReader(cache_dir).manifest
    changed = checkpoint.changed_settings(manifest, settings_mod.to_dict(settings))
    if description is not None:
        changed += jobcheck.scene_changes(manifest.get("scene_objects"), jobcheck.scene_object_hashes(description))
    return frames, changed


def resume_point(scene, cache_dir: str, description, settings, frame: int, if_settings_changed: str
                 ) -> tuple[int | str | None, bool]:
    """Where a resumed bake starts: ``(frame, accept_scene_change)``; the frame is None to bake from the
    start (REBAKE) and 'latest' for the newest checkpoint that can be read (``frame`` 0).

    Raises
    ------
    InvalidSceneError
        No checkpoint to resume from, or none at ``frame``.
    InvalidSettingsError
        Settings or scene objects changed and ``if_settings_changed`` is 'REFUSE', or a setting changed
        that a saved state cannot carry over (particle spacing, solver, frame rate, first frame).
    """
    from ..engine.io import checkpoint
    from ..engine.errors import InvalidSceneError, InvalidSettingsError

    owner = f"Scene '{scene.name}'"
    frames, changed = resume_state(cache_dir, settings, description)
    if not frames:
        raise InvalidSceneError(f"{owner}: nothing to resume in '{cache_dir}': it holds no checkpoint with every "
                                f"frame before it baked; bake from the start")
    if frame and frame not in frames:
        raise InvalidSceneError(f"{owner}: no checkpoint at frame {frame}; a bake can resume from frame "
                                f"{', '.join(map(str, frames))}")
    names = {p.name for p in settings_mod.parameters()}
    settings_changed = [c for c in changed if c in names]
    scene_changed = [c for c in changed if c not in names]
    if changed:
        if if_settings_changed == "REBAKE":
            return None, False
        if if_settings_changed != "RESUME":
            problems = []
            if settings_changed:
                problems.append(f"{owner}: settings changed since the cached frames were baked "
                                f"({setting_labels(settings_changed)}); resume with the new settings from a "
                                f"frame, or bake again ({CHANGED_CHOICES})")
            if scene_changed:
                problems.append(f"{owner}: the scene changed since the cached frames were baked "
                                f"({'; '.join(scene_changed)}); resume with the changed scene from a frame, or "
                                f"bake again ({CHANGED_CHOICES})")
            raise InvalidSettingsError(problems)
    manifest = cache_mod.CacheReader(cache_dir).manifest
    checkpoint.check_resume(manifest, frame or frames[-1], settings_mod.to_dict(settings), description.frame_start,
                            description.fps, owner)
    return (frame or "latest"), bool(scene_changed)


class BakeSession(ChildSession):
    """A running bake of one scene.

    Creating it exports and checks the scene (raising :class:`EngineError` subclasses or
    ``OSError`` before anything is written), then starts the child process.
    """

    #: True when the child makes the whitewater of each frame (Make During Bake), and once it is shown
    with_whitewater = False
    whitewater_shown = False

    def __init__(self, scene, depsgraph, resume: bool = False, resume_frame: int = 0,
                 if_settings_changed: str = "REFUSE", preview: bool = False, settings_override: dict | None = None):
        with rigid.own_motion(scene):          # a body is exported with its own animation, not its baked keys
            description, settings = export.export_scene(scene, depsgraph)
        if settings_override:
            # a bake continuing a saved state keeps that state's spacing and solver (bridge.live)
            settings = dataclasses.replace(settings, **settings_override)
        if preview:
            description, settings = preview_job(description, settings)
        from ..engine import assemble  # imported late: the engine, which registering the add-on need not load

        self.estimate = assemble.check_job(description, settings, owner=f"Scene '{scene.name}'")
        default_cache.keep_folder_name(scene)  # renaming the scene from now on keeps its default cache folder
        cache_dir = files.resolve_cache_dir(scene, ADDON_ROOT)
        if preview:
            cache_mod.check_folder(cache_dir, files.NOT_FOREIGN + (files.PREVIEW_DIR,))
            cache_dir = files.preview_dir(cache_dir)  # the full bake's cache stays as it is
        cache_mod.check_folder(cache_dir, files.NOT_FOREIGN)
        cache_mod.check_writable(cache_dir)
        self.resume_from, accept_scene_change = (
            resume_point(scene, cache_dir, description, settings, resume_frame, if_settings_changed)
            if resume else (None, False))
        self.range_note = export.frame_range_note(scene)
        self.run_id = uuid.uuid4().hex
        self.lock = cache_mod.CacheLock(cache_dir, f"a bake of scene '{scene.name}' in Blender").acquire()
        try:
            if self.lock.took_over is not None:
                cache_mod.mark_ended(cache_dir, None, "failed",
                                     "The bake stopped unexpectedly: its process ended without finishing")
            cache_mod.claim_folder(cache_dir, files.NOT_FOREIGN)
            self._start(scene, description, settings, cache_dir, accept_scene_change, preview)
        except BaseException:
            self.lock.release()
            raise

    def _start(self, scene, description, settings, cache_dir: str, accept_scene_change: bool,
               preview: bool) -> None:
        options = ["--checkpoint-every", str(scene.surge.checkpoint_interval), "--run-id", self.run_id,
                   "--lock-token", self.lock.token]
        if self.resume_from is not None:
            options += ["--resume-from", str(self.resume_from)]
        if accept_scene_change:
            options.append("--accept-scene-change")

        surface = surface_bake.surface_settings(scene) if scene.surge.use_surface_in_bake and not preview else None

        in_bake = scene.surge.whitewater.use_in_bake and not preview
        ww_settings = whitewater.whitewater_settings(scene) if in_bake else None
        usd.import_pxr()  # the child writes the USD files: Blender's pxr must be on the path it inherits

        # every check passed and the folder is ours: from here on it changes
        self.scene_name = scene.name  # for messages; the scene is found again by its key, which renaming keeps
        self.scene_key = bake_state.scene_key(scene)
        #: the set-up this bake is made from, recorded beside its job once it replaces the previous bake
        #: (the panel's Outdated mark compares the scene with it)
        self.objects = cache_state.objects_signature(scene)
        self.cache_dir = cache_dir
        self.relative = files.cache_dir_is_relative(scene)
        self.scale_length = export.unit_scale(scene)
        self.frame_start, self.frame_end = description.frame_start, description.frame_end
        self.radius = 0.5 * settings.particle_spacing
        self.usd_dir = files.new_usd_dir(cache_dir)
        self.converted: set[int] = set()
        self.first_new: int | None = None  # the first frame the child simulated
        self.surface_shown = False
        self.shown = False  # True once the liquid object plays this bake's files
        self.error: dict | None = None
        # set-ups baked but probably not meant (a fluid outside its container): said now, and again at the end
        self.warnings: list[str] = (([self.range_note] if self.range_note else []) + scene_warnings(description)
                                    + export.gravity_warnings(scene))
        self.last_frame: dict | None = None
        self.started = time.monotonic()

        flag = files.cancel_flag(cache_dir)
        if os.path.exists(flag):
            os.remove(flag)  # a flag left by a killed session would cancel this bake at once
        job = files.pending_job_dir(cache_dir)
        save_job(job, description, settings)
        options += ["--usd-dir", self.usd_dir]
        self.with_surface = surface is not None
        if surface is not None:
            options += ["--surface", surface_bake.write_settings(cache_dir, surface)]
        self.with_whitewater = ww_settings is not None
        if ww_settings is not None:
            options += ["--whitewater", whitewater.write_settings(cache_dir, ww_settings)]
        self.process = BakeProcess(job, cache_dir, flag, ADDON_ROOT, numba_cache_dir(),
                                   files.pending_log_path(cache_dir), tuple(options),
                                   threads=preferences.bake_threads())
        self.status = ("Resuming from the latest checkpoint" if self.resume_from == "latest" else
                       f"Resuming from frame {self.resume_from}" if self.resume_from is not None else
                       f"Starting the bake process (about {int(self.estimate)} particles)")
        self.progress = 0.0
        #: figures the sidebar and the status bar draw: SurgeBakeState.<name> (bridge.bake_state)
        self.figures = {"kind": "Preview" if preview else "Bake", "frame_start": self.frame_start,
                        "frame_end": self.frame_end, "frame": self.frame_start, "substeps": 0, "particles": 0,
                        "elapsed": 0.0, "remaining": 0.0, "is_estimated": False, "memory": 0.0}
        self._publish()
        # box containers are settled here; the engine reports how it treats each mesh collider
        for box in description.containers:
            self._show_collider(box.name, resolved_text("CONTAINER", scene.objects[box.name].surge.collider_mode))
        for collider in description.colliders:
            self._show_collider(collider.name, "")

    @classmethod
    def playback(cls, scene, cache_dir: str, radius: float, scale_length: float = 1.0, relative: bool = False
                 ) -> "BakeSession":
        """A session reduced to its cache-to-USD half, for the bake already in ``cache_dir`` (no export,
        no process, no lock): :meth:`_convert` shows its frames as soon as they are converted."""
        session = cls.__new__(cls)
        session.scene_name, session.cache_dir, session.relative = scene.name, cache_dir, relative
        session.scene_key = bake_state.scene_key(scene)
        session.scale_length, session.radius = scale_length, radius
        session.converted, session.shown, session.first_new = set(), False, None
        session.with_surface = False
        session.usd_dir = files.new_usd_dir(cache_dir)
        session.run_id = None
        return session

    # -- state shown in the UI -------------------------------------------------------------------

    def scene(self):
        scene = bake_state.scene_by_key(self.scene_key)
        if scene is None:
            self.process.kill()
            raise BakeFailedError(f"Scene '{self.scene_name}' was deleted during its bake; the bake was stopped")
        self.scene_name = scene.name  # renamed meanwhile: messages name it as it is now
        return scene

    def _show_collider(self, name: str, text: str) -> None:
        """Set ``collider_resolved`` of the object called ``name`` (if it still exists) to ``text``."""
        obj = self.scene().objects.get(name)
        if obj is not None and obj.surge.collider_resolved != text:
            obj.surge.collider_resolved = text

    # -- polling ---------------------------------------------------------------------------------

    def poll(self, timeout: float = 0.0, budget: float = 0.1) -> list[dict]:
        """Handle what the child reported and convert finished frames; returns the new events.

        Parameters
        ----------
        timeout : float
            Seconds to wait for the first event (0 in a modal timer, longer in a blocking loop).
        budget : float
            Seconds of frame conversion allowed in this call, so a modal UI stays responsive.
        """
        events = self.process.events(timeout)
        for event in events:
            kind = event.get("event")
            if kind == "frame":
                if self.first_new is None:
                    self.first_new = int(event["frame"])
                self.last_frame = event
                span = max(1, event["frame_end"] - event["frame_start"])
                self.progress = min(1.0, (event["frame"] - event["frame_start"]) / span)
                eta = event.get("eta")
                self.figures.update(frame=int(event["frame"]), substeps=int(event["substeps"]),
                                    particles=int(event["particles"]), remaining=float(eta or 0.0),
                                    is_estimated=eta is not None, memory=float(event.get("memory", 0)) / 2**20)
            elif kind == "collider":
                self._show_collider(event.get("name", ""),
                                    resolved_text(event.get("mode", ""), event.get("requested", "")))
            elif kind == "error":
                self.error = event
            elif kind == "warning" and event.get("message", "") not in self.warnings:
                self.warnings.append(event.get("message", ""))
            text = describe(event)
            if text and kind != "output":
                self.status = text
        if self.first_new is not None:
            self._convert(budget)
        self._watch_process()
        # whole seconds: the clock in the panel ticks once a second, not on every poll
        self.figures["elapsed"] = float(int(time.monotonic() - self.started))
        self._publish()
        return events

    def _convert(self, budget: float) -> None:
        """Show this bake's cache frames whose USD files the child has written (``budget`` is unused:
        the child does the writing).

        Frames count only once the manifest names this bake (``run_id``); before that the folder
        still holds the previous bake. The liquid plays the new files once they reach the first
        frame the child simulated (for a resume, the kept frames come first), so a bake that
        fails before leaves the previous one playing.
        """
        reader = cache_mod.CacheReader(self.cache_dir)
        if self.run_id is not None and reader.manifest.get("run_id") != self.run_id:
            return
        new = [f for f in reader.frames
               if f not in self.converted and os.path.isfile(files.usd_frame_path(self.usd_dir, f))]
        if not new:
            return
        self.converted.update(new)
        scene = self.scene()
        if not self.shown:
            needed = [f for f in reader.frames if self.first_new is None or f <= self.first_new]
            if not all(f in self.converted for f in needed):
                return
            first = min(self.converted)
            if getattr(self, "objects", None) is not None:
                cache_state.write_objects(self.cache_dir, self.objects)
            liquid.show_frames(scene, files.usd_frame_path(self.usd_dir, first), self.relative, self.scale_length)
            surface.sync(scene, self.scale_length)
            self.shown = True
            if not bpy.data.filepath:
                # no saved file points at the previous bake's files: they can go now (a saved one keeps
                # them until it is saved again, see remove_unused_usd)
                files.remove_usd_dirs(self.cache_dir, keep=self.usd_dir)
        elif scene.frame_current in new:
            liquid.reread(scene)  # the viewport sits on a frame that had no file until now
        if self.with_surface:

            if scene.surge.surface_object is None or not self.surface_shown:
                self.surface_shown = surface_bake.show_surface(scene, self.cache_dir, self.relative)
            elif scene.frame_current in new:
                liquid.reread_surface(scene)
        if self.with_whitewater:

            if not self.whitewater_shown:
                self.whitewater_shown = whitewater.show_whitewater(scene, self.cache_dir, self.relative)
            elif scene.frame_current in new:
                whitewater.reread(scene)
            scene.surge.whitewater.summary = whitewater.summary_text(self.cache_dir)

    def finish(self) -> BakeResult:
        """Wait for the child, convert the remaining frames, and say how the bake ended.

        Raises
        ------
        BakeFailedError
            If the engine reported an error or the process died; the frames finished before stay shown.
        """
        try:
            code = self.process.wait()
            self.poll()  # events the reader queued after the last poll
            try:
                if self.first_new is not None:
                    self._convert(budget=float("inf"))
            finally:
                flag = files.cancel_flag(self.cache_dir)
                if os.path.exists(flag):
                    os.remove(flag)
                state = bake_state.ensure(self.scene())
                state.is_baking = False
            frames = sorted(self.converted)
            particles = int(self.last_frame["particles"]) if self.last_frame else 0
            elapsed = time.monotonic() - self.started
            if code == EXIT_COMPLETE:
                result = BakeResult("complete", frames, particles, elapsed, self.cache_dir, self.warnings)
            elif code == EXIT_CANCELLED or self.process.cancel_requested_at is not None:
                # a child killed after ignoring the cancel flag also counts as cancelled: the user asked
                cache_mod.mark_ended(self.cache_dir, self.run_id, "cancelled", "Bake cancelled")
                result = BakeResult("cancelled", frames, particles, elapsed, self.cache_dir, self.warnings)
            elif code == EXIT_ENGINE_ERROR and self.error:
                self._set_status(f"Bake failed: {self.error.get('message', '')}", frames)
                raise BakeFailedError(self.error.get("message") or "The bake failed")
            else:
                tail = self.process.log_tail()
                message = (f"The bake process stopped unexpectedly (exit status {code})"
                           + (f"; last lines of its log '{self.process.log_path}': {tail}" if tail else ""))
                cache_mod.mark_ended(self.cache_dir, self.run_id, "failed", message)
                self._set_status(message, frames)
                raise BakeFailedError(message)
            # the bodies play their baked motion as keyframes (a cancelled bake: the frames it made)
            rigid.show_motion(self.scene(), self.cache_dir, self.scale_length)
            self._set_status(result.message, frames)
            return result
        finally:
            self.release()

    def release(self) -> None:
        """Give the cache folder back: remove this bake's USD files if they were never shown and the
        pending job, and release the lock (idempotent)."""
        lock = getattr(self, "lock", None)
        if lock is None or not lock.held:
            return
        if not self.shown:
            files.remove_usd_dir(self.usd_dir)
        pending = files.pending_job_dir(self.cache_dir)
        for path in files.own_files(self.cache_dir):
            if os.path.dirname(path) == pending and os.path.basename(path) != files.LOG_FILE:
                try:
                    os.remove(path)
                except OSError:
                    pass  # a later bake overwrites it
        self._keep_log()
        lock.release()
        scene = bpy.data.scenes.get(getattr(self, "scene_name", ""))
        if scene is not None and (self.with_surface or self.with_whitewater) and not bpy.data.filepath:
            from .stage_session import remove_unused_stage_usd

            remove_unused_stage_usd([scene])  # no saved file can point at the previous run's folders

    def _keep_log(self) -> None:
        """The process has ended: its log becomes the cache's ``job/bake.log`` if this bake replaced the
        previous one; one refused or failed before that keeps the previous bake's log, its own staying in
        ``job/pending/``."""
        process = getattr(self, "process", None)
        if process is None or process.running:
            return
        try:
            replaced = cache_mod.CacheReader(self.cache_dir).manifest.get("run_id") == self.run_id
        except EngineError:
            replaced = False
        if replaced and os.path.isfile(process.log_path):
            try:
                atomic.move(process.log_path, files.log_path(self.cache_dir))
            except OSError:
                pass  # the log stays where it is, named in any message about this bake

    def _set_status(self, text: str, frames: list) -> None:
        state = bake_state.ensure(self.scene())
        state.cancel_requested = False
        state.status = text
        state.progress = len(frames) / (self.frame_end - self.frame_start + 1)
        state.is_baking = False

    def abort(self) -> None:
        """Stop the child at once and clear the scene's bake state (Blender is cancelling the operator)."""
        self.process.kill()
        self.process.wait()
        cache_mod.mark_ended(self.cache_dir, self.run_id, "cancelled", "The bake was stopped")
        self.release()
        scene = bake_state.scene_by_key(self.scene_key)
        if scene is not None:
            state = bake_state.ensure(scene)
            state.is_baking = False
            state.status = "Bake stopped"


def free_bake(scene) -> tuple[str, int]:
    """Delete Surge's files in the scene's cache folder; returns the folder and how many files went.

    The liquid object stays (with whatever the user added to it) but lets go of its files first.
    Nothing is deleted in a folder that is not a Surge cache folder, or while a bake holds it.

    Raises
    ------
    ForeignFolderError, CacheLockedError, OSError
    """
    cache_dir = files.resolve_cache_dir(scene, ADDON_ROOT)
    folders = [f for f in (files.preview_dir(cache_dir), cache_dir) if os.path.isdir(f)]
    for folder in folders:
        cache_mod.check_folder(folder, files.NOT_FOREIGN + ((files.PREVIEW_DIR,) if folder == cache_dir else ()))
    locks = []
    try:
        for folder in folders:
            locks.append(cache_mod.CacheLock(folder, f"Free Bake of scene '{scene.name}'").acquire())
        rigid.restore_all(scene)  # the rigid bodies' own animation and transform come back
        shown = liquid.current_file(scene)
        if shown and (shown + os.sep).startswith(cache_dir + os.sep):
            liquid.release_files(scene)  # first: Windows cannot delete a file Blender holds open

        count = surface_bake.free_surface(scene, locked=True)[1] if os.path.isdir(cache_dir) else 0
        count += whitewater.free_whitewater(scene, locked=True)[1] if os.path.isdir(cache_dir) else 0
        count += sum(files.free(folder) for folder in folders)
    finally:
        for lock in locks:
            lock.release()
    preview = files.preview_dir(cache_dir)
    if os.path.isdir(preview) and not os.listdir(preview):
        os.rmdir(preview)
    state = bake_state.ensure(scene)
    state.status = f"Removed {count} Surge files from '{cache_dir}'"
    state.progress = 0.0
    return cache_dir, count


def remove_unused_usd() -> None:
    """After the .blend is saved: delete the USD bake folders of every liquid's cache folder that the
    saved file no longer points at (the previous bakes, kept until now for the file on disk), and the
    surface's and whitewater's likewise.

    The newest folder of each cache always stays: it holds the point files of the frames the cache's
    manifest lists. After Ctrl+Z undoes past a bake, the liquid points at an older bake again while the
    cache holds the new one; saving then must not delete the new bake's files (the panel says the liquid
    plays an older bake, and Load Baked Liquid shows the latest)."""
    from .stage_session import remove_unused_stage_usd

    remove_unused_stage_usd(bpy.data.scenes)
    shown_dirs: dict[str, set] = {}
    for scene in bpy.data.scenes:
        shown = liquid.current_file(scene)
        folder = files.usd_cache_folder(shown) if shown else None
        if folder is not None:
            shown_dirs.setdefault(folder, set()).add(os.path.normpath(os.path.dirname(shown)))
    for folder, keep in shown_dirs.items():
        if cache_mod.read_holder(folder) is not None:
            continue  # a bake running there: its session cleans up
        bake_dirs = files.usd_bake_dirs(folder)
        if bake_dirs:
            keep = keep | {os.path.normpath(max(bake_dirs, key=os.path.getmtime))}
        for d in bake_dirs:
            if os.path.normpath(d) not in keep:
                files.remove_usd_dir(d)
