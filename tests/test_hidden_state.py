"""No hidden per-call state: two threads parsing IR at once each get their own error, and the
CLI learns what an example compiled through the runtime's public hook, not by patching it."""
import threading

import pytest

import tilelang_mini
from tilelang_mini import CompileError
from tilelang_mini.ir import parse_ir
from tilelang_mini.runtime import kernel as kernel_module
from tilelang_mini.runtime.kernel import observe_compiles

import kernels

HEAD = ('@prim_func(source="k.py")\n'
        'def k(A: Tensor((256, 128), "float16")):  # 1:1\n'
        '    with Kernel(4) as (bx):  # 1:1\n')
# an open bracket (its message names the bracket), a bad dedent, a late syntax error
BAD = {
    "bracket": HEAD + "        copy(A, A\n        fill(A, 0)\n" + "        fill(A, 1)\n" * 400,
    "dedent": HEAD + "        for i in serial(4):\n            pass\n          pass\n",
    "late": HEAD + "        fill(A, 0)\n" * 300 + "        fill(A, 1 +)\n",
}


def _error(text: str) -> str:
    with pytest.raises(CompileError) as info:
        parse_ir(text, "bad.ir")
    return str(info.value)


def test_threads_parsing_at_once_keep_their_own_errors():
    want = {name: _error(text) for name, text in BAD.items()}
    assert "'(' is never closed" in want["bracket"]
    assert "inconsistent indentation" in want["dedent"]
    assert "expected an expression" in want["late"]
    got = {name: [] for name in BAD}
    start = threading.Barrier(len(BAD))

    def work(name):
        start.wait()
        for _ in range(25):
            got[name].append(_error(BAD[name]))

    threads = [threading.Thread(target=work, args=(name,)) for name in BAD]
    for t in threads:
        t.start()
    for t in threads:
        t.join(timeout=300)
    for name in BAD:
        assert got[name] == [want[name]] * 25, name


def _kernel():
    return kernels.scale_rows(16, 2.0, cols=16, block=16)


def test_compiles_are_observed_through_the_runtime_hook():
    compile_ir = kernel_module._compile_ir
    seen = []
    tilelang_mini.compile(_kernel(), out_idx=[-1], target="numpy")  # before: not observed
    with observe_compiles(seen.append):
        k = tilelang_mini.compile(_kernel(), out_idx=[-1], target="numpy")
    tilelang_mini.compile(_kernel(), out_idx=[-1], target="numpy")  # after: not observed
    assert seen == [k]
    assert kernel_module._compile_ir is compile_ir  # nothing was swapped
