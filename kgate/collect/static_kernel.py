"""What can be known about a Triton kernel from its source alone, without importing it.

For a plain `@triton.jit` function the planner needs only its parameters, which of them are constexpr, whether it
(or a function it calls) uses `tl.dot_scaled`, and the line of its `def`: all
visible in the source (see `kgate.collect.pyindex`). Saving the import of the
module in a worker is what keeps an incremental run close to the compiler's
own time.

Plain means provably plain: decorated by `triton.jit` and nothing else (a
`kgate.register` aside, which returns the function unchanged), and bound to
no other object anywhere in the module. What a decorator names is followed
through the imports, the project's own modules included
(`from pkg.triton_utils import triton`, `from .utils import jit`), as every
rule follows it (`kgate.collect.pysource.kernel_decorator`). A project's own decorator, an
autotune or heuristics wrapper, or `k = triton.autotune(...)(k)` after the
definition all change what the name holds, so only an import can tell what
runs: the configs of an autotuner, however it was applied, are then planned.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from kgate.collect.modules import module_file, used_defs
from kgate.collect.pyindex import module_info
from kgate.collect.pynames import Resolver
from kgate.collect.pysource import jit_kind

# A decorator besides Triton's jit that returns the function unchanged, by what it names.
_TRANSPARENT = frozenset({"kgate.register"})


def calls_dot_scaled(path: Path, function: str, roots: list[Path] | None = None) -> bool | None:
    """Whether a function, or a function it names (transitively: a top-level function or class of its module, a
    def under a top-level `if` or `try`, a module-level alias `tile = _tile`, or one the module imports, by name
    (`from helpers import tile`, `... as t`) or through its module (`import helpers as h; h.tile(...)`,
    `from . import helpers`), from a project file under `roots` or beside it), calls `dot_scaled` under any
    name an import gives it: read from the syntax tree, so comments and strings say nothing. None where the
    module defines no such function at its top level (a kernel made in a factory). The one answer for every
    kind of kernel: a plain `@triton.jit` read here without an import, an autotuned, heuristics or wrapped one
    from the worker that imported it (`kgate.compile.triton_backend`), by the file and name of the function
    under the wrappers."""
    if function not in module_info(path).defs:
        return None
    wanted = [(path.resolve(), function)]
    seen: set[tuple[Path, str]] = set()
    while wanted:
        here, name = wanted.pop()
        if (here, name) in seen:
            continue
        seen.add((here, name))
        info = module_info(here)
        bound = {b[0]: b for b in info.bound}
        pending, done, outside = [name], set(), set()
        while pending:
            current = pending.pop()
            if current in done:
                continue
            done.add(current)
            if current in info.defs:
                if info.defs[current].dot_scaled:
                    return True
                pending.extend(info.defs[current].uses)
            elif current in bound:
                if bound[current][2]:
                    return True
                pending.extend(bound[current][1])
            else:
                outside.add(current)
        wanted.extend(_imported(here, info.bindings, outside, roots or []))
    return False


def _imported(path: Path, bindings: tuple[tuple[str, str, int, str], ...], names: set[str],
              roots: list[Path]) -> list[tuple[Path, str]]:
    """(file, name) of each of `names` (plain or dotted, `h.tile`) that the module at `path` imports, by name or
    through a module it imports, from a file kgate can find."""
    out = []
    by_local: dict[str, list[tuple[str, int, str]]] = {}
    for local, module, level, name in bindings:
        by_local.setdefault(local, []).append((module, level, name))
    for used in names:
        head, *rest = used.split(".")
        for module, level, name in by_local.get(head, ()):
            parts = [p for p in [*module.split("."), *([name] if name else []), *rest] if p]
            # The longest leading run of parts that is a module file, then the function named in it.
            for cut in range(len(parts) - 1, 0, -1) if len(parts) > 1 else ():
                found = _module_file(path, level, parts[:cut], roots)
                if found is not None:
                    out.append((found.resolve(), parts[cut]))
                    break
    return out


def _module_file(path: Path, level: int, parts: list[str], roots: list[Path]) -> Path | None:
    if level:
        base = path.parent
        for _ in range(level - 1):
            base = base.parent
        rel = Path(*parts)
        return next((c for c in (base / rel.with_suffix(".py"), base / rel / "__init__.py") if c.is_file()), None)
    located = module_file(".".join(parts), [path.parent, *roots])
    return located[0] if located else None


def static_expansion(path: Path, function: str, roots: list[Path] | None = None) -> dict[str, Any] | None:
    """The expansion record of a plain @triton.jit kernel, or None when only an import can tell."""
    info = module_info(path)
    node = info.defs.get(function)
    if node is None or node.kind != "function" or node.params is None:
        return None
    if function in info.rebound or "*" in info.rebound:
        return None
    resolver = Resolver([str(r) for r in roots or []])
    named = [resolver.qualify(str(path), written) for written in node.decorators]
    kinds = [jit_kind(name) for name in named]
    if "triton" not in kinds or not all(kind == "triton" or name in _TRANSPARENT for kind, name in zip(kinds, named)):
        return None
    return {
        "path": str(path.resolve()),
        "line": node.line,
        "uses_dot_scaled": bool(calls_dot_scaled(path, function, roots)),
        "params": [{"name": name, "constexpr": constexpr, "has_default": default}
                   for name, constexpr, default in node.params],
        "heuristics": [],
        "configs": [],
    }
