"""The numba options every kernel module of the engine compiles with, named once.

Each kernel passes ``fastmath=`` one of these; turning one to False (IEEE-exact arithmetic) is how to
check whether a difference comes from fast math.
"""

#: The float32 pair loops of the solvers (PBF's passes, the SPH core, the hybrid's kernels): every
#: fast-math flag (reassociation and fused multiply-adds let the compiler vectorise the sums over a
#: particle's neighbours; approximate reciprocals; no NaN or infinity checks, which the per-substep
#: state check does instead).
FASTMATH = True

#: Kernel sums that must keep IEEE semantics for NaN and infinity but may be vectorised (the surface's
#: colour field and vertex averages): reassociation, no signed zeros, contraction; no approximate
#: functions.
FASTMATH_SUMS = {"reassoc", "nsz", "contract"}

#: The MAC grid's advection and pressure solve: none (its serial and parallel builds must give
#: identical results, and the SOR sweeps compare residuals against a tolerance).
FASTMATH_GRID = False
