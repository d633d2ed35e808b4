"""What can be known about a Triton kernel from its source alone, without importing it.

For a plain `@triton.jit` (or `@gluon.jit`) function the planner needs only its
parameters, which of them are constexpr, and the line of its `def`: all visible in the source (see `kgate.collect.pyindex`). Saving the import of the
module in a worker is what keeps an incremental run close to the compiler's
own time.

Plain means provably plain: decorated by `triton.jit` or Gluon's `jit` and
nothing else (a `kgate.register` aside, which returns the function unchanged), and bound to
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

from kgate.collect.pyindex import module_info
from kgate.collect.pynames import Resolver
from kgate.collect.pysource import jit_kind

# A decorator besides Triton's jit that returns the function unchanged, by what it names.
_TRANSPARENT = frozenset({"kgate.register"})


def static_expansion(path: Path, function: str, roots: list[Path] | None = None) -> dict[str, Any] | None:
    """The expansion record of a plain @triton.jit or @gluon.jit kernel, or None when only an import can tell."""
    info = module_info(path)
    node = info.defs.get(function)
    if node is None or node.kind != "function" or node.params is None:
        return None
    if function in info.rebound or "*" in info.rebound:
        return None
    resolver = Resolver([str(r) for r in roots or []])
    named = [resolver.qualify(str(path), written) for written in node.decorators]
    kinds = [jit_kind(name) for name in named]
    jits = [kind for kind in kinds if kind is not None]
    if len(jits) != 1 or not all(kind is not None or name in _TRANSPARENT for kind, name in zip(kinds, named)):
        return None
    return {
        "path": str(path.resolve()),
        "line": node.line,
        "params": [{"name": name, "constexpr": constexpr, "has_default": default}
                   for name, constexpr, default in node.params],
        "heuristics": [],
        "configs": [],
        "keys": [],
    }
