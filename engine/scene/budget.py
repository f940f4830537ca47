"""Memory guard run before a bake: numpy only, so the host can call it without loading numba."""

from __future__ import annotations

import os

import numpy as np

from ..errors import InvalidSceneError
from . import InflowObject, SceneDescription, TriangleMesh, surface_flux

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


def inflow_particle_count(inflow: InflowObject, dx: float, scene: SceneDescription, lifetime: float = 0.0) -> float:
    """Upper bound on the particles an inflow has emitted at any one time at scene spacing ``dx``:
    its surface flux times its emitting time (at most ``lifetime`` s when positive), or its volume's
    lattice count (refilled as the liquid leaves, at a rate not known in advance: counted once per
    0.1 s)."""
    st = inflow.settings
    spacing = dx * st.spacing_factor
    start = max(st.emit_start - 1, scene.frame_start)
    end = scene.frame_end if st.emit_end == 0 else min(st.emit_end, scene.frame_end)
    duration = max(end - start, 0) / scene.fps
    if lifetime > 0.0:
        duration = min(duration, lifetime)
    if st.inflow_mode == "SURFACE":
        if inflow.motion == "STATIC" and not ({"normal_speed", "velocity"} & set(inflow.tracks)):
            return surface_flux(inflow.mesh, inflow.velocity, st.normal_speed) * duration / spacing ** 3
        # moving, deforming or animated: its area times the fastest set speed it has (an upper bound)
        speed = (np.max(inflow.tracks.get("normal_speed", [st.normal_speed]))
                 + np.max(np.linalg.norm(inflow.tracks.get("velocity", inflow.velocity[None, :]), axis=-1)))
        frames = inflow.frame_vertices if inflow.frame_vertices is not None else inflow.mesh.vertices[None]
        area = max(float(surface_flux(TriangleMesh(v, inflow.mesh.triangles), np.zeros(3), 1.0)) for v in frames)
        return area * float(speed) * duration / spacing ** 3
    return lattice_site_count(inflow.mesh, spacing) * max(1.0, duration / 0.1)


def available_memory() -> int:
    """Physical memory currently available, bytes (a conservative 4 GiB if it cannot be read)."""
    try:
        return int(os.sysconf("SC_AVPHYS_PAGES")) * int(os.sysconf("SC_PAGE_SIZE"))
    except (ValueError, OSError, AttributeError):
        return 4 * 2**30


def check_particle_budget(scene: SceneDescription, dx: float, memory: int | None = None, lifetime: float = 0.0,
                          drained: bool = False) -> float:
    """Refuse a spacing that would need more memory than the machine has.

    Returns the estimated particle count: an upper bound from the fluids' bounding boxes plus
    what the inflows emit over the bake (see :func:`inflow_particle_count`), over at most
    ``lifetime`` seconds when that is positive (older particles are removed). With ``drained``
    (the scene has outflows or a kill box) the inflows are not counted: how much of their liquid
    is removed cannot be known before the bake, and refusing a fountain that drains would be wrong.

    Raises
    ------
    InvalidSceneError
        Naming the fluid and inflow objects, the estimate, and the smallest spacing that would fit.
    """
    memory = available_memory() if memory is None else memory
    counts = {f"Fluid '{f.name}'": lattice_site_count(f.mesh, dx * f.settings.spacing_factor) for f in scene.fluids}
    inflows = () if drained else scene.inflows
    counts.update({f"Inflow '{f.name}'": inflow_particle_count(f, dx, scene, lifetime) for f in inflows})
    total = sum(counts.values())
    budget = 0.5 * memory  # leave room for the host, the cache writer and the OS
    need = total * BYTES_PER_PARTICLE
    if need > budget or total > MAX_PARTICLES:
        dx_min = (total * dx ** 3 * BYTES_PER_PARTICLE / budget) ** (1.0 / 3.0)
        # the lattice count includes a rim of sites around each box; step up until it really fits
        while (sum(lattice_site_count(f.mesh, dx_min * f.settings.spacing_factor) for f in scene.fluids)
               + sum(inflow_particle_count(f, dx_min, scene, lifetime) for f in inflows)) * BYTES_PER_PARTICLE > budget:
            dx_min *= 1.05
        names = ", ".join(counts)
        raise InvalidSceneError(
            f"Particle spacing {dx:g} m would make about {total:.3g} particles in {names}, needing "
            f"about {need / 2**30:.3g} GiB; {memory / 2**30:.3g} GiB of memory is available. "
            f"Increase the particle spacing to at least {dx_min:.3g} m.")
    return total
