"""Walking a project's source tree, with exclusions, in a stable order."""

from __future__ import annotations

import fnmatch
import os
import posixpath
import stat
from collections.abc import Iterable, Sequence
from pathlib import Path, PurePosixPath

# A file or folder, resolved, and the project-relative name the project reaches it by (through a symlinked
# folder or file, or a python-path entry outside the project: "../shared").
Alias = tuple[Path, str]


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


def named_rel(path: Path, root: Path) -> str:
    """A path found under the project root (a glob's, a walk's) as the project names it: through a symlinked
    folder or file, not where it leads. The name shown and gated, the same on every machine."""
    try:
        return path.relative_to(root).as_posix()
    except ValueError:
        return relpath(path, root)


def aliases(root: Path, rel: str) -> list[Alias]:
    """The folders on a project-relative path, and the path itself, resolved, each with its name on that path,
    where the name is not simply the resolved place's path under the root (a symlink, a `..`)."""
    out: list[Alias] = []
    parts = PurePosixPath(rel).parts
    base = root.resolve()
    for depth in range(1, len(parts) + 1):
        name = "/".join(parts[:depth])
        try:
            resolved = (root / name).resolve()
        except (OSError, RuntimeError):  # a symlink loop
            break
        if resolved != base / name:
            out.append((resolved, name))
    return out


def display_path(path: Path, root: Path, known: Sequence[Alias] = ()) -> str:
    """A path as the project names it, relative to the project root, the same on every machine.

    The deepest of the project root and the `known` aliases that holds the resolved path wins: a file in a
    symlinked folder is named through the link, one under a python-path entry outside the project through
    that entry (`../shared/ops.py`). A path none of them holds stays as it is.
    """
    try:
        resolved = path.resolve()
    except (OSError, RuntimeError):
        return path.as_posix()
    best: Alias | None = None
    for place, name in [(root.resolve(), "."), *known]:
        if (resolved == place or resolved.is_relative_to(place)) and (best is None or len(place.parts) > len(best[0].parts)):
            best = (place, name)
    if best is None:
        return path.as_posix()
    return posixpath.normpath(posixpath.join(best[1], resolved.relative_to(best[0]).as_posix()))
