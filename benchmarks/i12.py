"""The issue-12 rows of benchmarks/bench.py: skinny GEMM and prenorm on llvm, the numpy
interpreter against direct NumPy (and the Triton interpreter when installed), the simulator and
the estimate, compile time of every example and of the sync/split passes, import time.

Each worker runs in its own process like bench.py's (OPENBLAS_CORETYPE / OPENBLAS_L2_SIZE
removed) and returns rows; every row is a ratio against its peer measured in the same run."""
from __future__ import annotations

import os
import statistics
import subprocess
import sys
import time
from dataclasses import asdict

from measure import _check, _env, _examples, _interleaved, _ms, _numpy_threads, _runner


def _row(Row, key, name, value, baseline, ratio, target, ok, **kw):
    """A Row whose verdict is PASS when `ok` (None: information only)."""
    verdict = "-" if ok is None else ("PASS" if ok else "MISS")
    if kw.get("verified") is False:
        verdict = "WRONG"
    return asdict(Row(key, name, value, baseline, ratio, target, verdict, **kw))


# ------------------------------------------------------------------------- skinny GEMM / prenorm


def fma_roof_loop():
    """One thread's fp32 FMA peak as a loop to time: `(run, flops)` where `run(n)` runs n trips
    of 12 independent FMA chains of the host's widest vector (<16 x float> with AVX-512, else
    <8 x float>), JIT-compiled with the host CPU's features like the llvm backend, `flops` per
    trip. 12 chains cover two FMA ports of 4-cycle latency and stay in registers on both
    (16 ymm / 32 zmm): chains wider than a register would spill and measure a low roof."""
    import ctypes
    import llvmlite.binding as llvm
    import llvmlite.ir as ir
    from backends.llvm.runtime import host_target
    f32, i64 = ir.FloatType(), ir.IntType(64)
    ht = host_target()
    lanes, chains = (16 if "+avx512f" in ht.features.split(",") else 8), 12
    vec = ir.VectorType(f32, lanes)
    mod = ir.Module("roof")
    mod.triple = llvm.get_process_triple()
    fn = ir.Function(mod, ir.FunctionType(f32, [i64]), "roof")
    entry, loop, done = (fn.append_basic_block(n) for n in ("entry", "loop", "done"))
    b = ir.IRBuilder(entry)
    fma = ir.Function(mod, ir.FunctionType(vec, [vec, vec, vec]), f"llvm.fma.v{lanes}f32")
    one = ir.Constant(vec, [1.0001] * lanes)
    b.branch(loop)
    b.position_at_end(loop)
    i = b.phi(i64)
    i.add_incoming(ir.Constant(i64, 0), entry)
    accs = []
    for k in range(chains):
        p = b.phi(vec)
        p.add_incoming(ir.Constant(vec, [float(k)] * lanes), entry)
        accs.append(p)
    new = [b.call(fma, [a, one, one]) for a in accs]
    for p, x in zip(accs, new):
        p.add_incoming(x, loop)
    nxt = b.add(i, ir.Constant(i64, 1))
    i.add_incoming(nxt, loop)
    b.cbranch(b.icmp_signed("<", nxt, fn.args[0]), loop, done)
    b.position_at_end(done)
    total = new[0]
    for x in new[1:]:
        total = b.fadd(total, x)
    b.ret(b.extract_element(total, ir.Constant(ir.IntType(32), 0)))
    target = llvm.Target.from_triple(mod.triple).create_target_machine(
        cpu=ht.cpu, features=ht.features, opt=2)
    m = llvm.parse_assembly(str(mod))
    engine = llvm.create_mcjit_compiler(m, target)
    engine.finalize_object()
    roof = ctypes.CFUNCTYPE(ctypes.c_float, ctypes.c_int64)(engine.get_function_address("roof"))
    roof._keep = engine  # the machine code lives as long as the engine
    return roof, chains * lanes * 2


def work_skinny(p: dict, Row) -> dict:
    """fp32 GEMM M x N x K for small N through llvm (the example's default tiles) against NumPy,
    one thread each; prenorm against the fp32 FMA roof and against a NumPy composition."""
    _examples()
    import numpy as np
    import tilelang_mini
    from gemm import matmul
    from prenorm import hc_prenorm, reference as prenorm_reference
    from tilelang_mini.ir import dtypes
    rows = []
    M, K = p["skinny_mk"]
    rng = np.random.default_rng(5)
    a = rng.standard_normal((M, K), dtype=np.float32)
    worst = None
    with _env(TILELANG_MINI_NUM_THREADS="1"), _numpy_threads(1):
        for n in p["skinny_n"]:
            b = rng.standard_normal((K, n), dtype=np.float32)
            c, cn = np.empty((M, n), np.float32), np.empty((M, n), np.float32)
            k = tilelang_mini.compile(matmul.factory(M, n, K, dtype="float32"), out_idx=[-1],
                                      target="llvm")
            run = _runner(k, [a, b, c])
            run()
            err, ok = _check(c, a.astype(np.float64) @ b.astype(np.float64), "float32", K)
            med, _ = _interleaved({"llvm": run, "numpy": lambda: np.matmul(a, b, out=cn)},
                                  p["repeats"], p["warmup"])
            ratio = med["numpy"] / med["llvm"]
            worst = ratio if worst is None else min(worst, ratio)
            rows.append(_row(Row, f"skinny_{n}", f"skinny GEMM fp32 {M}x{n}x{K}, 1 thread",
                             _ms(med["llvm"]), f"{_ms(med['numpy'])} numpy", ratio, ">= 0.9x",
                             ratio >= 0.9, max_err=err, verified=ok))
        Mp, Np, Kp = p["prenorm"]
        ap = rng.standard_normal((Mp, Kp)).astype(dtypes.to_numpy("bfloat16"))
        bp = rng.standard_normal((Np, Kp), dtype=np.float32)
        d, ss = np.empty((Mp, Np), np.float32), np.empty((Mp,), np.float32)
        k = tilelang_mini.compile(hc_prenorm.factory(Mp, Np, Kp), out_idx=[-2, -1],
                                  target="llvm")
        run = _runner(k, [ap, bp, d, ss])
        run()
        want_d, want_s = prenorm_reference(ap, bp)
        (e1, o1), (e2, o2) = _check(d, want_d, "float32", Kp), _check(ss, want_s, "float32", Kp)

        def numpy_prenorm():
            a32 = ap.astype(np.float32)
            return a32 @ bp.T, np.einsum("ij,ij->i", a32, a32)

        # The roof is a peer timed in the same rounds (as much FMA work as prenorm's
        # multiply-adds), so load on the shared machine hits both alike.
        loop, flops = fma_roof_loop()
        trips = int(2.0 * Mp * Np * Kp / flops)
        med, _ = _interleaved({"llvm": run, "numpy": numpy_prenorm, "roof": lambda: loop(trips)},
                              p["repeats"], p["warmup"])
    roof_s = med["roof"]
    roof = trips * flops / roof_s / 1e9
    rows.append(_row(Row, "prenorm_roof", f"prenorm {Mp}x{Np}x{Kp}, 1 thread, vs FMA roof",
                     _ms(med["llvm"]), f"{_ms(roof_s)} FMA roof, same rounds ({roof:.0f} GF/s)",
                     roof_s / med["llvm"], ">= 0.67x (1.5x of roof)",
                     med["llvm"] <= 1.5 * roof_s, max_err=max(e1, e2), verified=o1 and o2,
                     data={"seconds": med["llvm"], "roof_gflops": roof}))
    rows.append(_row(Row, "prenorm_numpy", f"prenorm {Mp}x{Np}x{Kp}, 1 thread, vs NumPy",
                     _ms(med["llvm"]), f"{_ms(med['numpy'])} a32 @ B.T + einsum",
                     med["numpy"] / med["llvm"], ">= 4x", med["numpy"] / med["llvm"] >= 4))
    return {"rows": rows, "info": {"fma_roof_gflops": roof}}


# ------------------------------------------------------------------------------ interpreter


def _elementwise(M, N, bm=64, bn=256):
    """C = A * B + 1 in bm x bn tiles (the interpreter's elementwise case)."""
    import tilelang_mini.language as T

    @T.prim_func
    def elementwise(A: T.Tensor((M, N), "float32"), B: T.Tensor((M, N), "float32"),
                    C: T.Tensor((M, N), "float32")):
        with T.Kernel(T.ceildiv(N, bn), T.ceildiv(M, bm)) as (bx, by):
            a = T.alloc_fragment((bm, bn), "float32")
            b = T.alloc_fragment((bm, bn), "float32")
            T.copy(A[by * bm, bx * bn], a)
            T.copy(B[by * bm, bx * bn], b)
            for i, j in T.Parallel(bm, bn):
                a[i, j] = a[i, j] * b[i, j] + 1.0
            T.copy(a, C[by * bm, bx * bn])
    return elementwise


def _layernorm(M, N, blk_m=16, dtype="float16", eps=1e-5):
    """y = (x - mean) / sqrt(var + eps) * gamma + beta over rows, blk_m rows a block, computed in
    float32 (the interpreter's layernorm case: two reductions and a broadcast of a vector)."""
    import tilelang_mini.language as T

    @T.prim_func
    def layernorm(X: T.Tensor((M, N), dtype), G: T.Tensor((N,), "float32"),
                  Bt: T.Tensor((N,), "float32"), Y: T.Tensor((M, N), dtype)):
        with T.Kernel(T.ceildiv(M, blk_m)) as bx:
            xs = T.alloc_shared((blk_m, N), dtype)
            x = T.alloc_fragment((blk_m, N), "float32")
            sq = T.alloc_fragment((blk_m, N), "float32")
            g = T.alloc_fragment((N,), "float32")
            bt = T.alloc_fragment((N,), "float32")
            mean = T.alloc_fragment((blk_m,), "float32")
            var = T.alloc_fragment((blk_m,), "float32")
            T.copy(X[bx * blk_m, 0], xs)
            T.copy(xs, x)                                   # to float32
            T.copy(G[0], g)
            T.copy(Bt[0], bt)
            T.reduce_sum(x, mean, dim=1)
            for i in T.Parallel(blk_m):
                mean[i] = mean[i] / N
            for i, j in T.Parallel(blk_m, N):
                x[i, j] = x[i, j] - mean[i]
                sq[i, j] = x[i, j] * x[i, j]
            T.reduce_sum(sq, var, dim=1)
            for i in T.Parallel(blk_m):
                var[i] = T.rsqrt(var[i] / N + eps)
            for i, j in T.Parallel(blk_m, N):
                x[i, j] = x[i, j] * var[i] * g[j] + bt[j]
            T.copy(x, Y[bx * blk_m, 0])                     # back to dtype
    return layernorm


def _interp_cases(p: dict):
    """(key, name, kernel, args, direct NumPy, check) of every interpreter case."""
    import math
    import numpy as np
    import tilelang_mini
    from flash_attention import flash_attention, reference as fa_reference
    from gemm import matmul
    from rmsnorm import rms_norm, reference as rms_reference
    from softmax import softmax, reference as sm_reference
    rng = np.random.default_rng(9)

    def numpy_kernel(prim, out_idx=(-1,)):
        return tilelang_mini.compile(prim, out_idx=list(out_idx), target="numpy")

    for n in p["interp_gemm"]:
        a = rng.standard_normal((n, n), dtype=np.float32)
        b = rng.standard_normal((n, n), dtype=np.float32)
        yield (f"interp_gemm_{n}", f"interpreter GEMM fp32 {n}^3",
               numpy_kernel(matmul.factory(n, n, n, dtype="float32")), [a, b],
               lambda a=a, b=b: a @ b, lambda o, a=a, b=b: _check(
                   o, a.astype(np.float64) @ b.astype(np.float64), "float32", n))
    for m, n, blk in p["interp_rms"]:
        x = rng.standard_normal((m, n), dtype=np.float32)

        def direct(x=x):
            return x / np.sqrt(np.mean(x * x, axis=1, keepdims=True) + 1e-6)
        yield (f"interp_rms_{m}x{n}", f"interpreter RMSNorm fp32 {m}x{n} (blk_m {blk})",
               numpy_kernel(rms_norm.factory(m, n, blk_m=blk)), [x], direct,
               lambda o, x=x: _check(o, rms_reference(x), "float32"))
    m, n = p["interp_softmax"]
    x = rng.standard_normal((m, n), dtype=np.float32)

    def direct_softmax(x=x):
        e = np.exp(x - x.max(axis=1, keepdims=True))
        return e / e.sum(axis=1, keepdims=True)
    yield (f"interp_softmax_{m}x{n}", f"interpreter softmax fp32 {m}x{n}",
           numpy_kernel(softmax.factory(m, n)), [x], direct_softmax,
           lambda o, x=x: _check(o * n, sm_reference(x) * n, "float32"))
    bh, s, d = p["interp_flash"]
    q, k, v = (rng.standard_normal((bh, s, d)).astype(np.float16) for _ in range(3))

    def direct_flash(q=q, k=k, v=v):
        sc = np.matmul(q.astype(np.float32), k.astype(np.float32).transpose(0, 2, 1))
        sc *= np.float32(1 / math.sqrt(d))
        e = np.exp(sc - sc.max(axis=-1, keepdims=True))
        return (e / e.sum(axis=-1, keepdims=True)) @ v.astype(np.float32)
    yield (f"interp_flash_{bh}x{s}x{d}", f"interpreter flash attention fp16 BH={bh} S={s} D={d}",
           numpy_kernel(flash_attention.factory(bh, s, d)), [q, k, v], direct_flash,
           lambda o: _check(o, fa_reference(q, k, v), "float16"))
    for n in p["interp_gemm_small"]:      # small tiles: many blocks, short K steps
        a = rng.standard_normal((n, n), dtype=np.float32)
        b = rng.standard_normal((n, n), dtype=np.float32)
        yield (f"interp_gemm_small_{n}", f"interpreter GEMM fp32 {n}^3, 32x32x32 tiles",
               numpy_kernel(matmul.factory(n, n, n, block_M=32, block_N=32, block_K=32,
                                           dtype="float32")), [a, b],
               lambda a=a, b=b: a @ b, lambda o, a=a, b=b: _check(
                   o, a.astype(np.float64) @ b.astype(np.float64), "float32", n))
    m, n = p["interp_layernorm"]
    x = rng.standard_normal((m, n)).astype(np.float16)
    gam = rng.standard_normal(n, dtype=np.float32)
    bet = rng.standard_normal(n, dtype=np.float32)

    def direct_layernorm(x=x, gam=gam, bet=bet):
        x32 = x.astype(np.float32)
        x32 -= x32.mean(axis=1, keepdims=True)
        inv = 1 / np.sqrt((x32 * x32).mean(axis=1, keepdims=True) + np.float32(1e-5))
        return (x32 * inv * gam + bet).astype(np.float16)

    def layernorm_ref(x=x, gam=gam, bet=bet):
        x64 = x.astype(np.float64)
        x64 = x64 - x64.mean(axis=1, keepdims=True)
        return x64 / np.sqrt((x64 * x64).mean(axis=1, keepdims=True) + 1e-5) * gam + bet
    yield (f"interp_layernorm_{m}x{n}", f"interpreter layernorm fp16 {m}x{n}",
           numpy_kernel(_layernorm(m, n)), [x, gam, bet], direct_layernorm,
           lambda o: _check(o, layernorm_ref(), "float16", n))
    m, n = p["interp_elementwise"]
    a = rng.standard_normal((m, n), dtype=np.float32)
    b = rng.standard_normal((m, n), dtype=np.float32)
    yield (f"interp_elementwise_{m}x{n}", f"interpreter elementwise a*b+1 fp32 {m}x{n}",
           numpy_kernel(_elementwise(m, n)), [a, b], lambda: a * b + np.float32(1.0),
           lambda o: _check(o, a.astype(np.float64) * b + 1.0, "float32"))


def work_interp(p: dict, Row) -> dict:
    """The numpy target (the executable spec) against the same computation in direct NumPy,
    and against the Triton interpreter when triton is installed."""
    _examples()
    rows = []
    for key, name, k, args, direct, check in _interp_cases(p):
        out = k(*args)
        err, ok = check(out)
        med, _ = _interleaved({"interp": lambda: k(*args), "numpy": direct},
                              p["repeats"], p["warmup"])
        ratio = med["numpy"] / med["interp"]
        rows.append(_row(Row, key, name, _ms(med["interp"]), f"{_ms(med['numpy'])} direct NumPy",
                         ratio, ">= 0.2x (within 5x)", ratio >= 0.2, max_err=err, verified=ok))
    rows += _triton_rows(p, Row)
    return {"rows": rows, "info": {}}


def _triton_rows(p: dict, Row) -> list:
    """GEMM and RMSNorm through the Triton interpreter (TRITON_INTERPRET=1, the same tiles)
    against the numpy target; one information row saying why when triton (or torch, which its
    interpreter needs) is not installed."""
    os.environ["TRITON_INTERPRET"] = "1"   # read when triton's kernels are decorated
    try:
        import triton  # noqa: F401
        import torch
    except ImportError as e:
        return [_row(Row, "interp_triton", "interpreter vs the Triton interpreter", "-",
                     f"skipped: {e.name} is not installed (the Triton-interpreter comparison "
                     f"needs triton and torch)", None, "(info)", None)]
    from triton_kernels import triton_matmul, triton_rmsnorm
    rows = []
    for key, name, k, args, _, _ in _interp_cases(p):
        if key.startswith("interp_gemm_"):
            ta, tb = (torch.from_numpy(x) for x in args)
            fn = lambda ta=ta, tb=tb: triton_matmul(ta, tb)                    # noqa: E731
        elif key.startswith("interp_rms_"):
            blk = next(b for m, n, b in p["interp_rms"] if key == f"interp_rms_{m}x{n}")
            fn = lambda t=torch.from_numpy(args[0]), blk=blk: triton_rmsnorm(  # noqa: E731
                t, 1e-6, blk)
        else:
            continue
        med, _ = _interleaved({"interp": lambda k=k, args=args: k(*args), "triton": fn},
                              p["repeats"], p["warmup"])
        ratio = med["triton"] / med["interp"]
        rows.append(_row(Row, key.replace("interp_", "triton_"), name + " vs Triton interpreter",
                         _ms(med["interp"]), f"{_ms(med['triton'])} TRITON_INTERPRET=1", ratio,
                         ">= 50x", ratio >= 50))
    return rows


# ------------------------------------------------------------------------- coroutine mode


def work_coroutine(p: dict, Row) -> dict:
    """An expert flash attention whose cube and vector cores wait on each other (cross-core
    flags both ways inside the key loop: tests/compat/test_cross_core_coroutines.py): no program
    order satisfies the waits, so llvm runs each block's cores as coroutines and the numpy
    target its ordered run. Both against the same computation in direct NumPy, one thread."""
    import math
    from pathlib import Path
    import numpy as np
    import tilelang_mini
    compat = Path(__file__).resolve().parent.parent / "tests" / "compat"
    sys.path.insert(0, str(compat))
    from test_cross_core_coroutines import attention_ref, expert_attention
    rows = []
    with _env(TILELANG_MINI_NUM_THREADS="1"), _numpy_threads(1):
        for shape in p["coro"]:
            heads, seq, dim = shape
            prim = expert_attention(heads, seq, dim).prim_func
            rng = np.random.default_rng(13)
            q, k, v = ((rng.standard_normal(shape) * 0.5).astype(np.float16) for _ in range(3))
            want = attention_ref(q, k, v)
            kl = tilelang_mini.compile(prim, out_idx=[3], workspace_idx=[4, 5, 6], target="llvm")
            err, ok = _check(kl(q, k, v), want, "float16", seq)
            ok = ok and bool(kl.artifact.cores)         # really the coroutine mode

            def direct(q=q, k=k, v=v, dim=dim):
                s = np.matmul(q.astype(np.float32), k.astype(np.float32).transpose(0, 2, 1))
                s *= np.float32(1 / math.sqrt(dim))
                e = np.exp(s - s.max(axis=-1, keepdims=True))
                return ((e / e.sum(axis=-1, keepdims=True)) @ v.astype(np.float32)).astype(
                    np.float16)
            fns = {"llvm": lambda: kl(q, k, v), "numpy": direct}
            with_interp = heads * seq <= p["coro_interp_rows"]
            if with_interp:
                kn = tilelang_mini.compile(prim, out_idx=[3], workspace_idx=[4, 5, 6],
                                           target="numpy")
                e2, o2 = _check(kn(q, k, v), want, "float16", seq)
                err, ok = max(err, e2), ok and o2 and kn.artifact.last_run[0] == "ordered"
                fns["interp"] = lambda: kn(q, k, v)
            runs = max(1, p["repeats"] // 2) if with_interp else p["repeats"]
            med, _ = _interleaved(fns, runs, p["warmup"])
            name = f"expert flash attention, flags both ways, {heads}x{seq}x{dim} fp16"
            r = med["numpy"] / med["llvm"]
            rows.append(_row(Row, f"coro_llvm_{heads}x{seq}x{dim}",
                             f"coroutine mode llvm: {name}", _ms(med["llvm"]),
                             f"{_ms(med['numpy'])} direct NumPy", r, ">= 0.5x (no issue goal)",
                             r >= 0.5, max_err=err, verified=ok))
            if with_interp:
                r = med["numpy"] / med["interp"]
                rows.append(_row(Row, f"coro_interp_{heads}x{seq}x{dim}",
                                 f"coroutine mode numpy target (ordered run): {name}",
                                 _ms(med["interp"]), f"{_ms(med['numpy'])} direct NumPy", r,
                                 ">= 0.2x (within 5x)", r >= 0.2))
                r = med["interp"] / med["llvm"]
                rows.append(_row(Row, f"coro_vs_interp_{heads}x{seq}x{dim}",
                                 "  context: llvm coroutine mode vs the numpy target",
                                 _ms(med["llvm"]), f"{_ms(med['interp'])} numpy target", r,
                                 "(info)", None))
    return {"rows": rows, "info": {}}


# ------------------------------------------------------------------------ simulator, estimate


def work_sim(p: dict, Row) -> dict:
    """Simulated instructions per second (CPU time): the estimate's timing engine and the
    simulator's own timing-only mode on the same blocks; a DeepGEMM-sized grouped GEMM
    estimate (wall time, peak memory of this process)."""
    _examples()
    import resource
    import numpy as np
    import tilelang_mini
    from gemm import matmul
    from tilelang_mini import semantics
    from tilelang_mini.arch import get_chip
    from tilelang_mini.ir import dtypes
    from tilelang_mini.kernels import deep_gemm
    from tilelang_mini.sim.simulator import simulate_kernel, zero_args
    from tilelang_mini.sim.timing import TimingModel
    rows = []
    chip = get_chip("ascend950")
    k = tilelang_mini.compile(matmul.factory(4096, 7168, 16384, block_N=256, dtype="bfloat16"),
                              out_idx=[-1], chip="ascend950")
    model = TimingModel(k.ir, chip, semantics.check_args(k.ir, zero_args(k.ir)))
    blocks = list(range(p["sim_blocks"]))
    model.time_block(0)                                                  # warm-up

    def rate(run, runs=3):
        """Instructions per CPU second of `run()` (which returns its instruction count), the best
        of `runs` runs: one run swings by a third on a shared machine."""
        best = 0.0
        for _ in range(runs):
            t = time.process_time()
            n = run()
            best = max(best, n / max(time.process_time() - t, 1e-9))
        return best

    new = rate(lambda: sum(model.time_block(b).instructions for b in blocks))
    rows.append(_row(Row, "sim_rate", "timing engine of the estimate, GEMM blocks (CPU time)",
                     f"{new / 1e3:.0f}k instr/s", "300k instr/s", new / 300e3,
                     ">= 300k instr/s", new >= 300e3))
    # simulate() itself: timing only (on the estimate's engine; blocks whose instruction streams
    # equal an earlier block's reuse its timing), then with data and race checks (each
    # instruction's NumPy effect and the checks): a GEMM whose arguments fit in memory
    ks = tilelang_mini.compile(matmul.factory(512, 512, 4096, block_N=256, dtype="bfloat16"),
                               out_idx=[-1], chip="ascend950")
    args = [np.zeros(prm.shape, dtypes.to_numpy(prm.dtype)) for prm in ks.ir.params]
    for data, check, label in ((False, False, "simulate(data=False)"),
                               (True, True, "simulate() with data and race checks")):
        simulate_kernel(ks.ir, args, chip, check=check, blocks=[0], data=data)   # warm-up
        count = simulate_kernel(ks.ir, args, chip, check=check, blocks=blocks,
                                data=data).instructions
        r = rate(lambda: simulate_kernel(ks.ir, args, chip, check=check, blocks=blocks,
                                         data=data).instructions)
        rows.append(_row(Row, f"sim_{'data' if data else 'nodata'}_rate",
                         f"{label}, {len(blocks)} GEMM blocks (CPU time, best of 3)",
                         f"{r / 1e3:.0f}k instr/s",
                         f"{new / 1e3:.0f}k instr/s the estimate's engine", r / 300e3,
                         ">= 300k instr/s", r >= 300e3))
    # the bound of the row above: the same blocks' NumPy work alone (the interpreter's plain
    # run of them, block after block: the same instruction effects, no simulation)
    from tilelang_mini.semantics.run import kernel_traits, lower_kernel
    body, bufs = lower_kernel(ks.ir), semantics.check_args(ks.ir, args)
    cid, vid = ks.ir.grid_vars
    scoped = kernel_traits(ks.ir)[0]

    def plain():
        with np.errstate(all="ignore"):
            for b in blocks:
                body(semantics.new_block(bufs, {cid: b, vid: 0}, scoped))
        return count

    plain()
    bound = rate(plain)
    rows.append(_row(Row, "sim_data_bound", "  context: the same blocks' NumPy work alone "
                     "(the interpreter's plain run), as simulated instructions per second",
                     f"{bound / 1e3:.0f}k instr/s", "a bound of simulate() with data",
                     bound / 300e3, "(info)", None))
    G, M, N, K = p["grouped"]
    bf = dtypes.to_numpy("bfloat16")
    a, b = np.empty((M, K), bf), np.empty((G, N, K), bf)
    d, lay = np.empty((M, N), bf), np.repeat(np.arange(G, dtype=np.int32), M // G)
    t = time.perf_counter()
    e = deep_gemm.m_grouped_bf16_gemm_nt_contiguous.estimate(a, b, d, lay, chip="ascend950")
    wall = time.perf_counter() - t
    rss = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1e6   # GB (kB on Linux)
    est = e.kernels[0][1]
    rows.append(_row(Row, "sim_grouped", f"estimate grouped GEMM G={G} {M}x{N}x{K} "
                     f"({est.blocks} blocks)", f"{wall:.2f} s, {rss:.2f} GB peak",
                     f"{est.instructions / 1e6:.1f} M instructions in the launch", 10.0 / wall,
                     "< 10 s and < 2 GB", wall < 10 and rss < 2))
    # the masked form, data-dependent: each group's row count read from masked_m (no hint)
    G, M, N, K = p["grouped_masked"]
    a, b, d = np.empty((G, M, K), bf), np.empty((G, N, K), bf), np.empty((G, M, N), bf)
    masked = np.random.default_rng(3).integers(1, M + 1, G).astype(np.int32)
    t = time.perf_counter()
    e = deep_gemm.m_grouped_bf16_gemm_nt_masked.estimate(a, b, d, masked, chip="ascend950")
    wall = time.perf_counter() - t
    rss = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1e6
    est = e.kernels[0][1]
    rows.append(_row(Row, "sim_masked", f"estimate masked grouped GEMM G={G} max {M} rows, "
                     f"{N}x{K}, random masked_m ({est.blocks} blocks)",
                     f"{wall:.2f} s, {rss:.2f} GB peak",
                     f"{est.instructions / 1e6:.1f} M instructions in the launch", 10.0 / wall,
                     "< 10 s and < 2 GB", wall < 10 and rss < 2))
    return {"rows": rows, "info": {}}


def work_estimate(p: dict, Row) -> dict:
    """The 950 calibration, the roofs of every example on both chips, a GEMV at its roof."""
    _examples()
    import importlib
    from pathlib import Path
    import tilelang_mini
    from gemm import matmul
    rows = []
    for dtype, published in (("bfloat16", 2229.9), ("float8_e4m3fn", 1117.6)):
        k = tilelang_mini.compile(matmul.factory(4096, 7168, 16384, block_M=128, block_N=256,
                                                 block_K=64, num_stages=2, dtype=dtype),
                                  out_idx=[-1], chip="ascend950")
        est = k.estimate()
        rows.append(_row(Row, f"calib_{dtype}", f"estimate 950 GEMM 4096x7168x16384 {dtype}",
                         f"{est.time_us:.1f} us", f"{published} us published",
                         published / est.time_us, "within 10%",
                         abs(est.time_us / published - 1) <= 0.10))
    worst, count, lib = 0.0, 0, 0

    def against_roofs(est):
        """The highest of the estimate's roofline points over its roof, and of its compulsory
        HBM time and its compute time over its estimated time."""
        out = est.gm_bytes / (est.bandwidth_tbps * 1e12) / est.time_s
        if est.flops and est.peak_tflops:
            out = max(out, est.flops / (est.peak_tflops * 1e12) / est.time_s)
        for pt in est.roofline_points():
            out = max(out, pt.tflops / pt.roof_tflops if pt.roof_tflops else 0.0)
        return out

    for path in sorted(Path(__file__).resolve().parent.parent.glob("examples/[a-z]*.py")):
        mod = importlib.import_module(path.stem)
        for obj in vars(mod).values():
            if type(obj).__name__ == "JITFactory" and hasattr(mod, "DEFAULT_ARGS") \
                    and obj.factory.__module__ == mod.__name__:
                for chip in ("ascend910b", "ascend950"):
                    k = tilelang_mini.compile(obj.factory(*mod.DEFAULT_ARGS), out_idx=obj.out_idx,
                                              chip=chip)
                    worst = max(worst, against_roofs(k.estimate()))
                    count += 1
    # every launch of every library function (the examples deepgemm, flash_mla, mhc, ... call
    # them), at the small shapes of kernel_estimates.py
    import kernel_estimates as ke
    from tilelang_mini.errors import TileLangMiniError
    for _, _, f, args, kwargs, _ in ke.rows(small=True):
        for chip in ke.CHIPS:
            try:
                est = f.estimate(*args, chip=chip, **kwargs)
            except (ValueError, TileLangMiniError):
                continue                    # a call the chip rejects
            for _, k in est.kernels:
                worst = max(worst, against_roofs(k))
                lib += 1
    rows.append(_row(Row, "roofs", f"roofline: {count} example estimates and {lib} library "
                     f"launches (both chips)",
                     f"highest point at {worst:.2f} of its roof", "HBM and L2 roofs, HBM floor",
                     worst, "<= 1.00", worst <= 1.0 + 1e-9))
    k = tilelang_mini.compile(matmul.factory(16, 8192, 8192, block_M=16, dtype="float16"),
                              out_idx=[-1], chip="ascend950")
    est = k.estimate()
    floor_us = est.hbm_bytes / (est.bandwidth_tbps * 1e12) * 1e6
    rows.append(_row(Row, "gemv_roof", "estimate GEMV 16x8192x8192 fp16 on 950",
                     f"{est.time_us:.1f} us ({est.bottleneck})", f"{floor_us:.1f} us HBM roof",
                     floor_us / est.time_us, "at the roof (>= 0.95x)",
                     floor_us / est.time_us >= 0.95))
    return {"rows": rows, "info": {}}


# ------------------------------------------------------------------------------ compile, import


def work_compile_all(p: dict, Row) -> dict:
    """Compile (cache off) of every example at its default shape through llvm, after one warm-up
    compile (imports and LLVM loaded); insert_sync and split_cores on an unrolled kernel of 16
    and 64 steps (4x the statements: linear is 4x the time)."""
    _examples()
    import importlib
    from pathlib import Path
    import tilelang_mini
    from tilelang_mini.runtime.kernel import compile as tl_compile
    rows = []
    with _env(TILELANG_MINI_CACHE="0"):
        from gemm import matmul
        tl_compile(matmul.factory(64, 64, 64), out_idx=[-1], target="llvm")   # warm-up
        for path in sorted(Path(__file__).resolve().parent.parent.glob("examples/[a-z]*.py")):
            if p["compile_examples"] and path.stem not in p["compile_examples"]:
                continue
            mod = importlib.import_module(path.stem)
            for obj in vars(mod).values():
                if type(obj).__name__ == "JITFactory" and hasattr(mod, "DEFAULT_ARGS") \
                        and obj.factory.__module__ == mod.__name__:
                    ts = []
                    for _ in range(p["compile_runs"]):
                        prim = obj.factory(*mod.DEFAULT_ARGS)
                        t = time.perf_counter()
                        tl_compile(prim, out_idx=obj.out_idx, target="llvm")
                        ts.append(time.perf_counter() - t)
                    s = statistics.median(ts)
                    rows.append(_row(Row, f"compile_{path.stem}", f"cold compile {path.stem} "
                                     f"{tuple(mod.DEFAULT_ARGS)} llvm", _ms(s), "0.5 s",
                                     0.5 / s, "< 0.5 s", s < 0.5))
        from compile_time import unrolled as _unrolled
        from tilelang_mini.transform.pipeline import run_pipeline
        secs = {}
        small, big = p["unroll"]
        for n in (small, big):   # best of 3 per pass, as compile_time.py's scale table
            runs = [run_pipeline(_unrolled(n).ir, verify=False).seconds for _ in range(3)]
            secs[n] = {name: min(r.get(name, 0.0) for r in runs) for name in runs[0]}
    more = big / small
    for name in ("split_cores", "insert_sync"):
        a, b = secs[small].get(name, 0.0), secs[big].get(name, 0.0)
        growth = b / a if a else float("inf")
        rows.append(_row(Row, f"scale_{name}", f"{name}: {big} vs {small} unrolled steps",
                         f"{_ms(b)} / {_ms(a)}", f"{more:.1f}x the statements", more / growth,
                         f"<= {1.25 * more:.1f}x the time (linear)", growth <= 1.25 * more))
    return {"rows": rows, "info": {}}


def work_import(p: dict, Row) -> dict:
    """`python -c "import tilelang_mini"` against `import numpy`, fresh processes, medians."""
    env = dict(os.environ)

    def run(stmt):
        ts = []
        for _ in range(p["import_runs"]):
            t = time.perf_counter()
            subprocess.run([sys.executable, "-c", stmt], env=env, check=True)
            ts.append(time.perf_counter() - t)
        return statistics.median(ts)

    t_np, t_tl = run("import numpy"), run("import tilelang_mini")
    return {"rows": [_row(Row, "import", "python -c 'import tilelang_mini'", _ms(t_tl),
                          f"{_ms(t_np)} import numpy", t_np / t_tl, ">= 0.77x (<= 1.3x numpy)",
                          t_tl <= 1.3 * t_np)], "info": {}}


WORKERS = {"skinny": work_skinny, "interp": work_interp, "coroutine": work_coroutine,
           "sim": work_sim,
           "estimate": work_estimate, "compile_all": work_compile_all, "import": work_import}
