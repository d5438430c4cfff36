"""LLVM backend runtime: host target machine, optimisation, MCJIT loading, threads.

`lower` generates the module (codegen.py), parses and verifies it, runs the new pass manager
pipeline and emits an object file for the host (CPU name + features), which MCJIT loads.
`dump`/`load` turn an artifact into a disk-cache entry and back, `cache_tag` is what the code
depends on besides the kernel (backend version, triple, CPU name and features); the runtime
looks entries up before any pass runs (tilelang_mini/runtime/cache.py).

`run` checks the arguments, then calls `tlm_kernel(args, begin, end, scratch)` through ctypes
(which releases the GIL) on `config.num_threads()` worker threads, each with its own scratch
arena, over chunks of the grid blocks. A kernel whose cores cannot run in program order (cross-core
flags both ways, semantics/order.py) is compiled to one function per core kind instead, and each
block's cores run as coroutines (cores.py, cores_run.py).
"""
from __future__ import annotations

import ctypes
import json
import os
import threading
import zlib
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field, replace

import llvmlite.binding as llvm  # loading this backend loads LLVM (not the first compile)
import numpy as np

from tilelang_mini.errors import (
    CompileError, InternalCompilerError, KernelRuntimeError, TileLangMiniError, internal_error,
)
from tilelang_mini.ir.nodes import Kernel, Loc, TextLoc
from tilelang_mini.runtime import config
from tilelang_mini.runtime.arguments import check_arrays
from .irutil import dismantle
from .pack_cache import RESUME

BACKEND_VERSION = "tlm-llvm-14"
FN_NAME = "tlm_kernel"
STATS = {"compiles": 0, "cache_hits": 0, "cache_corrupt": 0}

_LOCK = threading.RLock()
_TARGET = None
_KERNEL_T = ctypes.CFUNCTYPE(ctypes.c_int32, ctypes.c_void_p, ctypes.c_int64, ctypes.c_int64,
                             ctypes.c_void_p)


# -------------------------------------------------------------------------------- target


@dataclass
class HostTarget:
    tm: object
    triple: str
    cpu: str
    features: str
    bf16: bool
    data_layout: str = ""
    avx512: bool = False

    def new_machine(self):
        """A fresh target machine (an MCJIT engine takes ownership of the one it is given)."""
        return llvm.Target.from_triple(self.triple).create_target_machine(
            cpu=self.cpu, features=self.features, opt=3, reloc="default",
            codemodel="jitdefault")


def host_target() -> HostTarget:
    global _TARGET
    with _LOCK:
        if _TARGET is None:
            llvm.initialize_native_target()
            llvm.initialize_native_asmprinter()
            triple = llvm.get_process_triple()
            cpu = llvm.get_host_cpu_name()
            try:
                feats = llvm.get_host_cpu_features()
                avx512 = bool(feats.get("avx512f"))
                bf16 = bool(feats.get("avx512bf16")) and avx512
                features = feats.flatten()
            except RuntimeError:
                features, bf16, avx512 = "", False, False
            target = llvm.Target.from_triple(triple)
            tm = target.create_target_machine(cpu=cpu, features=features, opt=3,
                                              reloc="default", codemodel="jitdefault")
            _TARGET = HostTarget(tm, triple, cpu, features, bf16, avx512=avx512)
            _TARGET.data_layout = str(tm.target_data)
        return _TARGET


# ------------------------------------------------------------------------------ artifact


@dataclass
class LLVMArtifact:
    kernel: Kernel          # the lowered kernel's header: params, grid (no body)
    errors: list
    scratch_bytes: int
    key: str
    from_cache: bool
    llvm_ir_z: bytes = field(repr=False)
    engine: object = field(repr=False, default=None)
    cfunc: object = field(repr=False, default=None)
    object_file: object = field(repr=False, default=None)
    obj: bytes = field(repr=False, default=b"")
    # cores: one function per core kind (cfunc is (AIC, AIV)), blocks run their cores as
    # coroutines; the arena is zero_bytes zeroed, arena_bytes of buffers, 3 x temp_bytes
    cores: bool = False
    zero_bytes: int = 0
    arena_bytes: int = 0
    temp_bytes: int = 0

    @property
    def llvm_ir(self) -> str:
        """The generated LLVM IR (before optimisation)."""
        return zlib.decompress(self.llvm_ir_z).decode()

    def get_kernel_source(self) -> str:
        return self.llvm_ir


# ----------------------------------------------------------------------------- compiling


def cache_tag(options: dict | None = None) -> str:
    """What the compiled code depends on besides the kernel and the compiler: this backend's
    code version, the host's target triple, CPU name and features, and the options."""
    options = dict(options or {})
    t = host_target()
    return json.dumps([BACKEND_VERSION, t.triple, t.cpu, t.features, llvm.llvm_version_info,
                       _features(t, options)], sort_keys=True, default=str)


def _features(t: HostTarget, options: dict) -> dict:
    """What the code generator may use of the host: the bf16 dot product, and 512-bit vector
    registers as inline asm operands (packing.transpose16)."""
    return {"bf16": t.bf16 and not options.get("llvm_disable_bf16", False), "zmm": t.avx512}


def _compile_module(module_text: str, needs_dpbf16: bool, t: HostTarget) -> bytes:
    from .microkernel import DPBF16_IR
    mod = llvm.parse_assembly(module_text)
    mod.triple = t.triple
    mod.data_layout = t.data_layout
    if needs_dpbf16:
        extra = llvm.parse_assembly(DPBF16_IR)
        extra.triple = t.triple
        extra.data_layout = mod.data_layout
        mod.link_in(extra)
    mod.verify()
    _optimise(mod, t)
    # Loop strength reduction took a quarter of LLVM's time on the GEMM kernels (the unrolled
    # micro-kernel loops address through base + k * stride + constant, which x86 addressing
    # modes take as they are); off for our emission only (callers hold _LOCK), no run-time change
    # measured on gemm fp32/bf16, prenorm, rmsnorm, softmax, flash attention
    llvm.set_option("tilelang_mini", "-disable-lsr=true")
    try:
        return t.tm.emit_object(mod)
    finally:
        llvm.set_option("tilelang_mini", "-disable-lsr=false")


def _optimise(mod, t: HostTarget) -> None:
    """LLVM's O2 function simplification pipeline on each function, after the few module passes
    our modules need: inlining of the `alwaysinline` helpers (the bf16 dot product), constants of
    the internal functions' arguments propagated into them, the fast calling convention for
    them, dead arguments and functions removed (functions again after the simplification).

    Not the whole O2 module pipeline: the helpers the code generator emits are `noinline` but
    for a micro-kernel called from one site (now a call per C tile instead of a copy inlined),
    and the late module part (loop rotation again, loop-load elimination, repeated
    instcombine/LICM/simplifycfg; the vectorisers and the unroller are off: the code generator
    vectorises and unrolls what it means to) cost a sixth to a quarter of LLVM's time
    (optimisation and object emission) on the examples for no measured run-time gain: the same
    results and times within noise on GEMM fp32/bf16 1024/2048, skinny GEMM, rmsnorm, prenorm,
    softmax, flash attention and the coroutine attention."""
    pto = llvm.create_pipeline_tuning_options(speed_level=2)
    pto.loop_vectorization = False
    pto.slp_vectorization = False
    pto.loop_unrolling = False
    pb = llvm.create_pass_builder(t.tm, pto)
    mpm = llvm.create_new_module_pass_manager()
    mpm.add_always_inliner_pass()
    mpm.add_ipsccp_pass()
    mpm.add_global_opt_pass()  # (internal functions get the fast calling convention)
    mpm.add_dead_arg_elimination_pass()
    mpm.add_global_dead_code_eliminate_pass()
    mpm.run(mod, pb)
    fpm = pb.getFunctionPassManager()
    for fn in mod.functions:
        if not fn.is_declaration:
            fpm.run(fn, pb)
    dce = llvm.create_new_module_pass_manager()  # helpers whose calls were folded away
    dce.add_global_dead_code_eliminate_pass()
    dce.run(mod, pb)


def _load_object(obj: bytes, t: HostTarget, cores: bool = False):
    engine = llvm.create_mcjit_compiler(llvm.parse_assembly(""), t.new_machine())
    ref = llvm.ObjectFileRef.from_data(obj)
    engine.add_object_file(ref)
    engine.finalize_object()
    if cores:
        from .cores import CORE_FNS
        from .cores_run import CORE_T
        addrs = [engine.get_function_address(n) for n in CORE_FNS.values()]
        if not all(addrs):
            raise RuntimeError("core function symbols not found in the object code")
        return engine, tuple(CORE_T(a) for a in addrs), ref
    addr = engine.get_function_address(FN_NAME)
    if not addr:
        raise RuntimeError("kernel symbol not found in the object code")
    return engine, _KERNEL_T(addr), ref


def needs_cores(kernel: Kernel) -> bool:
    """True when the block's cores must run as coroutines: an NPU kernel with cross-core flags
    whose program order is not proven to satisfy every wait (semantics/order.py)."""
    from tilelang_mini.ir.nodes import SetCrossFlag, WaitCrossFlag, walk
    from tilelang_mini.semantics.order import program_order_is_valid
    if not kernel.is_npu or not any(isinstance(n, (SetCrossFlag, WaitCrossFlag))
                                    for n in walk(kernel)):
        return False
    return not program_order_is_valid(kernel)


def lower(kernel: Kernel, options: dict | None = None) -> LLVMArtifact:
    """Generate, optimise and load the kernel's code (no disk cache here: the runtime looks
    compiled kernels up before any pass runs, tilelang_mini/runtime/cache.py)."""
    options = dict(options or {})
    t = host_target()
    feats = _features(t, options)
    cores = needs_cores(kernel)
    from .codegen import build
    try:
        module, gen = build(kernel, feats, cores)
    except CompileError:
        raise
    except RecursionError:
        raise CompileError("kernel too deeply nested for the llvm backend", kernel.loc) from None
    except Exception as err:  # a bug of the code generator, not of the kernel
        raise internal_error(err, "the llvm code generator", kernel.loc) from err
    text = str(module)
    plan, errors, dpbf16 = gen.plan, list(gen.errors), gen.needs_dpbf16
    scratch = plan.arena_bytes + gen.pack_cache.nbytes + gen.temp_bytes * (3 if cores else 1)
    temp_bytes = gen.temp_bytes
    # the module and the generator's state are cyclic (parents, phis, closures, the builders'
    # numbering): broken here, they are freed now rather than by a collector pause later
    dismantle(module)
    gen.__dict__.clear()
    with _LOCK:
        try:
            obj = _compile_module(text, dpbf16, t)
            engine, cfunc, ref = _load_object(obj, t, cores)
        except RuntimeError as err:  # LLVM rejected the module we generated: our bug
            raise InternalCompilerError(f"LLVM rejected the generated module: {err}",
                                        kernel.loc, stage="the llvm code generator") from err
        STATS["compiles"] += 1
    return LLVMArtifact(_header(kernel), errors, scratch, "", False,
                        zlib.compress(text.encode(), 1), engine, cfunc, ref, obj, cores,
                        plan.zero_bytes, plan.arena_bytes, temp_bytes)


def _header(kernel: Kernel) -> Kernel:
    """What running needs of a kernel: parameters, grid, name and location (no body)."""
    return replace(kernel, body=())


def _dump_loc(message: str, loc) -> list:
    """An error's (message, location) as JSON; a TextLoc keeps its line of text and source."""
    if loc is None:
        return [message, None, 0, 0]
    row = [message, loc.file, loc.line, loc.col]
    return row + [loc.text, loc.source] if isinstance(loc, TextLoc) else row


def _load_loc(message, file, line, col, *text):
    """The inverse of `_dump_loc`."""
    if file is None:
        return str(message), None
    if text:
        return str(message), TextLoc(str(file), int(line), int(col), str(text[0]), str(text[1]))
    return str(message), Loc(str(file), int(line), int(col))


def dump(artifact: LLVMArtifact) -> tuple[dict, list[bytes]]:
    """The artifact as a cache entry: (meta, [llvm_ir_z, object code])."""
    k = artifact.kernel
    meta = {"scratch_bytes": artifact.scratch_bytes, "grid": list(k.grid),
            "grid_vars": list(k.grid_vars), "is_npu": k.is_npu,
            "errors": [_dump_loc(m, loc) for m, loc in artifact.errors],
            "cores": [artifact.cores, artifact.zero_bytes, artifact.arena_bytes,
                      artifact.temp_bytes]}
    return meta, [artifact.llvm_ir_z, artifact.obj]


def load(meta: dict, blobs: list[bytes], kernel: Kernel, key: str = "") -> LLVMArtifact | None:
    """The artifact of a cache entry for `kernel` (its frontend IR), or None when the entry does
    not describe a loadable kernel of this shape (then it is recompiled)."""
    try:
        ir_z, obj = blobs
        grid = tuple(int(n) for n in meta["grid"])
        grid_vars = tuple(str(v) for v in meta["grid_vars"])
        header = replace(kernel, body=(), grid=grid, grid_vars=grid_vars,
                         is_npu=bool(meta["is_npu"]))
        errors = [_load_loc(*e) for e in meta["errors"]]
        scratch = int(meta["scratch_bytes"])
        cores, zero, arena, temp = (bool(meta["cores"][0]), *(int(n) for n in meta["cores"][1:]))
        if scratch < 0 or len(grid) != len(grid_vars) - (1 if header.is_npu else 0):
            return None
        if cores and not (0 <= zero <= arena and temp >= 0 and arena + 3 * temp <= scratch):
            return None
        with _LOCK:
            engine, cfunc, ref = _load_object(obj, host_target(), cores)
    except Exception:  # noqa: BLE001 - a malformed entry is recompiled, never run
        STATS["cache_corrupt"] += 1
        return None
    STATS["cache_hits"] += 1
    return LLVMArtifact(header, errors, scratch, key, True, ir_z, engine, cfunc, ref, obj, cores,
                        zero, arena, temp)


# ------------------------------------------------------------------------------- running

_TLS = threading.local()
_POOL: list = [None, 0]     # the worker pool and its size
_POOL_LOCK = threading.Lock()


def _arena(nbytes: int, loc=None) -> tuple[np.ndarray, int]:
    buf = getattr(_TLS, "arena", None)
    if buf is None or buf.nbytes < nbytes + 64:
        try:
            buf = np.empty(max(nbytes, 64) + 64, np.uint8)
        except (MemoryError, ValueError):
            raise CompileError(f"the kernel needs {nbytes} bytes of scratch memory per worker "
                               f"thread, more than this machine can allocate", loc) from None
        _TLS.arena = buf
    addr = buf.ctypes.data
    return buf, (addr + 63) // 64 * 64


def _pool(n: int) -> ThreadPoolExecutor:
    """A pool of at least `n` workers. A pool is never shut down while it may be in use: when a
    larger one is needed the old one is only dropped (its idle workers exit when it is
    collected), so changing TILELANG_MINI_NUM_THREADS while other threads call kernels is safe."""
    with _POOL_LOCK:
        if _POOL[0] is None or _POOL[1] < n:
            _POOL[0] = ThreadPoolExecutor(max_workers=n, thread_name_prefix="tlm-llvm")
            _POOL[1] = n
        return _POOL[0]


def _after_fork_in_child() -> None:
    """A forked child has only the forking thread: the parent's pool has no workers there
    (submitting to it would wait forever) and a lock another thread held stays held."""
    global _LOCK, _POOL_LOCK
    _LOCK = threading.RLock()
    _POOL_LOCK = threading.Lock()
    _POOL[0], _POOL[1] = None, 0


if hasattr(os, "register_at_fork"):
    os.register_at_fork(after_in_child=_after_fork_in_child)


def check_args(kernel: Kernel, args) -> list:
    """The arrays, checked again before native code touches them (C-contiguous, as compiled)."""
    return check_arrays(kernel, args, contiguous=True)


def run(artifact: LLVMArtifact, args) -> None:
    k = artifact.kernel
    args = check_args(k, args)
    ptrs = (ctypes.c_void_p * max(1, len(args)))(*[a.ctypes.data for a in args])
    nblocks = 1
    for n in (k.grid[:1] if k.is_npu else k.grid):
        nblocks *= n
    if nblocks <= 0:
        return
    threads = max(1, min(config.num_threads(), nblocks))
    fn, size = artifact.cfunc, artifact.scratch_bytes
    if artifact.cores:
        fn = _block_runner(artifact)
    if threads == 1:
        _, scratch = _arena(size, k.loc)
        code = fn(ptrs, 0, nblocks, scratch)
    else:
        # guided chunks: runs of consecutive blocks (they share operand tiles), at most a
        # quarter of a thread's share, shrinking with what is left so the threads finish
        # together (a last big chunk on one thread would leave the others idle)
        chunk = max(1, nblocks // (threads * 4))
        state = {"next": 0, "code": 0}
        lock = threading.Lock()

        # a worker's later chunks keep the packed tiles of its earlier ones (pack_cache.py)
        resume = 0 if artifact.cores else RESUME

        def worker():
            _, scratch = _arena(size, k.loc)
            flag = 0
            while True:
                with lock:
                    lo = state["next"]
                    if lo >= nblocks or state["code"]:
                        return
                    left = nblocks - lo
                    hi = lo + max(1, min(chunk, -(-left // (threads * 2))))
                    state["next"] = hi
                c = fn(ptrs, lo | flag, hi, scratch)
                flag = resume
                if c:
                    with lock:
                        if not state["code"]:
                            state["code"] = c
                    return

        pool = _pool(threads)
        futures = [pool.submit(worker) for _ in range(threads)]
        for f in futures:
            f.result()
        code = state["code"]
    if isinstance(code, TileLangMiniError):
        raise code
    if code:
        message, loc = artifact.errors[code - 1]
        raise KernelRuntimeError(message, loc)


def _block_runner(artifact: LLVMArtifact):
    """fn(ptrs, begin, end, scratch) for a kernel compiled to core functions: runs the blocks
    one after the other, each block's cores as coroutines (cores_run.py); returns 0, or the
    error that stopped a block (then raised by `run`)."""
    from .cores_run import block_runner
    return block_runner(artifact, host_target())


class LLVMBackend:
    name = "llvm"

    def lower(self, kernel: Kernel, options: dict | None = None) -> LLVMArtifact:
        # a block runs its cores in program order, or as coroutines when that order may
        # break a cross-core flag (hand-written expert kernels): lower() decides
        return lower(kernel, options)

    def run(self, artifact: LLVMArtifact, args) -> None:
        run(artifact, args)

    def pass_options(self, options, backend_options: dict | None = None):
        """`options` (transform/options.py) with what the llvm target's passes must know of the
        host: `native_bf16` (widen_storage keeps bfloat16 tiles bfloat16 where the host
        multiplies them natively and `llvm_disable_bf16` is not set)."""
        feats = _features(host_target(), dict(backend_options or {}))
        return replace(options, native_bf16=feats["bf16"])

    # the disk cache (tilelang_mini/runtime/cache.py) stores and loads artifacts through these
    cache_tag = staticmethod(cache_tag)
    dump = staticmethod(dump)
    load = staticmethod(load)


BACKEND = LLVMBackend()
host_target()  # loading the backend sets LLVM up for the host (process set-up, not a compile)
