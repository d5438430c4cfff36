"""Scalar and lane-vector expressions of the llvm code generator (a mixin of codegen.KernelGen):
constants, variables, loads with their bounds checks, arithmetic with the semantics' floor division
and promotion rules, calls, selects, bit operations, casts and reinterpretations. A value is a
`Val` (LLVM value + kind); inside a Parallel map values are <VL x T> vectors under the map's mask.
"""
from __future__ import annotations

from dataclasses import dataclass

import llvmlite.ir as ir

from tilelang_mini.ir.nodes import (
    BIT_FNS, call_arity, BinOp, Call, Cast, Const, Load, Reinterpret, Var,
)

from . import vecmath as vm
from .irutil import (
    F32, I1, I32, I64, STORAGE, const, contiguous, elem_type, first_lane, int_const, is_vec,
    like, mark_contiguous, vty, wrap_int,
)
from .values import Val


@dataclass(frozen=True)
class Contiguous:
    """The element offsets `first + lane` (lane < count) of a vector access: one contiguous
    vector, addressed by its scalar first element."""
    first: ir.Value
    count: int


def _first_of(op, ia, ib):
    """`first` (irutil.mark_contiguous) of the contiguous `ia op ib` (Expressions._lane_affine:
    one operand contiguous, the other uniform, or the constant 1 of a product)."""
    def first(b):
        a = first_lane(b, ia) if is_vec(ia) else ia
        c = first_lane(b, ib) if is_vec(ib) else ib
        if op == "*":
            return a if is_vec(ia) else c
        return b.add(a, c) if op == "+" else b.sub(a, c)
    return first


class Expressions:
    """Expression and element-access code generation; needs the KernelGen state (e, vars, par,
    plan, ranges) and its info/buf_ptr/error/fail/any_lane."""
    def scalar_int(self, x, what: str):
        v = self.expr(x)
        if v.vec:
            raise self.fail(f"{what} must be a scalar integer (does it depend on a Parallel "
                            f"loop variable?)")
        if v.kind == "float":
            raise self.fail(f"{what} must be an integer")
        return vm.to_int(self.e, v.v, v.kind)

    def expr(self, x) -> Val:
        if isinstance(x, Const):
            kind = vm.kind_of(x.dtype) if x.dtype in vm.FLOATS or x.dtype in ("int32", "bool") \
                else "int"
            if kind == "float":
                return Val(ir.Constant(F32, float(x.value)), "float")
            if kind == "bool":
                return Val(ir.Constant(I1, int(bool(x.value))), "bool")
            return Val(ir.Constant(I64, int(x.value)), "int")
        if isinstance(x, Var):
            v = self.vars.get(x.name)
            if v is None:
                raise self.fail(f"variable {x.name!r} is not bound here")
            return v
        if isinstance(x, Load):
            return self.load(x)
        if isinstance(x, Cast):
            return self.cast(x)
        if isinstance(x, Reinterpret):
            return self.reinterpret(x)
        if isinstance(x, BinOp):
            return self.binop(x)
        if isinstance(x, Call):
            return self.call(x)
        raise self.fail(f"not an expression: {x!r}")

    def load(self, x: Load) -> Val:
        info = self.info(x.buffer)
        if info.layout != "row":
            raise self.fail(f"internal: packed buffer {info.name} read elementwise")
        flat = self.flat_index(info, x.indices)
        raw = self.access(info, flat, None)
        return Val(vm.decode(self.e, raw, info.storage), vm.kind_of(info.dtype))

    def flat_index(self, info, indices):
        """i64 element offset (scalar or vector) after bounds checks of every index."""
        shape = info.shape
        if len(indices) != len(shape):
            raise self.fail(f"{info.name} has {len(shape)} dimension(s) but is indexed with "
                            f"{len(indices)}")
        e, b = self.e, self.e.b
        terms = []
        for d, (ix, n, st) in enumerate(zip(indices, shape, info.strides)):
            v = self.expr(ix)
            if v.kind == "float":
                raise self.fail(f"index {d} of {info.name} is not an integer")
            iv = vm.to_int(e, v.v, v.kind)
            rng = self.interval(ix)
            if rng is None or rng[0] < 0 or rng[1] >= n:
                bad = b.or_(b.icmp_signed("<", iv, const(iv.type, 0)),
                            b.icmp_signed(">=", iv, const(iv.type, n)))
                if is_vec(bad) and self.par is not None and self.par.mask is not None:
                    bad = b.and_(bad, self.par.mask)
                elif self.par is not None and self.par.guarded:
                    bad = b.and_(bad, self.any_lane())
                e.error_if(bad, self.error(f"index out of bounds for dimension {d} of "
                                           f"{info.name}{list(shape)}"))
            contig = st == 1 and contiguous(iv)
            terms.append((b.mul(iv, const(iv.type, st)) if st != 1 else iv, contig))
        vec_terms = [t for t in terms if is_vec(t[0])]
        if len(vec_terms) == 1 and vec_terms[0][1]:  # one contiguous vector: its lane 0 only
            first = None
            for t, _ in terms:
                t = first_lane(b, t) if is_vec(t) else t
                first = t if first is None else b.add(first, t)
            return Contiguous(first, vec_terms[0][0].type.count)
        flat = None
        for t, _ in terms:
            if flat is None:
                flat = t
            else:
                flat, t = e.match(flat, t)
                flat = b.add(flat, t)
        if flat is None:
            flat = ir.Constant(I64, 0)
        return flat

    def access(self, info, flat, value):
        """Load (value None) or store raw storage bits at element offset(s) `flat`."""
        e, b = self.e, self.e.b
        rt, size = STORAGE[info.storage]
        base = self.buf_ptr(info)
        if isinstance(flat, Contiguous):
            ptr = e.gep(base, b.mul(flat.first, ir.Constant(I64, size)) if size != 1
                        else flat.first)
            vt = vty(rt, flat.count)
            if value is None:
                return e.masked_load(vt, ptr, self.par.mask)
            e.masked_store(e.splat(value, flat.count), ptr, self.par.mask)
            return None
        if not is_vec(flat):
            guarded = self.par is not None and self.par.guarded
            if guarded:  # a uniform access under an If on the lanes: only when a lane is on
                active = self.any_lane()
                flat = b.select(active, flat, ir.Constant(I64, 0))
            ptr = e.gep(base, b.mul(flat, ir.Constant(I64, size)) if size != 1 else flat)
            if value is None:
                return e.load(rt, ptr)
            if is_vec(value):
                raise self.fail("internal: vector value at a scalar address")
            if guarded:
                with b.if_then(active):
                    e.store(value, ptr)
            else:
                e.store(value, ptr)
            return None
        mask = self.par.mask
        vt = vty(rt, flat.type.count)
        offs = b.mul(flat, const(flat.type, size)) if size != 1 else flat
        if value is None:
            return e.gather(vt, base, offs, mask)
        e.scatter(e.splat(value, flat.type.count), base, offs, mask)
        return None

    def binop(self, x: BinOp) -> Val:
        e, b = self.e, self.e.b
        op = x.op
        va, vb = self.expr(x.a), self.expr(x.b)
        if op in ("and", "or"):
            p, q = e.match(vm.to_bool(e, va.v, va.kind), vm.to_bool(e, vb.v, vb.kind))
            return Val(b.and_(p, q) if op == "and" else b.or_(p, q), "bool")
        if op == "/":
            p, q = e.match(vm.to_float(e, va.v, va.kind), vm.to_float(e, vb.v, vb.kind))
            return Val(b.fdiv(p, q), "float")
        kind = "float" if "float" in (va.kind, vb.kind) else "int"
        if kind == "float":
            p, q = e.match(vm.to_float(e, va.v, va.kind), vm.to_float(e, vb.v, vb.kind))
        else:
            ia, ib = vm.to_int(e, va.v, va.kind), vm.to_int(e, vb.v, vb.kind)
            p, q = e.match(ia, ib)
        contig = self._lane_affine(x, va, vb, p)
        if op in ("<", "<=", ">", ">=", "==", "!="):
            if kind == "float":
                r = b.fcmp_unordered("!=", p, q) if op == "!=" else b.fcmp_ordered(op, p, q)
            else:
                r = b.icmp_signed(op, p, q)
            return Val(r, "bool")
        if kind == "float":
            if op == "//":
                return Val(vm.floordiv_f(e, p, q), "float")
            if op == "%":
                return Val(vm.mod_f(e, p, q), "float")
            fn = {"+": b.fadd, "-": b.fsub, "*": b.fmul}.get(op)
            if fn is None:
                raise self.fail(f"unknown binary operator {op!r}")
            return Val(fn(p, q), "float")
        if op in ("//", "%"):
            return Val(self.int_divmod(p, q, op, x.b), "int")
        fn = {"+": b.add, "-": b.sub, "*": b.mul}.get(op)
        if fn is None:
            raise self.fail(f"unknown binary operator {op!r}")
        r = fn(p, q)
        if contig is not None:
            mark_contiguous(r, _first_of(op, ia, ib))
        return Val(r, "int")

    def _lane_affine(self, x, va, vb, p):
        """Track offsets that are `uniform + lane` (contiguous vector accesses)."""
        if not is_vec(p) or x.op not in ("+", "-", "*"):
            return None
        ca, cb = contiguous(va.v), contiguous(vb.v)
        ua, ub = not va.vec, not vb.vec
        if x.op == "+" and ((ca and ub) or (cb and ua)):
            return True
        if x.op == "-" and ca and ub:
            return True
        if x.op == "*":
            if ca and isinstance(x.b, Const) and x.b.value == 1:
                return True
            if cb and isinstance(x.a, Const) and x.a.value == 1:
                return True
        return None

    def int_divmod(self, p, q, op, qx):
        e, b = self.e, self.e.b
        c = qx.value if isinstance(qx, Const) and type(qx.value) is int else 0
        if 0 < c < 1 << (elem_type(p.type).width - 1):
            return self.divmod_by(p, q, op, c)
        if not (isinstance(qx, Const) and isinstance(qx.value, int) and qx.value != 0):
            zero = b.icmp_signed("==", q, const(q.type, 0))
            if is_vec(zero) and self.par is not None and self.par.mask is not None:
                zero = b.and_(zero, self.par.mask)
            e.error_if(zero, self.error(f"integer division by zero in '{op}'"))
            q = b.select(b.icmp_signed("==", q, const(q.type, 0)), const(q.type, 1), q)
        quo = b.sdiv(p, q)
        rem = b.srem(p, q)
        # floor semantics: adjust when the remainder is nonzero and signs differ
        adj = b.and_(b.icmp_signed("!=", rem, const(rem.type, 0)),
                     b.icmp_signed("<", b.xor(rem, q), const(rem.type, 0)))
        if op == "//":
            return b.sub(quo, b.zext(adj, quo.type))
        return b.select(adj, b.add(rem, q), rem)

    def divmod_by(self, p, q, op, c: int):
        """p // c or p % c (floor semantics) for a positive constant c (the value q): a shift or
        a mask for a power of two, else the truncating division fixed when the remainder is
        negative (the signs differ only then); a constant p folded."""
        b = self.e.b
        a = int_const(p)
        if a is not None:
            return wrap_int(p.type, a // c if op == "//" else a % c)
        if c & (c - 1) == 0:
            if op == "%":
                return b.and_(p, const(p.type, c - 1))
            return b.ashr(p, const(p.type, c.bit_length() - 1)) if c > 1 else p
        rem = b.srem(p, q)
        neg = b.icmp_signed("<", rem, const(rem.type, 0))
        if op == "%":
            return b.select(neg, b.add(rem, q), rem)
        quo = b.sdiv(p, q)
        return b.select(neg, b.sub(quo, const(quo.type, 1)), quo)

    def call(self, x: Call) -> Val:
        e, b = self.e, self.e.b
        fn = x.fn
        want = call_arity(fn)
        if len(x.args) != want:
            raise self.fail(f"{fn}() takes {want} argument(s), got {len(x.args)}")
        vals = [self.expr(a) for a in x.args]
        if fn == "select":
            return self.select(*vals)
        if fn in ("exp", "exp2", "log", "sqrt", "rsqrt", "sin", "cos"):
            (v,) = vals
            f = vm.to_float(e, v.v, v.kind)
            return Val(getattr(vm, fn)(e, f), "float")
        if fn in ("abs", "neg"):
            (v,) = vals
            val, kind = v.v, v.kind
            if kind == "bool":
                val, kind = vm.to_int(e, val, kind), "int"
            if kind == "float":
                return Val(e.unary("fabs", val) if fn == "abs" else b.fneg(val), "float")
            if fn == "neg":
                return Val(b.neg(val), "int")
            return Val(b.select(b.icmp_signed("<", val, const(val.type, 0)), b.neg(val), val),
                       "int")
        if fn == "not":
            (v,) = vals
            return Val(b.not_(vm.to_bool(e, v.v, v.kind)), "bool")
        if fn in BIT_FNS:
            return self.bitop(fn, vals, x.args)
        va, vb = vals
        if fn == "ceildiv":
            if "float" in (va.kind, vb.kind):
                raise self.fail("ceildiv takes integers")
            p, q = e.match(vm.to_int(e, va.v, va.kind), vm.to_int(e, vb.v, vb.kind))
            return Val(b.neg(self.int_divmod(b.neg(p), q, "//", x.args[1])), "int")
        if fn not in ("max", "min"):
            raise self.fail(f"unknown function {fn!r}")
        if "float" in (va.kind, vb.kind):
            p, q = vm.to_float(e, va.v, va.kind), vm.to_float(e, vb.v, vb.kind)
            return Val((vm.fmax if fn == "max" else vm.fmin)(e, p, q), "float")
        p, q = vm.to_int(e, va.v, va.kind), vm.to_int(e, vb.v, vb.kind)
        return Val(e.smax(p, q) if fn == "max" else e.smin(p, q), "int")

    def select(self, vc: Val, va: Val, vb: Val) -> Val:
        """select(cond, a, b): operands promoted as in arithmetic; vector lanes pick per lane."""
        e, b = self.e, self.e.b
        if va.kind == vb.kind == "bool":
            p, q, kind = va.v, vb.v, "bool"
        elif "float" in (va.kind, vb.kind):
            p, q, kind = vm.to_float(e, va.v, va.kind), vm.to_float(e, vb.v, vb.kind), "float"
        else:
            p, q, kind = vm.to_int(e, va.v, va.kind), vm.to_int(e, vb.v, vb.kind), "int"
        c = vm.to_bool(e, vc.v, vc.kind)
        p, q = e.match(p, q)
        if is_vec(p) and not is_vec(c):
            c = e.splat(c, p.type.count)
        elif is_vec(c) and not is_vec(p):
            p, q = e.splat(p, c.type.count), e.splat(q, c.type.count)
        return Val(b.select(c, p, q), kind)

    def bitop(self, fn, vals, args) -> Val:
        """Bit operations on i64 values (bools as 0/1); shifts are arithmetic on the value, which
        a load sign- or zero-extended from its element type."""
        e, b = self.e, self.e.b
        if any(v.kind == "float" for v in vals):
            raise self.fail(f"{fn} takes integers")
        ints = [vm.to_int(e, v.v, v.kind) for v in vals]
        if fn == "bitwise_not":
            return Val(b.not_(ints[0]), "int")
        p, q = e.match(*ints)
        if fn.startswith("shift") and not (isinstance(args[1], Const) and 0 <= args[1].value < 64):
            bad = b.icmp_unsigned(">", q, const(q.type, 63))  # a fault, as in the semantics
            if is_vec(bad) and self.par is not None and self.par.mask is not None:
                bad = b.and_(bad, self.par.mask)  # masked-off lanes are not checked
            e.error_if(bad, self.error(f"{fn} by a count outside 0..63"))
            q = b.and_(q, const(q.type, 63))  # (an LLVM shift by >= 64 is poison)
        op = {"bitwise_and": b.and_, "bitwise_or": b.or_, "bitwise_xor": b.xor,
              "shift_left": b.shl, "shift_right": b.ashr}[fn]
        return Val(op(p, q), "int")

    def reinterpret(self, x: Reinterpret) -> Val:
        """The value as an element of x.source (its storage bits), read back as x.dtype."""
        e, b = self.e, self.e.b
        v = self.expr(x.value)
        raw = vm.encode(e, v.v, v.kind, x.source, x.source)
        bits_t = ir.IntType(STORAGE[x.source][1] * 8)
        if isinstance(elem_type(raw.type), ir.FloatType):
            raw = b.bitcast(raw, like(raw.type, bits_t))
        dst_t = STORAGE[x.dtype][0]
        if isinstance(dst_t, ir.FloatType):
            raw = b.bitcast(raw, like(raw.type, dst_t))
        return Val(vm.decode(e, raw, x.dtype), vm.kind_of(x.dtype))

    def cast(self, x: Cast) -> Val:
        e = self.e
        v = self.expr(x.value)
        if x.dtype in vm.INT_STORAGE and x.dtype != "int32":
            return Val(vm.decode(e, vm.encode(e, v.v, v.kind, x.dtype, x.dtype), x.dtype), "int")
        if x.dtype not in vm.FLOATS and x.dtype not in ("int32", "bool"):
            raise self.fail(f"unknown dtype {x.dtype!r}")
        if x.dtype == "float32":
            return Val(vm.to_float(e, v.v, v.kind), "float")
        if x.dtype in vm.FLOATS:
            return Val(vm.round_to(e, vm.to_float(e, v.v, v.kind), x.dtype), "float")
        if x.dtype == "int32":
            b = e.b
            if v.kind == "float":
                r = b.sext(b.fptosi(v.v, like(v.v.type, I32)), like(v.v.type, I64))
            elif v.kind == "bool":
                r = b.zext(v.v, like(v.v.type, I64))
            else:
                r = b.sext(b.trunc(v.v, like(v.v.type, I32)), like(v.v.type, I64))
            return Val(r, "int")
        return Val(vm.to_bool(e, v.v, v.kind), "bool")
