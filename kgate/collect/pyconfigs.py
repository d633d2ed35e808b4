"""Following an autotuner's configs through the project: which `triton.Config`s a `configs=` expression lists, the
constexpr values each writes as literals and what its `pre_hook` resets, what an `early_config_prune` leaves, the
constexprs a `@triton.heuristics` fixes, and which configs reach a call under the `if`s around it."""

from __future__ import annotations

import ast
import re
import weakref
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from kgate.collect import pysource as py
from kgate.collect.pyaccess import DEPTH, KernelModule
from kgate.collect.pyguards import guards, truth
from kgate.collect.pysource import Function

_CONFIG = frozenset({"triton.Config", "triton.runtime.Config", "triton.runtime.autotuner.Config"})


@dataclass(frozen=True)
class Config:
    """One `triton.Config` the autotuner may benchmark: its constexpr values (those written as literals) and
    what its pre_hook resets (None: a hook kgate cannot read, trusted to reset what it must)."""

    values: dict[str, object]
    resets: frozenset[str] | None


class Tuning:
    """The configs, hooks and heuristics of the autotuner as written in one module (`module`)."""

    def __init__(self, module: KernelModule) -> None:
        self.function = module.function
        self.imports = module.imports
        self.constants = module.constants
        self.branches = _branch_assignments(module.tree.body)

    def configs(self, expr: ast.expr | None, depth: int = 0,
                env: dict[str, set[object]] | None = None) -> list[Config] | None:
        """The configs a `configs=` expression lists that kgate can read; None when it can read none of them.

        Follows list literals, `+`, `a if flag else b`, comprehensions (their element stands for every config
        they make; a value taken from a loop over literals is known when the loop gives one value), module
        constants and names assigned in the branches of a module-level `if`, functions of the module that build
        the list (every `Config(...)` in their body), and calls of other functions given configs
        (`select(CONFIGS)`: assumed to choose among them). Parts it cannot read (a list built in another
        module) are left out: the configs it can read decide.
        """
        if expr is None or depth > DEPTH:
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

    def pruned(self, by: ast.expr | None, configs: list[Config] | None) -> list[Config] | None:
        """The configs the benchmark runs after `prune_configs_by={"early_config_prune": fn}`: a module function
        that builds configs of its own (`triton.Config(...)` in its body) and hands back only those replaces the
        list; one that hands back anything else (a filtered list of the configs it was given) may pass any of
        them on as well (`yield from configs`); a pruner kgate cannot read leaves the list as it is."""
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
                  if isinstance(node, (ast.Return, ast.Yield, ast.YieldFrom)) and node.value is not None]
        values = _builder_values(fn, self.constants)
        own = [self._config(node, values) for node in made]
        if all(_only_built(value, built) for value in handed):
            return own
        return None if configs is None else _readable([configs, own])

    def fixed(self, fn: Function) -> dict[str, object]:
        """Constexpr values a `@triton.heuristics({...})` on the kernel sets to one literal whatever the
        arguments (`"SPLIT_K": lambda args: 1`, or a module function every `return` of which gives the same
        literal): they hold under every config."""
        out: dict[str, object] = {}
        for decorator in fn.decorator_list:
            if not (isinstance(decorator, ast.Call) and decorator.args and isinstance(decorator.args[0], ast.Dict)
                    and py.qualified(decorator.func, self.imports) in py.HEURISTICS):
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
        return _config_call(func, self.imports)

    def _config(self, call: ast.Call, env: dict[str, set[object]],
                given: dict[str, ast.expr] | None = None) -> Config:
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
        return Config(values, self.resets(hook))

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

_MUTATORS = frozenset({"append", "extend", "insert", "pop", "remove", "clear", "__setitem__", "__iadd__"})


# A project's function that builds a config list, found by its name where the autotune's module imports it: the
# function and the module that defines it (whose imports name its `Config`).
Builders = Callable[[str], tuple[Function, py.ParsedModule] | None]


def single_config(expr: ast.expr | None, module: py.ParsedModule, depth: int = 0,
                  imported: Builders | None = None, local: dict[str, ast.expr] | None = None) -> bool:
    """Whether a `configs=` expression lists exactly one `triton.Config` for certain: a list or tuple literal of one
    `Config(...)` call, a comprehension of one whose every loop runs over a literal of one value (written there, or
    a name the building function binds once to one: `block_m = [32]`, and `itertools.product` of such), without a
    condition, a module constant holding one that nothing in the module changes (or bound only in the branch of an
    `if` on a module flag that the flag takes: `_flagged`), or a function called without arguments, the module's or
    one it imports from the project (`imported`), every `return` of which hands back such a literal or
    comprehension, or a name it binds once to one. Triton's autotuner runs a single config as it is, without
    benchmarking it or looking a key up; anything kgate cannot read counts as several."""
    if expr is None or depth > DEPTH:
        return False
    if depth == 0 and _retuned(module):
        return False  # `kernel.configs = ...` or `kernel.configs.append(...)`: the autotuner's list changed later
    if isinstance(expr, (ast.List, ast.Tuple)):
        return (len(expr.elts) == 1 and isinstance(expr.elts[0], ast.Call)
                and _config_call(expr.elts[0].func, module.imports))
    if isinstance(expr, ast.ListComp):
        # `[Config({"BLOCK": b}, num_warps=w) for b in [16] for w in [4]]`: one value per loop, one config
        return isinstance(expr.elt, ast.Call) and _config_call(expr.elt.func, module.imports) and all(
            not loop.ifs and not loop.is_async and _one_value(loop.iter, module, local or {})
            for loop in expr.generators)
    if isinstance(expr, ast.Name) and local and expr.id in local:
        return single_config(local[expr.id], module, depth + 1, imported, local)
    if isinstance(expr, ast.Name):
        value = module.constants.get(expr.id)
        if value is None:
            value = _flagged(expr.id, module)
        return value is not None and not _changed(expr.id, module.tree) and not _unseen_uses(expr.id, module) \
            and single_config(value, module, depth + 1, imported)
    if isinstance(expr, ast.Call) and isinstance(expr.func, ast.Name) and not expr.args and not expr.keywords:
        builder, home = module.definition(expr.func.id), module
        if builder is None and imported is not None:
            builder, home = imported(expr.func.id) or (None, module)
        if builder is None or any(isinstance(node, (ast.Yield, ast.YieldFrom)) for node in ast.walk(builder)):
            return False
        own = _own_nodes(builder)
        handed = [node.value for node in own if isinstance(node, ast.Return)]
        bound = _bound_once(own)
        return bool(handed) and all(
            value is not None and isinstance(value, (ast.List, ast.Tuple, ast.ListComp, ast.Name))
            and single_config(value, home, depth + 1, imported, bound) for value in handed)
    return False


def _one_value(iterable: ast.expr, module: py.ParsedModule, local: dict[str, ast.expr]) -> bool:
    """Whether a loop runs exactly once: over a literal of one value, a name the building function binds once to
    one, or `itertools.product` of such."""
    if isinstance(iterable, ast.Name) and iterable.id in local:
        iterable = local[iterable.id]
    if isinstance(iterable, (ast.List, ast.Tuple)):
        return len(iterable.elts) == 1 and not isinstance(iterable.elts[0], ast.Starred)
    if isinstance(iterable, ast.Call) and py.qualified(iterable.func, module.imports) == "itertools.product" \
            and not iterable.keywords:
        return all(not isinstance(arg, ast.Starred) and _one_value(arg, module, local) for arg in iterable.args)
    return False


def _bound_once(own: list[ast.AST]) -> dict[str, ast.expr]:
    """The names a function's own body binds exactly once, by a plain assignment, to what they hold."""
    stores: dict[str, int] = {}
    for node in own:
        if isinstance(node, ast.Name) and isinstance(node.ctx, (ast.Store, ast.Del)):
            stores[node.id] = stores.get(node.id, 0) + 1
    return {node.targets[0].id: node.value for node in own
            if isinstance(node, ast.Assign) and len(node.targets) == 1 and isinstance(node.targets[0], ast.Name)
            and stores.get(node.targets[0].id) == 1}


def _flagged(name: str, module: py.ParsedModule) -> ast.expr | None:
    """What a module-level name holds where the module binds it at its top level only in an `if` on a module constant
    that holds `True` or `False` (`if ENABLE_AUTOTUNING: configs = [...] else: configs = [...]`): the one assignment
    of the branch the constant picks, as the module runs at import; None otherwise."""
    chosen: ast.expr | None = None
    for stmt in module.tree.body:
        if not _binds([stmt], name):
            continue
        flag = _flag(stmt.test, module.constants) if isinstance(stmt, ast.If) else None
        if not isinstance(stmt, ast.If) or flag is None or chosen is not None:
            return None  # bound otherwise, or by two such statements
        binding = [s for s in (stmt.body if flag else stmt.orelse) if _binds([s], name)]
        if len(binding) != 1 or not (isinstance(binding[0], ast.Assign) and len(binding[0].targets) == 1
                                     and isinstance(binding[0].targets[0], ast.Name)):
            return None
        chosen = binding[0].value
    return chosen


def _binds(body: list[ast.stmt], name: str) -> bool:
    """Whether the statements bind `name` anywhere outside the functions and classes they define."""
    todo: list[ast.AST] = list(body)
    while todo:
        node = todo.pop()
        if isinstance(node, ast.Name) and node.id == name and isinstance(node.ctx, ast.Store):
            return True
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef, ast.Lambda)):
            if getattr(node, "name", None) == name:
                return True
            continue
        todo.extend(ast.iter_child_nodes(node))
    return False


def _flag(test: ast.expr, constants: dict[str, ast.expr]) -> bool | None:
    """The value of `FLAG` or `not FLAG` where the module constant `FLAG` holds `True` or `False`; None otherwise."""
    negated = isinstance(test, ast.UnaryOp) and isinstance(test.op, ast.Not)
    if isinstance(test, ast.UnaryOp) and negated:
        test = test.operand
    held = constants.get(test.id) if isinstance(test, ast.Name) else None
    if not (isinstance(held, ast.Constant) and isinstance(held.value, bool)):
        return None
    return held.value != negated


def _own_nodes(fn: Function) -> list[ast.AST]:
    """The nodes of a function's body, without those of the functions, lambdas and classes defined in it."""
    out: list[ast.AST] = []
    todo: list[ast.AST] = list(fn.body)
    while todo:
        node = todo.pop()
        out.append(node)
        if not isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.Lambda, ast.ClassDef)):
            todo.extend(ast.iter_child_nodes(node))
    return out


def _config_call(func: ast.expr, imports: dict[str, str]) -> bool:
    name = py.qualified(func, imports)
    if name is not None:
        return name in _CONFIG
    written = py.dotted(func) or ""
    return written == "Config" or written.endswith(".Config")


def _retuned(module: py.ParsedModule) -> bool:
    """Whether the module reaches an autotuner's `.configs` (`kernel.configs = get_configs()`), read in its whole
    text where the tree holds only some of its definitions."""
    if not module.whole and module.origin is not None:
        return b".configs" in module.origin.data
    return any(isinstance(node, ast.Attribute) and node.attr == "configs" for node in ast.walk(module.tree))


def _unseen_uses(name: str, module: py.ParsedModule) -> bool:
    """Whether the module's text spells `name` more often than its tree holds it (a reduced parse left out a
    definition that uses it, and may change it), or the module gives it to a call other than the autotuner's,
    which may change it (`add_defaults(CONFIGS)`)."""
    given, held = _uses(module.tree)
    if name in given:
        return True
    if module.whole or module.origin is None:
        return False
    spelled = len(re.findall(rb"(?<![\w.])" + re.escape(name.encode()) + rb"(?!\w)", module.origin.data))
    return spelled > held.get(name, 0)


_READERS = frozenset({"autotune", "Config", "len", "list", "tuple"})  # calls that read a list and leave it as it is


def _uses(tree: ast.Module) -> tuple[frozenset[str], dict[str, int]]:
    """The names a module's tree gives to a call other than a reader's (`_READERS`), and how many times it holds
    each name: one walk per tree, for every constant asked about (a module's configs lists are often several)."""
    found = _USES.get(tree)
    if found is None:
        given: set[str] = set()
        held: dict[str, int] = {}
        for node in ast.walk(tree):
            if isinstance(node, ast.Name):
                held[node.id] = held.get(node.id, 0) + 1
            elif isinstance(node, ast.keyword) and node.arg is not None:
                # A keyword argument spelled as the name (`configs=...` of another autotune) is no use of it.
                held[node.arg] = held.get(node.arg, 0) + 1
            elif isinstance(node, ast.Call) and (py.dotted(node.func) or "").rsplit(".", 1)[-1] not in _READERS:
                given.update(arg.id for arg in [*node.args, *(k.value for k in node.keywords)]
                             if isinstance(arg, ast.Name))
        found = _USES[tree] = (frozenset(given), held)
    return found


def _changed(name: str, tree: ast.Module) -> bool:
    """Whether the module may change the list a module-level name holds (a method that mutates it, an item or
    slice assigned, an augmented assignment, a `global` declaration in a function), or a function may bind the
    name to something else of its own (a parameter or local of that name)."""
    return name in _changed_names(tree)


def _changed_names(tree: ast.Module) -> frozenset[str]:
    """The names `_changed` holds for, of every name: one walk of the tree, each node with whether a function or
    lambda holds it (a nested function's nodes read once, not once for each function around it)."""
    found = _CHANGED.get(tree)
    if found is not None:
        return found
    out: set[str] = set()
    stack: list[tuple[ast.AST, bool]] = [(tree, False)]
    while stack:
        node, inside = stack.pop()
        if isinstance(node, ast.Name):
            if inside and isinstance(node.ctx, ast.Store):
                out.add(node.id)  # a function's own name may be what a launcher passes: not the module's
        elif isinstance(node, ast.Attribute):
            if node.attr in _MUTATORS and isinstance(node.value, ast.Name):
                out.add(node.value.id)
        elif isinstance(node, ast.Subscript):
            if isinstance(node.ctx, (ast.Store, ast.Del)) and isinstance(node.value, ast.Name):
                out.add(node.value.id)
        elif isinstance(node, ast.AugAssign):
            if isinstance(node.target, ast.Name):
                out.add(node.target.id)
        elif isinstance(node, ast.Global):
            out.update(node.names)
        function = isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.Lambda))
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.Lambda)):
            out.update(arg.arg for arg in (*node.args.posonlyargs, *node.args.args, *node.args.kwonlyargs))
        stack.extend((child, inside or function) for child in ast.iter_child_nodes(node))
    found = _CHANGED[tree] = frozenset(out)
    return found


# What one walk of a module's tree found, for each name asked about: kept while the tree lives.
_USES: weakref.WeakKeyDictionary[ast.Module, tuple[frozenset[str], dict[str, int]]] = weakref.WeakKeyDictionary()
_CHANGED: weakref.WeakKeyDictionary[ast.Module, frozenset[str]] = weakref.WeakKeyDictionary()


class Partial(list[Any]):
    """Configs read from an expression some parts of which kgate could not read."""


def _only_built(value: ast.expr, built: set[int]) -> bool:
    """Whether what a pruner hands back holds only configs it builds (`built`: their calls' ids): one of them, a list
    or tuple of them, or a comprehension that makes one each time (`[triton.Config(...) for c in configs]`)."""
    if isinstance(value, (ast.List, ast.Tuple)):
        return all(_only_built(elt, built) for elt in value.elts)
    if isinstance(value, (ast.ListComp, ast.GeneratorExp)):
        return id(value.elt) in built
    return id(value) in built


def _bound(fn: Function, call: ast.Call) -> dict[str, ast.expr]:
    """A function's parameters bound to what a call passes (or to their defaults)."""
    params = py.parameters(fn)
    out: dict[str, ast.expr] = py.defaults(fn)
    positional = [*fn.args.posonlyargs, *fn.args.args]
    for param, arg in zip(positional, call.args):
        if isinstance(arg, ast.Starred):
            break
        out[param.arg] = arg
    for keyword in call.keywords:
        if keyword.arg is not None and any(p.arg == keyword.arg for p in params):
            out[keyword.arg] = keyword.value
    return out


def _readable(parts: list[list[Config] | None]) -> list[Config] | None:
    """The configs of the parts kgate could read (a `Partial` when some could not be read); None when it could
    read none."""
    found = [part for part in parts if part is not None]
    if not found:
        return None
    configs = [c for part in found for c in part]
    return Partial(configs) if len(found) < len(parts) or any(isinstance(p, Partial) for p in found) else configs


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
        if isinstance(node, (ast.For, ast.comprehension)):
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


def hooks_reset(configs: list[Config] | None, target: str | None) -> bool:
    """Whether every config that runs the atomic resets `target` (None: anything at all) in its own pre_hook."""
    if not configs:
        return False  # configs kgate cannot list, or none that reaches the atomic: no hook to count on
    return all(c.resets is None or (c.resets if target is None else target in c.resets) for c in configs)


def reaching(fn: Function, call: ast.Call, configs: list[Config] | None,
              fixed: dict[str, object]) -> list[Config] | None:
    """The configs under which the kernel reaches `call`: those for which no enclosing `if` on a constexpr the
    config (or a heuristic, `fixed`) sets literally (`if SPLIT_K == 1: ... else: atomic`) takes the other
    branch."""
    if not configs:
        return configs
    around = guards(fn.body, call)
    if not around:
        return configs
    return [c for c in configs
            if all(truth(test, {**c.values, **fixed}) in (None, taken) for test, taken in around)]
