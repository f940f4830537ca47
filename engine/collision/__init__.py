"""Colliders and containers: what keeps the liquid out of solids and inside tanks.

* :mod:`.world` -- :class:`~.world.CollisionWorld`: every mesh collider of a bake as a distance grid,
  its motion and the contact response;
* :mod:`.colliders` -- the packed collider data (record arrays) the kernels read;
* :mod:`.queries` -- the kernels: distance, velocity, free fraction and projection per particle;
* :mod:`.walls` -- box containers as continuous walls (kernel mass behind a wall);
* :mod:`.sdf` -- narrow-band signed distance grids built from triangle meshes, winding numbers.
"""
