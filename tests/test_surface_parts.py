"""Parts of the surface stage against brute force: Yu & Turk's neighbourhood moments, the eigen solver, the
stretched kernels' colour field, the box containers' distance; the stage's USD file written while the next
frame is meshed, listed only once written."""

import math
import os

import numpy as np
import pytest

from engine.core import kernels
from engine.surface import anisotropy as an
from engine.surface.field import ColourField, DenseGrid, ParticleGrid

DX = 0.01


def test_eigen_solver_equals_numpy():
    rng = np.random.default_rng(1)
    for _ in range(50):
        a = rng.normal(size=(3, 3))
        a = a @ a.T
        w, r = an.eigen_symmetric3.py_func(a[0, 0], a[0, 1], a[0, 2], a[1, 1], a[1, 2], a[2, 2])
        expect = np.linalg.eigvalsh(a)[::-1]
        # rtol 1e-10: Jacobi converged to 1e-14 of the trace, float64
        np.testing.assert_allclose(w, expect, rtol=1e-10, atol=1e-12)
        np.testing.assert_allclose(r @ np.diag(w) @ r.T, a, rtol=0, atol=1e-10)
        np.testing.assert_allclose(r.T @ r, np.eye(3), rtol=0, atol=1e-12)


def test_neighbourhood_moments_equal_yu_and_turk_by_brute_force():
    rng = np.random.default_rng(2)
    g = np.stack(np.meshgrid(*[np.arange(8)] * 3, indexing="ij"), -1).reshape(-1, 3) * DX
    x = (g + rng.normal(scale=0.2 * DX, size=g.shape)).astype(np.float32)
    support = 2 * DX
    particles = ParticleGrid.build(x, support)
    hoods = an.neighbourhoods(particles)
    xs = particles.x.astype(np.float64)
    d = xs[None] - xs[:, None]  # d[i, j] = x_j - x_i
    r = np.linalg.norm(d, axis=2)
    w = np.clip(1.0 - (r / support) ** 3, 0.0, None)  # Yu & Turk 2013, eq. 6
    mean = (w[..., None] * d).sum(1) / w.sum(1)[:, None]
    e = d - mean[:, None]
    cov = np.einsum("ij,ija,ijb->iab", w, e, e) / w.sum(1)[:, None, None]  # eq. 7
    # atol: float32 sums of ~30 terms of size up to (2 DX)^2
    np.testing.assert_allclose(hoods.mean, mean, rtol=0, atol=1e-7)
    np.testing.assert_allclose(hoods.cov, cov[:, [0, 0, 0, 1, 1, 2], [0, 1, 2, 1, 2, 2]], rtol=0, atol=2e-9)
    np.testing.assert_array_equal(hoods.count, (r < support).sum(1) - 1)


def test_stretched_kernels_field_equals_brute_force_and_keeps_each_volume():
    """A few particles of a thin sheet (stretched along it) on a grid: the field of the stretched kernels,
    V det(G) W(|G r|) with G = R diag(1/a) R^T, by brute force at every grid point; its integral over the grid
    is each particle's volume."""
    x = (np.stack(np.meshgrid(np.arange(6) * 1.6, np.arange(6) * 1.6, [0.0], indexing="ij"), -1).reshape(-1, 3)
         * DX).astype(np.float32)
    x = x @ np.array([[1, 0, 0], [0, 0.8, 0.6], [0, -0.6, 0.8]], np.float32)  # tilted off the grid's axes
    support = 2 * DX
    particles = ParticleGrid.build(x, support)
    hoods = an.neighbourhoods(particles)
    shapes = an.kernel_shapes(hoods, support, DX)
    assert len(shapes.index) >= 12  # the sheet's particles with 4 neighbours are stretched
    volume = np.full(len(x), DX ** 3)
    lo, hi = an.ellipsoid_bounds(particles.x, shapes)
    grid = DenseGrid.spanning(lo, hi, 0.5 * DX)
    field = ColourField(np.zeros(grid.shape, np.float32), np.full(grid.shape[:2], grid.shape[2], np.int32),
                        np.full(grid.shape[:2], -1, np.int32))
    keep = shapes._replace()
    an.add_ellipsoids(field, grid, particles.x, volume, keep, support)
    pts = grid.origin + np.stack(np.meshgrid(*[np.arange(n) for n in grid.shape], indexing="ij"), -1) * grid.cell
    h = 0.5 * support
    expect = np.zeros(grid.shape)
    for row, p in enumerate(shapes.index):
        m = shapes.metric[row].astype(np.float64)
        mm = np.array([[m[0], m[1], m[2]], [m[1], m[3], m[4]], [m[2], m[4], m[5]]])
        r = pts - particles.x[p].astype(np.float64)
        q = np.sqrt(np.einsum("...a,ab,...b->...", r, mm, r))
        expect += volume[p] * shapes.scale[row] * np.vectorize(lambda s: kernels.cubic_w.py_func(s, h))(q)
    # atol: float32 sums of a few kernels of peak V / (pi h^3) = 0.3 (relative 1e-6)
    np.testing.assert_allclose(field.values, expect, rtol=0, atol=2e-6)
    # each kernel's integral is its volume: the grid's sum, cell^3 per point (rtol 1 %: the rectangle rule
    # at half a spacing over a cubic spline)
    np.testing.assert_allclose(field.values.sum() * grid.cell ** 3, len(shapes.index) * DX ** 3, rtol=0.01)


def test_box_container_distance_is_exact():
    from engine.surface.solids import _box_distance

    boxes = np.array([[[0.0, 0.0, 0.0], [1.0, 2.0, 3.0]]])
    cases = [((0.5, 0.3, 1.0), 0.3, (0, 1, 0)), ((0.9, 1.0, 1.5), 0.1, (-1, 0, 0)),
             ((-0.3, 1.0, -0.4), -0.5, (0.6, 0, 0.8)), ((0.5, 1.0, 3.2), -0.2, (0, 0, -1))]
    for p, s, n in cases:
        got = _box_distance.py_func(*p, boxes, 0)
        np.testing.assert_allclose(got, (s, *n), rtol=0, atol=1e-12)


# -- the stage: USD written while the next frame is meshed ---------------------------------------

def _pxr_on_path():
    """Blender's own pxr (inside the bpy wheel, not on its path) for the USD writer: the bpy wheel the
    requirements install holds it, so a missing pxr is a failure."""
    import importlib.util

    from engine.io import usd

    usd.ensure_pxr()
    assert importlib.util.find_spec("pxr") is not None, "Blender's USD library (pxr) is not found in the bpy wheel"


@pytest.fixture(scope="module")
def small_cache(tmp_path_factory):
    from engine import driver
    from engine.scene import BoxContainer, FluidObject, SceneDescription, save_job
    from engine.settings import SimulationSettings
    from helpers import box_mesh

    root = tmp_path_factory.mktemp("cache")
    job, cache = str(root / "job"), str(root / "cache")
    scene = SceneDescription(fluids=[FluidObject("Block", box_mesh([0, 0, 0], [0.1, 0.1, 0.1]))],
                             containers=[BoxContainer("Tank", [0, 0, 0], [0.3, 0.1, 0.2])],
                             frame_start=1, frame_end=4, fps=24.0)
    save_job(job, scene, SimulationSettings(particle_spacing=0.02))
    driver.bake_job(job, cache)
    return cache


def test_overlapped_usd_files_are_listed_once_written_and_hold_the_spray(small_cache, monkeypatch):
    from engine import stages
    from engine.io import usd
    from engine.io.cache import CacheReader
    from engine.surface import stage as surface_stage

    _pxr_on_path()
    stage = surface_stage.make_stage(CacheReader(small_cache).manifest, {}, {"usd": "1", "overlap": "1"})
    assert stage.defers_writes
    listed_when_written = []
    write = usd.write_mesh

    def slow_write(path, *a, **kw):
        # the runner must not list a frame while its file is still being written
        import time

        time.sleep(0.2)
        manifest = stages.read_manifest(small_cache, "surface")
        frame = int(os.path.basename(path)[8:14])
        listed_when_written.append(frame in manifest["frames"])
        write(path, *a, **kw)

    monkeypatch.setattr(usd, "write_mesh", slow_write)
    stages.StageRunner(small_cache, stage, restart=True).run()
    frames = stages.done_frames(small_cache, "surface")
    assert frames == [1, 2, 3, 4] and listed_when_written == [False] * 4
    folder = surface_stage.usd_folder(small_cache)
    for f in frames:
        mesh = usd.read_mesh(os.path.join(folder, f"surface_{f:06d}.usdc"))
        npz = surface_stage.read_frame(small_cache, f)
        np.testing.assert_array_equal(mesh["triangles"], npz["triangles"])
        assert "spray_position" in npz  # the default hands small clusters to the spray (none here)
    from pxr import Usd, UsdGeom

    opened = Usd.Stage.Open(os.path.join(folder, "surface_000001.usdc"))
    spray = UsdGeom.Points(opened.GetPrimAtPath(usd.SURFACE_SPRAY_PRIM_PATH))
    assert spray and len(spray.GetPointsAttr().Get()) == 1  # no spray: one point of radius 0 for Cycles
    assert math.isclose(spray.GetWidthsAttr().Get()[0], 0.0)


def test_failed_overlapped_write_leaves_its_frame_unlisted(small_cache, monkeypatch):
    from engine import stages
    from engine.io import usd
    from engine.io.cache import CacheReader
    from engine.surface import stage as surface_stage

    _pxr_on_path()
    stage = surface_stage.make_stage(CacheReader(small_cache).manifest, {}, {"usd": "1", "overlap": "1"})
    write = usd.write_mesh

    def failing(path, *a, **kw):
        if path.endswith("surface_000003.usdc"):
            raise OSError("disk full")
        write(path, *a, **kw)

    monkeypatch.setattr(usd, "write_mesh", failing)
    with pytest.raises(OSError, match="disk full"):
        stages.StageRunner(small_cache, stage, restart=True).run()
    manifest = stages.read_manifest(small_cache, "surface")
    assert manifest["frames"] == [1, 2] and manifest["status"] == "failed"
