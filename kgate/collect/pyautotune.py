"""Every way a module applies Triton's autotuner to a kernel, read without running it.

- a decorator: `@triton.autotune(...)`, whatever the import spelling (`kgate.collect.pysource.AUTOTUNE`);
- the call form: `k = triton.autotune(...)(fn)`, or of `triton.jit(fn)`, anywhere in the module;
- an alias bound once at module level: `tune = triton.autotune`, `tune = functools.partial(triton.autotune, ...)`;
- a wrapper defined in the module whose body calls `triton.autotune`, passing on one of its own parameters as
  the key (`def tuned(configs, key): return triton.autotune(configs=configs, key=key)`) or a key of its own,
  used as `@tuned(...)`; a wrapper that applies it itself (`def tuned(fn): return triton.autotune(...)(fn)`)
  is used bare, `@tuned` or `tuned(fn)`;
- a wrapper from elsewhere: a decorator whose name contains `autotune` (`fla_cache_autotune`) given a `key=`
  and applied to a `@triton.jit` kernel, or one the project names (`wrappers`), read like `triton.autotune`.

Keys are literals, module constants holding them, or concatenations of both (`pysource.string_items`); configs
are never read, so configs built by helper functions do not matter.
"""

from __future__ import annotations

import ast
from dataclasses import dataclass, field

from kgate.collect import pysource as py

PARTIAL = frozenset({"functools.partial"})


@dataclass(frozen=True)
class Tuner:
    """How a callable takes the autotune key."""

    key_name: str | None = "key"  # the keyword that carries the key (None: the key is fixed)
    key_position: int | None = 1
    fixed: ast.expr | None = None  # a key given by the wrapper or partial itself
    applies: bool = False  # called on the kernel itself (`@tuned`), not a decorator factory (`@tuned(...)`)
    needs_jit: bool = False  # recognised by its name only: counts on a `@triton.jit` kernel alone


@dataclass(frozen=True)
class Tuned:
    """One application of the autotuner to a kernel."""

    launched: str  # the name launch sites subscript: the decorated definition's, or the one the call form binds
    kernel: str  # the name of the tuned definition (its parameters are the kernel's)
    fn: py.Function | None  # that definition, when this tree holds it
    at: ast.AST  # the autotune call, where a finding without a key node points
    keys: list[tuple[str, ast.AST]] = field(default_factory=list)
    readable: bool = True  # every key was read
    needs_jit: bool = False  # recognised by the wrapper's name: counts only if the definition is a @triton.jit kernel


def tuned_kernels(info: py.ParsedModule, wrappers: frozenset[str] = frozenset(),
                  lines: list[str] | None = None) -> list[Tuned]:
    """The module's autotuned kernels, in source order (`lines`, the module's, spare walking the bodies of
    functions that cannot be wrappers)."""
    finder = _Finder(info, wrappers, lines)
    out = [t for fn in info.functions if (t := finder.decorated(fn)) is not None]
    out.extend(finder.call_forms())
    out.sort(key=lambda t: (getattr(t.at, "lineno", 0), getattr(t.at, "col_offset", 0)))
    return out


class _Finder:
    def __init__(self, info: py.ParsedModule, wrappers: frozenset[str], lines: list[str] | None) -> None:
        self.info = info
        self.lines = lines
        self.imports = info.imports
        self.constants = info.constants
        self.configured = wrappers
        self._local: dict[str, Tuner] | None = None

    # ---------------------------------------------------------------- what a callable is

    def tuner(self, func: ast.expr, depth: int = 0) -> Tuner | None:
        name = py.qualified(func, self.imports)
        if name in py.AUTOTUNE:
            return Tuner()
        if isinstance(func, ast.Name) and depth < 4:
            local = self.local_wrappers().get(func.id)
            if local is not None:
                return local
            bound = self.constants.get(func.id)
            if bound is not None:
                return self._alias(bound, depth)
        written = name or py.dotted(func)
        if written is None:
            return None
        last = written.rsplit(".", 1)[-1]
        if written in self.configured or last in self.configured:
            return Tuner()
        if "autotune" in last.lower():
            return Tuner(key_position=None, needs_jit=True)
        return None

    def _alias(self, bound: ast.expr, depth: int) -> Tuner | None:
        if isinstance(bound, ast.Call) and py.qualified(bound.func, self.imports) in PARTIAL and bound.args:
            inner = self.tuner(bound.args[0], depth + 1)
            key = py.argument(bound, "key")
            if inner is not None and key is not None:
                return Tuner(key_name=None, key_position=None, fixed=key)
            return inner
        if isinstance(bound, (ast.Name, ast.Attribute)):
            return self.tuner(bound, depth + 1)
        return None

    def local_wrappers(self) -> dict[str, Tuner]:
        """Functions of this module that call triton.autotune for their caller."""
        if self._local is None:
            self._local = {}
            self._inside: set[int] = set()
            for fn in self.info.functions:
                tuner = self._wrapper(fn)
                if tuner is not None:
                    self._local.setdefault(fn.name, tuner)
                    self._inside.update(id(s) for s in _body_statements(fn))
        return self._local

    def _wrapper(self, fn: py.Function) -> Tuner | None:
        if is_jit_kernel(fn, self.imports) or not self._calls_autotune(fn):
            return None
        params = [a.arg for a in py.parameters(fn)]
        positional = len(fn.args.posonlyargs) + len(fn.args.args)
        for stmt in _body_statements(fn):
            if isinstance(stmt, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
                continue  # a decorator of a nested kernel is that kernel's, not a key for the caller
            for node in py.expressions(stmt):
                if not (isinstance(node, ast.Call) and py.qualified(node.func, self.imports) in py.AUTOTUNE):
                    continue
                key = py.argument(node, "key", 1)
                applies = _applied_to_a_parameter(fn, node, params)
                if isinstance(key, ast.Name) and key.id in params:
                    position = params.index(key.id)
                    return Tuner(key_name=key.id, key_position=position if position < positional else None,
                                 applies=applies)
                if key is not None and py.resolvable(key, self.constants):
                    return Tuner(key_name=None, key_position=None, fixed=key, applies=applies)
        return None

    def _calls_autotune(self, fn: py.Function) -> bool:
        """Whether the body names triton.autotune under any spelling: a cheap test before walking it."""
        if self.lines is None:
            return True
        spellings = ("autotune", *(local for local, name in self.imports.items() if name in py.AUTOTUNE))
        first = fn.body[0].lineno - 1
        return any(word in line for line in self.lines[first:fn.end_lineno] for word in spellings)

    # ---------------------------------------------------------------- where it is applied

    def decorated(self, fn: py.Function) -> Tuned | None:
        jit = is_jit_kernel(fn, self.imports)
        for decorator in fn.decorator_list:
            call = decorator if isinstance(decorator, ast.Call) else None
            tuner = self.tuner(call.func if call is not None else decorator)
            if tuner is None or (tuner.needs_jit and not jit) or tuner.applies == (call is not None):
                continue
            if tuner.needs_jit and call is not None and py.argument(call, "key") is None:
                continue
            return self._tuned(fn.name, fn.name, fn, decorator, call, tuner)
        return None

    def call_forms(self) -> list[Tuned]:
        """`k = tune(...)(fn)`, `k = tuned(fn)`, `return tune(...)(triton.jit(fn))`, ..."""
        out = []
        self.local_wrappers()
        for stmt in py.statements(self.info.tree):
            if id(stmt) in self._inside:
                continue  # a wrapper's own `triton.autotune(...)(fn)`: applied where the wrapper is used
            value = getattr(stmt, "value", None) if isinstance(stmt, (ast.Assign, ast.AnnAssign, ast.Return,
                                                                      ast.Expr)) else None
            if not isinstance(value, ast.Call) or len(value.args) != 1:
                continue
            kernel = _kernel_name(value.args[0], self.imports)
            if kernel is None:
                continue
            factory = value.func
            if isinstance(factory, ast.Call):
                tuner, call = self.tuner(factory.func), factory
            else:
                tuner, call = self.tuner(factory), None
            if tuner is None or tuner.applies == (call is not None):
                continue
            if tuner.needs_jit and (call is None or py.argument(call, "key") is None):
                continue
            target = stmt.targets[0] if isinstance(stmt, ast.Assign) and len(stmt.targets) == 1 else (
                stmt.target if isinstance(stmt, ast.AnnAssign) else None)
            launched = target.id if isinstance(target, ast.Name) else kernel
            out.append(self._tuned(launched, kernel, None, factory, call, tuner))  # the definition: see needs_jit
        return out

    def _tuned(self, launched: str, kernel: str, fn: py.Function | None, at: ast.AST, call: ast.Call | None,
               tuner: Tuner) -> Tuned:
        if tuner.fixed is not None:
            expr: ast.expr | None = tuner.fixed
            keys = [(name, at) for name, _node in py.string_items(expr, self.constants)]
        else:
            expr = py.argument(call, tuner.key_name or "key", tuner.key_position) if call is not None else None
            keys = py.string_items(expr, self.constants)
        return Tuned(launched, kernel, fn, at, keys, py.resolvable(expr, self.constants), tuner.needs_jit)


def _is_jit(decorator: ast.expr, imports: dict[str, str]) -> bool:
    func = decorator.func if isinstance(decorator, ast.Call) else decorator
    name = py.qualified(func, imports) or py.dotted(func) or ""
    return name.rsplit(".", 1)[-1] == "jit"


def _kernel_name(node: ast.expr, imports: dict[str, str]) -> str | None:
    """`fn` or `triton.jit(fn)` (`triton.jit(**options)(fn)`): the tuned definition's name."""
    if isinstance(node, ast.Name):
        return node.id
    if isinstance(node, ast.Call) and len(node.args) == 1 and _is_jit(node.func, imports):
        return _kernel_name(node.args[0], imports)
    return None


def is_jit_kernel(fn: py.Function, imports: dict[str, str]) -> bool:
    return any(_is_jit(d, imports) for d in fn.decorator_list)


def _body_statements(fn: py.Function) -> list[ast.stmt]:
    return [s for stmt in fn.body for s in py.statements(stmt)]


def _applied_to_a_parameter(fn: py.Function, call: ast.Call, params: list[str]) -> bool:
    """Whether the wrapper calls the decorator it builds on one of its parameters (`triton.autotune(...)(fn)`)."""
    for stmt in _body_statements(fn):
        for node in py.expressions(stmt):
            if (isinstance(node, ast.Call) and node.func is call and len(node.args) == 1
                    and isinstance(node.args[0], ast.Name) and node.args[0].id in params):
                return True
    return False
