"""Buffer planning: where every buffer lives in the per-worker scratch arena and in which layout.

* `global` buffers are the kernel parameters (row-major, their dtype).
* `workspace` buffers: one copy per block, shared by the block's cores.
* L1/L0A/L0B/L0C buffers: one copy per block (the AIC's, shared with the AIVs).
* other on-chip buffers (shared/fragment/var/UB): one copy per core context that references
  them: "top" (code outside any Scope), "C", and "V" (two copies, indexed by vid).
* an allocation marked `widened=True` (transform/cpu_storage.py `widen_storage`: on-chip
  float16/float8 tiles, and bfloat16 ones unless the host has avx512_bf16) is stored as float32;
  every other buffer in its dtype.
* a `panels=True` allocation (transform/cpu_layout.py `infer_panels`: a tile only copied into
  whole and read as the B operand of gemms) is kept packed in micro-panels of NR columns: the
  copy into the tile is the packing step of the BLIS-style GEMM. With avx512_bf16 and bfloat16
  operands the panels are in the VNNI pair layout `[N/NR][K/2][NR][2]`. A tile (N, K) every
  gemm reads transposed (transpose_B) holds the float32 panels of its transpose (`packBT`), or,
  where every such gemm runs microkernel.py's K-pair kernel (at most 24 constant columns), its
  float32 K pairs `[N/NR][K/2][NR][2]` (`packBT2`): the kernel loads them with no interleave.

The arena holds first the buffers a block may read before writing them completely
(`zero_bytes`, zeroed at the start of every grid block: the allocations transform/cpu_zero.py
did not mark `uninit`), then the other buffers (up to `arena_bytes`), then the packed-tile
cache (pack_cache.py), then temporaries.
"""
from __future__ import annotations

from dataclasses import dataclass, field

from tilelang_mini.errors import CompileError
from tilelang_mini.ir.analysis import AIC_SCOPES, core_instructions, written_names
from tilelang_mini.ir.nodes import (
    Alloc, Const, Copy, Fill, Gemm, Kernel, Load, Reduce, Region, Scope, Sort, Store, body_fields,
    walk, walk_own,
)

from .irutil import STORAGE, VL

NR = 32  # columns of a micro-panel (two float32 vectors)
MR = 8   # rows of the micro-kernel
ALIGN = 64

# one instance per block, shared by its cores (analysis.BLOCK_SCOPES but the kernel parameters):
# GM scratch and the AIC's buffers (which the AIVs can write on chips with a UB -> L1 path)
PER_BLOCK = ("workspace",) + AIC_SCOPES


def _align(n: int) -> int:
    return (n + ALIGN - 1) // ALIGN * ALIGN


@dataclass
class BufInfo:
    buf: object
    storage: str
    layout: str = "row"          # row | packB | packBT (of the transposed tile) | packBT2 | packB_vnni
    nbytes: int = 0
    slots: dict = field(default_factory=dict)   # ctx -> arena offset (bytes)
    param: int | None = None

    @property
    def name(self):
        return self.buf.name

    @property
    def dtype(self):
        return self.buf.dtype

    @property
    def shape(self):
        return self.buf.shape

    @property
    def strides(self) -> tuple[int, ...]:
        out, acc = [], 1
        for n in reversed(self.buf.shape):
            out.append(acc)
            acc *= n
        return tuple(reversed(out))

    @property
    def esize(self) -> int:
        return STORAGE[self.storage][1]


@dataclass
class Plan:
    infos: dict
    zero_bytes: int
    has_scopes: bool
    arena_bytes: int = 0            # all buffers: the zeroed ones first, then the others
    zeroed: frozenset = frozenset()  # names of the buffers a block may read before writing
    # per-core buffers read by code outside the Scopes (an if condition, a loop bound) but
    # written only inside them -> the core whose copy that code reads ("C", else "V": vid 0)
    top_source: dict = field(default_factory=dict)


def plan_buffers(kernel: Kernel, bf16: bool, top_copies: int = 1) -> Plan:
    """Where every buffer lives. `top_copies` copies of the buffers of code outside any Scope:
    3 when a block's cores run as coroutines, each running that code on its own copy."""
    params = {p.name: p for p in kernel.params}
    allocs: dict = {}
    ctxs: dict = {}
    uses: dict = {}

    def note(name, ctx, use):
        ctxs.setdefault(name, set()).add(ctx)
        uses.setdefault(name, []).append(use)

    def visit(stmts, ctx):
        for s in stmts:
            if isinstance(s, Alloc):
                b = s.buffer
                old = allocs[b.name].buffer if b.name in allocs else params.get(b.name)
                if old is not None and old != b:
                    raise CompileError(f"buffer {b.name!r} is declared twice with different "
                                       f"shape, dtype or scope", s.loc)
                allocs[b.name] = s
                continue
            if isinstance(s, Scope):
                visit(s.body, s.core)
                continue
            for n in walk_own(s):
                if isinstance(n, Load):
                    note(n.buffer.name, ctx, ("load",))
            if isinstance(s, Store):
                note(s.buffer.name, ctx, ("store",))
            elif isinstance(s, Copy):
                note(s.src.buffer.name, ctx, ("copy_src",))
                # transform/cpu_dual.py: the FixPipe writes the AIVs' UB
                note(s.dst.buffer.name, "V" if s.dual else ctx,
                     ("copy_dst_t",) if s.transpose else ("copy_dst", s.dst.is_full))
            elif isinstance(s, Gemm):
                note(s.a.buffer.name, ctx, ("gemm_a",))
                note(s.b.buffer.name, ctx, ("gemm_b", s.b.is_full, s.transpose_b,
                                            s.a.buffer.name, s.transpose_a, s.columns))
                note(s.c.buffer.name, ctx, ("gemm_c",))
            elif isinstance(s, (Fill, Reduce, Sort)):
                for n in walk_own(s):
                    if isinstance(n, Region):
                        note(n.buffer.name, ctx, ("tile",))
            for name in body_fields(s):
                visit(getattr(s, name), ctx)

    visit(kernel.body, "top")
    has_scopes = any(isinstance(n, Scope) for s in kernel.body for n in walk(s))

    # the bfloat16 buffers stored as such (not widened), where the host multiplies them natively
    stored_bf16 = {n for n, b in [*params.items(), *((n, a.buffer) for n, a in allocs.items()
                                                     if not a.widened)]
                   if b.dtype == "bfloat16"} if bf16 else set()
    # the buffers stored as float32 (a gemm reads them as A in place)
    f32_names = {n for n, b in params.items() if b.dtype == "float32"} | {
        n for n, a in allocs.items() if a.widened or a.buffer.dtype == "float32"}
    infos: dict = {}
    for i, p in enumerate(kernel.params):
        infos[p.name] = BufInfo(p, p.dtype, param=i)
    zeroed = {name for name, a in allocs.items() if not a.uninit}  # transform/cpu_zero.py
    offset = 0
    order = [n for n in allocs if n in zeroed] + [n for n in allocs if n not in zeroed]
    zero_bytes = None
    for name in order:
        buf = allocs[name].buffer
        if zero_bytes is None and name not in zeroed:
            zero_bytes = offset
        if name in params:
            continue
        info = BufInfo(buf, "float32" if allocs[name].widened else buf.dtype)
        info.layout = _layout(allocs[name], uses.get(name, []), stored_bf16, f32_names)
        info.nbytes = _nbytes(info)
        size = _align(info.nbytes)
        if buf.scope in PER_BLOCK:
            info.slots = {c: offset for c in ("top", "C", "V")}
            offset += size
        else:
            for ctx in sorted(ctxs.get(name, ())):
                info.slots[ctx] = offset
                offset += size * (2 if ctx == "V" else top_copies if ctx == "top" else 1)
        infos[name] = info
    return Plan(infos, offset if zero_bytes is None else zero_bytes, has_scopes,
                offset, frozenset(zeroed), _top_sources(kernel, infos))


def _top_sources(kernel: Kernel, infos: dict) -> dict:
    """{buffer: core} for the per-core buffers that code outside any Scope reads but only the
    cores write. Each core runs that control flow with its own copy (the numpy backend's
    coroutines do); split_cores has every core that uses such a scalar load it itself, so the
    copies agree and one core's copy stands for all (the cube's when it writes one)."""
    writers: dict = {}
    for s, ctx in core_instructions(kernel.body, "top"):
        for n in written_names(s):
            writers.setdefault(n, set()).add(ctx)
    out = {}
    for name, ctxs in writers.items():
        info = infos.get(name)
        if (info is None or info.param is not None or "top" in ctxs or "top" not in info.slots
                or info.buf.scope in PER_BLOCK):
            continue
        core = "C" if "C" in ctxs and "C" in info.slots else "V" if "V" in info.slots else None
        if core is not None:
            out[name] = core
    return out


def _layout(alloc, uses, stored_bf16, f32_names=frozenset()) -> str:
    """Row-major, or the micro-panels a `panels=True` allocation asks for (transform/cpu_layout.py):
    VNNI bfloat16 pairs where the host multiplies them natively and the tile and the A operand of
    every gemm reading it are stored as bfloat16 (`stored_bf16`: their names, or empty without
    the native product), else float32 panels; `packBT2` (float32 K pairs) where every gemm
    reading the transposed tile runs the K-pair kernel (_kpair_gemm)."""
    if not alloc.panels:
        return "row"
    gemm = [u for u in uses if u[0] == "gemm_b"]
    vnni = alloc.buffer.name in stored_bf16 and all(u[3] in stored_bf16 for u in gemm)
    if gemm and all(u[2] for u in gemm):  # read transposed: panels of the transpose
        if not vnni and all(_kpair_gemm(alloc.buffer.shape, u, f32_names) for u in gemm):
            return "packBT2"
        return "row" if vnni else "packBT"  # (no transposing VNNI copy: the gemm packs it)
    return "packB_vnni" if vnni else "packB"


def _kpair_gemm(shape, use, f32_names) -> bool:
    """Whether a gemm reading the transposed B tile `shape` (N, K) (`use`: its gemm_b note)
    computes all its columns with microkernel.py's K-pair kernel (kpairs.usable): one panel of
    1..8 or 17..24 constant columns, A's rows contiguous in K (not a float32 A read transposed
    in place), at least 2 K."""
    _, full, _, a_name, trans_a, columns = use
    n, k = shape
    cols = columns.value if isinstance(columns, Const) and columns.value > 0 else n
    cols = min(cols, n)
    return full and k >= 2 and (0 < cols <= VL // 2 or VL < cols <= VL + VL // 2) and \
        not (trans_a and a_name in f32_names)


def _nbytes(info: BufInfo) -> int:
    shape = info.buf.shape
    if info.layout == "packB":
        k, n = shape
        return -(-n // NR) * k * NR * 4
    if info.layout == "packBT":
        n, k = shape
        return -(-n // NR) * k * NR * 4
    if info.layout == "packBT2":
        n, k = shape
        return -(-n // NR) * (-(-k // 2)) * 2 * NR * 4
    if info.layout == "packB_vnni":
        k, n = shape
        return -(-n // NR) * (-(-k // 2)) * NR * 4
    total = 1
    for d in shape:
        total *= d
    return total * info.esize
