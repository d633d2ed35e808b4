"""What the arguments of a kernel's launches do at run time, read from the launch sites in its module.

A launch site is `kernel[grid](...)` (or `kernel.run(...)`, or `wrap(kernel)[grid](...)` through a wrapper such
as `torch.library.wrap_triton`). The value passed for a parameter is followed
through the launching function's assignments (every assignment of a name counts: the reading is not
flow-sensitive) and through the module's own helper functions, and falls in one of four classes:

- `BOUNDED`: takes a few values whatever the batch: a literal, a module constant, a comparison or a flag, an
  entry of a constant table, a value passed through a bucketing function (`BUCKETING_FUNCTIONS`, names with
  `bucket`, `pow2` or `power_of_2` in them, or the project's own), `min(...)` with a bounded argument, a
  division of a run-time size by a constant of at least `COARSE_DIVISOR`, the size in bytes or the number of
  dimensions of a tensor, a property of the device (`get_device_properties(d).multi_processor_count`, a call
  such as `get_npu_core_count()` or `num_sms()`: fixed per machine), or a call of a module function every
  `return` of which is bounded;
- `MODEL`: fixed per model: the last dimension of a tensor (`x.shape[-1]`, the last name of
  `M, N = x.shape`), any dimension of a tensor named like a weight, a bias or its gradient (`w`, `weight`,
  `w_q`, `dw`, `db`), an attribute of `self` or of a configuration (`config.hidden_size`);
- `RUNTIME`: follows the token count or the batch: the first dimension of a tensor (`x.shape[0]`, `x.size(0)`,
  the first name of `B, T, H, D = q.shape`), `x.numel()`, `len(x)`, and anything computed from them by
  arithmetic that does not bound it (`B * T`, `triton.cdiv(T, 64)`, `max(1, T)`);
- `UNKNOWN`: anything else (a middle dimension, a parameter of the launcher, a call into another module); the
  caller then decides by the name (`Names`).
"""

from __future__ import annotations

import ast
import re
from bisect import bisect_left
from collections.abc import Iterator
from dataclasses import dataclass

from kgate.collect import pysource as py
from kgate.collect import pysparse
from kgate.collect.source import SourceFile

BOUNDED, MODEL, UNKNOWN, RUNTIME = range(4)

# Functions whose result takes few values whatever their argument (by the last part of the name).
BUCKETING_FUNCTIONS = frozenset({"next_power_of_2", "next_power_of_two", "next_pow2", "bit_length", "log2",
                                 "ilog2", "element_size", "dim", "is_contiguous"})
_BUCKETING_PARTS = ("bucket", "pow2", "power_of_2", "power_of_two")
# Dividing a token count by this much or more leaves at most 64 values below a million tokens.
COARSE_DIVISOR = 1 << 14
_DIVIDERS = frozenset({"cdiv", "ceil_div", "ceildiv", "div_up", "divup", "ceil_divide"})
_SAME = frozenset({"int", "abs", "float", "round", "ceil", "floor", "index"})
_WEIGHT = re.compile(r"(?i)^(d?w|d?w_.*|.*weight.*|.*_w|d?bias|db)$")  # a weight, a bias, or its gradient
_LINE_BREAK = re.compile(r"\r\n|\r|\n")  # as Python numbers lines
# What a device reports about itself (fixed per machine): an attribute or a function by its last name.
_DEVICE = re.compile(r"(?i)(multi_?processor|device_propert|device_count$|(^|_)(sm|sms|core|cores|eu|cu)_count$"
                     r"|(^|_)num_(sms|cores|cus)$)")
_CONFIG = frozenset({"self", "config", "cfg", "model_config", "args", "hparams"})


class Why:
    """The expression that decided a verdict, rendered only if a finding shows it."""

    __slots__ = ("after", "before", "node")

    def __init__(self, node: ast.AST, before: str = "", after: str = "") -> None:
        self.node, self.before, self.after = node, before, after

    def __str__(self) -> str:
        return f"{self.before}{_written(self.node)}{self.after}"


@dataclass(frozen=True)
class Verdict:
    cls: int
    why: str | Why = ""  # what decided: a name, or the expression as written


_NOTHING = Verdict(BOUNDED)


def worst(verdicts: list[Verdict]) -> Verdict:
    return max(verdicts, key=lambda v: v.cls) if verdicts else Verdict(UNKNOWN)


def best(verdicts: list[Verdict]) -> Verdict:
    return min(verdicts, key=lambda v: v.cls) if verdicts else Verdict(UNKNOWN)


class Names:
    """The class a name alone suggests, for values no launch site shows (documented in KG201)."""

    RUNTIME_PARTS = frozenset({"token", "tokens", "seq", "seqlen", "seqlens", "batch", "rows", "ctx", "lens",
                               "lengths", "indices"})
    MODEL_PARTS = frozenset({"dim", "dims", "hidden", "head", "heads", "vocab", "expert", "experts", "features",
                             "channels", "embd", "embed", "intermediate", "model"})

    # Words run together without a separator (`headdim`, `hdim`, `nheads`, `maxlen`) end in one of these.
    RUNTIME_ENDINGS = ("seqlen", "seqlens", "tokens", "len", "lens", "batch")
    MODEL_ENDINGS = ("dim", "dims", "head", "heads")
    # A size of something the layer or the kernel fixes (`chunk_size`, `page_size`, `group_size`).
    SETTING_PARTS = frozenset({"chunk", "block", "page", "group", "window", "tile"})
    FLAG_PARTS = frozenset({"is", "has", "use", "uses", "enable", "with"})

    def __init__(self, runtime: set[str], model: set[str]) -> None:
        self.runtime = runtime
        self.model = model

    def of(self, name: str) -> int:
        if name in self.runtime:
            return RUNTIME
        if name in self.model:
            return MODEL
        parts = {p.lower() for p in re.findall(r"[A-Z]+(?![a-z])|[A-Z]?[a-z]+", name)}
        if "bucket" in parts or "buckets" in parts:
            return BOUNDED
        if parts & self.RUNTIME_PARTS:
            return RUNTIME
        if parts & self.MODEL_PARTS:
            return MODEL
        if parts & self.FLAG_PARTS:
            return UNKNOWN  # `IS_VARLEN`, `HAS_BIAS`: a flag, whatever its last word
        if any(p.endswith(self.RUNTIME_ENDINGS) for p in parts):
            return RUNTIME
        if any(p.endswith(self.MODEL_ENDINGS) for p in parts) or (
                "size" in parts and parts & self.SETTING_PARTS):
            return MODEL
        return UNKNOWN


class _Scope:
    """A function (or the module) as the launch sites see it: its own assignments, by name."""

    def __init__(self, node: ast.AST, parent: _Scope | None, bound: dict[str, tuple[ast.expr, _Scope]] | None = None):
        self.node = node
        self.parent = parent
        self.bound = bound or {}  # a helper's parameters: the caller's argument and scope
        self.own = _own_statements(node)
        self._env: dict[str, list[tuple[ast.expr | None, int | None, int]]] | None = None

    @property
    def env(self) -> dict[str, list[tuple[ast.expr | None, int | None, int]]]:
        """name -> (value, position in an unpacked value or None, how many names it was unpacked into)."""
        if self._env is None:
            self._env = {}
            for stmt in self.own:
                for target, value in _assignments(stmt):
                    _bind(self._env, target, value)
        return self._env

    @property
    def params(self) -> set[str]:
        return {a.arg for a in py.parameters(self.node)} if isinstance(self.node, py.Function) else set()


class Launches:
    """The launch sites of some kernels of one module, and what their arguments do."""

    def __init__(self, source: SourceFile, info: py.ParsedModule, launched: set[str], kernels: set[str],
                 names: Names, bucketing: frozenset[str]) -> None:
        self.source = source
        self.info = info
        self.names = names
        self.bucketing = bucketing
        self._blocks: dict[str, pysparse.Block] = {}
        self._helpers: dict[str, py.Function | None] = {}
        # The lines that launch one of the kernels (`k[`, `k.run(`), 0-based: only they are parsed and walked.
        self.marked = _launch_lines(source.text, launched)
        if info.whole:
            self.tree = info.tree
        else:
            self.tree = self._excerpt(kernels)
        self.sites: dict[str, list[tuple[ast.Call, _Scope]]] = {}
        self.definitions: dict[str, py.Function] = {}
        self._collect(launched)

    def _excerpt(self, kernels: set[str]) -> ast.Module:
        from kgate.collect.source import UnreadableSource, parse_python

        lines = self.source.lines
        blocks = pysparse.split(lines)
        if blocks is None:
            return self.source.tree
        self._blocks = pysparse.definitions(lines, blocks)
        launchers = pysparse.containing(blocks, self.marked)
        headers = [self._blocks[k] for k in kernels if k in self._blocks and self._blocks[k] not in launchers]
        try:
            return parse_python(pysparse.excerpt(lines, launchers, headers).encode("utf-8"), self.source.rel)
        except UnreadableSource:
            return self.source.tree

    def _collect(self, launched: set[str]) -> None:
        # The module's own statements are not read: the excerpt holds none of them (module constants come from
        # the shared tree), and a launch at module level runs once, at import.
        module = _Scope(self.tree, None)
        module._env = {}
        stack: list[_Scope] = [module]
        while stack:
            scope = stack.pop()
            for stmt in scope.own:
                if isinstance(stmt, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
                    if isinstance(stmt, py.Function) and scope is module:
                        self.definitions.setdefault(stmt.name, stmt)
                    stack.append(_Scope(stmt, scope))
                    continue
                if scope is module or not self._launches_within(stmt):
                    continue
                for node in py.expressions(stmt):
                    name = _launched_name(node)
                    if name is not None and name in launched:
                        self.sites.setdefault(name, []).append((node, scope))  # type: ignore[arg-type]

    def _launches_within(self, stmt: ast.stmt) -> bool:
        first, last = stmt.lineno - 1, (stmt.end_lineno or stmt.lineno) - 1
        at = bisect_left(self.marked, first)
        return at < len(self.marked) and self.marked[at] <= last

    # ---------------------------------------------------------------- arguments

    def argument(self, launched: str, param: str, position: int | None, default: bool) -> list[Verdict]:
        """What each launch site passes for one parameter (an empty list: no launch site in the module)."""
        return [verdict for _expr, verdict in self.passed(launched, param, position, default)]

    def passed(self, launched: str, param: str, position: int | None,
               default: bool) -> list[tuple[ast.expr | None, Verdict]]:
        """Per launch site, the expression it passes for one parameter (None: it passes none, or passes
        everything through `*args`/`**kwargs`) and what that value does."""
        out: list[tuple[ast.expr | None, Verdict]] = []
        for call, scope in self.sites.get(launched, []):
            expr = _passed(call, param, position)
            if expr is None:
                expr, scope = self._spread(call, param, scope)
            if expr is None:
                passes_all = any(isinstance(a, ast.Starred) for a in call.args) or any(
                    k.arg is None for k in call.keywords)
                out.append((None, Verdict(UNKNOWN) if passes_all or not default else _NOTHING))
            else:
                out.append((expr, self.value(expr, scope, 0, set())))
        return out

    def _spread(self, call: ast.Call, param: str, scope: _Scope) -> tuple[ast.expr | None, _Scope]:
        """`k[grid](**kwargs)` with `kwargs = dict(M=M, ...)` or `{"M": M, ...}` assigned in the launcher."""
        for keyword in call.keywords:
            if keyword.arg is not None or not isinstance(keyword.value, ast.Name):
                continue
            for value, position, _count in scope.env.get(keyword.value.id, []):
                if position is not None:
                    continue
                if isinstance(value, ast.Call) and py.dotted(value.func) == "dict":
                    found = next((k.value for k in value.keywords if k.arg == param), None)
                elif isinstance(value, ast.Dict):
                    found = next((v for k, v in zip(value.keys, value.values)
                                  if isinstance(k, ast.Constant) and k.value == param), None)
                else:
                    continue
                if found is not None:
                    return found, scope
        return None, scope

    def value(self, expr: ast.expr, scope: _Scope, depth: int, seen: set[tuple[int, str]]) -> Verdict:
        if depth > 12:
            return Verdict(UNKNOWN)
        depth += 1
        if isinstance(expr, ast.Constant):
            return _NOTHING
        if isinstance(expr, (ast.Compare, ast.BoolOp)) or (isinstance(expr, ast.UnaryOp)
                                                            and isinstance(expr.op, ast.Not)):
            return _NOTHING
        if isinstance(expr, ast.UnaryOp):
            return self.value(expr.operand, scope, depth, seen)
        if isinstance(expr, ast.IfExp):
            return worst([self.value(expr.body, scope, depth, seen), self.value(expr.orelse, scope, depth, seen)])
        if isinstance(expr, ast.Name):
            return self._name(expr.id, scope, depth, seen)
        if isinstance(expr, ast.BinOp):
            return self._binop(expr, scope, depth, seen)
        if isinstance(expr, ast.Call):
            return self._call(expr, scope, depth, seen)
        if isinstance(expr, ast.Subscript):
            return self._subscript(expr, scope, depth, seen)
        if isinstance(expr, ast.Attribute):
            return self._attribute(expr)
        return Verdict(UNKNOWN)

    def _name(self, name: str, scope: _Scope, depth: int, seen: set[tuple[int, str]]) -> Verdict:
        here: _Scope | None = scope
        while here is not None:
            if name in here.bound:
                arg, caller = here.bound[name]
                return self.value(arg, caller, depth, seen)
            bindings = here.env.get(name)
            if bindings:
                mark = (id(here), name)
                if mark in seen:
                    return _NOTHING  # `T = T + 1` and the like: the other bindings decide
                seen = seen | {mark}
                verdicts = [(self._binding(name, value, position, count, here, depth, seen), value)
                            for value, position, count in bindings]
                best_pair = max(range(len(verdicts)), key=lambda i: verdicts[i][0].cls)
                verdict, value = verdicts[best_pair]
                if value is not None and bindings[best_pair][1] is None and verdict.cls != UNKNOWN:
                    return Verdict(verdict.cls, Why(value, f"{name} = "))  # the assignment, as written
                return verdict
            if name in here.params:
                break
            here = here.parent
        if name in self.info.constants:
            return _NOTHING
        return Verdict(self.names.of(name), name)

    def _binding(self, name: str, value: ast.expr | None, position: int | None, count: int, scope: _Scope,
                 depth: int, seen: set[tuple[int, str]]) -> Verdict:
        if value is None:
            return Verdict(self.names.of(name), name)
        if position is None:
            return self.value(value, scope, depth, seen)
        shape = _shape(value)
        if shape is None:
            return Verdict(self.names.of(name), name)
        tensor, first, last = shape
        if _is_weight(tensor):
            return Verdict(MODEL, Why(value))
        if position == 0 and first:
            return Verdict(RUNTIME, Why(value, after="[0]"))
        if last and (position == -1 or position == count - 1):
            return Verdict(MODEL, Why(value, after="[-1]"))
        return Verdict(self.names.of(name), name)

    def _binop(self, expr: ast.BinOp, scope: _Scope, depth: int, seen: set[tuple[int, str]]) -> Verdict:
        left = self.value(expr.left, scope, depth, seen)
        if isinstance(expr.op, (ast.FloorDiv, ast.Div, ast.RShift)):
            return self._divided(left, expr.right, scope, depth, seen, shift=isinstance(expr.op, ast.RShift))
        right = self.value(expr.right, scope, depth, seen)
        if isinstance(expr.op, ast.Mod) and right.cls == BOUNDED:
            return _NOTHING
        return worst([left, right])

    def _divided(self, left: Verdict, divisor: ast.expr, scope: _Scope, depth: int, seen: set[tuple[int, str]],
                 shift: bool = False) -> Verdict:
        right = self.value(divisor, scope, depth, seen)
        if right.cls >= UNKNOWN:
            return Verdict(UNKNOWN)  # a ratio of two run-time sizes may be anything (numel() // (B * T) is D)
        if left.cls == RUNTIME:
            amount = _integer(divisor, self.info.constants)
            if amount is not None and (1 << amount if shift and amount < 64 else amount) >= COARSE_DIVISOR:
                return _NOTHING
            return left
        return worst([left, right])

    def _call(self, call: ast.Call, scope: _Scope, depth: int, seen: set[tuple[int, str]]) -> Verdict:
        func = call.func
        written = py.qualified(func, self.info.imports) or py.dotted(func) or (
            func.attr if isinstance(func, ast.Attribute) else "")
        last = written.rsplit(".", 1)[-1]
        if last in BUCKETING_FUNCTIONS or written in self.bucketing or last in self.bucketing or any(
                part in last.lower() for part in _BUCKETING_PARTS) or _DEVICE.search(last):
            return _NOTHING
        args = [a for a in call.args if not isinstance(a, ast.Starred)]
        if last == "min" and args:
            return best([self.value(a, scope, depth, seen) for a in args])
        if last == "max" and args:
            return worst([self.value(a, scope, depth, seen) for a in args])
        if last in _SAME and len(args) == 1:
            return self.value(args[0], scope, depth, seen)
        if last in _DIVIDERS and len(args) == 2:
            return self._divided(self.value(args[0], scope, depth, seen), args[1], scope, depth, seen)
        if isinstance(func, ast.Attribute) and func.attr in ("size", "numel") or last in ("len", "prod"):
            return self._size(call, last, Why(call))
        if isinstance(func, ast.Name) and depth < 8:
            helper = self.helper(func.id)
            if helper is not None:
                return self._returns(helper, call, scope, depth, seen)
        return Verdict(UNKNOWN)

    def _size(self, call: ast.Call, last: str, why: Why) -> Verdict:
        func = call.func
        if last in ("len", "prod"):
            target = call.args[0] if call.args else None
            if last == "prod":
                shape = _shape(target) if target is not None else None
                return Verdict(RUNTIME, why) if shape is not None and shape[1] and not _is_weight(shape[0]) \
                    else Verdict(UNKNOWN)
            if _is_weight(target):
                return Verdict(MODEL, why)
            name = py.dotted(target) if target is not None else None  # len(cu_seqlens), not len(layers)
            return Verdict(RUNTIME, why) if name and self.names.of(name.rsplit(".", 1)[-1]) == RUNTIME \
                else Verdict(UNKNOWN)
        assert isinstance(func, ast.Attribute)
        if _is_weight(func.value):
            return Verdict(MODEL, why)
        if func.attr == "numel":
            return Verdict(RUNTIME, why)
        if not call.args and not call.keywords:
            return Verdict(UNKNOWN)  # x.size(): a shape, read where it is unpacked
        index = _integer(call.args[0] if call.args else call.keywords[0].value, {})
        return _dimension(index, why)

    def _subscript(self, expr: ast.Subscript, scope: _Scope, depth: int, seen: set[tuple[int, str]]) -> Verdict:
        shape = _shape(expr.value)
        if shape is not None:
            tensor, first, last = shape
            if _is_weight(tensor):
                return Verdict(MODEL, Why(expr))
            index = _integer(expr.slice, {})
            if index is None:
                return Verdict(UNKNOWN)
            if (index == 0 and first) or (index == -1 and last):
                return _dimension(index, Why(expr))
            return Verdict(UNKNOWN)
        if isinstance(expr.value, ast.Name) and isinstance(self.info.constants.get(expr.value.id),
                                                           (ast.Dict, ast.List, ast.Tuple)):
            return _NOTHING  # an entry of a constant table
        return Verdict(UNKNOWN)

    def _attribute(self, expr: ast.Attribute) -> Verdict:
        if expr.attr in ("ndim", "itemsize") or _DEVICE.search(expr.attr):
            return _NOTHING
        root = py.dotted(expr) or ""
        parts = root.split(".")
        if parts[0] in _CONFIG or "config" in parts[:-1]:
            return Verdict(MODEL, root)
        return Verdict(self.names.of(expr.attr), expr.attr)

    # ---------------------------------------------------------------- the module's helper functions

    def helper(self, name: str) -> py.Function | None:
        if name not in self._helpers:
            self._helpers[name] = self._load_helper(name)
        return self._helpers[name]

    def _load_helper(self, name: str) -> py.Function | None:
        if self.info.whole or not self._blocks:
            found = self.definitions.get(name)
        else:
            found = py.parse_definition(self.source, self._blocks.get(name), name)
        return found if found is not None and not py.is_kernel(found, self.info.imports) else None

    def _returns(self, helper: py.Function, call: ast.Call, scope: _Scope, depth: int,
                 seen: set[tuple[int, str]]) -> Verdict:
        bound: dict[str, tuple[ast.expr, _Scope]] = {}
        params = py.parameters(helper)
        for arg, param in zip(call.args, params):
            if isinstance(arg, ast.Starred):
                break
            bound[param.arg] = (arg, scope)
        for keyword in call.keywords:
            if keyword.arg is not None:
                bound[keyword.arg] = (keyword.value, scope)
        inner = _Scope(helper, None, bound)
        values = [s.value for s in inner.own if isinstance(s, ast.Return)]
        if not values or any(v is None for v in values):
            return Verdict(UNKNOWN)
        verdict = worst([self.value(v, inner, depth, seen) for v in values if v is not None])
        return Verdict(verdict.cls, Why(call) if verdict.cls != UNKNOWN else "")


# ------------------------------------------------------------------------------------------------ helpers


def _own_statements(node: ast.AST) -> list[ast.stmt]:
    """The statements of a function, class or module, not those of the definitions inside it."""
    body = getattr(node, "body", [])
    out: list[ast.stmt] = []
    stack: list[ast.AST] = list(reversed(body))
    while stack:
        stmt = stack.pop()
        if isinstance(stmt, ast.stmt):
            out.append(stmt)
            if isinstance(stmt, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
                continue
        children: list[ast.AST] = []
        for name in ("body", "handlers", "orelse", "finalbody", "cases"):
            children.extend(getattr(stmt, name, None) or ())
        stack.extend(reversed(children))
    return out


def _assignments(stmt: ast.stmt) -> Iterator[tuple[ast.expr, ast.expr | None]]:
    if isinstance(stmt, ast.Assign):
        for target in stmt.targets:
            yield target, stmt.value
    elif isinstance(stmt, (ast.AnnAssign, ast.AugAssign)) and stmt.value is not None:
        yield stmt.target, stmt.value
    elif isinstance(stmt, (ast.For, ast.AsyncFor)):
        yield stmt.target, None
    elif isinstance(stmt, (ast.With, ast.AsyncWith)):
        for item in stmt.items:
            if item.optional_vars is not None:
                yield item.optional_vars, None


def _bind(env: dict[str, list[tuple[ast.expr | None, int | None, int]]], target: ast.expr,
          value: ast.expr | None) -> None:
    if isinstance(target, ast.Name):
        env.setdefault(target.id, []).append((value, None, 0))
    elif isinstance(target, (ast.Tuple, ast.List)):
        elts = target.elts
        if isinstance(value, (ast.Tuple, ast.List)) and len(value.elts) == len(elts) and not any(
                isinstance(e, ast.Starred) for e in [*elts, *value.elts]):
            for sub, part in zip(elts, value.elts):
                _bind(env, sub, part)
            return
        if (isinstance(value, (ast.Tuple, ast.List)) and value.elts and isinstance(value.elts[0], ast.Starred)
                and not any(isinstance(e, ast.Starred) for e in [*elts, *value.elts[1:]])
                and len(elts) > len(value.elts) - 1):
            # `T, D, G = *x.shape, groups`: the names before the trailing values unpack the starred shape
            tail = len(value.elts) - 1
            head = elts[:len(elts) - tail]
            for sub, part in zip(elts[len(elts) - tail:], value.elts[1:]):
                _bind(env, sub, part)
            _bind(env, ast.Tuple(elts=head, ctx=ast.Store()), value.elts[0].value)
            return
        star = next((i for i, e in enumerate(elts) if isinstance(e, ast.Starred)), None)
        for i, sub in enumerate(elts):
            if isinstance(sub, ast.Starred):
                sub = sub.value
            position = i if star is None or i < star else i - len(elts)
            if isinstance(sub, ast.Name):
                env.setdefault(sub.id, []).append((value, position, len(elts)))


def _launch_lines(text: str, names: set[str]) -> list[int]:
    """The 0-based lines on which one of `names` is subscripted or `.run`: found with `str.find`, not a regular
    expression built per module (compiling one costs more than the search)."""
    found: set[int] = set()
    for name in names:
        at = text.find(name)
        while at >= 0:
            end = at + len(name)
            before = text[at - 1] if at else " "
            rest = text[end:end + 8].lstrip(" \t")
            if not (before.isalnum() or before == "_") and (rest.startswith("[") or rest.startswith(".run") or (
                    rest.startswith(")") and rest[1:].lstrip(" \t").startswith("["))):
                found.add(text.count("\n", 0, at) if "\r" not in text else len(_LINE_BREAK.findall(text, 0, at)))
            at = text.find(name, end)
    return sorted(found)


def _launched_name(node: ast.AST) -> str | None:
    """`k[grid](...)`, `k.run(...)`, or `wrap(k)[grid](...)` (a launch through a wrapper such as
    `torch.library.wrap_triton`): the name `k`."""
    if not isinstance(node, ast.Call):
        return None
    func = node.func
    if isinstance(func, ast.Subscript) and isinstance(func.value, ast.Name):
        return func.value.id
    if isinstance(func, ast.Subscript) and isinstance(func.value, ast.Call):
        wrapped = func.value
        if len(wrapped.args) == 1 and not wrapped.keywords and isinstance(wrapped.args[0], ast.Name):
            return wrapped.args[0].id
    if isinstance(func, ast.Attribute) and func.attr == "run" and isinstance(func.value, ast.Name):
        return func.value.id
    return None


def _passed(call: ast.Call, param: str, position: int | None) -> ast.expr | None:
    for keyword in call.keywords:
        if keyword.arg == param:
            return keyword.value
    if position is not None:
        for i, arg in enumerate(call.args):
            if isinstance(arg, ast.Starred):
                return None
            if i == position:
                return arg
    return None


def _shape(expr: ast.expr) -> tuple[ast.expr, bool, bool] | None:
    """A tensor's shape (`x.shape`, `x.size()`, `ctx.input_shape`, or a slice of one): (the tensor, whether its
    first item is the tensor's first dimension, whether its last is the last)."""
    if isinstance(expr, ast.Attribute) and (expr.attr == "shape" or expr.attr.endswith("_shape")):
        return expr.value, True, True
    if (isinstance(expr, ast.Call) and isinstance(expr.func, ast.Attribute) and expr.func.attr == "size"
            and not expr.args and not expr.keywords):
        return expr.func.value, True, True
    if isinstance(expr, ast.Subscript) and isinstance(expr.slice, ast.Slice):
        inner = _shape(expr.value)
        if inner is None or expr.slice.step is not None:
            return None
        lower = _integer(expr.slice.lower, {}) if expr.slice.lower is not None else 0
        return inner[0], inner[1] and lower == 0, inner[2] and expr.slice.upper is None
    return None


def _dimension(index: int | None, why: Why) -> Verdict:
    if index == 0:
        return Verdict(RUNTIME, why)
    if index == -1:
        return Verdict(MODEL, why)
    return Verdict(UNKNOWN)


def _is_weight(tensor: ast.expr | None) -> bool:
    name = py.dotted(tensor) if tensor is not None else None
    return name is not None and bool(_WEIGHT.match(name.rsplit(".", 1)[-1]))


def _integer(node: ast.expr | None, constants: dict[str, ast.expr], depth: int = 0) -> int | None:
    """An integer literal, a module constant holding one, or a product or power of those."""
    if node is None or depth > 8:
        return None
    if isinstance(node, ast.Constant) and isinstance(node.value, int) and not isinstance(node.value, bool):
        return node.value
    if isinstance(node, ast.UnaryOp) and isinstance(node.op, ast.USub):
        inner = _integer(node.operand, constants, depth + 1)
        return None if inner is None else -inner
    if isinstance(node, ast.Name) and node.id in constants:
        return _integer(constants[node.id], constants, depth + 1)
    if isinstance(node, ast.BinOp) and isinstance(node.op, (ast.Mult, ast.Pow, ast.LShift)):
        left, right = _integer(node.left, constants, depth + 1), _integer(node.right, constants, depth + 1)
        if left is None or right is None:
            return None
        if isinstance(node.op, ast.Mult):
            return left * right
        if 0 <= right <= 64:
            return left ** right if isinstance(node.op, ast.Pow) else left << right
    return None


def _written(node: ast.AST) -> str:
    """A short rendering of an expression for a message."""
    try:
        text = ast.unparse(node)
    except (ValueError, RecursionError):  # pragma: no cover - an expression ast cannot render
        return ""
    return text if len(text) <= 40 else text[:37] + "..."
