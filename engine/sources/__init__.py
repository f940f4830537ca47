"""Where liquid comes from and goes, and what pushes it: filling FLUID objects (:mod:`.fill`),
INFLOW emitters (:mod:`.inflow`), OUTFLOW objects, lifetime and kill box (:mod:`.outflow`), and
Blender's force fields (:mod:`.forces`). :class:`engine.assemble.Sources` runs them between
substeps.
"""
