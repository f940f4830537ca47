"""Typed errors raised by the engine.

The engine never talks to the user directly: it raises these, and the host (the Blender
operators, the command line) turns them into messages. Every message is written for an artist:
it names the object or setting and says what to change.
"""

from __future__ import annotations


class EngineError(Exception):
    """Base class of every error the engine raises on purpose."""


class InvalidSettingsError(EngineError):
    """One or more settings are out of range or of the wrong type.

    ``problems`` lists every problem found (validation collects them all before raising).
    """

    def __init__(self, problems: list[str]):
        self.problems = list(problems)
        super().__init__("; ".join(self.problems))


class InvalidSceneError(EngineError):
    """The scene description cannot be simulated (empty fluid, unsupported role, too many particles)."""

    def __init__(self, problems: list[str] | str):
        if isinstance(problems, str):
            problems = [problems]
        self.problems = list(problems)
        super().__init__("; ".join(self.problems))


class SimulationDivergedError(EngineError):
    """The state became non-finite or faster than the time step allows."""


class CacheFormatError(EngineError):
    """A cache folder is missing, unreadable, or of a format version this engine does not read."""


class BakeCancelled(EngineError):
    """The bake was stopped by the cancel callback; every frame written before stays valid."""


class BakeStopped(BakeCancelled):
    """The bake stopped cleanly by itself because the process that started it and reads its progress
    (Blender) went away; every frame written before stays valid and a checkpoint marks where it stopped."""


class CacheLockedError(EngineError):
    """Another live process (a bake, a live session, a surface or whitewater stage) holds the cache folder."""


class ForeignFolderError(EngineError):
    """A folder chosen as a cache folder holds files that are not Surge's; nothing in it was touched."""


class FileWriteError(OSError):
    """A file could not be written (a full disk, a file size limit, no permission). An ``OSError`` (it
    keeps ``errno``) whose text is the message alone: it names the file and says why."""

    def __str__(self) -> str:
        return str(self.strerror)
