"""The temporary folders this run made: never inputs of the run.

kgate makes folders of its own in the temporary folder (the base revision's checkout, nvcc's kept files, a
`--no-cache` run's cache). What is read there is the run's own output, not an input a replay or a cache key must
hold unchanged; a project that happens to live in a folder named like them (`$TMPDIR/kgate-work`) is read like
any other. So the folders are known by having been made here (`make`), not by their names.
"""

from __future__ import annotations

import contextlib
import os
from collections.abc import Iterator
from pathlib import Path

_MADE: set[str] = set()


def make(prefix: str) -> Path:
    """A new temporary folder, remembered as this run's own."""
    import tempfile  # here: a lint reads `made_here` on every file it opens, and makes no folder

    folder = os.path.realpath(tempfile.mkdtemp(prefix=prefix))
    _MADE.add(folder)
    return Path(folder)


def forget(folder: str | os.PathLike[str]) -> None:
    _MADE.discard(os.path.realpath(folder))


@contextlib.contextmanager
def folder(prefix: str) -> Iterator[str]:
    """A temporary folder of this run's for the length of a `with` block, removed after it."""
    import shutil

    made = make(prefix)
    try:
        yield str(made)
    finally:
        shutil.rmtree(made, ignore_errors=True)
        forget(made)


def made_here(path: str) -> bool:
    """Whether a path is in a folder this run made (also as the path reaches it through a link)."""
    if not _MADE:
        return False
    for candidate in {os.path.abspath(path), os.path.realpath(path)}:
        if any(candidate == f or candidate.startswith(f + os.sep) for f in _MADE):
            return True
    return False
