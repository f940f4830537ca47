"""The bake process's memory as reported in progress events."""

import sys

import numpy as np
import pytest

from engine.io.child import resident_bytes


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="current resident memory is read from /proc")
def test_resident_memory_follows_an_allocation():
    before = resident_bytes()
    block = np.ones(64 * 2**20 // 8)  # 64 MiB, every page written
    after = resident_bytes()
    assert before > 0
    # the block is resident; allow 8 MiB for pages the allocator or the rest of the process returned meanwhile
    assert after - before >= 56 * 2**20, (before, after)
    del block
