"""Showcase of animated scenes: a hose carried along a path pours into a moving glass under a wind.

Builds the scene with Blender as a Python module and Surge enabled from this source tree: a hose
(a small cylinder whose bottom cap pours down at 1 m/s) follows a curved path over the table, a
single-sided glass slides along under it on keyframes, and a Wind field blows across the stream
with a keyed gust. Saves ``out/showcase_hose/surge_hose.blend``, bakes it with
``bpy.ops.surge.bake()`` (the liquid's surface meshed as frames are baked), renders frames with
Cycles on the CPU and prints the paths and how many particles are in the glass.

    .venv/bin/python tools/showcase_hose.py [--spacing 0.006] [--frames 48] [--render-frames 24 44]
        [--render-only]
"""

from __future__ import annotations

import math
import os
import sys
import tempfile

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, os.path.join(ROOT, "tools"))

from blender_session import bake_shot, enable_from_source, shot_parser  # noqa: E402  (needs sys.path above)
from demo import _material, render  # noqa: E402

import bpy  # noqa: E402


def _linear(idblock) -> None:
    """Linear interpolation for every keyframe of ``idblock`` (layered actions of Blender 5)."""
    action = idblock.animation_data.action
    curves = []
    for layer in getattr(action, "layers", []):
        for strip in layer.strips:
            for bag in strip.channelbags:
                curves += list(bag.fcurves)
    curves += list(getattr(action, "fcurves", []))
    for fc in curves:
        for key in fc.keyframe_points:
            key.interpolation = "LINEAR"


def _glass(radius: float, height: float, segments: int = 48):
    """An open cylinder with a bottom, no thickness: a single-sided glass standing on z = 0."""
    verts, faces = [], []
    for j in range(segments):
        a = 2 * math.pi * j / segments
        verts.append((radius * math.cos(a), radius * math.sin(a), 0.0))
    for j in range(segments):
        a = 2 * math.pi * j / segments
        verts.append((radius * math.cos(a), radius * math.sin(a), height))
    verts.append((0.0, 0.0, 0.0))
    for j in range(segments):
        k = (j + 1) % segments
        faces.append((j, k, segments + k, segments + j))
        faces.append((2 * segments, k, j))
    mesh = bpy.data.meshes.new("Glass")
    mesh.from_pydata(verts, [], faces)
    mesh.update()
    obj = bpy.data.objects.new("Glass", mesh)
    bpy.context.scene.collection.objects.link(obj)
    return obj


#: The glass: radius and height (m), and how far ahead of the hose (along +X, the wind) it stands.
GLASS_RADIUS, GLASS_HEIGHT = 0.065, 0.14
GLASS_LEAD = 0.015


def build_scene(spacing: float, frame_end: int) -> None:
    bpy.ops.wm.read_homefile(use_empty=True)
    scene = bpy.context.scene
    scene.frame_start, scene.frame_end = 1, frame_end
    scene.render.fps, scene.render.fps_base = 24, 1.0
    scene.unit_settings.system = "METRIC"

    # the path: a gentle arc 0.32 m above the table, from x = -0.2 to 0.3
    curve = bpy.data.curves.new("HosePath", "CURVE")
    curve.dimensions = "3D"
    spline = curve.splines.new("BEZIER")
    spline.bezier_points.add(1)
    for point, co, handle in ((spline.bezier_points[0], (-0.2, -0.04, 0.32), (-0.05, 0.06, 0.32)),
                              (spline.bezier_points[1], (0.3, 0.0, 0.30), (0.15, 0.06, 0.31))):
        point.co = co
        point.handle_left_type = point.handle_right_type = "FREE"
        point.handle_right = handle
        point.handle_left = (2 * co[0] - handle[0], 2 * co[1] - handle[1], 2 * co[2] - handle[2])
    curve.use_path = True
    curve.path_duration = frame_end
    curve.eval_time = 0.0
    curve.keyframe_insert("eval_time", frame=1)
    curve.eval_time = frame_end
    curve.keyframe_insert("eval_time", frame=frame_end)
    _linear(curve)
    path = bpy.data.objects.new("HosePath", curve)
    scene.collection.objects.link(path)

    # the hose: a 3 cm wide nozzle whose bottom cap pours straight down at 1 m/s (1.4 litres in the 2 s;
    # the glass holds 1.9)
    bpy.ops.mesh.primitive_cylinder_add(radius=0.015, depth=0.05, vertices=24, location=(0.0, 0.0, 0.0))
    hose = bpy.context.active_object
    hose.name = "Hose"
    hose.surge.role = "INFLOW"
    hose.surge.normal_speed = 0.0
    hose.surge.velocity = (0.0, 0.0, -1.0)
    follow = hose.constraints.new("FOLLOW_PATH")
    follow.target = path
    hose.data.materials.append(_material("Hose", (0.9, 0.25, 0.1), roughness=0.5))

    # the glass slides along the table under the hose: keyed every few frames where the hose is then, a
    # little ahead along the wind (+X), which carries the falling stream GLASS_LEAD further
    glass = _glass(GLASS_RADIUS, GLASS_HEIGHT)
    glass.surge.role = "COLLIDER"
    glass.surge.collider_mode = "SHELL"
    for frame in sorted(set(range(1, frame_end + 1, 6)) | {frame_end}):
        scene.frame_set(frame)
        x, y, _z = hose.matrix_world.translation
        glass.location = (x + GLASS_LEAD, y, 0.0)
        glass.keyframe_insert("location", frame=frame)
    scene.frame_set(1)
    _linear(glass)
    glass.data.materials.append(_material("Glass", (0.85, 0.93, 1.0), alpha=0.25, roughness=0.05))
    bpy.context.view_layer.objects.active = glass
    glass.select_set(True)
    bpy.ops.object.shade_smooth()

    # the table: a box container the spilled liquid stays on
    bpy.ops.mesh.primitive_cube_add(size=1.0, location=(0.05, 0.0, -0.025))
    table = bpy.context.active_object
    table.name = "Table"
    table.scale = (0.9, 0.5, 0.05)
    bpy.ops.object.transform_apply(location=False, rotation=False, scale=True)
    table.surge.role = "COLLIDER"
    table.surge.collider_mode = "SOLID"
    table.data.materials.append(_material("Wood", (0.45, 0.3, 0.18), roughness=0.7))

    # the wind blows along +X (its Z axis turned to +X) with a gust keyed from 1 to 3 and back
    bpy.ops.object.effector_add(type="WIND", location=(-0.4, 0.0, 0.2), rotation=(0.0, math.radians(90), 0.0))
    wind = bpy.context.active_object
    wind.name = "Wind"
    wind.field.flow = 1.0
    for frame, strength in ((1, 1.0), (frame_end // 2, 3.0), (frame_end, 1.0)):
        wind.field.strength = strength
        wind.field.keyframe_insert("strength", frame=frame)

    bpy.ops.object.camera_add(location=(0.05, -0.95, 0.42), rotation=(math.radians(74), 0.0, 0.0))
    scene.camera = bpy.context.active_object
    scene.camera.data.lens = 35
    bpy.ops.object.light_add(type="SUN", location=(0.0, 0.0, 2.0),
                             rotation=(math.radians(35), math.radians(-30), 0.0))
    bpy.context.active_object.data.energy = 4.0
    world = bpy.data.worlds.new("Sky")
    world.use_nodes = True
    world.node_tree.nodes["Background"].inputs["Color"].default_value = (0.55, 0.65, 0.8, 1.0)
    world.node_tree.nodes["Background"].inputs["Strength"].default_value = 0.8
    scene.world = world

    scene.surge.solver = "PBF"
    scene.surge.particle_spacing = spacing
    scene.surge.cache_directory = "//surge_cache/"
    scene.surge.use_surface_in_bake = True  # the liquid renders as its surface mesh, made as frames are baked
    # liquid that runs off the table is removed once it has fallen 20 cm
    scene.surge.use_kill_box = True
    scene.surge.kill_box_min, scene.surge.kill_box_max = (-1.0, -1.0, -0.2), (1.0, 1.0, 1.0)


def in_glass(frame: int) -> tuple[int, int]:
    """Particles in the cache at ``frame``, and how many of them lie inside the glass then."""
    import numpy as np

    sys.path.insert(0, ROOT)
    from engine.io.cache import CacheReader

    scene = bpy.context.scene
    x = CacheReader(bpy.path.abspath(scene.surge.cache_directory)).read_frame(frame)["position"]
    scene.frame_set(frame)
    p = x - np.array(bpy.data.objects["Glass"].matrix_world.translation)
    inside = (np.hypot(p[:, 0], p[:, 1]) < GLASS_RADIUS) & (p[:, 2] > 0.0) & (p[:, 2] < GLASS_HEIGHT)
    return len(x), int(inside.sum())


def main(argv=None) -> int:
    ap = shot_parser(__doc__.splitlines()[0], spacing=0.006, frames=48, out=os.path.join(ROOT, "out", "showcase_hose"))
    ap.add_argument("--render-frames", type=int, nargs="+", default=[24, 44])
    ap.add_argument("--render-only", action="store_true", help="render the .blend baked before, without baking")
    args = ap.parse_args(argv)

    out = os.path.abspath(args.out)
    if args.render_only:
        blend = os.path.join(out, "surge_hose.blend")
        enable_from_source(ROOT, tempfile.mkdtemp(prefix="surge_hose_repo_"))  # Scene.surge: the cache folder
        bpy.ops.wm.open_mainfile(filepath=blend)
    else:
        blend, bake_seconds = bake_shot(ROOT, out, "surge_hose", build_scene, args.spacing, args.frames)
        print(f"Surge showcase: baked {args.frames} frames in {bake_seconds:.1f} s")
        water = _material("Water", (0.2, 0.45, 0.9), roughness=0.15)
        for obj in (bpy.context.scene.surge.liquid_object, bpy.context.scene.surge.surface_object):
            if obj is not None:
                obj.data.materials.append(water)
        bpy.ops.wm.save_as_mainfile(filepath=blend)

    for frame in args.render_frames:
        frame = min(frame, bpy.context.scene.frame_end)
        png = os.path.join(out, f"surge_hose_{frame:03d}.png")
        render(png, frame, args.samples, args.resolution)
        count, inside = in_glass(frame)
        print(f"image: {png} ({count} particles at frame {frame}, {inside} of them in the glass)")
    print(f"blend: {blend}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
