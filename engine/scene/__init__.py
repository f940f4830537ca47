"""What a bake simulates: the scene's objects, their motion and animated settings, and job folders.

* :mod:`.objects` -- the scene description the host exports (meshes, fluids, inflows, outflows,
  containers, colliders, force fields), world space, SI units;
* :mod:`.job` -- a scene and its settings saved into a job folder and read back;
* :mod:`.jobcheck` -- checks of a job folder before the engine touches an array, and what a resume
  compares;
* :mod:`.animation` -- settings and meshes that change during the shot, per substep;
* :mod:`.budget` -- the memory guard run before a bake;
* :mod:`.hints` -- set-ups baked but warned about (a fluid outside every container).

The description and the job functions are re-exported here (``from engine.scene import
SceneDescription, save_job``).
"""

from .job import JOB_FORMAT_VERSION, _arrays_and_json, load_job, save_job, scene_hash
from .objects import (FIELD_FLAGS, FIELD_SHAPES, FIELD_TYPES, FIELD_VALUES, BoxContainer, FluidObject, ForceField,
                      InflowObject, MeshCollider, OutflowObject, RigidBodyObject, SceneDescription, TriangleMesh,
                      channel_names,
                      face_areas_normals, surface_flux)

__all__ = ["JOB_FORMAT_VERSION", "BoxContainer", "FIELD_FLAGS", "FIELD_SHAPES", "FIELD_TYPES", "FIELD_VALUES",
           "FluidObject", "ForceField", "InflowObject", "MeshCollider", "OutflowObject", "RigidBodyObject",
           "SceneDescription", "TriangleMesh", "_arrays_and_json", "channel_names", "face_areas_normals", "load_job",
           "save_job",
           "scene_hash", "surface_flux"]
