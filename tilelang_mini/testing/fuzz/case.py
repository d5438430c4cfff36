"""A fuzz case: kernel source text, its inputs, an independent NumPy reference, tolerances.

Everything in a `Case` is plain data (strings, numbers, lists), so a case goes to a worker
process as JSON and is replayed from its text alone. The reference is NumPy source written by the
generator from its own description of the kernel (float64, tiles padded with zeros as the DSL's
clipped copies are), never derived from the compiler's IR or semantics.
"""
from __future__ import annotations

import json
from dataclasses import asdict, dataclass, field

import numpy as np

# Machine epsilon of every dtype a generator uses (the unit of the tolerances below).
EPS = {"float32": 2.0 ** -23, "float16": 2.0 ** -10, "bfloat16": 2.0 ** -7,
       "float8_e4m3fn": 2.0 ** -3, "float8_e5m2": 2.0 ** -2, "int32": 0.0}

KERNEL_HEADER = ["import tilelang_mini.language as T", "", "", "@T.prim_func"]


@dataclass
class Tensor:
    """A kernel parameter: name, shape, dtype, and how its test data is drawn."""

    name: str
    shape: list
    dtype: str
    lo: float = -1.0  # values uniform in [lo, hi] (ints: randint inclusive)
    hi: float = 1.0
    output: bool = False
    workspace: bool = False  # jit(workspace_idx=): scratch GM the runtime allocates, not passed


@dataclass
class Case:
    """One generated kernel and everything needed to check it."""

    family: str
    seed: str
    source: str                       # the kernel file: defines `main` (a T.prim_func)
    tensors: list                     # [Tensor], in parameter order
    reference: str = ""               # numpy source defining reference(**inputs) -> [outputs]
    tol: dict = field(default_factory=dict)  # output name -> (rtol, atol) on |want| / scale
    features: list = field(default_factory=list)   # tags the KNOWN_BUGS table matches
    expect_error: dict | None = None  # invalid kernels: {"line": n, "what": "..."}
    mutation: dict | None = None      # IR-mutation cases: {"stage", "seed"}
    broken: str | None = None         # `expert_broken`: the synchronisation removed
    call: dict | None = None          # `args` family: {"kind", "index"} (badargs.py)
    scenario: dict | None = None      # `scenario` family: process/thread/cache (scenarios.py)
    library: dict | None = None       # `library` family: kind, chip, sim, illegal (library_call.py)
    marks: dict = field(default_factory=dict)  # notable statement -> line (for invalid kernels)

    @property
    def out_idx(self) -> list[int]:
        return [i for i, t in enumerate(self.tensors) if t.output]

    @property
    def workspace_idx(self) -> list[int]:
        return [i for i, t in enumerate(self.tensors) if t.workspace]

    def to_json(self) -> str:
        return json.dumps(asdict(self))

    @staticmethod
    def from_json(text: str) -> "Case":
        d = json.loads(text)
        d["tensors"] = [Tensor(**t) for t in d["tensors"]]
        return Case(**d)

    def describe(self) -> str:
        """The case as a reproduction: the kernel, then the reference."""
        parts = [f"# case {self.family}:{self.seed}", self.source]
        if self.reference:
            parts.append("# reference (float64 NumPy)\n" + self.reference)
        if self.library:
            lib = self.library
            parts.append(f"# call(target, chip={lib['chip']!r}, sim=...): steps numpy, llvm"
                         + (", sim" if lib.get("sim") else "")
                         + (f"; illegal ({lib['illegal']}): must raise a clear error"
                            if lib.get("illegal") else ""))
        if self.mutation:
            parts.append(f"# the IR after {self.mutation['stage']} is mutated with seed "
                         f"{self.mutation['seed']} (the run prints the mutated text)")
        return "\n".join(parts)


class Source:
    """Lines of a generated file; `add` returns the 1-based line number of what it adds."""

    def __init__(self, header=()):
        self.lines = list(header)

    def add(self, indent: int, text: str) -> int:
        self.lines.append("    " * indent + text)
        return len(self.lines)

    def block(self, indent: int, lines) -> int:
        """Add `lines` (strings, each with its own relative indentation) at `indent`; returns
        the line number of the first."""
        first = len(self.lines) + 1
        for line in lines:
            self.add(indent, line)
        return first

    def text(self) -> str:
        return "\n".join(self.lines) + "\n"


def signature(tensors) -> str:
    """`def main(...)` over the kernel's tensors (a shape [] is a scalar parameter)."""
    return "def main(" + ", ".join(f'{t.name}: T.Tensor({tuple(t.shape)!r}, "{t.dtype}")'
                                   if t.shape else f"{t.name}: T.{t.dtype}"
                                   for t in tensors) + "):"


def kernel_source(tensors, launch: str, allocs=(), header=KERNEL_HEADER):
    """A kernel file up to its first statement: the header, `def main(...)`, `with <launch>:`
    and one `name = T.alloc_<kind>(shape, dtype)` per (name, kind, shape, dtype) (shape None:
    `T.alloc_var(dtype)`). Returns (Source, marks: "kernel" and "alloc_<name>" -> line)."""
    src = Source(header)
    src.add(0, signature(tensors))
    marks = {"kernel": src.add(1, f"with {launch}:")}
    for name, kind, shape, dtype in allocs:
        args = f'"{dtype}"' if shape is None else f'{tuple(shape)}, "{dtype}"'
        marks[f"alloc_{name}"] = src.add(2, f"{name} = T.alloc_{kind}({args})")
    return src, marks


def input_names(tensors) -> str:
    """The reference's parameters: the kernel's input tensors, in order."""
    return ", ".join(t.name for t in tensors if not t.output and not t.workspace)


def reference_source(params: str, zeros=(), loops=()):
    """`def reference(params):`, `name = np.zeros(shape)` per (name, shape), then one nested
    `for var in range(n):` per (var, n). Returns (Source, the indent of the innermost body)."""
    ref = Source()
    ref.add(0, f"def reference({params}):")
    for name, shape in zeros:
        ref.add(1, f"{name} = np.zeros({tuple(shape)!r})")
    for depth, (var, n) in enumerate(loops):
        ref.add(1 + depth, f"for {var} in range({n}):")
    return ref, 1 + len(loops)


def build_case(family, seed, src, tensors, ref, tol, feats, marks=None) -> Case:
    """The Case of a generator's kernel and reference Sources."""
    return Case(family, str(seed), src.text(), tensors, ref.text(), tol, sorted(feats),
                marks=marks or {})


def tolerance(out_dtype: str, compute_eps: float = EPS["float32"], terms: int = 1,
              slack: float = 8.0) -> tuple[float, float]:
    """(rtol, atol): rounding to `out_dtype` (relative), plus `terms` roundings of size
    `compute_eps` that scale with the magnitude of what was summed (absolute, on the scale)."""
    rtol = 2.0 * EPS[out_dtype] + 4 * compute_eps
    atol = slack * compute_eps * max(1.0, float(np.sqrt(terms))) + EPS[out_dtype]
    return rtol, atol


def make_inputs(case: Case) -> dict:
    """The case's input arrays (seeded by the case), in their kernel dtypes."""
    from tilelang_mini.ir import dtypes
    rng = np.random.default_rng(abs(hash_seed(case.family + ":" + str(case.seed))))
    out = {}
    for t in case.tensors:
        if t.output or t.workspace:
            continue
        if not t.shape:  # a scalar parameter (`n: T.int32`): the caller passes a number
            out[t.name] = (int(rng.integers(int(t.lo), int(t.hi) + 1)) if t.dtype == "int32"
                           else round(float(rng.uniform(t.lo, t.hi)), 3))
            continue
        if t.dtype == "int4":  # the caller passes the packed bytes of the values
            vals = rng.integers(int(t.lo), int(t.hi) + 1, size=t.shape)
            out[t.name] = pack_int4(vals)
            continue
        if t.dtype in ("int32", "bool"):
            arr = rng.integers(int(t.lo), int(t.hi) + 1, size=t.shape)
        else:
            arr = rng.uniform(t.lo, t.hi, size=t.shape)
        out[t.name] = np.ascontiguousarray(dtypes.cast_array(arr, t.dtype))
    return out


def pack_int4(values) -> np.ndarray:
    """int4 values (in [-8, 8)) packed two a byte along the last dim, the even index in the low
    nibble (T.int4's storage), as int8."""
    v = np.asarray(values).astype(np.int64)
    return ((v[..., 0::2] & 15) | ((v[..., 1::2] & 15) << 4)).astype(np.uint8).view(np.int8)


def hash_seed(text: str) -> int:
    """A stable hash (Python's `hash` of a str changes per process)."""
    import zlib
    return zlib.crc32(text.encode())


# Helpers every reference may use: the DSL's data movement, written here in NumPy.
REFERENCE_PRELUDE = '''
import numpy as np


def load(x, starts, shape):
    """A tile of `shape` from x at `starts`, zero-padded past the edges (T.copy GM -> tile)."""
    out = np.zeros(shape)
    src = tuple(slice(max(s, 0), min(s + n, d)) for s, n, d in zip(starts, shape, x.shape))
    dst = tuple(slice(a.start - s, a.stop - s) for a, s in zip(src, starts))
    if all(a.stop > a.start for a in src):
        out[dst] = x[src]
    return out


def store(y, starts, tile):
    """Write `tile` into y at `starts`, dropping what falls outside (T.copy tile -> GM)."""
    src = tuple(slice(max(s, 0), min(s + n, d)) for s, n, d in zip(starts, tile.shape, y.shape))
    dst = tuple(slice(a.start - s, a.stop - s) for a, s in zip(src, starts))
    if all(a.stop > a.start for a in src):
        y[src] = tile[dst]


def rnd(x, dtype):
    """Round to `dtype` (a cast into a tile or tensor of that dtype)."""
    from tilelang_mini.ir import dtypes
    if dtype in ("float64",):
        return np.asarray(x, np.float64)
    return np.asarray(x).astype(dtypes.to_numpy(dtype)).astype(np.float64)


def cdiv(a, b):
    return -(-a // b)


def wrap4(v):
    """Integers wrapped to int4 (a nibble store keeps the low 4 bits, reads sign-extend)."""
    v = np.asarray(v).astype(np.int64)
    return (((v & 15) ^ 8) - 8).astype(np.float64)


def unpack4(p):
    """The int4 values of packed bytes p [..., n] -> [..., 2n] (the even index low)."""
    b = np.asarray(p).astype(np.int64) & 255
    out = np.zeros(b.shape[:-1] + (2 * b.shape[-1],))
    out[..., 0::2] = ((b & 15) ^ 8) - 8
    out[..., 1::2] = ((b >> 4) ^ 8) - 8
    return out


def pack4(t):
    """int4 values t [..., 2n] -> their packed bytes [..., n] as int8 values."""
    v = np.asarray(t).astype(np.int64)
    b = (v[..., 0::2] & 15) | ((v[..., 1::2] & 15) << 4)
    return ((b ^ 128) - 128).astype(np.float64)
'''


def run_reference(case: Case, inputs: dict) -> tuple[list, list]:
    """(outputs, scales) from the case's reference source on float64 copies of the inputs."""
    ns: dict = {}
    exec(compile(REFERENCE_PRELUDE + "\n" + case.reference, f"<reference {case.family}>", "exec"), ns)
    args = {k: v if not isinstance(v, np.ndarray)  # scalar parameters stay numbers
            else v.astype(np.float64) if v.dtype.kind == "f" or v.dtype.kind == "V"
            or str(v.dtype) not in ("int32", "int64", "bool") else v.astype(np.int64)
            for k, v in inputs.items()}
    result = ns["reference"](**args)
    outs, scales = [], []
    for r in result:
        if isinstance(r, tuple):
            outs.append(np.asarray(r[0], np.float64))
            scales.append(np.asarray(r[1], np.float64))
        else:
            outs.append(np.asarray(r, np.float64))
            scales.append(None)
    return outs, scales


def compare(got, want, scale, rtol, atol) -> tuple[bool, str]:
    """|got - want| <= rtol*|want| + atol*scale, elementwise (scale defaults to max(1, |want|max))."""
    got = np.asarray(got).astype(np.float64)
    if got.shape != want.shape:
        return False, f"shape {got.shape} != reference {want.shape}"
    if scale is None:
        scale = max(1.0, float(np.max(np.abs(want))) if want.size else 1.0)
    bound = rtol * np.abs(want) + atol * scale
    with np.errstate(invalid="ignore"):
        bad = ~(np.abs(got - want) <= bound)
    bad &= ~(got == want)                       # equal infinities
    bad &= ~(np.isnan(got) & np.isnan(want))    # both NaN
    if not bad.any():
        return True, ""
    idx = tuple(int(i) for i in np.argwhere(bad)[0])
    return False, (f"{int(bad.sum())}/{bad.size} elements differ; first at {idx}: "
                   f"got {got[idx]!r}, want {want[idx]!r}")
