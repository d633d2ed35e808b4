"""Autotuners of the project's own that round each key value before they look a tuning up (AutoGPTQ's
`custom_autotune` applied with `nearest_power_of_two=True` runs `key = tuple(2 ** int(math.log2(x) + 0.5) for x in
key)`): the keys of a kernel tuned so take a few values whatever the batch (KG201).
"""

from __future__ import annotations

import ast
import weakref
from collections.abc import Iterator

from kgate.collect import pyautotune
from kgate.collect import pysource as py
from kgate.collect.pyvalues import BUCKETING_FUNCTIONS

ALWAYS = ""  # the flag of a rounding no condition guards


def applied_call(at: ast.AST) -> ast.Call | None:
    """The call that names the autotuner (`tune(...)` of `tune(...)(kernel)` too), unless it is Triton's own."""
    call = at.func if isinstance(at, ast.Call) and isinstance(at.func, ast.Call) else at
    written = py.dotted(call.func) if isinstance(call, ast.Call) else None
    return call if isinstance(call, ast.Call) and written is not None and written.split(".")[0] != "triton" \
        else None


def rounds_keys(call: ast.Call, info: py.ParsedModule, path: str, rel: str) -> bool:
    """Whether the autotune call (`applied_call`) applies one of the project's autotuners that rounds every key
    value, always or under a flag the call turns on (`custom_autotune.autotune(..., nearest_power_of_two=True)`)."""
    project = pyautotune.Project(path, rel)
    found = pyautotune.Applications(info, path, project).resolve(py.dotted(call.func) or "")
    module = project.parsed(found[0]) if found is not None else None
    if module is None:
        return False
    flags = rounding_flags(module.tree)
    turned_on = {k.arg for k in call.keywords if isinstance(k.value, ast.Constant) and k.value.value is True}
    return ALWAYS in flags or bool(flags & turned_on)


def rounding_flags(tree: ast.Module) -> frozenset[str]:
    """The flags under which a function of the module rounds a key with a bucketing function (`if
    self.nearest_power_of_two: key = ...`), `ALWAYS` for one no flag guards. Read once per parsed module: every
    autotune the autotuner is applied by asks (a module's parse is kept for the run while it is unchanged)."""
    held = _FLAGS.get(tree)
    if held is None:
        held = _FLAGS[tree] = frozenset(flag for fn in ast.walk(tree) if isinstance(fn, py.Function)
                                        for stmt, flag in _guarded(fn.body, ALWAYS) if _rounds_key(stmt))
    return held


_FLAGS: weakref.WeakKeyDictionary[ast.Module, frozenset[str]] = weakref.WeakKeyDictionary()


def _guarded(body: list[ast.stmt], flag: str) -> Iterator[tuple[ast.stmt, str]]:
    """Each statement of a body, nested ones too (not those of inner definitions), with the innermost flag that
    guards it: `if self.flag:` or `if flag:`; the `else` of such a test is not under it, nor under the outer one."""
    for stmt in body:
        yield stmt, flag
        if isinstance(stmt, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
            continue
        if isinstance(stmt, ast.If):
            test = _flag(stmt.test)
            yield from _guarded(stmt.body, flag if test is None else test)
            if test is None:
                yield from _guarded(stmt.orelse, flag)
            continue
        for name in ("body", "orelse", "finalbody", "handlers"):
            yield from _guarded([s for s in getattr(stmt, name, None) or () if isinstance(s, ast.stmt)], flag)
        for handler in getattr(stmt, "handlers", None) or ():
            yield from _guarded(handler.body, flag)


def _flag(test: ast.expr) -> str | None:
    if isinstance(test, ast.Attribute) and isinstance(test.value, ast.Name) and test.value.id == "self":
        return test.attr
    return test.id if isinstance(test, ast.Name) else None


def _rounds_key(stmt: ast.stmt) -> bool:
    """`key = tuple(2 ** int(math.log2(x) + 0.5) for x in key)`: a name holding `key` assigned its own values
    through a bucketing function."""
    if not (isinstance(stmt, ast.Assign) and len(stmt.targets) == 1 and isinstance(stmt.targets[0], ast.Name)
            and "key" in stmt.targets[0].id.lower()):
        return False
    name = stmt.targets[0].id
    nodes = list(ast.walk(stmt.value))
    itself = any(isinstance(n, ast.Name) and n.id == name for n in nodes)
    bucketed = any(isinstance(n, ast.Call) and (py.dotted(n.func) or "").rsplit(".", 1)[-1] in BUCKETING_FUNCTIONS
                   for n in nodes)
    return itself and bucketed
