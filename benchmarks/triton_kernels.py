"""GEMM and RMSNorm in Triton with the tiles of examples/gemm.py and examples/rmsnorm.py, for
benchmarks/i12.py's comparison of the numpy target with the Triton interpreter
(TRITON_INTERPRET=1, set by the caller before this module is imported). Needs triton and torch;
only imported when both are installed."""
import torch
import triton
import triton.language as tl


@triton.jit
def _matmul_kernel(a_ptr, b_ptr, c_ptr, M, N, K, BM: tl.constexpr, BN: tl.constexpr,
                   BK: tl.constexpr):
    pid_n, pid_m = tl.program_id(0), tl.program_id(1)
    rm = pid_m * BM + tl.arange(0, BM)
    rn = pid_n * BN + tl.arange(0, BN)
    rk = tl.arange(0, BK)
    acc = tl.zeros((BM, BN), dtype=tl.float32)
    for k in range(0, tl.cdiv(K, BK)):
        kk = k * BK + rk
        a = tl.load(a_ptr + rm[:, None] * K + kk[None, :],
                    mask=(rm[:, None] < M) & (kk[None, :] < K), other=0.0)
        b = tl.load(b_ptr + kk[:, None] * N + rn[None, :],
                    mask=(kk[:, None] < K) & (rn[None, :] < N), other=0.0)
        acc += tl.dot(a, b)
    tl.store(c_ptr + rm[:, None] * N + rn[None, :], acc, mask=(rm[:, None] < M) & (rn[None, :] < N))


def triton_matmul(a, b, bm=128, bn=128, bk=64):
    M, K = a.shape
    N = b.shape[1]
    c = torch.empty((M, N), dtype=torch.float32)
    _matmul_kernel[(triton.cdiv(N, bn), triton.cdiv(M, bm))](a, b, c, M, N, K, bm, bn, bk)
    return c


@triton.jit
def _rmsnorm_kernel(x_ptr, y_ptr, M, N, eps, BM: tl.constexpr, BN: tl.constexpr):
    rows = tl.program_id(0) * BM + tl.arange(0, BM)
    cols = tl.arange(0, BN)
    mask = (rows[:, None] < M) & (cols[None, :] < N)
    x = tl.load(x_ptr + rows[:, None] * N + cols[None, :], mask=mask, other=0.0)
    r = 1.0 / tl.sqrt(tl.sum(x * x, axis=1) / N + eps)
    tl.store(y_ptr + rows[:, None] * N + cols[None, :], x * r[:, None], mask=mask)


def triton_rmsnorm(x, eps, blk_m):
    M, N = x.shape
    y = torch.empty_like(x)
    _rmsnorm_kernel[(triton.cdiv(M, blk_m),)](x, y, M, N, eps, blk_m, triton.next_power_of_2(N))
    return y
