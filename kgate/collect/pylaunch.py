"""What the arguments of a kernel's launches do at run time, read from the launch sites in its module, or in the
project's other modules that import it.

A launch site is `kernel[grid](...)` (or `kernel.run(...)`, or `wrap(kernel)[grid](...)` through a wrapper such
as `torch.library.wrap_triton`). The value passed for a parameter is followed
through the launching function's assignments (every assignment of a name counts: the reading is not
flow-sensitive) and through the module's own helper functions (and those it imports by name from the project's
other modules), and falls in one of four classes:

- `BOUNDED`: takes a few values whatever the batch: a literal, a module constant, a comparison or a flag, an
  entry of a constant table, a value passed through a bucketing function (`BUCKETING_FUNCTIONS`, names with
  `bucket`, `pow2` or `power_of_2` in them, or the project's own), `min(...)` with a bounded argument, a
  division of a run-time size by a constant of at least `COARSE_DIVISOR`, the size in bytes or the number of
  dimensions of a tensor, a property of the device (`get_device_properties(d).multi_processor_count`, a call
  such as `get_npu_core_count()` or `num_sms()`: fixed per machine), a size the launching function refuses above
  `FEW_VALUES` (`if q_len > 16: raise ...`), a value an environment switch replaces by a constant unless the variable
  is set (`kgate.collect.pyswitches`), a call of a module function every
  `return` of which is bounded, the first dimension of a tensor packed to one (`kgate.collect.pybatch`), or of a
  parameter every call of the launching function passes under such a bound (`M = x.shape[0]`, `if M > 16: raise`);
- `MODEL`: fixed per model: the last dimension of a tensor (`x.shape[-1]`, the last name of `M, N = x.shape`),
  an attribute of `self` or of a configuration (`config.hidden_size`), any dimension or size of a tensor the
  built model fixes (`Launches.fixed`: a weight, a bias or a scale, or an attribute one carries; a parameter,
  buffer or start-up table of the module, what a method of its class returns of one, an entry of a dict it keeps), the first dimension of a tensor made with a size of one of these (`torch.empty((experts, n))`:
  `kgate.collect.pybatch`), the stride of the last dimension, or of one whose later dimensions are all model
  dimensions, a size the launching function asserts equal to one of these (`assert (dim, width) == weight.shape`);
- `RUNTIME`: follows the token count or the batch: the first dimension of a tensor (`x.shape[0]`, `x.size(0)`,
  the first name of `B, T, H, D = q.shape`), the sequence length of an attention tensor unpacked into four names
  (`N` of `B, H, N, D = x.shape`, `T` of `B, T, H, D`), or into three, a letter between the batch and the heads or a
  width (`n` of `b, n, h`), a product of a shape's sizes from the first (`prod(x.shape[:-1])`), a middle name that says a token count (`seqlen`, `m_size`)
  or is the batch's or the time steps' letter (`B` of `NS, B, NH, DH`), a middle dimension bound to a name that
  ends in that letter (`true_B = x.shape[2]`), a stride that holds one of these (`q.stride(0)` of a head-major
  `[H, T, D]` tensor, unpacked in the launcher or in its callers; `k`, `v`, `o` and the gradients laid out as the
  `q` beside them),
  the spatial extents after a channels dimension (`H`, `W` of `N, C, H, W`), the width of a block table
  (`block_offsets.size(1)`), `x.numel()` (or `len(x.flatten())`), `len(x)`, a dimension or stride of a tensor
  made with its sizes written out, or laid out by a view so (`x.view(bsz, seqlen, heads, dim)`, transposed or not),
  where a size it takes is one of these (`cols` of `rows, cols = logits.shape`, every caller making
  `torch.empty((rows, kv_slots.numel()))`: `Batches.made`), and
  anything computed from them by arithmetic that does not bound it (`B * T`, `triton.cdiv(T, 64)`, `max(1, T)`,
  a division by anything that does not grow with it too: `ceil(n_rows / sm_count)`);
- `UNKNOWN`: anything else (a middle dimension, a parameter of a launcher nothing in the project calls, a call
  into another module); the caller then decides by the name (`Names`).

A shape handed on whole (`b, n, h, d = shape`) is read where it was taken (`Launches._held_shapes`), and a dimension at
a variable place (`x.shape[dim]`) at each place its index takes (`Launches._indices`).

A parameter of the launching function is what the module's own calls of it pass, or where it has none, the calls
in the project's other modules that import it (`Launches._parameter`, `kgate.collect.pycallers`); a call through a
local name that picks the function (`attend = decode if short else prefill`) counts, and a method's parameter is what
its own class passes it (`self._attend(x, bsz)`), a static or class method's what the calls through its class pass
(`Op.run(x, bsz)`).
"""

from __future__ import annotations

import ast
import re
from typing import TYPE_CHECKING

from kgate.collect import pyparts, pysparse
from kgate.collect import pysource as py
from kgate.collect.pybatch import Batches, same_shape
from kgate.collect.pycallers import split, within
from kgate.collect.pypicks import chosen_names, picking_lines
from kgate.collect.pyscopes import (
    Scope,
    asserted_equal,
    bounded_above,
    launch_lines,
    launched_name,
    passed_for,
    scopes,
    top_definitions,
    unpacked,
)
from kgate.collect.pyswitches import switched
from kgate.collect.pyvalues import (
    BOUNDED,
    BUCKETING_FUNCTIONS,
    BUCKETING_PARTS,
    CHANNEL_PARTS,
    COARSE_DIVISOR,
    CONFIG,
    DEVICE,
    DIVIDERS,
    FEW_VALUES,
    MODEL,
    NOTHING,
    OWNER,
    RUNTIME,
    SAME,
    UNKNOWN,
    Names,
    Verdict,
    Why,
    best,
    constant_index,
    dimension,
    integer,
    is_weight,
    shape_of,
    worst,
)
from kgate.collect.source import SourceFile

if TYPE_CHECKING:
    from kgate.collect.pyproject import Modules

__all__ = ["BOUNDED", "MODEL", "RUNTIME", "UNKNOWN", "Launches", "Names", "Verdict", "worst"]


_DEPTH = 48  # expressions, assignments and calls followed for one value (a cycle ends sooner: `seen`)
# Divisors being read now (`_divided`), in this module's reading or any other's: only there does a model dimension
# tell apart from an unplaced value whether a value follows the token count. A reading is one nested evaluation.
_DIVISORS = [0]


class Launches(Batches):
    """The launch sites of some kernels of one module, and what their arguments do."""

    def __init__(self, source: SourceFile, info: py.ParsedModule, launched: set[str], kernels: set[str],
                 names: Names, bucketing: frozenset[str], project: Modules | None = None,
                 runtime_only: bool = False) -> None:
        self.source = source
        self.info = info
        self.names = names
        self.bucketing = bucketing
        # Whether the reader asks only which values follow the token count (RUNTIME or not): a tensor whose sizes the
        # model fixes is then looked for only where it decides that (`_moot`).
        self.runtime_only = runtime_only
        self.project = project  # the project's other modules: launch sites and calls there (None: this one only)
        self.beyond = True  # whether the calls in the project's other modules are read now
        self.hops = 0  # modules away from the one under lint (`kgate.collect.pycallers`)
        self._blocks: dict[str, pysparse.Block] = {}
        self._helpers: dict[str, py.Function | None] = {}
        self.named = ":=" in source.text  # whether an assignment expression may bind a name (`Scope.named`)
        # The lines that launch one of the kernels (`k[`, `k.run(`), 0-based: only they are parsed and walked.
        # Local names that pick a kernel (`fn = naive_kernel`, `fn = a if small else b`, `fn = {0: a, 1: b}[mode]`):
        # their launches are its (`kgate.collect.pypicks`).
        self.pickers = set(picking_lines(source.text, launched))
        self.marked = launch_lines(source.text, launched | self.pickers)
        if info.whole:
            self.tree = info.tree
        else:
            self.tree = self._excerpt(kernels)
        self.sites: dict[str, list[tuple[ast.Call, Scope]]] = {}
        self.definitions: dict[str, py.Function] = {}
        self._calls: dict[str, list[tuple[ast.Call, Scope]]] = source.derived.setdefault("callers", {})
        self._collect(launched)

    def _excerpt(self, kernels: set[str]) -> ast.Module:
        from kgate.collect.source import UnreadableSource

        lines = self.source.lines
        blocks = split(self.source)
        if blocks is None:
            return self.source.tree
        self._blocks = pysparse.definitions(lines, blocks)
        needles = self.source.derived.get("needles") or ()
        if all(any(needle in lines[line] for needle in needles) for line in self.marked) and all(
                any(needle in line for line in lines[block[0]:block[1]] for needle in needles)
                for block in (self._blocks.get(k) for k in kernels) if block is not None):
            return self.info.tree  # what launches, and the kernels, mention what the module was read for: all in it
        launchers = pysparse.containing(blocks, self.marked)
        headers = [self._blocks[k] for k in kernels if k in self._blocks and self._blocks[k] not in launchers]
        try:
            return pyparts.of(self.source).parse(launchers, headers, self.source.rel)
        except UnreadableSource:
            return self.source.tree

    def _collect(self, launched: set[str]) -> None:
        # The module's own statements are not read: the excerpt holds none of them (module constants come from
        # the shared tree), and a launch at module level runs once, at import.
        for fn in top_definitions(self.tree):
            self.definitions.setdefault(fn.name, fn)
        for scope in scopes(self.tree, self.marked, self.named):
            for stmt in scope.own:
                if isinstance(stmt, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)) or \
                        not self._launches_within(stmt):
                    continue
                for node in py.expressions(stmt):
                    name = launched_name(node)
                    if name is None:
                        continue
                    for kernel in [name] if name in launched else \
                            _picked(name, scope, launched, self.info.constants) if name in self.pickers else []:
                        self.sites.setdefault(kernel, []).append((node, scope))  # type: ignore[arg-type]

    def _launches_within(self, stmt: ast.stmt) -> bool:
        return within(self.marked, stmt)

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
            expr = passed_for(call, param, position)
            if expr is None:
                expr, scope = self._spread(call, param, scope)
            if expr is None:
                passes_all = any(isinstance(a, ast.Starred) for a in call.args) or any(
                    k.arg is None for k in call.keywords)
                out.append((None, Verdict(UNKNOWN) if passes_all or not default else NOTHING))
            else:
                out.append((expr, self._first_value(expr, scope)))
        return out

    def _first_value(self, expr: ast.expr, scope: Scope) -> Verdict:
        """What a launch passes, read in this module first: the project's other modules are read only where that
        leaves it unplaced or a token count (what their calls pass may place it, or fix the tensor it is a dimension
        of), since their calls can do no more than that."""
        self.beyond = False
        try:
            verdict = self.value(expr, scope, 0, set())
        finally:
            self.beyond = True
        if verdict.cls in (UNKNOWN, RUNTIME) and self.project is not None:
            verdict = self.value(expr, scope, 0, set())
        return verdict

    def _spread(self, call: ast.Call, param: str, scope: Scope) -> tuple[ast.expr | None, Scope]:
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

    def value(self, expr: ast.expr, scope: Scope, depth: int, seen: set[tuple[int, str]]) -> Verdict:
        if depth > _DEPTH:
            return Verdict(UNKNOWN)
        depth += 1
        while isinstance(expr, ast.NamedExpr):  # `(n := x.shape[0])` is its value (the binding: kgate.collect.pyscopes)
            expr = expr.value
        if isinstance(expr, ast.Constant):
            return NOTHING
        if isinstance(expr, (ast.Compare, ast.BoolOp)) or (isinstance(expr, ast.UnaryOp)
                                                            and isinstance(expr.op, ast.Not)):
            return NOTHING
        if isinstance(expr, ast.UnaryOp):
            return self.value(expr.operand, scope, depth, seen)
        if isinstance(expr, ast.IfExp):
            # `pages if debug else 0` with `debug` read from the environment: the branch a process that sets
            # nothing takes (a debug bound, constant in production).
            chosen = switched(expr.test, lambda name: self._held(name, scope), self.info.imports)
            if chosen is not None:
                return self.value(expr.body if chosen else expr.orelse, scope, depth, seen)
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
            return self._attribute(expr, scope, depth, seen)
        return Verdict(UNKNOWN)

    def _name(self, name: str, scope: Scope, depth: int, seen: set[tuple[int, str]]) -> Verdict:
        here: Scope | None = scope
        while here is not None:
            if name in here.bound:
                arg, caller = here.bound[name]
                return self.value(arg, caller, depth, seen)
            bindings = here.env.get(name)
            if bindings:
                mark = (id(here), name)
                if mark in seen:
                    return NOTHING  # `T = T + 1` and the like: the other bindings decide
                seen = seen | {mark}
                verdicts = [(self._binding(name, value, position, count, here, depth, seen), value)
                            for value, position, count in bindings]
                best_pair = max(range(len(verdicts)), key=lambda i: verdicts[i][0].cls)
                verdict, value = verdicts[best_pair]
                if value is not None and bindings[best_pair][1] is None and verdict.cls != UNKNOWN:
                    verdict = Verdict(verdict.cls, Why(value, f"{name} = "))  # the assignment, as written
                return self._asserted(name, here, verdict, depth, seen)
            if name in here.params:
                return self._parameter(here, name, depth, seen)
            here = here.parent
        if name in self.info.constants:
            return NOTHING
        return Verdict(self.names.of(name), name)

    def _held(self, name: str, scope: Scope) -> ast.expr | None:
        """The one expression a name holds where `scope` reads it: its only assignment in the nearest function that
        assigns it, or a module constant; None where it has several, is a parameter or is unpacked."""
        here: Scope | None = scope
        while here is not None:
            if name in here.bound or name in here.params:
                return None
            bindings = here.env.get(name)
            if bindings:
                return bindings[0][0] if len(bindings) == 1 and bindings[0][1] is None else None
            here = here.parent
        return self.info.constants.get(name)

    def _asserted(self, name: str, scope: Scope, verdict: Verdict, depth: int, seen: set[tuple[int, str]]) -> Verdict:
        """A run-time or unplaced size the function asserts equal to a model dimension or a bounded value is that:
        `dim, seqlen = x.shape` then `assert (dim, width) == weight.shape` (x laid out channels first)."""
        if verdict.cls not in (UNKNOWN, RUNTIME):
            return verdict
        if any((most := integer(bound, self.info.constants)) is not None and most <= FEW_VALUES
               for bound in bounded_above(scope, name)):
            return NOTHING  # `if q_len > 16: raise ...`: a few values, whatever the batch
        said = [self.value(other, scope, depth, seen) for other in asserted_equal(scope, name)]
        return min([verdict, *said], key=lambda v: v.cls)

    def _parameter(self, scope: Scope, name: str, depth: int, seen: set[tuple[int, str]]) -> Verdict:
        """A parameter of the launching function: what the module's own calls of the function pass for it (the
        worst), else what its name says."""
        mark = (id(scope.node), name)
        passed = self._passed_by_callers(scope, name) if mark not in seen else []
        if passed:
            verdict = worst([reader.value(arg, caller, depth, seen | {mark}) for arg, caller, reader in passed])
            if verdict.cls != UNKNOWN:
                return verdict
        return Verdict(self.names.of(name), name)

    def _binding(self, name: str, value: ast.expr | None, position: int | None, count: int, scope: Scope,
                 depth: int, seen: set[tuple[int, str]]) -> Verdict:
        if value is None:
            return Verdict(self.names.of(name), name)
        if position is None:
            if _first_dimension(value) and self.names.hint(name) == MODEL:
                return Verdict(MODEL, Why(value, f"{name} = "))  # `num_experts = counts.shape[0]`: named so
            found = self.value(value, scope, depth, seen)
            if found.cls == UNKNOWN and _middle_dimension(value) and _letter_named(name):
                return Verdict(RUNTIME, Why(value, f"{name} = "))  # `true_B = x.shape[2]`: named so
            return found
        if isinstance(value, ast.Call) and isinstance(value.func, ast.Name) and (
                helper := self.helper(value.func.id)) is not None:
            # `y, N, T = fwd(x)`: the item each `return` of the helper gives at that place
            returned = self._returns(helper, value, scope, depth, seen, (position, count))
            return returned if returned.cls != UNKNOWN else Verdict(self.names.of(name), name)
        if shape_of(value) is not None:
            return self._unpacked(name, value, position, count, scope, (value, scope, self), depth, seen)
        held = self._held_shapes(value, scope, depth, seen)
        if not held:
            return Verdict(self.names.of(name), name)
        # `b, n, h, d = shape`, the shape a caller passed or an autograd function's `forward` saved: its names are
        # read here, its tensor where the shape was taken.
        return worst([self._unpacked(name, value, position, count, scope, found, depth, seen) for found in held])

    def _held_shapes(self, value: ast.expr, scope: Scope, depth: int,
                     seen: set[tuple[int, str]]) -> list[tuple[ast.expr, Scope, Launches]]:
        """The whole shapes a name holds, with the scope that takes each and the reading of its module: bound once to
        one (`shape = x.shape`, `shape = ctx.shape`), or a parameter every call of the function passes one for (read
        there in turn); empty where any of them holds something else."""
        if depth > _DEPTH or not isinstance(value, ast.Name):
            return []
        bound = _bound_shape(value, scope)
        if bound is not None:
            return [(bound, scope, self)]
        here: Scope | None = scope
        while here is not None and value.id not in here.params:
            if value.id in here.env or value.id in here.bound:
                return []
            here = here.parent
        if here is None or (mark := (id(here.node), "shape " + value.id)) in seen:
            return []
        out = []
        for arg, caller, reader in self._passed_by_callers(here, value.id):
            found = [(arg, caller, reader)] if shape_of(arg) is not None else \
                reader._held_shapes(arg, caller, depth + 1, seen | {mark})
            if not found:
                return []
            out += found
        return out

    def _unpacked(self, name: str, value: ast.expr, position: int, count: int, scope: Scope,
                  held: tuple[ast.expr, Scope, Launches], depth: int, seen: set[tuple[int, str]]) -> Verdict:
        """The dimension a name unpacked from a shape holds (`value`: what the scope unpacks, its names read there;
        `held`: the shape itself, the scope that takes it and the reading of its module)."""
        shape_expr, owner, reader = held
        shape = shape_of(shape_expr)
        assert shape is not None
        tensor, first, last = shape
        at = position if first else position - count if last else None
        if at:
            made = reader.made(tensor, owner, depth, seen, at)
            if made is not None:  # `rows, cols = logits.shape`, the caller making `torch.empty((rows, n_keys))`
                return Verdict(made.cls, Why(value, after=f"[{position}]"))
        sequence = first and (self._sequence(name, value, position, count, scope, last)
                              or last and self._spatial(name, value, position, scope))
        if self._moot(position == 0 and first or sequence or block_table(tensor)) and self.names.of(name) == UNKNOWN:
            return Verdict(UNKNOWN, name)  # a model dimension or an unplaced one: no token count either way
        if reader.fixed(tensor, owner, depth, seen):
            return Verdict(MODEL, Why(value))
        if sequence:
            return Verdict(RUNTIME, Why(value, after=f"[{position}]"))
        if position == 0 and first:
            # `n_heads, n_rows, d = q.shape`: a head-major layout, named so (or `H, R, d`: the heads' usual letter)
            if self.names.hint(name) == MODEL or name == "H" and count >= 3:
                return Verdict(MODEL, Why(value, after="[0]"))
            return reader._first(tensor, Why(value, after="[0]"), owner, depth, seen)
        if last and (position == -1 or position == count - 1):
            if position == 1 and count == 2 and first and block_table(tensor):
                return Verdict(RUNTIME, Why(value, after="[1]"))  # `_, blocks = block_table.shape`: the longest
            return Verdict(MODEL, Why(value, after="[-1]"))
        return Verdict(self.names.of(name), name)

    def _sequence(self, name: str, value: ast.expr, position: int, count: int, scope: Scope,
                  whole: bool = True) -> bool:
        """Whether `name` is the sequence length of an attention tensor unpacked into four names: `B, H, N, D =
        x.shape` or `B, N, H, D = x.shape`, a middle name beside the heads (a name the words place as a model
        dimension, or `H`) before the head dimension (likewise, or `D`), itself no model dimension by its words; or a
        middle name whose own words say a token count (`seqlen` of `bsz, seqlen, _ = x.shape`). `whole`: whether the
        names reach the shape's last dimension; a leading slice (`B, T = x.shape[:2]`) ends before it, so its last
        name is a middle dimension too, the length where the batch is first (`n` of `b, n = x.shape[:2]`)."""
        if 0 < position < count - (1 if whole else 0) and (self.names.hint(name) == RUNTIME or name in _MIDDLE_LETTERS):
            return True
        if not whole:
            return count == 2 and position == 1 and _between_batch_and_model(_unpacked_names(value, scope), name,
                                                                              more=True)
        if count == 3 and position == 1:
            return _between_batch_and_model(_unpacked_names(value, scope), name)
        if count != 4 or position not in (1, 2):
            return False
        names = _unpacked_names(value, scope)
        heads, head_dim = names.get(3 - position), names.get(3)
        if heads is None or head_dim is None or self.names.hint(name) == MODEL or name.upper() in ("H", "D"):
            return False
        if any(word.endswith(("head", "heads")) for word in _words(heads)):
            return True  # `num_heads` beside it: the heads by their words, whatever the last name says
        if heads.upper() != "H" and self.names.hint(heads) != MODEL:
            return False
        if name.upper() == "C" or _words(name) & CHANNEL_PARTS:
            return False  # `C` of `N, C, H, W`: the channels of an image, not a length
        # The last name is the tensor's last dimension, a width per item whatever its letter (`f` of `b, n, h, f`,
        # the features), unless it names a run-time size itself.
        return self.names.hint(head_dim) != RUNTIME and head_dim.upper() not in _MIDDLE_LETTERS

    def _spatial(self, name: str, value: ast.expr, position: int, scope: Scope) -> bool:
        """Whether `name` is a spatial extent (or the length) of a tensor laid out channels first, unpacked into
        three names or more: after a second name whose words say channels or features (or `C`), the names neither
        the words nor a letter such as `D` place as a model dimension (`in_height` of `batch, in_feat_dim, in_height,
        in_width = x.shape`, `L` of `N, C, L`, `H` and `W` of `N, C, H, W`; not `D` of `B, C, L, D`)."""
        if position < 2:
            return False
        channels = _unpacked_names(value, scope).get(1)
        if channels is None or not (channels == "C" or _words(channels) & CHANNEL_PARTS):
            return False
        return _WORDS_ONLY.hint(name) != MODEL and name.upper() not in _MODEL_LETTERS

    def _binop(self, expr: ast.BinOp, scope: Scope, depth: int, seen: set[tuple[int, str]]) -> Verdict:
        left = self.value(expr.left, scope, depth, seen)
        if isinstance(expr.op, (ast.FloorDiv, ast.Div, ast.RShift)):
            return self._divided(left, expr.right, scope, depth, seen, shift=isinstance(expr.op, ast.RShift))
        right = self.value(expr.right, scope, depth, seen)
        if isinstance(expr.op, ast.Mod) and right.cls == BOUNDED:
            return NOTHING
        return worst([left, right])

    def _divided(self, left: Verdict, divisor: ast.expr, scope: Scope, depth: int, seen: set[tuple[int, str]],
                 shift: bool = False) -> Verdict:
        _DIVISORS[0] += 1
        try:
            right = self.value(divisor, scope, depth, seen)
        finally:
            _DIVISORS[0] -= 1
        if right.cls == RUNTIME or right.cls == UNKNOWN and (left.cls != RUNTIME or self._may_count_tokens(divisor)):
            return Verdict(UNKNOWN)  # a ratio of two run-time sizes may be anything (numel() // (B * T) is D)
        if left.cls == RUNTIME:
            # Divided by what does not grow with it (`sm_count`, a parameter that says no more, a model dimension):
            # it still grows with the token count, a constant of at least COARSE_DIVISOR aside.
            amount = integer(divisor, self.info.constants)
            if amount is not None and (1 << amount if shift and amount < 64 else amount) >= COARSE_DIVISOR:
                return NOTHING
            return left
        return worst([left, right])

    def _may_count_tokens(self, divisor: ast.expr) -> bool:
        """Whether a divisor kgate cannot place may be a run-time size itself: a name (or attribute) whose words
        say so (`num_tokens`, `batch`), a middle dimension of a tensor, or a product holding one."""
        if isinstance(divisor, ast.BinOp):
            return self._may_count_tokens(divisor.left) or self._may_count_tokens(divisor.right)
        if isinstance(divisor, (ast.Name, ast.Attribute)):
            return self.names.hint(divisor.id if isinstance(divisor, ast.Name) else divisor.attr) == RUNTIME
        return isinstance(divisor, ast.Subscript) and shape_of(divisor.value) is not None

    def _call(self, call: ast.Call, scope: Scope, depth: int, seen: set[tuple[int, str]]) -> Verdict:
        func = call.func
        written = py.qualified(func, self.info.imports) or py.dotted(func) or (
            func.attr if isinstance(func, ast.Attribute) else "")
        last = written.rsplit(".", 1)[-1]
        if last in BUCKETING_FUNCTIONS or written in self.bucketing or last in self.bucketing or any(
                part in last.lower() for part in BUCKETING_PARTS) or DEVICE.search(last):
            return NOTHING
        args = [a for a in call.args if not isinstance(a, ast.Starred)]
        if isinstance(func, ast.Attribute) and func.attr in ("max", "amax") and not call.args and not call.keywords \
                and self._holds(func.value, scope, seen, "_lengths"):
            return Verdict(RUNTIME, Why(call))  # `torch.diff(cu_seqlens).max()`: the longest sequence
        if last == "min" and args:
            return best([self.value(a, scope, depth, seen) for a in args])
        if last == "max" and args:
            return worst([self.value(a, scope, depth, seen) for a in args])
        if last in SAME and len(args) == 1:
            return self.value(args[0], scope, depth, seen)
        if last in DIVIDERS and len(args) == 2:
            return self._divided(self.value(args[0], scope, depth, seen), args[1], scope, depth, seen)
        if isinstance(func, ast.Attribute) and func.attr == "item" and not args:
            return self.value(func.value, scope, depth, seen)  # `n.item()`: the number a one-element tensor holds
        if isinstance(func, ast.Attribute) and func.attr == "stride" and len(args) == 1:
            return self._stride(func.value, integer(args[0], {}), Why(call), scope, depth, seen)
        if isinstance(func, ast.Attribute) and func.attr in ("size", "numel") or last in ("len", "prod"):
            return self._size(call, last, Why(call), scope, depth, seen)
        if isinstance(func, ast.Name) and depth < _DEPTH // 2:
            helper = self.helper(func.id)
            if helper is not None:
                return self._returns(helper, call, scope, depth, seen)
        return Verdict(UNKNOWN)

    def _size(self, call: ast.Call, last: str, why: Why, scope: Scope, depth: int,
              seen: set[tuple[int, str]]) -> Verdict:
        func = call.func
        if last in ("len", "prod"):
            target = call.args[0] if call.args else None
            if last == "prod":
                shape = _multiplied_shape(target, scope) if target is not None else None
                start = next((k.value for k in call.keywords if k.arg == "start_dim"), None)
                if shape is not None and start is not None and integer(start, {}) != 0:
                    shape = (shape[0], False, shape[2])  # `prod(x.shape, start_dim=2)`: the sizes after the first two
                if shape is not None and self.fixed(shape[0], scope, depth, seen):
                    return Verdict(MODEL, why)
                return Verdict(RUNTIME, why) if shape is not None and shape[1] else Verdict(UNKNOWN)
            if target is not None and self.fixed(target, scope, depth, seen):
                return Verdict(MODEL, why)
            flat = _flattened(target, scope) if target is not None else None
            if flat is not None:  # `len(x.flatten())`: every element of x, as `x.numel()`
                return Verdict(MODEL, why) if self.fixed(flat, scope, depth, seen) else Verdict(RUNTIME, why)
            name = py.dotted(target) if target is not None else None  # len(cu_seqlens), not len(layers)
            return Verdict(RUNTIME, why) if name and self.names.of(name.rsplit(".", 1)[-1]) == RUNTIME \
                else Verdict(UNKNOWN)
        assert isinstance(func, ast.Attribute)
        if self.fixed(func.value, scope, depth, seen):
            return Verdict(MODEL, why)
        if func.attr == "numel":
            # `pool[0].numel()`: one row, the dimensions after the first, which the reading cannot place.
            if _row(func.value):
                return Verdict(UNKNOWN)
            # A tensor made with its sizes written out (`torch.empty((in_features, out_features))`): their product.
            made = self.made(func.value, scope, depth, seen, at=slice(None))
            return Verdict(made.cls, why) if made is not None else Verdict(RUNTIME, why)
        if not call.args and not call.keywords:
            return Verdict(UNKNOWN)  # x.size(): a shape, read where it is unpacked
        given = call.args[0] if call.args else call.keywords[0].value
        index = integer(given, {})
        if index is None and isinstance(given, ast.Name) and (indices := self._indices(given, scope, seen)):
            # `x.size(dim)`: the dimension at each place `dim` is given
            return worst([self._size(ast.copy_location(ast.Call(func=func, args=[ast.Constant(i)], keywords=[]), call),
                                     last, why, scope, depth, seen) for i in indices])
        made = self.made(func.value, scope, depth, seen, index) if index else None
        if made is not None:  # `x.size(1)` of `x = torch.empty((rows, n_keys))`: the size it was made with
            return Verdict(made.cls, why)
        if (index == 1 or index == -1 and not _beyond_two_dims(func.value, scope)) and block_table(func.value):
            return Verdict(RUNTIME, why)  # a block table's width: the blocks of the batch's longest sequence
        return self._first(func.value, why, scope, depth, seen) if index == 0 else dimension(index, why)

    def _subscript(self, expr: ast.Subscript, scope: Scope, depth: int, seen: set[tuple[int, str]]) -> Verdict:
        strides = expr.value
        if (isinstance(strides, ast.Call) and isinstance(strides.func, ast.Attribute) and strides.func.attr == "stride"
                and not strides.args and not strides.keywords):
            return self._stride(strides.func.value, integer(expr.slice, {}), Why(expr), scope, depth, seen)
        held_strides = _bound_strides(strides, scope)
        if held_strides is not None:  # `q_stride = q.stride()`, then `q_stride[0]`
            return self._stride(held_strides, integer(expr.slice, {}), Why(expr), scope, depth, seen)
        shape = shape_of(expr.value)
        if shape is not None and integer(expr.slice, {}) is None and isinstance(expr.slice, ast.Name):
            # `x.shape[dim]`: the dimension at each place `dim` is given
            indices = self._indices(expr.slice, scope, seen)
            if indices:
                return worst([self._subscript(ast.copy_location(ast.Subscript(
                    value=expr.value, slice=ast.Constant(i), ctx=ast.Load()), expr), scope, depth, seen)
                    for i in indices])
        if shape is not None:
            tensor, first, last = shape
            index = integer(expr.slice, {})
            made = self.made(tensor, scope, depth, seen, index) if index and (first or index < 0 and last) else None
            if made is not None:  # `x.shape[1]` of `x = torch.empty((rows, n_keys))`: the size it was made with
                return Verdict(made.cls, Why(expr))
            if self._moot(index == 0 and first or block_table(tensor)):
                return Verdict(UNKNOWN)  # a model dimension or an unplaced one: no token count either way
            if self.fixed(tensor, scope, depth, seen):
                return Verdict(MODEL, Why(expr))
            if index is None:
                return Verdict(UNKNOWN)
            if index == 0 and first:
                return self._first(tensor, Why(expr), scope, depth, seen)
            if (index == 1 and first or index == -1 and last and not _beyond_two_dims(tensor, scope)) \
                    and block_table(tensor):
                return Verdict(RUNTIME, Why(expr))  # a block table's width: the blocks of the longest sequence
            if index == -1 and last:
                return dimension(index, Why(expr))
            return Verdict(UNKNOWN)
        if isinstance(expr.value, ast.Name) and isinstance(self.info.constants.get(expr.value.id),
                                                           (ast.Dict, ast.List, ast.Tuple)):
            return NOTHING  # an entry of a constant table
        if integer(expr.slice, {}) == -1 and self._holds(expr.value, scope, seen, "_offsets"):
            return Verdict(RUNTIME, Why(expr))  # `cu_seqlens[-1]`: the last offset, the total token count
        held = _bound_shape(expr.value, scope)
        if held is not None:  # `s = x.shape` (or `tuple(x.shape)`), then `s[0]`: an item of the shape
            return self._subscript(ast.copy_location(ast.Subscript(value=held, slice=expr.slice, ctx=ast.Load()),
                                                     expr), scope, depth, seen)
        return Verdict(UNKNOWN)

    def _indices(self, expr: ast.expr, scope: Scope, seen: set[tuple[int, str]]) -> list[int]:
        """The places a dimension's index takes (`dim` of `x.shape[dim]`): each integer it is bound to, or that every
        call of the function passes for it where it is a parameter (read there in turn); a rebinding that counts a
        negative index from the end (`dim = len(x.shape) + dim`, `x.ndim + dim`) picks the same dimension. Empty
        where any of them is something else."""
        value = integer(expr, self.info.constants)
        if value is not None:
            return [value]
        if not isinstance(expr, ast.Name):
            return []
        here: Scope | None = scope
        while here is not None:
            if expr.id in here.bound:
                arg, caller = here.bound[expr.id]
                return self._indices(arg, caller, seen)
            bindings = here.env.get(expr.id, [])
            if bindings or expr.id in here.params:
                break
            here = here.parent
        if here is None or (mark := (id(here.node), "index " + expr.id)) in seen:
            return []
        seen = seen | {mark}
        out: list[int] = []
        for value_expr, position, _count in bindings:
            if value_expr is not None and position is None and _from_end(value_expr, expr.id):
                continue
            found = self._indices(value_expr, here, seen) if value_expr is not None and position is None else []
            if not found:
                return []
            out += found
        if expr.id in here.params:
            passed = self._passed_by_callers(here, expr.id)
            if not passed:
                return []
            for arg, caller, reader in passed:
                found = reader._indices(arg, caller, seen)
                if not found:
                    return []
                out += found
        return sorted(set(out))

    def _offsets(self, tensor: ast.expr, scope: Scope, seen: set[tuple[int, str]]) -> bool:
        """Whether a tensor holds sequence offsets the project accumulates: a cumulative sum (`lens.cumsum(0)`,
        `torch.cumsum(lens, 0)`), padded with a leading zero (`F.pad(..., (1, 0))`) or joined after one
        (`torch.cat([zero, ...])`), cast or not; not a sum of sizes the built model fixes (a buffer of the module,
        `self.split_sizes.cumsum(0)`, or a literal table, `torch.tensor([64, 128]).cumsum(0)`)."""
        while isinstance(tensor, ast.Call):
            func = tensor.func
            name = str(py.dotted(func) or getattr(func, "attr", "")).rsplit(".", 1)[-1]
            if name == "cumsum":
                summed = func.value if isinstance(func, ast.Attribute) and py.dotted(func.value) != "torch" \
                    else tensor.args[0] if tensor.args else None
                return summed is None or not (_literal_table(summed) or self.fixed(summed, scope, 0, seen))
            if (same := same_shape(tensor)) is not None:
                tensor = same
            elif isinstance(func, ast.Attribute) and func.attr in ("int", "long"):
                tensor = func.value
            elif name == "pad" and tensor.args:
                tensor = tensor.args[0]
            elif name in ("cat", "concat") and tensor.args and isinstance(tensor.args[0], (ast.List, ast.Tuple)) \
                    and tensor.args[0].elts:
                tensor = tensor.args[0].elts[-1]  # `torch.cat([zero, lens.cumsum(0)])`: what ends the offsets
            else:
                return False
        return self._holds(tensor, scope, seen, "_offsets") if isinstance(tensor, ast.Name) else False

    def _lengths(self, tensor: ast.expr, scope: Scope, seen: set[tuple[int, str]]) -> bool:
        """Whether a tensor holds the lengths between accumulated offsets (`_offsets`): `torch.diff(cu_seqlens)`,
        `cu_seqlens.diff()` or `cu_seqlens[1:] - cu_seqlens[:-1]`."""
        if isinstance(tensor, ast.Call):
            func = tensor.func
            if isinstance(func, ast.Attribute) and func.attr == "diff":
                inner = tensor.args[0] if py.dotted(func.value) == "torch" and tensor.args else func.value
                return self._holds(inner, scope, seen, "_offsets")
            return False
        if isinstance(tensor, ast.BinOp) and isinstance(tensor.op, ast.Sub):
            left, right = tensor.left, tensor.right
            return (isinstance(left, ast.Subscript) and isinstance(right, ast.Subscript)
                    and isinstance(left.slice, ast.Slice) and isinstance(right.slice, ast.Slice)
                    and py.dotted(left.value) is not None and py.dotted(left.value) == py.dotted(right.value)
                    and integer(left.slice.lower, {}) == 1 and integer(right.slice.upper, {}) == -1
                    and self._holds(left.value, scope, seen, "_offsets"))
        return self._holds(tensor, scope, seen, "_lengths") if isinstance(tensor, ast.Name) else False

    def _holds(self, tensor: ast.expr, scope: Scope, seen: set[tuple[int, str]], test: str) -> bool:
        """Whether `test` (`_offsets`, `_lengths`) holds of what a name holds: every expression the function binds it
        to, or, for a parameter, what every call of the function passes (read there in turn). Anything else is
        tested as it is."""
        if not isinstance(tensor, ast.Name):
            return bool(getattr(self, test)(tensor, scope, seen))
        here: Scope | None = scope
        while here is not None:
            if tensor.id in here.bound:
                arg, caller = here.bound[tensor.id]
                return self._holds(arg, caller, seen, test)
            bindings = here.env.get(tensor.id)
            mark = (id(here.node), f"{test} {tensor.id}")
            if (bindings or tensor.id in here.params) and mark in seen:
                return False
            if bindings:
                return all(value is not None and position is None
                           and getattr(self, test)(value, here, seen | {mark}) for value, position, _count in bindings)
            if tensor.id in here.params:
                passed = self._passed_by_callers(here, tensor.id)
                return bool(passed) and all(reader._holds(arg, caller, seen | {mark}, test)
                                            for arg, caller, reader in passed)
            here = here.parent
        return False

    def _attribute(self, expr: ast.Attribute, scope: Scope, depth: int, seen: set[tuple[int, str]]) -> Verdict:
        if expr.attr in ("ndim", "itemsize") or DEVICE.search(expr.attr):
            return NOTHING
        root = py.dotted(expr) or ""
        parts = root.split(".")
        if parts[0] in CONFIG or "config" in parts[:-1]:
            return Verdict(MODEL, root)
        saved = self.saved(expr, scope, depth, seen)
        if saved.cls != UNKNOWN:
            return saved
        if _longest(expr, scope):
            return Verdict(RUNTIME, Why(expr))
        return Verdict(self.names.of(expr.attr), expr.attr)

    def _first(self, tensor: ast.expr, why: Why, scope: Scope, depth: int, seen: set[tuple[int, str]]) -> Verdict:
        """The first dimension of a tensor: the batch or the token count, unless it is packed to one or made with a
        size of its own (`Batches`)."""
        if self.one(tensor, scope, depth, seen):
            return Verdict(BOUNDED, why)
        if self._rows_bounded(tensor, scope, seen):
            return Verdict(BOUNDED, why)
        made = self.made(tensor, scope, depth, seen)
        return Verdict(made.cls, why) if made is not None else Verdict(RUNTIME, why)

    def _rows_bounded(self, tensor: ast.expr, scope: Scope, seen: set[tuple[int, str]]) -> bool:
        """Whether the rows of a parameter of the launching function are bounded by every call of it: each passes a
        tensor whose first dimension the caller refuses above at most `FEW_VALUES` (`M = logits.shape[0]`, then `if
        M > 16: raise ...`, then `route_small(logits)`): a small-batch path takes a few values, whatever the batch.
        A tensor made like the parameter (`x = x.contiguous()`) has its rows."""
        while isinstance(tensor, ast.Call) and (same := same_shape(tensor)) is not None:
            tensor = same
        if not isinstance(tensor, ast.Name):
            return False
        here: Scope | None = scope
        while here is not None:
            if tensor.id in here.bound:
                return False  # a helper's parameter, read for one call: that call's argument decides
            if tensor.id in here.params:
                break
            bindings = here.env.get(tensor.id)
            if bindings and not all(isinstance(value, ast.Call) and position is None
                                    and isinstance(same := same_shape(value), ast.Name) and same.id == tensor.id
                                    for value, position, _count in bindings):
                return False
            here = here.parent
        if here is None:
            return False
        mark = (id(here.node), "rows " + tensor.id)
        if mark in seen:
            return False
        passed = self._passed_by_callers(here, tensor.id)
        return bool(passed) and all(reader._bounds_rows(arg, caller) for arg, caller, reader in passed)

    def _bounds_rows(self, tensor: ast.expr, scope: Scope) -> bool:
        """Whether a function refuses the first dimension of `tensor` above at most `FEW_VALUES`: a name it binds
        to it (`M = x.shape[0]`, `M, K = x.shape`) bounded so (`if M > 16: raise ...`, `assert M <= 16`)."""
        name = py.dotted(tensor)
        if name is None:
            return False
        for bound, bindings in scope.env.items():
            for value, position, _count in bindings:
                if value is None:
                    continue
                if position is None:
                    rows = _first_dimension(value) and (of := _dimension_of(value)) is not None and py.dotted(of) == name
                else:
                    shape = shape_of(value)
                    rows = position == 0 and shape is not None and shape[1] and py.dotted(shape[0]) == name
                if rows and any((most := integer(limit, self.info.constants)) is not None and most <= FEW_VALUES
                                for limit in bounded_above(scope, bound)):
                    return True
        return False

    # ---------------------------------------------------------------- tensors whose sizes the model fixes

    def _moot(self, runtime_unless_fixed: bool) -> bool:
        """Whether a size that is a model dimension if its tensor is fixed, and otherwise unplaced (or a model
        dimension too: `runtime_unless_fixed` False), need not be told apart: the reader asks only which values follow
        the token count, and the size is no divisor (`_divided`: only there can a model dimension and an unplaced
        value make a token count or not)."""
        return self.runtime_only and not runtime_unless_fixed and not _DIVISORS[0]

    def fixed(self, tensor: ast.expr, scope: Scope, depth: int, seen: set[tuple[int, str]]) -> bool:
        """Whether a tensor's sizes are fixed once the model is built, so that its dimensions are model
        dimensions: a weight, a bias or a scale by its name; an attribute of `self` (a parameter or a buffer of
        the module, a table allocated at start-up) or of an object reached from one (`cache.conv[0]` after `cache =
        self.pool.layer_cache(i)`); a tensor of the module's own (assigned once at its top level);
        `nn.Parameter(...)`; what a method of such a tensor returns given no run-time size (`w.t()`,
        `self.pool.view(-1)`); an entry of one at a constant index (`self.kv_cache[0]`, one pool of a start-up
        list; an index tensor would gather a run-time count of rows); either arm of a conditional choosing between
        such tensors; a local assigned only such tensors; a parameter of the launching function that every call
        of it in the module passes such a tensor."""
        if depth > _DEPTH:
            return False
        depth += 1
        if is_weight(tensor):
            return True
        if isinstance(tensor, ast.Attribute):  # of the module, or of an object reached from it (a pool's `.conv`)
            return (py.dotted(tensor) or "").split(".", 1)[0] in OWNER or self.fixed(tensor.value, scope, depth, seen)
        if isinstance(tensor, ast.Call):
            func = tensor.func
            if (py.dotted(func) or "").rsplit(".", 1)[-1] == "Parameter":
                return True
            if isinstance(func, ast.Name) and func.id == "getattr" and len(tensor.args) >= 2 \
                    and isinstance(tensor.args[1], ast.Constant):
                # `getattr(w13, "packed", None)`: an attribute of the object, as `w13.packed` (the default aside)
                return self.fixed(tensor.args[0], scope, depth, seen)
            method = _own_method(func, scope, self.source)
            if method is not None:  # `self._pool(layer_id)`: what the class's method returns
                return self._returns_fixed(method, tensor, scope, depth, seen, None)
            given = [a.value if isinstance(a, ast.Starred) else a for a in tensor.args]
            given += [k.value for k in tensor.keywords]
            return isinstance(func, ast.Attribute) and self.fixed(func.value, scope, depth, seen) and not any(
                self.value(a, scope, depth, seen).cls == RUNTIME for a in given)
        if isinstance(tensor, ast.Name):
            return self._fixed_name(tensor.id, scope, depth, seen)
        if isinstance(tensor, ast.IfExp):
            return self.fixed(tensor.body, scope, depth, seen) and self.fixed(tensor.orelse, scope, depth, seen)
        if isinstance(tensor, ast.Subscript):
            if self._held_dict(tensor.value, scope):
                return True  # `self.scratch[layer_id]`: one entry of a table of tensors the module keeps by key
            return constant_index(tensor.slice) and self.fixed(tensor.value, scope, depth, seen)
        return False

    def _fixed_binding(self, value: ast.expr, position: int | None, count: int, scope: Scope, depth: int,
                       seen: set[tuple[int, str]]) -> bool:
        """Whether what a name is bound to is fixed; an item unpacked from what a method of the class returns
        (`_, conv, ssm = self._layer_state(layer_id)`) is the item its `return`s give at that place."""
        if position is not None and isinstance(value, ast.Call):
            method = _own_method(value.func, scope, self.source)
            if method is not None:
                return self._returns_fixed(method, value, scope, depth, seen, (position, count))
        return self.fixed(value, scope, depth, seen)

    def _returns_fixed(self, method: tuple[py.Function, ast.ClassDef], call: ast.Call, scope: Scope, depth: int,
                       seen: set[tuple[int, str]], item: tuple[int, int] | None) -> bool:
        """Whether every `return` of a method of the class, called on the instance, gives a fixed tensor (with
        `item`, the item at that place of the tuples it returns): a method that hands out the module's pools."""
        fn, owner = method
        mark = (id(fn), f"returns {item}")
        if mark in seen:
            return False
        bound = _bound_arguments(call, py.parameters(fn)[1:], scope)
        inner = Scope(fn, Scope(owner, None, named=self.named), bound, named=self.named)
        values = [s.value for s in inner.own if isinstance(s, ast.Return)]
        if item is not None:
            values = [returned_item(v, *item) for v in values]
        return bool(values) and all(v is not None and self.fixed(v, inner, depth, seen | {mark}) for v in values)

    def _held_dict(self, table: ast.expr, scope: Scope) -> bool:
        """Whether `table` is an attribute of the instance that its class only ever sets to a dict (`self.scratch =
        {}`, or None before it is made) and fills by key: an entry of it is one of the tensors the module keeps."""
        owner = _class_of(scope)
        if not (isinstance(table, ast.Attribute) and isinstance(table.value, ast.Name) and table.value.id == "self"
                and owner is not None):
            return False
        whole = _whole_class(owner, self.source)
        dicts = False
        for node in ast.walk(whole):
            if not isinstance(node, (ast.Assign, ast.AnnAssign)) or node.value is None:
                continue
            targets = node.targets if isinstance(node, ast.Assign) else [node.target]
            if not any(isinstance(t, ast.Attribute) and t.attr == table.attr and isinstance(t.value, ast.Name)
                       and t.value.id == "self" for t in targets):
                continue
            value = node.value
            if isinstance(value, ast.Dict) or isinstance(value, ast.Call) and py.dotted(value.func) == "dict":
                dicts = True
            elif not (isinstance(value, ast.Constant) and value.value is None):
                return False
        return dicts

    def _fixed_name(self, name: str, scope: Scope, depth: int, seen: set[tuple[int, str]]) -> bool:
        here: Scope | None = scope
        while here is not None:
            if name in here.bound:
                arg, caller = here.bound[name]
                return self.fixed(arg, caller, depth, seen)
            bindings = here.env.get(name)
            mark = (id(here.node), "fixed " + name)
            if bindings and mark not in seen:
                # An entry of a tuple of such tensors unpacked (`conv_q, conv_k = self.kv_cache`) is one too; a name
                # unpacked from a shape is a size, not a tensor.
                return all(value is not None and shape_of(value) is None and self._fixed_binding(
                    value, position, count, here, depth, seen | {mark}) for value, position, count in bindings)
            if name in here.params:  # what the callers pass (`x = x.contiguous()`: what the caller passed for x)
                mark = (id(here.node), "passed " + name)
                passed = self._passed_by_callers(here, name) if mark not in seen else []
                return bool(passed) and all(reader.fixed(arg, caller, depth, seen | {mark})
                                            for arg, caller, reader in passed)
            if bindings:
                return True  # `state = state.transpose(-1, -2)` read again: the name's other bindings decide
            here = here.parent
        return name in self.info.constants

    def _stride(self, tensor: ast.expr, index: int | None, why: Why, scope: Scope, depth: int,
                seen: set[tuple[int, str]]) -> Verdict:
        """`x.stride(i)`: in a contiguous tensor, the product of the dimensions after `i`. It follows the token
        count only where one of those does (`x.stride(0)` of a [B, T, H] tensor is T * H; of a [T, H] one, H)."""
        if self.fixed(tensor, scope, depth, seen):
            return Verdict(MODEL, why)
        dims = unpacked(tensor, scope)
        if dims is None and index is not None and index != -1 and depth <= _DEPTH:
            followed = self._stride_of_source(tensor, index, why, scope, depth + 1, seen)
            peer = _query_of(tensor, scope) if followed is None else None
            if peer is not None:  # `k.stride(0)` beside a `q` whose layout is known: the same token layout
                followed = self._stride(peer, index, why, scope, depth + 1, seen)
                followed = followed if followed.cls != UNKNOWN else None
            if followed is not None:
                return followed
        if dims is None and index is not None and index >= 0:
            # `logits.stride(0)` of `logits = torch.empty((rows, n_keys))`: the product of the sizes after it
            made = self.made(tensor, scope, depth, seen, slice(index + 1, None))
            if made is not None:
                return Verdict(made.cls, why)
        if index is None or dims is None:
            return Verdict(MODEL, why) if index == -1 else Verdict(UNKNOWN)
        index = index + len(dims) if index < 0 else index
        if not 0 <= index < len(dims):
            return Verdict(UNKNOWN)
        later = dims[index + 1:]
        verdict = worst([self._name(name, scope, depth, seen) if name else Verdict(UNKNOWN) for name in later]) \
            if later else Verdict(MODEL)
        return Verdict(verdict.cls, why if verdict.cls != UNKNOWN else "")

    def _stride_of_source(self, tensor: ast.expr, index: int, why: Why, scope: Scope, depth: int,
                          seen: set[tuple[int, str]]) -> Verdict | None:
        """The stride of a tensor the launching function does not unpack, read where its shape is known: a tensor
        made like another (`o = torch.empty_like(q)`, `q.contiguous()`) has that one's strides, and a parameter has
        those of what the calls of the function pass (`num_heads, token_size, dim = q.size()` in the caller, then
        `q.stride(0)` in the launcher: the packed token count times the head size); None where nothing places it."""
        if isinstance(tensor, ast.Call):
            same = same_shape(tensor)
            return self._stride(same, index, why, scope, depth, seen) if same is not None else None
        if not isinstance(tensor, ast.Name):
            return None
        here: Scope | None = scope
        while here is not None:
            if tensor.id in here.bound:
                arg, caller = here.bound[tensor.id]
                return self._stride(arg, index, why, caller, depth, seen)
            bindings = here.env.get(tensor.id)
            mark = (id(here.node), "strides " + tensor.id)
            if mark in seen:
                return None
            if bindings:
                if len(bindings) != 1 or bindings[0][0] is None or bindings[0][1] is not None:
                    return None
                return self._stride(bindings[0][0], index, why, here, depth, seen | {mark})
            if tensor.id in here.params:
                passed = self._passed_by_callers(here, tensor.id)
                found = [reader._stride(arg, index, why, caller, depth, seen | {mark})
                         for arg, caller, reader in passed]
                placed = [v for v in found if v.cls != UNKNOWN]
                return worst(placed) if placed else None
            here = here.parent
        return None

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
        if found is None and self.project is not None and name not in self.info.constants:
            return self._imported_helper(name)
        return found if found is not None and not py.is_kernel(found, self.info.imports) else None

    def _imported_helper(self, name: str) -> py.Function | None:
        """A function of another module of the project that this one imports by name (`from .utils import
        next_multiple_of`), read as a helper of this one: what it returns, given what the call passes."""
        assert self.project is not None
        found = self.project.imported(self.source, {name}).get(name)
        if found is None:
            return None
        held = self.project.function(*found)
        if held is None:
            return None
        source, fn = held
        return fn if not py.is_kernel(fn, py.info(source).imports) else None

    def _returns(self, helper: py.Function, call: ast.Call, scope: Scope, depth: int,
                 seen: set[tuple[int, str]], item: tuple[int, int] | None = None) -> Verdict:
        """What a module helper returns for this call; with `item` (place, count), the item at that place of the
        tuples it returns, unpacked into that many names."""
        params = py.parameters(helper)
        bound = _bound_arguments(call, params, scope)
        inner = Scope(helper, None, bound, named=self.named)
        values = [s.value for s in inner.own if isinstance(s, ast.Return)]
        if item is not None:
            values = [returned_item(v, *item) for v in values]
        if not values or any(v is None for v in values):
            return Verdict(UNKNOWN)
        verdict = worst([self.value(v, inner, depth, seen) for v in values if v is not None])
        return Verdict(verdict.cls, Why(call) if verdict.cls != UNKNOWN else "")


# The letters that name the batch and the time steps wherever they sit in a shape (`B` of `NS, B, NH, DH`, `T` of
# `_, T, NGI, _, _`): a middle dimension so named is that run-time size, as a middle `seqlen` is.
_MIDDLE_LETTERS = frozenset({"B", "T"})
_WORDS_ONLY = Names(set(), set())  # what a name's words say, no configured letter (`H` after `C` is the height)
# The words that name the batch itself, not a count of tokens (`bs`, `bsz`, `batch_size`).
_BATCH_WORDS = frozenset({"batch", "bs", "bsz"})
# The letters that name a model dimension after a channels dimension too (`D` of `B, C, L, D`: a width per item).
_MODEL_LETTERS = frozenset({"D", "K", "V", "E", "G"})


def _words(name: str) -> set[str]:
    return {p.lower() for p in re.findall(r"[A-Z]+(?![a-z])|[A-Z]?[a-z]+", name)}


def _multiplied_shape(target: ast.expr, scope: Scope) -> tuple[ast.expr, bool, bool] | None:
    """The shape, or the slice of one, whose sizes a product multiplies (`prod(x.shape[:-1])`, through the tensor
    of sizes `torch.tensor(shape[:-1])` and a name bound to the shape, `shape = x.shape`): as `shape_of` gives it."""
    if isinstance(target, ast.Call) and (py.dotted(target.func) or "").rsplit(".", 1)[-1] in ("tensor", "as_tensor") \
            and len(target.args) == 1:
        target = target.args[0]  # `torch.tensor(sizes)`: the sizes, as a tensor
    found = shape_of(target)
    if found is not None:
        return found
    sliced = target.value if isinstance(target, ast.Subscript) and isinstance(target.slice, ast.Slice) else target
    held = _bound_shape(sliced, scope)
    if held is None:
        return None
    if sliced is target:
        return shape_of(held)
    assert isinstance(target, ast.Subscript)
    return shape_of(ast.copy_location(ast.Subscript(value=held, slice=target.slice, ctx=ast.Load()), target))


def _picked(name: str, scope: Scope, launched: set[str], constants: dict[str, ast.expr]) -> list[str]:
    """The kernels a local name is bound to where a scope launches it (`fn = naive_kernel` in one branch, `fn =
    loop_kernel` in another, `fn = a if small else b`, or any other choice `kgate.collect.pypicks.chosen` reads):
    each kernel named so, sorted; none where the name is a parameter or bound to nothing of the sort."""
    here: Scope | None = scope
    while here is not None:
        if name in here.params or name in here.bound:
            return []
        bindings = here.env.get(name)
        if bindings:
            found: set[str] = set()
            for value, position, _count in bindings:
                found.update(chosen_names(value, position, constants) & launched)
            return sorted(found)
        here = here.parent
    return []


def _literal_table(tensor: ast.expr) -> bool:
    """Whether a tensor is made from a literal list of numbers (`torch.tensor([64, 64, 128])`)."""
    if not (isinstance(tensor, ast.Call) and (py.dotted(tensor.func) or "").rsplit(".", 1)[-1] in ("tensor",
                                                                                                   "as_tensor")
            and tensor.args and isinstance(tensor.args[0], (ast.List, ast.Tuple))):
        return False
    return all(isinstance(item, ast.Constant) and isinstance(item.value, (int, float)) for item in tensor.args[0].elts)


def _from_end(value: ast.expr, name: str) -> bool:
    """Whether `value` counts the index `name` from the end of a shape: `len(x.shape) + dim`, `x.ndim + dim`,
    `x.dim() + dim` (how a negative dimension is made positive)."""
    if not (isinstance(value, ast.BinOp) and isinstance(value.op, ast.Add)):
        return False
    for same, rank in ((value.left, value.right), (value.right, value.left)):
        if not (isinstance(same, ast.Name) and same.id == name):
            continue
        if isinstance(rank, ast.Attribute) and rank.attr == "ndim":
            return True
        if isinstance(rank, ast.Call) and isinstance(rank.func, ast.Attribute) and rank.func.attr == "dim":
            return True
        if isinstance(rank, ast.Call) and isinstance(rank.func, ast.Name) and rank.func.id == "len" and rank.args:
            return shape_of(rank.args[0]) is not None
    return False


def _between_batch_and_model(names: dict[int, str], name: str, more: bool = False) -> bool:
    """Whether `name`, the middle of three names a shape is unpacked into, is the length of a (batch, length, model
    dimension) layout: the batch first (`b`, or a name whose words say the batch: tokens first, `total_ctx, n_layers,
    kv_dim`, lay out something per token in the middle), the heads or a width last (`h`, `d`, or a name whose words
    say a model dimension, or left unnamed: `_` of `b, n, _`, the tensor's last dimension, a width per item), and
    itself a letter that names no model dimension (`n` of `b, n, h = decay.shape`; not `c` of `b, c, d`, and not a
    word that says something else, `width` of `bsz, width, hidden`). `more`: the second of two names a leading slice
    is unpacked into (`b, n = x.shape[:2]`), the dimensions after it left unnamed."""
    first, last = names.get(0), names.get(1 if more else 2)
    if first is None or last is None or len(name) != 1:
        return False
    batch = first.upper() == "B" or bool(_words(first) & _BATCH_WORDS) or first.lower().endswith("batch")
    model = more or last.upper() in ("H", "D") or _WORDS_ONLY.hint(last) == MODEL or not last.strip("_")
    return batch and model and name.upper() not in _MODEL_LETTERS | {"C", "H"}


def _unpacked_names(value: ast.expr, scope: Scope) -> dict[int, str]:
    """The names a scope unpacks `value` into, by their place (`B, H, N, D = q.shape`: {0: "B", 1: "H", ...})."""
    return {at: other for other, bindings in scope.env.items() for bound, at, _count in bindings
            if bound is value and at is not None}


# What the longest of a batch's sequences is counted in (`max_q`, `max_seqlen_k`, `max_query_len`).
_LENGTH_WORDS = Names.RUNTIME_PARTS | {"q", "k", "kv", "query", "key", "len", "length", "context"}


def _longest(expr: ast.Attribute, scope: Scope) -> bool:
    """Whether `expr` is the longest sequence of a batch, kept by an object that describes the batch: `seqlen.max_q`
    where the function also reads the batch's sequence offsets from the same object (`seqlen.cu_seqlen_q`): a
    metadata object made for each step, not a setting of the model."""
    holder = expr.value
    words = re.findall(r"[A-Z]+(?![a-z])|[A-Z]?[a-z]+", expr.attr)
    if not isinstance(holder, ast.Name) or holder.id in OWNER or holder.id in CONFIG or len(words) < 2 \
            or words[0].lower() != "max" or not {w.lower() for w in words[1:]} & _LENGTH_WORDS:
        return False
    return any(isinstance(node, ast.Attribute) and isinstance(node.value, ast.Name) and node.value.id == holder.id
               and node.attr.lower().startswith("cu_seqlen") for node in ast.walk(scope.node))


def _bound_arguments(call: ast.Call, params: list[ast.arg], scope: Scope) -> dict[str, tuple[ast.expr, Scope]]:
    """A call's arguments by the parameter each binds (positional up to the first `*args`, then keywords), each with
    the caller's scope."""
    bound: dict[str, tuple[ast.expr, Scope]] = {}
    for arg, param in zip(call.args, params):
        if isinstance(arg, ast.Starred):
            break
        bound[param.arg] = (arg, scope)
    for keyword in call.keywords:
        if keyword.arg is not None:
            bound[keyword.arg] = (keyword.value, scope)
    return bound


def _beyond_two_dims(tensor: ast.expr, scope: Scope) -> bool:
    """Whether the function reads a third dimension of `tensor` (`t.stride(2)`, `t.size(2)`, `t.shape[2]`): then its
    last dimension is not a block table's width (NSA's `kv_block_indices` of `(batch, heads, tokens, selected)`: its
    last dimension is how many blocks each query selects, a setting of the model)."""
    name = py.dotted(tensor)
    if name is None:
        return False
    for node in ast.walk(scope.node):
        index: ast.expr | None = None
        if isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute) and node.func.attr in ("stride", "size") \
                and node.args and py.dotted(node.func.value) == name:
            index = node.args[0]
        elif isinstance(node, ast.Subscript) and isinstance(node.value, ast.Attribute) and node.value.attr == "shape" \
                and py.dotted(node.value.value) == name:
            index = node.slice
        if index is not None and isinstance(index, ast.Constant) and type(index.value) is int and index.value >= 2:
            return True
    return False


def block_table(tensor: ast.expr) -> bool:
    """Whether a tensor is a block table by its name (`block_offsets`, `block_tables`, `page_table`): one row of
    block (or page) numbers per sequence, as wide as the longest sequence of the batch has blocks."""
    name = py.dotted(tensor)
    return name is not None and bool(_BLOCK_TABLE.fullmatch(name.rsplit(".", 1)[-1]))


_BLOCK_TABLE = re.compile(r"(?i)(kv_)?(block|page)s?_?(tables?|offsets|ids|indices)")


def _assigned_once(name: ast.expr, scope: Scope) -> ast.expr | None:
    """What a name holds where the nearest scope that binds it assigns it once, whole (not unpacked); None
    otherwise (bound several times, unpacked, a parameter)."""
    if not isinstance(name, ast.Name):
        return None
    here: Scope | None = scope
    while here is not None:
        bindings = here.env.get(name.id)
        if bindings is not None:
            if len(bindings) != 1:
                return None
            value, position, _count = bindings[0]
            return value if position is None else None
        if name.id in here.params:
            return None
        here = here.parent
    return None


def _bound_shape(name: ast.expr, scope: Scope) -> ast.expr | None:
    """The shape a name holds where the nearest scope that binds it binds it once, to a whole shape (`s =
    x.shape`, `s = tuple(x.size())`); None otherwise."""
    value = _assigned_once(name, scope)
    return value if value is not None and shape_of(value) is not None else None


# The tensors of one attention call that are laid out as its query: the keys, the values, the output and the
# gradients of each (varlen kernels take them all head-major over the same packed tokens).
_QUERY_PEERS = frozenset({"k", "v", "o", "do", "dq", "dk", "dv"})


def _query_of(tensor: ast.expr, scope: Scope) -> ast.expr | None:
    """`q` where `tensor` is one of its peers in an attention call (`k`, `v`, `o`, a gradient such as `dk`) and the
    function or one around it has a tensor named `q` (a parameter or a local); None otherwise."""
    if not isinstance(tensor, ast.Name) or tensor.id not in _QUERY_PEERS:
        return None
    here: Scope | None = scope
    while here is not None:
        if "q" in here.params or "q" in here.env or "q" in here.bound:
            return ast.copy_location(ast.Name(id="q", ctx=ast.Load()), tensor)
        here = here.parent
    return None


def _bound_strides(name: ast.expr, scope: Scope) -> ast.expr | None:
    """The tensor whose strides a name holds where the nearest scope that binds it binds it once, to all of them
    (`q_stride = q.stride()`); None otherwise."""
    value = _assigned_once(name, scope)
    if isinstance(value, ast.Call) and isinstance(value.func, ast.Attribute) and value.func.attr == "stride" \
            and not value.args and not value.keywords:
        return value.func.value
    return None


def returned_item(value: ast.expr | None, place: int, count: int) -> ast.expr | None:
    """The item at `place` of a returned tuple of `count` items written out (`return y, N, T`); None otherwise."""
    if not isinstance(value, ast.Tuple) or len(value.elts) != count or any(isinstance(e, ast.Starred)
                                                                            for e in value.elts):
        return None
    return value.elts[place]


_FLATTENING = frozenset({"flatten", "ravel"})
_VIEWS = frozenset({"view", "reshape"})


def _flattened(expr: ast.expr, scope: Scope) -> ast.expr | None:
    """The tensor that `expr` holds every element of in one dimension: `x.flatten()`, `x.ravel()`, `x.view(-1)`,
    `x.reshape(-1)`, or a local name the function binds to nothing else (`flat = x.flatten()` then `len(flat)`);
    None otherwise."""
    if isinstance(expr, ast.Name):
        here: Scope | None = scope
        while here is not None and expr.id not in here.env and expr.id not in here.params:
            here = here.parent
        bindings = here.env.get(expr.id) if here is not None else None  # a parameter bound again: those bindings
        if not bindings:
            return None
        found = [_flattened_call(value) if value is not None and position is None else None
                 for value, position, _count in bindings]
        return found[0] if len(found) == 1 else None
    return _flattened_call(expr)


def _flattened_call(expr: ast.expr) -> ast.expr | None:
    if not (isinstance(expr, ast.Call) and isinstance(expr.func, ast.Attribute) and not expr.keywords):
        return None
    method = expr.func.attr
    if method in _FLATTENING and not expr.args:
        return expr.func.value
    if method in _VIEWS and len(expr.args) == 1 and integer(expr.args[0], {}) == -1:
        return expr.func.value
    return None


def _row(tensor: ast.expr) -> bool:
    """Whether `tensor` is one entry of a tensor's first dimension (`x[0]`, `x[i]`): the first dimension indexed
    away, so its size is the product of the others."""
    return isinstance(tensor, ast.Subscript) and not isinstance(tensor.slice, (ast.Slice, ast.Tuple)) \
        and shape_of(tensor) is None


def _middle_dimension(value: ast.expr) -> bool:
    """Whether a value is read as a dimension of a tensor's whole shape neither first nor last by its index
    (`x.shape[2]`, `x.size(1)`)."""
    if isinstance(value, ast.Subscript):
        shape = shape_of(value.value)
        index = integer(value.slice, {})
        return shape is not None and shape[1] and index is not None and index > 0
    if (isinstance(value, ast.Call) and isinstance(value.func, ast.Attribute) and value.func.attr == "size"
            and len(value.args) == 1 and not value.keywords):
        index = integer(value.args[0], {})
        return index is not None and index > 0
    return False


def _letter_named(name: str) -> bool:
    """Whether a name is, or ends in, the batch's or the time steps' letter (`B`, `true_B`, `padded_T`)."""
    words = re.findall(r"[A-Z]+(?![a-z])|[A-Z]?[a-z]+", name)
    return bool(words) and words[-1] in _MIDDLE_LETTERS


def _class_of(scope: Scope) -> ast.ClassDef | None:
    """The class whose method the scope is (or is inside)."""
    here: Scope | None = scope
    while here is not None:
        if isinstance(here.node, ast.ClassDef):
            return here.node
        here = here.parent
    return None


def _whole_class(owner: ast.ClassDef, source: SourceFile) -> ast.ClassDef:
    """The class as the whole module has it: a module read in parts may hold only some of its methods."""
    from kgate.collect.source import UnreadableSource

    classes: dict[tuple[str, int], ast.ClassDef] | None = source.derived.get("classes")
    if classes is None:
        try:
            tree = source.tree
        except UnreadableSource:  # a module that does not parse whole: the part read is all there is
            return owner
        classes = source.derived["classes"] = {(node.name, node.lineno): node for node in ast.walk(tree)
                                               if isinstance(node, ast.ClassDef)}
    return classes.get((owner.name, owner.lineno), owner)


def _own_method(func: ast.expr, scope: Scope, source: SourceFile) -> tuple[py.Function, ast.ClassDef] | None:
    """The method of the scope's class that `func` calls on the instance (`self._layer_state`), with the class;
    None for any other call (a static or class method aside, whose first parameter is not the instance)."""
    if not (isinstance(func, ast.Attribute) and isinstance(func.value, ast.Name) and func.value.id == "self"):
        return None
    owner = _class_of(scope)
    if owner is None:
        return None
    whole = _whole_class(owner, source)
    for stmt in whole.body:
        if isinstance(stmt, (ast.FunctionDef, ast.AsyncFunctionDef)) and stmt.name == func.attr:
            if any((py.dotted(d) or "").rsplit(".", 1)[-1] in ("staticmethod", "classmethod", "property")
                   for d in stmt.decorator_list):
                return None
            first = [*stmt.args.posonlyargs, *stmt.args.args][:1]
            return (stmt, whole) if first and first[0].arg == "self" else None
    return None


def _dimension_of(value: ast.expr) -> ast.expr | None:
    """The tensor a dimension is read of (`x` of `x.shape[0]`, `x.size(0)`); None otherwise."""
    if isinstance(value, ast.Subscript):
        shape = shape_of(value.value)
        return shape[0] if shape is not None else None
    if isinstance(value, ast.Call) and isinstance(value.func, ast.Attribute) and value.func.attr == "size":
        return value.func.value
    return None


def _first_dimension(value: ast.expr) -> bool:
    """Whether a value is read as a tensor's first dimension: `x.shape[0]`, `x.size(0)`."""
    if isinstance(value, ast.Subscript):
        shape = shape_of(value.value)
        return shape is not None and shape[1] and integer(value.slice, {}) == 0
    if (isinstance(value, ast.Call) and isinstance(value.func, ast.Attribute) and value.func.attr == "size"
            and len(value.args) == 1 and not value.keywords):
        return integer(value.args[0], {}) == 0
    return False
