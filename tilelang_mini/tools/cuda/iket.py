"""TileLang's IKET (in-kernel event tracing): `iket.mark(name, payload=iket.payload(v))` and
`with iket.range(name):` in a kernel, `with iket.session(output_dir=...)` around compilation.

Trace events do not change what a kernel computes. Inside a kernel the frontend accepts them and
records them in the kernel's hints (`Kernel.hints`, printed with the IR) like TileLang's other
GPU hints; their arguments are evaluated, so a misspelt name still fails at its line. The
device trace of this machine is the pipe-level simulator's timeline (`kernel.simulate(...)`),
so the session writes no trace files: `trace_files()` is empty.

    with T.Kernel(n) as bx, iket.range("block"):   ->  the body, hint "iket.range('block')"
        iket.mark("store", payload=iket.payload(i)) ->  nothing, hint "iket.mark(...)"
"""
from __future__ import annotations

import contextlib
from pathlib import Path

# names the frontend treats as trace events (tilelang_mini.language.hints.TRACE_EVENTS)
_state = {"output_dir": None, "runtime_payloads": False}


def _in_kernel(name: str):
    def marker(*args, **kwargs):
        raise RuntimeError(f"iket.{name} is a trace event of a kernel: use it inside a "
                           "T.prim_func kernel")
    marker.__name__ = marker.__qualname__ = name
    marker._tl_name = "iket." + name
    return marker


mark = _in_kernel("mark")
range = _in_kernel("range")  # noqa: A001 (TileLang's name)
payload = _in_kernel("payload")


@contextlib.contextmanager
def session(output_dir=None, runtime_payloads: bool = False):
    """Where TileLang writes the traces of the kernels compiled inside: remembered (see
    output_dir()); no trace files are written here."""
    saved = dict(_state)
    _state.update(output_dir=None if output_dir is None else str(output_dir),
                  runtime_payloads=bool(runtime_payloads))
    try:
        yield
    finally:
        _state.update(saved)


def output_dir():
    return _state["output_dir"]


def runtime_payloads_enabled() -> bool:
    return _state["runtime_payloads"]


def event_table() -> dict:
    """TileLang's table of the device events of the session: none on this machine (the
    kernels' hints list their trace events)."""
    return {}


def output_path(name: str, directory=None) -> Path:
    base = Path(directory or _state["output_dir"] or ".")
    base.mkdir(parents=True, exist_ok=True)
    return base / name


def trace_files(directory=None) -> list:
    return []


__all__ = ["mark", "range", "payload", "session", "output_dir", "runtime_payloads_enabled",
           "event_table", "output_path", "trace_files"]
