"""`kgate capture --verify`: kgate's offline compile of each captured specialisation next to the live kernel.

On a GPU, the recorder reads what the driver reports of every kernel the project loaded: for a Triton
specialisation, at the JIT's compile, registers (`n_regs`), the dynamic shared memory Triton allocates
(`metadata.shared`) and local memory per thread (`CU_FUNC_ATTRIBUTE_LOCAL_SIZE_BYTES`, the stack frame
ptxas reserved, where spills go); for a `cute.compile` call, once the DSL returned, the same of each kernel
of the library it loaded (`kgate.capture.cute_live`: the shared memory is the kernel's static and what its
launch asks for). Here each of those specialisations and calls is compiled offline for the device's own
architecture, as `kgate check` compiles it, and the figures are compared one by one: equal figures prove
that the gate's numbers are the running kernel's. A kernel the GPU could not load is never "equal".
"""

from __future__ import annotations

import sys
from collections.abc import Callable
from dataclasses import replace
from typing import Any

from kgate.capture.session import Recorded, live_key
from kgate.compile.compilation import default_jobs
from kgate.core.config import KNOWN_TARGETS, Config
from kgate.facts.model import KernelFacts
from kgate.report.escape import terminal
from kgate.report.table import aligned


def _target(arch: int) -> str | None:
    name = f"sm_{arch}a"
    return name if name in KNOWN_TARGETS else None


def comparisons(facts: KernelFacts, live: dict[str, Any]) -> list[tuple[str, int, int]]:
    """(figure, kgate's, the driver's) for every figure both sides have."""
    res = facts.resources
    out = []
    if "shared" in live:
        out.append(("shared", res.smem_bytes, int(live["shared"])))
    if "n_regs" in live:
        out.append(("registers", res.registers, int(live["n_regs"])))
    if "local" in live:
        out.append(("local", res.stack_bytes, int(live["local"])))
    return out


def _pair(pairs: dict[str, tuple[int, int]], name: str) -> tuple[str, str]:
    if name not in pairs:
        return "-", "-"
    return f"{pairs[name][0]:,}", f"{pairs[name][1]:,}"


# Compiles captured specialisations for one target into facts, as `kgate check` does (`kgate.facts.run`):
# (config, captured entries, target, jobs) -> a run with `facts` and `failures`.
CompileFacts = Callable[[Config, list[Any], str, int], Any]


def live_of(recorded: Recorded, facts: KernelFacts) -> dict[str, Any]:
    """What the driver reported of the kernel a row gates: a Triton specialisation's kernel, or the kernel of a
    `cute.compile` call's library with the row's PTX entry's symbol (`error` where there is none to compare with)."""
    if facts.language != "cute":
        return recorded.live[live_key(facts.kernel, facts.variant)]
    call = recorded.live[live_key(facts.kernel.split("/", 1)[0], facts.variant)]  # `pkg.mod:fn/kernel`: its call's
    kernels = call.get("kernels", {})
    if "error" in call:
        return call
    if facts.entry.name not in kernels:
        return {"arch": call["arch"], "error": f"the library the GPU loaded has no kernel {facts.entry.name} "
                                               f"(it has {', '.join(sorted(kernels)) or 'none'})"}
    return {"arch": call["arch"], **kernels[facts.entry.name]}


def _by_target(recorded: Recorded) -> tuple[dict[str, list[Any]], list[str], int]:
    """The captured specialisations and `cute.compile` calls the driver reported on, by the target of its GPU; a line
    for each it reported nothing of (a kernel it could not load, a call whose figures could not be read); and how many
    ran on a GPU of no target kgate gates."""
    live: list[tuple[Any, str, str]] = [(entry, entry.spec.kernel, entry.spec.variant)
                                        for entry in recorded.file.entries]
    for entry in recorded.file.cute:
        live += [(replace(entry, args=(call.args,)), call.kernel, call.variant) for call in entry.calls()]
    by_target: dict[str, list[Any]] = {}
    unloaded: list[str] = []
    skipped = 0
    for entry, kernel, variant in live:
        figures = recorded.live.get(live_key(kernel, variant))
        if figures is None or "arch" not in figures:
            why = figures["error"] if figures else "the GPU reported nothing of it"
            unloaded.append(f"kgate: {kernel} {variant}: not loaded on the GPU: {why}")
        elif (target := _target(int(figures["arch"]))) is None:
            skipped += 1
        else:
            by_target.setdefault(target, []).append(entry)
    return by_target, unloaded, skipped


def verify(config: Config, recorded: Recorded, *, jobs: int | None, compile_facts: CompileFacts) -> bool:
    """Print the comparison table and a summary line; True when any figure differs or cannot be compared."""
    by_target, unloaded, skipped = _by_target(recorded)
    rows = [("kernel", "variant", "target", "regs", "live", "smem", "live", "local", "live", "verdict")]
    counts = {"equal": 0, "different": 0, "failed": 0, "unloaded": len(unloaded)}
    for line in unloaded:
        print(terminal(line), file=sys.stderr)
    for target, entries in sorted(by_target.items()):
        run = compile_facts(config, entries, target, jobs or default_jobs())
        for failure in run.failures:
            counts["failed"] += 1
            print(terminal(f"kgate: {failure.kernel} {failure.variant}: not compiled offline: {failure.message}"),
                  file=sys.stderr)
        for facts in run.facts:
            live = live_of(recorded, facts)
            pairs = {name: (ours, theirs) for name, ours, theirs in comparisons(facts, live)}
            differs = [name for name, (ours, theirs) in pairs.items() if ours != theirs]
            if "error" in live:  # nothing the GPU ran to compare with: never "equal"
                verdict = f"not loaded: {live['error']}"[:80]
                counts["unloaded"] += 1
            else:
                verdict = "DIFFERENT: " + ", ".join(differs) if differs else "equal"
                counts["different" if differs else "equal"] += 1
            rows.append((facts.kernel, facts.variant, target, *_pair(pairs, "registers"), *_pair(pairs, "shared"),
                         *_pair(pairs, "local"), verdict))
    for line in aligned(rows, {3, 4, 5, 6, 7, 8}):
        print(line)
    print(summary(counts, skipped))
    return bool(counts["different"] or counts["failed"] or counts["unloaded"])


def summary(counts: dict[str, int], skipped: int) -> str:
    total = sum(counts.values())
    extra = f", {counts['unloaded']} not loaded on the GPU" if counts["unloaded"] else ""
    extra += f", {skipped} on a GPU architecture kgate does not target" if skipped else ""
    return (f"\nkgate capture --verify: {total} specialisation(s): {counts['equal']} equal to the live kernel, "
            f"{counts['different']} different, {counts['failed']} not compiled offline{extra}")
