"""A Python name bound to a run-time expression (`a = s[0, i]`) stands for that expression's value
at the binding, as in TileLang (a let). When a later statement may write what the expression
reads, the frontend stores the value into a hidden variable at the binding (tilelang-ascend's
Hadamard butterfly: `a = x[i]; b = x[j]; x[i] = a + b; x[j] = a - b`). Where that cannot keep the
meaning (the name was re-read inside a loop that also writes it, or bound in a block that has
ended), using the name is a located CompileError, never a silently re-read value."""
import numpy as np
import pytest

import tilelang_mini as tl
import tilelang_mini.language as T
from tilelang_mini.errors import CompileError

TARGETS = ("numpy", "llvm")


def butterfly(form):
    @T.prim_func
    def k(X: T.Tensor((1, 8), "float32"), Y: T.Tensor((1, 8), "float32")):
        with T.Kernel(1) as bx:
            s = T.alloc_shared((1, 8), "float32")
            if form == "vars":
                a = T.alloc_var("float32")
                b = T.alloc_var("float32")
            T.copy(X, s)
            for i in T.serial(4):
                a = s[0, i]
                b = s[0, i + 4]
                s[0, i] = a + b
                if form in ("other_element", "tile_op"):
                    s[0, i + 4] = b * 2  # b reads s[0, i + 4]: the store above is elsewhere
                else:
                    s[0, i + 4] = a - b  # a's value before the store above
            if form == "tile_op":
                c = s[0, 0]
                T.copy(X, s)
                s[0, 1] = c  # the value s[0, 0] had before the copy
            T.copy(s, Y)
    return k


def reference(x, form):
    s = x.astype(np.float64).copy()
    for i in range(4):
        a, b = s[0, i], s[0, i + 4]
        s[0, i] = a + b
        s[0, i + 4] = b * 2 if form in ("other_element", "tile_op") else a - b
    if form == "tile_op":
        c = s[0, 0]
        s = x.astype(np.float64).copy()
        s[0, 1] = c
    return s


@pytest.mark.parametrize("target", TARGETS)
@pytest.mark.parametrize("form", ["vars", "other_element", "lazy", "tile_op"])
def test_names_keep_their_value(form, target):
    x = np.random.default_rng(1).standard_normal((1, 8)).astype(np.float32)
    y = np.zeros_like(x)
    kernel = tl.compile(butterfly(form), target=target)
    kernel(x, y)
    np.testing.assert_allclose(y, reference(x, form), rtol=1e-5, atol=1e-5)
    if target == "numpy":
        y2 = np.zeros_like(x)
        kernel.simulate(x, y2)  # written in place (no out_idx)
        np.testing.assert_allclose(y2, reference(x, form), rtol=1e-5, atol=1e-5)


def test_hidden_variable_only_when_needed():
    """`other_element` needs no hidden variable; `lazy` gets one for `a` only."""
    assert "_val" not in butterfly("other_element").script()
    text = butterfly("lazy").script()
    assert "a_val" in text and "b_val" not in text


def reread():
    @T.prim_func
    def k(X: T.Tensor((1, 8), "float32"), Y: T.Tensor((1, 8), "float32")):
        with T.Kernel(1) as bx:
            s = T.alloc_shared((1, 8), "float32")
            t = T.alloc_shared((1, 8), "float32")
            T.copy(X, s)
            T.copy(X, t)
            a = s[0, 0]
            for i in T.serial(3):
                t[0, i] = a
                s[0, 0] = a * 2
                t[0, 7] = a  # BAD_USE: the next iteration would re-read s[0, 0] in the lines above
            T.copy(t, Y)
    return k


def test_no_meaning_is_located():
    with pytest.raises(CompileError) as err:
        reread()
    msg = str(err.value)
    assert "stands for an expression that reads 's'" in msg
    assert "T.alloc_var" in msg
    assert "# BAD_USE" in msg
