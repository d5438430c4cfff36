"""What the compiler's simulator and schedule checks borrow from this backend, the executable
specification: per-core execution environments and one-instruction execution. The compiler finds
it through the backend registry (`get_backend("numpy").semantics`), never by module path."""
from .interpreter import _Ctx, check_args, lower_stmt, new_block  # noqa: F401
from .ops import Env, Fault, as_index, compile_expr, execute  # noqa: F401
