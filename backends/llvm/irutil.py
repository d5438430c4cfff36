"""llvmlite.ir helpers shared by the code generators: types, constants, loops, vector memory ops.

Every value is either a scalar or a `<VL x T>` vector; helpers that take a value work for both.
All memory accesses carry an explicit alignment (the element size): tiles are not 64-byte
aligned, and LLVM would otherwise assume the ABI alignment of the vector type.
"""
from __future__ import annotations

import operator
import platform
from contextlib import contextmanager

import llvmlite.ir as ir

VL = 16  # lanes of a float32 vector (one zmm register)

I1, I8, I16, I32, I64 = (ir.IntType(n) for n in (1, 8, 16, 32, 64))
F32, F16 = ir.FloatType(), ir.HalfType()
PTR = ir.PointerType()

# storage dtype -> (LLVM element type of the raw bits, bytes)
STORAGE = {
    "float32": (F32, 4), "float16": (I16, 2), "bfloat16": (I16, 2),
    "float8_e4m3fn": (I8, 1), "float8_e5m2": (I8, 1), "float8_e8m0fnu": (I8, 1),
    "float4_e2m1fn": (I8, 1),
    "int32": (I32, 4), "bool": (I8, 1),
    "int8": (I8, 1), "uint8": (I8, 1), "int16": (I16, 2), "uint16": (I16, 2),
    "uint32": (I32, 4), "int64": (I64, 8), "float4_e2m1fn_x2": (I8, 1),
    "int4x2": (I8, 1),
}
UNSIGNED = ("uint8", "uint16", "uint32", "float4_e2m1fn_x2")  # zero-extended when loaded (the others sign-extend)


# LLVM's x86 backend (seen with LLVM 22) folds `masked.store(trunc <N x i32> to <N x i16|i8>)`
# into a truncating masked store and, when the mask is (or folds to) one lane, lowers that to a
# scalar store of the *untruncated* i32 lane: 4 bytes written for a 1- or 2-byte element, one
# element past a row whose length is 1 mod 16 (tests/test_llvm_safety.py). A value that is not
# a trunc in the selection DAG (an empty inline asm) cannot be folded that way.
NARROW_STORE_BARRIER = platform.machine().lower() in ("x86_64", "amd64", "i686", "x86")


def mark_contiguous(v, first=None):
    """Tag an i64 offset vector as `uniform + lane`: an access at it is one contiguous vector.
    A constant is shared (`constant`) and never tagged: an access at it takes the general path.
    `first(builder)`: emits its lane 0 as a scalar from the scalars `v` was computed from (an
    access then needs no vector arithmetic, extracted again, for its address)."""
    if not isinstance(v, ir.Constant):
        v.tlm_contiguous = True
        v.tlm_first = first
    return v


def first_lane(b, v):
    """Lane 0 of a contiguous offset vector (`mark_contiguous`)."""
    first = getattr(v, "tlm_first", None)
    return first(b) if first is not None else b.extract_element(v, ir.Constant(I32, 0))


def contiguous(v) -> bool:
    """Whether `v` was tagged by `mark_contiguous`."""
    return getattr(v, "tlm_contiguous", False)


def vty(t, n: int = VL) -> ir.VectorType:
    return ir.VectorType(t, n)


def is_vec(v) -> bool:
    return isinstance(v.type, ir.VectorType)


def elem_type(t):
    return t.element if isinstance(t, ir.VectorType) else t


def like(t, elem):
    """The type with `t`'s shape (scalar or vector) and element type `elem`."""
    return ir.VectorType(elem, t.count) if isinstance(t, ir.VectorType) else elem


_CONSTANTS: dict = {}


def _value_key(x):
    return ("f", repr(x)) if isinstance(x, float) else x  # -0.0 is not 0.0


def constant(t, value):
    """`ir.Constant(t, value)` (value: a scalar, None, or a list of lane values), one object per
    distinct (type, value): llvmlite formats a constant's text once per object, and a vector
    constant's text lane by lane, so a splat used a thousand times in an unrolled body is built
    and formatted once (compile time). Never mutate the result."""
    key = (str(t), tuple(map(_value_key, value)) if isinstance(value, list)
           else _value_key(value))
    c = _CONSTANTS.get(key)
    if c is None:
        if len(_CONSTANTS) > 8192:
            _CONSTANTS.clear()
        c = _CONSTANTS[key] = ir.Constant(t, value)
    return c


def const(t, value):
    """`value` as a constant of type `t`; a vector type gets it in every lane."""
    if isinstance(t, ir.VectorType):
        return constant(t, [value] * t.count)
    return constant(t, value)


def _mangle(t) -> str:
    if isinstance(t, ir.VectorType):
        return f"v{t.count}{_mangle(t.element)}"
    if isinstance(t, ir.FloatType):
        return "f32"
    if isinstance(t, ir.HalfType):
        return "f16"
    if isinstance(t, ir.IntType):
        return f"i{t.width}"
    if isinstance(t, ir.PointerType):
        return "p0"
    raise TypeError(t)


def int_const(v):
    """The Python int of a scalar integer constant, else None."""
    if v.__class__ is ir.Constant and v.type.__class__ is ir.IntType:
        c = v.constant
        if c.__class__ is int or c.__class__ is bool:
            return c
    return None


def wrap_int(t: ir.IntType, x: int) -> ir.Constant:
    """x as a constant of type t (two's complement wrap-around; i1 as 0/1)."""
    if t.width == 1:
        return ir.Constant(t, x & 1)
    x &= (1 << t.width) - 1
    return ir.Constant(t, x - (1 << t.width) if x >> (t.width - 1) else x)


def _operand_key(v):
    """What identifies a scalar operand for `FoldingBuilder`'s value numbering: an integer
    constant by its type width and value, any other value by identity; None (not numbered) for
    vectors and other constants."""
    t = v.type
    if isinstance(v, ir.Constant):
        c = v.constant
        return ("c", t.width, c) if isinstance(t, ir.IntType) and type(c) is int else None
    return None if isinstance(t, ir.VectorType) else id(v)


_DOM_STEPS = 64  # how far up the dominator links a repeated operation is looked for


class FoldingBuilder(ir.IRBuilder):
    """An IRBuilder that folds scalar integer arithmetic on constants while emitting (x + 0,
    x * 1, x * 0, x / 1, constant op constant, comparisons and selects of constants), and numbers
    the pure scalar integer instructions of each function: the same operation on the same
    operands, emitted again at the end of a block that the earlier one's block dominates, is the
    earlier instruction (the row-by-row and column-by-column bodies recompute their base
    addresses, each copy its block's tile offsets). The index arithmetic of tile accesses is
    mostly constant or repeated, and every instruction not emitted is one LLVM does not have to
    parse, simplify and select (compile time).

    Dominance is known from how blocks are made: a block records its immediate dominator
    (`tlm_idom`) when `Emitter.loop`/`while_loop` or llvmlite's `if_then`/`if_else` (the
    builder's `append_basic_block`, made while in the block that branches to it) create it; a
    block made otherwise has none and sees only its own instructions."""

    def append_basic_block(self, name=""):
        """A new block dominated by the current one (llvmlite's if_then / if_else, the only
        callers, branch to their blocks from the current block and blocks it dominates)."""
        blk = super().append_basic_block(name)
        blk.tlm_idom = self.block
        return blk

    def _numbered(self, op: str, args: tuple, emit):
        """`emit()`, or the instruction it emitted before for the same (op, args) in this block
        or one dominating it; only while the builder appends at the block's end (so that an
        earlier one in the same block comes before)."""
        blk = self.block
        if blk is None or self._anchor != len(blk.instructions):
            return emit()
        key = [op]
        for a in args:
            k = _operand_key(a) if isinstance(a, ir.Value) else a
            if k is None:
                return emit()
            key.append(k)
        key = tuple(key)
        memo = self.__dict__.setdefault("_memo", {})
        seen = memo.get(key)
        if seen is None:
            seen = memo[key] = {}
        else:
            up = blk
            for _ in range(_DOM_STEPS):
                hit = seen.get(id(up))
                if hit is not None:
                    return hit[1]
                up = getattr(up, "tlm_idom", None)
                if up is None:
                    break
        v = emit()
        seen[id(blk)] = (args, v)  # args kept alive: their ids stay theirs
        return v

    @staticmethod
    def _fold(lhs, rhs, op, unit, zero=None):
        """lhs op rhs without an instruction when it can be: both constants, either side the
        unit of op (only rhs for a non-commutative op: unit[0] is None) or its zero; else None."""
        a, c = int_const(lhs), int_const(rhs)
        if a is not None and c is not None:
            return wrap_int(lhs.type, op(a, c))
        if a is not None and a == unit[0]:
            return rhs
        if c is not None and c == unit[1]:
            return lhs
        if zero is not None and zero in (a, c):
            return wrap_int(lhs.type, zero)
        return None

    def add(self, lhs, rhs, name=""):
        v = self._fold(lhs, rhs, operator.add, (0, 0))
        return self._numbered("add", (lhs, rhs), lambda: super(FoldingBuilder, self).add(
            lhs, rhs, name)) if v is None else v

    def sub(self, lhs, rhs, name=""):
        v = self._fold(lhs, rhs, operator.sub, (None, 0))
        return self._numbered("sub", (lhs, rhs), lambda: super(FoldingBuilder, self).sub(
            lhs, rhs, name)) if v is None else v

    def mul(self, lhs, rhs, name=""):
        v = self._fold(lhs, rhs, operator.mul, (1, 1), zero=0)
        return self._numbered("mul", (lhs, rhs), lambda: super(FoldingBuilder, self).mul(
            lhs, rhs, name)) if v is None else v

    def _divide(self, op: str, lhs, rhs, name: str):
        """sdiv / srem / udiv / urem folded when both are constants or the divisor is 1."""
        a, c = int_const(lhs), int_const(rhs)
        if c == 1:
            return lhs if op in ("sdiv", "udiv") else wrap_int(lhs.type, 0)
        if a is not None and c:
            w = lhs.type.width
            if op in ("udiv", "urem"):
                a, c = a % (1 << w), c % (1 << w)
                return wrap_int(lhs.type, a // c if op == "udiv" else a % c)
            q = abs(a) // abs(c) * (1 if (a < 0) == (c < 0) else -1)  # toward zero
            return wrap_int(lhs.type, q if op == "sdiv" else a - q * c)
        sup = getattr(super(FoldingBuilder, self), op)
        return self._numbered(op, (lhs, rhs), lambda: sup(lhs, rhs, name))

    def sdiv(self, lhs, rhs, name=""):
        return self._divide("sdiv", lhs, rhs, name)

    def srem(self, lhs, rhs, name=""):
        return self._divide("srem", lhs, rhs, name)

    def udiv(self, lhs, rhs, name=""):
        return self._divide("udiv", lhs, rhs, name)

    def urem(self, lhs, rhs, name=""):
        return self._divide("urem", lhs, rhs, name)

    def icmp_signed(self, cmpop, lhs, rhs, name=""):
        a, c = int_const(lhs), int_const(rhs)
        if a is not None and c is not None and lhs.type.width > 1:
            ops = {"<": a < c, "<=": a <= c, ">": a > c, ">=": a >= c, "==": a == c,
                   "!=": a != c}
            if cmpop in ops:
                return ir.Constant(ir.IntType(1), int(ops[cmpop]))
        return self._numbered("icmp" + cmpop, (lhs, rhs), lambda: super(
            FoldingBuilder, self).icmp_signed(cmpop, lhs, rhs, name))

    def select(self, cond, lhs, rhs, name="", flags=()):
        k = int_const(cond)
        if k is not None and cond.type.width == 1:
            return lhs if k else rhs
        if lhs is rhs:
            return lhs
        if flags:
            return super().select(cond, lhs, rhs, name, flags)
        return self._numbered("select", (cond, lhs, rhs), lambda: super(
            FoldingBuilder, self).select(cond, lhs, rhs, name))

    def and_(self, lhs, rhs, name=""):
        a, c = int_const(lhs), int_const(rhs)
        if a is not None and c is not None:
            return wrap_int(lhs.type, a & c)
        if lhs.type == ir.IntType(1) and (a == 1 or c == 1):
            return rhs if a == 1 else lhs
        return self._numbered("and", (lhs, rhs), lambda: super(FoldingBuilder, self).and_(
            lhs, rhs, name))

    def ashr(self, lhs, rhs, name=""):
        if int_const(rhs) == 0:
            return lhs
        return self._numbered("ashr", (lhs, rhs), lambda: super(FoldingBuilder, self).ashr(
            lhs, rhs, name))

    def or_(self, lhs, rhs, name=""):
        a, c = int_const(lhs), int_const(rhs)
        if a is not None and c is not None:
            return wrap_int(lhs.type, a | c)
        if lhs.type == ir.IntType(1) and (a == 0 or c == 0):
            return rhs if a == 0 else lhs
        return super().or_(lhs, rhs, name)


class Emitter:
    """An IRBuilder plus the helpers; one per generated function."""

    def __init__(self, module: ir.Module, fn: ir.Function):
        self.module = module
        self.fn = fn
        self.entry = fn.append_basic_block("entry")
        self.b = FoldingBuilder(self.entry)
        module.__dict__.setdefault("tlm_emitters", []).append(self)  # (dismantle)

    # ------------------------------------------------------------------------ declarations
    def declare(self, name: str, ret, args) -> ir.Function:
        fn = self.module.globals.get(name)
        if fn is None:
            fn = ir.Function(self.module, ir.FunctionType(ret, args), name)
        return fn

    def intr(self, base: str, ret, args, overload=None):
        """Call intrinsic `llvm.<base>.<mangled overload types>`."""
        types = overload if overload is not None else [ret]
        name = "llvm." + base + "".join("." + _mangle(t) for t in types)
        fn = self.declare(name, ret, [a.type for a in args])
        return self.b.call(fn, args)

    def opaque(self, v):
        """`v` unchanged, through an empty inline asm the optimisers cannot look through (an
        integer in a general register, anything else in a vector register)."""
        fnty = ir.FunctionType(v.type, [v.type])
        reg = "r" if isinstance(v.type, ir.IntType) else "v"
        return self.b.asm(fnty, "", f"={reg},0", [v], side_effect=False, name="opaque")

    def unary(self, base: str, x):
        return self.intr(base, x.type, [x])

    # --------------------------------------------------------------------------- values
    def splat(self, v, n: int = VL):
        if is_vec(v):
            return v
        if isinstance(v, ir.Constant):
            return constant(vty(v.type, n), [v.constant] * n)
        b = self.b
        undef = constant(vty(v.type, n), ir.Undefined)
        ins = b.insert_element(undef, v, ir.Constant(I32, 0))
        return b.shuffle_vector(ins, undef, constant(vty(I32, n), [0] * n))

    def match(self, a, bv):
        """Broadcast a scalar operand when the other one is a vector."""
        if is_vec(a) and not is_vec(bv):
            return a, self.splat(bv, a.type.count)
        if is_vec(bv) and not is_vec(a):
            return self.splat(a, bv.type.count), bv
        return a, bv

    @staticmethod
    def iota(n: int = VL, t=I64):
        return constant(vty(t, n), list(range(n)))

    def i64(self, v):
        """Widen/narrow an integer (scalar or vector) to i64 elements."""
        w = elem_type(v.type).width
        if w == 64:
            return v
        t = like(v.type, I64)
        return self.b.sext(v, t) if w > 1 else self.b.zext(v, t)

    def smin(self, a, c):
        a, c = self.match(a, c)
        return self.b.select(self.b.icmp_signed("<", a, c), a, c)

    def smax(self, a, c):
        a, c = self.match(a, c)
        return self.b.select(self.b.icmp_signed(">", a, c), a, c)

    def clamp(self, x, lo, hi):
        return self.smin(self.smax(x, lo), hi)

    def reduce_or(self, m):
        """i1 that is true when any lane of the i1 vector `m` is set."""
        if not is_vec(m):
            return m
        n = m.type.count
        bits = self.b.bitcast(m, ir.IntType(n))
        return self.b.icmp_unsigned("!=", bits, ir.Constant(ir.IntType(n), 0))

    # --------------------------------------------------------------------------- memory
    def gep(self, ptr, byte_offset):
        if isinstance(byte_offset, int):
            byte_offset = ir.Constant(I64, byte_offset)
        c = int_const(byte_offset)
        if c == 0:
            return ptr
        base = getattr(ptr, "tlm_gep", None)
        if c is not None and base is not None:  # (p + c0) + c: p + (c0 + c)
            ptr, byte_offset = base[0], ir.Constant(I64, base[1] + c)
        b = self.b
        g = b._numbered("gep", (ptr, byte_offset), lambda: b.gep(ptr, [byte_offset],
                                                                   source_etype=I8))
        if c is not None and isinstance(g, ir.Instruction):
            g.tlm_gep = (ptr, byte_offset.constant)
        return g

    def load(self, t, ptr, align: int | None = None):
        return self.b.load(ptr, typ=t, align=align or _size(elem_type(t)))

    def store(self, v, ptr, align: int | None = None):
        self.b.store(v, ptr, align=align or _size(elem_type(v.type)))

    def store_nt(self, v, ptr):
        """Non-temporal store of a whole vector (`ptr` aligned to its size)."""
        st = self.b.store(v, ptr, align=_size(v.type.element) * v.type.count)
        st.set_metadata("nontemporal", self.module.add_metadata([ir.Constant(I32, 1)]))

    def masked_load(self, t, ptr, mask, passthru=None):
        if _all_ones(mask):  # what InstCombine would make of it, without the call
            return self.load(t, ptr)
        if passthru is None:
            passthru = ir.Constant(t, None)
        align = ir.Constant(I32, _size(t.element))
        return self.intr("masked.load", t, [ptr, align, mask, passthru], [t, PTR])

    def masked_store(self, v, ptr, mask):
        if NARROW_STORE_BARRIER and v.type.element in (I8, I16):
            v = self.opaque(v)
        elif _all_ones(mask):
            self.store(v, ptr)
            return
        align = ir.Constant(I32, _size(v.type.element))
        self.intr("masked.store", ir.VoidType(), [v, ptr, align, mask], [v.type, PTR])

    def ptr_vec(self, base, byte_offsets):
        """<n x ptr> = base + byte_offsets (a GEP with a vector index)."""
        g = self.b.gep(base, [byte_offsets], source_etype=I8)
        g.type = ir.VectorType(PTR, byte_offsets.type.count)  # llvmlite infers a scalar ptr
        return g

    def gather(self, t, base, byte_offsets, mask, passthru=None):
        if passthru is None:
            passthru = ir.Constant(t, None)
        ptrs = self.ptr_vec(base, byte_offsets)
        align = ir.Constant(I32, _size(t.element))
        return self.intr("masked.gather", t, [ptrs, align, mask, passthru], [t, ptrs.type])

    def scatter(self, v, base, byte_offsets, mask):
        ptrs = self.ptr_vec(base, byte_offsets)
        align = ir.Constant(I32, _size(v.type.element))
        self.intr("masked.scatter", ir.VoidType(), [v, ptrs, align, mask], [v.type, ptrs.type])

    def memset0(self, ptr, nbytes):
        if isinstance(nbytes, int):
            nbytes = ir.Constant(I64, nbytes)
        self.intr("memset", ir.VoidType(), [ptr, ir.Constant(I8, 0), nbytes,
                                            ir.Constant(I1, 0)], [PTR, I64])

    def memcpy(self, dst, src, nbytes):
        if isinstance(nbytes, int):
            nbytes = ir.Constant(I64, nbytes)
        self.intr("memcpy", ir.VoidType(), [dst, src, nbytes, ir.Constant(I1, 0)],
                  [PTR, PTR, I64])

    def alloca(self, t):
        with self.b.goto_block(self.entry):
            self.b.position_at_start(self.entry)
            return self.b.alloca(t)

    # ----------------------------------------------------------------------- control flow
    @contextmanager
    def loop(self, start, stop, step=1, name="i"):
        """`for i in range(start, stop, step)` (i64, step > 0); yields the induction phi."""
        b = self.b
        if isinstance(start, int):
            start = ir.Constant(I64, start)
        if isinstance(stop, int):
            stop = ir.Constant(I64, stop)
        lo, hi = int_const(start), int_const(stop)
        if lo is not None and hi is not None and lo < hi <= lo + step:
            yield start  # one trip: the body once, at the constant start
            return
        pre = b.block
        header, body, after = self._loop_blocks(name)
        b.branch(header)
        b.position_at_end(header)
        phi = b.phi(I64, name)
        phi.add_incoming(start, pre)
        b.cbranch(b.icmp_signed("<", phi, stop), body, after)
        b.position_at_end(body)
        yield phi
        nxt = b.add(phi, ir.Constant(I64, step))
        phi.add_incoming(nxt, b.block)
        b.branch(header)
        b.position_at_end(after)

    @contextmanager
    def while_loop(self, cond, name="while"):
        """`while cond():` where `cond()` emits the test (an i1) in the loop's header block,
        so that it is read again before every trip."""
        b = self.b
        header, body, after = self._loop_blocks(name)
        b.branch(header)
        b.position_at_end(header)
        b.cbranch(cond(), body, after)
        b.position_at_end(body)
        yield
        b.branch(header)
        b.position_at_end(after)

    def _loop_blocks(self, name: str):
        """A loop's header, body and exit blocks, entered from the current block: it dominates
        the header, which dominates the other two (FoldingBuilder's numbering)."""
        header, body, after = (self.fn.append_basic_block(name + s)
                               for s in (".head", ".body", ".end"))
        header.tlm_idom = self.b.block
        body.tlm_idom = after.tlm_idom = header
        return header, body, after

    @contextmanager
    def if_then(self, cond):
        with self.b.if_then(cond):
            yield

    def error_if(self, cond, code: int):
        """Return `code` from the kernel function when `cond` (i1 or i1 vector) holds."""
        cond = self.reduce_or(cond)
        with self.b.if_then(cond, likely=False):
            self.b.ret(ir.Constant(I32, code))


def dismantle(module: ir.Module) -> None:
    """Break the reference cycles of a module whose text has been taken (each instruction points
    at its block, each block and argument at its function, each function at the module, a
    loop's phi at its latch's values), so that reference counting frees it at once: else the
    cyclic collector finds tens of thousands of objects after a compile, a pause of tens of
    milliseconds. The module and the Emitters of its functions are unusable afterwards."""
    for em in module.__dict__.get("tlm_emitters", ()):
        em.b.__dict__.clear()  # (the numbering's memo)
        em.__dict__.clear()
    for fn in module.functions:
        for blk in fn.blocks:
            for inst in blk.instructions:
                inst.__dict__.clear()
            blk.__dict__.clear()
        fn.__dict__.clear()
    module.__dict__.clear()


def _all_ones(mask) -> bool:
    """A constant vector mask with every lane on."""
    return isinstance(mask, ir.Constant) and isinstance(mask.constant, list) and \
        all(getattr(c, "constant", c) in (True, 1) for c in mask.constant)


def _size(t) -> int:
    if isinstance(t, ir.FloatType):
        return 4
    if isinstance(t, ir.HalfType):
        return 2
    if isinstance(t, ir.PointerType):
        return 8
    return max(1, t.width // 8)
