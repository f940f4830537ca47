"""Narrow-band signed distance grids: analytic shapes, broken meshes, sparsity, cache files.

Reference values come from three independent places: analytic distance functions of the true
shapes (sphere, box, torus), a brute-force numpy point-triangle distance written here by projection
and barycentric tests (not the Voronoi-region code the engine uses), and the exact winding-number
sum of :func:`engine.collision.sdf.winding.winding_numbers`.
"""

import numba
import numpy as np
import pytest
from numba import njit
from numpy.testing import assert_allclose, assert_array_equal

from engine.collision.sdf import winding
from engine.collision import sdf
from engine.errors import CacheFormatError, InvalidSceneError, InvalidSettingsError
from engine.scene import TriangleMesh
from helpers import box_mesh, uv_sphere


# ---------------------------------------------------------------------------------------------
# Meshes and references
# ---------------------------------------------------------------------------------------------

def torus_mesh(major, minor, nu, nv) -> TriangleMesh:
    """Closed outward-facing torus around Z, nu x nv quads."""
    u = 2 * np.pi * np.arange(nu) / nu
    v = 2 * np.pi * np.arange(nv) / nv
    uu, vv = np.meshgrid(u, v, indexing="ij")
    rr = major + minor * np.cos(vv)
    verts = np.stack([rr * np.cos(uu), rr * np.sin(uu), minor * np.sin(vv)], -1).reshape(-1, 3)
    i, j = np.meshgrid(np.arange(nu), np.arange(nv), indexing="ij")
    a, b = i * nv + j, ((i + 1) % nu) * nv + j
    c, d = ((i + 1) % nu) * nv + (j + 1) % nv, i * nv + (j + 1) % nv
    tris = np.concatenate([np.stack([a, b, c], -1).reshape(-1, 3), np.stack([a, c, d], -1).reshape(-1, 3)])
    return TriangleMesh(verts, tris)


def concat(*meshes) -> TriangleMesh:
    verts, tris, base = [], [], 0
    for m in meshes:
        verts.append(m.vertices)
        tris.append(m.triangles + base)
        base += len(m.vertices)
    return TriangleMesh(np.concatenate(verts), np.concatenate(tris))


def sphere_sdf(p, r=1.0):
    return np.linalg.norm(p, axis=1) - r


def box_sdf(p, half):
    q = np.abs(p) - half
    return np.linalg.norm(np.maximum(q, 0), axis=1) + np.minimum(q.max(axis=1), 0)


def torus_sdf(p, major, minor):
    return np.hypot(np.linalg.norm(p[:, :2], axis=1) - major, p[:, 2]) - minor


def numerical_gradient(f, p, eps=1e-6):
    return np.stack([(f(p + eps * e) - f(p - eps * e)) / (2 * eps) for e in np.eye(3)], axis=1)


def sagitta(mesh, f):
    """Largest |analytic distance| over points spread on every triangle: how far the tessellation
    strays from the true surface (the mesh is inscribed, so this is its sagitta)."""
    g = np.linspace(0, 1, 9)
    u, v = np.meshgrid(g, g)
    keep = u + v <= 1
    u, v = u[keep], v[keep]
    tri = mesh.vertices[mesh.triangles]
    pts = (tri[:, 0, None] * (1 - u - v)[None, :, None] + tri[:, 1, None] * u[None, :, None]
           + tri[:, 2, None] * v[None, :, None])
    return float(np.abs(f(pts.reshape(-1, 3))).max())


def _segment_d2(p, a, b):
    e = b - a
    w = p[:, None, :] - a[None]
    ee = (e * e).sum(-1)
    s = np.clip((w * e[None]).sum(-1) / np.where(ee > 0, ee, 1.0), 0, 1)
    return ((w - s[..., None] * e[None]) ** 2).sum(-1)


def brute_distance(points, mesh, chunk=128):
    """Unsigned distance to the nearest triangle: projection onto the plane when it falls inside
    the triangle (sign of three sub-triangle normals), else the nearest edge. O(P T)."""
    tri = mesh.vertices[mesh.triangles]
    a, b, c = tri[:, 0], tri[:, 1], tri[:, 2]
    n = np.cross(b - a, c - a)
    nn = (n * n).sum(-1)
    ok = nn > 1e-30
    out = np.empty(len(points))
    for s in range(0, len(points), chunk):
        p = points[s:s + chunk]
        t = ((p[:, None, :] - a[None]) * n[None]).sum(-1) / np.where(ok, nn, 1.0)
        q = p[:, None, :] - t[..., None] * n[None]

        def side(x, y):
            return (np.cross(y - x, q - x[None]) * n[None]).sum(-1) >= 0

        inside = ok[None] & side(a, b) & side(b, c) & side(c, a)
        d2 = np.minimum(np.minimum(_segment_d2(p, a, b), _segment_d2(p, b, c)), _segment_d2(p, c, a))
        out[s:s + chunk] = np.sqrt(np.where(inside, t * t * nn, d2).min(axis=1))
    return out


def angle_deg(g, ref):
    cos = (g * ref).sum(1) / (np.linalg.norm(g, axis=1) * np.linalg.norm(ref, axis=1))
    return np.degrees(np.arccos(np.clip(cos, -1, 1)))


RNG_SEED = 7


def check_against_analytic(mesh, f, h, band, n_points=12000, kink_free=None):
    """Sign everywhere, distance and gradient in the band, for a mesh approximating ``f``."""
    rng = np.random.default_rng(RNG_SEED)
    grid = sdf.build_sdf(mesh, h, band, "Shape")
    sag = sagitta(mesh, f)
    lo, hi = mesh.vertices.min(0), mesh.vertices.max(0)
    span = hi - lo
    # uniform in a box twice the size (near, far, inside, outside) plus a shell around the surface
    p = rng.uniform(lo - 0.5 * span, hi + 0.5 * span, (n_points, 3))
    q = rng.uniform(lo - band, hi + band, (4 * n_points, 3))
    q = q[np.abs(f(q)) < band][:n_points]
    p = np.concatenate([p, q])
    exact = f(p)
    phi, grad, tri = sdf.sample(grid, p)
    # the sign can only be wrong where mesh and true surface disagree: within the sagitta
    clear = np.abs(exact) > sag
    assert_array_equal(np.sign(phi[clear]), np.sign(exact[clear]))
    # in the band (less the sagitta and half a cell of interpolation error): a real answer
    near = np.abs(exact) < band - sag - 0.5 * h
    assert np.all(tri[near] >= 0)
    assert np.all(np.abs(phi[np.abs(exact) > band + sag]) == band)
    return grid, p[near], exact[near], phi[near], grad[near], sag


# ---------------------------------------------------------------------------------------------
# Analytic shapes
# ---------------------------------------------------------------------------------------------

def test_sphere_sign_distance_gradient():
    h, band = 0.05, 0.15
    mesh = uv_sphere(1.0)
    _, p, exact, phi, grad, sag = check_against_analytic(mesh, sphere_sdf, h, band)
    # mesh vs sphere: the sagitta (0.0043 for 24 x 48); trilinear interpolation of a smooth
    # distance field errs by ~h^2 |d''| / 8 per axis, measured < 0.06 h here: 0.1 h covers it,
    # well inside the one-cell requirement
    assert_allclose(phi, exact, rtol=0, atol=sag + 0.1 * h)
    # facets of a 24 x 48 sphere turn by 7.5 degrees, so a facet normal is within ~3.8 degrees
    # of the true normal; interpolation adds ~1 degree (measured max 5.0)
    assert angle_deg(grad, numerical_gradient(sphere_sdf, p)).max() < 7.0
    assert_allclose(np.linalg.norm(grad, axis=1), 1.0, rtol=0, atol=0.1)  # measured 0.93-1.07


def test_box_sign_distance_gradient():
    half = np.array([0.5, 0.3, 0.2])
    h, band = 0.04, 0.12
    # the faces fall exactly on grid nodes: nodes on the surface must not decide anyone's side
    mesh = box_mesh(-half, half)
    f = lambda x: box_sdf(x, half)  # noqa: E731
    _, p, exact, phi, grad, sag = check_against_analytic(mesh, f, h, band)
    assert sag < 1e-12
    # no sagitta; the box's distance has kinks on its medial planes inside, where trilinear
    # interpolation rounds the crease off by up to ~h/2 (measured 0.35 h), and smooth elsewhere
    assert_allclose(phi, exact, rtol=0, atol=0.5 * h)
    ang = np.radians(angle_deg(grad, numerical_gradient(f, p)))
    q = np.abs(p) - half
    beyond = (q > 0).sum(axis=1)          # 1: facing a face, 2: an edge, 3: a corner
    d_face = np.sort(np.abs(q), axis=1)
    # planar parts are linear, so interpolation reproduces their gradient exactly: inside away
    # from the medial kinks (nearest two faces more than a cell diagonal apart) and outside a face
    inside_flat = (exact < 0) & (d_face[:, 1] - d_face[:, 0] > 2 * h)
    facing_face = (beyond == 1) & (np.sort(q, axis=1)[:, 1] < -2 * h)   # > 2 h from any edge
    planar = inside_flat | facing_face
    assert ang[planar].max() < 1e-6
    # around an edge or corner the gradient turns at rate 1/d, so over a cell the interpolated
    # gradient can lag by about h/d radians (measured up to 0.6 h/d)
    curved = (beyond >= 2) & (exact > h)
    assert np.all(ang[curved] < h / exact[curved])


def test_torus_sign_distance_gradient():
    major, minor = 0.6, 0.25
    h, band = 0.025, 0.075
    mesh = torus_mesh(major, minor, 64, 32)
    f = lambda x: torus_sdf(x, major, minor)  # noqa: E731
    _, p, exact, phi, grad, sag = check_against_analytic(mesh, f, h, band)
    # as for the sphere: sagitta (0.0022 for 64 x 32) plus < 0.06 h of interpolation
    assert_allclose(phi, exact, rtol=0, atol=sag + 0.1 * h)
    # facets turn by 11.25 degrees around the tube (half: 5.6), plus interpolation (measured 6.0)
    assert angle_deg(grad, numerical_gradient(f, p)).max() < 8.0


def test_nodes_are_exact_and_closest_triangle_is_right():
    mesh = torus_mesh(0.6, 0.25, 48, 24)
    h, band = 0.03, 0.09
    grid = sdf.build_sdf(mesh, h, band, "Torus")
    x = sdf.node_positions(grid)
    tri = grid.block_tri.ravel()
    rng = np.random.default_rng(RNG_SEED)
    pick = rng.choice(np.flatnonzero(tri >= 0), 1000, replace=False)
    want = brute_distance(x[pick], mesh)
    # float64 distance stored as float32: relative rounding 2^-24 of values below the band
    assert_allclose(np.abs(grid.block_phi.ravel()[pick]), want, rtol=2.0 ** -23, atol=1e-12)
    # the stored triangle is a closest one (ties may pick another of equal distance)
    d2 = np.empty(len(pick))
    sdf.triangle_distances_kernel(x[pick], mesh.vertices, mesh.triangles, tri[pick], d2)
    assert_allclose(np.sqrt(d2), want, rtol=1e-12, atol=1e-15)
    # nodes without a triangle are beyond the reach of the band
    assert np.all(np.abs(grid.block_phi.ravel()[tri < 0]) >= band)


def test_interpolation_and_gradient_are_consistent():
    grid = sdf.build_sdf(uv_sphere(1.0), 0.05, 0.15, "Ball")
    rng = np.random.default_rng(RNG_SEED)
    d = rng.normal(size=(2000, 3))
    p = d / np.linalg.norm(d, axis=1, keepdims=True) * rng.uniform(0.92, 1.08, (2000, 1))
    # keep points off cell faces so a small step stays in one cell, where phi is trilinear
    frac = ((p - grid.origin) / grid.cell_size) % 1.0
    p = p[np.all((frac > 0.01) & (frac < 0.99), axis=1)]
    _, grad, _ = sdf.sample(grid, p)
    eps = 1e-4 * grid.cell_size
    fd = np.stack([(sdf.sample(grid, p + eps * e)[0] - sdf.sample(grid, p - eps * e)[0]) / (2 * eps)
                   for e in np.eye(3)], axis=1)
    # phi is linear along each axis inside a cell, so central differences are exact up to
    # float64 cancellation: ~1e-16 * |phi| / eps ~ 1e-10
    assert_allclose(grad, fd, rtol=0, atol=1e-8)
    # float32 points (converted) give the same answer up to their rounding (2^-24 m at 1 m)
    phi64 = sdf.sample(grid, p)[0]
    phi32 = sdf.sample(grid, p.astype(np.float32))[0]
    assert_allclose(phi32, phi64, rtol=0, atol=2e-7)


def test_far_queries_and_modes():
    mesh = uv_sphere(1.0)
    h, band, t = 0.05, 0.15, 0.02
    solid = sdf.build_sdf(mesh, h, band, "Ball")
    outside = sdf.build_sdf(mesh, h, band, "Ball", mode="SOLID_OUTSIDE")
    shell = sdf.build_sdf(mesh, h, band, "Ball", mode="SHELL", thickness=t)
    assert_array_equal(outside.block_phi, -solid.block_phi)
    assert_array_equal(outside.block_tri, solid.block_tri)
    # shell = |d| - t; float32 rounding of d and of d - t differ by an ulp of d
    assert_allclose(shell.block_phi, np.abs(solid.block_phi) - t, rtol=0, atol=2.0 ** -22)
    # far away: inside (centre), outside within the bounding box and beyond it, NaN
    p = np.array([[0.0, 0.0, 0.0], [0.1, -0.2, 0.3], [1.4, 0.0, 1.4], [50.0, 0.0, 0.0], [np.nan, 0, 0]])
    for grid, want in ((solid, [-band, -band, band, band, band]), (outside, [band, band, -band, -band, -band]),
                       (shell, [band - t] * 5)):
        phi, grad, tri = sdf.sample(grid, p)
        assert_array_equal(phi, want)
        assert_array_equal(grad, 0.0)
        assert_array_equal(tri, -1)


def test_band_is_widened_to_hold_the_offset_surface():
    grid = sdf.build_sdf(uv_sphere(1.0), 0.05, 0.01, "Ball", mode="SHELL", thickness=0.1)
    assert grid.band >= 0.1 + 2 * 0.05
    # the offset surface |d| = thickness is inside the band: points on it read ~0
    p = np.array([[0.0, 0.0, 1.1], [0.0, 0.9, 0.0]])
    phi, _, tri = sdf.sample(grid, p)
    assert np.all(tri >= 0)
    # sagitta of the 24 x 48 sphere (0.0043) plus interpolation
    assert_allclose(phi, 0.0, rtol=0, atol=0.01)


@njit(cache=True)
def _solver_like(x, origin, inv_h, block_phi, block_tri, tile_index, tile_block, far, thickness, outside_sign,
                 out):
    """What a solver kernel does: call sample_point per particle with the grid's kernel_args."""
    for i in range(x.shape[0]):
        phi, gx, gy, gz, tri = sdf.sample_point(x[i, 0], x[i, 1], x[i, 2], origin, inv_h, block_phi, block_tri,
                                                tile_index, tile_block, far, thickness, outside_sign)
        out[i] = phi


def test_sample_point_is_callable_from_a_solver_kernel():
    grid = sdf.build_sdf(uv_sphere(1.0), 0.1, 0.3, "Ball")
    x = np.random.default_rng(RNG_SEED).uniform(-1.5, 1.5, (500, 3))
    out = np.empty(500)
    _solver_like(x, *sdf.kernel_args(grid), out)
    assert_array_equal(out, sdf.sample(grid, x)[0])


# ---------------------------------------------------------------------------------------------
# Winding numbers
# ---------------------------------------------------------------------------------------------

@pytest.mark.parametrize("which", ["sphere", "holed sphere", "torus"])
def test_fast_winding_numbers_match_the_exact_sum(which):
    sphere = uv_sphere(1.0)
    mesh = {"sphere": sphere, "holed sphere": TriangleMesh(sphere.vertices, sphere.triangles[60:]),
            "torus": torus_mesh(0.6, 0.25, 64, 32)}[which]
    rng = np.random.default_rng(RNG_SEED)
    lo, hi = mesh.vertices.min(0) - 0.3, mesh.vertices.max(0) + 0.3
    p = rng.uniform(lo, hi, (3000, 3))
    # Barill et al.'s three-term expansion at beta = 2: measured max 0.0073, mean 0.001 on these
    # and on 16k/100k-triangle meshes; 0.01 leaves the side safe wherever |w - 1/2| > 0.01
    assert_allclose(sdf.fast_winding_numbers(mesh, p), winding.winding_numbers(p, mesh), rtol=0, atol=0.01)


# ---------------------------------------------------------------------------------------------
# Broken meshes
# ---------------------------------------------------------------------------------------------

def test_duplicated_overlapping_copy_changes_nothing():
    sphere = uv_sphere(1.0)
    one = sdf.build_sdf(sphere, 0.05, 0.15, "Ball")
    two = sdf.build_sdf(concat(sphere, sphere), 0.05, 0.15, "Ball")
    # w = 2 inside the doubled mesh is still "inside"; ties go to the first copy
    assert_array_equal(two.block_key, one.block_key)
    assert_array_equal(two.block_phi, one.block_phi)
    assert_array_equal(two.block_tri, one.block_tri)
    assert_array_equal(two.tile_index, one.tile_index)
    assert_array_equal(two.tile_block, one.tile_block)


def test_mesh_with_a_hole():
    sphere = uv_sphere(1.0)
    centroid_z = sphere.vertices[sphere.triangles].mean(axis=1)[:, 2]
    holed = TriangleMesh(sphere.vertices, sphere.triangles[centroid_z < 0.8])   # polar cap removed
    h, band = 0.05, 0.15
    grid = sdf.build_sdf(holed, h, band, "Holed")
    rng = np.random.default_rng(RNG_SEED)
    p = rng.uniform(-1.5, 1.5, (6000, 3))
    r = np.linalg.norm(p, axis=1)
    phi, _, _ = sdf.sample(grid, p)
    # unambiguous: well inside away from the hole, or well outside
    inside = (r < 0.95) & (p[:, 2] < 0.4)
    assert np.all(phi[inside] < 0)
    assert np.all(phi[r > 1.05] > 0)
    # Away from the hole, distances are exact to the mesh (interpolation < 0.1 h as for the sphere).
    # Across the hole the side flips on the w = 1/2 level that closes it, so there phi passes
    # through zero with no triangle near: the solid is patched, by design.
    q = p[(np.abs(r - 1) < 0.15) & (p[:, 2] < 0.5)]
    want = brute_distance(q, holed)
    within = want < band - 0.5 * h
    assert_allclose(np.abs(sdf.sample(grid, q[within])[0]), want[within], rtol=0, atol=0.1 * h)
    # The unsigned (shell) distance is exact around the hole too. Around its rim the distance is
    # cylindrical (turning at rate 1/d, as at a box edge), where trilinear interpolation errs most
    # (measured 0.27 h right next to the rim, < 0.06 h elsewhere); for any 1-Lipschitz field it is
    # below the weighted mean distance to the cell corners, at most sqrt(3)/2 h: 0.5 h
    shell = sdf.build_sdf(holed, h, band, "Holed", mode="SHELL")
    q = p[(r < 1.15) & (p[:, 2] > 0.6)]
    want = brute_distance(q, holed)
    got = sdf.sample(shell, q)[0]
    within = want < band - 0.5 * h
    assert_allclose(got[within], want[within], rtol=0, atol=0.5 * h)
    assert np.all(got[want > band + 0.5 * h] == band)


def test_open_cup_solid_and_shell():
    sphere = uv_sphere(1.0)
    bowl = sphere.triangles[np.all(sphere.vertices[sphere.triangles][:, :, 2] <= 1e-12, axis=1)]
    cup = TriangleMesh(sphere.vertices, bowl)                      # lower hemisphere, no lid
    h, band, t = 0.05, 0.2, 0.02
    # in the air inside the bowl, far from the rim, and below it
    in_bowl = np.array([[0.0, 0.0, -0.9], [0.3, 0.2, -0.85], [0.0, 0.0, -0.5]])
    under = np.array([[0.0, 0.0, -1.1], [0.5, 0.0, -0.95]])
    above = np.array([[0.0, 0.0, 0.5], [0.0, 0.0, 2.0]])
    solid = sdf.build_sdf(cup, h, band, "Cup")
    # as a solid, the winding number closes the opening (w > 1/2 in the bowl): an open cup
    # only works as a shell, which is why SHELL exists
    assert np.all(sdf.sample(solid, in_bowl)[0] < 0)
    assert np.all(sdf.sample(solid, under)[0] > 0)
    assert np.all(sdf.sample(solid, above)[0] > 0)
    shell = sdf.build_sdf(cup, h, band, "Cup", mode="SHELL", thickness=t)
    p = np.concatenate([in_bowl, under])
    phi, grad, _ = sdf.sample(shell, p)
    want = np.minimum(np.abs(np.linalg.norm(p, axis=1) - 1.0), band) - t
    # inside the bowl is outside the thin solid; sagitta 0.0043 plus interpolation < 0.1 h
    assert np.all(phi > 0)
    assert_allclose(phi, want, rtol=0, atol=0.0043 + 0.1 * h)
    # the shell's gradient points away from the sheet on both sides
    assert np.dot(grad[1], -p[1]) > 0 and np.dot(grad[4], p[4]) > 0


def test_zero_area_faces_are_harmless():
    sphere = uv_sphere(1.0)
    v = np.concatenate([sphere.vertices, [0.5 * (sphere.vertices[1] + sphere.vertices[2])]])
    extra = np.array([[0, 0, 1], [1, 2, len(v) - 1], [3, 3, 3]])   # repeated, collinear, a point
    broken = TriangleMesh(v, np.concatenate([sphere.triangles, extra]))
    a = sdf.build_sdf(sphere, 0.05, 0.15, "Ball")
    b = sdf.build_sdf(broken, 0.05, 0.15, "Ball")
    assert np.all(np.isfinite(b.block_phi))
    # the degenerate faces lie on edges of the mesh: same distances up to float32 rounding
    assert_array_equal(b.block_key, a.block_key)
    assert_allclose(b.block_phi, a.block_phi, rtol=0, atol=2.0 ** -22)


def test_open_non_manifold_soup():
    box_a = box_mesh([0, 0, 0], [1, 1, 1])
    box_b = box_mesh([0.5, 0.25, 0.25], [1.5, 0.75, 0.75])      # intersects A, w = 2 in the overlap
    # a dangling sheet continuing B's top face: its edge at x = 1.5 is shared by three faces
    sheet = TriangleMesh([[1.5, 0.25, 0.75], [2.5, 0.25, 0.75], [2.5, 0.75, 0.75], [1.5, 0.75, 0.75]],
                         [[0, 1, 2], [0, 2, 3]])
    soup = concat(box_a, box_b, sheet)
    h, band = 0.05, 0.15
    grid = sdf.build_sdf(soup, h, band, "Suzanne")
    inside = np.array([[0.25, 0.5, 0.5], [0.75, 0.5, 0.5], [1.25, 0.5, 0.5], [0.5, 0.1, 0.9]])
    outside = np.array([[-0.5, 0.5, 0.5], [2.0, 0.5, 0.85], [2.0, 0.5, 0.65], [0.5, 0.5, 1.5],
                        [1.25, 0.1, 0.5], [3.0, 0.5, 0.75]])
    assert np.all(sdf.sample(grid, inside)[0] < 0)
    assert np.all(sdf.sample(grid, outside)[0] > 0)
    # 0.1 above and below the middle of the sheet: distance 0.1 (flat faces on nodes: exact up
    # to float32 rounding and interpolation of a linear field)
    phi = sdf.sample(grid, np.array([[2.0, 0.5, 0.85], [2.0, 0.5, 0.65]]))[0]
    assert_allclose(phi, [0.1, 0.1], rtol=0, atol=1e-6)


def test_bad_meshes_and_settings_raise_clear_errors():
    with pytest.raises(InvalidSceneError, match="Collider 'Cup' has no faces"):
        sdf.build_sdf(TriangleMesh(np.zeros((3, 3)), np.zeros((0, 3))), 0.1, 0.3, "Cup")
    bad = uv_sphere(1.0)
    v = bad.vertices.copy()
    v[5, 1] = np.nan
    with pytest.raises(InvalidSceneError, match="Collider 'Cup' has non-finite vertex coordinates"):
        sdf.build_sdf(TriangleMesh(v, bad.triangles), 0.1, 0.3, "Cup")
    with pytest.raises(InvalidSceneError, match="missing vertices"):
        sdf.build_sdf(TriangleMesh(bad.vertices, bad.triangles + 1000), 0.1, 0.3, "Cup")
    with pytest.raises(InvalidSettingsError) as info:
        sdf.build_sdf(bad, 0.0, -1.0, "Cup", mode="SOLID", thickness=-1.0)
    assert len(info.value.problems) == 4          # every problem at once
    assert all("Collider 'Cup'" in p for p in info.value.problems)
    with pytest.raises(InvalidSceneError, match="Increase the cell size"):
        sdf.build_sdf(bad, 1e-3, 3e-3, "Cup", memory=2**20)


# ---------------------------------------------------------------------------------------------
# Sparsity, determinism, cache
# ---------------------------------------------------------------------------------------------

def tilted_plate(size, thickness):
    plate = box_mesh([-size / 2, -size / 2, -thickness / 2], [size / 2, size / 2, thickness / 2])
    a, b = np.radians(35.0), np.radians(25.0)
    rx = np.array([[1, 0, 0], [0, np.cos(a), -np.sin(a)], [0, np.sin(a), np.cos(a)]])
    ry = np.array([[np.cos(b), 0, np.sin(b)], [0, 1, 0], [-np.sin(b), 0, np.cos(b)]])
    return TriangleMesh(plate.vertices @ (ry @ rx).T, plate.triangles)


def test_memory_follows_surface_area_not_bounding_box():
    h, band = 0.005, 0.01
    counts = []
    for size in (0.8, 1.6):
        mesh = tilted_plate(size, 0.01)
        grid = sdf.build_sdf(mesh, h, band, "Plate", mode="SHELL")
        nodes = grid.block_phi.size
        extent = mesh.vertices.max(0) - mesh.vertices.min(0) + 2 * band
        dense = np.prod(np.ceil(extent / h) + 1)
        # the band (2 x 3.7 cells) rounded out to 8-node blocks is ~20 nodes thick across the
        # plate, against ~size / h nodes for the box: the ratio grows with size / h
        assert nodes < dense / (4 if size < 1 else 8)
        # 8 B per node (float32 phi, int32 triangle), 20 B per block (coordinates, key), the tile
        # table (4 B per 64^3 cells) and 2 KiB per tile the band crosses
        tiles = grid.tile_block.shape[0]
        assert sdf.grid_nbytes(grid) == (8 * nodes + 20 * grid.block_key.size + grid.tile_index.nbytes
                                         + 2048 * tiles + 24)
        counts.append(nodes)
    # 4x the area -> ~4x the nodes (less the rim, a strip that only doubles)
    assert 3.2 < counts[1] / counts[0] < 4.2


def test_container_far_signs_from_the_tile_map():
    # a 3 m inside-out box container at 2 cm cells: 150 cells across, so its middle tile (64^3
    # cells) holds no stored block and answers from one sign; the big faces (12 triangles) only
    # touch the blocks near their planes
    h, band = 0.02, 0.04
    grid = sdf.build_sdf(box_mesh([-1.5] * 3, [1.5] * 3), h, band, "Tank", mode="SOLID_OUTSIDE")
    assert np.any(grid.tile_index < 0)                     # a tile without blocks
    p = np.random.default_rng(RNG_SEED).uniform(-2.0, 2.0, (100000, 3))
    a = np.abs(p).max(axis=1)
    phi, grad, tri = sdf.sample(grid, p)
    assert np.all(phi[a < 1.5 - band] == band)     # free space inside the container
    assert np.all(phi[a > 1.5 + band] == -band)    # solid outside it
    exact = -box_sdf(p, np.full(3, 1.5))
    near = np.abs(exact) < band - 0.5 * h
    # flat faces are exact up to float32 rounding; the box's edges and corners are rounded off by
    # interpolation as in the box test (< h/2)
    assert_allclose(phi[near], exact[near], rtol=0, atol=0.5 * h)


def test_build_is_deterministic_across_thread_counts():
    mesh = torus_mesh(0.6, 0.25, 32, 16)
    default = numba.get_num_threads()
    try:
        numba.set_num_threads(1)
        serial = sdf.build_sdf(mesh, 0.04, 0.12, "Torus")
    finally:
        numba.set_num_threads(default)
    parallel = sdf.build_sdf(mesh, 0.04, 0.12, "Torus")
    for a, b in zip(parallel, serial):
        assert_array_equal(a, b)


def test_save_load_round_trip_is_exact(tmp_path):
    grid = sdf.build_sdf(torus_mesh(0.6, 0.25, 32, 16), 0.04, 0.12, "Donut", mode="SHELL", thickness=0.01)
    path = str(tmp_path / "donut.npz")
    sdf.save_sdf(grid, path)
    back = sdf.load_sdf(path)
    for field in sdf.SignedDistanceGrid._fields:
        a, b = getattr(grid, field), getattr(back, field)
        if isinstance(a, np.ndarray):
            assert a.dtype == b.dtype and a.shape == b.shape
            assert_array_equal(a, b)
        else:
            assert a == b and type(a) is type(b)
    (tmp_path / "junk.npz").write_bytes(b"not a zip")
    truncated = open(path, "rb").read()[:200]
    (tmp_path / "truncated.npz").write_bytes(truncated)
    for bad in ("junk.npz", "truncated.npz", "missing.npz"):
        with pytest.raises(CacheFormatError):
            sdf.load_sdf(str(tmp_path / bad))
    np.savez(str(tmp_path / "old.npz"), format=np.array("surge-sdf"), format_version=np.array(0))
    with pytest.raises(CacheFormatError, match="version"):
        sdf.load_sdf(str(tmp_path / "old.npz"))


def test_key_changes_with_everything_that_shapes_the_grid():
    mesh = uv_sphere(1.0, rings=6, segments=8)
    base = sdf.sdf_key(mesh, 0.05, 0.15, "SOLID_INSIDE")
    assert sdf.sdf_key(TriangleMesh(mesh.vertices.copy(), mesh.triangles.copy()), 0.05, 0.15,
                       "SOLID_INSIDE") == base
    moved = mesh.vertices.copy()
    moved[3, 0] += 1e-9
    flipped = mesh.triangles[:, ::-1]
    variants = [sdf.sdf_key(TriangleMesh(moved, mesh.triangles), 0.05, 0.15, "SOLID_INSIDE"),
                sdf.sdf_key(TriangleMesh(mesh.vertices, flipped), 0.05, 0.15, "SOLID_INSIDE"),
                sdf.sdf_key(mesh, 0.04, 0.15, "SOLID_INSIDE"),
                sdf.sdf_key(mesh, 0.05, 0.2, "SOLID_INSIDE"),
                sdf.sdf_key(mesh, 0.05, 0.15, "SOLID_OUTSIDE"),
                sdf.sdf_key(mesh, 0.05, 0.15, "SHELL"),
                sdf.sdf_key(mesh, 0.05, 0.15, "SHELL", thickness=0.01)]
    assert len({base, *variants}) == len(variants) + 1
