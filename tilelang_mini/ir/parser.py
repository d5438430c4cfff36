"""Read the IR text that `printer.print_ir` prints back into nodes (docs/ir_format.md).

`parse_ir(print_ir(k)) == k` and `print_ir(parse_ir(t)) == t`. The grammar (grammar.lark) only
fixes the shape of the text; this module resolves names to buffers, checks dtypes, pipes, scopes,
call signatures and ranks, and turns every mistake into a located `CompileError`.
"""
from __future__ import annotations

import functools
import math
import re
from dataclasses import dataclass, replace
from pathlib import Path

from lark import Lark, Token, Transformer, v_args
from lark.exceptions import LarkError, UnexpectedInput, UnexpectedToken, VisitError
from lark.indenter import Indenter

from .. import errors  # a module, not its names: errors.py imports ir.nodes (a cycle)
from .dtypes import canonical
from .nodes import (
    BIN_OPS, CALL_FNS, CORES, NO_LOC, PIPES, REDUCE_KINDS, Alloc, BinOp, Buffer, Call, Cast, Const,
    ATOMIC_KINDS, call_arity, Reinterpret, Sort, Copy, Fill, For, Gemm, If, Kernel, Load, Loc, PipeBarrier, Reduce, Region, Scope, SetCrossFlag,
    SetFlag, Store, TextLoc, Var, WaitCrossFlag, WaitFlag, FUSED_KINDS, Fused,
)
from .printer import ALLOC_NAMES, LOOP_NAMES

__all__ = ["parse_ir"]

_SCOPE_OF_ALLOC = {name: scope for scope, name in ALLOC_NAMES.items()}
_KIND_OF_LOOP = {name: kind for kind, name in LOOP_NAMES.items()}
_EXPR_FNS = tuple(f for f in CALL_FNS if f not in ("neg", "not")) + ("cast", "reinterpret")
_LOC_RE = re.compile(r"(\d+):(\d+)\s*$")


def parse_ir(text: str, filename: str = "<ir>") -> Kernel:
    """The Kernel that `text` (as printed by `print_ir`) describes; CompileError if it is wrong."""
    lines = text.split("\n")
    source = text if text.endswith("\n") else text + "\n"
    indenter = _Indenter()  # this parse's indentation levels and open brackets
    try:
        tree = _parse_tree(source, indenter)
        return _ToIR(filename, lines).transform(tree)
    except VisitError as e:  # raised inside the transformer: a CompileError (or a bug) of ours
        orig, (line, col) = e.orig_exc, _where(e.obj)
        if isinstance(orig, RecursionError):  # statements or expressions nested hundreds deep
            raise _error("this part nests too deeply to read (loops, ifs or an expression "
                         "hundreds of levels deep); split it up", filename, lines, line, col) \
                from None
        if isinstance(orig, (ValueError, OverflowError)):  # e.g. an integer of 5000 digits
            raise _error(f"cannot read this: {orig}", filename, lines, line, col) from None
        raise orig.with_traceback(None) from None
    except _IndentError as e:
        raise _error(e.message, filename, lines, e.line, e.col) from None
    except UnexpectedInput as e:
        raise _syntax_error(e, filename, lines, indenter.open_brackets) from None
    except LarkError as e:  # anything else lark may raise: never let its classes escape
        raise _error(f"cannot read the IR text ({e})", filename, lines, 1, 1) from None
    except RecursionError:  # lark builds trees recursively: the most nested line is the cause
        line = max(range(len(lines)), key=lambda i: _nesting(lines[i])) + 1
        raise _error("this line nests too deeply to read (an expression or loops hundreds of "
                     "levels deep); split it up", filename, lines, line, 1) from None


def _where(obj) -> tuple[int, int]:
    """(line, column) of a lark tree or token (1, 1 when it has none)."""
    meta = getattr(obj, "meta", obj)
    return getattr(meta, "line", None) or 1, getattr(meta, "column", None) or 1


def _nesting(line: str) -> int:
    """Operators and brackets on a line, and its indentation: a proxy for how deeply its
    expression and the statements around it nest."""
    return sum(line.count(c) for c in "+-*/%(<>=&|") + (len(line) - len(line.lstrip())) // 4


# ------------------------------------------------------------------------------- lark plumbing


@functools.lru_cache(maxsize=None)
def _lark() -> Lark:
    """The grammar's tables, built once and only read afterwards (no per-parse state: each
    parse has its own `_Indenter` and interactive parser, so threads may parse at once)."""
    grammar = (Path(__file__).with_name("grammar.lark")).read_text()
    return Lark(grammar, parser="lalr", lexer="basic", propagate_positions=True,
                maybe_placeholders=True)


def _parse_tree(source: str, indenter: "_Indenter"):
    parser = _lark()
    state = parser.parse_interactive()
    token = None
    for token in indenter.process(parser.lex(source)):
        state.feed_token(token)
    return state.feed_eof(token)


class _IndentError(Exception):
    def __init__(self, message, line, col):
        super().__init__(message)
        self.message, self.line, self.col = message, line, col


class _Indenter(Indenter):
    """Indentation to _INDENT/_DEDENT tokens, one instance per parse."""

    NL_type = "_NEWLINE"
    OPEN_PAREN_types = ["LPAR", "LSQB"]
    CLOSE_PAREN_types = ["RPAR", "RSQB"]
    INDENT_type = "_INDENT"
    DEDENT_type = "_DEDENT"
    tab_len = 8

    def handle_NL(self, token):
        """As lark's, but a dedent to no enclosing level is a located error."""
        if self.paren_level > 0:
            return
        yield token
        indent_str = token.rsplit("\n", 1)[1]
        indent = indent_str.count(" ") + indent_str.count("\t") * self.tab_len
        if indent > self.indent_level[-1]:
            self.indent_level.append(indent)
            yield Token.new_borrow_pos(self.INDENT_type, indent_str, token)
            return
        while indent < self.indent_level[-1]:
            self.indent_level.pop()
            yield Token.new_borrow_pos(self.DEDENT_type, indent_str, token)
        if indent != self.indent_level[-1]:
            raise _IndentError(f"inconsistent indentation: expected {self.indent_level[-1]} "
                               f"spaces, found {indent}", token.end_line, token.end_column)

    def __init__(self):
        super().__init__()
        self.open_brackets: list[Token] = []

    def process(self, stream):
        self.open_brackets = []
        return super().process(stream)

    def _process(self, stream):
        token = None
        for token in stream:
            if token.type == self.NL_type:
                yield from self.handle_NL(token)
            else:
                yield token
            if token.type in self.OPEN_PAREN_types:
                self.paren_level += 1
                self.open_brackets.append(token)
            elif token.type in self.CLOSE_PAREN_types and self.paren_level:
                self.paren_level -= 1
                self.open_brackets.pop()
        while len(self.indent_level) > 1:
            self.indent_level.pop()
            yield Token.new_borrow_pos(self.DEDENT_type, "", token)


# --------------------------------------------------------------------------------------- errors

_FRIENDLY = {"NAME": "a name", "NUMBER": "a number", "STRING": 'a string like "float32"',
             "COMMENT": "a comment", "_NEWLINE": "end of line", "_INDENT": "an indented block",
             "_DEDENT": "end of the block", "$END": "end of the text"}
_EXPR_START = {"NAME", "NUMBER", "LPAR", "MINUS"}
_OPERATORS = {f"'{op}'" for op in BIN_OPS}


def _error(message, filename, lines, line, col) -> errors.CompileError:
    line = max(int(line), 1)
    source_line = lines[line - 1] if line <= len(lines) else ""
    return errors.CompileError(message, Loc(filename, line, max(int(col), 1)), source_line)


def _describe(name: str) -> str:
    if name in _FRIENDLY:
        return _FRIENDLY[name]
    try:
        pattern = _lark().get_terminal(name).pattern
    except KeyError:
        return name.lower()
    return f"'{pattern.value}'" if pattern.type == "str" else name.lower()


def _expected(names) -> str:
    names = set(names)
    items = []
    if _EXPR_START <= names:
        names -= _EXPR_START | {"NOT", "TRUE", "FALSE", "INF", "NAN"}
        items.append("an expression")
    described = {_describe(n) for n in names}
    if len(described & _OPERATORS) > 2:
        described = (described - _OPERATORS) | {"an operator"}
    items += sorted(described)
    if len(items) <= 1:
        return "".join(items)
    return ", ".join(items[:-1]) + " or " + items[-1]


def _syntax_error(e: UnexpectedInput, filename, lines, opened) -> errors.CompileError:
    if isinstance(e, UnexpectedToken):
        tok = e.token
        at_end = tok.type == "$END" or tok.type == "_DEDENT" and not "".join(
            lines[tok.end_line - 1:]).strip()
        if at_end:  # point just after the last non-blank line
            line = max((i + 1 for i, x in enumerate(lines) if x.strip()), default=1)
            col = len(lines[line - 1]) + 1
            found = "end of the text"
        elif tok.type in ("_INDENT", "_DEDENT"):
            line, col = tok.end_line, tok.end_column
            found = "indentation" if tok.type == "_INDENT" else "end of the block"
        else:
            line, col = tok.line, tok.column
            found = _FRIENDLY[tok.type] if tok.type == "_NEWLINE" else f"'{tok.value}'"
        message = f"unexpected {found}"
        expected = _expected(e.expected)
        if expected:
            message += f"; expected {expected}"
    else:
        line, col = e.line, e.column
        char = lines[line - 1][col - 1:col] if line <= len(lines) else ""  # UnexpectedCharacters
        message = f"unexpected character '{char}'" if char.strip() else "unexpected input"
    if opened and opened[-1].line < line:  # the real mistake is the bracket left open
        b = opened[-1]
        message = f"'{b}' is never closed ({message} at {line}:{col})"
        line, col = b.line, b.column
    return _error(message, filename, lines, line, col)


# ---------------------------------------------------------------------------------- transformer


@dataclass(frozen=True)
class _Kw:
    name: Token
    value: object


@dataclass(frozen=True)
class _Arg:
    value: object  # Expr, Region or _Kw
    line: int
    col: int


class _ToIR(Transformer):
    """Builds nodes bottom-up. Lark visits children in text order, so an alloc is registered before
    the statements after it are built; `buffers` maps each name to its most recent declaration."""

    def __init__(self, filename: str, lines: list[str]):
        super().__init__()
        self.filename, self.lines = filename, lines
        self.source = NO_LOC.file
        self.buffers: dict[str, Buffer] = {}

    # -- helpers
    def err(self, message, at):
        """Raise a CompileError at a token, an _Arg or a (line, col) pair."""
        line, col = (at.line, at.column) if isinstance(at, Token) else \
            (at.line, at.col) if isinstance(at, _Arg) else at
        raise _error(message, self.filename, self.lines, line, col)

    def loc(self, comment, meta=None) -> Loc:
        """The kernel source location in a statement's `# LINE:COL` comment; without one, the
        statement's own place in the text (`meta`: its lark position), so that errors found
        later (checks, passes, the simulator) point into the text with a caret."""
        m = _LOC_RE.search(str(comment)) if comment is not None else None
        if m:
            return Loc(self.source, int(m.group(1)), int(m.group(2)))
        line = getattr(meta, "line", None)
        if not line:
            return NO_LOC
        text = self.lines[line - 1] if line <= len(self.lines) else ""
        return TextLoc(self.filename, line, getattr(meta, "column", None) or 1, text, self.source)

    def dtype(self, tok: Token) -> str:
        name = canonical(tok[1:-1])
        if name is None:
            self.err(f"unknown dtype {tok}; expected a dtype like \"float16\" or \"float32\"", tok)
        return name

    def one_of(self, tok: Token, allowed, what: str, expected: str) -> str:
        """The quoted name `tok` without its quotes, when it is one of `allowed`."""
        if tok[1:-1] not in allowed:
            self.err(f"unknown {what} {tok}; expected {expected}", tok)
        return tok[1:-1]

    def int_(self, tok: Token) -> int:
        if not re.fullmatch(r"[0-9]+", tok):
            self.err(f"expected an integer, found '{tok}'", tok)
        return int(tok)

    def buffer(self, tok: Token, rank: int | None = None) -> Buffer:
        b = self.buffers.get(str(tok))
        if b is None:
            self.err(f"unknown buffer '{tok}': expected a kernel parameter or an allocated buffer",
                     tok)
        if rank is not None and rank != len(b.shape):
            self.err(f"'{tok}' has {len(b.shape)} dimension(s) {b.shape}; expected "
                     f"{len(b.shape)} index(es), found {rank}", tok)
        return b

    # -- kernel
    def start(self, children):
        return children[-1]

    def header(self, children):
        self.source = children[0][1:-1]
        self.hints = tuple(str(t)[1:-1] for t in children[1:] if isinstance(t, Token)
                           and t.type == "STRING")

    @v_args(meta=True)
    def kernel(self, meta, children):
        name, *params, comment, (grid, is_npu, names, body) = children
        return Kernel(str(name), tuple(params), grid, names, body, is_npu, self.loc(comment, meta),
                      getattr(self, "hints", ()))

    def param(self, children):
        name, shape, dtype = children
        b = Buffer(str(name), shape, self.dtype(dtype), "global")
        self.buffers[b.name] = b
        return b

    def grid(self, children):
        *args, names, _comment, body = children
        pos, kws = self.split(args, "Kernel", {"is_npu"})
        grid = tuple(self.const_int(a) for a in pos)
        is_npu = self.const_bool(kws["is_npu"]) if "is_npu" in kws else False
        return grid, is_npu, names, body

    def shape(self, children):
        return tuple(self.int_(t) for t in children)

    def names(self, children):
        return tuple(str(t) for t in children)

    # -- statements
    def block(self, children):
        return tuple(s for s in children if s is not None)

    @v_args(meta=True)
    def line(self, meta, children):
        stmt, comment = children
        return None if stmt is None else replace(stmt, loc=self.loc(comment, meta))

    def pass_(self, _children):
        return None

    def alloc(self, children):
        name, fn, shape, dtype, *kwargs = children
        scope = _SCOPE_OF_ALLOC.get(str(fn))
        if scope is None:
            self.err(f"unknown allocation '{fn}'; expected one of {', '.join(_SCOPE_OF_ALLOC)}", fn)
        if shape is None:
            if scope != "var":
                self.err(f"{fn} needs a shape: {fn}((d0, d1), \"dtype\")", dtype)
            shape = (1,)
        offset, flags = None, {"uninit": False, "panels": False, "widened": False}
        for kw in kwargs:
            arg = _Arg(kw.value, kw.name.line, kw.name.column)
            if str(kw.name) == "offset":
                offset = self.const_int(arg)
            elif str(kw.name) in flags:
                flags[str(kw.name)] = self.const_bool(arg)
            else:
                self.err(f"unknown keyword '{kw.name}' of {fn}; expected offset=, uninit=, "
                         f"panels= or widened=", kw.name)
        b = Buffer(str(name), shape, self.dtype(dtype), scope)
        self.buffers[b.name] = b
        return Alloc(b, offset, **flags)

    def store(self, children):
        name, indices, value = children
        indices = indices or ()
        return Store(self.buffer(name, len(indices)), indices, value)

    def call(self, children):
        fn, *args = children
        name = str(fn)
        if name == "copy":
            (src, dst), kws = self.split(args, fn, {f"atomic_{k}" for k in ATOMIC_KINDS}
                                         | {"transpose", "relu", "dual"}, 2)
            trans = self.const_bool(kws.pop("transpose")) if "transpose" in kws else False
            dual = self.const_bool(kws.pop("dual")) if "dual" in kws else False
            on = [k[len("atomic_"):] if k != "relu" else k for k, v in kws.items()
                  if self.const_bool(v)]
            if len(on) > 1:
                self.err("a copy has at most one atomic_ kind", fn)
            return Copy(self.as_region(src), self.as_region(dst), atomic=on[0] if on else "",
                        transpose=trans, dual=dual)
        if name == "gemm":
            flags = {"transpose_A", "transpose_B", "clear_accum"}
            scale_keys = {"scale_A", "scale_B", "scale_gran"}
            (a, b, c), kws = self.split(args, fn, flags | scale_keys | {"columns"}, 3)
            on = {k: self.const_bool(v) for k, v in kws.items() if k in flags}
            scales = {}
            if scale_keys & set(kws):
                if not scale_keys <= set(kws):
                    self.err("a block-scaled gemm needs scale_A=, scale_B= and scale_gran=", fn)
                scales = {"scale_a": self.as_region(kws["scale_A"]),
                          "scale_b": self.as_region(kws["scale_B"]),
                          "scale_gran": self.const_int(kws["scale_gran"])}
            columns = self.expr(kws["columns"]) if "columns" in kws else None
            return Gemm(self.as_region(a), self.as_region(b), self.as_region(c),
                        on.get("transpose_A", False), on.get("transpose_B", False),
                        on.get("clear_accum", False), **scales, columns=columns)
        if name == "fill":
            (dst, value), _ = self.split(args, fn, set(), 2)
            return Fill(self.as_region(dst), self.expr(value))
        if name.startswith("reduce_") and name[7:] in REDUCE_KINDS:
            (src, dst), kws = self.split(args, fn, {"dim", "clear"}, 2)
            if "dim" not in kws:
                self.err(f"{name} needs dim=N", fn)
            clear = self.const_bool(kws["clear"]) if "clear" in kws else True
            return Reduce(name[7:], self.as_region(src), self.as_region(dst),
                          self.const_int(kws["dim"], signed=True), clear)
        if name == "sort":
            (values, indices), kws = self.split(args, fn, {"descending"}, 2)
            desc = self.const_bool(kws["descending"]) if "descending" in kws else True
            return Sort(self.as_region(values), self.as_region(indices), desc)
        if name in ("set_flag", "wait_flag"):
            (src, dst, event), _ = self.split(args, fn, set(), 3)
            node = SetFlag if name == "set_flag" else WaitFlag
            return node(self.pipe(src), self.pipe(dst), self.const_int(event))
        if name == "pipe_barrier":
            (pipe,), _ = self.split(args, fn, set(), 1)
            return PipeBarrier(self.pipe(pipe))
        if name in ("set_cross_flag", "wait_cross_flag"):
            (pipe, flag), _ = self.split(args, fn, set(), 2)
            node = SetCrossFlag if name == "set_cross_flag" else WaitCrossFlag
            return node(self.pipe(pipe), self.const_int(flag))
        reduces = ", ".join(f"reduce_{k}" for k in REDUCE_KINDS)
        self.err(f"unknown statement '{fn}'; expected copy, gemm, fill, {reduces}, set_flag, "
                 "wait_flag, pipe_barrier, set_cross_flag or wait_cross_flag", fn)

    @v_args(meta=True)
    def for_(self, meta, children):
        names, kind_tok, *args, _comment, body = children
        kind = _KIND_OF_LOOP.get(str(kind_tok))
        if kind is None:
            self.err(f"unknown loop kind '{kind_tok}'; expected {', '.join(_KIND_OF_LOOP)}", kind_tok)
        keys = {"num_stages"} if kind == "pipelined" else set()
        extents, kws = self.split(args, kind_tok, keys)
        if len(extents) != len(names):
            self.err(f"{len(names)} loop variable(s) but {len(extents)} extent(s)", kind_tok)
        stages = self.const_int(kws["num_stages"]) if "num_stages" in kws else 0
        for e in extents:
            v = e.value
            if isinstance(v, Const) and (type(v.value) is not int or v.value < 0):
                self.err(f"a loop extent must be a non-negative integer, got {v.value!r}", e)
        return For(names, tuple(self.expr(e) for e in extents), kind, body, stages,
                   self.loc(_comment, meta))

    @v_args(meta=True)
    def while_(self, meta, children):
        cond, comment, body = children
        return For((), (cond,), "while", body, 0, self.loc(comment, meta))

    @v_args(meta=True)
    def if_(self, meta, children):
        cond, comment, then_body, *else_body = children
        return If(cond, then_body, else_body[0] if else_body else (), self.loc(comment, meta))

    def else_(self, children):
        return children[1]

    @v_args(meta=True)
    def scope(self, meta, children):
        core, comment, body = children
        return Scope(self.one_of(core, CORES, "core scope", '"C" (cube) or "V" (vector)'), body,
                     self.loc(comment, meta))

    @v_args(meta=True)
    def fused(self, meta, children):
        kind, comment, body = children
        return Fused(self.one_of(kind, FUSED_KINDS, "fused kind",
                                 f"one of {', '.join(FUSED_KINDS)}"), body,
                     self.loc(comment, meta))

    # -- arguments
    @v_args(meta=True)
    def arg(self, meta, children):
        return _Arg(children[0], meta.line, meta.column)

    def kwarg(self, children):
        return _Kw(*children)

    def split(self, args, fn, keys, npos=None):
        """(positional args, {keyword: _Arg}) of a call, checked against its signature."""
        pos, kws = [], {}
        for a in args:
            if isinstance(a.value, _Kw):
                key = str(a.value.name)
                if key not in keys:
                    allowed = ", ".join(f"{k}=" for k in sorted(keys)) or "no keyword arguments"
                    self.err(f"unknown keyword '{key}' of {fn}; expected {allowed}", a)
                kws[key] = _Arg(a.value.value, a.line, a.col + len(key) + 1)
            else:
                pos.append(a)
        if npos is not None and len(pos) != npos:
            self.err(f"{fn} takes {npos} positional argument(s), found {len(pos)}", fn)
        return pos, kws

    def as_region(self, a: _Arg) -> Region:
        if isinstance(a.value, Region):
            return a.value
        if isinstance(a.value, Var):
            tok = Token("NAME", a.value.name, line=a.line, column=a.col)
            return Region.full(self.buffer(tok))
        self.err("expected a buffer region like A or A[i * 32 +: 32, 0 +: 64]", a)

    def expr(self, a: _Arg):
        if isinstance(a.value, Region):
            self.err("expected an expression, found a region", a)
        return a.value

    def pipe(self, a: _Arg) -> str:
        if not (isinstance(a.value, Var) and a.value.name in PIPES):
            self.err(f"unknown pipe; expected one of {', '.join(PIPES)}", a)
        return a.value.name

    def const_int(self, a: _Arg, signed=False) -> int:
        v = a.value
        ok = isinstance(v, Const) and type(v.value) is int and (signed or v.value >= 0)
        if not ok:
            self.err("expected an integer" if signed else "expected a non-negative integer", a)
        return v.value

    def const_bool(self, a: _Arg) -> bool:
        if not (isinstance(a.value, Const) and isinstance(a.value.value, bool)):
            self.err("expected True or False", a)
        return a.value.value

    def region(self, children):
        name, *dims = children
        b = self.buffer(name)
        if len(dims) != len(b.shape):
            self.err(f"'{name}' has {len(b.shape)} dimension(s) {b.shape}; expected a region with "
                     f"{len(b.shape)} 'start +: extent' entries, found {len(dims)}", name)
        return Region(b, tuple(d[0] for d in dims), tuple(self.int_(d[1]) for d in dims))

    def dim(self, children):
        return children[0], children[1]

    def indices(self, children):
        return tuple(children)

    # -- expressions
    def _binop(self, children):
        a, op, b = children
        return BinOp(str(op), a, b)

    or_test = and_test = comparison = arith = term = _binop

    def not_(self, children):
        return Call("not", (children[0],))

    def neg(self, children):
        return Call("neg", (children[0],))

    def neg_number(self, children):
        c = children[0]
        return Const(-c.value, c.dtype)

    def num(self, children):
        t = str(children[0])
        return Const(float(t), "float32") if re.search(r"[.eE]", t) else Const(int(t), "int32")

    def inf(self, _children):
        return Const(math.inf, "float32")

    def nan(self, _children):
        return Const(math.nan, "float32")

    def true(self, _children):
        return Const(True, "bool")

    def false(self, _children):
        return Const(False, "bool")

    def var(self, children):
        return Var(str(children[0]))

    def load(self, children):
        name, indices = children
        indices = indices or ()
        return Load(self.buffer(name, len(indices)), indices)

    def call_expr(self, children):
        fn, *args = children
        name = str(fn)
        if name not in _EXPR_FNS:
            self.err(f"unknown function '{fn}'; expected one of {', '.join(_EXPR_FNS)}", fn)
        if name == "cast":
            if len(args) != 2 or not isinstance(args[1], Token) or isinstance(args[0], Token):
                self.err('cast takes an expression and a dtype: cast(x, "float16")', fn)
            return Cast(self.dtype(args[1]), args[0])
        if name == "reinterpret":
            if (len(args) != 3 or isinstance(args[0], Token) or not isinstance(args[1], Token)
                    or not isinstance(args[2], Token)):
                self.err('reinterpret takes an expression and two dtypes: '
                         'reinterpret(x, "float32", "int32")', fn)
            return Reinterpret(self.dtype(args[2]), self.dtype(args[1]), args[0])
        arity = call_arity(name)
        if len(args) != arity or any(isinstance(x, Token) for x in args):
            self.err(f"{name} takes {arity} expression argument(s), found {len(args)}", fn)
        return Call(name, tuple(args))
