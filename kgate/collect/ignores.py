"""The ignore files a lint walk respects: `.ignore` files, and inside a git repository `.gitignore` files,
`.git/info/exclude` and the global excludes file.

Each file's patterns are read by `pathspec.GitIgnoreSpec` (git's own matching: `**`, anchoring, directory
patterns, negation) against paths relative to the file's folder. Across files git's precedence holds: a
deeper folder's file overrides a shallower one's, `.ignore` overrides `.gitignore` in the same folder, and
both override `.git/info/exclude` and the global file; the last file with a matching pattern decides. A
folder that is ignored is not entered, so nothing below it can be re-included (as in git).

`pathspec` is imported only where an ignore file exists: a tree without one costs a lint run nothing.
"""

from __future__ import annotations

import os
import re
from collections.abc import Collection
from typing import Any

from kgate.support.atomicio import read_input

# In a folder, in rising precedence. `.gitignore` only counts inside a git repository (as git, ripgrep and
# ruff have it: an exported tarball's .gitignore does not hide its files); `.ignore` counts everywhere.
GITIGNORE, IGNORE = ".gitignore", ".ignore"
_MARKERS = (".git", GITIGNORE, IGNORE)


class Ignores:
    """The ignore patterns in force in one folder: (folder with a trailing separator, spec) layers, lowest
    precedence first, and whether the folder is inside a git repository."""

    __slots__ = ("layers", "in_repo")

    def __init__(self, layers: tuple[tuple[str, Any], ...] = (), in_repo: bool = False) -> None:
        self.layers = layers
        self.in_repo = in_repo

    def enter(self, folder: str, names: Collection[str]) -> Ignores:
        """The patterns in force in `folder`, a child of this one (or the walk's first), given its names."""
        if not any(marker in names for marker in _MARKERS):
            return self
        folder = os.path.abspath(folder)  # a walk of a relative path names its entries relatively
        layers = list(self.layers)
        in_repo = self.in_repo
        if ".git" in names and not in_repo:
            in_repo = True
            layers.extend(_repository_layers(folder))
        for name in (GITIGNORE, IGNORE):
            if name in names and (in_repo or name == IGNORE):
                spec = _spec(os.path.join(folder, name))
                if spec is not None:
                    layers.append((os.path.join(folder, ""), spec))
        return Ignores(tuple(layers), in_repo)

    def ignored(self, path: str, is_dir: bool) -> bool:
        """Whether the ignore files ignore `path` (an entry of a folder this state was entered for)."""
        if not os.path.isabs(path):
            path = os.path.abspath(path)
        for base, spec in reversed(self.layers):
            if not path.startswith(base):
                continue
            rel = path[len(base):].replace(os.sep, "/")
            verdict = spec.check_file(rel + "/" if is_dir else rel).include
            if verdict is not None:
                return bool(verdict)
        return False


def above(folder: str) -> Ignores:
    """The patterns in force in `folder` from the folders above it, for a walk that starts there (and enters
    `folder` itself): those from the top of its git repository down to its parent; none outside a repository."""
    folder = os.path.abspath(folder)
    chain = []
    probe = folder
    while not os.path.lexists(os.path.join(probe, ".git")):
        parent = os.path.dirname(probe)
        if parent == probe:
            return Ignores()  # not in a repository
        probe = parent
        chain.append(probe)
    state = Ignores()
    for place in reversed(chain):
        state = state.enter(place, _present(place))
    return state


def _present(folder: str) -> set[str]:
    return {name for name in _MARKERS if os.path.lexists(os.path.join(folder, name))}


def _repository_layers(top: str) -> list[tuple[str, Any]]:
    """The repository-wide files (the global excludes file, then `.git/info/exclude`), both relative to the
    repository's top."""
    base = os.path.join(top, "")
    out = []
    for path in (global_excludes(), os.path.join(top, ".git", "info", "exclude")):
        spec = _spec(path) if path else None
        if spec is not None:
            out.append((base, spec))
    return out


def repository_files(folder: str) -> list[str]:
    """The repository-wide ignore files that govern `folder`, present or not (a replay of a run must find them
    as they were)."""
    probe = os.path.abspath(folder)
    while not os.path.lexists(os.path.join(probe, ".git")):
        parent = os.path.dirname(probe)
        if parent == probe:
            return []
        probe = parent
    found = global_excludes()
    return [os.path.join(probe, ".git", "info", "exclude"), *([found] if found else [])]


_CORE = re.compile(r"^\s*\[\s*core\s*\]", re.IGNORECASE)
_SECTION = re.compile(r"^\s*\[")
_EXCLUDES = re.compile(r"^\s*excludesfile\s*=\s*(.*?)\s*$", re.IGNORECASE)


def global_excludes() -> str | None:
    """The global excludes file: `core.excludesFile` of the user's git configuration, else git's default
    (`$XDG_CONFIG_HOME/git/ignore`, `~/.config/git/ignore`). Read from the files, not by running git."""
    home = os.path.expanduser("~")
    xdg = os.environ.get("XDG_CONFIG_HOME") or os.path.join(home, ".config")
    for config in (os.path.join(xdg, "git", "config"), os.path.join(home, ".gitconfig")):
        value = _excludes_setting(config)
        if value:
            return os.path.expanduser(value)
    return os.path.join(xdg, "git", "ignore")


def _excludes_setting(config: str) -> str | None:
    try:
        text = read_input(config).decode("utf-8", "replace")
    except OSError:
        return None
    in_core = False
    found = None
    for line in text.splitlines():
        if _SECTION.match(line):
            in_core = bool(_CORE.match(line))
        elif in_core:
            match = _EXCLUDES.match(line)
            if match:
                found = match.group(1).strip('"')  # the last one wins, as in git
    return found


def _spec(path: str) -> Any | None:
    """The patterns of one ignore file (None where it is absent, unreadable or holds none)."""
    try:
        data = read_input(path)
    except OSError:
        return None
    lines = data.decode("utf-8", "replace").splitlines()
    if not any(line.strip() and not line.startswith("#") for line in lines):
        return None
    from pathspec import GitIgnoreSpec

    return GitIgnoreSpec.from_lines(lines)
