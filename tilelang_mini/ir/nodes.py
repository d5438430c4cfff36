"""Tile IR: immutable nodes shared by every level, from the frontend to lowered per-core code.

One node set serves all stages: developer-mode IR (shared/fragment scopes, tile ops) and lowered
IR (L1/L0A/L0B/L0C/UB scopes, `Scope("C"|"V")` blocks, flags) differ only in which nodes appear.
Every statement carries `loc`, its kernel source location; `loc` is ignored by equality so that
`parse_ir(print_ir(ir)) == ir` compares structure.
"""
from __future__ import annotations

from dataclasses import dataclass, field, fields, replace
from operator import attrgetter
from typing import Union

# --------------------------------------------------------------------------------------- locations


@dataclass(frozen=True)
class Loc:
    file: str
    line: int
    col: int

    def __str__(self) -> str:
        return f"{self.file}:{self.line}:{self.col}"


NO_LOC = Loc("<unknown>", 0, 0)


@dataclass(frozen=True)
class TextLoc(Loc):
    """A place in IR text (`file` is the text's name, e.g. "<ir>"), for a node read from a line
    without a `# LINE:COL` comment: errors point into the text itself, with `text` (that line)
    under the caret, since no kernel source file holds it. `source` is the text's header
    `source=`, which the printer keeps; neither takes part in equality. The printer prints no
    comment for a TextLoc (it is a place in the text, not in the kernel source)."""
    text: str = field(default="", compare=False, repr=False)
    source: str = field(default="<unknown>", compare=False, repr=False)


def _loc() -> Loc:
    return field(default=NO_LOC, compare=False, repr=False)


# ---------------------------------------------------------------------------------------- buffers

# Memory scopes.  `global` are kernel parameters; `workspace` is per-block GM scratch added by the
# compiler; shared/fragment/var are developer-mode scopes that infer_scopes maps onto the chip's.
GLOBAL_SCOPES = ("global", "workspace")
DEV_SCOPES = ("shared", "fragment", "var")
CHIP_SCOPES = ("L1", "L0A", "L0B", "L0C", "UB")
SCOPES = GLOBAL_SCOPES + DEV_SCOPES + CHIP_SCOPES


@dataclass(frozen=True)
class Buffer:
    name: str
    shape: tuple[int, ...]
    dtype: str
    scope: str = "global"

    @property
    def numel(self) -> int:
        n = 1
        for s in self.shape:
            n *= s
        return n


# ------------------------------------------------------------------------------------ expressions


@dataclass(frozen=True)
class Const:
    value: Union[int, float, bool]
    dtype: str = "int32"


@dataclass(frozen=True)
class Var:
    name: str
    dtype: str = "int32"


# Binary operators, in the Python spelling the printer uses.
ARITH_OPS = ("+", "-", "*", "/", "//", "%")
CMP_OPS = ("<", "<=", ">", ">=", "==", "!=")
LOGIC_OPS = ("and", "or")
BIN_OPS = ARITH_OPS + CMP_OPS + LOGIC_OPS


@dataclass(frozen=True)
class BinOp:
    op: str
    a: "Expr"
    b: "Expr"


# Intrinsic calls usable in expressions.
# Bit operations take integers (values are 64-bit; a store wraps to the element type);
# shift_right is arithmetic on signed and logical on unsigned element values.
BIT_UNARY_FNS = ("bitwise_not",)
BIT_BINARY_FNS = ("bitwise_and", "bitwise_or", "bitwise_xor", "shift_left", "shift_right")
BIT_FNS = BIT_UNARY_FNS + BIT_BINARY_FNS
UNARY_FNS = ("exp", "exp2", "log", "sqrt", "rsqrt", "sin", "cos", "abs", "neg", "not") + BIT_UNARY_FNS
BINARY_FNS = ("max", "min", "ceildiv") + BIT_BINARY_FNS
TERNARY_FNS = ("select",)  # select(cond, a, b): a where cond holds, else b (T.if_then_else)
CALL_FNS = UNARY_FNS + BINARY_FNS + TERNARY_FNS


def call_arity(fn: str) -> int:
    return 3 if fn in TERNARY_FNS else 2 if fn in BINARY_FNS else 1


@dataclass(frozen=True)
class Call:
    fn: str
    args: tuple["Expr", ...]


@dataclass(frozen=True)
class Cast:
    dtype: str
    value: "Expr"


@dataclass(frozen=True)
class Reinterpret:
    """The bits of `value` (of dtype `source`) read as `dtype` (same size): a bitcast."""

    dtype: str
    source: str
    value: "Expr"


@dataclass(frozen=True)
class Load:
    buffer: Buffer
    indices: tuple["Expr", ...]


Expr = Union[Const, Var, BinOp, Call, Cast, Reinterpret, Load]

# ---------------------------------------------------------------------------------------- regions


@dataclass(frozen=True)
class Region:
    """A box of a buffer: `start` per dimension (expressions) and constant `extent`s.

    Printed as `A[by * 128 +: 128, k * 64 +: 64]`, or just `A` when it is the whole buffer."""

    buffer: Buffer
    start: tuple[Expr, ...]
    extent: tuple[int, ...]

    @staticmethod
    def full(buffer: Buffer) -> "Region":
        return Region(buffer, tuple(Const(0) for _ in buffer.shape), tuple(buffer.shape))

    @property
    def is_full(self) -> bool:
        return self.extent == self.buffer.shape and all(
            isinstance(s, Const) and s.value == 0 for s in self.start
        )


# ------------------------------------------------------------------------------------- statements


@dataclass(frozen=True)
class Alloc:
    """Declares an on-chip (or workspace) buffer; `offset` is set by plan_memory (bytes).

    `uninit`: every block writes the whole buffer before reading it, so it need not start zeroed
    (set by the llvm target's `infer_uninit`; a backend may ignore it and zero the buffer).

    `panels`: a 2-d tile only written by whole copies and read as a gemm's B operand, which a CPU
    keeps in GEMM micro-panels (set by the llvm target's `infer_panels`; its elements are never
    addressed one by one, so the layout is the backend's to choose).

    `widened`: an on-chip float16/bfloat16/float8 tile a CPU stores as float32 (it only ever holds
    values of its dtype, so this is exact; set by the llvm target's `widen_storage`)."""

    buffer: Buffer
    offset: int | None = None
    loc: Loc = _loc()
    uninit: bool = False
    panels: bool = False
    widened: bool = False


# Read-modify-write kinds of an atomic copy to GM (`T.atomic_add` / `T.atomic_max` / ...).
ATOMIC_KINDS = ("add", "max", "min")
# Copy modes: the atomic kinds, and "relu" (the FixPipe's relu on an L0C copy-out, a plain write)
COPY_MODES = ATOMIC_KINDS + ("relu",)


@dataclass(frozen=True)
class Copy:
    """Tile copy; clips at tensor edges, pads the rest of `dst` with zeros, casts to dst dtype.

    With `atomic` ("add", "max" or "min") the copy combines instead of overwriting: each dst
    element becomes dst op src, computed in float32 (int64 for integers) and stored in dst's
    dtype, atomically with respect to the atomic copies of other blocks and cores (Ascend: an
    MTE3 or FixPipe copy-out with the atomic mode on). Printed `copy(x, C[...], atomic_add=True)`.
    `atomic="relu"` is the FixPipe's relu mode instead (tilelang-ascend `T.copy(C_L0, C[...],
    enable_relu=True)`): a plain write of max(src, 0) from an L0C tile, printed `relu=True`.
    `dual`: an L0C -> UB copy of the cube core, which the FixPipe delivers to both vector cores'
    UB (semantics/ops.py `dual_copy_parts`); set by the llvm target's `mark_dual_copies`, printed
    `dual=True`."""

    src: Region
    dst: Region
    loc: Loc = _loc()
    atomic: str = ""
    transpose: bool = False  # dst = src^T (2-D after dropping extent-1 dims): an MTE1 L1 -> L0 load
    dual: bool = False


@dataclass(frozen=True)
class Gemm:
    """c += op(a) @ op(b), accumulated in c's dtype (fp32); `clear_accum` zeroes c first.

    Block-scaled (MX) form, `scale_gran` > 0: every K group of `scale_gran` values is multiplied
    by its scales first, c[m, n] += sum_k a[m, k] * sa[m, k // g] * b[k, n] * sb[n, k // g].
    A scale tile is either float8_e8m0fnu [MN, groups] or uint16 [ceil(groups / 2), MN] (UE8M0
    pairs, MN-major: the low byte is group 2r, the high byte group 2r + 1).

    `columns` (an expression of the grid variables, or None for all): only c's first `columns`
    columns are observed later, so a backend may leave the others unspecified (set by the llvm
    target's `infer_live_columns`; the numpy backend computes every column)."""

    a: Region
    b: Region
    c: Region
    transpose_a: bool = False
    transpose_b: bool = False
    clear_accum: bool = False
    scale_a: Region | None = None
    scale_b: Region | None = None
    scale_gran: int = 0
    loc: Loc = _loc()
    columns: Expr | None = None


@dataclass(frozen=True)
class Fill:
    dst: Region
    value: Expr
    loc: Loc = _loc()


REDUCE_KINDS = ("sum", "max", "min", "abssum", "absmax")


@dataclass(frozen=True)
class Reduce:
    """dst = reduce(src, dim) (or dst op= reduce when clear is False)."""

    kind: str
    src: Region
    dst: Region
    dim: int
    clear: bool = True
    loc: Loc = _loc()


@dataclass(frozen=True)
class Sort:
    """Sort every row (last dimension) of `values` in place, permuting `indices` the same way:
    largest first when `descending`; equal values keep the smaller index first. The vector
    unit's sort / merge-sort (two sorted halves merge by sorting the whole row)."""

    values: Region
    indices: Region
    descending: bool = True
    loc: Loc = _loc()


@dataclass(frozen=True)
class Store:
    """buffer[indices] = value; inside a Parallel loop this is the body of an elementwise map."""

    buffer: Buffer
    indices: tuple[Expr, ...]
    value: Expr
    loc: Loc = _loc()


LOOP_KINDS = ("serial", "parallel", "pipelined", "unroll", "while")


@dataclass(frozen=True)
class For:
    """`for vars in kind(*extents)`. A `parallel` loop is an elementwise map (a tile op);
    `pipelined` carries num_stages until the pipeline pass expands it.

    A `while` loop, printed `while cond:`, has no vars and one "extent", its condition: it is
    read before every trip, and the loop stops at the first trip where it is false. It is a loop
    whose trip count is a run-time value, like `serial(n[0])`, except that the count is only
    known once the loop has ended; passes treat it as they treat a run-time trip count."""

    vars: tuple[str, ...]
    extents: tuple[Expr, ...]
    kind: str
    body: tuple["Stmt", ...]
    num_stages: int = 0
    loc: Loc = _loc()


@dataclass(frozen=True)
class If:
    cond: Expr
    then_body: tuple["Stmt", ...]
    else_body: tuple["Stmt", ...] = ()
    loc: Loc = _loc()


CORES = ("C", "V")


@dataclass(frozen=True)
class Scope:
    """`with Scope("C"|"V"):` code for the cube core (AIC) or each vector core (AIV)."""

    core: str
    body: tuple["Stmt", ...]
    loc: Loc = _loc()


# What a `Fused` block does in one pass (the non-sync statements of its body, in order):
#   map_reduce       Parallel map filling tile X; reduce of X along its last dim
#   copy_map_reduce  copy of a GM row into row r of tile X; a row map reading X[r, j] only at
#                    its own element, filling tile Y; reduce of Y along its last dim; optionally
#                    a copy of row r of X on to a row of GM (tensor or workspace)
#   map_copy         row map writing row r of tile X; copy of that row into a GM tensor
FUSED_KINDS = ("map_reduce", "copy_map_reduce", "map_copy")


@dataclass(frozen=True)
class Fused:
    """`with fused(kind):` statements a CPU target runs as one pass over their elements (set by
    the llvm target's fuse_map_reduce / fuse_row_copies). Running the body in order is its
    meaning, except that the tile a map fills and only its partner reads (X of map_reduce and
    map_copy, Y of copy_map_reduce) is dead afterwards: its contents are unspecified (the fused
    code never writes it)."""

    kind: str
    body: tuple["Stmt", ...]
    loc: Loc = _loc()


PIPES = ("MTE2", "MTE1", "M", "FIX", "V", "MTE3", "S")


@dataclass(frozen=True)
class _Flag:
    """The two ends of an intra-core flag: pipe `src` signals pipe `dst` on event id `event`.
    (The ends of a flag, here and in _CrossFlag, add no fields: they need no @dataclass of
    their own; fields, equality by class, repr and replace are the base's.)"""

    src: str
    dst: str
    event: int
    loc: Loc = _loc()


class SetFlag(_Flag):
    """Set by `src` once its earlier work is done."""


class WaitFlag(_Flag):
    """`dst` waits for the flag that `src` sets."""


@dataclass(frozen=True)
class PipeBarrier:
    pipe: str
    loc: Loc = _loc()


@dataclass(frozen=True)
class _CrossFlag:
    """The two ends of a cross-core flag `flag`, on pipe `pipe` of each core."""

    pipe: str
    flag: int
    loc: Loc = _loc()


class SetCrossFlag(_CrossFlag):
    """Set by `pipe` after its earlier work; counted, released to the other core."""


class WaitCrossFlag(_CrossFlag):
    """`pipe` waits for the flag the other core sets."""


Stmt = Union[Alloc, Copy, Gemm, Fill, Reduce, Sort, Store, For, If, Scope, Fused, SetFlag,
             WaitFlag, PipeBarrier, SetCrossFlag, WaitCrossFlag]
TILE_OPS = (Copy, Gemm, Fill, Reduce, Sort)
SYNC_OPS = (SetFlag, WaitFlag, PipeBarrier, SetCrossFlag, WaitCrossFlag)


@dataclass(frozen=True)
class Kernel:
    """A prim_func: parameters (global buffers), grid extents bound to `grid_vars`, body.

    With `is_npu` the kernel binds (cid, vid) core variables instead of grid variables:
    `with Kernel(n, is_npu=True) as (cid, vid)`.

    `hints`: the GPU scheduling hints the kernel carried (`T.use_swizzle(10)`, `threads=128`,
    `policy=...`), each as its source text and line; they mean nothing on this machine and are
    kept so that the IR says what was accepted (printed in the header, parsed back)."""

    name: str
    params: tuple[Buffer, ...]
    grid: tuple[int, ...]
    grid_vars: tuple[str, ...]
    body: tuple[Stmt, ...]
    is_npu: bool = False
    loc: Loc = _loc()
    hints: tuple[str, ...] = ()

    def __str__(self) -> str:
        """The kernel's IR text (`print_ir`), which `parse_ir` reads back."""
        from .printer import print_ir
        return print_ir(self)


Node = Union[Kernel, Stmt, Expr, Region, Buffer]


# ---------------------------------------------------------------------------------- traversal


_IS_NODE: dict = {}
_LEAVES = frozenset((str, int, float, bool, type(None)))  # field values that are not nodes


def _is_node(value) -> bool:
    """An IR node (a dataclass other than Loc); per class, decided once."""
    t = type(value)
    r = _IS_NODE.get(t)
    if r is None:
        r = _IS_NODE[t] = hasattr(t, "__dataclass_fields__") and not issubclass(t, Loc)
    return r


# Per class, the fields that may hold nodes: all but `loc` and those declared a plain
# str/int/bool/float or a tuple of them (tests/test_ir_walk.py holds every example's IR to
# that), and a function returning their values as a tuple. The passes walk small subtrees tens of
# thousands of times per compile: reading only these fields made a walk of flash attention's
# statements' own nodes about twice as fast.
_PLAIN = frozenset(("str", "int", "bool", "float", "int | None", "str | None", "tuple[int, ...]",
                    "tuple[str, ...]", "Union[int, float, bool]"))
_NODE_FIELDS: dict = {}
_GETTERS: dict = {}


def _node_fields(t) -> tuple[str, ...]:
    """The names of the fields of class `t` that may hold nodes (computed once)."""
    names = _NODE_FIELDS.get(t)
    if names is None:
        names = _NODE_FIELDS[t] = tuple(f.name for f in fields(t)
                                        if f.name != "loc" and f.type not in _PLAIN)
    return names


def _getter(t):
    get = _GETTERS.get(t)
    if get is None:
        names = _node_fields(t)
        if not names:
            get = _no_fields
        elif len(names) == 1:
            one = attrgetter(names[0])
            get = lambda n: (one(n),)  # noqa: E731
        else:
            get = attrgetter(*names)
        _GETTERS[t] = get
    return get


def _no_fields(_node) -> tuple:
    return ()


def map_children(node, fn):
    """Rebuild `node` with `fn` applied to every child node (tuples of nodes included)."""
    changes = {}
    t = type(node)
    for name in _NODE_FIELDS.get(t) or _node_fields(t):
        value = getattr(node, name)
        new = _map_value(value, fn)
        if new is not value:
            changes[name] = new
    return replace(node, **changes) if changes else node


def _map_value(value, fn):
    t = type(value)
    if t is tuple:
        items = [_map_value(v, fn) for v in value]
        return tuple(items) if any(a is not b for a, b in zip(items, value)) else value
    if t not in _LEAVES and _is_node(value):
        return fn(value)
    return value


def _children(node, out: list) -> list:
    """Append the nodes directly below `node` (tuples flattened) to `out`, in field order."""
    t = type(node)
    get = _GETTERS.get(t) or _getter(t)
    for value in get(node):
        t = type(value)
        if t is tuple:
            if value:
                _flatten(value, out)
        elif t not in _LEAVES and (_IS_NODE.get(t) or _is_node(value)):
            out.append(value)
    return out


def _flatten(values: tuple, out: list) -> None:
    for v in values:
        t = type(v)
        if t is tuple:
            _flatten(v, out)
        elif t not in _LEAVES and (_IS_NODE.get(t) or _is_node(v)):
            out.append(v)


def walk(node):
    """Yield `node` and every node below it, parents first (an explicit stack: no generator
    per node, so the passes that walk whole kernels stay cheap)."""
    stack = [node]
    pop = stack.pop
    while stack:
        n = pop()
        yield n
        kids = _children(n, [])
        if kids:
            kids.reverse()
            stack.extend(kids)


def _walk_value(value):
    if type(value) is tuple:
        nodes: list = []
        _flatten(value, nodes)
        for v in nodes:
            yield from walk(v)
    elif _is_node(value):
        yield from walk(value)


def transform(node, rewrite):
    """Bottom-up rewrite: children first, then `rewrite(node)` (return the node to keep it)."""
    return _BottomUp(rewrite)(node)


class _BottomUp:
    """`transform`'s recursion as an object, not a closure that names itself (each call of such
    a closure's maker leaves a reference cycle for the garbage collector)."""
    __slots__ = ("rewrite",)

    def __init__(self, rewrite):
        self.rewrite = rewrite

    def __call__(self, n):
        return self.rewrite(map_children(n, self))


def transform_statements(stmt, rewrite):
    """`transform` of statements only: the nested statement lists first, then `rewrite(stmt)`;
    the regions and expressions a statement holds are not visited (for rewrites of whole
    statements, e.g. an allocation's flags: a walk of every expression node costs far more)."""
    changes = {}
    for name in body_fields(stmt):
        old = getattr(stmt, name)
        new = tuple(transform_statements(s, rewrite) for s in old)
        if any(a is not b for a, b in zip(new, old)):
            changes[name] = new
    return rewrite(replace(stmt, **changes) if changes else stmt)


def body_fields(stmt) -> tuple[str, ...]:
    """Names of the statement-list fields of a structured statement."""
    if isinstance(stmt, If):
        return ("then_body", "else_body")
    if isinstance(stmt, (For, Scope, Fused, Kernel)):
        return ("body",)
    return ()


def walk_statements(body):
    """Every statement of `body`, nested ones included, in program order."""
    for s in body:
        yield s
        for name in body_fields(s):
            yield from walk_statements(getattr(s, name))


def walk_own(stmt):
    """`stmt` and the nodes it holds (regions, expressions), but not its nested statements."""
    skip = body_fields(stmt)
    yield stmt
    for name in _node_fields(type(stmt)):
        if name not in skip:
            yield from _walk_value(getattr(stmt, name))
