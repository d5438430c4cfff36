"""The backend registry: targets are found by name in the `tilelang_mini.backends` entry points.

A backend is an object with `name`, `lower(kernel, options) -> artifact` and
`run(artifact, args) -> None` (args in parameter order; outputs written in place).
"""
from __future__ import annotations

from functools import lru_cache

from ..errors import CompileError

GROUP = "tilelang_mini.backends"


@lru_cache(maxsize=None)
def _registry() -> dict:
    from importlib.metadata import entry_points  # ~50-90 ms to import: not at package import
    return {ep.name: ep for ep in entry_points(group=GROUP)}


def available_targets() -> tuple[str, ...]:
    return tuple(sorted(_registry()))


@lru_cache(maxsize=None)
def get_backend(name: str):
    ep = _registry().get(name)
    if ep is None:
        raise CompileError(f"unknown target {name!r}; available targets: "
                           f"{', '.join(available_targets()) or 'none (is the package installed?)'}")
    return ep.load()
