"""Surge: a particle-liquid simulator for Blender.

Only register() and unregister() live here. Blender is imported inside them (and in the
submodules they import), so this package imports without Blender; the bake's child process
imports nothing but ``engine``.
"""


def _classes() -> tuple:
    """Every class Surge registers, in registration order (property groups before their users)."""
    from . import operators, panels, props

    return props.CLASSES + operators.CLASSES + panels.CLASSES


def register():
    import bpy

    from . import operators, panels, props

    for cls in _classes():
        bpy.utils.register_class(cls)
    bpy.types.Object.surge = bpy.props.PointerProperty(
        type=props.SurgeObjectSettings, name="Surge",
        description="The object's role in the Surge liquid simulation")
    bpy.types.Scene.surge = bpy.props.PointerProperty(
        type=props.SurgeSceneSettings, name="Surge",
        description="Surge liquid simulation settings and cache folder of the scene")
    bpy.types.Scene.surge_wedge = bpy.props.PointerProperty(
        type=props.SurgeWedgeSettings, name="Surge Wedge",
        description="Variations of this scene's Surge settings to bake side by side")
    bpy.types.Scene.surge_live = bpy.props.PointerProperty(
        type=props.SurgeLiveSettings, name="Surge Live",
        description="How the live session simulates this scene and draws its liquid")
    bpy.types.WindowManager.surge_bakes = bpy.props.CollectionProperty(
        type=props.SurgeBakeState, name="Surge Bakes",
        description="State of each scene's running or last Surge bake in this session (never saved)")
    for name, function in operators.HANDLERS:
        getattr(bpy.app.handlers, name).append(function)
    for header, function in panels.HEADER_DRAWS:
        header.append(function)
    panels.viewport.register()
    from .bridge import live, migrate

    migrate.register()
    live.register()


def unregister():
    import bpy

    from . import operators, panels
    from .bridge import live, migrate

    live.unregister()  # first: a running session stops, its child exits and its shared memory goes
    migrate.unregister()
    panels.viewport.unregister()
    for header, function in reversed(panels.HEADER_DRAWS):
        header.remove(function)
    for name, function in reversed(operators.HANDLERS):
        handlers = getattr(bpy.app.handlers, name)
        while function in handlers:
            handlers.remove(function)
    del bpy.types.WindowManager.surge_bakes
    del bpy.types.Scene.surge_live
    del bpy.types.Scene.surge_wedge
    del bpy.types.Scene.surge
    del bpy.types.Object.surge
    for cls in reversed(_classes()):
        bpy.utils.unregister_class(cls)
