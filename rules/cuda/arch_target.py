"""## What it does
Flags a build file that names a bare GPU architecture (`sm_120`, `compute_90`,
`CUDA_ARCHITECTURES 100`, `TORCH_CUDA_ARCH_LIST` `12.0`) of a family whose
arch-specific (`a`) target kgate gates, where the sources that build owns use
code only the `a` target can compile. It reads nvcc flags (`-gencode`,
`--generate-code`, `-arch`, `-code`), CMake `CUDA_ARCHITECTURES` /
`CMAKE_CUDA_ARCHITECTURES` values (also `-real` / `-virtual`) and
`TORCH_CUDA_ARCH_LIST` entries for `torch.utils.cpp_extension`, in
`CMakeLists.txt`, `*.cmake`, `setup.py` and other Python files, Makefiles,
shell scripts and `pyproject.toml` (scikit-build's `cmake.define` and
`cmake.args`, a cibuildwheel `environment`). Only settings are read: an architecture counts on a line that
also carries a flag or variable that selects architectures (`arch=` and
`code=` in nvcc's spelling only, so a CuTe DSL kernel's `self.arch =
"sm_100"` is not a build flag), or on a later line of a CMake
`CUDA_ARCHITECTURES` setting whose argument list goes on to its `)` with
architectures only (`set(CMAKE_CUDA_ARCHITECTURES`, then `90` and `120` on
lines of their own), and not in words about architectures:
comments, a CMake `message()` or the condition of an `if()`, `elseif()` or
`while()`, a Python docstring, `raise`, `assert` message, comparison or
`print` / logging / `warnings.warn` call, a shell or recipe `echo` /
`printf` (less the commands it substitutes: `echo $(nvcc -arch=sm_120 ...)`
runs nvcc), a Makefile's `$(info)`, `$(warning)` or `$(error)`. So
`message(FATAL_ERROR "set TORCH_CUDA_ARCH_LIST to 12.0a, not 12.0")` names
no build. An architecture whose word the build goes on writing after its
digits is not bare in the text, and is neither reported nor rewritten: a
suffix from a variable or a format field (`sm_120${SUFFIX}`, `$(SUF)`,
`f"-arch=sm_120{suffix}"`), a quoted string the shell joins to the word
(`-arch=sm_120"a"`), Python's adjacent string literals or `+`
(`"-arch=sm_120" "a"`, `"sm_120" + suffix`).
In a shell script or a Makefile, a variable the file passes whole to an
architecture flag (`nvcc -arch=$SM`, `-arch="${SM}"`, `NVCCFLAGS = -arch=$(GPU_ARCH)`) makes
its assignments settings (`SM=sm_90`, `GPU_ARCH ?= sm_90`), and so does one
that gives an `sm_`/`compute_` word its number (`SM ?= 90` under
`-gencode arch=compute_$(SM),code=sm_$(SM)`, a bare `sm_90`; `sm_$(SM)a` is
the `a` target), a loop's list included (`$(foreach sm,$(SMS),...sm_$(sm))`
with `SMS ?= 90 120`, `for sm in 90 120; do`); a variable assigned just such a variable (`GPU = $(SM)`)
passes it on. A variable no flag uses names no build.
A Makefile reads the makefiles it `include`s (also `-include`, `sinclude`;
relative to make's folder, the Makefile's, as make reads them also in the
files it includes, else beside the file that writes the name; and those
they include in turn):
their flags and variables are its build's, so `GPU_ARCH ?= sm_90` in
`config/arch.mk` under `-arch=$(GPU_ARCH)` in `gemm/Makefile` is judged by
the sources `gemm/` owns and reported at the `include` line, naming where it
is written (without a fix: the finding belongs to the file linted). A name
make expands (`include $(ROOT)/arch.mk`) is not followed, and a plain
`include` of a file that is not there is a note: its settings are unknown
(for a Makefile; a `.mk` file's names are read from the folder of the
Makefile that includes it).
CMake's variables are read the same way:
`set(ARCHS 120)` under `CUDA_ARCHITECTURES ${ARCHS}` or `set(CMAKE_CUDA_ARCHITECTURES ${ARCHS})`,
`set(SM 120)` under `arch=compute_${SM},code=sm_${SM}`, a `foreach` over a list, a variable set to
another's; such a value is judged by the sources of the setting that uses it (a portable target's `${ARCH}`
is not reported for a target beside it). So are a Python build script's module-level string constants, assigned
once, that an architecture flag is built from (`SM = "sm_120"` under `"-arch=" + SM`, `CC = "120"` under
`f"arch=compute_{CC},code=sm_{CC}"`).

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

**Which sources a setting compiles.** A setting written for one unit of the
build compiles that unit's sources and the headers they include, not the
rest of the folder: a CMake target's `set_target_properties`,
`set_property(TARGET ...)` or `target_compile_options` (and a variable used
only there: `list(APPEND FLAGS -gencode ...)` then
`target_compile_options(t ${FLAGS})`), a file's `set_source_files_properties`,
a `setup.py` extension's arguments and the module-level names they use
(`CUDAExtension("m", ["m.cu"], extra_compile_args={"nvcc": NVCC})`). A
build-wide setting compiles every source the folder owns, except that a
default a unit replaces with its own architectures does not reach that unit:
`CMAKE_CUDA_ARCHITECTURES` (or `CUDA_ARCHITECTURES` set build-wide) skips a
target that sets its `CUDA_ARCHITECTURES`, and `TORCH_CUDA_ARCH_LIST` skips
an extension whose nvcc flags name an architecture (torch then passes none
of its own). So a Hopper target built for `90a` does not make the bare `90`
of a portable target beside it wrong. Sources are read as written (literal
names, `${CMAKE_CURRENT_SOURCE_DIR}/`, variables set in the same file); a
unit with a source that cannot be read so (a glob, a variable from
elsewhere) is taken to compile the whole folder, as before.

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
(bf16, FP8) are not among them: the bare targets assemble them. Only code
counts: comments and string literals are not read, except the strings of an
inline `asm` statement, which are the code (`// setmaxnreg would help here`
uses nothing). The error names the first source found for the family and the
spelling it uses.

A bare target whose sources use no such code is the right choice: it loses
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
from functools import cache
from itertools import accumulate
from typing import TYPE_CHECKING, Any

from kgate.core.artifacts import Artifact
from kgate.core.findings import Related, Severity
from kgate.core.fix import Applicability, Edit, Fix
from kgate.core.rule import READS_BEYOND, Option, Report, Rule, SourceContext
from kgate.support.patterns import lazy

if TYPE_CHECKING:
    from kgate.collect.build_units import Unit, Units

# The analyses of builds are imported where a file names a build flag (most files the globs match name none: a
# lint of a kernel module should not pay for reading CMake).

# Words on a line that select GPU architectures.
_CONTEXT = lazy(r"-gencode|--generate-code|-arch\b|--gpu-architecture|-code\b|--gpu-code|"
                      r"(?<![.\w])arch=|(?<![.\w])code=|CUDA_ARCHITECTURES|CUDA_ARCH|TORCH_CUDA_ARCH_LIST|NVCC|nvcc|cuda_cflags")
# A literal word every `_CONTEXT` match contains: lines without one are skipped by plain substring search.
_FLAG_WORDS = ("-gencode", "-arch", "-code", "arch=", "code=", "CUDA_ARCH", "NVCC", "nvcc", "cuda_cflags")
_NVCC_ARCH = lazy(r"(?<![\w.])(sm|compute)_(\d{2,3})([af]?)(?![\w.])")
_CMAKE_ARCHS = lazy(r"CUDA_ARCHITECTURES\b[\s\"'=:]*(?:PROPERTIES\s+)?([^)\n]*)")
_CMAKE_VALUE = lazy(r"(?<![\w.])(\d{2,3})([af]?)(?:-real|-virtual)?(?![\w.])")
_TORCH_LIST = lazy(r"TORCH_CUDA_ARCH_LIST\b[^\n]*")
_TORCH_VALUE = lazy(r"(?<![\w.])(\d{1,2})\.(\d)([af]?)(?:\+PTX)?(?![\w.])")


def check(source: Any, ctx: SourceContext) -> Iterable[Report]:
    families = set(ctx.options["families"])
    warn_family = ctx.options["family"] == "warn"
    bare: list[tuple[int, int, str, str, str, int]] = []
    near = flag_words(source.text)
    included = _included(source) if "include" in source.text else None
    if not near and not (included and (included[0] or included[1])):
        return  # no line names a build flag: the file is not read further
    from kgate.collect.build_settings import settings
    from kgate.hardware.arch_features import family_note

    text = settings(source.rel, source.text, _tree(source), near)
    flagged = flag_lines(text)
    name = source.rel.rsplit("/", 1)[-1]
    joins = "python" if name.endswith(".py") else "cmake" if name == "CMakeLists.txt" or name.endswith(".cmake") \
        else "shell"
    named = [(number, *found) for number, line in flagged if _CONTEXT.search(line)
             for found in _architectures(line, joins)]
    uses = text
    texts: list[tuple[Any, str]] = []
    if included:  # the makefiles it includes are its build's: their flags and variables count with its own
        source.derived[READS_BEYOND] = True
        for number, written in included[1]:
            yield Report(f"`include {written}` names no file beside this makefile: the settings it would hold are "
                         f"not read", severity=Severity.NOTE, line=number, col=1, discriminator=f"include {written}")
        texts = [(other, settings(other.rel or other.path, other.text, None, flag_words(other.text)))
                 for other in included[0]]
        uses = "\n".join([text, *(other_text for _other, other_text in texts)])
    if joins == "shell":  # a variable the file passes to an architecture flag: its assignments are settings
        named += _assigned(text, uses)
    if included:
        here = os.path.dirname(os.path.abspath(source.path))
        for other, other_text in texts:
            found = _included_settings(other_text, uses, source_folder=here, other=other.path)
            shown = other.rel or other.path
            yield from _judged(source, [(n, c, w, f, k, n) for n, c, w, f, s, k in found
                                        if f in families and s == ""], ctx.options["portable"] == "note",
                               included=(other.at, shown))
    at: dict[tuple[int, int], int] = {}  # a variable's value: the line of the setting that uses the variable
    if joins == "python" and (tree := _tree(source)) is not None:
        named += _python_variables(tree, source.text)
    if source.rel.rsplit("/", 1)[-1] == "CMakeLists.txt" or source.rel.endswith(".cmake"):
        named += _continued_cmake_values(text, flagged)
        for number, col, written, family, suffix, kind, used in _cmake_variables(text):
            named.append((number, col, written, family, suffix, kind))
            at[(number, col)] = used
    seen: set[tuple[int, int]] = set()  # a value both a setting and a variable's reading name is one architecture
    for number, col, written, family, suffix, kind in named:
        if family not in families or (number, col) in seen:
            continue
        seen.add((number, col))
        if suffix == "":
            bare.append((number, col, written, family, kind, at.get((number, col), number)))
        elif suffix == "f" and warn_family:
            yield Report(f"`{written}`: {family_note(family)}", severity=Severity.WARNING, line=number,
                         col=col + 1, end_line=number, end_col=col + 1 + len(written), discriminator=written)
    if bare:
        # The verdict reads the sources the build compiles.
        source.derived[READS_BEYOND] = True
        yield from _judged(source, bare, ctx.options["portable"] == "note")


# CMake's assignments of a variable (`set(SM 120)`, `list(APPEND ARCHS 90 120)`, `foreach(sm 90 120)`), up to the
# value's `)` or the `CACHE`/`PARENT_SCOPE` that ends it, and a reference to one (`${SM}`).
_CMAKE_ASSIGNMENT = lazy(r"\b(?:set|list\s*\(\s*APPEND|foreach)\s*\(?\s*(\w+)\s+(?:IN\s+(?:LISTS|ITEMS)\s+)?"
                         r"((?:(?!\bCACHE\b|\bPARENT_SCOPE\b)[^)])*)", re.IGNORECASE)
_CMAKE_REFERENCE = lazy(r"\$\{(\w+)\}")


def _cmake_variables(text: str) -> list[tuple[int, int, str, str, str, str, int]]:
    """(line, column, text as written, family, suffix, kind, line of the setting that uses it) of the architectures
    a CMake file assigns to a variable that an architecture setting uses: `set(ARCHS 120)` under
    `CUDA_ARCHITECTURES ${ARCHS}` (or `set(CMAKE_CUDA_ARCHITECTURES ${ARCHS})`), `set(SM 120)` under
    `-gencode arch=compute_${SM},code=sm_${SM}`, `set(ARCH sm_120)` under `-arch=${ARCH}`; also through another
    variable (`set(B ${A})`) and a `foreach` over a list."""
    used: dict[str, tuple[str, int]] = {}  # variable -> (kind of its values, the line of the setting using it)
    lines = text.splitlines()
    for number, line in enumerate(lines, 1):
        for setting in _CMAKE_ARCHS.finditer(line):
            for ref in _CMAKE_REFERENCE.finditer(setting.group(1)):
                used.setdefault(ref.group(1), ("CUDA_ARCHITECTURES", number))
        for ref in _ARCH_VARIABLE.finditer(line):
            used.setdefault(_named(ref), ("whole", number))
        for ref in _NUMBER_VARIABLE.finditer(line):
            used.setdefault(_named(ref), ("number", number))
    if not used:
        return []
    starts = list(accumulate(map(len, text.splitlines(keepends=True)), initial=0))
    assigned = [(match.group(1), match.start(2), match.group(2)) for match in _CMAKE_ASSIGNMENT.finditer(text)]
    for _ in range(len(assigned)):  # `set(B ${A})` under a setting that uses B makes A one too
        grown = False
        for name, _start, value in assigned:
            for ref in _CMAKE_REFERENCE.finditer(value):
                if name in used and ref.group(1) not in used:
                    used[ref.group(1)] = used[name]
                    grown = True
        if not grown:
            break
    out: list[tuple[int, int, str, str, str, str, int]] = []
    for name, start, value in assigned:
        if name not in used:
            continue
        kind, use = used[name]
        if kind == "whole":
            found = [(m.start(), m.group(0), m.group(2), m.group(3), "flags") for m in _NVCC_ARCH.finditer(value)]
        else:
            pattern = _CMAKE_VALUE if kind == "CUDA_ARCHITECTURES" else _ARCH_NUMBER
            found = [(m.start(), m.group(0), m.group(1), m.group(2), "CUDA_ARCHITECTURES" if kind ==
                      "CUDA_ARCHITECTURES" else "flags") for m in pattern.finditer(value)]
        for offset, written, family, suffix, shown in found:
            at = start + offset
            number = bisect_right(starts, at)
            out.append((number, at - starts[number - 1], written, family, suffix, shown, use))
    return out


# The text before a name an architecture flag is built from in Python: the whole value (`"-arch=" + SM`,
# `f"--gpu-architecture={SM}"`) or an architecture's number (`f"arch=compute_{CC},code=sm_{CC}"`).
_PY_WHOLE = lazy(r"(?:-arch|--gpu-architecture|-code|--gpu-code|(?<![.\w])arch|(?<![.\w])code)[= ]$")
_PY_NUMBER = lazy(r"(?<![\w.])(?:sm|compute)_$")


def _python_variables(tree: ast.Module, text: str) -> list[tuple[int, int, str, str, str, str]]:
    """(line, column, text as written, family, suffix, kind) of the architectures a Python build script assigns to
    a module-level string constant (assigned once) that an architecture flag is built from: `SM = "sm_120"` under
    `"-arch=" + SM`, `CC = "120"` under `f"arch=compute_{CC},code=sm_{CC}"`."""
    from kgate.collect import pysource as py

    used: dict[str, str] = {}
    for node in ast.walk(tree):
        pieces: list[ast.expr] = []
        if isinstance(node, ast.JoinedStr):
            pieces = list(node.values)
        elif isinstance(node, ast.BinOp) and isinstance(node.op, ast.Add):
            pieces = [node.left, node.right]
        for before, after in zip(pieces, pieces[1:]):
            value = after.value if isinstance(after, ast.FormattedValue) else after
            if not (isinstance(before, ast.Constant) and isinstance(before.value, str) and isinstance(value, ast.Name)):
                continue
            if _PY_NUMBER.search(before.value):
                used.setdefault(value.id, "number")
            elif _PY_WHOLE.search(before.value):
                used.setdefault(value.id, "whole")
    if not used:
        return []
    lines = text.splitlines()
    out: list[tuple[int, int, str, str, str, str]] = []
    for name, value in py.module_constants(tree).items():
        if name not in used or not isinstance(value, ast.Constant) or not isinstance(value.value, str) or \
                value.end_lineno != value.lineno or value.lineno > len(lines):
            continue
        line = lines[value.lineno - 1]
        written = line.encode()[value.col_offset:value.end_col_offset or 0].decode(errors="replace")
        start = len(line.encode()[:value.col_offset].decode(errors="replace")) + written.find(value.value)
        if written.find(value.value) < 1:
            continue  # a literal written otherwise (escapes, implicit joins): not placed
        pattern = _NVCC_ARCH if used[name] == "whole" else _ARCH_NUMBER
        for match in pattern.finditer(value.value):
            family, suffix = (match.group(2), match.group(3)) if used[name] == "whole" else \
                (match.group(1), match.group(2))
            out.append((value.lineno, start + match.start(), match.group(0), family, suffix, "flags"))
    return out


# A word of a CMake argument list that may stand among architectures on a line of their own.
_CMAKE_WORD = lazy(r"\d{2,3}[af]?(?:-real|-virtual)?|native|all|all-major")
_CMAKE_SEPARATORS = lazy(r"[\s;\"']+")


def _continued_cmake_values(text: str, flagged: list[tuple[int, str]]) -> list[tuple[int, int, str, str, str, str]]:
    """(line, column, text as written, family, suffix, kind) of the architectures of a CMake `CUDA_ARCHITECTURES`
    setting on the lines after the one that names it: an argument list goes on to its `)` (`set(CMAKE_CUDA_ARCHITECTURES
    <newline> 90 <newline> 120)`), as long as its lines hold architectures only."""
    lines = text.splitlines()
    out: list[tuple[int, int, str, str, str, str]] = []
    for number, line in flagged:
        for setting in _CMAKE_ARCHS.finditer(line):
            if ")" in line[setting.start():]:
                continue  # the argument list closes on this line
            following = number  # the 0-based index of the next line
            while following < len(lines):
                close = lines[following].find(")")
                part = lines[following] if close < 0 else lines[following][:close]
                if not all(_CMAKE_WORD.fullmatch(word) for word in _CMAKE_SEPARATORS.split(part) if word):
                    break
                out.extend((following + 1, value.start(), value.group(0), value.group(1), value.group(2),
                            "CUDA_ARCHITECTURES") for value in _CMAKE_VALUE.finditer(part))
                if close >= 0:
                    break
                following += 1
    return out


def _included(source: Any) -> tuple[list[Any], list[tuple[int, str]]] | None:
    """The makefiles a Makefile includes (`kgate.collect.make_includes`) and (line, name) of its `include`s that name
    no file; None for a file of another kind."""
    if not (source.name in ("Makefile", "makefile", "GNUmakefile") or source.name.endswith(".mk")):
        return None
    from kgate.collect.make_includes import includes

    found, missing = includes(source.path, source.rel, source.text)
    return found, [(m.line, m.name) for m in missing]


def _assigned(text: str, uses: str) -> list[tuple[int, int, str, str, str, str]]:
    """The architectures a shell script's or Makefile's assignments give a variable that the flags of `uses` (the
    file, with the makefiles it includes) pass on."""
    return [*((number, *found) for number, line in _assigned_architectures(text, uses)
              for found in _architectures(line, "shell")), *_assigned_numbers(text, uses)]


def _included_settings(text: str, uses: str, *, source_folder: str, other: str
                       ) -> list[tuple[int, int, str, str, str, str]]:
    """The architectures an included makefile (`text`, prose blanked; at `other`) sets for the including build:
    its flag lines and the assignments the build's flags use. Those its own reading finds, where the makefile's
    folder holds the including one's (it owns the same sources, so its own check judges them), are left to it."""
    from kgate.collect.make_includes import is_makefile

    named = [(number, *found) for number, line in flag_lines(text) if _CONTEXT.search(line)
             for found in _architectures(line, "shell")]
    named += _assigned(text, uses)
    folder = os.path.dirname(other)
    if is_makefile(os.path.basename(other)) and (source_folder + os.sep).startswith(folder + os.sep):
        own = set(_assigned(text, text)) | {(number, *found) for number, line in flag_lines(text)
                                            if _CONTEXT.search(line) for found in _architectures(line, "shell")}
        named = [item for item in named if item not in own]
    return list(dict.fromkeys(named))


def _judged(source: Any, bare: list[tuple[int, int, str, str, str, int]], note: bool,
            included: tuple[int, str] | None = None) -> Iterator[Report]:
    """A report for each bare architecture whose build compiles arch-specific code of its family (a note for one
    that compiles none, when asked); each is judged by the sources of the setting on its last line (the one that
    uses the variable a value is assigned to, or its own). `included`: (the line of this Makefile's `include`, the
    makefile it reads) where the architectures are written in an included makefile: each is reported at that
    `include`, naming its place there, without a fix (a finding and its fix belong to the file linted)."""
    from kgate.collect.build_handoff import handed_on
    from kgate.collect.build_units import units
    from kgate.hardware.arch_features import lost_by_bare

    here = os.path.dirname(os.path.abspath(source.path))
    tree = _tree(source)
    handed = handed_on(tree, source.path, here) if tree is not None else []
    found = _Builds(here, units(source.name, source.text, tree))
    for number, col, written, family, kind, used in bare:
        span: dict[str, Any] = {"line": number, "col": col + 1, "end_line": number, "end_col": col + 1 + len(written),
                "discriminator": written}
        where_set = ""
        if included is not None:
            span = {"line": included[0], "col": 1, "discriminator": f"{written} {included[1]}:{number}:{col + 1}",
                    "related": (Related(included[1], number, f"`{written}` is written here"),)}
            where_set = f" (written at {included[1]}:{number}, which this makefile includes)"
        inner = [(first, folder) for first, last, folder in handed if first <= number <= last]
        folder = max(inner, key=lambda item: item[0])[1] if inner else here
        if folder is None:
            continue  # handed to another build tool in a folder that cannot be read here: its sources are unknown
        evidence = found.uses(folder, used if included is None else included[0], kind, family)
        if evidence is not None:
            where, spelling = os.path.relpath(evidence[0], here).replace(os.sep, "/"), evidence[1]
            target = _a_spelling(written)
            fix = Fix(f"`{written}` -> `{target}`: sm_{family}a is arch-specific: it runs on sm_{family} only and "
                      f"carries no forward-compatible PTX for later GPUs", Applicability.UNSAFE,
                      (Edit(number, col, number, col + len(written), target),))
            yield Report(f"`{written}`{where_set} builds for the bare architecture, but `{where}` uses `{spelling}`: "
                         f"{lost_by_bare(family)} cannot be used; build for the `a` target ({target})",
                         fix=fix if included is None else None, **span)
        elif note:
            yield Report(f"`{written}`{where_set} builds for the bare architecture; no source this build compiles uses "
                         f"sm_{family}a-only code, so the portable target (which also embeds PTX for later GPUs) "
                         f"loses nothing", severity=Severity.NOTE, **span)


def _tree(source: Any) -> ast.Module | None:
    """The syntax tree of a Python build script; None for another file or one that does not parse (KG004's)."""
    if not source.name.endswith(".py"):
        return None
    try:
        tree: ast.Module = source.tree
    except Exception:  # noqa: BLE001 - an unreadable file is KG004's; judge it as the build file's folder
        return None
    return tree


class _Builds:
    """The sources each bare architecture's setting compiles, and the arch-specific code they use: a setting
    written for targets or extensions compiles theirs (and the headers they include); any other, every source
    its folder owns, less those of units that set their own architectures where its kind is the default one."""

    def __init__(self, here: str, found: Units) -> None:
        self.here, self.units = here, found
        self._owned: dict[str, list[str]] = {}
        self._uses: dict[tuple[tuple[str, ...], str], tuple[str, str] | None] = {}

    def uses(self, folder: str, line: int, kind: str, family: str) -> tuple[str, str] | None:
        """(a source, the arch-specific spelling it uses) for the setting on `line`, None if no source uses any."""
        paths = tuple(self._compiled(folder, line, kind))
        key = (paths, family)
        if key not in self._uses:
            from kgate.collect.build_sources import arch_uses
            from kgate.hardware.arch_features import ARCH_SPECIFIC_NEEDLES

            self._uses[key] = arch_uses(paths, {family: _code()[family]}, ARCH_SPECIFIC_NEEDLES[family]).get(family)
        return self._uses[key]

    def _owned_by(self, folder: str) -> list[str]:
        if folder not in self._owned:
            from kgate.collect.build_sources import owned_sources

            self._owned[folder] = owned_sources(folder)
        return self._owned[folder]

    def _compiled(self, folder: str, line: int, kind: str) -> list[str]:
        from kgate.collect.build_sources import included

        owned = self._owned_by(folder)
        if folder != self.here:
            return owned  # handed to another build: its folder's sources
        mine = self.units.for_line(line)
        if mine and all(unit.known for unit in mine):
            reached = included(self._paths(mine), owned)
            return [path for path in owned if path in reached]
        apart = [unit for unit in self.units.replacing(kind) if unit.known]
        if not apart:
            return owned
        # What only those units compile is dropped: a source of another unit, or of none, keeps what it includes.
        others = self._paths([unit for unit in self.units.units if unit.replaces != kind])
        rest = [path for path in owned if path.endswith(_COMPILED) and (path in others or path not in
                                                                           self._paths(apart))]
        dropped = included(self._paths(apart), owned) - included(rest, owned)
        return [path for path in owned if path not in dropped]

    def _paths(self, found: list[Unit]) -> set[str]:
        return {os.path.normpath(os.path.join(self.here, source)) for unit in found for source in unit.sources}


@cache
def _code() -> dict[str, re.Pattern[str]]:
    """Family -> the arch-specific code of that family, searched in the code of sources (not their comments or
    strings)."""
    from kgate.hardware.arch_features import ARCH_SPECIFIC_CODE

    return {family: re.compile(pattern.decode("latin-1")) for family, pattern in ARCH_SPECIFIC_CODE.items()}


# Sources compiled on their own (not only included).
_COMPILED = (".cu", ".cpp", ".cc", ".cxx", ".ptx")


# A variable passed whole to an architecture flag in a shell script or a Makefile, quoted or not: `-arch=$(GPU_ARCH)`,
# `-arch $SM`, `--gpu-architecture="${TARGET}"`, `code=$(CODE)`, `-arch=${SM:-sm_90}`.
_REFERENCE = r"[\"']?\$(?:\((\w+)\)|\{(\w+)(?:[:?=+#%-][^}]*)?\}|(\w+))"
_ARCH_VARIABLE = lazy(r"(?:-arch|--gpu-architecture|-code|--gpu-code|(?<![.\w])arch|(?<![.\w])code)(?:=|\s+)"
                      + _REFERENCE)
# A variable that gives an architecture's number: `sm_$(SM)`, `compute_${ARCH}` (not `sm_$(SM)a`, which is suffixed).
_NUMBER_VARIABLE = lazy(r"(?<![\w.])(?:sm|compute)_" + _REFERENCE + r"(?!\w)")
# An assignment of a variable in a shell script or a Makefile (`NAME = `, `NAME ?= `, `NAME := `, `export NAME=`).
_ASSIGNMENT = lazy(r"^[ \t]*(?:export[ \t]+|override[ \t]+)?(\w+)[ \t]*(?:[:+?!]|::|:::)?=")
# An assignment's value that is one other variable, quoted or not (`GPU = $(SM)`, `ARCH="${SM}"`).
_WHOLE_REFERENCE = lazy(r"\s*" + _REFERENCE + r"[\"']?\s*$")
# An architecture's number (`120`, `90a`) in the value of a variable `_NUMBER_VARIABLE` names.
_ARCH_NUMBER = lazy(r"(?<![\w.$])(\d{2,3})([af]?)(?![\w.])")


def _named(match: re.Match[str]) -> str:
    return next(name for name in match.groups() if name)


# A loop that gives a variable each word of a list: a Makefile's `$(foreach sm,90 120,...)`, a shell's
# `for sm in 90 120; do`.
_FOREACH = lazy(r"\$\(foreach\s+(\w+)\s*,([^,]*),|^[ \t]*for[ \t]+(\w+)[ \t]+in[ \t]+([^;\n]*)", re.MULTILINE)


def _assignments(text: str) -> Iterator[tuple[int, str, str, int]]:
    """(line number, line, variable, offset of its value in the line) of each assignment of a shell script or
    Makefile, and of each loop that gives a variable the words of a list (`_FOREACH`)."""
    for number, line in enumerate(text.splitlines(), 1):
        match = _ASSIGNMENT.match(line)
        if match:
            yield number, line, match.group(1), match.end()
        if "for" in line:
            for loop in _FOREACH.finditer(line):
                if loop.group(1):
                    yield number, line[:loop.end(2)], loop.group(1), loop.start(2)
                else:
                    yield number, line[:loop.end(4)], loop.group(3), loop.start(4)


def _variables(text: str) -> tuple[set[str], set[str]]:
    """The variables of a shell script or Makefile that give an architecture flag its whole value, and those that give
    the number of an `sm_`/`compute_` word; a variable assigned (or looping over) just another variable passes its
    kind on (`GPU = $(SM)` under `-arch=$(GPU)` makes `SM` one, `$(foreach sm,$(SMS),...sm_$(sm))` makes `SMS`)."""
    whole = {_named(match) for match in _ARCH_VARIABLE.finditer(text)}
    numbers = {_named(match) for match in _NUMBER_VARIABLE.finditer(text)}
    if not whole and not numbers:
        return whole, numbers
    passed: list[tuple[str, str]] = []
    for _number, line, name, start in _assignments(text):
        value = _WHOLE_REFERENCE.fullmatch(line[start:])
        if value:
            passed.append((name, _named(value)))
    for _ in range(len(passed)):
        grown = False
        for name, other in passed:
            for kind in (whole, numbers):
                if name in kind and other not in kind:
                    kind.add(other)
                    grown = True
        if not grown:
            break
    return whole, numbers


def _assigned_architectures(text: str, uses: str = "") -> list[tuple[int, str]]:
    """(number, line) of the lines of a shell script or Makefile (prose blanked) that assign a variable the file
    (or `uses`: it with the makefiles it includes) passes whole to an architecture flag: `SM=sm_90` under `nvcc
    -arch=$SM`. A variable no flag uses names no build."""
    used = _variables(uses or text)[0]
    if not used:
        return []
    return list(dict.fromkeys((number, line) for number, line, name, _start in _assignments(text)
                              if name in used and not _CONTEXT.search(line)))


def _assigned_numbers(text: str, uses: str = "") -> list[tuple[int, int, str, str, str, str]]:
    """(line, column, text as written, family, suffix, kind) of the architecture numbers assigned to a variable of a
    shell script or Makefile that an `sm_`/`compute_` word ends with: `SM ?= 120` under `-arch=sm_$(SM)` is a bare
    `sm_120`, and so is each word of `$(foreach sm,90 120,...)` or `for sm in 90 120` under `sm_$(sm)`; `uses`: the
    text whose flags decide (the file with the makefiles it includes)."""
    used = _variables(uses or text)[1]
    out: list[tuple[int, int, str, str, str, str]] = []
    if not used:
        return out
    for number, line, name, start in _assignments(text):
        if name in used:
            out.extend((number, value.start(), value.group(0), value.group(1), value.group(2), "flags")
                       for value in _ARCH_NUMBER.finditer(line, start)
                       if value.group(2) or not _written_on(line, value.end(), "shell"))
    return out


def flag_words(text: str) -> list[int]:
    """Offsets of the words of `_FLAG_WORDS` in `text`, found by substring search: every line `_CONTEXT` matches holds
    one. The regular expression scans a build script many times slower, and most lines name no build flag."""
    offsets = []
    for word in _FLAG_WORDS:
        at = text.find(word)
        while at != -1:
            offsets.append(at)
            at = text.find(word, at + 1)
    return offsets


def flag_lines(text: str) -> list[tuple[int, str]]:
    """(number, line) of the lines of `text` (as `str.splitlines` cuts it) that hold a word of `_FLAG_WORDS`: a
    superset of the lines `_CONTEXT` matches."""
    offsets = flag_words(text)
    if not offsets:
        return []
    lines = text.splitlines()
    starts = list(accumulate(map(len, text.splitlines(keepends=True)), initial=0))
    return [(number, lines[number - 1]) for number in sorted({bisect_right(starts, at) for at in offsets})]


def _architectures(line: str, joins: str = "shell") -> Iterator[tuple[int, str, str, str, str]]:
    """(column, text as written, family, suffix, kind) of each architecture named on a line; the kind is "flags"
    (nvcc's spelling), "CUDA_ARCHITECTURES" or "TORCH_CUDA_ARCH_LIST". A real target listed in the `code=` of a
    `-gencode` whose virtual architecture is the same family's `a` or `f` one takes that suffix:
    `arch=compute_120f,code=sm_120` assembles SASS for sm_120 from the family PTX, which keeps what the bare build
    loses (measured: the same cubin as `code=sm_120f`)."""
    seen: set[int] = set()
    inherited = _inherited_suffixes(line)
    for match in _NVCC_ARCH.finditer(line):
        seen.add(match.start())
        if not match.group(3) and _written_on(line, match.end(), joins):
            continue
        suffix = match.group(3) or inherited.get((match.start(), match.group(2)), "")
        yield match.start(), match.group(0), match.group(2), suffix, "flags"
    for cmake in _CMAKE_ARCHS.finditer(line):
        for match in _CMAKE_VALUE.finditer(cmake.group(1)):
            start = cmake.start(1) + match.start()
            if start not in seen and not (not match.group(2) and _written_on(line, cmake.start(1) + match.end(),
                                                                              joins)):
                yield start, match.group(0), match.group(1), match.group(2), "CUDA_ARCHITECTURES"
    for torch in _TORCH_LIST.finditer(line):
        for match in _TORCH_VALUE.finditer(torch.group(0)):
            if not match.group(3) and _written_on(line, torch.start() + match.end(), joins):
                continue
            family = f"{match.group(1)}{match.group(2)}"
            yield torch.start() + match.start(), match.group(0), family, match.group(3), "TORCH_CUDA_ARCH_LIST"


# What may go on writing an architecture's word after its digits, where the build puts the word together: a
# variable or a format field (`sm_120${SUFFIX}`, `$(SUF)`, `@SUF@`, `f"sm_120{suffix}"`), a backslash right after
# it that joins the next line; in a shell command or a Makefile, a quoted string joined to the word (`sm_120"a"`,
# `"-arch=sm_120"a`); in Python, a string literal or `+` after the one the architecture ends
# (`"-arch=sm_120" "a"`, `"sm_120" + suffix`). CMake joins no quoted argument to another.
_WRITTEN_ON = lazy(r"[$@{]|\\\s*$")
_JOINED = {"shell": lazy(r"[\"']{1,2}[A-Za-z0-9_]"), "python": lazy(r"[\"']\s*(?:[rRbBuUfF]{0,2}[\"']|\+)")}


def _written_on(line: str, end: int, joins: str) -> bool:
    """Whether the word an architecture starts goes on after its digits (its `a` or `f` may be written there), so
    that the text does not show it bare; such an architecture is neither reported nor rewritten."""
    joined = _JOINED.get(joins)
    return bool(_WRITTEN_ON.match(line, end) or joined is not None and joined.match(line, end))


_GENCODE = lazy(r"(?<![.\w])arch=compute_(\d{2,3})([af])\s*,\s*code=(\[[^\]]*\]|[^\s\"',;]+)")


def _inherited_suffixes(line: str) -> dict[tuple[int, str], str]:
    """(column, family) -> suffix for the real targets in the `code=` of a family- or arch-specific `-gencode`."""
    out: dict[tuple[int, str], str] = {}
    for clause in _GENCODE.finditer(line):
        for target in _NVCC_ARCH.finditer(clause.group(3)):
            if target.group(1) == "sm" and target.group(2) == clause.group(1):
                out[(clause.start(3) + target.start(), clause.group(1))] = clause.group(2)
    return out


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
           "*.sh", "CMakePresets.json", "pyproject.toml"),
    # `include`: a Makefile whose architectures are in a makefile it includes.
    prefilter=(b"sm_", b"compute_", b"CUDA_ARCHITECTURES", b"TORCH_CUDA_ARCH_LIST", b"include"),
    reads=frozenset({Artifact.SOURCE}),
    fixes=True,
)
