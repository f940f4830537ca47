"""Small scene builders shared by the engine tests."""

import numpy as np

from engine.scene import BoxContainer, FluidObject, SceneDescription, TriangleMesh


def box_mesh(lower, upper) -> TriangleMesh:
    """Closed, outward-facing triangulated box."""
    lo, hi = np.asarray(lower, float), np.asarray(upper, float)
    v = np.array([[hi[0] if i & 1 else lo[0], hi[1] if i & 2 else lo[1], hi[2] if i & 4 else lo[2]]
                  for i in range(8)])
    quads = [(0, 2, 3, 1), (4, 5, 7, 6), (0, 1, 5, 4), (2, 6, 7, 3), (0, 4, 6, 2), (1, 3, 7, 5)]
    tris = []
    for a, b, c, d in quads:
        tris += [(a, b, c), (a, c, d)]
    return TriangleMesh(v, np.array(tris))


def uv_sphere(radius=1.0, centre=(0.0, 0.0, 0.0), rings=24, segments=48) -> TriangleMesh:
    """Closed, outward-facing UV sphere."""
    verts = [(0.0, 0.0, radius)]
    for i in range(1, rings):
        th = np.pi * i / rings
        for j in range(segments):
            ph = 2 * np.pi * j / segments
            verts.append((radius * np.sin(th) * np.cos(ph), radius * np.sin(th) * np.sin(ph), radius * np.cos(th)))
    verts.append((0.0, 0.0, -radius))
    tris = []
    for j in range(segments):
        tris.append((0, 1 + j, 1 + (j + 1) % segments))
    for i in range(rings - 2):
        a0 = 1 + i * segments
        b0 = a0 + segments
        for j in range(segments):
            a, b = a0 + j, a0 + (j + 1) % segments
            c, d = b0 + j, b0 + (j + 1) % segments
            tris += [(a, c, d), (a, d, b)]
    last = len(verts) - 1
    base = 1 + (rings - 2) * segments
    for j in range(segments):
        tris.append((last, base + (j + 1) % segments, base + j))
    return TriangleMesh(np.array(verts) + np.asarray(centre), np.array(tris))


def column_scene(water=(0.1, 0.1, 0.2), tank=(0.1, 0.1, 0.3), frames=(1, 3), fps=24.0) -> SceneDescription:
    """A block of water standing in the corner of an axis-aligned tank."""
    return SceneDescription(fluids=[FluidObject("Water", box_mesh([0, 0, 0], water))],
                            containers=[BoxContainer("Tank", [0, 0, 0], tank)],
                            frame_start=frames[0], frame_end=frames[1], fps=fps)
