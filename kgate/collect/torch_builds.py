"""The PyTorch extensions a project's Python build scripts declare: the CUDA sources each compiles, and the nvcc flags
it compiles them with.

A `setup.py` `CUDAExtension(name, sources, extra_compile_args={"nvcc": [...]})` and a
`torch.utils.cpp_extension.load(name=..., sources=[...], extra_cuda_cflags=[...])` in a script beside the kernels
are the build of most kernel repositories that are PyTorch extensions, and no `compile_commands.json` records
them. A source such a build lists is a torch extension source (compiled with torch's flags, whether or not it
includes a torch header itself: Marlin's kernel file includes none), and the build's own nvcc flags (`-D`
sizes, `--use_fast_math`, `-std=`, `--maxrregcount`) are the flags it is compiled with.

Only what the script's text settles is taken: string literals, f-strings and `+`/`str()` of module-level
constants, `os.path.join`, and the folder of `__file__`; a source or flag written any other way (read from the
environment, computed in a loop, added to a list the script changes after giving it, a list or name it replaces,
binds again or takes items from) is left out, never guessed.
A linked script is read as run from the link's folder. Scripts are looked for beside the configured
sources and in the folders above them, up to the project root (`setup.py`, `run.py`, `build.py`...); a source
that two builds list with different flags is compiled with the options (each with its value) they share.
"""

from __future__ import annotations

import ast
import hashlib
import os
import shlex
from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path

from kgate.collect import pysource as py
from kgate.collect.cuda_flags import PASS_ON, split_flags
from kgate.support.atomicio import read_input_text

_MARKERS = ("cpp_extension", "CUDAExtension")
_LOADERS = ("load", "cpp_extension.load", "torch.utils.cpp_extension.load")


@dataclass(frozen=True)
class TorchBuild:
    """One extension a build script declares."""

    script: Path  # the build script
    line: int  # of the `CUDAExtension(` or `load(` call
    sources: tuple[Path, ...]  # the sources it lists that exist, resolved
    flags: tuple[str, ...]  # its nvcc flags as kgate keeps them (architectures, outputs and modes dropped)
    unsettled: tuple[str, ...] = ()  # its nvcc flags the text does not settle, as written (`f"-D_N_={HEAD_SIZE}"`)
    # A hash of the script's text, where some flag is unsettled: what such a flag stands for may change with any of
    # it (`HEAD_SIZE = int(os.environ.get("H", 64))` given another default), so a diff compares it whole.
    digest: str = ""

    def note(self, root: Path) -> str:
        """What a compile error of one of its sources adds: the flags kgate could not read, and where to give them."""
        if not self.unsettled:
            return ""
        try:
            where = self.script.relative_to(root.resolve()).as_posix()
        except ValueError:
            where = str(self.script)
        return (f"{where}:{self.line} builds it with nvcc flags whose values the script's text does not settle "
                f"({', '.join(self.unsettled)}): give them, with the values to gate, in its [[cuda]] table's `flags`")


def torch_builds(root: Path, sources: Iterable[Path]) -> list[TorchBuild]:
    """The torch extensions declared by the Python scripts beside `sources` and in the folders above them, up to
    `root`."""
    root = root.resolve()
    folders: set[Path] = set()
    for source in sources:
        folder = source.resolve().parent
        while folder not in folders and (folder == root or root in folder.parents):
            folders.add(folder)
            folder = folder.parent
    builds: list[TorchBuild] = []
    for folder in sorted(folders):
        try:
            scripts = sorted(p for p in folder.iterdir() if p.suffix == ".py" and p.is_file())
        except OSError:
            continue
        for script in scripts:
            builds.extend(_script_builds(script))
    return builds


def by_source(builds: list[TorchBuild]) -> dict[Path, TorchBuild]:
    """Each listed source's build; a source several builds list gets the flags they all give, in the first
    one's order."""
    out: dict[Path, TorchBuild] = {}
    for build in builds:
        for source in build.sources:
            first = out.get(source)
            if first is None:
                out[source] = build
            elif first.flags != build.flags:
                mine, theirs = _options(first.flags), _options(build.flags)
                shared = tuple(flag for option in mine if option in theirs for flag in option)
                # An option one build gives and the other does not is the build's to choose: named, not guessed.
                apart = tuple(" ".join(option) for option in [*mine, *theirs] if (option in mine) != (option in theirs))
                unsettled = tuple(dict.fromkeys(first.unsettled + build.unsettled + apart))
                digest = hashlib.sha256(f"{first.digest}\0{build.digest}\0{unsettled}".encode()).hexdigest()
                out[source] = TorchBuild(first.script, first.line, first.sources, shared, unsettled,
                                         digest if unsettled else "")
    return out


def _options(flags: tuple[str, ...]) -> list[tuple[str, ...]]:
    """The flags as options, each with its value where the value is the next argument (`--maxrregcount 64`,
    `-Xptxas -v`): two builds share an option, never half of one."""
    out: list[tuple[str, ...]] = []
    index = 0
    while index < len(flags):
        flag = flags[index]
        following = flags[index + 1] if index + 1 < len(flags) else None
        if following is not None and (flag in PASS_ON or (flag.startswith("-") and not following.startswith("-"))):
            out.append((flag, following))
            index += 2
        else:
            out.append((flag,))
            index += 1
    return out


def _script_builds(script: Path) -> list[TorchBuild]:
    try:
        text = read_input_text(script)
    except (OSError, ValueError):
        return []
    if not any(marker in text for marker in _MARKERS):
        return []
    try:
        tree = ast.parse(text)
    except (SyntaxError, ValueError, RecursionError):
        return []
    grown, rebound = _changed(tree)
    constants: dict[str, ast.expr] = {name: _Changed(value) if name in grown else value
                                      for name, value in py.module_constants(tree).items() if name not in rebound}
    imports = py.import_map(tree)
    script = Path(os.path.abspath(script))
    folder = script.parent  # where `python setup.py` runs: a linked script's own folder, not its target's
    out = []
    for node in ast.walk(tree):
        if not isinstance(node, ast.Call):
            continue
        kind = _kind(node, imports)
        if kind is None:
            continue
        listed = py.argument(node, "sources", 1)  # `CUDAExtension(name, sources)`, `load(name, sources)`
        names = [n for n, _node in _texts(listed, constants, script) if n is not None] if listed is not None else []
        found = tuple(dict.fromkeys(p for p in (_place(name, folder) for name in names) if p is not None))
        if not found:
            continue
        flags, unsettled = _flags(node, kind, constants, script)
        digest = hashlib.sha256(text.encode()).hexdigest() if unsettled else ""
        out.append(TorchBuild(script, node.lineno, found, flags, unsettled, digest))
    return out


class _Changed(ast.expr):
    """A module-level name the script only adds to after giving it its value (`FLAGS.append(...)`, `FLAGS +=
    [...]` in an `if`): its first value's items are some of its items, never all."""

    def __init__(self, value: ast.expr) -> None:
        super().__init__()
        self.value = value


# Methods that only add items: what the first value holds is still there. Any other change in place (`remove`,
# `pop`, `clear`, `update`, `sort`, an item assigned or deleted) may take items away or replace them.
_GROWERS = {"append", "extend", "insert", "__iadd__"}
_MUTATORS = {"remove", "pop", "clear", "update", "setdefault", "sort", "reverse", "discard", "__setitem__",
             "__delitem__", "__ior__"}


def _changed(tree: ast.Module) -> tuple[set[str], set[str]]:
    """The names the script only adds items to after their first value (`_GROWERS`, `+=`), and the names it binds
    more than once, anywhere and by any means (an assignment, a `for` or comprehension target, `:=`, `with ... as`,
    `import ... as`, a function's parameter, `del`, a `def` or `class`), or changes otherwise in place: what a call
    reads of those is not their first value."""
    bound: dict[str, int] = {}
    grown: set[str] = set()
    rebound: set[str] = set()

    def bind(name: str) -> None:
        bound[name] = bound.get(name, 0) + 1

    for node in ast.walk(tree):
        if isinstance(node, ast.Name) and isinstance(node.ctx, (ast.Store, ast.Del)):
            bind(node.id)
            if isinstance(node.ctx, ast.Del):
                rebound.add(node.id)
        elif isinstance(node, ast.arg):
            bind(node.arg)
        elif isinstance(node, ast.alias):
            bind(node.asname or node.name.split(".")[0])
        elif isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
            bind(node.name)
        elif isinstance(node, ast.ExceptHandler) and node.name:
            bind(node.name)
        elif isinstance(node, ast.AugAssign) and isinstance(node.target, ast.Name):
            (grown if isinstance(node.op, ast.Add) else rebound).add(node.target.id)
        elif isinstance(node, (ast.Subscript, ast.Attribute)) and isinstance(node.ctx, (ast.Store, ast.Del)):
            root = _root(node.value)
            if root is not None:
                rebound.add(root)
        elif isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute) and (
                node.func.attr in _GROWERS or node.func.attr in _MUTATORS):
            root = _root(node.func.value)
            if root is not None:
                (grown if node.func.attr in _GROWERS else rebound).add(root)
    # An augmented assignment is a binding of its own (`ast.Name` in a Store context) besides the first value.
    rebound |= {name for name, count in bound.items() if count > 1 and name not in grown}
    rebound |= {name for name in grown if bound.get(name, 0) > 1 + _augmented(tree, name)}
    return grown - rebound, rebound


def _augmented(tree: ast.Module, name: str) -> int:
    """How many `name += ...` the script holds."""
    return sum(1 for node in ast.walk(tree)
               if isinstance(node, ast.AugAssign) and isinstance(node.target, ast.Name) and node.target.id == name)


def _root(node: ast.expr) -> str | None:
    while isinstance(node, (ast.Subscript, ast.Attribute)):
        node = node.value
    return node.id if isinstance(node, ast.Name) else None


def _kind(call: ast.Call, imports: dict[str, str]) -> str | None:
    """"extension" for a `CUDAExtension(...)`, "load" for torch's `load(...)`, else None."""
    written = py.dotted(call.func) or ""
    qualified = py.qualified(call.func, imports) or written
    if written.endswith("CUDAExtension") or qualified.endswith("CUDAExtension"):
        return "extension"
    if qualified == "torch.utils.cpp_extension.load" or (written in _LOADERS and written != "load") or (
            written == "load" and imports.get("load", "").endswith("cpp_extension.load")):
        return "load"
    return None


def _flags(call: ast.Call, kind: str, constants: dict[str, ast.expr], script: Path
           ) -> tuple[tuple[str, ...], tuple[str, ...]]:
    """The nvcc flags the build gives its sources, as kgate keeps them (each of `load()`'s strings split as a shell
    would; each of a `CUDAExtension`'s one argument, as torch passes it), and the items the script's text does not
    settle, as written."""
    if kind == "load":
        given = py.argument(call, "extra_cuda_cflags")
    else:
        given = py.argument(call, "extra_compile_args")
        if isinstance(given, ast.Name) and given.id in constants:
            given = constants[given.id]
        if isinstance(given, ast.Call) and py.dotted(given.func) == "dict" and not given.args:
            given = next((k.value for k in given.keywords if k.arg == "nvcc"),
                         given if any(k.arg is None for k in given.keywords) else None)
        elif isinstance(given, ast.Dict):
            keys = [_text(k, constants, script) if k is not None else None for k in given.keys]
            last = max((index for index, key in enumerate(keys) if key == "nvcc"), default=-1)
            # A key the text does not settle, or a `**mapping` after the last "nvcc" key, may give "nvcc": the
            # flags are then unsettled (shown as the whole dict, or as the mapping).
            later = [value if written is None else given for written, key, value in
                     zip(given.keys[last + 1:], keys[last + 1:], given.values[last + 1:]) if key is None]
            given = later[-1] if later else given.values[last] if last >= 0 else None
    if given is None:
        return (), ()
    argv: list[str] = []
    unsettled: list[str] = []
    for item, node in _texts(given, constants, script):
        try:
            # `load()` writes its flags into a ninja command line as they are: a shell splits them. A setup.py's
            # BuildExtension quotes each one (or runs nvcc with the list): each item is one argument, but one that
            # names an architecture (`"-gencode arch=compute_80,code=sm_80"`) is kgate's to choose all the same.
            words = shlex.split(item) if item is not None else []
            argv.extend(words if kind == "load" or split_flags(words).archs else [item] if item is not None else [])
        except ValueError:
            item = None
        if item is None:
            unsettled.append(ast.unparse(node) if node is not None else "...")
    return split_flags(argv, cwd=script.parent).flags, tuple(unsettled)


def _place(name: str, folder: Path) -> Path | None:
    """The file a listed source names: relative to the script's folder (where `python setup.py` runs, and where
    a script calling `load()` is usually run from)."""
    path = Path(name) if os.path.isabs(name) else folder / name
    return path.resolve() if path.is_file() else None


def _texts(node: ast.AST | None, constants: dict[str, ast.expr], script: Path, depth: int = 0
           ) -> list[tuple[str | None, ast.AST | None]]:
    """The strings a list expression holds, each with its expression; None for each item the text does not
    settle."""
    if node is None or depth > 8:
        return []
    if isinstance(node, ast.Name) and node.id in constants:
        value = constants[node.id]
        if isinstance(value, _Changed):  # what it was first given, and what the script changes it by, unsettled
            return [*_texts(value.value, constants, script, depth + 1), (None, node)]
        return _texts(value, constants, script, depth + 1)
    if isinstance(node, (ast.List, ast.Tuple)):
        out: list[tuple[str | None, ast.AST | None]] = []
        for item in node.elts:
            if isinstance(item, ast.Starred):
                out.extend(_texts(item.value, constants, script, depth + 1))
            else:
                out.append((_text(item, constants, script, depth + 1), item))
        return out
    if isinstance(node, ast.BinOp) and isinstance(node.op, ast.Add):
        return _texts(node.left, constants, script, depth + 1) + _texts(node.right, constants, script, depth + 1)
    return [(None, node)]


def _text(node: ast.AST, constants: dict[str, ast.expr], script: Path, depth: int = 0) -> str | None:
    """The one string an expression gives, where the script's text settles it."""
    if depth > 8:
        return None
    if isinstance(node, ast.Constant) and isinstance(node.value, (str, int)) and not isinstance(node.value, bool):
        return str(node.value)
    if isinstance(node, ast.Name):
        if node.id == "__file__":
            return str(script)
        value = constants.get(node.id)
        return _text(value, constants, script, depth + 1) if value is not None and not isinstance(
            value, _Changed) else None
    if isinstance(node, ast.JoinedStr):
        parts = []
        for value in node.values:
            if isinstance(value, ast.FormattedValue):
                if value.conversion != -1 or value.format_spec is not None:
                    return None
                value = value.value
            part = _text(value, constants, script, depth + 1)
            if part is None:
                return None
            parts.append(part)
        return "".join(parts)
    if isinstance(node, ast.BinOp) and isinstance(node.op, (ast.Add, ast.Div)):
        left, right = _text(node.left, constants, script, depth + 1), _text(node.right, constants, script, depth + 1)
        if left is None or right is None:
            return None
        return left + right if isinstance(node.op, ast.Add) else os.path.join(left, right)
    if isinstance(node, ast.Attribute) and node.attr == "parent":
        inner = _text(node.value, constants, script, depth + 1)
        return os.path.dirname(inner) if inner is not None else None
    if isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute) and node.func.attr in ("resolve", "absolute"):
        inner = _text(node.func.value, constants, script, depth + 1) if not node.args else None
        return inner if inner is None or node.func.attr == "absolute" else os.path.realpath(inner)
    if isinstance(node, ast.Call):
        name = py.dotted(node.func) or ""
        args = [_text(a, constants, script, depth + 1) for a in node.args]
        if node.keywords or any(a is None for a in args):
            return None
        texts = [a for a in args if a is not None]
        if name == "str" and len(texts) == 1:
            return texts[0]
        if name in ("os.path.join", "join", "Path", "pathlib.Path") and texts:
            return os.path.join(*texts)
        if name in ("os.path.dirname", "dirname") and len(texts) == 1:
            return os.path.dirname(texts[0])
        if name in ("os.path.abspath", "abspath") and len(texts) == 1:
            return texts[0]
        if name in ("os.path.realpath", "realpath") and len(texts) == 1:
            return os.path.realpath(texts[0])  # a linked script's `__file__` is its target
    return None
