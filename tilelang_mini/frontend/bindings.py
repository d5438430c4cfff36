"""How names are bound in a kernel (a KernelBuilder part): a name bound to a run-time expression
(`a = s[0, i]`) stands for its value at the binding, as in TileLang (a let). The expression is
inlined where the name is used unless a later statement may write what it reads; then the value
is stored into a hidden variable at the binding (tilelang-ascend's Hadamard butterfly). Also the
scope of a developer tile in an expert kernel, and `with T.If/T.Then/T.Else`."""
from __future__ import annotations

import ast
from typing import NamedTuple

from ..ir.analysis import TILE_OPS, writes as analysis_writes
from ..ir.nodes import Alloc, Buffer, Load, Loc, Store, Var, walk
from .common import Marker
from .exprs import as_expr, constant_difference, const, is_ir, static_dtype


def _may_alias(a, b) -> bool:
    """False when two index tuples provably differ (a constant nonzero difference in a dim)."""
    return not any(d not in (None, 0) for d in map(constant_difference, a, b))


class LaneVar(NamedTuple):
    """`v = T.alloc_var(dtype)` inside T.Parallel: each iteration's own scalar (a GPU thread's
    register in TileLang), an element of a hidden tile over the open T.Parallel loops:

        for i, j in T.Parallel(32, 8):          for i, j in T.Parallel(32, 8):
            r = T.alloc_var(T.float32)     ->       if x[i, j] > 0: r_1[i, j] = 1.0
            if x[i, j] > 0: r = 1.0                 else: r_1[i, j] = 0.0
            else: r = 0.0                           y[i, j] = r_1[i, j] * w[j]
            y[i, j] = r * w[j]
    """
    buffer: Buffer
    indices: tuple


class StaleValue:
    """A name whose expression reads a buffer written since the name was bound."""

    def __init__(self, buffer: str, line: int, capture=None):
        self.buffer, self.line = buffer, line
        self.capture = capture  # a Capture that can keep the value (see KernelBuilder.captured)

    def message(self, name: str) -> str:
        return (f"'{name}' stands for an expression that reads '{self.buffer}', which line "
                f"{self.line} overwrites before this use; a name is not a copy of the value. Keep "
                f"the value in a variable: `{name} = T.alloc_var(dtype)` then `{name} = ...` "
                f"(or use it before '{self.buffer}' is written)")


class Capture:
    """Where `name = <expression that reads buffers>` was bound (a place in an open statement
    list). If a later statement may write what the expression reads, the name's value is stored
    here into a hidden variable and the name reads that variable from then on."""

    def __init__(self, name: str, value, loc: Loc, depth: int, parallel=((), ())):
        self.name, self.value, self.loc, self.depth = name, value, loc, depth
        # inside T.Parallel: the (loop variables, extents) the value is kept per iteration of
        self.parallel = parallel
        self.bound = value       # the expression as bound (what the hidden variable stores)
        self.buffer = None       # the hidden variable, once needed
        self.nested_use = False  # read inside a block opened after the binding (a loop body)

    @property
    def indices(self) -> tuple:
        """Where the hidden variable holds the value: element 0, or the iteration's element of
        a per-iteration tile inside T.Parallel."""
        return tuple(Var(n) for n in self.parallel[0]) or (const(0),)




_GEMM_CALLS = ("gemm_v0", "gemm", "mma")


def _expert_uses(tree):
    """name -> {"C", "V", "L1", "L0C"}: the T.Scope blocks whose code names it and its gemm
    roles (operand / accumulator), from the kernel's source; None without T.Scope blocks."""
    uses: dict = {}
    found = False
    for node in ast.walk(tree):
        if not (isinstance(node, ast.With) and isinstance(node.items[0].context_expr, ast.Call)):
            continue
        call = node.items[0].context_expr
        if not (isinstance(call.func, ast.Attribute) and call.func.attr == "Scope" and call.args
                and isinstance(call.args[0], ast.Constant) and call.args[0].value in ("C", "V")):
            continue
        found = True
        core = call.args[0].value
        for sub in ast.walk(ast.Module(body=node.body, type_ignores=[])):
            if isinstance(sub, ast.Name):
                uses.setdefault(sub.id, set()).add(core)
            elif isinstance(sub, ast.Call) and isinstance(sub.func, ast.Attribute) and \
                    sub.func.attr in _GEMM_CALLS:
                roles = dict(zip(("A", "B", "C"), sub.args))
                roles.update({k.arg: k.value for k in sub.keywords if k.arg in ("A", "B", "C")})
                for role, arg in roles.items():
                    while isinstance(arg, ast.Subscript):
                        arg = arg.value
                    if isinstance(arg, ast.Name):
                        uses.setdefault(arg.id, set()).add("L0C" if role == "C" else "L1")
    return uses if found else None


_CUBE_CALLS = ("gemm", "gemm_v0", "mma", "alloc_L1", "alloc_L0A", "alloc_L0B", "alloc_L0C",
               "set_cross_flag", "wait_cross_flag", "Scope")
_FLAG_CALLS = ("set_flag", "wait_flag", "pipe_barrier")


def vector_flags_without_scopes(kernel_with: ast.With) -> bool:
    """A tilelang-ascend kernel body that places its own flags (T.set_flag/T.wait_flag/
    T.pipe_barrier) but no T.Scope and does no cube work (tilelang-ascend's vector-only expert
    kernels, causal_conv1d): the whole body is the vector core's program, as if written in
    `with T.Scope("V"):`."""
    calls = [n.func.attr for n in ast.walk(ast.Module(body=kernel_with.body, type_ignores=[]))
             if isinstance(n, ast.Call) and isinstance(n.func, ast.Attribute)]
    return any(c in _FLAG_CALLS for c in calls) and not any(c in _CUBE_CALLS for c in calls)


def _allocates(builder, value) -> bool:
    """Whether an assigned expression is a `T.alloc_*` (or `T.reshape`/`T.view`) call, or a
    tuple holding one."""
    if isinstance(value, (ast.Tuple, ast.List)):
        return any(_allocates(builder, v) for v in value.elts)
    if not isinstance(value, ast.Call):
        return False
    fn = builder.eval_callee(value.func)
    return isinstance(fn, Marker) and (fn.name.startswith("alloc_") or fn.name in ("reshape", "view"))


class Bindings:
    def alloc_tuple(self, s) -> list | None:
        """`A_s, B_s = T.alloc_shared(..), T.alloc_shared(..)`: Python unpacks the tuple at trace
        time, so it is one assignment per name, in order:

            A_s, B_s = T.alloc_shared((m, k), dt), T.alloc_fragment((k, n), dt)
         -> A_s = T.alloc_shared((m, k), dt); B_s = T.alloc_fragment((k, n), dt)

        Only when some element allocates and no element reads a name the tuple binds (`a, b =
        b, a` keeps Python's evaluate-then-bind order); None otherwise (the general path)."""
        target, value = s.targets[0], s.value
        if not (isinstance(value, (ast.Tuple, ast.List)) and len(value.elts) == len(target.elts)
                and not any(isinstance(e, ast.Starred) for e in (*target.elts, *value.elts))
                and any(_allocates(self, v) for v in value.elts)):
            return None
        bound = {n.id for t in target.elts for n in ast.walk(t) if isinstance(n, ast.Name)}
        if any(isinstance(n, ast.Name) and n.id in bound for v in value.elts for n in ast.walk(v)):
            return None
        out = []
        for t, v in zip(target.elts, value.elts):
            one = ast.copy_location(ast.Assign(targets=[t], value=v), v)
            one.end_lineno, one.end_col_offset = v.end_lineno, v.end_col_offset
            out += self.assign(one)
        return out

    def stale_reads_of(self, stmts, node) -> None:
        """A name bound to a run-time expression is that expression, read where the name is used
        (`a = x[i]` binds `x[i]`, not its value then). After a statement that may write an
        element the expression reads, using the name would read the new contents: such a name
        becomes a StaleValue, a located error when used (never a silently different number).
        An element store provably elsewhere (`x[i + 4]` after `x[i]`) leaves the name as it is."""
        writes = []  # (buffer name, indices of an element store, or None for a tile op)
        for st in stmts:
            for n in walk(st):
                if isinstance(n, Store):
                    writes.append((n.buffer.name, n.indices))
                elif isinstance(n, TILE_OPS):
                    writes += [(b.name, None) for b in analysis_writes(n)]
        if not writes:
            return
        for scope in self.scopes:
            for name, value in list(scope.items()):
                if not is_ir(value) or isinstance(value, Buffer):
                    continue
                hit = next((ld.buffer.name for ld in walk(value) if isinstance(ld, Load)
                            for buf, idx in writes if buf == ld.buffer.name
                            and (idx is None or _may_alias(ld.indices, idx))), None)
                if hit is not None:
                    cap = self.captures.get((id(scope), name))
                    keep = cap is not None and cap.value is value and not (
                        cap.nested_use and len(self.open_bodies) > cap.depth)
                    scope[name] = StaleValue(hit, self.loc(node).line, cap if keep else None)

    def note_binding(self, name: str, value, loc) -> None:
        """`name = value` where value reads buffers: remember the place, in case a later write
        changes what it reads (then `captured` stores the value there). Inside T.Parallel the
        value is a per-iteration (per-thread) local: TileLang's compare-and-swap
        `v = x[i]; x[i] = x[j]; x[j] = v` keeps each iteration's v in a tile indexed by the
        loop variables."""
        if not self.open_bodies or not hasattr(self, "hoisted_allocs") \
                or not any(isinstance(n, Load) for n in walk(value)):
            return
        par = ((), ())
        if self.parallel_depth:
            loops = self.parallel_loops
            par = (tuple(n for names, _ in loops for n in names),
                   tuple(e for _, ext in loops for e in ext))
        if self.simt is not None:  # per-thread code: one value per thread too (simt.py)
            par = (self.simt.names + par[0], self.simt.extents + par[1])
        cap = Capture(name, value, loc, len(self.open_bodies), par)
        self.open_bodies[-1].append(cap)
        self.captures[(id(self.scopes[-1]), name)] = cap

    def lane_var(self, name: str, dtype: str, init, call) -> list:
        """T.alloc_var inside T.Parallel: a LaneVar over the open T.Parallel loops (see
        LaneVar); its tile is allocated at the top of the kernel."""
        loops = self.parallel_loops
        shape = tuple(e for _, ext in loops for e in ext)
        buf = Buffer(self.fresh_buffer_name(name), shape, dtype, "fragment")
        self.hoisted_allocs[buf.name] = Alloc(buf, None, self.loc(call))
        lane = LaneVar(buf, tuple(Var(n) for names, _ in loops for n in names))
        self.bind(name, lane)
        if init is None:
            return []
        if not (is_ir(init) or isinstance(init, (int, float))):
            raise self.error(call, "init must be a number or an expression")
        return [Store(*lane, as_expr(init), self.loc(call))]

    def captured(self, scope, name, cap):
        """At the first use of `name` after a write that may change what its expression reads:
        the hidden-variable read that replaces it, stored at the binding, when the binding's
        statement list is still open (a name bound in a loop body and used after the loop is
        not); else None (a located error). A name read inside a later-opened block (a loop that
        would re-read the new contents on its next iteration) before the write never gets here:

            a = s[i]; b = s[i + 4]; s[i] = a + b; s[i + 4] = a - b
        ->  a_val = s[i]; b = s[i + 4]; s[i] = s[i] + b; s[i + 4] = a_val - b
        """
        if not any(any(x is cap for x in body) for body in self.open_bodies):
            return None
        if cap.buffer is None:
            dt = static_dtype(cap.bound) or "float32"
            shape = cap.parallel[1] or (1,)
            cap.buffer = Buffer(self.fresh_buffer_name(f"{name}_val"), shape, dt,
                                "fragment" if cap.parallel[1] else "var")
            self.hoisted_allocs[cap.buffer.name] = Alloc(cap.buffer, None, cap.loc)
        load = Load(cap.buffer, cap.indices)
        cap.value = load
        return load

    def expert_home(self, name: str, scope: str):
        """In an expert kernel (T.Scope blocks, where the compiler places no tile), a
        T.alloc_shared/T.alloc_fragment tile lives where its uses put it (tilelang-ascend infers
        the scope the same way): a gemm operand in L1, a gemm accumulator in L0C, a tile the
        T.Scope("V") code uses in UB, another tile of T.Scope("C") code in L1 (shared) or L0C
        (fragment). None outside expert kernels (infer_scopes decides there) or when the uses
        do not settle it."""
        if not hasattr(self, "_expert_uses"):
            self._expert_uses = _expert_uses(self.tree)
        uses = self._expert_uses
        if uses is None:
            return None
        u = uses.get(name, set())
        for mark, home in (("L1", "L1"), ("L0C", "L0C")):
            if mark in u:
                return home
        if u == {"V"}:
            return "UB"
        if u == {"C"}:
            return "L1" if scope == "shared" else "L0C"
        return None

    def if_then_else_blocks(self, s, call) -> ast.If:
        """tilelang-ascend's `with T.If(c): with T.Then(): ... with T.Else(): ...` as the
        Python `if c: ... else: ...` it means; also the one-statement form
        `with T.If(c), T.Then(): ...` (xllm split_qkv_rmsnorm_mrope) for `if c: ...`."""
        if len(call.args) != 1 or call.keywords:
            raise self.error(call, "T.If(condition) takes one condition")
        if len(s.items) == 2 and self.is_call_to(s.items[1].context_expr, "Then") \
                and s.items[1].optional_vars is None:
            return ast.copy_location(ast.If(test=call.args[0], body=s.body, orelse=[]), s)
        parts = {}
        for st in s.body:
            inner = st.items[0].context_expr if isinstance(st, ast.With) else None
            kind = next((k for k in ("Then", "Else") if inner is not None
                         and self.is_call_to(inner, k)), None)
            if kind is None or kind in parts or (kind == "Else" and "Then" not in parts):
                raise self.error(st, "the body of `with T.If(c):` is `with T.Then():` and "
                                     "optionally `with T.Else():`")
            parts[kind] = st.body
        return ast.copy_location(ast.If(test=call.args[0], body=parts["Then"],
                                        orelse=parts.get("Else", [])), s)


__all__ = ["Bindings", "Capture", "StaleValue", "vector_flags_without_scopes"]
