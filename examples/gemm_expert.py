"""Expert-mode GEMM, C = A @ B, hand-synchronised and double-buffered on the cube core.

    python examples/gemm_expert.py [--target numpy|llvm] [--chip ascend910b|ascend950]
                                   [--shape M N K] [--no-simulate]

Everything the developer-mode compiler infers is spelled out: the chip buffers (L1, L0A, L0B,
L0C), the cube scope and the flags between the pipes. Each block computes one bm x bn tile of C.
The K loop is unrolled by two over two buffer sets (ping-pong), set s using event id s:

    MTE2 (GM -> L1)  --MTE2->MTE1 s-->  MTE1 (L1 -> L0A/L0B)  --MTE1->M s-->  M (mmad)
       ^                                   |   ^                                 |
       +------ MTE1->MTE2 s (L1 free) -----+   +------ M->MTE1 s (L0 free) ------+

The two WAR channels (L1 free, L0 free) are primed before the loop (the buffers start free) and
drained after it, so every flag ends clear; M->FIX orders the last mmad before the store of C.
While the cube runs the mmad of set 0, MTE2 loads set 1 and MTE1 can move it to L0.
M, N must be multiples of bm, bn and K a multiple of 2 * bk.
"""
import tilelang_mini
import tilelang_mini.language as T

DEFAULT_ARGS = (256, 256, 512)  # M, N, K


@tilelang_mini.jit(out_idx=[-1])
def gemm_expert(M, N, K, bm=128, bn=128, bk=64, dtype="float16"):
    if M % bm or N % bn or K % (2 * bk):
        raise ValueError(f"gemm_expert needs M % {bm} == N % {bn} == K % {2 * bk} == 0, "
                         f"got M={M} N={N} K={K}")
    nbn = N // bn

    @T.macro
    def buffer_set():
        """One buffer set: its A and B tiles in L1 and in L0A / L0B."""
        A_L1 = T.alloc_L1((bm, bk), dtype)
        B_L1 = T.alloc_L1((bk, bn), dtype)
        A_L0 = T.alloc_L0A((bm, bk), dtype)
        B_L0 = T.alloc_L0B((bk, bn), dtype)
        return A_L1, B_L1, A_L0, B_L0

    @T.prim_func
    def main(A: T.Tensor((M, K), dtype), B: T.Tensor((K, N), dtype),
             C: T.Tensor((M, N), "float32")):
        with T.Kernel((M // bm) * nbn, is_npu=True) as (cid, vid):
            set_0 = buffer_set()
            set_1 = buffer_set()
            sets = ((0, set_0), (1, set_1))  # (event id, tiles) of each set: trace-time
            C_L0 = T.alloc_L0C((bm, bn), "float32")
            with T.Scope("C"):
                row = cid // nbn * bm
                col = cid % nbn * bn
                for s in [0, 1]:  # prime: both buffer sets start free
                    T.set_flag("MTE1", "MTE2", s)  # L1 set s free
                    T.set_flag("M", "MTE1", s)  # L0 set s free
                T.clear(C_L0)
                for ko in T.serial(K // bk // 2):
                    for s, tiles in sets:
                        a_l1, b_l1, a_l0, b_l0 = tiles
                        T.wait_flag("MTE1", "MTE2", s)  # WAR: MTE1 has read L1 set s
                        T.copy(A[row, (ko * 2 + s) * bk], a_l1)
                        T.copy(B[(ko * 2 + s) * bk, col], b_l1)
                        T.set_flag("MTE2", "MTE1", s)  # L1 set s full
                        T.wait_flag("MTE2", "MTE1", s)
                        T.wait_flag("M", "MTE1", s)  # WAR: the mmad has read L0 set s
                        T.copy(a_l1, a_l0)
                        T.copy(b_l1, b_l0)
                        T.set_flag("MTE1", "MTE2", s)  # L1 set s free again
                        T.set_flag("MTE1", "M", s)  # L0 set s full
                        T.wait_flag("MTE1", "M", s)
                        T.gemm(a_l0, b_l0, C_L0)
                        T.set_flag("M", "MTE1", s)  # L0 set s free again
                T.set_flag("M", "FIX", 0)  # C_L0 complete
                T.wait_flag("M", "FIX", 0)
                T.copy(C_L0, C[row, col])
                for s in [0, 1]:  # drain the primed WAR flags
                    T.wait_flag("MTE1", "MTE2", s)
                    T.wait_flag("M", "MTE1", s)

    return main


def reference(a, b):
    """Independent float64 NumPy reference."""
    import numpy as np
    return a.astype(np.float64) @ b.astype(np.float64)


def main(argv=None):
    from _common import gemm_main
    return gemm_main(__doc__, argv, DEFAULT_ARGS,
                     lambda M, N, K, dtype: gemm_expert.factory(M, N, K, dtype=dtype), reference,
                     simulate=True)


if __name__ == "__main__":
    raise SystemExit(main())
