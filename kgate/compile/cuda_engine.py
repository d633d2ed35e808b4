"""Plan, cache and run the compilation of CUDA C++ sources: one task per file and target.

Main-process side. The cache key of a file and target is its content and the
content of the project headers it includes, its flags, the architecture
compiled, the compiler and its version, and kgate's version. Beside the
record go the content hashes of every file the compile read (the compiler's
own list: headers outside the project, behind a symlinked folder, under an
include folder the flags name, the system's and the toolkit's), and a record
is used only while each of them still has that content. A warm run reads
files and hashes them (each once a run), and runs no compiler. What the configuration
says about a kernel (PDL, expected instructions, kind) is applied here,
after the cache, so changing it recompiles nothing; only a kernel that now
needs SASS the cached record lacks sends its file back to a worker.
"""

from __future__ import annotations

import hashlib
import os
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

import kgate
from kgate.collect.cuda_flags import choose_arch
from kgate.collect.cuda_launches import LaunchSite, pdl_launch_sites, pdl_launched
from kgate.collect.cuda_names import base_name, global_definitions, matches
from kgate.collect.cuda_sources import CudaSource, cuda_sources, defined_kernels
from kgate.collect.files import aliases, display_path
from kgate.compile import records as record_shapes
from kgate.compile.cache import Cache, CacheWriteError, Entry, digest, file_hash
from kgate.compile.cuda_backend import reads_sass
from kgate.compile.engine import CompileRun, Progress, _first_line, worker_env
from kgate.compile.pool import Outcome, Pool
from kgate.core.config import Config
from kgate.core.errors import ToolchainError
from kgate.facts.model import FACTS_SCHEMA, CompileFailure, KernelFacts
from kgate.support.atomicio import read_input
from kgate.support.toolchain import CudaToolchain, cuda_include_dir, cuda_toolchain


@dataclass
class _Task:
    source: CudaSource
    target: str
    key: str
    payload: dict[str, Any]


def compile_cuda(config: Config, targets: tuple[str, ...], *, jobs: int, progress: Progress | None = None,
                 sass_all: bool = False, kernels: list[str] | None = None, pool: Pool | None = None,
                 files: frozenset[str] | None = None) -> CompileRun:
    """Compile every configured CUDA source for every target (cached) into per-kernel facts.

    `files`: compile only these sources (a shard's slice). PDL launch sites are still read in
    every source, since a launch in one file makes a kernel of another PDL-launched.
    """
    run = CompileRun()
    if not config.cuda:
        return run
    sources = cuda_sources(config)
    toolchain = cuda_toolchain(config.nvcc, config.root)
    compilers = {entry.compiler: toolchain.compiler(entry.compiler) for entry in config.cuda}
    used = set(compilers.values())
    run.toolchain = {f"cuda.{name}": v for name, v in toolchain.versions().items() if name in used}
    sites = launch_sites(config, sources)
    patterns = sass_patterns(sources, sites)
    cache = Cache(config.root / config.cache_dir, config.cache_dir)
    nvrtc_includes = [folder for folder in [cuda_include_dir(toolchain.nvcc)] if folder] \
        if "nvrtc" in compilers.values() else []
    records: list[tuple[CudaSource, str, dict[str, Any]]] = []
    read = FilesRead(config.root)
    todo: list[_Task] = []
    cubins: list[tuple[_Task, Entry]] = []  # cached, lacking SASS a rule now reads: disassembled, not recompiled
    keys: dict[tuple[str, str], str] = {}  # (source, target) -> its cache key
    for source in sources:
        if files is not None and source.rel not in files:
            continue
        for target in targets:
            if not source.entry.builds_for(target):
                continue  # the table names the targets its files are built for
            task = _plan(config, source, target, toolchain, compilers[source.entry.compiler], patterns, sass_all,
                         cache, nvrtc_includes)
            keys[(source.rel, target)] = task.key
            entry = cache.entry("cuda", task.key, record_shapes.cuda)
            if entry is not None and not read.unchanged(entry.meta):
                entry = None  # a file the compile read has changed since: compiled again
            record = entry.value if entry is not None else None
            if record is not None and not _lacks_sass(record, patterns, sass_all):
                records.append((source, target, record))
                run.cached += 1
            elif entry is not None and cache.cubin(task.key, entry.meta) is not None:
                cubins.append((task, entry))
            else:
                todo.append(task)
    own = pool is None and bool(todo or cubins)
    pool = pool or Pool(jobs, worker_env(config))
    try:
        todo += _disassemble_cached(config, cubins, patterns, sass_all, pool, cache, run, records)
        _run_tasks(config, todo, jobs, progress, pool, cache, run, records, read)
    finally:
        if own:
            pool.close()
    for source, target, record in records:
        if record.get("error"):
            run.failures.append(CompileFailure(source.rel, "", target, source.rel, record.get("line", 1),
                                               record["error"]))
    run.facts = finish(records, sites, kernels, patterns, sass_all)
    run.cubins = _cubins(cache, keys, run.facts)
    if kernels:
        by_rel = {source.rel: source for source in sources}
        run.failures = [f for f in run.failures if _may_define(by_rel[f.path], kernels)]
    run.facts.sort(key=lambda f: f.key)
    run.failures.sort(key=lambda f: (f.kernel, f.variant, f.target))
    return run


def _cubins(cache: Cache, keys: dict[tuple[str, str], str],
            facts: list[KernelFacts]) -> dict[tuple[str, str, str], tuple[str, str | None]]:
    """Each kernel's cubin (its source file's, one per target) and the hash its record was written with."""
    meta: dict[str, str | None] = {}
    out = {}
    for f in facts:
        key = keys.get((f.variant, f.target))
        if key is None:
            continue
        if key not in meta:
            entry = cache.entry("cuda", key)
            meta[key] = entry.meta.get("cubin") if entry is not None else None
        out[f.key] = (str(cache.artifacts(key) / "kernel.cubin"), meta[key])
    return out


def _plan(config: Config, source: CudaSource, target: str, toolchain: CudaToolchain, compiler: str,
          patterns: dict[str, list[str]], sass_all: bool, cache: Cache, nvrtc_includes: list[str]) -> _Task:
    arch = choose_arch(source.archs, target)
    version = toolchain.versions().get(compiler, "")
    key = digest("cuda", FACTS_SCHEMA, kgate.__version__, compiler, version, source.rel, source.key,
                 list(source.flags), arch.virtual, arch.real, target)
    payload = {
        # nvcc is given the file by the name the project gives it: a symlink to a content-addressed file
        # without a `.cu` suffix is still a CUDA source to nvcc, and the kernels in it are named by it.
        "source": str(config.root / source.rel), "rel": source.rel,
        "aliases": [[str(place), name] for place, name in aliases(config.root, source.rel)], "cwd": str(source.cwd), "root": str(config.root.resolve()),
        "flags": list(source.flags), "virtual": arch.virtual, "real": arch.real, "target": target,
        "compiler": compiler, "nvcc": toolchain.nvcc.path, "artifacts": str(cache.artifacts(key)),
        "sass_patterns": patterns, "sass_all": sass_all, "timeout": config.timeout,
        "nvrtc_includes": nvrtc_includes,
        "toolchain": {f"cuda.{compiler}": version},
    }
    return _Task(source, target, key, payload)


def _run_tasks(config: Config, todo: list[_Task], jobs: int, progress: Progress | None, pool: Pool | None,
               cache: Cache, run: CompileRun, records: list[tuple[CudaSource, str, dict[str, Any]]],
               read: FilesRead) -> None:
    if not todo:
        return
    done = 0
    unusable: list[str] = []

    def finished(index: int, outcome: Outcome) -> None:
        nonlocal done
        task = todo[index]
        if outcome.cache_unwritable:
            raise CacheWriteError(str(outcome.value), config.cache_dir)
        run.replayable = run.replayable and not outcome.transient
        done += 1
        if progress:
            progress(done, len(todo), f"{task.source.rel} {task.target}")
        if outcome.ok and "toolchain_error" in outcome.value:
            unusable.append(outcome.value["toolchain_error"])
        elif outcome.ok:
            value = {k: v for k, v in outcome.value.items() if k != "headers"}
            files = outcome.value.get("headers")
            cache.put("cuda", task.key, value, {"cubin": file_hash(cache.artifacts(task.key) / "kernel.cubin"),
                                                "headers": read.state(files if isinstance(files, list) else [])})
            records.append((task.source, task.target, value))
            run.compiled += 1
            run.compile_seconds[f"{task.source.rel}|{task.target}"] = outcome.seconds
        else:
            run.failures.append(CompileFailure(task.source.rel, "", task.target, task.source.rel, 1,
                                               _first_line(outcome)))

    own = pool is None
    pool = pool or Pool(jobs, worker_env(config))
    try:
        if progress:
            progress(0, len(todo), "")
        pool.run([("cuda.compile", task.payload) for task in todo], config.timeout, finished)
    finally:
        if own:
            pool.close()
    if unusable:
        raise ToolchainError(min(unusable))


class FilesRead:
    """The content hashes of the files CUDA compiles read, each file hashed once a run (through
    `kgate.support.atomicio.read_input`: one that has become a named pipe or a device is unreadable, not waited on).

    A file in the project is named relative to it (a cache restored into another checkout still holds), any
    other by its absolute path, both as the compiler reached them (a symlink is not resolved)."""

    def __init__(self, root: Path) -> None:
        self.root = os.path.abspath(root)
        self.hashes: dict[str, str | None] = {}

    def _name(self, path: str) -> str:
        rel = os.path.relpath(os.path.abspath(path), self.root)
        return path if rel == os.pardir or rel.startswith(os.pardir + os.sep) else rel

    def hash(self, name: str) -> str | None:
        """The hash of a file by its name in a record (relative to the project, or absolute)."""
        if name not in self.hashes:
            try:
                self.hashes[name] = hashlib.sha256(read_input(os.path.join(self.root, name))).hexdigest()
            except (OSError, ValueError):
                self.hashes[name] = None
        return self.hashes[name]

    def state(self, paths: list[str]) -> dict[str, str | None]:
        """Name -> hash of the files a compile read (absolute paths, as the worker reports them)."""
        names = (self._name(path) for path in paths if isinstance(path, str) and os.path.isabs(path))
        return {name: self.hash(name) for name in sorted(set(names))}

    def unchanged(self, meta: dict[str, Any]) -> bool:
        """Whether every file a record's compile read has the content it had (a record that does not say what
        its compile read is not trusted)."""
        files = meta.get("headers")
        return isinstance(files, dict) and all(isinstance(path, str) and self.hash(path) == digest
                                               for path, digest in files.items())


def _disassemble_cached(config: Config, cubins: list[tuple[_Task, Entry]], patterns: dict[str, list[str]],
                        sass_all: bool, pool: Pool, cache: Cache, run: CompileRun,
                        records: list[tuple[CudaSource, str, dict[str, Any]]]) -> list[_Task]:
    """SASS for cached records from their cached cubins; the tasks whose cubin could not be read, to compile."""
    again: list[_Task] = []
    wanted = [[item["symbol"] for item in entry.value["kernels"]
               if item.get("sass") is None and reads_sass(item, patterns, sass_all)] for _task, entry in cubins]

    def done(index: int, outcome: Outcome) -> None:
        task, entry = cubins[index]
        if outcome.cache_unwritable:
            raise CacheWriteError(str(outcome.value), config.cache_dir)
        if not outcome.ok:
            again.append(task)
            return
        record = {**entry.value, "kernels": [
            {**item, "sass": {"opcodes": outcome.value[item["symbol"]]}} if item["symbol"] in outcome.value else item
            for item in entry.value["kernels"]]}
        cache.put("cuda", task.key, record, entry.meta)
        records.append((task.source, task.target, record))
        run.cached += 1

    if cubins:
        pool.run([("cuda.sass", {"cubin": str(cache.artifacts(task.key) / "kernel.cubin"), "symbols": symbols})
                  for (task, _entry), symbols in zip(cubins, wanted)], config.timeout, done)
    return again


def _may_define(source: CudaSource, globs: list[str]) -> bool:
    """Whether a file that did not compile defines a kernel the `--kernel` globs could name."""
    names = defined_kernels(source)
    return any(matches(name, globs) for name in names) or not names


def launch_sites(config: Config, sources: list[CudaSource]) -> list[LaunchSite]:
    """PDL launch sites in the sources and the project headers they include."""
    texts: dict[Path, tuple[str, tuple[str, ...]]] = {}
    for source in sources:
        for path in (source.path, *source.headers):
            if path not in texts:
                try:
                    texts[path] = (path.read_text(encoding="utf-8", errors="replace"), source.entry.launch_wrappers)
                except OSError:
                    continue
    kernels: set[str] = set()
    for text, _wrappers in texts.values():
        if "__global__" in text:
            kernels.update(global_definitions(text))
    sites: list[LaunchSite] = []
    known = [alias for source in sources for alias in aliases(config.root, source.rel)]
    for path in sorted(texts):
        text, wrappers = texts[path]
        sites.extend(pdl_launch_sites(text, display_path(path, config.root, known), kernels, wrappers))
    return sites


def sass_patterns(sources: list[CudaSource], sites: list[LaunchSite]) -> dict[str, list[str]]:
    """Globs of the kernels whose rules may read SASS: PDL kernels and kernels expected to use block scaling."""
    pdl: set[str] = {site.kernel for site in sites}
    block_scale: set[str] = set()
    for source in sources:
        pdl.update(source.entry.pdl)
        block_scale.update(pattern for pattern, items in source.entry.expect.items() if "block_scale" in items)
    return {"pdl": sorted(pdl), "block_scale": sorted(block_scale)}


def _lacks_sass(record: dict[str, Any], patterns: dict[str, list[str]], sass_all: bool) -> bool:
    """Whether a cached record lacks the SASS of a kernel whose rules now read it."""
    return any(k.get("sass") is None and reads_sass(k, patterns, sass_all) for k in record.get("kernels", []))


def finish(records: list[tuple[CudaSource, str, dict[str, Any]]], sites: list[LaunchSite],
           kernels: list[str] | None, patterns: dict[str, list[str]], sass_all: bool) -> list[KernelFacts]:
    """KernelFacts with what the configuration and the launch sites say: PDL, expectations, kind.

    SASS is kept only where a rule reads it (or `--sass` asked for it), so the output does not
    depend on what an earlier run happened to leave in the cache.
    """
    instantiations: dict[str, set[str]] = {}
    for _source, _target, record in records:
        for item in record["kernels"]:
            name = item["kernel"]
            if "<" in name:
                instantiations.setdefault(base_name(name), set()).add("".join(name[name.index("<"):].split()))
    out = []
    for source, _target, record in records:
        entry = source.entry
        for item in record["kernels"]:
            data = {k: v for k, v in item.items() if k != "symbol"}
            if not reads_sass(item, patterns, sass_all):
                data["sass"] = None
            facts = KernelFacts.from_json(data)
            if kernels and not matches(facts.kernel, kernels):
                continue
            expect = tuple(sorted({e for pattern, items in entry.expect.items()
                                   if matches(facts.kernel, [pattern]) for e in items}))
            kind = next((k for pattern, k in sorted(entry.kind.items()) if matches(facts.kernel, [pattern])),
                        "other")
            pdl = matches(facts.kernel, entry.pdl) or pdl_launched(facts.kernel, sites, instantiations) is not None
            out.append(replace(facts, pdl=pdl, expect=expect, kind=kind))
    return out

