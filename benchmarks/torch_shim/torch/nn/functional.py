"""torch.nn.functional stand-in (NumPy)."""
import numpy as _np

from .. import Tensor, _pad as pad, sigmoid, softmax  # noqa: F401


def silu(x):
    return x * sigmoid(x)


def relu(x):
    return Tensor(_np.maximum(x, 0))


def gelu(x, approximate="none"):
    import math
    x64 = _np.asarray(x, _np.float64)
    if approximate == "tanh":
        y = 0.5 * x64 * (1 + _np.tanh(math.sqrt(2 / math.pi) * (x64 + 0.044715 * x64 ** 3)))
    else:
        y = 0.5 * x64 * (1 + _np.vectorize(math.erf)(x64 / math.sqrt(2)))
    return Tensor(y.astype(x.dtype))
