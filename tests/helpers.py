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


def open_cup(radius=0.06, height=0.1, base=(0.0, 0.0, 0.0), segments=48) -> TriangleMesh:
    """A single-sided cup: a cylinder wall and a bottom disc, no thickness, open at the top."""
    bx, by, bz = base
    ang = 2 * np.pi * np.arange(segments) / segments
    ring = np.stack([bx + radius * np.cos(ang), by + radius * np.sin(ang)], -1)
    bottom = np.column_stack([ring, np.full(segments, bz)])
    top = np.column_stack([ring, np.full(segments, bz + height)])
    verts = np.concatenate([bottom, top, [[bx, by, bz]]])
    centre = 2 * segments
    tris = []
    for j in range(segments):
        k = (j + 1) % segments
        tris += [(j, k, segments + k), (j, segments + k, segments + j), (centre, k, j)]
    return TriangleMesh(verts, np.array(tris))


def quad(corner, edge_u, edge_v, n=1) -> TriangleMesh:
    """A flat, single-sided sheet: corner + s edge_u + t edge_v for s, t in [0, 1], n x n quads."""
    c, u, v = (np.asarray(a, float) for a in (corner, edge_u, edge_v))
    s = np.linspace(0.0, 1.0, n + 1)
    verts = np.array([c + a * u + b * v for a in s for b in s])
    tris = []
    for i in range(n):
        for j in range(n):
            a, b = i * (n + 1) + j, (i + 1) * (n + 1) + j
            tris += [(a, b, b + 1), (a, b + 1, a + 1)]
    return TriangleMesh(verts, np.array(tris))


def check_half_list_row(nl, i: int, want: np.ndarray, blk: np.ndarray) -> np.ndarray:
    """Assert that particle ``i``'s row of a half neighbour list ``nl`` holds, first, its neighbours of
    its own block that come after it and then every neighbour of another block (``want`` the brute-force
    (N, N) neighbour matrix, ``blk`` each particle's block); returns the row."""
    row = nl.nbr[nl.start[i]:nl.start[i] + nl.count[i]]
    local, other = row[:nl.local[i]], row[nl.local[i]:]
    js = np.nonzero(want[i])[0]
    np.testing.assert_array_equal(np.sort(local), js[(blk[js] == blk[i]) & (js > i)])
    np.testing.assert_array_equal(np.sort(other), js[blk[js] != blk[i]])
    return row
