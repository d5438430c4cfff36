"""`tvm.target.Target`: a target description string, kept as data (kernels here compile for the
configured backend; a GPU target string selects nothing)."""
from __future__ import annotations


class Target:
    """`Target("cuda")`, `Target("hip -mcpu=gfx950")`: `.kind.name` and `.attrs` answer."""

    def __init__(self, spec, host=None):
        self.spec = str(spec)
        words = self.spec.split()
        self.kind = type("TargetKind", (), {"name": words[0] if words else ""})()
        self.attrs = dict(w.lstrip("-").split("=", 1) for w in words[1:] if "=" in w)
        self.host = host

    def __str__(self) -> str:
        return self.spec

    def __repr__(self) -> str:
        return f"Target({self.spec!r})"
