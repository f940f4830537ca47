"""Lane operations on pairs of particle clusters, written as LLVM vector code.

Páll & Hess 2013, "A flexible algorithm for calculating pair interactions on SIMD architectures"
(Comput. Phys. Commun. 184), §3: particles consecutive in a spatial order are grouped into clusters of
:data:`CLUSTER`, pairs of clusters are listed instead of pairs of particles, and a kernel computes all
:data:`PAIR_LANES` = 4 x 4 particle pairs of two clusters at once, one pair per lane of a vector, with
a bit mask saying which pairs count. No neighbour's row is gathered: a cluster's four 16-byte particle
rows (position and one more value each) are one 64-byte load, and its particles' values are spread
over the lanes by shuffles with constant indices.

Lane ``4 a + b`` holds the pair of particle a of the first cluster (i) and particle b of the second (j).
:func:`i_lanes` and :func:`j_lanes` spread a value of a row over the lanes that way; :func:`sum_over_j`
and :func:`rows_over_j` sum the lanes of each particle of i (its sums), :func:`sum_over_i` and
:func:`rows_over_i` those of each particle of j (its shares, for a half list that visits a pair once).

:func:`pair_columns` is the neighbour test of :class:`engine.core.cluster_list.ClusterList`: exact
IEEE single precision in the order of :func:`engine.core.vector_ops.candidate_masks`, so that both lists
hold exactly the same pairs.
"""

from __future__ import annotations

from llvmlite import ir
from numba import types
from numba.extending import intrinsic

from .vector_ops import _I32, _I64, _is

#: Particles per cluster.
CLUSTER = 4
#: Particle pairs of two clusters: one 16-lane vector (one AVX-512 register of float32).
PAIR_LANES = CLUSTER * CLUSTER

_F32 = ir.FloatType()
_I16 = ir.IntType(16)
F32X16 = ir.VectorType(_F32, PAIR_LANES)
F32X4 = ir.VectorType(_F32, CLUSTER)
_MASK = ir.VectorType(ir.IntType(1), PAIR_LANES)


def _indices(values):
    return ir.Constant(ir.VectorType(_I32, len(values)), list(values))


# row value k (0-3) of particle a of i in lane 4 a + b, of particle b of j in lane 4 a + b
_I_LANES = [_indices([4 * a + k for a in range(CLUSTER) for b in range(CLUSTER)]) for k in range(4)]
_J_LANES = [_indices([4 * b + k for a in range(CLUSTER) for b in range(CLUSTER)]) for k in range(4)]


def const(value, vty=F32X16):
    """A float32 constant in every lane."""
    return ir.Constant(vty, [value] * vty.count)


def cluster_row(builder, data, c):
    """The 16 float32 of cluster c's four 16-byte particle rows, one 64-byte load: ``data`` points at
    the flattened (4 N,) rows, ``c`` is an int64 cluster index."""
    ptr = builder.gep(data, [builder.shl(c, ir.Constant(_I64, 4))])
    return builder.load(builder.bitcast(ptr, F32X16.as_pointer()), align=4)


def store_row(builder, data, c, value):
    """Store a 16-lane vector as cluster c's four particle rows."""
    ptr = builder.gep(data, [builder.shl(c, ir.Constant(_I64, 4))])
    builder.store(value, builder.bitcast(ptr, F32X16.as_pointer()), align=4)


def cluster_values(builder, data, c):
    """The four float32 ``data[4 c : 4 c + 4]`` (one value per particle) as a 4-lane vector pointer and
    its value."""
    ptr = builder.bitcast(builder.gep(data, [builder.shl(c, ir.Constant(_I64, 2))]), F32X4.as_pointer())
    return ptr, builder.load(ptr, align=4)


def i_lanes(builder, row, k):
    """Value k of each of i's rows in the lanes of its particle: lane 4 a + b = row[4 a + k]."""
    return builder.shuffle_vector(row, ir.Constant(F32X16, None), _I_LANES[k])


def j_lanes(builder, row, k):
    """Value k of each of j's rows in the lanes of its particle: lane 4 a + b = row[4 b + k]."""
    return builder.shuffle_vector(row, ir.Constant(F32X16, None), _J_LANES[k])


def lane_mask(builder, bits):
    """A 16-bit integer pair mask (bit 4 a + b) as a vector of 16 booleans."""
    if bits.type.width != PAIR_LANES:
        bits = builder.trunc(bits, _I16)
    return builder.bitcast(bits, _MASK)


def sum_over_i(builder, v):
    """For each particle b of j, the sum of its four lanes 4 a + b: a 4-lane vector (pairwise sums)."""
    s = builder.fadd(v, builder.shuffle_vector(v, v, _indices(list(range(8, 16)) + list(range(8)))))
    s = builder.fadd(s, builder.shuffle_vector(s, s, _indices([4, 5, 6, 7, 0, 1, 2, 3] * 2)))
    return builder.shuffle_vector(s, s, _indices(range(4)))


def sum_over_j(builder, v):
    """For each particle a of i, the sum of its four lanes 4 a + b: a 4-lane vector (pairwise sums)."""
    s = builder.fadd(v, builder.shuffle_vector(v, v, _indices([u ^ 1 for u in range(16)])))
    s = builder.fadd(s, builder.shuffle_vector(s, s, _indices([u ^ 2 for u in range(16)])))
    return builder.shuffle_vector(s, s, _indices([0, 4, 8, 12]))


_ROW_XYZ = ir.Constant(_MASK, [u % 4 != 3 for u in range(PAIR_LANES)])


def rows_over_i(builder, px, py, pz):
    """The shares of j's particles as four 16-byte rows: lane 4 b + k (k < 3) = the sum over a of lane
    4 a + b of (px, py, pz)[k], lane 4 b + 3 = 0. Pairwise sums, five shuffles and three additions."""
    zero = ir.Constant(F32X16, None)
    # lanes 0-3: a = 0 and 2; 4-7: a = 1 and 3; of px (0-7) and py (8-15)
    s1 = builder.fadd(builder.shuffle_vector(px, py, _indices(list(range(8)) + list(range(16, 24)))),
                      builder.shuffle_vector(px, py, _indices(list(range(8, 16)) + list(range(24, 32)))))
    # the same for pz in lanes 0-7; lanes 8-15 are 0
    s2 = builder.fadd(builder.shuffle_vector(pz, zero, _indices(list(range(8)) + list(range(16, 24)))),
                      builder.shuffle_vector(pz, zero, _indices(list(range(8, 16)) + list(range(16, 24)))))
    first = [v for b in range(4) for v in (b, 8 + b, 16 + b, 24 + b)]
    second = [v for b in range(4) for v in (4 + b, 12 + b, 20 + b, 28 + b)]
    return builder.fadd(builder.shuffle_vector(s1, s2, _indices(first)),
                        builder.shuffle_vector(s1, s2, _indices(second)))


def rows_over_j(builder, px, py, pz):
    """The sums of i's particles as four 16-byte rows: lane 4 a + k (k < 3) = the sum over b of lane
    4 a + b of (px, py, pz)[k], lane 4 a + 3 = 0."""
    sx, sy, sz = (builder.fadd(p, builder.shuffle_vector(p, p, _indices([u ^ 1 for u in range(16)])))
                  for p in (px, py, pz))
    # lane 4 a + 0 / + 2 of each: the sums of b = 0, 1 and of b = 2, 3
    xy = builder.shuffle_vector(sx, sy, _indices([v for a in range(4) for v in (4 * a, 16 + 4 * a, 4 * a + 2,
                                                                               18 + 4 * a)]))
    first = builder.shuffle_vector(xy, sz, _indices([v for a in range(4) for v in (4 * a, 4 * a + 1, 16 + 4 * a,
                                                                                   16 + 4 * a)]))
    second = builder.shuffle_vector(xy, sz, _indices([v for a in range(4) for v in (4 * a + 2, 4 * a + 3,
                                                                                    18 + 4 * a, 18 + 4 * a)]))
    return builder.select(_ROW_XYZ, builder.fadd(first, second), ir.Constant(F32X16, None))


def emit_loop(builder, t0, t1, accs, body):
    """Emit ``for t in range(t0, t1): accs = body(t, accs)`` (t int64; ``accs`` a list of LLVM values
    carried from one step to the next) and return the final values."""
    start = builder.block
    head, step, done = (builder.append_basic_block(f"pairs.{name}") for name in ("head", "step", "done"))
    builder.branch(head)
    builder.position_at_end(head)
    t = builder.phi(_I64)
    phis = [builder.phi(a.type) for a in accs]
    t.add_incoming(t0, start)
    for phi, value in zip(phis, accs):
        phi.add_incoming(value, start)
    builder.cbranch(builder.icmp_signed("<", t, t1), step, done)
    builder.position_at_end(step)
    new = body(t, phis)
    end = builder.block
    t.add_incoming(builder.add(t, ir.Constant(_I64, 1)), end)
    for phi, value in zip(phis, new):
        phi.add_incoming(value, end)
    builder.branch(head)
    builder.position_at_end(done)
    return phis


_I32X4 = ir.VectorType(_I32, 4)
_I32X16 = ir.VectorType(_I32, PAIR_LANES)


@intrinsic
def pair_columns(typingctx, xf, c, cand, t, end, reach, v_other, v_last, last, js, cols, at):
    """The neighbours of cluster c among the particles of its candidate clusters ``cand[t : min(t + 4,
    end)]``, stored packed: particle j = 4 cj + b goes to ``js[at + k]`` with its column ``cols[at + k]``
    (bit 4 a set when particle 4 c + a and j are neighbours: |x_a - x_j|^2 < reach^2 in float32, the
    arithmetic of :func:`engine.core.vector_ops.candidate_masks` with reach = h_i + h_j), for the
    particles with at least one pair, in the order of the candidates and of their particles; returns how
    many. A candidate's pair mask is first reduced to the particles that exist: ``v_last`` for the
    candidate ``last`` (the last cluster), ``v_other`` for the others; c itself keeps only the pairs a < b
    (each pair of a cluster once, no particle with itself). All 16 entries from ``at`` of ``js`` and
    ``cols`` (1-D int32) are written: they need that room."""
    if not (isinstance(xf, types.Array) and xf.dtype == types.float32 and isinstance(cand, types.Array)
            and cand.dtype == types.int32 and isinstance(js, types.Array) and js.dtype == types.int32
            and isinstance(cols, types.Array) and cols.dtype == types.int32 and _is(reach, types.Float, 32)
            and all(isinstance(v, types.Integer) for v in (c, t, end, v_other, v_last, last, at))):
        return None

    def codegen(context, builder, sig, args):
        xdata = context.make_array(sig.args[0])(context, builder, args[0]).data
        cdata = context.make_array(sig.args[2])(context, builder, args[2]).data
        c_, t_, end_, v_other_, v_last_, last_, at_ = (context.cast(builder, args[k], sig.args[k], types.int64)
                                                       for k in (1, 3, 4, 6, 7, 8, 11))
        row_i = cluster_row(builder, xdata, c_)
        xi = [i_lanes(builder, row_i, k) for k in range(3)]
        r = builder.fmul(args[5], args[5])
        reach2 = builder.shuffle_vector(builder.insert_element(ir.Constant(F32X16, None), r, ir.Constant(_I32, 0)),
                                        ir.Constant(F32X16, None), ir.Constant(_I32X16, None))
        quads = []
        js_lanes = []
        for k in range(4):
            tk = builder.add(t_, ir.Constant(_I64, k))
            inside = builder.icmp_signed("<", tk, end_)
            tk = builder.select(inside, tk, t_)  # past the end: read the first candidate again, keep nothing
            cj = builder.sext(builder.load(builder.gep(cdata, [tk])), _I64)
            row_j = cluster_row(builder, xdata, cj)
            d = [builder.fsub(xi[a], j_lanes(builder, row_j, a)) for a in range(3)]
            r2 = builder.fadd(builder.fadd(builder.fmul(d[0], d[0]), builder.fmul(d[1], d[1])),
                              builder.fmul(d[2], d[2]))
            m = builder.zext(builder.bitcast(builder.fcmp_ordered("<", r2, reach2), _I16), _I64)
            m = builder.and_(m, builder.select(builder.icmp_signed("==", cj, last_), v_last_, v_other_))
            m = builder.and_(m, builder.select(builder.icmp_signed("==", cj, c_), ir.Constant(_I64, 0x08CE),
                                               ir.Constant(_I64, 0xFFFF)))
            m = builder.select(inside, builder.trunc(m, _I32), ir.Constant(_I32, 0))
            quad = builder.lshr(builder.shuffle_vector(builder.insert_element(ir.Constant(_I32X4, None), m,
                                                                              ir.Constant(_I32, 0)),
                                                       ir.Constant(_I32X4, None), ir.Constant(_I32X4, None)),
                                ir.Constant(_I32X4, [0, 1, 2, 3]))
            quads.append(builder.and_(quad, ir.Constant(_I32X4, [0x1111] * 4)))
            base = builder.trunc(builder.shl(cj, ir.Constant(_I64, 2)), _I32)
            js_lanes.append(builder.add(builder.shuffle_vector(builder.insert_element(
                ir.Constant(_I32X4, None), base, ir.Constant(_I32, 0)), ir.Constant(_I32X4, None),
                ir.Constant(_I32X4, None)), ir.Constant(_I32X4, [0, 1, 2, 3])))

        def concat(parts):
            low = builder.shuffle_vector(parts[0], parts[1], _indices(range(8)))
            high = builder.shuffle_vector(parts[2], parts[3], _indices(range(8)))
            return builder.shuffle_vector(low, high, _indices(range(16)))

        col = concat(quads)
        keep = builder.icmp_unsigned("!=", col, ir.Constant(_I32X16, None))
        fnty = ir.FunctionType(_I32X16, [_I32X16, _MASK, _I32X16])
        compress = builder.module.declare_intrinsic("llvm.experimental.vector.compress.v16i32", fnty=fnty)
        for arg, values in ((9, concat(js_lanes)), (10, col)):
            data = context.make_array(sig.args[arg])(context, builder, args[arg]).data
            packed = builder.call(compress, [values, keep, ir.Constant(_I32X16, None)])
            builder.store(packed, builder.bitcast(builder.gep(data, [at_]), _I32X16.as_pointer()), align=4)
        return builder.zext(builder.ctpop(builder.bitcast(keep, _I16)), _I64)

    return types.int64(xf, c, cand, t, end, reach, v_other, v_last, last, js, cols, at), codegen
