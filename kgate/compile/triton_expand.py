"""What the planner learns of a kernel by importing its module in a compile worker (its expansion: where it is
defined, its parameters, heuristics and autotune configs), cached by what the import read; a plain kernel is
read from its source instead (`kgate.collect.static_kernel`).
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

import kgate
from kgate.collect.modules import closure, import_roots
from kgate.compile import import_reads, import_times
from kgate.compile import records as record_shapes
from kgate.compile.cache import Cache, code_digest, digest
from kgate.compile.compilation import first_line, note_imported, note_recorded, stop_if_cache_unwritable
from kgate.compile.payloads import ExpandRequest, Expansion
from kgate.compile.pool import Pool
from kgate.compile.preflight import tools_of
from kgate.compile.protocol import Outcome, Task
from kgate.compile.triton_plan import Planned, python_path_order
from kgate.compile.worker_imports import MISSING_ATTRIBUTE
from kgate.core.config import Config
from kgate.support import reads


def expand_kernels(config: Config, planned: list[Planned], pool: Pool, cache: Cache, toolchain: dict[str, str],
            where: import_reads.View) -> None:
    """What each kernel looks like (parameters, autotune configs, definition line) and what importing its module
    reads (the key of its records): from the cache where every input that import read holds what it held, else
    by importing it in a worker. A plain kernel's expansion is read from its source all the same."""
    pres = {id(p): digest("import", kgate.__version__, code_digest(), tools_of(p.language, toolchain), p.kernel,
                          p.source_key)
            for p in planned if p.error is None}
    found_in = import_roots(config.root, config.python_path)
    covered = {id(p): _static_names(p, found_in, where) for p in planned if p.error is None}
    todo = []
    for p in planned:
        if p.error is not None:
            continue
        found = import_reads.find(cache, pres[id(p)], where)
        hit = cache.entry("expand", found[0], record_shapes.expansion) if found is not None else None
        if found is not None and hit is not None:
            p.import_key, p.reads = found
            p.expansion = p.expansion or hit.value
            note_recorded(hit.meta)
            note_reads(p.reads, where)
        else:
            todo.append(p)

    def expanded(index: int, outcome: Outcome) -> None:
        p = todo[index]
        stop_if_cache_unwritable(config, outcome)
        if outcome.transient:
            p.transient = True
        note_reads(outcome.reads or {}, where)  # failed or not: an import that fails on a variable unset
        if outcome.ok:
            p.reads = {n: v for n, v in (outcome.reads or {}).items() if n not in covered[id(p)]}
            expansion: dict[str, Any] = dict(outcome.answer(Expansion))
            p.expansion = p.expansion or expansion
            if import_reads.keyable(p.reads):  # else no key: neither it nor its compiles are kept
                made = import_reads.key(pres[id(p)], p.reads)
                cache.put("expand", made, expansion, {"imported": note_imported(outcome.imported)})
                p.import_key = import_reads.remember(cache, pres[id(p)], p.reads)
        elif p.expansion is None:
            p.error = first_line(outcome)
            p.missing = outcome.user_error and MISSING_ATTRIBUTE in p.error
            p.where = outcome.where
        # else a plain kernel, planned from its source: its compile reports what its import does (per variant)

    if todo:
        roots, cwd = project_roots(config), import_folder(config)
        pool.run([Task(f"{p.language}.expand",
                       ExpandRequest(kernel=p.kernel, sys_path=p.sys_path, roots=roots, cwd=cwd,
                                     checkout=list(config.checkout_of or ()))) for p in todo],
                 config.timeout, expanded)


def _static_names(p: Planned, roots: list[Path], where: import_reads.View) -> frozenset[str]:
    """The reads of the kernel's module and the project modules it imports by statement: the static key holds
    their text already, the kernel module's by the parts the kernel uses (an edit of another kernel of the
    module recompiles that kernel only)."""
    if p.file is None:
        return frozenset()
    return frozenset(f"{kind}:{where.name(str(path))}" for path in closure(p.file, roots) for kind in ("file", "stat"))


def note_reads(read: dict[str, Any], where: import_reads.View) -> None:
    """What a kernel module's import read, as inputs of this run for its replay (`kgate.support.reads`)."""
    for name in read:
        kind, _, rest = name.partition(":")
        if kind == "env":
            reads.note_env(rest)
        elif kind == "pythonpath":
            reads.note_env("PYTHONPATH")
        elif kind == import_reads.UNRECORDED:  # what it read cannot be looked at again: the run is not replayed
            reads.note_unreadable()
        elif kind in ("dir", "dists", "entries"):
            reads.note_folder(where.path(rest))
            if kind == "entries":  # what each entry is (its kind and size) as well as its name
                for name in reads.listing(where.path(rest), []) or []:
                    reads.note(os.path.join(where.path(rest), name))
        elif kind in ("file", "text", "stat", "lstat", "link", *import_times.KINDS):
            reads.note(where.path(rest))


def import_folder(config: Config) -> str:
    """The folder kernel modules are imported in: where kgate runs; on a base revision's side, that folder in its
    checkout (so that a path relative to it names the base's file), or the checkout's root where it has none."""
    here = os.path.abspath(os.getcwd())
    if config.checkout_of is None:
        return here
    top, tree = config.checkout_of
    inside = os.path.relpath(os.path.realpath(here), os.path.realpath(top))
    if inside == os.pardir or inside.startswith(os.pardir + os.sep):
        return here
    folder = os.path.normpath(os.path.join(tree, inside))
    return folder if os.path.isdir(folder) else tree


def project_roots(config: Config) -> list[str]:
    """The folders a compile worker takes for the project's (`kgate.compile.frames`): its root and python-path."""
    return list(dict.fromkeys([str(config.root.resolve()), *(str(folder) for folder in python_path_order(config))]))
