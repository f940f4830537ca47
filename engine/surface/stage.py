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
                                            (V,) float32
``usd_XXXXXXXXXXXX/surface_NNNNNN.usdc``    the same mesh for Blender (:func:`engine.io.usd.write_mesh`),
                                            when the host asks for it (option ``usd=1``); a new folder
                                            each time the stage starts over, so that Blender, which
                                            keeps files open, never shows a stale frame
==========================================  ========================================================

An empty frame (no particles, or none dense enough to reach the iso level) is a mesh with no
vertices: the files exist and the frame counts as done.
"""

from __future__ import annotations

import dataclasses
import os
import re
import uuid

import numpy as np

from .. import settings as settings_mod
from ..stages import USD_DIR_RE as _USD_DIR_RE, USD_KEPT_RE, Stage, write_atomic
from .reconstruction import SurfaceParameters, reconstruct

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
    """

    name = NAME
    file_re = FILE_RE
    kept_on_restart = USD_KEPT_RE

    def __init__(self, settings: settings_mod.SurfaceSettings, particle_spacing: float, rest_density: float,
                 attributes: tuple = ("velocity",), use_usd: bool = False):
        self.params = SurfaceParameters(
            particle_spacing=float(particle_spacing),
            cell_size=settings.surface_cell_size * particle_spacing,
            kernel_radius=settings.surface_kernel_radius * particle_spacing,
            iso=settings.surface_iso, smoothing_iterations=settings.surface_smoothing_iterations,
            rest_density=float(rest_density), thin_sheets=settings.surface_thin_sheets,
            attributes=tuple(attributes))
        self.settings = dict(dataclasses.asdict(settings), particle_spacing=float(particle_spacing),
                             rest_density=float(rest_density), vertex_attributes=list(attributes))
        self.use_usd = bool(use_usd)
        self.usd_dir_name: str | None = None

    def begin(self, folder: str, state: dict, resumed: bool) -> None:
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
        mesh = reconstruct(arrays, self.params)
        npz = os.path.join(folder, "frames", f"surface_{frame:06d}.npz")
        with write_atomic(npz) as tmp:
            with open(tmp, "wb") as fh:
                np.savez(fh, vertices=mesh.vertices, triangles=mesh.triangles, **mesh.attributes)
        if self.use_usd:
            from ..io import usd

            path = os.path.join(folder, self.usd_dir_name, f"surface_{frame:06d}.usdc")
            os.makedirs(os.path.dirname(path), exist_ok=True)
            usd.write_mesh(path, mesh.vertices, mesh.triangles, mesh.attributes, frame)
        return {"vertices": int(len(mesh.vertices)), "triangles": int(len(mesh.triangles))}


def make_stage(cache_manifest: dict, settings: dict, options: dict) -> SurfaceStage:
    """The factory :data:`engine.stages.STAGE_TYPES` names: settings from a dict (strict), the particle
    spacing and rest density from the cache's manifest; option ``usd=1`` writes the USD files."""
    surface = settings_mod.surface_from_dict(settings, owner="Surface")
    spacing = float(cache_manifest.get("particle_spacing") or cache_manifest["settings"]["particle_spacing"])
    rest_density = float(cache_manifest.get("settings", {}).get("rest_density", 1000.0))
    attributes = vertex_attributes(cache_manifest, surface.surface_vertex_attributes)
    return SurfaceStage(surface, spacing, rest_density, attributes, use_usd=options.get("usd") == "1")


def for_bake(simulation: settings_mod.SimulationSettings, channels, settings: dict, use_usd: bool) -> SurfaceStage:
    """The surface stage for a bake that has not written its manifest yet: the particle spacing, rest density
    and attributes (density, age, the scene's named ``channels``) come from the bake's settings."""
    attributes = {name: {"dtype": "float32"} for name in ("density", "age", *channels)}
    manifest = {"particle_spacing": simulation.particle_spacing,
                "settings": {"rest_density": simulation.rest_density}, "attributes": attributes}
    return make_stage(manifest, settings, {"usd": "1" if use_usd else "0"})


def read_frame(cache_dir: str, frame: int) -> dict:
    """Arrays of one meshed frame (``vertices``, ``triangles``, ``velocity``, ...)."""
    from .. import stages

    return stages.read_frame(cache_dir, NAME, f"frames/surface_{frame:06d}.npz")


def usd_folder(cache_dir: str) -> str | None:
    """The folder of the surface's USD files in ``cache_dir`` (absolute), or None."""
    from .. import stages

    return stages.usd_folder(cache_dir, NAME)
