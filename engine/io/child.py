"""What the engine's command lines share as child processes of Blender (``engine.cli`` for a bake,
``engine.stages`` for a stage over a cache): one JSON object per line on stdout for the parent to
read, log lines on stderr, a cancel request as a file the parent creates, and the process's
resident memory for the progress reports.

The bake runs in its own process, so the process's resident memory is the bake's footprint: the
particles, neighbour lists, collider grids and numba's compiled code together (standard library
only).
"""

from __future__ import annotations

import ctypes
import json
import logging
import os
import sys
import time
from typing import Callable

from ..errors import BakeStopped


#: What a bake that stops because its parent went away says (log, manifest).
PARENT_GONE = ("The bake stopped: the process that started it (Blender, or a farm's worker) went away. The frames "
               "baked so far are kept; resume to continue")


def emit(event: dict) -> None:
    """Write one event as a JSON line on stdout, flushed at once (the parent reads line by line).

    Raises
    ------
    BakeStopped
        The first time the parent is found gone (the pipe is broken); events after that go nowhere, so
        the bake ends cleanly instead of failing on every line it would still print.
    """
    try:
        sys.stdout.write(json.dumps(event) + "\n")
        sys.stdout.flush()
    except (BrokenPipeError, ConnectionResetError) as exc:
        sys.stdout = open(os.devnull, "w", encoding="utf-8")  # noqa: SIM115 (closed by the interpreter at exit)
        raise BakeStopped(PARENT_GONE) from exc


def log_to_stderr(quiet: bool) -> None:
    """Log lines on stderr: warnings only when ``quiet``, else information too."""
    logging.basicConfig(level=logging.WARNING if quiet else logging.INFO, stream=sys.stderr,
                        format="%(levelname)s %(name)s: %(message)s")


def cancel_flag(path: str | None, watch_parent: bool = False) -> Callable[[], bool] | None:
    """A cancel callback that is true once the file ``path`` exists; None when no file is named and the
    parent is not watched.

    With ``watch_parent`` it raises :class:`BakeStopped` once the process that started this one has
    gone (Blender was killed or crashed): nobody reads the progress any more, and the bake stops cleanly
    at the next substep instead of running on unseen.
    """
    if not path and not watch_parent:
        return None
    parent_alive = _parent_watch() if watch_parent else None

    def cancel() -> bool:
        if parent_alive is not None and not parent_alive():
            raise BakeStopped(PARENT_GONE)
        return bool(path) and os.path.exists(path)

    return cancel


def _parent_watch() -> Callable[[], bool]:
    """A callable telling whether this process's parent still runs."""
    parent = os.getppid()
    if sys.platform != "win32":
        # an orphan is adopted by init (or a subreaper): its parent id changes
        return lambda: os.getppid() == parent
    kernel32 = ctypes.windll.kernel32
    synchronize, wait_object_0 = 0x00100000, 0
    handle = kernel32.OpenProcess(synchronize, False, parent)
    if not handle:
        return lambda: True  # cannot watch it: the broken pipe of the progress lines tells instead
    return lambda: kernel32.WaitForSingleObject(handle, 0) != wait_object_0


def _linux() -> int:
    # /proc/self/statm: sizes in pages; the second field is the resident set
    with open("/proc/self/statm", encoding="ascii") as fh:
        resident_pages = int(fh.read().split()[1])
    return resident_pages * os.sysconf("SC_PAGE_SIZE")


def _windows() -> int:
    from ctypes import wintypes

    class Counters(ctypes.Structure):
        _fields_ = [("cb", wintypes.DWORD), ("PageFaultCount", wintypes.DWORD),
                    ("PeakWorkingSetSize", ctypes.c_size_t), ("WorkingSetSize", ctypes.c_size_t),
                    ("QuotaPeakPagedPoolUsage", ctypes.c_size_t), ("QuotaPagedPoolUsage", ctypes.c_size_t),
                    ("QuotaPeakNonPagedPoolUsage", ctypes.c_size_t), ("QuotaNonPagedPoolUsage", ctypes.c_size_t),
                    ("PagefileUsage", ctypes.c_size_t), ("PeakPagefileUsage", ctypes.c_size_t)]

    counters = Counters()
    counters.cb = ctypes.sizeof(Counters)
    process = ctypes.windll.kernel32.GetCurrentProcess()
    if not ctypes.windll.psapi.GetProcessMemoryInfo(process, ctypes.byref(counters), counters.cb):
        return 0
    return int(counters.WorkingSetSize)


def _peak_unix() -> int:
    import resource

    peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    return int(peak if sys.platform == "darwin" else peak * 1024)  # bytes on macOS, KiB elsewhere


def resident_bytes() -> int:
    """Resident memory of this process in bytes (the peak where the current value is not available,
    as on macOS); 0 if the platform tells neither."""
    try:
        if sys.platform.startswith("linux"):
            return _linux()
        if sys.platform == "win32":
            return _windows()
        return _peak_unix()
    except (OSError, ValueError, AttributeError, ImportError):
        return 0


def frames_left_time(first_done: float | None, done: int, total: int) -> float | None:
    """Seconds the ``total - done`` frames left will take, from the frames timed since the first one
    ended at ``first_done`` (``time.perf_counter``); None while no frame but the first has been timed.

    The first frame of a process carries the compile of the numba kernels (tens of seconds after an
    update, against milliseconds for a frame of a small scene), so it is left out: an estimate from it
    would say minutes for a bake that ends in seconds.
    """
    if done >= total:
        return 0.0
    if first_done is None or done < 2:
        return None
    return round((time.perf_counter() - first_done) / (done - 1) * (total - done), 3)
