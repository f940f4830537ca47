"""One module per method: ``wcsph`` (Tait EOS, leap-frog; seed 000 §3), ``pbf`` (Position-Based
Fluids with the mass-aware constraints, regularised stiffness, iterative XSPH and surface tension of
Alduán, Tena & Otaduy 2015; seed 004 §3), ``mac`` (staggered marker-and-cell grid; seed 000 §2) and
``hybrid`` (the MAC-SPH model of Suárez & Susín 2006: the grid in the deep liquid, WCSPH near the
surface; seed 000 §4).

Every solver has ``name``, ``model``, ``particles``, ``stable_dt()`` and ``step(dt)``; the driver
reads the speed bound of a divergence check from ``model.c0`` (WCSPH), ``model.sph.c0`` (HYBRID) or
``speed_limit`` (PBF).
"""
