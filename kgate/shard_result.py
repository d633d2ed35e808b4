"""What a shard writes for `kgate merge` (the `shard` object of its JSON), and reading it back.

A shard's JSON is the usual report of its slice plus a `shard` object that
holds what the merged report needs and the slice alone cannot give: the
findings before suppression comments and the baseline (unused suppressions
and the ratchet are judged over the union), the kernels' full facts, the
compile failures, the toolchain, the options the shard ran with, and the
partition it planned. `check_set` refuses inputs that do not make exactly
one whole run: another count, a slice given twice, another unit list or
assignment, other options, a missing slice.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import kgate
from kgate.errors import ConfigError
from kgate.facts.model import CompileFailure, KernelFacts
from kgate.findings import Finding
from kgate.pipeline import CheckOptions, CheckRun, SourcePart
from kgate.shard import fingerprint


def record(checked: CheckRun, options: CheckOptions, targets: tuple[str, ...], selection_args: dict[str, Any],
           timings: dict[str, float]) -> dict[str, Any]:
    """The `shard` object of a shard's JSON."""
    plan = checked.plan
    assert plan is not None
    mine = plan.mine
    atoms = {a for u in mine for a in u.atoms}
    seconds = {k: v for k, v in {**timings, **checked.seconds}.items() if k in atoms}
    compiled = checked.compiled
    part = checked.source
    return {
        "index": plan.spec.index,
        "count": plan.spec.count,
        "kgate": kgate.__version__,
        "units": len(plan.units),
        "fingerprint": plan.fingerprint,
        "assignment": plan.assignment_fingerprint,
        "slice": [u.id for u in mine],
        "seconds": dict(sorted(seconds.items())),
        "options": {
            "targets": list(targets),
            "kernels": list(options.kernels),
            "fail_on": options.fail_on.value,
            "sass": options.sass,
            **selection_args,
        },
        "toolchain": dict(sorted(compiled.toolchain.items())),
        "facts": [f.to_json() for f in compiled.facts],
        "failures": [f.to_json() for f in compiled.failures],
        "compiled_findings": [f.to_json() for f in checked.raw],
        "source": None if part is None else {"findings": [f.to_json() for f in part.findings],
                                             "suppressed": part.suppressed, "files": part.files},
        "covered": sorted(checked.covered),
        "compiled": compiled.compiled,
        "cached": compiled.cached,
    }


REQUIRED = frozenset({"index", "count", "kgate", "units", "fingerprint", "assignment", "slice", "seconds", "options",
                      "toolchain", "facts", "failures", "compiled_findings", "source", "covered", "compiled",
                      "cached"})


TYPES: dict[str, type] = {"index": int, "count": int, "units": int, "kgate": str, "fingerprint": str,
                          "assignment": str, "slice": list, "seconds": dict, "options": dict, "toolchain": dict,
                          "covered": list}


@dataclass
class Shard:
    """One shard's result as `kgate merge` reads it."""

    path: str
    data: dict[str, Any]
    facts: list[KernelFacts]
    failures: list[CompileFailure]
    raw: list[Finding]
    source: SourcePart | None

    @property
    def name(self) -> str:
        return f"shard {self.data['index']}/{self.data['count']} ({self.path})"


def load(path: str) -> Shard:
    try:
        doc = json.loads(Path(path).read_bytes())
    except OSError as exc:
        raise ConfigError(f"{path}: cannot read: {exc.strerror}") from None
    except ValueError as exc:
        raise ConfigError(f"{path}: not JSON ({exc})") from None
    data = doc.get("shard") if isinstance(doc, dict) else None
    if not isinstance(data, dict) or doc.get("command") != "check":
        raise ConfigError(f"{path}: not a shard result (write one with `kgate check --shard I/N --format json -o "
                          f"FILE`)")
    lacking = sorted(REQUIRED - set(data))
    if lacking:
        raise ConfigError(f"{path}: malformed shard result (no {', '.join(lacking)})")
    wrong = sorted(k for k, kind in TYPES.items() if not isinstance(data[k], kind) or isinstance(data[k], bool))
    if wrong:
        raise ConfigError(f"{path}: malformed shard result ({', '.join(wrong)} of the wrong type)")
    try:
        part = data["source"]
        return Shard(
            path, data,
            facts=[KernelFacts.from_json(f) for f in data["facts"]],
            failures=[CompileFailure(**f) for f in data["failures"]],
            raw=[Finding.from_json(f) for f in data["compiled_findings"]],
            source=None if part is None else SourcePart([Finding.from_json(f) for f in part["findings"]],
                                                        int(part["suppressed"]), int(part["files"])),
        )
    except (KeyError, TypeError, ValueError) as exc:
        raise ConfigError(f"{path}: malformed shard result ({type(exc).__name__}: {exc})") from None


def check_set(shards: list[Shard]) -> None:
    """Refuse (one line, exit 2) inputs that are not the N slices of one plan, each once."""
    first = shards[0]
    for shard in shards:
        data = shard.data
        if data["kgate"] != kgate.__version__:
            raise ConfigError(f"{shard.name} was written by kgate {data['kgate']}; this is kgate {kgate.__version__}")
        if data["count"] != first.data["count"]:
            raise ConfigError(f"{shard.name} and {first.name} are slices of different shard counts")
        if data["fingerprint"] != first.data["fingerprint"]:
            raise ConfigError(f"{shard.name} and {first.name} planned over different kernels and files: run every "
                              f"shard on the same commit and configuration")
        if data["assignment"] != first.data["assignment"]:
            raise ConfigError(f"{shard.name} and {first.name} split the kernels differently (their caches held "
                              f"different compile timings): restore the same cache in every shard")
        if data["options"] != first.data["options"]:
            keys = sorted(k for k in data["options"] if data["options"][k] != first.data["options"].get(k))
            raise ConfigError(f"{shard.name} and {first.name} ran with different options ({', '.join(keys)})")
        _check_toolchain(shard, first)
    _check_slices(shards)


def _check_toolchain(shard: Shard, first: Shard) -> None:
    ours, theirs = shard.data["toolchain"], first.data["toolchain"]
    differ = sorted(k for k in set(ours) & set(theirs) if not k.endswith(".id") and ours[k] != theirs[k])
    if differ:
        words = ", ".join(f"{k} {theirs[k]} and {ours[k]}" for k in differ)
        raise ConfigError(f"{shard.name} and {first.name} compiled with different tools ({words})")


def _check_slices(shards: list[Shard]) -> None:
    count = shards[0].data["count"]
    seen: dict[int, Shard] = {}
    for shard in shards:
        index = shard.data["index"]
        if index in seen:
            raise ConfigError(f"shard {index}/{count} is given twice: {seen[index].path} and {shard.path}")
        seen[index] = shard
    missing = [i for i in range(1, count + 1) if i not in seen]
    if missing:
        raise ConfigError(f"shard{'s' if len(missing) > 1 else ''} {', '.join(f'{i}/{count}' for i in missing)} "
                          f"missing: merge needs every slice")
    owner: dict[str, Shard] = {}
    for shard in shards:
        for unit in shard.data["slice"]:
            if unit in owner:
                raise ConfigError(f"{unit} is in two slices: {owner[unit].name} and {shard.name}")
            owner[unit] = shard
    first = shards[0].data
    if len(owner) != first["units"] or fingerprint(owner) != first["fingerprint"]:
        raise ConfigError(f"the slices cover {len(owner)} unit(s), not the {first['units']} the shards planned")
    sources = [s for s in shards if s.source is not None]
    expected = 0 if first["options"]["kernels"] else 1
    if len(sources) != expected:
        raise ConfigError(f"{len(sources)} shard(s) ran the source rules; a whole run needs {expected}")


def seconds(shards: list[Shard]) -> dict[str, float]:
    """Every slice's recorded compile seconds: what the next sharded run balances on."""
    out: dict[str, float] = {}
    for shard in shards:
        out.update({str(k): float(v) for k, v in shard.data["seconds"].items()})
    return out

