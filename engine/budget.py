"""Memory guard run before a bake: numpy only, so the host can call it without loading numba."""

from __future__ import annotations

import os

import numpy as np

from .errors import InvalidSceneError
from .scene import SceneDescription, TriangleMesh

#: Engine memory per particle used for the pre-bake guard, bytes (state, grid, temporaries,
#: plus the float64 lattice candidates while filling).
BYTES_PER_PARTICLE = 256

#: Largest particle count (ids are int32 in the cache).
MAX_PARTICLES = 2**31 - 1


def lattice_site_count(mesh: TriangleMesh, dx: float) -> float:
    """Number of lattice candidates in the mesh's bounding box (an upper bound on its particles)."""
    if len(mesh.vertices) == 0:
        return 0.0
    lo, hi = mesh.vertices.min(axis=0), mesh.vertices.max(axis=0)
    return float(np.prod(np.floor((hi - lo) / dx) + 2.0))


def available_memory() -> int:
    """Physical memory currently available, bytes (a conservative 4 GiB if it cannot be read)."""
    try:
        return int(os.sysconf("SC_AVPHYS_PAGES")) * int(os.sysconf("SC_PAGE_SIZE"))
    except (ValueError, OSError, AttributeError):
        return 4 * 2**30


def check_particle_budget(scene: SceneDescription, dx: float, memory: int | None = None) -> float:
    """Refuse a spacing that would need more memory than the machine has.

    Returns the estimated particle count (an upper bound from the fluids' bounding boxes).

    Raises
    ------
    InvalidSceneError
        Naming the fluid objects, the estimate, and the smallest spacing that would fit.
    """
    memory = available_memory() if memory is None else memory
    counts = {f.name: lattice_site_count(f.mesh, dx) for f in scene.fluids}
    total = sum(counts.values())
    budget = 0.5 * memory  # leave room for the host, the cache writer and the OS
    need = total * BYTES_PER_PARTICLE
    if need > budget or total > MAX_PARTICLES:
        dx_min = (total * dx ** 3 * BYTES_PER_PARTICLE / budget) ** (1.0 / 3.0)
        # the lattice count includes a rim of sites around each box; step up until it really fits
        while sum(lattice_site_count(f.mesh, dx_min) for f in scene.fluids) * BYTES_PER_PARTICLE > budget:
            dx_min *= 1.05
        names = ", ".join(f"'{n}'" for n in counts)
        raise InvalidSceneError(
            f"Particle spacing {dx:g} m would make about {total:.3g} particles in Fluid {names}, needing "
            f"about {need / 2**30:.3g} GiB; {memory / 2**30:.3g} GiB of memory is available. "
            f"Increase the particle spacing to at least {dx_min:.3g} m.")
    return total
