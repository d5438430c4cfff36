"""torch CPU tensors at the kernel boundary: one place that converts them (torch stays optional).

`to_numpy(t)` is a NumPy view of a CPU tensor's memory (no copy: a kernel that writes it writes
the tensor; non-contiguous views keep their strides, the argument checks copy them where a
backend needs contiguity); `to_torch(a)` is a tensor sharing an array's memory. The dtypes NumPy
has no type for (bf16, the FP8s, e8m0) cross through their bits and ml_dtypes. `real_torch()`
is the torch module when a real one is installed (host helpers such as the profiler then hand
torch tensors to the caller's reference code, as TileLang does), else None.
"""
from __future__ import annotations

import os
import sys
import types

import numpy as np

from ..ir import dtypes


def is_torch(x) -> bool:
    """Whether `x` is a torch tensor (or a subclass such as nn.Parameter)."""
    return type(x).__module__.startswith("torch") and hasattr(x, "detach")


# torch dtype name -> (the integer torch dtype of its bits, our dtype name): the dtypes NumPy
# has no type for, viewed through ml_dtypes (float4_e2m1fn_x2: two e2m1 codes a byte, as uint8)
_TORCH_BITS = {"bfloat16": ("int16", "bfloat16"), "float8_e4m3fn": ("uint8", "float8_e4m3fn"),
               "float8_e5m2": ("uint8", "float8_e5m2"),
               "float8_e8m0fnu": ("uint8", "float8_e8m0fnu"),
               "float4_e2m1fn_x2": ("uint8", "uint8")}


def to_numpy(x, name: str = "argument", error=TypeError):
    """A NumPy view of `x` (NumPy array, or torch CPU tensor sharing its memory: detached when
    it requires grad; bf16/fp8/e8m0 viewed through ml_dtypes, torch's float4_e2m1fn_x2 as the
    packed uint8 bytes). A tensor off the CPU or of a dtype NumPy cannot view is `error`."""
    if isinstance(x, np.ndarray):
        return x
    if is_torch(x):
        import torch
        if x.device.type != "cpu":
            raise error(f"{name}: only CPU torch tensors are supported, got device {x.device}")
        x = x.detach()
        if x.is_conj() or x.is_neg():  # lazy conjugate / negative views: materialise them
            x = x.resolve_conj().resolve_neg()
        tname = str(x.dtype).removeprefix("torch.")
        if tname in _TORCH_BITS:
            raw, npname = _TORCH_BITS[tname]
            return x.view(getattr(torch, raw)).numpy().view(dtypes.to_numpy(npname))
        try:
            return x.numpy()
        except (TypeError, RuntimeError) as err:
            raise error(f"{name}: torch dtype {x.dtype} is not supported ({err})") from None
    if np.isscalar(x) or isinstance(x, (list, tuple)):
        return np.asarray(x)
    raise error(f"{name}: expected a NumPy array or a torch CPU tensor, got {type(x).__name__}")


def to_torch(a: np.ndarray):
    """A torch tensor sharing `a`'s memory (bf16/fp8/e8m0 through their bits; a float4_e2m1fn
    array, one code a byte, stays uint8)."""
    import torch
    if not a.flags.writeable:   # torch.from_numpy wants writable memory
        a = a.copy()
    if a.ndim and a.strides and any(st < 0 for st in a.strides):  # torch has no negative strides
        a = a.copy()
    name = dtypes.canonical(a.dtype)
    for tname, (raw, npname) in _TORCH_BITS.items():
        if name == npname and npname != "uint8" and hasattr(torch, tname):
            return torch.from_numpy(a.view(np.dtype(raw))).view(getattr(torch, tname))
    if name in ("float4_e2m1fn", "float8_e8m0fnu"):
        return torch.from_numpy(a.view(np.uint8))
    return torch.from_numpy(a)


def as_float64(x) -> np.ndarray:
    """`x` (array, tensor of any dtype, number) as a float64 NumPy array, for comparisons."""
    return np.asarray(to_numpy(x) if is_torch(x) else x).astype(np.float64)


def written_with_torch(glob: dict) -> bool:
    """Whether a module (its globals) uses a real torch: it holds torch, one of torch's modules
    or a name imported from torch."""
    if not glob or real_torch() is None:
        return False
    for v in glob.values():
        name = v.__name__ if isinstance(v, types.ModuleType) else getattr(v, "__module__", None)
        if isinstance(name, str) and (name == "torch" or name.startswith("torch.")):
            return True
    return False


_PACKAGE = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def returns_torch(args) -> bool:
    """Whether a kernel call returns torch tensors: some argument is a torch tensor, or no
    argument is an array (a kernel of scalars only, e.g. a random generator) and the code
    calling it, the first frame outside tilelang_mini, is written with torch (TileLang returns
    torch tensors; NumPy callers keep NumPy)."""
    if any(is_torch(a) for a in args):
        return True
    if any(isinstance(a, np.ndarray) or hasattr(a, "__array__") for a in args) or \
            "torch" not in sys.modules:
        return False
    frame = sys._getframe(1)
    while frame is not None and os.path.abspath(frame.f_code.co_filename).startswith(_PACKAGE):
        frame = frame.f_back
    return frame is not None and written_with_torch(frame.f_globals)


def real_torch():
    """The torch module when a real torch is installed (not a stand-in on sys.path), or None."""
    try:
        import torch
    except ImportError:
        return None
    return torch if getattr(torch, "_C", None) is not None and hasattr(torch, "from_numpy") \
        else None
