"""KernelFacts: everything rules may read about one compiled kernel variant.

A KernelFacts is built once (in a compile worker), serialised to the facts
cache as JSON and read back unchanged. Rules are pure functions of it.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass, field
from typing import Any

from kgate.facts.ptx import GlobalAccess, PtxEntry, SourceLoc
from kgate.facts.sass import SassSummary

# Bumped when KernelFacts gains or changes fields, or when the same planned variant compiles to something
# else (registrations bound through heuristics: 4): it is part of the facts
# cache key, so records written before the change are rebuilt, not misread.
FACTS_SCHEMA = 5  # 5: an access in an inline asm block has the block's source line


@dataclass(frozen=True)
class Resources:
    registers: int
    spill_stores: int
    spill_loads: int
    stack_bytes: int
    smem_static: int
    smem_dynamic: int
    barriers: int = 0

    @property
    def smem_bytes(self) -> int:
        return self.smem_static + self.smem_dynamic

    @property
    def spill_bytes(self) -> int:
        return self.spill_stores


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
    ptx_target: str
    entry: PtxEntry
    resources: Resources
    sass: SassSummary | None = None
    # Software pipeline in shared memory (Triton): buffers and bytes per buffer.
    smem_buffers: int | None = None
    smem_per_buffer: int | None = None
    shapes: tuple[dict[str, int], ...] = ()
    # The variant's constexpr values and the registration's signature (Triton
    # type strings): the audit derives tile sizes and operand widths from them.
    constexprs: dict[str, Any] = field(default_factory=dict)
    signature: dict[str, str] = field(default_factory=dict)
    compile_seconds: float = 0.0
    toolchain: dict[str, str] = field(default_factory=dict)
    # Triton: what the launcher specialised (divisible_by_16, equal_to_1, none: argument names), and where
    # the variant comes from ("registered" or "captured"); CUDA kernels leave both empty.
    specialization: dict[str, list[str]] = field(default_factory=dict)
    source: str = ""

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

    def to_json(self) -> dict[str, Any]:
        return asdict(self)

    @classmethod
    def from_json(cls, data: dict[str, Any]) -> KernelFacts:
        data = dict(data)
        entry = dict(data["entry"])
        entry["unwaited_accesses"] = tuple(
            GlobalAccess(a["opcode"], a["ptx_line"], SourceLoc(**a["loc"]) if a["loc"] else None)
            for a in entry["unwaited_accesses"]
        )
        data["entry"] = PtxEntry(**entry)
        data["resources"] = Resources(**data["resources"])
        data["sass"] = SassSummary(**data["sass"]) if data.get("sass") else None
        data["expect"] = tuple(data["expect"])
        data["shapes"] = tuple(data.get("shapes", ()))
        return cls(**data)

    @classmethod
    def from_record(cls, data: Any) -> KernelFacts:
        """from_json for JSON read back from disk: raises KeyError, TypeError or ValueError unless every
        field holds what the rules read from it (a cached record is trusted only in its whole shape)."""
        if not isinstance(data, dict):
            raise TypeError("a KernelFacts record is a JSON object")
        facts = cls.from_json(data)
        texts = (facts.kernel, facts.variant, facts.target, facts.language, facts.path, facts.kind, facts.ptx_target,
                 facts.entry.name)
        counts = (facts.line, facts.num_warps, facts.entry.global_accesses, *vars(facts.resources).values(),
                  *facts.entry.mma.values(), *(facts.sass.opcodes.values() if facts.sass else ()))
        _check(all(isinstance(v, str) for v in texts), "names")
        _check(all(isinstance(v, int) and not isinstance(v, bool) for v in counts), "counts")
        _check(facts.num_stages is None or isinstance(facts.num_stages, int), "num_stages")
        _check(all(isinstance(v, bool) for v in (facts.pdl, facts.entry.has_wait, facts.entry.has_launch_dependents)),
               "flags")
        _check(all(isinstance(v, str) for v in facts.expect) and all(isinstance(k, str) for k in facts.entry.mma),
               "expect and mma")
        _check(all(isinstance(a.opcode, str) and isinstance(a.ptx_line, int) for a in facts.entry.unwaited_accesses),
               "unwaited accesses")
        _check(isinstance(facts.constexprs, dict) and isinstance(facts.signature, dict)
               and isinstance(facts.toolchain, dict), "tables")
        _check(isinstance(facts.compile_seconds, (int, float)), "compile_seconds")
        _check(isinstance(facts.source, str) and isinstance(facts.specialization, dict) and all(
            isinstance(v, list) and all(isinstance(n, str) for n in v) for v in facts.specialization.values()),
            "specialization")
        return facts


def _check(condition: bool, what: str) -> None:
    if not condition:
        raise ValueError(f"a KernelFacts record with the wrong types: {what}")


@dataclass(frozen=True)
class CompileFailure:
    """A kernel variant that did not compile: reported as a finding, not a crash."""

    kernel: str
    variant: str
    target: str
    path: str
    line: int
    message: str
    rule: str = "KG001"  # compile-error; KG005 for captured specialisations that no longer fit their kernel

    def to_json(self) -> dict[str, Any]:
        return asdict(self)
