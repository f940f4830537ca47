"""The pair sums of the PBF passes (:mod:`engine.solvers.pbf_passes`) as LLVM vector code.

Built on the lane helpers of :mod:`engine.core.vector_ops` (whose docstring says why these are
written as LLVM vector code): a particle's 16-byte row (position and one more value) read or updated
as one 4-lane vector (:func:`push_range`, :func:`xsph_range`), and the cubic spline's value and slope
for 16 or 8 list entries at once (:func:`density_lanes`, :func:`kernel_lanes`), compared with
:func:`engine.core.kernels.cubic_w` by the tests.
"""

from __future__ import annotations

from llvmlite import ir
from numba import types
from numba.extending import intrinsic

from ..core.compile import FASTMATH
from ..core.vector_ops import _I32, _I64, LANES, _is, _splat

_F32X4 = ir.VectorType(ir.FloatType(), 4)


def _entry_row(builder, data, ndata, t):
    """For list entry t (j = nbr[t], int32): the start 4 j of j's row in the flattened (4 N,) float32
    ``data`` and the row as one 4-lane vector."""
    r = builder.shl(builder.zext(builder.load(builder.gep(ndata, [t])), _I64), ir.Constant(_I64, 2))
    return r, builder.load(builder.bitcast(builder.gep(data, [r]), _F32X4.as_pointer()), align=4)


def _push_entry(builder, xdata, odata, ndata, sdata, t, xi4, lami, shared):
    """List entry t of :func:`push_range_shared`: (f (x_i - x_j), 0) as one 4-lane vector, and its
    opposite added to row j of ``of`` when ``shared``."""
    r, row = _entry_row(builder, xdata, ndata, t)
    lam_j = builder.extract_element(row, ir.Constant(_I32, 3))
    s = builder.uitofp(builder.load(builder.gep(sdata, [t])), ir.FloatType())
    f = builder.fmul(builder.fadd(lami, lam_j), s)
    d = builder.fsub(xi4, row)
    # (f dx, f dy, f dz, 0): lane 3 of a row is lambda, not a coordinate
    c = builder.shuffle_vector(builder.fmul(_splat(builder, f, _F32X4), d), ir.Constant(_F32X4, None), _XYZ0)
    if shared:
        optr = builder.bitcast(builder.gep(odata, [r]), _F32X4.as_pointer())
        builder.store(builder.fsub(builder.load(optr, align=4), c), optr, align=4)
    return c


def _two_sums(builder, t0, t1, entry):
    """The sum of ``entry(t)`` (4-lane float32 vectors) over t0 <= t < t1 (int64), emitted as a loop:
    entries alternate between two sums, a (t0, t0 + 2, ...) and b (t0 + 1, ...), so that an addition
    need not wait for the one before; the odd entry left over goes into a; returns a + b."""
    zero4 = ir.Constant(_F32X4, None)
    start = builder.block
    head, body, tail, last, done = (builder.append_basic_block(f"sums.{name}")
                                    for name in ("head", "body", "tail", "last", "done"))
    builder.branch(head)
    builder.position_at_end(head)
    t = builder.phi(_I64)
    acc_a = builder.phi(_F32X4)
    acc_b = builder.phi(_F32X4)
    for phi, value in ((t, t0), (acc_a, zero4), (acc_b, zero4)):
        phi.add_incoming(value, start)
    builder.cbranch(builder.icmp_signed("<", builder.add(t, ir.Constant(_I64, 1)), t1), body, tail)
    builder.position_at_end(body)
    next_a = builder.fadd(acc_a, entry(t))
    next_b = builder.fadd(acc_b, entry(builder.add(t, ir.Constant(_I64, 1))))
    for phi, value in ((t, builder.add(t, ir.Constant(_I64, 2))), (acc_a, next_a), (acc_b, next_b)):
        phi.add_incoming(value, builder.block)
    builder.branch(head)
    builder.position_at_end(tail)
    builder.cbranch(builder.icmp_signed("<", t, t1), last, done)
    builder.position_at_end(last)
    acc_last = builder.fadd(acc_a, entry(t))
    last_end = builder.block
    builder.branch(done)
    builder.position_at_end(done)
    acc = builder.phi(_F32X4)
    acc.add_incoming(acc_a, tail)
    acc.add_incoming(acc_last, last_end)
    return builder.fadd(acc, acc_b)


def _vec4(builder, values):
    """A 4-lane float32 vector of ``values`` (up to four scalars; the lanes after them 0)."""
    v = ir.Constant(_F32X4, None)
    for lane, x in enumerate(values):
        v = builder.insert_element(v, x, ir.Constant(_I32, lane))
    return v


def _xyz(context, builder, ret, v):
    """Lanes 0, 1, 2 of ``v`` as a tuple of three float32."""
    return context.make_tuple(builder, ret, [builder.extract_element(v, ir.Constant(_I32, k)) for k in range(3)])


_XYZ0 = ir.Constant(ir.VectorType(_I32, 4), [0, 1, 2, 4])  # lanes 0-2 of a vector, then lane 0 of another


def _push_range_typer(shared, xf, of, nbr, slope, t0, t1, xi, yi, zi, lami):
    """Signature and code of :func:`push_range` (``shared`` False) or :func:`push_range_shared`."""
    if not (all(isinstance(a, types.Array) and a.ndim == 1 for a in (xf, of, nbr, slope))
            and xf.dtype == types.float32 and of.dtype == types.float32 and nbr.dtype == types.int32
            and slope.dtype == types.uint16 and all(_is(v, types.Float, 32) for v in (xi, yi, zi, lami))
            and isinstance(t0, types.Integer) and isinstance(t1, types.Integer)):
        return None
    ret = types.UniTuple(types.float32, 3)

    def codegen(context, builder, sig, args):
        xdata, odata, ndata, sdata = (context.make_array(sig.args[k])(context, builder, args[k]).data
                                      for k in range(4))
        t0_, t1_ = (context.cast(builder, args[k], sig.args[k], types.int64) for k in (4, 5))
        xi4 = _vec4(builder, args[6:9])
        total = _two_sums(builder, t0_, t1_,
                          lambda t: _push_entry(builder, xdata, odata, ndata, sdata, t, xi4, args[9], shared))
        return _xyz(context, builder, ret, total)

    return ret(xf, of, nbr, slope, t0, t1, xi, yi, zi, lami), codegen


@intrinsic
def push_range_shared(typingctx, xf, of, nbr, slope, t0, t1, xi, yi, zi, lami):
    """The position correction of PBF from stored kernel slopes, summed over the list entries
    ``t0 <= t < t1`` of a particle i at (xi, yi, zi) with multiplier lami: returns the sums of
    f (x_i - x_j) (three float32), f = (lami + lambda_j) slope[t], j = nbr[t]; and subtracts each entry's
    f (x_i - x_j) from the first three values of row j of ``of`` (the later particle of a pair of i's
    own block, visited once). ``xf`` and ``of`` are flattened (4 N,) float32 rows, position and lambda
    in ``xf``; ``nbr`` int32, ``slope`` uint16.

    A neighbour's row is one 16-byte load and its share one 16-byte read-modify-write (four loads and
    three read-modify-writes in a scalar loop). Entries alternate between two sums (see :func:`_two_sums`)."""
    return _push_range_typer(True, xf, of, nbr, slope, t0, t1, xi, yi, zi, lami)


@intrinsic
def push_range(typingctx, xf, of, nbr, slope, t0, t1, xi, yi, zi, lami):
    """:func:`push_range_shared` without the writes to ``of``: pairs listed from both sides."""
    return _push_range_typer(False, xf, of, nbr, slope, t0, t1, xi, yi, zi, lami)


def _xsph_entry(builder, qdata, adata, ndata, cdata, tdata, t, vi4, inv_rho_i, shared):
    """List entry t of :func:`xsph_range_shared`: w / rho_j (v_j - v_i) in lanes 0-2 of a 4-lane
    vector (w = table[codes[t]]), and -w / rho_i (v_j - v_i) added to row j of ``af`` when ``shared``."""
    r, row = _entry_row(builder, qdata, ndata, t)
    w = builder.load(builder.gep(tdata, [builder.zext(builder.load(builder.gep(cdata, [t])), _I64)]))
    e = builder.fsub(row, vi4)  # lanes 0-2: v_j - v_i; lane 3: 1 / rho_j (lane 3 of vi4 is 0)
    wi = builder.fmul(w, builder.extract_element(row, ir.Constant(_I32, 3)))
    if shared:
        share = builder.fmul(_splat(builder, builder.fmul(builder.fneg(w), inv_rho_i), _F32X4), e)
        share = builder.shuffle_vector(share, ir.Constant(_F32X4, None), _XYZ0)
        aptr = builder.bitcast(builder.gep(adata, [r]), _F32X4.as_pointer())
        builder.store(builder.fadd(builder.load(aptr, align=4), share), aptr, align=4)
    return builder.fmul(_splat(builder, wi, _F32X4), e)


def _xsph_range_typer(shared, qf, af, nbr, codes, table, t0, t1, v0, v1, v2, inv_rho_i):
    """Signature and code of :func:`xsph_range` (``shared`` False) or :func:`xsph_range_shared`."""
    if not (all(isinstance(a, types.Array) and a.ndim == 1 for a in (qf, af, nbr, codes, table))
            and qf.dtype == types.float32 and af.dtype == types.float32 and table.dtype == types.float32
            and nbr.dtype == types.int32 and codes.dtype == types.uint16
            and all(_is(v, types.Float, 32) for v in (v0, v1, v2, inv_rho_i))
            and isinstance(t0, types.Integer) and isinstance(t1, types.Integer)):
        return None
    ret = types.UniTuple(types.float32, 3)

    def codegen(context, builder, sig, args):
        qdata, adata, ndata, cdata, tdata = (context.make_array(sig.args[k])(context, builder, args[k]).data
                                             for k in range(5))
        t0_, t1_ = (context.cast(builder, args[k], sig.args[k], types.int64) for k in (5, 6))
        vi4 = _vec4(builder, args[7:10])
        total = _two_sums(builder, t0_, t1_, lambda t: _xsph_entry(builder, qdata, adata, ndata, cdata, tdata, t,
                                                                   vi4, args[10], shared))
        return _xyz(context, builder, ret, total)

    return ret(qf, af, nbr, codes, table, t0, t1, v0, v1, v2, inv_rho_i), codegen


@intrinsic
def xsph_range_shared(typingctx, qf, af, nbr, codes, table, t0, t1, v0, v1, v2, inv_rho_i):
    """XSPH's sums over the list entries ``t0 <= t < t1`` of a particle i with velocity (v0, v1, v2)
    and 1 / rho_i, kernel values from stored codes: returns the sums of w_t / rho_j (v_j - v_i) (three
    float32), w_t = ``table[codes[t]]``, j = ``nbr[t]``; and adds -w_t / rho_i (v_j - v_i) to the first
    three values of row j of ``af`` (the later particle of a pair of i's own block, visited once).
    ``qf`` holds the flattened (4 N,) float32 rows (v_j, 1 / rho_j), ``af`` flattened (4 N,) float32
    rows whose fourth values are left alone.

    A neighbour's row is one 16-byte load and its share one 16-byte read-modify-write; entries
    alternate between two sums (see :func:`_two_sums`)."""
    return _xsph_range_typer(True, qf, af, nbr, codes, table, t0, t1, v0, v1, v2, inv_rho_i)


@intrinsic
def xsph_range(typingctx, qf, af, nbr, codes, table, t0, t1, v0, v1, v2, inv_rho_i):
    """:func:`xsph_range_shared` without the writes to ``af``: pairs listed from both sides."""
    return _xsph_range_typer(False, qf, af, nbr, codes, table, t0, t1, v0, v1, v2, inv_rho_i)


_FAST = ("fast",) if FASTMATH else ()  # LLVM fast-math flags of the lane code


def _neighbour_xyz(builder, xdata, ndata, t, count, lanes):
    """x, y and z of the neighbours j = nbr[t + u], u < ``lanes``, as three vectors of that many lanes:
    one 16-byte load of each row of ``xdata`` (4 floats a particle), then shuffles. Lanes u >= count
    repeat entry t, so ``nbr`` is not read past the range."""
    rows = []
    for u in range(lanes):
        k = builder.select(builder.icmp_signed("<", ir.Constant(_I64, u), count), builder.add(t, ir.Constant(_I64, u)),
                           t)
        rows.append(_entry_row(builder, xdata, ndata, k)[1])
    while len(rows) > 1:  # concatenate: 16 x 4 -> 64 floats, row u at 4 u
        width = rows[0].type.count * 2
        rows = [builder.shuffle_vector(a, b, ir.Constant(ir.VectorType(_I32, width), list(range(width))))
                for a, b in zip(rows[0::2], rows[1::2])]
    return tuple(builder.shuffle_vector(rows[0], ir.Constant(rows[0].type, None),
                                        ir.Constant(ir.VectorType(_I32, lanes), [4 * u + axis for u in range(lanes)]))
                 for axis in range(3))


def _lanes_below(builder, count, lanes):
    """Mask of the lanes u < count of a vector of ``lanes`` lanes."""
    return builder.icmp_signed("<", ir.Constant(ir.VectorType(_I64, lanes), list(range(lanes))),
                               _splat(builder, count, ir.VectorType(_I64, lanes)))


def _relu(builder, v):
    """max(v, 0) lane by lane."""
    zero = ir.Constant(v.type, None)
    return builder.select(builder.fcmp_ordered(">", v, zero), v, zero)


def _cubic_lanes(context, builder, sig, args, with_slope, n_lanes):
    """Code shared by :func:`density_lanes` and :func:`kernel_lanes` for vectors of ``n_lanes`` lanes:
    (w, slope code or None, mask of the lanes in the range, t)."""
    f32v = ir.VectorType(ir.FloatType(), n_lanes)
    xdata = context.make_array(sig.args[0])(context, builder, args[0]).data
    ndata = context.make_array(sig.args[1])(context, builder, args[1]).data
    t, count = (context.cast(builder, args[k], sig.args[k], types.int64) for k in (2, 3))
    x, y, z = _neighbour_xyz(builder, xdata, ndata, t, count, n_lanes)
    r2 = None
    for coord, k in zip((x, y, z), (4, 5, 6)):
        d = builder.fsub(_splat(builder, args[k], f32v), coord, flags=_FAST)
        r2 = builder.fmul(d, d, flags=_FAST) if r2 is None else builder.fadd(r2, builder.fmul(d, d, flags=_FAST),
                                                                                flags=_FAST)
    r2 = builder.select(builder.fcmp_ordered(">", r2, _splat(builder, ir.Constant(ir.FloatType(), 1e-30), f32v)),
                        r2, _splat(builder, ir.Constant(ir.FloatType(), 1e-30), f32v))
    sqrt = builder.module.declare_intrinsic(f"llvm.sqrt.v{n_lanes}f32", fnty=ir.FunctionType(f32v, [f32v]))
    ir_ = builder.fdiv(_splat(builder, ir.Constant(ir.FloatType(), 1.0), f32v),
                       builder.call(sqrt, [r2], fastmath=_FAST), flags=_FAST)  # 1 / r
    q = builder.fmul(builder.fmul(r2, ir_, flags=_FAST), _splat(builder, args[7], f32v), flags=_FAST)
    one = _splat(builder, ir.Constant(ir.FloatType(), 1.0), f32v)
    two = _splat(builder, ir.Constant(ir.FloatType(), 2.0), f32v)
    tt = _relu(builder, builder.fsub(two, q, flags=_FAST))
    ss = _relu(builder, builder.fsub(one, q, flags=_FAST))
    tt2 = builder.fmul(tt, tt, flags=_FAST)
    ss2 = builder.fmul(ss, ss, flags=_FAST)
    quarter = _splat(builder, ir.Constant(ir.FloatType(), 0.25), f32v)
    w = builder.fsub(builder.fmul(builder.fmul(quarter, tt2, flags=_FAST), tt, flags=_FAST),
                     builder.fmul(ss2, ss, flags=_FAST), flags=_FAST)
    lanes = _lanes_below(builder, count, n_lanes)
    w = builder.select(lanes, w, ir.Constant(f32v, None))
    code = None
    if with_slope:
        # -w'(q) / q = (0.75 t^2 - 3 s^2) / q = (0.75 t^2 - 3 s^2) h / r, in units of the slope unit
        three = _splat(builder, ir.Constant(ir.FloatType(), 3.0), f32v)
        three_q = _splat(builder, ir.Constant(ir.FloatType(), 0.75), f32v)
        mdw = builder.fsub(builder.fmul(three_q, tt2, flags=_FAST), builder.fmul(three, ss2, flags=_FAST), flags=_FAST)
        k = builder.fmul(builder.fmul(mdw, ir_, flags=_FAST), _splat(builder, args[8], f32v), flags=_FAST)
        half = _splat(builder, ir.Constant(ir.FloatType(), 0.5), f32v)
        scaled = builder.fadd(builder.fmul(k, _splat(builder, args[9], f32v), flags=_FAST), half, flags=_FAST)
        code = builder.trunc(builder.fptosi(scaled, ir.VectorType(_I32, n_lanes)),
                             ir.VectorType(ir.IntType(16), n_lanes))
    return w, code, lanes, t


def _store16(context, builder, arrty, arr, at, values):
    data = context.make_array(arrty)(context, builder, arr).data
    builder.store(values, builder.bitcast(builder.gep(data, [at]), values.type.as_pointer()), align=4)


def _hsum(builder, v):
    """The sum of the lanes of ``v`` (pairwise: for 16 lanes, lanes 0-7 plus 8-15, and so on)."""
    width = v.type.count
    while width > 1:
        width //= 2
        lo = builder.shuffle_vector(v, ir.Constant(v.type, None), ir.Constant(ir.VectorType(_I32, width),
                                                                             list(range(width))))
        hi = builder.shuffle_vector(v, ir.Constant(v.type, None), ir.Constant(ir.VectorType(_I32, width),
                                                                             list(range(width, 2 * width))))
        v = builder.fadd(lo, hi, flags=_FAST)
    return builder.extract_element(v, ir.Constant(_I32, 0))


def _lanes_args_ok(xf, nbr, w_out, floats, ints):
    """The argument types :func:`density_lanes` and :func:`kernel_lanes` share: float32 rows, int32
    indices, a float32 output, float32 scalars and integer positions."""
    return (isinstance(xf, types.Array) and xf.dtype == types.float32 and isinstance(nbr, types.Array)
            and nbr.dtype == types.int32 and isinstance(w_out, types.Array) and w_out.dtype == types.float32
            and all(_is(v, types.Float, 32) for v in floats) and all(isinstance(v, types.Integer) for v in ints))


def _density_lanes_of(n_lanes):
    """:data:`density_lanes` for vectors of ``n_lanes`` lanes."""

    def density_lanes(typingctx, xf, nbr, t, count, xi, yi, zi, inv_h, h, inv_unit, w_out, at, slope):
        if not (_lanes_args_ok(xf, nbr, w_out, (xi, yi, zi, inv_h, h, inv_unit), (t, count, at))
                and isinstance(slope, types.Array) and slope.dtype == types.uint16):
            return None

        def codegen(context, builder, sig, args):
            w, code, lanes, t_ = _cubic_lanes(context, builder, sig, args, True, n_lanes)
            _store16(context, builder, sig.args[10], args[10],
                     context.cast(builder, args[11], sig.args[11], types.int64), w)
            data = context.make_array(sig.args[12])(context, builder, args[12]).data
            ptr = builder.bitcast(builder.gep(data, [t_]), code.type.as_pointer())
            fnty = ir.FunctionType(ir.VoidType(), [code.type, code.type.as_pointer(), _I32, lanes.type])
            store = builder.module.declare_intrinsic(f"llvm.masked.store.v{n_lanes}i16.p0", fnty=fnty)
            builder.call(store, [code, ptr, ir.Constant(_I32, 2), lanes])
            return _hsum(builder, w)

        return types.float32(xf, nbr, t, count, xi, yi, zi, inv_h, h, inv_unit, w_out, at, slope), codegen

    density_lanes.__name__ = density_lanes.__qualname__ = f"density_lanes{n_lanes}"
    return intrinsic(density_lanes)


def _kernel_lanes_of(n_lanes):
    """:data:`kernel_lanes` for vectors of ``n_lanes`` lanes."""

    def kernel_lanes(typingctx, xf, nbr, t, count, xi, yi, zi, inv_h, w_out, at):
        if not _lanes_args_ok(xf, nbr, w_out, (xi, yi, zi, inv_h), (t, count, at)):
            return None

        def codegen(context, builder, sig, args):
            w, _, _, _ = _cubic_lanes(context, builder, sig, args, False, n_lanes)
            _store16(context, builder, sig.args[8], args[8], context.cast(builder, args[9], sig.args[9], types.int64),
                     w)
            return context.get_dummy_value()

        return types.void(xf, nbr, t, count, xi, yi, zi, inv_h, w_out, at), codegen

    kernel_lanes.__name__ = kernel_lanes.__qualname__ = f"kernel_lanes{n_lanes}"
    return intrinsic(kernel_lanes)


#: ``density_lanes(xf, nbr, t, count, xi, yi, zi, inv_h, h, inv_unit, w_out, at, slope)``: the kernel
#: shape of the cubic spline for 16 neighbours of a particle at (xi, yi, zi), and the slope codes of
#: the PBF correction: for the list entries ``t + u``, u < min(count, 16) (count at least 1), j =
#: ``nbr[t + u]`` (int32), q = |x_i - x_j| inv_h from the (4 N,) float32 rows ``xf``: ``w_out[at + u]``
#: = w(q) = (2 - q)+^3 / 4 - (1 - q)+^3 (0 in the lanes past the range: all 16 are written) and
#: ``slope[t + u]`` = round(-w'(q) / q inv_unit), with -w'(q) / q = (0.75 (2 - q)+^2 - 3 (1 - q)+^2) h / r
#: (uint16; a squared distance below 1e-30 counts as 1e-30). Returns the sum of the w's (float32).
#:
#: Fast-math arithmetic (a reciprocal square root estimate refined by one Newton step; the sum in any
#: order), as the compiled pair loops of the solvers. The neighbours' rows are one 16-byte load each,
#: regrouped by shuffles; numba's loops would read them one float at a time.
density_lanes = _density_lanes_of(LANES)
#: :data:`density_lanes` for 8 entries (8 values of ``w_out`` written): the end of a range.
density_lanes8 = _density_lanes_of(8)
#: ``kernel_lanes(xf, nbr, t, count, xi, yi, zi, inv_h, w_out, at)``: :data:`density_lanes` without the
#: slopes: ``w_out[at + u]`` = w(q) for the 16 list entries from t (0 past the range).
kernel_lanes = _kernel_lanes_of(LANES)
#: :data:`kernel_lanes` for 8 entries.
kernel_lanes8 = _kernel_lanes_of(8)
