"""Plan, cache and run the compilation of CUDA C++ sources: one task per file and target.

Main-process side. The cache key of a file and target is its content and the
content of the project headers it includes, its flags, the architecture
compiled, the compiler and its version, and kgate's version. Beside the
record go the content hashes of every file the compile read (the compiler's
own list: headers outside the project, behind a symlinked folder, under an
include folder the flags name, the system's and the toolkit's), and a record
is used only while each of them still has that content. A warm run reads
files and hashes them (each once a run), and runs no compiler. What the configuration
says about a kernel (PDL, expected instructions, kind) is applied by the facts
stage, after the cache, so changing it recompiles nothing. Which kernels' SASS
the run's plan wants depends on their PTX, so the facts stage says which symbols
a unit lacks (`needs`): for a fresh compile, in the worker that compiled it
(`analyse`), which disassembles them from the cubin it has just written; for a
cached unit, from the cached cubin, in a worker. Files compile longest first.
"""

from __future__ import annotations

import hashlib
import os
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Final

import kgate
from kgate.collect.cpp_constants import given_macros
from kgate.collect.cuda_flags import choose_arch
from kgate.collect.cuda_launches import LaunchSite, SmemSite, every_smem_site, pdl_launch_sites
from kgate.collect.cuda_names import global_definitions, matches
from kgate.collect.cuda_sources import CudaSource, cuda_sources, defined_kernels
from kgate.collect.files import aliases, display_path
from kgate.collect.torch_ext import TORCH_DEFINE, explain
from kgate.compile import records as record_shapes
from kgate.compile.cache import Cache, CacheWriteError, Entry, code_digest, digest
from kgate.compile.compilation import Analyse, Compilation, Needs, Progress, Tally, first_line, worker_env
from kgate.compile.payloads import CudaPlan, CudaReply, CudaRequest, FunctionsSassRequest
from kgate.compile.pool import Pool
from kgate.compile.preflight import CudaCompilers, cuda_compilers
from kgate.compile.protocol import Outcome, Task
from kgate.compile.sides import Checkout, named, of_the_working_tree, on_this_side
from kgate.compile.units import Compiled, CompileFailure, cubin_file
from kgate.core.config import Config
from kgate.core.errors import ToolchainError
from kgate.support.atomicio import read_input
from kgate.support.compiler_env import nvcc_command_flags, nvcc_environment, nvcc_programs
from kgate.support.toolchain import CudaToolchain, cuda_include_dir

CUDA_FORMAT = 2  # 2: the record holds the artifacts' hashes, no facts
# What a record keeps of the plan it was compiled with: where the file and the project were. The PTX names files
# by those paths, so the facts stage tells the project's kernels from a library's by them, wherever the cache
# has been restored since.
IDENTITY: Final = ("root", "aliases", "source", "cwd", "rel", "target", "toolchain")


@dataclass
class _Task:
    source: CudaSource
    target: str
    key: str
    payload: CudaPlan


@dataclass(frozen=True)
class CudaCompilation(Compilation):
    """The compiled CUDA files, with what the facts stage applies to their kernels: the PDL launch sites and the
    sites that give them dynamic shared memory."""

    sites: list[LaunchSite] | None = None
    smem: list[SmemSite] | None = None
    # By source (its path in the project): the files of its translation unit that sites are read in, as the sites
    # name them (the source and the project headers it includes).
    files: dict[str, tuple[str, ...]] | None = None


def compile_cuda(config: Config, targets: tuple[str, ...], *, jobs: int, progress: Progress | None = None,
                 pool: Pool | None = None, files: frozenset[str] | None = None, kernels: list[str] | None = None,
                 needs: Needs | None = None, found: CudaCompilers | None = None, analyse: Analyse | None = None,
                 durations: dict[str, float] | None = None) -> CudaCompilation:
    """Compile every configured CUDA source for every target (cached) into units of artifacts.

    `files`: compile only these sources (a shard's slice). PDL launch sites are still read in
    every source, since a launch in one file makes a kernel of another PDL-launched. `kernels`: the
    `--kernel` globs, which keep a failure only where the file could define a kernel they name. `found`: the
    compilers as the run resolved them before its first compile (resolved here without it). `analyse`: `needs` in
    the worker that compiles a unit. `durations`: the seconds earlier runs took per file ("cuda:" and its path), to
    start the longest compiles first.
    """
    run = Tally()
    if not config.cuda:
        return run.made(CudaCompilation, sites=[], smem=[])
    toolchain, compilers = found or cuda_compilers(config, config.cuda)
    sources = cuda_sources(config)
    used = set(compilers.values())
    run.toolchain = {f"cuda.{name}": v for name, v in toolchain.versions().items() if name in used}
    sites, smem = launch_sites(config, sources, compilers)
    cache = Cache(config.root / config.cache_dir, config.cache_dir)
    nvrtc_includes = [folder for folder in [cuda_include_dir(toolchain.nvcc)] if folder] \
        if "nvrtc" in compilers.values() else []
    errors: list[tuple[CudaSource, str, dict[str, Any]]] = []
    read = FilesRead(config.root, config.checkout_of)
    todo: list[_Task] = []
    cubins: list[tuple[_Task, Entry, list[str]]] = []  # cached, lacking SASS the plan wants: disassembled, not compiled
    for source in sources:
        if files is not None and source.rel not in files:
            continue
        for target in targets:
            if not source.entry.builds_for(target):
                continue  # the table names the targets its files are built for
            task = _plan(config, source, target, toolchain, compilers[source.entry.compiler], cache, nvrtc_includes,
                         sites)
            entry = cache.entry("cuda", task.key, record_shapes.cuda)
            if entry is not None and not read.unchanged(entry.meta):
                entry = None  # a file the compile read has changed since: compiled again
            if entry is not None and "error" in entry.value:
                errors.append((source, target, entry.value))
                run.cached += 1
                continue
            unit = _unit(task, entry.value, entry.meta, cache) if entry is not None else None
            lacking = None if unit is None else needs(unit) if needs is not None else []
            if entry is not None and unit is not None and lacking == []:
                run.units.append(unit)
                run.cached += 1
            elif entry is not None and unit is not None and lacking and cache.cubin(task.key, entry.meta) is not None:
                cubins.append((task, entry, lacking))
            else:
                todo.append(task)
    own = pool is None and bool(todo or cubins)
    pool = pool or Pool(jobs, worker_env(config), triton=False)
    try:
        todo += _disassemble(config, cubins, pool, cache, run, cached=True)
        fresh = _run_tasks(config, longest_first(todo, durations or {}), progress, pool, cache, run, errors, read,
                           analyse, needs)
        # A fresh compile's kernels whose SASS the plan wants, where its worker did not: disassembled now, from the
        # cubin just kept.
        wanted = [(task, entry, lacking) for task, entry, _unit, lacking in fresh if lacking is None or lacking]
        for task, entry, lacking in wanted:
            if lacking is None:
                run.failures.append(CompileFailure(task.source.rel, "", task.target, task.source.rel, 1,
                                                   "the compile's artifacts could not be read back from the cache"))
        stuck = _disassemble(config, [(t, e, lack) for t, e, lack in wanted if lack], pool, cache, run, cached=False)
        for task in stuck:
            run.failures.append(CompileFailure(task.source.rel, "", task.target, task.source.rel, 1,
                                               "cuobjdump could not disassemble the cubin just compiled"))
        done = {id(task) for task, _entry, _lacking in wanted}
        run.units += [unit for task, _entry, unit, _lacking in fresh if id(task) not in done]
    finally:
        if own:
            pool.close()
    for source, target, record in errors:
        said = explain(source.torch_note, record["error"], torch_flags=TORCH_DEFINE in source.flags)
        run.failures.append(CompileFailure(source.rel, "", target, source.rel, record.get("line", 1),
                                           f"{said}; {source.build_note}" if source.build_note else said))
    if kernels:
        by_rel = {source.rel: source for source in sources}
        run.failures = [f for f in run.failures if _may_define(by_rel[f.path], kernels)]
    run.units.sort(key=lambda u: (u.context["rel"], u.target))
    run.failures.sort(key=lambda f: (f.kernel, f.variant, f.target))
    return run.made(CudaCompilation, sites=sites, smem=smem, files=translation_files(config, sources))


def translation_files(config: Config, sources: list[CudaSource]) -> dict[str, tuple[str, ...]]:
    """By source: the files of its translation unit that launch sites are read in (`launch_sites`), by the names
    the sites give them."""
    known = [alias for source in sources for alias in aliases(config.root, source.rel)]
    return {source.rel: tuple(display_path(path, config.root, known) for path in (source.path, *source.headers))
            for source in sources}


def _unit(task: _Task, value: dict[str, Any], meta: dict[str, Any], cache: Cache) -> Compiled:
    """A file's compile record as the unit the facts stage reads; its context is this run's plan of the file."""
    symbols = value.get("sass_symbols")
    return Compiled(key=task.key, folder=cache.artifacts(task.key), language="cuda", target=task.target,
                    hashes=dict(value["artifacts"]), context={**task.payload, **value["context"]},
                    sass_symbols=tuple(symbols) if symbols is not None else None,
                    cubin=cubin_file(cache.artifacts(task.key), meta.get("cubin")),
                    origin=(task.source.rel, "", task.source.rel, 1), launch_sites=tuple(task.payload["launch_sites"]))


def _plan(config: Config, source: CudaSource, target: str, toolchain: CudaToolchain, compiler: str, cache: Cache,
          nvrtc_includes: list[str], sites: list[LaunchSite]) -> _Task:
    arch = choose_arch(source.archs, target)
    assert arch.real is not None  # the pair chosen always names a real architecture
    version = toolchain.versions().get(compiler, "")
    environment = {**nvcc_environment(), **nvcc_programs(str(toolchain.nvcc.path), source.flags)} \
        if compiler == "nvcc" else {}
    key = digest("cuda", CUDA_FORMAT, kgate.__version__, code_digest(), compiler, version, source.rel, source.key,
                 list(source.flags), arch.virtual, arch.real, target, *([environment] if environment else []))
    entry = source.entry
    payload: CudaPlan = {
        # nvcc is given the file by the name the project gives it: a symlink to a content-addressed file
        # without a `.cu` suffix is still a CUDA source to nvcc, and the kernels in it are named by it.
        "source": str(config.root / source.rel), "rel": source.rel,
        "aliases": [[str(place), name] for place, name in aliases(config.root, source.rel)], "cwd": str(source.cwd),
        "root": str(config.root.resolve()),
        "flags": list(source.flags), "virtual": arch.virtual, "real": arch.real, "target": target,
        "compiler": compiler, "nvcc": toolchain.nvcc.path, "artifacts": str(cache.artifacts(key)),
        "timeout": config.timeout, "nvrtc_includes": nvrtc_includes,
        "toolchain": {f"cuda.{compiler}": version},
        # What the configuration and the launch sites say of the file's kernels, applied by the facts stage (never
        # compiled in).
        "pdl": list(entry.pdl), "expect": {k: list(v) for k, v in entry.expect.items()}, "kind": dict(entry.kind),
        "launch_sites": sites,
    }
    return _Task(source, target, key, payload)


def longest_first(todo: list[_Task], durations: dict[str, float]) -> list[_Task]:
    """The compiles in the order to start them: longest first, so that the longest does not start last and leave
    the other cores idle at the end. How long a file takes is what an earlier run recorded for it (its compile
    seconds over all targets), else an estimate from the size of its text and its project headers', scaled by the
    recorded files' seconds per byte (files of one tree compile at a similar rate); ties in the files' order."""
    sizes = {id(task): _text_size(task.source) for task in todo}
    known = [durations[f"cuda:{t.source.rel}"] / sizes[id(t)] for t in todo
             if f"cuda:{t.source.rel}" in durations and sizes[id(t)]]
    rate = sorted(known)[len(known) // 2] if known else 1.0

    def seconds(task: _Task) -> float:
        return durations.get(f"cuda:{task.source.rel}", sizes[id(task)] * rate)

    return sorted(todo, key=lambda task: -seconds(task))


def _text_size(source: CudaSource) -> int:
    size = 0
    for path in (source.path, *source.headers):
        try:
            size += path.stat().st_size
        except OSError:
            continue
    return size


def _run_tasks(config: Config, todo: list[_Task], progress: Progress | None, pool: Pool, cache: Cache,
               run: Tally, errors: list[tuple[CudaSource, str, dict[str, Any]]], read: FilesRead,
               analyse: Analyse | None, needs: Needs | None = None
               ) -> list[tuple[_Task, Entry, Compiled, list[str] | None]]:
    """Compile the files; each one compiled, with its record, its unit and what `needs` says it lacks (compiler
    errors go to `errors`). `needs` reads each unit as its compile ends, while the others still compile: the
    main process's reading of the facts its worker kept is not left to after the last compile."""
    if not todo:
        return []
    done = 0
    unusable: list[str] = []
    fresh: list[tuple[_Task, Entry, Compiled, list[str] | None]] = []

    def finished(index: int, outcome: Outcome) -> None:
        nonlocal done
        task = todo[index]
        if outcome.cache_unwritable:
            raise CacheWriteError(outcome.error, config.cache_dir)
        run.replayable = run.replayable and not outcome.transient
        done += 1
        if progress:
            progress(done, len(todo), f"{task.source.rel} {task.target}")
        reply = outcome.answer(CudaReply) if outcome.ok else None
        if reply is not None and "toolchain_error" in reply:
            unusable.append(reply["toolchain_error"])
        elif reply is not None:
            value: dict[str, Any] = {k: v for k, v in reply.items() if k not in ("headers", "cubin")}
            if "error" in value:
                value.pop("artifacts", None)
            else:
                value["context"] = {k: task.payload[k] for k in IDENTITY}
            files = reply.get("headers")
            crossed = read.of_the_working_tree(files if isinstance(files, list) else [])
            if crossed:  # on a base revision's side: not the base's code, and no record of either side's inputs
                errors.append((task.source, task.target, {"error": (
                    f"the base revision's compile read {crossed[0]}, a file of the working tree named by absolute "
                    f"path, in place of the base's own copy: what it built is not the base's, so it is not "
                    f"compared (name the file relative to the source, or by an include folder)")}))
                run.compiled += 1
                return
            # The cubin this compile wrote, by the hash it was written with (another compile of the key may have
            # written the file under its plain name since).
            meta = {"cubin": reply.get("cubin"),
                    "headers": read.state(files if isinstance(files, list) else [])}
            cache.put("cuda", task.key, value, meta)
            if "error" in value:
                errors.append((task.source, task.target, value))
            else:
                unit = _unit(task, value, meta, cache)
                fresh.append((task, Entry(value, meta), unit, needs(unit) if needs is not None else []))
            run.compiled += 1
            run.compile_seconds[f"{task.source.rel}|{task.target}"] = outcome.seconds
        else:
            run.failures.append(CompileFailure(task.source.rel, "", task.target, task.source.rel, 1,
                                               first_line(outcome)))

    if progress:
        progress(0, len(todo), "")
    pool.run([Task("cuda.compile", _request(task, analyse)) for task in todo], config.timeout, finished)
    if unusable:
        raise ToolchainError(min(unusable))
    return fresh


class FilesRead:
    """The content hashes of the files CUDA compiles read, each file hashed once a run (through
    `kgate.support.atomicio.read_input`: one that has become a named pipe or a device is unreadable, not waited on).

    A file in the project is named relative to it (a cache restored into another checkout still holds), any
    other by its absolute path, both as the compiler reached them (a symlink is not resolved); on a base revision's
    side, a file of its checkout by the working tree's path, read in the checkout (`kgate.compile.sides`)."""

    def __init__(self, root: Path, checkout: Checkout | None = None) -> None:
        self.root = os.path.abspath(root)
        self.checkout = checkout
        self.hashes: dict[str, str | None] = {}

    def _name(self, path: str) -> str:
        rel = os.path.relpath(os.path.abspath(path), self.root)
        return named(path, self.checkout) if rel == os.pardir or rel.startswith(os.pardir + os.sep) else rel

    def hash(self, name: str) -> str | None:
        """The hash of a file by its name in a record (relative to the project, or absolute)."""
        if name not in self.hashes:
            path = on_this_side(name, self.checkout) if os.path.isabs(name) else os.path.join(self.root, name)
            try:
                self.hashes[name] = hashlib.sha256(read_input(path)).hexdigest()
            except (OSError, ValueError):
                self.hashes[name] = None
        return self.hashes[name]

    def state(self, paths: list[str]) -> dict[str, str | None]:
        """Name -> hash of the files a compile read (absolute paths, as the worker reports them)."""
        names = (self._name(path) for path in paths if isinstance(path, str) and os.path.isabs(path))
        return {name: self.hash(name) for name in sorted(set(names))}

    def of_the_working_tree(self, paths: list[Any]) -> list[str]:
        """The files a base revision's compile read that are the working tree's own, not the checkout's
        (`kgate.compile.sides.of_the_working_tree`); none on the working tree's side."""
        return sorted({path for path in paths if isinstance(path, str) and os.path.isabs(path)
                       and of_the_working_tree(path, self.checkout)})

    def unchanged(self, meta: dict[str, Any]) -> bool:
        """Whether every file a record's compile read has the content it had (a record that does not say what
        its compile read is not trusted)."""
        files = meta.get("headers")
        return isinstance(files, dict) and all(isinstance(path, str) and self.hash(path) == digest
                                               for path, digest in files.items())


def _disassemble(config: Config, todo: list[tuple[_Task, Entry, list[str]]], pool: Pool, cache: Cache,
                 run: Tally, *, cached: bool) -> list[_Task]:
    """SASS of the symbols a unit lacks (with those its listing held) from its cubin in the cache; the units go
    to `run`, and the tasks whose cubin could not be disassembled are returned (to compile, or to fail)."""
    again: list[_Task] = []

    def symbols(entry: Entry, lacking: list[str]) -> list[str]:
        return sorted({*(entry.value.get("sass_symbols") or ()), *lacking})

    def done(index: int, outcome: Outcome) -> None:
        task, entry, lacking = todo[index]
        if outcome.cache_unwritable:
            raise CacheWriteError(outcome.error, config.cache_dir)
        if not outcome.ok:
            again.append(task)
            return
        value = {**entry.value, "artifacts": {**entry.value["artifacts"], "sass": outcome.answer(str)},
                 "sass_symbols": symbols(entry, lacking)}
        cache.put("cuda", task.key, value, entry.meta)
        run.units.append(_unit(task, value, entry.meta, cache))
        if cached:
            run.cached += 1

    if todo:
        pool.run([Task("cuda.sass", FunctionsSassRequest(cubin=cubin_file(cache.artifacts(task.key),
                                                                          entry.meta.get("cubin"))[0],
                                                         symbols=symbols(entry, lacking)))
                  for task, entry, lacking in todo], config.timeout, done)
    return again


def _request(task: _Task, analyse: Analyse | None) -> CudaRequest:
    """The payload of the task that compiles the file `task` plans, with the facts stage's reading (`analyse`)."""
    request: CudaRequest = {**task.payload, "key": task.key}
    if analyse is not None:
        request["analyse"] = analyse
    return request


def _may_define(source: CudaSource, globs: list[str]) -> bool:
    """Whether a file that did not compile defines a kernel the `--kernel` globs could name."""
    names = defined_kernels(source)
    return any(matches(name, globs) for name in names) or not names


def launch_sites(config: Config, sources: list[CudaSource], compilers: dict[str, str] | None = None
                 ) -> tuple[list[LaunchSite], list[SmemSite]]:
    """The PDL launch sites and the dynamic shared memory sites in the sources and the project headers they include
    (a header's sizes may name its own constants; a source's, its headers' too). `compilers`: the compiler each
    table's `compiler` setting resolved to (nvcc where not given): nvcc's flag variables count for nvcc's files."""
    texts: dict[Path, tuple[str, tuple[str, ...]]] = {}
    headers_of: dict[Path, tuple[Path, ...]] = {}
    # The macros each source's compile defines (`-DSMEM=...`, in its flags or in nvcc's flag variables, where nvcc
    # puts them): its sizes may name them. A header's own sites read those that every source including it defines
    # alike (two builds of it may define one otherwise).
    given = {source.path: given_macros(nvcc_command_flags(source.flags) if (compilers or {}).get(
        source.entry.compiler, "nvcc") == "nvcc" else source.flags, str(source.cwd)) for source in sources}
    includers: dict[Path, list[dict[str, str]]] = {}
    for source in sources:
        for header in source.headers:
            includers.setdefault(header, []).append(given[source.path])
    for header, defined in includers.items():
        if header not in given:
            given[header] = {name: value for name, value in defined[0].items()
                             if all(other.get(name) == value for other in defined[1:])}
    for source in sources:
        for path in (source.path, *source.headers):
            if path not in texts:
                try:
                    texts[path] = (path.read_text(encoding="utf-8", errors="replace"), source.entry.launch_wrappers)
                except OSError:
                    continue
        headers_of.setdefault(source.path, tuple(source.headers))
    kernels: set[str] = set()
    for text, _wrappers in texts.values():
        if "__global__" in text:
            kernels.update(global_definitions(text))
    sites: list[LaunchSite] = []
    smem: list[SmemSite] = []
    known = [alias for source in sources for alias in aliases(config.root, source.rel)]
    for path in sorted(texts):
        text, wrappers = texts[path]
        shown = display_path(path, config.root, known)
        headers = tuple(texts[h][0] for h in headers_of.get(path, ()) if h in texts)
        sites.extend(pdl_launch_sites(text, shown, kernels, wrappers, headers, given.get(path)))
        smem.extend(every_smem_site(text, shown, kernels, headers, given.get(path), compiler=True))
    return sites, smem
