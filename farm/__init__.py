"""Programs that spread Surge's work over a Dask cluster; no Blender in them.

* :mod:`.plan` -- a wedge's options, combinations and ``wedge.json`` (standard library only: Blender's
  process reads wedges with it too);
* :mod:`.wedge` -- every combination of a few settings baked as its own task
  (``python -m farm.wedge``, ``tools/wedge.py``);
* :mod:`.cluster_stage` -- a per-frame stage (the surface) with its frames as tasks
  (``python -m farm.cluster_stage``).

The programs run from the repository folder, where ``engine`` is importable, as the engine's own
child processes do.
"""
