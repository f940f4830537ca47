"""Surge's particle-liquid engine: pure Python, numpy and numba; never imports Blender.

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
