"""The 2:4 structured-sparsity metadata contract TileLang's gemm_sp compressor and T.gemm_sp
share (natural row-major metadata: a 4-bit field per group, frontend/gemm_sp.py): host-side
arithmetic, no CUDA in it.

    get_e_factor(T.float16, T.int16) == 16   # one int16 indexes 4 groups of 4 halves
"""
from __future__ import annotations


# dtype -> (kept values, group size): 32-bit values keep 1 of 2, narrower ones 2 of 4
GROUP_CONFIG = {"float32": (1, 2), "float16": (2, 4), "bfloat16": (2, 4), "int8": (2, 4),
                "uint8": (2, 4), "float8_e4m3fn": (2, 4), "float8_e5m2": (2, 4)}

_BITS_PER_GROUP = 4


def get_e_factor(a_dtype, meta_dtype) -> int:
    """How many a_dtype elements one meta_dtype element indexes."""
    from ...language import dtype
    _, group = GROUP_CONFIG[str(dtype(a_dtype))]
    return dtype(meta_dtype).bits // _BITS_PER_GROUP * group


def get_e_replicate_factor(a_dtype) -> int:
    """How many consecutive GPU threads share one metadata value (TileLang's mma_sp layout)."""
    from ...language import dtype
    return 1 if dtype(a_dtype).bits <= 8 else 2
