"""PyTorch extension sources: the flags torch's build gives them, found without importing torch.

Most CUDA kernel repositories are PyTorch extensions, built by `setup.py` (`CUDAExtension`) or
`torch.utils.cpp_extension.load`, which write no `compile_commands.json`: the include folders come from the
installed torch, a path no configuration can name. A source that includes a torch, ATen, c10 or torch-bundled
pybind11 header that its own include folders do not hold is compiled with what torch's build adds to every CUDA
extension compile (see `extension_flags`). Importing torch costs seconds, so torch is found by its package folder
on `sys.path` and its version read from the text of its `version.py`.
"""

from __future__ import annotations

import importlib.machinery
import re
import sysconfig
from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass
from functools import lru_cache
from pathlib import Path

_TORCH_HEADER = re.compile(r"^(torch|ATen|c10|pybind11)/")
_VERSION = re.compile(r"""^__version__\s*=\s*['"]([^'"]+)['"]""", re.MULTILINE)
_STANDARD = re.compile(r"-std=c\+\+(\d\d)")
# What torch's build passes nvcc for every CUDA extension (`COMMON_NVCC_FLAGS` in torch/utils/cpp_extension.py):
# torch's headers are written for these (its half and bfloat16 types define their own operators).
_COMMON_NVCC = ("-D__CUDA_NO_HALF_OPERATORS__", "-D__CUDA_NO_HALF_CONVERSIONS__",
                "-D__CUDA_NO_BFLOAT16_CONVERSIONS__", "-D__CUDA_NO_HALF2_OPERATORS__", "--expt-relaxed-constexpr")
TORCH_DEFINE = "-DTORCH_API_INCLUDE_EXTENSION_H"  # the define of torch's extension builds (`extension_flags`)
MISSING = ("includes torch headers: install torch in this environment, or give its include folders in flags")
_MISSING_FILE = re.compile(r"No such file or directory|cannot open source file")
_TORCHS = re.compile(r"(?:^|[\s/<\"])(?:torch|ATen|c10|pybind11)/")  # a torch header, missing or including


@dataclass(frozen=True)
class Torch:
    """The installed torch, as an extension build sees it."""

    version: str
    folder: Path  # the package folder: site-packages/torch
    standard: str  # the C++ standard its extension builds use ("c++20")

    @property
    def includes(self) -> tuple[Path, ...]:
        """torch's include folders, as `torch.utils.cpp_extension.include_paths()` names them."""
        base = self.folder / "include"
        return (base, base / "torch" / "csrc" / "api" / "include")

    @property
    def cpu_only(self) -> bool:
        """A CPU build ships ATen's and c10's CUDA headers without the configuration header they include."""
        return not (self.folder / "include" / "c10" / "cuda" / "impl" / "cuda_cmake_macros.h").is_file()

    @property
    def libraries(self) -> tuple[Path, ...]:
        """The include folders of the CUDA libraries pip installed beside torch (cuBLAS, cuSPARSE, ... of its
        CUDA wheels: `nvidia/cu13/include`, or one folder per library in older wheels)."""
        return tuple(sorted(p for p in (self.folder.parent / "nvidia").glob("*/include") if p.is_dir()))


def find_torch(path: Sequence[str] | None = None) -> Torch | None:
    """The torch package that `import torch` would load from `path` (default: `sys.path`), without importing it;
    None where there is none or it has no headers."""
    return _find_torch(tuple(path) if path is not None else None)


@lru_cache(maxsize=8)
def _find_torch(path: tuple[str, ...] | None) -> Torch | None:
    spec = importlib.machinery.PathFinder.find_spec("torch", list(path) if path is not None else None)
    if spec is None or not spec.submodule_search_locations:
        return None
    folder = Path(next(iter(spec.submodule_search_locations)))
    if not (folder / "include").is_dir():
        return None
    return Torch(version=_read_version(folder), folder=folder, standard=_read_standard(folder))


def _read_version(folder: Path) -> str:
    try:
        match = _VERSION.search((folder / "version.py").read_text(encoding="utf-8", errors="replace"))
    except OSError:
        return ""
    return match.group(1) if match else ""


def _read_standard(folder: Path) -> str:
    """The C++ standard torch's own extension builds pass, read from its build code (the one it names most)
    rather than guessed from its version."""
    try:
        text = (folder / "utils" / "cpp_extension.py").read_text(encoding="utf-8", errors="replace")
    except OSError:
        return "c++17"
    found = Counter(_STANDARD.findall(text)).most_common(1)
    return f"c++{found[0][0]}" if found else "c++17"


def is_torch_header(name: str) -> bool:
    """Whether an included name is a torch, ATen, c10 or pybind11 header (`kgate.collect.cuda_sources` says which
    included names no include folder of the file holds)."""
    return bool(_TORCH_HEADER.match(name))


def extension_flags(torch: Torch, name: str, flags: Sequence[str]) -> tuple[str, ...]:
    """What torch's build adds to a CUDA extension's nvcc command, for the extension `name`, after `flags`.

    Its include folders and Python's (`-I`, as `CUDAExtension` passes them); `-DTORCH_API_INCLUDE_EXTENSION_H`
    and `-DTORCH_EXTENSION_NAME=<name>`; `COMMON_NVCC_FLAGS`; its C++ standard unless `flags` name one (nvcc
    refuses two). The CUDA libraries' folders of torch's wheels come last, searched after every other folder
    (`-idirafter`), so a header the toolkit has is the toolkit's. The architectures are kgate's own; `-fPIC`
    only changes host code, which kgate parses and does not compile."""
    python = sysconfig.get_path("include", scheme="posix_prefix")
    out = [f"-I{folder}" for folder in torch.includes] + ([f"-I{python}"] if python else [])
    out += [TORCH_DEFINE, f"-DTORCH_EXTENSION_NAME={name}", *_COMMON_NVCC]
    if not any(flag.startswith(("-std=", "--std=")) or flag in ("-std", "--std") for flag in flags):
        out.append(f"-std={torch.standard}")
    for folder in torch.libraries:
        out += ["-Xcompiler", f"-idirafter,{folder}"]
    return tuple(out)


def extension_name(path: Path) -> str:
    """The name an extension built from this file alone would have: its stem as a C identifier."""
    name = re.sub(r"\W", "_", path.stem, flags=re.ASCII) or "extension"
    return f"_{name}" if name[0].isdigit() else name


_RELAXED = "--expt-relaxed-constexpr"


def explain(note: str, error: str, torch_flags: bool = True) -> str:
    """A compile error of a torch extension source, with what its torch lacks when the error is a header that
    torch's headers include, or a torch header, not found (a missing header of the project's is its own).

    A source compiled without torch's flags (`torch_flags` False) whose error asks for `--expt-relaxed-constexpr`
    is most often a kernel file of a `CUDAExtension` that includes no torch header itself (torch's build passes that
    flag to every extension source): the error says how to give the file torch's flags, or the flag alone."""
    said = error.split(" (reproduce: ", 1)[0]
    if not torch_flags and _RELAXED in said:
        return (f"{error}; torch's extension builds (`CUDAExtension`, `load`) pass {_RELAXED} to every source: if "
                f"one builds this file, set `torch = true` in its [[cuda]] table, else add the flag to its `flags`")
    return f"{note}: {error}" if note and _MISSING_FILE.search(said) and _TORCHS.search(said) else error
