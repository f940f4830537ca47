"""Structure-of-arrays particle storage that can grow and shrink (Alduán, Tena & Otaduy 2015,
"Efficient and Robust Position-Based Fluids for VFX", §6).

One array per quantity ("channel"), all holding the N active particles in their first N rows.
Each channel is a prefix view of a buffer with room for ``capacity`` particles, so emitting a
few particles per substep writes into the spare rows instead of copying every array:

* :meth:`Particles.add` appends particles; when they do not fit, every buffer grows to
  ``max(N + k, GROWTH * capacity)`` (geometric steps, so appending one particle at a time costs
  O(1) amortised copies per particle).
* :meth:`Particles.remove` takes the mask of particles to delete (the particles that stop being
  active) and compacts every channel in place at once, keeping the order of the survivors: a
  solver iterates over all N rows, so an inactive particle left in place would still cost time
  and still push its neighbours. Once fewer than half of the rows are in use the buffers shrink
  to ``GROWTH * N`` (and never below :data:`MIN_CAPACITY`), so memory follows the liquid.
* :meth:`Particles.reorder` (after every neighbour-grid build) writes the permuted channels into
  fresh buffers of the same capacity.

Solvers may replace a channel by an array of their own of length N (double buffering); the next
:meth:`add` notices that it has no spare rows and copies it into a buffer with room.

Every particle has a stable ``id``: new particles take fresh ids from a counter and an id is never
reused, even after its particle was removed, so the cache, motion blur and attributes can follow
a particle. ``age`` is the time since the particle was emitted (or since the first frame for the
liquid that fills FLUID objects), seconds. Named *extra channels* (float32, one value per
particle) can be added by name; they are reordered, grown and compacted with the others and are
written into every cache frame as attributes of the same name.
"""

from __future__ import annotations

import math
import re

import numpy as np

#: Factor by which the buffers grow when particles no longer fit, and the room kept after a shrink.
GROWTH = 1.5

#: Smallest capacity the buffers shrink to.
MIN_CAPACITY = 1024

#: Channels every particle set has: name -> (dtype, trailing shape).
CORE_CHANNELS = {
    "x": (np.float32, (3,)),
    "v": (np.float32, (3,)),
    "a": (np.float32, (3,)),
    "rho": (np.float32, ()),
    "p": (np.float32, ()),
    "id": (np.int32, ()),
    "age": (np.float32, ()),
}

#: Names an extra channel may not take (they are cache attributes or core channels already).
RESERVED_NAMES = frozenset(CORE_CHANNELS) | {"position", "velocity", "density", "pressure", "acceleration"}

_NAME_RE = re.compile(r"^[A-Za-z_][A-Za-z0-9_]{0,62}$")


def _prefix_with_room(arr: np.ndarray, n: int, rows: int) -> np.ndarray | None:
    """``arr``'s buffer viewed with ``rows`` rows, if ``arr`` is the first n rows of a buffer that
    has at least that many; None otherwise."""
    base = arr.base
    if (isinstance(base, np.ndarray) and base.shape[1:] == arr.shape[1:] and base.dtype == arr.dtype
            and base.shape[0] >= rows and base.flags.c_contiguous and arr.shape[0] == n
            and base.__array_interface__["data"][0] == arr.__array_interface__["data"][0]):
        return base[:rows]
    return None


#: Particle count from which :meth:`Particles.reorder` copies in parallel (below, starting the
#: threads costs more than the copy).
PARALLEL_TAKE = 16384


def _take_rows(src: np.ndarray, order: np.ndarray, out: np.ndarray) -> None:
    """``np.take(src, order, axis=0, out=out)`` for the channels' 1-D and 2-D arrays."""
    if order.shape[0] < PARALLEL_TAKE:
        np.take(src, order, axis=0, out=out)
        return
    # numba only here: importing this module (the host's pre-bake checks) must not load it
    from .particle_rows import _take_rows_1d, _take_rows_2d

    if src.ndim == 2:
        _take_rows_2d(src, order, out)
    else:
        _take_rows_1d(src, order, out)


def check_channel_name(name: str) -> str | None:
    """Why ``name`` cannot name an extra channel, or None if it can."""
    if not isinstance(name, str) or not _NAME_RE.match(name):
        return (f"'{name}' is not a valid channel name (letters, digits and underscores, starting with a "
                f"letter or underscore, at most 63 characters)")
    if name in RESERVED_NAMES:
        return f"'{name}' is a built-in particle attribute; choose another channel name"
    return None


class Particles:
    """Per-particle state, one array per channel, the active particles in the first N rows.

    Attributes
    ----------
    x : ndarray, shape (N, 3), float32, metres
    v : ndarray, shape (N, 3), float32, m/s
    a : ndarray, shape (N, 3), float32, m/s^2 (acceleration of the last force evaluation)
    rho : ndarray, shape (N,), float32, kg/m^3
    p : ndarray, shape (N,), float32, Pa
    id : ndarray, shape (N,), int32, stable id, never reused
    age : ndarray, shape (N,), float32, seconds since emission
    extra : dict of str -> ndarray, shape (N,), float32
        Named extra channels (see :meth:`add_channel`).
    capacity : int
        Rows the buffers hold (>= N).
    next_id : int
        Id the next added particle gets.
    """

    def __init__(self, capacity: int = MIN_CAPACITY):
        self.capacity = max(int(capacity), 1)
        self.next_id = 0
        self.extra: dict[str, np.ndarray] = {}
        self.rest_density = 0.0
        for name, (dtype, tail) in CORE_CHANNELS.items():
            setattr(self, name, np.empty((self.capacity,) + tail, dtype=dtype)[:0])

    @classmethod
    def create(cls, x: np.ndarray, v: np.ndarray, rho0: float, first_id: int = 0,
               capacity: int | None = None) -> "Particles":
        """A particle set holding ``x`` and ``v`` at density ``rho0``, ids from ``first_id``."""
        x = np.asarray(x).reshape(-1, 3)
        n = x.shape[0]
        pt = cls(capacity if capacity is not None else max(MIN_CAPACITY, math.ceil(GROWTH * n)))
        pt.rest_density = float(rho0)
        pt.next_id = int(first_id)
        pt.add(x, v)
        return pt

    def __len__(self) -> int:
        return self.x.shape[0]

    # -- channels -----------------------------------------------------------------------------

    def _arrays(self):
        for name in CORE_CHANNELS:
            yield name, getattr(self, name)
        yield from self.extra.items()

    def _set(self, name: str, arr: np.ndarray) -> None:
        if name in CORE_CHANNELS:
            setattr(self, name, arr)
        else:
            self.extra[name] = arr

    def add_channel(self, name: str, default: float = 0.0) -> np.ndarray:
        """Add a float32 extra channel (every particle gets ``default``); returns its array.

        Adding a channel that exists already keeps its values.

        Raises
        ------
        ValueError
            If the name is not a valid identifier or is a built-in attribute.
        """
        if name in self.extra:
            return self.extra[name]
        problem = check_channel_name(name)
        if problem:
            raise ValueError(problem)
        n = len(self)
        buf = np.empty(self.capacity, dtype=np.float32)
        buf[:n] = default
        self.extra[name] = buf[:n]
        return self.extra[name]

    # -- growing and shrinking ----------------------------------------------------------------

    def _reallocate(self, capacity: int) -> None:
        n = len(self)
        for name, arr in list(self._arrays()):
            buf = np.empty((capacity,) + arr.shape[1:], dtype=arr.dtype)
            buf[:n] = arr
            self._set(name, buf[:n])
        self.capacity = capacity

    def fit(self, spare: float = 0.0) -> None:
        """Resize the buffers to ``(1 + spare) * N`` rows (at least one): without emission, spare rows
        would only cost memory (``fit()`` after filling a scene that has no inflow)."""
        self._reallocate(max(1, math.ceil((1.0 + spare) * len(self))))

    def add(self, x: np.ndarray, v: np.ndarray, *, rho: float | None = None, age: np.ndarray | float = 0.0,
            channels: dict | None = None) -> np.ndarray:
        """Append particles; returns their ids.

        Parameters
        ----------
        x, v : array_like, shape (k, 3), metres and m/s
        rho : float, optional
            Initial density, kg/m^3 (default: the rest density given to :meth:`create`).
        age : float or array_like, shape (k,), s
            Time since each new particle was emitted (a particle emitted part-way through a
            substep is already a little older than zero).
        channels : dict of str -> float or array_like (k,), optional
            Values of extra channels for the new particles; channels not named get 0. A name
            that is not a channel yet is added (earlier particles get 0).
        """
        x = np.asarray(x, dtype=np.float32).reshape(-1, 3)
        k = x.shape[0]
        v = np.broadcast_to(np.asarray(v, dtype=np.float32), (k, 3))
        channels = channels or {}
        for name in channels:
            self.add_channel(name)
        if k == 0:
            return np.zeros(0, dtype=np.int32)
        if self.next_id + k > np.iinfo(np.int32).max:
            raise OverflowError("particle ids are exhausted (more than 2^31 - 1 particles were created)")
        n = len(self)
        if n + k > self.capacity:
            self._reallocate(max(n + k, math.ceil(GROWTH * self.capacity)))
        ids = np.arange(self.next_id, self.next_id + k, dtype=np.int32)
        values = {"x": x, "v": v, "a": 0.0, "rho": self.rest_density if rho is None else rho, "p": 0.0, "id": ids,
                  "age": age}
        for name, arr in list(self._arrays()):
            grown = _prefix_with_room(arr, n, n + k)
            if grown is None:  # a solver swapped in its own array: copy it into a buffer with room
                buf = np.empty((self.capacity,) + arr.shape[1:], dtype=arr.dtype)
                buf[:n] = arr
                grown = buf[:n + k]
            grown[n:] = values[name] if name in CORE_CHANNELS else channels.get(name, 0.0)
            self._set(name, grown)
        self.next_id += k
        return ids

    def remove(self, mask: np.ndarray) -> int:
        """Delete the particles where ``mask`` is True, keeping the order of the others; returns the
        number removed. Shrinks the buffers once fewer than half of them are in use."""
        mask = np.asarray(mask, dtype=bool).reshape(-1)
        n = len(self)
        if mask.shape[0] != n:
            raise ValueError(f"mask has {mask.shape[0]} entries for {n} particles")
        removed = int(np.count_nonzero(mask))
        if removed == 0:
            return 0
        keep = ~mask
        m = n - removed
        for name, arr in list(self._arrays()):
            kept = arr[keep]  # a copy: safe to write over arr's rows
            arr[:m] = kept
            self._set(name, arr[:m])
        if m < self.capacity // 2 and self.capacity > MIN_CAPACITY:
            self._reallocate(max(MIN_CAPACITY, math.ceil(GROWTH * m)))
        return removed

    def reorder(self, order: np.ndarray, head: int | None = None) -> None:
        """Apply a permutation to every channel (after a grid build). With ``head``, ``order``
        permutes only the first ``head`` rows, in place, and the others stay where they are."""
        n = len(self)
        if head is not None:
            for _name, arr in list(self._arrays()):
                arr[:head] = np.take(arr[:head], order, axis=0)
            return
        for name, arr in list(self._arrays()):
            buf = np.empty((self.capacity,) + arr.shape[1:], dtype=arr.dtype)
            _take_rows(arr, order, buf[:n])
            self._set(name, buf[:n])

    def nbytes(self) -> int:
        """Bytes held by the buffers (capacity rows of every channel)."""
        total = 0
        for _name, arr in self._arrays():
            base = arr.base if isinstance(arr.base, np.ndarray) else arr
            total += base.nbytes
        return total

    # -- output -------------------------------------------------------------------------------

    def frame_arrays(self) -> dict:
        """Arrays for one cache frame, sorted by id (see engine.io.cache): position, velocity,
        density, id, age, then every extra channel under its own name."""
        order = np.argsort(self.id, kind="stable")
        out = {"position": self.x[order], "velocity": self.v[order], "density": self.rho[order],
               "id": self.id[order], "age": self.age[order]}
        for name, arr in self.extra.items():
            out[name] = arr[order]
        return out
