"""User-facing errors. Each names the kernel file:line:col, shows the source line with a caret,
and says what was expected. Public entry points re-raise them without the compiler's frames
(`runtime.errors.user_facing`)."""
from __future__ import annotations

import linecache

from .ir.nodes import NO_LOC, Loc


class TileLangMiniError(Exception):
    """Base of every error tilelang_mini raises on purpose."""

    def __init__(self, message: str, loc: Loc | None = None, source_line: str | None = None,
                 notes: str = ""):
        self.message = message
        self.loc = loc if loc is not None else NO_LOC
        self.source_line = source_line
        self.notes = notes
        super().__init__(self._format() + (f"\n{notes}" if notes else ""))

    def _format(self) -> str:
        if self.loc is NO_LOC or not self.loc.line:
            return self.message
        line = self.source_line
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


class SimulationError(TileLangMiniError):
    """Base of what the pipe-level simulator finds in lowered code."""


class RaceError(SimulationError):
    """Two accesses to overlapping bytes, at least one a write, not ordered by flags."""


class DeadlockError(SimulationError):
    """A wait that can never be satisfied."""


class SyncError(SimulationError):
    """A misused flag: set twice without a wait, left set at the end, id out of range."""
