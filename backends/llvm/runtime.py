"""LLVM backend runtime: host target machine, optimisation, MCJIT loading, disk cache, threads.

`lower` generates the module (codegen.py), parses and verifies it, runs the new pass manager
pipeline and emits an object file for the host (CPU name + features), which MCJIT loads. The
object code is cached on disk under `config.cache_dir()/llvm/` (unless `config.cache_enabled()`
is false), keyed by sha256 of the IR text, chip, backend version, triple, CPU name and
features. Entries are written atomically (temp file + os.replace) and carry a sha256 checksum
header; a corrupt or truncated entry is detected and recompiled.

`run` checks the arguments, then calls `tlm_kernel(args, begin, end, scratch)` through ctypes
(which releases the GIL) on `config.num_threads()` worker threads, each with its own scratch
arena, over chunks of the grid blocks.
"""
from __future__ import annotations

import ctypes
import hashlib
import json
import os
import struct
import threading
import zlib
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field

import llvmlite.binding as llvm  # loading this backend loads LLVM (not the first compile)
import numpy as np

from tilelang_mini.errors import CompileError
from tilelang_mini.ir.nodes import Kernel, Loc
from tilelang_mini.runtime import config
from tilelang_mini.runtime.arguments import check_arrays

BACKEND_VERSION = "tlm-llvm-8"
MAGIC = b"TLMLLVM1"
FN_NAME = "tlm_kernel"
STATS = {"compiles": 0, "cache_hits": 0, "cache_stores": 0, "cache_corrupt": 0}

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
                bf16 = bool(feats.get("avx512bf16")) and bool(feats.get("avx512f"))
                features = feats.flatten()
            except RuntimeError:
                features, bf16 = "", False
            target = llvm.Target.from_triple(triple)
            tm = target.create_target_machine(cpu=cpu, features=features, opt=3,
                                              reloc="default", codemodel="jitdefault")
            _TARGET = HostTarget(tm, triple, cpu, features, bf16)
            _TARGET.data_layout = str(tm.target_data)
        return _TARGET


# ------------------------------------------------------------------------------ artifact


@dataclass
class LLVMArtifact:
    kernel: Kernel
    errors: list
    scratch_bytes: int
    key: str
    from_cache: bool
    llvm_ir_z: bytes = field(repr=False)
    engine: object = field(repr=False, default=None)
    cfunc: object = field(repr=False, default=None)
    object_file: object = field(repr=False, default=None)

    @property
    def llvm_ir(self) -> str:
        """The generated LLVM IR (before optimisation)."""
        return zlib.decompress(self.llvm_ir_z).decode()

    def get_kernel_source(self) -> str:
        return self.llvm_ir


# ----------------------------------------------------------------------------- compiling


def _cache_key(text: str, chip: str, t: HostTarget, feats: dict) -> str:
    h = hashlib.sha256()
    for part in (text, chip, BACKEND_VERSION, t.triple, t.cpu, t.features,
                 json.dumps(feats, sort_keys=True)):
        h.update(part.encode())
        h.update(b"\0")
    return h.hexdigest()


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
    pto = llvm.create_pipeline_tuning_options(speed_level=3)
    pto.loop_vectorization = False
    pto.slp_vectorization = False
    pb = llvm.create_pass_builder(t.tm, pto)
    pb.getModulePassManager().run(mod, pb)
    return t.tm.emit_object(mod)


def _load_object(obj: bytes, t: HostTarget):
    engine = llvm.create_mcjit_compiler(llvm.parse_assembly(""), t.new_machine())
    ref = llvm.ObjectFileRef.from_data(obj)
    engine.add_object_file(ref)
    engine.finalize_object()
    addr = engine.get_function_address(FN_NAME)
    if not addr:
        raise RuntimeError("kernel symbol not found in the object code")
    return engine, _KERNEL_T(addr), ref


def lower(kernel: Kernel, options: dict | None = None) -> LLVMArtifact:
    from tilelang_mini.ir.printer import print_ir
    options = dict(options or {})
    t = host_target()
    feats = {"bf16": t.bf16 and not options.get("llvm_disable_bf16", False)}
    key = _cache_key(print_ir(kernel), str(options.get("chip", "")), t, feats)
    use_cache = config.cache_enabled()
    path = config.cache_dir() / "llvm" / f"{key}.bin" if use_cache else None
    if path is not None:
        entry = _cache_read(path)
        if entry is not None:
            meta, ir_z, obj = entry
            try:
                with _LOCK:
                    engine, cfunc, ref = _load_object(obj, t)
            except Exception:  # an entry that does not load is recompiled
                STATS["cache_corrupt"] += 1
            else:
                STATS["cache_hits"] += 1
                errors = [(m, Loc(f, ln, c) if f is not None else None)
                          for m, f, ln, c in meta["errors"]]
                return LLVMArtifact(kernel, errors, meta["scratch_bytes"], key, True, ir_z,
                                    engine, cfunc, ref)
    from .codegen import build
    try:
        module, gen = build(kernel, feats)
    except CompileError:
        raise
    except RecursionError:
        raise CompileError("kernel too deeply nested for the llvm backend", kernel.loc) from None
    except Exception as err:  # a construct the code generator does not handle
        raise CompileError(f"the llvm backend cannot compile this kernel "
                           f"({type(err).__name__}: {err})", kernel.loc) from err
    text = str(module)
    with _LOCK:
        try:
            obj = _compile_module(text, gen.needs_dpbf16, t)
            engine, cfunc, ref = _load_object(obj, t)
        except RuntimeError as err:  # LLVM rejected the module
            raise CompileError(f"LLVM failed to compile the kernel: {err}", kernel.loc) from err
        STATS["compiles"] += 1
    scratch = gen.plan.arena_bytes + gen.temp_bytes
    errors = list(gen.errors)
    ir_z = zlib.compress(text.encode(), 1)
    if path is not None:
        meta = {"scratch_bytes": scratch, "errors": [
            (m, loc.file, loc.line, loc.col) if loc is not None else (m, None, 0, 0)
            for m, loc in errors]}
        _cache_write(path, meta, ir_z, obj)
    return LLVMArtifact(kernel, errors, scratch, key, False, ir_z, engine, cfunc, ref)


# --------------------------------------------------------------------------------- cache


def _cache_read(path):
    try:
        data = path.read_bytes()
    except OSError:
        return None
    try:
        if len(data) < 48 or data[:8] != MAGIC:
            raise ValueError
        digest, (n,) = data[8:40], struct.unpack("<Q", data[40:48])
        payload = data[48:]
        if len(payload) != n or hashlib.sha256(payload).digest() != digest:
            raise ValueError
        (ml,) = struct.unpack("<Q", payload[:8])
        meta = json.loads(payload[8:8 + ml].decode())
        (il,) = struct.unpack("<Q", payload[8 + ml:16 + ml])
        ir_z = payload[16 + ml:16 + ml + il]
        obj = payload[16 + ml + il:]
        return meta, ir_z, obj
    except (ValueError, KeyError, struct.error, UnicodeDecodeError):
        STATS["cache_corrupt"] += 1
        return None


def _cache_write(path, meta, ir_z: bytes, obj: bytes) -> None:
    m = json.dumps(meta).encode()
    payload = struct.pack("<Q", len(m)) + m + struct.pack("<Q", len(ir_z)) + ir_z + obj
    data = MAGIC + hashlib.sha256(payload).digest() + struct.pack("<Q", len(payload)) + payload
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        tmp = path.with_name(f"{path.name}.{os.getpid()}.{threading.get_ident()}.tmp")
        with open(tmp, "wb") as f:
            f.write(data)
        os.replace(tmp, path)
        STATS["cache_stores"] += 1
    except OSError:
        pass  # a cache that cannot be written is not an error


# ------------------------------------------------------------------------------- running

_TLS = threading.local()
_POOL: list = [None, 0]     # the worker pool and its size
_POOL_LOCK = threading.Lock()


def _arena(nbytes: int) -> tuple[np.ndarray, int]:
    buf = getattr(_TLS, "arena", None)
    if buf is None or buf.nbytes < nbytes + 64:
        buf = np.empty(max(nbytes, 64) + 64, np.uint8)
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
    if threads == 1:
        _, scratch = _arena(size)
        code = fn(ptrs, 0, nblocks, scratch)
    else:
        chunk = max(1, nblocks // (threads * 4))
        state = {"next": 0, "code": 0}
        lock = threading.Lock()

        def worker():
            _, scratch = _arena(size)
            while True:
                with lock:
                    lo = state["next"]
                    if lo >= nblocks or state["code"]:
                        return
                    hi = min(nblocks, lo + chunk)
                    state["next"] = hi
                c = fn(ptrs, lo, hi, scratch)
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
    if code:
        message, loc = artifact.errors[code - 1]
        raise CompileError(message, loc)


class LLVMBackend:
    name = "llvm"

    def lower(self, kernel: Kernel, options: dict | None = None) -> LLVMArtifact:
        # Blocks run their cores in program order here: reject an order that breaks a
        # cross-core flag (possible only in hand-written kernels) instead of computing wrongly.
        from tilelang_mini.semantics.order import check_program_order
        check_program_order(kernel)
        return lower(kernel, options)

    def run(self, artifact: LLVMArtifact, args) -> None:
        run(artifact, args)


BACKEND = LLVMBackend()
