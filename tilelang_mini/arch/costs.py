"""Per-pipe cost of each instruction class: cycles = latency + work / throughput.

The figures are the model's, set from public data: the cube does a 16x16x16 fp16/bf16 MAC block
per cycle (fp8 twice that, fp32 a quarter); MTE/FIX throughputs are per-core shares of the chip's
memory bandwidth and on-chip path widths; the vector unit processes 256 bytes per cycle.
"""
from __future__ import annotations

import math
from dataclasses import dataclass, replace


@dataclass(frozen=True)
class PipeCost:
    latency: int           # cycles before the first byte/result
    bytes_per_cycle: float  # sustained throughput


@dataclass(frozen=True)
class Costs:
    mte2: PipeCost          # GM -> L1 / UB
    mte1: PipeCost          # L1 -> L0A / L0B
    fix: PipeCost           # L0C -> GM / L1 / UB (with cast)
    mte3: PipeCost          # UB -> GM / L1
    vector: PipeCost        # UB -> UB vector work, bytes of the widest operand
    mmad_latency: int       # cycles before an MMAD's first block
    cube_macs_per_cycle: int  # fp16/bf16 multiply-accumulates per cycle (16*16*16)
    flag_cycles: int        # set_flag / wait_flag / pipe_barrier issue cost
    cross_flag_latency: int  # cycles for a cross-core flag to reach the other core
    scalar_cycles: int      # one scalar instruction
    gm_tbps: float = 0.0    # chip-wide off-chip (HBM) bandwidth, TB/s: the roofline's memory roof
    l2_bytes: int = 0       # L2 capacity shared by all cores (0: no L2 modelled)
    l2_tbps: float = 0.0    # chip-wide L2 bandwidth, TB/s: every GM transfer crosses it


CUBE_RATE = {"float16": 1.0, "bfloat16": 1.0, "float8_e4m3fn": 2.0, "float8_e5m2": 2.0,
             "float32": 0.25, "int32": 0.25,
             # packed FP4 on the MX MMAD: twice FP8 (Huawei's 950PR figures, MXFP4 2 PFLOPS
             # against FP8/MXFP8 1 PFLOPS; docs/machine_model.md)
             "float4_e2m1fn_x2": 4.0}


def mmad_cycles(costs: Costs, m: int, n: int, k: int, dtype: str) -> int:
    """Cycles of one MMAD of an (m x k) by (k x n) tile: 16x16x16 fractal blocks per cycle."""
    blocks = math.ceil(m / 16) * math.ceil(n / 16) * math.ceil(k / 16)
    per_cycle = costs.cube_macs_per_cycle / 4096 * CUBE_RATE.get(dtype, 1.0)
    return costs.mmad_latency + math.ceil(blocks / per_cycle)


def transfer_cycles(pipe: PipeCost, nbytes: int) -> int:
    return pipe.latency + math.ceil(nbytes / pipe.bytes_per_cycle)


COSTS_910B = Costs(
    mte2=PipeCost(latency=100, bytes_per_cycle=128.0),
    mte1=PipeCost(latency=16, bytes_per_cycle=256.0),
    fix=PipeCost(latency=32, bytes_per_cycle=128.0),
    mte3=PipeCost(latency=64, bytes_per_cycle=64.0),
    vector=PipeCost(latency=8, bytes_per_cycle=256.0),
    mmad_latency=8, cube_macs_per_cycle=4096, flag_cycles=1, cross_flag_latency=64,
    scalar_cycles=1,
    gm_tbps=1.6,  # HBM2e of the Atlas 800T A2 / 910B: 1.6 TB/s (public spec sheet)
    # L2: "A2/A3 about 201 MB" (tilelang-ascend performance notes) = 192 MiB. Bandwidth: the
    # 1024-bit NoC port per core of the Da Vinci SoC (Hot Chips 2019) = 128 B/cycle, over 24
    # cores at 1.8 GHz = 5.5 TB/s, the sum of the cores' MTE2 rates in this preset.
    l2_bytes=192 * 1024 * 1024, l2_tbps=5.5,
)

# ascend950: calibrated against DeepGEMM-Ascend's published GEMMs on the 950DT
# (docs/performance_model.md). The model charges a transfer's latency serially, once per
# instruction, so `latency` is the part of the DMA latency the engine does not hide behind the
# previous transfer. The published fp8 GEMM (1117.6 us, 99.6% of the cube's peak) shows MTE2
# keeping up with a 256-cycle 128x256x64 fp8 MMAD while loading its 24 KiB of operands; with a
# 100-cycle MTE2 latency the model made that GEMM MTE2-bound (1318 us, +18%); 64 cycles (the
# MTE3 figure) leaves MTE2 at 224 of the 264 cycles per step. bf16 is cube-bound either way.
COSTS_950 = replace(
    COSTS_910B,  # what the 950 changes:
    mte2=PipeCost(latency=64, bytes_per_cycle=256.0),
    mte1=PipeCost(latency=16, bytes_per_cycle=512.0),
    fix=PipeCost(latency=32, bytes_per_cycle=256.0),
    mte3=PipeCost(latency=64, bytes_per_cycle=128.0),
    cross_flag_latency=48,
    gm_tbps=4.0,  # 950DT: HiZQ 2.0, 144 GB at about 4 TB/s (Huawei Connect 2025 roadmap)
    # L2: no published 950 figures. Capacity: the A2/A3's 192 MiB (kept). Bandwidth: 2.5x the
    # HBM (the 910B ratio above is 3.4x; the lower figure is the cautious one): 10 TB/s.
    l2_tbps=10.0,
)
