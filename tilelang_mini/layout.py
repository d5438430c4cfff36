"""`tilelang.layout`: TileLang's shared-memory layout builders, the arguments of
`T.annotate_layout` (a GPU hint here: docs/tilelang_compat.md). Each returns a `T.Layout` value
that records its arguments and is never applied (the Ascend tiles have their own fractal
layouts, chosen by the compiler)."""
from __future__ import annotations

from .language import Fragment, Layout


def make_swizzled_layout(buffer, *args, **kwargs) -> Layout:
    return Layout(buffer, *args, **kwargs)


make_full_bank_swizzled_layout = make_swizzled_layout
make_half_bank_swizzled_layout = make_swizzled_layout
make_quarter_bank_swizzled_layout = make_swizzled_layout
make_linear_layout = make_swizzled_layout

__all__ = ["Layout", "Fragment", "make_swizzled_layout", "make_full_bank_swizzled_layout",
           "make_half_bank_swizzled_layout", "make_quarter_bank_swizzled_layout",
           "make_linear_layout"]
