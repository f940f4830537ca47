"""Several resolutions in one liquid (PBF levels fed by the per-object Spacing Factor)."""

import numpy as np
from numpy.testing import assert_allclose

from engine import assemble
from engine import settings as settings_mod
from engine.scene import BoxContainer, FluidObject, SceneDescription
from helpers import box_mesh


def test_two_spacings_settle_together():
    """A fine layer (dx = 1 cm) under a coarse one (2 cm), baked together for 0.3 s: both stay at
    rest density, the liquid keeps its height and nothing flies off."""
    lx, ly, layer = 0.12, 0.08, 0.06
    scene = SceneDescription(
        fluids=[FluidObject("Fine", box_mesh([0, 0, 0], [lx, ly, layer])),
                FluidObject("Coarse", box_mesh([0, 0, layer], [lx, ly, 2 * layer]),
                            settings=settings_mod.FluidSettings(spacing_factor=2.0))],
        containers=[BoxContainer("Tank", [0, 0, 0], [lx, ly, 0.3])], frame_start=1, frame_end=2)
    st = settings_mod.SimulationSettings(solver="PBF", particle_spacing=0.01)
    assemble.check_job(scene, st)
    spacings, levels = assemble.resolution_levels(scene, st)
    assert_allclose(spacings, [0.01, 0.02], rtol=1e-12, atol=0)
    assert levels == {("FLUID", "Fine"): 0, ("FLUID", "Coarse"): 1}
    pt, level = assemble.fill_fluids(scene, st)
    counts = np.bincount(level)
    assert list(counts) == [12 * 8 * 6, 6 * 4 * 3]
    solver = assemble.make_solver(scene, st, pt, None, level)
    t = 0.0
    while t < 0.3:
        dt = solver.stable_dt()
        solver.step(dt)
        t += dt
    p, lv = solver.particles, solver.level
    assert list(np.bincount(lv)) == list(counts)  # levels followed their particles through every reorder
    z = p.x[:, 2]
    # Interior density of each resolution (one coarse spacing away from the floor and the free
    # surface). 1.5 %: PBF stops iterating at a mean compression of 0.5 % (the default tolerance),
    # and the bottom of the column is compressed a little more than the mean.
    for lev, (lo, hi) in ((0, (0.02, 0.08)), (1, (0.02, 0.1))):
        sel = (lv == lev) & (z > lo) & (z < hi)
        assert sel.sum() > 20
        assert_allclose(np.median(p.rho[sel]), 1000.0, rtol=0.015, atol=0)
    # Together: the column keeps its height 2 * layer = 0.12 m to within one coarse spacing (a
    # gap between the layers or the two resolutions pushing each other apart would lift it) and no
    # particle flies more than two coarse spacings above it.
    top = np.percentile(z, 99)
    assert_allclose(top, 2 * layer, rtol=0, atol=0.02)
    assert z.max() < 2 * layer + 0.04
    assert np.all((p.x >= [0, 0, 0]) & (p.x <= [lx, ly, 0.3]))
    # Settling: the mean speed is below 7 % of the free-fall speed over the column, sqrt(2 g H) = 1.5 m/s.
    assert np.mean(np.linalg.norm(p.v, axis=1)) < 0.1
