"""Paths as a person opens them from the folder the command runs in.

A run names every file relative to its project's folder (the configuration's), or absolute outside it; the
baseline, the caches, `per-file-ignores` and the machine formats (JSON, SARIF, GitHub annotations, JUnit) keep
that name, wherever the command was started. What is printed for a person (the text report, `--show-files`,
`--diff` and the lines about fixes) names the same file from the current folder instead, as ruff names the
files under it: `cumsum.py` when standing in `fla/ops/utils`; `../x.py` for a file of the project above it,
which ruff would print absolute, because it is shorter and opens the same. A file outside the project keeps
its absolute name.
"""

from __future__ import annotations

import os
from collections.abc import Callable
from pathlib import Path

Shown = Callable[[str], str]


def as_named(path: str) -> str:
    """A path as the run names it (the project's top is the current folder)."""
    return path


def from_here(root: Path, here: str | None = None) -> Shown:
    """How a path the run names (relative to `root`, or absolute) is shown from `here` (the current folder)."""
    top = os.path.realpath(root)
    where = os.path.realpath(here if here is not None else os.getcwd())
    if where == top:
        return as_named

    def shown(path: str) -> str:
        if not path:
            return path
        full = os.path.normpath(os.path.join(top, path))  # an absolute `path` stays itself
        if not (_within(full, top) or _within(full, where)):
            return path
        return Path(os.path.relpath(full, where)).as_posix()

    return shown


def _within(path: str, folder: str) -> bool:
    return path == folder or path.startswith(folder.rstrip(os.sep) + os.sep)
