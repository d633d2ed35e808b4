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

A `pre_hook`, the decorator's or a config's own
(`triton.Config(..., pre_hook=init_to_zero("c"))`), resets the arguments
it calls `zero_()`, `fill_(...)` or `copy_(...)` on through the argument
dict it is given (`nargs["c"].zero_()`). kgate reads a hook that is a
lambda, a function of the module, or a call of a module function that
returns one; in a hook that loops over a literal list (`for name in
["dw", "db"]: nargs[name].zero_()`), `nargs[name]` stands for that list's
names; in a hook made by such a call, `nargs[name]` with `name` not a
literal stands for every name the call passes (`init_to_zero(["dq",
"dk"])`). A hook attached under a condition (`pre_hook=zero_c if split_k >
1 else None`) counts as the hook. A hook it cannot read (imported from
elsewhere) is trusted to reset what it must.

A config's pre_hook protects the buffer only when every config that runs
the atomic resets it. The configs are followed through list literals, `+`,
`a if flag else b`, comprehensions, module constants, names assigned in the
branches of a module-level `if`, functions of the module that build the
list (a config's `pre_hook=pre_hook` taking what the call passes for that
parameter), and calls of other functions given configs (assumed to choose among
them); a constexpr value taken from a loop over literals (`for split_k in
[1]`, `for block, split in TABLE`) is known when the loop gives one value.
Parts of the list that cannot be read (a list built in another module) are
left out and the configs that can be read decide; when none can be read,
config hooks protect nothing. A hook made by a call whose names cannot be
listed (`init_to_zero(*[f"C{i}" for i in ...])`) is trusted. An
`early_config_prune` function of the module that builds configs of its
own and hands back only those replaces the list with them (a pruner that
hands back some of the configs it was given adds its own to the list). A config
whose literal constexpr values make an `if` around the atomic take the
other branch does not run it: with `if SPLIT_K == 1: tl.store(...) else:
tl.atomic_add(...)`, only the split-K configs need a hook, and when every
config of a list read whole takes the other branch the atomic is not
reported. A
`@triton.heuristics` entry that always gives the same literal
(`"SPLIT_K": lambda args: 1`, or a module function every `return` of
which does) fixes that constexpr under every config: an atomic its `if`
never reaches is not reported.

An add is not reported either when, before it and on every path to it,
the kernel stores through the same address (the store's pointer adds to
every term of the atomic's: `tl.store(d + row + offs, ...)` then
`tl.atomic_add(d + row, x)`): each run overwrites what the previous one
added before adding again. The names in the atomic's pointer must be
assigned once in the kernel: a `ptrs` reassigned for another tile (a
stream-K kernel storing whole tiles, then adding partial ones) is not the
address the store wrote.

An atomic on a pointer that cannot be traced to a parameter is reported
only when nothing resets anything at all (and, for an idempotent atomic,
only when its old value is used). A pointer moved in place (`ptrs +=
stride`) stays based on what it was. Loads and stores are followed in the
kernel and in the helpers that perform atomics.

## Autotune in every form
Triton may be reached through the project's own module (`from
pkg.triton_utils import tl, triton`, `import pkg.triton_utils as tu` and
`tu.tl.atomic_add`): names are followed into it, as if the kernel module
imported Triton itself. Besides a `@triton.autotune(...)` decorator on the kernel, KG202 reads the
autotuner applied by a call (`tuned = triton.autotune(configs=CONFIGS,
key=[...])(kernel)`, also on `triton.jit(fn)`), through an alias (`tune =
triton.autotune`) or a `functools.partial` of it, and through a wrapper: a
function of the module, or of another module of the project that it
imports, that calls `triton.autotune` (or another wrapper) and passes on
its own parameters, by name or as `**kwargs`:

```python
# tuning.py
def get_autotune_kernel(kernel, configs, **kwargs):
    return triton.autotune(configs=configs, **kwargs)(kernel)
```

A wrapper of another module is read only when its name says it tunes
(`*tune*`). The kernel may be chosen through a local variable (`kernel =
bwd_persistent if persistent else bwd`: both are judged) or be imported
from another module of the project (`triton.autotune(...)(kernels.bwd)`):
then the finding is at the application, and names the atomic in the
kernel's file. `reset_to_zero`, `restore_value`, `pre_hook`, `configs` and
`prune_configs_by` are read from the call as from a decorator; a value
written in another module (a wrapper's own `pre_hook`) is trusted.

A reset list the launcher builds per call is followed through the
assignments of literal lists, `append`, `extend` and `+=` of literals before
the call, on every path through the `if`s on the way (a test on the list
itself, `if len(restore) == 0: restore = None`, is decided by its value):

```python
restore = ()
if varlen:
    restore = ("dq", "dk")
else:
    restore = ("dk",)
get_autotune_kernel(bwd, CONFIGS, key=["N"], restore_value=restore)
```

A buffer the kernel accumulates into that the list holds on no path is an
error, as for a decorator. One it holds on some paths only (`dq` above) is a
warning that names the condition under which it is restored (`varlen`):
the other launches accumulate, but the project has thought about the
buffer, and the condition may match the only mode in which the kernel adds
into it. A list built in any other way (a call, a parameter, a loop over a
variable) is trusted. When a list names the buffer with another case
(`Dv` for `DV`), the finding says so: Triton matches names exactly.

## Options
None.

## References
- Triton's `triton.autotune` documentation (`reset_to_zero`, `restore_value`).
"""

from __future__ import annotations

import ast
import dataclasses
import os
import re
from collections.abc import Iterable, Iterator
from dataclasses import dataclass
from typing import Any, cast

from kgate.collect import pyautotune, pysparse
from kgate.collect import pysource as py
from kgate.collect.source import SourceFile
from kgate.core.artifacts import Artifact
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
_CONFIG = frozenset({"triton.Config", "triton.runtime.Config", "triton.runtime.autotuner.Config"})

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
    pointer: ast.expr | None = None  # the pointer expression, for an access in the kernel itself
    language: str = "tl"  # how the kernel's language names the op: "tl", or "gl" in a Gluon function

    @property
    def describe(self) -> str:
        return f"{self.language}.{self.op}" + (f" in `{self.helper}`" if self.helper else "")


class _Module:
    """What tracing needs of one module: imports, its top-level functions, and which of them can write
    atomically (their text says `atomic_`, or names one that does), so that only those are walked."""

    def __init__(self, source: SourceFile, info: py.ParsedModule) -> None:
        self.source = source
        self.imports = info.imports
        self.constants = info.constants
        self.whole = info.whole
        self._loaded: dict[str, Function | None] = {}
        self.functions = {stmt.name: stmt for stmt in info.tree.body
                          if isinstance(stmt, (ast.FunctionDef, ast.AsyncFunctionDef))}
        self.branches = _branch_assignments(info.tree.body)
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

    def function(self, name: str) -> Function | None:
        """A top-level function of the module; one the lint engine's reduced parse left out (a pre_hook, a config
        builder: their text names no atomic) is parsed on its own when first asked for."""
        if name in self.functions or self.whole:
            return self.functions.get(name)
        if name not in self._loaded:
            self._loaded[name] = self._load(name)
        return self._loaded[name]

    def _load(self, name: str) -> Function | None:
        blocks = pysparse.split(self.source.lines)
        block = pysparse.definitions(self.source.lines, blocks).get(name) if blocks is not None else None
        return py.parse_definition(self.source, block, name)

    def configs(self, expr: ast.expr | None, depth: int = 0,
                env: dict[str, set[object]] | None = None) -> list[_Config] | None:
        """The configs a `configs=` expression lists that kgate can read; None when it can read none of them.

        Follows list literals, `+`, `a if flag else b`, comprehensions (their element stands for every config
        they make; a value taken from a loop over literals is known when the loop gives one value), module
        constants and names assigned in the branches of a module-level `if`, functions of the module that build
        the list (every `Config(...)` in their body), and calls of other functions given configs
        (`select(CONFIGS)`: assumed to choose among them). Parts it cannot read (a list built in another
        module) are left out: the configs it can read decide.
        """
        if expr is None or depth > _DEPTH:
            return None
        if isinstance(expr, (ast.List, ast.Tuple)):
            return _readable([self.configs(elt.value if isinstance(elt, ast.Starred) else elt, depth + 1, env)
                              for elt in expr.elts])
        if isinstance(expr, ast.BinOp) and isinstance(expr.op, ast.Add):
            return _readable([self.configs(expr.left, depth + 1, env), self.configs(expr.right, depth + 1, env)])
        if isinstance(expr, ast.IfExp):
            return _readable([self.configs(expr.body, depth + 1, env), self.configs(expr.orelse, depth + 1, env)])
        if isinstance(expr, (ast.ListComp, ast.GeneratorExp)):
            inner = dict(env or {})
            for generator in expr.generators:
                _loop_values(inner, generator.target, generator.iter, self.constants, {})
            return self.configs(expr.elt, depth + 1, inner)
        if isinstance(expr, ast.Name):
            value = self.constants.get(expr.id)
            if value is not None:
                return self.configs(value, depth + 1, env)
            branches = self.branches.get(expr.id)
            return _readable([self.configs(v, depth + 1, env) for v in branches]) if branches else None
        if not isinstance(expr, ast.Call):
            return None
        if self._is_config(expr.func):
            return [self._config(expr, env or {})]
        builder = self.function(expr.func.id) if isinstance(expr.func, ast.Name) else None
        if builder is not None:
            local = _builder_values(builder, self.constants)
            given = _bound(builder, expr)
            made = [self._config(node, local, given) for node in ast.walk(builder)
                    if isinstance(node, ast.Call) and self._is_config(node.func)]
            return made or None
        return _readable([self.configs(arg.value if isinstance(arg, ast.Starred) else arg, depth + 1, env)
                          for arg in expr.args])

    def pruned(self, by: ast.expr | None, configs: list[_Config] | None) -> list[_Config] | None:
        """The configs the benchmark runs after `prune_configs_by={"early_config_prune": fn}`: a module function
        that builds configs of its own (`triton.Config(...)` in its body) and hands back only those replaces the
        list; one that hands back anything else (a filtered list of the configs it was given) may pass any of
        them on as well; a pruner kgate cannot read leaves the list as it is."""
        if not isinstance(by, ast.Dict):
            return configs
        pruner = next((value for key, value in zip(by.keys, by.values)
                       if isinstance(key, ast.Constant) and key.value == "early_config_prune"), None)
        fn = self.function(pruner.id) if isinstance(pruner, ast.Name) else None
        if fn is None:
            return configs
        made = [node for node in ast.walk(fn) if isinstance(node, ast.Call) and self._is_config(node.func)]
        if not made:
            return configs
        built = {id(node) for node in made}
        handed = [node.value for node in ast.walk(fn)
                  if isinstance(node, (ast.Return, ast.Yield)) and node.value is not None]
        values = _builder_values(fn, self.constants)
        own = [self._config(node, values) for node in made]
        if all(id(value) in built for value in handed):
            return own
        return None if configs is None else _readable([configs, own])

    def fixed(self, fn: Function) -> dict[str, object]:
        """Constexpr values a `@triton.heuristics({...})` on the kernel sets to one literal whatever the
        arguments (`"SPLIT_K": lambda args: 1`, or a module function every `return` of which gives the same
        literal): they hold under every config."""
        out: dict[str, object] = {}
        for decorator in fn.decorator_list:
            if not (isinstance(decorator, ast.Call) and decorator.args and isinstance(decorator.args[0], ast.Dict)
                    and (py.qualified(decorator.func, self.imports) or "").rpartition(".")[2] == "heuristics"):
                continue
            table = decorator.args[0]
            for key, value in zip(table.keys, table.values):
                if not (isinstance(key, ast.Constant) and isinstance(key.value, str)):
                    continue
                if isinstance(value, ast.Lambda):
                    results: list[ast.expr | None] = [value.body]
                elif isinstance(value, ast.Name) and (helper := self.function(value.id)) is not None:
                    results = [node.value for node in ast.walk(helper) if isinstance(node, ast.Return)]
                else:
                    continue
                literals = {r.value for r in results if isinstance(r, ast.Constant)}
                if results and all(isinstance(r, ast.Constant) for r in results) and len(literals) == 1:
                    out[key.value] = literals.pop()
        return out

    def _is_config(self, func: ast.expr) -> bool:
        name = py.qualified(func, self.imports)
        if name is not None:
            return name in _CONFIG
        written = py.dotted(func) or ""
        return written == "Config" or written.endswith(".Config")

    def _config(self, call: ast.Call, env: dict[str, set[object]],
                given: dict[str, ast.expr] | None = None) -> _Config:
        values: dict[str, object] = {}
        first = py.argument(call, "kwargs", 0)
        if isinstance(first, ast.Dict):
            for key, value in zip(first.keys, first.values, strict=True):
                if not (isinstance(key, ast.Constant) and isinstance(key.value, str)):
                    continue
                if isinstance(value, ast.Constant):
                    values[key.value] = value.value
                elif isinstance(value, ast.Name) and len(env.get(value.id, ())) == 1:
                    values[key.value] = next(iter(env[value.id]))  # a loop over literals that gives one value
        hook = py.argument(call, "pre_hook", 5)
        if isinstance(hook, ast.Name) and given and hook.id in given:
            hook = given[hook.id]  # `pre_hook=pre_hook`, a parameter of the builder: what the caller passes
        return _Config(values, self.resets(hook))

    def resets(self, hook: ast.expr | None) -> frozenset[str] | None:
        """The kernel arguments a pre_hook resets; None for a hook kgate cannot read.

        A hook is read when it is a lambda or a function of the module, or a call of a module function that
        returns one (`init_to_zero("dq")`). It resets the arguments it calls `zero_()`, `fill_(...)` or
        `copy_(...)` on through its argument dict: `nargs["dq"].zero_()`; in a hook made by a call,
        `nargs[name]` with `name` not a literal stands for every name the call passes.
        """
        if hook is None or isinstance(hook, ast.Constant) and hook.value is None:
            return frozenset()
        if isinstance(hook, ast.IfExp):
            # `init_to_zero("c") if split_k > 1 else None`: the project attaches the hook where its condition
            # says the kernel accumulates; the hook's resets are trusted for the config.
            sides = [side for side in (hook.body, hook.orelse)
                     if not (isinstance(side, ast.Constant) and side.value is None)]
            found = [self.resets(side) for side in sides]
            if any(f is None for f in found):
                return None
            return frozenset().union(*[f for f in found if f is not None])
        if isinstance(hook, ast.Lambda):
            return frozenset(_reset_keys(hook, [], self.constants))
        if isinstance(hook, ast.Name) and (fn := self.function(hook.id)) is not None:
            return frozenset(_reset_keys(fn, [], self.constants))
        if isinstance(hook, ast.Call) and isinstance(hook.func, ast.Name) \
                and (maker := self.function(hook.func.id)) is not None:
            given = [arg.value if isinstance(arg, ast.Starred) else arg
                     for arg in [*hook.args, *(k.value for k in hook.keywords)]]
            if not all(py.resolvable(arg, self.constants) for arg in given):
                return None  # `init_to_zero(*[f"C{i}" for i in ...])`: names kgate cannot list
            passed = [name for arg in given for name, _at in py.string_items(arg, self.constants)]
            return frozenset(_reset_keys(maker, passed, self.constants))
        return None

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
        language = "gl" if py.kernel_language(fn, self.imports) == "gluon" else "tl"
        for node in self.calls(fn, memory):
            if local is None:
                local = _assignments(fn)
                discarded = _discarded(fn)
            found = self._access(node, params, local, memory)
            if found is not None:
                op, pointer, value = found
                yield _Access(node, op, "", tuple(_roots(pointer, params, local, self.imports, set(), 0)),
                              id(node) not in discarded, ast.dump(value) if value is not None else "", pointer,
                              language)
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
                    yield _Access(node, inner.op, inner.helper or helper.name, roots, inner.used, inner.value,
                                  language=inner.language)

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


class _Partial(list[Any]):
    """Configs read from an expression some parts of which kgate could not read."""


def _bound(fn: Function, call: ast.Call) -> dict[str, ast.expr]:
    """A function's parameters bound to what a call passes (or to their defaults)."""
    params = py.parameters(fn)
    out: dict[str, ast.expr] = {}
    positional = [*fn.args.posonlyargs, *fn.args.args]
    for param, default in zip(positional[len(positional) - len(fn.args.defaults):], fn.args.defaults):
        out[param.arg] = default
    for param, kw_default in zip(fn.args.kwonlyargs, fn.args.kw_defaults):
        if kw_default is not None:
            out[param.arg] = kw_default
    for param, arg in zip(positional, call.args):
        if isinstance(arg, ast.Starred):
            break
        out[param.arg] = arg
    for keyword in call.keywords:
        if keyword.arg is not None and any(p.arg == keyword.arg for p in params):
            out[keyword.arg] = keyword.value
    return out


def _readable(parts: list[list[_Config] | None]) -> list[_Config] | None:
    """The configs of the parts kgate could read (a `_Partial` when some could not be read); None when it could
    read none."""
    found = [part for part in parts if part is not None]
    if not found:
        return None
    configs = [c for part in found for c in part]
    return _Partial(configs) if len(found) < len(parts) or any(isinstance(p, _Partial) for p in found) else configs


def _branch_assignments(body: list[ast.stmt]) -> dict[str, list[ast.expr]]:
    """Names assigned in the branches of module-level `if` statements (`configs = A if ... else B` spelled as
    statements), with every value assigned."""
    out: dict[str, list[ast.expr]] = {}
    stack = [stmt for stmt in body if isinstance(stmt, ast.If)]
    while stack:
        stmt = stack.pop()
        for branch in (stmt.body, stmt.orelse):
            for inner in branch:
                if isinstance(inner, ast.If):
                    stack.append(inner)
                elif isinstance(inner, ast.Assign):
                    for target in inner.targets:
                        if isinstance(target, ast.Name):
                            out.setdefault(target.id, []).append(inner.value)
    return out


def _literals(expr: ast.expr, constants: dict[str, ast.expr], local: dict[str, ast.expr]) -> list[object] | None:
    """The items of a literal list or tuple (directly, through a module constant or a local name)."""
    if isinstance(expr, ast.Name):
        found = local.get(expr.id, constants.get(expr.id))
        return _literals(found, constants, {}) if found is not None and found is not expr else None
    if isinstance(expr, (ast.List, ast.Tuple)):
        items: list[object] = []
        for elt in expr.elts:
            if isinstance(elt, ast.Constant):
                items.append(elt.value)
            elif isinstance(elt, (ast.Tuple, ast.List)) and all(isinstance(e, ast.Constant) for e in elt.elts):
                items.append(tuple(e.value for e in elt.elts))  # type: ignore[attr-defined]
            else:
                return None
        return items
    return None


def _loop_values(env: dict[str, set[object]], target: ast.expr, iterable: ast.expr, constants: dict[str, ast.expr],
                 local: dict[str, ast.expr]) -> None:
    """The values a loop over a literal list gives its target (`for s in [1]`, `for a, s in TABLE`)."""
    items = _literals(iterable, constants, local)
    if items is None:
        return
    if isinstance(target, ast.Name):
        env[target.id] = set(items) if all(not isinstance(i, tuple) for i in items) else set()
    elif isinstance(target, ast.Tuple):
        for position, elt in enumerate(target.elts):
            if isinstance(elt, ast.Name):
                env[elt.id] = {item[position] for item in items
                               if isinstance(item, tuple) and len(item) == len(target.elts)}


def _builder_values(fn: Function, constants: dict[str, ast.expr]) -> dict[str, set[object]]:
    """The values the loops of a config-building function give their targets."""
    local = {t.id: stmt.value for stmt in ast.walk(fn) if isinstance(stmt, ast.Assign)
             for t in stmt.targets if isinstance(t, ast.Name)}
    env: dict[str, set[object]] = {}
    for node in ast.walk(fn):
        if isinstance(node, ast.For):
            _loop_values(env, node.target, node.iter, constants, local)
        elif isinstance(node, ast.comprehension):
            _loop_values(env, node.target, node.iter, constants, local)
    return env


_RESETS = frozenset({"zero_", "fill_", "copy_"})


def _reset_keys(fn: ast.AST, passed: list[str], constants: dict[str, ast.expr]) -> list[str]:
    """The keys of `nargs[key].zero_()` (or `fill_`, `copy_`) calls in a hook; a key that is a loop variable over
    a literal list (`for name in ["dw", "db"]`) stands for that list's names, any other key that is not a literal
    for the names the hook's maker was given."""
    loops: dict[str, list[str]] = {}
    for node in ast.walk(fn):
        if isinstance(node, (ast.For, ast.comprehension)) and isinstance(node.target, ast.Name) \
                and not isinstance(node.iter, ast.Constant) and py.resolvable(node.iter, constants):
            names = [name for name, _at in py.string_items(node.iter, constants)]
            if names:
                loops.setdefault(node.target.id, []).extend(names)
    out: list[str] = []
    for node in ast.walk(fn):
        if not (isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute) and node.func.attr in _RESETS
                and isinstance(node.func.value, ast.Subscript)):
            continue
        key = node.func.value.slice
        if isinstance(key, ast.Constant) and isinstance(key.value, str):
            names = [key.value]
        elif isinstance(key, ast.Name) and key.id in loops:
            names = loops[key.id]
        else:
            names = passed
        out.extend(n for n in names if n not in out)
    return out


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
        elif isinstance(stmt, ast.AugAssign) and isinstance(stmt.op, (ast.Add, ast.Sub)):
            continue  # `ptrs += stride` moves a pointer along: it stays based on what it was
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
    if b"atomic_" not in source.data:
        # No atomic here, but the autotuner may be applied here to a kernel of another module that has them.
        if _applied_otherwise(source) and (whole := py.ParsedModule(source.tree, origin=source)).uses_triton():
            yield from _applications(source, None, whole)
        return
    info = py.info(source)
    if not info.uses_triton():
        return
    module = _Module(source, info)
    reported: dict[str, set[tuple[int, int, str]]] = {}
    for fn in info.functions:
        decorator = py.autotune_decorator(fn, module.imports)
        if decorator is None:
            continue
        arguments = {name: pyautotune.Bound(expr, None, info) for position, name in enumerate(_READ)
                     if (expr := py.argument(decorator, name, position)) is not None}
        yield from _check_kernel(source, module, fn, arguments, reported.setdefault(fn.name, set()))
    if _applied_otherwise(source):
        whole = info if info.whole else py.ParsedModule(source.tree, origin=source)
        yield from _applications(source, module, whole, reported)


def _applications(source: SourceFile, module: _Module | None, whole: py.ParsedModule,
                  reported: dict[str, set[tuple[int, int, str]]] | None = None) -> Iterator[Report]:
    """The findings of the autotuner applied otherwise than by a plain decorator (`module`: the rule's view of
    this file, None when it holds no atomic)."""
    project = pyautotune.Project(source.path, source.rel)
    applications = pyautotune.Applications(whole, source.path, project).find()
    reported = {} if reported is None else reported
    for application in applications:
        if application.origin is not None:
            yield from _imported_kernel(source, module or _Module(source, whole), project, application)
            continue
        fn = module.function(application.kernel) if module is not None else None
        if fn is not None and module is not None:
            yield from _check_kernel(source, module, fn, application.arguments,
                                     reported.setdefault(fn.name, set()),
                                     None if application.decorator else application.at)


def _imported_kernel(source: SourceFile, module: _Module, project: pyautotune.Project,
                     application: pyautotune.Application) -> Iterator[Report]:
    """The findings of the autotuner applied here to a kernel another module of the project defines: reported at
    the application (where the reset list goes), naming the atomic in the kernel's own file."""
    assert application.origin is not None
    data = project.data(application.origin)
    parsed = project.parsed(application.origin)
    if data is None or parsed is None:
        return
    rel = os.path.relpath(application.origin, project.root).replace(os.sep, "/")
    other = SourceFile(application.origin, rel, data)
    other.derived["pysource"] = parsed
    kernel_module = _Module(other, parsed)
    fn = kernel_module.function(application.kernel)
    if fn is None:
        return
    span = source.span(application.at)
    for report in _check_kernel(other, kernel_module, fn, application.arguments, set(), None, module):
        at = f"{rel}:{report.line}"
        yield dataclasses.replace(report, message=f"{report.message} (the atomic: {at})", scope="",
                                  discriminator=f"{application.kernel}|{report.discriminator}", **span)


# triton.autotune's parameters the rule reads, in their order (their positions in a call).
_READ = ("configs", "key", "prune_configs_by", "reset_to_zero", "restore_value", "pre_hook")
# A line that may apply the autotuner otherwise than as a plain `@triton.autotune(...)` decorator: a call of
# anything named *tune* (`triton.autotune(...)(k)`, `get_autotune_kernel(k, ...)`, an alias `tune(...)`).
_TUNE_CALL = re.compile(rb"tune\w*[ \t]*\(")
_NOT_A_CALL = re.compile(rb"[ \t]*(?:@|#|from |import )")


def _applied_otherwise(source: SourceFile) -> bool:
    data = source.data
    for found in _TUNE_CALL.finditer(data):
        start = data.rfind(b"\n", 0, found.start()) + 1
        if _NOT_A_CALL.match(data, start) is None and b"#" not in data[start:found.start()]:
            return True
    return False


def _check_kernel(source: SourceFile, module: _Module, fn: Function, arguments: dict[str, pyautotune.Bound],
                  reported: set[tuple[int, int, str]], at: ast.AST | None = None,
                  tuner: _Module | None = None) -> Iterator[Report]:
    """The findings of one application of the autotuner to a kernel of `module`, given the arguments it passes
    (written in `tuner`, the module that applies it: `module` itself unless given)."""
    kernel_module, module = module, tuner or module
    hook_bound = arguments.get("pre_hook")
    if hook_bound is not None and not hook_bound.local:
        return  # a pre_hook written in another module: trusted to reset what it must
    hook = module.resets(hook_bound.expr if hook_bound is not None else None)
    if hook is None:
        return  # a pre_hook kgate cannot read is trusted to reset what it must
    lists = [_protected(arguments.get(name), module.constants) for name in ("reset_to_zero", "restore_value")]
    if any(found is None for found in lists):
        return  # a list we cannot read may name anything
    always = set(hook)
    sometimes: dict[str, str] = {}
    for found in lists:
        assert found is not None
        always |= found[0]
        for name, condition in found[1].items():
            sometimes.setdefault(name, condition)
    atomics = list(kernel_module.accesses(fn))
    if not atomics:
        return
    configs_bound, prune_bound = arguments.get("configs"), arguments.get("prune_configs_by")
    configs = module.configs(configs_bound.expr) if configs_bound is not None and configs_bound.local else None
    configs = module.pruned(prune_bound.expr if prune_bound is not None and prune_bound.local else None, configs)
    fixed = kernel_module.fixed(fn)
    module = kernel_module
    # Only an idempotent atomic needs the kernel's loads and stores: does the kernel read the buffer back?
    memory = atomics if all(a.op in ACCUMULATING for a in atomics) else list(module.accesses(fn, memory=True))
    stores: list[_Access] | None = None
    for access in atomics:
        if fixed and any(_truth(test, fixed) not in (None, taken) for test, taken in _guards(fn.body, access.call)):
            continue  # a heuristic fixes a constexpr so that the atomic's branch never runs
        reach = _reaching(fn, access.call, configs, fixed)
        if configs and not isinstance(configs, _Partial) and not reach:
            continue  # no config the autotuner can run takes the atomic's branch
        if access.roots:
            targets = [r for r in access.roots if r not in always and not _hooks_reset(reach, r)]
        else:
            targets = [] if always or sometimes or _hooks_reset(reach, None) else ["?"]
        for target in targets:
            key = (access.call.lineno, access.call.col_offset, target)
            if key in reported or not _repeats_differently(access, target, memory):
                continue
            if access.op in ACCUMULATING and not access.helper and target != "?":
                if stores is None:
                    stores = [a for a in (memory if memory is not atomics else module.accesses(fn, memory=True))
                              if a.op == "store" and not a.helper]
                if _written_first(fn, access, [a for a in stores if target in a.roots]):
                    continue
            reported.add(key)
            report = _report(source, fn, access, target, sometimes.get(target), at)
            near = sorted(n for n in always | set(sometimes) if n != target and n.lower() == target.lower())
            if near and target not in sometimes:
                report = dataclasses.replace(report, message=f"{report.message} (the list names `{near[0]}`, which "
                                                             f"is not `{target}`: names are case-sensitive)")
            yield report


def _protected(bound: pyautotune.Bound | None,
               constants: dict[str, ast.expr]) -> tuple[set[str], dict[str, str]] | None:
    """(names a reset list always holds, name -> the condition under which it holds it) for a `reset_to_zero` or
    `restore_value` argument; None for a list kgate cannot read (trusted: it may name anything).

    A literal list (or a module constant holding one) is read as is. A local variable of the function that applies
    the autotuner is followed through the assignments, appends, extends and `+=` of literals before the call, on
    every path through the `if`s on the way (`_ListPaths`)."""
    if bound is None:
        return set(), {}
    own = bound.module.constants
    if py.resolvable(bound.expr, own):
        return {name for name, _node in py.string_items(bound.expr, own)}, {}
    expr = pyautotune.strip(bound.expr)
    if not (bound.local and bound.scope is not None and isinstance(expr, ast.Name)):
        return None
    paths = _ListPaths(expr.id, own).at(bound.scope, bound.expr)
    if not paths:
        return None
    names = {name for _conditions, held in paths for name in held}
    always = {name for name in names if all(name in held for _conditions, held in paths)}
    sometimes = {}
    for name in names - always:
        holding = [conditions for conditions, held in paths if name in held]
        common = [c for c in holding[0] if all(c in other for other in holding[1:])]
        sometimes[name] = " and ".join(common) if common else " or ".join(
            "(" + " and ".join(conditions) + ")" for conditions in holding)
    return always, sometimes


_UNKNOWN = object()
_PATHS = 32


class _ListPaths:
    """The values a local list of names takes on each path to a statement: (the conditions of the `if`s taken, the
    names it holds). A path on which the list is assigned anything else (a call, another variable), changed by a
    method other than `append`/`extend`, or not assigned at all makes the whole list unreadable (None)."""

    def __init__(self, name: str, constants: dict[str, ast.expr]) -> None:
        self.name = name
        self.constants = constants

    def at(self, scope: Function, node: ast.AST) -> list[tuple[tuple[str, ...], frozenset[str]]] | None:
        if any(a.arg == self.name for a in py.parameters(scope)):
            return None
        found = self._walk(scope.body, node, [((), _UNKNOWN)])
        if found is None or not found[1]:
            return None
        out = []
        for conditions, value in found[1]:
            if value is _UNKNOWN:
                return None
            out.append((conditions, value[0]))
        return out

    def _mentions(self, node: ast.AST) -> bool:
        return any(isinstance(n, ast.Name) and n.id == self.name for n in ast.walk(node))

    def _walk(self, body: list[ast.stmt], node: ast.AST, paths: list) -> tuple[bool, list] | None:
        """(reached `node`, the paths there, or those that leave the block when it is not in it); None: unreadable."""
        for stmt in body:
            if len(paths) > _PATHS:
                return None
            if any(n is node for n in ast.walk(stmt)):
                if isinstance(stmt, ast.If) and not any(n is node for n in ast.walk(stmt.test)):
                    inside = any(n is node for s in stmt.body for n in ast.walk(s))
                    branch = stmt.body if inside else stmt.orelse
                    taken = self._branch(stmt.test, inside, paths)
                    return self._walk(branch, node, taken)
                inner = [s for field in ("body", "orelse", "finalbody") for s in getattr(stmt, field, None) or []
                         if isinstance(s, ast.stmt)]
                if inner and not isinstance(stmt, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
                    return self._walk(inner, node, paths)
                return True, paths
            if not paths:
                return False, paths
            stepped = self._step(stmt, node, paths)
            if stepped is None:
                return None
            paths = stepped
        return False, paths

    def _step(self, stmt: ast.stmt, node: ast.AST, paths: list) -> list | None:
        if isinstance(stmt, (ast.Return, ast.Raise)):
            return []
        if isinstance(stmt, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)) or not self._mentions(stmt):
            return paths
        if isinstance(stmt, ast.If):
            out = []
            for taken, branch in ((True, stmt.body), (False, stmt.orelse)):
                found = self._walk(branch, node, self._branch(stmt.test, taken, paths))
                if found is None:
                    return None
                out.extend(found[1])
            return out
        if isinstance(stmt, (ast.For, ast.While)):
            found = self._walk(stmt.body, node, paths)  # once, or not at all
            return None if found is None else paths + [p for p in found[1] if p not in paths]
        if isinstance(stmt, (ast.With, ast.AsyncWith)):
            found = self._walk(stmt.body, node, paths)
            return None if found is None else found[1]
        change = self._change(stmt)
        if change is None:
            return None
        replace, added = change
        out = []
        for conditions, value in paths:
            if replace:
                out.append((conditions, added))
            elif value is _UNKNOWN or value[1]:
                return None  # added to a list not yet assigned, or to None
            else:
                out.append((conditions, (value[0] | added[0], False)))
        return out

    def _change(self, stmt: ast.stmt) -> tuple[bool, tuple[frozenset[str], bool]] | None:
        """(whether it replaces the value, the names it gives or adds and whether it is None)."""
        if isinstance(stmt, (ast.Assign, ast.AnnAssign)):
            targets = stmt.targets if isinstance(stmt, ast.Assign) else [stmt.target]
            if len(targets) == 1 and isinstance(targets[0], ast.Name) and targets[0].id == self.name \
                    and stmt.value is not None and not self._mentions(stmt.value):
                return self._literal(stmt.value, True)
            return None
        if isinstance(stmt, ast.AugAssign) and isinstance(stmt.target, ast.Name) and isinstance(stmt.op, ast.Add) \
                and not self._mentions(stmt.value):
            return self._literal(stmt.value, False)
        if isinstance(stmt, ast.Expr) and isinstance(stmt.value, ast.Call):
            call = stmt.value
            func = call.func
            if isinstance(func, ast.Attribute) and isinstance(func.value, ast.Name) and func.value.id == self.name \
                    and len(call.args) == 1 and not call.keywords and not self._mentions(call.args[0]):
                if func.attr == "append" and isinstance(call.args[0], ast.Constant) \
                        and isinstance(call.args[0].value, str):
                    return False, (frozenset({call.args[0].value}), False)
                if func.attr == "extend":
                    return self._literal(call.args[0], False)
        return None

    def _literal(self, value: ast.expr, replace: bool) -> tuple[bool, tuple[frozenset[str], bool]] | None:
        if isinstance(value, ast.Constant) and value.value is None:
            return (True, (frozenset(), True)) if replace else None
        if isinstance(value, (ast.List, ast.Tuple)) and py.resolvable(value, self.constants) \
                or isinstance(value, ast.Name) and py.resolvable(value, self.constants):
            return replace, (frozenset(name for name, _node in py.string_items(value, self.constants)), False)
        return None

    def _branch(self, test: ast.expr, taken: bool, paths: list) -> list:
        """The paths that take one branch of an `if`: a test on the list itself is decided by its value on the
        path; any other test adds itself (or its negation) to the path's conditions."""
        out = []
        text = ast.unparse(test)
        for conditions, value in paths:
            decided = self._decide(test, value) if self._mentions(test) else None
            if decided is None:
                condition = text if taken else (text[4:] if text.startswith("not ") else
                                                 f"not {text}" if isinstance(test, (ast.Name, ast.Attribute))
                                                 else f"not ({text})")
                out.append(((*conditions, condition), value))
            elif decided == taken:
                out.append((conditions, value))
        return out

    def _decide(self, test: ast.expr, value: object) -> bool | None:
        if value is _UNKNOWN:
            return None
        names, none = cast("tuple[Any, bool]", value)
        if isinstance(test, ast.UnaryOp) and isinstance(test.op, ast.Not):
            inner = self._decide(test.operand, value)
            return None if inner is None else not inner
        if isinstance(test, ast.Name) and test.id == self.name:
            return bool(names) and not none
        if isinstance(test, ast.Compare) and len(test.ops) == 1:
            left, op, right = test.left, test.ops[0], test.comparators[0]
            if isinstance(left, ast.Name) and left.id == self.name and isinstance(right, ast.Constant) \
                    and right.value is None and isinstance(op, (ast.Is, ast.IsNot)):
                return none == isinstance(op, ast.Is)
            if isinstance(left, ast.Call) and isinstance(left.func, ast.Name) and left.func.id == "len" \
                    and len(left.args) == 1 and isinstance(left.args[0], ast.Name) \
                    and left.args[0].id == self.name and isinstance(right, ast.Constant) \
                    and isinstance(right.value, int) and type(op) in _COMPARE and not none:
                return bool(_COMPARE[type(op)](len(names), right.value))
        return None


def _written_first(fn: Function, access: _Access, stores: list[_Access]) -> bool:
    """Whether the kernel, before this atomic and on every path to it, stores through the atomic's own address
    (the store's pointer adds to every term of the atomic's: `d + row + offs` covers `d + row`): each run then
    overwrites what the last one added before adding again."""
    if access.pointer is None:
        return False
    names = {node.id for node in ast.walk(access.pointer) if isinstance(node, ast.Name)}
    if any(_assigned_times(fn, name) > 1 for name in names):
        return False  # `ptrs` reassigned between the store and the add (another tile): not the same address
    terms = _terms(access.pointer)
    for store in stores:
        if store.pointer is not None and terms <= _terms(store.pointer) and _before(fn.body, store.call, access.call):
            return True
    return False


def _assigned_times(fn: Function, name: str) -> int:
    """How many statements of fn bind `name` (assignments, augmented assignments, loop targets)."""
    count = 0
    for node in ast.walk(fn):
        targets: list[ast.expr] = []
        if isinstance(node, ast.Assign):
            targets = node.targets
        elif isinstance(node, (ast.AugAssign, ast.AnnAssign, ast.For)):
            targets = [node.target]
        count += sum(1 for t in targets for n in ast.walk(t) if isinstance(n, ast.Name) and n.id == name)
    return count


def _terms(expr: ast.expr) -> set[str]:
    """The added terms of a pointer expression, as `ast.dump` text: `d + row + offs` -> {d, row, offs}."""
    if isinstance(expr, ast.BinOp) and isinstance(expr.op, ast.Add):
        return _terms(expr.left) | _terms(expr.right)
    return {ast.dump(expr)}


def _contains(stmt: ast.AST, node: ast.AST) -> bool:
    return any(n is node for n in ast.walk(stmt))


def _before(body: list[ast.stmt], first: ast.Call, then: ast.Call) -> bool:
    """Whether `first` runs before `then` whenever `then` runs: an earlier statement of a block around both,
    not under an `if` of its own (loops are allowed), or both in the same branch of an `if`."""
    at_first = next((i for i, stmt in enumerate(body) if _contains(stmt, first)), None)
    at_then = next((i for i, stmt in enumerate(body) if _contains(stmt, then)), None)
    if at_first is None or at_then is None or at_first > at_then:
        return False
    if at_first < at_then:
        return _unconditional(body[at_first], first)
    stmt = body[at_first]
    if isinstance(stmt, ast.If):
        return any(_contains_all(branch, first, then) and _before(branch, first, then)
                   for branch in (stmt.body, stmt.orelse))
    inner = [s for field in ("body", "orelse", "finalbody") for s in getattr(stmt, field, None) or []
             if isinstance(s, ast.stmt)]
    return bool(inner) and _before(inner, first, then)


def _contains_all(body: list[ast.stmt], *nodes: ast.AST) -> bool:
    return all(any(_contains(stmt, node) for stmt in body) for node in nodes)


def _unconditional(stmt: ast.stmt, call: ast.Call) -> bool:
    """Whether `call` runs whenever `stmt` does, loops aside: no `if`, `try` or nested definition in between."""
    if isinstance(stmt, (ast.Expr, ast.Assign, ast.AnnAssign, ast.AugAssign)):
        return True
    if isinstance(stmt, (ast.For, ast.While, ast.With)):
        return any(_contains(s, call) and _unconditional(s, call) for s in stmt.body)
    return False


@dataclass(frozen=True)
class _Config:
    """One `triton.Config` the autotuner may benchmark: its constexpr values (those written as literals) and
    what its pre_hook resets (None: a hook kgate cannot read, trusted to reset what it must)."""

    values: dict[str, object]
    resets: frozenset[str] | None


def _hooks_reset(configs: list[_Config] | None, target: str | None) -> bool:
    """Whether every config that runs the atomic resets `target` (None: anything at all) in its own pre_hook."""
    if not configs:
        return False  # configs kgate cannot list, or none that reaches the atomic: no hook to count on
    return all(c.resets is None or (c.resets if target is None else target in c.resets) for c in configs)


def _reaching(fn: Function, call: ast.Call, configs: list[_Config] | None,
              fixed: dict[str, object]) -> list[_Config] | None:
    """The configs under which the kernel reaches `call`: those for which no enclosing `if` on a constexpr the
    config (or a heuristic, `fixed`) sets literally (`if SPLIT_K == 1: ... else: atomic`) takes the other
    branch."""
    if not configs:
        return configs
    guards = _guards(fn.body, call)
    if not guards:
        return configs
    return [c for c in configs
            if all(_truth(test, {**c.values, **fixed}) in (None, taken) for test, taken in guards)]


def _guards(body: list[ast.stmt], call: ast.Call) -> list[tuple[ast.expr, bool]]:
    """(test, branch taken) of each `if` around `call` in a statement list, outermost first."""
    for stmt in body:
        if not any(node is call for node in ast.walk(stmt)):
            continue
        if isinstance(stmt, ast.If):
            for taken, branch in ((True, stmt.body), (False, stmt.orelse)):
                if any(node is call for s in branch for node in ast.walk(s)):
                    return [(stmt.test, taken), *_guards(branch, call)]
            return []  # the call is in the test itself
        inner = [s for field in ("body", "orelse", "finalbody") for s in getattr(stmt, field, None) or []
                 if isinstance(s, ast.stmt)]
        return _guards(inner, call)
    return []


_COMPARE = {ast.Eq: lambda a, b: a == b, ast.NotEq: lambda a, b: a != b, ast.Lt: lambda a, b: a < b,
            ast.LtE: lambda a, b: a <= b, ast.Gt: lambda a, b: a > b, ast.GtE: lambda a, b: a >= b}


def _truth(test: ast.expr, values: dict[str, object]) -> bool | None:
    """A guard's value under one config's constexpr values; None when it depends on anything else."""
    if isinstance(test, ast.Name):
        return bool(values[test.id]) if test.id in values else None
    if isinstance(test, ast.UnaryOp) and isinstance(test.op, ast.Not):
        inner = _truth(test.operand, values)
        return None if inner is None else not inner
    if isinstance(test, ast.Compare) and len(test.ops) == 1 and type(test.ops[0]) in _COMPARE:
        sides: list[Any] = []
        for side in (test.left, test.comparators[0]):
            if isinstance(side, ast.Constant):
                sides.append(side.value)
            elif isinstance(side, ast.Name) and side.id in values:
                sides.append(values[side.id])
            else:
                return None
        try:
            return bool(_COMPARE[type(test.ops[0])](*sides))
        except TypeError:
            return None
    return None


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


def _report(source: SourceFile, fn: Function, access: _Access, target: str, condition: str | None = None,
            at: ast.AST | None = None) -> Report:
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
        if condition is not None:
            message = (f"{op} in autotuned `{fn.name}` writes into `{target}`, which the autotuner restores only when "
                       f"{condition}{_where(at)}: otherwise {consequence}")
            return Report(message, severity=Severity.WARNING, scope=fn.name, discriminator=target,
                          **source.span(access.call))
        message = (f"{op} in autotuned `{fn.name}` writes into `{target}`, which is in neither reset_to_zero nor "
                   f"restore_value{_where(at)}: {consequence}")
    return Report(message, scope=fn.name, discriminator=target, **source.span(access.call))


def _where(at: ast.AST | None) -> str:
    """Where the autotuner is applied, when not by a decorator of the kernel itself."""
    line = getattr(at, "lineno", None)
    return f" (autotune applied at line {line})" if line is not None else ""


RULE = Rule(
    code="KG202",
    name="autotune-side-effect",
    layer="python",
    severity=Severity.ERROR,
    summary="Autotuned kernel accumulates with atomics into a buffer the autotuner does not reset",
    check=check,
    doc=__doc__ or "",
    files=("*.py",),
    prefilter=(b"atomic_", b"autotune"),
    requires=(py.TRITON_MARKERS,),  # it reads only modules that reach Triton
    reads=frozenset({Artifact.SOURCE}),
)
