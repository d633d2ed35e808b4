"""Inside a process that `kgate capture --verify` watches on a GPU: what the driver reports of the kernels a
`cute.compile` call made, once the DSL returned the compiled object.

The DSL loads a compile's cubin as a CUDA library (`cuLibraryLoadData`) and launches its kernels from there. kgate
asks the driver for each kernel of that library, on the current device: registers (CU_FUNC_ATTRIBUTE_NUM_REGS), its
static shared memory (CU_FUNC_ATTRIBUTE_SHARED_SIZE_BYTES) and local memory per thread
(CU_FUNC_ATTRIBUTE_LOCAL_SIZE_BYTES, the stack frame ptxas reserved, where spills go). The shared memory a kernel
launches with adds the dynamic part its launch asks for, which only the host code the DSL generated says
(`kgate.core.cute_dsl`, as kgate's offline compile reads it).

Where the compiled object holds its loaded library (`jit_module.cuda_library`, loaded by the object's own `to()`, as
its first call does), that library is asked; a compiled object that keeps it in its host code (a TVM-FFI function)
has the device binary that host code loads (a constant of its lowered IR) loaded again, as a library of its own: the
same binary, the same driver.

Loaded by file path with the recorder (`kgate.capture.runtime`), standard library only; cuda-python's driver
bindings are the DSL's own dependency, imported only once a process has compiled with the DSL.
"""

from __future__ import annotations

import sys
from typing import Any

# CUfunction_attribute
NUM_REGS, SHARED_SIZE_BYTES, LOCAL_SIZE_BYTES = 4, 1, 3
# CUdevice_attribute
COMPUTE_CAPABILITY_MAJOR, COMPUTE_CAPABILITY_MINOR = 75, 76


def figures(compiled: Any, dsl: Any) -> dict[str, Any]:
    """The record of one compiled call: `arch` (the device's, 90 for 9.0) and `kernels`, symbol -> registers
    (`n_regs`), shared memory (`shared`: static and dynamic) and local memory (`local`); `error` where the driver could
    not be asked."""
    try:
        from cuda.bindings import driver
    except ImportError as exc:
        return {"error": f"cuda-python's driver bindings cannot be imported: {exc}"}
    try:
        device = _device(driver)
        arch = _checked(driver.cuDeviceGetAttribute(_attribute(driver, COMPUTE_CAPABILITY_MAJOR), device)) * 10 \
            + _checked(driver.cuDeviceGetAttribute(_attribute(driver, COMPUTE_CAPABILITY_MINOR), device))
        static = {name: _kernel_figures(driver, kernel, device) for name, kernel in _kernels(driver, compiled)}
    except Exception as exc:  # noqa: BLE001 - said in the record: the row is then not compared
        return {"error": f"{type(exc).__name__}: {exc}"}
    if not static:
        return {"arch": arch, "error": "the compiled object holds no loaded kernel"}
    dynamic, per_kernel = dynamic_shared(compiled, dsl)
    kernels = {name: {**own, "shared": own["shared"] + per_kernel.get(name, dynamic)} for name, own in static.items()}
    return {"arch": arch, "kernels": kernels}


def dynamic_shared(compiled: Any, dsl: Any) -> tuple[int, dict[str, int]]:
    """The dynamic shared memory the compiled call's launches ask for (`dsl`: `kgate.core.cute_dsl`, as loaded)."""
    module = getattr(compiled, "ir_module", None)
    return dsl.launch_shared(str(module)) if module is not None else (0, {})


class DriverError(RuntimeError):
    """A driver call that did not return CUDA_SUCCESS."""


def _checked(result: Any) -> Any:
    status, *values = result if isinstance(result, tuple) else (result,)
    if int(status) != 0:
        raise DriverError(f"the CUDA driver answered {status}")
    return values[0] if len(values) == 1 else tuple(values)


def _attribute(driver: Any, number: int) -> Any:
    return driver.CUdevice_attribute(number)


def _device(driver: Any) -> Any:
    """The device the process's current context is on, else the first (the DSL loads its libraries on each)."""
    status, device = driver.cuCtxGetDevice()
    return device if int(status) == 0 else _checked(driver.cuDeviceGet(0))


def _kernels(driver: Any, compiled: Any) -> list[tuple[str, Any]]:
    """(symbol, CUkernel) of every kernel of the compiled object's libraries."""
    out = []
    for library in _libraries(driver, compiled):
        count = _checked(driver.cuLibraryGetKernelCount(library))
        for kernel in _checked(driver.cuLibraryEnumerateKernels(count, library)) if count else []:
            name = _checked(driver.cuKernelGetName(kernel))
            out.append((name.decode() if isinstance(name, bytes) else str(name), kernel))
    return out


def _libraries(driver: Any, compiled: Any) -> list[Any]:
    """The CUDA libraries the compiled object loaded (loading them as its first call would), else its cubins loaded."""
    loaded = _loaded(compiled)
    if loaded:
        return [driver.CUlibrary(int(library)) for library in loaded]
    return [_checked(driver.cuLibraryLoadData(cubin, None, None, 0, None, None, 0)) for cubin in _cubins(compiled)]


def _loaded(compiled: Any) -> list[Any]:
    module = getattr(compiled, "jit_module", None)
    if module is None and "tvm_ffi" not in type(compiled).__module__ and hasattr(compiled, "to"):
        compiled.to()  # what the object's first call does: its libraries loaded, on every device
        module = getattr(compiled, "jit_module", None)
    return list(getattr(module, "cuda_library", None) or [])


def _cubins(compiled: Any) -> list[bytes]:
    """The device binaries of a compiled call: the DSL's kept cubin, else each `gpu.binary` of its IR (the DSL's own
    reader), else those its lowered host code embeds (a TVM-FFI function loads its kernels from such a constant)."""
    kept = getattr(getattr(compiled, "artifacts", None), "CUBIN", None)
    if isinstance(kept, bytes):
        return [kept]
    executor = sys.modules.get("cutlass.base_dsl.jit_executor")
    module = getattr(compiled, "ir_module", None)
    out: dict[str, bytes] = {}
    if executor is not None and module is not None:
        for symbol in getattr(compiled, "kernel_info", None) or {}:
            executor.walk_module_and_get_cubin_data(module, symbol, lambda sym, _f, data: out.setdefault(sym, data))
    return list(dict.fromkeys(out.values())) or embedded_binaries(module)


# The first bytes of a fatbinary and of an ELF cubin: what the driver loads as a library.
_DEVICE_BINARY = (b"\x50\xed\x55\xba", b"\x7fELF")


def embedded_binaries(module: Any) -> list[bytes]:
    """The device binaries a lowered IR module holds as constants (`llvm.mlir.global ... @kernels_binary("...")`)."""
    ir = sys.modules.get("cutlass._mlir.ir")
    found: list[bytes] = []
    if ir is None or module is None:
        return found

    def visit(op: Any) -> Any:
        if op.name == "llvm.mlir.global" and "value" in op.attributes:
            value = op.attributes["value"]
            if isinstance(value, ir.StringAttr) and value.value_bytes.startswith(_DEVICE_BINARY):
                found.append(value.value_bytes)
        return ir.WalkResult.ADVANCE

    module.operation.walk(visit)
    return list(dict.fromkeys(found))


def _kernel_figures(driver: Any, kernel: Any, device: Any) -> dict[str, int]:
    def attribute(number: int) -> int:
        return int(_checked(driver.cuKernelGetAttribute(driver.CUfunction_attribute(number), kernel, device)))

    return {"n_regs": attribute(NUM_REGS), "shared": attribute(SHARED_SIZE_BYTES), "local": attribute(LOCAL_SIZE_BYTES)}
