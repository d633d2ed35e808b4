"""`kgate merge`: the JSON results of `kgate check --shard I/N`, combined into the report of one whole run.

Merge reloads the project's configuration and baseline, proves that its
inputs are the N slices of one plan over the same sources and configuration
(and that the project here has the same units and inputs), then judges the union exactly as an unsharded `kgate check` would:
suppression comments (unused ones included), the source rules' findings of
the shard that ran them, and the ratchet over the full scope. The output, in
any format, and the exit code are those of the unsharded run.
"""

from __future__ import annotations

import argparse

from kgate.collect.registry import captured_specs, triton_entries, triton_kernels
from kgate.commands.common import config_from, emit, split_codes
from kgate.core.errors import ConfigError
from kgate.core.findings import Severity, sort_findings
from kgate.core.selection import build_selection
from kgate.facts.run import CompileRun
from kgate.pipeline.check import CheckOptions, assemble, gate
from kgate.shard.plan import fingerprint, inputs, record_timings, units
from kgate.shard.result import Shard, check_set, input_difference, load, seconds


def run(args: argparse.Namespace) -> int:
    shards = sorted((load(path) for path in args.inputs), key=lambda s: (s.data["index"], s.path))
    check_set(shards)
    config = config_from(args)
    kernels = triton_kernels(triton_entries(config), captured_specs(config))
    first = shards[0].data
    here = units(config, kernels)
    if fingerprint(u.id for u in here) != first["fingerprint"]:
        raise ConfigError(f"the project here ({config.display()}: {len(here)} unit(s)) has other kernels or files "
                          f"than the shards planned over ({first['units']}): merge on the shards' commit")
    # Merge reads the configuration, the baseline and suppression comments here: the sources must be the shards'.
    differ = input_difference(first["inputs"], inputs(config))
    if differ:
        raise ConfigError(f"the project here ({config.display()}) is not the one the shards gated ({differ}): merge "
                          f"on the shards' commit and configuration")
    chosen = first["options"]
    selection = build_selection(config, select=split_codes(chosen["select"]),
                                extend_select=split_codes(chosen["extend_select"]),
                                ignore=split_codes(chosen["ignore"]))
    options = CheckOptions(targets=tuple(chosen["targets"]), kernels=tuple(chosen["kernels"]), sass=chosen["sass"],
                           fail_on=Severity(args.fail_on or chosen["fail_on"]))
    compiled = union(shards)
    parts = [s.source for s in shards if s.source is not None]
    checked = assemble(config, selection, options, compiled, sort_findings([f for s in shards for f in s.raw]),
                       parts[0] if parts else None, covered=frozenset(k for s in shards for k in s.data["covered"]),
                       shard_names=None)
    result = gate(checked, options, config, baseline=not args.no_baseline)
    if not args.no_cache:
        record_timings(config, seconds(shards), set(kernels))
    return emit(result, args, config)


def union(shards: list[Shard]) -> CompileRun:
    """The shards' compile results as one run, sorted as a whole run's are."""
    toolchain: dict[str, str] = {}
    for shard in shards:
        toolchain.update(shard.data["toolchain"])
    return CompileRun(
        facts=sorted((f for s in shards for f in s.facts), key=lambda f: f.key),
        failures=sorted((f for s in shards for f in s.failures), key=lambda f: (f.kernel, f.variant, f.target)),
        compiled=sum(int(s.data["compiled"]) for s in shards),
        cached=sum(int(s.data["cached"]) for s in shards),
        toolchain=dict(sorted(toolchain.items())),
    )


