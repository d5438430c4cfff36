"""Call-time checks of a compiled kernel's arguments, before any backend code runs.

`prepare_args` is what a JITKernel call checks, for the parameters the caller passes:

* a parameter the kernel only reads accepts a NumPy array of its dtype and shape in any layout
  (non-contiguous, negative strides, misaligned or non-native byte order: copied to a C-contiguous
  native array, never misread), a NumPy scalar, a 0-d array, a Python number or (nested) list
  (converted when the values keep their meaning in the parameter's dtype: bools and integers to
  an integer dtype, any real number to a float dtype), an object with `__dlpack__` or
  `__array__` (a torch tensor on the CPU, for instance); an array whose shape groups the same
  row-major elements differently ((.., G, D) for (.., G * D)) is read with the parameter's shape;
* a parameter the kernel writes (an output passed in place) must be a writeable NumPy array of
  its dtype and shape that shares no memory with another argument, nor between its own
  elements (a broadcast view); one that is not C-contiguous
  or not aligned runs on a contiguous copy that is written back after the call.

`check_arrays` is what each backend's `run` checks again (every parameter, as given: NumPy arrays
of the right dtype and shape, C-contiguous where the backend needs it).
Every problem is an ArgumentError naming the kernel, the parameter and what was expected.
"""
from __future__ import annotations

import numpy as np

from ..errors import ArgumentError, KernelRuntimeError
from ..ir import dtypes
from ..ir.nodes import Buffer, Kernel
from .torch_interop import is_torch, to_numpy


def written_params(kernel: Kernel) -> frozenset[str]:
    """Names of the parameters some statement of `kernel` writes."""
    from ..ir.analysis import written_names
    names = {p.name for p in kernel.params}
    out: set = set()
    for s in kernel.body:
        out |= written_names(s)
    return frozenset(out & names)


def prepare_args(kernel: Kernel, params: list[Buffer], args, written=frozenset(),
                 views=None):
    """(arrays to run with, write-backs [(caller's array, array run with)]) for `args` passed
    for `params`, or an ArgumentError. `views`: parameter name -> the group of names that are
    views of one tensor (frontend/views.py), which may share memory."""
    _check_count(kernel, params, args, "input(s)")
    arrays, back, given = [], [], []
    for b, a in zip(params, args):
        if b.name in written:
            arr, tmp = _output(kernel, b, a)
            if tmp is not arr:
                back.append((arr, tmp))
            arrays.append(tmp)
            given.append(arr)
        else:
            src = _as_array(kernel, b, a)
            arrays.append(_input(kernel, b, src))
            given.append(src)
    for i, (b, a) in enumerate(zip(params, given)):
        if b.name not in written:
            continue
        for j, (b2, a2) in enumerate(zip(params, given)):
            if j != i and a2 is not None and np.may_share_memory(a, a2) and \
                    b2.name not in (views or {}).get(b.name, ()):
                raise ArgumentError(f"argument '{b.name}' of kernel '{kernel.name}' shares "
                                    f"memory with argument '{b2.name}': an array the kernel "
                                    f"writes must not overlap its other arguments", kernel.loc)
    return arrays, back


def write_back(back) -> None:
    for arr, tmp in back:
        np.copyto(arr, tmp)


def check_inputs(kernel: Kernel, inputs: list[Buffer], args) -> list[np.ndarray]:
    """The arguments as C-contiguous arrays (read-only parameters), or an ArgumentError."""
    return prepare_args(kernel, inputs, args)[0]


def check_arrays(kernel: Kernel, args, contiguous: bool = False) -> list[np.ndarray]:
    """All of a kernel's parameters, in order, as a backend receives them."""
    _check_count(kernel, kernel.params, args, "argument(s)")
    out = []
    for b, a in zip(kernel.params, args):
        if not isinstance(a, np.ndarray):
            raise _err(kernel, b, f"must be a NumPy array, got {type(a).__name__}")
        _check_dtype_shape(kernel, b, a)
        if contiguous and not a.flags.c_contiguous:
            raise _err(kernel, b, "must be C-contiguous")
        out.append(a)
    return out


def allocate_outputs(outputs: list[Buffer], loc=None) -> list[np.ndarray]:
    """Zeroed arrays for the kernel's outputs; one this machine cannot hold is a
    KernelRuntimeError at `loc` (the kernel), not a MemoryError from NumPy."""
    out = []
    for b in outputs:
        try:
            out.append(np.zeros(b.shape, dtypes.to_numpy(b.dtype)))
        except (MemoryError, ValueError) as err:
            raise KernelRuntimeError(f"cannot allocate output '{b.name}' {tuple(b.shape)} "
                                     f"{b.dtype}: {err}", loc) from None
    return out


# ---------------------------------------------------------------------------------- checks


def _err(kernel: Kernel, b: Buffer, what: str) -> ArgumentError:
    return ArgumentError(f"argument '{b.name}' of kernel '{kernel.name}' {what}", kernel.loc)


def bind_keywords(kernel: Kernel, params, args, kwargs) -> tuple:
    """`args` followed by the parameters passed by name in `kwargs`, in parameter order; an
    unknown name, a parameter given twice or a gap before a named one is an ArgumentError."""
    if not kwargs:
        return tuple(args)
    names = [b.name for b in params]
    for k in kwargs:
        if k not in names:
            raise ArgumentError(f"kernel '{kernel.name}' has no input named '{k}'; its inputs "
                                f"are {', '.join(names) or 'none'}", kernel.loc)
        if names.index(k) < len(args):
            raise ArgumentError(f"kernel '{kernel.name}' got input '{k}' both by position "
                                f"and by name", kernel.loc)
    rest = names[len(args):]
    missing = [n for n in rest if n not in kwargs]
    if missing:
        raise ArgumentError(f"kernel '{kernel.name}' is missing input(s) "
                            f"{', '.join(missing)}", kernel.loc)
    return tuple(args) + tuple(kwargs[n] for n in rest)


def _check_count(kernel: Kernel, params, args, what: str) -> None:
    if len(args) != len(params):
        names = ", ".join(b.name for b in params)
        raise ArgumentError(f"kernel '{kernel.name}' takes {len(params)} {what} ({names}), "
                            f"got {len(args)}", kernel.loc)


def _check_dtype_shape(kernel: Kernel, b: Buffer, a: np.ndarray) -> None:
    packed = b.dtype in dtypes.PACKED_K and a.dtype == dtypes.to_numpy(b.dtype)  # FP4 x2 bytes
    if b.dtype == "int4x2" and (not packed or tuple(a.shape) != tuple(b.shape)):
        logical = tuple(b.shape[:-1]) + (b.shape[-1] * 2,)
        raise _err(kernel, b, f"is a T.int4 tensor of shape {logical}, passed as its packed "
                              f"bytes: an int8 array of shape {tuple(b.shape)} (two values a "
                              f"byte along the last dim, the even index in the low nibble); "
                              f"got {a.dtype} of shape {tuple(a.shape)}")
    if dtypes.canonical(a.dtype) != b.dtype and not packed:
        raise _err(kernel, b, f"has dtype {a.dtype}; expected {b.dtype}")
    if tuple(a.shape) != tuple(b.shape):
        raise _err(kernel, b, f"has shape {tuple(a.shape)}; expected {tuple(b.shape)}")


def _as_array(kernel: Kernel, b: Buffer, a) -> np.ndarray:
    """`a` as a NumPy array (no copy where it already is one), or an ArgumentError."""
    if isinstance(a, np.ndarray):
        return a
    if isinstance(a, np.generic):
        return np.asarray(a)
    if is_torch(a):  # a view of its memory, bf16/FP8 included (runtime/torch_interop.py)
        return _torch_view(kernel, b, a)
    if hasattr(a, "__dlpack__"):
        try:
            return np.from_dlpack(a)
        except Exception:  # noqa: BLE001 - e.g. a device tensor: try __array__ below
            if not hasattr(a, "__array__"):
                raise _err(kernel, b, f"({type(a).__name__}) cannot be read through DLPack "
                                      f"on the CPU") from None
    if hasattr(a, "__array__"):
        try:
            arr = np.asarray(a)
        except Exception as err:  # noqa: BLE001 - a broken __array__
            raise _err(kernel, b, f"({type(a).__name__}) failed to convert to a NumPy array: "
                                  f"{type(err).__name__}: {err}") from None
        if not isinstance(arr, np.ndarray):
            raise _err(kernel, b, f"({type(a).__name__}).__array__ did not return an array")
        return arr
    if isinstance(a, (bool, int, float, list, tuple)):
        return _from_python(kernel, b, a)
    raise _err(kernel, b, f"must be a NumPy array (or a number, a list, an object with "
                          f"__array__ or __dlpack__), got {type(a).__name__}")


def _torch_view(kernel: Kernel, b: Buffer, a) -> np.ndarray:
    try:
        return to_numpy(a, "tensor")
    except TypeError as err:
        raise _err(kernel, b, f"({type(a).__name__}) cannot be read on the CPU: "
                              f"{str(err).removeprefix('tensor: ')}") from None


def _from_python(kernel: Kernel, b: Buffer, a) -> np.ndarray:
    try:
        arr = np.array(a)
    except (ValueError, TypeError) as err:
        raise _err(kernel, b, f"is a {type(a).__name__} that is not a regular array of numbers "
                              f"({err})") from None
    kind = arr.dtype.kind
    ok = kind in "bi" if not dtypes.is_float(b.dtype) and b.dtype != "bool" else kind in "bif"
    if b.dtype == "bool":
        ok = kind == "b"
    if not ok:
        raise _err(kernel, b, f"is a {type(a).__name__} of {arr.dtype} values; expected "
                              f"{b.dtype} values")
    if kind in "i" and b.dtype == "int32":
        info = np.iinfo(np.int32)
        if arr.size and (arr.min() < info.min or arr.max() > info.max):
            raise _err(kernel, b, "holds integers outside the int32 range")
    return dtypes.cast_array(arr, b.dtype)


def _native(arr: np.ndarray) -> np.ndarray:
    return arr if arr.dtype.isnative else arr.astype(arr.dtype.newbyteorder("="))


def _input(kernel: Kernel, b: Buffer, a) -> np.ndarray:
    arr = _native(_as_array(kernel, b, a))
    if arr.ndim == 0 and b.shape == (1,):  # a number for a scalar parameter (`n: T.int32`)
        arr = arr.reshape(1)
    arr = _regrouped(arr, b)
    _check_dtype_shape(kernel, b, arr)
    if not (arr.flags.c_contiguous and arr.flags.aligned):
        arr = np.array(arr, order="C", copy=True)
    return arr


def _output(kernel: Kernel, b: Buffer, a) -> tuple[np.ndarray, np.ndarray]:
    """(the caller's array, the array the kernel writes): the same unless a copy is needed."""
    if is_torch(a):
        a = _torch_view(kernel, b, a)
    if not isinstance(a, np.ndarray):
        if hasattr(a, "__dlpack__") and not hasattr(a, "__array__") or _is_dlpack_tensor(a):
            try:
                a = np.from_dlpack(a)
            except Exception:  # noqa: BLE001
                raise _err(kernel, b, f"({type(a).__name__}) is written by the kernel and "
                                      f"cannot be shared through DLPack on the CPU") from None
        else:
            raise _err(kernel, b, f"is written by the kernel, so it must be a writeable NumPy "
                                  f"array (got {type(a).__name__}); or let the kernel allocate "
                                  f"it with out_idx")
    if not a.dtype.isnative:
        raise _err(kernel, b, f"is written by the kernel and has non-native byte order "
                              f"({a.dtype}); expected native {b.dtype}")
    a = _regrouped(a, b, view_only=True)
    _check_dtype_shape(kernel, b, a)
    if not a.flags.writeable:
        raise _err(kernel, b, "is read-only, but the kernel writes it (pass a writeable "
                              "array, or let the kernel allocate it with out_idx)")
    if a.flags.c_contiguous and a.flags.aligned:
        return a, a
    if _overlaps_itself(a):
        raise _err(kernel, b, f"is written by the kernel, but its elements overlap in memory "
                              f"(strides {a.strides} for shape {a.shape}, e.g. a broadcast "
                              f"view): the kernel's writes would land on one another")
    return a, np.array(a, order="C", copy=True)


def _regrouped(a: np.ndarray, b: Buffer, view_only: bool = False) -> np.ndarray:
    """`a` read with the parameter's shape when the two shapes group the same row-major
    elements differently: consecutive dims of one multiply to a dim of the other, e.g.
    (B, S, G, D) for (B, S, G * D) or (M, N, 1) for (M, N), as tilelang-ascend's host code
    passes them (the kernel reads the memory). (K, M) for (M, K) is no regrouping and stays an
    error. `view_only`: only when the result shares `a`'s memory (an output is written)."""
    want = tuple(b.shape)
    if tuple(a.shape) == want or a.size != int(np.prod(want, dtype=np.int64)) or \
            b.dtype in dtypes.PACKED_K or not (_groups(a.shape, want) or _groups(want, a.shape)):
        return a
    out = a.reshape(want)
    return out if not view_only or np.shares_memory(out, a) else a


def _groups(fine, coarse) -> bool:
    """Whether the dims of `fine` (size-1 dims aside) split into consecutive runs whose products
    are the dims of `coarse` (size-1 dims aside), in order."""
    fine = [int(d) for d in fine if d != 1]
    coarse = [int(d) for d in coarse if d != 1]
    i = 0
    for d in coarse:
        prod = 1
        while i < len(fine) and prod < d:
            prod *= fine[i]
            i += 1
        if prod != d:
            return False
    return i == len(fine)


def _overlaps_itself(a: np.ndarray) -> bool:
    """Whether two elements of `a` share bytes (a zero or too small stride). Quick when the
    dimensions sorted by stride nest; otherwise the element offsets are compared."""
    dims = sorted((abs(st), n) for st, n in zip(a.strides, a.shape) if n > 1)
    if a.size == 0:
        return False
    end = a.itemsize
    for st, n in dims:
        if st < end:
            break
        end = st * (n - 1) + end
    else:
        return False
    offsets = np.zeros((), np.int64)
    for st, n in zip(a.strides, a.shape):
        offsets = (offsets[..., None] + np.arange(n, dtype=np.int64) * st).ravel()
    offsets.sort()
    return bool(offsets.size > 1 and np.min(np.diff(offsets)) < a.itemsize)


def _is_dlpack_tensor(a) -> bool:
    """A tensor type that shares memory through DLPack (np.asarray of it might copy)."""
    return hasattr(a, "__dlpack__") and type(a).__module__.split(".")[0] in ("torch", "jax",
                                                                            "cupy")
