"""The IR text format: print_ir / parse_ir round trips, locations, and located parse errors."""
from __future__ import annotations

import math

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from tilelang_mini.errors import CompileError
from tilelang_mini.ir import parse_ir, print_ir
from tilelang_mini.ir.dtypes import DTYPES
from tilelang_mini.ir.nodes import (
    BIN_OPS, BINARY_FNS, NO_LOC, UNARY_FNS, Alloc, BinOp, Buffer, Call, Cast, Const, Copy, Fill,
    For, Gemm, If, Kernel, Load, Loc, PipeBarrier, Reduce, Region, Scope, SetCrossFlag, SetFlag,
    Store, TextLoc, Var, WaitCrossFlag, WaitFlag, walk,
)

A = Buffer("A", (1024, 512), "float16")
B = Buffer("B", (512,), "float32")
C = Buffer("C", (1024, 512), "float32")
X = Buffer("X", (64, 64), "float32", "fragment")


def L(line, col=9):
    return Loc("gemm.py", line, col)


def c(v):
    """A literal as the parser builds it."""
    if isinstance(v, bool):
        return Const(v, "bool")
    return Const(v, "float32") if isinstance(v, float) else Const(v, "int32")


def v(name):
    return Var(name)


def kernel(body, params=(A, B, C), grid=(8, 4), grid_vars=("bx", "by"), is_npu=False):
    return Kernel("k", params, grid, grid_vars, tuple(body), is_npu, Loc("gemm.py", 3, 1))


def dev_kernel():
    """Developer-mode IR: shared/fragment/var allocs, tile ops, every loop kind, if/else."""
    As = Buffer("A_s", (128, 64), "float16", "shared")
    Bs = Buffer("B_s", (64,), "float32", "shared")
    Cf = Buffer("C_f", (128, 64), "float32", "fragment")
    m = Buffer("m", (1,), "float32", "var")
    w = Buffer("ws", (128, 64), "float32", "workspace")
    k = v("k")
    return kernel([
        Alloc(As, loc=L(5)), Alloc(Bs, loc=L(6)), Alloc(Cf, loc=L(7)), Alloc(m, loc=L(8)),
        Alloc(w, offset=4096, loc=L(9)),
        Fill(Region.full(Cf), c(0.0), loc=L(10)),
        For(("k",), (c(8),), "pipelined", (
            Copy(Region(A, (BinOp("*", v("by"), c(128)), BinOp("*", k, c(64))), (128, 64)),
                 Region.full(As), loc=L(12, 13)),
            Copy(Region(B, (BinOp("*", k, c(64)),), (64,)), Region.full(Bs), loc=L(13, 13)),
            Gemm(Region.full(As), Region(As, (c(0), c(0)), (128, 64)), Region.full(Cf),
                 transpose_b=True, loc=L(14, 13)),
        ), num_stages=3, loc=L(11)),
        For(("i", "j"), (c(128), c(64)), "parallel", (
            Store(Cf, (v("i"), v("j")),
                  BinOp("*", Load(Cf, (v("i"), v("j"))), Call("exp", (Load(Bs, (v("j"),)),))),
                  loc=L(16, 13)),
        ), loc=L(15)),
        Reduce("sum", Region.full(Cf), Region(Bs, (c(0),), (64,)), 1, loc=L(17)),
        Reduce("absmax", Region.full(Cf), Region.full(Bs), 0, clear=False, loc=L(18)),
        For(("t",), (Call("ceildiv", (v("n"), c(4))),), "serial", (
            If(BinOp("<", v("t"), c(2)),
               (Store(m, (c(0),), Cast("float32", v("t")), loc=L(21, 17)),),
               (Store(m, (c(0),), c(-math.inf), loc=L(23, 17)),), loc=L(20, 13)),
            If(BinOp("==", v("t"), c(0)), (), loc=L(24, 13)),
        ), loc=L(19)),
        For(("u",), (c(4),), "unroll", (), loc=L(25)),
        Copy(Region.full(Cf), Region(C, (BinOp("*", v("by"), c(128)), c(0)), (128, 64)), loc=L(26)),
    ])


def lowered_kernel():
    """Lowered per-core IR: chip scopes, Scope blocks, flags and barriers, no locations at all."""
    l1 = Buffer("A_l1", (128, 64), "float16", "L1")
    l0a = Buffer("A_l0a", (128, 64), "float16", "L0A")
    l0b = Buffer("B_l0b", (64, 64), "float16", "L0B")
    l0c = Buffer("C_l0c", (128, 64), "float32", "L0C")
    ub = Buffer("C_ub", (64, 64), "float32", "UB")
    return Kernel("k_npu", (A, C), (24,), ("cid", "vid"), (
        Scope("C", (
            Alloc(l1, 0), Alloc(l0a, 0), Alloc(l0b, 0), Alloc(l0c, 0),
            Copy(Region(A, (BinOp("*", v("cid"), c(128)), c(0)), (128, 64)), Region.full(l1)),
            SetFlag("MTE2", "MTE1", 0), WaitFlag("MTE2", "MTE1", 0),
            Copy(Region.full(l1), Region.full(l0a)),
            SetFlag("MTE1", "M", 1), WaitFlag("MTE1", "M", 1),
            Gemm(Region.full(l0a), Region.full(l0b), Region.full(l0c), True, True, True),
            PipeBarrier("M"), SetCrossFlag("FIX", 1),
        )),
        Scope("V", (
            Alloc(ub, 65536), WaitCrossFlag("V", 1),
            Copy(Region(C, (BinOp("+", BinOp("*", v("cid"), c(128)), BinOp("*", v("vid"), c(64))),
                            c(0)), (64, 64)), Region.full(ub)),
            PipeBarrier("V"), SetFlag("V", "MTE3", 7), WaitFlag("V", "MTE3", 7), PipeBarrier("S"),
        )),
    ), is_npu=True)


def store_kernel(expr):
    return kernel([Alloc(X), For(("i", "j"), (c(64), c(64)), "parallel",
                                 (Store(X, (v("i"), v("j")), expr),))])


def roundtrip(k):
    text = print_ir(k)
    back = parse_ir(text)
    assert back == k
    assert print_ir(back) == text
    return back


# ------------------------------------------------------------------------------------ round trips


def test_dev_kernel_round_trips_with_locs():
    k = dev_kernel()
    back = roundtrip(k)
    assert back.loc == k.loc
    locs = [(s.loc) for s in walk(back) if hasattr(s, "loc") and not isinstance(s, Kernel)]
    want = [(s.loc) for s in walk(k) if hasattr(s, "loc") and not isinstance(s, Kernel)]
    assert locs == want and all(loc.file == "gemm.py" and loc.line for loc in locs)


def test_lowered_kernel_round_trips_without_locs():
    """No `# LINE:COL` comments: every node is located in the text itself (a TextLoc at the
    start of its own line), which the printer does not print back."""
    k = lowered_kernel()
    text = print_ir(k)
    back = roundtrip(k)
    assert back.is_npu and isinstance(back.loc, TextLoc) and back.loc.line == 2
    lines = text.split("\n")
    located = [s for s in walk(back) if hasattr(s, "loc") and not isinstance(s, Kernel)]
    assert located
    for s in located:
        loc = s.loc
        assert isinstance(loc, TextLoc) and loc.file == "<ir>", loc
        line = lines[loc.line - 1]
        assert loc.text == line and loc.col == len(line) - len(line.lstrip()) + 1
    # nodes of the text round trip by structure; the places differ from a located kernel's
    assert [type(s) for s in located] == [type(s) for s in walk(k)
                                          if hasattr(s, "loc") and not isinstance(s, Kernel)]


def test_pipe_tags_are_derived_and_ignored_when_read():
    k = lowered_kernel()
    tagged = print_ir(k)
    assert "# C.MTE2" in tagged
    assert parse_ir(tagged) == k
    assert print_ir(parse_ir(tagged)) == tagged
    edited = tagged.replace("# C.MTE2", "# V.V")  # a wrong tag is not trusted
    assert print_ir(parse_ir(edited)) == tagged


def test_text_round_trips_and_hand_edits():
    text = print_ir(dev_kernel())
    assert print_ir(parse_ir(text)) == text
    # comments on their own line, blank lines, a missing final newline, a trailing free comment
    lines = text.splitlines()
    edited = "# generated by hand\n" + "\n".join(lines[:4]) + "\n\n        # note\n" + \
        "\n".join(lines[4:]).replace("  # 26:9", "")
    k = parse_ir(edited)
    assert k == dev_kernel()
    last = edited.split("\n").index("        copy(C_f, C[by * 128 +: 128, 0 +: 64])") + 1
    assert k.body[0].loc == L(5) and k.body[-1].loc == TextLoc("<ir>", last, 9)


def test_str_of_a_parsed_kernel_is_its_ir_text():
    for k in (dev_kernel(), lowered_kernel()):
        text = print_ir(k)
        parsed = parse_ir(text)
        assert str(parsed) == text and str(k) == text
        assert str(parsed).startswith("@prim_func(")  # not a dataclass dump
        import tilelang_mini
        assert str(tilelang_mini.parse_ir(text)) == text


def test_alloc_var_and_aliases():
    text = ('@prim_func(source="x.py")\n'
            'def f(A: Tensor((16,), "fp16")):\n'
            '    with Kernel(1) as (bx):\n'
            '        s = alloc_var("float", offset=0)  # 2:3\n'
            '        t = alloc_var((), "bf16")\n'
            '        A[s[0]] = cast(t[], "half")\n')
    k = parse_ir(text)
    s, t = k.body[0].buffer, k.body[1].buffer
    assert (s.shape, s.dtype, s.scope, k.body[0].offset) == ((1,), "float32", "var", 0)
    assert (t.shape, t.dtype) == ((), "bfloat16") and k.params[0].dtype == "float16"
    assert k.body[0].loc == Loc("x.py", 2, 3)
    assert parse_ir(print_ir(k)) == k


def test_scoping_most_recent_declaration_wins():
    text = ('@prim_func(source="x.py")\n'
            'def f(A: Tensor((16, 16), "float32")):\n'
            '    with Kernel(1) as (bx):\n'
            '        for i in serial(2):\n'
            '            A = alloc_ub((8,), "float16")\n'
            '        A[3] = 1\n')
    k = parse_ir(text)
    assert k.body[1].buffer.scope == "UB" and k.body[1].buffer.shape == (8,)


# ------------------------------------------------------------------------------------ expressions

a, b, cc = v("a"), v("b"), v("c")
PRECEDENCE = [
    ("a - (b - c)", BinOp("-", a, BinOp("-", b, cc))),
    ("a - b - c", BinOp("-", BinOp("-", a, b), cc)),
    ("(a + b) * c", BinOp("*", BinOp("+", a, b), cc)),
    ("a + b * c", BinOp("+", a, BinOp("*", b, cc))),
    ("a // b % c", BinOp("%", BinOp("//", a, b), cc)),
    ("a / (b * c)", BinOp("/", a, BinOp("*", b, cc))),
    ("-(a + b)", Call("neg", (BinOp("+", a, b),))),
    ("-a * b", BinOp("*", Call("neg", (a,)), b)),
    ("a < b and b <= c or not a", BinOp("or", BinOp("and", BinOp("<", a, b), BinOp("<=", b, cc)),
                                        Call("not", (a,)))),
    ("a and (b or c)", BinOp("and", a, BinOp("or", b, cc))),
    ("not a == b", Call("not", (BinOp("==", a, b),))),
    ("(not a) == b", BinOp("==", Call("not", (a,)), b)),
    ("(a < b) != (b > c)", BinOp("!=", BinOp("<", a, b), BinOp(">", b, cc))),
    ("(a >= b) < c", BinOp("<", BinOp(">=", a, b), cc)),
    ("-3", c(-3)),
    ("-(3)", Call("neg", (c(3),))),
    ("--3", Call("neg", (c(-3),))),
    ("a - -3", BinOp("-", a, c(-3))),
    ("-2.5 * a", BinOp("*", c(-2.5), a)),
    ("1e-05", c(1e-05)),
    ("1e+20", c(1e20)),
    ("inf", c(math.inf)),
    ("-inf", c(-math.inf)),
    ("-(inf)", Call("neg", (c(math.inf),))),
    ("True and not False", BinOp("and", c(True), Call("not", (c(False),)))),
    ("-True", Call("neg", (c(True),))),
    ('max(a, cast(b, "float16")) + exp2(-c)',
     BinOp("+", Call("max", (a, Cast("float16", b))), Call("exp2", (Call("neg", (cc,)),)))),
    ("X[a + 1, ceildiv(b, 2)]", Load(X, (BinOp("+", a, c(1)), Call("ceildiv", (b, c(2)))))),
]


@pytest.mark.parametrize("text, expr", PRECEDENCE, ids=[t for t, _ in PRECEDENCE])
def test_precedence_and_literals(text, expr):
    k = store_kernel(expr)
    printed = print_ir(k)
    assert f"X[i, j] = {text}\n" in printed
    assert parse_ir(printed) == k


def test_nan_round_trips_as_text():
    k = store_kernel(BinOp("+", a, c(math.nan)))
    text = print_ir(k)
    back = parse_ir(text)
    assert math.isnan(back.body[1].body[0].value.b.value) and print_ir(back) == text


_NAMES = st.sampled_from(["i", "j", "bx", "n_1", "tile", "x9"])
_LEAVES = st.one_of(
    st.integers(-(2 ** 40), 2 ** 40).map(c),
    st.floats(allow_nan=False).map(c),
    st.booleans().map(c),
    _NAMES.map(Var),
)


def _nodes(child):
    return st.one_of(
        st.builds(BinOp, st.sampled_from(BIN_OPS), child, child),
        st.builds(lambda f, x: Call(f, (x,)), st.sampled_from(UNARY_FNS), child),
        st.builds(lambda f, x, y: Call(f, (x, y)), st.sampled_from(BINARY_FNS), child, child),
        st.builds(Cast, st.sampled_from(DTYPES), child),
        st.builds(lambda x, y: Load(X, (x, y)), child, child),
    )


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.recursive(_LEAVES, _nodes, max_leaves=12))
def test_random_expressions_round_trip(expr):
    k = store_kernel(expr)
    text = print_ir(k)
    assert parse_ir(text) == k, text
    assert print_ir(parse_ir(text)) == text


# ----------------------------------------------------------------------------------------- errors

HEAD = ('@prim_func(source="k.py")\n'
        'def k(A: Tensor((256, 128), "float16")):  # 1:1\n'
        '    with Kernel(4) as (bx):  # 1:1\n')

ERRORS = [
    ("        copy(A, Q)\n", 4, 17, "unknown buffer 'Q'"),
    ("        fill(A, Q[0, 1])\n", 4, 17, "unknown buffer 'Q'"),
    ("        A[0] = 1\n", 4, 9, "expected 2 index"),
    ("        fill(A, A[0, 1, 2])\n", 4, 17, "expected 2 index"),
    ("        copy(A[0 +: 4], A)\n", 4, 14, "2 'start +: extent'"),
    ('        x = alloc_shared((4,), "f13")\n', 4, 32, "unknown dtype"),
    ('        fill(A, cast(1, "q"))\n', 4, 25, "unknown dtype"),
    ("        set_flag(MTE2, QQ, 0)\n", 4, 24, "unknown pipe"),
    ("        pipe_barrier(2)\n", 4, 22, "unknown pipe"),
    ('        with Scope("X"):\n            pass\n', 4, 20, "unknown core scope"),
    ("        for i in loop(4):\n            pass\n", 4, 18, "unknown loop kind"),
    ("        foo(A)\n", 4, 9, "unknown statement 'foo'"),
    ("        fill(A, expo(1))\n", 4, 17, "unknown function 'expo'"),
    ("        fill(A, exp(1, 2))\n", 4, 17, "takes 1"),
    ("        gemm(A, A, A, transpose_C=True)\n", 4, 23, "transpose_A="),
    ("        reduce_sum(A, A)\n", 4, 9, "dim=N"),
    ("        copy(A, A))\n", 4, 19, "expected a comment or end of line"),
    ("        fill(A, 1 +)\n", 4, 20, "expected an expression"),
    ("        fill(A, 1 $ 2)\n", 4, 19, "unexpected character '$'"),
    ("        fill(A, a < b < c)\n", 4, 23, "unexpected '<'"),
    ("        copy(A, A\n        fill(A, 0)\n", 4, 13, "'(' is never closed"),
    ("        for i in serial(4):\n        pass\n", 5, 9, "expected an indented block"),
    ("        for i in serial(4):\n            pass\n          pass\n", 6, 11,
     "inconsistent indentation"),
    ('        x = alloc_L1("float32")\n', 4, 22, "needs a shape"),
    ("        copy(A, A) extra\n", 4, 20, "unexpected 'extra'"),
    ("        fill(A, 1.5.2)\n", 4, 20, "unexpected"),
]


@pytest.mark.parametrize("body, line, col, words", ERRORS, ids=[e[0].strip() for e in ERRORS])
def test_errors_are_located(body, line, col, words):
    with pytest.raises(CompileError) as info:
        parse_ir(HEAD + body, "bad.ir")
    err = info.value
    assert (err.loc.file, err.loc.line, err.loc.col) == ("bad.ir", line, col), str(err)
    text = str(err)
    assert words in text
    assert f"bad.ir:{line}:{col}: " in text and "^" in text
    for word in ("Traceback", "lark", "Lark", "Token(", "Unexpected", "VisitError", "_NEWLINE",
                 "RPAR", "$END"):
        assert word not in text, text
    assert err.__cause__ is None and err.__suppress_context__


def test_unbound_variable_in_ir_text_is_a_located_compile_error():
    """`check` verifies the structure of its input: a name no loop or block binds is the text's
    mistake (a located CompileError), not an internal error from a later pass."""
    import tilelang_mini
    from tilelang_mini.errors import InternalCompilerError
    text = HEAD + '        x = alloc_shared((4, 128), "float16")  # 7:9\n' \
                  '        copy(A[M * 4 +: 4, 0 +: 128], x)  # 8:9\n'
    with pytest.raises(CompileError) as info:
        tilelang_mini.compile_ir(text)
    assert not isinstance(info.value, InternalCompilerError)
    assert "variable M is not bound" in str(info.value)
    assert (info.value.loc.file, info.value.loc.line) == ("k.py", 8), str(info.value)


def test_header_errors():
    with pytest.raises(CompileError) as info:
        parse_ir('@prim_func(source="k.py")\ndef k(A: Tensor((4,), "f99")):\n'
                 '    with Kernel(1) as (bx):\n        pass\n')
    assert (info.value.loc.line, info.value.loc.col) == (2, 23)
    with pytest.raises(CompileError) as info:
        parse_ir("def k():\n    pass\n")
    assert (info.value.loc.line, info.value.loc.col) == (1, 1)
    assert "expected '@'" in str(info.value)
    with pytest.raises(CompileError) as info:
        parse_ir(HEAD)
    assert "end of the text" in str(info.value) and "indented block" in str(info.value)


SCOPE_MISUSE = [  # IR text edited from valid lowered text (the fuzzer's ir-check-gaps)
    ('        e = alloc_L1((4, 128), "float16")  # 7:9\n'
     '        r = alloc_ub((4, 1), "float16")  # 8:9\n'
     '        copy(A[bx * 4 +: 4, 0 +: 128], e)  # 9:9\n'
     '        reduce_sum(e, r, dim=1)  # 10:9\n', 10, "'e' is an L1 tile"),
    ('        e = alloc_ub((4, 128), "float16")  # 7:9\n'
     '        t = alloc_L0A((4, 128), "float16")  # 8:9\n'
     '        copy(A[bx * 4 +: 4, 0 +: 128], e)  # 9:9\n'
     '        for i, j in Parallel(4, 128):  # 10:9\n'
     '            t[i, j] = e[i, j] * 2.0  # 11:13\n', 11, "'t' is an L0A tile"),
    ('        a = alloc_ub((16, 16), "float16")  # 7:9\n'
     '        b = alloc_L1((16, 16), "float16")  # 8:9\n'
     '        c = alloc_L0C((16, 16), "float32")  # 9:9\n'
     '        copy(A[0 +: 16, 0 +: 16], a)  # 10:9\n'
     '        copy(A[16 +: 16, 0 +: 16], b)  # 11:9\n'
     '        gemm(a, b, c)  # 12:9\n', 12, "A 'a' in UB"),
]


@pytest.mark.parametrize("body, line, words", SCOPE_MISUSE, ids=["reduce_l1", "map_l0a", "gemm_ub"])
def test_a_tile_in_a_memory_its_unit_cannot_reach_is_a_located_compile_error(body, line, words):
    """A vector op on a cube memory (or a gemm on UB) in IR text is the text's mistake, not an
    internal error when a later pass (split_cores) leaves the instruction without a core."""
    import tilelang_mini
    from tilelang_mini.errors import InternalCompilerError
    with pytest.raises(CompileError) as info:
        tilelang_mini.compile_ir(HEAD + body, target="numpy")
    err = info.value
    assert not isinstance(err, InternalCompilerError)
    assert (err.loc.file, err.loc.line) == ("k.py", line), str(err)
    assert words in err.message and ("UB" in err.message and "L0" in err.message), err.message


# ------------------------------------------------------- hand-written text without LINE:COL comments

HAND_HEAD = ('@prim_func(source="k.py")\n'
             'def k(A: Tensor((16, 8), "float32"), B: Tensor((16, 8), "float32")):\n'
             '    with Kernel(4) as (bx):\n')

HAND_CHECKS = [  # (body, line, col, words): mistakes found after parsing, by check
    ('        x = alloc_fragment((4, 8), "float32")\n'
     '        copy(A[bx * 4 +: 4, 0 +: 8], x)\n'
     '        copy(x, B)\n', 6, 9, "copy shapes differ"),
    ('        e = alloc_L1((4, 8), "float32")\n'
     '        r = alloc_ub((4, 1), "float32")\n'
     '        copy(A[bx * 4 +: 4, 0 +: 8], e)\n'
     '        for i in serial(2):\n'
     '            reduce_sum(e, r, dim=1)\n', 8, 13, "'e' is an L1 tile"),
    ('        x = alloc_fragment((4, 8), "float32")\n'
     '        copy(A[M * 4 +: 4, 0 +: 8], x)\n', 5, 9, "variable M is not bound"),
]


@pytest.mark.parametrize("body, line, col, words", HAND_CHECKS, ids=["shapes", "scope", "unbound"])
def test_checks_on_text_without_loc_comments_point_into_the_text(body, line, col, words):
    """A statement with no `# LINE:COL` comment is located at its own place in the text (a
    TextLoc): the error names the text, its line and column, and shows the line with a caret."""
    import tilelang_mini
    from tilelang_mini.errors import InternalCompilerError
    text = HAND_HEAD + body
    with pytest.raises(CompileError) as info:
        tilelang_mini.compile_ir(text, target="numpy", filename="hand.ir")
    err = info.value
    assert not isinstance(err, InternalCompilerError)
    assert isinstance(err.loc, TextLoc)
    assert (err.loc.file, err.loc.line, err.loc.col) == ("hand.ir", line, col), str(err)
    shown = str(err).split("\n")
    assert shown[0].startswith(f"hand.ir:{line}:{col}: ") and words in shown[0]
    assert shown[1] == "    " + text.split("\n")[line - 1]
    assert shown[2] == "    " + " " * (col - 1) + "^"


def test_run_time_errors_of_text_without_loc_comments_point_into_the_text(
        target, monkeypatch, tmp_path):
    """An index out of bounds at run time, on every target, twice (the second llvm compile
    comes from the disk cache, whose entry keeps the place in the text); the same text moved
    down two lines is a different entry, located at its own line."""
    import numpy as np

    import tilelang_mini
    from tilelang_mini.errors import KernelRuntimeError
    monkeypatch.setenv("TILELANG_MINI_CACHE_DIR", str(tmp_path / "cache"))
    body = ('        x = alloc_fragment((4, 8), "float32")\n'
            '        for i, j in Parallel(4, 8):\n'
            '            x[i, j] = A[bx * 5 + i, j]\n'  # bx = 3 reads row 15..18 of 16
            '        copy(x, B[bx * 4 +: 4, 0 +: 8])\n')
    a = np.arange(128, dtype=np.float32).reshape(16, 8)
    for head, line in ((HAND_HEAD, 6), (HAND_HEAD + "\n\n", 8), (HAND_HEAD, 6)):
        kern = tilelang_mini.compile_ir(head + body, target=target)
        with pytest.raises(KernelRuntimeError) as info:
            kern(a, np.zeros_like(a))
        err = info.value
        assert isinstance(err.loc, TextLoc) and (err.loc.file, err.loc.line) == ("<ir>", line)
        assert "out of bounds" in str(err) and "A[bx * 5 + i, j]" in str(err).split("\n")[1]


def test_text_without_loc_comments_in_range_runs_and_prints_without_comments(target):
    """The same kernel, in bounds, matches NumPy; its printed IR has no comments from TextLocs
    and keeps the header's source."""
    import numpy as np

    import tilelang_mini
    body = ('        x = alloc_fragment((4, 8), "float32")\n'
            '        for i, j in Parallel(4, 8):\n'
            '            x[i, j] = A[bx * 4 + i, j] * 2.0\n'
            '        copy(x, B[bx * 4 +: 4, 0 +: 8])\n')
    text = HAND_HEAD + body
    assert print_ir(parse_ir(text)) == text
    a = np.random.default_rng(0).standard_normal((16, 8)).astype(np.float32)
    b = np.zeros_like(a)
    tilelang_mini.compile_ir(text, target=target)(a, b)
    np.testing.assert_allclose(b, a.astype(np.float64) * 2.0, rtol=1e-6)
