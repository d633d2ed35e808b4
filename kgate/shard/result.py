"""What a shard writes for `kgate merge` (the `shard` object of its JSON), and reading it back.

A shard's JSON is the usual report of its slice plus a `shard` object that
holds what the merged report needs and the slice alone cannot give: the
findings before suppression comments and the baseline (unused suppressions
and the ratchet are judged over the union), the kernels' full facts, the
compile failures, the toolchain, the options the shard ran with, the
partition it planned, a hash of every input it read (`inputs`), and a digest
of all of that.

`load` trusts nothing it reads: every field is checked for its type and its
range (a count of seconds is a finite number, not below 0; a kernel variant
is in the facts once), then the digest, so that a result cut short, edited
or damaged is refused rather than merged into a report on fewer kernels.
`check_set` refuses inputs that do not make exactly one whole run: another
count, a slice given twice, another unit list, other inputs (another commit
or configuration), another assignment, other options or compilers, a
missing slice, facts outside their slice.
"""

from __future__ import annotations

import hashlib
import json
from dataclasses import dataclass, fields
from typing import Any

import kgate
from kgate.core.errors import ConfigError
from kgate.core.findings import Finding, Related, Severity
from kgate.facts.model import CompileFailure, KernelFacts
from kgate.shard.plan import MAX_SHARDS, fingerprint, valid_seconds
from kgate.shard.run import CheckOptions, CheckRun, SourcePart
from kgate.support import jsondoc
from kgate.support.atomicio import read_input


def record(checked: CheckRun, options: CheckOptions, targets: tuple[str, ...], selection_args: dict[str, Any],
           timings: dict[str, float], inputs: dict[str, str]) -> dict[str, Any]:
    """The `shard` object of a shard's JSON, sealed with its digest."""
    plan = checked.plan
    assert plan is not None
    mine = plan.mine
    atoms = {a for u in mine for a in u.atoms}
    seconds = {k: v for k, v in {**timings, **checked.seconds}.items() if k in atoms}
    compiled = checked.compiled
    part = checked.source
    return seal({
        "index": plan.spec.index,
        "count": plan.spec.count,
        "kgate": kgate.__version__,
        "units": len(plan.units),
        "fingerprint": plan.fingerprint,
        "inputs": dict(sorted(inputs.items())),
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
    })


def seal(data: dict[str, Any]) -> dict[str, Any]:
    """The shard object with its `digest`: a hash of everything else in it, as JSON writes it."""
    return {**data, "digest": _digest(data)}


def _digest(data: dict[str, Any]) -> str:
    body = {k: v for k, v in data.items() if k != "digest"}
    blob = json.dumps(body, sort_keys=True, separators=(",", ":"), ensure_ascii=True)
    return hashlib.sha256(blob.encode()).hexdigest()


REQUIRED = frozenset({"index", "count", "kgate", "units", "fingerprint", "inputs", "assignment", "slice", "seconds",
                      "options", "toolchain", "facts", "failures", "compiled_findings", "source", "covered",
                      "compiled", "cached", "digest"})
OPTIONS = frozenset({"targets", "kernels", "fail_on", "sass", "select", "extend_select", "ignore"})
# The most a shard result may hold: a JSON of every kernel's full facts, far below what a runner's memory takes.
SHARD_LIMIT = 256 << 20


class Malformed(ValueError):
    """What is wrong with a shard result, in a few words."""


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
    """A shard result, read and checked field by field (ConfigError, one line, on anything not as kgate wrote it)."""
    try:
        doc = jsondoc.loads(read_input(path, SHARD_LIMIT))
    except OSError as exc:
        raise ConfigError(f"{path}: cannot read: {exc.strerror or exc}") from None
    except jsondoc.NotJSON as exc:
        raise ConfigError(f"{path}: {exc}") from None
    data = doc.get("shard") if isinstance(doc, dict) else None
    if not isinstance(data, dict) or doc.get("command") != "check":
        raise ConfigError(f"{path}: not a shard result (write one with `kgate check --shard I/N --format json -o "
                          f"FILE`)")
    lacking = sorted(REQUIRED - set(data))
    if lacking:
        raise ConfigError(f"{path}: malformed shard result (no {', '.join(lacking)})")
    try:
        shard = _read(path, data)
    except Malformed as exc:
        raise ConfigError(f"{path}: malformed shard result ({exc})") from None
    if data["digest"] != _digest(data):
        raise ConfigError(f"{path}: changed after kgate wrote it (its content does not match its digest): run "
                          f"`kgate check --shard {data['index']}/{data['count']}` again")
    return shard


# --------------------------------------------------------------------------- checking one shard's fields


def _read(path: str, data: dict[str, Any]) -> Shard:
    wrong = sorted(k for k, ok in _SHAPES.items() if not ok(data[k]))
    if wrong:
        raise Malformed(f"{', '.join(wrong)} of the wrong type")
    count, index = data["count"], data["index"]
    if not 1 <= count <= MAX_SHARDS:
        raise Malformed(f"count {count} is not between 1 and {MAX_SHARDS}")
    if not 1 <= index <= count:
        raise Malformed(f"index {index} is not a slice of {count}")
    if len(set(data["slice"])) != len(data["slice"]):
        raise Malformed("a unit is in its slice twice")
    for key, value in data["seconds"].items():
        if not valid_seconds(value):
            raise Malformed(f"seconds of {key} is {json.dumps(value)}, not a number of seconds")
    _check_options(data["options"])
    facts = [_fact(i, item) for i, item in enumerate(data["facts"])]
    failures = [_failure(f"failures[{i}]", item) for i, item in enumerate(data["failures"])]
    raw = [_finding(f"compiled_findings[{i}]", item) for i, item in enumerate(data["compiled_findings"])]
    _unique("facts", [f.key for f in facts])
    _unique("failures", [(f.kernel, f.variant, f.target, f.kind) for f in failures])
    return Shard(path, data, facts, failures, raw, _source(data["source"]))


def _is_int(value: Any) -> bool:
    return isinstance(value, int) and not isinstance(value, bool)


def _texts(value: Any) -> bool:
    return isinstance(value, list) and all(isinstance(v, str) for v in value)


def _text_map(value: Any) -> bool:
    return isinstance(value, dict) and all(isinstance(v, str) for v in value.values())


_SHAPES = {
    "index": _is_int, "count": _is_int, "kgate": lambda v: isinstance(v, str),
    "units": lambda v: _is_int(v) and v >= 0, "fingerprint": lambda v: isinstance(v, str),
    "inputs": _text_map, "assignment": lambda v: isinstance(v, str), "slice": _texts,
    "seconds": lambda v: isinstance(v, dict), "options": lambda v: isinstance(v, dict), "toolchain": _text_map,
    "facts": lambda v: isinstance(v, list), "failures": lambda v: isinstance(v, list),
    "compiled_findings": lambda v: isinstance(v, list), "source": lambda v: v is None or isinstance(v, dict),
    "covered": _texts, "compiled": lambda v: _is_int(v) and v >= 0, "cached": lambda v: _is_int(v) and v >= 0,
    "digest": lambda v: isinstance(v, str),
}


def _check_options(options: dict[str, Any]) -> None:
    if set(options) != OPTIONS:
        raise Malformed(f"options must be {', '.join(sorted(OPTIONS))}")
    if not (_texts(options["targets"]) and _texts(options["kernels"]) and isinstance(options["sass"], bool)
            and options["fail_on"] in {s.value for s in Severity}
            and all(options[k] is None or isinstance(options[k], str) for k in ("select", "extend_select", "ignore"))):
        raise Malformed("options of the wrong type")


def _fact(index: int, item: Any) -> KernelFacts:
    try:
        facts = KernelFacts.from_record(item)
    except (KeyError, TypeError, ValueError, AttributeError) as exc:
        raise Malformed(f"facts[{index}]: {_why(exc)}") from None
    if not valid_seconds(facts.compile_seconds):
        raise Malformed(f"facts[{index}]: compile_seconds is {json.dumps(facts.compile_seconds)}, not a number of "
                        f"seconds")
    return facts


def _finding(where: str, item: Any) -> Finding:
    if not isinstance(item, dict) or item.get("severity") not in {s.value for s in Severity}:
        raise Malformed(f"{where}: not a finding")
    folded = item.get("folded", [])
    if not isinstance(folded, list) or not all(isinstance(code, str) for code in folded):
        raise Malformed(f"{where}: folded of the wrong type")
    return _record(Finding, where, {**item, "severity": Severity(item["severity"]), "related": _related(where, item),
                                    "folded": tuple(folded)})


def _failure(where: str, item: Any) -> CompileFailure:
    if not isinstance(item, dict):
        raise Malformed(f"{where}: not a JSON object")
    return _record(CompileFailure, where, {**item, "related": _related(where, item)})


def _related(where: str, item: dict[str, Any]) -> tuple[Related, ...]:
    related = item.get("related", [])
    if not isinstance(related, list):
        raise Malformed(f"{where}: related of the wrong type")
    places = []
    for n, place in enumerate(related):
        try:
            places.append(Related.from_record(place))
        except ValueError:
            raise Malformed(f"{where}: related[{n}] is not a related place") from None
    return tuple(places)


# The field types of the records a shard holds, as their dataclasses declare them.
_TYPES: dict[str, Any] = {"str": str, "int": int, "str | None": (str, type(None)), "int | None": (int, type(None)),
                          "Severity": Severity, "tuple[Related, ...]": tuple, "tuple[str, ...]": tuple}


def _record(kind: Any, where: str, item: Any) -> Any:
    """A Finding or CompileFailure from JSON, every field of its declared type."""
    if not isinstance(item, dict):
        raise Malformed(f"{where}: not a JSON object")
    declared = {f.name: str(f.type) for f in fields(kind)}  # the annotations are strings (postponed)
    unknown = sorted(set(item) - set(declared))
    if unknown:
        raise Malformed(f"{where}: unknown field {unknown[0]!r}")
    for name, value in item.items():
        if isinstance(value, bool) or not isinstance(value, _TYPES[declared[name]]):
            raise Malformed(f"{where}: {name} of the wrong type")
    try:
        return kind(**item)
    except TypeError as exc:  # a field missing
        raise Malformed(f"{where}: {_why(exc)}") from None


def _source(part: dict[str, Any] | None) -> SourcePart | None:
    if part is None:
        return None
    if set(part) != {"findings", "suppressed", "files"} or not isinstance(part["findings"], list) or not all(
            _is_int(part[k]) and part[k] >= 0 for k in ("suppressed", "files")):
        raise Malformed("source of the wrong type")
    return SourcePart([_finding(f"source.findings[{i}]", f) for i, f in enumerate(part["findings"])],
                      part["suppressed"], part["files"])


def _unique(what: str, keys: list[Any]) -> None:
    seen = set()
    for key in keys:
        if key in seen:
            raise Malformed(f"{what} hold {'|'.join(k for k in key if k)} twice")
        seen.add(key)


def _why(exc: BaseException) -> str:
    text = str(exc).strip("'\"")
    return f"no {text}" if isinstance(exc, KeyError) else text or type(exc).__name__


# --------------------------------------------------------------------------- checking the set


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
        differ = input_difference(first.data["inputs"], data["inputs"])
        if differ:
            raise ConfigError(f"{shard.name} and {first.name} read different inputs ({differ}): run every shard on "
                              f"the same commit and configuration")
        if data["assignment"] != first.data["assignment"]:
            raise ConfigError(f"{shard.name} and {first.name} split the kernels differently (their caches held "
                              f"different compile timings): restore the same cache in every shard")
        if data["options"] != first.data["options"]:
            keys = sorted(k for k in data["options"] if data["options"][k] != first.data["options"].get(k))
            raise ConfigError(f"{shard.name} and {first.name} ran with different options ({', '.join(keys)})")
        _check_toolchain(shard, first)
    _check_slices(shards)
    _check_facts(shards)


def input_difference(ours: dict[str, str], theirs: dict[str, str]) -> str | None:
    """The first input two runs read differently, in words ("k.py differs"); None where they read the same."""
    for key in sorted(set(ours) | set(theirs)):
        if ours.get(key) != theirs.get(key):
            kind, _sep, name = key.partition(":")
            what = {"config": "the configuration", "capture": "the capture file"}.get(kind, name or key)
            return f"{what} differs" if key in ours and key in theirs else f"{what} is in one of them only"
    return None


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
    missing = [i for i in range(1, count + 1) if i not in seen]  # count is at most MAX_SHARDS
    if missing:
        shown = ", ".join(f"{i}/{count}" for i in missing[:10]) + (f" and {len(missing) - 10} more"
                                                                    if len(missing) > 10 else "")
        raise ConfigError(f"shard{'s' if len(missing) > 1 else ''} {shown} missing: merge needs every slice")
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


def _check_facts(shards: list[Shard]) -> None:
    """Each kernel variant's facts (or failure) come from the shard whose slice holds its kernel or file (the
    slices are disjoint and a shard holds a variant once: no variant is counted twice)."""
    for shard in shards:
        kernels = {u.split(":", 1)[1] for u in shard.data["slice"] if u.startswith("triton:")}
        files = {f for u in shard.data["slice"] if u.startswith("cuda:") for f in u.split(":", 1)[1].split("+")}
        # A CUDA kernel's variant is its file (its definition may be in a header).
        records: list[tuple[tuple[str, ...], str]] = [(f.key, f.kernel if f.language == "triton" else f.variant) for f in shard.facts]
        records += [((f.kernel, f.variant, f.target, f.kind), f.kernel if f.kernel in kernels else f.path)
                    for f in shard.failures]
        for key, unit in records:
            if unit not in kernels and unit not in files:
                name = "|".join(k for k in key if k)
                raise ConfigError(f"{shard.name} holds the facts of {name}, which is not in its slice")


def seconds(shards: list[Shard]) -> dict[str, float]:
    """Every slice's recorded compile seconds (each checked by `load`): what the next sharded run balances on."""
    out: dict[str, float] = {}
    for shard in shards:
        out.update({str(k): float(v) for k, v in shard.data["seconds"].items()})
    return out
