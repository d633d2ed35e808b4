"""Finding a project's files: the walk of its tree, its exclusions and globs, in a stable order; and how the
project names a path."""

from __future__ import annotations

import errno
import fnmatch
import os
import posixpath
import re
import stat
from collections.abc import Callable, Iterable, Sequence
from pathlib import Path, PurePosixPath

from kgate.collect.depends import per_run
from kgate.collect.ignores import Ignores
from kgate.support.filestat import listed
from kgate.support.patterns import from_root, path_glob

# A folder that holds another project's configuration, met by a walk: (path, project-relative name with "/",
# the ignore state above it).
Nested = tuple[str, str, Ignores | None]

# A file or folder, resolved, and the project-relative name the project reaches it by (through a symlinked
# folder or file, or a python-path entry outside the project: "../shared").
Alias = tuple[Path, str]


class Exclusions:
    """The project's `exclude` and `extend-exclude` patterns, compiled once, with one meaning everywhere.

    A bare name ("build") excludes that name at any depth; a glob without '/' ("*.gen.py") a name it matches,
    at any depth; a pattern with '/' ("tests/fixtures", "gen/*", "./build") a project-relative path it matches. A
    path is excluded when it or any folder above it is.
    """

    def __init__(self, patterns: Iterable[str]) -> None:
        bare: set[str] = set()
        name_globs: list[str] = []
        path_globs: list[str] = []
        for pattern in patterns:
            pattern, anchored = from_root(pattern)
            pattern = pattern.rstrip("/")
            if "/" in pattern or anchored:
                path_globs.append(path_glob(pattern))
            elif any(ch in pattern for ch in "*?["):
                name_globs.append(fnmatch.translate(pattern))
            else:
                bare.add(pattern)
        self._bare = bare
        self._names = _union(name_globs)
        self._paths = _union(path_globs)

    def entry(self, rel: str, name: str) -> bool:
        """Whether the entry `name` at `rel` is excluded by itself: for a walk down from the root, which has
        tested the folders above it already."""
        return name in self._bare or bool(self._names and self._names.match(name)) \
            or bool(self._paths and self._paths.match(rel))

    def __call__(self, rel: str) -> bool:
        """Whether a project-relative path (with '/') is excluded, by itself or by a folder above it."""
        parts = rel.split("/")
        return any(self.entry("/".join(parts[:depth]), parts[depth - 1]) for depth in range(1, len(parts) + 1))


def excluded(rel: str, patterns: Iterable[str]) -> bool:
    """Whether a project-relative path is excluded by the patterns (`Exclusions`, for one test)."""
    return Exclusions(patterns)(rel)


def project_root(path: str, rel: str) -> str:
    """The project's root folder for the file at `path` whose project-relative name is `rel`: the path less that
    name. A file outside the project (named on the command line) has its absolute path (or a `../` one) for a name:
    its own folder stands for the project, never the file system's root that the whole name would leave."""
    path = os.path.abspath(path)
    rel = rel.replace("/", os.sep)
    if os.path.isabs(rel) or rel.startswith(".." + os.sep) or not path.endswith(os.sep + rel):
        return os.path.dirname(path)
    return path[:-len(rel)].rstrip(os.sep) or os.sep


def glob_matcher(globs: Iterable[str]) -> Callable[[str], bool]:
    """A test on a project-relative path: a glob without '/' matches the file name, one with '/' the path.

    A name glob with at most one `*` and no other wildcard (`*.py`, `test_*.py`, `CMakeLists.txt`, the globs of
    every rule) is tested with string comparisons, as `fnmatch` would match it: each rule of a run has a matcher,
    and compiling theirs was a measurable part of a commit hook's lint of one file."""
    globs = list(globs)
    plain = [g.split("*") for g in globs if "/" not in g and not _WILD.search(g.replace("*", "", 1))]
    exact = frozenset(parts[0] for parts in plain if len(parts) == 1)
    starred = [(parts[0], parts[1]) for parts in plain if len(parts) == 2]
    # `*.py` and `test_*` as one test each of every tail and every head (str.endswith takes a tuple): the walk asks
    # this of every file of the project.
    tails = tuple(tail for head, tail in starred if not head)
    heads = tuple(head for head, tail in starred if not tail and head)
    both = tuple((head, tail) for head, tail in starred if head and tail)
    names = _union([fnmatch.translate(g) for g in globs if "/" not in g and _WILD.search(g.replace("*", "", 1))])
    paths = _union([path_glob(g) for g in globs if "/" in g])

    def match(rel: str) -> bool:
        name = rel[rel.rfind("/") + 1:]
        if name in exact or name.endswith(tails) or name.startswith(heads) or any(
                len(name) >= len(head) + len(tail) and name.startswith(head) and name.endswith(tail)
                for head, tail in both):
            return True
        return bool(names and names.match(name) or paths and paths.match(rel))

    return match


_WILD = re.compile(r"[*?\[]")  # what makes a glob more than a literal with one `*`


def _union(patterns: list[str]) -> re.Pattern[str] | None:
    return re.compile("|".join(f"(?:{p})" for p in patterns)) if patterns else None


def symlink_loop(path: str) -> bool:
    """Whether a path is a symbolic link that leads back to itself (never a file, and never legitimate)."""
    try:
        os.stat(path)
    except OSError as exc:
        return exc.errno == errno.ELOOP
    return False


def walk(root: str | Path, wanted: Callable[[str], bool], exclude: Iterable[str], prefix: str = "", *,
         ignores: Ignores | None = None, boundary: Callable[[str, list[str]], bool] | None = None,
         nested: list[Nested] | None = None, seen: set[tuple[int, int]] | None = None) -> list[tuple[str, str]]:
    """(project-relative path, path) of the wanted files under root (itself at `prefix`), sorted, exclusions
    applied, symbolic links followed and their loops cut (a folder reached twice is walked once, by the first
    name in sorted order). What cannot be read is kept for the reader to report: a folder without permission
    (as "name/"), a symlink loop; nothing is skipped without a word. `python_files` leaves those out.

    `ignores`: the ignore files in force above root (`kgate.collect.ignores.above`); what they ignore is
    skipped. `boundary(folder, names)`: whether a folder below root is another project's (it holds its own
    configuration); such a folder is not walked but appended to `nested` with the ignore state above it.
    `seen`: the folders walked already (shared by the walks of nested projects, so a link cannot walk one twice)."""
    excluded = Exclusions(exclude)
    out: list[tuple[str, str]] = []
    seen = set() if seen is None else seen
    stack: list[tuple[str, str, Ignores | None]] = [(str(root), prefix, ignores)]
    while stack:
        folder, rel_folder, state = stack.pop()
        try:
            st = os.stat(folder)
            if (st.st_dev, st.st_ino) in seen:
                continue  # a symlink loop, or a folder reached by a second name
            entries = listed(folder)
        except PermissionError:
            if rel_folder:  # a folder that cannot be listed is kept (as "name/"): reading it reports it
                out.append((rel_folder, folder))
            continue
        except OSError:
            continue
        if state is not None or boundary is not None:
            names = [entry.name for entry in entries]
            if boundary is not None and nested is not None and rel_folder != prefix and boundary(folder, names):
                nested.append((folder, rel_folder, state))  # walked by its own project's walk (not seen yet)
                continue
            if state is not None:
                state = state.enter(folder, names)
        seen.add((st.st_dev, st.st_ino))
        check = state if state is not None and state.layers else None
        where = os.path.abspath(folder) + os.sep if check is not None else ""
        folders = []
        for entry in entries:
            rel = rel_folder + entry.name
            if excluded.entry(rel, entry.name):
                continue
            try:
                if entry.is_dir():
                    if check is None or not check.ignored(where, entry.name, True):
                        folders.append((entry.path, rel + "/", state))
                elif entry.is_file() and wanted(rel) and (check is None or not check.ignored(where, entry.name, False)):
                    out.append((rel, entry.path))
            except OSError as exc:
                if wanted(rel) and (isinstance(exc, PermissionError) or symlink_loop(entry.path)):
                    out.append((rel, entry.path))  # kept, so that reading it reports it (KG004)
        stack.extend(reversed(folders))  # depth first, in name order
    out.sort()
    return out


def python_files(root: Path, exclude: Iterable[str]) -> list[Path]:
    """The regular `.py` files under root, exclusions applied, sorted by path: what the project's kernels and
    helpers can be imported from (`walk`, less what cannot be read)."""
    found = walk(root, lambda rel: rel.endswith(".py"), exclude)
    return sorted(Path(path) for _rel, path in found if _regular(path))


# Folders the readers of a project's other files (its Python modules' imports, its C++ files) do not walk into,
# besides hidden ones: what a build, a package manager or Python's bytecode leaves.
_UNREAD = frozenset({"__pycache__", "node_modules", "build", "dist"})
_LISTINGS: dict[str, list[tuple[str, list[str]]]] = per_run({})


def tree_listing(root: str) -> list[tuple[str, list[str]]]:
    """(folder, the names of its files, sorted) of `root` and every folder below it in the order of `os.walk` with
    sorted folders (symbolic links to folders not followed), past hidden folders and those of `_UNREAD`: walked once
    per lint run, and shared by the readers of the project's Python files and of its C++ files; a folder the run's
    snapshot listed is not listed again (`kgate.support.filestat.listed`)."""
    found = _LISTINGS.get(root)
    if found is None:
        found = _LISTINGS[root] = []
        todo = [root]
        while todo:
            here = todo.pop()
            try:
                entries = listed(here)
            except OSError:
                continue
            names: list[str] = []
            below: list[str] = []
            for entry in entries:
                try:
                    folder = entry.is_dir()
                except OSError:
                    folder = False
                if not folder:
                    names.append(entry.name)
                elif not entry.name.startswith(".") and entry.name not in _UNREAD and not _is_link(entry):
                    below.append(entry.path)
            found.append((here, names))
            todo.extend(reversed(below))
    return found


def _is_link(entry: os.DirEntry[str]) -> bool:
    try:
        return entry.is_symlink()
    except OSError:  # as os.path.islink has it
        return False


def _regular(path: str) -> bool:
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
