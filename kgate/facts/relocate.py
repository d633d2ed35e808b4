"""Line numbers of facts built from a cached compile, moved to where the code is now.

A compile is cached by the kernel's source text, not by where it sits in its file (`kgate.compile.relocate`
records where each top-level definition was). Facts carry line numbers: the kernel's `def` line and the source
locations of derived facts that hold any (a field declared with a `moved` hook). Each moves by as far as the
function it lies in has moved since the compile.
"""

from __future__ import annotations

import os
from dataclasses import replace
from pathlib import Path
from typing import TypeVar

from kgate.facts.model import KernelFacts, derived_fields
from kgate.facts.ptx import SourceLoc

Spans = dict[str, tuple[int, int]]  # top-level def or class -> (first line with decorators, last line)
F = TypeVar("F", bound=KernelFacts)


class Moved(Exception):
    """A line lies in a function that is no longer there: the unit must be compiled again."""


def _move(line: int, then: Spans, now: Spans) -> int:
    """A line moved with the function it lay in. Triton sometimes places an instruction on a line just past
    its function's last one (the blank line after it), so a line between two functions goes with the first."""
    starts = sorted((start, end, name) for name, (start, end) in then.items())
    for index, (start, end, name) in enumerate(starts):
        following = starts[index + 1][0] if index + 1 < len(starts) else None
        if start <= line and (line <= end or (following is None or line < following) and line <= end + 2):
            if name not in now:
                raise Moved(name)
            return line + now[name][0] - start
    return line  # module-level code: part of the cache key, it cannot have moved without a rebuild


def relocate(facts: F, source: Path, then: Spans, now: Spans, line: int | None) -> F | None:
    """`facts` with its lines in `source` moved from the spans it was compiled with to today's; None to rebuild.

    `line` is the kernel's `def` line now (None when its definition is not in `source`).
    """
    line = line or facts.line
    if line == facts.line and all(now.get(name, (0, 0))[0] == span[0] for name, span in then.items()):
        return facts

    def move(loc: SourceLoc) -> SourceLoc:
        if os.path.basename(loc.file) != source.name:
            return loc
        return replace(loc, line=_move(loc.line, then, now))

    changes: dict[str, object] = {"line": line}
    try:
        for f in derived_fields(type(facts)):
            moved = f.metadata["moved"]
            if moved is not None and getattr(facts, f.name) is not None:
                changes[f.name] = moved(getattr(facts, f.name), move)
    except Moved:
        return None
    return replace(facts, **changes)  # type: ignore[arg-type]
