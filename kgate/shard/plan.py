"""Sharding `kgate check` over CI runners: units of work, a balanced deterministic partition, timings.

A unit is what one shard gates whole: a registered Triton kernel (all its
variants and targets) or a CUDA source file (all its kernels and targets).
CUDA files are joined into one unit where a PDL launch site names a template
kernel with explicit arguments (`k<__half, 128>`) and several files define
`k`: whether such a site selects one instantiation depends on the
instantiations of `k` in every file (`pdl_launched`), so those files must
be compiled together.

Units are ordered by identity and assigned longest first to the least loaded
shard (ties: the lower shard), weighted by the compile seconds the last runs
recorded in the timings file; a unit without a recorded time weighs the
median of the known ones (1 when none is known). The same units and timings
give the same slices on every runner; fingerprints of the unit list and of
the assignment let `kgate merge` prove that its inputs agree.
"""

from __future__ import annotations

import hashlib
import heapq
import json
import math
import re
import statistics
from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path

from kgate.collect.files import python_files, relpath
from kgate.compile.cache import digest
from kgate.core.config import Config
from kgate.core.errors import ConfigError
from kgate.facts.model import KernelFacts
from kgate.support import jsondoc
from kgate.support.atomicio import read_cached, read_input, write_cached

TIMINGS_FILE = "shard-timings.json"
# More runners than this for one gate is a typing mistake, not a CI matrix (GitHub Actions runs at most 256 jobs
# of a matrix); the bound also keeps every check of a shard result that counts slices cheap.
MAX_SHARDS = 1000
_SPEC = re.compile(r"(\d+)/(\d+)")


@dataclass(frozen=True)
class ShardSpec:
    index: int  # 1-based
    count: int

    def __str__(self) -> str:
        return f"{self.index}/{self.count}"


def parse_shard(text: str) -> ShardSpec:
    """`I/N` with 1 <= I <= N <= MAX_SHARDS; anything else is a usage error (one line, exit 2)."""
    match = _SPEC.fullmatch(text.strip())
    if match is None:
        raise ConfigError(f"--shard {text}: expected I/N, the 1-based slice I of N shards (e.g. --shard 2/4)")
    # Past 9 digits a number is over every bound: not converted (Python refuses int() of 4300 digits).
    index, count = (int(g) if len(g) <= 9 else 10**9 for g in match.groups())
    if count < 1:
        raise ConfigError(f"--shard {text}: N must be at least 1")
    if count > MAX_SHARDS:
        raise ConfigError(f"--shard {text}: N must be at most {MAX_SHARDS} (one shard per CI runner)")
    if not 1 <= index <= count:
        raise ConfigError(f"--shard {text}: I must be between 1 and N (slices are numbered 1 to N)")
    return ShardSpec(index, count)


@dataclass(frozen=True)
class Unit:
    """One Triton kernel (`kernels`), or CUDA source files compiled together (`files`)."""

    id: str  # "triton:<kernel>" or "cuda:<path>[+<path>...]"
    kernels: tuple[str, ...] = ()
    files: tuple[str, ...] = ()

    @property
    def atoms(self) -> tuple[str, ...]:
        """The timings file's keys this unit's weight sums: one per kernel or file."""
        return tuple(f"triton:{k}" for k in self.kernels) + tuple(f"cuda:{f}" for f in self.files)


def units(config: Config, kernels: Iterable[str]) -> list[Unit]:
    """Every unit of the project (its Triton kernels, registered or captured, and CUDA files), sorted."""
    out = [Unit(f"triton:{kernel}", kernels=(kernel,)) for kernel in sorted(set(kernels))]
    out += [Unit("cuda:" + "+".join(group), files=group) for group in cuda_groups(config)]
    return sorted(out, key=lambda u: u.id)


def cuda_groups(config: Config) -> list[tuple[str, ...]]:
    """CUDA source paths, one group per file, except files joined by a templated launch site (PDL or dynamic shared
    memory: such a site applies to the one instantiation it names only where that instantiation is compiled in
    the same shard)."""
    if not config.cuda:
        return []
    from kgate.collect.cuda_sources import cuda_sources, defined_kernels
    from kgate.compile.cuda_engine import launch_sites

    sources = cuda_sources(config)
    pdl, smem = launch_sites(config, sources)
    templated = {site.kernel for site in pdl if site.template is not None} | {
        site.kernel for site in smem if site.template is not None}
    parent = {s.rel: s.rel for s in sources}

    def find(rel: str) -> str:
        while parent[rel] != rel:
            parent[rel] = parent[parent[rel]]
            rel = parent[rel]
        return rel

    if templated:
        owner: dict[str, str] = {}  # kernel identifier -> the first file that can instantiate it
        for source in sources:
            for name in sorted(defined_kernels(source) & templated):
                first = owner.setdefault(name, source.rel)
                a, b = sorted((find(first), find(source.rel)))
                parent[b] = a
    groups: dict[str, list[str]] = {}
    for rel in sorted(parent):
        groups.setdefault(find(rel), []).append(rel)
    return [tuple(members) for _root, members in sorted(groups.items())]


@dataclass(frozen=True)
class Plan:
    """The partition of every unit over `spec.count` shards, and this shard's slice."""

    spec: ShardSpec
    units: tuple[Unit, ...]
    assignment: dict[str, int]  # unit id -> 1-based shard

    @property
    def mine(self) -> list[Unit]:
        return [u for u in self.units if self.assignment[u.id] == self.spec.index]

    @property
    def kernels(self) -> frozenset[str]:
        return frozenset(k for u in self.mine for k in u.kernels)

    @property
    def files(self) -> frozenset[str]:
        return frozenset(f for u in self.mine for f in u.files)

    @property
    def names(self) -> frozenset[str]:
        """What the ratchet's scope matches a slice by: Triton kernel names and CUDA paths."""
        return self.kernels | self.files

    @property
    def runs_source(self) -> bool:
        """The source rules read files, not compilers: cheap, so one shard (the first) runs them all."""
        return self.spec.index == 1

    @property
    def fingerprint(self) -> str:
        return fingerprint(u.id for u in self.units)

    @property
    def assignment_fingerprint(self) -> str:
        return digest("assignment", self.spec.count, sorted(self.assignment.items()))


def fingerprint(ids: Iterable[str]) -> str:
    """A hash of the unit list (a CUDA unit's id names all its files): equal where the same units are seen."""
    return digest("units", sorted(ids))


def weights(items: Iterable[Unit], seconds: dict[str, float]) -> dict[str, float]:
    """Each unit's weight: its recorded seconds, else the median of the recorded units, else 1."""
    items = list(items)
    known = {u.id: sum(seconds[a] for a in u.atoms if a in seconds) for u in items
             if any(a in seconds for a in u.atoms)}
    default = statistics.median(known.values()) if known else 1.0
    return {u.id: known.get(u.id, default) for u in items}


def assign(items: Iterable[Unit], count: int, seconds: dict[str, float]) -> dict[str, int]:
    """Longest first to the least loaded shard; equal weights by identity, equal loads to the lower shard.

    Only shards that hold a unit are kept (in a heap): the cost is that of the units, whatever the count. An
    untouched shard has load 0 and a higher number than every used one, so it is taken only where no used shard
    is at 0 (weights are never negative)."""
    items = sorted(items, key=lambda u: u.id)
    weight = weights(items, seconds)
    used: list[tuple[float, int]] = []  # (load, 1-based shard) of the shards that hold a unit
    fresh = 1  # the lowest shard that holds none
    out: dict[str, int] = {}
    for unit in sorted(items, key=lambda u: (-weight[u.id], u.id)):
        if used and (fresh > count or used[0] <= (0.0, fresh)):
            load, shard = heapq.heappop(used)
        else:
            load, shard = 0.0, fresh
            fresh += 1
        out[unit.id] = shard
        heapq.heappush(used, (load + weight[unit.id], shard))
    return out


def plan(config: Config, kernels: Iterable[str], spec: ShardSpec, *, use_timings: bool = True) -> Plan:
    everything = tuple(units(config, kernels))
    seconds = load_timings(config) if use_timings else {}
    return Plan(spec, everything, assign(everything, spec.count, seconds))


def inputs(config: Config) -> dict[str, str]:
    """A hash of each input the gate's verdict depends on in the project, by name: the configuration file, the
    capture file, every Python file (kernels import helpers from anywhere in the project) and every CUDA source
    with the project headers it includes. Shards that ran on another commit or configuration differ here even
    where their units are the same. Compile commands are left out: a build writes its own absolute paths there.
    """
    out: dict[str, str] = {}
    if config.source is not None:
        out["config"] = _file_hash(config.source)
    capture = config.root / config.capture
    if capture.exists():
        out["capture"] = _file_hash(capture)
    skip = config.exclude + config.extend_exclude + (config.cache_dir,)
    for path in python_files(config.root, skip):
        out[f"python:{relpath(path, config.root)}"] = _file_hash(path)
    if config.cuda:
        from kgate.collect.cuda_sources import cuda_sources

        for source in cuda_sources(config):
            out[f"cuda:{source.rel}"] = source.key
    return out


def _file_hash(path: Path) -> str:
    try:
        return hashlib.sha256(read_input(path)).hexdigest()
    except OSError as exc:
        return f"unreadable: {exc.strerror}"


# --------------------------------------------------------------------------- timings


def timings_path(config: Config) -> Path:
    return config.root / config.cache_dir / TIMINGS_FILE


def load_timings(config: Config) -> dict[str, float]:
    """Recorded compile seconds per Triton kernel and CUDA file; {} when missing or unreadable."""
    try:
        data = jsondoc.loads(read_cached(timings_path(config)) or b"null")  # in the cache: kgate's own file
        seconds = data["seconds"]
        return {str(k): float(v) for k, v in seconds.items() if valid_seconds(v)}
    except (OSError, ValueError, KeyError, TypeError, AttributeError):  # NotJSON is a ValueError
        return {}


def valid_seconds(value: object) -> bool:
    """A compile time as a number that can be one: finite and not negative (JSON lets NaN and -1e308 through)."""
    return isinstance(value, (int, float)) and not isinstance(value, bool) and math.isfinite(value) and value >= 0


def run_seconds(facts: Iterable[KernelFacts], compile_seconds: dict[str, float]) -> dict[str, float]:
    """Seconds per timings key from one run.

    A Triton kernel's are in its facts (the cache keeps each variant's compile
    time, so a warm run knows them too); a CUDA file's only when it was
    compiled in this run (`compile_seconds`, keyed "path|target").
    """
    out: dict[str, float] = {}
    for f in facts:
        if f.language == "triton":
            out[f"triton:{f.kernel}"] = out.get(f"triton:{f.kernel}", 0.0) + f.compile_seconds
    for key, value in compile_seconds.items():
        head, _sep, _target = key.rpartition("|")
        if head.count("|") == 0:  # a CUDA file's key; a Triton variant's is "kernel|variant|target"
            out[f"cuda:{head}"] = out.get(f"cuda:{head}", 0.0) + value
    return {k: round(v, 3) for k, v in out.items()}


def record_timings(config: Config, seconds: dict[str, float], registered: set[str]) -> None:
    """Fold one run's seconds into the timings file (atomically); forget kernels and files that are gone."""
    if not seconds:
        return
    before = load_timings(config)
    merged = {**before, **seconds}
    kept = {k: v for k, v in merged.items() if k in seconds or _still_there(config, k, registered)}
    if kept == before:
        return  # a warm run: nothing new to say, nothing to write
    data = json.dumps({"version": 1, "seconds": dict(sorted(kept.items()))}, indent=1, sort_keys=True) + "\n"
    try:
        write_cached(timings_path(config), data.encode())
    except OSError:
        pass  # like the cache: an unwritable timings file costs balance, not correctness


def _still_there(config: Config, key: str, registered: set[str]) -> bool:
    kind, _sep, name = key.partition(":")
    if kind == "triton":
        return name in registered
    return kind == "cuda" and (config.root / name).is_file()
