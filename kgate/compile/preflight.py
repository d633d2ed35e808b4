"""Every compiler a run needs, found before its first compile: a missing one stops the run at once (exit 2) with
one line, not after every other kernel compiled.

What is resolved is what the run gates, compiled or read from the cache: the versions of Triton, of the ptxas it
runs and of nvcc or NVRTC are part of every cache key, so even a warm run that compiles nothing needs them to find
its records, and a record compiled by a tool that is gone is not this machine's result. The tools that only read
cubins (cuobjdump, nvdisasm) are looked up when a run first needs SASS or a listing. Main-process side: nothing
here imports Triton or runs a compiler but for its version.
"""

from __future__ import annotations

import json
import os
from dataclasses import dataclass
from pathlib import Path
from typing import NamedTuple

from kgate.collect.captures import CapturedSpec
from kgate.core.config import Config, CudaEntry, PythonEntry
from kgate.core.cute import CuteEntry
from kgate.core.errors import ToolchainError
from kgate.core.schema import CAPABILITY
from kgate.support import tools
from kgate.support.compiler_env import program_identity, triton_environment
from kgate.support.install import install_hint
from kgate.support.toolchain import CudaToolchain, cuda_toolchain


class CudaCompilers(NamedTuple):
    """The CUDA tools found, and the compiler each `compiler` setting of the configuration gets ("nvcc" or
    "nvrtc")."""

    toolchain: CudaToolchain
    chosen: dict[str, str]


@dataclass(frozen=True)
class Toolchains:
    """What a run compiles with, resolved before its first compile; None for a language it builds nothing in."""

    triton: dict[str, str] | None = None
    cuda: CudaCompilers | None = None


def resolve(config: Config, entries: list[PythonEntry], captured: list[CapturedSpec], targets: tuple[str, ...],
            cuda: tuple[CudaEntry, ...]) -> Toolchains:
    """The tools of the Triton units built for `targets` and of the `cuda` tables; raises ToolchainError for the
    first one missing."""
    built, recorded, built_for = built_units(entries, captured, targets)
    python = python_toolchain(built, recorded, built_for) if built or recorded else None
    return Toolchains(python, cuda_compilers(config, cuda) if cuda else None)


# The keys of a toolchain that are the CuTe DSL's (`cute_toolchain`); every other key is Triton's.
CUTE_KEYS = ("cutlass-dsl",)


def python_toolchain(entries: list[PythonEntry], captured: list[CapturedSpec],
                     targets: tuple[str, ...]) -> dict[str, str]:
    """The tools of the Python front ends the units are written for: Triton's (Gluon's is Triton's) where a Triton
    kernel is registered or captured, the CuTe DSL's where a CuTe DSL kernel is."""
    cute = [e for e in entries if isinstance(e, CuteEntry)]
    out = triton_toolchain(targets) if captured or len(cute) < len(entries) else {}
    return {**out, **cute_toolchain()} if cute else out


def tools_of(language: str, toolchain: dict[str, str]) -> dict[str, str]:
    """The part of a run's toolchain that decides one front end's compiles (a key of its records): a new CuTe DSL
    release recompiles no Triton kernel, and a new Triton no CuTe DSL kernel."""
    return {k: v for k, v in toolchain.items() if (k.split(".")[0] in CUTE_KEYS) == (language == "cute")}


def cute_toolchain() -> dict[str, str]:
    """The CuTe DSL's release (`nvidia-cutlass-dsl`: its compiler and ptxas are in its wheels); ToolchainError where
    it is not installed."""
    version = tools.package_version("nvidia-cutlass-dsl")
    if version is None:
        raise ToolchainError("nvidia-cutlass-dsl is not installed in this environment: kgate compiles CuTe DSL "
                             "kernels with the project's own CuTe DSL, so run kgate in that environment, or "
                             f"{install_hint('cute')}")
    return {"cutlass-dsl": version, "cutlass-dsl.id": _dsl_distributions()}


def _dsl_distributions() -> str:
    """Every installed distribution of the CuTe DSL with its version (`nvidia-cutlass-dsl-libs-base`,
    `-libs-cu12`, ...): the DSL's compiler and its CUDA libraries are in those, and `nvidia-cutlass-dsl` holds
    none of them (the same release with the CUDA 13 libraries compiles otherwise)."""
    from importlib import metadata

    found = set()
    for dist in metadata.distributions():
        name = str(dist.metadata["Name"] or "").lower().replace("_", "-") if "Name" in dist.metadata else ""
        if name.startswith("nvidia-cutlass-dsl"):
            found.add(f"{name}=={dist.version}")
    return ",".join(sorted(found))


def cuda_compilers(config: Config, tables: tuple[CudaEntry, ...]) -> CudaCompilers:
    """nvcc and NVRTC as found, and the compiler of each table's `compiler` setting (ToolchainError where the one
    asked for, or any, is missing)."""
    toolchain = cuda_toolchain(config.nvcc, config.root)
    return CudaCompilers(toolchain, {entry.compiler: toolchain.compiler(entry.compiler) for entry in tables})


def built_units(entries: list[PythonEntry], captured: list[CapturedSpec],
                targets: tuple[str, ...]) -> tuple[list[PythonEntry], list[CapturedSpec], tuple[str, ...]]:
    """The registrations and captured specialisations built for a run's targets, and the targets they are built for.

    A kernel whose every registration names targets other than this run's is not built here at all: neither
    imported nor compiled, and so never a compile failure (its captured launches follow it)."""
    built = [e for e in entries if any(e.builds_for(t) for t in targets)]
    elsewhere = {e.kernel for e in entries} - {e.kernel for e in built}
    captured = [c for c in captured if c.spec.kernel not in elsewhere]
    if captured or any(e.targets is None for e in built):
        return built, captured, targets
    return built, captured, tuple(t for t in targets if any(e.builds_for(t) for e in built))


def triton_toolchain(targets: tuple[str, ...] = ()) -> dict[str, str]:
    """Versions that decide what Triton compiles: Triton itself, the ptxas it runs and the knobs set in the
    environment. Raises ToolchainError where
    Triton is not installed, a `TRITON_PTXAS_*_PATH` names no executable, or Triton has no ptxas for a target."""
    version = tools.package_version("triton")
    if version is None:
        raise ToolchainError("triton is not installed in this environment: kgate compiles with the project's own "
                             "Triton (the one its torch pins), so run kgate in that environment, or pip install triton")
    out = {"triton": version}
    for env in ("TRITON_PTXAS_BLACKWELL_PATH", "TRITON_PTXAS_PATH"):
        named = os.environ.get(env)
        if named == "":
            raise ToolchainError(f"{env} is set to nothing: Triton would try to run an empty name (unset it to use "
                                 "the ptxas in Triton's wheel)")
        if named and not (Path(named).is_file() and os.access(named, os.X_OK)):
            # Triton would silently fall back to the ptxas in its wheel: not the compiler asked for.
            raise ToolchainError(f"{env}={named}: no such executable (unset it to use the ptxas in Triton's wheel)")
    for target in targets:
        problem = missing_ptxas(target, tools.triton_bin_dir())
        if problem:
            raise ToolchainError(problem)
    for env, name in (("TRITON_PTXAS_BLACKWELL_PATH", "ptxas-blackwell"), ("TRITON_PTXAS_PATH", "ptxas")):
        path = os.environ.get(env) or (str(tools.bundled_tool(name)) if tools.bundled_tool(name) else "")
        if path and Path(path).is_file():
            out[name] = f"{tools.tool_version(path)}"
            out[name + ".id"] = program_identity(path)
            break
    environment = triton_environment()
    if environment:  # knobs Triton reads at each compile: part of the key, not a tool version the baseline shows
        out["environment.id"] = json.dumps(environment, sort_keys=True)
    return out


def triton_ptxas(target: str) -> tuple[str, ...]:
    """The ptxas programs Triton may run for a target, by the names its wheel ships them under: ptxas-blackwell from
    sm_100 on and ptxas below sm_90 in every release; for sm_90 Triton 3.9 runs ptxas-blackwell and earlier releases
    ptxas, so either will do."""
    capability = CAPABILITY[target]
    if capability >= 100:
        return ("ptxas-blackwell",)
    return ("ptxas-blackwell", "ptxas") if capability >= 90 else ("ptxas",)


def missing_ptxas(target: str, folder: Path | None) -> str | None:
    """What is wrong when Triton has no ptxas for `target` (None when it has one): Triton runs the one
    `TRITON_<NAME>_PATH` names, else the one in its wheel's `folder`, never one on PATH."""
    names = triton_ptxas(target)
    if any(os.environ.get(_ptxas_variable(n)) or (folder is not None and (folder / n).is_file()) for n in names):
        return None
    name, variable = names[0], _ptxas_variable(names[0])
    where = f"{folder / name}, which is missing" if folder is not None else "its wheel has no backends/nvidia/bin"
    return (f"{name} not found: Triton compiles {target} with the {name} in its wheel ({where}) or the one "
            f"{variable} names; reinstall triton or set {variable}")


def _ptxas_variable(name: str) -> str:
    return f"TRITON_{name.upper().replace('-', '_')}_PATH"
