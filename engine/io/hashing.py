"""The one canonical hash of the engine: SHA-256 of a JSON document and of named arrays.

Cache manifests, stage manifests, checkpoints and collider grids record these hashes to tell whether
the settings or the scene a result was made from changed, so every one is computed the same way: the
document as JSON with sorted keys and no spaces, then each array in the order of its name, as its
name, dtype, shape and bytes (C order).
"""

from __future__ import annotations

import hashlib
import json

import numpy as np


def canonical_json(doc) -> str:
    """``doc`` as JSON with sorted keys and no spaces: equal documents give equal text."""
    return json.dumps(doc, sort_keys=True, separators=(",", ":"))


def canonical_hash(doc, arrays: dict | None = None) -> str:
    """SHA-256 (hex) of :func:`canonical_json` of ``doc`` and of every array of ``arrays`` (by name)."""
    h = hashlib.sha256(canonical_json(doc).encode("utf-8"))
    for name in sorted(arrays or {}):
        a = np.ascontiguousarray(arrays[name])
        h.update(f"\n{name}:{a.dtype.str}{a.shape}\n".encode("utf-8"))
        h.update(a.tobytes())
    return h.hexdigest()
