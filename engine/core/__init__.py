"""The particle machinery every solver and stage shares.

* :mod:`.particles` -- structure-of-arrays particle storage that grows and shrinks, with stable ids
  (:mod:`.particle_rows`: its parallel row gathers);
* :mod:`.cell_grid` -- the Morton-sorted cell grid (unbounded) and its neighbour-cell table;
* :mod:`.neighbour_list` -- each particle's neighbours within the kernel support, from the grid;
* :mod:`.kernels` -- the smoothing kernels (the one cubic spline) and their lattice tables;
* :mod:`.vector_ops` -- LLVM vector operations of the neighbour search;
* :mod:`.state_check` -- the per-substep finiteness and speed check.
"""
