"""Build and launch kernels/rmsnorm.cu: NVRTC for the GPU's own architecture, then the driver API.

No CUDA toolkit is needed: NVRTC comes from the `nvidia-cuda-nvrtc` wheel and
`cuda-python` binds it and the driver. Buffers are torch tensors, passed by
`data_ptr()`, and the launch goes to torch's current stream.
"""

from __future__ import annotations

import ctypes
from functools import cache
from pathlib import Path
from typing import Any

SOURCE = Path(__file__).with_name("rmsnorm.cu")
THREADS = 256  # RMSNORM_THREADS in the source
FUNCTIONS = {"bf16": "rmsnorm_fwd_bf16", "fp16": "rmsnorm_fwd_fp16"}


def arch_for(major: int, minor: int) -> str:
    """The NVRTC architecture of a device: arch-specific (`a`) from sm_90 on, as PDL and kgate's targets need."""
    return f"sm_{major}{minor}a" if major >= 9 else f"sm_{major}{minor}"


def nvrtc_compile(arch: str, *, ptx: bool = False) -> bytes:
    """rmsnorm.cu compiled by NVRTC: a cubin for `sm_XY[a]`, or PTX for `compute_XY[a]` when `ptx`."""
    from cuda.bindings import nvrtc

    err, prog = nvrtc.nvrtcCreateProgram(SOURCE.read_bytes(), SOURCE.name.encode(), 0, [], [])
    _check_nvrtc(err, "nvrtcCreateProgram")
    try:
        options = [f"--gpu-architecture={arch}".encode(), b"--std=c++17"]
        (err,) = nvrtc.nvrtcCompileProgram(prog, len(options), options)
        if err != nvrtc.nvrtcResult.NVRTC_SUCCESS:
            raise RuntimeError(f"NVRTC could not compile {SOURCE.name} for {arch}:\n{_program_log(prog)}")
        size_fn, get_fn = ((nvrtc.nvrtcGetPTXSize, nvrtc.nvrtcGetPTX) if ptx
                           else (nvrtc.nvrtcGetCUBINSize, nvrtc.nvrtcGetCUBIN))
        err, size = size_fn(prog)
        _check_nvrtc(err, size_fn.__name__)
        buffer = b" " * size
        (err,) = get_fn(prog, buffer)
        _check_nvrtc(err, get_fn.__name__)
        return buffer
    finally:
        nvrtc.nvrtcDestroyProgram(prog)


def rmsnorm_cuda_forward(x: Any, w: Any, eps: float = 1e-6) -> dict[str, Any]:
    """(y, rstd) of contiguous CUDA tensors x [M, N] and w [N] in fp16 or bf16."""
    import torch
    from cuda.bindings import driver

    names = {torch.bfloat16: "bf16", torch.float16: "fp16"}
    if x.dim() != 2 or not x.is_cuda or not x.is_contiguous() or w.shape != (x.shape[1],) or w.dtype != x.dtype \
            or x.dtype not in names:
        raise ValueError(f"expected contiguous CUDA x [M, N] and w [N] in fp16 or bf16, got {tuple(x.shape)} "
                         f"{x.dtype} and {tuple(w.shape)} {w.dtype}")
    M, N = x.shape
    y = torch.empty_like(x)
    rstd = torch.empty(M, dtype=torch.float32, device=x.device)
    function = _function(x.device.index if x.device.index is not None else torch.cuda.current_device(),
                         FUNCTIONS[names[x.dtype]])
    params = ((x.data_ptr(), w.data_ptr(), y.data_ptr(), rstd.data_ptr(), N, eps),
              (ctypes.c_void_p, ctypes.c_void_p, ctypes.c_void_p, ctypes.c_void_p, ctypes.c_int, ctypes.c_float))
    stream = torch.cuda.current_stream(x.device).cuda_stream
    (err,) = driver.cuLaunchKernel(function, M, 1, 1, THREADS, 1, 1, 0, stream, params, 0)
    _check_driver(err, "cuLaunchKernel")
    return {"y": y, "rstd": rstd}


@cache
def _function(device: int, name: str) -> Any:
    """The kernel `name`, compiled for `device` and loaded into the primary context torch uses."""
    import torch
    from cuda.bindings import driver

    (err,) = driver.cuInit(0)
    _check_driver(err, "cuInit")
    err, dev = driver.cuDeviceGet(device)
    _check_driver(err, "cuDeviceGet")
    err, context = driver.cuDevicePrimaryCtxRetain(dev)
    _check_driver(err, "cuDevicePrimaryCtxRetain")
    (err,) = driver.cuCtxSetCurrent(context)
    _check_driver(err, "cuCtxSetCurrent")
    major, minor = torch.cuda.get_device_capability(device)
    err, module = driver.cuModuleLoadData(nvrtc_compile(arch_for(major, minor)))
    _check_driver(err, "cuModuleLoadData")
    err, function = driver.cuModuleGetFunction(module, name.encode())
    _check_driver(err, "cuModuleGetFunction")
    return function


def _program_log(prog: Any) -> str:
    from cuda.bindings import nvrtc

    err, size = nvrtc.nvrtcGetProgramLogSize(prog)
    if err != nvrtc.nvrtcResult.NVRTC_SUCCESS or size <= 1:
        return ""
    log = b" " * size
    nvrtc.nvrtcGetProgramLog(prog, log)
    return log.decode(errors="replace").rstrip("\x00 \n")


def _check_nvrtc(err: Any, call: str) -> None:
    from cuda.bindings import nvrtc

    if err != nvrtc.nvrtcResult.NVRTC_SUCCESS:
        raise RuntimeError(f"{call} failed: {err}")


def _check_driver(err: Any, call: str) -> None:
    from cuda.bindings import driver

    if err != driver.CUresult.CUDA_SUCCESS:
        _, text = driver.cuGetErrorString(err)
        raise RuntimeError(f"{call} failed: {err} ({text.decode() if isinstance(text, bytes) else text})")
