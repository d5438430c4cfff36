"""A small NumPy stand-in for the parts of torch the upstream examples' host code uses (CPU
only; `.cuda()`/`.npu()` return the tensor). For benchmarks/upstream_compat.py, never for the
compiler: tilelang_mini itself never imports torch."""
from __future__ import annotations

import math as _math
import types as _types

import ml_dtypes as _ml
import numpy as _np

float16 = half = _np.dtype(_np.float16)
float32 = float = _np.dtype(_np.float32)
float64 = double = _np.dtype(_np.float64)
bfloat16 = _np.dtype(_ml.bfloat16)
float8_e4m3fn = _np.dtype(_ml.float8_e4m3fn)
float8_e5m2 = _np.dtype(_ml.float8_e5m2)
int8, int16, int32, int64 = (_np.dtype(t) for t in (_np.int8, _np.int16, _np.int32, _np.int64))
uint8 = _np.dtype(_np.uint8)
int = long = int64  # noqa: A001
bool = _np.dtype(_np.bool_)  # noqa: A001
_rng = _np.random.default_rng(0)


class device:  # noqa: N801
    def __init__(self, kind="cpu", *a):
        self.type = str(kind).split(":")[0]


class Tensor(_np.ndarray):
    """An ndarray with torch's method names."""

    def __new__(cls, data):
        return _np.asarray(data).view(cls)

    device = property(lambda self: device("cpu"))
    is_cuda = False

    def cuda(self, *a, **k):
        return self

    npu = cpu = contiguous = cuda

    def half(self):
        return self.astype(float16)

    def float(self):
        return self.astype(float32)

    def bfloat16(self):
        return self.astype(bfloat16)

    def to(self, *args, **kw):
        for a in (*args, kw.get("dtype")):
            if isinstance(a, _np.dtype):
                return self.astype(a)
        return self

    def type(self, dt):
        return self.astype(dt)

    def dim(self):
        return self.ndim

    def numel(self):
        return self.size


    def clone(self):
        return self.copy()

    def detach(self):
        return self

    def numpy(self):
        return _np.asarray(self)

    def view(self, *shape):
        if len(shape) == 1 and isinstance(shape[0], _np.dtype):
            return _np.ndarray.view(self, shape[0])
        if len(shape) == 1 and isinstance(shape[0], (tuple, list)):
            shape = tuple(shape[0])
        return self.reshape(shape)

    def permute(self, *dims):
        return self.transpose(dims if len(dims) > 1 else dims[0])

    def t(self):
        return self.T

    def zero_(self):
        self[...] = 0
        return self

    def fill_(self, v):
        self[...] = v
        return self

    def normal_(self, mean=0.0, std=1.0):
        self[...] = _rng.standard_normal(self.shape) * std + mean
        return self

    def uniform_(self, a=0.0, b=1.0):
        self[...] = _rng.uniform(a, b, self.shape)
        return self

    def unsqueeze(self, d):
        return _np.expand_dims(self, d)

    def abs(self):
        return _np.abs(self)

    def amax(self, dim=None, keepdim=False):
        return self.max(axis=dim, keepdims=keepdim)

    def item(self):
        return self.reshape(-1)[0].tolist()

    def element_size(self):
        return self.itemsize

    def data_ptr(self):
        return self.ctypes.data

    def transpose(self, *dims):
        if len(dims) == 2 and all(isinstance(d, (type(0),)) for d in dims):
            return _np.swapaxes(self, dims[0], dims[1])
        return _np.ndarray.transpose(self, *dims)


class _CallableSize(type(0)):
    """`t.size()` / `t.size(0)` of torch, while `t.size` stays NumPy's element count."""

    def __new__(cls, n, shape):
        obj = super().__new__(cls, n)
        obj.shape = shape
        return obj

    def __call__(self, d=None):
        return self.shape if d is None else self.shape[d]


Tensor.size = property(lambda self: _CallableSize(_np.ndarray.size.__get__(self), self.shape))


def _shape(size):
    if len(size) == 1 and isinstance(size[0], (tuple, list)):
        return tuple(size[0])
    return tuple(size)


def _make(a, dtype):
    return Tensor(_np.asarray(a, dtype=dtype or float32))


def randn(*size, dtype=None, device=None, **_):
    return _make(_rng.standard_normal(_shape(size)), dtype)


def rand(*size, dtype=None, device=None, **_):
    return _make(_rng.random(_shape(size)), dtype)


def randint(low, high=None, size=(), dtype=None, device=None, **_):
    if high is None:
        low, high = 0, low
    return _make(_rng.integers(low, high, size), dtype or int64)


def zeros(*size, dtype=None, device=None, **_):
    return _make(_np.zeros(_shape(size)), dtype)


def ones(*size, dtype=None, device=None, **_):
    return _make(_np.ones(_shape(size)), dtype)


def empty(*size, dtype=None, device=None, **_):
    return zeros(*size, dtype=dtype)


def full(size, value, dtype=None, device=None, **_):
    return _make(_np.full(_shape((size,)), value), dtype)


def arange(*a, dtype=None, device=None, **_):
    return _make(_np.arange(*a), dtype or int64)


def tensor(data, dtype=None, device=None, **_):
    return _make(data, dtype)


def zeros_like(x, dtype=None, **_):
    return _make(_np.zeros(x.shape), dtype or x.dtype)


def empty_like(x, dtype=None, **_):
    return zeros_like(x, dtype)


def ones_like(x, dtype=None, **_):
    return _make(_np.ones(x.shape), dtype or x.dtype)


def randn_like(x, dtype=None, **_):
    return _make(_rng.standard_normal(x.shape), dtype or x.dtype)


def eye(n, m=None, dtype=None, device=None, **_):
    return _make(_np.eye(n, m), dtype)


def manual_seed(seed):
    global _rng
    _rng = _np.random.default_rng(seed)


def _f32(x):
    return _np.asarray(x, dtype=_np.float32) if _np.asarray(x).dtype != _np.float64 else _np.asarray(x)


def matmul(a, b):
    out_dt = _np.result_type(a.dtype, b.dtype)
    return Tensor((_f32(a) @ _f32(b)).astype(out_dt))


mm = bmm = matmul
exp = lambda x: Tensor(_np.exp(_f32(x)).astype(x.dtype))  # noqa: E731
exp2 = lambda x: Tensor(_np.exp2(_f32(x)).astype(x.dtype))  # noqa: E731
log = lambda x: Tensor(_np.log(_f32(x)).astype(x.dtype))  # noqa: E731
sqrt = lambda x: Tensor(_np.sqrt(_f32(x)).astype(x.dtype))  # noqa: E731
rsqrt = lambda x: Tensor((1 / _np.sqrt(_f32(x))).astype(x.dtype))  # noqa: E731
sigmoid = lambda x: Tensor((1 / (1 + _np.exp(-_f32(x)))).astype(x.dtype))  # noqa: E731
tanh = lambda x: Tensor(_np.tanh(_f32(x)).astype(x.dtype))  # noqa: E731
abs = lambda x: _np.abs(x)  # noqa: E731,A001
allclose = lambda a, b, rtol=1e-5, atol=1e-8: _np.allclose(_f32(a), _f32(b), rtol=rtol, atol=atol)  # noqa: E731
cat = lambda ts, dim=0: Tensor(_np.concatenate(ts, axis=dim))  # noqa: E731
stack = lambda ts, dim=0: Tensor(_np.stack(ts, axis=dim))  # noqa: E731
where = lambda c, a, b: Tensor(_np.where(c, a, b))  # noqa: E731
maximum = lambda a, b: Tensor(_np.maximum(a, b))  # noqa: E731
minimum = lambda a, b: Tensor(_np.minimum(a, b))  # noqa: E731


def sum(x, dim=None, keepdim=False, dtype=None):  # noqa: A001
    return Tensor(_np.sum(_f32(x), axis=dim, keepdims=keepdim).astype(dtype or x.dtype))


def max(x, dim=None, keepdim=False):  # noqa: A001
    if dim is None:
        return Tensor(_np.max(x))
    v = Tensor(_np.max(x, axis=dim, keepdims=keepdim))
    i = Tensor(_np.argmax(x, axis=dim))
    return _types.SimpleNamespace(values=v, indices=i, __iter__=lambda: iter((v, i)))


def softmax(x, dim=-1, dtype=None):
    x32 = _f32(x)
    e = _np.exp(x32 - x32.max(axis=dim, keepdims=True))
    return Tensor((e / e.sum(axis=dim, keepdims=True)).astype(dtype or x.dtype))


def _assert_close(actual, expected, rtol=None, atol=None, **_):
    a, e = _np.asarray(actual, dtype=_np.float64), _np.asarray(expected, dtype=_np.float64)
    _np.testing.assert_allclose(a, e, rtol=1.3e-6 if rtol is None else rtol,
                                atol=1e-5 if atol is None else atol)


testing = _types.SimpleNamespace(assert_close=_assert_close)


def set_default_device(*a):
    return None


def _pad(x, pad, mode="constant", value=0):
    widths = [(0, 0)] * (x.ndim - len(pad) // 2) + [(pad[i], pad[i + 1])
                                                   for i in range(len(pad) - 2, -1, -2)]
    return Tensor(_np.pad(x, widths, constant_values=value))


class _Cuda:
    @staticmethod
    def is_available():
        return True

    @staticmethod
    def synchronize(*a):
        return None

    @staticmethod
    def get_device_name(*a):
        return "cpu"

    @staticmethod
    def manual_seed(s):
        manual_seed(s)

    @staticmethod
    def get_device_capability(*a):
        return (9, 0)

    @staticmethod
    def current_device():
        return 0

    @staticmethod
    def get_device_properties(*a):  # ascend910b's cube (AIC) and vector (AIV) core counts;
        # major/minor as get_device_capability answers (examples' is-Hopper checks)
        return _types.SimpleNamespace(cube_core_num=24, vector_core_num=48, name="cpu",
                                      multi_processor_count=24, major=9, minor=0)


cuda = npu = _Cuda()
Size = tuple
dtype = _np.dtype
no_grad = lambda: _types.SimpleNamespace(__enter__=lambda s: None, __exit__=lambda *a: None)  # noqa: E731
e = _math.e

from . import nn  # noqa: E402


def from_numpy(a):
    return Tensor(a)


def set_printoptions(*a, **k):
    return None


def einsum(spec, *ops):
    return Tensor(_np.einsum(spec, *[_np.asarray(o, _np.float32) for o in ops]))


def _copy_(self, src):
    self[...] = src
    return self


Tensor.copy_ = _copy_


relu = lambda x: Tensor(_np.maximum(x, 0))  # noqa: E731
tril = lambda x, diagonal=0: Tensor(_np.tril(x, diagonal))  # noqa: E731
triu = lambda x, diagonal=0: Tensor(_np.triu(x, diagonal))  # noqa: E731
Tensor.softmax = lambda self, dim=-1, dtype=None: softmax(self, dim, dtype)
Tensor.exp = lambda self: exp(self)
Tensor.sum = lambda self, dim=None, keepdim=False, dtype=None, **k: sum(self, dim, keepdim, dtype)
Tensor.max = lambda self, dim=None, keepdim=False, **k: (Tensor(_np.max(_np.asarray(self), axis=k.get("axis", dim), keepdims=keepdim or k.get("keepdims", False))) if dim is None or "axis" in k else max(self, dim, keepdim))
Tensor.mean = lambda self, dim=None, keepdim=False, **k: Tensor(_np.mean(_f32(self), axis=k.get("axis", dim), keepdims=keepdim or k.get("keepdims", False)).astype(self.dtype))
Tensor.pow = lambda self, p: Tensor(_np.power(_f32(self), p).astype(self.dtype))
Tensor.clamp = lambda self, min=None, max=None: Tensor(_np.clip(self, min, max))  # noqa: A002
Tensor.sqrt = lambda self: sqrt(self)
Tensor.abs = lambda self: Tensor(_np.abs(self))


class _Function:
    """torch.autograd.Function stand-in: examples subclass it at module level (host code)."""

    @classmethod
    def apply(cls, *args):
        raise NotImplementedError("torch.autograd is not available in the NumPy stand-in")


class autograd:  # noqa: N801
    Function = _Function
