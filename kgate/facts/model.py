"""KernelFacts: everything rules may read about one compiled kernel variant.

A KernelFacts is built by the facts stage (`kgate.facts.build`) from a compiled unit's artifacts, cached as
JSON and read back unchanged. Rules are pure functions of it.

Its fields are of two kinds. Context fields say what the plan made of the variant (its name, target, options,
where it is defined). Derived fields are read from the compiler's output: each is declared here with `fact()`,
naming the one function that reads it (`kgate.facts.extract`). That declaration is the whole registration: the
builder calls every declared extractor, JSON reads each back through its loader, and the facts schema (part of
the facts cache's key) is a hash of the declarations and of the code that reads them, so a record written
before a fact was added or an extractor changed is rebuilt, never misread. See docs/facts.md.
"""

from __future__ import annotations

import copy
import dataclasses
import functools
import hashlib
import json
import sys
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, TypeVar

from kgate.compile.units import CompileFailure
from kgate.core.artifacts import Artifact
from kgate.facts import extract
from kgate.facts.callgraph import function_name
from kgate.facts.extract import Move, Sources
from kgate.facts.ptx import PtxEntry, SourceLoc
from kgate.facts.ptxas_log import Resources
from kgate.facts.sass import LoopLoads, SassSummary

__all__ = ["CompileFailure", "KernelFacts", "Resources", "SassSummary", "fact", "derived_fields", "facts_schema"]

# Bumped only for a change the declarations cannot show (the JSON layout of every record); adding, removing or
# changing a fact or its code changes the schema by itself (`facts_schema`).
FORMAT = 5

T = TypeVar("T")


def fact(extractor: Callable[[Sources, str], Any], *, reads: frozenset[Artifact], load: Callable[[Any], Any] | None = None,
         moved: Callable[[Any, Move], Any] | None = None, default: Any = dataclasses.MISSING) -> Any:
    """Declare a field of KernelFacts read from the artifacts by `extractor(sources, entry)`.

    `reads`: the artifacts the extractor reads (a fact read from SASS is None where the kernel was not
    disassembled, and is left out where the run's plan does not want the kernel's SASS); `load`: JSON back to the
    value, raising on another shape (default: the JSON value as it is); `moved`: the value with its source
    locations moved, where it holds any (cached facts follow code that moved in its file); `default`: the value of
    a KernelFacts made by hand without it.
    """
    return field(default=default, metadata={"extract": extractor, "reads": reads, "load": load, "moved": moved})


PTX = frozenset({Artifact.PTX})
SASS = frozenset({Artifact.SASS})  # with the PTX's call graph, which nearly every fact follows into called functions


@dataclass(frozen=True)
class KernelFacts:
    kernel: str  # stable identity: "pkg.mod:fn" or a demangled CUDA name
    variant: str  # e.g. "BLOCK=1024,warps=4,stages=3"
    target: str  # the requested target, e.g. "sm_120a"
    language: str  # "triton" | "cuda"
    path: str  # repo-relative path of the kernel's definition
    line: int  # definition line
    kind: str  # elementwise | reduction | gemm | other
    num_warps: int  # warps per CTA
    num_stages: int | None
    expect: tuple[str, ...]
    pdl: bool
    # ---- read from the compiler's output: one extractor each (kgate.facts.extract)
    ptx_target: str = fact(extract.ptx_target, reads=PTX, load=extract.load_text)
    entry: PtxEntry = fact(extract.ptx_entry, reads=PTX, load=extract.load_entry, moved=extract.move_entry)
    resources: Resources = fact(extract.entry_resources, reads=frozenset({Artifact.PTXAS_LOG}),
                                load=extract.load_resources)
    sass: SassSummary | None = fact(extract.sass_summary, reads=SASS, load=extract.load_sass, default=None)
    # Software pipeline in shared memory (Triton): buffers and bytes per buffer.
    smem_buffers: int | None = fact(extract.smem_buffers, reads=frozenset({Artifact.TTGIR}),
                                    load=extract.load_optional_count, default=None)
    smem_per_buffer: int | None = fact(extract.smem_per_buffer, reads=frozenset({Artifact.TTGIR}),
                                       load=extract.load_optional_count, default=None)
    # Local-memory loads and stores inside a loop of the SASS.
    local_in_loop: tuple[int, int] | None = fact(extract.local_in_loop, reads=SASS, load=extract.load_optional_pair,
                                                 default=None)
    # The global loads of one trip of each loop of the SASS: opcode, width, address.
    loop_loads: tuple[LoopLoads, ...] | None = fact(extract.global_loads_in_loops, reads=SASS,
                                                    load=extract.load_loop_loads, default=None)
    # ---- context
    shapes: tuple[dict[str, int], ...] = ()
    # The variant's constexpr values and the registration's signature (Triton
    # type strings): the audit derives tile sizes and operand widths from them.
    constexprs: dict[str, Any] = field(default_factory=dict)
    signature: dict[str, str] = field(default_factory=dict)
    compile_seconds: float = 0.0
    toolchain: dict[str, str] = field(default_factory=dict)
    # Triton: what the launcher specialised (divisible_by_16, equal_to_1, none: argument names), and where
    # the variant comes from ("registered", "captured", or "registered+captured" where both); CUDA kernels leave
    # both empty.
    specialization: dict[str, list[str]] = field(default_factory=dict)
    source: str = ""
    # The capture environments whose record of this launch is gated on this target (`[captured."..."]` of the
    # capture file: "NVIDIA H200", "cpu sm_120a"); empty for a variant no capture recorded (registered, CUDA).
    captured: tuple[str, ...] = ()
    # The names of the kernel's parameters as the PTX passes them, in order, as the user wrote them: Triton's
    # run-time parameters (its constexprs are not passed), a CUDA kernel's from its `__global__` declaration;
    # empty where they cannot be told (a CUDA parameter list written by a macro).
    parameters: tuple[str, ...] = ()
    # CUDA: where the source gives the kernel the dynamic shared memory `resources.smem_dynamic` counts ("path:line"
    # of the launch or the `cudaFuncSetAttribute`, whose size the file or the compiler settles); empty where none is
    # known (the figure is then ptxas's alone).
    smem_set_at: str = ""
    # CUDA: a site ("path:line") that gives the kernel dynamic shared memory of a size the source does not settle (one
    # the run computes); empty where every site settles its size.
    smem_unsettled_at: str = ""

    @property
    def smem_dynamic_unknown(self) -> bool:
        """CUDA: whether the kernel uses dynamic shared memory (`extern __shared__`) whose size no site of the source
        settles, by the file or by the compiler (one the run computes, one a library's launcher sets in its own
        header: CUTLASS's adapter sizes it from the kernel's `SharedStorage`), or that one of its sites gives a size
        the run computes: `resources.smem_bytes` then counts its static memory and the most a settled site gives,
        and the kernel may get more."""
        return self.language == "cuda" and self.entry.dynamic_shared and (
            not self.smem_set_at or bool(self.smem_unsettled_at))

    @property
    def key(self) -> tuple[str, str, str]:
        return (self.kernel, self.variant, self.target)

    def own_line(self, loc: SourceLoc | None) -> int | None:
        """The line a PTX `.loc` names when it lies in the kernel's own file (`path`), else None. The PTX names
        the file as the compiler was given it, often absolute: it is the kernel's file when it ends in `path`."""
        if loc is None or not loc.line:
            return None
        name = loc.file.replace("\\", "/")
        return loc.line if name == self.path or name.endswith("/" + self.path) else None

    def function_name(self, symbol: str) -> str:
        """How a message names a function the kernel calls (`kgate.facts.callgraph.function_name`): a Triton
        function of the kernel's own module by its bare name."""
        return function_name(symbol, self.kernel.split(":", 1)[0] if self.language == "triton" else None)

    def has(self, artifact: Artifact) -> bool:
        """Whether the facts read from `artifact` are there (SASS: whether the kernel was disassembled)."""
        return all(getattr(self, f.name) is not None for f in _reading(type(self), artifact))

    def without(self, artifact: Artifact) -> KernelFacts:
        """These facts without those read from `artifact` (SASS where the run's plan does not want it): each at its
        default, which a fact read from an artifact a compile may leave out (SASS) has."""
        defaults: dict[str, Any] = {f.name: f.default for f in _reading(type(self), artifact)}
        return dataclasses.replace(self, **defaults)

    def to_json(self) -> dict[str, Any]:
        return _plain(self)

    @classmethod
    def from_json(cls: type[F], data: dict[str, Any]) -> F:
        data = dict(data)
        for f in derived_fields(cls):
            load = f.metadata["load"]
            if load is not None and f.name in data:
                data[f.name] = load(data[f.name])
        data["expect"] = tuple(data["expect"])
        data["shapes"] = tuple(data.get("shapes", ()))
        data["captured"] = tuple(data.get("captured", ()))
        data["parameters"] = tuple(data.get("parameters", ()))
        return cls(**data)

    @classmethod
    def from_record(cls: type[F], data: Any) -> F:
        """from_json for JSON read back from disk: raises KeyError, TypeError or ValueError unless every
        field holds what the rules read from it (a cached record is trusted only in its whole shape)."""
        if not isinstance(data, dict):
            raise TypeError("a KernelFacts record is a JSON object")
        facts = cls.from_json(data)
        texts = (facts.kernel, facts.variant, facts.target, facts.language, facts.path, facts.kind)
        _check(all(isinstance(v, str) for v in texts), "names")
        _check(all(extract.is_count(v) for v in (facts.line, facts.num_warps)), "counts")
        _check(facts.num_stages is None or isinstance(facts.num_stages, int), "num_stages")
        _check(isinstance(facts.pdl, bool), "flags")
        _check(all(isinstance(v, str) for v in facts.expect), "expect")
        _check(isinstance(facts.constexprs, dict) and isinstance(facts.signature, dict)
               and isinstance(facts.toolchain, dict), "tables")
        _check(isinstance(facts.compile_seconds, (int, float)), "compile_seconds")
        _check(isinstance(facts.source, str) and isinstance(facts.specialization, dict) and all(
            isinstance(v, list) and all(isinstance(n, str) for n in v) for v in facts.specialization.values()),
            "specialization")
        _check(all(isinstance(v, str) for v in facts.captured), "captured")
        _check(all(isinstance(v, str) for v in facts.parameters), "parameters")
        _check(isinstance(facts.smem_set_at, str) and isinstance(facts.smem_unsettled_at, str), "smem_set_at")
        return facts


F = TypeVar("F", bound=KernelFacts)


def _check(condition: bool, what: str) -> None:
    if not condition:
        raise ValueError(f"a KernelFacts record with the wrong types: {what}")


def derived_fields(model: type[KernelFacts] = KernelFacts) -> tuple[dataclasses.Field[Any], ...]:
    """The fields of a facts model read from the artifacts, in declaration order."""
    return tuple(f for f in dataclasses.fields(model) if "extract" in f.metadata)


def _reading(model: type[KernelFacts], artifact: Artifact) -> tuple[dataclasses.Field[Any], ...]:
    """The derived fields of a facts model read from `artifact`."""
    return tuple(f for f in derived_fields(model) if artifact in f.metadata["reads"])


def context_fields(model: type[KernelFacts] = KernelFacts) -> tuple[str, ...]:
    """The names of the fields the plan fills (every field that is not derived)."""
    return tuple(f.name for f in dataclasses.fields(model) if "extract" not in f.metadata)


_SCHEMAS: dict[type[KernelFacts], str] = {}


_PLAIN = (str, int, float, bool, type(None))


def _plain(value: Any) -> Any:
    """`dataclasses.asdict` of facts, the same values built without its deep copies (a facts record holds
    thousands of small dataclasses: asdict took a tenth of a CUDA file's reading)."""
    kind = type(value)
    if kind in _PLAIN:
        return value
    if kind in (list, tuple):
        return kind(_plain(item) for item in value)
    if kind is dict:
        return {_plain(key): _plain(item) for key, item in value.items()}
    if dataclasses.is_dataclass(kind):
        return {name: _plain(getattr(value, name)) for name in _field_names(kind)}
    return _other(value)


def _other(value: Any) -> Any:
    """As `dataclasses.asdict` gives a value of any other kind: a named tuple's and a mapping's or sequence's
    subclass as that kind, their items converted; anything else a deep copy."""
    if isinstance(value, tuple) and hasattr(value, "_fields"):
        return type(value)(*[_plain(item) for item in value])
    if isinstance(value, (list, tuple)):
        return type(value)(_plain(item) for item in value)
    if isinstance(value, dict):
        return type(value)((_plain(key), _plain(item)) for key, item in value.items())
    return copy.deepcopy(value)


@functools.cache
def _field_names(kind: type) -> tuple[str, ...]:
    return tuple(f.name for f in dataclasses.fields(kind))


def facts_schema(model: type[KernelFacts] = KernelFacts) -> str:
    """A hash of what decides a facts record: every field's name and type, each derived field's extractor,
    loader and mover, and the source of the modules they and the parsers live in. Part of the facts cache's
    key, so a record built before any of these changed is never read back.

    The code is the whole facts package (the parsers, the extractors, the builder) and any other module a
    hook of `model` lives in: a change there that moves no declaration changes the schema all the same."""
    if model not in _SCHEMAS:
        _SCHEMAS[model] = _schema(model)
    return _SCHEMAS[model]


def _schema(model: type[KernelFacts]) -> str:
    declared = []
    files = {str(path) for path in Path(__file__).parent.glob("*.py")}
    for f in dataclasses.fields(model):
        hooks = [f.metadata.get(k) for k in ("extract", "load", "moved")]
        reads = sorted(a.value for a in f.metadata.get("reads", ()))
        declared.append([f.name, str(f.type), *(_qualified(h) for h in hooks), *([reads] if reads else [])])
        files.update(_file_of(h.__module__) for h in hooks if h is not None)
    files.add(_file_of(model.__module__))
    sources = sorted(_source_hash(path) for path in files if path)
    blob = json.dumps([FORMAT, declared, sources], sort_keys=True, separators=(",", ":"))
    return hashlib.sha256(blob.encode()).hexdigest()


def _qualified(hook: Callable[..., Any] | None) -> str | None:
    return None if hook is None else f"{hook.__module__}:{hook.__qualname__}"


def _file_of(module_name: str) -> str:
    return str(getattr(sys.modules.get(module_name), "__file__", None) or "")


def _source_hash(path: str) -> str:
    try:
        with open(path, "rb") as handle:
            return hashlib.sha256(handle.read()).hexdigest()
    except OSError:
        return ""
