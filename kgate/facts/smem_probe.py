"""Which compiled CUDA kernels have a launch site whose dynamic shared memory only the compiler settles
(`sizeof(typename K::SharedStorage)`, `kgate.collect.smem_expressions`), and the sizes the compiler gives them.

Only a kernel such a site launches is asked about, and only in a file whose translation unit holds the site (the
file itself or a project header it includes): the site's names mean there what they mean at the site. Each
instantiation is asked for itself, with its own template arguments, and each target for itself (the compile for
one target may size a type otherwise: `__CUDA_ARCH__`). The compile stage evaluates them, one probe compile per
file and target that asks (`kgate.compile.cuda_probe`); a size it does not settle stays unknown.
"""

from __future__ import annotations

from dataclasses import replace

from kgate.collect.cuda_launches import SmemSite, smem_of
from kgate.collect.cuda_names import base_name
from kgate.collect.smem_expressions import InstanceSize, instance_size
from kgate.compile.cuda_engine import CudaCompilation
from kgate.compile.cuda_probe import ProbeRun, probe_sizes
from kgate.compile.pool import Pool
from kgate.compile.units import Compiled
from kgate.core.config import Config
from kgate.facts.model import KernelFacts

# By kernel variant (`KernelFacts.key`): the sites whose size the compiler evaluated for it, `bytes` set.
Evaluated = dict[tuple[str, str, str], list[SmemSite]]


def instantiated(items: list[KernelFacts]) -> dict[str, set[str]]:
    """The template arguments (without spaces) of each kernel template's compiled instantiations, by identifier."""
    out: dict[str, set[str]] = {}
    for item in items:
        name = item.kernel
        if "<" in name:
            out.setdefault(base_name(name), set()).add("".join(name[name.index("<"):].split()))
    return out


def probed_smem(config: Config, built: list[tuple[Compiled, str, KernelFacts]], compilation: CudaCompilation, *,
                jobs: int, pool: Pool | None = None) -> tuple[Evaluated, ProbeRun]:
    """The sizes the compiler gives the kernels of `built` (unit, PTX entry, facts) that a site sizing by the
    compiler's knowledge launches; with how the probes went."""
    sites = [site for site in compilation.smem or () if site.compiler is not None]
    if not sites:
        return {}, ProbeRun()
    instantiations = instantiated([item for _unit, _symbol, item in built])
    asked: dict[str, tuple[Compiled, list[InstanceSize]]] = {}
    wanted: dict[tuple[str, int], list[tuple[tuple[str, str, str], SmemSite]]] = {}
    for unit, symbol, item in built:
        if not item.entry.dynamic_shared:
            continue  # a kernel without `extern __shared__` memory: not asked about
        files = (compilation.files or {}).get(unit.context.get("rel", ""), ())
        for site in smem_of(item.kernel, sites, instantiations):
            size = instance_size(site.compiler, site.kernel, site.scope, site.template, symbol) \
                if site.compiler is not None and site.path in files else None
            if size is None:
                continue
            items = asked.setdefault(unit.key, (unit, []))[1]
            if size not in items:
                items.append(size)
            wanted.setdefault((unit.key, items.index(size)), []).append((item.key, site))
    run = probe_sizes(config, list(asked.values()), jobs=jobs, pool=pool)
    out: Evaluated = {}
    for (unit_key, index), given in sorted(wanted.items()):
        value = run.sizes.get((unit_key, index))
        if value:
            for key, site in given:
                out.setdefault(key, []).append(replace(site, bytes=value))
    return out, run
