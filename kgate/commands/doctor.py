"""`kgate doctor`: which compilers and binary tools kgate found, where, and their versions.

Exit 0 when what the configuration needs is there; 2 with one line when CUDA
sources are configured and no CUDA compiler was found (nvcc or NVRTC).
"""

from __future__ import annotations

import argparse

from kgate.commands.common import config_from
from kgate.core.errors import ToolchainError
from kgate.support import toolchain
from kgate.support.toolchain import Tool


def tools_found(nvcc_setting: str | None, root: object) -> list[Tool]:
    from pathlib import Path

    nvcc = toolchain.find_nvcc(nvcc_setting, Path(str(root)))
    return [
        nvcc,
        toolchain.nvcc_ptxas(nvcc),
        toolchain.find_nvrtc(),
        toolchain.binary_tool("ptxas"),
        toolchain.binary_tool("ptxas-blackwell"),
        toolchain.binary_tool("cuobjdump"),
        toolchain.binary_tool("nvdisasm"),
        toolchain.triton_tool(),
    ]


def kgate_itself() -> Tool:
    """kgate's own package: which copy runs (an installed wheel, an editable checkout) and its release."""
    from pathlib import Path

    import kgate
    from kgate.support.install import DISTRIBUTION

    return Tool("kgate", str(Path(kgate.__file__).parent), kgate.__version__, f"the {DISTRIBUTION} distribution")


def run(args: argparse.Namespace) -> int:
    config = config_from(args)
    found = tools_found(config.nvcc, config.root)
    width = max(len(tool.name) for tool in found)
    for tool in [kgate_itself(), *found]:
        if tool.found:
            version = tool.version or "version unknown"
            print(f"{tool.name:<{width}}  {version:<28}  {tool.path}  ({tool.origin})")
        else:
            print(f"{tool.name:<{width}}  {'not found':<28}")
    needs = []
    if config.cuda:
        needs.append(f"CUDA sources: {len(config.cuda)} [[cuda]] table(s)")
    if config.triton:
        needs.append(f"Triton kernels: {len(config.triton)} [[triton]] table(s)")
    print(f"configuration: {config.display()}" + (f"; {', '.join(needs)}" if needs else ""))
    if config.cuda:
        # Raises the one-line "no CUDA compiler" error (exit 2) when neither nvcc nor NVRTC is there.
        compiler = toolchain.CudaToolchain(found[0], found[2]).compiler()
        print(f"CUDA sources compile with {compiler}" +
              ("" if compiler == "nvcc" else " (device-only sources; files with host code need nvcc)"))
    if not next(t for t in found if t.name == "cuobjdump").found:
        raise ToolchainError("cuobjdump not found: install triton (its wheel ships cuobjdump) to read SASS")
    return 0
