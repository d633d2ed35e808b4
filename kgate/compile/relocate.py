"""Line numbers of cached facts, moved to where the code is now.

The facts cache is keyed on a kernel's source text, not on where it sits in
its file, so that editing one kernel does not recompile the kernels below
it. But facts carry line numbers: the kernel's `def` line (where every
compiled finding points) and the source lines of PTX instructions (the PDL
rule names them). So the cache also records where each top-level function
of the kernel's file started and ended when it was compiled, and a hit
shifts every line by how far its function has moved since.
"""

from __future__ import annotations

import os
from dataclasses import replace
from pathlib import Path

from kgate.collect.pyindex import module_info
from kgate.facts.model import KernelFacts

Spans = dict[str, tuple[int, int]]  # top-level def or class -> (first line with decorators, last line)


def _read(path: Path) -> tuple[tuple[str, int, int, int], ...]:
    """(name, first line with decorators, last line, `def` line) of every top-level def and class."""
    if not path.exists():
        return ()
    info = module_info(path)
    return tuple((d.name, d.start, d.end, d.line) for d in info.defs.values())


def def_spans(path: Path) -> Spans:
    """Where each top-level function and class of a Python file starts and ends now."""
    return {name: (start, end) for name, start, end, _line in _read(path)}


def def_line(path: Path, name: str) -> int | None:
    """The line of `def name` at the top level of a Python file now, if there is one."""
    return next((line for n, _start, _end, line in _read(path) if n == name), None)


class Moved(Exception):
    """A line lies in a function that is no longer there: the facts must be rebuilt."""


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


def relocate(facts: KernelFacts, source: Path, then: Spans, now: Spans, line: int | None) -> KernelFacts | None:
    """`facts` with its lines in `source` moved from the spans it was compiled with to today's; None to rebuild.

    `line` is the kernel's `def` line now (None when its definition is not in `source`).
    """
    line = line or facts.line
    if line == facts.line and all(now.get(name, (0, 0))[0] == span[0] for name, span in then.items()):
        return facts
    try:
        accesses = tuple(
            replace(a, loc=replace(a.loc, line=_move(a.loc.line, then, now)))
            if a.loc is not None and os.path.basename(a.loc.file) == source.name else a
            for a in facts.entry.unwaited_accesses)
    except Moved:
        return None
    return replace(facts, line=line, entry=replace(facts.entry, unwaited_accesses=accesses))
