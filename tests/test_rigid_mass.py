"""Mass properties of closed meshes (engine.rigid.mass): exact polyhedral volume integrals (Eberly 2002,
"Polyhedral Mass Properties (Revisited)") against closed forms and a brute-force voxel integration."""

import os

import numpy as np
import pytest

from engine.collision.sdf import winding_numbers
from engine.rigid.mass import boundary_edges, mass_properties, solid_problems
from tests.helpers import box_mesh, uv_sphere

DATA = os.path.join(os.path.dirname(__file__), "data")


def test_box_matches_closed_form_off_origin():
    # a 2 x 1 x 3 box far from the origin: m = rho V, I = m/12 (b^2 + c^2, ...), no products of inertia
    mesh = box_mesh([101.0, -52.0, 7.0], [103.0, -51.0, 10.0])
    mp = mass_properties(mesh.vertices, mesh.triangles, 2.0)
    m = 2.0 * 6.0
    # exact formulas in float64 about the vertex mean: only round-off is left (1e-12 relative)
    np.testing.assert_allclose(mp.volume, 6.0, rtol=1e-12, atol=0.0)
    np.testing.assert_allclose(mp.mass, m, rtol=1e-12, atol=0.0)
    np.testing.assert_allclose(mp.centre, [102.0, -51.5, 8.5], rtol=1e-12, atol=1e-12)
    expected = m / 12.0 * np.diag([1.0 + 9.0, 4.0 + 9.0, 4.0 + 1.0])
    np.testing.assert_allclose(mp.inertia, expected, rtol=1e-10, atol=1e-9)


def test_inward_winding_gives_the_same_solid():
    mesh = box_mesh([0, 0, 0], [1, 2, 3])
    flipped = mass_properties(mesh.vertices, mesh.triangles[:, ::-1], 1.0)
    straight = mass_properties(mesh.vertices, mesh.triangles, 1.0)
    np.testing.assert_allclose(flipped.inertia, straight.inertia, rtol=1e-12, atol=1e-12)
    assert flipped.volume == pytest.approx(6.0)


def test_sphere_mesh_converges_to_the_sphere():
    # a UV sphere of 48 x 96 facets lies between the sphere and a sphere shrunk by its chordal sag
    # 1 - cos(pi / 48) = 2.1e-3 of the radius: volume within 3 x 2.1e-3, inertia within 5 x 2.1e-3
    r, rho = 0.5, 800.0
    mesh = uv_sphere(r, centre=(1.0, 2.0, 3.0), rings=48, segments=96)
    mp = mass_properties(mesh.vertices, mesh.triangles, rho)
    sag = 1.0 - np.cos(np.pi / 48)
    volume = 4.0 / 3.0 * np.pi * r ** 3
    np.testing.assert_allclose(mp.volume, volume, rtol=3 * sag, atol=0.0)
    np.testing.assert_allclose(mp.centre, [1.0, 2.0, 3.0], rtol=0.0, atol=1e-12)
    moment = 0.4 * rho * volume * r * r
    np.testing.assert_allclose(np.diag(mp.inertia), [moment] * 3, rtol=5 * sag, atol=0.0)
    off = mp.inertia - np.diag(np.diag(mp.inertia))
    np.testing.assert_allclose(off, 0.0, rtol=0.0, atol=1e-12 * moment)


def test_suzanne_matches_voxel_integration():
    data = np.load(os.path.join(DATA, "suzanne_closed.npz"), allow_pickle=False)
    v, t = data["vertices"], data["triangles"]
    assert boundary_edges(t) == 0
    mp = mass_properties(v, t, 1.0)
    # brute force: the midpoint rule over a 56^3 lattice of cells in the bounding box, each cell weighted
    # by the winding number at its centre, rounded (Suzanne's eyes are closed shells that sink into the
    # head: the surface integrals count the overlap twice, as its winding number 2 does). Its error comes
    # from the cells the surface cuts, each off by up to half its volume at random, and the moments by as
    # much times the size: a 1 % band for volume and centre (0.01 of the size) and 2.5 % for the
    # inertia.
    from engine.scene import TriangleMesh

    lo, hi = v.min(axis=0), v.max(axis=0)
    n = 56
    h = (hi - lo) / n
    g = [lo[k] + (np.arange(n) + 0.5) * h[k] for k in range(3)]
    pts = np.stack(np.meshgrid(*g, indexing="ij"), -1).reshape(-1, 3)
    weight = np.rint(winding_numbers(pts, TriangleMesh(v, t)))
    keep = weight != 0.0
    p, wgt = pts[keep], weight[keep]
    cell = float(np.prod(h))
    volume = float(np.sum(wgt)) * cell
    centre = (wgt[:, None] * p).sum(axis=0) / np.sum(wgt)
    d = p - centre
    inertia = cell * (np.eye(3) * np.sum(wgt * np.sum(d * d, axis=1)) - (wgt[:, None] * d).T @ d)
    size = float(np.max(hi - lo))
    np.testing.assert_allclose(mp.volume, volume, rtol=0.01, atol=0.0)
    np.testing.assert_allclose(mp.centre, centre, rtol=0.0, atol=0.01 * size)
    np.testing.assert_allclose(mp.inertia, inertia, rtol=0.0, atol=0.025 * np.max(np.abs(inertia)))


def test_open_and_flat_meshes_are_refused_by_name():
    mesh = box_mesh([0, 0, 0], [1, 1, 1])
    assert solid_problems(mesh.vertices, mesh.triangles, "Rigid body 'Crate'") == []
    open_box = solid_problems(mesh.vertices, mesh.triangles[:-1], "Rigid body 'Crate'")
    assert len(open_box) == 1 and "'Crate' is not a closed mesh" in open_box[0]
    flat = box_mesh([0, 0, 0], [1, 1, 0])
    problems = solid_problems(flat.vertices, flat.triangles, "Rigid body 'Sheet'")
    assert problems and "'Sheet'" in problems[0]


def test_turned_box_has_the_turned_inertia_tensor():
    # a box turned about a skew axis: I = R I0 R^T, every product of inertia non-zero
    mesh = box_mesh([-1.0, -0.5, -1.5], [1.0, 0.5, 1.5])
    axis = np.array([1.0, 2.0, 3.0]) / np.sqrt(14.0)
    angle = 0.7
    k = np.array([[0, -axis[2], axis[1]], [axis[2], 0, -axis[0]], [-axis[1], axis[0], 0]])
    rot = np.eye(3) + np.sin(angle) * k + (1 - np.cos(angle)) * k @ k
    turned = mesh.vertices @ rot.T + np.array([0.3, -2.0, 5.0])
    mp = mass_properties(turned, mesh.triangles, 3.0)
    m = 3.0 * 6.0
    expected = rot @ (m / 12.0 * np.diag([1.0 + 9.0, 4.0 + 9.0, 4.0 + 1.0])) @ rot.T
    assert np.min(np.abs(expected[np.triu_indices(3, 1)])) > 0.1      # the products are exercised
    np.testing.assert_allclose(mp.centre, [0.3, -2.0, 5.0], rtol=0.0, atol=1e-12)
    np.testing.assert_allclose(mp.inertia, expected, rtol=0.0, atol=1e-12 * m * 10)
