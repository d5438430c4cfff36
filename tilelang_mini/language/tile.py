"""`T.tile.*`: tilelang-ascend's vector operations on UB tiles (whole tiles or regions such as
`acc[h_i, :]`). The frontend spells each as an elementwise map (docs/tilelang_compat.md)."""
from __future__ import annotations

TILE_OPS = (
    # binary: dst = src0 op src1 (src1 a tile, a region or a scalar)
    "add", "sub", "mul", "div", "max", "min", "bitwise_and", "bitwise_or", "bitwise_xor", "pow",
    # unary: dst = f(src)
    "exp", "ln", "abs", "sqrt", "rsqrt", "relu", "reciprocal", "sigmoid", "silu", "bitwise_not",
    "sin", "cos", "tanh", "gelu",
    # others
    "fill", "clear", "cast", "broadcast", "axpy", "mul_add_dst", "leaky_relu", "compare",
    "select", "createvecindex", "arith_progression", "clamp", "clamp_max", "clamp_min",
    "row_expand_mul", "row_expand_sub", "row_expand_div", "round", "bitwise_lshift",
    "row_expand_mul_experiment", "row_expand_sub_experiment", "row_expand_div_experiment",
    "brcb", "brcb_experiment",
    "bitwise_rshift", "adds", "muls", "maxs", "mins",
    # recognised, with an error that says what to write
    "gather", "gather_mask", "sort", "topk", "merge_sort", "transpose", "atomic_add",
    "wholereducemax", "wholereducemin", "wholereducesum", "block_reduce_max",
    "block_reduce_min", "block_reduce_sum", "init_sort_buf", "sort32", "gatherb",
)


def _marker(name: str):
    def marker(*args, **kwargs):
        raise RuntimeError(f"T.tile.{name} can only be used inside a T.prim_func kernel")

    marker.__name__ = name
    marker._tl_name = "tile." + name
    return marker


for _name in TILE_OPS:
    globals()[_name] = _marker(_name)
del _name
