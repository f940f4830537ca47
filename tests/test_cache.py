"""Cache format: exact round trip, versioning, atomic frames, deleting only our own files."""

import json
import os

import numpy as np
import pytest

from engine.io import cache
from engine.errors import CacheFormatError


def _frame(n, seed):
    rng = np.random.default_rng(seed)
    return {"position": rng.normal(size=(n, 3)).astype(np.float32),
            "velocity": rng.normal(size=(n, 3)).astype(np.float32),
            "density": rng.uniform(900, 1100, n).astype(np.float32),
            "id": rng.permutation(n).astype(np.int32),
            "age": rng.uniform(0, 2, n).astype(np.float32)}


def test_round_trip_is_bit_exact(tmp_path):
    w = cache.CacheWriter(str(tmp_path), {"frame_start": 1, "frame_end": 3, "fps": 24.0})
    frames = {1: _frame(50, 1), 2: _frame(40, 2), 3: _frame(0, 3)}
    for f, a in frames.items():
        w.write_frame(f, a)
    w.finish("complete")
    r = cache.CacheReader(str(tmp_path))
    assert r.frames == [1, 2, 3] and r.manifest["status"] == "complete"
    for f, a in frames.items():
        got = r.read_frame(f)
        for k in a:
            assert got[k].dtype == a[k].dtype
            np.testing.assert_array_equal(got[k], a[k])


def test_unknown_version_is_refused(tmp_path):
    w = cache.CacheWriter(str(tmp_path), {})
    w.manifest["format_version"] = 99
    w._flush()
    with pytest.raises(CacheFormatError, match="format version 99"):
        cache.CacheReader(str(tmp_path))
    with open(tmp_path / "manifest.json", "w") as fh:
        json.dump({"format": "something-else"}, fh)
    with pytest.raises(CacheFormatError, match="not a Surge cache"):
        cache.CacheReader(str(tmp_path))
    with pytest.raises(CacheFormatError, match="No Surge cache"):
        cache.CacheReader(str(tmp_path / "nowhere"))


def test_a_frame_counts_only_once_listed(tmp_path):
    w = cache.CacheWriter(str(tmp_path), {})
    w.write_frame(1, _frame(5, 0))
    # a half-written frame (as if the process died) is neither listed nor read
    with open(os.path.join(w.frames_dir, "frame_000002.npz.tmp"), "wb") as fh:
        fh.write(b"PK\x03\x04 truncated")
    r = cache.CacheReader(str(tmp_path))
    assert r.frames == [1]
    with pytest.raises(CacheFormatError, match="Frame 2 is not in the cache"):
        r.read_frame(2)


def test_wrong_shape_is_refused(tmp_path):
    w = cache.CacheWriter(str(tmp_path), {})
    bad = _frame(5, 0)
    bad["position"] = bad["position"][:, :2]
    with pytest.raises(CacheFormatError, match="position"):
        w.write_frame(1, bad)


def test_clear_touches_only_our_files(tmp_path):
    w = cache.CacheWriter(str(tmp_path), {})
    w.write_frame(1, _frame(5, 0))
    foreign = [tmp_path / "notes.txt", tmp_path / "frames" / "frame_1.png", tmp_path / "frames" / "my.npz"]
    for p in foreign:
        p.write_text("keep me")
    assert cache.clear(str(tmp_path)) == 2  # manifest + one frame
    assert all(p.exists() for p in foreign)
    assert not (tmp_path / "manifest.json").exists()


def test_check_writable(tmp_path):
    cache.check_writable(str(tmp_path / "new" / "folder"))
    blocker = tmp_path / "a_file"
    blocker.write_text("x")
    with pytest.raises(OSError, match="not writable"):
        cache.check_writable(str(blocker / "cache"))
