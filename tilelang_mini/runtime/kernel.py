"""JITKernel: a compiled kernel, called with NumPy arrays; `compile`, `compile_ir` and `jit`."""
from __future__ import annotations

import contextlib
import functools
import inspect
import sys
from pathlib import Path

from ..errors import CompileError
from ..gc_pause import collector_paused
from ..ir.nodes import Kernel
from . import config
from .arguments import (allocate_outputs, bind_keywords, prepare_args, write_back,
                        written_params)
from ..ir.printer import print_ir
from ..transform.options import Options
from . import cache
from .backends import get_backend
from .torch_interop import is_torch, returns_torch
from .errors import guarded, user_facing

# The pass pipeline (every pass, the IR parser's grammar) loads at the first compile, not when
# the package is imported (`import tilelang_mini` stays about as cheap as `import numpy`).


def __getattr__(name):
    if name in ("Compilation", "STAGES", "run_pipeline"):
        from ..transform import pipeline
        return getattr(pipeline, name)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


# Blocks `simulate` runs without being told which (about a second per thousand small blocks).
SIMULATE_MAX_BLOCKS = 4096


class JITKernel:
    """A kernel compiled for one target and chip.

    Calling it with the input arrays returns the outputs (a tuple when there are several)."""

    def __init__(self, prim_func, frontend: Kernel, out_idx: tuple[int, ...], options: Options,
                 compilation: Compilation | None = None, artifact=None, workspace_idx=(),
                 cache_key: str | None = None, trace=None):
        self._prim_func = prim_func
        self._trace = trace  # () -> the PrimFunc, for a kernel loaded before it was traced
        self.frontend = frontend
        self.cache_key = cache_key  # the disk cache's key of the compiled code, if cached
        self.options = options
        self._compilation = compilation
        self._written = None
        n = len(frontend.params)
        self.out_idx = tuple(sorted(i % n for i in out_idx))
        # tilelang-ascend's workspace_idx: scratch GM tensors the runtime allocates per call
        # (zeros), neither passed nor returned
        self.workspace_idx = tuple(sorted(i % n for i in workspace_idx if i % n not in
                                          self.out_idx))
        self._hand_offs = tuple(workspace_idx)  # what _prepared pairs (out_idx not taken out)
        self.inputs = [b for i, b in enumerate(frontend.params)
                       if i not in self.out_idx and i not in self.workspace_idx]
        self.outputs = [frontend.params[i] for i in self.out_idx]
        self.backend = get_backend(options.target)
        if artifact is None:
            final = self.compilation.final  # the target's pass list's output
            artifact = guarded(f"the {options.target} code generator", final.loc,
                               self.backend.lower, final, {"chip": options.chip})
        self.artifact = artifact

    @property
    def prim_func(self):
        """The T.prim_func compiled (traced again when the kernel came from the disk cache
        before its factory was traced)."""
        if self._prim_func is None and self._trace is not None:
            self._prim_func = self._trace()
        return self._prim_func

    @property
    def compilation(self) -> Compilation:
        """The IR after every stage (run again when the kernel came from the disk cache)."""
        if self._compilation is None:
            self._compilation = _run_passes(
                _prepared(self.frontend, self._hand_offs, self.options.chip), self.options)
        return self._compilation

    @property
    def ir(self) -> Kernel:
        """The lowered IR (the NPU lowering's output, which simulate and estimate model; the
        llvm target's own passes then rewrite it: `compilation.final` is what its backend ran)."""
        return self.compilation.lowered

    @property
    def written(self) -> frozenset:
        """Names of the parameters the kernel writes (outputs passed in place are checked)."""
        if self._written is None:
            self._written = written_params(self.frontend)
        return self._written

    @property
    def from_cache(self) -> bool:
        return bool(getattr(self.artifact, "from_cache", False))

    @property
    def target(self) -> str:
        return self.options.target

    @property
    def chip(self) -> str:
        return self.options.chip

    @user_facing
    def __call__(self, *args, **kwargs):
        args = bind_keywords(self.frontend, self.inputs, args, kwargs)
        like = returns_torch(args) or None  # torch tensors in (or torch code calling): out
        if like is not None:
            from .eager import from_numpy, to_numpy
            args = tuple(to_numpy(a) if is_torch(a) else a for a in args)
        inputs, back = prepare_args(self.frontend, self.inputs, args, self.written,
                                    getattr(self, "views", None))
        outputs = allocate_outputs(self.outputs, self.frontend.loc)
        guarded(f"the {self.target} backend's run", self.frontend.loc,
                self.backend.run, self.artifact, self._full_args(inputs, outputs))
        write_back(back)
        if like is not None:
            outputs = [from_numpy(o, like) for o in outputs]
        return outputs[0] if len(outputs) == 1 else tuple(outputs)

    @user_facing
    def simulate(self, *args, blocks=None, chip: str | None = None, **kwargs):
        """Run on the pipe-level simulator: `(outputs, report)`. Raises RaceError, DeadlockError
        or SyncError when the lowered code is not correctly synchronised. `blocks` limits the
        simulation to some block ids (the others count at the simulated blocks' mean, and
        their outputs are not computed). Without `blocks`, a launch of more than
        SIMULATE_MAX_BLOCKS blocks is a CompileError (the simulator runs every block one after
        another: pass the blocks to simulate, or use `estimate`)."""
        from ..arch import get_chip
        from ..sim.simulator import simulate_kernel
        n = self.ir.grid[0]
        blocks = _simulated_blocks(blocks, n, self.ir.loc)
        if blocks is None and n > SIMULATE_MAX_BLOCKS:
            raise CompileError(
                f"simulate runs every block of the launch one after another, and this launch "
                f"has {n} blocks (more than {SIMULATE_MAX_BLOCKS}); pass blocks= (the ids to "
                f"simulate, e.g. range({n}) for all of them, however long it takes) or use "
                f"estimate()", self.ir.loc)
        args = bind_keywords(self.frontend, self.inputs, args, kwargs)
        inputs, back = prepare_args(self.frontend, self.inputs, args, self.written,
                                    getattr(self, "views", None))
        outputs = allocate_outputs(self.outputs, self.frontend.loc)
        report = guarded("the simulator", self.frontend.loc, simulate_kernel, self.ir,
                         self._full_args(inputs, outputs), get_chip(chip or self.chip),
                         blocks=blocks)
        write_back(back)
        return (outputs[0] if len(outputs) == 1 else tuple(outputs)), report

    @user_facing
    def estimate(self, chip: str | None = None, args=None):
        """The performance model's estimate of a full launch on `chip` (default: the kernel's):
        an `Estimate` with time_us, cycles, tflops, pipe_busy, bottleneck, peak_fraction and
        the roofline. Needs no input data (docs/performance_model.md); `args` (every parameter,
        in order) are read where control flow reads data, e.g. a grouped GEMM's group ids."""
        from ..arch import get_chip
        from ..sim.estimate import estimate_kernel
        return guarded("the estimate", self.frontend.loc, estimate_kernel, self.ir,
                       get_chip(chip or self.chip), None if args is None else list(args))

    def _full_args(self, inputs, outputs) -> list:
        full, ins, outs = [], iter(inputs), iter(outputs)
        work = iter(allocate_outputs([self.frontend.params[i] for i in self.workspace_idx],
                                     self.frontend.loc))
        for i in range(len(self.frontend.params)):
            full.append(next(outs) if i in self.out_idx else
                        next(work) if i in self.workspace_idx else next(ins))
        return full

    def get_tuner_result(self) -> dict:
        """TileLang's `kernel.get_tuner_result()` after `@autotune`: the chosen `config` and
        its `latency` (ms, estimated or measured); an untuned kernel has neither (None)."""
        return {"config": getattr(self, "config", None), "latency": getattr(self, "latency", None),
                "ref_latency": None}

    def get_profiler(self, *args, **kwargs):
        """TileLang's profiler: `do_bench()` times this kernel on random inputs (wall clock on
        this CPU; `estimate()` predicts the NPU)."""
        from ..profiler import Profiler
        return Profiler(self)

    def get_kernel_source(self) -> str:
        """The generated code: LLVM IR for target="llvm", the lowered IR text otherwise."""
        source = getattr(self.artifact, "llvm_ir", None)
        return source if source is not None else self.get_ir(list(self.compilation.stages)[-1])

    def get_ir(self, stage: str = "frontend") -> str:
        """The IR text after `stage` ("frontend" or a pass name)."""
        from ..ir.printer import print_ir
        if stage not in self.compilation.stages:
            raise ValueError(f"unknown stage {stage!r}; stages: {', '.join(self.compilation.stages)}")
        return print_ir(self.compilation.stages[stage])

    def ir_graph(self, stage: str | None = None):
        """networkx DiGraph of the tile ops after `stage` (default: the final IR) and their
        data dependencies (RAW/WAR/WAW edges carrying the buffer)."""
        from ..ir.graph import ir_graph
        return ir_graph(self.compilation.stages[stage] if stage else self.ir)

    def __repr__(self) -> str:
        return f"<JITKernel {self.frontend.name} target={self.target} chip={self.chip}>"


def _normalize_out_idx(out_idx, nparams: int) -> tuple[int, ...]:
    if out_idx is None:
        return ()
    idx = (out_idx,) if isinstance(out_idx, int) else tuple(out_idx)
    seen = set()
    for i in idx:
        if not isinstance(i, int) or isinstance(i, bool) or not -nparams <= i < nparams:
            raise CompileError(f"out_idx {i!r} is not a parameter index of a kernel with "
                               f"{nparams} parameters")
        if i % nparams in seen:  # (the second output would be returned unwritten)
            raise CompileError(f"out_idx {list(idx)!r} names parameter {i % nparams} twice")
        seen.add(i % nparams)
    return idx


def _simulated_blocks(blocks, n: int, loc) -> list[int] | None:
    """The block ids `simulate(blocks=...)` asks for (None: all), each an integer in the grid,
    or a CompileError."""
    if blocks is None:
        return None
    import numbers
    try:
        ids = list(blocks)
    except TypeError:
        ids = None
    if ids is None or isinstance(blocks, (str, bytes, dict)):
        raise CompileError(f"simulate's blocks= takes a list of block ids, got {blocks!r}", loc)
    for b in ids:
        if not isinstance(b, numbers.Integral) or isinstance(b, bool):
            raise CompileError(f"simulate's blocks= takes integer block ids, got {b!r}", loc)
        if not 0 <= b < n:
            raise CompileError(f"block {b} is outside the grid of {n} blocks", loc)
    return [int(b) for b in ids]


@user_facing
def compile(prim_func, out_idx=None, target: str | None = None, chip: str | None = None,  # noqa: A001
            workspace_idx=None, **tilelang_options) -> JITKernel:
    """Compile a `T.prim_func` for `target` ("numpy" or "llvm") and `chip`. `workspace_idx`
    (tilelang-ascend) names scratch tensor parameters the runtime allocates on each call."""
    from ..frontend import PrimFunc
    from ..frontend.parser import SymbolicPrimFunc
    from ..transform.options import auto_sync_of
    pto, target = target == "pto", _our_target(target)
    pass_configs = tilelang_options.get("pass_configs")
    if isinstance(prim_func, SymbolicPrimFunc):
        from .eager import SymbolicKernel
        return SymbolicKernel(prim_func, out_idx, target, chip, workspace_idx, pass_configs)
    if not isinstance(prim_func, PrimFunc):
        raise CompileError(f"compile() takes a T.prim_func, got {type(prim_func).__name__}")
    options = Options(chip=chip or config.default_chip(), target=target or config.default_target(),
                      auto_sync=auto_sync_of(pass_configs), pto=pto)
    if len(prim_func.launches) > 1 or prim_func.hidden:  # several `with T.Kernel` blocks,
        from .launches import LaunchSequence            # T.alloc_global, GM views
        from ..ir.analysis import is_expert
        if workspace_idx and not all(is_expert(k) for k in prim_func.launches):
            raise CompileError("workspace_idx with several T.Kernel launches (or T.alloc_global "
                               "/ views) is supported for expert-mode launches (T.Scope) only; "
                               "allocate the scratch tensors with T.alloc_global inside the "
                               "function", prim_func.ir.loc)
        n = len(prim_func.ir.params) - len(prim_func.hidden)
        return LaunchSequence(prim_func, [_compile_ir(prim_func, k, None, options)
                                          for k in prim_func.launches],
                              _normalize_out_idx(out_idx, n), prim_func.hidden,
                              _normalize_out_idx(workspace_idx, n))
    return _compile_ir(prim_func, prim_func.ir, out_idx, options, workspace_idx)


# TileLang's target strings name GPU back ends; a kernel here runs on "numpy" or "llvm".
def _our_target(target):
    if target is None or target in ("numpy", "llvm"):
        return target
    from .backends import available_targets
    if target in available_targets():
        return target
    return None  # "cuda", "hip", "npu", "auto", ...: the default target (documented)


@user_facing
def compile_ir(text: str, out_idx=None, target: str | None = None, chip: str | None = None,
               filename: str = "<ir>") -> JITKernel:
    """Compile IR text (as printed after any stage, possibly edited by hand)."""
    from ..ir.parser import parse_ir
    options = Options(chip=chip or config.default_chip(), target=target or config.default_target())
    return _compile_ir(None, parse_ir(text, filename), out_idx, options)


def _compile_ir(prim_func, kernel: Kernel, out_idx, options: Options,
                workspace_idx=None) -> JITKernel:
    idx = _normalize_out_idx(out_idx, len(kernel.params))
    ws = _normalize_out_idx(workspace_idx, len(kernel.params))
    _check_chip(options.chip)
    backend = get_backend(options.target)
    compilation, artifact, key = _lower_cached(kernel, options, backend, ws or ())
    return _observed(JITKernel(prim_func, kernel, idx, options, compilation, artifact, ws, key))


def _prepared(kernel: Kernel, workspace_idx: tuple, chip: str) -> Kernel:
    """The traced kernel as the pass list takes it: the located errors of a developer-mode
    kernel whose workspaces or on-chip hand-offs are read before written, and tilelang-ascend's
    AUTO_CV_COMBINE (frontend/workspace_order.py: a developer-mode is_npu kernel meeting at its
    workspaces becomes two concurrent programs). Its outcome follows from the kernel's IR text,
    `workspace_idx` and the chip, all in the cache key: a cache hit skips it."""
    # the frontend package loads through the language (they import each other, language first)
    from .. import language  # noqa: F401
    from ..frontend.workspace_order import (check_cross_tile_order, check_workspace_order,
                                            concurrent_programs, cross_tiles_through_workspaces)
    kernel = cross_tiles_through_workspaces(kernel)
    check_cross_tile_order(kernel)
    kernel = concurrent_programs(kernel, workspace_idx, chip)
    check_workspace_order(kernel, workspace_idx)
    return kernel


def _observed(compiled: JITKernel) -> JITKernel:
    for observer in tuple(_OBSERVERS):
        observer(compiled)
    return compiled


def _cacheable(backend) -> bool:
    """Whether compiles for `backend` go through the disk cache (a backend with `dump`/`load`;
    not while passes print or time themselves: then they must run)."""
    return (hasattr(backend, "dump") and config.cache_enabled() and not config.print_after()
            and not config.time_passes())


def _key(options: Options, backend, **parts: str) -> str:
    """The cache key of `parts` compiled with `options` by this compiler for this host."""
    backend_root = Path(sys.modules[type(backend).__module__].__file__).parent
    return cache.cache_key(
        **parts, options=repr(options),
        compiler=cache.compiler_fingerprint(Path(__file__).parents[1], backend_root),
        backend=backend.cache_tag({"chip": options.chip}))


def key_text(kernel: Kernel) -> str:
    """The kernel's IR text as the cache key and autotune's identity of a configuration read
    it: without its GPU hints (`threads=128`, `T.use_swizzle(10)`: recorded, read by no pass),
    so that kernels differing only in them are one compiled kernel."""
    from dataclasses import replace
    return print_ir(replace(kernel, hints=()))


def _text_places(kernel: Kernel) -> dict:
    """For IR text read without `# LINE:COL` comments, the places in the text of its nodes (the
    printed IR, the rest of the key, leaves them out): a cached artifact's run-time errors point
    at lines of the text it was compiled from. Empty for other kernels (keys unchanged)."""
    from ..ir.nodes import TextLoc, walk
    places = [(n.line, n.col, n.text) for n in (getattr(x, "loc", None) for x in walk(kernel))
              if isinstance(n, TextLoc)]
    return {"text_places": repr(places)} if places else {}


def _lower_cached(kernel: Kernel, options: Options, backend, workspace_idx: tuple = ()):
    """(compilation, artifact, key): from the disk cache when it holds this kernel (looked up
    before `_prepared` and any pass run; the stages are then recomputed only if asked for),
    else prepared, compiled and stored. Backends without `dump`/`load` are not cached (key
    None)."""
    path = key = None
    if _cacheable(backend):
        hand_offs = {"workspace_idx": repr(workspace_idx)} if workspace_idx else {}
        key = _key(options, backend, ir=key_text(kernel), **hand_offs, **_text_places(kernel))
        path = cache.entry_path(options.target, key)
        entry = cache.read_entry(path, key)
        if entry is not None:
            artifact = backend.load(*entry, kernel, key)
            if artifact is not None:
                return None, artifact, key
    with collector_paused():
        compilation = _run_passes(_prepared(kernel, workspace_idx, options.chip), options)
        artifact = guarded(f"the {options.target} code generator", kernel.loc, backend.lower,
                           compilation.final, {"chip": options.chip})
    if key is not None:
        cache.write_entry(path, key, *backend.dump(artifact))
    return compilation, artifact, key


@user_facing
def compile_call(factory, args: tuple = (), kwargs: dict | None = None, out_idx=None,
                 target: str | None = None, chip: str | None = None,
                 workspace_idx=None, pass_configs=None):
    """`compile(factory(*args, **kwargs), ...)`, looked up in the disk cache before the factory
    is traced: the key of the call (runtime/trace_key.py: the factory's code, closure values,
    the globals it names, the arguments) with the options, compiler and host names an entry
    that points at the compiled code's entry and holds the frontend IR. On such a hit nothing
    is traced (`prim_func` traces when asked for); otherwise the factory is traced and compiled
    as by `compile`, and the pointer is stored."""
    from ..transform.options import auto_sync_of
    kwargs = kwargs or {}
    options = Options(chip=chip or config.default_chip(),
                      target=_our_target(target) or config.default_target(),
                      auto_sync=auto_sync_of(pass_configs), pto=target == "pto")
    _check_chip(options.chip)
    backend = get_backend(options.target)
    path = key = None
    if _cacheable(backend):
        from .trace_key import factory_key
        call = factory_key(factory, args, kwargs)
        if call is not None:
            key = _key(options, backend, call=call, out_idx=repr(out_idx),
                       workspace_idx=repr(workspace_idx))
            path = cache.entry_path(f"{options.target}-calls", key)
            hit = _load_call(path, key, options, backend, out_idx, workspace_idx,
                             lambda: factory(*args, **kwargs))
            if hit is not None:
                return _observed(hit)
    kernel = compile(factory(*args, **kwargs), out_idx=out_idx,
                     target="pto" if options.pto else options.target,
                     chip=options.chip, workspace_idx=workspace_idx, pass_configs=pass_configs)
    if key is not None and type(kernel) is JITKernel and kernel.cache_key is not None:
        cache.write_entry(path, key, {"code_key": kernel.cache_key},
                          [cache.dump_ir(kernel.frontend)])
    return kernel


def _load_call(path, key: str, options: Options, backend, out_idx, workspace_idx, trace):
    """The JITKernel of a call's entry (frontend IR + the compiled code's entry), or None."""
    entry = cache.read_entry(path, key)
    if entry is None:
        return None
    meta, blobs = entry
    code_key = meta.get("code_key")
    frontend = cache.load_ir(blobs[0]) if len(blobs) == 1 else None
    if not isinstance(frontend, Kernel) or not isinstance(code_key, str):
        return None
    code = cache.read_entry(cache.entry_path(options.target, code_key), code_key)
    artifact = backend.load(*code, frontend, code_key) if code is not None else None
    if artifact is None:
        return None
    idx = _normalize_out_idx(out_idx, len(frontend.params))
    ws = _normalize_out_idx(workspace_idx, len(frontend.params))
    return JITKernel(None, frontend, idx, options, None, artifact, ws, code_key, trace)


def _run_passes(kernel: Kernel, options: Options):
    """The pass list, with the driver's choices from the environment (runtime/config.py)."""
    from ..transform.pipeline import run_pipeline
    return run_pipeline(kernel, pass_options(options), print_after=config.print_after(),
                        verify=config.verify_ir(), time_passes=config.time_passes())


def pass_options(options: Options) -> Options:
    """`options` with what the target's passes need to know of the host, from its backend's
    `pass_options` (the llvm target: whether the host multiplies bfloat16 natively)."""
    backend = get_backend(options.target)
    if not hasattr(backend, "pass_options"):
        return options
    return backend.pass_options(options, {"chip": options.chip})


_OBSERVERS: list = []


@contextlib.contextmanager
def observe_compiles(callback):
    """Call `callback(kernel)` with every JITKernel compiled inside the `with` block (the CLI's
    `run` collects what an example compiled this way)."""
    _OBSERVERS.append(callback)
    try:
        yield
    finally:
        _OBSERVERS.remove(callback)


def _check_chip(chip: str) -> None:
    from ..arch import CHIPS
    if chip not in CHIPS:
        raise CompileError(f"unknown chip {chip!r}; available chips: {', '.join(CHIPS)}")


class CompileSettings:
    """What a jit object compiles its kernels for (out_idx, workspace_idx, target, chip; None:
    the defaults at compile time), and its memo of the kernels compiled (`_cache`)."""

    def __init__(self, out_idx, target, chip, workspace_idx=None, pass_configs=None):
        self.out_idx = out_idx
        self.workspace_idx = workspace_idx
        self.pass_configs = pass_configs  # honoured: TL_ASCEND_AUTO_SYNC (transform/options.py)
        self.target = target
        self.chip = chip
        self._cache: dict = {}


def frozen(v):
    """A trace-time argument (of a factory or an eager function) as a memo key: lists, tuples
    and dicts by their contents (one compiled kernel per distinct value), every leaf with its
    type (1, 1.0 and True trace to different constants, though Python hashes them alike)."""
    if isinstance(v, (list, tuple)):
        return (type(v).__name__, tuple(frozen(x) for x in v))
    if isinstance(v, dict):
        return ("dict", tuple(sorted(((frozen(k), frozen(x)) for k, x in v.items()), key=repr)))
    return (type(v).__name__, v)


class JITFactory(CompileSettings):
    """`@tilelang_mini.jit(...)` applied to a factory that returns a T.prim_func.

    Calling it compiles the kernel for those arguments, memoised per (arguments, target, chip)."""

    def __init__(self, factory, out_idx, target, chip, workspace_idx=None, pass_configs=None):
        super().__init__(out_idx, target, chip, workspace_idx, pass_configs)
        self.factory = factory
        functools.update_wrapper(self, factory)

    @property
    def __jit_impl__(self):
        """tilelang-ascend factories read `f.__jit_impl__.target` (the jit's target string)."""
        import types
        return types.SimpleNamespace(target=self.target or "auto", out_idx=self.out_idx)

    @user_facing
    def __call__(self, *args, **kwargs) -> JITKernel:
        target = _our_target(self.target) or config.default_target()
        chip = self.chip or config.default_chip()
        try:  # one key however the arguments are spelled (positional, keyword, defaulted)
            bound = inspect.signature(self.factory).bind(*args, **kwargs)
            bound.apply_defaults()
            key = (tuple((k, frozen(v)) for k, v in bound.arguments.items()), target, chip)
        except TypeError:
            key = (frozen(args), frozen(dict(kwargs)), target, chip)
        try:
            return self._cache[key]
        except (KeyError, TypeError):
            pass
        kernel = compile_call(self.factory, args, kwargs, out_idx=self.out_idx,
                              target=self.target if self.target == "pto" else target,
                              chip=chip, workspace_idx=self.workspace_idx,
                              pass_configs=self.pass_configs)
        try:
            self._cache[key] = kernel
        except TypeError:  # unhashable arguments: compile every time
            pass
        return kernel

    def get_kernel_source(self, *args, **kwargs) -> str:
        """TileLang's `f.get_kernel_source(*factory_args)`: the kernel's generated code."""
        return self(*args, **kwargs).get_kernel_source()


def jit(fn=None, *, out_idx=None, target: str | None = None, chip: str | None = None,
        pass_configs=None, execution_backend=None, verbose=False, compile_flags=None,
        debug_root_path=None, workspace_idx=None, **_ignored):
    """Decorate a kernel factory (`@jit(out_idx=[-1])` or bare `@jit`) or a TileLang eager
    kernel function (its body holds `with T.Kernel`; see runtime/eager.py).

    TileLang's other keywords are accepted: `target` is honoured when it names a backend here
    ("numpy", "llvm") and otherwise means the default; `pass_configs`, `execution_backend`,
    `compile_flags`, `debug_root_path` and `verbose` configure TileLang's GPU toolchain and are
    ignored (the lowering here has no such switches; docs/tilelang_compat.md)."""
    def wrap(factory):
        from .eager import EagerJIT, is_eager_function
        if is_eager_function(factory):
            return EagerJIT(factory, _our_target(target), chip)
        return JITFactory(factory, out_idx, target, chip, workspace_idx, pass_configs)
    return wrap(fn) if fn is not None else wrap


class _PassConfigKeys(type):
    def __getattr__(cls, name):
        if name.startswith("TL_") or name.startswith("TIR_"):
            return name
        raise AttributeError(name)


class PassConfigKey(metaclass=_PassConfigKeys):
    """TileLang's pass-configuration keys (`PassConfigKey.TL_DISABLE_TMA_LOWER`, ...): each is
    its own name; the configurations they select are GPU toolchain switches, ignored here."""


__all__ = ["JITKernel", "JITFactory", "PassConfigKey", "compile", "compile_call", "compile_ir",
           "jit", "STAGES"]
