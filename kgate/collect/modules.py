"""Python modules of the project, resolved from source without importing them.

Used for three things: the module name of a file that carries a
`kgate.register` decorator, the closure of project files a kernel module
imports (its cache key: editing any of them recompiles the kernel), and the
project's set-up hook for a process that imports them.
"""

from __future__ import annotations

import hashlib
import os
from pathlib import Path
from typing import TYPE_CHECKING

from kgate.collect.pyindex import ModuleSummary, module_info
from kgate.collect.pynames import Resolver
from kgate.collect.pysource import makes_kernel
from kgate.support import reads

if TYPE_CHECKING:
    from kgate.core.config import Config


def import_roots(root: Path, python_path: tuple[str, ...]) -> list[Path]:
    roots = [(root / p).resolve() for p in python_path]
    return sorted({r for r in roots if r.is_dir()}, key=lambda p: -len(p.parts))


def setup_env(config: Config) -> dict[str, str | None]:
    """The project's set-up hook for a process that will import its kernel modules (compile workers, the
    captured command): a file by absolute path, a module with the folders it is imported from."""
    from kgate.capture.runtime import ENV_SETUP, ENV_SETUP_PATH

    if config.setup is None:
        return {ENV_SETUP: None, ENV_SETUP_PATH: None}
    setup = str((config.root / config.setup).resolve()) if config.setup.endswith(".py") else config.setup
    roots = import_roots(config.root, config.python_path)
    return {ENV_SETUP: setup, ENV_SETUP_PATH: os.pathsep.join(str(r) for r in roots)}


def module_name(path: Path, roots: list[Path]) -> tuple[str, Path] | None:
    """(dotted module name, import root) of a file, trying the deepest root first: by the name the file has
    where it stands (a kernel module that is a symlink is imported by its own name, not its target's), else by
    the file it leads to."""
    for where in dict.fromkeys((Path(os.path.abspath(path)), path.resolve())):
        for root in roots:
            try:
                rel = where.relative_to(root)
            except ValueError:
                continue
            if not rel.name:
                continue  # the root itself: no module's file
            parts = list(rel.with_suffix("").parts)
            if parts and parts[-1] == "__init__":
                parts.pop()
            if parts and all(p.isidentifier() for p in parts):
                return ".".join(parts), root
    return None


def module_file(module: str, roots: list[Path], blocked: list[Path] | None = None) -> tuple[Path, Path] | None:
    """(file, import root) of a dotted module name under one of the roots.

    A candidate behind a folder without permission is passed over, as Python's import passes over it,
    and added to `blocked` (for an error that says why a module was not found).
    """
    rel = Path(*module.split("."))
    for root in roots:
        for candidate in (root / rel.with_suffix(".py"), root / rel / "__init__.py"):
            reads.note(candidate)  # found or not: a file that appears here later is the one imported
            try:
                if candidate.is_file():
                    return candidate, root
            except PermissionError:
                if blocked is not None:
                    blocked.append(candidate)
    return None


def _imports(path: Path) -> tuple[tuple[str, int, str], ...]:
    """(module, level, name) for every import statement of a file."""
    return module_info(path).imports


def _package_of(path: Path, root: Path) -> list[str]:
    rel = path.resolve().relative_to(root).with_suffix("")
    parts = list(rel.parts)
    if parts and parts[-1] == "__init__":
        return parts[:-1]
    return parts[:-1]


def closure(start: Path, roots: list[Path]) -> list[Path]:
    """The project files `start` imports, directly or not, itself included, sorted."""
    seen: dict[Path, None] = {}
    stack = [start.resolve()]
    while stack:
        path = stack.pop()
        if path in seen:
            continue
        seen[path] = None
        root = next((r for r in roots if path.is_relative_to(r)), None)
        for module, level, name in _imports(path):
            candidates: list[str] = []
            if level and root is not None:
                package = _package_of(path, root)
                base = package[: len(package) - (level - 1)] if level > 1 else package
                stem = ".".join([*base, *([module] if module else [])])
                candidates = [f"{stem}.{name}" if stem else name, stem]
            else:
                candidates = [f"{module}.{name}" if name else module, module]
                if not name:
                    parts = module.split(".")
                    candidates += [".".join(parts[:i]) for i in range(len(parts) - 1, 0, -1)]
            for candidate in candidates:
                if not candidate:
                    continue
                found = module_file(candidate, roots)
                if found is not None:
                    stack.append(found[0].resolve())
                    # a package's __init__ runs on import of any submodule
    return sorted(seen)


def hash_files(paths: list[Path], root: Path) -> str:
    digest = hashlib.sha256()
    for path in paths:
        try:
            rel = path.relative_to(root).as_posix()
        except ValueError:
            rel = path.as_posix()
        digest.update(os.fsencode(rel) + b"\0")  # a name that is not UTF-8: its own bytes
        digest.update(hashlib.sha256(path.read_bytes()).digest())
    return digest.hexdigest()


def kernel_source_key(path: Path, function: str, roots: list[Path], root: Path,
                      closures: dict[Path, str] | None = None) -> str:
    """A hash of everything one kernel's compiled code can depend on, without importing it.

    The kernel's own source (decorators included), every top-level function or
    class of its module that it names (transitively), the module's other
    top-level code (imports, constants) and the functions and classes that code
    names (a helper that builds the autotune configs runs at import, whatever
    kernel it serves), and every project file the module imports. Editing one
    kernel of a module of many recompiles that kernel only.
    `closures` memoises the imported files' hash per module within one planning pass.
    """
    path = path.resolve()
    info = module_info(path)
    digest = hashlib.sha256(info.rest_hash.encode())
    if not info.parsed:
        digest.update(b"\0unparsed")
    for name in sorted(used_defs(info, function) | import_time_defs(info, path, roots)):
        digest.update(b"\0def\0" + name.encode() + b"\0" + info.defs[name].text_hash.encode())
    memo = closures if closures is not None else {}
    if path not in memo:
        others = [p for p in closure(path, roots) if p != path]
        memo[path] = hash_files(others, root)
    digest.update(memo[path].encode())
    return digest.hexdigest()


def import_time_defs(info: ModuleSummary, path: Path, roots: list[Path]) -> set[str]:
    """The top-level functions and classes whose code may run while the module at `path` is imported: those the
    code that runs then names, and what they name in turn; a Triton kernel's body runs only when it is compiled."""
    wanted = list(info.at_import)
    seen: set[str] = set()
    resolver: Resolver | None = None
    while wanted:
        name = wanted.pop()
        if name in seen or name not in info.defs:
            continue
        decorators = info.defs[name].decorators
        if decorators:
            resolver = resolver or Resolver([str(r) for r in roots])
            if _compiled_later(decorators, path, resolver):
                continue
        seen.add(name)
        wanted.extend(info.defs[name].uses)
    return seen


def _compiled_later(decorators: tuple[str, ...], path: Path, resolver: Resolver) -> bool:
    """Whether a definition is a Triton kernel (its body is compiled when launched, never run at import), by what
    its decorators name through the module's imports (`kgate.collect.pysource.makes_kernel`): a `@numba.jit`
    function called at import runs then."""
    return any(makes_kernel(resolver.qualify(str(path), written)) for written in decorators if written != "?")


def used_defs(info: ModuleSummary, function: str) -> set[str]:
    """The top-level functions and classes a function names, transitively, itself included."""
    wanted = [function]
    seen: set[str] = set()
    while wanted:
        name = wanted.pop()
        if name in seen or name not in info.defs:
            continue
        seen.add(name)
        wanted.extend(info.defs[name].uses)
    return seen
