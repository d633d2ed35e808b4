"""What a Triton kernel does through its pointers: the atomics, loads and stores of its body and of the
`@triton.jit` helpers of its module it calls, each with the kernel parameters its pointer is based on.

Pointers are traced through local variables (`ptrs = out + offs`), moved in place (`ptrs += stride` stays based on
what it was), handed through `tl.multiple_of`, `tl.where` and `.to(...)`, and through calls of helpers of the same
module (a helper's accesses to its own pointer parameters are summarised once and mapped onto what the call
passes). Atomics are found as functions (`tl.atomic_add(p, v)`, Gluon's `gl.atomic_add`) and as tensor methods
(`(p + offs).atomic_add(v)`); Triton may be reached through the project's own module (`kgate.collect.pysource`).
"""

from __future__ import annotations

import ast
from collections.abc import Iterator
from dataclasses import dataclass

from kgate.collect import pysource as py
from kgate.collect.pyguards import before
from kgate.collect.pysource import Function
from kgate.collect.source import SourceFile

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
DEPTH = 8  # how deep helpers, names and expressions are followed


@dataclass(frozen=True)
class Access:
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


class KernelModule:
    """What tracing needs of one module: imports, its top-level functions, and which of them can write
    atomically (their text says `atomic_`, or names one that does), so that only those are walked."""

    def __init__(self, source: SourceFile, info: py.ParsedModule) -> None:
        self.source = source
        self.imports = info.imports
        self.constants = info.constants
        self.whole = info.whole
        self.tree = info.tree
        # Where a function the reduced parse left out is read from (`ParsedModule.definition`).
        self._parsed = info if info.origin is source else py.ParsedModule(info.tree, info.whole, origin=source)
        self.functions = {stmt.name: stmt for stmt in info.tree.body
                          if isinstance(stmt, (ast.FunctionDef, ast.AsyncFunctionDef))}
        self._summaries: dict[str, list[tuple[str, Access]]] = {}
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
        return self._parsed.definition(name)

    def with_body(self, fn: Function) -> Function:
        """fn with its body: a definition the lint engine's reduced parse kept as its signature alone (its body names
        no needle) is parsed on its own."""
        if self.whole or not (len(fn.body) == 1 and isinstance(fn.body[0], ast.Pass)):
            return fn
        from kgate.collect import pyparts, pysparse

        blocks = pyparts.of(self.source).blocks
        block = pysparse.definitions(self.source.lines, blocks).get(fn.name) if blocks is not None else None
        return py.parse_definition(self.source, block, fn.name) or fn

    def candidate_lines(self, fn: Function, memory: bool) -> set[int]:
        words = ["atomic_", *(f"{name}(" for name in self.writers), *(("load", "store") if memory else ())]
        return {fn.lineno + i for i, line in enumerate(self.source.lines[fn.lineno - 1:fn.end_lineno])
                if any(word in line for word in words)}

    def summary(self, fn: Function, depth: int = 0) -> list[tuple[str, Access]]:
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

    def accesses(self, fn: Function, memory: bool = False, depth: int = 0) -> Iterator[Access]:
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
                yield Access(node, op, "", tuple(_roots(pointer, params, local, self.imports, set(), 0)),
                              id(node) not in discarded, ast.dump(value) if value is not None else "", pointer,
                              language)
                continue
            helper = self.functions.get(node.func.id) if isinstance(node.func, ast.Name) else None
            if helper is None or helper is fn or depth >= DEPTH or helper.name not in self.writers:
                continue
            for param, inner in self.summary(helper, depth):
                if inner.op in _MEMORY and not memory:
                    continue
                passed = _passed(node, helper, param)
                if passed is not None:
                    roots = tuple(_roots(passed, params, local, self.imports, set(), 0))
                    yield Access(node, inner.op, inner.helper or helper.name, roots, inner.used, inner.value,
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


def _discarded(fn: Function) -> set[int]:
    """ids of the calls whose value fn drops: a statement of its own, or assigned to names never read."""
    read = {node.id for node in ast.walk(fn) if isinstance(node, ast.Name) and isinstance(node.ctx, ast.Load)}
    out: set[int] = set()
    for stmt in py.statements(fn):
        if isinstance(stmt, ast.Expr) or isinstance(stmt, ast.Assign) and all(isinstance(t, ast.Name) and t.id not in read for t in stmt.targets):
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
    if depth > DEPTH:
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

def written_first(fn: Function, access: Access, stores: list[Access]) -> bool:
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
        if store.pointer is not None and terms <= _terms(store.pointer) and before(fn.body, store.call, access.call):
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



def repeats_differently(access: Access, target: str, memory: list[Access]) -> bool:
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


def in_place_writes(fn: Function, memory: list[Access]) -> list[tuple[Access, str]]:
    """(store, parameter) for each store of the kernel itself that writes back, at the address it loaded from, a
    value computed from that load (`x = tl.load(X + offs); tl.store(X + offs, x * 2)`): a second run of the kernel
    then works on what the first one left. The address is the same pointer expression (`ptrs`, `X + offs`); a store
    into other elements of the buffer than those read (a chunk's rows written from earlier chunks', a look-back
    slot of the next tile) is not in place. Values are followed through the names assigned before the store. Not
    reported: a value that keeps the loaded one or puts one that does not come from the buffer
    (`tl.where(mask, value, x)`: a masked fill gives the same result run after run), and a load that, on every path
    to it, follows a store through its address of a value that does not come from the buffer (the kernel sets the
    buffer before it reads it)."""
    loads = {id(a.call): a for a in memory if a.op == "load" and not a.helper and a.roots and a.pointer is not None}
    if not loads:
        return []
    local = _values(fn)
    branches = _branches(fn)
    stores = [a for a in memory if a.op == "store" and not a.helper and a.roots and a.pointer is not None]
    out: list[tuple[Access, str]] = []
    sources = {id(store.call): _loaded_from(_stored_value(store.call), local, loads, store.call.lineno,
                                            branches.get(id(store.call), {}), branches)
               for store in stores}
    setting: dict[str, list[Access]] = {}
    for store in stores:
        for root in store.roots:
            if root not in {r for load in sources[id(store.call)] for r in load.roots}:
                setting.setdefault(root, []).append(store)
    for store in stores:
        terms = _terms(store.pointer) if store.pointer is not None else set()
        for root in dict.fromkeys(store.roots):
            read = [load for load in sources[id(store.call)] if root in load.roots and load.pointer is not None
                    and _terms(load.pointer) == terms]
            if not read or all(written_first(fn, load, setting.get(root, [])) for load in read):
                continue
            if _selects(_stored_value(store.call), read, local, loads, store.call.lineno):
                continue
            out.append((store, root))
    return out


def _selects(value: ast.expr | None, read: list[Access], local: dict[str, list[tuple[int, ast.expr]]],
             loads: dict[int, Access], line: int) -> bool:
    """Whether `value` is a `where(cond, a, b)` that keeps a loaded value as it is in one branch and takes nothing
    else from the loads in `read`: run again, it selects the same."""
    if isinstance(value, ast.Name) and len(local.get(value.id, ())) == 1:
        value = local[value.id][0][1]
    if not (isinstance(value, ast.Call) and len(value.args) == 3
            and (py.dotted(value.func) or "").rsplit(".", 1)[-1] == "where"):
        return False
    ids = {id(load.call) for load in read}

    def plain(branch: ast.expr) -> bool:
        if isinstance(branch, ast.Name) and len(local.get(branch.id, ())) == 1:
            branch = local[branch.id][0][1]
        return isinstance(branch, ast.Call) and id(branch) in ids

    cond, a, b = value.args
    kept = [branch for branch in (a, b) if plain(branch)]
    if len(kept) != 1:
        return False
    other = b if kept[0] is a else a
    return not any(id(load.call) in ids for part in (cond, other) for load in _loaded_from(part, local, loads, line))


def _stored_value(call: ast.Call) -> ast.expr | None:
    for keyword in call.keywords:
        if keyword.arg == "value":
            return keyword.value
    return call.args[1] if len(call.args) > 1 else None


def _loaded_from(expr: ast.expr | None, local: dict[str, list[tuple[int, ast.expr]]], loads: dict[int, Access],
                 line: int, where: dict[int, int] | None = None, branches: Branches | None = None) -> list[Access]:
    """The loads of the kernel whose values reach `expr`, through the values given to local names on lines before
    `line` and outside the other branches of the `if`s around it (`where`): a name given another value further down,
    or in the other branch of a warp-specialized kernel, is not this value's."""
    found: dict[int, Access] = {}
    todo = [expr] if expr is not None else []
    seen: set[str] = set()
    while todo:
        for node in _data(todo.pop()):
            if isinstance(node, ast.Call) and id(node) in loads:
                found[id(node)] = loads[id(node)]
            elif isinstance(node, ast.Name) and node.id in local and node.id not in seen and len(seen) < 64:
                seen.add(node.id)
                todo.extend(value for at, value in local[node.id] if at < line and not (
                    where is not None and branches is not None and _exclusive(branches.get(id(value), {}), where)))
    return list(found.values())


# What a value's type says, not its contents: `tl.full(..., dtype=x.dtype)` takes nothing from what `x` holds.
_TYPE_ATTRIBUTES = frozenset({"dtype", "shape", "type", "element_ty", "ndim"})


def _data(expr: ast.expr) -> Iterator[ast.AST]:
    """The nodes of `expr` its value is computed from: `ast.walk` but for what a type attribute reads."""
    todo: list[ast.AST] = [expr]
    while todo:
        node = todo.pop()
        if isinstance(node, ast.Attribute) and node.attr in _TYPE_ATTRIBUTES:
            continue
        yield node
        todo.extend(ast.iter_child_nodes(node))


def _values(fn: Function) -> dict[str, list[tuple[int, ast.expr]]]:
    """Every value each local name of fn is given, with its line: assignments (each name of an unpacked target given
    the whole value), augmented ones (`acc += tl.load(p)`), annotated ones, and a walrus."""
    out: dict[str, list[tuple[int, ast.expr]]] = {}
    for node in ast.walk(fn):
        if isinstance(node, ast.Assign):
            targets, value = node.targets, node.value
        elif isinstance(node, (ast.AugAssign, ast.AnnAssign, ast.NamedExpr)) and node.value is not None:
            targets, value = [node.target], node.value
        else:
            continue
        for target in targets:
            for name in ast.walk(target):
                if isinstance(name, ast.Name):
                    out.setdefault(name.id, []).append((node.lineno, value))
    return out


Branches = dict[int, dict[int, int]]  # a node's id -> {the id of each `if` around it: the branch it is in (0, 1)}


def _branches(fn: Function) -> Branches:
    out: Branches = {}

    def visit(node: ast.AST, chain: dict[int, int]) -> None:
        out[id(node)] = chain
        if isinstance(node, ast.If):
            visit(node.test, chain)
            for index, branch in enumerate((node.body, node.orelse)):
                inner = {**chain, id(node): index}
                for stmt in branch:
                    visit(stmt, inner)
            return
        for child in ast.iter_child_nodes(node):
            visit(child, chain)

    visit(fn, {})
    return out


def _exclusive(a: dict[int, int], b: dict[int, int]) -> bool:
    """Whether two nodes lie in different branches of one `if`: one never runs after the other."""
    return any(b.get(test, branch) != branch for test, branch in a.items())
