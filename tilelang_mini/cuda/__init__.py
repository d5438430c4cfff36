"""TileLang's `tilelang.cuda` package (CUDA intrinsics: the warp MMA emitters of
`cuda.intrinsics.macro.mma_macro_generator`, the ldmatrix layouts of `cuda.intrinsics.layout`,
...). Its modules import, so an example's imports and definitions run; every name in them is a
stub whose use is a CompileError at the user's line naming it: the cube unit has no warps or
per-thread fragments, a kernel writes T.gemm / T.copy on tiles instead.

    from tilelang.cuda.intrinsics.macro.mma_macro_generator import TensorCoreIntrinEmitter
    emitter = TensorCoreIntrinEmitter(...)   ->  CompileError at this line
"""
from __future__ import annotations

import importlib.abc
import importlib.machinery
import sys
import types

from ..errors import CompileError
from ..ir.nodes import Loc

ADVICE = ("the cube unit has no warps or per-thread MMA fragments: write T.gemm (and T.copy) on "
          "tiles")


def _caller_loc(depth: int) -> Loc:
    """The file:line:col of the frame `depth` levels above the caller."""
    f = sys._getframe(depth + 1)
    line, col = f.f_lineno, 1
    positions = list(f.f_code.co_positions())
    if 0 <= f.f_lasti // 2 < len(positions):
        pos = positions[f.f_lasti // 2]
        line, col = pos[0] or line, (pos[2] or 0) + 1
    return Loc(f.f_code.co_filename, line, col)


class CudaOnly:
    """A name of tilelang.cuda: calling it (or reading an attribute of it) is the error."""

    def __init__(self, path: str):
        self._path = path

    def _fail(self):
        pkg = self._path.split(".")[1]  # cuda, or rocm (tilelang.rocm: the same stubs)
        kind = "ROCm" if pkg == "rocm" else "CUDA"
        return CompileError(f"{self._path} is {kind}-only (tilelang.{pkg}) and has no meaning "
                            f"on the Ascend machine model; {ADVICE}", _caller_loc(2))

    def __call__(self, *args, **kwargs):
        raise self._fail()

    def __getattr__(self, name):
        if name.startswith("_"):  # probes such as the frontend's `_tl_name`
            raise AttributeError(name)
        raise self._fail()

    def __repr__(self):
        return f"<CUDA-only {self._path}>"


class _StubModule(types.ModuleType):
    def __getattr__(self, name):
        if name.startswith("__"):
            raise AttributeError(name)
        return CudaOnly(f"{self.__name__.replace('tilelang_mini', 'tilelang', 1)}.{name}")


class _Finder(importlib.abc.MetaPathFinder, importlib.abc.Loader):
    """Any `tilelang_mini.cuda.<a>.<b>...` (or `tilelang_mini.rocm.<a>...`) module imports as a
    package of stubs."""

    def find_spec(self, fullname, path=None, target=None):
        if fullname.startswith((__name__ + ".", "tilelang_mini.rocm.")):
            return importlib.machinery.ModuleSpec(fullname, self, is_package=True)
        return None

    def create_module(self, spec):
        module = _StubModule(spec.name)
        module.__path__ = []
        return module

    def exec_module(self, module):
        pass


if not any(isinstance(f, _Finder) for f in sys.meta_path):
    sys.meta_path.append(_Finder())


def __getattr__(name):
    if name.startswith("__"):
        raise AttributeError(name)
    return CudaOnly(f"tilelang.cuda.{name}")

