"""The kernels the tests run, as factories returning a `T.prim_func`, each with its `out_idx`.

The example kernels are the examples' own (loaded from examples/*.py, never copied), with small
test-size defaults; `gemm` adds transposed operands and an output dtype to the example's.
`build(factory, *args, target=..., **kw)` compiles one with the factory's `out_idx`."""
# No `from __future__ import annotations` here: the frontend reads T.Tensor annotations as objects.

import importlib.util
import inspect
import sys
from pathlib import Path

import tilelang_mini
import tilelang_mini.language as T

EXAMPLES = Path(__file__).resolve().parents[1] / "examples"


def out_idx(*idx):
    def mark(factory):
        factory.out_idx = list(idx)
        return factory
    return mark


def build(factory, *args, target=None, chip=None, **kwargs):
    return tilelang_mini.compile(factory(*args, **kwargs), out_idx=factory.out_idx,
                                 target=target, chip=chip)


def example_module(stem: str):
    """examples/STEM.py as a module (its `main` is not run)."""
    name = f"tilelang_mini_examples.{stem}"
    if str(EXAMPLES) not in sys.path:  # as `python examples/STEM.py`: examples import each other
        sys.path.append(str(EXAMPLES))
    if name not in sys.modules:
        spec = importlib.util.spec_from_file_location(name, EXAMPLES / f"{stem}.py")
        module = importlib.util.module_from_spec(spec)
        sys.modules[name] = module
        spec.loader.exec_module(module)
    return sys.modules[name]


def from_example(stem: str, attr: str, **test_defaults):
    """The prim_func factory behind examples/STEM.py's `@jit` factory ATTR, with `test_defaults`
    for the arguments a test leaves out."""
    jit_factory = getattr(example_module(stem), attr)
    factory = jit_factory.factory
    sig = inspect.signature(factory)

    def make(*args, **kwargs):
        bound = sig.bind_partial(*args, **kwargs)
        for k, v in test_defaults.items():
            bound.arguments.setdefault(k, v)
        return factory(*bound.args, **bound.kwargs)

    make.__name__, make.__doc__ = attr, factory.__doc__
    make.out_idx = list(jit_factory.out_idx)
    return make


@out_idx(-1)
def gemm(M, N, K, block_M=32, block_N=32, block_K=16, dtype="float32", accum_dtype="float32",
         out_dtype="float32", trans_A=False, trans_B=False, num_stages=2, clear_accum=False):
    """C = op(A) @ op(B); A is (K, M) when trans_A, B is (N, K) when trans_B. `clear_accum`:
    each K step's gemm clears the accumulator, so C is the last K block's product alone."""
    a_shape = (K, M) if trans_A else (M, K)
    b_shape = (N, K) if trans_B else (K, N)

    @T.prim_func
    def main(A: T.Tensor(a_shape, dtype), B: T.Tensor(b_shape, dtype),
             C: T.Tensor((M, N), out_dtype)):
        with T.Kernel(T.ceildiv(N, block_N), T.ceildiv(M, block_M)) as (bx, by):
            A_s, B_s, C_f = gemm_tiles(block_M, block_N, block_K, dtype, accum_dtype,
                                       trans_A, trans_B)
            T.clear(C_f)
            for k in T.Pipelined(T.ceildiv(K, block_K), num_stages=num_stages):
                if trans_A:
                    T.copy(A[k * block_K, by * block_M], A_s)
                else:
                    T.copy(A[by * block_M, k * block_K], A_s)
                if trans_B:
                    T.copy(B[bx * block_N, k * block_K], B_s)
                else:
                    T.copy(B[k * block_K, bx * block_N], B_s)
                T.gemm(A_s, B_s, C_f, transpose_A=trans_A, transpose_B=trans_B,
                       clear_accum=clear_accum)
            T.copy(C_f, C[by * block_M, bx * block_N])

    return main


@out_idx(-1)
def grouped_gemm(M, N, K, G, bm=16, bn=32, bk=32, scaled=False, guarded_epilogue=False):
    """MoE: the rows of block `by` use expert g = MI[by * bm] (-1: none), C = A @ B[g].
    `scaled`: the vector cores then read the scalar too, C *= W[max(g, 0)] after the `if`;
    `guarded_epilogue`: C = C * W[g] + 1 inside `if g >= 0`, with the K loop (code outside the
    cores' Scopes reading a per-core scalar)."""
    @T.prim_func
    def main(A: T.Tensor((M, K), "float16"), B: T.Tensor((G, K, N), "float16"),
             MI: T.Tensor((M,), "int32"), W: T.Tensor((G,), "float32"),
             C: T.Tensor((M, N), "float32")):
        with T.Kernel(N // bn, M // bm) as (bx, by):
            A_s, B_s, C_f = gemm_tiles(bm, bn, bk)
            g = T.alloc_var("int32")
            g = MI[by * bm]
            T.clear(C_f)
            if g >= 0:
                for k in T.Pipelined(K // bk, num_stages=2):
                    T.copy(A[by * bm, k * bk], A_s)
                    T.copy(B[g, k * bk, bx * bn], B_s)
                    T.gemm(A_s, B_s, C_f)
                if guarded_epilogue:
                    for i, j in T.Parallel(bm, bn):
                        C_f[i, j] = C_f[i, j] * W[g] + 1.0
            if scaled:
                for i, j in T.Parallel(bm, bn):
                    C_f[i, j] = C_f[i, j] * W[T.max(g, 0)]
            T.copy(C_f, C[by * bm, bx * bn])
    return main


@out_idx(-2, -1)
def two_phases(M, N):
    """Two phases whose UB tiles plan_memory places on the same bytes."""
    @T.prim_func
    def main(X: T.Tensor((M, N), "float32"), Y: T.Tensor((M, N), "float32"),
             Z: T.Tensor((M, N), "float32")):
        with T.Kernel(1) as bx:
            a = T.alloc_shared((M, N), "float32")
            b = T.alloc_shared((M, N), "float32")
            T.copy(X, a)
            for i, j in T.Parallel(M, N):
                a[i, j] = a[i, j] * 2.0
            T.copy(a, Y)
            T.copy(Y, b)
            for i, j in T.Parallel(M, N):
                b[i, j] = b[i, j] + 1.0
            T.copy(b, Z)
    return main


@T.macro
def ub_round_trip(X, Y, x, row):
    """Rows of X from `row` on through the UB tile x into Y on a vector core, the store ordered
    behind the load (MTE2 -> MTE3)."""
    load_for("MTE3", X[row, 0], x)
    T.copy(x, Y[row, 0])


@T.macro
def l1_to_l0(a1, b1, a0, b0):
    """On the cube: the operand tiles just loaded to L1 (MTE2) moved to L0A/L0B (MTE1), each
    step behind the one before (MTE2 -> MTE1, then MTE1 -> M for the mmad that follows)."""
    T.set_flag("MTE2", "MTE1", 0)
    T.wait_flag("MTE2", "MTE1", 0)
    T.copy(a1, a0)
    T.copy(b1, b0)
    T.set_flag("MTE1", "M", 0)
    T.wait_flag("MTE1", "M", 0)


matmul_add = from_example("matmul_add", "matmul_add", block_M=32, block_N=32, block_K=32)
prenorm = from_example("prenorm", "hc_prenorm", block_M=32, block_N=32, block_K=32)
rmsnorm = from_example("rmsnorm", "rms_norm", blk_m=16)
softmax = from_example("softmax", "softmax", blk_m=16)
attention_tiles = example_module("flash_attention").attention_tiles  # a T.macro of the example
flash_attention = from_example("flash_attention", "flash_attention", block_M=32, block_N=32,
                               num_stages=1)
gemm_expert = from_example("gemm_expert", "gemm_expert", bm=64, bn=64, bk=32)


@out_idx(-1)
def row_blocks(M, N, bm, body, dtype="float32", tile_dtype="float32"):
    """The frame of row-wise kernels: block bx copies its `bm` rows of X (M, N) into the tile x,
    the macro `body(X, x, y, bx)` fills the tile y, and y goes to the same rows of Y."""
    @T.prim_func
    def main(X: T.Tensor((M, N), dtype), Y: T.Tensor((M, N), dtype)):
        with T.Kernel(T.ceildiv(M, bm)) as bx:
            x = T.alloc_fragment((bm, N), tile_dtype)
            y = T.alloc_fragment((bm, N), tile_dtype)
            T.copy(X[bx * bm, 0], x)
            body(X, x, y, bx)
            T.copy(y, Y[bx * bm, 0])
    return main


@out_idx(-1)
def scale_rows(n, factor, cols=32, block=8, bias=None, dtype="float32"):
    """B = A * factor (+ bias) on (n, cols) `dtype` through float32 tiles, `block` rows a block
    (the disk-cache, jit-style and narrow-store tests' kernel)."""
    @T.macro
    def scale(X, x, y, bx):
        for i, j in T.Parallel(block, cols):
            if bias is None:
                y[i, j] = x[i, j] * factor
            else:
                y[i, j] = x[i, j] * factor + bias

    return row_blocks(n, cols, block, scale, dtype)


def scaled_gemm(M, N, K, gran, a_t, b_t, scales="packed"):
    """C = (A * 2^(SA - 127)) @ (B * 2^(SB - 127)) on the ascend950's scaled cube: fp8 operands
    (A [K, M] when a_t, B [N, K] when b_t), one UE8M0 exponent per `gran` K values. `scales`:
    "packed", two exponents per uint16 [ceil(groups / 2), M or N] (the cube's layout), or
    "e8m0", one float8_e8m0fnu per group [M or N, groups]."""
    groups = -(-K // gran)
    if scales == "packed":
        sa_shape, sb_shape, s_dt = (-(-groups // 2), M), (-(-groups // 2), N), "uint16"
    else:
        sa_shape, sb_shape, s_dt = (M, groups), (N, groups), "float8_e8m0fnu"

    @T.prim_func
    def mx_gemm(A: T.Tensor((K, M) if a_t else (M, K), "float8_e4m3fn"),
                SA: T.Tensor(sa_shape, s_dt),
                B: T.Tensor((N, K) if b_t else (K, N), "float8_e4m3fn"),
                SB: T.Tensor(sb_shape, s_dt), C: T.Tensor((M, N), "float32")):
        with T.Kernel(1) as bx:
            a = T.alloc_shared((K, M) if a_t else (M, K), "float8_e4m3fn")
            b = T.alloc_shared((N, K) if b_t else (K, N), "float8_e4m3fn")
            sa = T.alloc_shared(sa_shape, s_dt)
            sb = T.alloc_shared(sb_shape, s_dt)
            c = T.alloc_fragment((M, N), "float32")
            T.copy(A, a)
            T.copy(B, b)
            T.copy(SA, sa)
            T.copy(SB, sb)
            T.gemm(a, b, c, transpose_A=a_t, transpose_B=b_t, clear_accum=True, scale_A=sa,
                   scale_B=sb, scale_gran=gran)
            T.copy(c, C)

    return mx_gemm


# ----------------------------------------------------------------- shared tile helpers (T.macro)


@T.macro
def load_for(pipe, src, tile, event=0):
    """An expert kernel's load: T.copy(src, tile) on MTE2 (`src` a tensor or its start corner
    `X[i, j]`), then pipe `pipe` waits for it (set_flag / wait_flag MTE2 -> pipe on `event`)."""
    T.copy(src, tile)
    T.set_flag("MTE2", pipe, event)
    T.wait_flag("MTE2", pipe, event)


@T.macro
def gemm_tiles(m, n, k, dtype="float16", accum="float32", trans_A=False, trans_B=False):
    """`A_s, B_s, C_f = gemm_tiles(...)`: a gemm's shared operand tiles (A (m, k), B (k, n);
    transposed with trans_A / trans_B) and its (m, n) fragment accumulator."""
    A_s = T.alloc_shared((k, m) if trans_A else (m, k), dtype)
    B_s = T.alloc_shared((n, k) if trans_B else (k, n), dtype)
    C_f = T.alloc_fragment((m, n), accum)
    return A_s, B_s, C_f


@T.macro
def cube_tiles(m, n, k, trans_A=False, trans_B=False, dtype="float16", accum="float32"):
    """`a_l1, b_l1, c_l0 = cube_tiles(...)`: an expert gemm's L1 operand tiles (a (m, k), b
    (k, n); transposed with trans_A / trans_B) and its (m, n) L0C accumulator."""
    a_l1 = T.alloc_L1((k, m) if trans_A else (m, k), dtype)
    b_l1 = T.alloc_L1((n, k) if trans_B else (k, n), dtype)
    c_l0 = T.alloc_L0C((m, n), accum)
    return a_l1, b_l1, c_l0


def scale_bias(M, N, bm):
    """x * s + b per block of bm rows, in place on the row tile; the bias b (N,) is read by
    column and the scale s (1,) by every element."""
    @T.prim_func
    def main(X: T.Tensor((M, N), T.float32), Bi: T.Tensor((N,), T.float32),
             Sc: T.Tensor((1,), T.float32), Y: T.Tensor((M, N), T.float32)):
        with T.Kernel(M // bm) as bx:
            x = T.alloc_fragment((bm, N), T.float32)
            b = T.alloc_fragment((N,), T.float32)
            s = T.alloc_fragment((1,), T.float32)
            T.copy(X[bx * bm, 0], x)
            T.copy(Bi, b)
            T.copy(Sc, s)
            for i, j in T.Parallel(bm, N):
                x[i, j] = x[i, j] * s[0] + b[j]
            T.copy(x, Y[bx * bm, 0])
    return main
