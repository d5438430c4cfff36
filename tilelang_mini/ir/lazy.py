"""One lazy-attribute loader for packages that import their heavier modules on first use."""
import importlib


def load_lazy(package: str, namespace: dict, lazy: dict, name: str):
    """`package.name` from the module `lazy[name]` (relative to `package`), cached in `namespace`
    (the package's globals) so the next access does not come back here."""
    module = lazy.get(name)
    if module is None:
        raise AttributeError(f"module {package!r} has no attribute {name!r}")
    value = getattr(importlib.import_module(module, package), name)
    namespace[name] = value
    return value
