"""IR-text mutation: delete, duplicate or swap lines, change numbers, names, keywords, dtypes
and shapes.

The mutated text goes through `parse_ir`/`compile_ir`; the runner accepts only a located
CompileError, a run that agrees between the targets, or a Race/Deadlock/SyncError from the
simulator (docs/testing.md)."""
from __future__ import annotations

import re

# The stages whose printed IR is mutated (frontend Tile IR to lowered, synchronised IR).
STAGES = ("frontend", "check", "infer_scopes", "legalize", "split_cores", "pipeline",
          "plan_memory", "insert_sync")
OPS = ("delete", "duplicate", "swap", "number", "name", "keyword", "indent", "dtype", "shape")

_NUMBER = re.compile(r"(?<![\w.])-?\d+(?:\.\d+)?(?:e-?\d+)?(?![\w.])")
_NAME = re.compile(r"\b[A-Za-z_]\w*\b")
_KEYWORDS = [("Parallel", "serial"), ("serial", "Parallel"), ("MTE2", "MTE3"), ("MTE1", "FIX"),
             ("set_flag", "wait_flag"), ("wait_flag", "set_flag"), ("Scope(\"C\")", "Scope(\"V\")"),
             ("Scope(\"V\")", "Scope(\"C\")"), ("alloc_ub", "alloc_L1"), ("alloc_L0A", "alloc_L0B"),
             ("float32", "float16"), ("float16", "int32"), ("clear=True", "clear=False"),
             ("transpose_B=True", "transpose_A=True"), ("+", "-"), ("*", "//"),
             ("set_cross_flag", "wait_cross_flag"), ("reduce_sum", "reduce_max"), (">=", "<")]
_DTYPES = ("float32", "float16", "bfloat16", "int8", "int32", "uint8", "bool", "float8_e4m3fn",
           "float8_e8m0fnu", "float4_e2m1fn")
_DTYPE = re.compile("|".join(_DTYPES))
_SHAPE = re.compile(r"\((\d+)(?:, (\d+))*,?\)")  # a shape tuple (a tensor's or a tile's)
_ODD_NUMBERS = ["0", "1", "-1", "2", "7", "8", "11", "16", "31", "2147483648",
                "99999999999999999999", "1e30", "-0.0", "inf", "nan", "65536"]


def mutate(text: str, d, op: str | None = None) -> tuple[str, str]:
    """One random mutation of `text` (draws from `d`); returns (new text, what was done)."""
    lines = text.rstrip("\n").split("\n")
    op = op or d.choice(OPS)
    n = len(lines)
    k = d.int(1, n - 1) if n > 1 else 0  # line 0 is the decorator
    if op == "delete" and n > 2:
        what = f"delete line {k + 1}: {lines[k].strip()}"
        del lines[k]
    elif op == "duplicate":
        what = f"duplicate line {k + 1}: {lines[k].strip()}"
        lines.insert(k, lines[k])
    elif op == "swap" and n > 2:
        j = min(n - 1, max(1, k + d.choice([-2, -1, 1, 1, 2, 5])))
        what = f"swap lines {k + 1} and {j + 1}"
        lines[k], lines[j] = lines[j], lines[k]
    elif op == "number":
        k, m = _pick(lines, _NUMBER, d, k)
        if m is None:
            return mutate(text, d, "swap")
        val = m.group(0)
        new = d.choice(_ODD_NUMBERS + [str(_num(val) + d.choice([-1, 1])), str(_num(val) * 2)])
        lines[k] = lines[k][:m.start()] + new + lines[k][m.end():]
        what = f"line {k + 1}: number {val} -> {new}"
    elif op == "name":
        k, m = _pick(lines, _NAME, d, k)
        names = sorted(set(_NAME.findall(_code("\n".join(lines[1:])))))
        if m is None or not names:
            return mutate(text, d, "delete")
        new = d.choice(names + ["zz", "vid", "cid", "V", "M", "FIX"])
        lines[k] = lines[k][:m.start()] + new + lines[k][m.end():]
        what = f"line {k + 1}: name {m.group(0)} -> {new}"
    elif op == "keyword":
        hits = [(i, a, b) for i, line in enumerate(lines) for a, b in _KEYWORDS if a in line]
        if not hits:
            return mutate(text, d, "number")
        i, a, b = d.choice(hits)
        lines[i] = lines[i].replace(a, b, 1)
        what = f"line {i + 1}: {a} -> {b}"
    elif op == "dtype":  # another element type for a tensor, a tile or a cast
        k, m = _pick(lines, _DTYPE, d, k)
        if m is None:
            return mutate(text, d, "number")
        new = d.choice(_DTYPES)
        lines[k] = lines[k][:m.start()] + new + lines[k][m.end():]
        what = f"line {k + 1}: dtype {m.group(0)} -> {new}"
    elif op == "shape":  # one extent of a shape: 1, odd, or far too large for memory
        k, m = _pick(lines, _SHAPE, d, k)
        if m is None:
            return mutate(text, d, "number")
        dims = re.findall(r"\d+", m.group(0))
        dims[d.int(0, len(dims) - 1)] = str(d.choice([1, 3, 2 ** 31, 2 ** 40, 100003]))
        new = "(" + ", ".join(dims) + ("," if len(dims) == 1 else "") + ")"
        lines[k] = lines[k][:m.start()] + new + lines[k][m.end():]
        what = f"line {k + 1}: shape {m.group(0)} -> {new}"
    else:  # indent
        delta = d.choice([-4, 4])
        lines[k] = lines[k][4:] if delta < 0 and lines[k].startswith("    ") else "    " + lines[k]
        what = f"line {k + 1}: indent {delta:+d}"
    return "\n".join(lines) + "\n", what


def _code(text: str) -> str:
    """`text` without comments and string literals (file paths must not feed a mutation)."""
    return "\n".join(re.sub(r'"[^"]*"', '""', line.split("#", 1)[0]) for line in text.split("\n"))


def _num(text: str):
    try:
        return int(text)
    except ValueError:
        return float(text)


def _pick(lines, pattern, d, start):
    """A match of `pattern` in a line at or after `start` (wrapping), chosen at random."""
    n = len(lines)
    for off in range(n):
        i = (start + off) % n
        if i == 0:
            continue
        code = _code(lines[i])
        found = list(pattern.finditer(code))
        if found:
            return i, d.choice(found)
    return start, None
