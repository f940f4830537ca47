"""Set-ups a bake accepts but an artist almost never means: warned about before the bake starts.

Refusals are :meth:`engine.scene.SceneDescription.validate`'s; these are the cases that can be
deliberate, so they are said and baked anyway.

* A fluid that lies entirely outside every container: outside a container is solid, so the liquid
  starts in a wall and falls out of the world. A fluid overlapping a container (partly inside) is not
  warned about; the bounding boxes decide (exact for box containers; for a mesh container, a fluid
  outside the mesh but inside its bounding box is not caught).
"""

from __future__ import annotations

import numpy as np

from .objects import SceneDescription


def _overlap(lo_a, hi_a, lo_b, hi_b) -> bool:
    return bool(np.all(lo_a < hi_b) and np.all(lo_b < hi_a))


def scene_warnings(scene: SceneDescription) -> list[str]:
    """Sentences naming the objects of each questionable set-up (empty when there is none)."""
    containers = [(c.name, np.asarray(c.lower, float), np.asarray(c.upper, float)) for c in scene.containers]
    containers += [(c.name, c.mesh.vertices.min(axis=0), c.mesh.vertices.max(axis=0)) for c in scene.colliders
                   if c.settings.collider_mode == "CONTAINER" and len(c.mesh.vertices)]
    if not containers:
        return []
    out = []
    for fluid in scene.fluids:
        if not len(fluid.mesh.vertices):
            continue
        lo, hi = fluid.mesh.vertices.min(axis=0), fluid.mesh.vertices.max(axis=0)
        if any(_overlap(lo, hi, c_lo, c_hi) for _name, c_lo, c_hi in containers):
            continue
        names = ", ".join(f"'{name}'" for name, _lo, _hi in containers)
        which = f"the container {names}" if len(containers) == 1 else f"every container ({names})"
        out.append(f"Fluid '{fluid.name}' lies entirely outside {which}: outside a container is solid, so "
                   f"this liquid starts inside a wall and falls out of the world; move it into the container")
    return out
