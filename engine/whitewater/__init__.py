"""Whitewater: spray, foam and air bubbles made from a baked liquid, after Ihmsen, Akinci, Gissler &
Teschner 2012, "Unified spray, foam and air bubbles for particle-based fluids" (The Visual Computer 28).

The model runs over the frames of a cache (positions and velocities are all it needs), so it can be
re-run with new settings without simulating the liquid again. Per frame:

1. **Potentials** of every liquid particle i (:func:`kernels.potentials`), each clamped to [0, 1] by
   Eq. 1, Phi(I, tau_min, tau_max) = (min(I, tau_max) - min(I, tau_min)) / (tau_max - tau_min):

   * trapped air (Eq. 2): v_i^diff = sum_j |v_ij| (1 - v^_ij . x^_ij) W(x_ij), large where liquid
     collides with liquid; W is the radially symmetric weight of Eq. 3, 1 - |x_ij| / R;
   * wave crest (Eqs. 4-7): the curvature sum_j (1 - n^_i . n^_j) W(x_ij) over the neighbours behind
     the surface (convex crests only), counted only where the velocity points along the surface
     normal (v^_i . n^_i >= 0.6, Eq. 7);
   * kinetic energy: |v_i|^2 / 2 per unit mass (the paper's m |v|^2 / 2 without the mass, so
     thresholds do not depend on the particle spacing).

2. **Emission** (Section 4): Phi_k (k_ta Phi_ta + k_wc Phi_wc) dt new particles per liquid particle
   and frame, fractions drawn at random; sampled uniformly in a cylinder of the particle radius
   around the particle, reaching |v| dt along its velocity (:func:`kernels.emit`).

3. **Classification** (Section 5) by the number of liquid particles within R: spray below 6, bubbles
   above 20, foam between (:func:`kernels.classify`).

4. **Advection** (Section 5, :func:`kernels.advance`): spray flies ballistically (with linear air
   drag, which the paper leaves out), foam moves with the liquid's velocity averaged around it,
   bubbles feel buoyancy and a drag toward the liquid's velocity. Foam dissolves when its lifetime
   runs out; the lifetime grows with the energy of the splash that made it.

Where this differs from the paper:

* the interaction radius R is two particle spacings for every part of the model;
* the potentials read the velocity field averaged over R (position-based solvers leave
  spacing-scale noise on each particle's velocity, which Eq. 2 would read as trapped air);
* potentials are computed once per cached frame (the paper: every simulation step), dt being the
  frame's duration;
* drags are rates per second, integrated exactly over the frame;
* the paper sets tau_min and tau_max by hand; the automatic thresholds (:func:`model.auto_thresholds`)
  take them from the shot's peak of each potential (the largest over its frames of what the top
  0.1 % of the liquid reaches): trapped air and wave crest from 0.6 of the peak to the peak, so only
  the shot's strongest splashes make whitewater, the energy gate from 2 % to 20 % of the peak
  energy; floors from sqrt(|g| dx) keep a liquid at rest calm. The rule is scale-free (Froude
  similarity: a shot L times larger gets thresholds sqrt(L), 1 and L times larger);
* spray that falls below all liquid is removed (nothing under it to land in);
* the paper's diffuse particles ignore solids; here they stay out of the bake's colliders and
  containers (:mod:`.obstacles`), spray that lands on one runs its lifetime down as foam does, and a
  liquid particle whose missing neighbours are a wall is not at a free surface (walls make no crests).

Glossary (kernels): ``R`` interaction radius (m), ``ta`` trapped-air potential (m/s), ``wc``
wave-crest potential (1), ``ke`` kinetic energy per mass (J/kg), ``kind`` 0 spray / 1 foam /
2 bubble, ``life`` seconds left as foam.

Modules: :mod:`.kernels` (numba), :mod:`.model` (state and one frame), :mod:`.obstacles` (colliders and
containers), :mod:`.stage` (the run over a cache folder, files and manifest).
"""

from .model import Diffuse, LiquidFrame, Thresholds, auto_thresholds, step
from .stage import run

__all__ = ["Diffuse", "LiquidFrame", "Thresholds", "auto_thresholds", "step", "run"]
