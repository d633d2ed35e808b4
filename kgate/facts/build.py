"""KernelFacts from a compiled unit's artifacts: one builder for Triton variants and CUDA files.

The builder calls every derived field's extractor (`kgate.facts.model.fact`) on the unit's parsed artifacts,
for each entry the unit gates, and adds the context the plan gave: a Triton variant's identity and options from
its compile record; a CUDA kernel's name, definition and threads per CTA from the PTX entry's directives and
the project's sources. Nothing here runs a tool.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any, TypeVar

from kgate.collect.cuda_names import (
    base_name,
    definition_line,
    display_names,
    global_definitions,
    global_parameters,
    matches,
    template_head,
)
from kgate.collect.files import display_path
from kgate.compile.units import Compiled
from kgate.facts.extract import Sources
from kgate.facts.model import KernelFacts, derived_fields

F = TypeVar("F", bound=KernelFacts)
ASSUMED_THREADS = 128  # threads per CTA when a CUDA kernel declares no __launch_bounds__


def derive(model: type[KernelFacts], src: Sources, entry: str) -> dict[str, Any]:
    """Every derived fact of `model` for one PTX entry: field name -> value."""
    return {f.name: f.metadata["extract"](src, entry) for f in derived_fields(model)}


def build(model: type[F], context: dict[str, Any], src: Sources, entry: str) -> F:
    data = {**context, **derive(model, src, entry)}
    data["expect"] = tuple(data.get("expect", ()))
    data["shapes"] = tuple(data.get("shapes", ()))
    return model(**data)


def unit_facts(unit: Compiled, src: Sources, model: type[F] = KernelFacts) -> list[tuple[str, F]]:  # type: ignore[assignment]
    """(PTX entry, facts) of every kernel a unit gates: a Triton variant's one entry, the kernels a CuTe DSL call
    launches, a CUDA file's own kernels."""
    if unit.language == "triton":
        entry = src.ptx.entry().name
        return [(entry, build(model, launched_warps(unit.context, src, entry), src, entry))]
    if unit.language == "cute":
        return [(entry, build(model, context, src, entry)) for entry, context in cute_kernels(unit.context, src)]
    return [(entry, build(model, context, src, entry)) for entry, context in cuda_kernels(unit.context, src)]


def launched_warps(context: dict[str, Any], src: Sources, entry: str) -> dict[str, Any]:
    """A Triton variant's context with the warps its CTA is launched with: what its PTX requires (`.reqntid`), where
    it says. That is the launch's `num_warps` but for a warp-specialised kernel (`gl.warp_specialize`, Triton's
    `warp_specialize=True` loops), whose worker partitions add warps, rounded up to warpgroups: its occupancy was
    figured for the default partition's warps only."""
    header = src.headers.get(entry)
    if header is None or not header.max_threads:
        return context
    return {**context, "num_warps": max(1, -(-header.max_threads // 32))}


def cute_kernels(context: dict[str, Any], src: Sources) -> list[tuple[str, dict[str, Any]]]:
    """(symbol, context) of each kernel a CuTe DSL call launches, in the PTX's order: the call's one kernel is the
    registered name; of several, each is the registered name and its `@cute.kernel` (`pkg.mod:fn/kernel`). A CTA's
    warps are what the kernel's PTX requires (`.reqntid`, from the launch's static block size)."""
    symbols = src.entry_names()
    headers = src.headers
    out = []
    for symbol in symbols:
        header = headers.get(symbol)
        threads = header.max_threads if header and header.max_threads else ASSUMED_THREADS
        kernel = context["kernel"] if len(symbols) == 1 else f"{context['kernel']}/{cute_kernel_name(symbol)}"
        out.append((symbol, {**context, "kernel": kernel, "num_warps": max(1, -(-threads // 32)),
                             "captured": tuple(context.get("captured", ()))}))
    return out


def cute_kernel_name(symbol: str) -> str:
    """A `@cute.kernel`'s name in its PTX symbol (`kernel_cutlass_<name>_<argument types>_<n>`), as far as the symbol
    tells it: the part before the DSL's mangled arguments."""
    body = symbol.removeprefix("kernel_").removeprefix("cutlass_")
    for marker in ("_tensor", "_object_at_", "_ptr", "_Tensor"):
        if marker in body:
            return body.split(marker, 1)[0] or symbol
    return body.rsplit("_", 1)[0] or symbol


def pdl_scope(context: Mapping[str, Any]) -> tuple[list[str], list[str]] | None:
    """What decides which of a CUDA file's kernels may be PDL: the configuration's `pdl` globs and the kernels PDL
    launch sites name (`kgate.facts.run.configured` makes a kernel PDL by these alone). None for a unit of another
    language (its accesses before a wait are traced whatever it is)."""
    if "launch_sites" not in context or "pdl" not in context:
        return None
    return sorted(context["pdl"]), sorted({site.kernel for site in context["launch_sites"]})


def pdl_candidates(context: Mapping[str, Any]) -> Callable[[list[str]], set[str]] | None:
    """Of a CUDA file's PTX entries, those that may be PDL (`pdl_scope`): the only ones whose accesses before a wait
    a rule reads, so the only ones traced. None: every entry."""
    scope = pdl_scope(context)
    if scope is None:
        return None
    globs, launched = scope

    def candidates(symbols: list[str]) -> set[str]:
        if not globs and not launched:
            return set()
        names = display_names(symbols)
        return {s for s in symbols if base_name(names[s]) in launched or matches(names[s], globs)}

    return candidates


def cuda_kernels(payload: dict[str, Any], src: Sources) -> list[tuple[str, dict[str, Any]]]:
    """(symbol, context) of each kernel a CUDA file defines or instantiates, sorted by name. A kernel of the CUDA
    C++ core libraries that ship with the toolkit (CUB, Thrust, libcu++), instantiated there by a call into them,
    is not the project's to gate. A template kernel of another library outside the project (CUTLASS's
    `device_kernel<GemmKernel>`) is: its template arguments are the project's tile, stage and schedule choices. It
    is placed at the file that instantiates it."""
    headers = src.headers
    names = display_names(src.entry_names())
    root = Path(payload["root"])
    # Where the project reaches files through symlinks: a kernel defined there is the project's, named that way.
    known = [(Path(place), name) for place, name in payload.get("aliases", [])]
    definitions: dict[Path, dict[str, list[int]]] = {}
    parameter_lists: dict[Path, dict[int, tuple[str, ...]]] = {}
    out = []
    for symbol in src.entry_names():
        header = headers.get(symbol)
        where = _definition_file(header.first_loc.file if header and header.first_loc else None, payload)
        if where is None:
            continue
        display = names[symbol]
        hint = header.first_loc.line if header and header.first_loc else None
        if not any(where.is_relative_to(place) for place in [root, *(p for p, _n in known)]):
            if _core_library(where) or template_head(symbol) is None:
                continue  # the toolkit's own, or a library's kernel the project did not instantiate
            where, hint = Path(payload["source"]).resolve(), None
        if base_name(display) not in _cached_definitions(definitions, where):
            # The first line the entry names is not its own (an inlined helper's): look in the file compiled.
            source = Path(payload["source"]).resolve()
            if base_name(display) in _cached_definitions(definitions, source):
                where, hint = source, None
        line = definition_line(definitions[where], base_name(display), hint) or hint or 1
        threads = header.max_threads if header and header.max_threads else ASSUMED_THREADS
        declared = _cached_parameters(parameter_lists, where).get(line)
        # The source's names stand for the PTX's parameters only where they are as many (not a macro's list).
        parameters = declared if declared is not None and header and len(declared) == header.parameters else ()
        out.append((symbol, {
            "kernel": display, "variant": payload["rel"], "target": payload["target"], "language": "cuda",
            "path": display_path(where, root, known), "line": line, "kind": "other",
            "num_warps": max(1, -(-threads // 32)), "num_stages": None, "expect": (), "pdl": False,
            "toolchain": dict(payload.get("toolchain", {})), "parameters": parameters,
        }))
    return sorted(out, key=lambda item: item[1]["kernel"])


_CORE_LIBRARIES = frozenset({"cub", "thrust", "cuda"})  # CCCL's include folders (`cuda/std/...` is libcu++)
_INCLUDE_FOLDERS = frozenset({"include", "cccl"})


def _core_library(path: Path) -> bool:
    """Whether a header is one of the CUDA C++ core libraries the toolkit ships: a `cub`, `thrust` or `cuda` folder
    right under an include folder (`.../include/cub/...`, CUDA 13's `.../include/cccl/thrust/...`, the NVIDIA
    wheels' `.../cu13/include/cccl/cub/...`)."""
    parts = path.parts
    return any(part in _CORE_LIBRARIES and parts[i - 1] in _INCLUDE_FOLDERS for i, part in enumerate(parts) if i)


def _definition_file(name: str | None, payload: dict[str, Any]) -> Path | None:
    if name is None:
        return Path(payload["source"]).resolve()
    path = Path(name)
    if not path.is_absolute():
        path = Path(payload["cwd"]) / path
    try:
        return path.resolve()
    except OSError:
        return None


def _cached_definitions(cache: dict[Path, dict[str, list[int]]], path: Path) -> dict[str, list[int]]:
    if path not in cache:
        cache[path] = _definitions(path)
    return cache[path]


def _cached_parameters(cache: dict[Path, dict[int, tuple[str, ...]]], path: Path) -> dict[int, tuple[str, ...]]:
    """The parameter names of each `__global__` of a file, by its line (`global_parameters`)."""
    if path not in cache:
        try:
            cache[path] = global_parameters(path.read_text(encoding="utf-8", errors="replace"))
        except OSError:
            cache[path] = {}
    return cache[path]


def _definitions(path: Path) -> dict[str, list[int]]:
    try:
        return global_definitions(path.read_text(encoding="utf-8", errors="replace"))
    except OSError:
        return {}
