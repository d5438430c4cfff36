"""The estimate's engine (sim/timing.py), block classes (sim/classes.py) and footprints
(sim/memory.py) against the simulator and against their per-block forms."""

import sys
from pathlib import Path

import numpy as np
import pytest

import tilelang_mini
from tilelang_mini import semantics
from tilelang_mini.arch import get_chip
from tilelang_mini.ir import dtypes
from tilelang_mini.sim.classes import _Partition, block_classes
from tilelang_mini.sim.estimate import estimate_kernel
from tilelang_mini.sim.memory import _Footprints
from tilelang_mini.sim.simulator import simulate_kernel, zero_args
from tilelang_mini.sim.streams import _expr_fn
from tilelang_mini.sim.timing import TimingModel

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "examples"))
sys.path.insert(0, str(ROOT / "tests"))
from test_estimate import _example_factories, gemm_kernel, ragged_gemm  # noqa: E402


def _random_args(ir, seed=0):
    rng = np.random.default_rng(seed)
    return [rng.standard_normal(p.shape).astype(dtypes.to_numpy(p.dtype)) for p in ir.params]


def _kernels():
    out = [("ragged", ragged_gemm(), "ascend910b")]
    for chip in ("ascend910b", "ascend950"):
        out.append(("gemm", gemm_kernel(300, 520, 200, chip=chip, block_M=64, block_N=128,
                                        block_K=32).ir, chip))
        for name, factory, shape in _example_factories():
            if name == "gemm":   # the GEMM above, with other tiles; its example shape is slow
                continue
            k = tilelang_mini.compile(factory.factory(*shape), out_idx=factory.out_idx, chip=chip)
            out.append((name, k.ir, chip))
    return out


KERNELS = _kernels()


@pytest.mark.parametrize("name,ir,chip_name", KERNELS,
                         ids=[f"{n}-{c}" for n, _, c in KERNELS])
def test_timing_engine_equals_the_simulator(name, ir, chip_name):
    """Every block: the same cycles, busy cycles per pipe and instruction count as the
    simulator with data and race checks."""
    chip = get_chip(chip_name)
    full = simulate_kernel(ir, _random_args(ir), chip)
    model = TimingModel(ir, chip, semantics.check_args(ir, zero_args(ir)))
    busy, ninstr = {}, 0
    for b in range(ir.grid[0]):
        t = model.time_block(b, events=True)
        assert t.cycles == full.block_cycles[b], (name, b)
        ninstr += t.instructions
        for (core, pipe), v in t.busy.items():
            busy[f"{core}.{pipe}"] = busy.get(f"{core}.{pipe}", 0) + v
        assert t.events and max(e[3] for e in t.events) == t.cycles
    assert busy == {k: v for k, v in full.core_pipe_busy.items() if v}
    assert ninstr == full.instructions


@pytest.mark.parametrize("name,ir,chip_name", KERNELS,
                         ids=[f"{n}-{c}" for n, _, c in KERNELS])
def test_vector_footprints_equal_per_block_footprints(name, ir, chip_name):
    fp = _Footprints(ir, semantics.check_args(ir, zero_args(ir)), _expr_fn, semantics.Env)
    n = ir.grid[0]
    assert fp._all_vector(n) == [fp.boxes(b) for b in range(n)]


def _grouped(M=256, N=256, K=128, G=2, grouping="masked"):
    from tilelang_mini.kernels.deep_gemm._tiles import gemm_kernel as tile_gemm
    prim = tile_gemm(M, N, K, False, False, "bfloat16", "bfloat16", None, None, False,
                     128, 128, 64, G, grouping)
    return tilelang_mini.compile(prim, chip="ascend950")


def _signature_classes(ir, model):
    first, classes = {}, {}
    for b in range(ir.grid[0]):
        rep = first.setdefault(model.control_signature(b), b)
        classes.setdefault(rep, []).append(b)
    return classes


@pytest.mark.parametrize("grouping", ["masked", "contiguous"])
def test_grouped_gemm_classes_from_its_data(grouping):
    k = _grouped(grouping=grouping)
    ir = k.ir
    args = _random_args(ir)
    G, M = 2, 256
    if grouping == "masked":
        args[-1] = np.array([200, 40], np.int32)        # rows per group: blocks differ
    else:
        args[-1] = np.repeat(np.array([1, -1], np.int32), M // 2)  # the second half unused
    chip = get_chip("ascend950")
    model = TimingModel(ir, chip, semantics.check_args(ir, args))
    classes = block_classes(ir, model)
    vectorised = _Partition(ir, model.bufs)
    assert not vectorised.scalar_feedback
    assert vectorised.classes(ir.grid[0]) == classes == _signature_classes(ir, model)
    assert len(classes) > 1
    est = estimate_kernel(ir, chip, args)
    full = simulate_kernel(ir, [a.copy() for a in args], chip)
    assert est.block_cycles == full.block_cycles
    assert est.core_cycles == full.cycles
    assert est.instructions == full.instructions
    zero = k.estimate()                                  # zero data: one path for every block
    assert zero.block_cycles != est.block_cycles


@pytest.mark.parametrize("name,ir,chip_name", KERNELS,
                         ids=[f"{n}-{c}" for n, _, c in KERNELS])
def test_data_free_simulate_equals_the_simulators_machine(name, ir, chip_name, monkeypatch):
    """simulate(data=False) takes its blocks from the engine (and a block with the streams of
    one timed before from that block): the same report, events and busy order included, as
    the simulator's own machine block by block."""
    from tilelang_mini.sim import simulator
    chip = get_chip(chip_name)
    engine, used = simulator._timed_block, []
    monkeypatch.setattr(simulator, "_timed_block",
                        lambda m, b, seen: used.append(b) or engine(m, b, seen))
    fast = simulate_kernel(ir, None, chip, data=False)
    assert used == list(range(ir.grid[0]))
    monkeypatch.setattr(simulator, "_timed_block", lambda m, b, seen: None)
    slow = simulate_kernel(ir, None, chip, data=False)
    assert (fast.cycles, fast.block_cycles, fast.instructions) == (
        slow.cycles, slow.block_cycles, slow.instructions)
    assert list(fast.core_pipe_busy.items()) == list(slow.core_pipe_busy.items())
    assert list(fast.pipe_busy.items()) == list(slow.pipe_busy.items())
    assert fast.events == slow.events
