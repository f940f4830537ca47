"""The liquid's surface: a closed, smoothed triangle mesh per baked frame, with per-vertex velocity.

* :mod:`.reconstruction` -- one frame of particles to one mesh (pysplashsurf's reconstruction, Surge's
  thin-sheet bridges and kernel-weighted vertex attributes);
* :mod:`.stage` -- the surface as a stage over a particle cache (:mod:`engine.stages`): one mesh file
  per frame in ``<cache>/surface/``, re-meshed without simulating again when its settings change.
"""

from .reconstruction import SurfaceMesh, SurfaceParameters, reconstruct

__all__ = ["SurfaceMesh", "SurfaceParameters", "reconstruct"]
