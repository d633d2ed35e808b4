"""What can be known about a Triton kernel from its source alone, without importing it.

For a plain `@triton.jit` function (no autotune or heuristics decorator) the
planner needs only its parameters, which of them are constexpr, whether it
(or a function it calls) uses `tl.dot_scaled`, and the line of its `def`: all
visible in the source (see `kgate.collect.pyindex`). Saving the import of the
module in a worker is what keeps an incremental run close to the compiler's
own time.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from kgate.collect.modules import used_defs
from kgate.collect.pyindex import module_info

# Decorators that change what is compiled and so need the live object.
_DYNAMIC = ("autotune", "heuristics")


def static_expansion(path: Path, function: str) -> dict[str, Any] | None:
    """The expansion record of a plain @triton.jit kernel, or None when only an import can tell."""
    info = module_info(path)
    node = info.defs.get(function)
    if node is None or node.kind != "function" or node.params is None:
        return None
    if not any(name.endswith("jit") for name in node.decorators) or any(n in _DYNAMIC for n in node.decorators):
        return None
    called = used_defs(info, function)
    return {
        "path": str(path.resolve()),
        "line": node.line,
        "uses_dot_scaled": any(info.defs[name].dot_scaled for name in called),
        "params": [{"name": name, "constexpr": constexpr, "has_default": default}
                   for name, constexpr, default in node.params],
        "configs": [],
    }
