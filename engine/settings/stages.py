"""Settings of the stages that run over a baked cache or beside it, each a block of its own: their
settings are not simulation settings (changing them never touches the liquid's cache).
Whitewater (:mod:`engine.whitewater`), the liquid surface (:mod:`engine.surface`) and the live
session (:mod:`engine.live`)."""

from __future__ import annotations

import dataclasses
import hashlib
import json
from dataclasses import dataclass
from typing import ClassVar

from ..errors import InvalidSettingsError
from .parameters import Parameter, _param, _parameters_of, _problems_in, _strict_from_dict
from .simulation import SimulationSettings


# ---------------------------------------------------------------------------------------------------
# Whitewater (spray, foam and bubbles over a baked cache; engine.whitewater). A block of its own:
# its settings are not simulation settings (changing them never touches the liquid's cache), and
# they live in ``Scene.surge.whitewater`` in Blender.
# ---------------------------------------------------------------------------------------------------

@dataclass(frozen=True)
class WhitewaterSettings:
    """Every parameter of a whitewater stage (Ihmsen et al. 2012). Construct with keywords."""

    GROUP: ClassVar[str] = "Whitewater"

    use_auto_thresholds: bool = _param(
        True, label="Automatic Thresholds",
        tooltip="Set the potentials' thresholds from the shot's own range: whitewater comes from what reaches "
                "0.6 of the shot's strongest splash (its peak trapped air and wave crest), so a glass and an "
                "ocean wave both get it where they splash hardest without tuning; off uses the thresholds below")
    trapped_air_min: float = _param(
        1.0, label="Trapped Air Min", unit="m/s", min=0.0, max=1.0e4, soft_max=50.0,
        tooltip="Trapped-air potential (how fast neighbouring liquid collides) below which no whitewater is made")
    trapped_air_max: float = _param(
        8.0, label="Trapped Air Max", unit="m/s", min=1.0e-6, max=1.0e4, soft_max=100.0,
        tooltip="Trapped-air potential at and above which emission is strongest")
    wave_crest_min: float = _param(
        0.3, label="Wave Crest Min", min=0.0, max=1.0e3, soft_max=10.0,
        tooltip="Wave-crest potential (curvature of a surface moving outward) below which no whitewater is made")
    wave_crest_max: float = _param(
        2.0, label="Wave Crest Max", min=1.0e-6, max=1.0e3, soft_max=20.0,
        tooltip="Wave-crest potential at and above which emission is strongest")
    energy_min: float = _param(
        0.5, label="Energy Min", unit="J/kg", min=0.0, max=1.0e6, soft_max=100.0,
        tooltip="Kinetic energy per kilogram (half the speed squared) below which liquid makes no whitewater")
    energy_max: float = _param(
        4.0, label="Energy Max", unit="J/kg", min=1.0e-6, max=1.0e6, soft_max=500.0,
        tooltip="Kinetic energy per kilogram at and above which liquid makes the most whitewater")
    trapped_air_rate: float = _param(
        1000.0, label="Trapped Air Rate", unit="1/s", min=0.0, max=1.0e5, soft_max=10000.0,
        tooltip="Whitewater particles one liquid particle makes per second at full trapped-air and energy potential")
    wave_crest_rate: float = _param(
        1000.0, label="Wave Crest Rate", unit="1/s", min=0.0, max=1.0e5, soft_max=10000.0,
        tooltip="Whitewater particles one liquid particle makes per second at full wave-crest and energy potential")
    spray_amount: float = _param(
        1.0, label="Spray Amount", min=0.0, max=10.0,
        tooltip="Share of the new particles born in the air that are kept as spray (1 keeps all, 0 makes no spray)")
    foam_amount: float = _param(
        1.0, label="Foam Amount", min=0.0, max=10.0,
        tooltip="Share of the new particles born at the liquid's surface that are kept as foam")
    bubble_amount: float = _param(
        1.0, label="Bubble Amount", min=0.0, max=10.0,
        tooltip="Share of the new particles born inside the liquid that are kept as bubbles")
    lifetime: float = _param(
        3.0, label="Foam Lifetime", unit="s", min=0.01, max=1.0e4, soft_max=30.0,
        tooltip="Average seconds a particle lasts as foam before it dissolves; the energy of the splash that made "
                "it lengthens it (half of this for the weakest splash, all of it for the strongest)")
    lifetime_variation: float = _param(
        0.5, label="Lifetime Variation", min=0.0, max=1.0,
        tooltip="Random spread of each particle's lifetime around its value (0.5: from half to one and a half "
                "times), so foam fades gradually instead of all at once")
    buoyancy: float = _param(
        2.0, label="Bubble Buoyancy", min=0.0, max=100.0, soft_max=10.0,
        tooltip="Upward pull on bubbles as a multiple of gravity")
    bubble_drag: float = _param(
        8.0, label="Bubble Drag", unit="1/s", min=0.0, max=1.0e4, soft_max=100.0,
        tooltip="How quickly bubbles take on the velocity of the liquid around them, per second; with the buoyancy "
                "it sets their rising speed (buoyancy times gravity over drag)")
    spray_drag: float = _param(
        0.5, label="Spray Drag", unit="1/s", min=0.0, max=1.0e4, soft_max=20.0,
        tooltip="Air drag on spray, per second: 0 flies on a ballistic arc, larger values slow spray down "
                "sooner (falling speed at most gravity over drag)")
    spray_size: float = _param(
        0.003, label="Spray Size", unit="m", min=1.0e-6, max=10.0, soft_max=0.1,
        tooltip="Radius at which spray particles render")
    foam_size: float = _param(
        0.005, label="Foam Size", unit="m", min=1.0e-6, max=10.0, soft_max=0.1,
        tooltip="Radius at which foam particles render")
    bubble_size: float = _param(
        0.003, label="Bubble Size", unit="m", min=1.0e-6, max=10.0, soft_max=0.1,
        tooltip="Radius at which bubbles render")
    max_particles: int = _param(
        5_000_000, label="Max Particles", min=1, max=100_000_000,
        tooltip="Most whitewater particles alive at once; while the cap binds no new particles are made and the "
                "stage reports it")
    spray_neighbours: int = _param(
        6, label="Spray Below", min=0, max=200,
        tooltip="A particle with fewer liquid particles than this within two particle spacings is spray")
    bubble_neighbours: int = _param(
        20, label="Bubbles Above", min=1, max=200,
        tooltip="A particle with more liquid particles than this within two particle spacings is a bubble; "
                "between the two limits it is foam")
    seed: int = _param(
        0, label="Seed", min=0, max=2**31 - 1,
        tooltip="Seed of the random placement; the same cache, settings and seed give the same whitewater")


def whitewater_parameters() -> list[Parameter]:
    """Metadata of every whitewater setting, in declaration order."""
    return _parameters_of(WhitewaterSettings)


def validate_whitewater(settings: WhitewaterSettings, owner: str = "Whitewater") -> None:
    """Check every whitewater setting; raise one :class:`InvalidSettingsError` listing all problems."""
    problems = _problems_in(settings, owner)
    if not problems:
        for low, high, label in (("trapped_air_min", "trapped_air_max", "Trapped Air"),
                                 ("wave_crest_min", "wave_crest_max", "Wave Crest"),
                                 ("energy_min", "energy_max", "Energy")):
            if not settings.use_auto_thresholds and getattr(settings, high) <= getattr(settings, low):
                problems.append(f"{owner}: setting '{label} Max' ({high}) is {getattr(settings, high):g}, not above "
                                f"'{label} Min' ({getattr(settings, low):g}); raise the maximum")
        if settings.bubble_neighbours <= settings.spray_neighbours:
            problems.append(f"{owner}: setting 'Bubbles Above' (bubble_neighbours) is {settings.bubble_neighbours}, "
                            f"not above 'Spray Below' ({settings.spray_neighbours}); foam would have no room")
    if problems:
        raise InvalidSettingsError(problems)


def whitewater_from_dict(data: dict, owner: str = "Whitewater") -> WhitewaterSettings:
    """Strict construction of :class:`WhitewaterSettings` (unknown keys are errors), validated."""
    settings = _strict_from_dict(WhitewaterSettings, data, owner)
    validate_whitewater(settings, owner)
    return settings


def whitewater_hash(settings: WhitewaterSettings) -> str:
    """SHA-256 of the canonical JSON of the whitewater settings."""
    text = json.dumps(dataclasses.asdict(settings), sort_keys=True, separators=(",", ":"))
    return hashlib.sha256(text.encode("utf-8")).hexdigest()


# --- The liquid surface (engine.surface): a stage over the baked particles, with settings of its own ---

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


# --- The live session (engine.live): the liquid simulated while the artist works --------------------

@dataclass(frozen=True)
class LiveSettings:
    """How a live session simulates (``Scene.surge_live`` in Blender; :mod:`engine.live`).

    Unless ``use_scene_settings`` is on, the session runs PBF with these settings in place of the
    scene's solver, substep, travel, iterations and spacing. Everything else is the scene's. The defaults
    take PBF's large steps (Macklin & Mueller 2013, "Position Based Fluids", ran a few substeps per 1/60 s
    frame): substeps of up to 1/60 s in which a particle may travel up to two spacings, so a frame of 1/24 s
    takes three to four substeps where the liquid moves at a few metres per second, more while a collider
    moves fast (its surface moves at most 0.4 spacings per substep). With a paddle swept through a dam break
    at up to 0.5 m/s (``bench/bench_live.py``) this stayed stable at 10,000 and 30,000 particles, as did
    1/96 s with two iterations. Three iterations: the density tolerance ends most substeps after two or
    three anyway.
    """

    use_scene_settings: bool = _param(
        False, label="Use Bake Settings", group="Live",
        tooltip="Simulate live with exactly the bake's settings (solver, substep, iterations, spacing), so that "
                "the live liquid matches a bake frame for frame; off uses the faster live settings below")
    spacing_factor: float = _param(
        1.0, label="Live Spacing", min=0.25, max=8.0, soft_max=4.0, group="Live",
        tooltip="Particle spacing of the live session as a multiple of the scene's; 2 makes 8 times fewer particles "
                "and a session about 8 times faster")
    time_step: float = _param(
        1.0 / 60.0, label="Live Max Substep", unit="s", min=1.0e-4, max=0.04, group="Live",
        tooltip="Longest PBF substep of the live session in seconds; fast liquid takes shorter ones (Live Max "
                "Travel), and so do fast colliders. Longer substeps are cheaper and softer")
    max_travel: float = _param(
        2.0, label="Live Max Travel", min=0.05, max=2.0, group="Live",
        tooltip="Particle spacings a particle may travel in one live substep (PBF Max Travel of the live "
                "session); larger takes fewer, longer substeps where the liquid moves fast")
    iterations: int = _param(
        3, label="Live Iterations", min=1, max=20, group="Live",
        tooltip="Density-constraint iterations per live substep; fewer are faster and make the liquid a little "
                "more compressible")
    speed: float = _param(
        1.0, label="Speed", min=0.05, max=4.0, group="Live",
        tooltip="Simulated time per second of wall time the session aims for: 1 is real time, 0.5 slow motion; "
                "a scene too heavy for the machine runs slower and the panel says by how much")
    collider_substeps: int = _param(
        8, label="Collider Substeps", min=1, max=100, group="Live",
        tooltip="Most substeps one displayed frame takes to follow a collider moved fast (a collider surface "
                "moves at most 0.4 particle spacings per substep); a collider moved faster follows at the speed "
                "this allows and catches up over the next frames")
    max_particles: int = _param(
        200_000, label="Max Particles", min=1000, max=50_000_000, group="Live",
        tooltip="Most particles the live session holds; inflows stop emitting while it is full (the shared "
                "buffers Blender reads are sized for it)")


def live_parameters() -> list[Parameter]:
    """Metadata of every live setting, in declaration order."""
    return _parameters_of(LiveSettings)


#: Scene settings a running live session takes on at once; a change of any other restarts it.
LIVE_CHANGEABLE = ("viscosity", "pbf_xsph_viscosity", "pbf_surface_tension")


def live_simulation_settings(settings: SimulationSettings, live: LiveSettings) -> SimulationSettings:
    """The settings a live session simulates with: the scene's, or PBF with the live substep, travel,
    iterations and spacing (see :class:`LiveSettings`)."""
    if live.use_scene_settings:
        return settings
    return dataclasses.replace(settings, solver="PBF", particle_spacing=settings.particle_spacing * live.spacing_factor,
                               pbf_time_step=live.time_step, pbf_cfl_number=live.max_travel,
                               pbf_iterations=live.iterations)


def validate_live(settings: LiveSettings, owner: str = "Live") -> None:
    """Check every live setting; raise one :class:`InvalidSettingsError` listing all problems."""
    problems = _problems_in(settings, owner)
    if problems:
        raise InvalidSettingsError(problems)
