"""What can be known about a Triton kernel from its source alone, without importing it.

For a plain `@triton.jit` function (no autotune or heuristics decorator) the
planner needs only its parameters, which of them are constexpr, whether it
(or a function it calls) uses `tl.dot_scaled`, and the line of its `def`: all
visible in the source. Saving the import of the module in a worker is what
keeps an incremental run close to the compiler's own time.
"""

from __future__ import annotations

import ast
from functools import lru_cache
from pathlib import Path
from typing import Any

from kgate.collect.source import try_parse

# Decorators that change what is compiled and so need the live object.
_DYNAMIC = ("autotune", "heuristics")


@lru_cache(maxsize=1024)
def _tree(path: Path, mtime_ns: int, size: int) -> ast.Module | None:
    try:
        return try_parse(path.read_bytes())
    except OSError:
        return None


def _decorator_name(node: ast.expr) -> str:
    if isinstance(node, ast.Call):
        node = node.func
    if isinstance(node, ast.Attribute):
        return node.attr
    if isinstance(node, ast.Name):
        return node.id
    return ""


def _is_constexpr(annotation: ast.expr | None) -> bool:
    # `tl.constexpr`, `triton.language.constexpr`: read from the node, not by unparsing it (an annotation
    # nested a few hundred levels deep exhausts ast.unparse's recursion).
    if isinstance(annotation, ast.Attribute):
        return annotation.attr.endswith("constexpr")
    return isinstance(annotation, ast.Name) and annotation.id.endswith("constexpr")


def static_expansion(path: Path, function: str) -> dict[str, Any] | None:
    """The expansion record of a plain @triton.jit kernel, or None when only an import can tell."""
    st = path.stat()
    tree = _tree(path, st.st_mtime_ns, st.st_size)
    if tree is None:
        return None
    defs = {node.name: node for node in tree.body if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef))}
    node = defs.get(function)
    if node is None:
        return None
    names = [_decorator_name(d) for d in node.decorator_list]
    if not any(name.endswith("jit") for name in names) or any(n in _DYNAMIC for n in names):
        return None
    args = node.args
    if args.vararg or args.kwarg or args.kwonlyargs or args.posonlyargs:
        return None
    positional = args.args
    defaults = [False] * (len(positional) - len(args.defaults)) + [True] * len(args.defaults)
    params = [{"name": a.arg, "constexpr": _is_constexpr(a.annotation), "has_default": d}
              for a, d in zip(positional, defaults)]
    return {
        "path": str(path.resolve()),
        "line": node.lineno,
        "uses_dot_scaled": _calls_dot_scaled(node, defs),
        "params": params,
        "configs": [],
    }


def _calls_dot_scaled(node: ast.AST, defs: dict[str, ast.FunctionDef | ast.AsyncFunctionDef]) -> bool:
    """Whether the kernel, or a function of its module that it calls (transitively), uses dot_scaled."""
    seen: set[int] = set()
    stack: list[ast.AST] = [node]
    while stack:
        current = stack.pop()
        if id(current) in seen:
            continue
        seen.add(id(current))
        for child in ast.walk(current):
            if isinstance(child, ast.Attribute) and child.attr == "dot_scaled":
                return True
            if isinstance(child, ast.Name):
                if child.id == "dot_scaled":
                    return True
                if child.id in defs and defs[child.id] is not current:
                    stack.append(defs[child.id])
    return False
