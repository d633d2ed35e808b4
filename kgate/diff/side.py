"""One side of a diff: the project's kernels compiled at one revision or under one toolchain.

A side is compiled through the pipeline `kgate check` uses (the same selection, the same cache), but runs
no rule: what a diff needs is each variant's figures and where its cubin is. A side made under another
Triton release comes back from that release's environment as JSON (`to_json`), so both kinds compare alike.
"""

from __future__ import annotations

import time

from kgate.collect.cuda_sources import cuda_sources
from kgate.collect.registry import captured_specs, triton_entries
from kgate.compile.compilation import Progress
from kgate.core.config import Config
from kgate.diff.model import Side
from kgate.evaluate.plan import artifact_plan
from kgate.pipeline.check import CheckOptions, compile_kernels, select_units


def compile_side(config: Config, options: CheckOptions, label: str, progress: Progress | None = None) -> Side:
    """The selected kernels of the project `config` describes, compiled (or read from the cache)."""
    started = time.perf_counter()
    entries, captured = select_units(triton_entries(config), captured_specs(config), options)
    # No rule runs: no SASS is read but what `--sass` asks for; the comparison disassembles the cubins it reads, so
    # a record whose cubin is no longer as it was written is compiled again.
    plan = artifact_plan((), sass_every=options.sass, cubin_every=True)
    compiled, covered = compile_kernels(config, entries, captured, options, plan, progress)
    failures = {(f.kernel, f.variant, f.target): (f.message.splitlines() or [""])[0] for f in compiled.failures}
    unsettled = {source.rel: [source.unsettled_digest, *source.unsettled] for source in cuda_sources(config)
                 if source.unsettled} if config.cuda else {}
    return Side(label, {f.key: f for f in compiled.facts}, failures, dict(compiled.cubins),
                {k: v for k, v in compiled.toolchain.items() if not k.endswith(".id")}, compiled.compiled,
                compiled.cached, time.perf_counter() - started, covered, dict(compiled.unseen), unsettled)
