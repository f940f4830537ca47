"""An open-addressing hash table over 64-bit keys (Morton keys of cells), for numba kernels.

The table is an int32 array of ``2^bits`` slots holding indices into an array of distinct keys (-1:
empty); a key's home slot is its Fibonacci hash (the key times 2^64 / golden ratio, top ``bits``
bits) and collisions probe linearly. The keys themselves stay in the caller's array, so the table is
4 bytes a slot. Used by the cell grid (:mod:`engine.core.cell_grid`: a cell's key to its index) and
the surface's query grouping (:mod:`engine.surface.field`).
"""

from __future__ import annotations

import numpy as np
from numba import njit

#: Fibonacci hashing: 2^64 / golden ratio.
HASH_MUL = np.uint64(0x9E3779B97F4A7C15)


@njit(inline="always", cache=True)
def home_slot(key, bits):
    """The slot a key hashes to in a table of ``2^bits`` slots."""
    return np.int64((key * HASH_MUL) >> np.uint64(64 - bits))


@njit(inline="always", cache=True)
def probe(table, keys, key, bits):
    """The slot holding ``key`` (``keys[table[slot]] == key``) or, if it is not in the table, the empty
    slot (``table[slot] < 0``) where it would go."""
    mask = table.shape[0] - 1
    slot = home_slot(key, bits)
    while table[slot] >= 0 and keys[table[slot]] != key:
        slot = (slot + 1) & mask
    return slot


@njit(cache=True)
def fill_table(keys, n, bits, table):
    """Put the first ``n`` of ``keys`` (distinct) into ``table`` (``2^bits`` slots, all -1)."""
    for c in range(n):
        table[probe(table, keys, keys[c], bits)] = c


@njit(inline="always", cache=True)
def find(table, keys, key, bits):
    """The index of ``key`` in ``keys`` through ``table``, or -1 when it is not there."""
    return table[probe(table, keys, key, bits)]
