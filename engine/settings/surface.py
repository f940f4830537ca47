"""Surface settings: the mesh made from each baked frame (:mod:`engine.surface`), a stage over the
baked particles with settings of its own (changing them never touches the liquid's cache).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import ClassVar

from .parameters import Parameter, _param, _parameters_of, _strict_from_dict


@dataclass(frozen=True)
class SurfaceSettings:
    """Settings of the surface mesh made from each baked frame (:mod:`engine.surface`).

    Lengths are multiples of the particle spacing, so a surface set up on a coarse preview keeps its
    look when the spacing is refined. A change re-meshes without simulating again.
    """

    GROUP: ClassVar[str] = "Surface"

    surface_cell_size: float = _param(
        0.5, label="Surface Resolution", min=0.1, max=2.0, soft_min=0.25,
        tooltip="Edge of the surface mesh's cells as a fraction of the particle spacing; smaller shows finer detail "
                "and makes heavier meshes (0.5 gives about 4 times the triangles of 1)")
    surface_kernel_radius: float = _param(
        2.0, label="Surface Kernel Radius", min=1.0, max=4.0,
        tooltip="Reach of each particle into the surface, as a multiple of the particle spacing; larger rounds off "
                "bumps and merges close drops, smaller keeps separate drops and sharp crests")
    surface_iso: float = _param(
        0.6, label="Surface Iso Level", min=0.05, max=0.95,
        tooltip="Where the surface lies between empty space (0) and the inside of the liquid (1); lower wraps the "
                "particles more loosely, higher more tightly")
    surface_smoothing_iterations: int = _param(
        25, label="Surface Smoothing", min=0, max=500, soft_max=100,
        tooltip="Passes of volume-preserving smoothing over the mesh (weighted Laplacian smoothing of Loeschner et "
                "al. 2023); removes the bumps of single particles without shrinking thin parts")
    surface_thin_sheets: bool = _param(
        False, label="Keep Thin Sheets",
        tooltip="Bridge the gaps between particles that the flow has pulled apart into sheets and jets, so they stay "
                "closed instead of tearing into holes and beads; costs a little time on splashy frames")
    surface_vertex_attributes: bool = _param(
        False, label="Density, Age and Channels",
        tooltip="Also give the surface's vertices the particles' density, age and named channels (velocity is "
                "always there, for motion blur); makes the surface files larger")


def surface_parameters() -> list[Parameter]:
    """Metadata of every surface setting, in declaration order."""
    return _parameters_of(SurfaceSettings)


def surface_from_dict(data: dict, owner: str = "Scene") -> SurfaceSettings:
    """Strict construction of :class:`SurfaceSettings` (unknown keys are errors), validated."""
    return _strict_from_dict(SurfaceSettings, data, owner)
