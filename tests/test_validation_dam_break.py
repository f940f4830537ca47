"""Dam break against Martin & Moyce (1952), Table 2 (n^2 = 2), quasi-2D, WCSPH and PBF.

Reference: ``tests/data/mm1952_front_n2eq2_table2.csv`` (front Z = z/a against
T = t sqrt(2 g / a)). Scene: a column a = 0.1 m wide and 2a high against the left wall of a tank
6a long, a slab 4 particles thick between free-slip walls, default settings of each solver
(WCSPH: continuity density, automatic c0, alpha 0.02, h = 1.2 dx; PBF: 4 iterations, 0.5 % density tolerance, 2 ms
substeps, XSPH 0.02), spacing a/20 for the acceptance and a coarser or finer one for convergence. Front: the largest x
among
particles within 2 dx of the floor. Time origin: the experiment's t = 0 is the rupture of a paper
diaphragm, which is not instantaneous; following the validation guide (Lethe's
``time_correction``) simulated times are shifted by +0.175 in T before comparison.
"""

import io
import os

import numpy as np
import pytest

from engine import driver
from engine.io.cache import CacheReader
from engine.scene import BoxContainer, FluidObject, SceneDescription
from engine.settings import SimulationSettings
from helpers import box_mesh

REFERENCE = os.path.join(os.path.dirname(__file__), "data", "mm1952_front_n2eq2_table2.csv")
TIME_SHIFT = 0.175


def _reference():
    with open(REFERENCE, encoding="utf-8") as fh:
        text = "".join(line for line in fh if not line.startswith("#"))
    ref = np.genfromtxt(io.StringIO(text), delimiter=",", names=True)
    return ref["Z"][1:], ref["T_ocellaris"][1:]  # the first row is the initial condition


def _front_errors(solver, res, cache_dir):
    """Bake the n^2 = 2 collapse at spacing a / res; signed relative front errors at Table 2's T."""
    a, g = 0.1, 9.81
    dx = a / res
    slab = 4 * dx
    fps = 200.0
    t_scale = np.sqrt(2 * g / a)
    scene = SceneDescription(
        fluids=[FluidObject("Column", box_mesh([0, 0, 0], [a, slab, 2 * a]))],
        containers=[BoxContainer("Tank", [0, 0, 0], [6 * a, slab, 2.5 * a])],
        frame_start=0, frame_end=int(3.4 / t_scale * fps) + 1, fps=fps)
    driver.bake(scene, SimulationSettings(solver=solver, particle_spacing=dx), str(cache_dir))
    r = CacheReader(str(cache_dir))
    t_sim, z_sim = [], []
    for f in r.frames:
        x = r.read_frame(f)["position"]
        t_sim.append(f / fps * t_scale + TIME_SHIFT)
        z_sim.append(x[x[:, 2] < 2 * dx, 0].max() / a)
    z_ref, t_ref = _reference()
    z_at = np.interp(t_ref, t_sim, z_sim)
    return (z_at - z_ref) / z_ref


@pytest.mark.slow
def test_wcsph_surge_front_follows_martin_moyce_and_converges(tmp_path):
    fine = _front_errors("WCSPH", 20, tmp_path / "fine")
    coarse = _front_errors("WCSPH", 12, tmp_path / "coarse")
    # Seen at a/20: RMS 2.6 %, max 8.7 % (at the first point, T = 0.41, where the front has moved
    # only 0.1a = 2 dx and one particle spacing is 5 % of Z), with the column starting at its
    # hydrostatic density (2.9 % and 9.6 % from rho0; summation density: RMS 3.4 %, max 9.9 %). The
    # validation guide proposes <= 10 % per point and 5-7 % RMS; 5 % RMS is the tighter end of that.
    assert np.sqrt(np.mean(fine ** 2)) <= 0.05
    assert np.all(np.abs(fine) <= 0.10)
    # Convergence. Seen at a/12: RMS 3.4 %, max 10.7 % (the whole front lags by 1-3 %; from rho0:
    # 4.0 % and 11.5 %; summation density: RMS 5.6 %, max 11.9 %, lagging by 3-7 %). The finer run must be no worse,
    # within 0.5 %
    # for the wiggle of one front particle.
    assert np.sqrt(np.mean(fine ** 2)) <= np.sqrt(np.mean(coarse ** 2)) + 0.005
    assert np.max(np.abs(fine)) <= np.max(np.abs(coarse)) + 0.005


@pytest.mark.slow
def test_pbf_surge_front_follows_martin_moyce_and_converges(tmp_path):
    fine = _front_errors("PBF", 30, tmp_path / "fine")
    coarse = _front_errors("PBF", 20, tmp_path / "coarse")
    # Acceptance at a/30, the stated resolution (as the issue asks: <= 10 % at every tabulated point,
    # <= 7 % RMS; 5 % RMS here, the tighter end of the guide's 5-7 %). Seen at a/30: RMS 3.2 %, max
    # 9.9 % at the first point (T = 0.41, where the front has moved only 0.1a = 3 dx). The coarser
    # a/20 run serves the convergence check (seen: RMS 3.2 %, max 10.8 % at the first point).
    assert np.sqrt(np.mean(fine ** 2)) <= 0.05
    assert np.all(np.abs(fine) <= 0.10)
    assert np.sqrt(np.mean(coarse ** 2)) <= 0.07
    # convergence: the finer run no worse than the coarser, within 0.5 % (one front particle)
    assert np.sqrt(np.mean(fine ** 2)) <= np.sqrt(np.mean(coarse ** 2)) + 0.005
    assert np.max(np.abs(fine)) <= np.max(np.abs(coarse)) + 0.005
