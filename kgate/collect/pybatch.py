"""Batches packed to one, for the launch-site reading (`kgate.collect.pylaunch.Launches`): the first dimension of a
tensor that is 1 wherever the project runs the launch, so that it follows neither the batch nor the token count.

Variable-length code packs every request into one sequence and passes the boundaries as a tensor of offsets
(`cu_seqlens`): the tensors then hold a batch of one, and the launcher checks that it does (`if cu_seqlens is not
None: assert q.shape[0] == 1`, or `raise` when `q.shape[0] != 1`). The batch is 1 where every call of the checking
function passes such offsets: a value that is not `None` as written (an attribute, an index into one, a call), a
parameter typed a tensor that cannot be `None` (`query_start_loc: torch.Tensor`, whoever calls it: a method of a
backend called through an object), or a parameter of the caller that every call of the caller passes so in turn. A caller that passes `None`, leaves the
default, passes a name it may have set to `None`, or a function no call of the project reaches (an API for users,
who may call it with a padded batch) leaves it following the batch. The inputs of a function that checks one of
them share that batch (`q`, `k`, `v` of an attention). A tensor made with a leading dimension of one as written
(`x.unsqueeze(0)`, `x.view(1, n, d)`, `x[None]`) is one too, wherever its caller made it, and so is a tensor made
like one of these (`torch.empty_like(g)`).
"""

from __future__ import annotations

import ast
import weakref

from kgate.collect import pysource as py
from kgate.collect.pycallers import CallSites
from kgate.collect.pyscopes import Scope
from kgate.collect.pyvalues import UNKNOWN, Verdict, integer, shape_of, worst

_DEPTH = 48
# Methods whose result has the tensor's own shape and values: a copy on another device or in another type, the
# host's (`cu_seqlens.cpu()`, `.numpy()`, `.tolist()`: read on the host for a size) included.
_SAME_SHAPE = frozenset({"contiguous", "to", "float", "half", "bfloat16", "double", "int", "long", "clone", "detach",
                         "cuda", "cpu", "numpy", "tolist", "pin_memory", "type_as", "requires_grad_", "cast"})
# Functions whose result has the shape of their first argument (`torch.empty_like(x)`).
_LIKE = frozenset({"empty_like", "zeros_like", "ones_like", "full_like", "rand_like", "randn_like"})
_RESHAPES = frozenset({"view", "reshape"})
# Methods that give a tensor the sizes they are written (`x.view(bsz, seqlen, heads, dim)`, `-1` aside), as a maker.
_VIEWS = _RESHAPES | {"expand"}
# What makes a tensor of the sizes it is given (`torch.empty(n, d)`, `torch.zeros((n, d))`, `x.new_empty(n)`).
_MAKERS = frozenset({"empty", "zeros", "ones", "full", "rand", "randn", "new_empty", "new_zeros", "new_ones",
                     "new_full"})
# Makers whose arguments after the shape are no sizes (`torch.full((n, d), value)`).
_FILLED = frozenset({"full", "new_full"})
# A call that may return `None`: a lookup with a default (`kwargs.get("cu_seqlens")`, `getattr(m, "x", None)`).
_LOOKUPS = frozenset({"get", "getattr", "pop"})


class Batches(CallSites):
    """`Launches`' reading of the first dimension of a tensor where it is not the batch: packed to one, or made with
    a size of its own; and of its other dimensions and strides where it is made with sizes written out."""

    def value(self, expr: ast.expr, scope: Scope, depth: int, seen: set[tuple[int, str]]) -> Verdict:
        raise NotImplementedError  # what a value does: `Launches.value`

    def made(self, tensor: ast.expr, scope: Scope, depth: int, seen: set[tuple[int, str]],
             at: int | slice = 0) -> Verdict | None:
        """A dimension of a tensor made with its sizes written out (`torch.empty((num_experts, n))`, `x.new_zeros(n,
        d)`), on every path and at every call: what its size there is (`at`: the first by default, `-1` the last);
        None where it is made so nowhere, or the size cannot be placed. With a slice, the worst of the sizes it takes
        (each one placed): all of them for the element count, those after `i` for the stride of dimension `i`. A
        parameter the function makes contiguous (`x = x.contiguous()`) is what its callers made."""
        if depth > _DEPTH:
            return None
        depth += 1
        if isinstance(tensor, ast.Call):
            func = tensor.func
            same = same_shape(tensor)
            if same is not None:
                return None if at == slice(None) else self.made(same, scope, depth, seen, at)
            moved = _moved(tensor, at)
            if moved is not None:  # `x.transpose(1, 2)`: the dimension of `x` that lands at `at`
                assert isinstance(func, ast.Attribute)
                return self.made(func.value, scope, depth, seen, moved)
            maker = str(py.dotted(func) or getattr(func, "attr", "")).rsplit(".", 1)[-1]
            viewed = isinstance(func, ast.Attribute) and maker in _VIEWS
            if maker not in _MAKERS and not viewed or not tensor.args:
                return None
            shape = tensor.args[0]
            sizes = list(shape.elts) if isinstance(shape, (ast.Tuple, ast.List)) else list(tensor.args)
            if at not in (0, slice(None)) and not isinstance(shape, (ast.Tuple, ast.List)) and maker in _FILLED:
                return None  # `torch.full(shape, value)`: the value is no later size
            sizes = _sizes_at(sizes, at)
            if not sizes or viewed and any(integer(size, {}) == -1 for size in sizes):
                return None  # `x.view(b, -1, d)`: a size the view infers is not written out
            verdicts = [self.value(size, scope, depth, seen) for size in sizes]
            return None if any(v.cls == UNKNOWN for v in verdicts) else worst(verdicts)
        if not isinstance(tensor, ast.Name):
            return None
        here: Scope | None = scope
        while here is not None:
            if tensor.id in here.bound:
                arg, caller = here.bound[tensor.id]
                return self.made(arg, caller, depth, seen, at)
            bindings = here.env.get(tensor.id)
            mark = (id(here.node), "made " + tensor.id)
            if mark in seen:
                if tensor.id not in here.params:
                    return None
                # `x = x.contiguous()` reads the parameter again: what its callers passed for it
                bindings, mark = [], (id(here.node), "made passed " + tensor.id)
                if mark in seen:
                    return None
            if bindings:
                found = [self.made(value, here, depth, seen | {mark}, at) if value is not None and position is None
                         else None for value, position, _count in bindings]
                return None if None in found else worst([v for v in found if v is not None])
            if tensor.id in here.params:
                passed = self._passed_by_callers(here, tensor.id)
                found = [reader.made(arg, caller, depth, seen | {mark}, at) for arg, caller, reader in passed]
                return None if not found or None in found else worst([v for v in found if v is not None])
            here = here.parent
        return None

    def one(self, tensor: ast.expr, scope: Scope, depth: int, seen: set[tuple[int, str]]) -> bool:
        """Whether a tensor's first dimension is 1 wherever the project runs this code (see the module's text)."""
        if depth > _DEPTH:
            return False
        depth += 1
        same = same_shape(tensor) if isinstance(tensor, ast.Call) else None
        if same is not None:
            return self.one(same, scope, depth, seen)
        if isinstance(tensor, ast.Call) and isinstance(tensor.func, ast.Attribute):
            method, args = tensor.func.attr, tensor.args
            if method == "unsqueeze":
                return len(args) == 1 and integer(args[0], {}) == 0
            if method in _RESHAPES:
                first = args[0].elts[0] if len(args) == 1 and isinstance(args[0], ast.Tuple) and args[0].elts \
                    else args[0] if args else None
                return integer(first, {}) == 1
            return False
        if isinstance(tensor, ast.Subscript):
            index = tensor.slice
            first = index.elts[0] if isinstance(index, ast.Tuple) and index.elts else index
            if isinstance(first, ast.Constant) and first.value is None:
                return True  # `x[None]`: a new leading dimension of one
            keeps = isinstance(first, ast.Constant) and first.value is Ellipsis and isinstance(index, ast.Tuple) or (
                isinstance(first, ast.Slice) and first.lower is None and first.upper is None and first.step is None)
            return keeps and self.one(tensor.value, scope, depth, seen)
        if isinstance(tensor, ast.Name):
            return self._one_name(tensor.id, scope, depth, seen)
        return False

    def _one_name(self, name: str, scope: Scope, depth: int, seen: set[tuple[int, str]]) -> bool:
        here: Scope | None = scope
        while here is not None:
            if name in here.bound:
                arg, caller = here.bound[name]
                return self.one(arg, caller, depth, seen)
            bindings = here.env.get(name)
            mark = (id(here.node), "one " + name)
            if bindings and mark not in seen:
                # Every assignment (`q = q.contiguous()` reads the parameter again) and, for a parameter reassigned
                # only on some paths, what the calls pass.
                made = all(value is not None and shape_of(value) is None and self.one(value, here, depth, seen | {mark})
                           for value, _position, _count in bindings)
                if not made or name not in here.params:
                    return made
                seen = seen | {mark}
            if name in here.params:
                mark = (id(here.node), "one passed " + name)
                return mark not in seen and self._one_parameter(here, name, depth, seen | {mark})
            if bindings:
                return True  # read again through its own assignment: the other bindings decide
            here = here.parent
        return False

    def _one_parameter(self, scope: Scope, name: str, depth: int, seen: set[tuple[int, str]]) -> bool:
        """A tensor parameter: of one where the function checks its inputs' batch under offsets every call passes,
        or where every call passes a tensor of one."""
        fn = scope.node
        assert isinstance(fn, py.Function)
        if any(self.given(scope, offsets, depth, seen) for offsets in packed_under(fn)):
            return True
        passed = self._passed_by_callers(scope, name)
        return bool(passed) and all(reader.one(arg, caller, depth, seen) for arg, caller, reader in passed)

    def given(self, scope: Scope, name: str, depth: int, seen: set[tuple[int, str]]) -> bool:
        """Whether every call of the function passes a value that is not `None` for its parameter `name`."""
        mark = (id(scope.node), "given " + name)
        if mark in seen or depth > _DEPTH:
            return False
        if isinstance(scope.node, py.Function) and declared_given(scope.node, name):
            return True
        passed = self._passed_by_callers(scope, name)
        return bool(passed) and all(reader.not_none(arg, caller, depth + 1, seen | {mark})
                                    for arg, caller, reader in passed)

    def not_none(self, value: ast.expr, scope: Scope, depth: int, seen: set[tuple[int, str]]) -> bool:
        """Whether a value is not `None` as written: a constant other than `None`, an attribute, an index, a call
        other than a lookup with a default, a name every assignment of which is one, a parameter every call passes
        one for."""
        if isinstance(value, ast.Constant):
            return value.value is not None
        if isinstance(value, ast.IfExp):
            return self.not_none(value.body, scope, depth, seen) and self.not_none(value.orelse, scope, depth, seen)
        if isinstance(value, ast.Call):
            return (py.dotted(value.func) or "").rsplit(".", 1)[-1] not in _LOOKUPS
        if isinstance(value, (ast.Attribute, ast.Subscript, ast.BinOp)):
            return True
        if not isinstance(value, ast.Name):
            return False
        here: Scope | None = scope
        while here is not None:
            bindings = here.env.get(value.id)
            mark = (id(here.node), "not none " + value.id)
            if bindings:
                return mark in seen or all(bound is not None and position is None and self.not_none(
                    bound, here, depth, seen | {mark}) for bound, position, _count in bindings) and (
                    value.id not in here.params or self.given(here, value.id, depth, seen))
            if value.id in here.params:
                return self.given(here, value.id, depth, seen)
            here = here.parent
        return False


def _sizes_at(sizes: list[ast.expr], at: int | slice) -> list[ast.expr]:
    """The sizes a maker's list gives the dimensions `at` picks; none where a starred size may move them."""
    if isinstance(at, slice):
        return [] if any(isinstance(size, ast.Starred) for size in sizes) else sizes[at]
    if not -len(sizes) <= at < len(sizes):
        return []
    before = sizes[:at + 1] if at >= 0 else sizes[at:]
    return [] if any(isinstance(size, ast.Starred) for size in before) else [sizes[at]]


def _moved(call: ast.Call, at: int | slice) -> int | None:
    """Where the dimension a transposition (`x.transpose(1, 2)`, `x.permute(0, 2, 1, 3)`) puts at `at` was in the
    tensor it transposes; None for any other call, or where the place cannot be told (an element count or a stride
    after a transposition, a negative place against positive dimensions)."""
    func = call.func
    if not isinstance(func, ast.Attribute) or call.keywords or isinstance(at, slice):
        return None
    dims = [d for arg in call.args if (d := integer(arg, {})) is not None]
    if len(dims) != len(call.args):
        return None
    if func.attr in ("transpose", "swapaxes") and len(dims) == 2:
        if any((d < 0) != (at < 0) for d in dims):
            return None  # `x.transpose(1, 2)` read at `-1`: which it is depends on how many dimensions x has
        return dims[1] if at == dims[0] else dims[0] if at == dims[1] else at
    if func.attr == "permute" and dims and -len(dims) <= at < len(dims):
        return dims[at]
    return None


def same_shape(call: ast.Call) -> ast.expr | None:
    """The tensor whose shape a call's result has: `x.contiguous()`, `x.to(dtype)`, `torch.empty_like(x)`; None for any
    other call."""
    func = call.func
    if isinstance(func, ast.Attribute) and func.attr in _SAME_SHAPE:
        return func.value
    name = (py.dotted(func) or "").rsplit(".", 1)[-1]
    return call.args[0] if name in _LIKE and call.args and not isinstance(call.args[0], ast.Starred) else None


def declared_given(fn: py.Function, name: str) -> bool:
    """Whether a parameter's annotation says it is never `None` (`cu_seqlens: torch.Tensor`, with no default of `None`
    and no `Optional`, `None` or `Any` in the annotation): every call passes it, typed so, whoever the callers are (a
    method called through an object, a function of the project's API)."""
    defaults = py.defaults(fn)
    arg = next((a for a in py.parameters(fn) if a.arg == name), None)
    if arg is None or arg.annotation is None:
        return False
    default = defaults.get(name)
    if isinstance(default, ast.Constant) and default.value is None:
        return False
    annotation = arg.annotation
    text = annotation.value if isinstance(annotation, ast.Constant) and isinstance(annotation.value, str) \
        else ast.unparse(annotation)
    return not any(word in text for word in ("Optional", "None", "Any", "object"))


def packed_under(fn: py.Function) -> tuple[str, ...]:
    """The parameters under whose presence the function checks that the batch of its inputs is one: `if cu_seqlens is
    not None: assert q.shape[0] == 1`, `if cu_seqlens is not None and q.shape[0] != 1: raise ...`, or `assert
    cu_seqlens is None or q.shape[0] == 1`; the tensor checked is a parameter of the function. Read once per
    function (asked again for each of its tensors, and by the verdicts of every file that follows a call into it)."""
    found = _PACKED.get(fn)
    if found is None:
        found = _PACKED[fn] = tuple(_packed_under(fn))
    return found


# A function's syntax tree -> `packed_under` of it, while the tree is alive.
_PACKED: weakref.WeakKeyDictionary[py.Function, tuple[str, ...]] = weakref.WeakKeyDictionary()


def _packed_under(fn: py.Function) -> list[str]:
    params = {a.arg for a in py.parameters(fn)}
    out: list[str] = []
    for node in ast.walk(fn):
        if isinstance(node, ast.If):
            given = [name for name in _conjuncts(node.test, ast.And) if isinstance(name, str) and name in params]
            rest = [test for test in _conjuncts(node.test, ast.And) if not isinstance(test, str)]
            if given and (any(_batch_test(test, params, ast.NotEq) for test in rest) and _raises(node.body) or any(
                    _checks_one(stmt, params) for stmt in node.body)):
                out.extend(given)
        elif isinstance(node, ast.Assert):
            parts = _conjuncts(node.test, ast.Or, negated=True)
            if any(_batch_test(test, params, ast.Eq) for test in parts if not isinstance(test, str)):
                out.extend(name for name in parts if isinstance(name, str) and name in params)
    return out


def _conjuncts(test: ast.expr, op: type, negated: bool = False) -> list[ast.expr | str]:
    """The parts of an `and` (`or`) test, with `P is not None` (`P is None` when `negated`) as the name `P`."""
    parts = test.values if isinstance(test, ast.BoolOp) and isinstance(test.op, op) else [test]
    out: list[ast.expr | str] = []
    for part in parts:
        wanted = ast.Is if negated else ast.IsNot
        if (isinstance(part, ast.Compare) and len(part.ops) == 1 and isinstance(part.ops[0], wanted)
                and isinstance(part.left, ast.Name) and isinstance(part.comparators[0], ast.Constant)
                and part.comparators[0].value is None):
            out.append(part.left.id)
        else:
            out.append(part)
    return out


def _checks_one(stmt: ast.stmt, params: set[str]) -> bool:
    """`assert q.shape[0] == 1`, or `if q.shape[0] != 1: raise ...`."""
    if isinstance(stmt, ast.Assert):
        return _batch_test(stmt.test, params, ast.Eq)
    return isinstance(stmt, ast.If) and _batch_test(stmt.test, params, ast.NotEq) and _raises(stmt.body)


def _batch_test(test: ast.expr, params: set[str], op: type) -> bool:
    """`q.shape[0] == 1` (`!=` with `ast.NotEq`), `q.size(0)` alike, for a parameter `q`."""
    if not (isinstance(test, ast.Compare) and len(test.ops) == 1 and isinstance(test.ops[0], op)):
        return False
    sides = (test.left, test.comparators[0])
    return any(integer(one, {}) == 1 and _first_dimension(other, params) for one, other in (sides, sides[::-1]))


def _first_dimension(expr: ast.expr, params: set[str]) -> bool:
    if isinstance(expr, ast.Subscript) and integer(expr.slice, {}) == 0:
        shape = shape_of(expr.value)
        return shape is not None and shape[1] and isinstance(shape[0], ast.Name) and shape[0].id in params
    if isinstance(expr, ast.Call) and isinstance(expr.func, ast.Attribute) and expr.func.attr == "size" and \
            len(expr.args) == 1 and integer(expr.args[0], {}) == 0:
        return isinstance(expr.func.value, ast.Name) and expr.func.value.id in params
    return False


def _raises(body: list[ast.stmt]) -> bool:
    return any(isinstance(stmt, ast.Raise) for stmt in body)
