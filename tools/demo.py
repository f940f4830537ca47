"""The demo: a dam break in a glass tank, the wave breaking on Suzanne, baked headless.

Run through ``bash tools/demo.sh`` (see the README). Builds the scene with Blender as a Python
module, enables Surge from this source tree, saves ``out/demo/surge_demo.blend``, bakes it with
``bpy.ops.surge.bake()`` exactly as a render-farm node would (the liquid's surface meshed inside the
bake, frame by frame), makes its whitewater with ``bpy.ops.surge.bake_whitewater()``, renders one
frame of the surface with Cycles on the CPU, with the water material and motion blur, to
``out/demo/surge_demo.png`` and prints both paths.

Options: ``--spacing`` (m), ``--frames`` (last frame), ``--render-frame``, ``--samples``,
``--resolution`` (percentage of 1280 x 720), ``--out`` (folder).
"""

from __future__ import annotations

import math
import os
import sys
import time

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, os.path.join(ROOT, "tools"))

from blender_session import bake_shot, shot_parser  # noqa: E402  (needs sys.path above)

import bpy  # noqa: E402


def _material(name, colour, *, alpha=1.0, roughness=0.4, transmission=0.0, ior=1.45):
    mat = bpy.data.materials.new(name)
    mat.use_nodes = True
    bsdf = mat.node_tree.nodes.get("Principled BSDF")
    bsdf.inputs["Base Color"].default_value = (*colour, 1.0)
    bsdf.inputs["Roughness"].default_value = roughness
    bsdf.inputs["Alpha"].default_value = alpha
    bsdf.inputs["Transmission Weight"].default_value = transmission
    bsdf.inputs["IOR"].default_value = ior
    return mat


def _box(name, lower, upper):
    bpy.ops.mesh.primitive_cube_add(size=1.0)
    obj = bpy.context.active_object
    obj.name = name
    obj.location = [(a + b) / 2 for a, b in zip(lower, upper)]
    obj.scale = [b - a for a, b in zip(lower, upper)]
    bpy.ops.object.transform_apply(location=False, rotation=False, scale=True)
    return obj


def build_scene(spacing: float, frame_end: int) -> None:
    bpy.ops.wm.read_homefile(use_empty=True)
    scene = bpy.context.scene
    scene.frame_start, scene.frame_end = 1, frame_end
    scene.render.fps, scene.render.fps_base = 24, 1.0
    scene.unit_settings.system = "METRIC"

    # the tank: an axis-aligned box the liquid stays inside, drawn as thin glass
    tank = _box("Tank", (0.0, -0.25, 0.0), (1.2, 0.25, 0.7))
    tank.surge.role = "COLLIDER"
    tank.surge.collider_mode = "CONTAINER"
    tank.data.materials.append(_material("Glass", (0.85, 0.93, 1.0), alpha=0.12, roughness=0.05))
    tank.display_type = "WIRE"

    # the water column against the left wall (a dam break: 0.4 m wide, 0.6 m high)
    water = _box("Water", (0.0, -0.25, 0.0), (0.4, 0.25, 0.6))
    water.surge.role = "FLUID"
    water.display_type = "WIRE"
    water.hide_render = True

    # Suzanne sits on the tank floor facing the water, in the path of the wave: a mesh collider in
    # Auto mode, which makes her a solid obstacle (her closed head does not hold the liquid). She
    # spans x 0.72-0.98 m, clear of the water column (x < 0.4 m), and y -0.21-0.21 m, inside the walls.
    bpy.ops.mesh.primitive_monkey_add(size=0.3, location=(0.85, 0.0, 0.15), rotation=(0.0, 0.0, math.radians(-90)))
    monkey = bpy.context.active_object
    monkey.name = "Suzanne"
    monkey.surge.role = "COLLIDER"
    monkey.surge.collider_mode = "AUTO"
    monkey.data.materials.append(_material("Clay", (0.8, 0.45, 0.25), roughness=0.6))
    bpy.ops.object.shade_smooth()

    # a floor under the tank, a camera and light
    bpy.ops.mesh.primitive_plane_add(size=8.0, location=(0.6, 0.0, -0.002))
    floor = bpy.context.active_object
    floor.name = "Floor"
    floor.data.materials.append(_material("Floor", (0.35, 0.35, 0.38), roughness=0.8))

    bpy.ops.object.camera_add(location=(0.6, -2.25, 1.15), rotation=(math.radians(68), 0.0, 0.0))
    scene.camera = bpy.context.active_object
    scene.camera.data.lens = 35
    bpy.ops.object.light_add(type="SUN", location=(0.0, 0.0, 3.0), rotation=(math.radians(40), math.radians(-25), 0.0))
    bpy.context.active_object.data.energy = 4.0
    world = bpy.data.worlds.new("Sky")
    world.use_nodes = True
    world.node_tree.nodes["Background"].inputs["Color"].default_value = (0.55, 0.65, 0.8, 1.0)
    world.node_tree.nodes["Background"].inputs["Strength"].default_value = 0.8
    scene.world = world

    scene.surge.solver = "PBF"
    scene.surge.particle_spacing = spacing
    scene.surge.cache_directory = "//surge_cache/"
    # the surface of every frame is meshed inside the bake; the liquid renders as that surface, with the
    # water material (refraction) and Cycles motion blur from the vertices' velocity
    scene.surge.use_surface_in_bake = True
    scene.surge.liquid_display = "SURFACE"
    scene.render.use_motion_blur = True


def render(path: str, frame: int, samples: int, percentage: int) -> None:
    scene = bpy.context.scene
    scene.render.engine = "CYCLES"
    scene.cycles.device = "CPU"
    scene.cycles.samples = samples
    scene.cycles.use_denoising = True  # refraction through the water is noisy at a few samples
    scene.cycles.transmission_bounces = scene.cycles.max_bounces = 12
    scene.render.resolution_x, scene.render.resolution_y = 1280, 720
    scene.render.resolution_percentage = percentage
    scene.render.use_stamp_filename = False  # no absolute path of the .blend in the PNG's metadata
    scene.render.image_settings.file_format = "PNG"
    scene.render.filepath = path
    scene.frame_set(frame)
    bpy.ops.render.render(write_still=True)


def main(argv=None) -> int:
    ap = shot_parser(__doc__.splitlines()[0], spacing=0.025, frames=72, out=os.path.join(ROOT, "out", "demo"))
    ap.add_argument("--render-frame", type=int, default=30)
    args = ap.parse_args(argv)

    out = os.path.abspath(args.out)
    blend, bake_seconds = bake_shot(ROOT, out, "surge_demo", build_scene, args.spacing, args.frames)
    t0 = time.perf_counter()
    bpy.ops.surge.bake_whitewater()  # spray, foam and bubbles over the baked liquid, automatic thresholds
    whitewater_seconds = time.perf_counter() - t0
    bpy.ops.wm.save_as_mainfile(filepath=blend)

    png = os.path.join(out, "surge_demo.png")
    frame = min(args.render_frame, args.frames)
    if frame != args.render_frame:
        print(f"Surge demo: the render frame {args.render_frame} lies past the last baked frame {args.frames}; "
              f"rendering frame {frame} instead (--render-frame chooses another)", flush=True)
    render(png, frame, args.samples, args.resolution)
    bpy.ops.wm.save_as_mainfile(filepath=blend)

    scene = bpy.context.scene
    depsgraph = bpy.context.evaluated_depsgraph_get()

    def points(obj):
        return len(obj.evaluated_get(depsgraph).data.points) if obj is not None else 0

    # the points are hidden behind the surface (not evaluated): count them in the cache frame
    import numpy as np

    with np.load(os.path.join(out, "surge_cache", "frames", f"frame_{frame:06d}.npz")) as z:
        count = len(z["id"])
    surface = scene.surge.surface_object
    triangles = len(surface.evaluated_get(depsgraph).data.polygons) if surface is not None else 0
    ww = scene.surge.whitewater
    print(f"Surge demo: {count} particles and a surface of {triangles} triangles at frame {frame}, baked "
          f"{args.frames} frames in {bake_seconds:.1f} s")
    print(f"Whitewater at frame {frame}: {points(ww.spray_object)} spray, {points(ww.foam_object)} foam, "
          f"{points(ww.bubbles_object)} bubbles, made in {whitewater_seconds:.1f} s ({ww.summary})")
    print(f"Suzanne acts as: {bpy.data.objects['Suzanne'].surge.collider_resolved}")
    print(f"blend: {blend}")
    print(f"image: {png}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
