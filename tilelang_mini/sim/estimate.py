"""The performance model: a data-free estimate of a whole launch (docs/performance_model.md).

`estimate_kernel(kernel_ir, chip)` simulates one representative block of each *block class*
with the timing-only engine (`timing.py`: the simulator's machine without data effects or race
checks, on compiled instruction streams; zero-filled arguments unless given) and extrapolates
to the launch:

* Block classes (`classes.py`): blocks whose cores take the same control path (loop trip
  counts, if outcomes) run the same instructions, so take the same cycles; the blocks are
  partitioned along the control path all at once, data-dependent control flow included.
* The launch: blocks are dealt round-robin to the chip's AIC cores (block b on core
  b % aic_cores, in waves); a core runs its blocks one after another; the launch takes the
  busiest core's total, exactly as `simulate_kernel` counts it, so the estimate equals the full
  simulation (tests/test_estimate.py checks that).
* Busy fractions: the busy cycles of a pipe summed over every block, over (launch cycles x cores
  x units running that pipe): the AIC for MTE1/M/FIX, both AIVs for V/MTE3 (MTE2 and S on each
  core kind that uses them).
* Peak and roofline: FLOPs are the cube's (2*m*n*k per MMAD, tile padding included); the peak is
  the chip's bf16 peak scaled by the cube rate of each MMAD's dtype (fp8 twice, fp32 a quarter);
  arithmetic intensity is FLOPs per compulsory off-chip byte (every kernel argument moved once)
  against the compute roof and the chip's HBM bandwidth (`Costs.gm_tbps`).
"""
from __future__ import annotations

import math
import time
from collections import defaultdict
from dataclasses import dataclass, field
from typing import NamedTuple

import numpy as np

from ..arch.costs import CUBE_RATE
from ..errors import CompileError
from ..ir import dtypes
from ..ir.analysis import GM_SCOPES
from ..ir.nodes import PIPES, Copy, Gemm, Kernel, Store, walk_statements
from .classes import block_classes  # noqa: F401 (re-exported: tests, autotune)
from .memory import memory_traffic
from .streams import _expr_fn, gemm_mnk


class RooflinePoint(NamedTuple):
    level: str              # "HBM" or "L2"
    label: str
    intensity: float        # FLOP per byte at this level
    tflops: float           # achieved (the estimate)
    bandwidth_tbps: float
    roof_tflops: float      # min(peak, intensity x bandwidth)


@dataclass
class Estimate:
    """The estimate of one launch of a kernel on a chip (see the module docstring)."""

    kernel: str
    chip: str
    cycles: int
    time_us: float
    tflops: float
    pipe_busy: dict                 # pipe -> busy fraction over the launch
    bottleneck: str                 # the busiest pipe
    peak_fraction: float            # achieved FLOP/s over the chip's peak for these MMADs
    flops: int = 0
    peak_tflops: float = 0.0        # the cube's peak for this kernel's dtypes
    core_pipe_busy: dict = field(default_factory=dict)   # "C.M" -> busy fraction
    blocks: int = 0
    waves: int = 0
    aic_cores: int = 1
    clock_ghz: float = 1.0
    block_cycles: dict = field(default_factory=dict)     # every block -> cycles
    classes: list = field(default_factory=list)          # [(representative, n blocks, cycles)]
    gm_bytes: int = 0               # compulsory off-chip bytes: every argument once
    traffic_bytes: int = 0          # bytes the kernel's instructions move to/from GM (via L2)
    hbm_bytes: int = 0              # bytes the L2 model sends to/from HBM (>= gm_bytes)
    l2_tbps: float = 0.0            # the L2 roof
    core_cycles: int = 0            # the pipe model's cycles, before the chip-wide roofs
    intensity: float = 0.0          # FLOP per compulsory byte
    bandwidth_tbps: float = 0.0     # the memory roof
    attainable_tflops: float = 0.0  # min(compute roof, intensity x memory roof)
    bound: str = ""                 # "compute" or "memory" (by the roofline)
    memory_floor_us: float = 0.0    # compulsory bytes at the HBM bandwidth: no launch is faster
    events: list = field(default_factory=list)           # SimEvents of the simulated blocks
    simulated: tuple = ()           # the simulated (representative) blocks
    instructions: int = 0           # dynamic instructions of the launch
    wall_s: float = 0.0             # how long the estimate took

    @property
    def time_s(self) -> float:
        return self.time_us * 1e-6

    def block_offsets(self) -> dict:
        """block -> (AIC core, start cycle) of every block of the launch."""
        return _offsets(self.blocks, self.aic_cores, self.block_cycles.get)

    def summary(self) -> str:
        """A few lines: cycles and time, the bottleneck, busy % per pipe, the roofline."""
        lines = [
            f"estimate of {self.kernel} on {self.chip}: {self.cycles} cycles = "
            f"{self.time_us:.1f} us ({self.blocks} blocks over {self.aic_cores} AIC cores, "
            f"{self.waves} wave{'s' if self.waves != 1 else ''}); bottleneck {self.bottleneck}",
            "  busy: " + "  ".join(f"{p} {100 * self.pipe_busy.get(p, 0.0):.0f}%" for p in PIPES),
        ]
        if self.flops:
            lines.append(f"  cube: {self.tflops:.1f} TFLOP/s = {100 * self.peak_fraction:.1f}% of "
                         f"the {self.peak_tflops:.0f} TFLOP/s peak")
        lines.append("  " + self.roofline_text())
        if self.cycles > self.core_cycles:
            lines.append(f"  memory: {self.hbm_bytes / 1e6:.2f} MB at the HBM ({self.bandwidth_tbps:g}"
                         f" TB/s), {self.traffic_bytes / 1e6:.2f} MB through the L2 "
                         f"({self.l2_tbps:g} TB/s) bound the launch; the pipes alone take "
                         f"{self.core_cycles} cycles")
        return "\n".join(lines)

    def roofline_text(self) -> str:
        bw = f"{self.bandwidth_tbps:g} TB/s" if self.bandwidth_tbps else "unknown bandwidth"
        if not self.flops:
            gbs = self.gm_bytes / self.time_s / 1e12 if self.time_s else 0.0
            frac = f" = {100 * gbs / self.bandwidth_tbps:.0f}% of the roof" \
                if self.bandwidth_tbps else ""
            return (f"roofline: no cube work; {self.gm_bytes / 1e6:.2f} MB off-chip at "
                    f"{gbs:.2f} TB/s{frac} ({bw} memory roof)")
        ridge = self.peak_tflops / self.bandwidth_tbps if self.bandwidth_tbps else 0.0
        return (f"roofline: {self.intensity:.1f} FLOP/B (ridge {ridge:.0f} FLOP/B: "
                f"{self.peak_tflops:.0f} TFLOP/s / {bw}) -> {self.bound}-bound, attainable "
                f"{self.attainable_tflops:.0f} TFLOP/s, achieved {self.tflops:.1f}")

    def __str__(self) -> str:
        return self.summary()

    def roofline_points(self) -> list:
        """The kernel on each roof of the hierarchy: its FLOPs per HBM byte (the L2 model's
        misses, at least every argument once) against the HBM roof, and per byte its
        instructions move (through the L2) against the L2 roof. The model's time is at least
        each memory time, so no point is above its roof."""
        out = []
        for level, nbytes, bw in (("HBM", self.hbm_bytes, self.bandwidth_tbps),
                                  ("L2", self.traffic_bytes, self.l2_tbps)):
            if nbytes and bw:
                ai = self.flops / nbytes
                out.append(RooflinePoint(level, f"{self.kernel} per {level} byte", ai, self.tflops,
                                         bw, min(self.peak_tflops, ai * bw)))
        return out

    def to_perfetto(self, path) -> None:
        """Chrome-trace JSON of the simulated blocks at their place in the launch."""
        from ..report.timeline import estimate_to_perfetto
        estimate_to_perfetto(self, path)

    def to_png(self, path, max_blocks: int = 2) -> None:
        """Gantt chart of the pipes of the simulated blocks (needs matplotlib: the plot extra)."""
        from ..report.timeline import gantt_png
        gantt_png(self, path, max_blocks=max_blocks)

    def roofline_png(self, path) -> None:
        """The roofline plot of this kernel on its chip (needs matplotlib: the plot extra)."""
        from ..report.timeline import roofline_png
        roofline_png(self, path)


# ------------------------------------------------------------------------------ block classes


def _offsets(nblocks: int, ncores: int, cycles_of) -> dict:
    out, t = {}, [0] * max(1, ncores)
    for b in range(nblocks):
        c = b % len(t)
        out[b] = (c, t[c])
        t[c] += cycles_of(b) or 0
    return out


# -------------------------------------------------------------------------------- block stats


def _stmt_stats(st):
    """(cube flops, peak-time weight, (GM buffer, is write, bytes) or None) of one statement."""
    if isinstance(st, Gemm):
        m, n, k = gemm_mnk(st)
        f = 2 * m * n * k
        return f, f / CUBE_RATE.get(st.a.buffer.dtype, 1.0), None
    if isinstance(st, Copy):
        src, dst = st.src.buffer.scope, st.dst.buffer.scope
        if (src in GM_SCOPES) != (dst in GM_SCOPES):
            r = st.src if src in GM_SCOPES else st.dst
            nb = dtypes.itemsize(r.buffer.dtype)
            for e in r.extent:
                nb *= e
            return 0, 0.0, (r.buffer.name, dst in GM_SCOPES, nb)
    return 0, 0.0, None


def _stream_stats(streams):
    """(cube flops, peak-time weight, {GM buffer: (bytes read, bytes written)}) of one block's
    expanded instruction streams (timing.TimingModel.streams)."""
    flops, ideal = 0, 0.0
    moved = defaultdict(lambda: [0, 0])
    count: dict = defaultdict(int)
    for stream in streams:
        for op in stream:
            count[id(op[4])] += 1
    stmts = {id(op[4]): op[4] for stream in streams for op in stream}
    for key, n in count.items():
        f, i, mv = _stmt_stats(stmts[key])
        flops += f * n
        ideal += i * n
        if mv is not None:
            moved[mv[0]][mv[1]] += mv[2] * n
    return flops, ideal, {k: tuple(v) for k, v in moved.items()}


# ----------------------------------------------------------------------------------- estimate


def estimate_kernel(kernel: Kernel, chip, args: list | None = None) -> Estimate:
    """Estimate a launch of the lowered kernel `kernel` on `chip` (an arch.Chip). `args`: the
    kernel's arrays, read only where control flow reads data (a grouped GEMM's group ids);
    zero-filled when None. They are not modified."""
    from .report import SimEvent, instr_label
    from .simulator import zero_args
    from .timing import TimingModel
    if not kernel.is_npu or len(kernel.grid) != 1:
        raise CompileError("estimate() needs a lowered kernel (is_npu=True, grid (n,))",
                           kernel.loc)
    t0 = time.perf_counter()
    n = kernel.grid[0]
    from .. import semantics
    if args is None:
        args = zero_args(kernel)
    else:  # the scalar unit's own stores run: on copies of what they write
        stored = {x.buffer.name for x in walk_statements(kernel.body) if isinstance(x, Store)}
        args = [np.array(a, copy=True) if p.name in stored else a
                for p, a in zip(kernel.params, list(args))]
    bufs = semantics.check_args(kernel, args)
    model = TimingModel(kernel, chip, bufs)
    classes = block_classes(kernel, model)
    cls_of, cyc, busy, events = {}, {}, {}, []
    flops = ideal = traffic = 0
    ninstr = 0
    moved = {}
    for rep, members in classes.items():
        streams = model.streams(rep)
        r = model.time_streams(rep, streams, events=True)
        cyc[rep] = r.cycles
        busy[rep] = {f"{c}.{p}": v for (c, p), v in r.busy.items()}
        ninstr += r.instructions * len(members)
        for core, pipe, s0, s1, st in r.events:
            events.append(SimEvent(f"b{rep}.{core}", pipe, s0, s1, instr_label(st), str(st.loc)))
        f, i, moved[rep] = _stream_stats(streams)
        flops += f * len(members)
        ideal += i * len(members)
        traffic += sum(rd + wr for rd, wr in moved[rep].values()) * len(members)
        for b in members:
            cls_of[b] = rep
    block_cycles = {b: cyc[cls_of[b]] for b in range(n)}
    ncores = max(1, chip.aic_cores)
    per_core = [0] * ncores
    for b in range(n):
        per_core[b % ncores] += block_cycles[b]
    core_cycles = max(per_core) if n else 0

    # the chip-wide roofs: GM traffic through the L2, misses and compulsory bytes at the HBM
    costs = chip.costs
    bw = getattr(costs, "gm_tbps", 0.0)
    l2_bw = getattr(costs, "l2_tbps", 0.0)
    gm_bytes = sum(p.numel * dtypes.itemsize(p.dtype) for p in kernel.params)
    mem = memory_traffic(kernel, bufs, cls_of, moved, ncores,
                         getattr(costs, "l2_bytes", 0), _expr_fn, semantics.Env)
    hz = chip.clock_ghz * 1e9
    hbm_bytes = max(mem.hbm_bytes, gm_bytes)
    hbm_cycles = math.ceil(hbm_bytes / (bw * 1e12) * hz) if bw else 0
    l2_cycles = math.ceil(mem.l2_bytes / (l2_bw * 1e12) * hz) if l2_bw else 0
    cycles = max(core_cycles, hbm_cycles, l2_cycles) if n else 0
    seconds = cycles / hz

    core_busy = defaultdict(int)
    for rep, members in classes.items():
        for key, c in busy[rep].items():
            core_busy[key] += c * len(members)
    units = defaultdict(set)
    for key, c in core_busy.items():
        if c:
            core, pipe = key.split(".")
            units[pipe].add(core)
    denom = cycles * ncores
    pipe_busy = {p: (sum(c for k, c in core_busy.items() if k.endswith("." + p))
                     / (denom * max(1, len(units[p]))) if denom else 0.0) for p in PIPES}
    core_frac = {k: (c / denom if denom else 0.0) for k, c in sorted(core_busy.items())}
    bottleneck = max(PIPES, key=lambda p: pipe_busy[p])
    if cycles > core_cycles:
        bottleneck = "HBM" if hbm_cycles >= l2_cycles else "L2"

    tflops = flops / seconds / 1e12 if seconds else 0.0
    peak_s = ideal / (chip.peak_bf16_tflops * 1e12)   # the MMADs at the cube's peak
    peak_tflops = flops / peak_s / 1e12 if peak_s else chip.peak_bf16_tflops
    peak_fraction = peak_s / seconds if seconds else 0.0
    intensity = flops / gm_bytes if gm_bytes else 0.0
    attainable = min(peak_tflops, intensity * bw) if bw else peak_tflops
    bound = "memory" if bw and intensity * bw < peak_tflops else "compute"
    return Estimate(
        kernel=kernel.name, chip=chip.name, cycles=cycles, time_us=seconds * 1e6,
        tflops=tflops, pipe_busy=pipe_busy, bottleneck=bottleneck, peak_fraction=peak_fraction,
        flops=flops, peak_tflops=peak_tflops, core_pipe_busy=core_frac, blocks=n,
        waves=-(-n // ncores), aic_cores=ncores, clock_ghz=chip.clock_ghz,
        block_cycles=block_cycles,
        classes=[(rep, len(m), cyc[rep]) for rep, m in classes.items()],
        gm_bytes=gm_bytes, traffic_bytes=traffic, hbm_bytes=hbm_bytes, l2_tbps=l2_bw,
        core_cycles=core_cycles, intensity=intensity, bandwidth_tbps=bw,
        attainable_tflops=attainable, bound=bound,
        memory_floor_us=gm_bytes / (bw * 1e12) * 1e6 if bw else 0.0, events=events, simulated=tuple(classes),
        instructions=ninstr, wall_s=time.perf_counter() - t0)
