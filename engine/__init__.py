"""Surge's particle-liquid engine: pure Python, numpy and numba; never imports Blender.

Where things are:

* ``settings/`` -- one typed description of every setting (units, ranges, tooltips), liquid presets;
* ``scene/`` -- what a bake simulates: the exported objects, job folders, animation, memory budget;
* ``core/`` -- particles, the cell grid, the neighbour list, the smoothing kernels, vector operations;
* ``collision/`` -- mesh colliders as distance grids, box containers as walls, their kernels;
* ``rigid/`` -- rigid bodies moved by the liquid, gravity and contacts, and pushing back on it;
* ``solvers/`` -- the shared SPH core, WCSPH, PBF and the MAC + SPH hybrid, behind one contract;
* ``sources/`` -- filling fluids, inflows, outflows and removal, force fields;
* ``surface/``, ``whitewater/`` -- stages over a baked cache (a mesh per frame; spray, foam, bubbles);
* ``io/`` -- atomic writes, the cache, its lock, checkpoints, USD files, child-process reporting;
* ``live/`` -- the live session's engine process and its shared memory;
* :mod:`.assemble` builds a simulation from a job, :mod:`.driver` runs the frame loop,
  :mod:`.cli` and :mod:`.stages` are the child processes' command lines, :mod:`.errors` the errors.

Glossary of the short symbols used inside kernels (SI units):

=======  ==========================================  ==========
symbol   meaning                                     unit
=======  ==========================================  ==========
x        particle position                           m
v        particle velocity                           m/s
a        particle acceleration                       m/s^2
rho      density                                     kg/m^3
rho0     rest density                                kg/m^3
p        pressure                                    Pa
m        particle mass                               kg
h        smoothing length (kernel support is 2h)     m
dx       particle spacing                            m
dt       time step (one substep)                     s
c0       numerical speed of sound                    m/s
P        kinematic pressure p / rho on the MAC grid  m^2/s^2
u, v, w  grid face velocities along i, j, k          m/s
l        hybrid interface height (SPH / MIXA limit)  m
=======  ==========================================  ==========

Entry points: :func:`driver.bake` (a job folder to a cache folder), ``python -m engine.cli``.
"""

__version__ = "0.1.0"
