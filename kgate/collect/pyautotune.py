"""Every way a module applies Triton's autotuner to a kernel, read without running it.

- a decorator: `@triton.autotune(...)`, whatever the import spelling (`kgate.collect.pysource.AUTOTUNE`);
- the call form: `k = triton.autotune(...)(fn)`, or of `triton.jit(fn)`, anywhere in the module;
- an alias bound once at module level: `tune = triton.autotune`, `tune = functools.partial(triton.autotune, ...)`,
  or an autotuner made once and applied later (`tune = triton.autotune(configs, key=[...])`, `k = tune(fn)`);
- a wrapper defined in the module whose body calls `triton.autotune`, passing on one of its own parameters as
  the key (`def tuned(configs, key): return triton.autotune(configs=configs, key=key)`) or a key of its own,
  used as `@tuned(...)`; a wrapper that applies it itself (`def tuned(fn): return triton.autotune(...)(fn)`)
  is used bare, `@tuned` or `tuned(fn)`;
- a wrapper from elsewhere: a decorator whose name contains `autotune` (`fla_cache_autotune`) given a `key=`, or
  a list of argument names as its second argument (`util.autotune(configs(), ["x_size"])`), and applied to a
  `@triton.jit` kernel, or one the project names (`wrappers`), read like `triton.autotune`.

Keys are literals, module constants holding them, or concatenations of both (`pysource.string_items`); configs
are never read, so configs built by helper functions do not matter.

`Applications` reads the same forms for rules that need every argument an application passes (KG202's
`reset_to_zero`, `restore_value`, `pre_hook`, `configs`), and a few more: wrappers that call other wrappers,
pass arguments on through `**kwargs` or as `list(x) if x is not None else None`, wrappers defined in another
module of the project (`Project`: read only for names that say they tune), kernels chosen through a local
variable and kernels imported from another module.
"""

from __future__ import annotations

import ast
import os
from collections.abc import Iterable
from dataclasses import dataclass, field

from kgate.collect import depends, pysparse
from kgate.collect import pysource as py
from kgate.collect.files import project_root
from kgate.support.filestat import path_state

PARTIAL = frozenset({"functools.partial"})


@dataclass(frozen=True)
class Tuner:
    """How a callable takes the autotune key."""

    key_name: str | None = "key"  # the keyword that carries the key (None: the key is fixed)
    key_position: int | None = 1
    fixed: ast.expr | None = None  # a key given by the wrapper or partial itself
    applies: bool = False  # called on the kernel itself (`@tuned`), not a decorator factory (`@tuned(...)`)
    needs_jit: bool = False  # recognised by its name only: counts on a `@triton.jit` kernel alone
    keys_here: bool = False  # a fixed key is reported where it is written (an autotuner made once), not where applied


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
    out = [t for fn in info.functions for t in finder.decorated(fn)]
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
        if isinstance(bound, ast.Call):  # an autotuner made once and applied later: `tune = triton.autotune(...)`
            inner = self.tuner(bound.func, depth + 1)
            key = py.argument(bound, inner.key_name, inner.key_position) \
                if inner is not None and not inner.applies and inner.key_name is not None else None
            return Tuner(key_name=None, key_position=None, fixed=key, applies=True, keys_here=True) \
                if key is not None else None
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
        if py.is_kernel(fn, self.imports) or not self._calls_autotune(fn):
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
                if not applies and _applied_to_a_kernel(fn, node, self.imports):
                    continue  # the function tunes a kernel itself (a launcher): a call form, not a wrapper
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

    def decorated(self, fn: py.Function) -> list[Tuned]:
        """Each autotuner a definition's decorators apply: stacked ones (`@triton.autotune` over `@triton.heuristics`
        over another `@triton.autotune`) each look their own key up, outermost first."""
        jit = py.is_kernel(fn, self.imports)
        out = []
        for decorator in fn.decorator_list:
            call = decorator if isinstance(decorator, ast.Call) else None
            tuner = self.tuner(call.func if call is not None else decorator)
            if tuner is None or (tuner.needs_jit and not jit) or tuner.applies == (call is not None):
                continue
            if tuner.needs_jit and call is not None and _named_key(call, self.constants) is None:
                continue
            out.append(self._tuned(fn.name, fn.name, fn, decorator, call, tuner))
        return out

    def call_forms(self) -> list[Tuned]:
        """`k = tune(...)(fn)`, `k = tuned(fn)`, `return tune(...)(triton.jit(fn))`, ..."""
        out = []
        self.local_wrappers()
        for stmt in py.statements(self.info.tree):
            if id(stmt) in self._inside:
                continue  # a wrapper's own `triton.autotune(...)(fn)`: applied where the wrapper is used
            value = getattr(stmt, "value", None) if isinstance(stmt, (ast.Assign, ast.AnnAssign, ast.Return,
                                                                      ast.Expr)) else None
            applied = self._application(value)
            if applied is not None:
                target = stmt.targets[0] if isinstance(stmt, ast.Assign) and len(stmt.targets) == 1 else (
                    stmt.target if isinstance(stmt, ast.AnnAssign) else None)
                kernel = applied[0]
                launched = target.id if isinstance(target, ast.Name) else kernel
                out.append(self._tuned(launched, *applied))  # the definition: see needs_jit
                continue
            if not self._may_launch_inline(stmt):
                continue
            for node in py.expressions(stmt):  # launched where it is made: `triton.autotune(...)(k)[grid](...)`
                if isinstance(node, ast.Subscript) and (applied := self._application(node.value)) is not None:
                    out.append(self._tuned(applied[0], *applied))  # its launch sites are the kernel's name's
        return out

    def _may_launch_inline(self, stmt: ast.stmt) -> bool:
        """Whether a statement's lines subscript a call's result (`)[`): a cheap test before walking it."""
        if self.lines is None:
            return True
        return any(")[" in line for line in self.lines[stmt.lineno - 1:stmt.end_lineno])

    def _application(self, value: ast.expr | None) -> tuple[str, None, ast.expr, ast.Call | None, Tuner] | None:
        """`tune(...)(fn)` or `tuned(fn)`: (the tuned definition's name, no definition, the factory, the call that
        gives the key, the tuner), or None."""
        if not isinstance(value, ast.Call) or len(value.args) != 1:
            return None
        kernel = _kernel_name(value.args[0], self.imports)
        if kernel is None:
            return None
        factory = value.func
        if isinstance(factory, ast.Call):
            tuner, call = self.tuner(factory.func), factory
        else:
            tuner, call = self.tuner(factory), None
        if tuner is None or tuner.applies == (call is not None):
            return None
        if tuner.needs_jit and (call is None or _named_key(call, self.constants) is None):
            return None
        return kernel, None, factory, call, tuner

    def _tuned(self, launched: str, kernel: str, fn: py.Function | None, at: ast.AST, call: ast.Call | None,
               tuner: Tuner) -> Tuned:
        if tuner.fixed is not None:
            expr: ast.expr | None = tuner.fixed
            keys = [(name, node if tuner.keys_here else at) for name, node in py.string_items(expr, self.constants)]
        elif tuner.needs_jit:
            expr = _named_key(call, self.constants) if call is not None else None
            keys = py.string_items(expr, self.constants)
        else:
            expr = py.argument(call, tuner.key_name or "key", tuner.key_position) if call is not None else None
            keys = py.string_items(expr, self.constants)
        return Tuned(launched, kernel, fn, at, keys, py.resolvable(expr, self.constants), tuner.needs_jit)


def _named_key(call: ast.Call, constants: dict[str, ast.expr]) -> ast.expr | None:
    """The key given to a wrapper recognised by its name: its `key=`, or its second argument where that is a list of
    argument names written out, as `triton.autotune(configs, key)` takes it (`util.autotune(configs(), ["x_size"])`);
    None where it is given none of these."""
    key = py.argument(call, "key")
    if key is not None:
        return key
    given = py.argument(call, "", 1)
    if given is None or isinstance(given, ast.Constant) or not py.string_items(given, constants) \
            or not py.resolvable(given, constants):
        return None
    return given


def _is_jit(func: ast.expr, imports: dict[str, str]) -> bool:
    """`triton.jit` (or Gluon's) as called in `triton.jit(fn)` or `triton.jit(**options)(fn)`."""
    func = func.func if isinstance(func, ast.Call) else func
    return py.jit_kind(py.qualified(func, imports)) is not None


def _kernel_name(node: ast.expr, imports: dict[str, str]) -> str | None:
    """`fn`, `triton.jit(fn)` (`triton.jit(**options)(fn)`) or `triton.heuristics(values)(fn)`: the tuned
    definition's name."""
    if isinstance(node, ast.Name):
        return node.id
    if isinstance(node, ast.Call) and len(node.args) == 1 and (_is_jit(node.func, imports) or (
            isinstance(node.func, ast.Call) and py.qualified(node.func.func, imports) in py.HEURISTICS)):
        return _kernel_name(node.args[0], imports)
    return None


def _body_statements(fn: py.Function) -> list[ast.stmt]:
    return [s for stmt in fn.body for s in py.statements(stmt)]


def _applied_to_a_kernel(fn: py.Function, call: ast.Call, imports: dict[str, str]) -> bool:
    """Whether the function applies the autotuner it builds to a kernel it does not take or make
    (`kernel = triton.autotune(configs, key=[...])(_kernel)` in a launcher, `_kernel` defined elsewhere): it tunes
    that kernel itself, and gives its caller no decorator."""
    local = {a.arg for a in py.parameters(fn)} | {t.id for stmt in _body_statements(fn) if isinstance(stmt, ast.Assign)
                                                  for t in stmt.targets if isinstance(t, ast.Name)}
    for stmt in _body_statements(fn):
        for node in py.expressions(stmt):
            if isinstance(node, ast.Call) and node.func is call and len(node.args) == 1:
                kernel = _kernel_name(node.args[0], imports)
                return kernel is not None and kernel not in local
    return False


def _applied_to_a_parameter(fn: py.Function, call: ast.Call, params: list[str]) -> bool:
    """Whether the wrapper calls the decorator it builds on one of its parameters (`triton.autotune(...)(fn)`)."""
    for stmt in _body_statements(fn):
        for node in py.expressions(stmt):
            if (isinstance(node, ast.Call) and node.func is call and len(node.args) == 1
                    and isinstance(node.args[0], ast.Name) and node.args[0].id in params):
                return True
    return False


# ------------------------------------------------------------------------------------------------------------------
# Every argument of an application: what the rules that read more than the key (reset_to_zero, restore_value,
# pre_hook, configs) need, through call forms, aliases, wrappers of this module and of other modules of the project.

# triton.autotune's parameters, in order.
AUTOTUNE_PARAMS = ("configs", "key", "prune_configs_by", "reset_to_zero", "restore_value", "pre_hook", "post_hook",
                   "warmup", "rep", "use_cuda_graph", "do_bench", "cache_results")
_DEPTH = 4


@dataclass(frozen=True)
class Bound:
    """An expression given for one autotune argument, and where it is written: the function whose locals it may
    name (None: module level) in `module`, one of the project's modules (`local`: the module under lint)."""

    expr: ast.expr
    scope: py.Function | None
    module: py.ParsedModule
    local: bool = True


@dataclass(frozen=True)
class Forwarder:
    """A callable that applies triton.autotune, or builds the decorator that does, by what it does with its
    arguments: which of its parameters becomes which autotune argument, and which is the kernel."""

    params: tuple[str, ...]  # its parameters, positional ones first, in order
    positional: int  # how many of them can be passed by position
    binds: tuple[tuple[str, str | Bound], ...]  # autotune argument -> the parameter passed on, or a fixed value
    rest: bool = False  # keywords naming none of its parameters go to triton.autotune (`**kwargs` passed on)
    kernel: str | None = None  # the parameter that is the kernel; None: it returns a decorator

    def bind(self, call: ast.Call, scope: py.Function | None, module: py.ParsedModule,
             local: bool) -> dict[str, Bound]:
        out: dict[str, Bound] = {}
        for name, given in self.binds:
            if isinstance(given, Bound):
                out[name] = given
                continue
            index = self.params.index(given)
            expr = py.argument(call, given, index if index < self.positional else None)
            if expr is not None:
                out[name] = Bound(expr, scope, module, local)
        if self.rest:
            for keyword in call.keywords:
                if keyword.arg is not None and keyword.arg not in self.params and keyword.arg in AUTOTUNE_PARAMS:
                    out[keyword.arg] = Bound(keyword.value, scope, module, local)
        return out


AUTOTUNE_FORWARDER = Forwarder(AUTOTUNE_PARAMS, len(AUTOTUNE_PARAMS), tuple((p, p) for p in AUTOTUNE_PARAMS))


@dataclass(frozen=True)
class Application:
    """One place the autotuner is applied to a kernel of the module under lint, with every argument it gets."""

    kernel: str  # the kernel's name in the module that defines it
    at: ast.AST  # the call (or decorator) that applies it
    arguments: dict[str, Bound]
    decorator: bool = False  # a decorator of the kernel's own definition
    origin: str | None = None  # the file of another project module that defines the kernel (None: this one)


class Project:
    """The project's other modules, as the module under lint imports them: parsed on demand, once per run and
    file state. What it looks for and reads is noted as the verdict's (`kgate.collect.depends`)."""

    def __init__(self, path: str, rel: str) -> None:
        path = os.path.abspath(path)
        self._read: dict[str, tuple[list[int], bytes]] = {}  # what `parsed` read without noting it: state, bytes
        self.file = path
        self.root = project_root(path, rel)

    def module_file(self, module: str, level: int, importer: str) -> str | None:
        parts = [p for p in module.split(".") if p]
        if level:
            base = os.path.dirname(importer)
            for _ in range(level - 1):
                base = os.path.dirname(base)
            bases = [base]
        else:
            bases = [self.root, os.path.join(self.root, "src")]
        for base in bases:
            stem = os.path.join(base, *parts)
            for candidate in (stem + ".py", os.path.join(stem, "__init__.py")):
                depends.probe(candidate)
                if os.path.isfile(candidate) and os.path.abspath(candidate).startswith(self.root + os.sep):
                    return os.path.abspath(candidate)
        return None

    def parsed(self, path: str, whole: bool = True) -> py.ParsedModule | None:
        """The module at `path`, parsed; with `whole`, the verdict is noted to read all of it, else the caller notes
        what it read of it (`read`)."""
        state = path_state(path)
        if state is None:
            depends.probe(path)
            return None
        key = (path, tuple(state))
        held = _PARSED.get(key)
        if held is None:
            from kgate.collect.source import SourceFile, try_parse

            try:
                with open(path, "rb") as handle:
                    data = handle.read()
            except OSError:
                depends.file(path, None)
                return None
            tree = try_parse(data)
            # Its names are followed through the project's modules as the module under lint's are.
            origin = SourceFile(path, os.path.relpath(path, self.root).replace(os.sep, "/"), data)
            held = _PARSED[key] = (py.ParsedModule(tree, origin=origin) if tree is not None else None, data,
                                   depends.digest(data))
            while len(_PARSED) > 64:
                _PARSED.pop(next(iter(_PARSED)))
        if whole or held[0] is None:
            depends.note(path, depends.stable(state), held[2])
        else:
            self._read[path] = (state, held[1])
        return held[0]

    def read(self, path: str, functions: Iterable[str]) -> None:
        """Note that the verdict read the module at `path` (`parsed` without `whole`) but for the bodies of its
        top-level functions other than `functions` (`parts_digest`)."""
        state, data = self._read[path]
        names = ",".join(sorted(set(functions)))
        key = (path, tuple(state), names)
        found = _PARTS.get(key)
        if found is None:
            found = _PARTS[key] = parts_digest(data, names.split(",") if names else [], parses=True)
        depends.note(f"{depends.PARTS}{path}\n{names}", depends.stable(state), found)

    def data(self, path: str) -> bytes | None:
        """The bytes of a file `parsed` read."""
        return next((data for (held, _state), (_info, data, _digest) in _PARSED.items() if held == path), None)


# For one lint run: a module's names are followed through the project's other modules, which may change between runs.
_PARSED: dict[tuple[str, tuple[object, ...]], tuple[py.ParsedModule | None, bytes, str]] = depends.per_run(
    {}, trees=True)
_PARTS: dict[tuple[str, tuple[object, ...], str], str] = depends.per_run({})  # `parts_digest` by file state


def parts_digest(data: bytes, functions: list[str], parses: bool | None = None,
                 split: tuple[list[str], list[pysparse.Block] | None] | None = None) -> str:
    """A digest of what a forwarder's reading of a module (`Applications._foreign`) reads of it: all of it but the
    bodies of the top-level functions other than `functions` (a wrapper's body is read only where it is asked
    about), with the import statements in those bodies (`Applications.imported` reads every import), and not
    where a block stands (what the reading gives names no line of that module); and whether the module parses
    (`parses`, found out where not given: a module that does not is read as none, whatever part of it is broken).
    The digest of the whole text where the module cannot be split into its blocks. `split`: the module's lines and
    blocks, where the run has them already."""
    from kgate.collect.pyimports import import_statements
    from kgate.collect.source import SourceFile, UnreadableSource, try_parse

    if parses is None:
        parses = try_parse(data) is not None
    if not parses:
        return depends.digest(data)

    if split is None:
        try:
            lines = SourceFile("<module>", "module.py", data).lines
        except UnreadableSource:
            return depends.digest(data)
        blocks = pysparse.split(lines, remember=False)
    else:
        lines, blocks = split
    if blocks is None:
        return depends.digest(data)
    text = pysparse.functions_read(lines, blocks, set(functions)).encode("utf-8", "surrogatepass")
    return depends.digest(b"\0".join([text, *(data[start:end] for start, end in import_statements(data))]))


def strip(expr: ast.expr) -> ast.expr:
    """`list(x)`, `tuple(x)`, `x if c else None`: the x a wrapper passes on."""
    for _ in range(4):
        if isinstance(expr, ast.Call) and isinstance(expr.func, ast.Name) and expr.func.id in ("list", "tuple") \
                and len(expr.args) == 1 and not expr.keywords:
            expr = expr.args[0]
        elif isinstance(expr, ast.IfExp) and isinstance(expr.orelse, ast.Constant) and expr.orelse.value is None:
            expr = expr.body
        elif isinstance(expr, ast.IfExp) and isinstance(expr.body, ast.Constant) and expr.body.value is None:
            expr = expr.orelse
        else:
            break
    return expr


class Applications:
    """Where a module applies the autotuner to its kernels, in every form, with every argument it passes."""

    def __init__(self, info: py.ParsedModule, path: str, project: Project | None, depth: int = 0,
                 local: bool = True) -> None:
        self.info = info
        self.path = path
        self.project = project
        self.depth = depth
        self.local = local
        self.functions = {fn.name: fn for fn in info.tree.body if isinstance(fn, (ast.FunctionDef,
                                                                                  ast.AsyncFunctionDef))}
        self._forwarders: dict[str, Forwarder | None] = {}
        self._imported: dict[str, tuple[str, int, str]] | None = None

    # ---------------------------------------------------------------- what a callable is

    def forwarder(self, func: ast.expr, depth: int = 0) -> Forwarder | None:
        if depth > _DEPTH:
            return None
        if py.qualified(func, self.info.imports) in py.AUTOTUNE:
            return AUTOTUNE_FORWARDER
        if isinstance(func, ast.Name):
            if func.id in self.functions:
                return self.wrapper(func.id)
            bound = self.info.constants.get(func.id)
            if bound is not None:
                return self._alias(bound, depth)
        return self._foreign(func)

    def _alias(self, bound: ast.expr, depth: int) -> Forwarder | None:
        if isinstance(bound, (ast.Name, ast.Attribute)):
            return self.forwarder(bound, depth + 1)
        if isinstance(bound, ast.Call) and py.qualified(bound.func, self.info.imports) in PARTIAL and bound.args:
            inner = self.forwarder(bound.args[0], depth + 1)
            if inner is None or len(bound.args) > 1:
                return None
            fixed = {kw.arg: Bound(kw.value, None, self.info, self.local) for kw in bound.keywords if kw.arg}
            binds = tuple((name, fixed.get(given, given) if isinstance(given, str) else given)
                          for name, given in inner.binds)
            return Forwarder(inner.params, inner.positional, binds, inner.rest, inner.kernel)
        return None

    def wrapper(self, name: str) -> Forwarder | None:
        """A function of this module that calls triton.autotune (or another forwarder) for its caller."""
        if name not in self._forwarders:
            self._forwarders[name] = None  # recursion guard
            self._forwarders[name] = self._wrapper(self.functions[name])
        return self._forwarders[name]

    def _wrapper(self, fn: py.Function) -> Forwarder | None:
        if py.is_kernel(fn, self.info.imports):
            return None
        params = tuple(a.arg for a in [*fn.args.posonlyargs, *fn.args.args, *fn.args.kwonlyargs])
        positional = len(fn.args.posonlyargs) + len(fn.args.args)
        kwarg = fn.args.kwarg.arg if fn.args.kwarg is not None else None
        for found in self._applied(fn):
            call, inner, kernel = found
            binds: list[tuple[str, str | Bound]] = []
            for name, bound in inner.bind(call, fn, self.info, self.local).items():
                stripped = strip(bound.expr) if bound.scope is fn else bound.expr
                if bound.scope is fn and isinstance(stripped, ast.Name) and stripped.id in params:
                    binds.append((name, stripped.id))
                else:
                    binds.append((name, bound))
            rest = kwarg is not None and (inner.rest or inner is AUTOTUNE_FORWARDER) and any(
                kw.arg is None and isinstance(kw.value, ast.Name) and kw.value.id == kwarg for kw in call.keywords)
            target = strip(kernel) if kernel is not None else None
            if target is None:
                return Forwarder(params, positional, tuple(binds), rest, None)
            if isinstance(target, ast.Name) and target.id in params:
                return Forwarder(params, positional, tuple(binds), rest, target.id)
        return None

    def _applied(self, fn: py.Function) -> list[tuple[ast.Call, Forwarder, ast.expr | None]]:
        """(call, forwarder, kernel) for each forwarder call in a wrapper's body (not its nested definitions): the
        kernel it is applied to (`f(...)(k)`, or the forwarder's kernel parameter), None for a decorator returned."""
        out: list[tuple[ast.Call, Forwarder, ast.expr | None]] = []
        for stmt in _body_statements(fn):
            if isinstance(stmt, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
                continue
            for node in py.expressions(stmt):
                if not isinstance(node, ast.Call):
                    continue
                if isinstance(node.func, ast.Call) and len(node.args) == 1:
                    inner = self.forwarder(node.func.func)
                    if inner is not None and inner.kernel is None:
                        out.append((node.func, inner, node.args[0]))
                    continue
                inner = self.forwarder(node.func)
                if inner is None or any(node is c for c, _f, _k in out) or any(
                        isinstance(o, ast.Call) and o.func is node for o in py.expressions(stmt)):
                    continue
                if inner.kernel is not None:
                    index = inner.params.index(inner.kernel)
                    out.append((node, inner, py.argument(node, inner.kernel,
                                                         index if index < inner.positional else None)))
                elif isinstance(stmt, ast.Return) and stmt.value is node:
                    out.append((node, inner, None))
        return out

    def _foreign(self, func: ast.expr) -> Forwarder | None:
        """A forwarder another module of the project defines, imported by name or reached as a module attribute;
        read only for names that say they tune (`get_autotune_kernel`), so that a module's other calls cost
        nothing."""
        if self.project is None or self.depth >= 2:
            return None
        written = py.dotted(func)
        if written is None or "tune" not in written.rsplit(".", 1)[-1].lower():
            return None
        found = self.resolve(written)
        if found is None:
            return None
        target, name = found
        other = self.project.parsed(target, whole=False)
        if other is None:
            return None
        reading = Applications(other, target, self.project, self.depth + 1, local=False)
        forwarder = reading.forwarder(ast.Name(id=name, ctx=ast.Load()))
        self.project.read(target, reading._forwarders)  # the functions whose bodies it read
        return forwarder

    def resolve(self, written: str) -> tuple[str, str] | None:
        """(file, name in it) of a name written as imported from another module of the project (`k` after
        `from .kernels import k`, `kernels.k` after `from . import kernels` or `import pkg.kernels as kernels`);
        None where it is not imported or its module is not the project's."""
        assert self.project is not None
        head, _, attr = written.partition(".")
        imported = self.imported().get(head)
        if imported is None:
            return None
        module, level, name = imported
        if attr:
            module = f"{module}.{name}" if name and module else (module or name)
            module, _, name = f"{module}.{attr}".rpartition(".")
        elif not name:
            return None
        target = self.project.module_file(module, level, self.path)
        return (target, name) if target is not None else None

    def imported(self) -> dict[str, tuple[str, int, str]]:
        """Local name -> (module, level, name in it; '' for a module) for the module's imports, relative ones too."""
        if self._imported is None:
            self._imported = {}
            for stmt in py.statements(self.info.tree):
                if isinstance(stmt, ast.Import):
                    for alias in stmt.names:
                        if alias.asname:
                            self._imported[alias.asname] = (alias.name, 0, "")
                elif isinstance(stmt, ast.ImportFrom):
                    for alias in stmt.names:
                        if alias.name != "*":
                            self._imported[alias.asname or alias.name] = (stmt.module or "", stmt.level, alias.name)
        return self._imported

    # ---------------------------------------------------------------- where it is applied

    def find(self) -> list[Application]:
        """Every application to a kernel defined in this module, but for a plain `@triton.autotune(...)` decorator
        (the rules read that one themselves)."""
        out: list[Application] = []
        kernels = {name for name, fn in self.functions.items() if py.is_kernel(fn, self.info.imports)}
        for fn in self.functions.values():
            for decorator in fn.decorator_list:
                if isinstance(decorator, ast.Call) and py.qualified(decorator.func, self.info.imports) in py.AUTOTUNE:
                    continue
                func = decorator.func if isinstance(decorator, ast.Call) else decorator
                f = self.forwarder(func)
                if f is None or (f.kernel is None) != isinstance(decorator, ast.Call):
                    continue
                if fn.name in kernels:
                    call = decorator if isinstance(decorator, ast.Call) else None
                    arguments = f.bind(call, None, self.info, True) if call is not None else {
                        n: g for n, g in f.binds if isinstance(g, Bound)}
                    out.append(Application(fn.name, decorator, arguments, decorator=True))
        for scope, stmt in _scoped_statements(self.info.tree):
            for node in py.expressions(stmt):
                if not isinstance(node, ast.Call):
                    continue
                if isinstance(node.func, ast.Call) and len(node.args) == 1:
                    f = self.forwarder(node.func.func)
                    if f is None or f.kernel is not None:
                        continue
                    call = node.func
                    kernel: ast.expr | None = node.args[0]
                else:
                    f = self.forwarder(node.func)
                    if f is None or f.kernel is None:
                        continue
                    index = f.params.index(f.kernel)
                    call = node
                    kernel = py.argument(node, f.kernel, index if index < f.positional else None)
                if kernel is None or (scope is not None and self._forwarders.get(scope.name) is not None):
                    continue  # a wrapper's own application: counted where the wrapper is used
                names = _kernel_names(kernel, scope, kernels, self.info.imports)
                for name in names:
                    out.append(Application(name, call, f.bind(call, scope, self.info, True)))
                if not names and (found := self.imported_kernel(strip(kernel), scope)) is not None:
                    out.append(Application(found[1], call, f.bind(call, scope, self.info, True), origin=found[0]))
        return out

    def imported_kernel(self, expr: ast.expr, scope: py.Function | None) -> tuple[str, str] | None:
        """(file, name) of a `@triton.jit` kernel another module of the project defines, imported by name
        (`from .kernels import k`) or reached as an attribute of an imported module (`kernels.k`)."""
        if self.project is None or scope is not None and any(
                isinstance(n, ast.Name) and isinstance(n.ctx, ast.Store) and n.id == py.dotted(expr)
                for n in ast.walk(scope)):
            return None
        written = py.dotted(expr)
        found = self.resolve(written) if written is not None else None
        if found is None:
            return None
        target, name = found
        other = self.project.parsed(target)
        fn = next((f for f in other.tree.body if isinstance(f, (ast.FunctionDef, ast.AsyncFunctionDef))
                   and f.name == name), None) if other is not None else None
        if fn is None or not py.is_kernel(fn, other.imports):  # type: ignore[union-attr]
            return None
        return target, name


def _scoped_statements(tree: ast.Module) -> list[tuple[py.Function | None, ast.stmt]]:
    """Every statement of the module with the top-level function it is in (None at module level)."""
    out: list[tuple[py.Function | None, ast.stmt]] = []
    for stmt in tree.body:
        scope = stmt if isinstance(stmt, (ast.FunctionDef, ast.AsyncFunctionDef)) else None
        out.extend((scope, s) for s in py.statements(stmt))
    return out


def _kernel_names(expr: ast.expr, scope: py.Function | None, kernels: set[str], imports: dict[str, str],
                  depth: int = 0) -> list[str]:
    """The module's kernels an expression may be: a kernel's name, `triton.jit(k)`, or a local variable of the
    function assigned kernels (`fn = _bwd_persistent if persistent else _bwd`, or in the branches of an `if`)."""
    if depth > 3:
        return []
    if isinstance(expr, ast.Call) and len(expr.args) == 1 and _is_jit(expr.func, imports):
        return _kernel_names(expr.args[0], scope, kernels, imports, depth + 1)
    if isinstance(expr, ast.IfExp):
        return _kernel_names(expr.body, scope, kernels, imports, depth + 1) + _kernel_names(
            expr.orelse, scope, kernels, imports, depth + 1)
    if not isinstance(expr, ast.Name):
        return []
    if scope is not None and any(a.arg == expr.id for a in py.parameters(scope)):
        return []
    values = [node.value for node in ast.walk(scope)
              if isinstance(node, ast.Assign) and any(isinstance(t, ast.Name) and t.id == expr.id
                                                      for t in node.targets)] if scope is not None else []
    if not values:
        return [expr.id] if expr.id in kernels else []
    out: list[str] = []
    for value in values:
        out.extend(n for n in _kernel_names(value, None, kernels, imports, depth + 1) if n not in out)
    return out
