"""Filling volumes: lattice counts, winding numbers on broken meshes, the memory guard."""

import numpy as np
import pytest
from numpy.testing import assert_allclose

from engine import budget, emit
from engine.errors import InvalidSceneError
from engine.scene import TriangleMesh
from helpers import box_mesh, column_scene, uv_sphere


def test_box_fill_is_the_exact_lattice():
    pts = emit.fill_volume(box_mesh([0, 0, 0], [0.1, 0.2, 0.3]), 0.01)
    assert len(pts) == 10 * 20 * 30
    assert_allclose(pts.min(axis=0), [0.005] * 3, rtol=0, atol=1e-12)
    assert_allclose(pts.max(axis=0), [0.095, 0.195, 0.295], rtol=0, atol=1e-12)


def test_sphere_fill_matches_volume():
    r, dx = 0.5, 0.02
    pts = emit.fill_volume(uv_sphere(r), dx)
    # the UV sphere (24 x 48) is inscribed: its volume is ~0.6 % below 4/3 pi r^3; lattice
    # counting noise at r/dx = 25 is ~1/(r/dx) ~ 1 %, so 2 % covers both.
    assert_allclose(len(pts) * dx ** 3, 4 / 3 * np.pi * r ** 3, rtol=0.02, atol=0)
    assert np.all(np.linalg.norm(pts, axis=1) < r)


def test_winding_number_on_broken_meshes():
    sphere = uv_sphere(1.0)
    inside, outside = np.array([[0.1, 0.2, -0.3]]), np.array([[1.5, 0.0, 0.0]])
    # a duplicated overlapping copy doubles the winding number inside (still "inside")
    dup = TriangleMesh(np.concatenate([sphere.vertices, sphere.vertices]),
                       np.concatenate([sphere.triangles, sphere.triangles + len(sphere.vertices)]))
    assert_allclose(emit.winding_numbers(inside, dup), [2.0], rtol=0, atol=1e-9)
    assert_allclose(emit.winding_numbers(outside, dup), [0.0], rtol=0, atol=1e-9)
    # a mesh with a hole (a few faces removed) still classifies points far from the hole
    holed = TriangleMesh(sphere.vertices, sphere.triangles[10:])
    assert emit.winding_numbers(np.array([[0.0, 0.0, -0.5]]), holed)[0] > 0.5
    assert emit.winding_numbers(outside, holed)[0] < 0.5
    # a zero-area face changes nothing
    degenerate = TriangleMesh(sphere.vertices, np.concatenate([sphere.triangles, [[0, 0, 1]]]))
    assert_allclose(emit.winding_numbers(inside, degenerate), [1.0], rtol=0, atol=1e-9)


def test_particle_budget_refuses_with_a_fix():
    scene = column_scene()
    assert budget.check_particle_budget(scene, 0.01, memory=2**30) > 0
    with pytest.raises(InvalidSceneError) as info:
        budget.check_particle_budget(scene, 1e-5, memory=2**30)
    msg = str(info.value)
    assert "Fluid 'Water'" in msg and "Increase the particle spacing to at least" in msg
    # the suggested spacing indeed fits
    dx_min = float(msg.rsplit("at least ", 1)[1].split(" m")[0])
    budget.check_particle_budget(scene, dx_min * 1.01, memory=2**30)
