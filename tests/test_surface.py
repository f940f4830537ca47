"""The liquid surface (engine.surface): closed meshes of the right size and shape, thin sheets, vertex
attributes against brute force, degenerate frames."""

import math

import numpy as np
import pytest

from engine.core import kernels
from engine.surface import SurfaceParameters, reconstruct
from engine.surface import reconstruction as rec
from engine.surface.reconstruction import (bridge_points, edge_use_counts, enclosed_volume, euler_characteristic,
                                           interpolate)
from mesh_checks import self_intersections

DX = 0.01


def _params(**kw):
    # the defaults: cell half the spacing, kernel support two spacings (splashsurf smoothing
    # length 2 particle radii), iso 0.6, 25 smoothing passes
    base = dict(particle_spacing=DX, cell_size=0.5 * DX, kernel_radius=2.0 * DX, iso=0.6, smoothing_iterations=25)
    base.update(kw)
    return SurfaceParameters(**base)


def _lattice(nx, ny, nz, step=(DX, DX, DX)):
    g = np.stack(np.meshgrid(np.arange(nx) * step[0], np.arange(ny) * step[1], np.arange(nz) * step[2],
                             indexing="ij"), -1).reshape(-1, 3)
    return g.astype(np.float32)


def _frame(x, v=None):
    n = len(x)
    return {"position": x, "velocity": np.zeros((n, 3), np.float32) if v is None else v,
            "density": np.full(n, 1000.0, np.float32), "id": np.arange(n, dtype=np.int32),
            "age": np.zeros(n, np.float32)}


def _is_closed(mesh):
    counts = edge_use_counts(mesh.triangles)
    return len(counts) > 0 and bool(np.all(counts == 2))


def test_resting_block_is_closed_with_its_volume_and_a_flat_top():
    n = 30
    x = _lattice(n, n, n) + DX / 2  # the block fills [0, 0.3]^3: each particle stands for one dx^3 cube
    mesh = reconstruct(_frame(x), _params())
    assert _is_closed(mesh)
    assert euler_characteristic(mesh.triangles) == 2  # one component, no hole or handle
    assert self_intersections(mesh.vertices, mesh.triangles) == 0
    volume = enclosed_volume(mesh.vertices, mesh.triangles)
    # rtol 2 %: the bound (seen: -1.1 %, the rounded edges and corners of the block)
    np.testing.assert_allclose(volume, len(x) * DX ** 3, rtol=0.02, atol=0.0)
    # the top face away from the rounded edges (2 kernel radii in): flat within 0.1 dx (the issue's
    # bound) and at the block's top, x = 0.3, within 0.25 dx (iso 0.6 puts it a little inside)
    v = mesh.vertices
    top = v[(v[:, 2] > 0.3 - DX) & np.all((v[:, :2] > 4 * DX) & (v[:, :2] < 0.3 - 4 * DX), axis=1)]
    assert len(top) > 100
    assert np.ptp(top[:, 2]) <= 0.1 * DX
    np.testing.assert_allclose(top[:, 2].mean(), 0.3, rtol=0, atol=0.25 * DX)


def test_sphere_has_its_radius_and_no_hole():
    g = _lattice(24, 24, 24) - 11.5 * DX
    x = g[np.linalg.norm(g, axis=1) < 0.1]
    # the sphere the particles stand for: each particle is one dx^3 of liquid
    radius = (3.0 * len(x) * DX ** 3 / (4.0 * math.pi)) ** (1.0 / 3.0)
    x = x + np.float32(0.5)
    mesh = reconstruct(_frame(x), _params())
    assert _is_closed(mesh) and euler_characteristic(mesh.triangles) == 2
    assert self_intersections(mesh.vertices, mesh.triangles) == 0
    r = np.linalg.norm(mesh.vertices - 0.5, axis=1)
    # atol 0.5 dx: the bound
    np.testing.assert_allclose(r.mean(), radius, rtol=0, atol=0.5 * DX)


@pytest.mark.parametrize("shape", ["sheet", "jet"])
def test_stretched_sheet_and_jet_tear_without_the_thin_sheet_option_and_stay_closed_with_it(shape):
    if shape == "sheet":
        # two particles thick, pulled apart to 1.8 spacings in its plane
        x = _lattice(24, 24, 2, step=(1.8 * DX, 1.8 * DX, DX))
    else:
        # one particle wide, 2.2 spacings between particles
        x = _lattice(1, 1, 40, step=(DX, DX, 2.2 * DX))
    plain = reconstruct(_frame(x), _params())
    kept = reconstruct(_frame(x), _params(thin_sheets=True))
    # without the option: holes in the sheet (Euler characteristic below 2) or beads along the jet
    # (one component per particle, above 2)
    assert euler_characteristic(plain.triangles) != 2
    # with it: one closed surface without holes
    assert _is_closed(kept) and euler_characteristic(kept.triangles) == 2
    # and no thicker than the particles: every vertex within a kernel radius of the particles' box
    lo, hi = x.min(axis=0), x.max(axis=0)
    assert np.all(kept.vertices > lo - 2 * DX) and np.all(kept.vertices < hi + 2 * DX)


def test_thin_sheet_bridges_leave_a_dense_block_alone():
    x = _lattice(12, 12, 12)
    inner = np.all((x > 2.5 * DX) & (x < 8.5 * DX), axis=1)
    b = bridge_points(x, DX, 2.0 * DX)
    # bridges only between sparse (surface-edge and corner) particles: none deep inside the block
    inside = np.all((b > 2.5 * DX) & (b < 8.5 * DX), axis=1)
    assert inner.sum() > 0 and not inside.any()


def test_vertex_velocity_is_the_kernel_weighted_velocity_of_its_particles():
    rng = np.random.default_rng(4)
    x = (_lattice(14, 14, 14) + rng.normal(scale=0.1 * DX, size=(14 ** 3, 3))).astype(np.float32)
    v = rng.normal(size=x.shape).astype(np.float32)
    frame = _frame(x, v)
    frame["age"] = rng.uniform(0, 2, len(x)).astype(np.float32)
    params = _params(attributes=("velocity", "density", "age"))
    mesh = reconstruct(frame, params)
    assert set(mesh.attributes) == {"velocity", "density", "age"}
    assert mesh.attributes["velocity"].shape == mesh.vertices.shape and mesh.attributes["age"].shape == (
        len(mesh.vertices),)
    # brute force over every particle, in float64, with the same cubic spline (support = kernel radius)
    h = 0.5 * params.kernel_radius
    pick = rng.choice(len(mesh.vertices), 300, replace=False)
    d = np.linalg.norm(mesh.vertices[pick, None, :].astype(np.float64) - x[None].astype(np.float64), axis=2)
    w = np.vectorize(lambda r: kernels.cubic_w.py_func(r, h))(d)
    has = w.sum(axis=1) > 0
    assert has.all()  # every vertex of a block lies within a kernel radius of a particle
    expect_v = (w @ v.astype(np.float64)) / w.sum(axis=1)[:, None]
    expect_age = (w @ frame["age"].astype(np.float64)) / w.sum(axis=1)
    # rtol 1e-5, atol 1e-5 (m/s; velocities are O(1)): float32 accumulation of ~30 weighted terms
    np.testing.assert_allclose(mesh.attributes["velocity"][pick], expect_v, rtol=1e-5, atol=1e-5)
    np.testing.assert_allclose(mesh.attributes["age"][pick], expect_age, rtol=1e-5, atol=1e-5)
    np.testing.assert_allclose(mesh.attributes["density"][pick], 1000.0, rtol=1e-6, atol=0)


def test_volumes_counts_and_smoothing_weights_equal_brute_force():
    rng = np.random.default_rng(5)
    x = (_lattice(9, 9, 9) + rng.normal(scale=0.15 * DX, size=(9 ** 3, 3))).astype(np.float32)
    support = 2.0 * DX
    particles = rec.ParticleGrid.build(x, support)
    sums = rec.particle_sums(particles)
    xs = particles.x.astype(np.float64)
    h = 0.5 * support
    w_of = np.vectorize(lambda r: kernels.cubic_w.py_func(r, h))
    d = np.linalg.norm(xs[:, None] - xs[None], axis=2)
    volume = 1.0 / w_of(d).sum(axis=1)
    near = (d < support) & (d > 0)
    count = np.where(near, 1.0 - d ** 2 / support ** 2, 0.0).sum(axis=1)
    # rtol 1e-5: float32 sums of ~30 terms; atol 0
    np.testing.assert_allclose(sums.volume, volume, rtol=1e-5, atol=0)
    np.testing.assert_array_equal(sums.count, near.sum(axis=1))
    # atol 1e-5 (counts of ~20 to 30 summed in float32)
    np.testing.assert_allclose(sums.weighted_count, count, rtol=0, atol=1e-5)
    # vertices inside, on and off the block, and one out of every particle's reach (weight 0)
    q = np.concatenate([rng.uniform(-0.02, 0.1, (200, 3)), [[1.0, 1.0, 1.0]]]).astype(np.float32)
    weights = rec.smoothing_weights(particles, sums, q)
    dq = np.linalg.norm(q[:, None].astype(np.float64) - xs[None], axis=2)
    wq = w_of(dq) * volume[None]
    n_v = np.divide(wq @ count, wq.sum(axis=1), out=np.zeros(len(q)), where=wq.sum(axis=1) > 0)
    t = np.clip(n_v / rec.WEIGHT_NORMALISATION, 0, 1)
    expect = t * t * t * (t * (6 * t - 15) + 10)
    assert weights[-1] == 0.0 and 0.0 < expect.min(initial=1.0, where=n_v > 0) and expect.max() == 1.0
    # atol 1e-5: float32 sums of ~30 terms, the smootherstep's slope at most 15 / 8 / 13 per neighbour
    np.testing.assert_allclose(weights, expect, rtol=0, atol=1e-5)


def test_interpolation_far_from_every_particle_takes_the_nearest_within_reach_or_zero():
    x = np.array([[0.0, 0.0, 0.0], [0.05, 0.0, 0.0]], np.float32)
    vals = np.array([[1.0], [2.0]], np.float32)
    q = np.array([[0.0, 0.0, 0.025], [0.05, 0.0, 0.025], [10.0, 10.0, 10.0]], np.float32)
    # support 0.02: the first two queries have no particle within it but one in a neighbour cell; the
    # third has none anywhere near
    out = interpolate(x, vals, q, 0.02)
    np.testing.assert_array_equal(out[:, 0], [1.0, 2.0, 0.0])


def test_empty_frame_gives_an_empty_mesh():
    mesh = reconstruct(_frame(np.zeros((0, 3), np.float32)), _params())
    assert mesh.vertices.shape == (0, 3) and mesh.triangles.shape == (0, 3)
    assert mesh.attributes["velocity"].shape == (0, 3)


def test_single_particle_and_particles_far_apart():
    one = reconstruct(_frame(np.array([[0.1, 0.2, 0.3]], np.float32)), _params())
    # documented: a lone particle is a small closed blob or nothing; if a blob, it is closed and around it
    if len(one.triangles):
        assert _is_closed(one)
        assert np.all(np.linalg.norm(one.vertices - [0.1, 0.2, 0.3], axis=1) < 2 * DX)
    far = np.array([[0, 0, 0], [1, 0, 0], [0, 5, 0], [0, 0, -3]], np.float32)
    mesh = reconstruct(_frame(far), _params())
    assert len(mesh.vertices) == len(mesh.attributes["velocity"])
    if len(mesh.triangles):
        # one blob per particle, each closed: Euler characteristic 2 per component
        assert _is_closed(mesh) and euler_characteristic(mesh.triangles) == 2 * len(far)
    # isolated drops of a few particles always mesh: 8 particles in a cube, far apart
    drops = np.concatenate([_lattice(2, 2, 2) + off for off in ([0, 0, 0], [1.0, 0, 0], [0, 0, 4.0])])
    mesh = reconstruct(_frame(drops.astype(np.float32)), _params())
    assert _is_closed(mesh) and euler_characteristic(mesh.triangles) == 6


def test_volume_holds_under_smoothing():
    # the weighted smoothing keeps the volume: 0 and 25 passes within 3 % of each other
    x = _lattice(20, 20, 20)
    raw = reconstruct(_frame(x), _params(smoothing_iterations=0))
    smooth = reconstruct(_frame(x), _params())
    a = enclosed_volume(raw.vertices, raw.triangles)
    b = enclosed_volume(smooth.vertices, smooth.triangles)
    # rtol 3 %: smoothing rounds the block's edges (seen 1.6 %)
    np.testing.assert_allclose(b, a, rtol=0.03, atol=0)
    assert math.isfinite(b)


def test_self_intersection_check_finds_a_crossing_and_passes_a_closed_box():
    # the check the block and sphere tests rely on: two triangles through each other are found, the
    # twelve triangles of a box (every pair adjacent or apart) are not
    v = np.array([[0, 0, 0], [1, 0, 0], [0, 1, 0], [0.2, 0.2, -0.5], [0.3, 0.2, 0.5], [0.2, 0.3, 0.5]], float)
    assert self_intersections(v, np.array([[0, 1, 2], [3, 4, 5]])) == 1
    from helpers import box_mesh

    box = box_mesh([0, 0, 0], [1, 2, 3])
    assert self_intersections(box.vertices, box.triangles) == 0


def _splashsurf(x, p):
    import pysplashsurf

    r = p.particle_radius
    mesh, _ = pysplashsurf.reconstruction_pipeline(
        x, particle_radius=r, rest_density=1000.0, smoothing_length=0.5 * p.kernel_radius / r,
        cube_size=p.cell_size / r, iso_surface_threshold=p.iso, mesh_smoothing_iters=p.smoothing_iterations,
        mesh_smoothing_weights=True, subdomain_grid=True)
    return np.asarray(mesh.mesh.vertices, np.float64), np.asarray(mesh.mesh.triangles, np.int64)


def _area(v, t):
    v = np.asarray(v, np.float64)
    t = np.asarray(t, np.int64)
    return 0.5 * np.linalg.norm(np.cross(v[t[:, 1]] - v[t[:, 0]], v[t[:, 2]] - v[t[:, 0]]), axis=1).sum()


def _nearest(a, b):
    """Distance from every vertex of ``a`` to the nearest vertex of ``b`` (brute force in blocks)."""
    out = np.empty(len(a))
    for i in range(0, len(a), 256):
        out[i:i + 256] = np.sqrt(((a[i:i + 256, None, :] - b[None]) ** 2).sum(axis=2).min(axis=1))
    return out


@pytest.mark.parametrize("sparse", [False, True])
def test_same_surface_as_splashsurf_s_pipeline(monkeypatch, sparse):
    """Equal quality: Surge's stage (its own volumes, colour field on a dense grid and smoothing weights, or
    splashsurf's sparse grid for a frame too spread out) gives splashsurf's surface for the same
    settings: a jittered block with a drop above it, smoothing on."""
    if sparse:
        monkeypatch.setattr(rec, "DENSE_POINTS_MIN", 0)
        monkeypatch.setattr(rec, "DENSE_POINTS_PER_PARTICLE", 0)
    rng = np.random.default_rng(7)
    block = _lattice(16, 16, 10) + rng.normal(scale=0.15 * DX, size=(16 * 16 * 10, 3))
    drop = _lattice(4, 4, 4) + np.array([0.06, 0.06, 0.16])
    x = np.concatenate([block, drop]).astype(np.float32)
    p = _params()
    mesh = reconstruct(_frame(x), p)
    v, t = _splashsurf(x, p)
    assert _is_closed(mesh) and euler_characteristic(mesh.triangles) == 4  # block and drop
    # marching cubes over the same field on the same grid: the same triangle count within 0.2 % (the
    # colour field sums in another order; float32 rounding could flip a corner on the iso level)
    np.testing.assert_allclose(len(mesh.triangles), len(t), rtol=2e-3, atol=0)
    # volumes within 0.5 %: before smoothing they agree to 1e-5, but a cell cut by four or more
    # crossings is split into triangles along other diagonals than splashsurf's table, so some
    # vertices have other neighbours and 25 smoothing passes move them a little differently (seen 0.18 %
    # on this jittered block, whose surface is a large part of its volume)
    np.testing.assert_allclose(enclosed_volume(mesh.vertices, mesh.triangles), enclosed_volume(v, t), rtol=5e-3,
                               atol=0)
    # every vertex of each mesh within one cell of a vertex of the other (vertices about half a cell apart
    # slide along the surface under smoothing, so they do not pair up one to one: seen median 0.26,
    # max 0.72 cells), and the areas within 1 % (seen 0.23 %)
    d = np.concatenate([_nearest(mesh.vertices.astype(np.float64), v), _nearest(v, mesh.vertices.astype(np.float64))])
    assert np.median(d) < 0.5 * p.cell_size and d.max() < p.cell_size, (np.median(d), d.max())
    np.testing.assert_allclose(_area(mesh.vertices, mesh.triangles), _area(v, t), rtol=0.01, atol=0)
