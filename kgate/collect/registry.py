"""Registered Triton and CuTe DSL kernels: from configuration and from `kgate.register` decorators.

Decorators are read from the source (ast), never by importing the module:
their arguments must be literals, exactly the values a `[[tool.kgate.triton]]`
table would hold. Both ways produce the same `TritonEntry`; on a `@cute.jit`
function, the same `CuteEntry` as a `[[tool.kgate.cute]]` table. The CuTe DSL
calls a capture recorded are gated as registrations of them (`kgate.core.cute`).
"""

from __future__ import annotations

import ast
import json
import re
import sys
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

from kgate.collect import captures
from kgate.collect.captures import CapturedSpec
from kgate.collect.files import named_rel, python_files
from kgate.collect.modules import import_roots, module_name
from kgate.collect.pynames import Resolver, exports
from kgate.collect.pysource import dotted, expressions, is_triton_language, module_constants
from kgate.collect.source import MAX_PARSE_BYTES, UnreadableSource, parse_python
from kgate.core.config import Config, PythonEntry, parse_cute_entry, parse_triton_entry
from kgate.core.cute import DTYPE_PREFIX
from kgate.core.errors import ConfigError

# A module that can use the decorator imports kgate itself (`import kgate [as k]`, `import os, kgate`) or
# the name (`from kgate import register`, also in parentheses over several lines, or `*`); kgate's own
# modules and most of a project do neither, and are not parsed at all.
_IMPORTS_KGATE = re.compile(
    rb"^[ \t]*(?:import[ \t][^\n]*\bkgate\b|from[ \t]+kgate[ \t]+import\b[^\n]*(?:\bregister\b|\(|\*))", re.MULTILINE)


def _statements(tree: ast.Module) -> list[ast.stmt]:
    """The module's top-level statements, with the bodies of top-level if/try/with blocks (where
    imports and kernel definitions live); function and class bodies are not entered."""
    out: list[ast.stmt] = []
    stack: list[ast.stmt] = list(reversed(tree.body))
    while stack:
        node = stack.pop()
        out.append(node)
        if isinstance(node, (ast.If, ast.Try, ast.With)):
            nested = list(node.body) + list(getattr(node, "orelse", [])) + list(getattr(node, "finalbody", []))
            for handler in getattr(node, "handlers", []):
                nested.extend(handler.body)
            stack.extend(reversed(nested))
    return out


def triton_entries(config: Config) -> list[PythonEntry]:
    """Every registered Python kernel of the project (Triton, Gluon, CuTe DSL), configuration first, then decorators
    by path, then the CuTe DSL calls the capture file records."""
    entries: list[PythonEntry] = [*config.triton, *config.cute]
    roots = import_roots(config.root, config.python_path)
    for path in python_files(config.root, config.exclude + config.extend_exclude):
        try:
            data = path.read_bytes()
        except OSError:
            continue
        if b"register" in data and _IMPORTS_KGATE.search(data):
            if len(data) > MAX_PARSE_BYTES:  # its registrations cannot be read: say so rather than skip them
                raise ConfigError(f"{named_rel(path, config.root)}: too large to read kgate.register decorators from "
                                  f"({len(data) / 2**20:.1f} MB): add it to extend-exclude if it is generated")
            entries.extend(decorator_entries(path, data, config.root, roots))
    # A kernel may be registered several times (two dtypes, two argument sets); the same fields twice is a slip.
    seen: dict[str, str] = {}
    for entry in entries:
        fields = json.dumps(entry.to_json(), sort_keys=True, default=str)
        if fields in seen:
            raise ConfigError(f"{entry.kernel} is registered twice with the same fields: {seen[fields]} and "
                              f"{entry.origin}")
        seen[fields] = entry.origin
    return entries + captures.load(config.root / config.capture, config.capture).cute


def captured_specs(config: Config) -> list[CapturedSpec]:
    """The specialisations recorded in the project's capture file (none when it has no such file)."""
    return captures.load(config.root / config.capture, config.capture).entries


def triton_kernels(entries: list[PythonEntry], captured: list[CapturedSpec]) -> list[str]:
    """Every Triton kernel to gate, registered or captured, sorted."""
    return sorted({e.kernel for e in entries} | {c.spec.kernel for c in captured})


def decorator_entries(path: Path, data: bytes, root: Path, roots: list[Path]) -> list[PythonEntry]:
    rel = named_rel(path, root)
    try:
        tree = parse_python(data, rel)
    except UnreadableSource as exc:
        # Its registrations cannot be read, and a lint finding about it may be left out of the selection: say so
        # rather than gate the project without its kernels (as for a file too large to read).
        raise ConfigError(f"{rel}:{exc.line}: cannot read its kgate.register decorators: {exc.message} (read as "
                          f"Python {sys.version_info.major}.{sys.version_info.minor}, the Python kgate runs in)") \
            from None
    kgate_names, register_names = _aliases(tree)
    if not kgate_names and not register_names:
        return []
    constants = module_constants(tree)
    resolver, own = Resolver([str(r) for r in roots]), exports(tree)

    def language(node: ast.expr) -> bool:
        """Triton's language module, under any name the module's imports give it (the project's own too)."""
        written = dotted(node)
        return _is_triton_language(node) or written is not None and is_triton_language(
            resolver.qualify(str(path), written, own))

    def is_register(node: ast.AST) -> bool:
        return _is_register(node, kgate_names, register_names)

    def is_cute_jit(node: ast.expr) -> bool:
        written = dotted(node.func if isinstance(node, ast.Call) else node)
        return written is not None and resolver.qualify(str(path), written, own) == "cutlass.cute.jit"

    def cutlass_module(node: ast.expr) -> str | None:
        """`cutlass.` for CuTe DSL's modules (`cutlass`, `cutlass.cute`): their dtypes are written so."""
        written = dotted(node)
        qualified = resolver.qualify(str(path), written, own) if written is not None else None
        return DTYPE_PREFIX if qualified in ("cutlass", "cutlass.cute") else None

    out = []
    for node in _statements(tree):
        # A registration the reader cannot see would leave its kernel ungated without a word: every use of
        # the decorator at module level is either one it reads or an error.
        _check_other_uses(node, is_register, rel)
        if not isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
            continue
        for dec in node.decorator_list:
            if is_register(dec):
                raise ConfigError(f"{rel}:{dec.lineno}: kgate.register must be called, with the registration's "
                                  f"fields: @kgate.register(signature=...)")
            if not (isinstance(dec, ast.Call) and is_register(dec.func)):
                continue
            where = f"{rel}:{dec.lineno}"
            located = module_name(path, roots)
            if located is None:
                raise ConfigError(f"{where}: cannot tell the module name of this file "
                                  f"(add its import root to python-path)")
            if dec.args:
                raise ConfigError(f"{where}: kgate.register takes keyword arguments only")
            cute = any(is_cute_jit(other) for other in node.decorator_list)
            fields: dict[str, Any] = {}
            for keyword in dec.keywords:
                if keyword.arg is None:
                    raise ConfigError(f"{where}: kgate.register(**...) cannot be read without running the code; "
                                      f"write the fields out")
                if keyword.arg == "kernel":
                    raise ConfigError(f"{where}: kgate.register takes no 'kernel': it is the decorated function")
                try:
                    fields[keyword.arg] = literal(keyword.value, constants, language=cutlass_module if cute else language)
                except ValueError as exc:
                    raise ConfigError(f"{where}: kgate.register({keyword.arg}=...): {exc}") from None
            fields = {k: _to_toml_like(v) for k, v in fields.items()}
            fields["kernel"] = f"{located[0]}:{node.name}"
            out.append(parse_cute_entry(fields, where) if cute else parse_triton_entry(fields, where))
    return out


def _check_other_uses(node: ast.stmt, is_register: Callable[[ast.AST], bool], rel: str) -> None:
    """ConfigError for a use of kgate.register in a module-level statement other than a decorator of a function
    (`k = kgate.register(...)(k)`, a decorated class, an alias): kgate reads registrations from decorators only."""
    if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
        roots: list[ast.AST] = list(node.decorator_list)
        allowed: set[int] = set()
        if not isinstance(node, ast.ClassDef):
            roots += [d for d in (*node.args.defaults, *node.args.kw_defaults) if d is not None]
            # The decorator itself, called (read by the caller) or bare (an error of its own there).
            allowed = {id(d.func) if isinstance(d, ast.Call) else id(d) for d in node.decorator_list}
        nodes: Iterator[ast.AST] = (n for root in roots for n in ast.walk(root))
    else:
        nodes, allowed = expressions(node), set()
    found = next((n for n in nodes if is_register(n) and id(n) not in allowed), None)
    if found is not None:
        how = "decorates a class" if isinstance(node, ast.ClassDef) else "is used other than as a decorator"
        raise ConfigError(f"{rel}:{getattr(found, 'lineno', node.lineno)}: kgate.register {how}: kgate reads "
                          f"registrations only from @kgate.register(...) on a module-level kernel function, so this "
                          f"one would never be gated")


class _NotLiteral(ValueError):
    pass


def literal(node: ast.expr, constants: dict[str, ast.expr], depth: int = 0,
            language: Callable[[ast.expr], bool | str | None] | None = None) -> Any:
    """The value of a literal expression: constants, containers, dict(k=...), module-level names, dtypes
    (`tl.bfloat16`: `language` says whether an expression is the dtypes' module, by default Triton's language by
    its spelling `tl` or `triton.language`; a string it answers is the prefix the dtype is written with, as
    "cutlass." for the CuTe DSL's `cutlass.BFloat16`)."""
    is_language = language or _is_triton_language
    if depth > 20:
        raise _NotLiteral("too deeply nested")
    if isinstance(node, ast.Constant):
        return node.value
    if isinstance(node, (ast.List, ast.Tuple)):
        return [literal(e, constants, depth + 1, language) for e in node.elts]
    if isinstance(node, ast.Dict):
        out = {}
        for key, value in zip(node.keys, node.values):
            if key is None:
                merged = literal(value, constants, depth + 1, language)
                if not isinstance(merged, dict):
                    raise _NotLiteral("** of something that is not a dict")
                out.update(merged)
            else:
                out[literal(key, constants, depth + 1, language)] = literal(value, constants, depth + 1, language)
        return out
    if isinstance(node, ast.Call) and isinstance(node.func, ast.Name) and node.func.id == "dict" and not node.args:
        out = {}
        for kw in node.keywords:
            if kw.arg is None:
                merged = literal(kw.value, constants, depth + 1, language)
                if not isinstance(merged, dict):
                    raise _NotLiteral("** of something that is not a dict")
                out.update(merged)
            else:
                out[kw.arg] = literal(kw.value, constants, depth + 1, language)
        return out
    if isinstance(node, ast.UnaryOp) and isinstance(node.op, ast.USub):
        value = literal(node.operand, constants, depth + 1, language)
        if isinstance(value, (int, float)) and not isinstance(value, bool):
            return -value
    if isinstance(node, ast.Name) and node.id in constants:
        return literal(constants[node.id], constants, depth + 1, language)
    module = is_language(node.value) if isinstance(node, ast.Attribute) else None
    if isinstance(node, ast.Attribute) and module:
        # A dtype such as tl.bfloat16, checked when the kernel is compiled.
        return f"{module if isinstance(module, str) else 'tl.'}{node.attr}"
    raise _NotLiteral(f"must be a literal (numbers, strings, None, tl dtypes, lists, dicts, dict(...), or a "
                      f"module-level constant assigned one), not {_shown(node)}")


def _is_triton_language(node: ast.expr) -> bool:
    """`tl` or `triton.language`, the usual names of Triton's language module."""
    if isinstance(node, ast.Name):
        return node.id == "tl"
    return isinstance(node, ast.Attribute) and node.attr == "language" and isinstance(node.value, ast.Name) \
        and node.value.id == "triton"


def _shown(node: ast.expr) -> str:
    """An expression as written, in backticks, short enough for a one-line error."""
    try:
        text = ast.unparse(node)
    except RecursionError:  # ast.unparse recurses per node
        return "an expression nested too deeply to show"
    return f"`{text}`" if len(text) <= 60 else f"`{text[:57]}...`"


def _to_toml_like(value: Any) -> Any:
    """Tuples become lists, as they would in TOML."""
    if isinstance(value, tuple):
        return [_to_toml_like(v) for v in value]
    if isinstance(value, list):
        return [_to_toml_like(v) for v in value]
    if isinstance(value, dict):
        return {k: _to_toml_like(v) for k, v in value.items()}
    return value


def _aliases(tree: ast.Module) -> tuple[set[str], set[str]]:
    kgate_names: set[str] = set()
    register_names: set[str] = set()
    for node in _statements(tree):
        if isinstance(node, ast.Import):
            for alias in node.names:
                if alias.name == "kgate":
                    kgate_names.add(alias.asname or "kgate")
                elif alias.name.startswith("kgate.") and not alias.asname:
                    kgate_names.add("kgate")  # `import kgate.x` binds kgate too
        elif isinstance(node, ast.ImportFrom) and node.module == "kgate" and not node.level:
            for alias in node.names:
                if alias.name in ("register", "*"):  # kgate's __all__ exports register
                    register_names.add(alias.asname or "register")
    return kgate_names, register_names


def _is_register(func: ast.AST, kgate_names: set[str], register_names: set[str]) -> bool:
    if isinstance(func, ast.Attribute) and func.attr == "register":
        return isinstance(func.value, ast.Name) and func.value.id in kgate_names
    return isinstance(func, ast.Name) and func.id in register_names and isinstance(func.ctx, ast.Load)
