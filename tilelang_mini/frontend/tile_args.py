"""The arguments of tilelang-ascend's T.tile operations (a KernelBuilder part): keywords bound by
the upstream parameter names, and T.tile.cast's count and rounding modes (AscendC's Cast)."""
from __future__ import annotations

import ast

from ..ir import dtypes
from ..ir.nodes import Call, Cast, For, Store
from .dialect import nearbyint, round_away
from .exprs import as_expr, binop, const

_CAST_MODES = ("CAST_NONE", "CAST_RINT", "CAST_FLOOR", "CAST_CEIL", "CAST_ROUND", "CAST_TRUNC",
               "CAST_ODD")

# tilelang-ascend's parameter names of each T.tile op (tilelang/language/ascend_tile.py), so
# that keyword arguments bind as there; a tuple lists a position's spellings
_BIN, _UN = ("dst", "src0", "src1"), ("dst", ("src0", "src"))
_SCALAR = ("dst", ("src0", "src"), ("scalar_value", "scalarValue"))
_ROW = ("dst", "src0", "src1", "tmp")
TILE_PARAMS = {
    **dict.fromkeys(("add", "sub", "mul", "div", "max", "min", "bitwise_and", "bitwise_or",
                     "bitwise_xor", "pow", "mul_add_dst"), _BIN),
    **dict.fromkeys(("exp", "ln", "abs", "sqrt", "rsqrt", "relu", "reciprocal", "sigmoid",
                     "silu", "tanh", "sin", "cos", "bitwise_not"), _UN),
    **dict.fromkeys(("leaky_relu", "axpy", "adds", "muls", "maxs", "mins", "bitwise_lshift",
                     "bitwise_rshift"), _SCALAR),
    **dict.fromkeys(("row_expand_mul", "row_expand_sub", "row_expand_div",
                     "row_expand_mul_experiment", "row_expand_sub_experiment",
                     "row_expand_div_experiment"), _ROW),
    "fill": (("buffer", "dst"), "value"), "clear": (("buffer", "dst"),),
    "arith_progression": (("buffer", "dst"), "first_value", "diff_value", "count"),
    "createvecindex": ("dst", "firstValue"), "transpose": ("dst", "src"),
    "cast": ("dst", "src", "mode", "count"), "compare": ("dst", "src0", "src1", "mode"),
    "select": ("dst", "selMask", "src0", "src1", "selMode"),
    "clamp": (("out", "dst"), ("buffer", "src"), "min_scalar", "max_scalar", "count"),
    "clamp_max": (("out", "dst"), ("buffer", "src"), "scalar_value", "count"),
    "clamp_min": (("out", "dst"), ("buffer", "src"), "scalar_value", "count"),
    "round": (("out", "dst"), ("buffer", "src"), "count"), "broadcast": ("dst", "src", "axis"),
    "brcb": ("dst", "src", "repeat_times", "dst_blk_stride", "dst_repeat_stride"),
    "brcb_experiment": ("dst", "src", "repeat_times", "dst_blk_stride", "dst_repeat_stride"),
    "sort": ("dst", "src", "actual_num"), "topk": ("dst", "src", "K", "actual_num"),
    "merge_sort": ("dst", "src0", "src1", "src2", "src3"),
    "gather_mask": ("dst", "src", "src1Pattern"),
    "gather": ("dst", "src", "src_offset", "src_base_addr"),
}
# how many leading arguments an op needs, where fewer than all (the rest have defaults)
REQUIRED = {**dict.fromkeys(("row_expand_mul", "row_expand_sub", "row_expand_div",
                             "row_expand_mul_experiment", "row_expand_sub_experiment",
                             "row_expand_div_experiment", "arith_progression", "merge_sort",
                             "clamp_max", "clamp_min"), 3),
            "cast": 2, "round": 2, "broadcast": 2, "select": 4, "clamp": 4}


def rint(x):
    """x rounded to the nearest integral value, ties to even (a float expression; exact: see
    dialect.nearbyint)."""
    return nearbyint(x)


class TileArgs:
    """T.tile arguments bound by name, and T.tile.cast's element count and rounding."""

    def tile_positional(self, name: str, call: ast.Call) -> ast.Call:
        """`call` with its keyword arguments moved to their positions in tilelang-ascend's
        signature of the op (TILE_PARAMS), its argument count checked:

            T.tile.fill(buffer=y, value=1.5)  ->  T.tile.fill(y, 1.5)"""
        params = TILE_PARAMS.get(name)
        if params is None:
            return call
        spell = [p if isinstance(p, tuple) else (p,) for p in params]
        need = REQUIRED.get(name, len(spell))
        args = list(call.args)
        if len(args) > len(spell) or len(args) < need and not call.keywords:
            names = ", ".join(n[0] if i < need else f"[{n[0]}]" for i, n in enumerate(spell))
            raise self.error(call, f"T.tile.{name}({names}) takes {need}"
                                   + (f" to {len(spell)}" if need < len(spell) else "")
                                   + f" arguments, got {len(args)}")
        if not call.keywords:
            return call
        for k in call.keywords:
            at = next((i for i, names in enumerate(spell) if k.arg in names), None)
            if at is None:
                raise self.error(k, f"T.tile.{name} has no argument '{k.arg}'; its arguments "
                                    f"are {', '.join(n[0] for n in spell)}")
            if at < len(args) and args[at] is not None:
                raise self.error(k, f"T.tile.{name}: argument '{k.arg}' given twice")
            args += [None] * (at + 1 - len(args))
            args[at] = k.value
        if None in args or len(args) < need:
            missing = spell[args.index(None) if None in args else len(args)][0]
            raise self.error(call, f"T.tile.{name}: missing argument '{missing}'")
        return ast.copy_location(ast.Call(call.func, args, []), call)

    def cast_prefix(self, dst_node, src_node, count_node, mode, call):
        """T.tile.cast(dst, src, mode, count) converting fewer elements than a tile holds: the
        first `count` (row-major, each tile flattened; xllm's rope: the 64 gathered cos/sin
        values of a 256-wide staging tile; a valid prefix of two tiles of one size), the rest
        of dst left as it was. None when count covers both tiles (or is a run-time value)."""
        if count_node is None or not self.is_region_node(src_node):
            return None
        count = self.eval(count_node)
        _, dn = self.flat_at(dst_node)
        src, sn = self.flat_at(src_node)
        if type(count) is not int or dn == sn == count:
            return None
        if not 0 < count <= min(dn, sn):
            raise self.error(call, f"T.tile.cast of {count} elements: dst holds {dn} and src "
                                   f"{sn}")
        buf, starts, ext, dims = self.tile_dst(dst_node)
        name = self.fresh_var("t")
        f = self.var(name)
        full, rest = list(starts), f
        for d, e in reversed(list(zip(dims, ext))):
            full[d] = binop("+", starts[d], binop("%", rest, e) if d != dims[0] else rest)
            rest = binop("//", rest, e)
        value = self.rounded(src(f), mode, dst_node, src_node, call)
        store = Store(buf, tuple(as_expr(i) for i in full), as_expr(value), self.loc(call))
        return [For((name,), (const(count),), "parallel", (store,), 0, self.loc(call))]

    def rounded(self, x, mode, node, src_node, call):
        """T.tile.cast's rounding modes, as AscendC's Cast defines them (the store converts to
        the destination dtype): into an integer, or from a float into the same float dtype
        (float -> float), the value is rounded to an integral one by the mode; into another
        float dtype the mode only rounds the precision, which the store does to nearest (the
        directed modes differ from it by less than one unit in the last place)."""
        dst, src = self.region(node)[0].dtype, self.region(src_node)[0].dtype
        if mode not in _CAST_MODES:
            raise self.error(call, f"unknown cast mode {mode!r}; expected one of "
                                   f"{', '.join(_CAST_MODES)}")
        if mode in ("CAST_NONE", "CAST_ODD") or dtypes.is_float(dst) and src != dst:
            return x
        floor = binop("//", x, 1.0)
        if mode == "CAST_FLOOR":
            r = floor
        elif mode == "CAST_CEIL":
            r = Call("neg", (binop("//", Call("neg", (as_expr(x),)), 1.0),))
        elif mode == "CAST_TRUNC":
            r = Cast("int32", as_expr(x))
        elif mode == "CAST_ROUND":  # half away from zero
            r = round_away(x)
        else:  # CAST_RINT: half to even
            r = rint(x)
        return r
