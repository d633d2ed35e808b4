"""The dynamic shared memory a launch sizes by what only the compiler knows (`sizeof(typename K::SharedStorage)`),
evaluated by the compiler: one more compile of the kernel's file, the probe, for the files whose kernels need it.

The probe is the file's own translation unit, included whole, with the same flags and target, followed by a
definition per size asked (`kgate.collect.smem_expressions.InstanceSize`): in the namespaces of the site that
gives the size, a constant initialised with the size and a constant pointer to the kernel as the site spells it;
then an explicit instantiation of a kernel template of kgate's whose template arguments are the two. Its PTX
entry's mangled name holds both: the number, and the compiled kernel's own mangled name, which must be the
kernel asked about (else the spelling named another instantiation, and the number is not taken). nvcc stops at
PTX (`-ptx`: no ptxas). A definition the compiler rejects (a size that is no constant expression, a name that does
not resolve there) is taken out and the rest compiled again; its size stays unknown.

A probe is cached like a compile (`cuda-probe` records): keyed by the file's compile key and the definitions
asked, with the files its compile read beside it, and used only while each of them has that content.
"""

from __future__ import annotations

import re
from dataclasses import asdict, dataclass, field
from pathlib import Path

from kgate.collect.smem_expressions import InstanceSize
from kgate.compile import records as record_shapes
from kgate.compile.cache import Cache, CacheWriteError, digest
from kgate.compile.compilation import worker_env
from kgate.compile.cuda_engine import FilesRead
from kgate.compile.payloads import ProbeReply, ProbeRequest
from kgate.compile.pool import Pool
from kgate.compile.protocol import Outcome, Task
from kgate.compile.units import Compiled
from kgate.core.config import Config

PROBE_FORMAT = 1
# The kernel template whose instantiations carry the answers: `kgate_smem_probe<index, bytes, &kernel>`.
_TEMPLATE = "kgate_smem_probe"
_ENTRY = re.compile(r"\.entry\s+(_Z\d+" + _TEMPLATE + r"ILi(\d+)ELy(\d+)E\S*?)\s*\(")
_ATTEMPTS = 3  # compiles of one probe: each takes out the definitions the last one rejected


@dataclass(frozen=True)
class ProbeRun:
    """The sizes the probes gave, by the unit's key and the index of the size asked; how many probes compiled, and
    whether each compile had an outcome of its own (not a timeout or a worker that died)."""

    sizes: dict[tuple[str, int], int] = field(default_factory=dict)
    compiled: int = 0
    cached: int = 0
    replayable: bool = True


def probe_sizes(config: Config, asked: list[tuple[Compiled, list[InstanceSize]]], *, jobs: int,
                pool: Pool | None = None) -> ProbeRun:
    """Evaluate the sizes `asked` of each unit's file (cached); a unit nvcc does not compile (NVRTC's) is not
    probed. `pool`: the run's compile workers (a pool of `jobs` is made where none is given and one is needed)."""
    cache = Cache(config.root / config.cache_dir, config.cache_dir)
    read = FilesRead(config.root, config.checkout_of)
    sizes: dict[tuple[str, int], int] = {}
    todo: list[tuple[str, Compiled, list[InstanceSize]]] = []
    cached = 0
    for unit, items in asked:
        if not items or unit.context.get("compiler") != "nvcc":
            continue
        key = digest("cuda-probe", PROBE_FORMAT, unit.key, [asdict(item) for item in items])
        entry = cache.entry("cuda-probe", key, record_shapes.probe)
        if entry is not None and read.unchanged(entry.meta):
            sizes.update(((unit.key, int(index)), value) for index, value in entry.value["sizes"].items())
            cached += 1
        else:
            todo.append((key, unit, items))
    if not todo:
        return ProbeRun(sizes, cached=cached)
    replayable = True

    def done(index: int, outcome: Outcome) -> None:
        nonlocal replayable
        key, unit, _items = todo[index]
        if outcome.cache_unwritable:
            raise CacheWriteError(outcome.error, config.cache_dir)
        replayable = replayable and not outcome.transient
        if not outcome.ok:
            return  # a probe that timed out: its sizes stay unknown
        reply = outcome.answer(ProbeReply)
        found = {str(i): value for i, value in reply["sizes"].items()}
        cache.put("cuda-probe", key, {"sizes": found}, {"headers": read.state(reply["headers"])})
        sizes.update(((unit.key, int(i)), value) for i, value in found.items())

    own = pool is None
    workers = pool or Pool(jobs, worker_env(config), triton=False)
    try:
        workers.run([Task("cuda.probe", _request(unit, items)) for _key, unit, items in todo], config.timeout, done)
    finally:
        if own:
            workers.close()
    return ProbeRun(sizes, compiled=len(todo), cached=cached, replayable=replayable)


def _request(unit: Compiled, items: list[InstanceSize]) -> ProbeRequest:
    plan = unit.context
    return {"source": plan["source"], "rel": plan["rel"], "cwd": plan["cwd"], "flags": list(plan["flags"]),
            "virtual": plan["virtual"], "nvcc": plan["nvcc"], "timeout": plan.get("timeout", 600),
            "sizes": [asdict(item) for item in items]}


# --- in the compile worker ---------------------------------------------------------------------------------------

def probe_task(payload: ProbeRequest) -> ProbeReply:
    """Compile the probe of one file for one target; the sizes its PTX gives (index of the size asked -> bytes) and
    the files the compile read."""
    from kgate.compile.cuda_backend import files_read
    from kgate.compile.worker_imports import KernelError
    from kgate.support import scratch, tools

    keep = scratch.make("kgate-probe-")
    probe = Path(keep) / "probe.cu"
    items = {index: InstanceSize(**{**item, "namespace": tuple(item["namespace"])})
             for index, item in enumerate(payload["sizes"])}
    argv = [payload["nvcc"] or "nvcc", *payload["flags"], "-ptx",
            f"--generate-code=arch={payload['virtual']},code={payload['virtual']}", "--keep", "--keep-dir", str(keep),
            "-o", str(Path(keep) / "probe.ptx"), str(probe)]
    read: list[str] = []
    try:
        for _attempt in range(_ATTEMPTS):
            text, lines = probe_source(payload["source"], items)
            probe.write_text(text)
            try:
                done = tools.run(argv, cwd=payload["cwd"], timeout=payload["timeout"] + 60, check=False)
            except tools.ToolFailed as exc:  # timed out, or nvcc could not start
                raise KernelError(f"the shared memory probe of {payload['rel']}: {exc}") from None
            read = files_read(Path(keep), payload)
            if done.returncode == 0:
                ptx = (Path(keep) / "probe.ptx").read_text(errors="replace")
                return {"sizes": sizes_in(ptx, items), "headers": read}
            rejected = rejected_lines(done.stdout + "\n" + done.stderr, str(probe))
            dropped = {index for index, span in lines.items() if rejected & set(span)}
            if not dropped:
                break  # an error no definition of the probe's caused: no size of this file is known
            items = {index: item for index, item in items.items() if index not in dropped}
            if not items:
                break
        return {"sizes": {}, "headers": read}
    finally:
        import shutil

        shutil.rmtree(keep, ignore_errors=True)
        scratch.forget(keep)


def probe_source(source: str, items: dict[int, InstanceSize]) -> tuple[str, dict[int, range]]:
    """The probe's text: the file included whole, then each size's definitions (`items`: by the index of the size
    asked); with the lines each size's definitions take."""
    out = [f'#include "{_quoted(source)}"', "#if __cplusplus >= 201703L",
           f"template <int kgate_index, unsigned long long kgate_bytes, auto kgate_kernel> "
           f"__global__ void {_TEMPLATE}() {{}}"]
    lines: dict[int, range] = {}
    for index, item in sorted(items.items()):
        first = len(out) + 1
        opened = "".join(f"namespace {name} {{ " for name in item.namespace)
        closed = "}" * len(item.namespace)
        qualifier = "".join(f"{name}::" for name in item.namespace if name)
        out += [opened,
                f"constexpr unsigned long long kgate_smem_bytes_{index}{{ {item.expression} }};",
                f"constexpr auto kgate_smem_kernel_{index} = &{item.kernel};",
                closed,
                f"template __global__ void {_TEMPLATE}<{index}, {qualifier}kgate_smem_bytes_{index}, "
                f"{qualifier}kgate_smem_kernel_{index}>();"]
        lines[index] = range(first, len(out) + 1)
    out += ["#endif", ""]
    return "\n".join(out), lines


def _quoted(path: str) -> str:
    return path.replace("\\", "\\\\").replace('"', '\\"')


def rejected_lines(output: str, probe: str) -> set[int]:
    """The lines of the probe file that the compiler's errors name (`probe.cu(12): error`, and `... at line 12 of
    probe.cu` where the error lies in a header a definition instantiated)."""
    name = re.escape(probe)
    found = {int(m.group(1)) for m in re.finditer(name + r"\((\d+)\): (?:catastrophic )?error", output)}
    found |= {int(m.group(1)) for m in re.finditer(r"\bline (\d+) of \"?" + name, output)}
    return found


def sizes_in(ptx: str, items: dict[int, InstanceSize]) -> dict[int, int]:
    """The bytes each size asked came to, read from the probe's PTX entries: only where the entry's kernel argument
    is the kernel asked about (its mangled name, as a template argument: `L<symbol>E`)."""
    out: dict[int, int] = {}
    for match in _ENTRY.finditer(ptx):
        index, value = int(match.group(2)), int(match.group(3))
        item = items.get(index)
        if item is None:
            continue
        symbol = item.symbol if item.symbol.startswith("_Z") else f"_Z{len(item.symbol)}{item.symbol}"
        if f"L{symbol}E" in match.group(1):
            out[index] = value
    return out

