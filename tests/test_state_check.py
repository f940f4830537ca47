"""The one-pass state check: the fastest speed equals numpy's, and any non-finite value is caught."""

import math

import numpy as np
import pytest

from engine.core.state_check import BLOCK, max_speed, max_speed_and_acceleration


@pytest.mark.parametrize("n", [1, 5, BLOCK, 3 * BLOCK + 17])
def test_fastest_speed_equals_numpy(n):
    rng = np.random.default_rng(n)
    x = rng.normal(size=(n, 3)).astype(np.float32)
    v = rng.normal(scale=3.0, size=(n, 3)).astype(np.float32)
    want = float(np.sqrt(np.max(np.sum(v.astype(np.float64) ** 2, axis=1))))
    # the kernel sums the squares in float64 like the reference: equal to rounding (rtol 1e-12, atol 0)
    assert max_speed(x, v) == pytest.approx(want, rel=1e-12, abs=0.0)


@pytest.mark.parametrize("array, value", [("x", np.nan), ("v", np.inf), ("x", -np.inf), ("v", np.nan)])
def test_any_non_finite_value_gives_nan(array, value):
    n = 2 * BLOCK + 3
    x = np.zeros((n, 3), dtype=np.float32)
    v = np.ones((n, 3), dtype=np.float32)
    {"x": x, "v": v}[array][BLOCK + 1, 2] = value  # in the middle block
    assert math.isnan(max_speed(x, v))


def test_no_particles_and_bad_shapes():
    assert max_speed(np.zeros((0, 3), np.float32), np.zeros((0, 3), np.float32)) == 0.0
    with pytest.raises(ValueError):
        max_speed(np.zeros((4, 3), np.float32), np.zeros((3, 3), np.float32))


@pytest.mark.parametrize("n", [1, BLOCK - 1, 3 * BLOCK + 5])
def test_largest_speed_and_acceleration_equal_numpy(n):
    rng = np.random.default_rng(n)
    v = rng.normal(size=(n, 3)).astype(np.float32)
    a = (50.0 * rng.normal(size=(n, 3))).astype(np.float32)
    a[n // 2] = [0.0, 0.0, 900.0]  # the largest acceleration on another particle than the fastest
    vmax, amax = max_speed_and_acceleration(v, a)
    # both reductions in float64 over the same float32 values: equal to rounding
    assert vmax == pytest.approx(np.linalg.norm(v.astype(np.float64), axis=1).max(), rel=1e-12, abs=0.0)
    assert amax == pytest.approx(np.linalg.norm(a.astype(np.float64), axis=1).max(), rel=1e-12, abs=0.0)
    assert max_speed_and_acceleration(v[:0], a[:0]) == (0.0, 0.0)


def test_largest_acceleration_over_the_kinds_asked_for():
    rng = np.random.default_rng(7)
    n = 2 * BLOCK + 3
    v = rng.normal(size=(n, 3)).astype(np.float32)
    a = rng.normal(size=(n, 3)).astype(np.float32)
    kind = rng.integers(0, 4, n).astype(np.int8)
    a[np.flatnonzero(kind == 3)[0]] = [0.0, 0.0, 1e4]  # the largest, on a kind left out
    vmax, amax = max_speed_and_acceleration(v, a, kind, 1)
    counted = kind <= 1
    # float64 sums of the same float32 values: equal to rounding
    assert vmax == pytest.approx(np.linalg.norm(v.astype(np.float64), axis=1).max(), rel=1e-12, abs=0.0)
    assert amax == pytest.approx(np.linalg.norm(a[counted].astype(np.float64), axis=1).max(), rel=1e-12, abs=0.0)
