"""## What it does
Flags a device print left in a `@triton.jit` or `@gluon.jit` function (or
one made a kernel by a call, `kernel = triton.jit(_kernel)`): a
call to `tl.device_print` (however `triton.language` is imported) or
Gluon's `gl.device_print`, or to Python's `print`, which Triton and Gluon
compile into the same device print.
`tl.static_print`, which prints once while compiling, is not reported, nor
is a kernel declared a debug kernel with `@triton.jit(debug=True)` (a
checker whose prints and `tl.device_assert`s are its purpose).
In a CuTe DSL kernel (`@cute.kernel`) it flags `cute.printf`, the device's
printf; Python's `print` there runs once while the DSL traces the kernel,
and a `@cute.jit` function is host code: neither is reported.

Triton may be reached through the project's own modules: a kernel module
that says `from pkg.triton_utils import tl, triton`, `from .utils import
jit` or `import pkg.triton_utils as tu` (`@tu.triton.jit`) is read as one
that imports Triton itself, when that module (or a package's
`__init__.py` passing it on with `from .triton_utils import *`) imports
Triton, even with a stand-in in its `except ImportError` branch. A `jit`
the project defines itself, or one of another compiler, makes no Triton
kernel.

## Why is this bad?
A device print is compiled into the kernel: every thread of every launch
formats its values into a buffer the host drains after the kernel ends.
A debug line forgotten in a hot kernel adds a `vprintf` call to each
thread, keeps the registers it prints alive to that point, and floods the
job's output in production. The kernel still gives the right answers, so
no test notices.

## Example
```python
@triton.jit
def scale(x_ptr, n, BLOCK: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    x = tl.load(x_ptr + offs, mask=offs < n)
    tl.device_print("x", x)
    tl.store(x_ptr + offs, x * 2, mask=offs < n)
```

## Use instead
Remove the print, or print at compile time with `tl.static_print` (shapes
and constexpr values), or keep a debug variant behind a constexpr switch
that the gated specialisations leave off:

```python
@triton.jit
def scale(x_ptr, n, BLOCK: tl.constexpr, DEBUG: tl.constexpr = False):
    ...
    if DEBUG:
        tl.device_print("x", x)
```

A print in a branch that Triton folds away while compiling is not
reported: one whose condition is a literal (`if False:`, `if 0:`, the
`else` of `if True:`, `while False:`), or a `tl.constexpr` parameter of
the function whose default is a literal, read at that default, alone or
in `not`, `and` and `or` (`if DEBUG and pid == 0:` with `DEBUG:
tl.constexpr = False`): a debug switch left off. The default is read
only where no keyword or assignment of the module sets that name to a
literal of the other truth, nor a launch of the kernel in the module
passes one at its position (`DEBUG=True` in a launch, `{"DEBUG": True}`
spread into one, `kernel[grid](x, True)`, a module constant `DEBUG =
True`, or a launcher's default `def run(x, DEBUG=True)`, turn the switch
on and the print is reported; a comment or a docstring that says
`DEBUG=True` is prose and turns nothing on);
a caller that passes its own flag (`DEBUG=args.debug`) is debugging,
not a launch that ships. A switch without a default is reported, as is
any other run-time or constexpr condition; a print a caller in another
module turns on with a literal is not seen here.

What no shipped launch reaches is not reported either: a kernel in a test
or benchmark module (in a `test`, `tests`, `bench` or `benchmark(s)`
folder, or named `test_*.py`, `*_test.py`, `bench_*.py`), which runs
where its prints are read; and a debug helper nothing calls, a `@triton.jit`
function whose only effect is its print (it loads and stores nothing and
calls nothing but `triton.language`) that no code of its module names and
no other module of the project imports, such as `def print_value(value):`
kept for a later debugging session. A kernel that reads or writes memory
is reported wherever it is, since a library's kernels are launched by its
users.

## Options
None.
"""

from __future__ import annotations

import ast
from collections.abc import Iterable

from kgate.collect import pysource as py
from kgate.collect.pyproject import checks_kernels, modules
from kgate.collect.source import SourceFile
from kgate.core.artifacts import Artifact
from kgate.core.findings import Severity
from kgate.core.rule import Report, Rule, SourceContext


def _gated_jit(fn: py.Function, imports: dict[str, str]) -> bool:
    """A Triton kernel (`kgate.collect.pysource.is_kernel`) not declared a debug kernel (`@triton.jit(debug=True)`)."""
    if not py.is_kernel(fn, imports):
        return False
    decorator = py.kernel_decorator(fn, imports)
    debug = py.argument(decorator, "debug") if isinstance(decorator, ast.Call) else None
    return not (isinstance(debug, ast.Constant) and debug.value is True)


def _device_print(name: str | None) -> bool:
    """`device_print` of Triton's language or Gluon's, by the qualified name a call has."""
    module, _, op = (name or "").rpartition(".")
    return op == "device_print" and py.is_triton_language(module)


_UNKNOWN = object()  # a condition's value that is not known while reading the source


def _folded(test: ast.expr, switches: dict[str, object]) -> object:
    """The value a condition has when Triton compiles it, where the source tells: a literal, a switch
    (`switches`: constexpr parameters at their default), and `not`, `and`, `or` of those; else `_UNKNOWN`."""
    if isinstance(test, ast.Constant):
        return bool(test.value)
    if isinstance(test, ast.Name):
        return bool(switches[test.id]) if test.id in switches else _UNKNOWN
    if isinstance(test, ast.UnaryOp) and isinstance(test.op, ast.Not):
        inner = _folded(test.operand, switches)
        return _UNKNOWN if inner is _UNKNOWN else not inner
    if isinstance(test, ast.BoolOp):
        values = [_folded(v, switches) for v in test.values]
        decisive = isinstance(test.op, ast.Or)  # the value that decides an `or` (True) or an `and` (False)
        if decisive in values:
            return decisive
        return _UNKNOWN if _UNKNOWN in values else not decisive
    return _UNKNOWN


def _switches(fn: py.Function, imports: dict[str, str], source: SourceFile,
              launches: list[ast.Call]) -> dict[str, object]:
    """The function's constexpr parameters with a literal default that no keyword of the module sets to a literal
    of the other truth (`DEBUG: tl.constexpr = False`, and no `DEBUG=True` in the module), nor a launch of it in
    the module (`launches`) by position (`kernel[grid](x, True)`), with that default."""
    defaults = py.defaults(fn)
    positional = [a.arg for a in [*fn.args.posonlyargs, *fn.args.args]]
    out: dict[str, object] = {}
    for arg in py.parameters(fn):
        default = defaults.get(arg.arg)
        if not isinstance(default, ast.Constant) or not py.is_constexpr(arg.annotation, imports):
            continue
        if any(_turns(value, bool(default.value)) for value in _settings(source).get(arg.arg, ())):
            continue
        at = positional.index(arg.arg) if arg.arg in positional else None
        if at is not None and any(_turns_by_position(call, at, bool(default.value)) for call in launches):
            continue
        out[arg.arg] = default.value
    return out


def _turns_by_position(call: ast.Call, at: int, default: bool) -> bool:
    """Whether a launch passes a literal of the other truth than the default's at position `at`."""
    for i, arg in enumerate(call.args):
        if isinstance(arg, ast.Starred):
            return False  # the positions after it are not known
        if i == at:
            return isinstance(arg, ast.Constant) and bool(arg.value) != default
    return False


def _launches(tree: ast.Module, names: set[str]) -> dict[str, list[ast.Call]]:
    """The launches in the module of each kernel, by the names it is launched under (`kernel[grid](...)`,
    `kernel.run(...)`): `names` maps to itself, and a name bound to `triton.jit(kernel)` to the kernel."""
    out: dict[str, list[ast.Call]] = {}
    for node in ast.walk(tree):
        if not isinstance(node, ast.Call):
            continue
        func = node.func
        if isinstance(func, ast.Subscript) and isinstance(func.value, ast.Name):
            launched = func.value.id
        elif isinstance(func, ast.Attribute) and func.attr == "run" and isinstance(func.value, ast.Name):
            launched = func.value.id
        else:
            continue
        if launched in names:
            out.setdefault(launched, []).append(node)
    return out


def _applied_jit(tree: ast.Module, imports: dict[str, str]) -> dict[str, tuple[str, str, ast.Call]]:
    """Functions made kernels by a call rather than a decorator (`k = triton.jit(_k)`, `gluon.jit(_k)`): the
    function's name -> (the name the result is bound to, "triton" or "gluon", the call)."""
    out: dict[str, tuple[str, str, ast.Call]] = {}
    for stmt in py.statements(tree):
        if not (isinstance(stmt, ast.Assign) and len(stmt.targets) == 1 and isinstance(stmt.targets[0], ast.Name)):
            continue
        call = stmt.value
        if not (isinstance(call, ast.Call) and call.args and isinstance(call.args[0], ast.Name)):
            continue
        kind = py.jit_kind(py.qualified(call.func, imports))
        if kind is not None:
            out.setdefault(call.args[0].id, (stmt.targets[0].id, kind, call))
    return out


def _settings(source: SourceFile) -> dict[str, list[ast.expr]]:
    """Name -> the values the module's code gives it (computed once per module): a keyword (`DEBUG=True` in a
    call), an assignment to the name or to an attribute of that name (`DEBUG = True`, `cfg.DEBUG = True`), a
    parameter's default (`def run(x, DEBUG=True)`) or a dict's entry (`{"DEBUG": True}` spread into a launch).
    Comments and strings set nothing: `# run with DEBUG=True` is prose."""
    found: dict[str, list[ast.expr]] | None = source.derived.get("kg204_settings")
    if found is not None:
        return found
    found = {}
    for node in ast.walk(source.tree):
        if isinstance(node, ast.keyword) and node.arg is not None:
            found.setdefault(node.arg, []).append(node.value)
        elif isinstance(node, ast.Assign):
            for target in node.targets:
                _set(found, target, node.value)
        elif isinstance(node, (ast.AnnAssign, ast.NamedExpr)) and node.value is not None:
            _set(found, node.target, node.value)
        elif isinstance(node, ast.Dict):
            for key, value in zip(node.keys, node.values):
                if isinstance(key, ast.Constant) and isinstance(key.value, str):
                    found.setdefault(key.value, []).append(value)
        elif isinstance(node, ast.arguments):
            positional = [*node.posonlyargs, *node.args]
            pairs: list[tuple[ast.arg, ast.expr | None]] = [
                *zip(positional[len(positional) - len(node.defaults):], node.defaults),
                *zip(node.kwonlyargs, node.kw_defaults)]
            for param, given in pairs:
                if given is not None:
                    found.setdefault(param.arg, []).append(given)
    source.derived["kg204_settings"] = found
    return found


def _set(found: dict[str, list[ast.expr]], target: ast.expr, value: ast.expr) -> None:
    name = target.id if isinstance(target, ast.Name) else target.attr if isinstance(target, ast.Attribute) else None
    if name is not None:
        found.setdefault(name, []).append(value)


def _turns(value: ast.expr, default: bool) -> bool:
    """Whether a value, as written, is a literal of the other truth than the default's (`True` against `False`): a
    value that is not a literal (`DEBUG=args.debug`) is a caller's own debugging, not a launch kgate gates with the
    switch on."""
    try:
        written = ast.literal_eval(value)
    except (ValueError, TypeError, SyntaxError, MemoryError, RecursionError):
        return False
    return bool(written) != default


def _never_compiled(fn: ast.AST, switches: dict[str, object]) -> set[ast.stmt]:
    """The statements of branches a condition Triton folds rules out (`_folded`): the body of `if False:` or
    `while DEBUG:` with DEBUG off, the `else` of `if True:`."""
    dead: set[ast.stmt] = set()
    for stmt in py.statements(fn):
        if not isinstance(stmt, (ast.If, ast.While)) or (value := _folded(stmt.test, switches)) is _UNKNOWN:
            continue
        for branch in (stmt.orelse,) if value else (stmt.body,):
            for inner in branch:
                dead.update(py.statements(inner))
    return dead


def check(source: SourceFile, ctx: SourceContext) -> Iterable[Report]:
    info = py.info(source)
    if any(name == "cutlass" or name.startswith("cutlass.") for name in info.imports.values()):
        yield from _cute_prints(source, info)
    if not info.uses_triton() or checks_kernels(source.rel):
        return
    imports = info.imports
    applied = _applied_jit(info.tree, imports)
    launches: dict[str, list[ast.Call]] | None = None
    for fn in info.functions:
        by_call = applied.get(fn.name) if not py.is_kernel(fn, imports) else None
        if by_call is not None:
            debug = py.argument(by_call[2], "debug")
            if isinstance(debug, ast.Constant) and debug.value is True:
                continue
            language: str | None = by_call[1]
        elif _gated_jit(fn, imports):
            language = py.kernel_language(fn, imports)
        else:
            continue
        prefix = "gl" if language == "gluon" else "tl"
        prints = [(stmt, node, what) for stmt in py.statements(fn) for node in py.expressions(stmt)
                  if (what := _print(node, imports, prefix)) is not None]
        if not prints:
            continue
        if launches is None:
            launches = _launches(info.tree, {fn.name for fn in info.functions} | {a[0] for a in applied.values()})
        names = {fn.name, by_call[0]} if by_call is not None else {fn.name}
        launched = [c for n in names for c in launches.get(n, [])]
        if not launched and _unused_debug_helper(fn, names, imports, source, ctx):
            continue
        dead = _never_compiled(fn, _switches(fn, imports, source, launched))
        for stmt, node, what in prints:
            if stmt in dead:
                continue
            jit = "gluon.jit" if prefix == "gl" else "triton.jit"
            yield Report(f"{what} in `@{jit}` function `{fn.name}`: every thread of every launch prints "
                         f"through the host (remove it, or use {prefix}.static_print for compile-time values)",
                         scope=fn.name, **source.span(node))


_PURE_BUILTINS = frozenset({"str", "int", "float", "bool", "len", "range", "min", "max", "abs", "print"})


def _unused_debug_helper(fn: py.Function, names: set[str], imports: dict[str, str], source: SourceFile,
                         ctx: SourceContext) -> bool:
    """Whether a jit function with a print is a debug helper nothing reaches: its only effect is printing (every call
    in it is to `triton.language`, never a load, a store or an atomic, or to a builtin), no decorator of the project's
    registers it, no code of its module names it, and no other module of the project imports it."""
    if any(not py.makes_kernel(py.qualified(d.func if isinstance(d, ast.Call) else d, imports))
           for d in fn.decorator_list):
        return False
    for node in ast.walk(fn):
        if not isinstance(node, ast.Call):
            continue
        if isinstance(node.func, ast.Name) and node.func.id in _PURE_BUILTINS and node.func.id not in imports:
            continue
        module, _, op = (py.qualified(node.func, imports) or "").rpartition(".")
        if not py.is_triton_language(module) or "load" in op or "store" in op or op.startswith("atomic"):
            return False
    if _named(source, fn, names):
        return False
    project = modules(ctx.shared, source.path, source.rel)
    return not any(project.importing(source.path, name) for name in names)


def _named(source: SourceFile, fn: py.Function, names: set[str]) -> bool:
    """Whether the module's code names any of `names` outside the function's own definition: a call, a launch, an
    attribute, a string (`__all__`, a registry's key)."""
    own = {id(node) for node in ast.walk(fn)}
    for node in ast.walk(source.tree):
        if id(node) in own:
            continue
        if isinstance(node, ast.Name) and node.id in names or isinstance(node, ast.Attribute) and node.attr in names \
                or isinstance(node, ast.Constant) and node.value in names:
            return True
    return False


_CUTE_KERNEL = "cutlass.cute.kernel"
_CUTE_PRINTF = "cutlass.cute.printf"


def _cute_prints(source: SourceFile, info: py.ParsedModule) -> Iterable[Report]:
    """`cute.printf` in a CuTe DSL `@cute.kernel` function: the device's printf, run by every thread. Python's `print`
    there runs once while the DSL traces the kernel, and a `@cute.jit` function is host code: neither is reported."""
    imports = info.imports
    for fn in info.functions:
        if not any(py.qualified(d.func if isinstance(d, ast.Call) else d, imports) == _CUTE_KERNEL
                   for d in fn.decorator_list):
            continue
        for stmt in py.statements(fn):
            for node in py.expressions(stmt):
                if isinstance(node, ast.Call) and py.qualified(node.func, imports) == _CUTE_PRINTF:
                    yield Report(f"cute.printf in `@cute.kernel` function `{fn.name}`: every thread of every launch "
                                 f"prints through the host (remove it, or print at compile time with Python's print, "
                                 f"which the DSL runs once as it traces the kernel)", scope=fn.name, **source.span(node))


def _print(node: ast.AST, imports: dict[str, str], prefix: str) -> str | None:
    """What a device print is called as (`tl.device_print`, `print`), or None for anything else."""
    if not isinstance(node, ast.Call):
        return None
    if _device_print(py.qualified(node.func, imports)):
        return f"{prefix}.device_print"
    if isinstance(node.func, ast.Name) and node.func.id == "print" and "print" not in imports:
        return "print"
    return None


RULE = Rule(
    code="KG204",
    name="device-print",
    layer="python",
    severity=Severity.ERROR,
    summary="A device print left in a Triton or CuTe DSL kernel: every launch serialises its output through the host",
    check=check,
    doc=__doc__ or "",
    files=("*.py",),
    # The rule runs only on files holding one of these bytes: keep it narrow.
    prefilter=(b"print",),
    requires=((*py.TRITON_MARKERS, b"cute"),),  # it reads only modules that reach Triton or CuTe (`cutlass.cute`)
    reads=frozenset({Artifact.SOURCE}),
)
