"""One module per method: ``wcsph`` (Tait EOS, leap-frog; Suárez & Susín 2006, "Mesh-Particle Model for
Fluid Animation", §3), ``pbf`` (Position-Based
Fluids with the mass-aware constraints, regularised stiffness, iterative XSPH and surface tension of
Alduán, Tena & Otaduy 2015, "Efficient and Robust Position-Based Fluids for VFX", §3), ``mac`` (staggered
marker-and-cell grid; Suárez & Susín 2006, §2) and
``hybrid`` (the MAC-SPH model of Suárez & Susín 2006: the grid in the deep liquid, WCSPH near the
surface; §4 there).

Every solver has ``name``, ``model``, ``particles``, ``stable_dt()`` and ``step(dt)``; the driver
reads the speed bound of a divergence check from ``model.c0`` (WCSPH), ``model.sph.c0`` (HYBRID) or
``speed_limit`` (PBF).
"""
