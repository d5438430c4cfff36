"""A Python name bound to a run-time expression (`a = s[0, i]`) stands for that expression; after
a statement that may write what it reads, using the name is a located CompileError instead of a
silently re-read value (tilelang-ascend's Hadamard butterfly gave wrong numbers)."""
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
                    s[0, i + 4] = a - b  # BAD_USE unless a and b are variables
            if form == "tile_op":
                c = s[0, 0]
                T.copy(X, s)
                s[0, 1] = c
            T.copy(s, Y)
    return k


def reference(x, form):
    s = x.astype(np.float64).copy()
    for i in range(4):
        a, b = s[0, i], s[0, i + 4]
        s[0, i] = a + b
        s[0, i + 4] = b * 2 if form == "other_element" else a - b
    return s


@pytest.mark.parametrize("target", TARGETS)
@pytest.mark.parametrize("form", ["vars", "other_element"])
def test_names_that_stay_valid(form, target):
    x = np.random.default_rng(1).standard_normal((1, 8)).astype(np.float32)
    y = np.zeros_like(x)
    tl.compile(butterfly(form), target=target)(x, y)
    np.testing.assert_allclose(y, reference(x, form), rtol=1e-5, atol=1e-5)


@pytest.mark.parametrize("form", ["lazy", "tile_op"])
def test_use_after_a_write_is_located(form):
    with pytest.raises(CompileError) as err:
        butterfly(form)
    msg = str(err.value)
    assert "stands for an expression that reads 's'" in msg
    assert "T.alloc_var" in msg
    if form == "lazy":
        assert "a - b  # BAD_USE" in msg and "'a'" in msg
    else:
        assert "s[0, 1] = c" in msg and "'c'" in msg
