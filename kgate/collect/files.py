"""Walking a project's source tree, with exclusions, in a stable order."""

from __future__ import annotations

import fnmatch
import os
import stat
from collections.abc import Iterable
from pathlib import Path


def excluded(rel: str, patterns: Iterable[str]) -> bool:
    """Whether a repo-relative path (with '/') is excluded.

    A bare name ("build") matches that name at any depth; a pattern with a
    '/' or a wildcard matches the relative path or any of its parents.
    """
    parts = rel.split("/")
    for pattern in patterns:
        pattern = pattern.rstrip("/")
        if "/" not in pattern and not any(ch in pattern for ch in "*?["):
            if pattern in parts:
                return True
            continue
        for depth in range(1, len(parts) + 1):
            if fnmatch.fnmatchcase("/".join(parts[:depth]), pattern):
                return True
        if "/" not in pattern and any(fnmatch.fnmatchcase(part, pattern) for part in parts):
            return True
    return False


def walk(root: Path, suffixes: tuple[str, ...], exclude: Iterable[str]) -> list[Path]:
    """Files under root with one of the suffixes, sorted, skipping excluded paths and symlink loops."""
    patterns = tuple(exclude)
    out: list[Path] = []
    seen_dirs: set[tuple[int, int]] = set()
    for folder, dirs, files in os.walk(root, followlinks=True):
        try:
            st = os.stat(folder)
        except OSError:
            dirs[:] = []
            continue
        ident = (st.st_dev, st.st_ino)
        if ident in seen_dirs:
            dirs[:] = []
            continue
        seen_dirs.add(ident)
        rel_folder = os.path.relpath(folder, root).replace(os.sep, "/")
        prefix = "" if rel_folder == "." else rel_folder + "/"
        dirs[:] = sorted(d for d in dirs if not excluded(prefix + d, patterns))
        for name in sorted(files):
            if name.endswith(suffixes) and not excluded(prefix + name, patterns) and _regular(Path(folder) / name):
                out.append(Path(folder) / name)
    return sorted(out)


def _regular(path: Path) -> bool:
    """Whether a path is a regular file (through symlinks): reading a FIFO named `x.py` would block forever."""
    try:
        return stat.S_ISREG(os.stat(path).st_mode)
    except OSError:  # a dangling link or a symlink loop: nothing to read
        return False


def relpath(path: Path, root: Path) -> str:
    """A path relative to the project root, with forward slashes."""
    try:
        return path.resolve().relative_to(root.resolve()).as_posix()
    except ValueError:
        return path.as_posix()
