"""What kgate reads of the CuTe DSL's own objects, whichever release made them: which decorator made a function, and
the dynamic shared memory a call's kernels launch with, from the host code the DSL generated.

Standard library only: kgate's compile workers read them from their offline compile, and a process that `kgate capture`
watches reads them from the project's own (loaded there by file path, as the recorder is).
"""

from __future__ import annotations

import re
from typing import Any


def decorator_kind(fn: Any) -> str | None:
    """"jit" for a `@cute.jit` function, "kernel" for a `@cute.kernel`, None for anything else. The DSL marks what its
    decorators made (`_decorator_kind`, from nvidia-cutlass-dsl 4.8); an earlier release's wrapper is known by the DSL
    class it keeps (`_dsl_cls`) and the executor it calls (`_kernel_helper` for a kernel)."""
    kind = getattr(fn, "_decorator_kind", None)
    if kind is not None or not callable(fn) or not hasattr(fn, "_dsl_cls"):
        return kind if isinstance(kind, str) else None
    cells = dict(zip(getattr(getattr(fn, "__code__", None), "co_freevars", ()), getattr(fn, "__closure__", None) or ()))
    executor = cells["executor_name"].cell_contents if "executor_name" in cells else None
    return "kernel" if executor == "_kernel_helper" else "jit"


# What the DSL's shared-memory allocators ask for is only in the host code it generates: neither the PTX (`.extern
# .shared ... []`) nor the cubin says it. Each launch stores it in its `cudaLaunchConfig_t` (the struct's third field,
# `sharedMemBytes`) and then calls `_cudaLaunchKernelEx(config, kernel, args)` with the kernel's handle, loaded from
# the global `@kernels_<symbol>`; past 48 KB the host code may also check it against the target's limit before
# launching, `printf(@printfFormat_N, %size)` with a format that names the kernel.
_SMEM_FORMAT = re.compile(r"llvm\.mlir\.global internal constant @(\w+)\(\"[^\"]*kernel '@kernels::@(\w+)' launch shared "
                          r"memory exceeds")
_CONSTANT = re.compile(r"^\s*(%\w+) = llvm\.mlir\.constant\((\d+) : i64\)")
_ADDRESS = re.compile(r"^\s*(%\w+) = llvm\.mlir\.addressof @(\w+)")
_ALIAS = re.compile(r"^\s*(%\w+) = llvm\.getelementptr (?:inbounds )?(%\w+)\[")
_PRINTF = re.compile(r"llvm\.call @printf\((%\w+), (%\w+)\)")
_CONFIG = "struct<(array<3 x i32>, array<3 x i32>, i64, ptr, ptr, i32)>"
_CONFIG_FIELD = re.compile(r"^\s*(%\w+) = llvm\.getelementptr %\w+\[0, 2\] : .*" + re.escape(_CONFIG) + "$")
_STORE = re.compile(r"^\s*llvm\.store (%\w+), (%\w+) : i64")
_KERNEL_HANDLE = re.compile(r"^\s*(%\w+) = llvm\.mlir\.addressof @kernels_(\w+) ")
_LOAD = re.compile(r"^\s*(%\w+) = llvm\.load (%\w+) ")
_LAUNCH = re.compile(r"llvm\.call @_cudaLaunchKernelEx\((%\w+), (%\w+), (%\w+)\)")


def launched(host: str) -> dict[str, int]:
    """Kernel symbol -> the dynamic shared memory its launches ask for (the most, where it launches more than once):
    each `_cudaLaunchKernelEx` of the host code is paired with the `sharedMemBytes` its configuration was last given
    before it, and with the kernel whose handle it passes."""
    values: dict[str, int] = {}
    fields: set[str] = set()
    handles: dict[str, str] = {}
    size: int | None = None
    out: dict[str, int] = {}
    for line in host.splitlines():
        if (found := _CONSTANT.match(line)) is not None:
            values[found.group(1)] = int(found.group(2))
        elif (found := _CONFIG_FIELD.match(line)) is not None:
            fields.add(found.group(1))
        elif (found := _STORE.match(line)) is not None and found.group(2) in fields:
            size = values.get(found.group(1))
        elif (found := _KERNEL_HANDLE.match(line)) is not None:
            handles[found.group(1)] = found.group(2)
        elif (found := _LOAD.match(line)) is not None and found.group(2) in handles:
            handles[found.group(1)] = handles[found.group(2)]
        elif (found := _LAUNCH.search(line)) is not None and found.group(2) in handles and size is not None:
            name = handles[found.group(2)]
            out[name] = max(out.get(name, 0), size)
    return out


def launch_configs(host: str) -> set[int]:
    """The dynamic shared memory of every launch of the host code (the constants stored in `sharedMemBytes`)."""
    values: dict[str, int] = {}
    fields: set[str] = set()
    out: set[int] = set()
    for line in host.splitlines():
        if (found := _CONSTANT.match(line)) is not None:
            values[found.group(1)] = int(found.group(2))
        elif (found := _CONFIG_FIELD.match(line)) is not None:
            fields.add(found.group(1))
        elif (found := _STORE.match(line)) is not None and found.group(2) in fields and found.group(1) in values:
            out.add(values[found.group(1)])
    return out


def launch_smem(host: str) -> dict[str, int]:
    """Kernel symbol -> the dynamic shared memory its launch asks for, read from the DSL's host code."""
    formats = {match.group(1): match.group(2) for match in _SMEM_FORMAT.finditer(host)}
    if not formats:
        return {}
    values: dict[str, int] = {}
    globals_: dict[str, str] = {}
    out: dict[str, int] = {}
    for line in host.splitlines():
        if (found := _CONSTANT.match(line)) is not None:
            values[found.group(1)] = int(found.group(2))
        elif (found := _ADDRESS.match(line)) is not None:
            globals_[found.group(1)] = found.group(2)
        elif (found := _ALIAS.match(line)) is not None and found.group(2) in globals_:
            globals_[found.group(1)] = globals_[found.group(2)]
        elif (found := _PRINTF.search(line)) is not None:
            name = formats.get(globals_.get(found.group(1), ""))
            if name is not None and found.group(2) in values:
                out[name] = values[found.group(2)]
    return out


def launch_shared(host: str) -> tuple[int, dict[str, int]]:
    """(the dynamic shared memory of every kernel of the call, kernel symbol -> its own): each launch's own, paired
    with its kernel; where a launch is not, one size for every launch is every kernel's, and a kernel past 48 KB is
    named by the host code's own check."""
    launches = launch_configs(host)
    return (next(iter(launches)) if len(launches) == 1 else 0), {**launch_smem(host), **launched(host)}
