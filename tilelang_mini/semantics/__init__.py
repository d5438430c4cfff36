"""The executable semantics of the tile IR: the meaning of every operation (ops.py), the ordered
run of a kernel's control flow (run.py) and the program-order check (order.py). The numpy backend
runs kernels through it; the simulator and the estimate execute the same handlers."""
from .ops import Env, Fault, as_index, compile_expr, execute  # noqa: F401
from .run import _Ctx, check_args, lower_stmt, new_block  # noqa: F401
