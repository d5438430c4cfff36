"""The source lines of a test file marked `# <prefix><tag>` (`# AT:cross`), where an error
raised for the kernel written there must be located; `kernel_error`, the error of a kernel."""
from __future__ import annotations

from pathlib import Path


class Marked:
    def __init__(self, file: str, prefix: str = "AT:"):
        self.path = Path(file).resolve()
        self.lines = self.path.read_text().splitlines()
        self.prefix = prefix

    def line_of(self, tag: str) -> int:
        """The one line ending with `# <prefix><tag>`."""
        marker = f"# {self.prefix}{tag}"
        hits = [i + 1 for i, line in enumerate(self.lines) if line.rstrip().endswith(marker)]
        assert len(hits) == 1, f"marker {marker!r} must be on exactly one line, found {hits}"
        return hits[0]

    def located(self, err, tag: str) -> None:
        """`err` points at the tagged line of this file, shows it with a caret, and shows no
        compiler frames."""
        text = str(err)
        assert Path(err.loc.file).resolve() == self.path, text
        assert err.loc.line == self.line_of(tag), text
        shown = text.splitlines()
        assert shown[1].strip() == self.lines[err.loc.line - 1].strip(), text
        assert shown[2].strip() == "^", text
        assert "Traceback" not in text and "tilelang_mini/" not in text, text


def kernel_error(fn):
    """`@kernel_error` on a kernel function: the CompileError of making it a T.prim_func (the
    frontend) or of compiling it (the check pass), which the decorated name then holds; the
    test fails when there is none."""
    import pytest

    import tilelang_mini
    import tilelang_mini.language as T
    with pytest.raises(tilelang_mini.CompileError) as info:
        tilelang_mini.compile(T.prim_func(fn), out_idx=[-1])
    return info.value
