"""The Live panel of the Surge tab: start and stop the live session, its controls and figures, its settings.
Drawing only."""

from __future__ import annotations

import bpy

from ..bridge import live
from ..engine import settings as settings_mod

#: Live settings drawn under "Simulation" (the rest of engine.settings.LiveSettings is drawn by name below).
QUALITY = ("spacing_factor", "time_step", "max_travel", "iterations")


def live_figures(session) -> list[tuple[str, str]]:
    """(name, value) of each figure of a running session, as the panel lists them."""
    f = session.figures
    ratio = f["ratio"]
    speed = "real time" if ratio >= 0.95 else f"{ratio:.2f} x real time (slow motion)"
    return [("Status", session.status), ("Frame", str(f["frame"])), ("Particles", f"{f['particles']:,}"),
            ("Display", f"{f['fps']:.0f} fps"), ("Speed", speed),
            ("Engine", f"{f['engine_ms']:.0f} ms a frame, {f['substeps']} substeps")]


class VIEW3D_PT_surge_live(bpy.types.Panel):
    """Simulate the liquid in the viewport while you work, then bake or record what you like"""

    bl_label = "Live"
    bl_space_type = "VIEW_3D"
    bl_region_type = "UI"
    bl_category = "Surge"

    def draw(self, context):
        scene = context.scene
        settings = scene.surge_live
        layout = self.layout
        session = live.get(scene)
        row = layout.row(align=True)
        row.scale_y = 1.3
        if session is None:
            row.operator("surge.live", text="Live", icon="PLAY")
        else:
            row.operator("surge.live_stop", text="Stop", icon="CANCEL")
            row.operator("surge.live_pause", text="Run" if session.paused else "Pause",
                         icon="PLAY" if session.paused else "PAUSE")
            row.operator("surge.live_step", text="", icon="FRAME_NEXT")
            row.operator("surge.live_reset", text="", icon="FILE_REFRESH")
            row = layout.row(align=True)
            row.operator("surge.live_record", text="Stop Recording" if session.recording else "Record",
                         icon="REC", depress=session.recording)
            row.operator("surge.live_bake_from_here", icon="PHYSICS")
            grid = layout.column(align=True)
            for name, value in live_figures(session):
                line = grid.row()
                line.label(text=name)
                line.label(text=value)
            layout.label(text="Esc stops (once playback is stopped); move colliders and they push the liquid",
                         icon="INFO")
        notice = live.last_notice(scene)
        if notice:
            layout.label(text=notice, icon="ERROR" if "error" in notice.lower() or "stopped" in notice.lower()
                         else "INFO")
        col = layout.column()
        col.use_property_split = True
        col.prop(settings, "show_surface")
        sub = col.column()
        sub.active = settings.show_surface
        sub.prop(settings, "surface_radius")
        sub.prop(settings, "surface_smoothness")
        header, body = layout.panel("surge_live_settings", default_closed=True)
        header.label(text="Live Settings")
        if body is not None:
            body.use_property_split = True
            body.prop(settings, "use_scene_settings")
            quality = body.column()
            quality.active = not settings.use_scene_settings
            for name in QUALITY:
                quality.prop(settings, name)
            for p in settings_mod.live_parameters():
                if p.name not in QUALITY and p.name != "use_scene_settings":
                    body.prop(settings, p.name)


CLASSES = (VIEW3D_PT_surge_live,)
