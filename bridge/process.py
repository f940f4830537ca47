"""The bake's child process: ``python -m engine.cli bake`` and its JSON-lines progress.

The engine runs outside Blender's process so that a crash, an out-of-memory kill or a numba kernel
holding the GIL cannot freeze or take down Blender, and so that cancelling is simply stopping a
process. A reader thread only moves stdout lines into a queue (Blender's Python is not
thread-safe; no ``bpy`` off the main thread); the caller parses them on the main thread.

This module imports no ``bpy``: the caller passes in what it needs from Blender.
"""

from __future__ import annotations

import json
import os
import queue
import subprocess
import sys
import threading
import time

#: Exit statuses of engine.cli.
EXIT_COMPLETE, EXIT_ENGINE_ERROR, EXIT_USAGE, EXIT_CANCELLED = 0, 1, 2, 3

#: Seconds a process may take to notice the cancel flag (it checks between substeps, but a numba
#: compile can take tens of seconds without checking) before it is killed.
CANCEL_TIMEOUT = 10.0

#: Marks the end of the child's stdout in the queue.
_EOF = None


def child_environment(addon_root: str, numba_cache_dir: str, threads: int = 0) -> dict:
    """Environment of the child: finds ``engine`` in the add-on and numba where Blender finds it;
    ``threads`` (the add-on preference) caps numba's threads, 0 leaves numba's own default (every core).

    Numba may come from the extension's bundled wheels, which Blender installs into a folder on its
    own ``sys.path`` but not on a plain interpreter's; passing the parent's path makes the child see
    exactly the packages the parent sees.
    """
    env = dict(os.environ)
    entries = [addon_root] + [p for p in sys.path if p and p != addon_root]
    env["PYTHONPATH"] = os.pathsep.join(entries)
    env["NUMBA_CACHE_DIR"] = numba_cache_dir
    env["PYTHONIOENCODING"] = "utf-8"  # the events are read as UTF-8 whatever the system locale
    if threads > 0:
        env["NUMBA_NUM_THREADS"] = str(int(threads))
    # the child's parallel work is numba's: an OpenBLAS thread pool woken by a numpy call would only
    # compete with numba's threads for the cores (see engine.collision.world.inverse3)
    env["OPENBLAS_NUM_THREADS"] = "1"
    return env


class BakeProcess:
    """A running ``engine.cli bake``.

    Parameters
    ----------
    job_dir, cache_dir, cancel_file : str
        As for ``python -m engine.cli bake``.
    addon_root : str
        Folder holding ``engine/`` (the child's working directory).
    numba_cache_dir : str
        Writable folder for numba's compiled-kernel cache.
    log_path : str
        File receiving the child's stderr (its log), read back when it fails unexpectedly.
    options : tuple of str
        More ``engine.cli bake`` options (``--checkpoint-every``, ``--resume-from``).
    command : list of str, optional
        Another engine command with the same events and exit statuses instead (a stage over the cache,
        ``python -m engine.stages run ...``; :mod:`engine.stages`), which then names its own cancel file.
    threads : int
        Most threads the bake may use (``NUMBA_NUM_THREADS``); 0 for numba's default.
    """

    def __init__(self, job_dir: str, cache_dir: str, cancel_file: str, addon_root: str, numba_cache_dir: str,
                 log_path: str, options: tuple = (), command: list | None = None, threads: int = 0):
        self.cancel_file = cancel_file
        self.log_path = log_path
        self.cancel_requested_at: float | None = None
        # --watch-parent: if Blender dies, the bake stops cleanly (checkpoint, manifest 'stopped'), not unseen
        cmd = command or [sys.executable, "-m", "engine.cli", "bake", job_dir, cache_dir, "--cancel-file",
                          cancel_file, "--watch-parent", *options]
        self._log = open(log_path, "w", encoding="utf-8")
        try:
            self._proc = subprocess.Popen(
                cmd, cwd=addon_root, env=child_environment(addon_root, numba_cache_dir, threads),
                stdin=subprocess.DEVNULL, stdout=subprocess.PIPE, stderr=self._log,
                text=True, encoding="utf-8", errors="replace", bufsize=1,
                # no console window flashing up on Windows; 0 elsewhere
                creationflags=getattr(subprocess, "CREATE_NO_WINDOW", 0))
        except OSError:
            self._log.close()
            raise
        self._lines: queue.Queue = queue.Queue()
        self._eof = False
        self._reader = threading.Thread(target=self._read_stdout, name="surge-bake-reader", daemon=True)
        self._reader.start()

    def _read_stdout(self) -> None:
        # runs in the reader thread: touches nothing but the pipe and the queue
        for line in self._proc.stdout:
            self._lines.put(line)
        self._lines.put(_EOF)

    @staticmethod
    def _parse(line: str) -> dict:
        try:
            event = json.loads(line)
        except ValueError:
            # a stray print from a library: keep it visible without treating it as an event
            return {"event": "output", "text": line.rstrip("\n")}
        return event if isinstance(event, dict) else {"event": "output", "text": line.rstrip("\n")}

    def events(self, timeout: float = 0.0) -> list[dict]:
        """Events received so far; waits up to ``timeout`` seconds for the first one."""
        out = []
        block = timeout > 0
        while not self._eof:
            try:
                line = self._lines.get(block=block, timeout=timeout if block else None)
            except queue.Empty:
                break
            block = False
            if line is _EOF:
                self._eof = True
                break
            out.append(self._parse(line))
        return out

    @property
    def running(self) -> bool:
        """True until the child has exited and its log is closed (:meth:`wait`)."""
        return self._proc.poll() is None or not self._log.closed

    @property
    def finished(self) -> bool:
        """True once the child has exited and all its output has been read."""
        return self._eof and self._proc.poll() is not None

    def request_cancel(self) -> None:
        """Ask the child to stop after its current substep (it keeps every finished frame)."""
        if self.cancel_requested_at is None:
            with open(self.cancel_file, "w", encoding="utf-8") as fh:
                fh.write("cancel\n")
            self.cancel_requested_at = time.monotonic()

    def kill_if_overdue(self) -> bool:
        """Kill the child if it ignored a cancel request for longer than CANCEL_TIMEOUT; True if killed."""
        if (self.cancel_requested_at is not None and self._proc.poll() is None
                and time.monotonic() - self.cancel_requested_at > CANCEL_TIMEOUT):
            self._proc.kill()
            return True
        return False

    def kill(self) -> None:
        """Stop the child at once (Blender is closing the operator, or the caller was interrupted)."""
        if self._proc.poll() is None:
            self._proc.kill()

    def wait(self) -> int:
        """Exit status once the child has exited (negative: killed by that signal)."""
        code = self._proc.wait()
        self._reader.join(timeout=5.0)
        if not self._log.closed:
            self._log.close()
        return code

    def log_tail(self, lines: int = 5) -> str:
        """The last lines of the child's log, for a message when it died without an error event."""
        try:
            with open(self.log_path, encoding="utf-8", errors="replace") as fh:
                return " | ".join(line.strip() for line in fh.readlines()[-lines:] if line.strip())
        except OSError:
            return ""
