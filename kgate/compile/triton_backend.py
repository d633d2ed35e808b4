"""Triton kernels compiled offline for a GPUTarget, in a compile worker.

Runs inside worker processes only (it imports Triton and the project's kernel
modules). Two tasks:

- `expand`: import a registered kernel and describe it: parameters, autotune
  configs, whether its source calls `tl.dot_scaled`, its definition line.
- `compile`: `triton.compile(ASTSource(...), target=GPUTarget("cuda", cc, 32))`
  for one variant and target, with ptxas's `-v` log captured, then parse the
  PTX and the log into facts. No GPU and no driver are needed.
"""

from __future__ import annotations

import ast
import contextlib
import importlib
import io
import json
import os
import sys
import time
import warnings
from dataclasses import replace
from pathlib import Path
from typing import Any

from kgate.collect.source import try_parse
from kgate.errors import KgateError, did_you_mean
from kgate.facts.model import KernelFacts, Resources, SassSummary
from kgate.facts.ptx import parse_ptx
from kgate.facts.ptxas_log import parse_ptxas_log
from kgate.facts.sass import parse_sass
from kgate.facts.ttgir import parse_pipeline

CAPABILITY = {"sm_120a": 120, "sm_100a": 100, "sm_90a": 90}


class KernelError(KgateError):
    """The kernel cannot be compiled: reported as a compile-error finding."""


def _prepare(paths: list[str]) -> None:
    for path in reversed(paths):
        if path not in sys.path:
            sys.path.insert(0, path)
    warnings.filterwarnings("ignore", message=".*TRITON_DEFAULT_FP_FUSION.*")
    _remembered_triton_key()


_TRITON_KEY_SET = False


def _remembered_triton_key() -> None:
    """Hand Triton the hash of its own installation from kgate's cache instead of recomputing it.

    `triton.compile` keys its own cache on a hash of every Triton source file and of libtriton
    (about half a second, once per process); kgate keeps no use for that cache, but the key is
    computed all the same. It depends only on the installed Triton, so it is computed once per
    installation (identified by its version and its files' sizes and times) and remembered next to
    the facts cache. Triton's own compile warm-up pool sets the same hook the same way.
    """
    global _TRITON_KEY_SET
    if _TRITON_KEY_SET:
        return
    _TRITON_KEY_SET = True
    cache_dir = os.environ.get("TRITON_CACHE_DIR")
    try:
        import triton
        import triton.runtime.cache as triton_cache
    except ImportError:
        return
    if cache_dir is None or not hasattr(triton_cache, "triton_key"):
        return
    package = Path(triton.__file__).parent
    identity = [getattr(triton, "__version__", "")]
    for part in ("_C", "compiler", "backends", "language", "runtime"):
        try:
            st = (package / part).stat()
            identity.append(f"{part}:{st.st_mtime_ns}")
        except OSError:
            identity.append(part)
    for lib in sorted((package / "_C").glob("libtriton*")):
        st = lib.stat()
        identity.append(f"{lib.name}:{st.st_size}:{st.st_mtime_ns}")
    record = Path(cache_dir).parent / "v1" / "triton-key.json"
    key = None
    try:
        stored = json.loads(record.read_text())
        if isinstance(stored, dict) and stored.get("identity") == identity and isinstance(stored.get("key"), str):
            key = stored["key"]
    except (OSError, ValueError):
        pass
    if key is None:
        key = triton_cache.triton_key()
        try:
            from kgate.atomicio import atomic_write

            atomic_write(record, json.dumps({"identity": identity, "key": key}).encode())
        except OSError:
            pass
    value = key
    triton_cache.triton_key = lambda: value


def _load(kernel: str) -> Any:
    module_name, _, attr = kernel.partition(":")
    try:
        module = importlib.import_module(module_name)
    except BaseException as exc:
        if isinstance(exc, KeyboardInterrupt):
            raise
        raise KernelError(f"cannot import {module_name}: {type(exc).__name__}: {exc}") from None
    try:
        return getattr(module, attr)
    except AttributeError:
        names = [name for name in vars(module) if not name.startswith("_")]
        raise KernelError(f"module {module_name} has no attribute {attr!r}{did_you_mean(attr, names)}") from None


def _jit_function(obj: Any) -> tuple[Any, list[Any]]:
    """(the JITFunction, autotune configs or []) of a registered object, through decorators."""
    from triton.runtime.jit import JITFunction

    configs: list[Any] = []
    seen = 0
    while not isinstance(obj, JITFunction):
        if hasattr(obj, "configs") and not configs:
            configs = list(obj.configs)
        inner = getattr(obj, "fn", None)
        if inner is None or seen > 8:
            raise KernelError(f"{getattr(obj, '__name__', obj)!r} is not a @triton.jit function")
        obj = inner
        seen += 1
    return obj, configs


def _definition(fn: Any) -> tuple[str, int, bool]:
    """(file, line of `def`, whether the source calls dot_scaled) of a JITFunction."""
    raw = fn.fn
    path = raw.__code__.co_filename
    line = raw.__code__.co_firstlineno
    src = getattr(fn, "src", "") or ""
    uses_dot_scaled = "dot_scaled" in src
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
    return path, line, uses_dot_scaled


def expand(payload: dict[str, Any]) -> dict[str, Any]:
    """Describe a registered kernel: what the main process needs to plan its variants."""
    _prepare(payload["sys_path"])
    obj = _load(payload["kernel"])
    fn, configs = _jit_function(obj)
    path, line, uses_dot_scaled = _definition(fn)
    params = [{"name": p.name, "constexpr": bool(p.is_constexpr), "has_default": bool(p.has_default)}
              for p in fn.params]
    return {
        "path": path,
        "line": line,
        "uses_dot_scaled": uses_dot_scaled,
        "params": params,
        "configs": [
            {"kwargs": dict(c.kwargs), "num_warps": c.num_warps, "num_stages": c.num_stages,
             "maxnreg": getattr(c, "maxnreg", None)}
            for c in configs
        ],
    }


def compile_variant(payload: dict[str, Any]) -> dict[str, Any]:
    """Compile one variant for one target and return its KernelFacts as JSON."""
    _prepare(payload["sys_path"])
    import triton
    from triton import knobs
    from triton.backends.compiler import GPUTarget
    from triton.compiler import ASTSource

    variant = payload["variant"]
    target = payload["target"]
    fn, _configs = _jit_function(_load(variant["kernel"]))
    signature = dict(variant["signature"])
    constexprs = dict(variant["constexprs"])
    for name in constexprs:
        signature.setdefault(name, "constexpr")
    divisible = variant["divisible"]
    if divisible is None:
        divisible = [name for name, ty in variant["signature"].items() if ty.startswith("*")]
    attrs = {(fn.arg_names.index(name),): [["tt.divisibility", 16]] for name in divisible if name in fn.arg_names}
    options: dict[str, Any] = {"num_warps": variant["num_warps"], "num_stages": variant["num_stages"]}
    if variant.get("pdl"):
        options["launch_pdl"] = True
    if variant.get("maxnreg"):
        options["maxnreg"] = variant["maxnreg"]

    knobs.compilation.always_compile = True
    knobs.nvidia.dump_ptxas_log = True
    log = io.StringIO()
    started = time.perf_counter()
    try:
        with contextlib.redirect_stdout(log):
            compiled = triton.compile(
                ASTSource(fn, signature, constexprs, attrs),
                target=GPUTarget("cuda", CAPABILITY[target], 32),
                options=options,
            )
    except Exception as exc:  # noqa: BLE001 - any compiler failure becomes a finding
        raise KernelError(_compiler_message(exc)) from None
    seconds = time.perf_counter() - started
    ptx = compiled.asm["ptx"]
    cubin = compiled.asm["cubin"]
    ptxas_log = "\n".join(line for line in log.getvalue().splitlines() if "ptxas" in line or "bytes" in line)
    facts = build_facts(payload, fn, ptx, ptxas_log, compiled.metadata.shared, seconds)
    pipeline = parse_pipeline(compiled.asm.get("ttgir", ""))
    if pipeline is not None:
        facts = replace(facts, smem_buffers=pipeline.buffers, smem_per_buffer=pipeline.bytes_per_buffer)
    artifacts = Path(payload["artifacts"])
    artifacts.mkdir(parents=True, exist_ok=True)
    _write(artifacts / "kernel.ptx", ptx.encode())
    _write(artifacts / "kernel.cubin", cubin)
    _write(artifacts / "ptxas.log", ptxas_log.encode())
    if payload.get("sass"):
        sass_text = disassemble(artifacts / "kernel.cubin")
        _write(artifacts / "kernel.sass", sass_text.encode())
        functions = parse_sass(sass_text)
        ops = functions.get(facts.entry.name) or next(iter(functions.values()), None)
        facts = _with_sass(facts, ops.opcodes if ops else {})
    return facts.to_json()


def _with_sass(facts: KernelFacts, opcodes: dict[str, int]) -> KernelFacts:
    return replace(facts, sass=SassSummary(dict(opcodes)))


def disassemble(cubin: Path) -> str:
    from kgate import tools

    cuobjdump = tools.require_tool("cuobjdump")
    return tools.run([str(cuobjdump), "-sass", str(cubin)], timeout=120).stdout


def build_facts(payload: dict[str, Any], fn: Any, ptx: str, ptxas_log: str, dynamic_smem: int,
                seconds: float) -> KernelFacts:
    variant = payload["variant"]
    ptx_facts = parse_ptx(ptx)
    entry = ptx_facts.entry()
    resources = parse_ptxas_log(ptxas_log).get(entry.name)
    if resources is None:
        raise KernelError(f"the ptxas log has no figures for {entry.name!r}")
    return KernelFacts(
        kernel=variant["kernel"],
        variant=variant["name"],
        target=payload["target"],
        language="triton",
        path=payload["path"],
        line=payload["line"],
        kind=variant["kind"],
        num_warps=variant["num_warps"],
        num_stages=variant["num_stages"],
        expect=tuple(variant["expect"]),
        pdl=bool(variant.get("pdl")),
        ptx_target=ptx_facts.target,
        entry=entry,
        resources=Resources(
            registers=resources.registers,
            spill_stores=resources.spill_stores,
            spill_loads=resources.spill_loads,
            stack_bytes=resources.stack_frame,
            smem_static=resources.smem_static,
            smem_dynamic=int(dynamic_smem or 0),
            barriers=resources.barriers,
        ),
        shapes=tuple(variant.get("shapes", ())),
        constexprs=dict(variant["constexprs"]),
        signature=dict(variant["signature"]),
        compile_seconds=round(seconds, 3),
        toolchain=dict(payload.get("toolchain", {})),
    )


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


def _write(path: Path, data: bytes) -> None:
    tmp = path.with_name(f".{path.name}.{os.getpid()}.tmp")
    tmp.write_bytes(data)
    os.replace(tmp, path)
