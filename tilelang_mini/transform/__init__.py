"""The passes, one per file, and pipeline.py: their one ordered list."""


def __getattr__(name):
    """TileLang's `from tilelang.transform import PassConfigKey` (the pass-configuration keys)."""
    if name == "PassConfigKey":
        from ..runtime.kernel import PassConfigKey
        return PassConfigKey
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
