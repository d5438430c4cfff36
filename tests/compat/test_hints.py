"""TileLang's GPU scheduling hints are accepted and recorded in the IR (`Kernel.hints`: printed
in the header, parsed back, kept through lowering); the kernel computes what it would without
them, on every target and simulated, against a float64 NumPy reference."""
import tilelang_mini as tilelang
import tilelang_mini.language as T
from tilelang_mini.ir.parser import parse_ir
from tilelang_mini.ir.printer import print_ir

from util import close, f64, rand

M = N = K = 64


@T.prim_func
def hinted(A: T.Tensor((M, K), "float16"), B: T.Tensor((K, N), "float16"),
           C: T.Tensor((M, N), "float32")):
    with T.Kernel(2, 2, threads=128) as (bx, by):
        T.use_swizzle(panel_size=10, enable=True)
        T.func_attr({"tir.noalias": True})
        T.no_set_max_nreg()
        A_s = T.alloc_shared((32, K), "float16")
        B_s = T.alloc_shared((K, 32), "float16")
        C_l = T.alloc_fragment((32, 32), "float32")
        T.annotate_layout({A_s: None})
        T.copy(A[by * 32, 0], A_s, disable_tma=True)
        T.copy(B[0, bx * 32], B_s)
        T.gemm(A_s, B_s, C_l, clear_accum=True, policy=T.GemmWarpPolicy.FullRow)
        T.sync_threads()
        T.copy(C_l, C[by * 32, bx * 32])


def test_hints_recorded_printed_parsed(target):
    hints = hinted.ir.hints
    want = ["threads=128", "T.use_swizzle(panel_size=10, enable=True)",
            "T.func_attr({'tir.noalias': True})", "T.no_set_max_nreg()",
            "T.annotate_layout({A_s: None})", "disable_tma=True",
            "policy=T.GemmWarpPolicy.FullRow", "T.sync_threads()"]
    assert [h.split(" @ ")[0] for h in hints] == want
    assert hints[1].endswith(f"@ {hinted.fn.__code__.co_firstlineno + 4}:9")
    text = print_ir(hinted.ir)
    assert 'hints=["threads=128 @' in text.splitlines()[0]
    assert parse_ir(text) == hinted.ir and parse_ir(text).hints == hints
    kernel = tilelang.compile(hinted, out_idx=[-1], target=target)
    assert kernel.ir.hints == hints  # kept through lowering
    assert parse_ir(print_ir(kernel.ir)) == kernel.ir
    a, b = rand((M, K), "float16", 1), rand((K, N), "float16", 2)
    close(kernel(a, b), f64(a) @ f64(b), reduce_len=K)
    if target == "numpy":
        close(kernel.simulate(a, b)[0], f64(a) @ f64(b), reduce_len=K)
