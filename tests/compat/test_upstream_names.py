"""Every T.* name the upstream example folders use (tests/compat/upstream_names.txt) means
something here: it is implemented (a value, an operation the frontend knows, a GPU hint) or it is
a located CompileError naming the feature and what to write instead; never 'unknown name', never
an internal error. (`T.to`/`T.contiguous` in the counts are torch's `.T.to(...)`, not T names.)"""
from pathlib import Path

import pytest

import tilelang_mini.language as T
from tilelang_mini import CompileError
from tilelang_mini.errors import InternalCompilerError

NAMES = [ln.strip() for ln in (Path(__file__).parent / "upstream_names.txt").read_text().splitlines()
         if ln.strip() and not ln.startswith("#")]
LOOP_ONLY = {"Persistent"}  # `for bx, by in T.Persistent(...)`: a loop spelling


def kernel_using(name: str):
    src = (f"def main(X: T.Tensor((16,), 'float32')):\n"
           f"    with T.Kernel(1) as bx:\n"
           f"        v = T.{name}  # USE\n")
    fname = f"<names-{name}>"
    import linecache
    linecache.cache[fname] = (len(src), None, src.splitlines(True), fname)
    ns = {"T": T}
    exec(compile(src, fname, "exec"), ns)
    return ns["main"]


@pytest.mark.parametrize("name", [n for n in NAMES if n not in LOOP_ONLY])
def test_every_upstream_name_means_something(name):
    try:
        T.prim_func(kernel_using(name))
    except InternalCompilerError as err:  # pragma: no cover - the failure being tested for
        pytest.fail(f"T.{name}: internal error {err}")
    except CompileError as err:
        msg = str(err)
        assert "unknown name" not in msg, msg
        assert "# USE" in msg, msg  # located at the kernel line
        assert "write" in msg or "use" in msg or "is a statement" in msg or "takes" in msg \
            or "expected" in msg, msg


def test_gpu_only_names_say_what_to_write():
    for name in ("call_extern", "tma_copy", "alloc_barrier", "tcgen05_gemm", "WSScope"):
        with pytest.raises(CompileError) as err:
            T.prim_func(kernel_using(name))
        assert "GPU-only" in str(err.value) and "write" in str(err.value)


def test_gpu_only_with_blocks_say_what_to_write():
    """`with T.ws(1):` (a warp group's block, warp_specialize examples): the GPU-only construct
    is named at its line, not a generic 'expected with T.Kernel'."""
    import linecache
    src = ("def main(X: T.Tensor((16,), 'float32')):\n"
           "    with T.Kernel(1) as bx:\n"
           "        with T.ws(1):  # USE\n"
           "            T.clear(X)\n")
    fname = "<names-with-ws>"
    linecache.cache[fname] = (len(src), None, src.splitlines(True), fname)
    ns = {"T": T}
    exec(compile(src, fname, "exec"), ns)
    with pytest.raises(CompileError) as err:
        T.prim_func(ns["main"])
    msg = str(err.value)
    assert "T.ws is GPU-only" in msg and "T.Scope" in msg and "# USE" in msg, msg


def test_shmem_names_are_multi_device_not_gpu():
    """tilelang-ascend's aclshmem calls (examples/shmem) are an NPU feature across devices: the
    error says so and points at host-side transfers, not 'GPU-only'."""
    for name in ("shmem_get_nbi", "shmem_ub_put_nbi"):
        with pytest.raises(CompileError) as err:
            T.prim_func(kernel_using(name))
        msg = str(err.value)
        assert "multi-device" in msg and "GPU" not in msg and "host code" in msg, msg
