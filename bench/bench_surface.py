"""Surface stage speed against pysplashsurf's reconstruction pipeline, and its share of a bake.

The frame: frame 25 of ``bench/bench_blender.py``'s scene (a cube block of 46^3 = 97,336 particles at
dx = 0.025 m in the corner of a box container of 4 x 3 x 1.5 block edges, PBF, 24 fps), baked once
with the engine (no Blender) into ``out/bench_surface/cache`` and reused.

Both sides mesh it with the same settings: cell 0.5 dx (1 particle radius), splashsurf smoothing
length 2 particle radii (kernel support 2 dx), iso 0.6, 25 weighted smoothing passes. Surge's side is
the whole stage's mesh (``engine.surface.reconstruct``: mesh, smoothing and the per-vertex velocity);
pysplashsurf's is ``reconstruction_pipeline`` without and with its own velocity interpolation. Runs
alternate (Surge, pysplashsurf, pysplashsurf with velocity, three rounds) in one process; medians of 3.

    .venv/bin/python bench/bench_surface.py                 # throughputs, quality figures, and a 1 s bake
                                                            # with the stage inside (its share of the time)
    .venv/bin/python bench/bench_surface.py --skip-bake-ratio   # without the bake
    .venv/bin/python bench/bench_surface.py --bake-twice    # + the same bake without the stage
    .venv/bin/python bench/bench_surface.py --million       # + memory of meshing a 1,000,000-particle frame

Prints figures, asserts nothing.
"""

from __future__ import annotations

import argparse
import os
import statistics
import subprocess
import sys
import tempfile
import time

import numpy as np

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, ROOT)

from engine import driver, stages  # noqa: E402
from engine.io.cache import CacheReader  # noqa: E402
from engine.scene import BoxContainer, FluidObject, SceneDescription, TriangleMesh, save_job  # noqa: E402
from engine.settings import SimulationSettings, SurfaceSettings  # noqa: E402
from engine.surface import SurfaceParameters, reconstruct  # noqa: E402
from engine.surface.reconstruction import edge_use_counts, enclosed_volume  # noqa: E402
from engine.surface.stage import SurfaceStage  # noqa: E402

DX = 0.025
FRAME = 25


def _box(lower, upper) -> TriangleMesh:
    lo, hi = np.asarray(lower, float), np.asarray(upper, float)
    v = np.array([[hi[0] if i & 1 else lo[0], hi[1] if i & 2 else lo[1], hi[2] if i & 4 else lo[2]] for i in range(8)])
    quads = [(0, 2, 3, 1), (4, 5, 7, 6), (0, 1, 5, 4), (2, 6, 7, 3), (0, 4, 6, 2), (1, 3, 7, 5)]
    tris = [t for a, b, c, d in quads for t in ((a, b, c), (a, c, d))]
    return TriangleMesh(v, np.array(tris))


def scene(n: int, frames: int) -> SceneDescription:
    edge = n * DX
    return SceneDescription(fluids=[FluidObject("Block", _box([0, 0, 0], [edge] * 3))],
                            containers=[BoxContainer("Tank", [0, 0, 0], [4 * edge, 3 * edge, 1.5 * edge])],
                            frame_start=1, frame_end=frames, fps=24.0)


def bench_frame(cache: str, n: int) -> dict:
    """Frame 25 of the scene, baked once into ``cache``."""
    try:
        reader = CacheReader(cache)
        if FRAME in reader.frames:
            return reader.read_frame(FRAME)
    except Exception:  # noqa: BLE001 - no usable cache yet: bake it
        pass
    print(f"baking the scene's first {FRAME} frames into {cache} (once)", flush=True)
    driver.bake(scene(n, FRAME), SimulationSettings(particle_spacing=DX), cache)
    return CacheReader(cache).read_frame(FRAME)


def params(full: bool = True, **kw) -> SurfaceParameters:
    """The stage's parameters at the settings' defaults; ``full`` False leaves out the anisotropic kernels
    and the small drops (the pipeline splashsurf runs)."""
    s = SurfaceSettings()
    base = dict(particle_spacing=DX, cell_size=s.surface_cell_size * DX, kernel_radius=s.surface_kernel_radius * DX,
                iso=s.surface_iso, smoothing_iterations=s.surface_smoothing_iterations)
    if full:
        base.update(collider_mode=s.surface_collider_mode, collider_offset=s.surface_collider_offset * DX,
                    anisotropic=s.surface_anisotropic, max_stretch=s.surface_max_stretch,
                    centre_smoothing=s.surface_centre_smoothing, isolated=s.surface_isolated,
                    drop_particles=s.surface_drop_particles)
    base.update(kw)
    return SurfaceParameters(**base)


def solids_of(n: int, frame: dict):
    """The scene's box container as the surface meets it (:class:`engine.surface.solids.Solids`)."""
    from engine.surface.solids import Solids

    solids = Solids(scene(n, FRAME), SimulationSettings(particle_spacing=DX), frame["position"])
    solids.set_frame(FRAME)
    return solids


def splashsurf(x: np.ndarray, v: np.ndarray | None):
    import pysplashsurf

    r = 0.5 * DX
    mesh, _ = pysplashsurf.reconstruction_pipeline(
        x, particle_radius=r, rest_density=1000.0, smoothing_length=2.0, cube_size=1.0, iso_surface_threshold=0.6,
        mesh_smoothing_iters=25, mesh_smoothing_weights=True, subdomain_grid=True,
        attributes_to_interpolate=None if v is None else {"velocity": v})
    return np.asarray(mesh.mesh.vertices), np.asarray(mesh.mesh.triangles)


def describe(name: str, vertices, triangles) -> None:
    counts = edge_use_counts(triangles)
    closed = bool(len(counts)) and bool(np.all(counts == 2))
    v = np.asarray(vertices, np.float64)
    t = np.asarray(triangles, np.int64)
    area = 0.5 * np.linalg.norm(np.cross(v[t[:, 1]] - v[t[:, 0]], v[t[:, 2]] - v[t[:, 0]]), axis=1).sum()
    print(f"  {name:34s} {len(v):9,d} vertices {len(t):9,d} triangles, closed {closed}, "
          f"volume {enclosed_volume(v, t) * 1e3:8.3f} L, area {area:7.4f} m2")


def mesh_path(frame: dict, p: SurfaceParameters, solids) -> str:
    """Mesh the frame once and say which path meshed it: Surge's dense grid, or (a box of more points than
    ``engine.surface.reconstruction.dense_limit``) splashsurf's sparse grid, which leaves out the stretched
    kernels and the meeting with the solids."""
    import logging

    class Count(logging.Handler):
        sparse = 0

        def emit(self, record):
            Count.sparse += "sparse grid" in record.getMessage()

    log = logging.getLogger("engine.surface.reconstruction")
    handler, level = Count(), log.level
    log.addHandler(handler)
    log.setLevel(logging.INFO)
    try:
        reconstruct(frame, p, solids)
    finally:
        log.removeHandler(handler)
        log.setLevel(level)
    return ("splashsurf's sparse grid (the box is over the dense limit: no stretched kernels, no meeting)"
            if Count.sparse else "Surge's dense grid")


def timing(args, frame: dict) -> None:
    x = np.ascontiguousarray(frame["position"], np.float32)
    v = np.ascontiguousarray(frame["velocity"], np.float32)
    n = len(x)
    p, plain = params(), params(full=False)
    solids = solids_of(args.n, frame)
    runs = {"surge": [], "surge (round, no colliders)": [], "splashsurf": [], "splashsurf+velocity": []}
    cpu = {k: [] for k in runs}
    paths = {}
    for name, q, so in (("surge", p, solids), ("surge (round, no colliders)", plain, None)):
        paths[name] = mesh_path(frame, q, so)  # (and compiles or loads Surge's kernels)
    splashsurf(x, None)
    out = {}

    def run(name, fn):
        t0, c0 = time.perf_counter(), time.process_time()
        result = fn()
        runs[name].append(time.perf_counter() - t0)
        cpu[name].append(time.process_time() - c0)
        return result

    for _ in range(args.repeat):
        mesh = run("surge", lambda: reconstruct(frame, p, solids))
        out["surge"] = (mesh.vertices, mesh.triangles)
        mesh = run("surge (round, no colliders)", lambda: reconstruct(frame, plain))
        out["surge (round, no colliders)"] = (mesh.vertices, mesh.triangles)
        out["splashsurf"] = run("splashsurf", lambda: splashsurf(x, None))
        run("splashsurf+velocity", lambda: splashsurf(x, v))
    print(f"frame {FRAME}: {n:,} particles, cell {p.cell_size * 1e3:.1f} mm, kernel support {p.kernel_radius * 1e3:.1f}"
          f" mm, iso {p.iso}, {p.smoothing_iterations} smoothing passes; medians of {args.repeat}, alternating; Surge "
          f"with the default settings (meshing against the box container, anisotropic kernels, small drops to the "
          f"spray) and without them")
    med = {k: statistics.median(t) for k, t in runs.items()}
    mcpu = {k: statistics.median(t) for k, t in cpu.items()}
    for k, t in runs.items():
        print(f"  {k:30s} {med[k]:7.3f} s/frame  {n / med[k]:10,.0f} particles/s   "
              f"(runs {', '.join(f'{s:.3f}' for s in t)}; CPU {mcpu[k]:.3f} s)")
    for name, path in paths.items():
        print(f"  {name}: {path}")
    for name in ("surge", "surge (round, no colliders)"):
        print(f"  {name} / pysplashsurf throughput: {med['splashsurf'] / med[name]:.2f}x without its velocity, "
              f"{med['splashsurf+velocity'] / med[name]:.2f}x with (wall time); by CPU time "
              f"{mcpu['splashsurf'] / mcpu[name]:.2f}x and {mcpu['splashsurf+velocity'] / mcpu[name]:.2f}x")
    describe("Surge", *out["surge"])
    describe("Surge (round, no colliders)", *out["surge (round, no colliders)"])
    describe("pysplashsurf", *out["splashsurf"])
    a, b = (np.asarray(out[k][0], np.float32) for k in ("surge (round, no colliders)", "splashsurf"))
    d = np.concatenate([nearest_distances(a, b), nearest_distances(b, a)])
    print(f"  nearest-vertex distance between Surge's round-kernel mesh and pysplashsurf's (3,000 samples): median "
          f"{np.median(d) / p.cell_size:.3f}, 99th percentile {np.percentile(d, 99) / p.cell_size:.3f}, max "
          f"{d.max() / p.cell_size:.3f} cells")
    phases(frame, p, solids)
    usd_overlap(frame, p, solids)


def phases(frame: dict, p: SurfaceParameters, solids) -> None:
    """Where Surge's stage spends a frame (one run each)."""
    from engine.io import usd
    from engine.surface import field as fld
    from engine.surface import reconstruction as rec
    from engine.surface.marching import marching_cubes
    from engine.surface.smoothing import smooth

    x = np.ascontiguousarray(frame["position"], np.float32)
    t = {}

    cpu = {}

    def step(name, fn, *a, **kw):
        t0, c0 = time.perf_counter(), time.process_time()
        out = fn(*a, **kw)
        t[name] = time.perf_counter() - t0
        cpu[name] = time.process_time() - c0
        return out

    from engine.surface import anisotropy as an
    from engine.settings.surface import meeting_distance
    from engine.surface.solids import project_vertices, wall_planes

    particles = step("neighbour grid (engine.core.cell_grid)", fld.ParticleGrid.build, x, p.kernel_radius)
    sums = step("particle volumes and neighbour counts", rec.particle_sums, particles)
    clusters = step("small clusters (drops, spray)", rec.small_clusters, particles, sums.count, p.drop_particles)
    keep = clusters < 0
    kernels = step("anisotropy: moments, shapes, centres", rec.field_particles, particles, sums, p, keep)
    plain = np.ones(len(kernels.x), np.bool_)
    plain[kernels.shapes.index] = False
    lo, hi = an.ellipsoid_bounds(kernels.x, kernels.shapes)
    grid = fld.DenseGrid.spanning(np.minimum(lo, kernels.x.min(0) - p.kernel_radius),
                                  np.maximum(hi, kernels.x.max(0) + p.kernel_radius), p.cell_size)
    values = step(f"colour field, round kernels ({grid.points / 1e6:.1f}M grid points)", fld.colour_field,
                  kernels.x[plain], kernels.volume[plain], grid, p.kernel_radius)
    step(f"colour field, {len(kernels.shapes.index):,} stretched kernels", an.add_ellipsoids, values, grid,
         kernels.x, kernels.volume, kernels.shapes, p.kernel_radius)
    meet = meeting_distance(p.collider_mode, p.collider_offset)
    step("meeting the colliders (field)", rec.meet_field, values.values, values.row_lo, values.row_hi, grid.origin,
         p.cell_size, p.iso, solids, meet, p.particle_spacing)
    raw, triangles = step("marching cubes", marching_cubes, values.values, p.iso, grid.origin, p.cell_size,
                          values.row_lo, values.row_hi)
    walls = step("vertices on the walls", wall_planes, raw, solids, meet, p.cell_size)
    weights = step("smoothing weights", rec.smoothing_weights, particles, sums, raw)
    vertices = step(f"{p.smoothing_iterations} smoothing passes", smooth, raw, triangles, weights,
                    p.smoothing_iterations, walls=walls)
    vertices = step("vertices onto the walls", project_vertices, vertices, walls[:, 3] > -np.inf, solids, meet)
    vals = particles.sorted(frame["velocity"])
    velocity = step("vertex velocity", fld.point_averages, particles, vertices, vals)
    with tempfile.TemporaryDirectory() as tmp:
        t0 = time.perf_counter()
        with open(os.path.join(tmp, "m.npz"), "wb") as fh:
            np.savez(fh, vertices=vertices, triangles=triangles, velocity=velocity)
        t["npz file"] = time.perf_counter() - t0
        try:
            usd.ensure_pxr()
            usd.write_mesh(os.path.join(tmp, "w.usdc"), vertices[:3], triangles[:1], {}, FRAME)  # pxr's first call
            t0 = time.perf_counter()
            usd.write_mesh(os.path.join(tmp, "m.usdc"), vertices, triangles, {"velocity": velocity}, FRAME)
            t["USD file (written while the next frame is meshed)"] = time.perf_counter() - t0
        except OSError as exc:
            print(f"  (no USD timing: {exc})")
    print(f"  phases of Surge's stage (one run, {sum(t.values()):.3f} s wall, {sum(cpu.values()):.3f} s CPU):")
    for k, s in t.items():
        print(f"    {k:50s} {s:7.3f} s wall {cpu.get(k, s):7.3f} s CPU")


def usd_overlap(frame: dict, p: SurfaceParameters, solids) -> None:
    """Frames meshed one after the other with their USD files written in line and written on the stage's
    thread while the next frame is meshed (``engine.surface.stage``), four frames each, alternating."""
    from engine.surface.stage import SurfaceStage

    from engine.io import usd

    usd.ensure_pxr()
    times = {False: [], True: []}
    with tempfile.TemporaryDirectory() as tmp:
        for _round in range(2):
            for overlap in (False, True):
                stage = SurfaceStage(SurfaceSettings(), DX, 1000.0, use_usd=True, overlap_writes=overlap)
                stage.begin(tmp, {}, resumed=False)
                stage.solids = solids
                t0 = time.perf_counter()
                for f in range(4):
                    stage.process_frame(FRAME, frame, tmp)
                stage.end("complete")
                times[overlap].append((time.perf_counter() - t0) / 4)
    a, b = min(times[False]), min(times[True])
    print(f"  stage with its USD file, per frame (best of 2 runs of 4 frames): written in line {a:.3f} s, "
          f"written while the next frame is meshed {b:.3f} s ({100 * (a - b) / a:.0f} % less)")


def nearest_distances(a: np.ndarray, b: np.ndarray, samples: int = 1500) -> np.ndarray:
    """Distance from ``samples`` vertices of ``a`` (evenly picked) to the nearest vertex of ``b`` (brute force)."""
    pick = a[np.linspace(0, len(a) - 1, samples).astype(np.int64)].astype(np.float64)
    bb = b.astype(np.float64)
    out = np.empty(len(pick))
    for i in range(0, len(pick), 50):
        d = ((pick[i:i + 50, None, :] - bb[None]) ** 2).sum(axis=2)
        out[i:i + 50] = np.sqrt(d.min(axis=1))
    return out


def bake_ratio(args) -> None:
    """Wall time of a 1 s bake (24 frames) with the surface stage inside it, split into the particle
    bake and the stage (the stage runs in the bake's loop, after each frame is written, so the time it
    adds to the bake is its own); ``--bake-twice`` also bakes without the stage, one after the other."""
    sc = scene(args.n, 25)
    settings = SimulationSettings(particle_spacing=DX)
    with tempfile.TemporaryDirectory() as tmp:
        driver.bake(SceneDescription(**{**sc.__dict__, "frame_end": 2}), settings, os.path.join(tmp, "warm"))
        plain = None
        if args.bake_twice:
            t0 = time.perf_counter()
            driver.bake(sc, settings, os.path.join(tmp, "plain"))
            plain = time.perf_counter() - t0
        cache = os.path.join(tmp, "with")
        stage = SurfaceStage(SurfaceSettings(), DX, 1000.0, job_dir=os.path.join(tmp, "job"))
        save_job(os.path.join(tmp, "job"), sc, settings)
        events = []
        progress = stages.follow_bake(cache, [stage], events.append)
        t0 = time.perf_counter()
        driver.bake(sc, settings, cache, progress=progress)
        progress.finish("complete")
        both = time.perf_counter() - t0
    surface = sum(e.get("surface_seconds", 0.0) for e in events if e.get("event") == "frame")
    frames = sum(1 for e in events if e.get("event") == "frame")
    particles = both - surface
    print(f"bake of {args.n ** 3:,} particles, 1 s at 24 fps (engine, no Blender), the surface meshed inside it: "
          f"{both:.1f} s, of which {particles:.1f} s the particles and {surface:.1f} s the surface stage "
          f"({frames} frames): the stage adds {100 * surface / particles:.0f} % to the particle bake's time")
    if plain is not None:
        print(f"  the same bake without the surface, just before: {plain:.1f} s (+{100 * (both - plain) / plain:.0f} % "
              f"wall time with it)")


def million(args) -> None:
    """Peak memory of meshing a 1,000,000-particle frame, in a fresh process."""
    code = f"""
import sys, numpy as np
sys.path.insert(0, {ROOT!r})
from engine.surface import SurfaceParameters, reconstruct
def hwm():
    for line in open('/proc/self/status'):
        if line.startswith('VmHWM'):
            return int(line.split()[1]) * 1024
def rss():
    for line in open('/proc/self/status'):
        if line.startswith('VmRSS'):
            return int(line.split()[1]) * 1024
dx = 0.01
g = np.stack(np.meshgrid(*[np.arange(100) * dx] * 3, indexing='ij'), -1).reshape(-1, 3).astype(np.float32)
frame = {{'position': g, 'velocity': np.ones_like(g)}}
from engine.scene import BoxContainer, SceneDescription
from engine.settings import SimulationSettings
from engine.surface.solids import Solids
p = SurfaceParameters(particle_spacing=dx, cell_size=0.5 * dx, kernel_radius=2 * dx, anisotropic=True,
                      isolated='SPRAY', drop_particles=3)
solids = Solids(SceneDescription(containers=[BoxContainer('Tank', [-dx / 2] * 3, [2.0, 2.0, 2.0])]),
                SimulationSettings(particle_spacing=dx), g)
solids.set_frame(1)
small = {{'position': g[:1000], 'velocity': frame['velocity'][:1000]}}
reconstruct(small, p, solids)
base = rss()
m = reconstruct(frame, p, solids)
print(len(g), base, hwm(), len(m.vertices), len(m.triangles))
"""
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout.split()
    n, base, peak, nv, nt = map(int, out)
    print(f"1,000,000-particle block in a box container (colliders, anisotropy, spray): {nv:,} vertices, "
          f"{nt:,} triangles; peak {peak / 2**20:.0f} MiB, "
          f"{(peak - base) / n:.0f} bytes per particle above the loaded frame and compiled kernels")


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--n", type=int, default=46, help="particles along the block's edge")
    ap.add_argument("--repeat", type=int, default=3)
    ap.add_argument("--cache", default=os.path.join(ROOT, "out", "bench_surface", "cache"))
    ap.add_argument("--skip-bake-ratio", action="store_true", help="leave out the 1 s bake")
    ap.add_argument("--bake-twice", action="store_true", help="also bake the 1 s without the surface")
    ap.add_argument("--million", action="store_true")
    ap.add_argument("--skip-timing", action="store_true")
    args = ap.parse_args(argv)
    if hasattr(os, "getloadavg"):
        print("load average (1, 5, 15 min): " + ", ".join(f"{v:.1f}" for v in os.getloadavg())
              + f" on {os.cpu_count()} cores", flush=True)
    if not args.skip_timing:
        timing(args, bench_frame(args.cache, args.n))
    if not args.skip_bake_ratio:
        bake_ratio(args)
    if args.million:
        million(args)
    return 0


if __name__ == "__main__":
    sys.exit(main())
