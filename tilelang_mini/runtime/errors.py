"""Keep compiler frames out of what users see: public entry points re-raise our errors bare."""
from __future__ import annotations

import functools

from ..errors import TileLangMiniError


def user_facing(fn):
    """Decorator: a TileLangMiniError leaves `fn` with no traceback below the user's call."""

    @functools.wraps(fn)
    def wrapper(*args, **kwargs):
        try:
            return fn(*args, **kwargs)
        except TileLangMiniError as err:
            raise err.with_traceback(None) from None

    return wrapper
