"""widen_storage (llvm target): which on-chip tiles a CPU stores as float32, marked on their Alloc.

A CPU has no float16/float8 arithmetic worth using, so an on-chip tile of those dtypes is stored
as float32: it only ever holds values of its dtype, so the wider storage is exact, and tile ops
and the GEMM micro-kernel read it without converting. bfloat16 tiles stay bfloat16 when the host
multiplies bfloat16 pairs natively (`Options.native_bf16`, x86 avx512_bf16: the pairs feed the
dot product), else they are widened too. GM buffers (parameters, workspace) keep their dtype.
The allocation gets `widened=True`; the code generator stores what the IR says:

    A_s = alloc_L1((64, 32), "float16")      ->    A_s = alloc_L1((64, 32), "float16", widened=True)
    B_s = alloc_L1((32, 64), "bfloat16")           B_s = alloc_L1((32, 64), "bfloat16")   (native_bf16)
    S_u = alloc_UB((64,), "float32")               S_u = alloc_UB((64,), "float32")
"""
from __future__ import annotations

from dataclasses import replace

from ..ir.analysis import can_widen
from ..ir.nodes import Alloc, Kernel, transform_statements


def widen_storage(kernel: Kernel, native_bf16: bool = False) -> Kernel:
    """Allocations of on-chip float16/float8 tiles (and bfloat16 ones unless `native_bf16`) get
    `widened=True`, all others `widened=False` (module docstring)."""

    def rewrite(node):
        if not isinstance(node, Alloc):
            return node
        widened = can_widen(node.buffer) and not (native_bf16 and node.buffer.dtype == "bfloat16")
        return node if node.widened == widened else replace(node, widened=widened)

    return replace(kernel, body=tuple(transform_statements(s, rewrite) for s in kernel.body))
