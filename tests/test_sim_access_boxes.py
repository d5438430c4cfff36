"""The closed-form element boxes of the simulator's race checks (sim/accesses.py `affine_box_fn`)
against an independent NumPy reference: each index as an array over the lanes it uses (as the
simulator has always evaluated it), its minimum and maximum clipped to the buffer."""
import numpy as np
import pytest

from irbuild import add, c, mul, v
from tilelang_mini.ir.nodes import BinOp, Buffer, Load
from tilelang_mini.sim.accesses import GENERAL, affine_box_fn


def reference_box(index_fns, shape, lanes, scalars):
    """The box (lo0, hi0, ...) of the elements `buf[idx...]`, from NumPy index arrays over the
    lanes each index uses; None when one is empty or outside the buffer."""
    names = list(lanes)
    grids = {n: np.arange(e).reshape([-1 if i == d else 1 for i in range(len(names))])
             for d, (n, e) in enumerate(lanes.items())}
    env = {**scalars, **grids}
    out = []
    for fn, n in zip(index_fns, shape):
        a = np.asarray(fn(env))
        if a.size == 0:
            return None
        lo, hi = max(int(a.min()), 0), min(int(a.max()) + 1, n)
        if hi <= lo:
            return None
        out += [lo, hi]
    return tuple(out)


def term(rng, names):
    """A random affine index expression over `names` and the function computing it."""
    k0 = int(rng.integers(-8, 9))
    expr, fns = c(k0), [lambda env, k0=k0: k0]
    for name in names:
        if rng.random() < 0.6:
            k = int(rng.integers(-3, 4))
            expr = add(expr, mul(c(k), v(name)) if rng.random() < 0.5 else mul(v(name), c(k)))
            fns.append(lambda env, name=name, k=k: k * env[name])
    if rng.random() < 0.2:  # `x % 1` (step 0), as lowering writes it
        expr = add(expr, BinOp("%", v(names[0]), c(1)))
        fns.append(lambda env: 0 * env[names[0]])
    return expr, (lambda env: sum(f(env) for f in fns))


@pytest.mark.parametrize("seed", range(6))
def test_affine_boxes_equal_the_index_arrays_min_and_max(seed):
    rng = np.random.default_rng(seed)
    checked = 0
    for _ in range(300):
        shape = tuple(int(x) for x in rng.integers(1, 40, int(rng.integers(1, 4))))
        lanes = {f"i{d}": int(rng.integers(0, 6)) for d in range(int(rng.integers(0, 3)))}
        scalars = {"k": int(rng.integers(0, 5)), "b": int(rng.integers(-2, 3))}
        exprs, fns = zip(*(term(rng, list(lanes) + ["k", "b"]) for _ in shape))
        node = Load(Buffer("X", shape, "float32"), tuple(exprs))
        got = affine_box_fn(node)(scalars, lanes if lanes else None)
        assert got == reference_box(fns, shape, lanes, scalars)
        checked += got is not None
    assert checked > 50  # (most boxes are not empty)


def test_a_variable_without_an_int_value_goes_to_the_general_path():
    node = Load(Buffer("X", (16,), "float32"), (add(v("k"), c(1)),))
    box = affine_box_fn(node)
    assert box({"k": 3}, None) == (4, 5)
    assert box({"k": np.int64(3)}, None) is GENERAL
    assert box({}, None) is GENERAL


def test_an_index_that_is_not_affine_has_no_closed_form():
    ids = Buffer("ids", (4,), "int32")
    node = Load(Buffer("X", (16, 8), "float32"), (Load(ids, (v("i"),)), v("j")))
    assert affine_box_fn(node) is None
    assert affine_box_fn(Load(Buffer("X", (16,), "float32"), (mul(v("i"), v("j")),))) is None
