"""tilelang-ascend's carver host code: `carver.MatmulTemplate(M=, N=, K=, in_dtype=, ...)
.with_arch(Ascend()).recommend_hints(topk)` gives GEMM tile shapes (`hint.block`,
`hint.rstep`) that divide the problem and fit the cube's buffers; the configurations built
from them drive `@autotune` over a developer-mode kernel (no T.Scope), whose result is the
GEMM on both targets and in the simulator (float64 NumPy reference)."""
import numpy as np
import pytest

import tilelang_mini as tilelang
import tilelang_mini.language as T
from tilelang_mini import carver
from tilelang_mini.carver.arch.ascend import Ascend
from tilelang_mini.arch import get_chip

from util import close, f64, rand


def hints(M, N, K, topk=6):
    t = carver.MatmulTemplate(M=M, N=N, K=K, in_dtype="float16", accum_dtype="float16",
                              out_dtype="float16").with_arch(Ascend())
    return t.recommend_hints(topk=topk)


@pytest.mark.parametrize("M, N, K", [(1024, 1024, 1024), (256, 512, 128), (96, 48, 80)])
def test_hints_divide_and_fit(M, N, K):
    chip = get_chip("ascend910b")
    hs = hints(M, N, K)
    assert hs, "no hint"
    for h in hs:
        (bm, bn), (bk,) = h.block, h.rstep
        assert M % bm == 0 and N % bn == 0 and K % bk == 0, h
        assert bm * bk * 2 <= chip.capacity_of("L0A") and bk * bn * 2 <= chip.capacity_of("L0B")
        assert bm * bn * 4 <= chip.capacity_of("L0C")
    assert len({(tuple(h.block), tuple(h.rstep)) for h in hs}) == len(hs)


def tuned_matmul(M, N, K):
    configs = [{"block_M": h.block[0], "block_N": h.block[1], "K_L1": h.rstep[0]}
               for h in hints(M, N, K, topk=3)]

    @tilelang.autotune(configs=configs)
    @tilelang.jit(out_idx=[-1])
    def matmul(M, N, K, block_M, block_N, K_L1):
        @T.prim_func
        def main(A: T.Tensor((M, K), "float16"), B: T.Tensor((K, N), "float16"),
                 C: T.Tensor((M, N), "float16")):
            with T.Kernel((M // block_M) * (N // block_N), is_npu=True) as (cid, _):
                bx, by = cid // (N // block_N), cid % (N // block_N)
                a = T.alloc_shared((block_M, K_L1), "float16")
                b = T.alloc_shared((K_L1, block_N), "float16")
                c = T.alloc_fragment((block_M, block_N), "float")
                for k in T.serial(K // K_L1):
                    T.copy(A[bx * block_M, k * K_L1], a)
                    T.copy(B[k * K_L1, by * block_N], b)
                    T.gemm_v0(a, b, c, init=(k == 0))
                T.copy(c, C[bx * block_M, by * block_N])
        return main
    return matmul(M, N, K)


@pytest.mark.parametrize("target", ["numpy", "llvm"])
def test_autotune_over_hints(target, monkeypatch):
    monkeypatch.setenv("TILELANG_MINI_TARGET", target)
    M, N, K = 128, 256, 128
    kern = tuned_matmul(M, N, K)
    a, b = rand((M, K), "float16", 1), rand((K, N), "float16", 2)
    want = f64(a) @ f64(b)
    close(np.asarray(kern(a, b)), want, "float16", K)
    if target == "numpy":
        got, _ = kern.simulate(a, b)
        close(np.asarray(got), want, "float16", K)


def test_tilelangs_gpu_arch_names_recommend_for_the_ascend_chip():
    """TileLang's examples import `CUDA`, `CDNA` and `roller.rasterization.NoRasterization` at
    module level and build `CUDA("cuda")` for the template: the recommendations are the Ascend
    chip's, the same as with `Ascend()`."""
    from tilelang_mini.carver.arch import CDNA, CUDA
    from tilelang_mini.carver.roller.rasterization import NoRasterization, Rasterization2DRow
    arch = CUDA("cuda")
    assert arch.chip == Ascend().chip == CDNA("hip").chip and arch.target == "cuda"
    t = carver.MatmulTemplate(M=256, N=256, K=128, in_dtype="float16", accum_dtype="float16",
                              out_dtype="float16")
    assert [(h.block, h.rstep) for h in t.with_arch(arch).recommend_hints(topk=4)] == \
        [(h.block, h.rstep) for h in hints(256, 256, 128, topk=4)]
    assert NoRasterization().get_code() == [] and Rasterization2DRow(8).panel_width == 8
