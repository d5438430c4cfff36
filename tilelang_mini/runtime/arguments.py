"""Call-time checks of a compiled kernel's arguments, before any backend code runs."""
from __future__ import annotations

import numpy as np

from ..errors import ArgumentError
from ..ir import dtypes
from ..ir.nodes import Buffer, Kernel


def check_inputs(kernel: Kernel, inputs: list[Buffer], args) -> list[np.ndarray]:
    """The arguments as C-contiguous arrays, or an ArgumentError naming the parameter."""
    names = ", ".join(b.name for b in inputs)
    if len(args) != len(inputs):
        raise ArgumentError(f"kernel '{kernel.name}' takes {len(inputs)} input(s) ({names}), "
                            f"got {len(args)}", kernel.loc)
    out = []
    for b, a in zip(inputs, args):
        if not isinstance(a, np.ndarray):
            raise ArgumentError(f"argument '{b.name}' of kernel '{kernel.name}' must be a NumPy "
                                f"array, got {type(a).__name__}", kernel.loc)
        got = dtypes.canonical(a.dtype)
        if got != b.dtype:
            raise ArgumentError(f"argument '{b.name}' of kernel '{kernel.name}' has dtype "
                                f"{a.dtype}; expected {b.dtype}", kernel.loc)
        if tuple(a.shape) != b.shape:
            raise ArgumentError(f"argument '{b.name}' of kernel '{kernel.name}' has shape "
                                f"{tuple(a.shape)}; expected {b.shape}", kernel.loc)
        out.append(np.ascontiguousarray(a))
    return out


def allocate_outputs(outputs: list[Buffer]) -> list[np.ndarray]:
    return [np.zeros(b.shape, dtypes.to_numpy(b.dtype)) for b in outputs]
