"""Where the top-level definitions of a kernel's file are: what a cached compile was compiled against.

The compile cache is keyed on a kernel's source text, not on where it sits in
its file, so that editing one kernel does not recompile the kernels below
it. But facts carry line numbers: the kernel's `def` line (where every
compiled finding points) and the source lines of PTX instructions (the PDL
rule names them). So the cache also records where each top-level function
of the kernel's file started and ended when it was compiled (a `spans`
record), and the facts stage shifts every line by how far its function has
moved since (`kgate.facts.relocate`).
"""

from __future__ import annotations

from pathlib import Path

from kgate.collect.pyindex import module_info

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
