"""The dynamic shared memory a launch sizes by what only the compiler knows (`sizeof(typename K::SharedStorage)`),
evaluated by the compiler: one more compile of the kernel's file, the probe, for the files whose kernels need it.

The probe is the file's own translation unit, included whole, compiled with the same flags for the same target,
followed by two definitions per size asked (`kgate.collect.smem_expressions.InstanceSize`), in the namespaces of the
site that gives the size: a device constant initialised with the size (braced: a negative or fractional value is
an error, not a wrapped number), and a device constant pointer to the kernel as the site spells it. Both have C's
linkage, so the PTX names them plainly; the first's initialiser is the number, the second's the mangled name of
the kernel the spelling named, which must be the kernel asked about (else the number is another instantiation's,
and is not taken). nvcc stops at PTX (`-ptx`: no ptxas). A definition the compiler rejects (a size that is no
constant expression, a name that does not resolve there) is taken out and the rest compiled again; its size stays
unknown.

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
# The device variables that carry the answers, by the index of the size asked: its bytes, and the kernel it is of.
_BYTES, _KERNEL = "kgate_smem_bytes_", "kgate_smem_kernel_"
_BYTES_VALUE = re.compile(r"\b" + _BYTES + r"(\d+)\s*=\s*(\d+)\s*;")
_KERNEL_VALUE = re.compile(r"\b" + _KERNEL + r"(\d+)\s*=\s*(?:generic\(\s*)?([\w$.]+)\s*\)?\s*;")
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
                try:
                    ptx = (Path(keep) / "probe.ptx").read_text(errors="replace")
                except OSError:  # nvcc said it succeeded and wrote nothing: no size is known
                    ptx = ""
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
    """The probe's text: the file included whole, then, in each size's namespaces, two device variables of C's
    linkage (their PTX names are kgate's own): the size, and a pointer to the kernel as the site spells it, whose
    PTX initialiser is the kernel's mangled name (`items`: by the index of the size asked); with the lines each
    size's definitions take."""
    out = [f'#include "{_quoted(source)}"']
    lines: dict[int, range] = {}
    for index, item in sorted(items.items()):
        first = len(out) + 1
        out += ["".join(f"namespace {name} {{ " for name in item.namespace),
                f'extern "C" __device__ const unsigned long long {_BYTES}{index}{{ {item.expression} }};',
                f'extern "C" __device__ decltype(&{item.kernel}) const {_KERNEL}{index} = &{item.kernel};',
                "}" * len(item.namespace)]
        lines[index] = range(first, len(out) + 1)
    out.append("")
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
    """The bytes each size asked came to, read from the probe's PTX: the initialiser of its size's variable, where
    its kernel pointer's initialiser is the kernel asked about (by its mangled name)."""
    kernels = {int(m.group(1)): m.group(2) for m in _KERNEL_VALUE.finditer(ptx)}
    out: dict[int, int] = {}
    for match in _BYTES_VALUE.finditer(ptx):
        index, value = int(match.group(1)), int(match.group(2))
        item = items.get(index)
        if item is not None and index in kernels and _unnamed(kernels[index]) == _unnamed(item.symbol):
            out[index] = value
    return out


_ANONYMOUS = re.compile(r"(\d+)_GLOBAL__N_")


def _unnamed(symbol: str) -> str:
    """A mangled name with the translation unit's anonymous namespace named alike in every compile: nvcc names it
    anew each time (`42_GLOBAL__N__2f3dcce6_4_k_cu_3658822a_10625`), and the probe's is the file's own."""
    out: list[str] = []
    last = 0
    for match in _ANONYMOUS.finditer(symbol):
        if match.start() < last:
            continue
        out += [symbol[last:match.start()], "11_GLOBAL__N_"]
        last = match.start(1) + len(match.group(1)) + int(match.group(1))
    return "".join(out) + symbol[last:]

