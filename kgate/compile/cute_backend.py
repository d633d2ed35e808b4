"""CuTe DSL kernels compiled offline for a target, in a compile worker.

Runs inside worker processes only (it imports the CuTe DSL and the project's kernel modules). One task, `compile`:
the call a registration or a capture describes (`kgate.core.cute.CuteCall`) is made with fake tensors
(`cutlass.cute.runtime.make_fake_tensor`, `cute.sym_int` for a symbolic dimension) and a fake stream:

    cute.compile(fn, **args, options="--gpu-arch sm_120a --keep-ptx --keep-cubin --dump-dir D remarks{ptx} ...")

`fn` is the registered `@cute.jit` function, or an instance of the registered class (built with `init`) whose
`__call__` is one. `--gpu-arch` is the target the DSL traces and compiles for (what the kernel's own
`get_arch_enum()` sees); `remarks{ptx}` has the DSL's own ptxas report `-v`, written to a remarks file; the PTX and
the cubin are the DSL's. They are kept as artifacts (`kgate.compile.units`) for the facts stage, with the cubin's
SASS where the run's plan wants it, as for a Triton variant. No GPU and no driver are needed.
"""

from __future__ import annotations

import contextlib
import inspect
import os
import re
import tempfile
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from kgate.compile.cache import kept, write_artifact
from kgate.compile.payloads import CompileReply, CompileRequest, ExpandRequest, Expansion
from kgate.compile.triton_backend import disassemble
from kgate.compile.units import CUBIN, Compiled, steady_log, store_text
from kgate.compile.worker_facts import analysed
from kgate.compile.worker_imports import KernelError, imported
from kgate.core.cute import DTYPE_PREFIX, STREAM, CuteCall, dim_symbol, is_tensor
from kgate.core.cute_dsl import decorator_kind, launch_shared

# The options kgate adds to the call's own: the target, the PTX and cubin kept, ptxas's report in a remarks file.
KGATE_OPTIONS = "--gpu-arch {target} --keep-ptx --keep-cubin --dump-dir {dump} remarks{{ptx}} --remark-output {remarks}"
# A remark of the remarks file: ptxas's report, in a YAML single-quoted scalar (a quote written twice).
_PTXAS_REMARK = re.compile(r"Remark:\s*'ptxas output: ((?:[^']|'')*)'")


def dsl_version() -> str:
    """The installed CuTe DSL's release (`nvidia-cutlass-dsl`), part of every compile's key."""
    import cutlass

    return str(getattr(cutlass, "__version__", "?"))


def is_cute_jit(fn: Any) -> bool:
    """Whether a function is a `@cute.jit` one (`kgate.core.cute_dsl.decorator_kind`)."""
    return decorator_kind(fn) == "jit" and hasattr(fn, "_dsl_cls")


def expand(payload: ExpandRequest) -> Expansion:
    """Describe a registered CuTe DSL kernel as the planner reads any kernel: where its jit function is defined and
    its parameters (a class kernel's `__call__`, less `self`)."""
    obj = imported(payload, payload["kernel"])
    fn = obj.__call__ if inspect.isclass(obj) else obj
    if not is_cute_jit(fn):
        what = "a class whose __call__ is not" if inspect.isclass(obj) else "not"
        raise KernelError(f"{payload['kernel']} is {what} a @cute.jit function")
    path, line = _definition(fn)
    params = [p for p in inspect.signature(inspect.unwrap(fn)).parameters.values()
              if p.kind not in (p.VAR_POSITIONAL, p.VAR_KEYWORD)][1 if inspect.isclass(obj) else 0:]
    return {"path": path, "line": line, "heuristics": [], "configs": [], "keys": [],
            "params": [{"name": p.name, "constexpr": "Constexpr" in str(p.annotation),
                        "has_default": p.default is not p.empty} for p in params]}


def compile_call(payload: CompileRequest) -> CompileReply:
    """Compile one call for one target; keep its artifacts; return what the compile record holds."""
    call = CuteCall.from_record(payload["variant"]["call"])
    target = payload["target"]
    obj = imported(payload, call.kernel)
    from cutlass import cute

    started = time.perf_counter()
    with tempfile.TemporaryDirectory(prefix="kgate-cute-") as dump, dsl_arch(target):
        fn, where = _jit_entry(obj, call)
        remarks = os.path.join(dump, "remarks.yaml")
        options = KGATE_OPTIONS.format(target=target, dump=dump, remarks=remarks)
        try:
            compiled = cute.compile(fn, **decoded_args(call), options=f"{options} {call.options}".strip())
        except KernelError:
            raise
        except Exception as exc:  # noqa: BLE001 - any DSL or compiler failure becomes a finding
            raise KernelError(_message(exc)) from None
        seconds = time.perf_counter() - started
        ptx, cubin = _texts(compiled.artifacts)
        dynamic_smem, smem = launch_shared(str(compiled.ir_module))
        log = ptxas_log(Path(remarks).read_text(encoding="utf-8", errors="replace")
                        if os.path.exists(remarks) else "")
        if not log:
            log = ptxas_again(ptx, cubin, target, dump)
    folder = Path(payload["artifacts"])
    cubin_hash = write_artifact(folder / CUBIN, cubin)
    cubin_path = kept(folder / CUBIN, cubin_hash)  # this compile's, whatever another compile of the key writes
    hashes = {"ptx": store_text(folder, "ptx", ptx), "ptxas_log": store_text(folder, "ptxas_log", steady_log(log))}
    expect = sorted(payload["variant"].get("expect", ()))  # what was asked: no IR of the DSL is read for intent
    context = call_context(payload, call, where, expect, seconds)
    unit = Compiled(key=payload.get("key", ""), folder=folder, language=context["language"], target=target,
                    hashes=hashes, context=context, dynamic_smem=dynamic_smem, entry_smem=dict(smem),
                    cubin=(str(cubin_path), None))
    # The facts stage reads the call's kernels here and the SASS it lacks is disassembled from the cubin just written.
    unit = analysed(payload, unit, lambda _symbols: (disassemble(cubin_path), None))
    return {"context": context, "artifacts": dict(unit.hashes), "dynamic_smem": dynamic_smem, "entry_smem": smem,
            "cubin": cubin_hash}


@contextlib.contextmanager
def dsl_arch(target: str) -> Iterator[None]:
    """The DSL's architecture set to the target gated while a call's kernel is built and compiled: a class kernel
    whose constructor asks the DSL (`BaseDSL._get_dsl().get_arch_enum()`, as FlashAttention's do) saw the worker's
    default instead (no GPU: the DSL's own guess), and FlashAttention's SM90 forward refused to be built for sm_90a."""
    from cutlass.base_dsl import BaseDSL

    envar = BaseDSL._get_dsl().envar
    before = vars(envar).get("_arch")  # None: read from CUTE_DSL_ARCH or detected when next asked, as it was
    envar.arch = target
    try:
        yield
    finally:
        envar.arch = before  # type: ignore[assignment]  # None: asked again as before; the DSL types it str


def _texts(artifacts: Any) -> tuple[str, bytes]:
    """The PTX and the cubin the DSL kept (read from its dump files as the compile returned)."""
    ptx, cubin = getattr(artifacts, "PTX", None), getattr(artifacts, "CUBIN", None)
    if not isinstance(ptx, str) or not isinstance(cubin, bytes) or ".entry" not in ptx:
        raise KernelError("the CuTe DSL kept no PTX and cubin for this call (does it launch a @cute.kernel?)")
    return ptx, cubin


def ptxas_again(ptx: str, cubin: bytes, target: str, folder: str) -> str:
    """ptxas's report for a DSL that writes none (nvidia-cutlass-dsl before 4.8 has no `remarks{ptx}`): the DSL's
    PTX assembled again by the ptxas Triton runs for the target, `-v`, and taken only where it gives every entry the
    registers the DSL's own cubin records (`kgate.compile.elf.register_counts`): then it is that cubin's report.
    KernelError otherwise, saying which."""
    from kgate.compile.elf import register_counts
    from kgate.compile.preflight import triton_ptxas
    from kgate.support import tools
    from kgate.support.atomicio import atomic_write

    said = (f"nvidia-cutlass-dsl {dsl_version()} wrote no ptxas report for this call (its remarks{{ptx}} output, "
            f"which the DSL writes from 4.8)")
    program = next((path for path in map(tools.bundled_tool, triton_ptxas(target)) if path is not None), None)
    if program is None:
        raise KernelError(f"{said}, and no ptxas for {target} was found to assemble its PTX again")
    source = Path(folder) / "again.ptx"
    atomic_write(source, ptx.encode())
    try:
        done = tools.run([str(program), "-v", f"--gpu-name={target}", str(source), "-o",
                          str(source.with_suffix(".cubin"))], timeout=600)
    except tools.ToolFailed as exc:
        last = next((line for line in reversed(exc.output.splitlines()) if line.strip()), "")
        raise KernelError(f"{said}, and {program.name} could not assemble its PTX again: {exc}"
                          + (f": {last}" if last else "")) from None
    log = done.stdout + done.stderr
    mine = _registers(log)
    theirs = register_counts(cubin)
    # Every entry of either: an entry the report gives that the cubin records no registers of is not that cubin's.
    differ = sorted(name for name in {*theirs, *mine} if mine.get(name) != theirs.get(name))
    if not mine or not theirs or differ:
        name = differ[0] if differ else ""
        detail = (f": {name} has {theirs.get(name)} registers in the DSL's cubin and {mine.get(name)} from "
                  f"{program.name}, so its report is not that cubin's" if name else ": no registers to compare")
        raise KernelError(f"{said}, and {program.name}'s report of its PTX cannot stand in for it{detail}; "
                          f"upgrade nvidia-cutlass-dsl to 4.8 or later")
    return log


# ptxas -v: "Compiling entry function 'NAME' for 'sm_90a'", then that entry's "Used N registers" (the facts stage
# reads the whole report; here only the registers are compared with the cubin's).
_ENTRY = re.compile(r"Compiling entry function '([^']+)'")
_USED = re.compile(r"Used (\d+) registers")


def _registers(log: str) -> dict[str, int]:
    """Entry -> registers per thread, from a ptxas `-v` report."""
    out: dict[str, int] = {}
    entry = None
    for line in log.splitlines():
        if (found := _ENTRY.search(line)) is not None:
            entry = found.group(1)
        elif entry is not None and (used := _USED.search(line)) is not None:
            out.setdefault(entry, int(used.group(1)))
    return out


def ptxas_log(remarks: str) -> str:
    """ptxas's report from the DSL's remarks file: each distinct remark once, in order."""
    texts = [match.group(1).replace("''", "'") for match in _PTXAS_REMARK.finditer(remarks)]
    return "\n".join(dict.fromkeys(text.rstrip("\n") for text in texts))


def _jit_entry(obj: Any, call: CuteCall) -> tuple[Any, tuple[str, int]]:
    """What `cute.compile` is given, and where its jit function is defined: the registered function, or an
    instance of the registered class built with the call's `init`."""
    if inspect.isclass(obj):
        try:
            instance = obj(**{name: decode(value, {}, 0) for name, value in call.init.items()})
        except Exception as exc:  # noqa: BLE001 - the project's constructor refused the arguments
            raise KernelError(f"{call.kernel}({_shown(call.init)}) raised {type(exc).__name__}: {exc}") from None
        return instance, _definition(obj.__call__)
    if call.init:
        raise KernelError(f"{call.kernel} is not a class: `init` gives constructor arguments to a class kernel")
    return obj, _definition(obj)


def _definition(fn: Any) -> tuple[str, int]:
    raw = inspect.unwrap(fn)
    code = getattr(raw, "__code__", None)
    if code is None:
        return "", 1
    lines, first = inspect.getsourcelines(raw) if os.path.exists(code.co_filename) else ([], code.co_firstlineno)
    offset = next((i for i, line in enumerate(lines) if line.lstrip().startswith(("def ", "async def "))), 0)
    return code.co_filename, first + offset


def decoded_args(call: CuteCall) -> dict[str, Any]:
    """The call's arguments as objects: fake tensors, symbols (one object per named symbol), dtypes, a stream."""
    symbols: dict[str, Any] = {}
    return {name: decode(value, symbols, 0) for name, value in call.args.items()}


def decode(value: Any, symbols: dict[str, Any], depth: int) -> Any:
    from cutlass import cute

    if isinstance(value, dict) and not is_tensor(value):
        return _dtype(value["dtype"])(value["value"])
    if isinstance(value, dict):
        shape = tuple(_dim(d, symbols, 32) for d in value["shape"])
        stride = tuple(_dim(d, symbols, 64) for d in value["stride"])
        return cute.runtime.make_fake_tensor(_dtype(value["dtype"]), shape, stride=stride,
                                             assumed_align=value.get("align"))
    if isinstance(value, list):
        return tuple(decode(item, symbols, depth + 1) for item in value)
    if value == "None":
        return None
    if value in (STREAM, f"{STREAM}:env"):
        return cute.runtime.make_fake_stream(use_tvm_ffi_env_stream=value != STREAM)
    if isinstance(value, str) and value.startswith(DTYPE_PREFIX):
        return _dtype(value)
    return value


def _dtype(name: str) -> Any:
    import cutlass

    dtype = getattr(cutlass, name[len(DTYPE_PREFIX):], None)
    if dtype is None:
        raise KernelError(f"{name!r}: the CuTe DSL has no element type {name[len(DTYPE_PREFIX):]!r}")
    return dtype


def _dim(dim: int | str, symbols: dict[str, Any], width: int) -> Any:
    if isinstance(dim, int):
        return dim
    from cutlass import cute

    found = dim_symbol(dim)
    assert found is not None  # checked when the call was read
    name, divisibility = found
    if name and name in symbols:
        return symbols[name]
    made = cute.sym_int(32, divisibility=divisibility) if width == 32 else cute.sym_int64(divisibility=divisibility)
    if name:
        symbols[name] = made
    return made


def call_context(payload: CompileRequest, call: CuteCall, where: tuple[str, int], expect: list[str],
                 seconds: float) -> dict[str, Any]:
    """What KernelFacts says of the call's kernels besides what the compiler's output says."""
    variant = payload["variant"]
    return {
        "kernel": call.kernel, "variant": call.variant, "target": payload["target"], "language": "cute",
        "path": payload.get("path") or where[0], "line": payload.get("line") or where[1], "kind": variant["kind"],
        "num_warps": 0, "num_stages": None, "expect": list(expect), "pdl": False,
        "shapes": list(variant.get("shapes", ())),
        "constexprs": {**call.init, **{k: v for k, v in call.args.items() if not is_tensor(v)}},
        "signature": {k: v["dtype"] for k, v in call.args.items() if is_tensor(v)},
        "compile_seconds": round(seconds, 3), "toolchain": dict(payload.get("toolchain", {})), "specialization": {},
        "source": variant.get("source", "registered"), "captured": list(variant.get("captured", ())),
    }


def _shown(values: dict[str, Any]) -> str:
    return ", ".join(f"{k}={v!r}" for k, v in values.items())


def _message(exc: BaseException) -> str:
    """The DSL's error in a line or a few: its type and first lines, without the ANSI colours it prints with."""
    text = re.sub(r"\x1b\[[0-9;]*m", "", str(exc)).strip()
    lines = [line.strip() for line in text.splitlines() if line.strip()][:4]
    return f"the CuTe DSL raised {type(exc).__name__}: {' | '.join(lines)}" if lines else \
        f"the CuTe DSL raised {type(exc).__name__}"
