"""What the compilers read from the environment, so that it is part of every compile's key.

Triton reads its knobs from environment variables at each compile (`TRITON_DEFAULT_FP_FUSION=0` turns
`x * a + b` into FMUL and FADD instead of one FFMA; `DISABLE_PTXAS_OPT=1` runs ptxas at -O0), and nvcc
adds `NVCC_PREPEND_FLAGS` and `NVCC_APPEND_FLAGS` to every command line. A cached record made without
them is not the kernel a run with them compiles, so the variables that are set go into the key.

The names Triton reads are taken from the installed Triton's `knobs.py` as text (Triton is not imported
for it), with every `TRITON_*` variable besides and the names its compiled library reads (`DISABLE_LLVM_OPT`,
`DISABLE_MMA_V5`: the ones Triton keys its own cache on, listed here); a Triton without that file (before 3.4)
reads the historic names listed here too. A variable whose value names a file or a folder (`TRITON_LIBDEVICE_PATH`,
`TRITON_OVERRIDE_DIR`) is keyed by what is there as well as by its name.

The programs the compilers are, or run, are keyed by their identity (`program_identity`): the ptxas a variable
names, the nvcc found on PATH or under CUDA_HOME, and the host compiler nvcc preprocesses device code with (the
gcc on PATH, or the one `-ccbin` or NVCC_CCBIN names). A program that is a script (a wrapper around the real
compiler) is keyed by the variables it names and by the files it names with its variables expanded (the programs
it runs, as PATH finds them, and the settings it sources), not those it writes to. A file nvcc's flag variables
name (`--options-file`) is keyed by its state. Keying on a variable that changes nothing costs a compile, never a
verdict.
"""

from __future__ import annotations

import importlib.util
import os
import re
from collections.abc import Callable, Iterable
from functools import cache
from pathlib import Path

from kgate.support import filestat, reads

# Variables that change no compiled kernel: those kgate sets for its compile workers (the cache it gives Triton,
# that Triton always compiles, that its log is kept, that no interpreter runs), and those that choose only where
# Triton keeps or shares its files or what it prints. Keyed, they would only make a run compile again.
NOT_CODE = frozenset({"TRITON_CACHE_DIR", "TRITON_ALWAYS_COMPILE", "TRITON_CACHE_MANAGER", "TRITON_DUMP_PTXAS_LOG",
                      "TRITON_INTERPRET", "TRITON_HOME", "TRITON_DUMP_DIR", "TRITON_PRINT_AUTOTUNING",
                      "TRITON_CACHE_AUTOTUNING", "TRITON_REMOTE_CACHE_BACKEND", "TRITON_REDIS_HOST",
                      "TRITON_REDIS_PORT", "TRITON_REDIS_KEY_FORMAT"})
# Triton's knobs without the TRITON_ prefix, in the releases that have no knobs.py.
_OLD_TRITON_NAMES = ("DISABLE_LLVM_OPT", "DISABLE_PTXAS_OPT", "PTXAS_OPTIONS", "MLIR_ENABLE_DUMP",
                     "LLVM_IR_ENABLE_DUMP", "USE_IR_LOC", "NVPTX_ENABLE_DUMP", "LLVM_ENABLE_TIMING")
# What Triton's compiled library reads without the TRITON_ prefix, and keys its own cache on (its list of
# cache-invalidating variables); knobs.py does not name them all.
_LIBRARY_NAMES = ("ALLOW_LHS_TMEM_LAYOUT_CONVERSION", "AMDGCN_ENABLE_DUMP", "AMDGCN_USE_BUFFER_ATOMICS",
                  "AMDGCN_USE_BUFFER_OPS", "DISABLE_FAST_REDUCTION", "DISABLE_LLVM_OPT", "DISABLE_MMA_V3",
                  "DISABLE_MMA_V5", "DISABLE_PTXAS_OPT", "LLVM_ENABLE_TIMING", "LLVM_EXTRACT_DI_LOCAL_VARIABLES",
                  "LLVM_IR_ENABLE_DUMP", "LLVM_PASS_PLUGIN_PATH", "MLIR_DISABLE_MULTITHREADING", "MLIR_DUMP_PATH",
                  "MLIR_ENABLE_DIAGNOSTICS", "MLIR_ENABLE_DUMP", "MLIR_ENABLE_REMARK", "MLIR_ENABLE_TIMING",
                  "NVPTX_ENABLE_DUMP", "USE_IR_LOC")
# What nvcc, and the host compiler it runs to preprocess, read from the environment.
NVCC_NAMES = ("NVCC_PREPEND_FLAGS", "NVCC_APPEND_FLAGS", "NVCC_CCBIN", "CPATH", "C_INCLUDE_PATH",
              "CPLUS_INCLUDE_PATH")
# Knobs that name a folder Triton reads from (the others name where it writes: a dump, a cache); a file any knob
# names is read.
_INPUT_FOLDERS = frozenset({"TRITON_OVERRIDE_DIR"})
_FOLDER_FILES = 10000  # files of a folder a variable names that are keyed by their state, at most
_SCRIPT_HEAD = 1 << 16  # what is read of a script for the variables it names


@cache
def _knob_names(knobs: str) -> frozenset[str]:
    try:
        text = Path(knobs).read_text(encoding="utf-8", errors="replace")
    except OSError:
        return frozenset(_OLD_TRITON_NAMES)
    return frozenset(re.findall(r"""["']([A-Z][A-Z0-9_]{2,})["']""", text))


def triton_names() -> frozenset[str]:
    """The environment variables the installed Triton may read as knobs, besides every `TRITON_*` one."""
    try:
        spec = importlib.util.find_spec("triton")
    except (ImportError, ValueError):
        spec = None
    folders = list(spec.submodule_search_locations or []) if spec is not None else []
    knobs = next((os.path.join(f, "knobs.py") for f in folders if os.path.isfile(os.path.join(f, "knobs.py"))), "")
    return (_knob_names(knobs) if knobs else frozenset(_OLD_TRITON_NAMES)) | frozenset(_LIBRARY_NAMES)


def triton_environment() -> dict[str, str]:
    """The variables set in this environment that Triton's compiler reads, sorted by name (one that names a file
    or a folder with what is there)."""
    names = triton_names()
    return {k: _with_what_it_names(k, v) for k, v in sorted(os.environ.items())
            if (k in names or k.startswith("TRITON_")) and k not in NOT_CODE}


def nvcc_environment() -> dict[str, str]:
    """The variables set in this environment that nvcc and its host compiler read, sorted by name, the flags with
    the state of each file they name (`--options-file F`: nvcc reads more flags from it). The headers found
    through CPATH and its kin are keyed as the compile reads them; the host compiler by `nvcc_programs`."""
    return {k: _with_what_it_names(k, os.environ[k], _flag_paths) if k.endswith("_FLAGS") else os.environ[k]
            for k in NVCC_NAMES if k in os.environ}


def _flag_paths(text: str) -> list[str]:
    """The words of a command line, and the value of each `--option=value` among them."""
    return [part for word in text.split() for part in dict.fromkeys((word, word.partition("=")[2])) if part]


def _path_list(text: str) -> list[str]:
    return [os.path.expanduser(part) for part in text.split(os.pathsep) if part]


def _with_what_it_names(name: str, text: str, paths: Callable[[str], list[str]] = _path_list) -> str:
    """A variable's value, with the state of each file (or input folder) it names: a path list's parts, or the
    words of flags (`paths`)."""
    if not text or len(text) > 4096:
        return text
    states = [state for part in paths(text) if (state := _state_of(name, part))]
    return text if not states else f"{text} [{'; '.join(states)}]"


def _state_of(name: str, path: str) -> str:
    if os.path.isfile(path):
        return program_identity(path)
    if name not in _INPUT_FOLDERS or not os.path.isdir(path):
        return ""
    reads.note_folder(path)
    return _folder_state(path)


def _folder_state(path: str) -> str:
    """Every file under a folder by its state (its first `_FOLDER_FILES`, in order)."""
    states = []
    for folder, dirs, files in os.walk(path):
        dirs.sort()
        for file in sorted(files):
            full = os.path.join(folder, file)
            states.append(f"{os.path.relpath(full, path)}:{filestat.path_state(full)}")
            if len(states) >= _FOLDER_FILES:
                return "|".join(states)
    return "|".join(states)


def program_identity(path: str, depth: int = 3) -> str:
    """What a program is for a key: its file's name and state; for a script (a wrapper that runs the real
    compiler), also the values of the variables it names (`$NAME`, `os.environ.get("NAME")`, `$ENV{NAME}`) and
    the files it names, with its variables expanded as this environment sets them (`"$TOOLKIT/bin/nvcc"`: a
    link that a toolkit switched in place retargets is another program), each by its identity in turn: a
    program as a path or as PATH finds it, any other file by its path (settings it sources, options it passes).
    A file it writes to (`>> log`) is no input of it. Each is noted as an input of the run (its replay)."""
    try:
        identity = filestat.identity(path)
    except (OSError, ValueError):
        return f"{path}:missing"
    reads.note(path)
    text = _script(path)
    if text is None or depth <= 0:
        return identity
    variables = sorted({name for pattern in _VARIABLES for name in pattern.findall(text)})
    for name in variables:
        reads.note_env(name)
    body = os.path.expandvars(text[text.find("\n") + 1:])
    named = sorted({found for word in _read_words(body)
                    if (found := _named(word)) and os.path.realpath(found) != os.path.realpath(path)})
    return " ".join([identity, *(f"{name}={os.environ.get(name)!r}" for name in variables),
                     *(f"[{program_identity(p, depth - 1)}]" for p in named)])


# How a script names a variable: a shell's `$NAME` and `${NAME}`, Python's `os.environ["NAME"]`,
# `os.environ.get("NAME")` and `os.getenv("NAME")`, Perl's `$ENV{NAME}`.
_VARIABLES = (re.compile(r"\$\{?([A-Za-z_][A-Za-z0-9_]*)"),
              re.compile(r"""(?:environ|getenv)(?:\.get)?\W{1,3}["']([A-Za-z_][A-Za-z0-9_]*)["']"""),
              re.compile(r"""\$ENV\{\s*["']?([A-Za-z_][A-Za-z0-9_]*)"""))
_WORD = re.compile(r"(?<![\w$/.{-])(/[\w.+/-]+|[A-Za-z_][\w.+-]*)")


_WRITTEN = re.compile(r""">>?\s*["']?([^\s"';|&)]+)""")


def _read_words(body: str) -> set[str]:
    """The words of a script that may name what it runs or reads: not the files it redirects output to."""
    return set(_WORD.findall(body)) - set(_WRITTEN.findall(body))


def _named(word: str) -> str | None:
    """The file a word of a script names: any file by its path, a program as PATH finds it."""
    if word.startswith("/"):
        return word if os.path.isfile(word) else None
    import shutil  # here: a lint keys its runs by this module's names, and never runs nvcc

    found = shutil.which(word)
    return found if found and os.path.isfile(found) else None


def _script(path: str) -> str | None:
    """The text of a program that is a script (`#!`), None for a binary."""
    try:
        with open(path, "rb") as handle:
            head = handle.read(_SCRIPT_HEAD)
    except OSError:
        return None
    return head.decode("utf-8", errors="replace") if head.startswith(b"#!") else None


def nvcc_command_flags(flags: Iterable[str]) -> list[str]:
    """A compile's flags as nvcc applies them: NVCC_PREPEND_FLAGS before them, NVCC_APPEND_FLAGS after (a `-D` or
    `-U` of the environment's counts where nvcc puts it)."""
    return [*os.environ.get("NVCC_PREPEND_FLAGS", "").split(), *flags, *os.environ.get("NVCC_APPEND_FLAGS", "").split()]


def nvcc_programs(nvcc: str, flags: Iterable[str]) -> dict[str, str]:
    """The programs an nvcc compile runs that decide its output, by identity: nvcc itself and the host compiler it
    preprocesses device code with (`-ccbin`/`--compiler-bindir` in the flags or in NVCC_PREPEND_FLAGS or
    NVCC_APPEND_FLAGS, else NVCC_CCBIN, else gcc and g++ on PATH)."""
    out = {"nvcc": program_identity(nvcc)}
    for name, path in _host_compilers(nvcc_command_flags(flags)).items():
        out[name] = program_identity(path) if path else f"{name}:missing"
    return out


def _host_compilers(flags: list[str]) -> dict[str, str | None]:
    import shutil  # here: a lint keys its runs by this module's names, and never runs nvcc

    named = None
    for index, flag in enumerate(flags):
        for option in ("-ccbin", "--compiler-bindir"):
            if flag == option and index + 1 < len(flags):
                named = flags[index + 1]
            elif flag.startswith(option + "="):
                named = flag.split("=", 1)[1]
    named = named or os.environ.get("NVCC_CCBIN")
    if named:
        if os.path.isdir(named):
            return {n: shutil.which(n, path=named) for n in ("gcc", "g++")}
        return {"host": shutil.which(named) or named}
    return {n: shutil.which(n) for n in ("gcc", "g++")}
