"""One writer per cache folder: the lock file ``surge.lock``.

Whatever writes into a cache folder (a bake, a live session, a surface or whitewater stage) holds
its lock for as long as it writes::

    with CacheLock(cache_dir, "surface stage"):
        ...

The lock is a small JSON file created exclusively (``O_CREAT | O_EXCL``) that names its holder:
purpose, process id, host, the process's start time and the machine's boot id (where the system
tells them), and a random token. A second writer is refused with :class:`CacheLockedError`
naming the holder. A lock whose holder is gone (killed, crashed, or the machine rebooted) is taken
over: the stale file is renamed to a unique name first, so of two processes taking over at once
only one succeeds. A lock held from another host cannot be checked from here and is never taken
over; the message names the file to delete once nothing runs there.

A child process started by the lock's holder (the bake process Blender starts) joins the
parent's lock with :meth:`CacheLock.join` instead of taking its own; the lock then names the child
too, and stays held while either process lives.
"""

from __future__ import annotations

import json
import logging
import os
import socket
import sys
import time
import uuid

from . import atomic
from ..errors import CacheLockedError

log = logging.getLogger(__name__)

LOCK_FILE = "surge.lock"

#: Seconds after which a lock file that is still empty or unreadable counts as left by a writer that
#: died between creating it and writing it.
_UNREADABLE_GRACE = 5.0


def lock_path(cache_dir: str) -> str:
    return os.path.join(cache_dir, LOCK_FILE)


def _boot_id() -> str:
    """An id of this boot of the machine (Linux), or '' where the system offers none."""
    try:
        with open("/proc/sys/kernel/random/boot_id", encoding="ascii") as fh:
            return fh.read().strip()
    except OSError:
        return ""


def _process_start(pid: int) -> str:
    """The start time of process ``pid`` in clock ticks since boot (Linux), or '' where unknown."""
    try:
        with open(f"/proc/{pid}/stat", encoding="ascii", errors="replace") as fh:
            fields = fh.read().rsplit(")", 1)[1].split()
        return fields[19]  # field 22 of proc(5), counted after the command name
    except (OSError, IndexError):
        return ""


def _is_zombie(pid: int) -> bool:
    try:
        with open(f"/proc/{pid}/stat", encoding="ascii", errors="replace") as fh:
            return fh.read().rsplit(")", 1)[1].split()[0] == "Z"
    except (OSError, IndexError):
        return False


def pid_running(pid: int) -> bool:
    """True while process ``pid`` of this machine runs (a zombie counts as ended)."""
    if pid <= 0:
        return False
    if sys.platform == "win32":
        import ctypes

        kernel = ctypes.windll.kernel32
        handle = kernel.OpenProcess(0x1000, False, pid)  # PROCESS_QUERY_LIMITED_INFORMATION
        if not handle:
            return False
        try:
            code = ctypes.c_ulong()
            kernel.GetExitCodeProcess(handle, ctypes.byref(code))
            return code.value == 259  # STILL_ACTIVE
        finally:
            kernel.CloseHandle(handle)
    try:
        os.kill(pid, 0)  # signal 0: only asks whether the process exists
    except ProcessLookupError:
        return False
    except PermissionError:
        return True  # exists, owned by another user
    return not _is_zombie(pid)


def holder_alive(holder: dict) -> bool:
    """False only if the holder is provably gone: same host, and its process (and the child that joined
    its lock, if any) ended, or the machine rebooted, or the process id now belongs to another process."""
    if holder.get("host") != socket.gethostname():
        return True
    boot = _boot_id()
    if holder.get("boot") and boot and holder["boot"] != boot:
        return False
    return any(_process_alive(int(holder.get(pid_key, -1)), holder.get(start_key))
               for pid_key, start_key in (("pid", "pid_start"), ("child_pid", "child_start")))


def _process_alive(pid: int, recorded_start) -> bool:
    if not pid_running(pid):
        return False
    start = _process_start(pid)
    return not (recorded_start and start and start != recorded_start)


def read_holder(cache_dir: str) -> dict | None:
    """The lock's holder, or None without a lock (or while its file is being written)."""
    try:
        with open(lock_path(cache_dir), encoding="utf-8") as fh:
            doc = json.load(fh)
    except (OSError, ValueError):
        return None
    return doc if isinstance(doc, dict) else None


def describe_holder(holder: dict) -> str:
    return (f"{holder.get('purpose', 'another process')} (process {holder.get('pid')} on "
            f"'{holder.get('host')}', since {holder.get('since', '?')})")


def check_free(cache_dir: str) -> None:
    """Raise :class:`CacheLockedError` naming the holder if a live process holds ``cache_dir``'s lock
    (for a host about to start a process that takes the lock itself, before it writes anything there)."""
    holder = read_holder(cache_dir)
    if holder is not None and holder_alive(holder):
        raise CacheLock(cache_dir)._refusal(holder)


class CacheLock:
    """The lock of one cache folder, for one purpose ('bake', 'surface stage', 'live session', ...).

    Raises
    ------
    CacheLockedError
        From :meth:`acquire` (and ``with``) when a live process holds the folder; the message names it.
    OSError
        If the folder or the lock file cannot be created.
    """

    def __init__(self, cache_dir: str, purpose: str = "bake"):
        self.cache_dir = cache_dir
        self.path = lock_path(cache_dir)
        self.purpose = purpose
        self.token = uuid.uuid4().hex
        self.held = False
        self._owned = True
        #: the holder of a stale lock this one replaced (None if there was none)
        self.took_over: dict | None = None

    # -- taking and giving back ----------------------------------------------------------------------

    def _record(self) -> dict:
        pid = os.getpid()
        return {"purpose": self.purpose, "pid": pid, "host": socket.gethostname(), "boot": _boot_id(),
                "pid_start": _process_start(pid), "token": self.token,
                "since": time.strftime("%Y-%m-%dT%H:%M:%S")}

    def _refusal(self, holder: dict) -> CacheLockedError:
        text = (f"The cache folder '{self.cache_dir}' is in use by {describe_holder(holder)}; wait until it "
                f"ends or cancel it")
        if holder.get("host") != socket.gethostname():
            text += f". If nothing runs on '{holder.get('host')}' any more, delete '{self.path}'"
        return CacheLockedError(text)

    def _create(self) -> bool:
        try:
            fd = os.open(self.path, os.O_CREAT | os.O_EXCL | os.O_WRONLY | getattr(os, "O_BINARY", 0), 0o644)
        except FileExistsError:
            return False
        try:
            os.write(fd, json.dumps(self._record(), indent=1).encode("utf-8"))
            os.fsync(fd)
        finally:
            os.close(fd)
        return True

    def _remove_stale(self, holder: dict | None) -> None:
        """Move a stale lock out of the way, unless another process replaced it meanwhile."""
        aside = f"{self.path}.{uuid.uuid4().hex[:12]}.stale"
        try:
            os.rename(self.path, aside)
        except FileNotFoundError:
            return  # another process took it over first
        try:
            with open(aside, encoding="utf-8") as fh:
                moved = json.load(fh)
        except (OSError, ValueError):
            moved = None
        if holder is not None and (not isinstance(moved, dict) or moved.get("token") != holder.get("token")):
            # not the file judged stale: a process that took over first; give its lock back
            if not os.path.exists(self.path):
                os.rename(aside, self.path)
                return
        os.remove(aside)

    def acquire(self) -> "CacheLock":
        os.makedirs(self.cache_dir, exist_ok=True)
        deadline = time.monotonic() + 30.0
        while True:
            if self._create():
                self.held = True
                break
            holder = read_holder(self.cache_dir)
            if holder is None:
                try:
                    age = time.time() - os.path.getmtime(self.path)
                except OSError:
                    continue  # gone meanwhile: try again
                if age < _UNREADABLE_GRACE:
                    time.sleep(0.05)  # its writer is filling it in
                    continue
            elif holder_alive(holder):
                raise self._refusal(holder)
            if time.monotonic() > deadline:
                raise CacheLockedError(f"The lock '{self.path}' of the cache folder keeps changing; try again")
            log.warning("taking over the lock of '%s' from %s, which has ended", self.cache_dir,
                        describe_holder(holder) if holder else "a process that died while taking it")
            self.took_over = holder or {}
            self._remove_stale(holder)
        return self

    @classmethod
    def join(cls, cache_dir: str, token: str) -> "CacheLock":
        """The lock a parent process holds with ``token``, for its child; releasing it is the parent's job.

        Raises
        ------
        CacheLockedError
            If the folder's lock is not held with ``token`` (the parent has gone, or another took it).
        """
        lock = cls(cache_dir)
        holder = read_holder(cache_dir)
        if holder is None or holder.get("token") != token:
            who = describe_holder(holder) if holder else "nobody"
            raise CacheLockedError(f"The cache folder '{cache_dir}' is not locked for this bake (held by {who}); "
                                   f"start the bake again")
        lock.token, lock.held, lock._owned = token, True, False
        lock.purpose = holder.get("purpose", "bake")
        # the child keeps the folder held even if its parent dies while it still writes
        pid = os.getpid()
        atomic.write_json(lock.path, dict(holder, child_pid=pid, child_start=_process_start(pid)))
        return lock

    def still_held(self) -> bool:
        """True while the lock file is this lock's."""
        holder = read_holder(self.cache_dir)
        return holder is not None and holder.get("token") == self.token

    def release(self) -> None:
        if not (self.held and self._owned):
            self.held = False
            return
        self.held = False
        if self.still_held():
            try:
                os.remove(self.path)
            except OSError as exc:
                log.warning("cannot remove the lock '%s': %s", self.path, exc)

    def __enter__(self) -> "CacheLock":
        return self.acquire()

    def __exit__(self, *exc) -> None:
        self.release()
