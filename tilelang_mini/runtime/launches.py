"""LaunchSequence: a prim_func with several `with T.Kernel` blocks (or GM buffers that are not
parameters), compiled as one kernel per block. A call launches them in order over the same
arrays (what one launch writes to GM the next reads), each on its own grid; outputs (`out_idx`)
are allocated once (zeros) and shared, and so are the workspace_idx tensors (not returned).
The hidden parameters that follow the caller's (frontend/views.py) are a zeroed array per call
for a `T.alloc_global` and a reshaped view (no copy) of the caller's C-contiguous array for
`T.Tensor(shape, dtype, buf.data)` / `T.reshape`.

    @T.prim_func
    def main(X, Partial, Y):
        with T.Kernel(n_split) as s:   ...   # writes Partial
        with T.Kernel(1) as b:        ...   # reads Partial, writes Y
"""
from __future__ import annotations

import numpy as np

from ..errors import ArgumentError
from ..ir import dtypes
from .arguments import allocate_outputs
from .torch_interop import is_torch, returns_torch
from .errors import user_facing


class Estimates(list):
    """Per-launch estimates; `time_us`/`cycles` add up, `tflops` is not defined for the sum."""

    @property
    def time_us(self) -> float:
        return sum(e.time_us for e in self)

    @property
    def cycles(self) -> int:
        return sum(e.cycles for e in self)

    tflops = None


class LaunchSequence:
    """The compiled launches (`.kernels`, JITKernels taking every parameter in place)."""

    def __init__(self, prim_func, kernels: list, out_idx: tuple[int, ...], hidden=(),
                 workspace_idx: tuple[int, ...] = ()):
        self.prim_func = prim_func
        self.kernels = kernels
        self.hidden = tuple(hidden)
        first = kernels[0].frontend
        n = len(first.params) - len(self.hidden)
        self.n_params = n
        self.out_idx = tuple(sorted(i % n for i in out_idx))
        # tilelang-ascend's workspace_idx: zeroed per call, neither passed nor returned
        self.workspace_idx = tuple(sorted(i % n for i in workspace_idx or ()
                                          if i % n not in self.out_idx))
        self.frontend = first
        self.inputs = [b for i, b in enumerate(first.params[:n])
                       if i not in self.out_idx and i not in self.workspace_idx]
        self.outputs = [first.params[i] for i in self.out_idx]
        groups: dict = {}  # a tensor and its views may share memory
        for h in self.hidden:
            if h.base is not None:
                groups.setdefault(h.base.name, {h.base.name}).add(h.buffer.name)
        views = {n: g for g in groups.values() for n in g}
        for k in kernels:
            k.views = views

    @property
    def target(self) -> str:
        return self.kernels[0].target

    @property
    def chip(self) -> str:
        return self.kernels[0].chip

    @property
    def ir(self) -> tuple:
        """The lowered IR of each launch."""
        return tuple(k.ir for k in self.kernels)

    def _full(self, args) -> tuple[list, list]:
        if len(args) != len(self.inputs):
            raise ArgumentError(f"kernel '{self.frontend.name}' takes {len(self.inputs)} "
                                f"input(s), got {len(args)}", self.frontend.loc)
        outputs = allocate_outputs(self.outputs, self.frontend.loc)
        work = iter(allocate_outputs([self.frontend.params[i] for i in self.workspace_idx],
                                     self.frontend.loc))
        full, ins, outs = [], iter(args), iter(outputs)
        for i in range(self.n_params):
            full.append(next(outs) if i in self.out_idx else
                        next(work) if i in self.workspace_idx else next(ins))
        names = [b.name for b in self.frontend.params]
        for h in self.hidden:
            b = h.buffer
            if h.base is None:
                full.append(np.zeros(b.shape, dtypes.to_numpy(b.dtype)))
                continue
            arr = full[names.index(h.base.name)]
            if not isinstance(arr, np.ndarray) or not arr.flags.c_contiguous \
                    or arr.shape != h.base.shape:
                raise ArgumentError(f"argument '{h.base.name}' of kernel "
                                    f"'{self.frontend.name}' is viewed as '{b.name}' "
                                    f"{list(b.shape)}: pass a C-contiguous array of shape "
                                    f"{list(h.base.shape)}", self.frontend.loc)
            full.append(arr.view(dtypes.to_numpy(b.dtype)).reshape(b.shape))
        return full, outputs

    @staticmethod
    def _result(outputs):
        return outputs[0] if len(outputs) == 1 else tuple(outputs) if outputs else None

    @user_facing
    def __call__(self, *args):
        like = returns_torch(args) or None  # torch tensors in (or torch code calling): out
        if like is not None:
            from .eager import from_numpy, to_numpy
            args = tuple(to_numpy(a) if is_torch(a) else a for a in args)
        full, outputs = self._full(args)
        for k in self.kernels:
            k(*full)
        if like is not None:
            outputs = [from_numpy(o, like) for o in outputs]
        return self._result(outputs)

    @user_facing
    def simulate(self, *args, blocks=None, chip: str | None = None):
        """Each launch on the pipe-level simulator, in order: `(outputs, [report per launch])`."""
        full, outputs = self._full(args)
        reports = [k.simulate(*full, blocks=blocks, chip=chip)[1] for k in self.kernels]
        return self._result(outputs), reports

    @user_facing
    def estimate(self, chip: str | None = None, args=None):
        """The estimate of each launch, in order: a list whose `time_us` and `cycles` are the
        launches' sums (they run one after the other)."""
        return Estimates(k.estimate(chip=chip, args=args) for k in self.kernels)

    def get_ir(self, stage: str = "frontend") -> str:
        return "\n".join(k.get_ir(stage) for k in self.kernels)

    def get_kernel_source(self) -> str:
        return "\n".join(k.get_kernel_source() for k in self.kernels)

    def get_profiler(self, *args, **kwargs):
        from ..profiler import Profiler
        return Profiler(self)

    def __repr__(self) -> str:
        return (f"<LaunchSequence {self.frontend.name}: {len(self.kernels)} launches "
                f"target={self.target} chip={self.chip}>")
