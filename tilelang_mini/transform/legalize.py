"""legalize: every copy gets a path the chip has, and gemm on L1 operands becomes L0 loads + MMADs.

Allocations move to the top of the kernel. A copy the chip cannot do directly goes through a
per-block GM workspace (ascend910b has no L0C->UB or UB->L1 path), and a converting copy on a
pipe that cannot convert (only V and FIX can) is staged through UB and cast on the vector unit:

    copy(S, S_ub)                  ->   copy(S, S_ws)         # C.FIX   L0C -> GM
                                        copy(S_ws, S_ub)      # V.MTE2  GM -> UB

A gemm on L1 operands loads K chunks that fit L0A/L0B (MTE1) and runs one MMAD each (M); a
block-scaled gemm (scale_A/scale_B, the MX MMAD) loads its whole K and reads its scales from L1:

    gemm(A_s, B_s, C_f)            ->   copy(A_s[0 +: 128, 0 +: 64], A_s_l0a)   # C.MTE1
                                        copy(B_s[0 +: 64, 0 +: 128], B_s_l0b)   # C.MTE1
                                        gemm(A_s_l0a, B_s_l0b, C_f)             # C.M
"""
from __future__ import annotations

from dataclasses import replace

from ..arch import Chip
from ..errors import CompileError
from ..ir import dtypes
from ..ir.analysis import GM_SCOPES
from ..ir.nodes import (
    Alloc, BinOp, Buffer, Const, Copy, For, Gemm, Kernel, Region, Var, body_fields, walk,
    walk_statements,
)
from ..ir.pipes import copy_pipe
from .util import all_allocs, fresh_name, map_bodies, strip_allocs

ALIGN_K = 16
FP8_DTYPES = ("float8_e4m3fn", "float8_e5m2")  # cube operands only chips with fp8_cube take
CASTING_PIPES = ("V", "FIX")  # the pipes that can convert dtypes on the way


def legalize(kernel: Kernel, chip: Chip) -> Kernel:
    state = _Legalizer(chip, {a.buffer.name for a in all_allocs(kernel.body)} |
                       {p.name for p in kernel.params})
    state.vid = kernel.grid_vars[1] if kernel.is_npu and len(kernel.grid_vars) > 1 else None
    stripped = strip_allocs(kernel.body)
    state.plan_chunks(stripped)
    body = state.block(stripped)
    allocs = [replace(a, offset=a.offset) for a in all_allocs(kernel.body)]
    return replace(kernel, body=tuple(allocs + state.new_allocs + body))


class _Legalizer:
    def __init__(self, chip: Chip, names: set):
        self.chip = chip
        self.names = names
        self.new_allocs: list[Alloc] = []
        self.l0: dict = {}
        self.kc_of: dict = {}  # id(gemm) -> K chunk shared out among the gemms of its loop
        self.vid = None

    def fresh(self, base: str, shape, dtype: str, scope: str, loc) -> Buffer:
        buf = Buffer(fresh_name(base, self.names), tuple(shape), dtype, scope)
        self.new_allocs.append(Alloc(buf, None, loc))
        return buf

    def block(self, stmts) -> list:
        out = []
        for s in stmts:
            if isinstance(s, Copy):
                out += self.copy(s)
            elif isinstance(s, Gemm):
                out += self.gemm(s)
            else:
                out.append(map_bodies(s, self.block))
        return out

    def copy(self, s: Copy) -> list:
        src, dst = s.src.buffer.scope, s.dst.buffer.scope
        pipe = copy_pipe(src, dst)
        if s.src.buffer.dtype != s.dst.buffer.dtype and pipe not in CASTING_PIPES:
            return self.cast_on_vector(s)
        if pipe is not None and self.direct(src, dst) and not self.per_aiv_l0c_to_ub(s):
            return [s]
        if src in GM_SCOPES and dst in GM_SCOPES:
            tmp = self.fresh(f"{s.dst.buffer.name}_ub", s.src.extent, s.src.buffer.dtype, "UB", s.loc)
            return [Copy(s.src, Region.full(tmp), s.loc)] + self.copy(replace(s, src=Region.full(tmp)))
        if (src, dst) in (("L0C", "UB"), ("UB", "L1")):
            ws = self.fresh(f"{s.dst.buffer.name}_ws", s.src.extent, s.dst.buffer.dtype,
                            "workspace", s.loc)
            return [Copy(s.src, Region.full(ws), s.loc), replace(s, src=Region.full(ws))]
        raise CompileError(f"no copy path from {src} to {dst} on {self.chip.name}: "
                           f"'{s.src.buffer.name}' -> '{s.dst.buffer.name}'", s.loc)

    def cast_on_vector(self, s: Copy) -> list:
        """Only the vector unit and FixPipe convert dtypes: stage the data through UB."""
        src, dst = s.src.buffer, s.dst.buffer
        out = []
        region = s.src
        if src.scope != "UB":
            raw = self.fresh(f"{src.name}_ub", s.src.extent, src.dtype, "UB", s.loc)
            out += self.copy(Copy(s.src, Region.full(raw), s.loc))
            region = Region.full(raw)
        if dst.scope == "UB":
            return out + [Copy(region, s.dst, s.loc)]
        cast = self.fresh(f"{dst.name}_cast", s.src.extent, dst.dtype, "UB", s.loc)
        out.append(Copy(region, Region.full(cast), s.loc))
        return out + self.copy(replace(s, src=Region.full(cast)))  # keeps an atomic mode

    def per_aiv_l0c_to_ub(self, s: Copy) -> bool:
        """An L0C -> UB copy that reads vid (developer mode, each AIV's own part) which FixPipe's
        dual destination cannot deliver (split_cores.aiv_rows_copy: consecutive row halves):
        it goes through a workspace, as on a chip without the path."""
        from .split_cores import aiv_rows_copy
        if self.vid is None or (s.src.buffer.scope, s.dst.buffer.scope) != ("L0C", "UB"):
            return False
        if not any(isinstance(n, Var) and n.name == self.vid for n in walk(s)):
            return False
        return aiv_rows_copy(s, self.vid) is None

    def direct(self, src: str, dst: str) -> bool:
        if (src, dst) == ("L0C", "UB"):
            return self.chip.direct_l0c_to_ub
        if (src, dst) == ("UB", "L1"):
            return self.chip.direct_ub_to_l1
        return True

    def gemm(self, s: Gemm) -> list:
        if s.a.buffer.dtype in FP8_DTYPES and not self.chip.fp8_cube:
            raise CompileError(f"gemm on {s.a.buffer.dtype} operands: the cube of {self.chip.name} "
                               "has no FP8; widen the tiles to bfloat16 first (T.copy to a "
                               "bfloat16 tile) or compile for a chip with FP8 (ascend950)", s.loc)
        scopes = (s.a.buffer.scope, s.b.buffer.scope, s.c.buffer.scope)
        if scopes == ("L0A", "L0B", "L0C"):
            return [s]
        if scopes != ("L1", "L1", "L0C"):
            raise CompileError(f"gemm operands must be in L1, L1 and L0C (or L0A, L0B, L0C); "
                               f"got {', '.join(scopes)}", s.loc)
        a_ext, b_ext = _two_d(s.a), _two_d(s.b)
        m, k = (a_ext[1], a_ext[0]) if s.transpose_a else a_ext
        n = b_ext[0] if s.transpose_b else b_ext[1]
        dt = s.a.buffer.dtype
        kc = self.k_chunk(m, n, k, dt, s)
        if s.scale_gran and kc < k:
            raise CompileError(f"block-scaled gemm: its {m}x{k} A and {k}x{n} B tiles must fit "
                               f"L0A/L0B whole, twice ({self.chip.capacity_of('L0A') // 2048} KiB "
                               f"each); the scales are not split into K chunks; use a smaller "
                               f"block_K or block_M/block_N", s.loc)
        a_shape = (kc, m) if s.transpose_a else (m, kc)
        b_shape = (n, kc) if s.transpose_b else (kc, n)
        key = (s.a.buffer.name, s.b.buffer.name, a_shape, b_shape)
        if key not in self.l0:
            self.l0[key] = (self.fresh(f"{s.a.buffer.name}_l0a", a_shape, dt, "L0A", s.loc),
                            self.fresh(f"{s.b.buffer.name}_l0b", b_shape, s.b.buffer.dtype, "L0B", s.loc))
        a0, b0 = self.l0[key]
        chunks = -(-k // kc)

        def step(kk, width, clear):
            a_off = (1 if not s.transpose_a else 0)
            b_off = (0 if not s.transpose_b else 1)
            ar = _shift(s.a, a_off, kk, width)
            br = _shift(s.b, b_off, kk, width)
            a_dst = Region(a0, (Const(0), Const(0)), _with(a_shape, a_off, width))
            b_dst = Region(b0, (Const(0), Const(0)), _with(b_shape, b_off, width))
            return [Copy(ar, a_dst, s.loc), Copy(br, b_dst, s.loc),
                    replace(s, a=a_dst, b=b_dst, clear_accum=clear)]

        full, tail = divmod(k, kc)
        out = []
        if full == 1 or (full >= 1 and s.clear_accum):
            out += step(Const(0), kc, s.clear_accum)
            first = 1
        else:
            first = 0
        if full - first == 1:
            out += step(Const(first * kc), kc, False)
        elif full - first > 1:
            kk = Var(self.loop_var())
            start = BinOp("*", BinOp("+", kk, Const(first)), Const(kc)) if first else BinOp("*", kk, Const(kc))
            out.append(For((kk.name,), (Const(full - first),), "serial", tuple(step(start, kc, False)),
                           0, s.loc))
        if tail:
            out += step(Const(full * kc), tail, s.clear_accum and full == 0)
        assert chunks == full + (1 if tail else 0)
        return out

    def loop_var(self) -> str:
        name, n = "kc", 0
        while name in self.names:
            n += 1
            name = f"kc{n}"
        self.names.add(name)
        return name

    def plan_chunks(self, body) -> None:
        """K chunks for the gemms of each outermost loop together: their L0A tiles (and their
        L0B tiles) are all live for the whole loop, so together they must fit twice (the
        pipeline pass double-buffers them). The largest tile is narrowed first, 16 at a time;
        a gemm outside loops, or a loop whose gemms cannot share, keeps its own chunk."""
        for s in body:
            if isinstance(s, For) and s.kind != "parallel":
                self.share_l0([g for g in walk_statements(s.body) if _l1_gemm(g)])
            elif isinstance(s, For) or not body_fields(s):
                continue
            else:
                for f in body_fields(s):
                    self.plan_chunks(getattr(s, f))

    def share_l0(self, gemms) -> None:
        tiles: dict = {}  # one L0 pair per operand pair and shape (as gemm() allocates them)
        for g in gemms:
            a_ext, b_ext = _two_d(g.a), _two_d(g.b)
            m, k = (a_ext[1], a_ext[0]) if g.transpose_a else a_ext
            n = b_ext[0] if g.transpose_b else b_ext[1]
            key = (g.a.buffer.name, g.b.buffer.name, m, n, k)
            tiles.setdefault(key, [m, n, k, dtypes.itemsize(g.a.buffer.dtype), k, []])[5].append(g)
        if len(tiles) < 2:
            return
        cap_a, cap_b = self.chip.capacity_of("L0A") // 2, self.chip.capacity_of("L0B") // 2
        entries = list(tiles.values())
        while True:
            over_a = sum(m * kc * z for m, _, _, z, kc, _ in entries) > cap_a
            over_b = sum(n * kc * z for _, n, _, z, kc, _ in entries) > cap_b
            if not (over_a or over_b):
                break
            narrow = [e for e in entries if e[4] > ALIGN_K]
            if not narrow:
                return  # cannot share: each keeps its own chunk (plan_memory reports overflow)
            dim = 0 if over_a else 1  # the largest tile of the scope that does not fit
            e = max(narrow, key=lambda e: e[dim] * e[4] * e[3])
            e[4] = max(ALIGN_K, (e[4] - 1) // ALIGN_K * ALIGN_K)
        for m, n, k, z, kc, gs in entries:
            for g in gs:
                self.kc_of[id(g)] = kc

    def k_chunk(self, m: int, n: int, k: int, dtype: str, s) -> int:
        """The largest K chunk (multiple of 16, or all of K) whose L0A and L0B tiles fit twice
        (so the pipeline pass can double-buffer them), or the chunk plan_chunks gave it."""
        if id(s) in self.kc_of:
            return self.kc_of[id(s)]
        size = dtypes.itemsize(dtype)
        cap_a, cap_b = self.chip.capacity_of("L0A") // 2, self.chip.capacity_of("L0B") // 2
        if m * k * size <= cap_a and n * k * size <= cap_b:
            return k
        kc = min(cap_a // (m * size), cap_b // (n * size)) // ALIGN_K * ALIGN_K
        if kc <= 0:
            raise CompileError(f"gemm tile {m}x{n} is too large for L0A/L0B on {self.chip.name} "
                               f"({self.chip.capacity_of('L0A') // 1024} KiB each): even a K chunk "
                               f"of {ALIGN_K} does not fit twice; use smaller block_M/block_N", s.loc)
        return kc


def _l1_gemm(s) -> bool:
    return isinstance(s, Gemm) and (s.a.buffer.scope, s.b.buffer.scope) == ("L1", "L1")


def _two_d(r: Region):
    ext = r.extent if len(r.extent) == 2 else tuple(e for e in r.extent if e != 1)
    if len(ext) != 2:
        raise CompileError("gemm operands must be 2-D tiles", None)
    return ext


def _shift(r: Region, dim: int, offset, width: int) -> Region:
    start = list(r.start)
    start[dim] = offset if isinstance(start[dim], Const) and start[dim].value == 0 else (
        start[dim] if isinstance(offset, Const) and offset.value == 0 else BinOp("+", start[dim], offset))
    return Region(r.buffer, tuple(start), _with(r.extent, dim, width))


def _with(shape, dim: int, value: int):
    out = list(shape)
    out[dim] = value
    return tuple(out)
