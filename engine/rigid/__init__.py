"""Rigid bodies that the liquid moves and that move the liquid: crates, boats, ducks, stones.

* :mod:`.mass` -- exact mass, centre of mass and inertia of a closed mesh (Eberly 2002, Mirtich 1996);
* :mod:`.motion` -- unit quaternions and poses;
* :mod:`.bodies` -- the bodies' model (mass properties, contact samples) and state;
* :mod:`.contacts` -- contacts found on distance fields, solved by warm-started sequential impulses;
* :mod:`.world` -- :class:`~.world.RigidWorld`: a substep of the bodies beside the liquid's, checkpoints,
  cache records;
* :mod:`.coupling` -- the liquid's push on the bodies, summed from the impulses the solvers apply;
* :mod:`.trajectory` -- a baked cache's trajectories read back.

A body is also a collider of the liquid (:mod:`engine.collision`): its distance grid is sampled once from
its mesh, and its pose comes from here every substep.
"""
