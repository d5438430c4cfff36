"""TileLang's `tilelang.carver` names that example host code reads: `carver.arch.driver
.get_num_sms()` (the NPU's cube cores) and, from tilelang-ascend's carver, `MatmulTemplate`
with `carver.arch.ascend.Ascend` recommending GEMM tile shapes (template.py;
docs/tilelang_compat.md)."""
from . import arch
from .arch.ascend import Ascend
from .template import Hint, MatmulTemplate

__all__ = ["arch", "Ascend", "Hint", "MatmulTemplate"]
