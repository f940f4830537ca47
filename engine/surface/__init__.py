"""The liquid's surface: a closed, smoothed triangle mesh per baked frame, with per-vertex velocity.

* :mod:`.reconstruction` -- one frame of particles to one mesh (splashsurf's pipeline in Surge's own
  kernels; thin-sheet bridges and kernel-weighted vertex attributes);
* :mod:`.field` -- the kernel sums behind it: particle volumes and neighbour counts, averages at any
  points over the engine's neighbour grid, the colour field on a dense grid, the bridges' pairs;
* :mod:`.marching` and :mod:`.smoothing` -- marching cubes and the weighted Laplacian smoothing;
* :mod:`.stage` -- the surface as a stage over a particle cache (:mod:`engine.stages`): one mesh file
  per frame in ``<cache>/surface/``, re-meshed without simulating again when its settings change.
"""

from .reconstruction import SurfaceMesh, SurfaceParameters, reconstruct

__all__ = ["SurfaceMesh", "SurfaceParameters", "reconstruct"]
