"""Surface settings: the mesh made from each baked frame (:mod:`engine.surface`), a stage over the
baked particles with settings of its own (changing them never touches the liquid's cache).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import ClassVar

from .parameters import Parameter, _param, _parameters_of, _strict_from_dict


#: Where the surface meets the colliders (``surface_collider_mode``).
COLLIDER_MEETING_MODES = (
    ("INSIDE", "Inside", "The surface lies the offset inside the collider's solid: the liquid overlaps a glass wall, "
                         "which renders refraction through the two without a film of air between them"),
    ("ON", "On Surface", "The surface lies on the collider's surface: the liquid meets it exactly"),
    ("OUTSIDE", "Outside", "The surface keeps the offset away from the collider's surface: a thin gap"),
)

#: Meeting distance per mode as a multiple of the offset: where the surface meets a solid, measured from the
#: solid's surface into the free space (negative: into the solid).
MODE_SIGN = {"INSIDE": -1.0, "ON": 0.0, "OUTSIDE": 1.0}


def meeting_distance(mode: str, offset: float) -> float:
    """The distance d from a solid's surface, out into the free space, at which the liquid's surface meets it
    (m, negative inside the solid), for a mode of :data:`COLLIDER_MEETING_MODES` and an offset (m): the baked
    surface (:mod:`engine.surface.solids`) and the live one (``bridge.live_display``) both meet s = d."""
    return MODE_SIGN[mode] * float(offset)


#: What becomes of small clusters of particles (``surface_isolated``, :mod:`engine.surface.drops`).
ISOLATED_MODES = (
    ("DROPS", "Round Drops", "Each small cluster becomes a round drop of its volume in the surface mesh"),
    ("SPRAY", "Spray", "Small clusters leave the mesh as spray points beside it, each a sphere of its particle's "
                       "volume (the Surge Surface Spray object)"),
)


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
    surface_use_colliders: bool = _param(
        True, label="Mesh Against Colliders",
        tooltip="Cut the surface at the bake's colliders and containers and close it against them: no part of the "
                "mesh lies inside a solid or beyond a container's wall, and liquid that touches a wall meets it with "
                "no air film (moving and deforming colliders at each frame's pose)")
    surface_collider_mode: str = _param(
        "ON", label="Meet Colliders", items=COLLIDER_MEETING_MODES,
        tooltip="Where the liquid's surface lies against a collider: on its surface, a little inside it (for "
                "refractive glass: the liquid overlaps the glass, so no gap of air shows between them) or a little "
                "outside it, by the offset below")
    surface_collider_offset: float = _param(
        0.1, label="Collider Offset", min=0.0, max=1.0,
        tooltip="How far the surface lies inside or outside the colliders' surface with those modes, as a multiple "
                "of the particle spacing")
    surface_anisotropic: bool = _param(
        True, label="Anisotropic Kernels",
        tooltip="Stretch each particle's reach along its neighbours (Yu and Turk 2013): flat water shows fewer "
                "particle bumps, sheets and jets stay smooth; the surface stays where round kernels put it")
    surface_max_stretch: float = _param(
        2.0, label="Kernel Stretch", min=1.0, max=4.0,
        tooltip="Most a particle's reach is stretched along the liquid's surface, sheet or jet, as a multiple of "
                "the round kernel's")
    surface_centre_smoothing: float = _param(
        0.0, label="Centre Smoothing", min=0.0, max=1.0,
        tooltip="Move each kernel towards its neighbours' weighted mean (Yu and Turk's lambda): smooths more, but "
                "the surface sinks into the liquid (0.5 loses about 2 percent of a pool's volume)")
    surface_isolated: str = _param(
        "SPRAY", label="Small Drops", items=ISOLATED_MODES,
        tooltip="What becomes of particles flung off alone or in small clusters, which the mesh would show as "
                "lumpy beads: round drops of their volume in the mesh, or spray points beside it")
    surface_drop_particles: int = _param(
        3, label="Drop Particles", min=0, max=16,
        tooltip="Most particles of a cluster treated as a small drop (0: none; the mesh wraps every particle)")
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
