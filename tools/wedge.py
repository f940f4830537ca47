"""Bake every combination of a few settings of one shot, each as its own task on a Dask cluster.

    .venv/bin/python tools/wedge.py SHOT.blend --set NAME=V1,V2[,...] [--set NAME@OBJECT=V1,V2 ...]
        [--scheduler ADDRESS] [--workers N] [--out FOLDER]

``NAME`` is a setting of ``Scene.surge`` (the names of the Surge properties, e.g. ``particle_spacing``,
``dynamic_viscosity``, ``solver``); ``NAME@OBJECT`` a setting of that object's ``Object.surge`` (e.g.
``normal_speed@Tap``). Values are separated by commas; a vector's components by ``:``
(``gravity=0:0:-9.81,0:0:-4``). Every combination is baked into its own folder under ``--out``
(default: ``SHOT_wedge/`` beside the shot) with the shot saved there under the combination's settings,
and ``wedge.json`` records for each its settings, cache folder, status, bake time, host and worker.

Without ``--scheduler`` a ``LocalCluster`` of ``--workers`` processes runs on this machine; with it,
the tasks go to a running cluster (``dask scheduler`` and ``dask worker`` processes; the workers need
this repository's environment and the shot's folder on a shared file system: README, "Baking on a
farm"). Running the same command again skips the combinations that completed and resumes the others
from their checkpoints. Ctrl-C cancels: running bakes stop after their current substep and keep
their frames. Exit status: 0 all complete, 1 one or more failed, 2 bad options, 3 cancelled.
"""

from __future__ import annotations

import os
import sys

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, ROOT)

from farm import wedge  # noqa: E402  (a program over the engine: ROOT on sys.path, as for engine.cli)

if __name__ == "__main__":  # LocalCluster workers start by importing this file: start nothing there
    sys.exit(wedge.main(default_root=ROOT))
