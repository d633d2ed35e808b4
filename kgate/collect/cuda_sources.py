"""CUDA C++ sources of a project: files, their real flags, and the headers they include.

Each `[[tool.kgate.cuda]]` table names sources by glob. A file's flags come
from the build's `compile_commands.json` when the table names one (the
command the build really runs, in the folder it runs in), then the table's
own `flags`. The project headers a file includes (transitively, found with a
cheap `#include` scan over the file's folder and its `-I` folders) are part
of its cache key, so editing a header recompiles exactly the files that use it.
Every other file a compile read (headers outside the project, the system's
and the toolkit's) is checked against the compiler's own list, kept beside
the record (`kgate.compile.cuda_engine.FilesRead`).
"""

from __future__ import annotations

import codecs
import hashlib
import os
import re
import shlex
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

from kgate.collect.cuda_flags import ArchPair, include_dirs, split_flags
from kgate.collect.files import Exclusions, named_rel, relpath
from kgate.collect.projects import Projects
from kgate.collect.torch_builds import TorchBuild, by_source, torch_builds
from kgate.collect.torch_ext import MISSING, Torch, extension_flags, extension_name, find_torch, is_torch_header
from kgate.core.config import Config, CudaEntry
from kgate.core.errors import ConfigError
from kgate.support import jsondoc
from kgate.support.atomicio import read_input

_INCLUDE = re.compile(rb'^[ \t]*#[ \t]*include[ \t]*([<"])([^">\r\n]+)[">]', re.MULTILINE)


@dataclass(frozen=True)
class CudaSource:
    path: Path  # absolute, resolved: the file itself
    rel: str  # relative to the project root, as the project names it (a symlink is not followed)
    cwd: Path  # where the compiler runs: the compile command's directory, else the project root
    flags: tuple[str, ...]  # the project's flags without architectures, outputs and modes
    archs: tuple[ArchPair, ...]  # architectures the project's own command line names
    entry: CudaEntry
    headers: tuple[Path, ...]  # project headers it includes, transitively
    key: str  # hash of the file's and its headers' contents (and of the torch version its flags' torch folders hold)
    torch_note: str = ""  # what a missing header of this torch extension source says of its torch ("": nothing)
    build_note: str = ""  # what any compile error of it adds of the build script that lists it (`TorchBuild.note`)
    # The nvcc flags of that build script the text does not settle, as written (the file is compiled without them),
    # and the hash of the script's text they were read from (`TorchBuild.digest`)
    unsettled: tuple[str, ...] = ()
    unsettled_digest: str = ""


def defined_kernels(source: CudaSource) -> set[str]:
    """The `__global__` functions a source and the project headers it includes define, by name."""
    from kgate.collect.cuda_names import global_definitions

    names: set[str] = set()
    for path in (source.path, *source.headers):
        try:
            names.update(global_definitions(path.read_text(encoding="utf-8", errors="replace")))
        except OSError:
            continue
    return names


def cuda_sources(config: Config) -> list[CudaSource]:
    """Every configured CUDA source, sorted by path; each file once.

    A file two tables name is compiled once: that is only right when both would compile and judge it the same
    way, so two tables that disagree about it (flags, PDL, expectations, ...) are a configuration error rather
    than the first table silently winning.
    """
    out: dict[Path, CudaSource] = {}  # by the file itself: two names of one file are one source
    excluded = Exclusions(config.exclude + config.extend_exclude)
    found: list[tuple[CudaEntry, Path, str]] = []
    projects = Projects(config, per_file=True)
    for entry in config.cuda:
        matched = 0
        nested: set[str] = set()
        for path, rel, inner in _matches(config, entry, excluded, projects):
            if inner is not None:
                nested.add(inner)
                continue
            matched += 1
            found.append((entry, path, rel))
        if matched == 0:
            broken = [p for p in entry.sources if (config.root / p).is_symlink() and not (config.root / p).exists()]
            if broken:
                link = config.root / broken[0]
                raise ConfigError(f"{entry.origin}.sources: {broken[0]!r} is a symbolic link to "
                                  f"{os.readlink(link)!r}, which does not exist")
            if nested:
                raise ConfigError(f"{entry.origin}.sources: {', '.join(map(repr, entry.sources))} matches files only "
                                  f"in {_projects(nested)}, which {'is a project' if len(nested) == 1 else 'are projects'}"
                                  f" with a configuration of {'its' if len(nested) == 1 else 'their'} own: run kgate "
                                  f"check there, or name a file of it in sources to compile it with this table's flags")
            raise ConfigError(f"{entry.origin}.sources: no file matches {', '.join(map(repr, entry.sources))}")
    # The torch extensions the project's build scripts declare, for the files no compile command covers.
    builds = by_source(torch_builds(config.root, [path for _entry, path, _rel in found])) if found else {}
    commands: dict[int, dict[Path, tuple[Path, list[str]]]] = {}  # by table: its compile commands
    for entry, path, rel in found:
        if id(entry) not in commands:
            commands[id(entry)] = _compile_commands(config, entry)
        resolved = path.resolve()
        command = commands[id(entry)].get(resolved)
        build = builds.get(resolved) if command is None else None
        source = _source(config.root, path, rel, entry, command, build)
        if source.path in out:
            _same_settings(out[source.path], source)
            continue
        out[source.path] = source
    return sorted(out.values(), key=lambda source: source.rel)


def _same_settings(first: CudaSource, again: CudaSource) -> None:
    """ConfigError unless a second table naming a file would compile and judge it as the first one does."""
    a, b = first.entry, again.entry
    differ = [what for what, x, y in (
        ("flags", (first.cwd, first.flags, first.archs), (again.cwd, again.flags, again.archs)),
        ("pdl", a.pdl, b.pdl), ("expect", a.expect, b.expect), ("launch_wrappers", a.launch_wrappers, b.launch_wrappers),
        ("kind", a.kind, b.kind), ("compiler", a.compiler, b.compiler), ("targets", a.targets, b.targets),
        ("torch", a.torch, b.torch)) if x != y]
    if differ:
        table = a.origin.rsplit(": ", 1)[-1]
        raise ConfigError(f"{b.origin}.sources: {again.rel} is also in {table}, with other {', '.join(differ)}: a file "
                          f"is compiled once, with one table's settings; name it in one table only")


def _literal_match(rel: str, pattern: str) -> bool:
    return rel == pattern


def nested_projects(config: Config) -> list[str]:
    """The folders below the project that hold a configuration of their own (a `kgate.toml`, or a `pyproject.toml`
    with `[tool.kgate]`) in which a table's globs match CUDA files: those files are left to that project's own
    `kgate check` (its flags, targets and baseline), as `kgate lint` lints them under its configuration."""
    excluded = Exclusions(config.exclude + config.extend_exclude)
    projects = Projects(config, per_file=True)
    found: set[str] = set()
    for entry in config.cuda:
        found.update(inner for _path, _rel, inner in _matches(config, entry, excluded, projects) if inner is not None)
    return sorted(found)


def _matches(config: Config, entry: CudaEntry, excluded: Exclusions,
             projects: Projects) -> Iterator[tuple[Path, str, str | None]]:
    """(path, project-relative name, the nested project that holds it or None) of each file a table's sources match
    that the exclusions leave; a file a table names literally is the table's, excluded or nested."""
    for path in _glob(config.root, entry.sources):
        rel = named_rel(path, config.root)
        literal = any(_literal_match(rel, s) for s in entry.sources)
        if excluded(rel) and not literal:
            continue
        yield path, rel, None if literal else _nested_project(config.root, path, projects)


def nested_notices(config: Config) -> list[str]:
    """What a check says of the CUDA files its globs match in projects nested in it (`nested_projects`)."""
    nested = nested_projects(config) if config.cuda else []
    if not nested:
        return []
    return [f"CUDA files in {_projects(nested)} are not compiled here: "
            f"{'it is a project' if len(nested) == 1 else 'they are projects'} with a configuration of "
            f"{'its' if len(nested) == 1 else 'their'} own; run kgate check there (name a file in sources to compile "
            f"it here with this project's flags)"]


def _projects(folders: set[str] | list[str]) -> str:
    listed = sorted(folders)
    shown = ", ".join(f"{folder}/" for folder in listed[:3])
    return shown + (f" and {len(listed) - 3} more" if len(listed) > 3 else "")


def _nested_project(root: Path, path: Path, projects: Projects) -> str | None:
    """The project-relative folder of the outermost project nested in `root` that holds `path` (a folder below the
    root with its own configuration, `Projects.own_file`), None where the file is the root project's own."""
    try:
        parts = path.relative_to(root).parts[:-1]
    except ValueError:
        return None
    folder = root
    for depth, part in enumerate(parts):
        folder = folder / part
        if projects.own_file(str(folder)) is not None:
            return "/".join(parts[:depth + 1])
    return None


def _glob(root: Path, patterns: tuple[str, ...]) -> list[Path]:
    found: set[Path] = set()
    for pattern in patterns:
        if Path(pattern).is_absolute():
            raise ConfigError(f"sources: {pattern!r} must be relative to the project root")
        found.update(p for p in root.glob(pattern) if p.is_file())
    return sorted(found)


def _source(root: Path, path: Path, rel: str, entry: CudaEntry, command: tuple[Path, list[str]] | None,
            build: TorchBuild | None = None) -> CudaSource:
    """One configured file as kgate compiles it: with its compile command's flags, else with those of the torch
    extension a build script declares it in (run from the script's folder), then the table's own."""
    if command is None and build is not None:
        command = (build.script.parent, ["nvcc", *build.flags])
    if command is not None:
        cwd, argv = command
        is_nvcc = "nvcc" in Path(argv[0]).name if argv else False
        split = split_flags(argv[1:], nvcc=is_nvcc, source=str(path), cwd=cwd)
    else:
        cwd = root
        split = split_flags([], source=str(path), cwd=cwd)
    own = split_flags(list(entry.flags), source=str(path), cwd=root)
    # The table's own flags are relative to the project root; make their folders absolute.
    flags = split.flags + (own.flags if cwd == root else _absolute_includes(own.flags, root))
    archs = split.archs + own.archs
    headers, unresolved = _walk_includes(path, include_dirs(flags, cwd), root)
    key = content_key(root, (path, *headers))
    torch, note = _torch_build(unresolved, flags, cwd, entry, build is not None) if entry.torch is not False \
        else (None, "")
    if torch is not None:
        flags += extension_flags(torch, extension_name(path), flags)
        key = hashlib.sha256(f"{key}\0torch {torch.version}".encode()).hexdigest()
    return CudaSource(path=path.resolve(), rel=rel, cwd=cwd, flags=flags, archs=archs, entry=entry,
                      headers=headers, key=key, torch_note=note, build_note=build.note(root) if build else "",
                      unsettled=build.unsettled if build else (), unsettled_digest=build.digest if build else "")


def _torch_build(unresolved: frozenset[str], flags: tuple[str, ...], cwd: Path,
                 entry: CudaEntry, listed: bool = False) -> tuple[Torch | None, str]:
    """The torch whose build flags a file is given (None: none), and the note for its compile errors: a file is a
    torch extension source when a torch extension build script lists it (`listed`) or when it or a project header
    it includes includes a torch header that its own include folders do not hold (`torch = true`: every file),
    unless its flags give torch's include folder."""
    if entry.torch is True or listed:
        needed = not any((folder / "c10" / "macros" / "Macros.h").is_file() for folder in include_dirs(flags, cwd))
    else:
        needed = any(is_torch_header(name) for name in unresolved)
    if not needed:
        return None, ""
    torch = find_torch()
    if torch is None:
        return None, MISSING
    if torch.cpu_only:
        return torch, (f"torch {torch.version} here is a CPU build, whose CUDA headers are incomplete: install a "
                       f"CUDA build of torch")
    return torch, ""


def _absolute_includes(flags: tuple[str, ...], root: Path) -> tuple[str, ...]:
    out = []
    for arg in flags:
        if arg.startswith("-I") and len(arg) > 2 and not Path(arg[2:]).is_absolute():
            arg = "-I" + str(root / arg[2:])
        out.append(arg)
    return tuple(out)


def _compile_commands(config: Config, entry: CudaEntry) -> dict[Path, tuple[Path, list[str]]]:
    """Resolved source path -> (directory, argv) from the table's compile_commands.json (first entry wins).

    For a base revision's checkout (`kgate diff`) a database the revision does not hold is the working tree's
    build's, and every path it names in the working tree names the checkout's file instead: each side compiles
    its own sources."""
    if entry.compile_commands is None:
        return {}
    path = config.root / entry.compile_commands
    moved = config.checkout_of
    if moved is not None and not os.path.lexists(path):
        path = Path(moved[0]) / os.path.relpath(os.path.normpath(path), moved[1])
    where = f"{entry.origin}.compile_commands"
    try:
        data = jsondoc.loads(read_input(path))
    except FileNotFoundError:
        raise ConfigError(f"{where}: {entry.compile_commands} does not exist (generate it first, e.g. "
                          f"cmake -DCMAKE_EXPORT_COMPILE_COMMANDS=ON)") from None
    except OSError as exc:
        raise ConfigError(f"{where}: cannot read {entry.compile_commands}: {exc.strerror or exc}") from None
    except jsondoc.NotJSON as exc:
        raise ConfigError(f"{where}: cannot read {entry.compile_commands}: {exc}") from None
    if not isinstance(data, list):
        raise ConfigError(f"{where}: {entry.compile_commands} is not a JSON array of commands")
    out: dict[Path, tuple[Path, list[str]]] = {}
    for index, item in enumerate(data):
        if not isinstance(item, dict) or "file" not in item or "directory" not in item:
            continue
        directory, file, argv = _command(item, f"{where}: {entry.compile_commands}: entry {index}")
        if moved is not None:
            directory, file, argv = _moved(directory, file, argv, moved)
        resolved = (file if file.is_absolute() else directory / file).resolve()
        out.setdefault(resolved, (directory, argv))
    return out


def _moved(directory: Path, file: Path, argv: list[str], moved: tuple[str, str]) -> tuple[Path, Path, list[str]]:
    """A working tree's compile command as the checkout of `moved` (working top, checkout top) runs it: its
    paths into the working tree name the checkout's files (its folder where the checkout has it)."""
    there = Path(moved_text(str(directory), moved))
    return (there if there.is_dir() else directory), Path(moved_text(str(file), moved)), \
        [moved_text(a, moved) for a in argv]


def moved_text(text: str, moved: tuple[str, str]) -> str:
    """A path, or an argument holding one (`-I/work/repo/include`, `--include-path=...`), as the checkout of `moved`
    (working top, checkout top) names it: each path into the working tree names the checkout's file."""
    top, tree = moved[0].rstrip(os.sep) + os.sep, moved[1].rstrip(os.sep) + os.sep
    return text.replace(top, tree) if top in text else tree.rstrip(os.sep) if text + os.sep == top else text


def _command(item: dict[str, object], where: str) -> tuple[Path, Path, list[str]]:
    """(directory, file, argv) of one compilation database entry, checked as the format defines it."""
    directory, file = item["directory"], item["file"]
    if not isinstance(directory, str) or not isinstance(file, str):
        raise ConfigError(f"{where}: 'directory' and 'file' must be strings")
    arguments = item.get("arguments")
    if arguments is not None:
        if not isinstance(arguments, list) or not all(isinstance(a, str) for a in arguments):
            raise ConfigError(f"{where}: 'arguments' must be a list of strings")
        return Path(directory), Path(file), list(arguments)
    command = item.get("command", "")
    if not isinstance(command, str):
        raise ConfigError(f"{where}: 'command' must be a string")
    try:
        return Path(directory), Path(file), shlex.split(command)
    except ValueError as exc:  # an unclosed quote
        raise ConfigError(f"{where}: 'command' cannot be split into arguments: {exc}") from None


def scan_includes(path: Path, dirs: list[Path], root: Path | None) -> tuple[Path, ...]:
    """Project headers reached from `path` through `#include`, conditional or not (an over-estimate is safe);
    every header found, wherever it is, when `root` is None."""
    return _walk_includes(path, dirs, root)[0]


def _walk_includes(path: Path, dirs: list[Path], root: Path | None) -> tuple[tuple[Path, ...], frozenset[str]]:
    """`scan_includes`, and the names those files include that neither their folder (a quoted include) nor `dirs`
    holds (a toolkit's or an installed library's header: torch's, `kgate.collect.torch_ext`)."""
    root = root.resolve() if root is not None else None
    seen: set[Path] = set()
    unresolved: set[str] = set()
    todo = [path]
    while todo:
        current = todo.pop()
        try:
            data = read_input(current)  # a header that is a named pipe is not waited on
        except OSError:
            continue
        for kind, raw in _INCLUDE.findall(data.removeprefix(codecs.BOM_UTF8)):  # a BOM hides no first-line include
            name = raw.decode(errors="replace")
            found = _resolve_include(name, kind == b'"', current.parent, dirs)
            if found is None:
                unresolved.add(name)
            if found is None or found in seen or (root is not None and not found.is_relative_to(root)):
                continue
            seen.add(found)
            todo.append(found)
    return tuple(sorted(seen)), frozenset(unresolved)


def _resolve_include(name: str, quoted: bool, folder: Path, dirs: list[Path]) -> Path | None:
    for base in ([folder] if quoted else []) + dirs:
        candidate = base / name
        if candidate.is_file():
            return candidate.resolve()
    return None


def content_key(root: Path, paths: tuple[Path, ...]) -> str:
    """A hash of the files' relative paths and contents."""
    h = hashlib.sha256()
    for path in paths:
        h.update(os.fsencode(relpath(path, root)) + b"\0")  # a name that is not UTF-8: its own bytes
        try:
            h.update(hashlib.sha256(path.read_bytes()).digest())
        except OSError:
            h.update(b"missing")
    return h.hexdigest()
