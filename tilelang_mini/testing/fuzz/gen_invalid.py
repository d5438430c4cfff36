"""Kernels with one mistake a user makes, at a known line: the compiler must answer with a
CompileError located at that line (the runner checks file and line).

A valid kernel is generated first; one statement is then replaced or one is inserted.
`expect_error = {"lines": [...], "what": kind}`: the first line is where the mistake is; the
others are lines an error may also rightly name (the declaration a use disagrees with).
"""
from __future__ import annotations

import re

from .gen_cube import gen_gemm
from .gen_vector import gen_elementwise, gen_reduce

KINDS = ["bad_dtype", "unknown_T", "wrong_args", "const_index_oob", "undefined_name",
         "shape_mismatch", "reduce_dim", "parallel_extent", "param_dtype", "index_rank",
         "gemm_dtype", "alloc_nonconst", "big_int_literal"]


def _indent(line: str) -> str:
    return line[:len(line) - len(line.lstrip())]


def gen_invalid(d, seed):
    kind = d.choice(KINDS)
    base = {"bad_dtype": gen_elementwise, "unknown_T": d.choice([gen_elementwise, gen_gemm]),
            "wrong_args": d.choice([gen_gemm, gen_reduce]),
            "const_index_oob": gen_elementwise, "undefined_name": gen_elementwise,
            "shape_mismatch": d.choice([gen_gemm, gen_reduce]), "reduce_dim": gen_reduce,
            "parallel_extent": gen_elementwise, "param_dtype": gen_reduce,
            "index_rank": gen_elementwise, "gemm_dtype": gen_gemm,
            "alloc_nonconst": gen_reduce, "big_int_literal": gen_elementwise}[kind](d, seed)
    lines = base.source.rstrip("\n").split("\n")
    m = base.marks
    also: list[int] = []

    def sub(mark, pattern, repl, count=1):
        n = m[mark]
        new = re.sub(pattern, repl, lines[n - 1], count=count)
        assert new != lines[n - 1], (kind, lines[n - 1])
        lines[n - 1] = new
        return n

    def insert_after(mark, text, extra_indent=0):
        n = m[mark]
        lines.insert(n, _indent(lines[n - 1]) + "    " * extra_indent + text)
        return n + 1

    two_d = "i, j" in lines[m.get("map", 1) - 1] if "map" in m else True
    if kind == "bad_dtype":
        line = 1 + lines.index(_alloc_line(lines, "x"))
        lines[line - 1] = re.sub(r'"(float32|float16|bfloat16)"', '"float13"', lines[line - 1])
    elif kind == "unknown_T":
        mark = "map" if "map" in m else "gemm"
        name = d.choice(["expp", "gem", "Paralel", "sqroot"])
        if mark == "map":
            line = insert_after("map", f"o[{'i, j' if two_d else 'i'}] = T.{name}(o[{'i, j' if two_d else 'i'}])")
        else:
            line = sub("gemm", r"T\.gemm\(", f"T.{name}(")
    elif kind == "wrong_args":
        if "gemm" in m:
            line = sub("gemm", r"T\.gemm\((\w+), (\w+), (\w+)[^)]*\)", d.choice([r"T.gemm(\1, \2)", r"T.gemm(\1)"]))
        else:
            line = sub("reduce", r"\(x, r, .*\)$", d.choice(["(x)", "(x, r, 1, True, 0)"]))
    elif kind == "const_index_oob":
        tile = re.search(r"\(([\d, ]+)\)", _alloc_line(lines, "x"))
        ext = [int(v) for v in tile.group(1).split(",") if v.strip()]
        if two_d:
            text = d.choice([f"o[i, j] = x[{ext[0]}, j]", f"o[i, j] = x[i, {ext[1] + d.int(0, 3)}]",
                             f"o[{ext[0] + 5}, j] = x[i, j]"])
        else:
            text = d.choice([f"o[i] = x[{ext[0]}]", f"o[{ext[0] + 2}] = x[i]"])
        line = insert_after("map", text)
    elif kind == "undefined_name":
        idx = "i, j" if two_d else "i"
        line = insert_after("map", d.choice([f"o[{idx}] = zz[{idx}] + 1.0",
                                             f"o[{idx}] = x[{idx}] * scale_factor"]))
    elif kind == "shape_mismatch":
        if "gemm" in m:
            line = m["gemm"]
            also = [sub("alloc_C_f", r"\((\d+), (\d+)\)", lambda mm: f"({int(mm.group(1)) + 16}, {mm.group(2)})")]
        else:
            # a destination of another rank (a longer one of the same rank is valid: it takes
            # the result in its leading part, tilelang-ascend's padded row statistics)
            line = m["reduce"]
            also = [sub("alloc_r", r"\((\d+)", lambda mm: f"({int(mm.group(1))}, 3")]
    elif kind == "reduce_dim":
        line = sub("reduce", r"dim=-?\d+", f"dim={d.choice([3, 4, -5])}")
    elif kind == "parallel_extent":
        line = sub("map_loop", r"T\.Parallel\((\d+)", d.choice([r"T.Parallel(bx", r"T.Parallel(\1.5"]))
    elif kind == "param_dtype":
        line = 5
        lines[4] = lines[4].replace('"float', '"flaot', 1)
    elif kind == "index_rank":
        idx = "i, j" if two_d else "i"
        bad = "i" if two_d else "i, 0"
        line = insert_after("map", f"o[{bad}] = x[{idx}]")
    elif kind == "gemm_dtype":
        line = m["gemm"]
        cur = re.search(r'"(\w+)"\)$', lines[m["alloc_B_s"] - 1]).group(1)
        other = "float16" if cur != "float16" else "float32"
        also = [sub("alloc_B_s", r'"\w+"\)$', f'"{other}")')]
    elif kind == "big_int_literal":  # beyond 64 bits: a located error, never a wrapped value
        idx = "i, j" if two_d else "i"
        line = insert_after("map", f"o[{idx}] = x[{idx}] + {d.choice(['99999999999999999999', '-18446744073709551617'])}")
    else:  # alloc_nonconst
        line = sub("alloc_x", r"\((\d+), ", "(bx + 1, ")
    base.family = "invalid"
    base.source = "\n".join(lines) + "\n"
    base.reference = ""
    base.tol = {}
    base.features = sorted(set(base.features) | {"invalid", f"invalid_{kind}"})
    base.expect_error = {"lines": [line] + also, "what": kind}
    return base


def _alloc_line(lines, name):
    for text in lines:
        if text.strip().startswith(f"{name} = T.alloc"):
            return text
    raise AssertionError(name)
