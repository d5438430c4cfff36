"""Keep compiler frames out of what users see: public entry points re-raise our errors bare."""
from __future__ import annotations

import functools

from ..errors import TileLangMiniError, internal_error


def user_facing(fn):
    """Decorator: a TileLangMiniError leaves `fn` with no traceback below the user's call."""

    @functools.wraps(fn)
    def wrapper(*args, **kwargs):
        try:
            return fn(*args, **kwargs)
        except TileLangMiniError as err:
            raise err.with_traceback(None) from None

    return wrapper


def guarded(stage: str, loc, fn, *args, **kwargs):
    """`fn(*args, **kwargs)`; an exception that is not one of ours becomes an
    InternalCompilerError naming `stage` (a RecursionError: a CompileError at `loc`)."""
    try:
        return fn(*args, **kwargs)
    except Exception as err:  # noqa: BLE001 -- classified by internal_error
        raise internal_error(err, stage, loc) from err
