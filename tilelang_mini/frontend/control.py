"""The kernel builder's control flow: `for` loops (T.serial/Pipelined/Parallel/unroll/grid/
vectorized/Persistent, Python `range`), `while` (unrolled at trace time) and `if` (picked at
trace time when the condition is a Python value, an IR If otherwise). A mixin of KernelBuilder
(frontend/parser.py), which keeps the scopes, bindings and errors these use."""
from __future__ import annotations

import ast
import math

from ..ir import dtypes
from ..ir.nodes import Alloc, Buffer, For, If, Load, Store, Var
from .atomic import ParallelAtomic
from .breaks import FLAG, cleared, guarded_body, has_break
from .common import Marker, show
from .exprs import as_expr, binop, const, is_ir

_MAX_TRACE_WHILE = 4096  # passes of a trace-time `while` before it is called endless
# T.parallel: TVM script's parallel loop, which TileLang re-exports (one dimension per loop)
_LOOPS = dict(Parallel="parallel", parallel="parallel", Pipelined="pipelined", serial="serial",
              Serial="serial", unroll="unroll")


class ControlFlow:
    def stmt_For(self, s):
        if s.orelse:
            raise self.error(s, "for/else is not supported in a kernel")
        if has_break(s.body):
            return self.loop_with_break(s)
        it = s.iter
        names = self.target_names(s.target, s)
        if isinstance(it, ast.Call) and isinstance(it.func, ast.Attribute) \
                and it.func.attr == "Persistent":
            return self.persistent_loop(names, it, s)
        if isinstance(it, ast.Call):
            fn = self.eval_callee(it.func)
            if isinstance(fn, Marker) and fn.name in ("serial", "Serial", "unroll"):
                out = self.serial_loop(names, it, s, fn.name)
                if out is not None:
                    return out
            if isinstance(fn, Marker) and fn.name == "grid":
                return self.grid_loop(names, it, s)
            if isinstance(fn, Marker) and fn.name == "vectorized":
                return self.vectorized_loop(names, it, s)
            if isinstance(fn, Marker) and fn.name in ("parallel", "Parallel"):
                names, it, s = self.fused_parallel(names, it, s)
            if isinstance(fn, Marker) and fn.name in _LOOPS:
                loop = self.ir_loop(_LOOPS[fn.name], names, it, s)
                return loop if isinstance(loop, list) else [loop]
            if fn is range:
                return [self.range_loop(names, it, s)]
        value = self.eval(it)
        if isinstance(value, (enumerate, zip)):  # of trace-time lists: unrolled like them
            value = list(value)
        if isinstance(value, (list, tuple)) and not is_ir(value):
            out = []
            for v in value:  # a Python loop: unrolled at trace time
                if len(names) == 1:
                    self.bind(names[0], v)
                else:
                    for n, x in zip(names, v):
                        self.bind(n, x)
                out.extend(self.body(s.body))
            return out
        raise self.error(it, "a kernel loop iterates over T.Parallel, T.Pipelined, T.serial, "
                             "T.unroll, range or a Python list (or enumerate/zip of lists)")

    def loop_with_break(self, s) -> list:
        """A loop whose body holds `break`: a flag set by the break guards the rest
        (breaks.py)."""
        it = s.iter.func if isinstance(s.iter, ast.Call) else None
        if isinstance(it, ast.Attribute) and it.attr == "Parallel":
            raise self.error(s, "`break` in a T.Parallel body: its iterations have no order; "
                                "guard the assignments with `if` instead")
        name, clear = self.break_flag(s)
        loop = ast.copy_location(ast.For(target=s.target, iter=s.iter,
                                         body=guarded_body(s.body, name), orelse=[]), s)
        return [clear] + self.stmt_For(loop)

    def break_flag(self, s):
        """(the name of a new hidden `break` flag of loop `s`, the store clearing it)."""
        name = self.fresh_var(FLAG)
        unique = self.fresh_buffer_name("break_flag")
        shape, scope = self.per_thread_alloc(unique, "alloc_var", (1,), "var")
        flag = Buffer(unique, shape, "int32", scope)
        self.hoisted_allocs[unique] = Alloc(flag, None, self.loc(s))
        self.bind(name, flag)
        return name, Store(flag, self.scalar_index(flag), const(0), self.loc(s))

    def fused_parallel(self, names, call: ast.Call, s):
        """Parallel loops (TVM script's one-dimension T.parallel, or T.Parallel) nested with
        nothing else in between are one T.Parallel map:

            for i in T.parallel(M):              for i, j in T.Parallel(M, N):
                for j in T.parallel(N):    ->        body
                    body
        """
        while len(s.body) == 1 and isinstance(s.body[0], ast.For) and not s.body[0].orelse \
                and isinstance(s.body[0].iter, ast.Call) and not call.keywords:
            inner = s.body[0]
            fn = self.eval_callee(inner.iter.func)
            if not (isinstance(fn, Marker) and fn.name in ("parallel", "Parallel")):
                break
            names = [*names, *self.target_names(inner.target, inner)]
            call = ast.copy_location(ast.Call(call.func, [*call.args, *inner.iter.args],
                                              inner.iter.keywords), call)
            s = ast.copy_location(ast.For(s.target, call, inner.body, [], None), s)
        return names, call, s

    def persistent_loop(self, names, call: ast.Call, s) -> list:
        """TileLang's `for bx, by in T.Persistent([d0, d1], wave_size, index):` each block takes
        the tiles index, index + wave_size, ... of the row-major domain:

            for w in serial(ceildiv(d0 * d1, wave_size)):
                if index + w * wave_size < d0 * d1:  bx = t // d1;  by = t % d1;  body
        """
        a = self.args(call, ["domain", "wave_size", "index", "group_size"], {"group_size": None})
        domain = self.eval(a["domain"])
        domain = list(domain) if isinstance(domain, (list, tuple)) else [domain]
        domain = [self.resolved(d, a["domain"]) for d in domain]
        wave = self.resolved(self.eval(a["wave_size"]), a["wave_size"])
        if not all(isinstance(d, int) and d > 0 for d in domain + [wave]):
            raise self.error(call, "T.Persistent takes a constant domain and wave size")
        if len(names) != len(domain):
            raise self.error(s, f"T.Persistent over a {len(domain)}-D domain binds "
                                f"{len(domain)} names, got {len(names)}")
        total = math.prod(domain)
        w = self.fresh_var("wave")
        t = binop("+", self.eval(a["index"]), binop("*", Var(w), wave))
        bound, stride = {}, total
        for n, d in zip(names, domain):
            stride //= d
            bound[n] = binop("%", binop("//", t, stride), d)
        self.scopes.append(bound)
        body = self.body(s.body)
        self.scopes.pop()
        guard = If(as_expr(binop("<", t, total)), tuple(body), (), self.loc(s))
        return [For((w,), (const(-(-total // wave)),), "serial", (guard,), 0, self.loc(s))]

    def loop_bounds(self, kind: str, call: ast.Call) -> tuple[list, list]:
        """The bound arguments of a loop call (AST nodes) and its other keywords: TileLang's
        `T.Pipelined(start=a, stop=b, num_stages=n)` names the bounds it also takes by position
        (`stop` alone after a positional start; `start` alone is the extent)."""
        named = {kw.arg: kw for kw in call.keywords if kind == "pipelined"
                 and kw.arg in ("start", "stop")}
        nodes = list(call.args)
        if "start" in named:
            if nodes:
                raise self.error(named["start"], "T.Pipelined got its start twice (by position "
                                                 "and as start=)")
            nodes.append(named["start"].value)
        if "stop" in named:
            if len(nodes) != 1:
                raise self.error(named["stop"], "T.Pipelined(start, stop=...) takes one start "
                                                "before stop=")
            nodes.append(named["stop"].value)
        return nodes, [kw for kw in call.keywords if kw.arg not in named]

    def ir_loop(self, kind: str, names, call: ast.Call, s) -> For:
        arg_nodes, keywords = self.loop_bounds(kind, call)
        extents = [self.resolved(self.eval(a), a) for a in arg_nodes]
        stages = 0
        for kw in keywords:
            if kind == "pipelined" and kw.arg == "num_stages":
                stages = self.eval(kw.value)
                if not isinstance(stages, int) or stages < 0:
                    raise self.error(kw.value, "num_stages must be a constant int >= 0")
                stages = max(stages, 1)
            elif kind == "pipelined" and kw.arg in ("order", "stage", "group", "sync",
                                                    "cross_interval"):
                # TileLang's GPU warp-specialisation schedule, tilelang-ascend's interval of
                # the cross-core signals of an auto-pipelined loop: hints here (the compiler
                # places the cross-core flags itself)
                pass
            elif kind in ("serial", "unroll") and kw.arg in ("unroll_factor", "annotations"):
                pass
            elif kind == "parallel" and kw.arg in ("coalesced_width", "loop_layout"):
                pass
            else:
                raise self.error(kw, f"unexpected argument '{kw.arg}'")
        if kind == "pipelined" and stages == 0:
            stages = 1
        start = 0
        if kind == "pipelined" and len(extents) == 2:  # T.Pipelined(start, stop, num_stages=)
            start, extents = extents[0], [binop("-", extents[1], extents[0])
                                          if is_ir(extents[0]) or is_ir(extents[1])
                                          else extents[1] - extents[0]]
        if kind != "parallel" and len(extents) != 1:
            raise self.error(call, f"this loop takes one extent, got {len(extents)}")
        if not extents:
            raise self.error(call, "a loop needs an extent")
        for a, e in zip(arg_nodes, extents):
            if kind == "parallel" and not (isinstance(e, int) and e > 0):
                raise self.error(a, f"T.Parallel extents must be positive constant ints, got {show(e)}")
            if not (is_ir(e) or isinstance(e, int)):
                raise self.error(a, f"a loop extent must be an integer expression, got {show(e)}")
        if len(names) != len(extents):
            raise self.error(s.target, f"expected {len(extents)} loop variables, got {len(names)}")
        # a loop variable that shadows an enclosing loop's (TileLang's nsa_fwd: `for i, j in
        # T.Parallel(G, BS)` inside `for i in T.Pipelined(NS)`) gets its own IR name, so that an
        # expression bound to the outer one (`i_s = BlockIndices[..., i] * BS`, inlined where it
        # is used) still means the outer one inside the inner loop
        py_names = names
        names = tuple(self.fresh_var(n) if n in self.var_ranges or n in self.loop_names else n
                      for n in names)  # (loop_names: enclosing loops with run-time extents too)
        self.scopes.append({p: Var(n) if isinstance(start, int) and start == 0 else binop("+", Var(n), start)
                            for p, n in zip(py_names, names)})
        self.parallel_depth += kind == "parallel"
        if kind == "parallel":  # a name bound in the body may need a per-iteration copy
            self.parallel_loops.append((names, tuple(extents)))
            self.parallel_outer.append(len(self.open_bodies) - 1)
        outer = self.with_ranges(names, extents)
        self.loop_names.extend(names)
        try:
            body = self.body(s.body)
        finally:
            del self.loop_names[len(self.loop_names) - len(names):]
            self.parallel_depth -= kind == "parallel"
            if kind == "parallel":
                self.parallel_loops.pop()
                self.parallel_outer.pop()
            self.var_ranges = outer
        self.scopes.pop()
        if kind == "parallel" and any(self.reducer_update(b, names) for b in body):
            return self.parallel_reducers(names, extents, body, s)
        if kind == "parallel" and any(isinstance(b, ParallelAtomic) for b in body):
            return self.parallel_body(names, extents, body, s)
        if kind == "parallel" and any(isinstance(b, For) for b in body):
            return self.parallel_with_loops(names, extents, body, s)
        if kind == "parallel":
            for b in body:
                if not isinstance(b, (Store, If)):  # parallel_if: Ifs of element assignments
                    raise self.error(s, "a T.Parallel body holds element assignments only")
        return self.parallel_fill(For(names, tuple(as_expr(e) for e in extents), kind, tuple(body),
                                      stages, self.loc(s)))

    def thread_split(self, s):
        """`if T.get_thread_binding() < c:` (also `<=`, `>`, `>=`, either side) with a constant
        c partitions a TileLang block's threads into two groups that each run their branch's
        tile operations on whole tiles (mhc_pre: sinkhorn on threads 0-31, the mix on the rest).
        Both groups exist on a GPU, so here both branches run, the lower group's first; a
        group with no threads (c outside 1..threads-1) runs nothing. A branch with an element
        assignment outside T.Parallel (`if tx < 4: Y[0] = X[0]`) is per-thread code (each thread
        of the group runs it): not a split, the SIMT error. Returns (lower group not
        empty, upper group not empty, `then` is the lower group's branch), or None when the
        test is not such a comparison.

            if tx < 32: A  else: B      ->   A; B        (threads=96)
        """
        test = s.test
        if not (isinstance(test, ast.Compare) and len(test.ops) == 1
                and isinstance(test.ops[0], (ast.Lt, ast.LtE, ast.Gt, ast.GtE))):
            return None
        from .common import ThreadIndex
        a, b = self.eval(test.left), self.eval(test.comparators[0])
        op = type(test.ops[0])
        if isinstance(b, ThreadIndex) and not isinstance(a, ThreadIndex):
            a, b = b, a
            op = {ast.Lt: ast.Gt, ast.Gt: ast.Lt, ast.LtE: ast.GtE, ast.GtE: ast.LtE}[op]
        threads = getattr(self, "gpu_threads", None)
        if not isinstance(a, ThreadIndex) or a.dim != 0 or type(b) is not int or threads is None \
                or _element_code(s):
            return None
        # the upper group starts at thread `first`: tx < c, tx >= c -> c; tx <= c, tx > c -> c + 1
        first = min(max(b + (op in (ast.LtE, ast.Gt)), 0), threads)
        return first > 0, first < threads, op in (ast.Lt, ast.LtE)

    def with_ranges(self, names, extents) -> dict:
        """Record the ranges of loop variables with constant extents (0..e-1) for the body;
        returns the ranges to restore after it."""
        outer = self.var_ranges
        self.var_ranges = dict(outer)
        for n, e in zip(names, extents):
            if isinstance(e, int) and not isinstance(e, bool) and e > 0:
                self.var_ranges[n] = (0, e - 1)
            else:
                self.var_ranges.pop(n, None)
        return outer

    def range_loop(self, names, call: ast.Call, s) -> For:
        args = [self.eval(a) for a in call.args]
        if len(names) != 1 or not 1 <= len(args) <= 3 or call.keywords:
            raise self.error(call, "range(stop), range(start, stop) or range(start, stop, step)")
        start, stop, step = (0, args[0], 1) if len(args) == 1 else (args + [1])[:3]
        if not isinstance(step, int) or step <= 0:
            raise self.error(call, "range step must be a positive constant int")
        extent = binop("//", binop("+", binop("-", stop, start), step - 1), step)
        name = names[0]
        self.scopes.append({name: binop("+", binop("*", Var(name), step), start)})
        outer = self.with_ranges(names, [extent])
        try:
            body = self.body(s.body)
        finally:
            self.var_ranges = outer
        self.scopes.pop()
        return For((name,), (as_expr(extent),), "serial", tuple(body), 0, self.loc(s))

    def stmt_While(self, s):
        """`while c:` on a trace-time condition runs at trace time (its body is emitted once per
        pass, like a Python `for` over a list); on a run-time condition (one that reads kernel
        values, `while bx[0] < n:`) it is an IR `while` loop, whose condition is read before
        every trip. A `break` in its body sets a flag that the condition also tests (breaks.py),
        which makes `while True:` with a run-time `break` a run-time loop too."""
        if s.orelse:
            raise self.error(s, "while/else is not supported in a kernel")
        out = []
        for _ in range(_MAX_TRACE_WHILE):
            cond = self.resolved(self.eval(s.test), s.test)
            if is_ir(cond) or (cond and has_break(s.body)):
                return out + self.runtime_while(s)
            if not cond:
                return out
            out.extend(self.body(s.body))
        raise self.error(s, f"a trace-time `while` loop ran {_MAX_TRACE_WHILE} times; "
                            f"its condition never became false")

    def runtime_while(self, s) -> list:
        """`while c: body` as an IR while loop. Values carried from one trip to the next live in
        buffers (`x = T.alloc_var(...)`, `x = ...` stores): the condition is one expression,
        read before every trip, so a name it reads that the body binds anew (a trace-time
        value, `i = i + 1` on a Python int) has no meaning here and is a located error.

            while bx[0] < n:              while bx[0] < n:
                A; bx[0] = bx[0] + 4  ->      A; bx[0] = bx[0] + 4
        """
        if self.parallel_depth:
            raise self.error(s, "a `while` loop in a T.Parallel body: its iterations have no "
                                "order; loop over the tile with T.serial outside T.Parallel")
        test, body, init = s.test, s.body, []
        if has_break(body):
            name, clear = self.break_flag(s)
            init = [clear]
            test = ast.copy_location(ast.BoolOp(ast.And(), [cleared(name, s.test), s.test]),
                                     s.test)
            body = guarded_body(body, name)
        cond = self.while_cond(test, s.test)
        self.scopes.append({})
        self.while_marks.append((len(self.scopes) - 1, set()))
        try:
            stmts = self.body(body)
            carried = sorted(self.while_marks[-1][1])
            if carried:
                shown = ", ".join(f"`{n}`" for n in carried)
                raise self.error(s, f"this `while` loop's body binds {shown} anew: the body "
                                    f"is traced once, so a name cannot carry a value from one "
                                    f"trip to the next. " + _KEEP.format(carried[0]))
            if self.while_cond(test, s.test) != cond:
                raise self.error(s.test, "the condition of this `while` reads a name that stands "
                                         "for an expression of data its body writes (a name is "
                                         "not a copy of the value). " + _KEEP.format("x"))
        finally:
            self.while_marks.pop()
            self.scopes.pop()
        return init + [For((), (cond,), "while", tuple(stmts), 0, self.loc(s))]

    def while_cond(self, test, where):
        """The IR condition of a run-time `while`."""
        cond = self.resolved(self.eval(test), where)
        return self.truth(cond) if is_ir(cond) else const(bool(cond))

    def truth(self, cond):
        """A run-time condition as an IR expression: a loaded number is tested against 0."""
        if isinstance(cond, Load) and cond.buffer.dtype != "bool":
            cond = binop("!=", cond, const(0.0 if dtypes.is_float(cond.buffer.dtype) else 0))
        return as_expr(cond)

    def note_rebinding(self, name: str, value) -> None:
        """`name = value` inside open run-time `while` loops: a name bound before a loop that
        its body binds to another value carries a value across trips (a tile allocated again
        in the body is that trip's own)."""
        if isinstance(value, Buffer):
            return
        for depth, carried in self.while_marks:
            outer = next((sc[name] for sc in reversed(self.scopes[:depth]) if name in sc),
                         self.globals.get(name, _UNBOUND))
            if outer is not _UNBOUND and not _same(outer, value):
                carried.add(name)

    def stmt_If(self, s):
        split = self.thread_split(s)
        if split is not None:  # the thread groups' tile work, the lower group's first
            low, high, then_low = split
            low_body, high_body = (s.body, s.orelse) if then_low else (s.orelse, s.body)
            return (self.flat_body(low_body) if low else []) + \
                (self.flat_body(high_body) if high else [])
        cond = self.resolved(self.eval(s.test), s.test)
        if not is_ir(cond):  # trace-time condition: pick the branch now
            return self.flat_body(s.body if cond else s.orelse)
        cond = self.truth(cond)
        self.scopes.append({})
        self.runtime_if_depth = getattr(self, "runtime_if_depth", 0) + 1
        then = self.body(s.body)
        self.scopes[-1] = {}
        other = self.body(s.orelse)
        self.runtime_if_depth -= 1
        self.scopes.pop()
        if self.parallel_depth:
            return self.parallel_if(cond, then, other, s)
        return [If(cond, tuple(then), tuple(other), self.loc(s))]


_UNBOUND = object()
_KEEP = ("A value that changes from one trip to the next lives in a variable: "
         "`{0} = T.alloc_var(T.int32)` before the loop, then `{0} = ...` in it")


def _same(a, b) -> bool:
    """Trace-time values equal as the loop would see them (IR by structure)."""
    try:
        return a is b or (type(a) is type(b) and bool(a == b))
    except Exception:  # noqa: BLE001 -- arrays and the like: not provably the same
        return False


def _element_code(if_node) -> bool:
    """Whether an `if` statement's branches assign an element (`x[i] = ...`, `x[i] += ...`)
    outside a `for ... in T.Parallel(...)` body."""
    def visit(node, in_map):
        if isinstance(node, (ast.Assign, ast.AugAssign, ast.AnnAssign)) and not in_map:
            targets = node.targets if isinstance(node, ast.Assign) else [node.target]
            if any(isinstance(t, ast.Subscript) for t in targets):
                return True
        if isinstance(node, ast.For):
            it = node.iter.func if isinstance(node.iter, ast.Call) else None
            name = it.attr if isinstance(it, ast.Attribute) else getattr(it, "id", "")
            in_map = in_map or name in ("Parallel", "parallel")
        return any(visit(c, in_map) for c in ast.iter_child_nodes(node))
    return any(visit(st, False) for st in [*if_node.body, *if_node.orelse])

