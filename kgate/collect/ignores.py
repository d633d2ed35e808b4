"""The ignore files a lint walk respects: `.ignore` files, and inside a git repository `.gitignore` files,
`.git/info/exclude` and the global excludes file.

Each file's patterns are read by `pathspec.GitIgnoreSpec` (git's own matching: `**`, anchoring, directory
patterns, negation) against paths relative to the file's folder. Across files git's precedence holds: a
deeper folder's file overrides a shallower one's, `.ignore` overrides `.gitignore` in the same folder, and
both override `.git/info/exclude` and the global file; the last file with a matching pattern decides. A
folder that is ignored is not entered, so nothing below it can be re-included (as in git).

`pathspec` costs a process tens of milliseconds to import, as much as a tenth of a warm `kgate lint`, so
its verdicts are remembered (`Verdicts`, in the cache folder) by the ignore file's content and the path:
a walk of an unchanged tree answers from them and never imports it; a new path or an edited ignore
file asks pathspec again.
"""

from __future__ import annotations

import json
import os
import re
from collections.abc import Collection
from pathlib import Path
from typing import Any

from kgate.support.atomicio import read_input

try:  # the builtin module: `hashlib` would load OpenSSL (see kgate.evaluate.source)
    from _blake2 import blake2b
except ImportError:  # pragma: no cover - a Python built without it
    from hashlib import blake2b

# In a folder, in rising precedence. `.gitignore` only counts inside a git repository (as git, ripgrep and
# ruff have it: an exported tarball's .gitignore does not hide its files); `.ignore` counts everywhere.
GITIGNORE, IGNORE = ".gitignore", ".ignore"
_MARKERS = (".git", GITIGNORE, IGNORE)


class Verdicts:
    """pathspec's verdicts on paths, by ignore file content: {digest: {path: 1 ignored, 0 re-included, -1 no
    pattern matches}}, read from and written to one record (`None`: kept for this process only)."""

    def __init__(self, record: Path | None = None) -> None:
        self.record = record
        self.known: dict[str, dict[str, int]] = {}
        self.used: dict[str, dict[str, int]] = {}
        self.asked = False  # pathspec answered something the record did not hold
        if record is not None:
            self.known = _read_record(record)

    def verdict(self, layer: _File, rel: str) -> int:
        """What pathspec says of `rel` under one ignore file (asked only where the record does not say)."""
        include = layer.spec().check_file(rel).include
        found = -1 if include is None else int(include)
        self.asked = True
        layer.used[rel] = found
        return found

    def tables(self, digest: str) -> tuple[dict[str, int], dict[str, int]]:
        """The verdicts used this run and those remembered, for one ignore file's content."""
        return self.used.setdefault(digest, {}), self.known.get(digest, {})

    def save(self, complete: bool) -> None:
        """Write the record if pathspec was asked; `complete`: the run walked whole projects, so what it did not
        use is dropped (the record follows the tree instead of growing with every rename)."""
        if self.record is None or not self.used or not (self.asked or complete and self.used != self.known):
            return  # nothing asked (a walk with no ignore file, or with them off) leaves the record as it is
        keep = self.used if complete else {**self.known, **{d: {**self.known.get(d, {}), **v}
                                                             for d, v in self.used.items()}}
        from kgate.support import jsondoc
        from kgate.support.atomicio import write_cached

        blob = json.dumps({"format": 1, "sha256": jsondoc.content_hash(keep), "files": keep},
                          separators=(",", ":"), sort_keys=True).encode()
        try:
            write_cached(self.record, blob, sealed=True)
        except OSError:
            pass  # an unwritable cache costs speed, not correctness


def _read_record(record: Path) -> dict[str, dict[str, int]]:
    from kgate.support import jsondoc
    from kgate.support.atomicio import read_cached

    data = read_cached(record)
    try:
        doc = jsondoc.loads(data) if data is not None else None
    except ValueError:
        return {}
    if not (isinstance(doc, dict) and doc.get("format") == 1 and isinstance(doc.get("files"), dict)
            and doc.get("sha256") == jsondoc.content_hash(doc["files"])):
        return {}
    files = doc["files"]
    if not all(isinstance(v, dict) and all(type(x) is int and -1 <= x <= 1 for x in v.values())
               for v in files.values()):
        return {}
    return files


class _File:
    """One ignore file: its folder (with a trailing separator), its content's digest, its patterns compiled by
    pathspec when first needed."""

    __slots__ = ("base", "digest", "lines", "_spec", "used", "known")

    def __init__(self, base: str, data: bytes) -> None:
        self.base = base
        self.digest = blake2b(data, digest_size=16).hexdigest()
        self.lines = data.decode("utf-8", "replace").splitlines()
        self._spec: Any = None
        self.used: dict[str, int] = {}
        self.known: dict[str, int] = {}

    def spec(self) -> Any:
        if self._spec is None:
            from pathspec import GitIgnoreSpec

            self._spec = GitIgnoreSpec.from_lines(self.lines)
        return self._spec


class Ignores:
    """The ignore files in force in one folder, lowest precedence first, whether the folder is inside a git
    repository, and where verdicts are remembered."""

    __slots__ = ("layers", "in_repo", "verdicts")

    def __init__(self, verdicts: Verdicts, layers: tuple[_File, ...] = (), in_repo: bool = False) -> None:
        self.layers = layers
        self.in_repo = in_repo
        self.verdicts = verdicts

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
                layer = _read(os.path.join(folder, name), os.path.join(folder, ""))
                if layer is not None:
                    layers.append(layer)
        for layer in layers[len(self.layers):]:
            layer.used, layer.known = self.verdicts.tables(layer.digest)
        return Ignores(self.verdicts, tuple(layers), in_repo)

    def ignored(self, folder: str, name: str, is_dir: bool) -> bool:
        """Whether the ignore files ignore the entry `name` of `folder` (absolute, with a trailing separator),
        a folder this state was entered for."""
        path = folder + name
        for layer in reversed(self.layers):
            if not path.startswith(layer.base):
                continue
            rel = path[len(layer.base):]
            if os.sep != "/":  # pragma: no cover - POSIX here
                rel = rel.replace(os.sep, "/")
            if is_dir:
                rel += "/"
            verdict = layer.used.get(rel)
            if verdict is None:
                verdict = layer.known.get(rel)
                if verdict is None:
                    verdict = self.verdicts.verdict(layer, rel)
                else:
                    layer.used[rel] = verdict
            if verdict >= 0:
                return bool(verdict)
        return False


def above(folder: str, verdicts: Verdicts) -> Ignores:
    """The patterns in force in `folder` from the folders above it, for a walk that starts there (and enters
    `folder` itself): those from the top of its git repository down to its parent; none outside a repository."""
    folder = os.path.abspath(folder)
    chain = []
    probe = folder
    while not os.path.lexists(os.path.join(probe, ".git")):
        parent = os.path.dirname(probe)
        if parent == probe:
            return Ignores(verdicts)  # not in a repository
        probe = parent
        chain.append(probe)
    state = Ignores(verdicts)
    for place in reversed(chain):
        state = state.enter(place, _present(place))
    return state


def _present(folder: str) -> set[str]:
    return {name for name in _MARKERS if os.path.lexists(os.path.join(folder, name))}


def _repository_layers(top: str) -> list[_File]:
    """The repository-wide files (the global excludes file, then `.git/info/exclude`), both relative to the
    repository's top."""
    base = os.path.join(top, "")
    out = []
    for path in (global_excludes(), os.path.join(top, ".git", "info", "exclude")):
        layer = _read(path, base) if path else None
        if layer is not None:
            out.append(layer)
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


def _read(path: str, base: str) -> _File | None:
    """One ignore file, its patterns relative to `base` (None where it is absent, unreadable or holds none)."""
    try:
        data = read_input(path)
    except OSError:
        return None
    if not any(line.strip() and not line.startswith(b"#") for line in data.splitlines()):
        return None
    return _File(base, data)
