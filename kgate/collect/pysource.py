"""Reading Python modules without running them: imports, constants, qualified names, Triton decorators.

Shared by the Python source rules. Everything here is static: a name that
can only be known by running the code (a key list built by a function, a
constant imported from another module) is "unknown", and rules stay quiet
about what they cannot see rather than guess.

What a name stands for is read through the module's imports and, where they
lead into the project's own modules (`from pkg.triton_utils import tl,
triton`, `from .utils import jit`), through those (`kgate.collect.pynames`):
`qualified` answers for every rule, and `is_kernel` is the one test
of whether a function is a Triton kernel.
"""

from __future__ import annotations

import ast
import builtins
import os
from collections.abc import Callable, Iterator
from typing import TYPE_CHECKING

from kgate.collect import depends
from kgate.collect.files import project_root
from kgate.collect.pynames import ALIAS, EXTERNAL, IMPORT, MODULE, Exports, Resolver, exports, import_roots

if TYPE_CHECKING:
    from kgate.collect.pysparse import Block
    from kgate.collect.source import SourceFile

AUTOTUNE = frozenset({"triton.autotune", "triton.runtime.autotune", "triton.runtime.autotuner.autotune"})
HEURISTICS = frozenset({"triton.heuristics", "triton.runtime.heuristics", "triton.runtime.autotuner.heuristics"})
CONSTEXPR = frozenset({"triton.language.constexpr", "triton.language.core.constexpr",
                       "triton.experimental.gluon.language.constexpr",
                       "triton.experimental.gluon.language._core.constexpr"})
TRITON_LANGUAGE = ("triton.language", "triton.language.core")
# Gluon's language module (`from triton.experimental.gluon import language as gl`): Triton's ops, dtypes and
# constexpr under Gluon's names (`gl.atomic_add`, `gl.device_print`, `gl.bfloat16` is `tl.bfloat16`).
GLUON_LANGUAGE = "triton.experimental.gluon.language"
# The decorators that make a function a Triton kernel (Triton's own, and Gluon's), by what they name.
TRITON_JIT = frozenset({"triton.jit", "triton.runtime.jit", "triton.runtime.jit.jit"})
GLUON_JIT = frozenset({"triton.experimental.gluon.jit", "triton.experimental.gluon._runtime.jit"})
# What a module that defines Triton kernels spells, whichever way it reaches Triton (`import triton`, or a jit
# the project's own module passes on: `from .utils import jit`): a rule reads no module holding neither.
TRITON_MARKERS = (b"triton", b"jit")

_BODIES = ("body", "orelse", "finalbody")

Function = ast.FunctionDef | ast.AsyncFunctionDef


class Imports(dict[str, str]):
    """Local name -> fully qualified name (`import_map`), with the names the module takes from the project's own
    modules followed to what they are (`tl` -> "triton.language" after `from pkg.triton_utils import tl`; `triton`
    after `from .common import *`, where common.py imports it, or `jit` after `from triton import *`), and
    `follow` for a dotted name through a project module (`tu.triton.jit` after `import pkg.triton_utils as tu`)."""

    def __init__(self, names: dict[str, str], modules: frozenset[str] = frozenset(),
                 follow: Callable[[str], str | None] | None = None) -> None:
        super().__init__(names)
        self.modules = modules  # local names of the project's modules
        self.follow = follow


class ParsedModule:
    """What several rules read of one module's syntax tree, computed once per file and shared (`info(source)`).

    `origin`: the file the tree was read from; the names its imports take from the project's own modules are then
    followed into those (`kgate.collect.pynames`), and a rule's verdict that reads them depends on what was read
    there (`kgate.collect.depends`: the lint cache answers it while that holds), whichever file's verdict read it
    first. Not to be confused with `kgate.collect.pyindex.ModuleSummary`, the planner's record of a module kept
    across runs."""

    def __init__(self, tree: ast.Module, whole: bool = True, origin: SourceFile | None = None) -> None:
        self.tree = tree
        self.whole = whole  # False: only the definitions that mention a pre-filter needle (kgate.collect.pysparse)
        self.origin = origin
        self._imports: Imports | None = None
        self._reads: depends.Reads = {}  # what following the imports read
        self._constants: dict[str, ast.expr] | None = None
        self._functions: list[Function] | None = None
        self._definitions: dict[str, Function | None] = {}

    @property
    def imports(self) -> Imports:
        if self._imports is None:
            with depends.collecting() as self._reads:
                self._imports = self._resolved(import_map(self.tree))
        else:
            depends.replay(self._reads)
        return self._imports

    def _resolved(self, plain: dict[str, str]) -> Imports:
        """`plain` with the module's top-level names that lead through the project's modules followed."""
        origin = self.origin
        own = exports(self.tree)
        if origin is None or not (own.stars or any(b.kind in (IMPORT, ALIAS) for b in own.bindings)):
            return Imports(plain)
        resolver = _resolver(origin)
        names = dict(plain)
        modules = set()
        followed = [(b.name, "." * b.level + b.module) for b in own.bindings if b.kind in (IMPORT, ALIAS)]
        # A name only a star import binds (`from .common import *`, then `@triton.jit`): where the star leads.
        followed += [(name, name) for name in starred_names(self.tree, own)]
        for name, spelled in followed:
            found = resolver.target(origin.path, name, own)
            if found is not None and found[0] == EXTERNAL:
                names[name] = found[1]
            elif found is not None and found[0] == MODULE:
                modules.add(name)
                names.setdefault(name, spelled)
        path = origin.path

        def follow(dotted: str) -> str | None:
            return resolver.qualify(path, dotted, own)

        return Imports(names, frozenset(modules), follow)

    @property
    def constants(self) -> dict[str, ast.expr]:
        if self._constants is None:
            self._constants = module_constants(self.tree)
        return self._constants

    @property
    def functions(self) -> list[Function]:
        if self._functions is None:
            self._functions = list(functions(self.tree))
        return self._functions

    def definition(self, name: str) -> Function | None:
        """The module's top-level function `name`; one a reduced parse left out (a config builder, a pre_hook:
        their text names no needle) is parsed on its own from its block when first asked for."""
        if name not in self._definitions:
            found = next((s for s in self.tree.body
                          if isinstance(s, (ast.FunctionDef, ast.AsyncFunctionDef)) and s.name == name), None)
            if found is None and not self.whole and self.origin is not None:
                from kgate.collect import pyparts, pysparse
                blocks = pyparts.of(self.origin).blocks
                block = pysparse.definitions(self.origin.lines, blocks).get(name) if blocks is not None else None
                found = parse_definition(self.origin, block, name)
            self._definitions[name] = found
        return self._definitions[name]

    def uses_triton(self) -> bool:
        """Whether the module reaches Triton: a name it imports is Triton's (through the project's modules too:
        `from pkg.triton_utils import triton`), or it reads Triton through a project module it imports by name
        (`tu.triton.jit` after `import pkg.triton_utils as tu`, where no imported name is Triton's itself)."""
        imports = self.imports
        if any(_is_triton(name) for name in imports.values()):
            return True
        if not imports.modules or imports.follow is None:
            return False
        return any(isinstance(node, ast.Attribute) and _is_triton(qualified(node, imports) or "")
                   for node in ast.walk(self.tree)
                   if isinstance(node, ast.Attribute) and isinstance(node.value, ast.Name)
                   and node.value.id in imports.modules)


def _is_triton(name: str) -> bool:
    return name == "triton" or name.startswith("triton.")


def starred_names(tree: ast.Module, own: Exports) -> list[str]:
    """The names a module with star imports reads that nothing in it binds (no assignment, parameter, definition or
    import, nor a builtin): what its star imports bring, for all kgate can tell from its own text."""
    if not own.stars:
        return []
    bound: set[str] = {b.name for b in own.bindings}
    read: set[str] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Name):
            (read if isinstance(node.ctx, ast.Load) else bound).add(node.id)
        elif isinstance(node, ast.arg):
            bound.add(node.arg)
        elif isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
            bound.add(node.name)
        elif isinstance(node, (ast.Import, ast.ImportFrom)):
            bound.update((a.asname or a.name).split(".", 1)[0] for a in node.names)
    return sorted(name for name in read - bound if not hasattr(builtins, name))


def _resolver(source: SourceFile) -> Resolver:
    """The resolver of a file under lint: absolute imports are looked for in its package root, the project's root
    and its `src` folder, inside the project. One per project root and lint run, so that what it followed for one
    file is not followed again for the next (`kgate.collect.depends.per_run`)."""
    path = os.path.abspath(source.path)
    root = project_root(path, source.rel)
    found = _RESOLVERS.get(root)
    if found is None:
        found = _RESOLVERS[root] = Resolver(import_roots(root), inside=root)
    return found


_RESOLVERS: dict[str, Resolver] = depends.per_run({})


def info(source: SourceFile) -> ParsedModule:
    """The shared ParsedModule of a Python source file (parses it on first use).

    When the lint engine says which needles brought the rules here
    (`source.derived["needles"]`: the pre-filter strings found in the file),
    only the definitions that mention them are parsed (kgate.collect.pysparse);
    otherwise, and whenever that reduced text does not parse, the whole file.
    """
    found = source.derived.get("pysource")
    if found is None:
        found = source.derived["pysource"] = ParsedModule(*_tree(source), origin=source)
    return found


def _tree(source: SourceFile) -> tuple[ast.Module, bool]:
    """The tree to read, and whether it is the whole file's."""
    from kgate.collect import pyparts
    from kgate.collect.pysparse import select
    from kgate.collect.source import MAX_PARSE_BYTES, UnreadableSource

    needles = source.derived.get("needles")
    if not needles or len(source.data) > MAX_PARSE_BYTES:  # a file too large is reported as such, not reduced
        return source.tree, True
    parts = pyparts.of(source)
    if parts.blocks is None:
        return source.tree, True
    try:
        return parts.parse(*select(source.lines, parts.blocks, needles), source.rel), False
    except UnreadableSource:
        return source.tree, True  # report the file's own error, not one of the reduced text


def whole_tree(source: SourceFile) -> ast.Module:
    """The whole module's tree, as `source.tree` gives it (raising as it does), from its top-level blocks where the
    module splits (`kgate.collect.pyparts`): the blocks the reading of its needles parsed are not parsed again."""
    from kgate.collect import pyparts
    from kgate.collect.source import MAX_PARSE_BYTES, UnreadableSource

    if len(source.data) > MAX_PARSE_BYTES or not source.derived.get("needles"):
        return source.tree
    held = source.derived.get(_WHOLE)
    if held is not None:
        return held
    try:
        parts = pyparts.of(source)
        blocks = parts.blocks
        # The lines above the first block are the file's too: only blank and comment lines there leave its parse as
        # the blocks' (an indented line, say, fails the file's).
        if blocks and not any(line.strip() and not line.lstrip().startswith("#")
                              for line in source.lines[:blocks[0][0]]):
            tree = source.derived[_WHOLE] = parts.parse(blocks, None, source.rel)  # for the file's other kernels
            return tree
    except UnreadableSource:
        pass  # a text that does not decode, or blocks that do not parse: the file's own parse, or its error
    return source.tree


_WHOLE = "pysource.whole"  # `SourceFile.derived`: the whole tree made of the blocks (`whole_tree`)


def parse_definition(source: SourceFile, block: Block | None, name: str) -> Function | None:
    """The top-level function `name` of a file read in part, parsed on its own from its block
    (`kgate.collect.pysparse`) at its own lines and columns; None where there is no block or it does not parse."""
    from kgate.collect import pyparts
    from kgate.collect.source import UnreadableSource

    if block is None:
        return None
    try:
        tree = pyparts.of(source).parse([block], None, source.rel)
    except UnreadableSource:
        return None
    return next((s for s in tree.body if isinstance(s, (ast.FunctionDef, ast.AsyncFunctionDef)) and s.name == name),
                None)


def expressions(stmt: ast.stmt) -> Iterator[ast.AST]:
    """Every expression node of one statement, not descending into the statements of its body."""
    node_type, statement = ast.AST, ast.stmt
    stack: list[ast.AST] = []
    for name in stmt._fields:
        if name in _NOT_EXPRESSIONS:
            continue
        value = getattr(stmt, name, None)
        if isinstance(value, node_type):
            stack.append(value)
        elif isinstance(value, list):
            stack.extend([v for v in value if isinstance(v, node_type) and not isinstance(v, statement)])
    # The walk of every syntax node of a module's statements, many times a lint: its names bound locally.
    pop, push, extend = stack.pop, stack.append, stack.extend
    while stack:
        node = pop()
        yield node
        for name in node._fields:
            value = getattr(node, name, None)
            if isinstance(value, node_type):
                push(value)
            elif isinstance(value, list):
                extend([v for v in value if isinstance(v, node_type)])


_NOT_EXPRESSIONS = frozenset(_BODIES) | {"handlers", "cases"}  # a statement's fields that hold statements


# Statement types that hold other statements, and where (a list of names per type).
_NESTED: dict[type, tuple[str, ...]] = {
    ast.Module: ("body",), ast.FunctionDef: ("body",), ast.AsyncFunctionDef: ("body",), ast.ClassDef: ("body",),
    ast.If: ("body", "orelse"), ast.For: ("body", "orelse"), ast.AsyncFor: ("body", "orelse"),
    ast.While: ("body", "orelse"), ast.With: ("body",), ast.AsyncWith: ("body",),
    ast.Try: ("body", "handlers", "orelse", "finalbody"), ast.ExceptHandler: ("body",),
    ast.Match: ("cases",), ast.match_case: ("body",),
}
if hasattr(ast, "TryStar"):  # Python 3.11+
    _NESTED[ast.TryStar] = ("body", "handlers", "orelse", "finalbody")


def statements(node: ast.AST) -> Iterator[ast.stmt]:
    """Every statement under a node, outer before inner, in source order; expressions are not visited."""
    stack: list[ast.AST] = [node]
    nested = _NESTED
    while stack:
        current = stack.pop()
        if isinstance(current, ast.stmt):
            yield current
        names = nested.get(type(current))
        if names:
            children: list[ast.AST] = []
            for name in names:
                children.extend(getattr(current, name))
            children.reverse()
            stack.extend(children)


def functions(tree: ast.Module) -> Iterator[ast.FunctionDef | ast.AsyncFunctionDef]:
    for stmt in statements(tree):
        if isinstance(stmt, (ast.FunctionDef, ast.AsyncFunctionDef)):
            yield stmt


def import_map(tree: ast.Module) -> dict[str, str]:
    """Local name -> fully qualified name, for every absolute import in the module (at any depth)."""
    out: dict[str, str] = {}
    for stmt in statements(tree):
        if isinstance(stmt, ast.Import):
            for alias in stmt.names:
                if alias.asname:
                    out[alias.asname] = alias.name
                else:
                    top = alias.name.split(".", 1)[0]
                    out[top] = top
        elif isinstance(stmt, ast.ImportFrom) and stmt.level == 0 and stmt.module:
            for alias in stmt.names:
                if alias.name != "*":
                    out[alias.asname or alias.name] = f"{stmt.module}.{alias.name}"
    return out


def qualified(node: ast.AST, imports: dict[str, str]) -> str | None:
    """`tr.runtime.autotune` -> "triton.runtime.autotune" when `tr` is an import of triton; else None. Through a
    project module (`Imports`), `tu.triton.jit` -> "triton.jit" when that module's `triton` is Triton."""
    name = dotted(node)
    if name is None:
        return None
    head, dot, rest = name.partition(".")
    base = imports.get(head)
    if base is None:
        return None
    if dot and isinstance(imports, Imports) and head in imports.modules and imports.follow is not None:
        return imports.follow(name) or base + dot + rest
    return base + dot + rest


def dotted(node: ast.AST) -> str | None:
    """The written dotted name of an expression (`a.b.c`), without resolving imports."""
    parts: list[str] = []
    while isinstance(node, ast.Attribute):
        parts.append(node.attr)
        node = node.value
    if not isinstance(node, ast.Name):
        return None
    parts.append(node.id)
    return ".".join(reversed(parts))


def module_constants(tree: ast.Module) -> dict[str, ast.expr]:
    """Names assigned exactly once at module level, with the expression assigned."""
    values: dict[str, ast.expr] = {}
    counts: dict[str, int] = {}
    for stmt in tree.body:
        targets: list[ast.expr] = []
        value: ast.expr | None = None
        if isinstance(stmt, ast.Assign):
            targets, value = stmt.targets, stmt.value
        elif isinstance(stmt, ast.AnnAssign) and stmt.value is not None:
            targets, value = [stmt.target], stmt.value
        elif isinstance(stmt, ast.AugAssign) and isinstance(stmt.target, ast.Name):
            counts[stmt.target.id] = counts.get(stmt.target.id, 0) + 1
        for target in targets:
            if isinstance(target, ast.Name) and value is not None:
                values[target.id] = value
                counts[target.id] = counts.get(target.id, 0) + 1
    return {name: value for name, value in values.items() if counts[name] == 1}


def string_value(node: ast.AST | None, constants: dict[str, ast.expr], depth: int = 0) -> str | None:
    """A string literal, or a module constant holding one."""
    if isinstance(node, ast.Constant) and isinstance(node.value, str):
        return node.value
    if isinstance(node, ast.Name) and depth < 8 and node.id in constants:
        return string_value(constants[node.id], constants, depth + 1)
    return None


def string_items(node: ast.AST | None, constants: dict[str, ast.expr], depth: int = 0) -> list[tuple[str, ast.AST]]:
    """The strings of a list/tuple expression, each with the node to report at.

    Follows module constants (`key=KEYS`, reported at the use `KEYS`),
    concatenations and starred items; elements it cannot resolve are left out.
    """
    if node is None or depth > 8:
        return []
    if isinstance(node, ast.Constant) and isinstance(node.value, str):
        return [(node.value, node)]
    if isinstance(node, (ast.List, ast.Tuple, ast.Set)):
        out: list[tuple[str, ast.AST]] = []
        for elt in node.elts:
            inner = elt.value if isinstance(elt, ast.Starred) else elt
            out.extend(string_items(inner, constants, depth + 1))
        return out
    if isinstance(node, ast.BinOp) and isinstance(node.op, ast.Add):
        return string_items(node.left, constants, depth + 1) + string_items(node.right, constants, depth + 1)
    if isinstance(node, ast.Name) and node.id in constants:
        return [(value, node) for value, _at in string_items(constants[node.id], constants, depth + 1)]
    return []


def resolvable(node: ast.AST | None, constants: dict[str, ast.expr], depth: int = 0) -> bool:
    """Whether string_items sees every element of the expression (None counts as an empty list)."""
    if node is None or (isinstance(node, ast.Constant) and (node.value is None or isinstance(node.value, str))):
        return True
    if depth > 8:
        return False
    if isinstance(node, (ast.List, ast.Tuple, ast.Set)):
        return all(resolvable(e.value if isinstance(e, ast.Starred) else e, constants, depth + 1) for e in node.elts)
    if isinstance(node, ast.BinOp) and isinstance(node.op, ast.Add):
        return resolvable(node.left, constants, depth + 1) and resolvable(node.right, constants, depth + 1)
    if isinstance(node, ast.Name) and node.id in constants:
        return resolvable(constants[node.id], constants, depth + 1)
    return False


def argument(call: ast.Call, name: str, position: int | None = None) -> ast.expr | None:
    """The expression passed for a parameter, by keyword or by position."""
    for keyword in call.keywords:
        if keyword.arg == name:
            return keyword.value
    if position is not None and len(call.args) > position and not any(
            isinstance(a, ast.Starred) for a in call.args[:position + 1]):
        return call.args[position]
    return None


def parameters(fn: ast.FunctionDef | ast.AsyncFunctionDef) -> list[ast.arg]:
    args = fn.args
    return [*args.posonlyargs, *args.args, *args.kwonlyargs]


def defaults(fn: ast.FunctionDef | ast.AsyncFunctionDef) -> dict[str, ast.expr]:
    """The parameters that have a default, with it."""
    args = fn.args
    positional = [*args.posonlyargs, *args.args]
    out = dict(zip([a.arg for a in positional][len(positional) - len(args.defaults):], args.defaults))
    out.update((a.arg, d) for a, d in zip(args.kwonlyargs, args.kw_defaults) if d is not None)
    return out


# --------------------------------------------------------------------------- Triton


def autotune_decorator(fn: ast.FunctionDef | ast.AsyncFunctionDef, imports: dict[str, str]) -> ast.Call | None:
    """The `triton.autotune(...)` call decorating a function, whatever the import spelling."""
    for decorator in fn.decorator_list:
        if isinstance(decorator, ast.Call) and qualified(decorator.func, imports) in AUTOTUNE:
            return decorator
    return None


def is_constexpr(annotation: ast.expr | None, imports: dict[str, str]) -> bool:
    """Whether a parameter annotation is `tl.constexpr` (any alias of triton.language, or a string of it), by what
    the module's imports make of it; see `spelled_constexpr` for the test on the spelling alone."""
    if annotation is None:
        return False
    if isinstance(annotation, ast.Constant) and isinstance(annotation.value, str):
        try:
            annotation = ast.parse(annotation.value, mode="eval").body
        except (SyntaxError, ValueError, RecursionError, MemoryError):  # not an expression Python can read
            return False
    name = qualified(annotation, imports)
    if name is not None:
        return name in CONSTEXPR
    # Imported in a way we cannot follow (a relative import, a star): trust the spelling.
    written = dotted(annotation)
    return written is not None and (written == "constexpr" or written.endswith(".constexpr"))


def spelled_constexpr(annotation: ast.expr | None) -> bool:
    """Whether a parameter annotation is written as a name or attribute ending in `constexpr` (`tl.constexpr`,
    `constexpr`), imports not followed and strings not read: the planner's test (`kgate.collect.pyindex`), which
    remembers its answer across runs. Read from the node, not by unparsing it (an annotation nested a few hundred
    levels deep exhausts ast.unparse's recursion)."""
    if isinstance(annotation, ast.Attribute):
        return annotation.attr.endswith("constexpr")
    return isinstance(annotation, ast.Name) and annotation.id.endswith("constexpr")


def jit_kind(name: str | None) -> str | None:
    """"triton" or "gluon" for a decorator that makes a Triton kernel, by the qualified name it has; else None."""
    if name in TRITON_JIT:
        return "triton"
    return "gluon" if name in GLUON_JIT else None


def kernel_decorator(fn: Function, imports: dict[str, str]) -> ast.expr | None:
    """The decorator that makes a function a Triton kernel (`@triton.jit`, `@triton.jit(...)`, Gluon's `@jit`,
    under any import spelling, through the project's own modules too); None for any other function: the one a rule
    reads the jit's own arguments from (`debug=True`). Whether a function is a kernel at all is `is_kernel`."""
    for decorator in fn.decorator_list:
        target = decorator.func if isinstance(decorator, ast.Call) else decorator
        if jit_kind(qualified(target, imports)) is not None:
            return decorator
    return None


def makes_kernel(name: str | None) -> bool:
    """Whether a decorator, by the qualified name it has (`qualified`, or `kgate.collect.pynames.Resolver.qualify`
    across the project's modules), makes a function a gated Triton kernel or wraps one: Triton's jit or Gluon's
    (`jit_kind`), `triton.autotune`, `triton.heuristics`. What the name spells is not enough: `numba.jit` and
    `my_jit` make no Triton kernel."""
    return jit_kind(name) is not None or name in AUTOTUNE or name in HEURISTICS


def is_kernel(fn: Function, imports: dict[str, str]) -> bool:
    """Whether a function is a gated Triton kernel: one of its decorators `makes_kernel`, under any import spelling,
    through the project's own modules too. The one test every rule and stage asks."""
    return any(makes_kernel(qualified(decorator.func if isinstance(decorator, ast.Call) else decorator, imports))
               for decorator in fn.decorator_list)


def kernel_language(fn: Function, imports: dict[str, str]) -> str | None:
    """"triton" or "gluon": which jit makes the function a kernel (`kernel_decorator`); None for another function."""
    decorator = kernel_decorator(fn, imports)
    if decorator is None:
        return None
    return jit_kind(qualified(decorator.func if isinstance(decorator, ast.Call) else decorator, imports))


def is_triton_language(name: str | None) -> bool:
    """Whether a module name is Triton's language (`triton.language`, its `core`, its `extra` modules) or Gluon's,
    whose ops are Triton's under Gluon's names (`triton.experimental.gluon.language`, its `_core`)."""
    if name is None:
        return False
    if name == GLUON_LANGUAGE or name.startswith(GLUON_LANGUAGE + "._"):
        return True
    return name.startswith(TRITON_LANGUAGE) and name.count(".") <= 3
