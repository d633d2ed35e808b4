"""## What it does
Flags an atomic in an autotuned Triton kernel whose result changes when the
autotuner runs the kernel again on the same buffers: an atomic on a pointer
argument that the `triton.autotune` decorator lists in neither
`reset_to_zero` nor `restore_value`, and that is not idempotent under
repetition. Atomics are found as functions and as tensor methods; pointers
are traced through local variables (`ptrs = out + offs`) and through calls
to `@triton.jit` helpers of the same module.

What each atomic does when a benchmark run repeats it with the same
operands:

| atomic | repeated | reported |
|---|---|---|
| `atomic_add` | adds again (Triton has no `atomic_sub`: a negative add) | always |
| `atomic_xor` | flips the same bits back | always |
| `atomic_max`, `atomic_min` | the extremum of the same values: unchanged | when read back |
| `atomic_and`, `atomic_or` | clears or sets the same bits: unchanged | when read back |
| `atomic_xchg` | writes the same value: unchanged | when read back |
| `atomic_cas` | finds the value it swapped in and leaves it: unchanged | when read back |

An idempotent atomic leaves memory as the first run left it, but a kernel
that reads the buffer back sees what the previous run left there instead of
the caller's contents. "Read back" means the old value the atomic returns
is used (`if tl.atomic_cas(slot, 0, 1) == 0:`, `was = tl.atomic_xchg(f, 1)`
when `was` is read), or the kernel loads the buffer (`tl.load(count)`). It
is not reported when the kernel also puts the buffer back, i.e. writes a
second value into it with `tl.store`, `atomic_xchg` or `atomic_cas`: a
spin lock taken with `atomic_cas(lock, 0, 1)` and released with
`atomic_xchg(lock, 0)` is free again for the next run. A `cas` that claims
a slot once and never releases it is reported: the run after the first
finds the slot taken and takes the other branch.

## Why is this bad?
While it tunes, the autotuner launches the kernel once per config, several
times each, on the caller's real buffers. An atomic accumulation
(split-K partial sums, histograms, counters) then adds every benchmark run
into the output: the first call after a new key returns a wrong result,
typically a multiple of the right one, and the error disappears on later
calls, so tests that run a shape once can miss it. A flag or a claimed
slot that the first benchmark run set makes every later run skip the work
it guards. An `amax` kept with `atomic_max` is the same after any number of
runs, and is not reported.

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
decorator resets nothing at all (and, for an idempotent atomic, only when
its old value is used). Loads and stores are followed in the kernel and in
the helpers that perform atomics.

## Options
None.

## References
- Triton's `triton.autotune` documentation (`reset_to_zero`, `restore_value`).
"""

from __future__ import annotations

import ast
from collections.abc import Iterable, Iterator
from dataclasses import dataclass

from kgate.collect import pysource as py
from kgate.collect.source import SourceFile
from kgate.core.findings import Severity
from kgate.core.rule import Report, Rule, SourceContext

ATOMICS = frozenset({"atomic_add", "atomic_and", "atomic_cas", "atomic_max", "atomic_min", "atomic_or",
                     "atomic_xchg", "atomic_xor"})
# A second run with the same operands changes the buffer again: add accumulates, xor flips the bits back.
ACCUMULATING = frozenset({"atomic_add", "atomic_xor"})
# Ops that write a value which a release can put back (a lock freed with `atomic_xchg(lock, 0)`).
_SETTERS = frozenset({"atomic_cas", "atomic_xchg", "store"})
# The written value's position after the pointer: `atomic_cas(pointer, cmp, val)`, the rest `(pointer, val)`.
_VALUE = {"atomic_cas": ("val", 2)}
_MEMORY = frozenset({"load", "store"})
# triton.language functions that hand their first argument's pointer through.
_PASS_THROUGH = frozenset({"multiple_of", "max_contiguous", "max_constancy", "where"})
_DEPTH = 8

Function = ast.FunctionDef | ast.AsyncFunctionDef


@dataclass(frozen=True)
class _Access:
    """One memory access of a kernel, directly or in a helper it calls: an atomic, a load or a store."""

    call: ast.Call  # the call in the kernel (the atomic, or the helper call that performs it)
    op: str  # "atomic_add", ..., "load", "store"
    helper: str  # the helper that performs it ('' in the kernel itself)
    roots: tuple[str, ...]  # the kernel parameters the pointer is based on
    used: bool  # the value the call returns is used (an atomic's old value)
    value: str  # the written value, as `ast.dump` text ('' for a load or a value not passed)

    @property
    def describe(self) -> str:
        return f"tl.{self.op}" + (f" in `{self.helper}`" if self.helper else "")


class _Module:
    """What tracing needs of one module: imports, its top-level functions, and which of them can write
    atomically (their text says `atomic_`, or names one that does), so that only those are walked."""

    def __init__(self, source: SourceFile, info: py.ParsedModule) -> None:
        self.source = source
        self.imports = info.imports
        self.functions = {stmt.name: stmt for stmt in info.tree.body
                          if isinstance(stmt, (ast.FunctionDef, ast.AsyncFunctionDef))}
        self._summaries: dict[str, list[tuple[str, _Access]]] = {}
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

    def candidate_lines(self, fn: Function, memory: bool) -> set[int]:
        words = ["atomic_", *(f"{name}(" for name in self.writers), *(("load", "store") if memory else ())]
        return {fn.lineno + i for i, line in enumerate(self.source.lines[fn.lineno - 1:fn.end_lineno])
                if any(word in line for word in words)}

    def summary(self, fn: Function, depth: int = 0) -> list[tuple[str, _Access]]:
        """(parameter, access) for each atomic, load or store a helper performs on one of its own pointer
        parameters."""
        if fn.name in self._summaries:
            return self._summaries[fn.name]
        self._summaries[fn.name] = []  # recursion guard
        out = [(root, access) for access in self.accesses(fn, memory=True, depth=depth + 1)
               for root in access.roots]
        self._summaries[fn.name] = out
        return out

    def calls(self, fn: Function, memory: bool) -> Iterator[ast.Call]:
        """Call nodes of fn on the lines that may hold an atomic or a call of a writer (and, with
        `memory`, a load or a store)."""
        lines = self.candidate_lines(fn, memory)
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

    def accesses(self, fn: Function, memory: bool = False, depth: int = 0) -> Iterator[_Access]:
        """Every atomic in fn, directly or via helpers, with the parameters it writes through; with
        `memory`, the loads and stores too."""
        params = [arg.arg for arg in py.parameters(fn)]
        local: dict[str, list[ast.expr]] | None = None
        discarded: set[int] = set()
        for node in self.calls(fn, memory):
            if local is None:
                local = _assignments(fn)
                discarded = _discarded(fn)
            found = self._access(node, params, local, memory)
            if found is not None:
                op, pointer, value = found
                yield _Access(node, op, "", tuple(_roots(pointer, params, local, self.imports, set(), 0)),
                              id(node) not in discarded, ast.dump(value) if value is not None else "")
                continue
            helper = self.functions.get(node.func.id) if isinstance(node.func, ast.Name) else None
            if helper is None or helper is fn or depth >= _DEPTH or helper.name not in self.writers:
                continue
            for param, inner in self.summary(helper, depth):
                if inner.op in _MEMORY and not memory:
                    continue
                passed = _passed(node, helper, param)
                if passed is not None:
                    roots = tuple(_roots(passed, params, local, self.imports, set(), 0))
                    yield _Access(node, inner.op, inner.helper or helper.name, roots, inner.used, inner.value)

    def _access(self, call: ast.Call, params: list[str], local: dict[str, list[ast.expr]],
                memory: bool) -> tuple[str, ast.expr, ast.expr | None] | None:
        """(op, pointer, written value) of an atomic (or, with `memory`, a tl.load or tl.store) call."""
        func = call.func
        if not isinstance(func, ast.Attribute) and not isinstance(func, ast.Name):
            return None
        name = py.qualified(func, self.imports)
        if name is not None:
            module, _, op = name.rpartition(".")
            if (op in ATOMICS or memory and op in _MEMORY) and py.is_triton_language(module):
                return _operands(call, op, method=False)
            return None
        if not isinstance(func, ast.Attribute) or func.attr not in ATOMICS:
            return None
        base = func.value
        if isinstance(base, ast.Name) and base.id not in params and base.id not in local:
            # `tl.atomic_add(ptr, ...)` with `tl` imported in a way we cannot follow.
            return _operands(call, func.attr, method=False)
        operands = _operands(call, func.attr, method=True)  # the tensor method: `(ptr + offs).atomic_add(v)`
        return (func.attr, base, operands[2]) if operands is not None else None


def _discarded(fn: Function) -> set[int]:
    """ids of the calls whose value fn drops: a statement of its own, or assigned to names never read."""
    read = {node.id for node in ast.walk(fn) if isinstance(node, ast.Name) and isinstance(node.ctx, ast.Load)}
    out: set[int] = set()
    for stmt in py.statements(fn):
        if isinstance(stmt, ast.Expr):
            out.add(id(stmt.value))
        elif isinstance(stmt, ast.Assign) and all(isinstance(t, ast.Name) and t.id not in read for t in stmt.targets):
            out.add(id(stmt.value))
    return out


def _operands(call: ast.Call, op: str, method: bool) -> tuple[str, ast.expr, ast.expr | None] | None:
    """(op, pointer, written value) of a call; the tensor method form has no pointer argument."""
    name, position = _VALUE.get(op, ("value" if op == "store" else "val", 1))
    value = None if op == "load" else py.argument(call, name, position - 1 if method else position)
    if method:
        return op, call.func, value
    pointer = py.argument(call, "pointer", 0)
    return (op, pointer, value) if pointer is not None else None


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
        atomics = list(module.accesses(fn))
        if not atomics:
            continue
        # Only an idempotent atomic needs the kernel's loads and stores: does the kernel read the buffer back?
        memory = atomics if all(a.op in ACCUMULATING for a in atomics) else list(module.accesses(fn, memory=True))
        reported: set[tuple[int, int, str]] = set()
        for access in atomics:
            targets = [r for r in access.roots if r not in protected] if access.roots else \
                ([] if protected else ["?"])
            for target in targets:
                key = (access.call.lineno, access.call.col_offset, target)
                if key in reported or not _repeats_differently(access, target, memory):
                    continue
                reported.add(key)
                yield _report(source, fn, access, target)


def _repeats_differently(access: _Access, target: str, memory: list[_Access]) -> bool:
    """Whether a second benchmark run of this atomic leaves a different result than the first.

    add and xor change the buffer again. The others write what the first run wrote; they matter only
    when the kernel reads the buffer back (the old value an atomic returns, or a load) without putting
    it back first (a second value written into it by a store, an xchg or a cas: a lock's release).
    """
    if access.op in ACCUMULATING:
        return True
    if target == "?":
        return access.used
    on_target = [a for a in memory if target in a.roots]
    read_back = any(a.op == "load" or a.op in ATOMICS and a.used for a in on_target)
    restored = len({a.value for a in on_target if a.op in _SETTERS}) > 1
    return read_back and not restored


_CONSEQUENCE = {
    "atomic_add": "every benchmark run adds into it again",
    "atomic_xor": "every benchmark run flips the same bits again",
}


def _report(source: SourceFile, fn: Function, access: _Access, target: str) -> Report:
    op = access.describe
    consequence = _CONSEQUENCE.get(access.op, "")
    if target == "?":
        if not consequence:
            consequence = ("the old value it returns is what the previous benchmark run left there, so runs after "
                           "the first take another path")
        message = (f"{op} in autotuned `{fn.name}` writes through a pointer the decorator never resets: "
                   f"{consequence} (list the buffer in reset_to_zero or restore_value)")
    else:
        if not consequence:
            consequence = (f"the kernel reads `{target}` back (a load or the old value an atomic returns) and finds "
                           f"what the previous benchmark run left there, since nothing in the kernel puts it back")
        message = (f"{op} in autotuned `{fn.name}` writes into `{target}`, which is in neither reset_to_zero nor "
                   f"restore_value: {consequence}")
    return Report(message, scope=fn.name, discriminator=target, **source.span(access.call))


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
