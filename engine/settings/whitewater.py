"""Whitewater settings (spray, foam and bubbles over a baked cache; :mod:`engine.whitewater`).

A block of its own: they are not simulation settings (changing them never touches the liquid's
cache), and they live in ``Scene.surge.whitewater`` in Blender.
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass
from typing import ClassVar

from ..io.hashing import canonical_hash
from ..errors import InvalidSettingsError
from .parameters import Parameter, _param, _parameters_of, _problems_in, _strict_from_dict


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
    return canonical_hash(dataclasses.asdict(settings))
