"""plan_memory shares L0C (and any scope) bytes between accumulators whose values do not live
across the loop iterations that use them, when the scope would not fit otherwise: the D=512
attention shape of tilelang-ascend's examples (a 64x64 S and a 64x512 O float32 accumulator =
144 KiB in the 128 KiB L0C of ascend910b; upstream places both at L0C address 0 by hand).
Also: a developer-mode kernel reading a workspace before it writes it (tilelang-ascend's
AUTO_CV_COMBINE form) is a located error, not a wrong number; T.max/T.min on Python
ints answer `.value` (TileLang's IntImm)."""
import numpy as np
import pytest

import tilelang_mini as tilelang
import tilelang_mini.language as T
from tilelang_mini import CompileError
from tilelang_mini.ir.nodes import Alloc, walk_statements
from tilelang_mini.transform.plan_memory import _live_ranges

from util import close, f64, rand
from kernels import cube_tiles

BM, D, NK = 64, 512, 2
TARGETS = ("numpy", "llvm")


def two_accumulators(carry=False):
    """Per iteration k: S = Q @ K_k^T (64x64) and O = S16 @ V_k (64x512), each accumulator
    cleared by its gemm (or, with `carry`, O accumulated over k: live across iterations)."""
    @T.prim_func
    def main(Q: T.Tensor((BM, 64), "float16"), K: T.Tensor((NK * BM, 64), "float16"),
             P: T.Tensor((NK, BM, BM), "float16"), V: T.Tensor((NK * BM, D), "float16"),
             S: T.Tensor((NK, BM, BM), "float32"), O: T.Tensor((NK, BM, D), "float32")):
        with T.Kernel(1, is_npu=True) as (cid, vid):
            q_l1 = T.alloc_L1((BM, 64), "float16")
            k_l1 = T.alloc_L1((BM, 64), "float16")
            p_l1 = T.alloc_L1((BM, BM), "float16")
            v_l1 = T.alloc_L1((BM, D), "float16")
            acc_s = T.alloc_L0C((BM, BM), "float32")
            acc_o = T.alloc_L0C((BM, D), "float32")
            T.copy(Q[0:BM, 0:64], q_l1)
            for k in T.serial(NK):
                T.copy(K[k * BM:(k + 1) * BM, 0:64], k_l1)
                T.gemm(q_l1, k_l1, acc_s, transpose_B=True, clear_accum=True)
                T.copy(acc_s, S[k, 0:BM, 0:BM])
                T.copy(P[k, 0:BM, 0:BM], p_l1)
                T.copy(V[k * BM:(k + 1) * BM, 0:D], v_l1)
                T.gemm(p_l1, v_l1, acc_o, clear_accum=not carry)
                T.copy(acc_o, O[k, 0:BM, 0:D])
    return main


def _inputs():
    return (rand((BM, 64), "float16", 1), rand((NK * BM, 64), "float16", 2),
            rand((NK, BM, BM), "float16", 3), rand((NK * BM, D), "float16", 4))


@pytest.mark.parametrize("target", TARGETS)
def test_s_and_o_accumulators_share_l0c(target):
    q, k, p, v = _inputs()
    ks = f64(k).reshape(NK, BM, 64)
    want_s = np.einsum("md,knd->kmn", f64(q), ks)
    want_o = np.einsum("kmn,knd->kmd", f64(p), f64(v).reshape(NK, BM, D))
    kern = tilelang.compile(two_accumulators(), target=target, chip="ascend910b")
    s, o = np.zeros((NK, BM, BM), np.float32), np.zeros((NK, BM, D), np.float32)
    kern(q, k, p, v, s, o)
    close(s, want_s, "float16", 64)
    close(o, want_o, "float16", BM)
    if target == "numpy":
        s2, o2 = np.zeros_like(s), np.zeros_like(o)
        kern.simulate(q, k, p, v, s2, o2)
        close(s2, want_s, "float16", 64)
        close(o2, want_o, "float16", BM)
        l0c = {a.buffer.name: a.offset for a in walk_statements(kern.compilation.stages["plan_memory"].body)
               if isinstance(a, Alloc) and a.buffer.scope == "L0C"}
        assert l0c["acc_s"] == l0c["acc_o"] == 0, l0c  # the overlap is what made it fit


def test_loop_carried_accumulator_still_overflows():
    """O accumulated over the loop is live across iterations: no sharing, a located overflow."""
    with pytest.raises(CompileError) as err:
        tilelang.compile(two_accumulators(carry=True), target="numpy", chip="ascend910b")
    assert "L0C overflow on ascend910b" in str(err.value) and "acc_o" in str(err.value)
    assert "test_l0c_reuse.py" in str(err.value)  # at the kernel's allocation


def test_fits_without_sharing_on_the_larger_l0c():
    """ascend950's 256 KiB L0C holds both: the ordinary plan (no sharing) is kept there."""
    kern = tilelang.compile(two_accumulators(), target="numpy", chip="ascend950")
    l0c = {a.buffer.name: a.offset for a in walk_statements(kern.compilation.stages["plan_memory"].body)
           if isinstance(a, Alloc) and a.buffer.scope == "L0C"}
    assert l0c["acc_s"] != l0c["acc_o"]


def test_within_iteration_ranges_keep_a_read_before_the_write():
    """A buffer read at the top of an iteration before its overwrite carries its value: its
    range is the whole loop even with within_iteration."""
    kern = tilelang.compile(two_accumulators(carry=True), target="numpy", chip="ascend950")
    body = kern.compilation.stages["pipeline"].body
    coarse, fine = _live_ranges(body), _live_ranges(body, within_iteration=True)
    assert fine["acc_o"] == coarse["acc_o"]
    assert fine["acc_s"][1] - fine["acc_s"][0] < coarse["acc_s"][1] - coarse["acc_s"][0]


def cv_combine_kernel():
    """The AUTO_CV_COMBINE form: the cube reads workspace_2 before the vector code below writes it."""
    @tilelang.jit(out_idx=[2], workspace_idx=[3, 4])
    def f():
        @T.prim_func
        def main(A: T.Tensor((64, 64), "float16"), B: T.Tensor((64, 64), "float16"),
                 C: T.Tensor((64, 64), "float32"), workspace_1: T.Tensor((64, 64), "float32"),
                 workspace_2: T.Tensor((64, 64), "float16")):
            with T.Kernel(1, is_npu=True) as (cid, vid):
                a_l1, b_l1, c_l0 = cube_tiles(64, 64, 64)
                x_ub = T.alloc_ub((32, 64), "float32")
                h_ub = T.alloc_ub((32, 64), "float16")
                T.copy(workspace_2[0:64, 0:64], a_l1)
                T.copy(B[0:64, 0:64], b_l1)
                T.gemm_v0(a_l1, b_l1, c_l0, init=True)
                T.copy(c_l0, C[0:64, 0:64])
                T.copy(A[vid * 32:vid * 32 + 32, 0:64], h_ub)
                T.copy(h_ub, workspace_2[vid * 32:vid * 32 + 32, 0:64])
                T.copy(workspace_1[0:32, 0:64], x_ub)
        return main
    return f


def test_workspace_read_before_write_is_located():
    with pytest.raises(CompileError) as err:
        cv_combine_kernel()()
    msg = str(err.value)
    assert "workspace 'workspace_2'" in msg and "TL_ASCEND_AUTO_CV_COMBINE" in msg
    assert "T.Scope" in msg and "test_l0c_reuse.py" in msg


def test_intimm_value_of_trace_time_min_max():
    n = T.max(T.ceildiv(128 * 512 * 2, 64 * 1024), 1)
    assert n == 2 and n.value == 2 and type(n.value) is int
    assert T.min(3, 2).value == 2 and T.ceildiv(7, 2) == 4
    assert T.max(1.5, 2.5).value == 2.5


def gather_rows():
    """deepseek_v4 sparse_attention's gather: every iteration rewrites all rows of `rows`, each
    row by one of two copies (a looked-up row or zeros for index -1)."""
    @T.prim_func
    def main(X: T.Tensor((32, 64), "float32"), Idx: T.Tensor((32,), "int32"),
             Out: T.Tensor((32, 64), "float32")):
        with T.Kernel(1, is_npu=True) as (cid, vid):
            rows = T.alloc_ub((16, 64), "float32")
            zero = T.alloc_ub((64,), "float32")
            idx_ub = T.alloc_ub((16,), "int32")
            T.tile.fill(zero, 0.0)
            for t in T.serial(2):
                T.copy(Idx[t * 16:(t + 1) * 16], idx_ub)
                for r in T.serial(16):
                    if idx_ub[r] != -1:
                        T.copy(X[idx_ub[r], :], rows[r, :])
                    else:
                        T.copy(zero, rows[r, :])
                T.copy(rows, Out[t * 16:(t + 1) * 16, :])
    return main


@pytest.mark.parametrize("target", TARGETS)
def test_row_by_row_overwrite_is_not_carried(target):
    x = rand((32, 64), "float32", 5)
    idx = np.random.default_rng(6).integers(0, 32, 32).astype(np.int32)
    idx[[3, 20]] = -1
    want = np.where((idx != -1)[:, None], f64(x)[np.where(idx == -1, 0, idx)], 0.0)
    kern = tilelang.compile(gather_rows(), target=target)
    out = np.full((32, 64), 7.0, np.float32)
    kern(x, idx, out)
    close(out, want)
    if target == "numpy":
        out2 = np.full((32, 64), 7.0, np.float32)
        kern.simulate(x, idx, out2)
        close(out2, want)
        body = kern.compilation.stages["pipeline"].body
        coarse, fine = _live_ranges(body), _live_ranges(body, within_iteration=True)
        assert fine["rows"][1] - fine["rows"][0] < coarse["rows"][1] - coarse["rows"][0]
        assert fine["zero"] == coarse["zero"]  # read every iteration, written before the loop
