"""The surface as a stage over a particle cache (:mod:`engine.stages`).

Files in ``<cache>/surface/``:

==========================================  ========================================================
path                                        what
==========================================  ========================================================
``manifest.json``                           format ``surge-stage``, stage ``surface``, its settings
                                            (:class:`engine.settings.SurfaceSettings` plus the
                                            particle spacing and rest density) and their SHA-256, the
                                            frames done and the particle frame each was made from
``frames/surface_NNNNNN.npz``               ``vertices`` (V, 3) float32 m, ``triangles`` (T, 3) int32
                                            (counter-clockwise seen from outside), ``velocity`` (V, 3)
                                            float32 m/s, and with Density, Age and Channels on,
                                            ``density`` (kg/m3), ``age`` (s) and each named channel,
                                            (V,) float32; with Small Drops on Spray, the particles
                                            handed to the spray: ``spray_position`` (S, 3) float32 m,
                                            ``spray_velocity`` (S, 3) float32 m/s, ``spray_id`` (S,)
                                            int32
``usd_XXXXXXXXXXXX/surface_NNNNNN.usdc``    the same mesh for Blender (:func:`engine.io.usd.write_mesh`),
                                            and the spray as points (prim ``/SurgeSurfaceSpray``),
                                            when the host asks for it (option ``usd=1``); a new folder
                                            each time the stage starts over, so that Blender, which
                                            keeps files open, never shows a stale frame
==========================================  ========================================================

An empty frame (no particles, or none dense enough to reach the iso level) is a mesh with no
vertices: the files exist and the frame counts as done.

The surface meets the colliders and containers of the job the cache was baked from (Mesh Against
Colliders, :mod:`.solids`), posed at each frame; their distance grids are read from the cache's
``sdf/`` folder (built in memory when missing; the particle cache is never written). Inside a bake
and from Blender's Bake Surface, a frame's USD file is written on a thread while the next frame is
meshed (or simulated), and the frame is listed once it is written.
"""

from __future__ import annotations

import dataclasses
import math
import os
import re
import threading
import uuid

import numpy as np

from .. import settings as settings_mod
from ..stages import USD_DIR_RE as _USD_DIR_RE, USD_KEPT_RE, Stage, write_atomic
from .reconstruction import SurfaceParameters, reconstruct
from .solids import Solids

NAME = "surface"
FILE_RE = re.compile(r"^(frames/surface_\d{6}(\.tmp)?\.npz|usd_[0-9a-f]{12}/surface_\d{6}(\.tmp)?\.usdc)$")

#: Particle attributes that never go onto the vertices (position is the mesh itself; ids mean nothing
#: on a vertex).
_NOT_ON_VERTICES = frozenset({"position", "id"})


def vertex_attributes(cache_manifest: dict, with_extras: bool) -> tuple[str, ...]:
    """Particle attributes interpolated onto the vertices: velocity, plus (``with_extras``) every other
    float attribute the cache holds (density, age, named channels)."""
    names = ["velocity"]
    if with_extras:
        for name, spec in cache_manifest.get("attributes", {}).items():
            if name not in _NOT_ON_VERTICES and name != "velocity" and spec.get("dtype", "").startswith("float"):
                names.append(name)
    return tuple(names)


class SurfaceStage(Stage):
    """Meshes each particle frame (see the module docstring).

    Parameters
    ----------
    settings : engine.settings.SurfaceSettings
    particle_spacing, rest_density : float
        Of the particle cache (m, kg/m^3).
    attributes : tuple of str
        Particle attributes to put on the vertices (:func:`vertex_attributes`).
    use_usd : bool
        Also write a USD file per frame for Blender.
    job_dir : str, optional
        The job the cache was baked from, whose colliders and containers the surface meets (Mesh
        Against Colliders); default ``<cache>/job``. A cache without a job is meshed without them.
    overlap_writes : bool
        Write each frame's USD file on a thread of its own while the next frame is meshed (the
        runner lists a frame once its files are written, :attr:`engine.stages.Stage.defers_writes`);
        the surface's parallel kernels release the GIL (``nogil``), so pxr's writer, which holds it,
        runs beside them.
    """

    name = NAME
    file_re = FILE_RE
    kept_on_restart = USD_KEPT_RE

    def __init__(self, settings: settings_mod.SurfaceSettings, particle_spacing: float, rest_density: float,
                 attributes: tuple = ("velocity",), use_usd: bool = False, job_dir: str | None = None,
                 overlap_writes: bool = False):
        dx = float(particle_spacing)
        self.params = SurfaceParameters(
            particle_spacing=dx, cell_size=settings.surface_cell_size * dx,
            kernel_radius=settings.surface_kernel_radius * dx, iso=settings.surface_iso,
            smoothing_iterations=settings.surface_smoothing_iterations, rest_density=float(rest_density),
            thin_sheets=settings.surface_thin_sheets, attributes=tuple(attributes),
            collider_mode=settings.surface_collider_mode, collider_offset=settings.surface_collider_offset * dx,
            anisotropic=settings.surface_anisotropic, max_stretch=settings.surface_max_stretch,
            centre_smoothing=settings.surface_centre_smoothing, isolated=settings.surface_isolated,
            drop_particles=settings.surface_drop_particles)
        self.use_colliders = settings.surface_use_colliders
        self.settings = dict(dataclasses.asdict(settings), particle_spacing=dx,
                             rest_density=float(rest_density), vertex_attributes=list(attributes))
        self.use_usd = bool(use_usd)
        self.usd_dir_name: str | None = None
        self.job_dir = job_dir
        self.solids: Solids | None = None
        self.defers_writes = bool(overlap_writes and use_usd)
        self._writer: threading.Thread | None = None
        self._write_error: BaseException | None = None
        self.failed_writes: set = set()

    def begin(self, folder: str, state: dict, resumed: bool) -> None:
        if self.use_colliders:
            cache_dir = os.path.dirname(os.path.normpath(folder))
            self.solids = Solids.from_job(self.job_dir or os.path.join(cache_dir, "job"), cache_dir)
        if not self.use_usd:
            return
        name = state.get("usd_dir")
        if not (resumed and isinstance(name, str) and _USD_DIR_RE.match(name)):
            name = f"usd_{uuid.uuid4().hex[:12]}"
        state["usd_dir"] = name
        self.usd_dir_name = name

    def frame_files(self, frame: int) -> list[str]:
        files = [f"frames/surface_{frame:06d}.npz"]
        if self.use_usd and self.usd_dir_name:
            files.append(f"{self.usd_dir_name}/surface_{frame:06d}.usdc")
        return files

    def process_frame(self, frame: int, arrays: dict, folder: str) -> dict:
        if self.solids is not None:
            self.solids.set_frame(frame)
        mesh = reconstruct(arrays, self.params, self.solids)
        npz = os.path.join(folder, "frames", f"surface_{frame:06d}.npz")
        spray = {f"spray_{k}": v for k, v in mesh.spray.items()}
        with write_atomic(npz) as tmp:
            with open(tmp, "wb") as fh:
                np.savez(fh, vertices=mesh.vertices, triangles=mesh.triangles, **mesh.attributes, **spray)
        if self.use_usd:
            self.settle()  # the previous frame's file first: frames are listed in order
            path = os.path.join(folder, self.usd_dir_name, f"surface_{frame:06d}.usdc")
            os.makedirs(os.path.dirname(path), exist_ok=True)
            spray_points = mesh.spray if self.params.isolated == "SPRAY" else None
            if self.defers_writes:
                self._writer = threading.Thread(target=self._write_usd, args=(path, mesh, spray_points, frame),
                                                name=f"surface USD {frame}", daemon=True)
                self._writer.start()
            else:
                self._write_usd(path, mesh, spray_points, frame)
                self.settle()
        return {"vertices": int(len(mesh.vertices)), "triangles": int(len(mesh.triangles)),
                "spray": int(len(mesh.spray.get("position", ())))}

    def _write_usd(self, path: str, mesh, spray: dict | None, frame: int) -> None:
        from ..io import usd

        try:
            usd.write_mesh(path, mesh.vertices, mesh.triangles, mesh.attributes, frame, spray=spray,
                           spray_radius=(0.75 / math.pi) ** (1.0 / 3.0) * self.params.particle_spacing)
        except BaseException as exc:  # noqa: BLE001 - handed to the stage's thread, raised by settle()
            self._write_error = exc
            self.failed_writes.add(frame)

    def settle(self) -> None:
        """Wait for the USD file being written, if any; raise its error (OSError) if it failed."""
        if self._writer is not None:
            self._writer.join()
            self._writer = None
        if self._write_error is not None:
            exc, self._write_error = self._write_error, None
            if isinstance(exc, OSError):
                raise exc
            raise OSError(f"Writing a surface USD file failed: {exc}") from exc

    def end(self, status: str) -> None:
        self.settle()


def make_stage(cache_manifest: dict, settings: dict, options: dict) -> SurfaceStage:
    """The factory :data:`engine.stages.STAGE_TYPES` names: settings from a dict (strict), the particle
    spacing and rest density from the cache's manifest. Options: ``usd=1`` writes the USD files,
    ``job=DIR`` names the job whose colliders the surface meets (default ``<cache>/job``), ``overlap=1``
    writes each USD file while the next frame is meshed."""
    surface = settings_mod.surface_from_dict(settings, owner="Surface")
    spacing = float(cache_manifest.get("particle_spacing") or cache_manifest["settings"]["particle_spacing"])
    rest_density = float(cache_manifest.get("settings", {}).get("rest_density", 1000.0))
    attributes = vertex_attributes(cache_manifest, surface.surface_vertex_attributes)
    return SurfaceStage(surface, spacing, rest_density, attributes, use_usd=options.get("usd") == "1",
                        job_dir=options.get("job") or None, overlap_writes=options.get("overlap") == "1")


def for_bake(simulation: settings_mod.SimulationSettings, channels, settings: dict, use_usd: bool,
             job_dir: str | None = None) -> SurfaceStage:
    """The surface stage for a bake that has not written its manifest yet: the particle spacing, rest density
    and attributes (density, age, the scene's named ``channels``) come from the bake's settings, the
    colliders from its job (``job_dir``); the USD files are written while the next frame is simulated."""
    attributes = {name: {"dtype": "float32"} for name in ("density", "age", *channels)}
    manifest = {"particle_spacing": simulation.particle_spacing,
                "settings": {"rest_density": simulation.rest_density}, "attributes": attributes}
    return make_stage(manifest, settings, {"usd": "1" if use_usd else "0", "job": job_dir or "", "overlap": "1"})


def read_frame(cache_dir: str, frame: int) -> dict:
    """Arrays of one meshed frame (``vertices``, ``triangles``, ``velocity``, ...)."""
    from .. import stages

    return stages.read_frame(cache_dir, NAME, f"frames/surface_{frame:06d}.npz")


def usd_folder(cache_dir: str) -> str | None:
    """The folder of the surface's USD files in ``cache_dir`` (absolute), or None."""
    from .. import stages

    return stages.usd_folder(cache_dir, NAME)
