"""Call-time checks of a compiled kernel's arguments, before any backend code runs.

`check_inputs` is what a JITKernel call checks (the inputs, converted to C-contiguous arrays);
`check_arrays` is what each backend's `run` checks again (every parameter, as given)."""
from __future__ import annotations

import numpy as np

from ..errors import ArgumentError
from ..ir import dtypes
from ..ir.nodes import Buffer, Kernel


def check_inputs(kernel: Kernel, inputs: list[Buffer], args) -> list[np.ndarray]:
    """The arguments as C-contiguous arrays, or an ArgumentError naming the parameter."""
    _check_count(kernel, inputs, args, "input(s)")
    return [np.ascontiguousarray(_check_array(kernel, b, a)) for b, a in zip(inputs, args)]


def check_arrays(kernel: Kernel, args, contiguous: bool = False) -> list[np.ndarray]:
    """All of a kernel's parameters, in order, as a backend receives them."""
    _check_count(kernel, kernel.params, args, "argument(s)")
    out = [_check_array(kernel, b, a) for b, a in zip(kernel.params, args)]
    for b, a in zip(kernel.params, out):
        if contiguous and not a.flags.c_contiguous:
            raise ArgumentError(f"argument '{b.name}' of kernel '{kernel.name}' must be "
                                "C-contiguous", kernel.loc)
    return out


def _check_count(kernel: Kernel, params, args, what: str) -> None:
    if len(args) != len(params):
        names = ", ".join(b.name for b in params)
        raise ArgumentError(f"kernel '{kernel.name}' takes {len(params)} {what} ({names}), "
                            f"got {len(args)}", kernel.loc)


def _check_array(kernel: Kernel, b: Buffer, a) -> np.ndarray:
    if not isinstance(a, np.ndarray):
        raise ArgumentError(f"argument '{b.name}' of kernel '{kernel.name}' must be a NumPy "
                            f"array, got {type(a).__name__}", kernel.loc)
    if dtypes.canonical(a.dtype) != b.dtype:
        raise ArgumentError(f"argument '{b.name}' of kernel '{kernel.name}' has dtype "
                            f"{a.dtype}; expected {b.dtype}", kernel.loc)
    if tuple(a.shape) != b.shape:
        raise ArgumentError(f"argument '{b.name}' of kernel '{kernel.name}' has shape "
                            f"{tuple(a.shape)}; expected {b.shape}", kernel.loc)
    return a


def allocate_outputs(outputs: list[Buffer]) -> list[np.ndarray]:
    return [np.zeros(b.shape, dtypes.to_numpy(b.dtype)) for b in outputs]
