"""The passes, one per file, and pipeline.py: their one ordered list."""


def _as_is(fn):
    return fn


def __getattr__(name):
    """TileLang's `from tilelang.transform import PassConfigKey` (the pass-configuration keys)
    and `simplify_prim_func`."""
    if name == "simplify_prim_func":  # TileLang's decorator simplifying a factory's prim_func:
        return _as_is                   # every kernel is simplified by the pipeline here
    if name == "PassConfigKey":
        from ..runtime.kernel import PassConfigKey
        return PassConfigKey
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
