"""## What it does
Flags a build file that names a bare GPU architecture (`sm_120`, `compute_90`,
`CUDA_ARCHITECTURES 100`, `TORCH_CUDA_ARCH_LIST` `12.0`) of a family whose
arch-specific (`a`) target kgate gates, where the sources that build owns use
code only the `a` target can compile. It reads nvcc flags (`-gencode`,
`--generate-code`, `-arch`, `-code`), CMake `CUDA_ARCHITECTURES` /
`CMAKE_CUDA_ARCHITECTURES` values (also `-real` / `-virtual`) and
`TORCH_CUDA_ARCH_LIST` entries for `torch.utils.cpp_extension`, in
`CMakeLists.txt`, `*.cmake`, `setup.py` and other Python files, Makefiles and
shell scripts. Comments are ignored, and an architecture counts only on a line
that also carries a flag or variable that selects architectures; `arch=` and
`code=` count in nvcc's spelling only, so an attribute such as a CuTe DSL
kernel's `self.arch = "sm_100"` is not a build flag.

**Which sources a build owns.** The C++/CUDA files (`.cu`, `.cuh`, `.h`,
`.hpp`, `.cpp`, `.cc`, `.inl`, `.ptx`, ...) in the build file's folder and
below, except hidden folders, `build` / `dist` outputs and nested folders that
are builds of their own (a `setup.py` or `pyproject.toml`, or a
`CMakeLists.txt` that declares a `project(`: folders reached by
`add_subdirectory` inherit the parent's architectures and stay owned). So a
repository whose Hopper kernels live in their own `hopper/setup.py` is judged
per build: the root build of portable kernels stays quiet, the Hopper build
is reported. Python files are not read: a CuTe DSL or Triton kernel is
compiled at run time for the device it runs on, not by the build file.

A Python build script may hand its architectures to another build: a
function that runs `make`, `cmake` or `ninja` through `subprocess` in
another folder (`cwd=`, `-C`, `-S`) builds that folder's sources, so the
architectures the function names are judged by them. Where the folder is
not a literal path (strings, `__file__`, `Path(...) / "sub"`, `.parent`,
`os.path.join`) the sources are unknown and nothing is reported.

**Arch-specific code**, per family (matched in those sources):

| family | spellings |
|---|---|
| 90 | `wgmma`, `setmaxnreg`, `__CUDA_ARCH_FEAT_SM90_ALL`, `CUTLASS_ARCH_MMA_SM90A_ENABLED`, CuTe `SM90_*_SS` / `SM90_*_RS` (GMMA atoms) |
| 100 | `tcgen05`, `UTCMMA`, `setmaxnreg`, `__CUDA_ARCH_FEAT_SM100_ALL`, `CUTLASS_ARCH_MMA_SM100A_ENABLED`, CuTe `SM100_*MMA*` / `SM100_*TMEM*` atoms |
| 120 | `.block_scale`, `kind::mxf8f6f4`, `kind::mxf4nvf4`, `kind::mxf4`, `setmaxnreg`, `__CUDA_ARCH_FEAT_SM120_ALL`, `CUTLASS_ARCH_MMA_SM120A_ENABLED`, CuTe `SM120_*_VS` (block-scaled) and `SM120_*MMA*` atoms |

and, in every family, the CUTLASS 3.x architecture tag (`cutlass::arch::Sm90`,
`Sm100`, `Sm120`): the kernels the collective builders make for it are
arch-conditional, and a bare build aborts at run time with "Arch conditional
MMA instruction used without targeting appropriate compute capability".

TMA (`cp.async.bulk.tensor`, CuTe's `SM90_TMA_*`) and plain `mma.sync`
(bf16, FP8) are not among them: the bare targets assemble them. The error
names the first source found for the family and the spelling it uses.

A bare target whose build owns no such code is the right choice: it loses
nothing, and a bare `compute_` target embeds PTX that later GPUs can still
compile, where an `sm_90a` cubin runs on sm_90 only. It is not reported,
unless the option `portable` is `"note"`. The verdict reads files besides the
build file, so kgate never answers it from the lint cache.

The family target (`sm_120f`, `compute_120f`, `sm_100f`; nvcc 12.9 and
later) is not reported unless the option `family` is `"warn"`, because it
was measured to keep what matters. Nor is a real target built from the
family's or the `a` target's PTX, `-gencode arch=compute_120f,code=sm_120`:
nvcc assembles the family PTX into sm_120 SASS with the block-scaled MMA
kept (the same cubin as `code=sm_120f`), and rejects
`arch=compute_120a,code=sm_120` outright. With
nvcc 13.0 (and the Triton wheel's ptxas-blackwell 13.4), one
`mma.sync.aligned.m16n8k32.row.col.kind::mxf8f6f4.block_scale.scale_vec::1X.f32.e4m3.e4m3.f32.ue8m0`
written as inline asm:

| build | assembles? | SASS |
|---|---|---|
| `compute_120a` / `sm_120a` | yes | `QMMA.SF.16832.F32.E4M3.E4M3.E8` |
| `compute_120f` / `sm_120f` | yes | `QMMA.SF.16832.F32.E4M3.E4M3.E8` (identical) |
| `compute_120` / `sm_120` | no: "Instruction 'mma with block scale' not supported on .target 'sm_120'" | - |

`kind::mxf4nvf4.block_scale` behaves the same (`OMMA.SF` for `a` and `f`,
an error for the bare target); plain FP8 `mma.sync ... e4m3.e4m3` assembles
for all three (`QMMA.16832`). `setmaxnreg` assembles for `sm_120a`, `sm_120f`,
`sm_100a`, `sm_100f` and `sm_90a` only; `wgmma` for `sm_90a` only; `tcgen05`
for `sm_100a` and `sm_100f` only. The difference that remains for the family
target is in the feature macros: `compute_120a` defines
`__CUDA_ARCH_FEAT_SM120_ALL`, `__CUDA_ARCH_SPECIFIC__` and
`__CUDA_ARCH_FAMILY_SPECIFIC__`, `compute_120f` only the last, `compute_120`
none. Code guarded by the first two is compiled out of an `f` build, and
guarded by any of them out of a bare build, without an error.

## Why is this bad?
A bare-architecture build of code written for the `a` target cannot contain the instructions that make sm_120a
kernels fast (block-scaled MMA), nor Hopper's `wgmma` or Blackwell's
`tcgen05`. Kernels that guard them with the usual feature macros compile
without a word and silently lose them: correct results (or zeros) at a
fraction of the speed. With inline asm and no guard the build fails, which
is at least visible.

## Example
With a kernel under the same folder that uses `wgmma` (or CuTe's
`SM90_64x128x16_F32BF16BF16_SS`) and one that uses
`mma.sync ... kind::mxf8f6f4.block_scale`:
```cmake
set_target_properties(kernels PROPERTIES CUDA_ARCHITECTURES "90;120")
```
```python
extra_compile_args={"nvcc": ["-gencode", "arch=compute_120,code=sm_120"]}
os.environ["TORCH_CUDA_ARCH_LIST"] = "12.0"
```

## Use instead
```cmake
set_target_properties(kernels PROPERTIES CUDA_ARCHITECTURES "90a;120a")
```
```python
extra_compile_args={"nvcc": ["-gencode", "arch=compute_120a,code=sm_120a"]}
os.environ["TORCH_CUDA_ARCH_LIST"] = "12.0a"
```

## Fix
Unsafe (`kgate lint --fix --unsafe-fixes`): writes the `a` target in place
of each bare one that is reported (`sm_120` -> `sm_120a`, `compute_120` ->
`compute_120a`, `120-real` -> `120a-real`, `12.0` -> `12.0a` in
`TORCH_CUDA_ARCH_LIST`), in CMake files, `setup.py` and other Python files
(through libcst, inside the string), flags and scripts. Unsafe because an
arch-specific target runs on its own architecture only and carries no
forward-compatible PTX: later GPUs can no longer JIT-compile the build. Add
a bare `compute_` target beside it where that matters.

## Options
- `portable` (string, default `"ignore"`): what a bare target whose build
  owns no arch-specific code gets: nothing, or with `"note"` a note. The
  default was measured on the labelled corpus, where every such target was
  judged correct.
- `families` (list of strings, default `["120", "100", "90"]`): the
  architecture families whose bare targets are reported.
- `family` (string, default `"allow"`): `"warn"` also reports family targets
  (`sm_120f`) as warnings, for projects whose kernels rely on
  `__CUDA_ARCH_FEAT_SM120_ALL`.
"""

from __future__ import annotations

import ast
import os
import re
from bisect import bisect_right
from collections.abc import Iterable, Iterator
from itertools import accumulate
from typing import Any

from kgate.collect import pysource as py
from kgate.collect.cpp_text import strip_hash_comment
from kgate.core.findings import Severity
from kgate.core.fix import Applicability, Edit, Fix
from kgate.core.rule import READS_BEYOND, Option, Report, Rule, SourceContext
from kgate.hardware.arch_features import ARCH_SPECIFIC_CODE, ARCH_SPECIFIC_NEEDLES, family_note, lost_by_bare

# Words on a line that select GPU architectures.
_CONTEXT = re.compile(r"-gencode|--generate-code|-arch\b|--gpu-architecture|-code\b|--gpu-code|"
                      r"(?<![.\w])arch=|(?<![.\w])code=|CUDA_ARCHITECTURES|CUDA_ARCH|TORCH_CUDA_ARCH_LIST|NVCC|nvcc|cuda_cflags")
# A literal word every `_CONTEXT` match contains: lines without one are skipped by plain substring search.
_FLAG_WORDS = ("-gencode", "-arch", "-code", "arch=", "code=", "CUDA_ARCH", "NVCC", "nvcc", "cuda_cflags")
_NVCC_ARCH = re.compile(r"(?<![\w.])(sm|compute)_(\d{2,3})([af]?)(?![\w.])")
_CMAKE_ARCHS = re.compile(r"CUDA_ARCHITECTURES\b[\s\"'=:]*(?:PROPERTIES\s+)?([^)\n]*)")
_CMAKE_VALUE = re.compile(r"(?<![\w.])(\d{2,3})([af]?)(?:-real|-virtual)?(?![\w.])")
_TORCH_LIST = re.compile(r"TORCH_CUDA_ARCH_LIST\b[^\n]*")
_TORCH_VALUE = re.compile(r"(?<![\w.])(\d{1,2})\.(\d)([af]?)(?:\+PTX)?(?![\w.])")


def check(source: Any, ctx: SourceContext) -> Iterable[Report]:
    families = set(ctx.options["families"])
    warn_family = ctx.options["family"] == "warn"
    bare: list[tuple[int, int, str, str]] = []
    for number, raw in flag_lines(source.text):
        # The line without its comment is a prefix of it: a line that does not name a build flag does not either
        # once its comment is gone, and most lines of a build script are skipped before the character scan.
        if not _CONTEXT.search(raw):
            continue
        line = strip_hash_comment(raw)
        if not _CONTEXT.search(line):
            continue
        for col, written, family, suffix in _architectures(line):
            if family not in families:
                continue
            if suffix == "":
                bare.append((number, col, written, family))
            elif suffix == "f" and warn_family:
                yield Report(f"`{written}`: {family_note(family)}", severity=Severity.WARNING, line=number,
                             col=col + 1, end_line=number, end_col=col + 1 + len(written), discriminator=written)
    if not bare:
        return
    # The verdict reads the sources the build owns: one walk per build folder for the families named bare there.
    source.derived[READS_BEYOND] = True
    here = os.path.dirname(os.path.abspath(source.path))
    handed_on = _handed_on(source, here) if source.name.endswith(".py") else []
    folders: dict[int, str | None] = {}
    for number, _c, _w, _f in bare:
        inner = [(first, folder) for first, last, folder in handed_on if first <= number <= last]
        folders[number] = max(inner, key=lambda item: item[0])[1] if inner else here
    evidences: dict[str | None, dict[str, tuple[str, str]]] = {None: {}}
    for build in {found for found in folders.values() if found is not None}:
        evidences[build] = _arch_specific_code(build, frozenset(
            family for number, _c, _w, family in bare if folders[number] == build))
    note = ctx.options["portable"] == "note"
    for number, col, written, family in bare:
        span = {"line": number, "col": col + 1, "end_line": number, "end_col": col + 1 + len(written),
                "discriminator": written}
        folder = folders[number]
        if folder is None:
            continue  # handed to another build tool in a folder that cannot be read here: its sources are unknown
        evidence = evidences[folder]
        if family in evidence:
            where, spelling = evidence[family]
            if folder != here:
                where = os.path.relpath(os.path.join(folder, where), here).replace(os.sep, "/")
            target = _a_spelling(written)
            fix = Fix(f"`{written}` -> `{target}`: sm_{family}a is arch-specific: it runs on sm_{family} only and "
                      f"carries no forward-compatible PTX for later GPUs", Applicability.UNSAFE,
                      (Edit(number, col, number, col + len(written), target),))
            yield Report(f"`{written}` builds for the bare architecture, but `{where}` uses `{spelling}`: "
                         f"{lost_by_bare(family)} cannot be used; build for the `a` target ({target})",
                         fix=fix, **span)
        elif note:
            yield Report(f"`{written}` builds for the bare architecture; no source this build owns uses "
                         f"sm_{family}a-only code, so the portable target (which also embeds PTX for later GPUs) "
                         f"loses nothing", severity=Severity.NOTE, **span)


def flag_lines(text: str) -> list[tuple[int, str]]:
    """(number, line) of the lines of `text` (as `str.splitlines` cuts it) that hold a word of `_FLAG_WORDS`: a
    superset of the lines `_CONTEXT` matches, found by substring search. The regular expression scans a build
    script many times slower, and most lines name no build flag."""
    offsets = []
    for word in _FLAG_WORDS:
        at = text.find(word)
        while at != -1:
            offsets.append(at)
            at = text.find(word, at + 1)
    if not offsets:
        return []
    lines = text.splitlines()
    starts = list(accumulate(map(len, text.splitlines(keepends=True)), initial=0))
    return [(number, lines[number - 1]) for number in sorted({bisect_right(starts, at) for at in offsets})]


def _architectures(line: str) -> Iterator[tuple[int, str, str, str]]:
    """(column, text as written, family, suffix) of each architecture named on a line. A real target listed in the
    `code=` of a `-gencode` whose virtual architecture is the same family's `a` or `f` one takes that suffix:
    `arch=compute_120f,code=sm_120` assembles SASS for sm_120 from the family PTX, which keeps what the bare build
    loses (measured: the same cubin as `code=sm_120f`)."""
    seen: set[int] = set()
    inherited = _inherited_suffixes(line)
    for match in _NVCC_ARCH.finditer(line):
        seen.add(match.start())
        suffix = match.group(3) or inherited.get((match.start(), match.group(2)), "")
        yield match.start(), match.group(0), match.group(2), suffix
    for cmake in _CMAKE_ARCHS.finditer(line):
        for match in _CMAKE_VALUE.finditer(cmake.group(1)):
            start = cmake.start(1) + match.start()
            if start not in seen:
                yield start, match.group(0), match.group(1), match.group(2)
    for torch in _TORCH_LIST.finditer(line):
        for match in _TORCH_VALUE.finditer(torch.group(0)):
            family = f"{match.group(1)}{match.group(2)}"
            yield torch.start() + match.start(), match.group(0), family, match.group(3)


_GENCODE = re.compile(r"(?<![.\w])arch=compute_(\d{2,3})([af])\s*,\s*code=(\[[^\]]*\]|[^\s\"',;]+)")


def _inherited_suffixes(line: str) -> dict[tuple[int, str], str]:
    """(column, family) -> suffix for the real targets in the `code=` of a family- or arch-specific `-gencode`."""
    out: dict[tuple[int, str], str] = {}
    for clause in _GENCODE.finditer(line):
        for target in _NVCC_ARCH.finditer(clause.group(3)):
            if target.group(1) == "sm" and target.group(2) == clause.group(1):
                out[(clause.start(3) + target.start(), clause.group(1))] = clause.group(2)
    return out


# What a build file owns: C++/CUDA sources (and PTX) in its folder and below.
_SOURCE_SUFFIXES = (".cu", ".cuh", ".h", ".hpp", ".hh", ".hxx", ".cpp", ".cc", ".cxx", ".inl", ".inc", ".ptx")
# A nested folder with one of these is a build of its own (a CMakeLists.txt only when it declares a project:
# `add_subdirectory` folders inherit the parent's architectures).
_OWN_BUILD = ("setup.py", "pyproject.toml")
_CMAKE_PROJECT = re.compile(rb"^\s*project\s*\(", re.MULTILINE | re.IGNORECASE)
_SKIPPED = {"__pycache__", "node_modules", "build", "dist"}
_EVIDENCE = {family: re.compile(pattern) for family, pattern in ARCH_SPECIFIC_CODE.items()}


def _own_build(folder: str) -> bool:
    try:
        names = os.listdir(folder)
    except OSError:
        return False
    if any(name in names for name in _OWN_BUILD):
        return True
    if "CMakeLists.txt" in names:
        try:
            with open(os.path.join(folder, "CMakeLists.txt"), "rb") as handle:
                return _CMAKE_PROJECT.search(handle.read()) is not None
        except OSError:
            return False
    return False


def _arch_specific_code(folder: str, families: frozenset[str]) -> dict[str, tuple[str, str]]:
    """Family -> (a source file, the arch-specific spelling it uses) for the first such file of each family among
    the sources the build files of `folder` own: its C++/CUDA files and those of its sub-folders, except hidden
    folders, build outputs and nested folders that are builds of their own."""
    found: dict[str, tuple[str, str]] = {}
    wanted = {family: _EVIDENCE[family] for family in families if family in _EVIDENCE}
    if not wanted:
        return found
    anything = re.compile(b"|".join(b"(?:" + ARCH_SPECIFIC_CODE[family] + b")" for family in sorted(wanted)))
    needles = {needle for family in wanted for needle in ARCH_SPECIFIC_NEEDLES[family]}
    for here, folders, files in os.walk(folder):
        folders[:] = sorted(d for d in folders if not d.startswith(".") and d not in _SKIPPED
                            and not _own_build(os.path.join(here, d)))
        for name in sorted(files):
            if not name.endswith(_SOURCE_SUFFIXES):
                continue
            path = os.path.join(here, name)
            try:
                with open(path, "rb") as handle:
                    data = handle.read()
            except OSError:
                continue
            if not any(needle in data for needle in needles) or anything.search(data) is None:
                continue
            for family, pattern in wanted.items():
                match = None if family in found else pattern.search(data)
                if match is not None:
                    found[family] = (os.path.relpath(path, folder).replace(os.sep, "/"),
                                     match.group(0).decode("latin-1"))
            if len(found) == len(wanted):
                return found
    return found


# Another build tool run by a Python build script, and the runners that start it.
_BUILD_TOOLS = frozenset({"make", "gmake", "cmake", "ninja"})
_RUNNERS = frozenset({"subprocess.run", "subprocess.call", "subprocess.check_call", "subprocess.check_output",
                      "subprocess.Popen"})
_FOLDER_FLAGS = ("-C", "-S", "--directory")


def _handed_on(source: Any, here: str) -> list[tuple[int, int, str | None]]:
    """(first line, last line, build folder) of each function of a Python build script that runs `make`, `cmake` or
    `ninja` in another folder (`cwd=`, `-C`, `-S`): the architectures that function names go to that build, whose
    sources are the folder's. The folder is None where its path is not a literal this reading can follow."""
    try:
        tree = source.tree
    except Exception:  # noqa: BLE001 - an unreadable file is KG004's; judge it as the build file's folder
        return []
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
                step = _path(expr, local, source.path, 0)
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


def _a_spelling(written: str) -> str:
    """`sm_120` -> `sm_120a`, `120-real` -> `120a-real`, `12.0+PTX` -> `12.0a+PTX`."""
    match = re.match(r"^((?:sm|compute)_\d+|\d+\.\d|\d+)(.*)$", written)
    if not match:
        return written + "a"
    return f"{match.group(1)}a{match.group(2)}"


RULE = Rule(
    code="KG301",
    name="arch-target",
    layer="cuda",
    severity=Severity.ERROR,
    summary="A build names a bare GPU architecture (sm_120, compute_90, CUDA_ARCHITECTURES 120) for sources that "
            "need the `a` target (wgmma, tcgen05, block-scaled MMA)",
    check=check,
    doc=__doc__ or "",
    options={
        "families": Option(["120", "100", "90"], "architecture families whose bare targets are reported", list, str),
        "portable": Option("ignore", "\"note\": report a bare target whose build uses no arch-specific code as a "
                           "note", str, choices=("ignore", "note")),
        "family": Option("allow", "\"warn\": also report family targets such as sm_120f", str,
                         choices=("allow", "warn")),
    },
    files=("CMakeLists.txt", "*.cmake", "setup.py", "*.py", "Makefile", "makefile", "GNUmakefile", "*.mk",
           "*.sh", "CMakePresets.json"),
    prefilter=(b"sm_", b"compute_", b"CUDA_ARCHITECTURES", b"TORCH_CUDA_ARCH_LIST"),
)
