"""Writes tests/data/old_liquid_settings.blend: Surge settings of an earlier version (main at commit
e4ae97f: the viscosity in m^2/s, PBF's XSPH viscosity and kappa surface pull), with keyframes, a
driver and wedge variations. Run it in that version, with bpy:

    python make_old_liquid_settings.py <that version's source folder> <output .blend>
"""

import os
import sys
import tempfile

os.environ.setdefault("BLENDER_USER_RESOURCES", tempfile.mkdtemp())
import bpy  # noqa: E402
import addon_utils  # noqa: E402

src = sys.argv[1]  # the old source folder
out = sys.argv[2]
repos = bpy.context.preferences.extensions.repos
repos.new(name="Dev", module="dev", custom_directory=os.path.dirname(src), source="USER")
addon_utils.enable(f"bl_ext.dev.{os.path.basename(src)}", default_set=True)
bpy.ops.wm.read_homefile(use_empty=True)
sc = bpy.context.scene
sc.name = "Honey"
sc.frame_start, sc.frame_end = 1, 10
st = sc.surge
st.rest_density = 1420.0
st.viscosity = 0.00704          # honey, m^2/s
st.pbf_xsph_viscosity = 10.0
st.pbf_surface_tension = 0.3
st.keyframe_insert("viscosity", frame=1)
st.viscosity = 0.01
st.keyframe_insert("viscosity", frame=10)
st.viscosity = 0.00704
st.pbf_xsph_viscosity = 2.0
st.keyframe_insert("pbf_xsph_viscosity", frame=1)
st.pbf_xsph_viscosity = 5.0
st.keyframe_insert("pbf_xsph_viscosity", frame=10)
w = sc.surge_wedge
v = w.variations.add()
v.setting = "viscosity"
v.values = "0.000001,0.001"
v = w.variations.add()
v.setting = "pbf_xsph_viscosity"
v.values = "0.5,2"
v = w.variations.add()
v.setting = "Scene.surge.viscosity"
v.values = "0.002"

water = bpy.data.scenes.new("Water")       # viscosity never touched: the default, 1e-6 m^2/s
water.surge.particle_spacing = 0.03
oil = bpy.data.scenes.new("Oil")           # a driver on the viscosity
oil.surge.rest_density = 912.0
fc = oil.driver_add("surge.viscosity")
fc.driver.type = "SCRIPTED"
fc.driver.expression = "0.02 * 1.5"
bpy.ops.wm.save_as_mainfile(filepath=out, compress=True)
print("saved", out, os.path.getsize(out))
