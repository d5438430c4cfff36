"""Timelines of simulated blocks: Chrome-trace JSON (Perfetto, chrome://tracing), a PNG Gantt
chart of the pipes and a roofline PNG (the PNGs need matplotlib: the `plot` extra).

Trace layout: one process per core of the chip that ran a simulated block ("AIC 3" for the cube
core of AIC 3, "AIC 3 / AIV 0" and "AIC 3 / AIV 1" for its vector cores) and, in each, one
thread (track) per pipe, named after the pipe (MTE2, MTE1, M, FIX, V, MTE3, S). Block b runs on
AIC b % aic_cores after the earlier blocks of that core, so its events sit at their place in the
launch. Each instruction is a complete event named after its IR text and kernel line; its args
carry the block, the cycles and the source location. Timestamps are microseconds at the chip's
clock.
"""
from __future__ import annotations

import json
from pathlib import Path

from ..ir.nodes import PIPES

CORE_ORDER = ("C", "V0", "V1")
PIPE_COLORS = {"MTE2": "#4e79a7", "MTE1": "#76b7b2", "M": "#e15759", "FIX": "#f28e2b",
               "V": "#59a14f", "MTE3": "#b07aa1", "S": "#9c755f"}


def _split(core: str, default_block: int):
    """'b12.V0' -> (12, 'V0'); 'C' -> (default_block, 'C')."""
    if core.startswith("b") and "." in core:
        b, name = core[1:].split(".", 1)
        return int(b), name
    return default_block, core


def _short_loc(loc: str) -> str:
    path, _, rest = loc.partition(":")
    return f"{Path(path).name}:{rest}" if rest else loc


def trace_events(events, offsets: dict, clock_ghz: float, default_block: int = 0,
                 aic_cores: int = 1) -> dict:
    """Chrome-trace dict of SimEvents; `offsets`: block -> (AIC core, start cycle)."""
    us = 1.0 / (clock_ghz * 1e3)   # microseconds per cycle
    out, seen = [], {}
    for ev in events:
        block, core = _split(ev.core, default_block)
        aic, base = offsets.get(block, (block % max(1, aic_cores), 0))
        pid = aic * len(CORE_ORDER) + CORE_ORDER.index(core) + 1
        tid = PIPES.index(ev.pipe) + 1
        seen.setdefault(pid, (aic, core))
        loc = _short_loc(ev.loc)
        out.append({"name": f"{ev.label}  [{loc}]", "cat": ev.pipe, "ph": "X", "pid": pid,
                    "tid": tid, "ts": (base + ev.start) * us, "dur": (ev.end - ev.start) * us,
                    "args": {"block": block, "core": core, "pipe": ev.pipe,
                             "start_cycle": base + ev.start, "cycles": ev.end - ev.start,
                             "ir": ev.label, "loc": ev.loc}})
    meta = []
    for pid, (aic, core) in sorted(seen.items()):
        name = f"AIC {aic}" if core == "C" else f"AIC {aic} / AIV {core[1]}"
        meta.append({"name": "process_name", "ph": "M", "pid": pid, "tid": 0,
                     "args": {"name": name}})
        meta.append({"name": "process_sort_index", "ph": "M", "pid": pid, "tid": 0,
                     "args": {"sort_index": pid}})
        for i, pipe in enumerate(PIPES):
            meta.append({"name": "thread_name", "ph": "M", "pid": pid, "tid": i + 1,
                         "args": {"name": pipe}})
            meta.append({"name": "thread_sort_index", "ph": "M", "pid": pid, "tid": i + 1,
                         "args": {"sort_index": i + 1}})
    return {"traceEvents": meta + out, "displayTimeUnit": "ns"}


def _write(path, trace: dict) -> None:
    Path(path).write_text(json.dumps(trace, separators=(",", ":")))


def report_to_perfetto(report, path) -> None:
    """SimReport -> Chrome-trace JSON at `path`."""
    from ..sim.estimate import _offsets
    blocks = report.blocks or tuple(report.block_cycles)
    n = (max(blocks) + 1) if blocks else 0
    mean = (sum(report.block_cycles.values()) // len(report.block_cycles)
            if report.block_cycles else 0)
    offsets = _offsets(n, report.aic_cores, lambda b: report.block_cycles.get(b, mean))
    trace = trace_events(report.events, offsets, report.clock_ghz,
                         default_block=blocks[0] if blocks else 0, aic_cores=report.aic_cores)
    trace["otherData"] = {"cycles": report.cycles, "simulated_blocks": list(blocks),
                          "clock_ghz": report.clock_ghz}
    _write(path, trace)


def estimate_to_perfetto(est, path) -> None:
    """Estimate -> Chrome-trace JSON at `path` (the simulated representative blocks)."""
    trace = trace_events(est.events, est.block_offsets(), est.clock_ghz,
                         aic_cores=est.aic_cores)
    trace["otherData"] = {
        "kernel": est.kernel, "chip": est.chip, "cycles": est.cycles, "time_us": est.time_us,
        "bottleneck": est.bottleneck, "pipe_busy": est.pipe_busy,
        "classes": [{"block": r, "blocks": n, "cycles": c} for r, n, c in est.classes]}
    _write(path, trace)


# ------------------------------------------------------------------------------------- plots


def _pyplot():
    try:
        import matplotlib
        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError:
        raise ImportError("PNG output needs matplotlib: pip install 'tilelang-mini[plot]'") from None
    return plt


def gantt_png(est, path, max_blocks: int = 2) -> None:
    """Gantt chart of the pipes of (up to `max_blocks` of) the simulated blocks."""
    plt = _pyplot()
    from collections import defaultdict
    bars = defaultdict(list)
    shown = []
    for ev in est.events:
        block, core = _split(ev.core, 0)
        if block not in shown:
            if len(shown) >= max_blocks:
                continue
            shown.append(block)
        if ev.end > ev.start:
            bars[(block, core, ev.pipe)].append((ev.start, ev.end - ev.start))
    rows = sorted(bars, key=lambda k: (shown.index(k[0]), CORE_ORDER.index(k[1]),
                                       PIPES.index(k[2])))
    fig, ax = plt.subplots(figsize=(12, 0.45 * len(rows) + 1.5))
    for i, key in enumerate(rows):
        ax.broken_barh(bars[key], (i - 0.4, 0.8), facecolors=PIPE_COLORS[key[2]],
                       edgecolor="none")
    ax.set_yticks(range(len(rows)))
    ax.set_yticklabels([f"block {b} {c}.{p}" for b, c, p in rows])
    ax.invert_yaxis()
    ax.set_xlabel("cycles (from the block's start)")
    busy = ", ".join(f"{p} {100 * est.pipe_busy[p]:.0f}%" for p in PIPES if est.pipe_busy[p])
    ax.set_title(f"{est.kernel} on {est.chip}: {est.time_us:.1f} us, bottleneck "
                 f"{est.bottleneck} ({busy})", fontsize=10)
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)


def roofline_png(est, path) -> None:
    """Attainable TFLOP/s against arithmetic intensity, with the kernel's point."""
    plt = _pyplot()
    import numpy as np
    peak, bw = est.peak_tflops, est.bandwidth_tbps or 1.0
    ridge = peak / bw
    points = est.roofline_points()
    xs = [max(pt.intensity, 1e-3) for pt in points] or [ridge]
    lo, hi = min(xs + [ridge]) / 20, max(xs + [ridge]) * 20
    x = np.geomspace(lo, hi, 200)
    fig, ax = plt.subplots(figsize=(7, 5))
    ax.axhline(peak, color="gray", ls=":", lw=0.8)
    styles = {"HBM": ("o", "#e15759", "-"), "L2": ("s", "#4e79a7", "--")}
    for pt in points:
        marker, color, ls = styles[pt.level]
        ax.loglog(x, np.minimum(peak, x * pt.bandwidth_tbps), color=color, ls=ls, lw=1,
                  label=f"{pt.level} roof: {pt.bandwidth_tbps:g} TB/s")
        ax.plot([max(pt.intensity, 1e-3)], [max(pt.tflops, 1e-6)], marker, color=color,
                label=f"{pt.label}: {pt.tflops:.1f} TFLOP/s at {pt.intensity:.1f} FLOP/B")
    if not est.flops:
        ax.text(0.03, 0.95, f"{est.kernel}: no cube work; " + est.roofline_text(),
                transform=ax.transAxes, fontsize=7, va="top", wrap=True)
    ax.set_xlabel("arithmetic intensity (FLOP per off-chip byte)")
    ax.set_ylabel("TFLOP/s")
    ax.set_title(f"roofline on {est.chip}: {peak:.0f} TFLOP/s, {bw:g} TB/s "
                 f"(ridge {ridge:.0f} FLOP/B)", fontsize=10)
    ax.legend(fontsize=8, loc="lower right")
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)
