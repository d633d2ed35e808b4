"""## What it does
Flags `TRITON_INTERPRET` switched on inside the test suite: in a test
module (`test_*.py`, `*_test.py`), a `conftest.py`, or pytest's
configuration (`env` of pytest-env in `pytest.ini`, `tox.ini`, `setup.cfg`,
`pytest.toml`, or `pyproject.toml` under `[tool.pytest.ini_options]`,
`[tool.pytest]` or `[tool.pytest_env]`), or tox's `setenv` / `set_env` of
`[testenv]` in `tox.ini`, which every tox environment inherits (a named one,
`[testenv:interp]`, is the job of its own the interpreter belongs in). Recognised in Python:
`os.environ[...] = `, `os.environ.setdefault`, `os.environ.update(...)`,
`os.environ |= {...}`, `os.putenv`, `monkeypatch.setenv`,
`monkeypatch.setitem(os.environ, ...)`, `mock.patch.dict(os.environ, ...)`,
`triton.knobs.runtime.interpret = True`, and `setattr` (or
`monkeypatch.setattr`) of `triton.knobs.runtime`'s `interpret`.

## Why is this bad?
Triton reads the switch when a kernel is decorated with `@triton.jit`, and
the decision sticks to the kernel. Set once in a test process, every kernel
imported afterwards runs on the CPU interpreter: the suite stays green
without compiling a single kernel, so compiler errors, register spills and
wrong code generation all pass. Which tests are affected depends on import
order, so the same test can be real in one run and interpreted in another.

Gluon has no interpreter: `@gluon.jit` ignores the switch (measured with
Triton 3.6 and 3.9), so a Gluon kernel is compiled as usual, and on a
machine without a GPU its launch fails for want of a driver. The switch
still sends every `@triton.jit` kernel of the process to the interpreter,
so it is reported in a project of both.

## Example
```python
# conftest.py
import os

os.environ["TRITON_INTERPRET"] = "1"
```

## Use instead
Run the interpreter in its own process, so it cannot leak into the rest
of the suite:

```python
subprocess.run([sys.executable, "-m", "pytest", "tests/interp"],
               env={**os.environ, "TRITON_INTERPRET": "1"}, check=True)
```

or set it on the command line of a separate CI job
(`TRITON_INTERPRET=1 pytest tests/interp`). Dictionaries built for a child
process's `env=` are not reported, nor are values that switch the
interpreter off (`"0"`, `"false"`, `"off"`, or removing the variable). What
switches it on is what Triton's boolean reader takes for true: `1`, `true`,
`on`, `yes` or `y`, in any case (Triton 3.9 reads `" 1"` with its space as
false, as a value written in Python reaches it; a configuration file's
value is trimmed by its reader).

## Fix
Unsafe (`kgate lint --fix --unsafe-fixes`): removes the setting. In Python,
a statement that does nothing else (`os.environ[...] = ...`,
`os.environ.setdefault(...)`, `os.putenv(...)`, `monkeypatch.setenv(...)`,
`monkeypatch.setitem(...)`, the `knobs` assignment or `setattr`) is deleted
as libcst deletes it (through libcst where it shares its line), keeping the
comments around it and its own comment, which stays on a line of its own (a block left empty gets `pass`); a setting inside a dictionary or
a `patch.dict` is left for you. In pytest's configuration the entry is
removed from `env` (or the key from `[tool.pytest_env]`). Unsafe because
the tests then run their kernels compiled, on a GPU: a suite that relied on
the interpreter needs a job of its own for it.

## Options
None.
"""

from __future__ import annotations

import ast
from collections.abc import Iterable, Iterator

from kgate.collect import pysource as py
from kgate.collect.pyenviron import Environ, environ_names
from kgate.collect.source import SourceFile
from kgate.core.artifacts import Artifact
from kgate.core.findings import Severity
from kgate.core.fix import Applicability, Edit, Fix
from kgate.core.rule import Report, Rule, SourceContext
from kgate.support.comments.config import toml_lines
from kgate.support.patterns import lazy

VARIABLE = "TRITON_INTERPRET"
# Values Triton's boolean environment reader (`getenv_bool`, in libtriton) takes for true, in any case and not
# trimmed: measured with Triton 3.9 ("yes" and "y" too; " 1" and "t" are false).
_TRUE = frozenset({"1", "true", "on", "yes", "y"})
_PYTHON_FILES = ("test_*.py", "*_test.py", "conftest.py")
_INI_SECTIONS = {"pytest.ini": ("pytest",), "tox.ini": ("pytest",), "setup.cfg": ("tool:pytest",)}
_MESSAGE = "TRITON_INTERPRET switched on {where}: every kernel decorated afterwards runs on the CPU interpreter"
_FIX = "remove the TRITON_INTERPRET setting: the tests then run compiled kernels (interpret in a job of its own)"


def _fix(edits: list[Edit]) -> Fix | None:
    return Fix(_FIX, Applicability.UNSAFE, tuple(edits)) if edits else None


def check(source: SourceFile, ctx: SourceContext) -> Iterable[Report]:
    name = source.name
    if name in _INI_SECTIONS:
        yield from _ini(source, _INI_SECTIONS[name])
    elif name in ("pyproject.toml", "pytest.toml", ".pytest.toml"):
        yield from _toml(source)
    else:
        yield from _python(source)


# --------------------------------------------------------------------------- Python


def _python(source: SourceFile) -> Iterator[Report]:
    info = py.info(source)
    tree, imports, constants = info.tree, info.imports, info.constants
    environ = Environ(VARIABLE, imports, constants, environ_names(tree, imports))
    where = "in a test module" if source.name != "conftest.py" else "in conftest.py"
    owners = _whole_statements(tree)
    for node in ast.walk(tree):
        for at, value in _settings(node, environ):
            if _switches_on(value, constants):
                owner = owners.get(id(at))
                fix = None
                if owner is not None:
                    span = source.span(owner)
                    fix = _fix([Edit(span["line"], span["col"] - 1, span["line"], span["col"] - 1,
                                     kind="delete-statement")])
                yield Report(_MESSAGE.format(where=where), scope=_scope(tree, at), fix=fix, **source.span(at))


def _whole_statements(tree: ast.Module) -> dict[int, ast.stmt]:
    """id of a setting's node -> the statement that does nothing but that setting (an assignment to one target,
    a call as a statement)."""
    out: dict[int, ast.stmt] = {}
    for stmt in ast.walk(tree):
        if isinstance(stmt, ast.Assign) and len(stmt.targets) == 1:
            out[id(stmt.targets[0])] = stmt
        elif isinstance(stmt, ast.Expr) and isinstance(stmt.value, ast.Call):
            out[id(stmt.value)] = stmt
    return out


def _settings(node: ast.AST, environ: Environ) -> Iterator[tuple[ast.AST, ast.expr | None]]:
    """(where, value) for each place this node sets TRITON_INTERPRET: in the process environment, or through
    Triton's knob (`triton.knobs.runtime.interpret`)."""
    yield from environ.settings(node)
    if isinstance(node, ast.Assign):
        for target in node.targets:
            if py.qualified(target, environ.imports) == "triton.knobs.runtime.interpret":
                yield target, node.value
    elif isinstance(node, ast.Call) and node.args and (
            isinstance(node.func, ast.Name) and node.func.id == "setattr"
            or isinstance(node.func, ast.Attribute) and node.func.attr == "setattr"):
        yield from _knob_setattr(node, environ.imports, environ.constants)


def _knob_setattr(node: ast.Call, imports: dict[str, str],
                  constants: dict[str, ast.expr]) -> Iterator[tuple[ast.AST, ast.expr | None]]:
    """`setattr(triton.knobs.runtime, "interpret", V)`, `monkeypatch.setattr(triton.knobs.runtime, "interpret",
    V)` and `monkeypatch.setattr("triton.knobs.runtime.interpret", V)`."""
    first = node.args[0]
    if py.qualified(first, imports) == "triton.knobs.runtime" and len(node.args) >= 3 \
            and py.string_value(node.args[1], constants) == "interpret":
        yield node, node.args[2]
    elif py.string_value(first, constants) == "triton.knobs.runtime.interpret" and len(node.args) >= 2:
        yield node, node.args[1]


def _switches_on(value: ast.expr | None, constants: dict[str, ast.expr]) -> bool:
    """True unless the value is a literal Triton reads as false; a value only known at run time counts."""
    if isinstance(value, ast.Name) and value.id in constants:
        value = constants[value.id]
    if isinstance(value, ast.Constant):
        return _truthy(value.value, trimmed=False)
    return True


def _truthy(value: object, trimmed: bool = True) -> bool:
    """Whether Triton reads the value as true; `trimmed`: a configuration file's value, which its reader trims
    (a Python string reaches the environment as written)."""
    if isinstance(value, bool):
        return value
    text = str(value)
    return (text.strip() if trimmed else text).lower() in _TRUE


def _scope(tree: ast.Module, at: ast.AST) -> str:
    line = getattr(at, "lineno", 0)
    best = ""
    for fn in py.functions(tree):
        if fn.lineno <= line <= (fn.end_lineno or fn.lineno):
            best = fn.name  # statements() yields outer functions first, so the innermost wins
    return best


# --------------------------------------------------------------------------- configuration files

_SECTION = lazy(r"^\s*\[([^\]]+)\]\s*$")
_KEY = lazy(r"^([A-Za-z0-9_.-]+)\s*[=:]\s*(.*)$")
# pytest-env entries: `[D:][R:]NAME=VALUE`
_ENV_ITEM = lazy(r"^\s*((?:[DR]:)*)\s*" + VARIABLE + r"\s*=\s*(.*?)\s*$")


def _ini(source: SourceFile, sections: tuple[str, ...]) -> Iterator[Report]:
    section = key = ""
    for number, line in enumerate(source.lines, 1):
        stripped = line.strip()
        if not stripped or stripped[0] in "#;":
            continue
        header = _SECTION.match(line)
        if header:
            section, key = header.group(1).strip(), ""
            continue
        if line[0] not in " \t":
            match = _KEY.match(line)
            key = match.group(1) if match else ""
            value = match.group(2) if match else ""
            offset = match.start(2) if match else 0
        else:
            value, offset = line, 0
        if section in sections and key == "env":
            where = "in pytest's env settings"
        elif source.name == "tox.ini" and section == "testenv" and key in ("setenv", "set_env"):
            # What every tox environment runs the suite under; a named one (`[testenv:interp]`) is a job of its own.
            where = "in tox's set_env for every test environment"
        else:
            continue
        item = _ENV_ITEM.match(value)
        if item and _truthy(item.group(2)):
            col = offset + value.index(VARIABLE) + 1
            # A line of its own goes; on the key's line, the value goes and `env =` stays.
            edit = Edit(number, 0, number + 1, 0) if offset == 0 and number < len(source.lines) \
                else Edit(number, offset, number, len(line))
            yield Report(_MESSAGE.format(where=where), line=number, col=col, scope=f"[{section}]", fix=_fix([edit]))


def _toml(source: SourceFile) -> Iterator[Report]:
    import sys

    if sys.version_info >= (3, 11):
        import tomllib
    else:  # pragma: no cover - Python 3.10
        import tomli as tomllib
    try:
        data = tomllib.loads(source.text)
    except tomllib.TOMLDecodeError:
        return  # kgate's configuration loader reports a broken pyproject.toml
    tool = data.get("tool", {}) if source.name == "pyproject.toml" else {"pytest": data.get("pytest", {})}
    found: list[str] = []
    pytest = _table(tool, "pytest")
    for header, table in (("pytest.ini_options", _table(pytest, "ini_options")), ("pytest", pytest)):
        env = table.get("env", [])
        for item in env if isinstance(env, list) else []:
            match = _ENV_ITEM.match(str(item))
            if match and _truthy(match.group(2)):
                found.append(header)
    pytest_env = tool.get("pytest_env", {})
    if isinstance(pytest_env, dict) and VARIABLE in pytest_env:
        value = pytest_env[VARIABLE]
        if _truthy(value.get("value", "") if isinstance(value, dict) else value):
            found.append("pytest_env")
    prefix = "tool." if source.name == "pyproject.toml" else ""
    for header in dict.fromkeys(found):
        line, col = _locate(source.lines, f"{prefix}{header}")
        yield Report(_MESSAGE.format(where="in pytest's env settings"), line=line, col=col,
                     scope=f"[{prefix}{header}]", fix=_fix(_toml_edits(source.text, source.lines, f"{prefix}{header}")))


# An entry of an `env` array, with the comma after it or the comma before it.
_ITEM = r"""(?P<quoted>(?P<q>["'])(?P<item>[^"'\n]*""" + VARIABLE + r"""[^"'\n]*)(?P=q))"""
_ITEM_FORMS = (lazy(_ITEM + r"\s*,[ \t]*"), lazy(r",\s*" + _ITEM), lazy(_ITEM))
_TOML_KEY = lazy(r"^\s*[\"']?" + VARIABLE + r"[\"']?\s*=")


def _toml_edits(text: str, lines: list[str], table: str) -> list[Edit]:
    """Edits that take the switching-on entries out of one table: a `TRITON_INTERPRET = ...` key's line, an
    `env` entry (its line when it has one of its own). Read as TOML reads the file: a comment, a multi-line string
    or another string that holds the same text is left alone, and edits that would change anything but the
    setting (the table's other data, another key's value) are not offered."""
    code, masked, strings = toml_lines(text, lines)
    start = next((n for n, line in enumerate(code) if line is not None and (m := _SECTION.match(line))
                  and m.group(1).strip() == table), None)
    if start is None:
        return []
    edits = []
    for number in range(start + 1, len(lines)):
        line = code[number]
        if line is None:
            continue  # inside a multi-line string
        if _SECTION.match(line):
            break
        if VARIABLE not in line:
            continue
        whole = Edit(number + 1, 0, number + 2, 0) if number + 1 < len(lines) else Edit(number + 1, 0, number + 1,
                                                                                        len(line))
        key = _TOML_KEY.match(line)
        if key and (masked[number] or "")[key.end() - 1:key.end()] == "=":  # the `=` of a key, not in a string
            edits.append(whole)
            continue
        for form in _ITEM_FORMS:
            match = form.search(line)
            if match is None or (number, match.start("quoted")) not in strings:
                continue
            entry = _ENV_ITEM.match(match.group("item"))
            if entry is None or not _truthy(entry.group(2)):
                break
            rest = line[:match.start()] + line[match.end():]
            edits.append(whole if not rest.strip() else Edit(number + 1, match.start(), number + 1, match.end()))
            break
    return edits if _only_the_setting_goes(text, lines, edits, table) else []


def _only_the_setting_goes(text: str, lines: list[str], edits: list[Edit], table: str) -> bool:
    """Whether the edits change the file's data by the setting alone: its entries out of the table's `env`, its
    key out of the table."""
    import sys

    if sys.version_info >= (3, 11):
        import tomllib
    else:  # pragma: no cover - Python 3.10
        import tomli as tomllib
    new = list(lines)
    for edit in sorted(edits, key=lambda e: (e.line, e.col), reverse=True):
        if edit.end_line > edit.line:
            del new[edit.line - 1]
        else:
            row = new[edit.line - 1]
            new[edit.line - 1] = row[:edit.col] + row[edit.end_col:]
    try:
        before, after = tomllib.loads(text), tomllib.loads("\n".join(new))
    except tomllib.TOMLDecodeError:
        return False
    place = before
    for key in table.split("."):
        place = place.get(key, {}) if isinstance(place, dict) else {}
    if isinstance(place, dict):
        place.pop(VARIABLE, None)
        if isinstance(place.get("env"), list):
            place["env"] = [item for item in place["env"]
                            if not ((m := _ENV_ITEM.match(str(item))) and _truthy(m.group(2)))]
    return bool(before == after)


def _table(parent: dict, key: str) -> dict:
    value = parent.get(key, {})
    return value if isinstance(value, dict) else {}


def _locate(lines: list[str], table: str) -> tuple[int, int]:
    """Line and column of the variable's first mention after the table's header (or anywhere)."""
    start = 0
    for number, line in enumerate(lines):
        match = _SECTION.match(line)
        if match and match.group(1).strip() == table:
            start = number
            break
    for number in [*range(start, len(lines)), *range(start)]:
        col = lines[number].find(VARIABLE)
        if col >= 0:
            return number + 1, col + 1
    return start + 1, 1


RULE = Rule(
    code="KG203",
    name="interpret-in-tests",
    layer="python",
    severity=Severity.ERROR,
    summary="TRITON_INTERPRET set inside the test suite: kernels silently run on the CPU interpreter",
    check=check,
    doc=__doc__ or "",
    files=(*_PYTHON_FILES, *_INI_SECTIONS, "pyproject.toml", "pytest.toml", ".pytest.toml"),
    prefilter=(b"TRITON_INTERPRET", b"knobs"),
    reads=frozenset({Artifact.SOURCE}),
    fixes=True,
)
