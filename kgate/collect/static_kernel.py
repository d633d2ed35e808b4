"""What can be known about a Triton kernel from its source alone, without importing it.

For a plain `@triton.jit` function the planner needs only its parameters, which of them are constexpr, and the
line of its `def`: all visible in the source (see `kgate.collect.pyindex`). Saving the import of the
module in a worker is what keeps an incremental run close to the compiler's
own time.

Plain means provably plain: decorated by `triton.jit` and nothing else (a
`kgate.register` aside, which returns the function unchanged), and bound to
no other object anywhere in the module. A project's own decorator, an
autotune or heuristics wrapper, or `k = triton.autotune(...)(k)` after the
definition all change what the name holds, so only an import can tell what
runs: the configs of an autotuner, however it was applied, are then planned.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from kgate.collect.pyindex import module_info

# What a decorator may name, resolved through the module's imports, for the source alone to tell what runs.
_JIT = frozenset({"triton.jit", "triton.runtime.jit", "triton.runtime.jit.jit"})
_TRANSPARENT = _JIT | {"kgate.register"}


def static_expansion(path: Path, function: str) -> dict[str, Any] | None:
    """The expansion record of a plain @triton.jit kernel, or None when only an import can tell."""
    info = module_info(path)
    node = info.defs.get(function)
    if node is None or node.kind != "function" or node.params is None:
        return None
    if not any(name in _JIT for name in node.decorators) or not all(n in _TRANSPARENT for n in node.decorators):
        return None
    if function in info.rebound or "*" in info.rebound:
        return None
    return {
        "path": str(path.resolve()),
        "line": node.line,
        "params": [{"name": name, "constexpr": constexpr, "has_default": default}
                   for name, constexpr, default in node.params],
        "heuristics": [],
        "configs": [],
    }
