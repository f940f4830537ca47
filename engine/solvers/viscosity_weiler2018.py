"""Implicit viscosity in physical units after Weiler, Koschier, Brand & Bender 2018, "A physically
consistent implicit viscosity solver for SPH fluids" (Computer Graphics Forum 37(2)).

The viscous term of the momentum equation, rho Dv/Dt = mu lap v, with the SPH Laplacian of their
eq. 8 (Monaghan 2005's form: pair forces along x_ij, so linear and angular momentum are conserved,
and a rigidly spinning blob of honey keeps spinning):

    lap v_i = 2 (d + 2) sum_j (m_j / rho_j) (v_ij . x_ij) / (|x_ij|^2 + 0.01 h^2) grad_i W_ij,   d = 3,

taken implicitly, backward Euler over one substep of length dt (their eq. 10-12):

    m_i v_i - dt sum_j mu_ij 2 (d + 2) V_i V_j (v_ij . x_ij) / (|x_ij|^2 + 0.01 h^2) grad_i W_ij = m_i v*_i,

V = m / rho the particle volumes and v* the velocity before viscosity. In this mass form the matrix is
symmetric and positive definite: grad_i W_ij = W'(r) x_ij / r with W' <= 0, so each pair adds the
3 x 3 block a_ij x_ij x_ij^T, a_ij = dt mu_ij 2 (d + 2) V_i V_j (-W'(r) / r) / (r^2 + 0.01 h^2) >= 0, to
rows i and j as a graph Laplacian. It is solved matrix-free by conjugate gradients with the paper's
block-Jacobi (3 x 3) preconditioner (§4), from v* as the first guess; the factors a_ij are computed
once per substep and stored, one float per listed pair. The solve stops once the residual is
:data:`TOLERANCE` of the first one (the first residual is the explicit viscous change of the substep,
so this bounds the error relative to what viscosity does, not to the speed of the liquid).

Per-particle viscosity: mu_ij is the harmonic mean 2 mu_i mu_j / (mu_i + mu_j) (the viscous stress
across an interface between two liquids is continuous, as for conductivities in series; with one
liquid it is mu).

No-slip walls (box containers and mesh colliders whose setting asks for it) take the paper's boundary
term (eq. 14) in a form that makes a linear velocity field through the wall exact whatever the
particles' arrangement next to it. For a particle at distance d from its closest no-slip wall (unit
normal n into the liquid, wall velocity v_w) and the field v = v_w + g (n . (x - x_wall)), the liquid's
own pairs give sum_j a_ij e_ij (e_ij . g) (n . e_ij) = S_i g, e_ij = x_j - x_i, which is zero in the bulk
and not next to the wall, where the particles beyond it are missing; the wall supplies the opposite:

    F_wall = -S_i (v_i - v_w) / d,   S_i = sum_j a_ij (n . e_ij) e_ij e_ij^T,

used as b_n n n^T + b_t (I - n n^T) with its normal and tangential moments, each clamped at zero (so
the wall can only brake: the matrix stays positive definite). This is the boundary of Morris, Fox &
Zhu 1997 (wall particles carrying the velocity extrapolated through the wall, -(d_b / d) v_i) with
the wall particles' share taken from the liquid's own missing half: a PBF liquid resting on a wall
sits closer to it than half a spacing, and fixed wall-particle weights then over- or under-brake the
first layer (an inclined honey film: its first layer at 0.7 or 1.4 times Nusselt's velocity). A slip
wall has no term: the liquid slides along it, held out only by the density constraint or pressure.

When the substep is short against the viscous time (``stiffness`` below :data:`EXPLICIT_LIMIT`,
water at any usual spacing), one explicit pass v = v* + M^-1 (b - A v*) replaces the solve: it
differs from the implicit step by O(s^2) and costs one pass over the pairs.

Pair terms in single precision, the conjugate-gradient scalars in double precision summed over a
fixed partition into blocks (the half list's blocks, or :data:`BLOCK` particles), so the result does
not depend on the number of threads. The passes over the pairs are in
:mod:`engine.solvers.viscosity_pairs`, the no-slip walls in :mod:`engine.solvers.viscosity_walls`; this
module holds the model and the solve.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np
from numba import njit, prange

from ..core.kernels import SUPPORT, cubic_dwdr, lattice_sum
from .viscosity_pairs import ETA2, assemble, explicit_pass, multiply
from .viscosity_walls import wall_geometry

#: 2 (d + 2) of the Laplacian (Weiler et al. 2018, eq. 8), d = 3.
LAPLACE_FACTOR = 10.0

#: The solve stops once the residual (in the norm of M^-1) is this fraction of the first one.
TOLERANCE = 1.0e-3

#: Most conjugate-gradient iterations of one solve.
MAX_ITERATIONS = 100

#: Below this viscous stiffness s = dt mu / (rho h^2) c (c: the filled lattice's sum, so that s is
#: the largest relative change of a velocity in one substep), one explicit pass replaces the solve.
EXPLICIT_LIMIT = 0.02

#: A viscosity whose stiffness s is below this fraction of the solver's own velocity smoothing per substep
#: (PBF's XSPH coefficient, the fraction of a particle's velocity relative to its neighbours' that the
#: smoothing takes away each substep) is not resolved: the smoothing's dissipation is at least twenty times
#: larger, and the pass is skipped. Water at the usual spacings: s = 7e-5 at 2.5 cm and 2 ms, against
#: 0.02 of smoothing (its viscous time at the particle scale, dx^2 / nu, is about ten minutes). With the
#: smoothing at 0 every viscosity acts.
UNRESOLVED_FRACTION = 0.05

#: Particles per block of the fixed partition of the sums (full neighbour lists).
BLOCK = 4096


def lattice_stiffness(h_factor: float) -> float:
    """c = V sum_j (-W'(r) / r) r^2 / (r^2 + 0.01 h^2) h^2 over a filled simple cubic lattice (spacing
    h / h_factor, h = 1): the viscous stiffness of a particle is s = 2 (d + 2) dt nu c / h^2."""
    h = 1.0
    dx = h / h_factor
    n = int(math.ceil(SUPPORT * h / dx)) + 1
    rng = np.arange(-n, n + 1) * dx
    gx, gy, gz = np.meshgrid(rng, rng, rng, indexing="ij")
    r = np.sqrt(gx * gx + gy * gy + gz * gz).ravel()
    r = r[(r > 0.0) & (r < SUPPORT * h)]
    g = np.array([-cubic_dwdr(float(rj), h) / rj for rj in r])
    return float(np.sum(g * r * r / (r * r + ETA2))) / lattice_sum("cubic", h, dx)


@dataclass(frozen=True)
class ViscosityModel:
    """Static parameters of the implicit viscosity: ``h_factor`` is h / dx of the solver's kernel."""

    h_factor: float
    tolerance: float       # the solve stops once the residual is this fraction of the first one
    max_iterations: int
    stiffness_unit: float  # c of lattice_stiffness


def make_model(h_factor: float, tolerance: float = TOLERANCE, max_iterations: int = MAX_ITERATIONS
               ) -> ViscosityModel:
    """A :class:`ViscosityModel` for a kernel of smoothing length ``h_factor`` particle spacings."""
    return ViscosityModel(h_factor=float(h_factor), tolerance=float(tolerance), max_iterations=int(max_iterations),
                          stiffness_unit=lattice_stiffness(h_factor))


# ----------------------------------------------------------------------------------------------
# the conjugate gradients' vector passes (the pair passes are in viscosity_pairs)


@njit(inline="always", cache=True)
def _precondition(precond, r0, r1, r2, i):
    return (precond[i, 0] * r0 + precond[i, 3] * r1 + precond[i, 4] * r2,
            precond[i, 3] * r0 + precond[i, 1] * r1 + precond[i, 5] * r2,
            precond[i, 4] * r0 + precond[i, 5] * r1 + precond[i, 2] * r2)


@njit(parallel=True, cache=True)
def start_residual(rhs, y, precond, mass, block,
                   # outputs
                   r, z, p, block_rz, block_rr):
    """r = b - A x0 (``y`` = A x0), z = P r, p = z; per block r . z and |r|^2 / M."""
    n = rhs.shape[0]
    for b in prange((n + block - 1) // block):
        rz = 0.0
        rr = 0.0
        for i in range(b * block, min(n, (b + 1) * block)):
            r0 = rhs[i, 0] - y[i, 0]
            r1 = rhs[i, 1] - y[i, 1]
            r2 = rhs[i, 2] - y[i, 2]
            z0, z1, z2 = _precondition(precond, r0, r1, r2, i)
            r[i, 0] = r0
            r[i, 1] = r1
            r[i, 2] = r2
            z[i, 0] = z0
            z[i, 1] = z1
            z[i, 2] = z2
            p[i, 0] = z0
            p[i, 1] = z1
            p[i, 2] = z2
            inv_m = 1.0 / mass[i]
            rz += np.float64(r0) * z0 + np.float64(r1) * z1 + np.float64(r2) * z2
            rr += (np.float64(r0) * r0 + np.float64(r1) * r1 + np.float64(r2) * r2) * inv_m
        block_rz[b] = rz
        block_rr[b] = rr


@njit(parallel=True, cache=True)
def cg_update(alpha, p, y, precond, mass, block,
              # outputs
              xs, r, z, block_rz, block_rr):
    """x += alpha p, r -= alpha A p, z = P r; per block r . z and |r|^2 / M."""
    n = p.shape[0]
    al = np.float32(alpha)
    for b in prange((n + block - 1) // block):
        rz = 0.0
        rr = 0.0
        for i in range(b * block, min(n, (b + 1) * block)):
            for k in range(3):
                xs[i, k] += al * p[i, k]
            r0 = r[i, 0] - al * y[i, 0]
            r1 = r[i, 1] - al * y[i, 1]
            r2 = r[i, 2] - al * y[i, 2]
            r[i, 0] = r0
            r[i, 1] = r1
            r[i, 2] = r2
            z0, z1, z2 = _precondition(precond, r0, r1, r2, i)
            z[i, 0] = z0
            z[i, 1] = z1
            z[i, 2] = z2
            rz += np.float64(r0) * z0 + np.float64(r1) * z1 + np.float64(r2) * z2
            rr += (np.float64(r0) * r0 + np.float64(r1) * r1 + np.float64(r2) * r2) / mass[i]
        block_rz[b] = rz
        block_rr[b] = rr


@njit(parallel=True, cache=True)
def cg_direction(beta, z, p):
    """p = z + beta p."""
    be = np.float32(beta)
    for i in prange(p.shape[0]):
        for k in range(3):
            p[i, k] = z[i, k] + be * p[i, k]


# ----------------------------------------------------------------------------------------------
# the solver


class ImplicitViscosity:
    """The viscosity step of a particle solver (see the module docstring).

    Call :meth:`apply` once per substep, after the solver has found the velocities v* its other
    terms give, with the neighbour list of the current positions. Holds its buffers between
    substeps (they grow with the particle count).

    Attributes
    ----------
    iterations : int
        Conjugate-gradient iterations of the last :meth:`apply` (0: the explicit pass or no viscosity).
    residual : float
        Relative residual at the end of the last solve.
    stiffness : float
        s of the last substep (largest relative velocity change one substep of viscosity can make).
    skipped : bool
        The last substep's viscosity was below what the solver's smoothing resolves (see
        :data:`UNRESOLVED_FRACTION`) and was not applied.
    """

    def __init__(self, model: ViscosityModel):
        self.model = model
        self.iterations = 0
        self.residual = 0.0
        self.stiffness = 0.0
        self.skipped = False
        self._n = -1
        self._a = np.zeros(0, dtype=np.float32)

    def _buffers(self, n: int, entries: int, block: int) -> None:
        if self._a.shape[0] < entries:
            self._a = np.empty(entries, dtype=np.float32)
        if n != self._n:
            self._n = n
            self._wall = np.zeros((n, 9), dtype=np.float32)
            self._geo = np.zeros((n, 7), dtype=np.float32)
            self._mom = np.zeros((n, 2), dtype=np.float32)
            self._pre = np.zeros((n, 6), dtype=np.float32)
            self._rhs = np.zeros((n, 3), dtype=np.float32)
            self._r = np.zeros((n, 3), dtype=np.float32)
            self._z = np.zeros((n, 3), dtype=np.float32)
            self._p = np.zeros((n, 3), dtype=np.float32)
            self._y = np.zeros((n, 3), dtype=np.float32)
        blocks = max(1, -(-n // block))
        self._dots = np.zeros((3, blocks), dtype=np.float64)

    def nbytes(self) -> int:
        if self._n < 0:
            return 0
        return int(sum(a.nbytes for a in (self._a, self._wall, self._pre, self._rhs, self._r, self._z, self._p,
                                            self._y)))

    def apply(self, x, v, h, mu, vol, mass, volume0, mass0, dt, neighbours, walls, smoothing: float = 0.0
              ) -> np.ndarray:
        """Viscosity over one substep of ``dt`` seconds: ``v`` updated in place, and returned.

        Parameters
        ----------
        x, v : ndarray, shape (N, 3), float32
            Positions (m) and velocities v* (m/s) in the neighbour list's order.
        h, mu, vol, mass : ndarray, shape (N,), float32
            Smoothing length (m), dynamic viscosity (Pa s), volume V_i / ``volume0`` and mass
            m_i / ``mass0`` of each particle.
        volume0, mass0 : float
            The reference volume (m^3) and mass (kg).
        neighbours : engine.neighbors.NeighbourList
            Pairs within the kernel support (a half list when ``neighbours.half`` > 0; entries
            farther than 2 h_ij, a Verlet list's skin, are skipped).
        walls : tuple
            ``(boxes, box_no_slip, col_no_slip, cset)``: box containers (K, 2, 3), a flag per box and
            per mesh collider (1.0 no-slip, 0.0 slip) and the colliders' kernel arguments.
        smoothing : float
            The solver's own velocity smoothing per substep (PBF's XSPH coefficient; 0 for none): a
            viscosity below :data:`UNRESOLVED_FRACTION` of it is skipped.
        """
        m = self.model
        n = x.shape[0]
        nl = neighbours
        half = nl.half > 0
        block = nl.half if half else BLOCK
        self._buffers(n, nl.nbr.shape[0], block)
        self.iterations = 0
        self.residual = 0.0
        mu_max = float(mu.max()) if n else 0.0
        if n == 0 or mu_max <= 0.0:
            self.stiffness = 0.0
            return v
        # s = 2 (d + 2) dt nu c / h^2 at the most viscous, lightest, smallest particle
        rho_min = float(np.min(mass / vol)) * mass0 / volume0
        self.stiffness = LAPLACE_FACTOR * dt * mu_max / rho_min * m.stiffness_unit / float(h.min()) ** 2
        self.skipped = self.stiffness < UNRESOLVED_FRACTION * smoothing
        if self.skipped:
            return v
        boxes, box_no_slip, col_no_slip, cset = walls
        wall_geometry(x, h, boxes, box_no_slip, col_no_slip, cset, self._geo)
        unit = LAPLACE_FACTOR * dt * volume0 * volume0 / (math.pi * mass0)
        if self.stiffness < EXPLICIT_LIMIT:
            explicit_pass(x, v, h, mu, vol, mass, self._geo, nl.start, nl.count, nl.local, nl.nbr, half, block,
                          np.float32(unit), self._r, self._mom, self._wall, self._y)
            v[:] = self._y
            return v
        assemble(x, v, h, mu, vol, mass, self._geo, nl.start, nl.count, nl.local, nl.nbr, half, block,
                 np.float32(unit), self._a, self._mom, self._wall, self._pre, self._rhs)
        xs = v  # the solution, from the start guess v*
        dots = self._dots
        multiply(x, xs, mass, self._wall, self._a, nl.start, nl.count, nl.local, nl.nbr, half, block, self._y,
                 dots[0])
        start_residual(self._rhs, self._y, self._pre, mass, block, self._r, self._z, self._p, dots[0], dots[1])
        rz = float(dots[0].sum())
        rr = float(dots[1].sum())
        target = m.tolerance * m.tolerance * rr
        rr0 = rr
        it = 0
        while rr > target and it < m.max_iterations and rz > 0.0:
            multiply(x, self._p, mass, self._wall, self._a, nl.start, nl.count, nl.local, nl.nbr, half, block,
                     self._y, dots[0])
            pap = float(dots[0].sum())
            if not pap > 0.0:
                break
            alpha = rz / pap
            cg_update(alpha, self._p, self._y, self._pre, mass, block, xs, self._r, self._z, dots[1], dots[2])
            rz_new = float(dots[1].sum())
            rr = float(dots[2].sum())
            it += 1
            if rr <= target:
                break
            cg_direction(rz_new / rz, self._z, self._p)
            rz = rz_new
        self.iterations = it
        self.residual = math.sqrt(rr / rr0) if rr0 > 0.0 else 0.0
        return xs
