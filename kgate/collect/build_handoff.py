"""A Python build script that hands its architectures to another build tool, and the folder that build reads.

A function of a build script that runs `make`, `cmake` or `ninja` through `subprocess` in another folder
(`cwd=`, `-C`, `-S`) builds that folder's sources, so the architectures the function names are that
folder's build's. The folder is followed where it is written as a literal path: strings, `__file__`,
names bound to one, `Path(...) / "sub"`, `.parent`, `.resolve()`, `os.path.join` / `dirname` / `abspath`.
"""

from __future__ import annotations

import ast
import os

from kgate.collect import pysource as py

# Another build tool run by a Python build script, and the runners that start it.
_BUILD_TOOLS = frozenset({"make", "gmake", "cmake", "ninja"})
_RUNNERS = frozenset({"subprocess.run", "subprocess.call", "subprocess.check_call", "subprocess.check_output",
                      "subprocess.Popen"})
_FOLDER_FLAGS = ("-C", "-S", "--directory")


def handed_on(tree: ast.Module, path: str, here: str) -> list[tuple[int, int, str | None]]:
    """(first line, last line, build folder) of each function of a Python build script that runs `make`, `cmake` or
    `ninja` in another folder (`cwd=`, `-C`, `-S`): the architectures that function names go to that build, whose
    sources are the folder's. The folder is None where its path is not a literal this reading can follow."""
    imports = py.import_map(tree)
    module = _assignments(tree.body)
    out: list[tuple[int, int, str | None]] = []
    for fn in py.functions(tree):
        local = {**module, **_assignments(fn.body)}
        for node in ast.walk(fn):
            if not isinstance(node, ast.Call) or py.qualified(node.func, imports) not in _RUNNERS or not node.args:
                continue
            argv = node.args[0]
            items = list(argv.elts) if isinstance(argv, (ast.List, ast.Tuple)) else []
            words = [item.value if isinstance(item, ast.Constant) and isinstance(item.value, str) else None
                     for item in items]
            if not words or words[0] is None or os.path.basename(words[0]) not in _BUILD_TOOLS:
                continue
            where: list[ast.expr] = []
            cwd = py.argument(node, "cwd")
            if cwd is not None:
                where.append(cwd)
            where += [items[i + 1] for i, word in enumerate(words[:-1]) if word in _FOLDER_FLAGS]
            if not where:
                continue  # runs in the current folder: the build script's own
            folder: str | None = here
            for expr in where:
                step = _path(expr, local, path, 0)
                folder = None if step is None or folder is None else os.path.normpath(os.path.join(folder, step))
            out.append((fn.lineno, fn.end_lineno or fn.lineno, folder))
    return out


def _assignments(body: list[ast.stmt]) -> dict[str, ast.expr]:
    """Name -> the value of its last plain assignment among these statements (nested blocks included)."""
    out: dict[str, ast.expr] = {}
    for stmt in body:
        for node in ast.walk(stmt):
            if isinstance(node, ast.Assign) and len(node.targets) == 1 and isinstance(node.targets[0], ast.Name):
                out[node.targets[0].id] = node.value
    return out


def _path(expr: ast.expr, names: dict[str, ast.expr], file: str, depth: int) -> str | None:
    """The path a literal path expression names: strings, `__file__`, names assigned one, `/`, `Path(...)`,
    `.parent`, `.resolve()`, `os.path.join` / `dirname` / `abspath`; None for anything else."""
    if depth > 8:
        return None
    if isinstance(expr, ast.Constant) and isinstance(expr.value, str):
        return expr.value
    if isinstance(expr, ast.Name):
        if expr.id == "__file__":
            return os.path.abspath(file)
        value = names.get(expr.id)
        return None if value is None else _path(value, names, file, depth + 1)
    if isinstance(expr, ast.BinOp) and isinstance(expr.op, ast.Div):
        left, right = _path(expr.left, names, file, depth + 1), _path(expr.right, names, file, depth + 1)
        return None if left is None or right is None else os.path.join(left, right)
    if isinstance(expr, ast.Attribute) and expr.attr == "parent":
        inner = _path(expr.value, names, file, depth + 1)
        return None if inner is None else os.path.dirname(inner)
    if isinstance(expr, ast.Call):
        name = py.dotted(expr.func) or ""
        tail = name.rpartition(".")[2]
        if isinstance(expr.func, ast.Attribute) and tail in ("resolve", "absolute") and not expr.args:
            return _path(expr.func.value, names, file, depth + 1)
        parts = [part for part in (_path(arg, names, file, depth + 1) for arg in expr.args) if part is not None]
        if not parts or len(parts) != len(expr.args):
            return None
        if tail in ("Path", "PurePath", "join"):
            return os.path.join(*parts)
        if tail == "dirname" and len(parts) == 1:
            return os.path.dirname(parts[0])
        if tail in ("abspath", "realpath") and len(parts) == 1:
            return parts[0]
    return None

