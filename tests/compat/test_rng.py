"""T.rng_init / T.rng_rand / T.rng_rand_float (TileLang's rand example): cuRAND's Philox4x32-10
stream, on every target and simulated, against a NumPy Philox checked on Random123's
known-answer vectors."""
import numpy as np
import pytest

import tilelang_mini as tilelang
import tilelang_mini.language as T
from tilelang_mini import CompileError
from tilelang_mini.testing.references import philox4x32_10, philox_stream as stream


def test_reference_known_answers():
    """Random123's kat_vectors for philox4x32 10 rounds."""
    assert philox4x32_10([[0, 0, 0, 0]], (0, 0)).tolist() == [
        [0x6627E8D5, 0xE169C58D, 0xBC57AC4C, 0x9B00DBD8]]
    assert philox4x32_10([[0xFFFFFFFF] * 4], (0xFFFFFFFF, 0xFFFFFFFF)).tolist() == [
        [0x408F276D, 0x41C83B0E, 0xA20BC7C6, 0x6D5451FD]]
    assert philox4x32_10([[0x243F6A88, 0x85A308D3, 0x13198A2E, 0x03707344]],
                         (0xA4093822, 0x299F31D0)).tolist() == [
        [0xD16CFE09, 0x94FDCCEB, 0x5001E420, 0x24126EA1]]


@tilelang.jit
def rand_1d(M=1024, seed=42):
    num_per_thread = 128
    threads = 1
    blk_M = num_per_thread * threads

    A = T.empty((M,), "uint32")

    with T.Kernel(T.ceildiv(M, threads * num_per_thread), threads=threads) as bx:
        tx = T.get_thread_binding()
        T.rng_init(seed, 0, bx * blk_M + tx * num_per_thread)
        for i, j in T.Parallel(threads, num_per_thread):
            offsets = (bx * threads + i) * num_per_thread
            idx = offsets + j
            if idx < M:
                A[idx] = T.rng_rand()

    return A


@pytest.mark.parametrize("M, seed", [(512, 123), (200, 2**40 + 7)])
def test_rand_uint(target, monkeypatch, M, seed):
    monkeypatch.setenv("TILELANG_MINI_TARGET", target)
    want = stream(seed, 0, 0, M)
    assert np.array_equal(rand_1d(M, seed), want)
    if target == "numpy":
        kern, args = rand_1d.kernel_for(M=M, seed=seed)
        assert np.array_equal(kern.simulate(*args)[0], want)


def test_rand_float_and_serial_draws(target):
    """Two maps continue one stream; draws in serial code take one output each; floats are
    cuRAND's uniform x * 2^-32 + 2^-33."""
    @T.prim_func
    def main(S: T.Tensor((2,), T.int64), F: T.Tensor((4, 16), T.float32),
             U: T.Tensor((3,), T.uint32)):
        with T.Kernel(1) as _:
            T.rng_init(S[0], S[1], 5)
            f = T.alloc_fragment((4, 16), "float32")
            for i, j in T.Parallel(2, 16):
                f[i, j] = T.rng_rand_float()
            for i, j in T.Parallel(2, 16):
                f[i + 2, j] = T.rng_rand_float(32, "uniform") * 2
            T.copy(f, F)
            for k in T.serial(3):
                U[k] = T.rng_rand()

    kernel = tilelang.compile(main, out_idx=[1, 2], target=target)
    seed, seq = 0x1234567890, 3
    s = np.array([seed, seq], np.int64)
    x = stream(seed, seq, 5, 67)
    uni = x[:64].astype(np.float64) * 2.0 ** -32 + 2.0 ** -33
    want_f = uni.reshape(4, 16) * np.array([1, 1, 2, 2])[:, None]
    outs = [kernel(s)] + ([kernel.simulate(s)[0]] if target == "numpy" else [])
    for f, u in outs:
        np.testing.assert_allclose(f, want_f, rtol=1e-6)
        assert np.array_equal(u, x[64:])


def test_rng_errors():
    def build(body):
        @T.prim_func
        def main(Y: T.Tensor((16,), T.uint32)):
            with T.Kernel(1) as _:
                body(Y)
        return main

    def no_init(Y):
        for i in T.Parallel(16):
            Y[i] = T.rng_rand()

    def two_draws(Y):
        T.rng_init(1, 0, 0)
        for i in T.Parallel(16):
            Y[i] = T.rng_rand() + T.rng_rand()

    def no_seq(Y):
        T.rng_init(1)

    def normal(Y):
        T.rng_init(1, 0, 0)
        for i in T.Parallel(16):
            Y[i] = T.cast(T.rng_rand_float(32, "normal"), "uint32")

    for body, words in ((no_init, "before T.rng_init"), (two_draws, "one T.rng_rand per"),
                        (no_seq, "pass the subsequence"), (normal, "Box-Muller")):
        with pytest.raises(CompileError) as err:
            build(body)
        msg = str(err.value)
        assert words in msg and "test_rng.py" in msg, (body.__name__, msg)
