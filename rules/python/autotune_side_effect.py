"""## What it does
Flags an autotuned Triton kernel that updates memory with a
read-modify-write atomic (`tl.atomic_add`, `atomic_max`, `atomic_min`,
`atomic_and`, `atomic_or`, `atomic_xor`, `atomic_cas`, `atomic_xchg`, as
functions or as tensor methods) on a pointer argument that the
`triton.autotune` decorator lists in neither `reset_to_zero` nor
`restore_value`. Pointers are traced through local variables
(`ptrs = out + offs`) and through calls to `@triton.jit` helpers of the same
module.

## Why is this bad?
While it tunes, the autotuner launches the kernel once per config, several
times each, on the caller's real buffers. An atomic accumulation
(split-K partial sums, histograms, counters, semaphores) then adds every
benchmark run into the output: the first call after a new key returns a
wrong result, typically a multiple of the right one, and the error
disappears on later calls, so tests that run a shape once can miss it.

## Example
```python
@triton.autotune(configs=CONFIGS, key=["K"])
@triton.jit
def matmul_splitk(a, b, c, M, N, K, BLOCK_K: tl.constexpr):
    ...
    tl.atomic_add(c + offs, acc, mask=mask)
```

## Use instead
Name the buffer in `reset_to_zero` (zeroed before each benchmark run) or
`restore_value` (saved and put back), or pass a `pre_hook` that resets it:

```python
@triton.autotune(configs=CONFIGS, key=["K"], reset_to_zero=["c"])
@triton.jit
def matmul_splitk(a, b, c, M, N, K, BLOCK_K: tl.constexpr):
    ...
    tl.atomic_add(c + offs, acc, mask=mask)
```

A kernel with a `pre_hook` is trusted to reset what it needs. An atomic on a
pointer that cannot be traced to a parameter is reported only when the
decorator resets nothing at all.

## Options
None.

## References
- Triton's `triton.autotune` documentation (`reset_to_zero`, `restore_value`).
"""

from __future__ import annotations

import ast
from collections.abc import Iterable, Iterator

from kgate.collect import pysource as py
from kgate.collect.source import SourceFile
from kgate.core.findings import Severity
from kgate.core.rule import Report, Rule, SourceContext

ATOMICS = frozenset({"atomic_add", "atomic_and", "atomic_cas", "atomic_max", "atomic_min", "atomic_or",
                     "atomic_xchg", "atomic_xor"})
# triton.language functions that hand their first argument's pointer through.
_PASS_THROUGH = frozenset({"multiple_of", "max_contiguous", "max_constancy", "where"})
_DEPTH = 8

Function = ast.FunctionDef | ast.AsyncFunctionDef


class _Module:
    """What tracing needs of one module: imports, its top-level functions, and which of them can write
    atomically (their text says `atomic_`, or names one that does), so that only those are walked."""

    def __init__(self, source: SourceFile, info: py.ParsedModule) -> None:
        self.source = source
        self.imports = info.imports
        self.functions = {stmt.name: stmt for stmt in info.tree.body
                          if isinstance(stmt, (ast.FunctionDef, ast.AsyncFunctionDef))}
        self._summaries: dict[str, list[tuple[str, str]]] = {}
        self.writers = self._writers()

    def _text(self, fn: Function) -> str:
        return "\n".join(self.source.lines[fn.lineno - 1:fn.end_lineno])

    def _writers(self) -> set[str]:
        texts = {name: self._text(fn) for name, fn in self.functions.items()}
        writers = {name for name, text in texts.items() if "atomic_" in text}
        while True:  # functions that call a writer are writers too
            more = {name for name, text in texts.items()
                    if name not in writers and any(f"{writer}(" in text for writer in writers)}
            if not more:
                return writers
            writers |= more

    def candidate_lines(self, fn: Function) -> set[int]:
        words = ["atomic_", *(f"{name}(" for name in self.writers)]
        return {fn.lineno + i for i, line in enumerate(self.source.lines[fn.lineno - 1:fn.end_lineno])
                if any(word in line for word in words)}

    def summary(self, fn: Function, depth: int = 0) -> list[tuple[str, str]]:
        """(parameter, atomic) for each atomic a helper performs on one of its own pointer parameters."""
        if fn.name in self._summaries:
            return self._summaries[fn.name]
        self._summaries[fn.name] = []  # recursion guard
        out = [(root, op) for _node, op, roots in self.atomics(fn, depth + 1) for root in roots]
        self._summaries[fn.name] = out
        return out

    def calls(self, fn: Function) -> Iterator[ast.Call]:
        """Call nodes of fn on the lines that may hold an atomic or a call of a writer."""
        lines = self.candidate_lines(fn)
        if not lines:
            return
        for stmt in py.statements(fn):
            first = stmt.lineno
            body = getattr(stmt, "body", None)
            last = max(first, body[0].lineno - 1) if isinstance(body, list) and body else stmt.end_lineno
            if stmt is fn:
                first, last = fn.lineno, fn.lineno  # its decorators and defaults hold no atomics
            if not any(first <= line <= (last or first) for line in lines):
                continue
            for node in py.expressions(stmt):
                if isinstance(node, ast.Call):
                    yield node

    def atomics(self, fn: Function, depth: int = 0) -> Iterator[tuple[ast.Call, str, list[str]]]:
        """(call, description, parameters it writes through) for every atomic in fn, directly or via helpers."""
        params = [arg.arg for arg in py.parameters(fn)]
        local: dict[str, list[ast.expr]] | None = None
        for node in self.calls(fn):
            if local is None:
                local = _assignments(fn)
            atomic = self._atomic(node, params, local)
            if atomic is not None:
                op, pointer = atomic
                yield node, f"tl.{op}", _roots(pointer, params, local, self.imports, set(), 0)
                continue
            helper = self.functions.get(node.func.id) if isinstance(node.func, ast.Name) else None
            if helper is None or helper is fn or depth >= _DEPTH or helper.name not in self.writers:
                continue
            for param, op in self.summary(helper, depth):
                passed = _passed(node, helper, param)
                if passed is not None:
                    yield node, f"{op} in `{helper.name}`", _roots(passed, params, local, self.imports, set(), 0)

    def _atomic(self, call: ast.Call, params: list[str], local: dict[str, list[ast.expr]]) -> tuple[str, ast.expr] | None:
        func = call.func
        if not isinstance(func, ast.Attribute) and not isinstance(func, ast.Name):
            return None
        name = py.qualified(func, self.imports)
        if name is not None:
            module, _, op = name.rpartition(".")
            if op in ATOMICS and py.is_triton_language(module):
                pointer = py.argument(call, "pointer", 0)
                return (op, pointer) if pointer is not None else None
            return None
        if not isinstance(func, ast.Attribute) or func.attr not in ATOMICS:
            return None
        base = func.value
        if isinstance(base, ast.Name) and base.id not in params and base.id not in local:
            # `tl.atomic_add(ptr, ...)` with `tl` imported in a way we cannot follow.
            pointer = py.argument(call, "pointer", 0)
            return (func.attr, pointer) if pointer is not None else None
        return func.attr, base  # the tensor method: `(ptr + offs).atomic_add(v)`


def _assignments(fn: Function) -> dict[str, list[ast.expr]]:
    out: dict[str, list[ast.expr]] = {}
    for stmt in py.statements(fn):
        if isinstance(stmt, ast.Assign):
            for target in stmt.targets:
                if isinstance(target, ast.Name):
                    out.setdefault(target.id, []).append(stmt.value)
        elif isinstance(stmt, (ast.AnnAssign, ast.AugAssign)) and isinstance(stmt.target, ast.Name) \
                and stmt.value is not None:
            out.setdefault(stmt.target.id, []).append(stmt.value)
    return out


def _roots(expr: ast.expr, params: list[str], local: dict[str, list[ast.expr]], imports: dict[str, str],
           seen: set[str], depth: int) -> list[str]:
    """Parameters a pointer expression is based on: `c + offs` -> ["c"]; products are never pointers."""
    if depth > _DEPTH:
        return []
    if isinstance(expr, ast.Name):
        if expr.id in params and expr.id not in local:
            return [expr.id]
        if expr.id in seen:
            return []
        seen = seen | {expr.id}
        found: list[str] = [expr.id] if expr.id in params else []
        for value in local.get(expr.id, ()):
            found.extend(r for r in _roots(value, params, local, imports, seen, depth + 1) if r not in found)
        return found
    if isinstance(expr, ast.BinOp) and isinstance(expr.op, (ast.Add, ast.Sub)):
        left = _roots(expr.left, params, local, imports, seen, depth + 1)
        if left or isinstance(expr.op, ast.Sub):
            return left
        return _roots(expr.right, params, local, imports, seen, depth + 1)
    if isinstance(expr, ast.IfExp):
        body = _roots(expr.body, params, local, imports, seen, depth + 1)
        return body + [r for r in _roots(expr.orelse, params, local, imports, seen, depth + 1) if r not in body]
    if isinstance(expr, ast.Call):
        name = py.qualified(expr.func, imports) or py.dotted(expr.func) or ""
        op = name.rpartition(".")[2]
        if op in _PASS_THROUGH and expr.args:
            first = expr.args[1] if op == "where" and len(expr.args) > 1 else expr.args[0]
            return _roots(first, params, local, imports, seen, depth + 1)
        if isinstance(expr.func, ast.Attribute) and expr.func.attr == "to":
            return _roots(expr.func.value, params, local, imports, seen, depth + 1)
    return []


def _passed(call: ast.Call, helper: Function, param: str) -> ast.expr | None:
    names = [arg.arg for arg in py.parameters(helper)]
    if param not in names:
        return None
    return py.argument(call, param, names.index(param) if param not in
                       [a.arg for a in helper.args.kwonlyargs] else None)


def check(source: SourceFile, ctx: SourceContext) -> Iterable[Report]:
    if b"autotune" not in source.data:
        return  # atomics outside autotuned kernels are fine: no need to parse
    info = py.info(source)
    if not info.uses_triton():
        return
    module = _Module(source, info)
    constants = info.constants
    for fn in info.functions:
        decorator = py.autotune_decorator(fn, module.imports)
        if decorator is None or py.argument(decorator, "pre_hook", 5) is not None:
            continue
        protected_exprs = [py.argument(decorator, "reset_to_zero", 3), py.argument(decorator, "restore_value", 4)]
        if not all(py.resolvable(e, constants) for e in protected_exprs):
            continue  # a list we cannot read may name anything
        protected = {name for e in protected_exprs for name, _node in py.string_items(e, constants)}
        reported: set[tuple[int, int, str]] = set()
        for call, op, roots in module.atomics(fn):
            targets = [r for r in roots if r not in protected] if roots else ([] if protected else ["?"])
            for target in targets:
                key = (call.lineno, call.col_offset, target)
                if key in reported:
                    continue
                reported.add(key)
                yield _report(source, fn, call, op, target)


def _report(source: SourceFile, fn: Function, call: ast.Call, op: str, target: str) -> Report:
    if target == "?":
        message = (f"{op} in autotuned `{fn.name}` writes through a pointer the decorator never resets: every "
                   f"benchmark run adds into it again (list the buffer in reset_to_zero or restore_value)")
    else:
        message = (f"{op} in autotuned `{fn.name}` writes into `{target}`, which is in neither reset_to_zero nor "
                   f"restore_value: every benchmark run adds into it again")
    return Report(message, scope=fn.name, discriminator=target, **source.span(call))


RULE = Rule(
    code="KG202",
    name="autotune-side-effect",
    layer="python",
    severity=Severity.ERROR,
    summary="Autotuned kernel accumulates with atomics into a buffer the autotuner does not reset",
    check=check,
    doc=__doc__ or "",
    files=("*.py",),
    prefilter=(b"atomic_",),
)
