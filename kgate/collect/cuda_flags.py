"""nvcc command lines: which GPU architectures they name, and the flags kgate keeps.

kgate compiles each CUDA source the way the project's build does (its
include paths, defines, language standard, `-Xptxas` options...), but it
decides the architecture and the outputs itself: one `-gencode` per kgate
target, device code only. So a project command line is split into the
architectures it names (`-gencode`, `--generate-code`, `-arch`, `-code`) and
the rest, from which output, dependency and mode flags are dropped.
"""

from __future__ import annotations

import re
import shlex
from dataclasses import dataclass
from pathlib import Path

from kgate.support.atomicio import read_input_text

_ARCH_NAME = re.compile(r"^(sm|compute|lto)_(\d+)([af]?)$")

# Flags dropped with the value that follows them (separate or `=`-joined).
_DROP_WITH_VALUE = {
    "-o", "--output-file", "-MF", "-MT", "-MQ", "--dependency-output", "-odir", "--output-directory",
    "--keep-dir", "-keep-dir", "-x", "--x", "--dependency-target-name",
}
# Flags dropped alone: modes and outputs that kgate chooses itself.
_DROP = {
    "-c", "--compile", "-cubin", "--cubin", "-ptx", "--ptx", "-fatbin", "--fatbin", "-E", "--preprocess",
    "-M", "-MM", "-MD", "-MMD", "-MP", "--generate-dependencies", "--generate-nonsystem-dependencies",
    "--generate-dependencies-with-compile", "--generate-nonsystem-dependencies-with-compile",
    "-keep", "--keep", "-dlink", "--device-link", "-lib", "--lib", "-link", "--link", "-run", "--run",
    "-dryrun", "--dryrun", "-v", "--verbose", "-optix-ir", "--optix-ir", "-lto", "-dlto",
}
# nvcc's options whose value is the next argument even where it starts with `-` (`-Xptxas -v`, `-Xcompiler -fPIC`):
# the value is the tool's, never a flag of nvcc's own.
PASS_ON = {"-Xcompiler", "--compiler-options", "-Xptxas", "--ptxas-options", "-Xlinker", "--linker-options",
           "-Xnvlink", "--nvlink-options", "-Xarchive", "--archive-options", "-Xfatbin", "--fatbin-options"}
_ARCH_FLAGS = {"-gencode", "--generate-code", "-arch", "--gpu-architecture", "-code", "--gpu-code"}
# Flags a non-nvcc compiler's command line may carry that mean the same to nvcc.
_PORTABLE = ("-I", "-D", "-U", "-isystem", "-std=", "-include", "-O")


@dataclass(frozen=True)
class ArchPair:
    """One `arch=compute_X,code=sm_Y` pair: the virtual architecture and the real one (or None: PTX only)."""

    virtual: str
    real: str | None

    @property
    def family(self) -> str:
        return arch_family(self.real or self.virtual)


def arch_family(name: str) -> str:
    """`sm_120a` -> `120`; '' when the name is not an architecture."""
    match = _ARCH_NAME.match(name)
    return match.group(2) if match else ""


def arch_suffix(name: str) -> str:
    match = _ARCH_NAME.match(name)
    return match.group(3) if match else ""


@dataclass(frozen=True)
class SplitFlags:
    flags: tuple[str, ...]  # everything kgate passes on
    archs: tuple[ArchPair, ...]  # the architectures the command line names


def split_flags(argv: list[str], *, nvcc: bool = True, source: str | None = None,
                cwd: Path | None = None) -> SplitFlags:
    """Separate the architectures from the other flags of one compiler command line (without argv[0])."""
    argv = _expand_option_files(argv, cwd)
    kept: list[str] = []
    arch_values: list[tuple[str, str]] = []
    index = 0
    while index < len(argv):
        arg = argv[index]
        name, eq, value = arg.partition("=")
        if source is not None and _same_file(arg, source, cwd):
            index += 1
            continue
        if nvcc and arg in PASS_ON and index + 1 < len(argv):
            kept.extend(argv[index:index + 2])
            index += 2
            continue
        if name in _ARCH_FLAGS or (name in ("-arch", "-code") and eq):
            if not eq:
                index += 1
                value = argv[index] if index < len(argv) else ""
            arch_values.append((name, value))
        elif name in _DROP_WITH_VALUE:
            if not eq:
                index += 1
        elif arg in _DROP or name in _DROP:
            pass
        elif arg in ("-dc", "--device-c"):
            kept.append("-rdc=true")
        elif nvcc:
            kept.append(arg)
        elif arg.startswith(_PORTABLE):
            kept.append(arg)
            if arg in ("-I", "-D", "-U", "-isystem", "-include") and index + 1 < len(argv):
                index += 1
                kept.append(argv[index])
        index += 1
    return SplitFlags(tuple(kept), tuple(parse_archs(arch_values)))


def parse_archs(values: list[tuple[str, str]]) -> list[ArchPair]:
    """Arch pairs from (flag, value) items: `-gencode arch=compute_120a,code=[sm_120a,compute_120a]`, `-arch=sm_90`..."""
    pairs: list[ArchPair] = []
    arch_only: list[str] = []
    codes: list[str] = []
    for flag, value in values:
        if flag in ("-gencode", "--generate-code"):
            fields = dict(re.findall(r"(arch|code)=(\[[^\]]*\]|[^,]+)", value))
            virtual = fields.get("arch", "")
            for code in _names(fields.get("code", "")) or [virtual.replace("compute_", "sm_")]:
                pairs.append(ArchPair(virtual, code if code.startswith("sm_") else None))
        elif flag in ("-arch", "--gpu-architecture"):
            arch_only.extend(_names(value))
        else:
            codes.extend(_names(value))
    for arch in arch_only:
        if not _ARCH_NAME.match(arch):
            continue  # native, all, all-major: kgate picks its own targets
        virtual = arch.replace("sm_", "compute_")
        reals = [c for c in codes if c.startswith("sm_")] if codes else ([arch] if arch.startswith("sm_") else
                                                                         [arch.replace("compute_", "sm_")])
        for real in reals:
            pairs.append(ArchPair(virtual, real))
    return list(dict.fromkeys(pairs))


def _names(value: str) -> list[str]:
    return [v.strip() for v in value.strip("[]").split(",") if v.strip()]


def choose_arch(archs: tuple[ArchPair, ...], target: str) -> ArchPair:
    """What to compile for a kgate target: the project's own arch of that family if it names one.

    A project that builds `sm_120` is compiled for `sm_120`, so the findings are
    those of the real build (a dropped block-scaled MMA, a ptxas error). Among
    several of one family the arch-specific one wins, as the driver picks it.
    """
    family = arch_family(target)
    same = [pair for pair in archs if pair.family == family]
    if not same:
        return ArchPair(target.replace("sm_", "compute_"), target)
    order = {"a": 0, "f": 1, "": 2}
    best = min(same, key=lambda pair: (order[arch_suffix(pair.real or pair.virtual)], pair.real is None))
    return ArchPair(best.virtual, best.real or best.virtual.replace("compute_", "sm_"))


def _expand_option_files(argv: list[str], cwd: Path | None) -> list[str]:
    """Inline `--options-file F` (CMake writes include paths there for long command lines)."""
    out: list[str] = []
    index = 0
    while index < len(argv):
        arg = argv[index]
        name, eq, value = arg.partition("=")
        if name in ("--options-file", "-optf"):
            if not eq:
                index += 1
                value = argv[index] if index < len(argv) else ""
            path = Path(value) if Path(value).is_absolute() or cwd is None else cwd / value
            try:
                out.extend(shlex.split(read_input_text(path)))
            except (OSError, UnicodeDecodeError, ValueError):
                pass  # a missing options file: the compile reports what is then missing
        else:
            out.append(arg)
        index += 1
    return out


def _same_file(arg: str, source: str, cwd: Path | None) -> bool:
    if arg.startswith("-") or not arg.endswith((".cu", ".cpp", ".cc", ".cxx", ".c")):
        return False
    path = Path(arg) if Path(arg).is_absolute() or cwd is None else cwd / arg
    try:
        return path.resolve() == Path(source).resolve()
    except OSError:
        return False


def include_dirs(flags: tuple[str, ...], cwd: Path) -> list[Path]:
    """The `-I`/`-isystem`/`--include-path` folders of a flag list, absolute."""
    out = []
    index = 0
    while index < len(flags):
        arg = flags[index]
        value = None
        for prefix in ("--include-path=", "-isystem=", "-I"):
            if arg.startswith(prefix) and len(arg) > len(prefix):
                value = arg[len(prefix):]
                break
        if value is None and arg in ("-I", "-isystem", "--include-path") and index + 1 < len(flags):
            index += 1
            value = flags[index]
        if value:
            path = Path(value)
            out.append(path if path.is_absolute() else cwd / path)
        index += 1
    return out


def gencode(pair: ArchPair) -> str:
    return f"--generate-code=arch={pair.virtual},code={pair.real}"
