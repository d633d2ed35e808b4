"""## What it does
Flags a device print left in a `@triton.jit` or `@gluon.jit` function: a
call to `tl.device_print` (however `triton.language` is imported) or
Gluon's `gl.device_print`, or to Python's `print`, which Triton and Gluon
compile into the same device print.
`tl.static_print`, which prints once while compiling, is not reported, nor
is a kernel declared a debug kernel with `@triton.jit(debug=True)` (a
checker whose prints and `tl.device_assert`s are its purpose).

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
    if DEBUG:  # DEBUG: tl.constexpr, False in every launch kgate gates
        tl.device_print("x", x)
```

A print inside a constexpr-guarded branch is still reported (the rule
reads the source, not the specialisation); add
`# kgate: ignore[KG204] <reason>` on that line. A print in a branch whose
condition is a literal (`if False:`, `if 0:`, the `else` of `if True:`,
`while False:`) is not reported: Triton folds the condition while
compiling and none of the branch reaches the kernel.

## Options
None.
"""

from __future__ import annotations

import ast
from collections.abc import Iterable

from kgate.collect import pysource as py
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


def _literal(test: ast.expr) -> ast.Constant | None:
    """The literal a condition is, `not` of one included (Triton folds both while compiling), else None."""
    if isinstance(test, ast.UnaryOp) and isinstance(test.op, ast.Not):
        inner = _literal(test.operand)
        return ast.Constant(not inner.value) if inner is not None else None
    return test if isinstance(test, ast.Constant) else None


def _never_compiled(fn: ast.AST) -> set[ast.stmt]:
    """The statements of branches a literal condition rules out: the body of `if False:` or `while False:`, the
    `else` of `if True:`."""
    dead: set[ast.stmt] = set()
    for stmt in py.statements(fn):
        if not isinstance(stmt, (ast.If, ast.While)) or (literal := _literal(stmt.test)) is None:
            continue
        for branch in (stmt.orelse,) if literal.value else (stmt.body,):
            for inner in branch:
                dead.update(py.statements(inner))
    return dead


def check(source: SourceFile, ctx: SourceContext) -> Iterable[Report]:
    info = py.info(source)
    if not info.uses_triton():
        return
    imports = info.imports
    for fn in info.functions:
        if not _gated_jit(fn, imports):
            continue
        prefix = "gl" if py.kernel_language(fn, imports) == "gluon" else "tl"
        dead = _never_compiled(fn)
        for stmt in py.statements(fn):
            if stmt in dead:
                continue
            for node in py.expressions(stmt):
                if not isinstance(node, ast.Call):
                    continue
                if _device_print(py.qualified(node.func, imports)):
                    what = f"{prefix}.device_print"
                elif isinstance(node.func, ast.Name) and node.func.id == "print" and "print" not in imports:
                    what = "print"
                else:
                    continue
                jit = "gluon.jit" if prefix == "gl" else "triton.jit"
                yield Report(f"{what} in `@{jit}` function `{fn.name}`: every thread of every launch prints "
                             f"through the host (remove it, or use {prefix}.static_print for compile-time values)",
                             scope=fn.name, **source.span(node))


RULE = Rule(
    code="KG204",
    name="device-print",
    layer="python",
    severity=Severity.ERROR,
    summary="A device print left in a Triton kernel: every launch serialises its output through the host",
    check=check,
    doc=__doc__ or "",
    files=("*.py",),
    # The rule runs only on files holding one of these bytes: keep it narrow.
    prefilter=(b"print",),
    requires=(py.TRITON_MARKERS,),  # it reads only modules that reach Triton
    reads=frozenset({Artifact.SOURCE}),
)
