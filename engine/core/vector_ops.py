"""Vector operations of the neighbour search, written as LLVM vector code (the PBF pair sums built on
these helpers are in :mod:`engine.solvers.pbf_lanes`).

numba compiles a loop that packs 64 comparisons into a bit mask (``mask |= (d < r) << u``) into
shifts and ors of 64-bit lanes, and has no way to say "store the selected lanes, packed". Both are
single instructions on a vector machine (a compare into a mask register; ``vpcompressd``), and LLVM
emits them from its vector types and ``llvm.experimental.vector.compress``. Likewise a particle's
16-byte row (position and one more value) read or updated as one 4-lane vector, which numba's loops
read and write one float at a time. On a machine without these instructions LLVM expands the same
code into equivalent scalar or narrower vector instructions, so the results never depend on the
machine.

Arithmetic here is exact IEEE single precision in the order the scalar kernels write it (no
fast-math flags): :func:`candidate_masks` selects exactly the pairs a scalar test
``dx * dx + dy * dy + dz * dz < (h_i + h_j) ** 2`` selects, and the pair sums are float32 sums in the
order their docstrings give.
"""

from __future__ import annotations

from llvmlite import ir
from numba import types
from numba.extending import intrinsic

#: Lanes of one operation: a 16-bit mask, one AVX-512 register of int32 or float32.
LANES = 16

_I32 = ir.IntType(32)
_I64 = ir.IntType(64)
_F32V = ir.VectorType(ir.FloatType(), LANES)
_I32V = ir.VectorType(_I32, LANES)
_MASKV = ir.VectorType(ir.IntType(1), LANES)


def _splat(builder, value, vty):
    """``value`` in every lane of a vector of type ``vty``."""
    one = builder.insert_element(ir.Constant(vty, None), value, ir.Constant(_I32, 0))
    return builder.shuffle_vector(one, ir.Constant(vty, None), ir.Constant(ir.VectorType(_I32, vty.count), None))


def _load_lanes(context, builder, arrty, arr, start, vty):
    """Entries ``start : start + LANES`` of a 1-D array as one vector."""
    data = context.make_array(arrty)(context, builder, arr).data
    ptr = builder.gep(data, [start])
    return builder.load(builder.bitcast(ptr, vty.as_pointer()), align=4)


def _is(t, kind, bits):
    return isinstance(t, kind) and t.bitwidth == bits


@intrinsic
def candidate_masks(typingctx, cx, cy, cz, ch, ci, t, xi, yi, zi, hi, after, end, before, start):
    """Which of the candidates ``t : t + 16`` are within reach of particle i, and in which part of its
    list they go.

    Candidate c (positions ``cx, cy, cz``, half support ``ch``, particle index j = ``ci[c]``, all
    1-D arrays) is a hit when ``|x_i - x_c|^2 < (hi + ch[c])^2`` (float32, exact). Of the hits,
    ``mine`` holds those with ``after < j < end`` or ``j < before``, ``other`` those with
    ``j >= end`` or ``j < start`` (all int32). Returns ``mine | other << 32`` (two 16-bit masks,
    bit u for candidate t + u).
    """
    if not all(_is(v, types.Float, 32) for v in (xi, yi, zi, hi)):
        return None
    if not all(_is(v, types.Integer, 32) for v in (after, end, before, start)):
        return None

    def codegen(context, builder, sig, args):
        x, y, z, h = (_load_lanes(context, builder, sig.args[k], args[k], args[5], _F32V) for k in range(4))
        j = _load_lanes(context, builder, sig.args[4], args[4], args[5], _I32V)
        dx = builder.fsub(_splat(builder, args[6], _F32V), x)
        dy = builder.fsub(_splat(builder, args[7], _F32V), y)
        dz = builder.fsub(_splat(builder, args[8], _F32V), z)
        r2 = builder.fadd(builder.fadd(builder.fmul(dx, dx), builder.fmul(dy, dy)), builder.fmul(dz, dz))
        reach = builder.fadd(_splat(builder, args[9], _F32V), h)
        hit = builder.fcmp_ordered("<", r2, builder.fmul(reach, reach))
        after_, end_, before_, start_ = (_splat(builder, args[k], _I32V) for k in (10, 11, 12, 13))
        mine = builder.and_(hit, builder.or_(
            builder.and_(builder.icmp_signed(">", j, after_), builder.icmp_signed("<", j, end_)),
            builder.icmp_signed("<", j, before_)))
        other = builder.and_(hit, builder.or_(builder.icmp_signed(">=", j, end_), builder.icmp_signed("<", j, start_)))
        low = builder.zext(builder.bitcast(mine, ir.IntType(LANES)), _I64)
        high = builder.zext(builder.bitcast(other, ir.IntType(LANES)), _I64)
        return builder.or_(low, builder.shl(high, ir.Constant(_I64, 32)))

    return types.uint64(cx, cy, cz, ch, ci, t, xi, yi, zi, hi, after, end, before, start), codegen


@intrinsic
def compress_store(typingctx, src, t, mask, dst, at):
    """Write the entries of ``src[t : t + 16]`` whose bit is set in the low 16 bits of ``mask``, in
    order, to ``dst[at:]``. All 16 entries ``dst[at : at + 16]`` are written (those after the packed
    ones with zeros): ``dst`` must have room for them. ``src`` and ``dst`` are 1-D int32 arrays."""
    if not (isinstance(src, types.Array) and isinstance(dst, types.Array)
            and src.dtype == types.int32 and dst.dtype == types.int32):
        return None

    def codegen(context, builder, sig, args):
        values = _load_lanes(context, builder, sig.args[0], args[0], args[1], _I32V)
        lanes = builder.bitcast(builder.trunc(args[2], ir.IntType(LANES)), _MASKV)
        fnty = ir.FunctionType(_I32V, [_I32V, _MASKV, _I32V])
        fn = builder.module.declare_intrinsic("llvm.experimental.vector.compress.v16i32", fnty=fnty)
        packed = builder.call(fn, [values, lanes, ir.Constant(_I32V, None)])
        data = context.make_array(sig.args[3])(context, builder, args[3]).data
        builder.store(packed, builder.bitcast(builder.gep(data, [args[4]]), _I32V.as_pointer()), align=4)
        return context.get_dummy_value()

    return types.void(src, t, mask, dst, at), codegen


@intrinsic
def move_lanes(typingctx, src, t, dst, at):
    """``dst[at : at + 16] = src[t : t + 16]`` as one vector load and store (1-D arrays of one 32-bit
    type). numba's own loop for it stays scalar: the compiler cannot rule out that the two arrays
    overlap."""
    if not (isinstance(src, types.Array) and isinstance(dst, types.Array) and src.dtype == dst.dtype
            and src.dtype in (types.float32, types.int32)):
        return None

    def codegen(context, builder, sig, args):
        vty = _F32V if sig.args[0].dtype == types.float32 else _I32V
        values = _load_lanes(context, builder, sig.args[0], args[0], args[1], vty)
        data = context.make_array(sig.args[2])(context, builder, args[2]).data
        builder.store(values, builder.bitcast(builder.gep(data, [args[3]]), vty.as_pointer()), align=4)
        return context.get_dummy_value()

    return types.void(src, t, dst, at), codegen


@intrinsic
def store_count_up(typingctx, dst, at, first):
    """``dst[at : at + 16] = first, first + 1, ..., first + 15`` as one vector store (``dst`` a 1-D int32
    array, ``first`` an integer that fits in int32). numba writes the same loop as 16 scalar stores, and
    a vector load of the entries soon after cannot take its value from them: it waits until they
    reach the cache."""
    if not (isinstance(dst, types.Array) and dst.dtype == types.int32 and isinstance(first, types.Integer)):
        return None

    def codegen(context, builder, sig, args):
        start = builder.trunc(args[2], _I32) if sig.args[2].bitwidth > 32 else args[2]
        steps = ir.Constant(_I32V, list(range(LANES)))
        values = builder.add(_splat(builder, start, _I32V), steps)
        data = context.make_array(sig.args[0])(context, builder, args[0]).data
        builder.store(values, builder.bitcast(builder.gep(data, [args[1]]), _I32V.as_pointer()), align=4)
        return context.get_dummy_value()

    return types.void(dst, at, first), codegen


@intrinsic
def popcount(typingctx, v):
    """Number of set bits of an unsigned integer (one ``popcnt`` instruction)."""
    if not isinstance(v, types.Integer):
        return None

    def codegen(context, builder, sig, args):
        return builder.ctpop(args[0])

    return v(v), codegen
