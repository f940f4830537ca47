"""The surface against the bake's colliders: no mesh inside a solid, no air film along a wall.

The colour field of the particles (:mod:`.field`) knows nothing of walls: it reaches a kernel support
beyond the particles, so where liquid lies against a wall the iso-surface bulges through it, and
where the particles stand back from a wall a film of air opens. Before marching cubes the field is
combined with the solids, as Houdini's particle fluid surface subtracts its colliders and FLIP
Fluids meshes against its obstacles:

* **Distance to the solids.** s(p), the signed distance from a point to the nearest solid surface,
  positive in the free space, and the unit normal n(p) pointing into it (:func:`solid_distance`):
  box containers exactly (inside the box: the nearest face; outside: minus the distance to the
  box), mesh colliders through the bake's own distance grids and convex polytopes at the frame's pose
  (:func:`engine.collision.queries.collider_phi`, deforming colliders with their frame's grid). The
  surface meets the collider's *mesh* (the surface an artist sees and renders), not the contact
  surface the particles meet: that one lies the collider's surface offset out, and a shell's half
  thickness on each side of its mesh.
* **Extension into the wall** (no air film). Near a wall, where s(p) < delta, the field takes the
  larger of its own value and the value at the point ``p + (r - s(p)) n(p)``, a little farther from the
  wall (r = delta + 2 cells), read by trilinear interpolation from the grid: the liquid near a wall
  continues straight up to it (a contact angle of 90 degrees), and where no liquid lies against the
  wall nothing is added. delta is :data:`CONTACT_DISTANCE` spacings (the particles rest with their
  centres on a box container's walls and up to half a spacing from a mesh collider's contact
  surface: liquid whose particles come this close touches).
* **Clip at the wall** (no poke-through). The field becomes min(c - iso, kappa (s - d)) + iso, with d
  the meeting distance: 0 on the surface, +offset outside it, -offset inside it (the liquid overlaps the
  solid: :data:`engine.settings.surface.COLLIDER_MEETING_MODES`). The iso-surface of the minimum is the
  boundary of the intersection of the liquid and the free space (a constructive solid geometry
  intersection of two implicit functions); kappa = 1 / cell makes the wall's term the smaller one
  within a cell of the wall, so that marching cubes interpolates the wall's distance there.
* **Vertices onto the wall.** After smoothing, every vertex that marching cubes put on the wall
  (s - d below half a cell) and every vertex smoothing moved into the solid is moved along the normal
  onto s = d (:func:`project_vertices`): the face along the wall is flat and lies on it, the contact
  line is smoothed within the wall.

The mesh stays closed: the face along the wall is part of it, a closed surface whose piece along the
wall lies on the wall (not left open for the wall to close): a renderer's refraction needs a closed
interface, and the volume and the keyframes' mesh need it too.

Writes and reads never meet, so the combination runs in parallel in place: a point is changed only
where s < delta, and the extension reads the grid only around points at s >= delta + 2 cells, whose
eight corners lie at s >= delta (a distance grows by at most its step: the corners are within
sqrt(3) cells).
"""

from __future__ import annotations

import math
import os

import numpy as np
from numba import njit, prange

from ..collision.queries import _near, collider_phi

#: Liquid whose particles come within this many spacings of a solid's surface touches it (see the
#: module docstring): the field is extended up to the wall from this far out.
CONTACT_DISTANCE = 1.0

#: Passes of the extension's walk away from the walls (a point near two walls, in a corner, steps
#: off one and then the other).
EXTENSION_STEPS = 3

#: Vertices within this many cells of the meeting surface after marching cubes lie on the wall.
ON_WALL_CELLS = 0.5

#: Most steps of a vertex's projection onto the wall.
PROJECTION_STEPS = 4

SQRT3 = math.sqrt(3.0)



@njit(inline="always", cache=True)
def _face(p, lo, hi, best, axis, sign, k):
    """The nearer of box faces k (low and high) if nearer than ``best``."""
    if p - lo < best:
        best, axis, sign = p - lo, k, 1.0
    if hi - p < best:
        best, axis, sign = hi - p, k, -1.0
    return best, axis, sign


@njit(inline="always", cache=True)
def _beyond(p, lo, hi):
    """How far the coordinate lies outside [lo, hi], signed towards the box (0 inside)."""
    if p < lo:
        return lo - p
    if p > hi:
        return hi - p
    return 0.0


@njit(cache=True)
def _box_distance(px, py, pz, boxes, b):
    """Signed distance to box container b's inner walls (m, positive inside) and the unit normal into the
    box: inside, the nearest face's; outside, towards the nearest point of the box."""
    e0 = _beyond(px, boxes[b, 0, 0], boxes[b, 1, 0])
    e1 = _beyond(py, boxes[b, 0, 1], boxes[b, 1, 1])
    e2 = _beyond(pz, boxes[b, 0, 2], boxes[b, 1, 2])
    if e0 != 0.0 or e1 != 0.0 or e2 != 0.0:
        dist = math.sqrt(e0 * e0 + e1 * e1 + e2 * e2)
        return -dist, e0 / dist, e1 / dist, e2 / dist
    best, axis, sign = _face(px, boxes[b, 0, 0], boxes[b, 1, 0], np.inf, 0, 1.0, 0)
    best, axis, sign = _face(py, boxes[b, 0, 1], boxes[b, 1, 1], best, axis, sign, 1)
    best, axis, sign = _face(pz, boxes[b, 0, 2], boxes[b, 1, 2], best, axis, sign, 2)
    return best, sign if axis == 0 else 0.0, sign if axis == 1 else 0.0, sign if axis == 2 else 0.0


@njit(cache=True)
def _box_gap(px, py, pz, lo, hi):
    """Distance from the point to the axis-aligned box [lo, hi] (m, 0 inside)."""
    e0 = _beyond(px, lo[0], hi[0])
    e1 = _beyond(py, lo[1], hi[1])
    e2 = _beyond(pz, lo[2], hi[2])
    return math.sqrt(e0 * e0 + e1 * e1 + e2 * e2)


@njit(cache=True)
def distance_and_clearance(px, py, pz, boxes, cset, delta):
    """:func:`solid_distance` at the point, and its clearance for ``delta``: a radius (m) around the point
    within which every point is at least ``delta`` from the solids as :func:`solid_distance` measures
    them (negative when the point itself is closer). ``(s, n0, n1, n2, clear)``.

    The bounds: a box container's signed distance changes by at most the distance moved (it is exact);
    a mesh collider's, read by trilinear interpolation from its distance grid in its own frame (or a
    polytope's maximum of plane distances), by at most sqrt(3) times it (each axis of the grid's
    interpolant changes by at most one cell per cell); a collider whose world box does not hold the
    point does not count there, and cannot count within its distance to that box.
    """
    best = np.inf
    b0 = b1 = b2 = 0.0
    clear = np.inf
    for b in range(boxes.shape[0]):
        s, n0, n1, n2 = _box_distance(px, py, pz, boxes, b)
        clear = min(clear, s - delta)
        if s < best:
            best, b0, b1, b2 = s, n0, n1, n2
    cols = cset.colliders
    for c in range(cols.shape[0]):
        col = cols[c]
        if not _near(px, py, pz, col):
            clear = min(clear, _box_gap(px, py, pz, col.box_lo, col.box_hi) - delta)
            continue
        phi, n0, n1, n2, _tri, _r0, _r1, _r2 = collider_phi(px, py, pz, c, cset)
        s = phi + col.offset
        clear = min(clear, (s - delta) / SQRT3)
        if s < best:
            best, b0, b1, b2 = s, n0, n1, n2
    return best, b0, b1, b2, clear


@njit(cache=True)
def solid_distance(px, py, pz, boxes, cset):
    """Signed distance from the point to the nearest solid surface (m, positive in the free space) and the
    unit normal into the free space there: box containers (the inside of each box is free) and every
    mesh collider of ``cset`` near the point, measured to its mesh (the contact surface the collider
    reports, moved back by its offset). Far from every solid: (inf, 0, 0, 0); beyond a distance grid's
    band the distance saturates and the normal is zero."""
    s, n0, n1, n2, _clear = distance_and_clearance(px, py, pz, boxes, cset, 0.0)
    return s, n0, n1, n2


@njit(cache=True)
def _trilinear(field, origin, inv_cell, qx, qy, qz):
    """The field at a point by trilinear interpolation; zero outside the grid."""
    nx, ny, nz = field.shape
    gx = (qx - origin[0]) * inv_cell
    gy = (qy - origin[1]) * inv_cell
    gz = (qz - origin[2]) * inv_cell
    i = int(math.floor(gx))
    j = int(math.floor(gy))
    k = int(math.floor(gz))
    if i < 0 or j < 0 or k < 0 or i + 1 >= nx or j + 1 >= ny or k + 1 >= nz:
        return 0.0
    fx = gx - i
    fy = gy - j
    fz = gz - k
    c00 = field[i, j, k] * (1.0 - fx) + field[i + 1, j, k] * fx
    c10 = field[i, j + 1, k] * (1.0 - fx) + field[i + 1, j + 1, k] * fx
    c01 = field[i, j, k + 1] * (1.0 - fx) + field[i + 1, j, k + 1] * fx
    c11 = field[i, j + 1, k + 1] * (1.0 - fx) + field[i + 1, j + 1, k + 1] * fx
    return (c00 * (1.0 - fy) + c10 * fy) * (1.0 - fz) + (c01 * (1.0 - fy) + c11 * fy) * fz


@njit(parallel=True, nogil=True, cache=True)
def _meet(field, row_lo, row_hi, origin, cell, iso, meet, delta, read, kappa, boxes, cset, skip=True):
    """The field combined with the solids in place (see the module docstring): at every point of the
    rows' ranges closer than ``delta`` to a solid, max with the field ``read`` out from the walls, then
    min with kappa (s - meet), both relative to ``iso``. Along a row, the points within a point's
    clearance (:func:`distance_and_clearance`) are skipped (unless ``skip`` is False): they are farther
    than ``delta`` too. Returns the number of points measured."""
    nx, ny, nz = field.shape
    inv_cell = 1.0 / cell
    measured = 0
    for i in prange(nx):
        px = origin[0] + i * cell
        for j in range(ny):
            py = origin[1] + j * cell
            k = max(0, row_lo[i, j])
            end = min(nz, row_hi[i, j] + 1)
            while k < end:
                pz = origin[2] + k * cell
                s, n0, n1, n2, clear = distance_and_clearance(px, py, pz, boxes, cset, delta)
                measured += 1
                if s >= delta:
                    # this point and those of the row within its clearance are left as they are
                    k += 1 + (int(min(clear * inv_cell, float(end - k))) if skip and clear > 0.0 else 0)
                    continue
                f = field[i, j, k] - iso
                if n0 != 0.0 or n1 != 0.0 or n2 != 0.0:
                    qx = px + (read - s) * n0
                    qy = py + (read - s) * n1
                    qz = pz + (read - s) * n2
                    for _step in range(EXTENSION_STEPS - 1):  # off a second wall (a corner)
                        sq, m0, m1, m2 = solid_distance(qx, qy, qz, boxes, cset)
                        if sq >= read - 0.25 * cell or (m0 == 0.0 and m1 == 0.0 and m2 == 0.0):
                            break
                        qx += (read - sq) * m0
                        qy += (read - sq) * m1
                        qz += (read - sq) * m2
                    f = max(f, _trilinear(field, origin, inv_cell, qx, qy, qz) - iso)
                field[i, j, k] = np.float32(min(f, kappa * (s - meet)) + iso)
                k += 1
    return measured


@njit(parallel=True, nogil=True, cache=True)
def _distances(x, boxes, cset, s, n):
    for v in prange(x.shape[0]):
        s[v], n[v, 0], n[v, 1], n[v, 2] = solid_distance(np.float64(x[v, 0]), np.float64(x[v, 1]),
                                                         np.float64(x[v, 2]), boxes, cset)


@njit(parallel=True, nogil=True, cache=True)
def _project(x, on_wall, meet, boxes, cset):
    """Vertices flagged ``on_wall``, and every vertex inside the meeting surface, moved along the normal onto
    s = meet (one step is exact for a plane; up to :data:`PROJECTION_STEPS` for a curved or concave wall)."""
    for v in prange(x.shape[0]):
        for _step in range(PROJECTION_STEPS):
            s, n0, n1, n2 = solid_distance(np.float64(x[v, 0]), np.float64(x[v, 1]), np.float64(x[v, 2]), boxes,
                                           cset)
            if not (on_wall[v] or s < meet) or (n0 == 0.0 and n1 == 0.0 and n2 == 0.0):
                break
            e = meet - s
            if on_wall[v] and abs(e) < 1e-7:
                break
            x[v, 0] = np.float32(x[v, 0] + e * n0)
            x[v, 1] = np.float32(x[v, 1] + e * n1)
            x[v, 2] = np.float32(x[v, 2] + e * n2)


class Solids:
    """The colliders and box containers of one baked scene, posed frame by frame, as the surface meets them.

    Parameters
    ----------
    scene : engine.scene.SceneDescription
    settings : engine.settings.SimulationSettings
        The bake's (the particle spacing, collider resolution and kernel support shape the distance
        grids as in the bake, so the grids it cached are found again).
    liquid : ndarray, shape (N, 3)
        The liquid at the first frame (Auto collider modes are resolved from it, as the bake does).
    grid_dir : str, optional
        The cache's folder of distance grids; grids found there are read, missing ones are built in
        memory (nothing is written into the particle cache).
    """

    def __init__(self, scene, settings, liquid: np.ndarray, grid_dir: str | None = None):
        from ..collision.colliders import empty_world_args

        self.frame_start = int(scene.frame_start)
        self.fps = float(scene.fps)
        self.boxes = np.array([[c.lower, c.upper] for c in scene.containers], dtype=np.float64).reshape(-1, 2, 3)
        self.world = None
        if scene.colliders:
            from ..assemble import make_collision

            self.world = make_collision(scene, settings, np.asarray(liquid, dtype=np.float32).reshape(-1, 3),
                                        grid_dir=grid_dir, store_grids=False)
        self._empty = empty_world_args()
        self.frame: int | None = None

    @staticmethod
    def from_job(job_dir: str, cache_dir: str) -> "Solids | None":
        """The solids of the job the cache in ``cache_dir`` was baked from, or None when the job holds none
        (or there is no job: a cache written without one)."""
        from ..io.cache import SDF_DIR, CacheReader
        from ..scene import load_job

        if not os.path.isfile(os.path.join(job_dir, "scene.json")):
            return None
        scene, settings = load_job(job_dir)
        if not (scene.containers or scene.colliders):
            return None
        first = np.zeros((0, 3), np.float32)
        if scene.colliders:
            reader = CacheReader(cache_dir)
            if reader.frames:
                first = reader.read_frame(reader.frames[0])["position"]
        return Solids(scene, settings, first, os.path.join(cache_dir, SDF_DIR))

    @property
    def cset(self):
        """The colliders as the kernels take them (an empty set without mesh colliders)."""
        return self.world.args if self.world is not None else self._empty

    def set_frame(self, frame: int) -> None:
        """Pose the colliders at ``frame`` (the time the bake gave it)."""
        if frame != self.frame and self.world is not None:
            self.world.update((frame - self.frame_start) / self.fps)
        self.frame = frame

    def distance(self, points: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """:func:`solid_distance` at ``points`` (P, 3): ``(s (P,) float64 m, n (P, 3) float64)``."""
        x = np.ascontiguousarray(points, dtype=np.float32).reshape(-1, 3)
        s = np.empty(len(x))
        n = np.empty((len(x), 3))
        if len(x):
            _distances(x, self.boxes, self.cset, s, n)
        return s, n


def meet_field(field, row_lo, row_hi, origin, cell: float, iso: float, solids: Solids, meet: float,
               spacing: float) -> None:
    """Combine a colour field with the solids, in place (see the module docstring).

    Parameters
    ----------
    field : ndarray, shape (nx, ny, nz), float32 -- the colour field (changed)
    row_lo, row_hi : ndarray, shape (nx, ny), int32 -- each row's range of points that may be non-zero
    origin : sequence of 3 floats, m; cell : float, m; iso : float
    solids : Solids -- posed at the frame
    meet : float -- the meeting distance d, m (:func:`engine.settings.surface.meeting_distance`)
    spacing : float -- the particle spacing, m
    """
    delta = max(CONTACT_DISTANCE * spacing, meet + 2.0 * cell)
    _meet(field, row_lo, row_hi, np.asarray(origin, np.float64), float(cell), float(iso), float(meet), float(delta),
          float(delta + 2.0 * cell), 1.0 / float(cell), solids.boxes, solids.cset)


def wall_planes(vertices: np.ndarray, solids: Solids, meet: float, cell: float) -> np.ndarray:
    """The vertices marching cubes put on the meeting surface (within half a cell of it) and the plane of the
    surface under each: (V, 4) float32, rows (n, c) with n . x = c on the surface (n into the free space),
    -inf in the last column for the vertices off it (the walls of :func:`engine.surface.smoothing.smooth`)."""
    s, n = solids.distance(vertices)
    out = np.full((len(s), 4), -np.inf, np.float32)
    on = (s - meet < ON_WALL_CELLS * cell) & np.any(n != 0.0, axis=1)
    v = np.asarray(vertices, np.float64)[on]
    out[on, :3] = n[on]
    out[on, 3] = np.einsum("ij,ij->i", n[on], v) + meet - s[on]
    return out


def project_vertices(vertices: np.ndarray, flags: np.ndarray, solids: Solids, meet: float) -> np.ndarray:
    """The vertices with those ``flags`` set, and every vertex inside the meeting surface, moved onto it
    (:func:`_project`); returns a new float32 array."""
    x = np.array(vertices, dtype=np.float32, copy=True).reshape(-1, 3)
    if len(x):
        _project(x, np.ascontiguousarray(flags, np.bool_), float(meet), solids.boxes, solids.cset)
    return x
