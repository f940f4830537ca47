"""Live settings: how a live session simulates the liquid while the artist works (:mod:`engine.live.session`).
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass

from ..errors import InvalidSettingsError
from .parameters import Parameter, _param, _parameters_of, _problems_in
from .simulation import SimulationSettings


@dataclass(frozen=True)
class LiveSettings:
    """How a live session simulates (``Scene.surge_live`` in Blender; :mod:`engine.live.session`).

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
LIVE_CHANGEABLE = ("dynamic_viscosity", "pbf_velocity_smoothing", "surface_tension", "pbf_surface_tension")


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
