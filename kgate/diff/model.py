"""What one side of a diff holds: each variant's facts, its compile failure or its cubin, by kernel, variant
and target; as JSON too, for a side compiled in another Triton release's environment."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from kgate.facts.model import KernelFacts

Key = tuple[str, str, str]  # kernel, variant (constexprs, options, specialisation), target


@dataclass
class Side:
    label: str  # "HEAD~1 (3f2a9c1b0e4d)", "working tree", "Triton 3.5.1"
    facts: dict[Key, KernelFacts] = field(default_factory=dict)
    failures: dict[Key, str] = field(default_factory=dict)  # compile errors, first line
    cubins: dict[Key, tuple[str, str | None]] = field(default_factory=dict)  # path, hash it was written with
    toolchain: dict[str, str] = field(default_factory=dict)
    compiled: int = 0
    cached: int = 0
    seconds: float = 0.0
    covered: frozenset[str] = frozenset()
    # Per kernel module, the programs its import ran whose own reads are not seen (`kgate.compile.import_reads`).
    unseen: dict[str, list[str]] = field(default_factory=dict)
    # Per CUDA source, the hash of the build script that gives it nvcc flags its text does not settle, then those
    # flags as written (`kgate.collect.torch_builds`): compiled without them, so the same SASS is no proof where the
    # script changed.
    unsettled: dict[str, list[str]] = field(default_factory=dict)

    def to_json(self) -> dict[str, Any]:
        return {"label": self.label, "facts": [f.to_json() for f in self.facts.values()],
                "failures": [[*key, message] for key, message in self.failures.items()],
                "cubins": [[*key, path, digest] for key, (path, digest) in self.cubins.items()],
                "toolchain": self.toolchain, "compiled": self.compiled, "cached": self.cached,
                "seconds": self.seconds, "covered": sorted(self.covered), "unseen": self.unseen,
                "unsettled": self.unsettled}

    @classmethod
    def from_json(cls, data: dict[str, Any]) -> Side:
        facts = [KernelFacts.from_record(f) for f in data["facts"]]
        return cls(str(data["label"]), {f.key: f for f in facts},
                   {(k, v, t): str(m) for k, v, t, m in data["failures"]},
                   {(k, v, t): (str(p), d) for k, v, t, p, d in data["cubins"]},
                   {str(k): str(v) for k, v in data["toolchain"].items()}, int(data["compiled"]),
                   int(data["cached"]), float(data["seconds"]), frozenset(data["covered"]),
                   {str(k): [str(p) for p in v] for k, v in dict(data.get("unseen", {})).items()},
                   {str(k): [str(p) for p in v] for k, v in dict(data.get("unsettled", {})).items()})
