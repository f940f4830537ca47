"""The pair sums of the PBF passes over cluster pairs (:mod:`engine.solvers.pbf_cluster_passes`), as LLVM
vector code on the lane helpers of :mod:`engine.core.cluster_lanes`.

Each function walks the list entries of one cluster c of a :class:`engine.core.cluster_list.ClusterList`
and computes the 16 particle pairs of an entry (c's four particles and a quad of neighbours) in one
vector step (after Páll & Hess 2013, "A flexible algorithm for calculating pair interactions on SIMD
architectures", §3): c's rows are one 64-byte load, the quad's four 16-byte loads, spread over the lanes
by shuffles; the pairs outside the entry's mask get nothing. The entries before ``tmid`` are local pairs
of a half list: the quad's particles get their shares too, summed over c's particles
(:func:`engine.core.cluster_lanes.sum_over_i`) and added to each one's row in one 16-byte
read-modify-write.

Fast-math arithmetic, as the particle-list passes of :mod:`engine.solvers.pbf_lanes` (a reciprocal
square root estimate refined by one Newton step; sums in any order): the cubic spline of
:func:`engine.core.kernels.cubic_w` in units of q = r / h, w(q) = (2 - q)+^3 / 4 - (1 - q)+^3, and its
slope -w'(q) / q = 3 - 2.25 q below q = 1, 0.75 (2 - q)^2 / q above (0 from q = 2), compared with them in
float64 by the tests. A squared distance below 1e-30 counts as 1e-30 (a particle with itself: w = 1,
and no push, x_i - x_i = 0).
"""

from __future__ import annotations

from llvmlite import ir
from numba import types
from numba.extending import intrinsic

from ..core.cluster_lanes import (F32X4, F32X16, _indices, cluster_row, const, emit_loop, i_lanes,
                                  j_lanes, lane_mask, rows_over_i, rows_over_j, sum_over_i, sum_over_j)
from ..core.vector_ops import _I32, _I64, _is

_FAST = ("fast",)
_ZERO = ir.Constant(F32X16, None)


def _splat16(builder, value):
    one = builder.insert_element(_ZERO, value, ir.Constant(_I32, 0))
    return builder.shuffle_vector(one, _ZERO, ir.Constant(ir.VectorType(_I32, 16), None))


def _relu(builder, v):
    return builder.select(builder.fcmp_ordered(">", v, _ZERO), v, _ZERO)


class _Spline:
    """The cubic spline of the 16 pairs of cluster i's particles (their coordinates in the lanes,
    ``xi``) and cluster j's (``row_j``): offsets d = x_i - x_j, 1 / r, q, (2 - q)+ and (1 - q)+."""

    def __init__(self, builder, xi, row_j, inv_h):
        f = _FAST
        self.builder = builder
        self.d = [builder.fsub(xi[k], j_lanes(builder, row_j, k), flags=f) for k in range(3)]
        r2 = builder.fmul(self.d[0], self.d[0], flags=f)
        for k in (1, 2):
            r2 = builder.fadd(r2, builder.fmul(self.d[k], self.d[k], flags=f), flags=f)
        tiny = const(1e-30)
        r2 = builder.select(builder.fcmp_ordered(">", r2, tiny), r2, tiny)
        sqrt = builder.module.declare_intrinsic("llvm.sqrt.v16f32", fnty=ir.FunctionType(F32X16, [F32X16]))
        self.ir = builder.fdiv(const(1.0), builder.call(sqrt, [r2], fastmath=f), flags=f)
        self.q = builder.fmul(builder.fmul(r2, self.ir, flags=f), inv_h, flags=f)
        self.tt = _relu(builder, builder.fsub(const(2.0), self.q, flags=f))
        self.ss = _relu(builder, builder.fsub(const(1.0), self.q, flags=f))

    def w(self):
        """w(q) = (2 - q)+^3 / 4 - (1 - q)+^3."""
        b, f = self.builder, _FAST
        tt2 = b.fmul(self.tt, self.tt, flags=f)
        ss2 = b.fmul(self.ss, self.ss, flags=f)
        return b.fsub(b.fmul(b.fmul(const(0.25), tt2, flags=f), self.tt, flags=f), b.fmul(ss2, self.ss, flags=f),
                      flags=f)

    def slope(self, h):
        """-w'(q) / q: 3 - 2.25 q below q = 1, else 0.75 (2 - q)+^2 h / r (no cancellation near q = 0)."""
        b, f = self.builder, _FAST
        inner = b.fsub(const(3.0), b.fmul(const(2.25), self.q, flags=f), flags=f)
        outer = b.fmul(b.fmul(b.fmul(const(0.75), b.fmul(self.tt, self.tt, flags=f), flags=f), self.ir, flags=f), h,
                       flags=f)
        return b.select(b.fcmp_ordered("<", self.q, const(1.0)), inner, outer)


def _entry(builder, ndata, mdata, t, data):
    """The four neighbours j_b = nbr[t, b] of entry t (int64), their 16-byte rows of ``data`` as one
    16-lane vector (row b in lanes 4 b to 4 b + 3: the layout of a cluster's rows), and the entry's pair
    mask as 16 booleans."""
    quad = builder.load(builder.bitcast(builder.gep(ndata, [builder.shl(t, ir.Constant(_I64, 2))]),
                                        ir.VectorType(_I32, 4).as_pointer()), align=4)
    js = [builder.shl(builder.zext(builder.extract_element(quad, ir.Constant(_I32, b)), _I64), ir.Constant(_I64, 2))
          for b in range(4)]
    rows = [builder.load(builder.bitcast(builder.gep(data, [r]), F32X4.as_pointer()), align=4) for r in js]
    pairs = [builder.shuffle_vector(rows[0], rows[1], _indices(range(8))),
             builder.shuffle_vector(rows[2], rows[3], _indices(range(8)))]
    row = builder.shuffle_vector(pairs[0], pairs[1], _indices(range(16)))
    return js, row, lane_mask(builder, builder.load(builder.gep(mdata, [t])))


def _own_rows(builder, data, c):
    """Cluster c's four rows as a 16-lane vector, read as four 16-byte loads: the shares of the block's
    earlier clusters were added to them by 16-byte stores (:func:`_add_rows`), perhaps just before, and a
    load that spans several stores waits until they reach the cache (one that matches a store takes its
    value from it)."""
    first = builder.shl(c, ir.Constant(_I64, 4))
    rows = [builder.load(_row_ptr(builder, data, builder.add(first, ir.Constant(_I64, 4 * a))), align=4)
            for a in range(4)]
    return builder.shuffle_vector(builder.shuffle_vector(rows[0], rows[1], _indices(range(8))),
                                  builder.shuffle_vector(rows[2], rows[3], _indices(range(8))), _indices(range(16)))


def _own_values(builder, data, c):
    """``data[4 c : 4 c + 4]`` as a 4-lane vector of four loads (see :func:`_own_rows`: the shares were
    added one value at a time)."""
    first = builder.shl(c, ir.Constant(_I64, 2))
    v = ir.Constant(F32X4, None)
    for a in range(4):
        value = builder.load(builder.gep(data, [builder.add(first, ir.Constant(_I64, a))]))
        v = builder.insert_element(v, value, ir.Constant(_I32, a))
    return v


def _row_ptr(builder, data, r):
    return builder.bitcast(builder.gep(data, [r]), F32X4.as_pointer())


def _add_rows(builder, data, js, share, sign):
    """Add (``sign`` 1) or subtract (-1) lanes 4 b to 4 b + 3 of ``share`` to / from the row at
    ``js[b]`` (the start 4 j of row j) of ``data``, for each b."""
    for b, r in enumerate(js):
        part = builder.shuffle_vector(share, share, _indices(range(4 * b, 4 * b + 4)))
        ptr = _row_ptr(builder, data, r)
        old = builder.load(ptr, align=4)
        new = builder.fadd(old, part, flags=_FAST) if sign > 0 else builder.fsub(old, part, flags=_FAST)
        builder.store(new, ptr, align=4)


#: The four sums of a cluster's particles, and their three sums each (x, y, z of particle 0, then 1, ...):
#: returned in registers (the particle tails of the passes read them at once; stored as a 64-byte row and
#: read back value by value they waited for the store, 13 ns a particle in the correction).
_RHO4 = types.UniTuple(types.float32, 4)
_XYZ4 = types.UniTuple(types.float32, 12)
_XYZ_LANES = [4 * a + k for a in range(4) for k in range(3)]


def _tuple(context, builder, ty, v, lanes):
    return context.make_tuple(builder, ty, [builder.extract_element(v, ir.Constant(_I32, u)) for u in lanes])


def _arrays_ok(floats, nbr, mask, ints, scalars):
    return (all(isinstance(a, types.Array) and a.ndim == 1 and a.dtype == types.float32 for a in floats)
            and isinstance(nbr, types.Array) and nbr.dtype == types.int32 and nbr.ndim == 2 and nbr.layout == "C"
            and isinstance(mask, types.Array)
            and mask.dtype == types.uint16 and all(isinstance(v, types.Integer) for v in ints)
            and all(_is(v, types.Float, 32) for v in scalars))


def _data(context, builder, sig, args, ks):
    return [context.make_array(sig.args[k])(context, builder, args[k]).data for k in ks]


def _range(context, builder, sig, args, ks):
    return [context.cast(builder, args[k], sig.args[k], types.int64) for k in ks]


@intrinsic
def cluster_density(typingctx, xf, rho, nbr, mask, t0, tmid, t1, c, inv_h):
    """The kernel sums of the density, eq. 1 (Alduán, Tena & Otaduy 2015), over the list entries
    ``t0 <= t < t1`` of cluster c: returns ``rho[4 c + a]`` (the shares the block's earlier clusters left)
    plus the sum of w(|x_a - x_b| inv_h) over the pairs of each entry's mask, for a = 0 to 3, and adds each
    local entry's (``t < tmid``) sum over c's particles to ``rho[j_b]`` of its neighbour j_b = nbr[t, b].
    ``xf`` holds the flattened (4 N,) float32 rows, positions first; ``rho`` float32 (N,)."""
    if not _arrays_ok((xf, rho), nbr, mask, (t0, tmid, t1, c), (inv_h,)):
        return None

    def codegen(context, builder, sig, args):
        xdata, rdata, ndata, mdata = _data(context, builder, sig, args, range(4))
        t0_, tmid_, t1_, c_ = _range(context, builder, sig, args, range(4, 8))
        row = cluster_row(builder, xdata, c_)
        xi = [i_lanes(builder, row, k) for k in range(3)]
        inv_h_ = _splat16(builder, args[8])

        def step(shared):
            def body(t, accs):
                js, row_j, lanes = _entry(builder, ndata, mdata, t, xdata)
                w = builder.select(lanes, _Spline(builder, xi, row_j, inv_h_).w(), _ZERO)
                if shared:
                    wj = sum_over_i(builder, w)
                    for b, r in enumerate(js):
                        ptr = builder.gep(rdata, [builder.lshr(r, ir.Constant(_I64, 2))])
                        value = builder.extract_element(wj, ir.Constant(_I32, b))
                        builder.store(builder.fadd(builder.load(ptr), value, flags=_FAST), ptr)
                return [builder.fadd(accs[0], w, flags=_FAST)]
            return body

        acc = emit_loop(builder, t0_, tmid_, [_ZERO], step(True))
        acc = emit_loop(builder, tmid_, t1_, acc, step(False))
        old = _own_values(builder, rdata, c_)
        return _tuple(context, builder, _RHO4, builder.fadd(old, sum_over_j(builder, acc[0]), flags=_FAST), range(4))

    return _RHO4(xf, rho, nbr, mask, t0, tmid, t1, c, inv_h), codegen


@intrinsic
def cluster_push(typingctx, xf, of, nbr, mask, t0, tmid, t1, c, inv_h, h, g):
    """The pair sums of the position correction, eq. 5 with the cohesion of eq. 7, over the list entries
    ``t0 <= t < t1`` of cluster c: adds to the first three values of row 4 c + a of ``of`` the sum of
    (lambda_a + lambda_b + g w(q)) s(q) (x_a - x_b) over the pairs of each entry's mask, s = -w'(q) / q,
    q = |x_a - x_b| inv_h, and for the local entries (``t < tmid``) subtracts each pair's term from row
    j_b (grad_j W_ji = -grad_i W_ij). ``xf`` holds the flattened (4 N,) float32 rows (position, lambda);
    ``of`` flattened (4 N,) float32 rows whose fourth values get 0 added. With g = 0 the code that
    computes w is left out (two versions of the loops)."""
    if not _arrays_ok((xf, of), nbr, mask, (t0, tmid, t1, c), (inv_h, h, g)):
        return None

    def codegen(context, builder, sig, args):
        xdata, odata, ndata, mdata = _data(context, builder, sig, args, range(4))
        t0_, tmid_, t1_, c_ = _range(context, builder, sig, args, range(4, 8))
        row = cluster_row(builder, xdata, c_)
        xi = [i_lanes(builder, row, k) for k in range(3)]
        lam_i = i_lanes(builder, row, 3)
        inv_h_ = _splat16(builder, args[8])
        h_ = _splat16(builder, args[9])
        g_ = _splat16(builder, args[10])

        def step(shared, cohesive):
            def body(t, accs):
                js, row_j, lanes = _entry(builder, ndata, mdata, t, xdata)
                spline = _Spline(builder, xi, row_j, inv_h_)
                coef = builder.fadd(lam_i, j_lanes(builder, row_j, 3), flags=_FAST)
                if cohesive:
                    coef = builder.fadd(coef, builder.fmul(g_, spline.w(), flags=_FAST), flags=_FAST)
                f = builder.select(lanes, builder.fmul(coef, spline.slope(h_), flags=_FAST), _ZERO)
                p = [builder.fmul(f, d, flags=_FAST) for d in spline.d]
                if shared:
                    _add_rows(builder, odata, js, rows_over_i(builder, *p), -1)
                return [builder.fadd(a, v, flags=_FAST) for a, v in zip(accs, p)]
            return body

        ends = []
        with builder.if_else(builder.fcmp_ordered("==", args[10], ir.Constant(ir.FloatType(), 0.0))) as (plain, other):
            for branch, cohesive in ((plain, False), (other, True)):
                with branch:
                    acc = emit_loop(builder, t0_, tmid_, [_ZERO] * 3, step(True, cohesive))
                    acc = emit_loop(builder, tmid_, t1_, acc, step(False, cohesive))
                    ends.append((builder.block, acc))
        total = []
        for k in range(3):
            phi = builder.phi(F32X16)
            for block, acc in ends:
                phi.add_incoming(acc[k], block)
            total.append(phi)
        total = builder.fadd(_own_rows(builder, odata, c_), rows_over_j(builder, *total), flags=_FAST)
        return _tuple(context, builder, _XYZ4, total, _XYZ_LANES)

    return _XYZ4(xf, of, nbr, mask, t0, tmid, t1, c, inv_h, h, g), codegen


@intrinsic
def cluster_xsph(typingctx, xf, qf, sf, nbr, mask, t0, tmid, t1, c, inv_h):
    """The XSPH sums, eq. 6, over the list entries ``t0 <= t < t1`` of cluster c: returns the first three
    values of row 4 c + a of ``sf`` plus the sum of w(q) / rho_b (v_b - v_a) over the pairs of each entry's
    mask (x, y, z for a = 0, then 1, ...), and for the local entries (``t < tmid``) adds the sum over c's
    particles of -w(q) / rho_a (v_b - v_a) to row j_b of each neighbour j_b = nbr[t, b]. ``xf`` holds the
    flattened (4 N,) float32 rows, positions first; ``qf`` the rows (v, 1 / rho)
    (:func:`engine.solvers.pbf_passes.velocity_rows`); ``sf`` flattened (4 N,) float32 rows whose fourth
    values get 0 added."""
    if not _arrays_ok((xf, qf, sf), nbr, mask, (t0, tmid, t1, c), (inv_h,)):
        return None

    def codegen(context, builder, sig, args):
        xdata, qdata, sdata, ndata, mdata = _data(context, builder, sig, args, range(5))
        t0_, tmid_, t1_, c_ = _range(context, builder, sig, args, range(5, 9))
        row = cluster_row(builder, xdata, c_)
        xi = [i_lanes(builder, row, k) for k in range(3)]
        vrow = cluster_row(builder, qdata, c_)
        vi = [i_lanes(builder, vrow, k) for k in range(3)]
        inv_rho_i = i_lanes(builder, vrow, 3)
        inv_h_ = _splat16(builder, args[9])

        def step(shared):
            def body(t, accs):
                js, row_j, lanes = _entry(builder, ndata, mdata, t, xdata)
                w = builder.select(lanes, _Spline(builder, xi, row_j, inv_h_).w(), _ZERO)
                vrows = [builder.load(_row_ptr(builder, qdata, r), align=4) for r in js]
                vrow_j = builder.shuffle_vector(
                    builder.shuffle_vector(vrows[0], vrows[1], _indices(range(8))),
                    builder.shuffle_vector(vrows[2], vrows[3], _indices(range(8))), _indices(range(16)))
                e = [builder.fsub(j_lanes(builder, vrow_j, k), vi[k], flags=_FAST) for k in range(3)]
                wi = builder.fmul(w, j_lanes(builder, vrow_j, 3), flags=_FAST)
                if shared:
                    g = builder.fneg(builder.fmul(w, inv_rho_i, flags=_FAST), flags=_FAST)
                    share = rows_over_i(builder, *[builder.fmul(g, v, flags=_FAST) for v in e])
                    _add_rows(builder, sdata, js, share, 1)
                return [builder.fadd(a, builder.fmul(wi, v, flags=_FAST), flags=_FAST) for a, v in zip(accs, e)]
            return body

        acc = emit_loop(builder, t0_, tmid_, [_ZERO] * 3, step(True))
        acc = emit_loop(builder, tmid_, t1_, acc, step(False))
        total = builder.fadd(_own_rows(builder, sdata, c_), rows_over_j(builder, *acc), flags=_FAST)
        return _tuple(context, builder, _XYZ4, total, _XYZ_LANES)

    return _XYZ4(xf, qf, sf, nbr, mask, t0, tmid, t1, c, inv_h), codegen
