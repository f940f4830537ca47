"""Whitewater state and one frame of the model: advect, emit, classify, remove.

The state is a structure of arrays, 37 bytes per diffuse particle:

=========  ===========  =======  ==================================================================
name       shape        dtype    meaning
=========  ===========  =======  ==================================================================
position   (M, 3)       float32  world-space position, m
velocity   (M, 3)       float32  velocity, m/s
age        (M,)         float32  seconds since the particle was emitted
lifetime   (M,)         float32  seconds left before it dissolves (runs down while it is foam, or spray
                                   in contact with a wall)
kind       (M,)         uint8    0 spray, 1 foam, 2 bubble (classified against the frame's liquid)
id         (M,)         int32    stable id, never reused within one stage
=========  ===========  =======  ==================================================================
"""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np

from ..core.neighbour_list import NeighbourList
from ..core.cell_grid import build_grid
from ..settings import WhitewaterSettings
from . import kernels as k

KIND_NAMES = ("spray", "foam", "bubbles")

#: Interaction radius of the model, in particle spacings: the potentials, the liquid velocity at a
#: diffuse particle and the neighbour count that classifies it all look this far. With the paper's
#: limits (spray below 6 neighbours, bubbles above 20; a point deep in the liquid has about 33
#: within two spacings) foam is the layer from about 0.4 spacings under the outermost liquid
#: particles to about 0.9 above them.
RADIUS_SPACINGS = 2.0

#: Automatic thresholds (see :func:`auto_thresholds`). Each frame's largest potentials are read robustly,
#: as the value the top 0.1 % of its liquid particles reach, so that one particle flung away does not set
#: them; the shot's peak is the largest of these over its frames.
AUTO_PERCENTILE = 99.9
#: tau_min of the trapped-air and wave-crest potentials as a share of the shot's peak (tau_max is the
#: peak): only what comes within this share of the shot's strongest splash makes whitewater. Measured on
#: dam breaks (0.16-0.32 m columns, and the same ten times larger): the collapse of the column and the
#: surge running along the floor reach at most 0.52 of the trapped-air peak of the impact on the far wall
#: and 0.34 of its wave-crest peak, so 0.6 leaves the collapse calm.
AUTO_MIN_SHARE = 0.6
#: tau_min and tau_max of the kinetic energy as shares of the shot's peak energy: a particle starts to
#: make whitewater at 14 % of the shot's top speed (sqrt(0.02)) and makes the most from 45 % of it
#: (sqrt(0.2)), so the gate only leaves out slow liquid: the crest of a wave that overturns after an
#: impact moves at half the impact's speed or less.
AUTO_ENERGY_SHARES = (0.02, 0.2)
#: Names the rule of :func:`auto_thresholds` in the stage's settings (and so in their hash).
AUTO_RULE = f"shot peak; share {AUTO_MIN_SHARE}; energy {AUTO_ENERGY_SHARES[0]}-{AUTO_ENERGY_SHARES[1]}"


#: How far along its surface normal, in interaction radii, a liquid particle looks for a wall before it
#: counts as free surface: half of R is one spacing, past the half spacing that separates the liquid's
#: outermost particles from a wall they rest against.
WALL_PROBE = 0.5

#: Particles advected and classified per pass: the liquid velocity and neighbour counts a pass needs
#: (16 bytes a particle) exist for this many particles at a time, not for all of them.
CHUNK = 1 << 20

#: Growth of the state's buffers when newborns do not fit (never beyond the cap): particles are
#: appended in place, so a frame copies the state only when the population outgrows its buffers.
GROWTH = 1.25


@dataclass
class Diffuse:
    """Diffuse particles (see the module docstring for the arrays).

    The arrays may be views of the first rows of larger ``buffers`` (name -> array), which
    :meth:`append` fills in place while they have room.
    """

    position: np.ndarray
    velocity: np.ndarray
    age: np.ndarray
    lifetime: np.ndarray
    kind: np.ndarray
    id: np.ndarray
    buffers: dict | None = field(default=None, repr=False, compare=False)

    ARRAYS = ("position", "velocity", "age", "lifetime", "kind", "id")
    DTYPES = {"position": np.float32, "velocity": np.float32, "age": np.float32, "lifetime": np.float32,
              "kind": np.uint8, "id": np.int32}

    @classmethod
    def empty(cls, n: int = 0) -> "Diffuse":
        return cls(np.zeros((n, 3), np.float32), np.zeros((n, 3), np.float32), np.zeros(n, np.float32),
                   np.zeros(n, np.float32), np.zeros(n, np.uint8), np.zeros(n, np.int32))

    @classmethod
    def from_arrays(cls, arrays: dict) -> "Diffuse":
        return cls(**{name: np.ascontiguousarray(arrays[name], dtype=cls.DTYPES[name]) for name in cls.ARRAYS})

    def arrays(self) -> dict:
        return {name: getattr(self, name) for name in self.ARRAYS}

    def __len__(self) -> int:
        return len(self.id)

    @property
    def nbytes(self) -> int:
        return sum(getattr(self, name).nbytes for name in self.ARRAYS)

    def take(self, keep: np.ndarray) -> "Diffuse":
        return Diffuse(*(getattr(self, name)[keep] for name in self.ARRAYS))

    def head(self, n: int) -> "Diffuse":
        """The first ``n`` particles, as views (the buffers stay)."""
        return Diffuse(*(getattr(self, name)[:n] for name in self.ARRAYS), buffers=self.buffers)

    def append(self, other: "Diffuse", limit: int) -> "Diffuse":
        """These particles followed by ``other``'s, written into the buffers (grown, up to ``limit``
        rows, only when they have no room)."""
        n, m = len(self), len(other)
        if m == 0:
            return self
        need = n + m
        buf = self.buffers
        if buf is None or len(buf["id"]) < need:
            cap = max(need, min(int(need * GROWTH), limit))
            buf = {name: np.empty((cap,) + getattr(self, name).shape[1:], self.DTYPES[name]) for name in self.ARRAYS}
            for name in self.ARRAYS:
                buf[name][:n] = getattr(self, name)
        for name in self.ARRAYS:
            buf[name][n:need] = getattr(other, name)
        return Diffuse(*(buf[name][:need] for name in self.ARRAYS), buffers=buf)

    @property
    def capacity_bytes(self) -> int:
        """Bytes of the buffers (the state's memory, spare rows included)."""
        if self.buffers is None:
            return self.nbytes
        return sum(a.nbytes for a in self.buffers.values())


@dataclass(frozen=True)
class Thresholds:
    """tau_min and tau_max of the three potentials (Eq. 1), in their units (m/s, 1, J/kg)."""

    trapped_air: tuple
    wave_crest: tuple
    energy: tuple

    def array(self) -> np.ndarray:
        return np.array(self.trapped_air + self.wave_crest + self.energy, dtype=np.float64)

    def to_dict(self) -> dict:
        return {"trapped_air": list(self.trapped_air), "wave_crest": list(self.wave_crest),
                "energy": list(self.energy)}

    @classmethod
    def from_dict(cls, d: dict) -> "Thresholds":
        return cls(tuple(d["trapped_air"]), tuple(d["wave_crest"]), tuple(d["energy"]))

    @classmethod
    def manual(cls, s: WhitewaterSettings) -> "Thresholds":
        return cls((s.trapped_air_min, s.trapped_air_max), (s.wave_crest_min, s.wave_crest_max),
                   (s.energy_min, s.energy_max))


def floors(spacing: float, gravity: np.ndarray) -> Thresholds:
    """Lowest automatic thresholds, so a liquid at rest stays calm whatever its own range says.

    Speeds are measured against u0 = sqrt(|g| dx), the speed of a fall of half a spacing: liquid
    slower than half of it makes no whitewater (energy floor), and neighbours must collide at u0
    (trapped-air floor). A 10 cm glass at 2 mm spacing has u0 = 0.14 m/s, a 50 m wave at 25 cm
    1.6 m/s. The wave-crest floor of 0.1 is a curvature no flat surface reaches.
    """
    u0 = float(np.sqrt(max(float(np.linalg.norm(gravity)), 1e-6) * spacing))
    return Thresholds((u0, 2.0 * u0), (0.1, 0.2), (0.125 * u0 * u0, 0.25 * u0 * u0))


class LiquidFrame:
    """One frame of liquid, sorted into cells of the model's radius, with its potentials."""

    def __init__(self, position: np.ndarray, velocity: np.ndarray, ids: np.ndarray, spacing: float,
                 obstacles=None):
        self.R = RADIUS_SPACINGS * spacing
        #: the frame's :class:`~engine.whitewater.obstacles.Obstacles` (posed at this frame), or None
        self.obstacles = obstacles
        x = np.ascontiguousarray(position, dtype=np.float32).reshape(-1, 3)
        self.grid = build_grid(x, self.R)
        order = self.grid.order
        self.x = np.ascontiguousarray(x[order])
        self.v = np.ascontiguousarray(np.asarray(velocity, dtype=np.float32).reshape(-1, 3)[order])
        self.id = np.ascontiguousarray(np.asarray(ids, dtype=np.int32)[order])
        n = len(self.x)
        self.normal = np.zeros((n, 3), np.float32)
        self.count = np.zeros(n, np.int32)
        self._potentials = None

    def __len__(self) -> int:
        return len(self.x)

    def potentials(self) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """Raw trapped-air (m/s), wave-crest (1) and energy (J/kg) potentials, in grid order, of the
        smoothed velocity field (:func:`kernels.smoothed_velocity`)."""
        if self._potentials is None:
            g = self.grid
            n = len(self.x)
            ta, wc, ke = np.zeros(n), np.zeros(n), np.zeros(n)
            if n:
                # one list of the neighbours within R (|x_i - x_j| < h_i + h_j = R) for the three passes
                nl = NeighbourList()
                nl.build(self.x, np.full(n, 0.5 * self.R, np.float32), g._replace(order=None))
                k.surface_normals(self.x, nl.start, nl.count, nl.nbr, self.R, self.normal, self.count)
                self._walls_are_not_surface()
                smooth = np.empty_like(self.v)
                k.smoothed_velocity(self.x, self.v, nl.start, nl.count, nl.nbr, self.R, smooth)
                k.potentials(self.x, smooth, self.normal, nl.start, nl.count, nl.nbr, self.R, ta, wc, ke)
                del nl
            self._potentials = (ta, wc, ke)
        return self._potentials

    def _walls_are_not_surface(self) -> None:
        """Liquid whose neighbours are missing because a wall stands there (the floor under the liquid, a
        tank wall) is not at a free surface: a surface normal that points into a solid within
        :data:`WALL_PROBE` R is dropped, so walls make neither wave crests nor their curvature."""
        if not self.obstacles:
            return
        at = np.flatnonzero(np.any(self.normal != 0.0, axis=1))
        if len(at) == 0:
            return
        probe = self.x[at] + WALL_PROBE * self.R * self.normal[at]
        walled = self.obstacles.solid_at(probe, self.R)
        self.normal[at[walled]] = 0.0

    def query(self, points: np.ndarray, kind: np.ndarray | None = None, skip_kind: int = -1,
              velocity: bool = True):
        """Liquid neighbour count and (with ``velocity``) liquid velocity at each point (see :func:`kernels.query`)."""
        m = len(points)
        count = np.zeros(m, np.int32)
        vel = np.zeros((m if velocity else 0, 3), np.float32)
        if m and len(self.x):
            g = self.grid
            k.query(points, self.x, self.v, g.cell_key, g.cell_start, g.cell_nbr, self.R, skip_kind,
                    kind if kind is not None else np.zeros(m, np.uint8), count, vel)
        return count, vel


def frame_maxima(liquid: LiquidFrame) -> np.ndarray:
    """Robust largest trapped-air, wave-crest and energy potential of one frame (the automatic mode's
    input): the :data:`AUTO_PERCENTILE` percentile over the liquid particles."""
    if len(liquid) == 0:
        return np.zeros(3)
    return np.array([float(np.percentile(p, AUTO_PERCENTILE)) for p in liquid.potentials()])


def auto_thresholds(maxima: np.ndarray, spacing: float, gravity: np.ndarray) -> Thresholds:
    """Thresholds from the shot's own range of potentials.

    Ihmsen, Akinci, Gissler & Teschner 2012 ("Unified spray, foam and air bubbles for particle-based
    fluids") clamp each potential between a tau_min and a tau_max set by hand per scene (Eq. 1). Here they
    come from the shot: with P the shot's peak of a potential, the largest over the frames of
    :func:`frame_maxima` (what its top 0.1 % of liquid reaches at its strongest moment),

    * trapped air and wave crest: tau_max = P, tau_min = :data:`AUTO_MIN_SHARE` P (0.6): whitewater comes
      from the shot's strongest splashes (an impact, a breaking crest) and not from the ordinary motion of
      the liquid, which in a dam break reaches half the impact's peak while the column collapses;
    * kinetic energy (the gate Phi_k of Section 4.2): tau_min = 0.02 P, tau_max = 0.2 P
      (:data:`AUTO_ENERGY_SHARES`).

    Every threshold is then raised to at least :func:`floors`, the noise a liquid at rest keeps, so a calm
    liquid makes nothing.

    Scale-free: the potentials of two shots that differ only in size (lengths times L, the spacing too,
    velocities times sqrt(L), the same gravity: Froude similarity) are in the ratio sqrt(L) (trapped air,
    m/s, relative to the shot's characteristic velocity sqrt(|g| H)), 1 (wave crest) and L (energy,
    J/kg); the peaks and floors scale the same way, so a 10 cm glass and a 50 m wave make whitewater at
    the same places of their motion without tuning.

    Why the peak and not an average over the shot: the mean of the per-frame maxima sits at the level of
    the liquid's ordinary motion, and thresholds from it (a tenth of it to it) let a dam break foam while
    its column collapses, long before the impact (1,070 to 3,043 particles before it in the dam breaks of
    ``tests/test_whitewater.py``, none with this rule).

    Parameters
    ----------
    maxima : ndarray, shape (F, 3)
        :func:`frame_maxima` of the F frames looked at (trapped air m/s, wave crest 1, energy J/kg).
    spacing : float
        Particle spacing, m.
    gravity : ndarray, shape (3,)
        m/s^2.
    """
    m = np.asarray(maxima, dtype=np.float64).reshape(-1, 3)
    peak = m.max(axis=0) if len(m) else np.zeros(3)
    low = floors(spacing, gravity)
    shares = ((AUTO_MIN_SHARE, 1.0), (AUTO_MIN_SHARE, 1.0), AUTO_ENERGY_SHARES)
    out = []
    for p, (smin, smax), (fmin, fmax) in zip(peak, shares, (low.trapped_air, low.wave_crest, low.energy)):
        tmax = max(smax * float(p), fmax)
        # tau_min < tau_max whatever the peak: smin < smax and fmin < fmax
        out.append((max(smin * float(p), fmin), tmax))
    return Thresholds(*out)


@dataclass
class FrameStats:
    """What one frame did: particles emitted (kept), alive per kind, removed, refused by the cap, and
    moved out of a collider or container."""

    emitted: int = 0
    alive: tuple = (0, 0, 0)
    removed: int = 0
    capped: int = 0
    contacts: int = 0

    def to_dict(self) -> dict:
        return {"emitted": self.emitted, "spray": self.alive[0], "foam": self.alive[1],
                "bubbles": self.alive[2], "removed": self.removed, "capped": self.capped,
                "contacts": self.contacts}


def step(state: Diffuse, liquid: LiquidFrame, frame: int, dt: float, next_id: int, settings: WhitewaterSettings,
         thresholds: Thresholds, spacing: float, gravity: np.ndarray) -> tuple[Diffuse, int, FrameStats]:
    """Carry the diffuse particles from the previous frame to this one and emit this frame's new ones.

    Parameters
    ----------
    state : Diffuse
        Particles at the previous frame (classified against its liquid).
    liquid : LiquidFrame
        This frame's liquid.
    frame : int
        This frame's number (it seeds the random numbers).
    dt : float
        Seconds from the previous frame to this one (0 for the first frame: emission only).
    next_id : int
        Id of the next new particle.

    Returns
    -------
    (Diffuse, int, FrameStats)
        The particles at this frame, the next free id, and the frame's figures.
    """
    s = settings
    g = np.asarray(gravity, dtype=np.float64)
    stats = FrameStats()
    before = len(state)
    walls = liquid.obstacles
    # 1. advect by the kind found at the previous frame; foam and bubbles need the liquid's velocity
    #    at their old position in this frame's liquid (the paper's v~_f(t + dt)); then out of the solids
    #    (spray in contact with a wall runs its lifetime down, see engine.whitewater.obstacles)
    if before and dt > 0.0:
        for a in range(0, before, CHUNK):
            c = slice(a, min(a + CHUNK, before))
            start = state.position[c].copy() if walls else None
            _count, vf = liquid.query(state.position[c], state.kind[c], skip_kind=k.SPRAY)
            k.advance(state.position[c], state.velocity[c], state.kind[c], vf, state.lifetime[c], state.age[c],
                      float(dt), g[0], g[1], g[2], s.spray_drag, s.buoyancy, s.bubble_drag)
            if walls:
                contact = walls.push_out(start, state.position[c], state.velocity[c])
                k.wet(contact, state.kind[c], float(dt), state.lifetime[c])
                stats.contacts += int(contact.sum())
                del start, contact
        del vf, _count
    # 2. emit from this frame's liquid
    born = Diffuse.empty()
    if len(liquid) and dt > 0.0:
        ta, wc, ke = liquid.potentials()
        n = len(liquid)
        counts = np.zeros(n, np.int64)
        strength = np.zeros(n)
        # the largest per-kind amount scales the emission; each newborn is then kept with its kind's
        # share of it, so (1, 1, 1) keeps all, (2, 2, 2) doubles all and (1, 0, 0) makes spray only
        scale = max(s.spray_amount, s.foam_amount, s.bubble_amount)
        rates = scale * np.array([s.trapped_air_rate, s.wave_crest_rate])
        k.emission_counts(ta, wc, ke, liquid.id, thresholds.array(), rates, float(dt), s.seed, frame,
                          counts, strength)
        total = int(counts.sum())
        if total:
            offsets = np.zeros(n, np.int64)
            np.cumsum(counts[:-1], out=offsets[1:])
            born = Diffuse.empty(total)
            k.emit(liquid.x, liquid.v, liquid.id, counts, offsets, strength, 0.5 * spacing, float(dt), 0.1,
                   s.lifetime, s.lifetime_variation, s.seed, frame, born.position, born.velocity, born.lifetime)
            if walls:
                # a newborn placed past a wall (the cylinder around a liquid particle at the wall) is put back
                walls.push_out(born.position, born.position, born.velocity, reach=0.5 * spacing,
                               travel_dt=1.25 * float(dt))
            born_count, _ = liquid.query(born.position, velocity=False)
            k.classify(born_count, s.spray_neighbours, s.bubble_neighbours, born.kind)
            share = np.array([s.spray_amount, s.foam_amount, s.bubble_amount]) / scale
            draw = np.empty(total)
            k.fill_uniform(s.seed, frame, draw)
            born = born.take(draw < share[born.kind])
    # 3. reclassify the survivors at their new position, remove the dissolved and the lost
    if before:
        for a in range(0, before, CHUNK):
            c = slice(a, min(a + CHUNK, before))
            count, _ = liquid.query(state.position[c], velocity=False)
            k.classify(count, s.spray_neighbours, s.bubble_neighbours, state.kind[c])
        del count
        keep = np.empty(before, np.bool_)
        floor = float(liquid.x[:, 2].min()) - liquid.R if len(liquid) else np.inf
        kept = k.survivors(state.position, state.velocity, state.kind, state.lifetime, floor,
                           keep)
        stats.removed = before - kept
        if stats.removed:
            # in place: views of the first ``kept`` rows, no second copy of the state
            k.compact(keep, state.position, state.velocity, state.lifetime, state.age, state.kind, state.id)
            state = state.head(kept)
        del keep
    # 4. the cap: newborns beyond it are not made (the oldest particles are kept)
    room = max(0, s.max_particles - len(state))
    if len(born) > room:
        stats.capped = len(born) - room
        born = born.take(np.arange(room))
    born.id[:] = np.arange(next_id, next_id + len(born), dtype=np.int64).astype(np.int32)
    next_id += len(born)
    stats.emitted = len(born)
    state = state.append(born, s.max_particles)
    alive = np.zeros(3, np.int64)
    k.count_kinds(state.kind, alive)
    stats.alive = tuple(int(c) for c in alive)
    return state, next_id, stats
