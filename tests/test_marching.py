"""Marching cubes (engine.surface.marching) and weighted Laplacian smoothing (engine.surface.smoothing):
closed and oriented on any field, the sphere's volume, splashsurf's marching cubes on a field without
ambiguous faces, smoothing against a brute-force loop."""

import math

import numpy as np
import pytest

from engine.surface.marching import CASE_COUNTS, marching_cubes
from engine.surface.reconstruction import edge_use_counts, enclosed_volume, euler_characteristic
from engine.surface.smoothing import neighbour_rings, smooth
from mesh_checks import self_intersections


def _directed_edges_once(triangles):
    """Every directed edge a -> b appears once: the triangles of each edge are consistently oriented."""
    t = np.asarray(triangles, np.int64)
    e = np.concatenate([t[:, [0, 1]], t[:, [1, 2]], t[:, [2, 0]]])
    _, counts = np.unique(e[:, 0] * (int(t.max()) + 1) + e[:, 1], return_counts=True)
    return bool(np.all(counts == 1))


def _sphere_field(n, radius, cell):
    g = (np.arange(n) - (n - 1) / 2) * cell
    x, y, z = np.meshgrid(g, g, g, indexing="ij")
    return (1.0 - np.sqrt(x * x + y * y + z * z) / radius).astype(np.float32), -(n - 1) / 2 * cell


def test_case_tables_cut_every_cell_that_has_inside_and_outside_corners():
    assert CASE_COUNTS[0] == 0 and CASE_COUNTS[255] == 0
    assert np.all(CASE_COUNTS[1:255] >= 1) and CASE_COUNTS.max() <= 5


def test_sphere_is_closed_outward_and_has_its_volume():
    cell, radius = 0.01, 0.2
    f, lo = _sphere_field(48, radius, cell)
    v, t = marching_cubes(f, 0.0, (lo, lo, lo), cell)
    assert np.all(edge_use_counts(t) == 2) and _directed_edges_once(t) and euler_characteristic(t) == 2
    assert self_intersections(v, t) == 0
    r = np.linalg.norm(v.astype(np.float64), axis=1)
    # each vertex interpolates the field linearly along a grid edge, where the distance to the centre is
    # not linear: the error is at most cell^2 / (8 radius) (its second derivative is at most 1 / radius)
    np.testing.assert_allclose(r, radius, rtol=0, atol=cell ** 2 / (8 * radius) + 1e-6)
    # positive (outward) volume within 1 %: the chords of a 20-cell radius cut a little off (seen 0.2 %)
    np.testing.assert_allclose(enclosed_volume(v, t), 4 / 3 * math.pi * radius ** 3, rtol=0.01, atol=0)


@pytest.mark.parametrize("seed, shape", [(0, (14, 13, 12)), (1, (14, 13, 12)), (2, (6, 5, 130)), (3, (5, 4, 64))])
def test_random_fields_give_closed_consistently_oriented_manifolds(seed, shape):
    # every one of the 256 cases, ambiguous faces included, shows up in a noisy field; the border is
    # outside, so the surface must close, each edge shared by two triangles in opposite directions
    # (rows of 130 and 64 points: the packed sides of a row span several 64-bit words, or exactly one)
    rng = np.random.default_rng(seed)
    f = rng.uniform(-1.0, 1.0, shape).astype(np.float32)
    f[[0, -1]] = f[:, [0, -1]] = f[:, :, [0, -1]] = -1.0
    v, t = marching_cubes(f, 0.0, (0.0, 0.0, 0.0), 1.0)
    assert len(t) > 500
    # one vertex per crossed grid edge, and each cell's triangles as its case says (brute force)
    inside = f > 0.0
    assert len(v) == sum(int(np.count_nonzero(np.diff(inside, axis=a))) for a in range(3))
    case = sum(inside[c & 1:inside.shape[0] - 1 + (c & 1), (c >> 1) & 1:inside.shape[1] - 1 + ((c >> 1) & 1),
                      (c >> 2) & 1:inside.shape[2] - 1 + ((c >> 2) & 1)].astype(np.int64) << c for c in range(8))
    assert len(t) == int(CASE_COUNTS[case].sum())
    assert np.all(edge_use_counts(t) == 2) and _directed_edges_once(t)
    assert len(np.unique(t)) == len(v)  # every vertex is used
    # each vertex lies on a grid edge between two grid points of opposite sides
    frac = v - np.floor(v)
    assert np.all(np.sum(frac > 1e-6, axis=1) <= 1)
    assert enclosed_volume(v, t) > 0


def test_same_mesh_as_splashsurf_s_marching_cubes_without_ambiguous_faces():
    pysplashsurf = pytest.importorskip("pysplashsurf")
    f, lo = _sphere_field(40, 0.15, 0.01)
    v, t = marching_cubes(f, 0.0, (lo, lo, lo), 0.01)
    ref = pysplashsurf.marching_cubes(f, iso_surface_threshold=0.0, cube_size=0.01, translation=[lo, lo, lo])
    rv, rt = np.asarray(ref.vertices, np.float64), np.asarray(ref.triangles, np.int64)
    assert len(v) == len(rv) and len(t) == len(rt)
    # the same vertices (one per crossed grid edge) as sets: sort both by rounded coordinates;
    # atol 1e-6 m: float32 positions of about 0.2 m
    key = lambda a: np.lexsort(np.round(a / 1e-5).T)  # noqa: E731
    np.testing.assert_allclose(v[key(v)], rv[key(rv)], rtol=0, atol=1e-6)
    # the same polygons split along other diagonals where a cell holds four or more crossings: volumes
    # within 1e-4 (seen 1.8e-5)
    np.testing.assert_allclose(enclosed_volume(v, t), enclosed_volume(rv, rt), rtol=1e-4, atol=0)


def test_empty_and_full_fields_give_no_triangles():
    for value in (-1.0, 1.0):
        v, t = marching_cubes(np.full((5, 5, 5), value, np.float32), 0.0, (0, 0, 0), 1.0)
        assert v.shape == (0, 3) and t.shape == (0, 3)


def test_smoothing_equals_a_brute_force_loop_and_splashsurf_s_smoothing():
    f, lo = _sphere_field(16, 0.05, 0.01)
    v, t = marching_cubes(f, 0.0, (lo, lo, lo), 0.01)
    rng = np.random.default_rng(3)
    v = (v + rng.normal(scale=0.002, size=v.shape)).astype(np.float32)
    w = rng.uniform(0, 1, len(v)).astype(np.float32)
    rings = [set() for _ in range(len(v))]
    for a, b, c in t:
        rings[a] |= {b, c}
        rings[b] |= {a, c}
        rings[c] |= {a, b}
    start, nbr = neighbour_rings(t, len(v))
    assert all(sorted(nbr[start[i]:start[i + 1]]) == sorted(rings[i]) for i in range(len(v)))
    # x_n+1 = (1 - w) x_n-1 + w mean(neighbours of x_n), x_-1 = x_0 (the rule splashsurf applies)
    before = x = v.astype(np.float64)
    for _ in range(4):
        before, x = x, np.array([(1 - w[i]) * before[i] + w[i] * x[sorted(rings[i])].mean(axis=0)
                                 for i in range(len(x))])
    # rtol 0, atol 1e-7 m: float32 arithmetic on coordinates of 0.05 m, four passes
    np.testing.assert_allclose(smooth(v, t, w, 4), x, rtol=0, atol=1e-7)
    # the vertex ranges smoothed in parallel (each with the rings around it) change nothing, bit for bit,
    # down to ranges of a few vertices whose rings reach across the whole mesh
    one = smooth(v, t, w, 25, ranges=1)
    for ranges in (2, 7, len(v) // 3):
        np.testing.assert_array_equal(smooth(v, t, w, 25, ranges=ranges), one)
    # and splashsurf's own smoothing of the same mesh with the same weights
    pysplashsurf = pytest.importorskip("pysplashsurf")
    ref = pysplashsurf.marching_cubes(f, iso_surface_threshold=0.0, cube_size=0.01, translation=[lo, lo, lo])
    rv, rt = np.array(ref.vertices, np.float32), np.array(ref.triangles, np.int64)
    rw = rng.uniform(0, 1, len(rv)).astype(np.float32)
    ours = smooth(rv, rt, rw, 25)
    pysplashsurf.laplacian_smoothing_parallel(ref, ref.vertex_vertex_connectivity(), iterations=25, beta=1.0,
                                              weights=rw)
    # atol 1e-6 m: float32 sums in another order, 25 passes over coordinates of 0.05 m
    np.testing.assert_allclose(ours, np.asarray(ref.vertices), rtol=0, atol=1e-6)
