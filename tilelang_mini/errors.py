"""Errors that say who is at fault (docs/errors.md).

* `CompileError`: the user's kernel, IR text, options or arguments are wrong; located at the
  kernel line with a caret, saying what was expected.
* `KernelRuntimeError`: the kernel faulted while running (an index computed at run time outside
  its buffer, an integer division by zero); located at the kernel line that faulted.
* `SimulationError`: the pipe-level simulator found a race, a deadlock or a misused flag.
* `InternalCompilerError`: a bug in tilelang_mini itself (an unexpected exception inside a pass
  or a code generator); names the stage and asks for a report.

Public entry points re-raise them without the compiler's frames (`runtime.errors.user_facing`)."""
from __future__ import annotations

import linecache
import traceback

from .ir.nodes import NO_LOC, Loc, TextLoc


class TileLangMiniError(Exception):
    """Base of every error tilelang_mini raises on purpose."""

    def __init__(self, message: str, loc: Loc | None = None, source_line: str | None = None,
                 notes: str = ""):
        self.message = message
        self.loc = loc if loc is not None else NO_LOC
        self.source_line = source_line
        self.notes = notes
        super().__init__(self._text())

    def _text(self) -> str:
        return self._format() + (f"\n{self.notes}" if self.notes else "")

    def at(self, loc: Loc) -> "TileLangMiniError":
        """The same error (same class and message) located at `loc`."""
        new = self.__class__.__new__(self.__class__)
        new.__dict__.update(self.__dict__)
        new.loc = loc if loc is not None else NO_LOC
        new.source_line = None
        Exception.__init__(new, new._text())
        return new

    def _format(self) -> str:
        if self.loc is NO_LOC or not self.loc.line:
            return self.message
        line = self.source_line
        if line is None and isinstance(self.loc, TextLoc):  # a line of IR text, not a file
            line = self.loc.text
        if line is None:
            line = linecache.getline(self.loc.file, self.loc.line).rstrip("\n")
        head = f"{self.loc}: {self.message}"
        if not line:
            return head
        caret = " " * max(self.loc.col - 1, 0) + "^"
        return f"{head}\n    {line}\n    {caret}"


class CompileError(TileLangMiniError):
    """A mistake in a kernel, its IR text or its arguments, found before anything runs."""


class ArgumentError(CompileError):
    """Wrong number, shape, dtype or layout of the arguments of a compiled kernel."""


class BufferOverflowError(CompileError):
    """The buffers live together in an on-chip scope need more bytes than the chip has there
    (plan_memory); smaller tiles or fewer stages may fit."""


class ConfigError(TileLangMiniError, ValueError):
    """A TILELANG_MINI_* environment variable with a value it cannot take."""


class KernelRuntimeError(TileLangMiniError):
    """A fault while a kernel runs: an index computed at run time outside its buffer, an integer
    division by zero, a loop bound read from a tensor that is not a valid extent."""


class InternalCompilerError(TileLangMiniError):
    """A bug in tilelang_mini: an unexpected exception inside a pass, a code generator or the
    simulator. The message names the stage and asks for a report; the kernel may well be fine."""

    def __init__(self, message: str, loc: Loc | None = None, source_line: str | None = None,
                 notes: str = "", stage: str = ""):
        self.stage = stage
        where = f" in {stage}" if stage else ""
        if not message.startswith("internal compiler error"):
            message = (f"internal compiler error{where}: {message}. This is a bug in "
                       f"tilelang_mini, not in your kernel; please report it with the kernel "
                       f"and this message")
        super().__init__(message, loc, source_line, notes)


def internal_error(err: BaseException, stage: str, loc: Loc | None = None) -> TileLangMiniError:
    """What an exception escaping `stage` means for the user: our own errors pass through; a
    RecursionError is a kernel too deeply nested; anything else is a compiler bug."""
    if isinstance(err, TileLangMiniError):
        return err
    if isinstance(err, RecursionError):
        return CompileError(f"the kernel is nested too deeply for {stage} (an expression or "
                            f"a chain of macros/loops hundreds of levels deep); split it up", loc)
    if isinstance(err, MemoryError):  # the kernel's data or grid, not a compiler bug
        cls = KernelRuntimeError if any(w in stage for w in ("run", "simulat", "estimate")) \
            else CompileError
        return cls(f"out of memory in {stage}: {err}; the kernel's tensors, tiles or grid are "
                   f"too large for this machine", loc)
    frames = traceback.extract_tb(err.__traceback__)
    notes = ""
    if frames:  # where it broke, for the report (the frames themselves stay hidden)
        f = frames[-1]
        notes = f"  (raised at {_short(f.filename)}:{f.lineno} in {f.name})"
    return InternalCompilerError(f"{type(err).__name__}: {err}", loc, notes=notes, stage=stage)


def _short(path: str) -> str:
    for root in ("tilelang_mini", "backends"):
        i = path.rfind(f"/{root}/")
        if i >= 0:
            return path[i + 1:]
    return path


class SimulationError(TileLangMiniError):
    """Base of what the pipe-level simulator finds in lowered code."""


class RaceError(SimulationError):
    """Two accesses to overlapping bytes, at least one a write, not ordered by flags."""


class DeadlockError(SimulationError):
    """A wait that can never be satisfied."""


class SyncError(SimulationError):
    """A misused flag: set twice without a wait, left set at the end, id out of range."""
