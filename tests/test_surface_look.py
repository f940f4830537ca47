"""The surface that meets the glass: meshing against colliders (no poke-through, no air film), flat calm
water, a round sphere, thin sheets and jets, no beads in splashes. Each measure prints its figures."""

import math
import os

import numpy as np
import pytest

from engine.scene import BoxContainer, MeshCollider, SceneDescription, TriangleMesh
from engine.settings import SimulationSettings, SurfaceSettings
from engine.surface import SurfaceParameters, reconstruct
from engine.surface.drops import drop_radius, small_clusters, unit_icosphere
from engine.surface.field import ParticleGrid
from engine.surface.reconstruction import (edge_use_counts, enclosed_volume, euler_characteristic, mesh_pieces,
                                           particle_sums)
from engine.surface.solids import Solids

DX = 0.01
DATA = os.path.join(os.path.dirname(__file__), "data")


def _params(**kw):
    """The defaults of engine.settings.SurfaceSettings, lengths for a spacing DX."""
    s = SurfaceSettings()
    base = dict(particle_spacing=DX, cell_size=s.surface_cell_size * DX, kernel_radius=s.surface_kernel_radius * DX,
                iso=s.surface_iso, smoothing_iterations=s.surface_smoothing_iterations,
                thin_sheets=s.surface_thin_sheets, collider_mode=s.surface_collider_mode,
                collider_offset=s.surface_collider_offset * DX, anisotropic=s.surface_anisotropic,
                max_stretch=s.surface_max_stretch, centre_smoothing=s.surface_centre_smoothing,
                isolated=s.surface_isolated, drop_particles=s.surface_drop_particles)
    base.update(kw)
    return SurfaceParameters(**base)


def _frame(x, v=None):
    x = np.asarray(x, np.float32)
    return {"position": x, "velocity": np.zeros_like(x) if v is None else np.asarray(v, np.float32),
            "id": np.arange(len(x), dtype=np.int32)}


def _lattice(nx, ny, nz, step=(1.0, 1.0, 1.0)):
    g = np.stack(np.meshgrid(np.arange(nx) * step[0], np.arange(ny) * step[1], np.arange(nz) * step[2],
                             indexing="ij"), -1).reshape(-1, 3)
    return g * DX


def _closed(mesh):
    counts = edge_use_counts(mesh.triangles)
    return len(counts) > 0 and bool(np.all(counts == 2))


def _solids(containers=(), colliders=(), liquid=None, spacing=DX):
    scene = SceneDescription(containers=list(containers), colliders=list(colliders), frame_start=1, frame_end=2,
                             fps=24.0)
    solids = Solids(scene, SimulationSettings(particle_spacing=spacing),
                    np.zeros((0, 3)) if liquid is None else liquid)
    solids.set_frame(1)
    return solids


# -- a resting pool in a box container: no air film, flat, its volume -----------------------------------

@pytest.fixture(scope="module")
def pool():
    """A pool 40 x 40 spacings and 10 deep filled as the engine fills a box (a particle per spacing^3 cube),
    in a box container as wide as it; each particle jittered by 0.05 spacings (a resting PBF pool's top
    layer shows a spread of 0.053 spacings one second after filling), meshed with the default settings."""
    n, depth = 40, 10
    x = _lattice(n, n, depth) + 0.5 * DX
    x = x + np.random.default_rng(11).normal(scale=0.05 * DX, size=x.shape)
    solids = _solids([BoxContainer("Tank", [0, 0, 0], [n * DX, n * DX, 3 * depth * DX])])
    mesh = reconstruct(_frame(x), _params(), solids)
    return n, x, solids, mesh


def test_resting_pool_meets_the_walls_with_no_air_film(pool):
    n, x, solids, mesh = pool
    v = mesh.vertices.astype(np.float64)
    s, _n = solids.distance(v)
    # the side faces: vertices within half a spacing of a side wall, below the top's rounded band
    side = (np.minimum.reduce([v[:, 0], n * DX - v[:, 0], v[:, 1], n * DX - v[:, 1]]) < 0.5 * DX) \
        & (v[:, 2] < 8 * DX) & (v[:, 2] > 1 * DX)
    film = float(np.abs(s[side]).mean()) / DX
    print(f"\npool side faces: {side.sum()} vertices, mean distance to the wall {film:.4f} spacings; "
          f"closed {_closed(mesh)}, Euler characteristic {euler_characteristic(mesh.triangles)}")
    assert side.sum() > 1000
    # the bound, 0.1 spacings (seen: 0, the vertices on the wall are projected onto it)
    assert film <= 0.1
    # the mesh is closed by its own face along the wall (not left open for the wall to close)
    assert _closed(mesh) and euler_characteristic(mesh.triangles) == 2
    # nothing beyond the container: the 0.05 spacings
    assert s.min() >= -0.05 * DX


def test_resting_pool_is_flat_and_keeps_its_volume(pool):
    n, x, _solids_, mesh = pool
    v = mesh.vertices.astype(np.float64)
    top_z = np.percentile(v[:, 2], 99)
    inner = np.all((v[:, :2] > 4 * DX) & (v[:, :2] < (n - 4) * DX), axis=1) & (v[:, 2] > top_z - 1.5 * DX)
    top = v[inner]
    a = np.c_[top[:, 0], top[:, 1], np.ones(len(top))]
    coef, *_ = np.linalg.lstsq(a, top[:, 2], rcond=None)
    rms = float(np.sqrt(np.mean((top[:, 2] - a @ coef) ** 2))) / DX
    volume = enclosed_volume(mesh.vertices, mesh.triangles) / (len(x) * DX ** 3)
    plain = reconstruct(_frame(x), _params(anisotropic=False))
    pv = plain.vertices.astype(np.float64)
    ptop = pv[np.all((pv[:, :2] > 4 * DX) & (pv[:, :2] < (n - 4) * DX), axis=1) & (pv[:, 2] > top_z - 1.5 * DX)]
    pa = np.c_[ptop[:, 0], ptop[:, 1], np.ones(len(ptop))]
    pcoef, *_ = np.linalg.lstsq(pa, ptop[:, 2], rcond=None)
    prms = float(np.sqrt(np.mean((ptop[:, 2] - pa @ pcoef) ** 2))) / DX
    print(f"\npool top: RMS from a plane {rms:.4f} spacings over {len(top)} vertices (round kernels, no colliders: "
          f"{prms:.4f}); volume {volume:.4f} of the particles' (round kernels, no colliders: "
          f"{enclosed_volume(plain.vertices, plain.triangles) / (len(x) * DX ** 3):.4f})")
    assert len(top) > 2000
    # the bounds: RMS 0.02 spacings (seen 0.012), volume within 1 % (seen -0.5 %: the top face lies
    # 0.02 spacings low and its edges along the walls are rounded by less than a spacing)
    assert rms <= 0.02
    np.testing.assert_allclose(volume, 1.0, rtol=0, atol=0.01)


# -- the tank with a sloshing liquid and a sphere in it: no poke-through -------------------------------

def _icosphere_mesh(radius, centre, subdivisions=3):
    v, t = unit_icosphere(subdivisions)
    return TriangleMesh(np.asarray(centre) + radius * v, t)


@pytest.fixture(scope="module")
def sloshing_tank(tmp_path_factory):
    """A block of liquid slumping in a box container around a solid sphere (a mesh collider), baked for a few
    frames with the default solver, then meshed by the surface stage (its colliders read from the job)."""
    from engine import driver, stages
    from engine.scene import FluidObject, save_job
    from engine.io.cache import CacheReader
    from engine.surface.stage import make_stage, read_frame
    from helpers import box_mesh

    dx = 0.02
    root = tmp_path_factory.mktemp("tank")
    job, cache = str(root / "job"), str(root / "cache")
    centre, radius = np.array([0.28, 0.1, 0.06]), 0.06
    scene = SceneDescription(
        fluids=[FluidObject("Block", box_mesh([0.0, 0.0, 0.0], [0.14, 0.2, 0.16]))],
        containers=[BoxContainer("Tank", [0.0, 0.0, 0.0], [0.4, 0.2, 0.3])],
        colliders=[MeshCollider("Ball", _icosphere_mesh(radius, centre))], frame_start=1, frame_end=9, fps=24.0)
    settings = SimulationSettings(particle_spacing=dx)
    save_job(job, scene, settings)
    driver.bake_job(job, cache)
    meshes = {}
    for mode in ("ON", "INSIDE"):
        surface = dict(surface_collider_mode=mode, surface_collider_offset=0.2)
        stage = make_stage(CacheReader(cache).manifest, surface, {})
        stages.StageRunner(cache, stage, restart=True).run()
        meshes[mode] = {f: read_frame(cache, f) for f in stages.done_frames(cache, "surface")}
    return dx, centre, radius, meshes


def _distances(vertices, centre, radius, dx):
    """Distance into the free space from the tank's walls (the box) and from the sphere (analytic; the
    icosphere's faces lie within 0.01 spacings of it)."""
    v = np.asarray(vertices, np.float64)
    box = np.minimum.reduce([v[:, 0], 0.4 - v[:, 0], v[:, 1], 0.2 - v[:, 1], v[:, 2], 0.3 - v[:, 2]])
    ball = np.linalg.norm(v - centre, axis=1) - radius
    return box / dx, ball / dx


def test_no_surface_vertex_pokes_through_the_tank_or_the_sphere(sloshing_tank):
    dx, centre, radius, meshes = sloshing_tank
    frames = sorted(meshes["ON"])
    worst_box = worst_ball = np.inf
    for f in frames:
        box, ball = _distances(meshes["ON"][f]["vertices"], centre, radius, dx)
        worst_box, worst_ball = min(worst_box, box.min()), min(worst_ball, ball.min())
    print(f"\n{len(frames)} frames, mode On: deepest vertex beyond the tank's wall {-worst_box:.4f} spacings, "
          f"inside the sphere {-worst_ball:.4f} spacings")
    assert len(frames) == 9
    # the bound: 0.05 spacings (the sphere's distance grid, 0.5 spacings per cell, follows its
    # curvature within about 0.01)
    assert worst_box >= -0.05 and worst_ball >= -0.05


def test_inside_mode_overlaps_the_walls_by_the_offset(sloshing_tank):
    dx, centre, radius, meshes = sloshing_tank
    deepest, on_wall = [], []
    for f, mesh in meshes["INSIDE"].items():
        box, ball = _distances(mesh["vertices"], centre, radius, dx)
        d = np.minimum(box, ball)
        deepest.append(d.min())
        on_wall.append(d[d < -0.1])  # the vertices that lie on the walls (0.2 spacings in)
    on_wall = np.concatenate(on_wall)
    print(f"\nmode Inside, offset 0.2 spacings: deepest vertex {-min(deepest):.4f}, the {len(on_wall)} vertices "
          f"on the walls at {-on_wall.mean():.4f} spacings inside (from {-on_wall.max():.4f} to {-on_wall.min():.4f})")
    assert len(on_wall) > 100
    # the bound, the offset asked for within 0.05 spacings: the deepest vertex of every frame, and
    # the median of those past half the offset (the few between are on the contact line, leaving the wall)
    np.testing.assert_allclose(deepest, -0.2, rtol=0, atol=0.05)
    np.testing.assert_allclose(np.median(on_wall), -0.2, rtol=0, atol=0.05)


# -- shapes: sphere, thin sheet, jet ---------------------------------------------------------------

def test_ball_of_particles_meshes_round_at_its_radius():
    g = _lattice(24, 24, 24) - 11.5 * DX
    x = g[np.linalg.norm(g, axis=1) < 0.1]
    radius = (3.0 * len(x) * DX ** 3 / (4.0 * math.pi)) ** (1.0 / 3.0)
    out = {}
    for name, params in (("default", _params()), ("round kernels", _params(anisotropic=False))):
        mesh = reconstruct(_frame(x + 0.5), params)
        r = np.linalg.norm(mesh.vertices - 0.5, axis=1)
        out[name] = ((r.mean() - radius) / DX, r.std() / DX, _closed(mesh), euler_characteristic(mesh.triangles))
    print("\nsphere: " + "; ".join(f"{k}: mean radius {a:+.4f} spacings off, RMS {b:.4f}" for k, (a, b, _c, _e)
                                   in out.items()))
    mean, rms, closed, euler = out["default"]
    assert closed and euler == 2
    # the bounds: mean radius within 0.25 spacings (seen -0.07), RMS 0.05 spacings (seen 0.048)
    assert abs(mean) <= 0.25 and rms <= 0.05


@pytest.mark.parametrize("shape", ["sheet", "jet"])
def test_stretched_sheet_and_jet_mesh_closed_without_holes(shape):
    if shape == "sheet":  # one spacing thick (one layer), its particles pulled 1.5 spacings apart
        x = _lattice(24, 24, 1, step=(1.5, 1.5, 1.0))
    else:  # one particle wide, 1.5 spacings between particles
        x = _lattice(1, 1, 40, step=(1.0, 1.0, 1.5))
    euler = {}
    for thin in (False, True):
        mesh = reconstruct(_frame(x), _params(thin_sheets=thin))
        euler[thin] = euler_characteristic(mesh.triangles)
        print(f"\n{shape}, Keep Thin Sheets {thin}: closed {_closed(mesh)}, Euler characteristic {euler[thin]}, "
              f"{len(mesh.triangles)} triangles")
        assert _closed(mesh)
    # the measure, with the thin-sheet option and anisotropy: one closed surface, no hole (without the
    # option the sheet's stretched kernels leave a few holes along its edges: seen -6; the jet holds)
    assert euler[True] == 2
    if shape == "jet":
        assert euler[False] == 2


# -- no beads: the demo's frame 20 -----------------------------------------------------------------

def test_demo_splash_has_half_the_small_pieces_and_keeps_its_volume():
    """Frame 20 of the demo (tools/demo.py: the wave climbing the far wall behind Suzanne; 7,680 particles at
    2.5 cm), meshed as before (round kernels, no colliders, every particle in the field) and with the
    defaults (tests/data/demo_frame20.npz holds its particles, the tank and Suzanne)."""
    with np.load(os.path.join(DATA, "demo_frame20.npz")) as z:
        d = {k: z[k] for k in z.files}
    dx = 0.025
    frame = {"position": d["position"], "velocity": d["velocity"], "id": d["id"]}
    solids = _solids([BoxContainer("Tank", d["tank_lower"], d["tank_upper"])],
                     [MeshCollider("Suzanne", TriangleMesh(d["suzanne_vertices"], d["suzanne_triangles"]))],
                     liquid=d["position"], spacing=dx)
    s = SurfaceSettings()
    base = dict(particle_spacing=dx, cell_size=s.surface_cell_size * dx, kernel_radius=s.surface_kernel_radius * dx)
    before = reconstruct(frame, SurfaceParameters(**base))
    now = reconstruct(frame, SurfaceParameters(**base, collider_mode=s.surface_collider_mode,
                                               collider_offset=s.surface_collider_offset * dx,
                                               anisotropic=s.surface_anisotropic, max_stretch=s.surface_max_stretch,
                                               centre_smoothing=s.surface_centre_smoothing,
                                               isolated=s.surface_isolated, drop_particles=s.surface_drop_particles),
                      solids)
    unit = dx ** 3
    n = len(d["position"])
    old_pieces = mesh_pieces(before.vertices, before.triangles)
    new_pieces = mesh_pieces(now.vertices, now.triangles)
    old_small = int((old_pieces.volume < 8 * unit).sum())
    new_small = int((new_pieces.volume < 8 * unit).sum())
    sprayed = len(now.spray.get("position", ()))
    total = (new_pieces.volume.sum() + sprayed * unit) / (n * unit)
    print(f"\ndemo frame 20: pieces under 8 particle volumes {old_small} before, {new_small} now "
          f"({len(old_pieces.volume)} and {len(new_pieces.volume)} pieces); {sprayed} particles handed to the spray; "
          f"volume {old_pieces.volume.sum() / (n * unit):.4f} before (with the parts beyond the walls), "
          f"{new_pieces.volume.sum() / (n * unit):.4f} now in the mesh, {total:.4f} with the spray (of N m / rho0)")
    assert old_small > 100  # the measure means something on this frame (seen 205)
    # the bound: at most half of today's (seen 69 of 205)
    assert new_small <= old_small // 2
    # the total volume, the mesh's and the spray's (a sphere of m / rho0 per particle), within 2 % of the
    # particles' at rest, N m / rho0 (seen -0.1 %; the mesh alone -2.5 %)
    np.testing.assert_allclose(total, 1.0, rtol=0, atol=0.02)
    # no piece that holds more than 8 particle volumes is lost: the vertices of each lie, at the median, within
    # a spacing of the vertices of the new mesh's pieces of more than 8 (it may have merged with another)
    big_new = now.vertices[np.isin(new_pieces.piece_of, np.flatnonzero(new_pieces.volume > 8 * unit))]
    for k in np.flatnonzero(old_pieces.volume > 8 * unit):
        own = before.vertices[old_pieces.piece_of == k]
        own = own[np.linspace(0, len(own) - 1, min(len(own), 300)).astype(np.int64)]
        near = np.sqrt(((own[:, None, :] - big_new[None, :, :]) ** 2).sum(axis=2).min(axis=1))
        print(f"  piece of {old_pieces.volume[k] / unit:.1f} particle volumes: its vertices a median "
              f"{np.median(near) / dx:.2f} spacings from the new mesh's large pieces")
        assert np.median(near) < dx


# -- parts --------------------------------------------------------------------------------------------

def test_round_drop_holds_its_volume_and_small_clusters_are_found():
    v, t = unit_icosphere()
    r = drop_radius(3 * DX ** 3)
    np.testing.assert_allclose(enclosed_volume(r * v, t), 3 * DX ** 3, rtol=1e-9, atol=0)  # outward, exact
    # clusters: brute force over pairs closer than the support, components of at most 3
    rng = np.random.default_rng(2)
    x = rng.uniform(0, 0.3, (400, 3)).astype(np.float32)
    support = 2 * DX
    particles = ParticleGrid.build(x, support)
    label = small_clusters(particles, particle_sums(particles).count, 3)
    xs = particles.x.astype(np.float64)
    near = np.linalg.norm(xs[:, None] - xs[None], axis=2) < support
    comp = np.arange(len(xs))
    for _ in range(len(xs)):  # label propagation to the smallest index
        new = np.where(near, comp[None, :], len(xs)).min(axis=1)
        if np.array_equal(new, comp):
            break
        comp = new
    size = np.bincount(comp, minlength=len(xs))[comp]
    np.testing.assert_array_equal(label >= 0, size <= 3)
    small = label >= 0
    assert small.sum() > 20 and len(np.unique(label[small])) == len(np.unique(comp[small]))


def test_drops_and_spray_replace_lumpy_beads():
    x = np.array([[0.1, 0.1, 0.1], [0.5, 0.1, 0.1], [0.515, 0.1, 0.1]], np.float32)  # a lone one and a pair
    v = np.array([[1, 0, 0], [0, 2, 0], [0, 0, 2]], np.float32)
    drops = reconstruct(_frame(x, v), _params(isolated="DROPS"))
    pieces = mesh_pieces(drops.vertices, drops.triangles)
    assert _closed(drops) and len(pieces.volume) == 2
    np.testing.assert_allclose(np.sort(pieces.volume), [DX ** 3, 2 * DX ** 3], rtol=1e-5, atol=0)
    np.testing.assert_allclose(np.unique(drops.attributes["velocity"], axis=0), [[0, 1, 1], [1, 0, 0]], atol=1e-6)
    spray = reconstruct(_frame(x, v), _params(isolated="SPRAY"))
    assert len(spray.triangles) == 0 and len(spray.spray["position"]) == 3
    np.testing.assert_array_equal(np.sort(spray.spray["id"]), [0, 1, 2])


def test_the_walk_along_rows_skips_only_points_far_from_every_solid():
    """Meeting the colliders measures the distance to the solids along each row of the field and skips the
    points within a measured point's clearance (engine.surface.solids.distance_and_clearance): the field
    comes out bit-identical to the walk that measures every point, in a box container holding a rotated
    cube, a sphere and an open sheet (a shell), and in the box container alone, where the walk measures
    fewer than three points in four (seen: 0.67; in this small tank no point is farther than 0.1 m from a
    wall, and the rows reach out of it; mesh colliders' grids answer with their band's width farther out,
    so with them fewer points are skipped)."""
    from engine.surface import solids as sm
    from helpers import box_mesh

    a, b = math.radians(30.0), math.radians(20.0)
    rz = np.array([[math.cos(a), -math.sin(a), 0.0], [math.sin(a), math.cos(a), 0.0], [0.0, 0.0, 1.0]])
    rx = np.array([[1.0, 0.0, 0.0], [0.0, math.cos(b), -math.sin(b)], [0.0, math.sin(b), math.cos(b)]])
    cube = box_mesh([-0.04, -0.04, -0.04], [0.04, 0.04, 0.04])
    cube = TriangleMesh(cube.vertices @ (rz @ rx).T + [0.1, 0.1, 0.1], cube.triangles)
    sheet = TriangleMesh(np.array([[0.3, 0.02, 0.05], [0.3, 0.18, 0.05], [0.3, 0.18, 0.25], [0.3, 0.02, 0.25]]),
                         np.array([[0, 1, 2], [0, 2, 3]]))
    ball = _icosphere_mesh(0.05, [0.25, 0.1, 0.2])
    tank = [BoxContainer("Tank", [0.0, 0.0, 0.0], [0.4, 0.2, 0.3])]
    cell, shape = 0.005, (90, 50, 70)
    origin = np.array([-0.02, -0.02, -0.02])
    rng = np.random.default_rng(7)
    field = rng.random(shape, dtype=np.float32)
    row_lo = rng.integers(0, 20, shape[:2]).astype(np.int32)
    row_hi = (shape[2] - 1 - rng.integers(0, 20, shape[:2])).astype(np.int32)
    delta = 0.02  # CONTACT_DISTANCE spacings
    for colliders in ([MeshCollider("Cube", cube), MeshCollider("Ball", ball), MeshCollider("Sheet", sheet)], []):
        solids = _solids(containers=tank, colliders=colliders, liquid=_lattice(5, 5, 5) + [0.16, 0.05, 0.02],
                         spacing=0.02)
        args = (origin, cell, 0.6, 0.0, delta, delta + 2.0 * cell, 1.0 / cell, solids.boxes, solids.cset)
        walked, every = field.copy(), field.copy()
        n_walked = sm._meet(walked, row_lo, row_hi, *args, True)
        n_every = sm._meet(every, row_lo, row_hi, *args, False)
        changed = int(np.count_nonzero(every != field))
        print(f"{len(colliders)} mesh colliders: points measured {n_walked:,} skipping, {n_every:,} each; "
              f"{changed:,} points changed")
        assert changed > 1000  # the solids do change the field (the comparison below means something)
        np.testing.assert_array_equal(walked, every)
        assert n_walked < n_every
    assert n_walked < 0.75 * n_every
