"""The numpy target: `lower` prepares the kernel's closures once, `run` runs its grid in program
order, or, when cores hand data over through cross-core flags in an order that program order may
not respect (expert kernels), as coroutines (sim.run_ordered). Block-independent kernels run as
groups of blocks (semantics/batched.py) when that gives the same values, in either run;
`last_run` says which run ran (for tests and benchmarks); `lower(kernel, {"batched": False})`
always runs block by block (the specification the batched run is tested against). `dump`/`load`
make an artifact a disk-cache entry (the lowered IR and the order verdict) and back (the
closures and the batched run are built again when the kernel first runs: a cache hit runs no
pass and builds no closure)."""
from __future__ import annotations

import threading
from dataclasses import dataclass, field
from typing import Callable

import numpy as np

from tilelang_mini.ir.nodes import Kernel
from tilelang_mini.runtime.cache import dump_ir, load_ir
from tilelang_mini.semantics.batched import lower_batched
from tilelang_mini.semantics.ops import Env
from tilelang_mini.semantics.order import program_order_is_valid
from tilelang_mini.semantics.run import kernel_traits, lower_kernel, run_grid
from tilelang_mini.sim.ordered import lower_ordered_batched


@dataclass(frozen=True)
class NumpyArtifact:
    kernel: Kernel
    body: Callable[[Env], None]
    has_scopes: bool
    cross_core: bool = False
    batched: object = None          # batched.BatchedKernel, or None
    why_plain: str | None = None    # why the kernel always runs block by block
    last_run: list = field(default_factory=lambda: [None], compare=False)
    from_cache: bool = False


CACHE_VERSION = "tlm-numpy-1"


class NumpyBackend:
    name = "numpy"

    def lower(self, kernel: Kernel, options: dict | None = None) -> NumpyArtifact:
        body = lower_kernel(kernel)
        has_scopes, cross = kernel_traits(kernel)
        # insert_sync's flags always follow program order; a kernel whose order is proven
        # runs its cores one after the other like any other (the same values, far faster)
        ordered = cross and not program_order_is_valid(kernel)
        batched, why = lower_ordered_batched(kernel) if ordered else lower_batched(kernel,
                                                                                  has_scopes)
        if not (options or {}).get("batched", True):
            batched, why = None, "batched=False"
        return NumpyArtifact(kernel, body, has_scopes, ordered, batched, why)

    def run(self, artifact: NumpyArtifact, args: list[np.ndarray]) -> None:
        if artifact.cross_core:
            # Program order may not respect cross-core flags (expert kernels): run the core
            # programs as coroutines that switch at an unsatisfied cross-core wait.
            from tilelang_mini.sim.ordered import run_ordered
            run_ordered(artifact.kernel, args, artifact.batched)
            artifact.last_run[0] = "ordered"
            return
        artifact.last_run[0] = run_grid(artifact.kernel, artifact.body, artifact.has_scopes,
                                        args, artifact.batched)

    def cache_tag(self, options: dict | None = None) -> str:
        return f"{CACHE_VERSION} numpy {np.__version__}"

    def dump(self, artifact: NumpyArtifact) -> tuple[dict, list[bytes]]:
        return ({"has_scopes": artifact.has_scopes, "cross_core": artifact.cross_core,
                 "batched": artifact.batched is not None, "why_plain": artifact.why_plain},
                [dump_ir(artifact.kernel)])

    def load(self, meta: dict, blobs: list[bytes], kernel: Kernel,
             key: str = "") -> NumpyArtifact | None:
        """The artifact of an entry (None when it does not hold a lowered kernel of this
        kernel's parameters: then it is compiled again)."""
        lowered = load_ir(blobs[0]) if len(blobs) == 1 else None
        if not isinstance(lowered, Kernel) or lowered.params != kernel.params:
            return None
        has_scopes, ordered = bool(meta.get("has_scopes")), bool(meta.get("cross_core"))
        if ordered:
            batched, why = _BatchedOnFirstRun(lambda: lower_ordered_batched(lowered)[0]), None
        elif not meta.get("batched", True):
            batched, why = None, str(meta.get("why_plain") or "batched=False")
        else:
            batched, why = _BatchedOnFirstRun(lambda: lower_batched(lowered, has_scopes)[0]), None
        return NumpyArtifact(lowered, _BodyOnFirstRun(lowered), has_scopes, ordered, batched, why,
                             from_cache=True)


class _OnFirstUse:
    """A value built by `build()` the first time it is asked for (`get`), once, under a lock."""

    def __init__(self, build):
        self._build = build
        self._value = None
        self._lock = threading.Lock()

    def get(self):
        with self._lock:
            if self._build is not None:
                self._value = self._build()
                self._build = None
        return self._value


class _BodyOnFirstRun(_OnFirstUse):
    """The block body of a kernel loaded from the disk cache (`lower_kernel`), built when a
    block first runs plain: a kernel whose blocks all run batched never builds it."""

    def __init__(self, kernel: Kernel):
        super().__init__(lambda: lower_kernel(kernel))

    def __call__(self, env: Env) -> None:
        self.get()(env)


class _BatchedOnFirstRun(_OnFirstUse):
    """The batched run of a kernel loaded from the disk cache, built (`lower_batched`, or
    `lower_ordered_batched` for the ordered run) when it first runs, so that a cache hit does
    not pay for it at compile time; otherwise the object built (`run`, `bailed`, ... are
    its)."""

    def run(self, bufs, plain) -> str:
        built = self.get()
        return "plain" if built is None else built.run(bufs, plain)

    def __getattr__(self, name):
        return getattr(self.get(), name)


BACKEND = NumpyBackend()
