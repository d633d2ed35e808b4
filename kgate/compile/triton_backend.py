"""Triton kernels compiled offline for a GPUTarget, in a compile worker.

Runs inside worker processes only (it imports Triton and the project's kernel
modules). Two tasks:

- `expand`: import a registered kernel and describe it: parameters, autotune
  configs, the constexprs its heuristics compute, its definition line.
- `compile`: `triton.compile(ASTSource(...), target=GPUTarget("cuda", cc, 32))`
  for one variant and target (a Gluon kernel through Gluon's own source class,
  as Triton's launcher compiles it: `kgate.compile.gluon`), with ptxas's `-v` log captured; the PTX, the
  log, the TTGIR, the cubin (and its SASS where the run's plan wants it: the facts stage reads the variant
  here, `kgate.compile.worker_facts`) are kept as artifacts (`kgate.compile.units`), and the
  variant's expectations are read from its TTIR (`kgate.compile.expectations`).
  No GPU and no driver are needed.
"""

from __future__ import annotations

import ast
import contextlib
import io
import os
import re
import time
from pathlib import Path
from typing import Any

from kgate.collect.source import try_parse
from kgate.collect.specialization import Specialization
from kgate.compile import expectations, gluon
from kgate.compile.cache import cache_write_failure, kept, triton_folder, write_artifact
from kgate.compile.payloads import CompileReply, CompileRequest, ExpandRequest, Expansion, Param
from kgate.compile.units import CUBIN, Compiled, steady_log, store_text
from kgate.compile.worker_facts import analysed
from kgate.compile.worker_imports import KernelError, bound_apart, imported, load
from kgate.core.schema import CAPABILITY


def _jit_function(obj: Any) -> tuple[Any, list[Any]]:
    """(the JITFunction, autotune configs or []) of a registered object, through the wrappers around it."""
    chain = _layers(obj)
    configs = next((list(layer.configs) for layer in chain if getattr(layer, "configs", None)), [])
    return chain[-1], configs


def _layers(obj: Any) -> list[Any]:
    from kgate.capture.runtime import layers

    try:
        return layers(obj)
    except ValueError:
        raise KernelError(f"{getattr(obj, '__name__', obj)!r} is not a @triton.jit function") from None


def _autotune_keys(obj: Any) -> list[str]:
    """The arguments the autotuners around a registered object are keyed on, in order, each once."""
    keys: list[str] = []
    for layer in _layers(obj):
        found = getattr(layer, "keys", None)
        if isinstance(found, (list, tuple)) and getattr(layer, "configs", None) is not None:
            keys += [k for k in found if isinstance(k, str) and k not in keys]
    return keys


def _definition(fn: Any) -> tuple[str, int]:
    """(file, line of `def`) of a JITFunction."""
    raw = fn.fn
    path = raw.__code__.co_filename
    line = raw.__code__.co_firstlineno
    try:
        tree = try_parse(Path(path).read_bytes()) or ast.Module(body=[], type_ignores=[])
        for node in ast.walk(tree):
            if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)) and node.name == raw.__name__ \
                    and node.lineno >= line - 50 and (node.decorator_list and node.decorator_list[0].lineno == line
                                                      or node.lineno == line):
                line = node.lineno
                break
    except OSError:
        pass
    return path, line


def expand(payload: ExpandRequest) -> Expansion:
    """Describe a registered kernel: what the main process needs to plan its variants."""
    from kgate.capture.runtime import heuristic_names

    obj = imported(payload, payload["kernel"])
    fn, configs = _jit_function(obj)
    path, line = _definition(fn)
    params: list[Param] = [{"name": p.name, "constexpr": bool(p.is_constexpr), "has_default": bool(p.has_default)}
              for p in fn.params]
    return {
        "path": path,
        "line": line,
        "params": params,
        "heuristics": heuristic_names(obj),
        "configs": [
            {"kwargs": dict(c.kwargs), "num_warps": c.num_warps, "num_stages": c.num_stages,
             "maxnreg": getattr(c, "maxnreg", None)}
            for c in configs
        ],
        "keys": _autotune_keys(obj),
    }


def compile_variant(payload: CompileRequest) -> CompileReply:
    """Compile one variant for one target; keep its artifacts and return what the compile record holds: the
    variant's context (what KernelFacts says of it besides what the compiler's output says), the artifacts'
    content hashes and the launch's dynamic shared memory.

    A captured variant carries its specialisation; a registered one carries example arguments, which
    Triton's own launcher binds here for the target (`kgate.capture.runtime.bind`). Either way the compile
    is the launcher's: `triton.compile(ASTSource(fn, signature, constants, attrs), target, options)`, with the
    source class the launcher uses for the kernel (`kgate.compile.gluon.source_class`).
    """
    variant = payload["variant"]
    obj = imported(payload, variant["kernel"])
    import triton
    from triton import knobs
    from triton.backends.compiler import GPUTarget

    target = payload["target"]
    capability = CAPABILITY[target]
    fn, _configs = _jit_function(obj)
    bound: dict[str, Any] = {}  # what the project's code run to bind the registration (its heuristics) read
    if "bind" in variant:
        apart = bound_apart(payload)
        with apart:
            spec = Specialization.from_record(bind_registration(obj, variant["kernel"], variant["bind"], capability))
        bound = apart.reads
    else:
        spec = Specialization.from_record(variant["spec"])
        why = spec.mismatch([{"name": p.name, "constexpr": bool(p.is_constexpr),
                              "annotation": str(getattr(p, "annotation_type", "") or ""),
                              "do_not_specialize": bool(getattr(p, "do_not_specialize", False)),
                              "do_not_specialize_on_alignment": bool(getattr(p, "do_not_specialize_on_alignment",
                                                                             False))} for p in fn.params])
        if why is not None:
            raise KernelError(f"the captured specialisation no longer fits the kernel: {why}")
    signature, constants, attrs = triton_inputs(fn, spec)
    options = dict(spec.options)
    _check_options(options, capability)

    knobs.compilation.always_compile = True
    knobs.nvidia.dump_ptxas_log = True
    log = io.StringIO()
    started = time.perf_counter()
    triton_cache = os.environ.get("TRITON_CACHE_DIR")
    try:
        with contextlib.redirect_stdout(log), triton_folder(triton_cache):
            compiled = triton.compile(gluon.source_class(fn)(fn, signature, constants, attrs),
                                      target=GPUTarget("cuda", capability, 32), options=options)
    except Exception as exc:  # noqa: BLE001 - any compiler failure becomes a finding
        # ...but for Triton's own cache (in kgate's) or a disk that is full: the run cannot go on.
        unwritable = cache_write_failure(exc, os.path.dirname(triton_cache) if triton_cache else None)
        if unwritable is not None:
            raise unwritable from None
        where = _error_line(exc, fn)
        message = _compiler_message(exc)
        raise KernelError(re.sub(r"^at \d+:\d+:\s*", "", message) if where else message, where) from None
    seconds = time.perf_counter() - started
    ptxas_log = "\n".join(line for line in log.getvalue().splitlines() if "ptxas" in line or "bytes" in line)
    folder = Path(payload["artifacts"])
    cubin_hash = write_artifact(folder / CUBIN, compiled.asm["cubin"])
    cubin_path = kept(folder / CUBIN, cubin_hash)  # this compile's, whatever another compile of the key writes
    hashes = {"ptx": store_text(folder, "ptx", compiled.asm["ptx"]),
              "ptxas_log": store_text(folder, "ptxas_log", steady_log(ptxas_log)),
              "ttgir": store_text(folder, "ttgir", compiled.asm.get("ttgir", ""))}
    expect = expectations.compiled(variant, gluon.first_ir(compiled.asm))
    context = variant_context(payload, spec, seconds, expect, gluon.num_stages(fn, spec.num_stages))
    dynamic_smem = int(compiled.metadata.shared or 0)
    context = {**context, "parameters": passed(signature)}
    unit = Compiled(key=payload.get("key", ""), folder=folder, language="triton", target=target, hashes=hashes,
                    context=context, dynamic_smem=dynamic_smem, cubin=(str(cubin_path), None))
    # The facts stage reads the variant here and the SASS it lacks is disassembled from the cubin just written.
    unit = analysed(payload, unit, lambda _symbols: (disassemble(cubin_path), None))
    return {"context": context, "artifacts": dict(unit.hashes), "dynamic_smem": dynamic_smem, "cubin": cubin_hash,
            "bound": bound}


def bind_registration(obj: Any, kernel: str, bind: dict[str, Any], capability: int) -> dict[str, Any]:
    """A registration's example arguments put through Triton's launcher for `capability`: the specialisation.

    `obj` is the registered object, so every wrapper around the kernel takes part as in a launch: heuristics
    compute their values, an autotuner passes on the config the variant was planned from."""
    from kgate.capture.runtime import ExamplePointer, HeuristicError, Unsupported
    from kgate.capture.runtime import bind as launcher_bind

    pointers = _pointer_dtypes()
    args: dict[str, Any] = {}
    for name, value in bind["args"].items():
        if isinstance(value, dict) and gluon.is_descriptor(value["type"]):
            args[name] = _descriptor(name, value["type"], pointers)
        elif isinstance(value, dict):
            ty = value["type"]
            dtype = pointers.get(ty[2:] if ty.startswith("*k") else ty[1:])
            if dtype is None:
                raise KernelError(f"{name}: {ty!r} is not a pointer type Triton's launcher knows "
                                  f"(e.g. \"*bf16\", \"*fp8e4nv\")")
            args[name] = ExamplePointer(dtype, value["align"])
        else:
            args[name] = decode_constant(value, name)
    constexprs = {name: decode_constant(value, name) for name, value in bind["constexprs"].items()}
    try:
        record = launcher_bind(obj, [], {**args, **constexprs, **bind["options"]}, capability)
    except HeuristicError as exc:
        raise KernelError(str(exc)) from None
    except Unsupported as exc:
        raise KernelError(f"kgate cannot gate this launch: {exc}") from None
    except Exception as exc:  # noqa: BLE001 - the launcher refused the arguments: a finding, not a crash
        raise KernelError(f"Triton's launcher refused the example arguments: {type(exc).__name__}: {exc}") from None
    record["kernel"] = kernel
    record.pop("file", None)
    return record


def _descriptor(name: str, ty: str, pointers: dict[str, Any]) -> Any:
    """A tensor descriptor argument of a registration, made for the launcher as the type says."""
    from kgate.capture.runtime import ExamplePointer

    element = ty[len("tensordesc<"):].split("[", 1)[0]
    if element not in pointers:
        raise KernelError(f"{name}: {ty!r} has an element type Triton's launcher does not know")
    try:
        return gluon.example_descriptor(ty, pointers[element], lambda dtype: ExamplePointer(dtype, 16))
    except (ValueError, AssertionError, gluon.NotGluon) as exc:
        raise KernelError(f"{name}: {ty!r}: kgate cannot make a tensor descriptor of this type ({exc})") from None


_POINTERS: dict[str, Any] = {}


def _pointer_dtypes() -> dict[str, Any]:
    """Triton type string of a pointee ("bf16") -> its dtype, as the installed Triton's own binder names a tensor of
    that dtype (`triton.runtime.jit.mangle_type`, in every release kgate supports)."""
    if not _POINTERS:
        import triton.language as tl
        from triton.runtime.jit import mangle_type

        from kgate.capture.runtime import ExamplePointer

        for attr in dir(tl):
            dtype = getattr(tl, attr, None)
            if not isinstance(dtype, tl.dtype) or isinstance(dtype, tl.pointer_type):
                continue
            try:
                name = mangle_type(ExamplePointer(dtype, 16))
            except Exception:  # noqa: BLE001, S112 - a dtype no tensor has (void, ...)
                continue
            if isinstance(name, str) and name.startswith("*"):
                _POINTERS.setdefault(name[1:], dtype)
    return _POINTERS


def decode_constant(value: Any, name: str) -> Any:
    """A value as kgate's files hold it, back to what the launcher is given (dtype, None, @jit function)."""
    import triton.language as tl

    if isinstance(value, list):
        return tuple(decode_constant(v, name) for v in value)
    if not isinstance(value, str):
        return value
    if value == "None":
        return None
    if value.startswith("tl."):
        dtype = getattr(tl, value[3:], None)
        if not isinstance(dtype, tl.dtype):
            raise KernelError(f"{name} = {value!r}: triton.language has no dtype {value[3:]!r}")
        return dtype
    if value.startswith("jit:"):
        return load(value[4:])
    if gluon.is_gluon_call(value):
        try:
            return gluon.gluon_object(value)
        except gluon.NotGluon as exc:
            raise KernelError(f"{name} = {value!r}: {exc}") from None
    return value


def triton_inputs(fn: Any, spec: Specialization) -> tuple[dict[str, str], dict[tuple[int], Any], dict[tuple[int], Any]]:
    """The specialisation as `ASTSource` takes it: the signature of every parameter in order ("constexpr" for
    constants), the constants by parameter index, the divisibility attributes by parameter index.

    A constexpr the specialisation does not hold takes its default, as Triton's launcher gives it; `None` is
    given only where the specialisation says the argument was None (a parameter without a value is an error,
    never a silent None)."""
    signature: dict[str, str] = {}
    constants: dict[tuple[int], Any] = {}
    attrs: dict[tuple[int], Any] = {}
    for index, param in enumerate(fn.params):
        name = param.name
        if name in spec.signature:
            signature[name] = spec.signature[name]
            if name in spec.divisible:
                attrs[(index,)] = [["tt.divisibility", 16]]
            continue
        signature[name] = "constexpr"
        if name in spec.constexprs:
            constants[(index,)] = decode_constant(spec.constexprs[name], name)
        elif name in spec.equal_to_1:
            constants[(index,)] = 1
        elif name in spec.none:
            constants[(index,)] = None
        elif param.has_default:
            constants[(index,)] = param.default  # as the launcher passes it
        else:
            raise KernelError(f"parameter {name!r} has no value in the specialisation and no default")
    return signature, constants, attrs


def passed(signature: dict[str, str]) -> list[str]:
    """The names of the parameters the compiled kernel takes, in the PTX's order: the run-time ones of the
    signature (`triton_inputs`: every parameter in order, "constexpr" for the constants, which are not passed).
    A tensor descriptor is passed as several PTX parameters: the names stop before the first one, so that every
    name given stands for its PTX parameter."""
    out = []
    for name, kind in signature.items():
        if kind == "constexpr":
            continue
        if not kind.startswith(("*", "i", "u", "fp", "bf")):
            break
        out.append(name)
    return out


def _check_options(options: dict[str, Any], capability: int) -> None:
    """Recorded options this Triton does not know would be dropped without a word: refuse them."""
    from triton.backends.compiler import GPUTarget
    from triton.compiler.compiler import make_backend

    known = set(make_backend(GPUTarget("cuda", capability, 32)).parse_options({}).__dict__)
    unknown = sorted(set(options) - known)
    if unknown:
        raise KernelError(f"compile option(s) {', '.join(unknown)} unknown to this Triton: the launch they were "
                          f"recorded from cannot be reproduced with it")


def disassemble(cubin: Path) -> str:
    from kgate.support import tools

    cuobjdump = tools.require_tool("cuobjdump")
    return tools.run([str(cuobjdump), "-sass", str(cubin)], timeout=120).stdout


def variant_context(payload: CompileRequest, spec: Specialization, seconds: float,
                    expect: list[str], num_stages: int | None) -> dict[str, Any]:
    """What KernelFacts says of a variant besides what the compiler's output says: its identity, where it is
    defined, what the registration and the launcher's specialisation made of it, what it is expected to contain
    (`kgate.compile.expectations`), the pipeline stages its compile had (`kgate.compile.gluon.num_stages`)."""
    variant = payload["variant"]
    return dict(
        kernel=variant["kernel"],
        variant=spec.variant,
        target=payload["target"],
        language="triton",
        path=payload["path"],
        line=payload["line"],
        kind=variant["kind"],
        num_warps=spec.num_warps,
        num_stages=num_stages,
        expect=list(expect),
        pdl=spec.pdl,
        shapes=list(variant.get("shapes", ())),
        constexprs=dict(spec.constexprs),
        signature=dict(spec.signature),
        compile_seconds=round(seconds, 3),
        toolchain=dict(payload.get("toolchain", {})),
        specialization=spec.report(),
        source=variant.get("source", "registered"),
    )


def _error_line(exc: BaseException, fn: Any) -> tuple[str, int] | None:
    """The file and line a front-end error of the kernel's own code is at. Triton's CompilationError says "at L:C"
    counted from the kernel's `def`; the finding was put at the definition, the line left to count."""
    node = getattr(exc, "node", None)
    first = getattr(fn, "def_file_line_number", None)
    if first is None:  # Triton before 3.7: the source's first line and the lines of the decorators above the def
        raw, start = getattr(fn, "raw_src", None), getattr(fn, "starting_line_number", None)
        if isinstance(raw, list) and isinstance(start, int):
            first = next((start + i for i, text in enumerate(raw) if re.match(r"\s*def\s", text)), None)
    line = getattr(node, "lineno", None)
    if not (isinstance(first, int) and isinstance(line, int) and getattr(exc, "src", None) == getattr(fn, "src", 0)):
        return None
    # Triton before 3.7 keeps no file name: the Python function's own.
    file_name = getattr(fn, "file_name", None) or getattr(getattr(getattr(fn, "fn", None), "__code__", None),
                                                          "co_filename", None)
    return (str(file_name), first + line - 1) if file_name else None


def _compiler_message(exc: BaseException) -> str:
    """The useful part of a compiler exception: Triton's message without the PTX dump."""
    text = str(exc).strip()
    name = type(exc).__name__
    lines = [line for line in text.splitlines() if line.strip()]
    if name == "CompilationError" and lines:
        # Triton prints "at L:C:" then the source excerpt then the error.
        tail = lines[-1]
        head = lines[0]
        return f"{head} {tail}".strip() if head != tail else head
    if len(lines) > 6:
        lines = lines[:6]
    text = " | ".join(lines)
    if name in ("PTXASError", "CompilationError", "CompileTimeAssertionFailure"):
        return f"{name}: {text}" if text else name
    return f"Triton's compiler raised {name}: {text}" if text else f"Triton's compiler raised {name}"

