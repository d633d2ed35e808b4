"""One side of a diff: the project's kernels compiled at one revision or under one toolchain.

A side is compiled through the pipeline `kgate check` uses (the same selection, the same cache), but runs
no rule: what a diff needs is each variant's figures and where its cubin is. A side made under another
Triton release comes back from that release's environment as JSON (`to_json`), so both kinds compare alike.
"""

from __future__ import annotations

import time
from dataclasses import dataclass, field
from typing import Any

from kgate.collect.registry import captured_specs, triton_entries
from kgate.compile.engine import Progress
from kgate.config import Config
from kgate.facts.model import KernelFacts
from kgate.pipeline import CheckOptions, compile_kernels, select_units

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

    def to_json(self) -> dict[str, Any]:
        return {"label": self.label, "facts": [f.to_json() for f in self.facts.values()],
                "failures": [[*key, message] for key, message in self.failures.items()],
                "cubins": [[*key, path, digest] for key, (path, digest) in self.cubins.items()],
                "toolchain": self.toolchain, "compiled": self.compiled, "cached": self.cached,
                "seconds": self.seconds, "covered": sorted(self.covered)}

    @classmethod
    def from_json(cls, data: dict[str, Any]) -> Side:
        facts = [KernelFacts.from_record(f) for f in data["facts"]]
        return cls(str(data["label"]), {f.key: f for f in facts},
                   {(k, v, t): str(m) for k, v, t, m in data["failures"]},
                   {(k, v, t): (str(p), d) for k, v, t, p, d in data["cubins"]},
                   {str(k): str(v) for k, v in data["toolchain"].items()}, int(data["compiled"]),
                   int(data["cached"]), float(data["seconds"]), frozenset(data["covered"]))


def compile_side(config: Config, options: CheckOptions, label: str, progress: Progress | None = None) -> Side:
    """The selected kernels of the project `config` describes, compiled (or read from the cache)."""
    started = time.perf_counter()
    entries, captured = select_units(triton_entries(config), captured_specs(config), options)
    compiled, covered = compile_kernels(config, entries, captured, options, progress)
    failures = {(f.kernel, f.variant, f.target): (f.message.splitlines() or [""])[0] for f in compiled.failures}
    return Side(label, {f.key: f for f in compiled.facts}, failures, dict(compiled.cubins),
                {k: v for k, v in compiled.toolchain.items() if not k.endswith(".id")}, compiled.compiled,
                compiled.cached, time.perf_counter() - started, covered)
