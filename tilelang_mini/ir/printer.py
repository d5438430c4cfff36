"""Print IR as text that reads like the DSL; `parser.parse_ir` reads it back (docs/ir_format.md).

Every statement line ends with `# LINE:COL` (its kernel source location; none for a node read
from IR text without one, whose `TextLoc` is a place in that text); lowered instructions also
show `CORE.PIPE` there, which is derived, not stored.
"""
from __future__ import annotations

from .nodes import (
    Alloc, BinOp, Call, Cast, Const, Copy, Fill, For, Gemm, If, Kernel, Load, PipeBarrier,
    Reinterpret, Sort, Fused,
    Reduce, Region, Scope, SetCrossFlag, SetFlag, Store, TextLoc, Var, WaitCrossFlag, WaitFlag,
)

INDENT = "    "

ALLOC_NAMES = {
    "shared": "alloc_shared", "fragment": "alloc_fragment", "var": "alloc_var",
    "L1": "alloc_L1", "L0A": "alloc_L0A", "L0B": "alloc_L0B", "L0C": "alloc_L0C", "UB": "alloc_ub",
    "workspace": "alloc_workspace",
}
LOOP_NAMES = {"serial": "serial", "parallel": "Parallel", "pipelined": "Pipelined", "unroll": "unroll"}

# Python precedence, low to high.
_PREC = {"or": 1, "and": 2, "not": 3, "<": 4, "<=": 4, ">": 4, ">=": 4, "==": 4, "!=": 4,
         "+": 5, "-": 5, "*": 6, "/": 6, "//": 6, "%": 6, "neg": 7}
_ATOM = 9


def print_ir(kernel: Kernel) -> str:
    """The text of `kernel`; lowered instructions are tagged `CORE.PIPE` (derived, not parsed)."""
    from .pipes import pipe_of
    return _Printer(pipe_of).kernel(kernel)


def print_ir_line(stmt) -> str:
    """The one-line text of a statement (a loop or scope: its header), without its location."""
    p = _Printer(None)
    p.stmt(0, stmt, None)
    return p.lines[0].split("  #")[0]


def print_expr(e) -> str:
    return _expr(e)[0]


def print_region(r: Region) -> str:
    if r.is_full:
        return r.buffer.name
    dims = ", ".join(f"{_expr(s)[0]} +: {n}" for s, n in zip(r.start, r.extent))
    return f"{r.buffer.name}[{dims}]"


def _display_path(path: str) -> str:
    """Paths under the working directory print relative to it (stable golden files)."""
    import os
    try:
        rel = os.path.relpath(path)
    except ValueError:
        return path
    return path if rel.startswith("..") or not os.path.isabs(path) else rel


def _dtype(d: str) -> str:
    return f'"{d}"'


def _shape(shape) -> str:
    inner = ", ".join(str(s) for s in shape)
    return f"({inner},)" if len(shape) == 1 else f"({inner})"


def _const(c: Const) -> str:
    if isinstance(c.value, bool):
        return "True" if c.value else "False"
    if isinstance(c.value, float):
        if c.value != c.value:
            return "nan"
        if c.value in (float("inf"), float("-inf")):
            return "inf" if c.value > 0 else "-inf"
        return repr(c.value)
    return str(c.value)


def _expr(e) -> tuple[str, int]:
    """(text, precedence) of an expression."""
    if isinstance(e, Const):
        text = _const(e)
        return text, (_PREC["neg"] if text.startswith("-") else _ATOM)
    if isinstance(e, Var):
        return e.name, _ATOM
    if isinstance(e, Load):
        return f"{e.buffer.name}[{', '.join(_expr(i)[0] for i in e.indices)}]", _ATOM
    if isinstance(e, Cast):
        return f"cast({_expr(e.value)[0]}, {_dtype(e.dtype)})", _ATOM
    if isinstance(e, Reinterpret):
        return (f"reinterpret({_expr(e.value)[0]}, {_dtype(e.source)}, {_dtype(e.dtype)})",
                _ATOM)
    if isinstance(e, Call):
        if e.fn == "neg":
            arg = e.args[0]
            literal = isinstance(arg, Const) and not isinstance(arg.value, bool)
            if literal and not _const(arg).startswith("-"):  # `-3` would read back as Const(-3)
                return f"-({_const(arg)})", _PREC["neg"]
            return "-" + _wrap(arg, _PREC["neg"]), _PREC["neg"]
        if e.fn == "not":
            return "not " + _wrap(e.args[0], _PREC["not"]), _PREC["not"]
        return f"{e.fn}({', '.join(_expr(a)[0] for a in e.args)})", _ATOM
    if isinstance(e, BinOp):
        p = _PREC[e.op]
        chained = p == 4  # comparisons do not chain in the IR: parenthesise nested ones
        left = _wrap(e.a, p + 1 if chained else p)
        right = _wrap(e.b, p + 1)
        return f"{left} {e.op} {right}", p
    raise TypeError(f"not an expression: {e!r}")


def _wrap(e, min_prec: int) -> str:
    text, p = _expr(e)
    return text if p >= min_prec else f"({text})"


class _Printer:
    def __init__(self, pipe_of):
        self.pipe_of = pipe_of
        self.lines: list[str] = []

    def kernel(self, k: Kernel) -> str:
        hints = ", hints=[" + ", ".join(f'"{h}"' for h in k.hints) + "]" if k.hints else ""
        source = k.loc.source if isinstance(k.loc, TextLoc) else k.loc.file
        self.lines = [f'@prim_func(source="{_display_path(source)}"{hints})']
        params = ", ".join(f"{b.name}: Tensor({_shape(b.shape)}, {_dtype(b.dtype)})" for b in k.params)
        self.emit(0, f"def {k.name}({params}):", k.loc)
        grid = ", ".join(str(g) for g in k.grid)
        npu = ", is_npu=True" if k.is_npu else ""
        names = ", ".join(k.grid_vars)
        self.emit(1, f"with Kernel({grid}{npu}) as ({names}):", k.loc)
        self.body(2, k.body, None)
        return "\n".join(self.lines) + "\n"

    def emit(self, depth: int, text: str, loc, tag: str = "") -> None:
        located = loc is not None and loc.line and not isinstance(loc, TextLoc)
        where = f"{loc.line}:{loc.col}" if located else ""
        comment = " ".join(x for x in (tag, where) if x)
        self.lines.append(INDENT * depth + text + (f"  # {comment}" if comment else ""))

    def body(self, depth: int, stmts, core) -> None:
        if not stmts:
            self.lines.append(INDENT * depth + "pass")
        for s in stmts:
            self.stmt(depth, s, core)

    def tag(self, s, core) -> str:
        if self.pipe_of is None:
            return ""
        pipe = self.pipe_of(s, core)
        if pipe is None:
            return ""
        return f"{core}.{pipe}" if core else pipe

    def stmt(self, d: int, s, core) -> None:
        t = lambda: self.tag(s, core)  # noqa: E731
        if isinstance(s, Alloc):
            b = s.buffer
            bare = b.scope == "var" and b.shape == (1,)  # `alloc_var("dtype")` is one element
            args = [_dtype(b.dtype)] if bare else [_shape(b.shape), _dtype(b.dtype)]
            if s.offset is not None:
                args.append(f"offset={s.offset}")
            if s.uninit:
                args.append("uninit=True")
            if s.panels:
                args.append("panels=True")
            if s.widened:
                args.append("widened=True")
            self.emit(d, f"{b.name} = {ALLOC_NAMES[b.scope]}({', '.join(args)})", s.loc)
        elif isinstance(s, Copy):
            atomic = ", relu=True" if s.atomic == "relu" else \
                f", atomic_{s.atomic}=True" if s.atomic else ""
            atomic += ", transpose=True" if s.transpose else ""
            atomic += ", dual=True" if s.dual else ""
            self.emit(d, f"copy({print_region(s.src)}, {print_region(s.dst)}{atomic})", s.loc, t())
        elif isinstance(s, Gemm):
            flags = "".join(f", {name}=True" for name, on in (
                ("transpose_A", s.transpose_a), ("transpose_B", s.transpose_b),
                ("clear_accum", s.clear_accum)) if on)
            args = ", ".join(print_region(r) for r in (s.a, s.b, s.c))
            if s.scale_gran:
                flags += (f", scale_A={print_region(s.scale_a)}, scale_B={print_region(s.scale_b)}"
                          f", scale_gran={s.scale_gran}")
            if s.columns is not None:
                flags += f", columns={print_expr(s.columns)}"
            self.emit(d, f"gemm({args}{flags})", s.loc, t())
        elif isinstance(s, Fill):
            self.emit(d, f"fill({print_region(s.dst)}, {print_expr(s.value)})", s.loc, t())
        elif isinstance(s, Reduce):
            clear = "" if s.clear else ", clear=False"
            self.emit(d, f"reduce_{s.kind}({print_region(s.src)}, {print_region(s.dst)}, "
                         f"dim={s.dim}{clear})", s.loc, t())
        elif isinstance(s, Sort):
            order = "" if s.descending else ", descending=False"
            self.emit(d, f"sort({print_region(s.values)}, {print_region(s.indices)}{order})",
                      s.loc, t())
        elif isinstance(s, Store):
            idx = ", ".join(print_expr(i) for i in s.indices)
            self.emit(d, f"{s.buffer.name}[{idx}] = {print_expr(s.value)}", s.loc, t())
        elif isinstance(s, For) and s.kind == "while":
            self.emit(d, f"while {print_expr(s.extents[0])}:", s.loc, t())
            self.body(d + 1, s.body, core)
        elif isinstance(s, For):
            ext = ", ".join(print_expr(e) for e in s.extents)
            if s.kind == "pipelined":
                ext += f", num_stages={s.num_stages}"
            names = ", ".join(s.vars)
            self.emit(d, f"for {names} in {LOOP_NAMES[s.kind]}({ext}):", s.loc, t())
            if s.kind == "parallel":  # the map's element stores are part of the loop's pipe
                pipe_of, self.pipe_of = self.pipe_of, None
                self.body(d + 1, s.body, core)
                self.pipe_of = pipe_of
            else:
                self.body(d + 1, s.body, core)
        elif isinstance(s, If):
            self.emit(d, f"if {print_expr(s.cond)}:", s.loc)
            self.body(d + 1, s.then_body, core)
            if s.else_body:
                self.lines.append(INDENT * d + "else:")
                self.body(d + 1, s.else_body, core)
        elif isinstance(s, Scope):
            self.emit(d, f'with Scope("{s.core}"):', s.loc)
            self.body(d + 1, s.body, s.core)
        elif isinstance(s, Fused):
            self.emit(d, f'with fused("{s.kind}"):', s.loc)
            self.body(d + 1, s.body, core)
        elif isinstance(s, (SetFlag, WaitFlag)):
            name = "set_flag" if isinstance(s, SetFlag) else "wait_flag"
            self.emit(d, f"{name}({s.src}, {s.dst}, {s.event})", s.loc, core or "")
        elif isinstance(s, PipeBarrier):
            self.emit(d, f"pipe_barrier({s.pipe})", s.loc, core or "")
        elif isinstance(s, (SetCrossFlag, WaitCrossFlag)):
            name = "set_cross_flag" if isinstance(s, SetCrossFlag) else "wait_cross_flag"
            self.emit(d, f"{name}({s.pipe}, {s.flag})", s.loc, core or "")
        else:
            raise TypeError(f"cannot print {type(s).__name__}")
