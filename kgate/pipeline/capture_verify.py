"""`kgate capture --verify`: kgate's offline compile of each captured specialisation next to the live kernel.

On a GPU, the recorder reads, at the command's exit, what the driver reports of every kernel the
JIT loaded: registers (`n_regs`), the dynamic shared memory Triton allocates
(`metadata.shared`) and local memory per thread (`CU_FUNC_ATTRIBUTE_LOCAL_SIZE_BYTES`, the
stack frame ptxas reserved, where spills go). Here each of those specialisations is compiled
offline for the device's own architecture, as `kgate check` compiles it, and the figures are
compared one by one: equal figures prove that the gate's numbers are the running kernel's.
"""

from __future__ import annotations

import sys
from collections.abc import Callable
from typing import Any

from kgate.capture.session import Recorded
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
    out = [("shared", res.smem_bytes, int(live["shared"]))]
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


def verify(config: Config, recorded: Recorded, *, jobs: int | None, compile_facts: CompileFacts) -> bool:
    """Print the comparison table and a summary line; True when any figure differs or cannot be compared."""
    by_target: dict[str, list[Any]] = {}
    skipped = 0
    for entry in recorded.file.entries:
        live = recorded.live.get(f"{entry.spec.kernel}|{entry.spec.variant}")
        target = _target(int(live.get("arch", 0))) if live else None
        if target is None:
            skipped += 1
            continue
        by_target.setdefault(target, []).append(entry)
    rows = [("kernel", "variant", "target", "regs", "live", "smem", "live", "local", "live", "verdict")]
    equal = different = failed = 0
    for target, entries in sorted(by_target.items()):
        run = compile_facts(config, entries, target, jobs or default_jobs())
        for failure in run.failures:
            failed += 1
            print(terminal(f"kgate: {failure.kernel} {failure.variant}: not compiled offline: {failure.message}"),
                  file=sys.stderr)
        for facts in run.facts:
            live = recorded.live[f"{facts.kernel}|{facts.variant}"]
            pairs = {name: (ours, theirs) for name, ours, theirs in comparisons(facts, live)}
            differs = [name for name, (ours, theirs) in pairs.items() if ours != theirs]
            if "error" in live:
                verdict = f"not loadable: {live['error']}"[:80]
            else:
                verdict = "DIFFERENT: " + ", ".join(differs) if differs else "equal"
            if differs:
                different += 1
            else:
                equal += 1

            rows.append((facts.kernel, facts.variant, target, *_pair(pairs, "registers"), *_pair(pairs, "shared"),
                         *_pair(pairs, "local"), verdict))
    for line in aligned(rows, {3, 4, 5, 6, 7, 8}):
        print(line)
    total = equal + different + failed
    extra = f", {skipped} on a GPU architecture kgate does not target" if skipped else ""
    print(f"\nkgate capture --verify: {total} specialisation(s): {equal} equal to the live kernel, {different} "
          f"different, {failed} not compiled offline{extra}")
    return bool(different or failed)
