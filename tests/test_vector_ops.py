"""The vector operations of the neighbour search and the PBF pair passes (engine.core.vector_ops) against numpy.

References are exact: the candidate test must select the pairs a scalar float32 test selects, bit for
bit (numpy's float32 arithmetic is IEEE single precision, one rounding per operation, as the
operation written without fast-math flags), and the moves and packed stores are copies.
"""

import numpy as np
import pytest
from numba import njit

from engine.core.vector_ops import LANES, candidate_masks, compress_store, move_lanes, popcount, store_count_up
from engine.solvers.pbf_lanes import (density_lanes, density_lanes8, kernel_lanes, kernel_lanes8, push_range,
                                      push_range_shared, xsph_range, xsph_range_shared)


@njit(cache=True)
def _masks(cx, cy, cz, ch, ci, t, xi, yi, zi, hi, after, end, before, start):
    return candidate_masks(cx, cy, cz, ch, ci, t, xi, yi, zi, hi, after, end, before, start)


@njit(cache=True)
def _compress(src, t, mask, dst, at):
    compress_store(src, t, mask, dst, at)


@njit(cache=True)
def _move(src, t, dst, at):
    move_lanes(src, t, dst, at)


@njit(cache=True)
def _count_up(dst, at, first):
    store_count_up(dst, at, first)


@njit(cache=True)
def _popcount(v):
    return popcount(v)


@njit(cache=True)
def _density(lanes, xf, nbr, t, count, xi, yi, zi, inv_h, h, inv_unit, w_out, at, slope):
    if lanes == 8:
        return density_lanes8(xf, nbr, t, count, xi, yi, zi, inv_h, h, inv_unit, w_out, at, slope)
    return density_lanes(xf, nbr, t, count, xi, yi, zi, inv_h, h, inv_unit, w_out, at, slope)


@njit(cache=True)
def _kernel(lanes, xf, nbr, t, count, xi, yi, zi, inv_h, w_out, at):
    if lanes == 8:
        kernel_lanes8(xf, nbr, t, count, xi, yi, zi, inv_h, w_out, at)
    else:
        kernel_lanes(xf, nbr, t, count, xi, yi, zi, inv_h, w_out, at)


@njit(cache=True)
def _xsph(qf, af, nbr, codes, table, t0, t1, v0, v1, v2, inv_rho_i, shared):
    if shared:
        return xsph_range_shared(qf, af, nbr, codes, table, t0, t1, v0, v1, v2, inv_rho_i)
    return xsph_range(qf, af, nbr, codes, table, t0, t1, v0, v1, v2, inv_rho_i)


@njit(cache=True)
def _push(xf, of, nbr, slope, t0, t1, xi, yi, zi, lami, shared):
    if shared:
        return push_range_shared(xf, of, nbr, slope, t0, t1, xi, yi, zi, lami)
    return push_range(xf, of, nbr, slope, t0, t1, xi, yi, zi, lami)


def _reference(cx, cy, cz, ch, ci, t, xi, yi, zi, hi, after, end, before, start):
    """The scalar test in numpy float32, in the kernels' order of operations."""
    s = slice(t, t + LANES)
    dx, dy, dz = xi - cx[s], yi - cy[s], zi - cz[s]
    r2 = (dx * dx + dy * dy) + dz * dz
    reach = hi + ch[s]
    hit = r2 < reach * reach
    j = ci[s]
    mine = hit & (((j > after) & (j < end)) | (j < before))
    other = hit & ((j >= end) | (j < start))
    bits = 1 << np.arange(LANES, dtype=np.uint64)
    return int(np.sum(bits[mine])) | (int(np.sum(bits[other])) << 32)


@pytest.mark.parametrize("seed", [0, 1, 2])
def test_candidate_masks_select_exactly_the_scalar_tests_pairs(seed):
    rng = np.random.default_rng(seed)
    n = 4 * LANES
    f32 = np.float32
    xi, yi, zi, hi = f32(0.3), f32(-0.2), f32(0.1), f32(0.05)
    ch = rng.uniform(0.02, 0.08, n).astype(f32)
    # candidates on spheres of radius hi + ch_c (the boundary), nudged by a few units in the last place
    u = rng.normal(size=(n, 3))
    u /= np.linalg.norm(u, axis=1)[:, None]
    radius = (hi + ch).astype(np.float64) * (1.0 + rng.integers(-4, 5, n) * 6e-8)
    pos = (np.array([xi, yi, zi], dtype=np.float64) + u * radius[:, None]).astype(f32)
    pos[:8] = [xi, yi, zi]  # coincident points
    pos[8] = (xi + hi + ch[8], yi, zi)  # exactly at reach along x when representable
    cx, cy, cz = (np.ascontiguousarray(pos[:, k]) for k in range(3))
    ci = rng.permutation(np.arange(100, 100 + n)).astype(np.int32)
    hits = 0
    for after, end, before, start in [(130, 2147483647, 130, -2147483648),  # a full list of particle 130
                                      (130, 140, -2147483648, 120)]:      # a half list, block 120:140
        bounds = [np.int32(v) for v in (after, end, before, start)]
        for t in range(0, n, LANES):
            got = _masks(cx, cy, cz, ch, ci, t, xi, yi, zi, hi, *bounds)
            want = _reference(cx, cy, cz, ch, ci, t, xi, yi, zi, hi, *bounds)
            assert got == want, (t, hex(got), hex(want))
            hits += bin(want).count("1")
    assert 0 < hits < 2 * n  # the boundary cases fall on both sides


def test_compress_store_packs_the_selected_entries_in_order():
    rng = np.random.default_rng(3)
    src = rng.integers(-1000, 1000, 40).astype(np.int32)
    for mask in [0, 1, 0x8000, 0xFFFF, 0b1010011100001101] + list(rng.integers(0, 1 << 16, 20)):
        dst = np.full(40, 7777, dtype=np.int32)
        _compress(src, 5, np.uint64(mask), dst, 11)
        lanes = [u for u in range(LANES) if mask >> u & 1]
        packed = src[5:5 + LANES][lanes]
        np.testing.assert_array_equal(dst[11:11 + len(lanes)], packed)
        np.testing.assert_array_equal(dst[11 + len(lanes):11 + LANES], 0)
        np.testing.assert_array_equal(dst[:11], 7777)  # nothing outside the 16 entries
        np.testing.assert_array_equal(dst[11 + LANES:], 7777)


@pytest.mark.parametrize("dtype", [np.float32, np.int32])
def test_move_lanes_copies_sixteen_entries(dtype):
    src = np.arange(50).astype(dtype)
    dst = np.zeros(40, dtype=dtype)
    _move(src, 23, dst, 9)
    np.testing.assert_array_equal(dst[9:25], src[23:39])
    assert not dst[:9].any() and not dst[25:].any()


@pytest.mark.parametrize("first", [0, 37, 2_147_483_647 - LANES])
def test_store_count_up_writes_sixteen_consecutive_indices(first):
    dst = np.full(40, -5, dtype=np.int32)
    _count_up(dst, 13, np.uintp(first))
    np.testing.assert_array_equal(dst[13:13 + LANES], np.arange(first, first + LANES))
    np.testing.assert_array_equal(dst[:13], -5)  # nothing outside the 16 entries
    np.testing.assert_array_equal(dst[13 + LANES:], -5)


def test_popcount():
    for v in [0, 1, 0xFFFF, 0xFFFF_0000_FFFF, (1 << 64) - 1, 0x8000_0000_0000_0001]:
        assert _popcount(np.uint64(v)) == bin(v).count("1")


@pytest.mark.parametrize("shared", [False, True])
@pytest.mark.parametrize("t0, t1", [(3, 3), (3, 4), (3, 5), (2, 9), (0, 16), (5, 22)])
def test_push_range_sums_and_shares_in_the_stated_order(t0, t1, shared):
    """float32, exactly: entry t adds f (x_i - x_j), f = (lambda_i + lambda_j) slope[t], to sum a (entries
    t0, t0 + 2, ...) or b (t0 + 1, ...); the result is a + b. With ``shared`` row j of ``of`` loses the
    same vector in its first three values; nothing else changes."""
    rng = np.random.default_rng(t1 * 2 + shared)
    n = 40
    rows = rng.uniform(-2.0, 2.0, (n, 4)).astype(np.float32)
    out = rng.uniform(-1.0, 1.0, (n, 4)).astype(np.float32)
    nbr = np.full(30, -7, dtype=np.int32)  # entries outside t0:t1 must not be read (-7: out of range)
    nbr[t0:t1] = rng.permutation(n)[:t1 - t0]
    slope = rng.integers(0, 65536, 30).astype(np.uint16)
    xi, yi, zi, lami = (np.float32(v) for v in rng.uniform(-2.0, 2.0, 4))
    before = out.copy()
    want_out = out.copy()
    sums = np.zeros((2, 3), dtype=np.float32)
    for k, t in enumerate(range(t0, t1)):
        j = nbr[t]
        f = (lami + rows[j, 3]) * np.float32(slope[t])
        c = f * (np.array([xi, yi, zi], dtype=np.float32) - rows[j, :3])
        sums[k % 2] += c
        want_out[j, :3] -= c
    got = _push(rows.reshape(-1), out.reshape(-1), nbr, slope, t0, t1, xi, yi, zi, lami, shared)
    np.testing.assert_array_equal(np.array(got, dtype=np.float32), sums[0] + sums[1])
    np.testing.assert_array_equal(out, want_out if shared else before)


@pytest.mark.parametrize("shared", [False, True])
@pytest.mark.parametrize("t0, t1", [(3, 3), (3, 4), (3, 5), (2, 9), (5, 22)])
def test_xsph_range_sums_and_shares_in_the_stated_order(t0, t1, shared):
    """float32, exactly: entry t adds w / rho_j (v_j - v_i), w = table[codes[t]], to sum a (entries t0,
    t0 + 2, ...) or b (t0 + 1, ...); the result is a + b. With ``shared`` row j of ``af`` gains
    -w / rho_i (v_j - v_i) in its first three values; nothing else changes."""
    rng = np.random.default_rng(t1 * 2 + shared + 100)
    n = 40
    rows = rng.uniform(-2.0, 2.0, (n, 4)).astype(np.float32)
    rows[:, 3] = rng.uniform(0.9e-3, 1.1e-3, n)  # 1 / rho_j
    out = rng.uniform(-1.0, 1.0, (n, 4)).astype(np.float32)
    table = rng.uniform(0.0, 1.0, 1000).astype(np.float32)
    nbr = np.full(30, -7, dtype=np.int32)  # entries outside t0:t1 must not be read
    nbr[t0:t1] = rng.permutation(n)[:t1 - t0]
    codes = rng.integers(0, 1000, 30).astype(np.uint16)
    v0, v1, v2 = (np.float32(v) for v in rng.uniform(-2.0, 2.0, 3))
    inv_rho_i = np.float32(1.01e-3)
    before = out.copy()
    want_out = out.copy()
    sums = np.zeros((2, 3), dtype=np.float32)
    for k, t in enumerate(range(t0, t1)):
        j = nbr[t]
        w = table[codes[t]]
        e = rows[j, :3] - np.array([v0, v1, v2], dtype=np.float32)
        sums[k % 2] += (w * rows[j, 3]) * e
        want_out[j, :3] += (-w * inv_rho_i) * e
    got = _xsph(rows.reshape(-1), out.reshape(-1), nbr, codes, table, t0, t1, v0, v1, v2, inv_rho_i, shared)
    np.testing.assert_array_equal(np.array(got, dtype=np.float32), sums[0] + sums[1])
    np.testing.assert_array_equal(out, want_out if shared else before)


@pytest.mark.parametrize("lanes", [16, 8])
@pytest.mark.parametrize("count", [1, 7, 8, 16, 23])
def test_density_and_kernel_lanes_against_the_cubic_spline_in_double_precision(count, lanes):
    """w(q) = (2 - q)+^3 / 4 - (1 - q)+^3 and the slope code round(-w'(q) / q / unit) of the 16 (8)
    entries from t (q = |x_i - x_j| / h, neighbours inside and outside the support), against float64;
    lanes past ``count`` give w = 0 and leave the slope codes and ``nbr`` past the range alone, and
    nothing past the step's lanes is written."""
    rng = np.random.default_rng(count)
    h, unit = 0.025, 3.5 / 65535.0
    n = 60
    xi = np.float32([0.31, -0.12, 0.07])
    direction = rng.normal(size=(n, 3))
    direction /= np.linalg.norm(direction, axis=1)[:, None]
    x = (xi + direction * rng.uniform(0.02, 2.3, (n, 1)) * h).astype(np.float32)  # q from 0.02 to 2.3
    rows = np.zeros((n, 4), dtype=np.float32)
    rows[:, :3] = x
    rows[:, 3] = rng.normal(size=n)  # another value in the fourth column: not a coordinate
    t = 5
    nbr = np.full(40, -7, dtype=np.int32)  # entries outside t : t + count must not be read
    nbr[t:t + count] = rng.permutation(n)[:count]
    slope = np.full(40, 12345, dtype=np.uint16)
    w_out = np.full(40, -1.0, dtype=np.float32)
    k = min(count, lanes)
    total = _density(lanes, rows.reshape(-1), nbr, t, count, xi[0], xi[1], xi[2], np.float32(1 / h), np.float32(h),
                     np.float32(1 / unit), w_out, 3, slope)
    j = nbr[t:t + k]
    r = np.sqrt(((x[j].astype(np.float64) - xi.astype(np.float64)) ** 2).sum(1))
    q = r / h
    a, b = np.clip(2.0 - q, 0.0, None), np.clip(1.0 - q, 0.0, None)
    w = 0.25 * a ** 3 - b ** 3
    code = (0.75 * a ** 2 - 3.0 * b ** 2) / q / unit
    # w: the reciprocal square root is an estimate refined by one Newton step (relative error about
    # 1e-7, float32 rounding of q and of the spline's terms about as much); |dw/dq| <= 0.75: 2e-6
    np.testing.assert_allclose(w_out[3:3 + k], w, rtol=0.0, atol=2e-6)
    np.testing.assert_array_equal(w_out[3 + k:3 + lanes], 0.0)  # lanes past the range
    assert w_out[:3].tolist() == [-1.0] * 3 and np.all(w_out[3 + lanes:] == -1.0)
    # codes: the slope to float32 precision, scaled by 1 / unit = 18724: a code within 1 of round()
    assert np.abs(slope[t:t + k].astype(np.int64) - np.round(code)).max() <= 1
    assert np.all(slope[:t] == 12345) and np.all(slope[t + k:] == 12345)
    assert abs(total - w.sum()) <= 16 * 2e-6
    if k == LANES:
        assert (w > 0).any() and (w == 0).any()  # inside and outside the support

    w_only = np.full(40, -1.0, dtype=np.float32)
    _kernel(lanes, rows.reshape(-1), nbr, t, count, xi[0], xi[1], xi[2], np.float32(1 / h), w_only, 3)
    np.testing.assert_array_equal(w_only, w_out)


@pytest.mark.slow
def test_baseline_instruction_set_gives_the_same_results(tmp_path):
    """Compiled for the x86-64 baseline (no AVX), LLVM expands the vector code into narrower or
    scalar instructions: the tests above and the neighbour list's must pass unchanged."""
    import os
    import subprocess
    import sys

    env = dict(os.environ, NUMBA_CPU_NAME="generic", NUMBA_CACHE_DIR=str(tmp_path))
    here = os.path.dirname(os.path.abspath(__file__))
    run = subprocess.run([sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", "-m", "not slow",
                          os.path.join(here, "test_vector_ops.py"), os.path.join(here, "test_neighbors.py")],
                         env=env, capture_output=True, text=True, timeout=600)
    assert run.returncode == 0, run.stdout[-3000:] + run.stderr[-3000:]
