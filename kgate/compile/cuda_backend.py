"""CUDA C++ sources compiled for one target, in a compile worker: device code only.

One task per source file and target. nvcc compiles the file's device code
(`-cubin`, so host code is parsed but not compiled) with the project's flags,
one `--generate-code` for the target, `-lineinfo` (PTX `.loc` lines, so a
finding can name the source line of an access) and `-Xptxas -v`; `--keep`
leaves the PTX nvcc made on the way, so one nvcc run gives PTX, cubin and the
ptxas log of every kernel in the file. Without nvcc, NVRTC compiles
device-only sources the same way. They are kept as the unit's artifacts
(`kgate.compile.units`); the facts stage reads which kernels are the project's
and their facts from them, here in the worker right after the compile where
the run asks for it (`kgate.compile.worker_facts`). SASS is disassembled
(`kgate.compile.disassembly`: the Triton wheel's `nvdisasm`, the code of the
functions wanted only) and kept only for the kernels whose SASS the run's plan
wants: after the compile, or later from the cached cubin (`disassemble_task`).

The compile leaves out what the configuration decides (PDL, expected
instructions, kind), so changing them recompiles nothing. With the artifacts
go the files the compile read (`headers`):
every header, wherever it is (a folder reached through a symlink, an
include folder outside the project, the system's and the toolkit's), as the
preprocessor's line markers in the files `--keep` leaves name them, which is
the list `nvcc -M` gives without a second preprocessing pass. The main
process keeps their content hashes beside the record and compiles again
when one differs.
"""

from __future__ import annotations

import os
import re
import shlex
import shutil
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from kgate.compile.cache import kept, write_artifact
from kgate.compile.disassembly import disassemble_functions
from kgate.compile.payloads import CudaReply, CudaRequest, FunctionsSassRequest
from kgate.compile.units import CUBIN, Compiled, steady_log, store_text
from kgate.compile.worker_facts import analysed
from kgate.compile.worker_imports import KernelError
from kgate.core.errors import ToolchainError
from kgate.support import scratch, tools

# nvcc's front end: `file.cu(12): error: ...`; the host preprocessor: `file.cu:2:10: fatal error: ...`.
_ERROR_LINE = re.compile(r"^(?P<file>[^\s(:]+)(?:\((?P<line>\d+)\)|:(?P<gline>\d+):\d+): (?:catastrophic |fatal )?error")
_PTXAS_ERROR = re.compile(r"^ptxas(?:-\w+)? .*error\s*:")
# nvcc's driver cannot run at all (no host compiler, an option it does not know): not the source's fault.
_NVCC_FATAL = re.compile(r"^nvcc fatal\s*:")
# A line that says what went wrong when none names a source line (`cc1plus: fatal error: ...`).
_ANY_ERROR = re.compile(r"\b(?:fatal|error)\b", re.IGNORECASE)
# A preprocessor line marker (`# 12 "/usr/include/stdio.h" 2`): the file the lines after it come from.
_LINE_MARKER = re.compile(rb'\n# \d+ "([^"\\\n]*(?:\\.[^"\\\n]*)*)"')


class CompilerUnusable(ToolchainError):
    """nvcc itself cannot work here (`nvcc fatal`): the run stops with exit 2 instead of a finding per file."""


class SourceError(KernelError):
    """The compiler rejected the source (not a timeout or a crash): a finding that the kernels did not compile."""

    def __init__(self, message: str, line: int = 1) -> None:
        super().__init__(message)
        self.line = line


def compile_source(payload: CudaRequest) -> CudaReply:
    """Compile one file for one target; keep its artifacts and return their content hashes and the files the
    compile read."""
    artifacts = Path(payload["artifacts"])
    read: list[str] = []  # every file the compile read, filled in as the compiler finishes
    try:
        if payload["compiler"] == "nvrtc":
            ptx, log, cubin_hash = _nvrtc(payload, artifacts, read)
        else:
            ptx, log, cubin_hash = _nvcc(payload, artifacts, read)
    except SourceError as exc:
        # A compiler's verdict on the source is as deterministic as its output: cached like it.
        return {"error": str(exc), "line": exc.line if exc.line is not None else 1, "artifacts": {}, "headers": read}
    except CompilerUnusable as exc:
        # Not a verdict on this file, and never cached: the main process stops the run.
        return {"toolchain_error": str(exc)}
    hashes = {"ptx": store_text(artifacts, "ptx", ptx), "ptxas_log": store_text(artifacts, "ptxas_log", steady_log(log))}
    context = {k: v for k, v in payload.items() if k not in ("key", "analyse")}
    unit = Compiled(key=payload["key"], folder=artifacts, language="cuda", target=payload["target"],
                    hashes=hashes, context=context, launch_sites=tuple(payload.get("launch_sites", ())))
    # The facts stage reads the file's kernels here and the SASS it lacks is disassembled from the cubin just written.
    unit = analysed(payload, unit, lambda symbols: (disassemble_functions(kept(artifacts / CUBIN, cubin_hash), symbols), tuple(symbols)))
    result: CudaReply = {"artifacts": dict(unit.hashes), "headers": read, "cubin": cubin_hash}
    if unit.sass_symbols:
        result["sass_symbols"] = list(unit.sass_symbols)
    return result


def disassemble_task(payload: FunctionsSassRequest) -> str:
    """The SASS of some functions of a cached cubin, kept beside it; its content hash."""
    cubin = Path(payload["cubin"])
    return store_text(cubin.parent, "sass", disassemble_functions(cubin, payload["symbols"]))


def nvcc_argv(payload: CudaRequest, keep_dir: Path, cubin: Path) -> list[str]:
    """The nvcc command kgate runs: the project's flags, then kgate's target and outputs."""
    return [_nvcc_path(payload), *payload["flags"], "-cubin", "-lineinfo", "-Xptxas", "-v",
            f"--generate-code=arch={payload['virtual']},code={payload['real']}",
            "--keep", "--keep-dir", str(keep_dir), "-o", str(cubin),
            os.path.relpath(payload["source"], payload["cwd"])]


def _nvcc_path(payload: CudaRequest) -> str:
    """The nvcc the file is compiled with (the run's preflight found it before planning an nvcc compile)."""
    nvcc = payload["nvcc"]
    if nvcc is None:
        raise CompilerUnusable(f"no nvcc was found to compile {payload['rel']}")
    return nvcc


def _nvcc(payload: CudaRequest, artifacts: Path, read: list[str]) -> tuple[str, str, str]:
    keep = scratch.make("kgate-nvcc-")
    try:
        return _nvcc_in(payload, artifacts, keep)
    finally:
        read.extend(files_read(keep, payload))
        shutil.rmtree(keep, ignore_errors=True)
        scratch.forget(keep)


def files_read(keep: Path, payload: Mapping[str, Any]) -> list[str]:
    """The files nvcc's preprocessor read (the device pass and the host pass), by the line markers of the
    preprocessed files it kept, as reached from the compile's folder (a symlink is not resolved); where it kept
    none (a compile stopped before preprocessing), the files an `#include` scan finds."""
    found: set[str] = set()
    kept = sorted(keep.glob("*.ii"))
    for name in kept:
        try:
            data = b"\n" + name.read_bytes()
        except OSError:
            continue
        for raw in set(_LINE_MARKER.findall(data)):
            text = os.fsdecode(re.sub(rb"\\(.)", rb"\1", raw))
            if text.startswith("<"):  # <built-in>, <command-line>
                continue
            path = os.path.abspath(os.path.join(payload["cwd"], text))
            if not path.startswith(str(keep) + os.sep):
                found.add(path)
    return sorted(found) if kept else scanned_headers(payload, [])


def scanned_headers(payload: Mapping[str, Any], folders: list[str]) -> list[str]:
    """The files an `#include` scan of the source reaches through its folder, the flags' `-I` folders and
    `folders`, wherever they are (an over-estimate: conditional includes count too)."""
    from kgate.collect.cuda_flags import include_dirs
    from kgate.collect.cuda_sources import scan_includes

    source = Path(payload["source"])
    dirs = include_dirs(tuple(payload["flags"]), Path(payload["cwd"])) + [Path(f) for f in folders]
    return sorted({str(source), *(str(p) for p in scan_includes(source, dirs, None))})


def _nvcc_in(payload: CudaRequest, artifacts: Path, keep: Path) -> tuple[str, str, str]:
    # nvcc writes the cubin in its private folder, then it is moved into the cache whole: another
    # kgate run sharing the cache may be disassembling the same file at that moment.
    cubin = keep / "kernel.cubin"
    argv = nvcc_argv(payload, keep, cubin)
    try:
        # The pool stops a compile at `timeout` (and every process it started); this is a backstop only,
        # so that a hung nvcc always gets the pool's message rather than one of two, by a race.
        done = tools.run(argv, cwd=payload["cwd"], timeout=payload.get("timeout", 600) + 60)
    except tools.ToolFailed as exc:
        if "timed out" in str(exc) or "killed by signal" in str(exc):
            raise KernelError(f"{exc} (reproduce: {repro(payload)})") from None
        raise _compiler_error(exc, payload, keep) from None
    ptx_files = sorted(keep.glob("*.ptx"))
    if not ptx_files:
        raise KernelError(f"nvcc kept no PTX for {payload['rel']} (reproduce: {repro(payload)})")
    try:
        binary = cubin.read_bytes()
    except OSError:
        binary = b""
    if not binary.startswith(b"\x7fELF"):
        # nvcc said it succeeded; without a cubin its figures and PTX cannot be trusted either.
        raise KernelError(f"nvcc exited 0 but wrote no cubin (its output is not an ELF file) "
                          f"(reproduce: {repro(payload)})")
    return ptx_files[0].read_text(errors="replace"), done.stdout + "\n" + done.stderr, write_artifact(artifacts / CUBIN, binary)


def repro(payload: CudaRequest) -> str:
    """A command that reproduces kgate's compile, to run in the compile's folder."""
    argv = [Path(_nvcc_path(payload)).name, *payload["flags"], "-cubin", "-Xptxas", "-v",
            f"--generate-code=arch={payload['virtual']},code={payload['real']}", "-o", "kernel.cubin",
            os.path.relpath(payload["source"], payload["cwd"])]
    return shlex.join(argv)


def _compiler_error(exc: tools.ToolFailed, payload: CudaRequest, keep: Path) -> SourceError:
    """The first error nvcc printed, with the line it names in the source file, and how to reproduce it."""
    lines = [line.strip() for line in exc.output.replace(str(keep) + "/", "").splitlines()]
    fatal = next((line for line in lines if _NVCC_FATAL.match(line)), None)
    if fatal is not None:
        raise CompilerUnusable(f"nvcc cannot compile {payload['rel']}: {' '.join(fatal.split())} "
                               f"(reproduce: {repro(payload)})")
    line_no = 1
    for line in lines:
        match = _ERROR_LINE.match(line)
        if match:
            if Path(match.group("file")).name == Path(payload["source"]).name:
                line_no = int(match.group("line") or match.group("gline"))
            return SourceError(f"{line} (reproduce: {repro(payload)})", line_no)
        ptxas = _PTXAS_ERROR.match(line)
        if ptxas:
            return SourceError(f"ptxas: {line[ptxas.end():].strip()} (reproduce: {repro(payload)})")
    detail = next((line for line in lines if _ANY_ERROR.search(line)), lines[-1] if lines else str(exc))
    return SourceError(f"{detail} (reproduce: {repro(payload)})")


def _nvrtc(payload: CudaRequest, artifacts: Path, read: list[str]) -> tuple[str, str, str]:
    from cuda.bindings import nvrtc

    # NVRTC names no files it read; it finds headers only through these folders, so a scan through them finds
    # every header it can have read (and perhaps more).
    read.extend(scanned_headers(payload, [str(Path(payload["source"]).parent), *payload.get("nvrtc_includes", [])]))
    source = Path(payload["source"]).read_bytes()
    options = [f"-arch={payload['real']}", "--ptxas-options=-v", "-lineinfo"]
    options += [_absolute_include(flag, payload["cwd"]) for flag in payload["flags"]
                if flag.startswith(("-I", "-D", "-U", "-std", "--std"))]
    options.append(f"-I{Path(payload['source']).parent}")
    options += [f"-I{folder}" for folder in payload.get("nvrtc_includes", [])]
    result, program = nvrtc.nvrtcCreateProgram(source, payload["source"].encode(), 0, [], [])
    _nvrtc_ok(result, "nvrtcCreateProgram")
    try:
        compiled = nvrtc.nvrtcCompileProgram(program, len(options), [o.encode() for o in options])[0]
        log = _nvrtc_text(nvrtc.nvrtcGetProgramLogSize, nvrtc.nvrtcGetProgramLog, program)
        if int(compiled) != 0:
            log = log.replace(payload["source"], payload["rel"])
            errors = [line.strip() for line in log.splitlines() if "error" in line]
            detail = errors[0] if errors else "compilation failed"
            match = _ERROR_LINE.match(detail)
            raise SourceError(f"NVRTC: {detail} (NVRTC compiles device code only: a file with host code needs nvcc)",
                              int(match.group("line") or match.group("gline")) if match else 1)
        ptx = _nvrtc_text(nvrtc.nvrtcGetPTXSize, nvrtc.nvrtcGetPTX, program)
        result, size = nvrtc.nvrtcGetCUBINSize(program)
        _nvrtc_ok(result, "nvrtcGetCUBINSize")
        cubin = b" " * size
        _nvrtc_ok(nvrtc.nvrtcGetCUBIN(program, cubin)[0], "nvrtcGetCUBIN")
        return ptx, log, write_artifact(artifacts / CUBIN, cubin)
    finally:
        nvrtc.nvrtcDestroyProgram(program)


def _absolute_include(flag: str, cwd: str) -> str:
    """NVRTC resolves `-I` against the worker's folder: make the project's folders absolute."""
    if flag.startswith("-I") and len(flag) > 2 and not Path(flag[2:]).is_absolute():
        return f"-I{Path(cwd) / flag[2:]}"
    return flag


def _nvrtc_text(size_of: Any, get: Any, program: Any) -> str:
    result, size = size_of(program)
    _nvrtc_ok(result, size_of.__name__)
    buffer = b" " * size
    _nvrtc_ok(get(program, buffer)[0], get.__name__)
    return buffer.rstrip(b"\0 ").decode(errors="replace")


def _nvrtc_ok(result: Any, what: str) -> None:
    if int(result) != 0:
        raise ToolchainError(f"NVRTC {what} failed: {result}")
