"""Shared memory between a live session's host (Blender) and its engine process.

Two blocks of :mod:`multiprocessing.shared_memory`, both created (and unlinked) by the host:

* the **state block**, written by the engine, read by the host: two buffers of particle positions,
  velocities and ids (double buffering: the engine fills the buffer the host is not reading, then
  makes it the front one), each with its frame counter, particle count, simulated time and the
  figures of the frame (engine seconds, substeps);
* the **control block**, written by the host, read by the engine: the run state (paused, stop),
  counters of one-shot commands (step one frame, reset, save the state for a bake, start or stop a
  recording), the settings that change live (gravity, viscosity, surface tension) and one
  rest-to-world matrix per mesh collider.

Both sides use the same seqlock: the writer makes a sequence number odd, writes, and makes it even
again; a reader copies between two reads of the number and keeps the copy only if both are the same
even value. One writer per block, so no lock is needed and neither side ever waits for the other.
(On x86 stores are seen in program order; elsewhere the system calls both processes make between
frames order them in practice.)

Nothing here imports Blender; the engine process (:mod:`engine.live.session`) and the host
(``bridge.live``) both use it.
"""

from __future__ import annotations

import os
import time
from multiprocessing import resource_tracker, shared_memory

import numpy as np

#: Layout version; both sides check it.
VERSION = 1

#: Engine status values in the state header.
STARTING, RUNNING, PAUSED, FAILED, STOPPED = 0, 1, 2, 3, 4

#: Bytes of the text field of the control block (JSON naming the folders of a save or a recording, UTF-8).
PATH_BYTES = 2048

FRAME_DTYPE = np.dtype([
    ("seq", "<i8"),            # seqlock: odd while the engine writes this buffer
    ("frame", "<i8"),          # frames advanced since the start (or the last reset); 0 is the initial state
    ("count", "<i8"),          # particles in the buffer
    ("time", "<f8"),           # simulated seconds since the start
    ("control", "<i8"),        # sequence number of the control block this frame was simulated with
    ("engine_seconds", "<f8"),  # wall seconds the engine spent on this frame
    ("engine_cpu", "<f8"),     # processor seconds it spent on it (all its threads)
    ("substeps", "<i4"),
    ("published", "<f8"),      # time.time() when the engine published it
])

STATE_DTYPE = np.dtype([
    ("version", "<u4"),
    ("status", "<i4"),
    ("capacity", "<i8"),
    ("front", "<i4"),
    ("published", "<i8"),      # frames published so far (every publication, resets included)
    ("step_done", "<i8"),      # the control block's counters the engine has handled
    ("reset_done", "<i8"),
    ("snapshot_done", "<i8"),
    ("record_done", "<i8"),
    ("recorded", "<i8"),       # frames in the current recording
    ("ratio", "<f8"),          # simulated seconds per wall second over the last second of running
    ("dropped", "<i8"),        # particles an inflow could not emit because the buffers are full
    ("frames", FRAME_DTYPE, (2,)),
])


def control_dtype(n_colliders: int) -> np.dtype:
    return np.dtype([
        ("seq", "<i8"),
        ("version", "<u4"),
        ("stop", "<i4"),
        ("paused", "<i4"),
        ("recording", "<i4"),
        ("step", "<i8"),          # counters: the engine acts once per increment
        ("reset", "<i8"),
        ("snapshot", "<i8"),      # save the state into the cache folder named in ``text`` (Bake From Here)
        ("record", "<i8"),        # a new recording into the folders named in ``text`` starts (with ``recording`` set)
        ("heartbeat", "<f8"),     # time.time() of the host's last update
        ("speed", "<f8"),         # simulated seconds per wall second the engine aims for (0: its own)
        ("gravity", "<f8", (3,)),
        ("dynamic_viscosity", "<f8"),
        ("pbf_velocity_smoothing", "<f8"),
        ("surface_tension", "<f8"),
        ("pbf_surface_tension", "<f8"),
        ("n_colliders", "<i4"),
        ("matrices", "<f8", (max(n_colliders, 1), 4, 4)),
        ("text", f"S{PATH_BYTES}"),
    ])


def state_nbytes(capacity: int) -> int:
    """Bytes of a state block holding two buffers of ``capacity`` particles."""
    return STATE_DTYPE.itemsize + 2 * capacity * (3 * 4 + 3 * 4 + 4) + 64


def segment_name(kind: str) -> str:
    """A fresh name for a segment (``surge_<kind>_<pid>_<random>``); POSIX names stay under 31 chars."""
    return f"surge_{kind}_{os.getpid() % 100000}_{os.urandom(4).hex()}"


def attach(name: str) -> shared_memory.SharedMemory:
    """Open an existing segment without taking ownership of it.

    Python 3.11 registers every opened segment with the resource tracker of the process that opens it,
    which unlinks it when that process ends: the engine would delete the host's segments on exit. The
    host owns them (it unlinks them when the session ends), so the opener's registration is undone.
    """
    shm = shared_memory.SharedMemory(name=name, create=False)
    try:
        resource_tracker.unregister(shm._name, "shared_memory")  # noqa: SLF001 (the name with its '/' prefix)
    except Exception:  # noqa: BLE001 -- platforms without a tracker (Windows) have nothing to undo
        pass
    return shm


class StateBlock:
    """The state block over a shared-memory buffer (see the module docstring)."""

    def __init__(self, shm: shared_memory.SharedMemory, capacity: int | None = None):
        self.shm = shm
        buf = shm.buf
        self.header = np.ndarray((), dtype=STATE_DTYPE, buffer=buf, offset=0)
        if capacity is not None:
            self.header["version"] = VERSION
            self.header["capacity"] = capacity
        elif int(self.header["version"]) != VERSION:
            raise ValueError(f"live state block of version {int(self.header['version'])}, expected {VERSION}")
        cap = int(self.header["capacity"])
        self.capacity = cap
        off = _align(STATE_DTYPE.itemsize)
        self.x = np.ndarray((2, cap, 3), dtype=np.float32, buffer=buf, offset=off)
        off += self.x.nbytes
        self.v = np.ndarray((2, cap, 3), dtype=np.float32, buffer=buf, offset=off)
        off += self.v.nbytes
        self.ids = np.ndarray((2, cap), dtype=np.int32, buffer=buf, offset=off)

    @classmethod
    def create(cls, capacity: int) -> "StateBlock":
        shm = shared_memory.SharedMemory(name=segment_name("state"), create=True, size=state_nbytes(capacity))
        return cls(shm, capacity)

    @classmethod
    def open(cls, name: str) -> "StateBlock":
        return cls(attach(name))

    # -- engine side ------------------------------------------------------------------------------

    def publish(self, x: np.ndarray, v: np.ndarray, ids: np.ndarray, *, frame: int, time_: float, control: int,
                engine_seconds: float, substeps: int, engine_cpu: float = 0.0) -> None:
        """Write one frame into the back buffer and make it the front one (engine side).

        Raises ValueError when the particles outnumber the capacity (the caller caps emission)."""
        n = int(x.shape[0])
        if n > self.capacity:
            raise ValueError(f"{n} particles do not fit the live buffers of {self.capacity}")
        h = self.header
        b = 1 - int(h["front"])
        meta = h["frames"]  # (2,) view of the two buffers' fields
        meta["seq"][b] += 1
        self.x[b, :n] = x
        self.v[b, :n] = v
        self.ids[b, :n] = ids
        meta["frame"][b] = frame
        meta["count"][b] = n
        meta["time"][b] = time_
        meta["control"][b] = control
        meta["engine_seconds"][b] = engine_seconds
        meta["engine_cpu"][b] = engine_cpu
        meta["substeps"][b] = substeps
        meta["published"][b] = time.time()
        meta["seq"][b] += 1
        h["front"] = b
        h["published"] += 1

    # -- host side --------------------------------------------------------------------------------

    def read(self, x_out: np.ndarray | None = None, with_velocity: bool = True, tries: int = 8):
        """Copy the front buffer: ``(meta, x, v, ids)`` with ``meta`` a dict of the frame's fields,
        or None if the engine kept rewriting it (it publishes far slower than a copy takes)."""
        h = self.header
        meta = h["frames"]
        for _ in range(tries):
            f = int(h["front"])
            s1 = int(meta["seq"][f])
            if s1 & 1:
                continue
            n = int(meta["count"][f])
            x = np.array(self.x[f, :n]) if x_out is None else _copy_into(x_out, self.x[f, :n])
            v = np.array(self.v[f, :n]) if with_velocity else None
            ids = np.array(self.ids[f, :n])
            fields = {name: meta[name][f].item() for name in FRAME_DTYPE.names}
            if int(meta["seq"][f]) == s1:
                return fields, x, v, ids
        return None

    def close(self) -> None:
        _release(self)


class ControlBlock:
    """The control block over a shared-memory buffer (see the module docstring)."""

    def __init__(self, shm: shared_memory.SharedMemory, n_colliders: int | None = None):
        self.shm = shm
        if n_colliders is None:
            probe = np.ndarray((), dtype=control_dtype(0), buffer=shm.buf, offset=0)
            if int(probe["version"]) != VERSION:
                raise ValueError(f"live control block of version {int(probe['version'])}, expected {VERSION}")
            n_colliders = int(probe["n_colliders"])
            del probe
        self.dtype = control_dtype(n_colliders)
        self.record = np.ndarray((), dtype=self.dtype, buffer=shm.buf, offset=0)
        self.n_colliders = n_colliders

    @classmethod
    def create(cls, n_colliders: int) -> "ControlBlock":
        size = control_dtype(n_colliders).itemsize
        shm = shared_memory.SharedMemory(name=segment_name("ctl"), create=True, size=size)
        block = cls(shm, n_colliders)
        block.record["version"] = VERSION
        block.record["n_colliders"] = n_colliders
        block.record["matrices"] = np.eye(4)
        return block

    @classmethod
    def open(cls, name: str) -> "ControlBlock":
        return cls(attach(name))

    def write(self, **values) -> int:
        """Set fields (host side) in one seqlocked update; returns the new sequence number.
        ``text`` takes a str; counters are set, not incremented (see :meth:`bump`)."""
        r = self.record
        r["seq"] += 1
        for name, value in values.items():
            if name == "text":
                value = str(value).encode("utf-8")
                if len(value) > PATH_BYTES:
                    raise ValueError(f"path longer than {PATH_BYTES} bytes: {value[:80]!r}...")
            r[name] = value
        r["seq"] += 1
        return int(r["seq"])

    def bump(self, name: str, **values) -> int:
        """Increment the counter ``name`` (with other fields) in one update; returns the counter's value."""
        count = int(self.record[name]) + 1
        self.write(**{name: count}, **values)
        return count

    def snapshot(self, tries: int = 100) -> dict | None:
        """A consistent copy (engine side): a dict of every field (``text`` as str), or None if the
        host kept writing (it writes for microseconds once per update)."""
        r = self.record
        for _ in range(tries):
            s1 = int(r["seq"])
            if s1 & 1:
                time.sleep(0.0001)
                continue
            copy = np.array(r, copy=True)
            if int(r["seq"]) == s1:
                out = {name: copy[name] for name in self.dtype.names}
                out = {k: (v.item() if v.ndim == 0 else np.array(v)) for k, v in out.items()}
                out["text"] = bytes(out["text"]).decode("utf-8", errors="replace")
                return out
        return None

    def close(self) -> None:
        _release(self)


def _align(n: int, to: int = 64) -> int:
    return (n + to - 1) // to * to


def _copy_into(out: np.ndarray, src: np.ndarray) -> np.ndarray:
    out[: src.shape[0]] = src
    return out[: src.shape[0]]


def _release(block) -> None:
    """Drop the numpy views, then close the mapping (a view still alive would make close() fail)."""
    for name in ("header", "x", "v", "ids", "record"):
        if hasattr(block, name):
            setattr(block, name, None)
    try:
        block.shm.close()
    except BufferError:
        pass  # a copy of a view escaped; the mapping goes with the process


def unlink(shm: shared_memory.SharedMemory) -> None:
    """Remove a segment the host created (idempotent)."""
    try:
        shm.unlink()
    except FileNotFoundError:
        pass
