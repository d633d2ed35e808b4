"""Where the CUDA tools are, and which versions: found once per run, never guessed.

nvcc is looked up in this order: the `nvcc` key of the configuration, then
`$CUDA_HOME/bin` (or `$CUDA_PATH/bin`), then `PATH`, then a pip wheel
(`nvidia-cuda-nvcc`, found by `cuda.pathfinder`). NVRTC comes from
`cuda-python` (`cuda.bindings.nvrtc`) and the `nvidia-cuda-nvrtc` wheel (the `cuda` extra); it
compiles device-only sources when no nvcc is found. The binary tools that read
cubins (`cuobjdump`, `nvdisasm`) and Triton's `ptxas` come from the Triton
wheel (`kgate.support.tools.bundled_tool`). Running a tool stays in `kgate.support.tools`.
"""

from __future__ import annotations

import functools
import os
import shutil
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from kgate.core.errors import ToolchainError
from kgate.support import reads, tools
from kgate.support.install import install_hint


@dataclass(frozen=True)
class Tool:
    name: str
    path: str | None  # None: not found
    version: str | None
    origin: str  # how it was found: "configuration", "CUDA_HOME", "PATH", "pip wheel", ...

    @property
    def found(self) -> bool:
        return self.path is not None


@dataclass(frozen=True)
class CudaToolchain:
    """The compilers for CUDA C++ sources: nvcc (preferred) and NVRTC (device-only sources)."""

    nvcc: Tool
    nvrtc: Tool

    def compiler(self, wanted: str = "auto") -> str:
        """"nvcc" or "nvrtc": the one asked for, or nvcc when found, else NVRTC."""
        if wanted == "nvrtc" and self.nvrtc.found or wanted == "auto" and not self.nvcc.found and self.nvrtc.found:
            return "nvrtc"
        if self.nvcc.found and wanted in ("auto", "nvcc"):
            return "nvcc"
        if wanted != "auto":
            raise ToolchainError(f"compiler = {wanted!r} in the configuration, but {wanted} was not found "
                                 f"(see `kgate doctor`)")
        raise ToolchainError(
            "no CUDA compiler found for the configured CUDA sources: set `nvcc = \"/path/to/nvcc\"` in the "
            "configuration, set CUDA_HOME, put nvcc on PATH, or pip install "
            "'cuda-toolkit[nvcc,nvvm,crt,cudart,cccl]' (the release your torch pins, if it pins one) beside "
            f"NVRTC: {install_hint('cuda')}; NVRTC alone compiles device-only sources (see docs/cuda.md)")

    def versions(self) -> dict[str, str]:
        """What decides the compiled output: part of every CUDA cache key."""
        out = {}
        for tool in (self.nvcc, self.nvrtc):
            if tool.found:
                out[tool.name] = tool.version or "unknown"
        return out


def find_nvcc(configured: str | None, root: Path) -> Tool:
    """nvcc from the configuration, CUDA_HOME, PATH or a pip wheel, with its release line."""
    for origin, lookup in _nvcc_candidates(configured, root):
        candidate = lookup()
        if candidate is not None and Path(candidate).is_file() and os.access(candidate, os.X_OK):
            _note_toolkit(Path(candidate))
            if origin == "cuda.pathfinder" and "site-packages" in str(candidate):
                origin = "pip wheel (nvidia-cuda-nvcc)"
            return Tool("nvcc", str(candidate), _version(str(candidate)), origin)
        if origin == "configuration":
            raise ToolchainError(f"nvcc = {configured!r} in the configuration: no such executable")
    return Tool("nvcc", None, None, "")


def _note_toolkit(nvcc: Path) -> None:
    """The files of the toolkit nvcc runs, as reached (a symlinked toolkit folder pointed at another release
    changes them): inputs of the run for its replay (`kgate.support.reads`)."""
    for path in (nvcc, nvcc.parent / "ptxas", nvcc.parent / "cicc", nvcc.parent / "nvcc.profile",
                 nvcc.parent.parent / "nvvm" / "bin" / "cicc", nvcc.parent.parent / "version.json"):
        reads.note(path)


def _nvcc_candidates(configured: str | None, root: Path) -> list[tuple[str, Callable[[], str | None]]]:
    """(origin, lookup) in order; a lookup runs only when the ones before it found nothing."""
    out: list[tuple[str, Callable[[], str | None]]] = []
    if configured:
        path = Path(configured).expanduser()
        if not path.is_absolute() and ("/" in configured or (root / path).is_file()):
            path = root / path
        out.append(("configuration", lambda: str(path) if path.is_absolute() else shutil.which(configured)))
    for variable in ("CUDA_HOME", "CUDA_PATH"):
        home = os.environ.get(variable)
        if home:
            out.append((variable, functools.partial(_in_home, home)))
    out.append(("PATH", lambda: shutil.which("nvcc")))
    out.append(("cuda.pathfinder", lambda: _pathfinder_utility("nvcc")))
    return out


def _in_home(home: str) -> str:
    return str(Path(home) / "bin" / "nvcc")


def _pathfinder_utility(name: str) -> str | None:
    try:
        from cuda import pathfinder
    except ImportError:
        return None
    try:
        return pathfinder.find_nvidia_binary_utility(name)
    except Exception:  # noqa: BLE001 - a broken install is "not found", doctor shows it
        return None


@functools.cache
def find_nvrtc() -> Tool:
    """NVRTC through cuda-python: the library's path and version ("13.5")."""
    try:
        from cuda.bindings import nvrtc
    except ImportError:
        return Tool("nvrtc", None, None, "")
    try:
        result, major, minor = nvrtc.nvrtcVersion()
    except Exception:  # noqa: BLE001 - the library itself could not be loaded
        return Tool("nvrtc", None, None, "")
    if int(result) != 0:
        return Tool("nvrtc", None, None, "")
    return Tool("nvrtc", _nvrtc_library() or "cuda.bindings.nvrtc", f"{major}.{minor}", "cuda-python")


def _nvrtc_library() -> str | None:
    try:
        from cuda import pathfinder

        return str(pathfinder.load_nvidia_dynamic_lib("nvrtc").abs_path)
    except Exception:  # noqa: BLE001
        return None


@functools.cache
def nvcc_bin_dir(nvcc_path: str) -> Path:
    """The folder of the real nvcc (a wrapper script on PATH may point elsewhere): nvcc says `_HERE_`."""
    beside = Path(nvcc_path).resolve().parent
    if (beside / "ptxas").is_file():
        return beside
    try:
        out = tools.run([nvcc_path, "-dryrun", "-ptx", "-x", "cu", os.devnull, "-o", os.devnull], timeout=60)
    except ToolchainError:
        return beside
    for line in (out.stdout + out.stderr).splitlines():
        if line.startswith("#$ _HERE_="):
            return Path(line.split("=", 1)[1].strip())
    return beside


def cuda_include_dir(nvcc: Tool) -> str | None:
    """The CUDA headers NVRTC needs for `#include <cuda_fp16.h>` and friends (NVRTC ships none)."""
    if nvcc.path:
        candidate = nvcc_bin_dir(nvcc.path).parent / "include"
        if (candidate / "cuda_runtime.h").is_file():
            return str(candidate)
    try:
        from cuda import pathfinder

        found = pathfinder.find_nvidia_header_directory("cudart")
    except Exception:  # noqa: BLE001
        return None
    return str(found) if found else None


def cuda_toolchain(configured_nvcc: str | None, root: Path) -> CudaToolchain:
    return CudaToolchain(find_nvcc(configured_nvcc, root), installed_nvrtc())


@functools.cache
def installed_nvrtc() -> Tool:
    """NVRTC as installed (the `nvidia-cuda-nvrtc` wheel beside cuda-python), without loading the library.

    Planning a check only needs its version for the cache key; loading it costs a tenth of a second
    of imports. The compile worker that uses NVRTC loads it, and `kgate doctor` shows it loaded.
    """
    import importlib.util

    spec = importlib.util.find_spec("cuda")
    folders = list(spec.submodule_search_locations or []) if spec is not None else []
    for folder in folders:
        site = Path(folder).parent
        try:
            names = os.listdir(site)
        except OSError:
            continue
        found = sorted(n for n in names if n.startswith("nvidia_cuda_nvrtc") and n.endswith(".dist-info"))
        if found and importlib.util.find_spec("cuda.bindings") is not None:
            version = found[-1].split("-")[1]
            return Tool("nvrtc", "cuda.bindings.nvrtc", ".".join(version.split(".")[:2]), "cuda-python")
    return find_nvrtc()


def binary_tool(name: str) -> Tool:
    """ptxas, ptxas-blackwell, cuobjdump or nvdisasm: the Triton wheel's copy, else PATH."""
    path = tools.bundled_tool(name)
    if path is None:
        return Tool(name, None, None, "")
    folder = tools.triton_bin_dir()
    origin = "triton wheel" if folder is not None and path.parent == folder else "PATH"
    return Tool(name, str(path), _version(str(path)), origin)


def nvcc_ptxas(nvcc: Tool) -> Tool:
    """The ptxas that nvcc runs: the one beside it."""
    if not nvcc.path:
        return Tool("ptxas (nvcc's)", None, None, "")
    candidate = nvcc_bin_dir(nvcc.path) / "ptxas"
    if not candidate.is_file():
        return Tool("ptxas (nvcc's)", None, None, "")
    return Tool("ptxas (nvcc's)", str(candidate), _version(str(candidate)), "beside nvcc")


def triton_tool() -> Tool:
    version = tools.package_version("triton")
    if version is None:
        return Tool("triton", None, None, "")
    import importlib.util

    spec = importlib.util.find_spec("triton")
    location = next(iter(spec.submodule_search_locations)) if spec and spec.submodule_search_locations else "?"
    return Tool("triton", str(location), version, "python package")


def _version(path: str) -> str | None:
    try:
        return tools.tool_version(path)
    except ToolchainError:
        return None
