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

**Arch-specific code**, per family (matched in those sources):

| family | spellings |
|---|---|
| 90 | `wgmma`, `setmaxnreg`, `__CUDA_ARCH_FEAT_SM90_ALL`, `CUTLASS_ARCH_MMA_SM90A_ENABLED`, CuTe `SM90_*_SS` / `SM90_*_RS` (GMMA atoms) |
| 100 | `tcgen05`, `UTCMMA`, `setmaxnreg`, `__CUDA_ARCH_FEAT_SM100_ALL`, `CUTLASS_ARCH_MMA_SM100A_ENABLED`, CuTe `SM100_*MMA*` / `SM100_*TMEM*` atoms |
| 120 | `.block_scale`, `kind::mxf8f6f4`, `kind::mxf4nvf4`, `kind::mxf4`, `setmaxnreg`, `__CUDA_ARCH_FEAT_SM120_ALL`, `CUTLASS_ARCH_MMA_SM120A_ENABLED`, CuTe `SM120_*_VS` (block-scaled) and `SM120_*MMA*` atoms |

TMA (`cp.async.bulk.tensor`, CuTe's `SM90_TMA_*`) and plain `mma.sync`
(bf16, FP8) are not among them: the bare targets assemble them. The error
names the first source found for the family and the spelling it uses.

A bare target whose build owns no such code is the right choice: it loses
nothing, and a bare `compute_` target embeds PTX that later GPUs can still
compile, where an `sm_90a` cubin runs on sm_90 only. It is not reported,
unless the option `portable` is `"note"`. The verdict reads files besides the
build file, so kgate never answers it from the lint cache.

The family target (`sm_120f`, `sm_100f`) is not reported unless the option
`family` is `"warn"`, because it was measured to keep what matters. With
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

import os
import re
from collections.abc import Iterable, Iterator
from typing import Any

from kgate.collect.cpp_text import strip_hash_comment
from kgate.core.findings import Severity
from kgate.core.fix import Applicability, Edit, Fix
from kgate.core.rule import READS_BEYOND, Option, Report, Rule, SourceContext
from kgate.hardware.arch_features import ARCH_SPECIFIC_CODE, ARCH_SPECIFIC_NEEDLES, family_note, lost_by_bare

# Words on a line that select GPU architectures.
_CONTEXT = re.compile(r"-gencode|--generate-code|-arch\b|--gpu-architecture|-code\b|--gpu-code|"
                      r"(?<![.\w])arch=|(?<![.\w])code=|CUDA_ARCHITECTURES|CUDA_ARCH|TORCH_CUDA_ARCH_LIST|NVCC|nvcc|cuda_cflags")
_NVCC_ARCH = re.compile(r"(?<![\w.])(sm|compute)_(\d{2,3})([af]?)(?![\w.])")
_CMAKE_ARCHS = re.compile(r"CUDA_ARCHITECTURES\b[\s\"'=:]*(?:PROPERTIES\s+)?([^)\n]*)")
_CMAKE_VALUE = re.compile(r"(?<![\w.])(\d{2,3})([af]?)(?:-real|-virtual)?(?![\w.])")
_TORCH_LIST = re.compile(r"TORCH_CUDA_ARCH_LIST\b[^\n]*")
_TORCH_VALUE = re.compile(r"(?<![\w.])(\d{1,2})\.(\d)([af]?)(?:\+PTX)?(?![\w.])")


def check(source: Any, ctx: SourceContext) -> Iterable[Report]:
    families = set(ctx.options["families"])
    warn_family = ctx.options["family"] == "warn"
    bare: list[tuple[int, int, str, str]] = []
    for number, raw in enumerate(source.text.splitlines(), 1):
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
    # The verdict reads the sources the build owns: one walk for the families named bare here.
    source.derived[READS_BEYOND] = True
    evidence = _arch_specific_code(os.path.dirname(os.path.abspath(source.path)),
                                   frozenset(family for _n, _c, _w, family in bare))
    note = ctx.options["portable"] == "note"
    for number, col, written, family in bare:
        span = {"line": number, "col": col + 1, "end_line": number, "end_col": col + 1 + len(written),
                "discriminator": written}
        if family in evidence:
            where, spelling = evidence[family]
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


def _architectures(line: str) -> Iterator[tuple[int, str, str, str]]:
    """(column, text as written, family, suffix) of each architecture named on a line."""
    seen: set[int] = set()
    for match in _NVCC_ARCH.finditer(line):
        seen.add(match.start())
        yield match.start(), match.group(0), match.group(2), match.group(3)
    for cmake in _CMAKE_ARCHS.finditer(line):
        for match in _CMAKE_VALUE.finditer(cmake.group(1)):
            start = cmake.start(1) + match.start()
            if start not in seen:
                yield start, match.group(0), match.group(1), match.group(2)
    for torch in _TORCH_LIST.finditer(line):
        for match in _TORCH_VALUE.finditer(torch.group(0)):
            family = f"{match.group(1)}{match.group(2)}"
            yield torch.start() + match.start(), match.group(0), family, match.group(3)


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
