"""The plan of a Triton, Gluon or CuTe DSL compile: one `Planned` kernel for its registrations and captured
specialisations, and the variants each compiles (a registration's launches, a capture's specialisations), each
with the targets it is built for; what cannot be planned is a failure (a finding) instead. Main-process side:
nothing here imports Triton or the project's modules.
"""

from __future__ import annotations

import json
import os
import posixpath
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from kgate.collect.captures import CapturedSpec
from kgate.collect.files import Alias, aliases, relpath
from kgate.collect.modules import kernel_source_key, module_file
from kgate.collect.specialization import readable_name
from kgate.collect.static_kernel import static_expansion
from kgate.compile import cute_plan, expectations, launches
from kgate.compile.compilation import Tally
from kgate.compile.payloads import Variant
from kgate.compile.relocate import def_line, def_spans
from kgate.compile.units import CompileFailure
from kgate.core.config import Config, PythonEntry, TritonEntry
from kgate.core.cute import CuteEntry
from kgate.core.entry import KernelName
from kgate.core.findings import Related
from kgate.support.atomicio import read_input_text


@dataclass
class Planned(KernelName):
    """One kernel to gate: its registrations and its captured specialisations, planned together."""

    kernel: str
    entries: list[PythonEntry]
    captured: list[CapturedSpec]
    source_key: str
    sys_path: list[str]
    expansion: dict[str, Any] | None = None
    error: str | None = None
    missing: bool = False  # the error is that the kernel (or its module) does not exist
    file: Path | None = None  # the kernel's module file
    import_root: Path | None = None  # the python-path folder (resolved) it was found under
    spans: dict[str, tuple[int, int]] = field(default_factory=dict)  # its top-level defs, when planned
    transient: bool = False  # its expansion timed out or its worker died
    where: tuple[str, int] | None = None  # the project's line that raised while the kernel was imported (shown)
    # What importing its module read (`kgate.compile.import_reads`) and the key that makes: its records' key.
    reads: dict[str, Any] = field(default_factory=dict)
    import_key: str = ""

    @property
    def language(self) -> str:
        """The front end its compile worker tasks are named by: "triton" (Gluon too) or "cute"."""
        return cute_plan.language(self.entries)


def config_line(config: Config, needle: str) -> int:
    """The line of the configuration file that mentions `needle` (1 if none)."""
    if config.source is None:
        return 1
    try:
        for number, line in enumerate(read_input_text(config.source).splitlines(), 1):
            if needle in line:
                return number
    except (OSError, UnicodeDecodeError):
        pass
    return 1


def _entry_location(config: Config, entry: PythonEntry) -> tuple[str, int]:
    origin = entry.origin.split(": ")[0]
    if ":" in origin and origin.rsplit(":", 1)[1].isdigit():
        path, line = origin.rsplit(":", 1)
        return path, int(line)
    return config.display(), config_line(config, entry.kernel)


def plan_variants(entry: TritonEntry, expansion: dict[str, Any]) -> list[Variant]:
    """Every launch a registration describes, as what to bind; raises ValueError when it does not fit the kernel.

    One launch per config (autotune) or variant, times one per `args` table. Each carries the example
    arguments Triton's launcher binds in the compile worker (`bind`): the values of `args`, else ones made
    from the signature (`example_argument`).
    """
    params = expansion["params"]
    runtime = [p["name"] for p in params if not p["constexpr"]]
    constexpr_params = [p for p in params if p["constexpr"]]
    tables = list(entry.args) or [{}]
    given = set(entry.signature).union(*tables)
    # A run-time argument may also take its value from `constexprs` (an older way to say "launched as 1").
    missing = sorted({name for name in runtime for table in tables
                      if name not in table and name not in entry.signature and name not in entry.constexprs},
                     key=runtime.index)
    unknown = [name for name in entry.signature if name not in runtime]
    unknown += sorted(name for name in given - set(entry.signature) if name not in runtime)
    problems = []
    if missing:
        problems.append(f"signature lacks {', '.join(missing)}")
    if unknown:
        problems.append(f"signature names {', '.join(unknown)}, not run-time parameters of the kernel")
    if problems:
        raise ValueError("registration does not match the kernel: " + "; ".join(problems))
    bases: list[dict[str, Any]] = []
    if expansion["configs"]:
        for cfg in expansion["configs"]:
            bases.append({"constexprs": {**entry.constexprs, **cfg["kwargs"]}, "num_warps": cfg["num_warps"],
                          "num_stages": cfg["num_stages"], "maxnreg": cfg.get("maxnreg")})
    else:
        bases.append({"constexprs": dict(entry.constexprs), "num_warps": entry.num_warps,
                      "num_stages": entry.num_stages, "maxnreg": None})
    for override in entry.variants:
        extra = {k: v for k, v in override.items() if k not in ("num_warps", "num_stages")}
        bases.append({"constexprs": {**entry.constexprs, **extra},
                      "num_warps": override.get("num_warps", entry.num_warps),
                      "num_stages": override.get("num_stages", entry.num_stages), "maxnreg": None})
    request = expectations.requested(entry.expect)
    names = {p["name"] for p in params}
    computed = set(expansion["heuristics"])  # given by the kernel's heuristics when it is bound
    divisible = set(entry.divisible) if entry.divisible is not None else {
        name for name, ty in entry.signature.items() if ty.startswith("*") or ty in _INTEGERS}
    out: dict[str, Variant] = {}
    for b in bases:
        bad = [k for k in b["constexprs"] if k not in names]
        if bad:
            raise ValueError(f"constexprs name {', '.join(sorted(bad))}, not parameters of the kernel")
        unset = [p["name"] for p in constexpr_params if p["name"] not in b["constexprs"] and not p["has_default"]
                 and p["name"] not in computed]
        if unset:
            raise ValueError(f"constexpr parameter(s) without a value: {', '.join(unset)}")
        options: dict[str, Any] = {"num_warps": b["num_warps"], "num_stages": b["num_stages"]}
        if b["maxnreg"]:
            options["maxnreg"] = b["maxnreg"]
        if entry.pdl:
            options["launch_pdl"] = True
        constexprs = {k: v for k, v in b["constexprs"].items() if k not in runtime}
        for table in tables:
            args = {name: table[name] if name in table else b["constexprs"][name] if name in b["constexprs"]
                    else example_argument(name, entry.signature[name], divisible) for name in runtime}
            bind = {"args": args, "constexprs": constexprs, "options": options}
            key = json.dumps(bind, sort_keys=True)
            out[key] = {
                "kernel": entry.kernel, "name": readable_name(constexprs, options), "source": "registered",
                "pdl": entry.pdl, "kind": entry.kind, **request, "shapes": [dict(s) for s in entry.shapes],
                "bind": bind,
            }
    return [out[k] for k in sorted(out)]


# The default example values, by the signature's type, when a registration gives no `args`: a pointer
# 16-byte aligned, an integer of the type's range divisible by 16 (both unless `divisible` lists the arguments
# that are), a float. Triton's launcher turns them into the specialisation. Measured on captures of real
# launches (Liger-Kernel and unsloth ops at LLM shapes): of 286 integer arguments, 212 were specialised as
# divisible by 16, 52 as equal to 1 and 22 as neither; every pointer was 16-byte aligned.
_INTEGERS = {"i8": 16, "i16": 16, "i32": 4096, "u8": 16, "u16": 16, "u32": 4096, "i64": 2**33, "u64": 2**63}


def example_argument(name: str, ty: str, divisible: set[str]) -> Any:
    if ty.startswith("*"):
        return {"type": ty, "align": 16 if name in divisible else 8}
    if ty.startswith("tensordesc<"):  # made in the compile worker: a descriptor of the type, for the launcher
        return {"type": ty, "align": 16}
    if ty in _INTEGERS:
        return _INTEGERS[ty] + (0 if name in divisible else 1)
    if ty in ("i1", "u1"):
        return True
    if ty in ("fp16", "bf16", "fp32", "fp64"):
        return 1.5
    raise ValueError(f"signature.{name} = {ty!r}: kgate cannot make an example value of this type; give one in `args`")


def captured_variant(planned: Planned, captured: CapturedSpec) -> Variant:
    """A captured specialisation to compile as it is; kind, expect and audit shapes from the registrations of the
    same kernel when there are some (what all of them ask, `kgate.compile.launches`)."""
    spec = captured.spec
    variant: Variant = {
        "kernel": spec.kernel, "name": spec.variant, "source": "captured", "pdl": spec.pdl, "kind": "other",
        **expectations.requested(None), "shapes": [], "spec": spec.to_record(),
    }
    asked: list[Variant] = [{**variant, "kind": e.kind, "shapes": [dict(s) for s in e.shapes],
                             **expectations.requested(e.expect)} for e in planned.entries]
    for index, request in enumerate(asked):
        variant = request if index == 0 else launches.merge_requests(variant, request)
    return variant


def plan_kernels(config: Config, entries: list[PythonEntry], captured: list[CapturedSpec],
                  roots: list[Path]) -> list[Planned]:
    """One plan per kernel, registered or captured: its module file and the hash of its source."""
    by_kernel: dict[str, Planned] = {}
    for entry in entries:
        by_kernel.setdefault(entry.kernel, Planned(entry.kernel, [], [], "", [])).entries.append(entry)
    for item in captured:
        by_kernel.setdefault(item.spec.kernel, Planned(item.spec.kernel, [], [], "", [])).captured.append(item)
    closures: dict[Path, str] = {}
    planned = []
    for p in by_kernel.values():
        planned.append(p)
        blocked: list[Path] = []
        found = module_file(p.module, roots, blocked)
        if found is None:
            p.error = f"cannot find module {p.module} under python-path ({', '.join(config.python_path)})"
            p.missing = not blocked
            if blocked:
                p.error = f"cannot read {relpath(blocked[0], config.root)}: Permission denied"
            continue
        try:
            with open(found[0], "rb"):  # the index takes an unreadable file for an empty one: ask first
                pass
            p.source_key = kernel_source_key(found[0], p.function, roots, config.root, closures)
            p.expansion = static_expansion(found[0], p.function, roots)
        except OSError as exc:  # the module, or a project module it imports, cannot be read
            p.error = f"cannot read {relpath(Path(exc.filename or found[0]), config.root)}: {exc.strerror}"
            continue
        # Every python-path entry reaches the worker (a module re-exporting a kernel from another entry imports
        # it from there), the kernel module's own first so that its name resolves as it did here.
        p.sys_path = list(dict.fromkeys([str(found[1]), *(str(r) for r in python_path_order(config))]))
        p.file, p.import_root, p.spans = found[0], found[1], def_spans(found[0])
    return planned


def python_path_order(config: Config) -> list[Path]:
    """The python-path folders that exist, resolved, in the order the configuration lists them (sys.path's)."""
    out = []
    for entry in config.python_path:
        folder = (config.root / entry).resolve()
        if folder.is_dir() and folder not in out:
            out.append(folder)
    return out


def path_aliases(config: Config, planned: list[Planned]) -> list[Alias]:
    """How the project names the places its kernel modules are in: python-path entries (outside the project
    too: "../shared") and symlinked folders on the way to each module, for paths that are the same on every
    machine."""
    written: dict[Path, str] = {}
    for entry in config.python_path:
        written.setdefault((config.root / entry).resolve(), entry)
    known = [alias for entry in config.python_path for alias in aliases(config.root, entry)]
    for p in planned:
        if p.file is not None and p.import_root in written:
            name = posixpath.join(written[p.import_root], p.file.relative_to(p.import_root).as_posix())
            known += aliases(config.root, posixpath.normpath(name))
    return known


def variants_of(config: Config, p: Planned, run: Tally,
              targets: tuple[str, ...]) -> list[tuple[Variant, tuple[str, ...]]]:
    """The kernel's variants to compile, each with the run's targets it is built for; what cannot be planned
    becomes a failure (a finding) instead, unless the registration is built for none of the run's targets."""
    entries = [(entry, tuple(t for t in targets if entry.builds_for(t))) for entry in p.entries]
    entries = [(entry, built_for) for entry, built_for in entries if built_for]
    # Captured launches follow the kernel's registrations when every one of them names its targets.
    captured_for = targets if not p.entries or any(e.targets is None for e in p.entries) else tuple(
        t for t in targets if any(e.builds_for(t) for e in p.entries))
    if p.error is not None or p.expansion is None:
        error = p.error or "not expanded"
        for entry, _built_for in entries:
            run.failures.append(_unloadable(p, _entry_location(config, entry), error, "registered here"))
        if p.captured and captured_for and p.missing:
            run.failures.append(_stale(config, p, p.captured, error))
        elif p.captured and captured_for:
            line = min(item.line for item in p.captured) or 1
            run.failures.append(_unloadable(p, (config.capture, line), error, "captured here"))
        return []
    variants: list[tuple[Variant, tuple[str, ...]]] = []
    for entry, built_for in entries:
        try:
            planned = cute_plan.variants(entry, p.expansion) if isinstance(entry, CuteEntry) \
                else plan_variants(entry, p.expansion)
            variants.extend((variant, built_for) for variant in planned)
        except ValueError as exc:
            path, line = _entry_location(config, entry)
            run.failures.append(CompileFailure(p.kernel, "", "", path, line, str(exc)))
    stale: dict[str, list[CapturedSpec]] = {}
    for item in p.captured if captured_for else ():
        why = item.spec.mismatch(p.expansion["params"])
        # Gated where the launch happens: on the targets its captures bound for, unless the launchers say they
        # bind alike on every device.
        item_for = captured_for if config.device_independent_launchers else \
            tuple(t for t in captured_for if item.applies_to(t))
        if why is None and item_for:
            try:
                variants.append((captured_variant(p, item), item_for))
            except launches.Conflict as exc:
                run.failures.append(conflict(config, p, str(exc)))
        elif why is not None:
            stale.setdefault(why, []).append(item)
    for why, items in sorted(stale.items()):
        run.failures.append(_stale(config, p, items, why))
    # Two registrations of one launch are one variant asking for what both ask, whichever compiles first.
    variants, conflicts = launches.merged(variants, targets)
    run.failures.extend(conflict(config, p, message) for message in conflicts)
    return variants


def conflict(config: Config, p: Planned, message: str) -> CompileFailure:
    path, line = _entry_location(config, p.entries[0])
    return CompileFailure(p.kernel, "", "", path, line, message)


def _unloadable(p: Planned, entry: tuple[str, int], error: str, what: str) -> CompileFailure:
    """A kernel that could not be loaded, at the project's line that raised when there is one (a helper module the
    kernel's module imports), with the registration or capture as a related place; else at that entry."""
    if p.where is None or p.where == entry:
        return CompileFailure(p.kernel, "", "", entry[0], entry[1], error)
    return CompileFailure(p.kernel, "", "", p.where[0], p.where[1], error,
                          related=(Related(entry[0], entry[1], f"{p.kernel} {what}"),))


def origins(config: Config, p: Planned, variant: Variant) -> list[Related]:
    """Where a variant comes from: the capture file's entry of a captured one, the kernel's registrations for a
    registered one."""
    if variant["source"] == "captured":
        lines = [c.line for c in p.captured if c.spec.variant == variant["name"]] or [1]
        return [Related(config.capture, min(lines) or 1, f"{p.kernel} captured here")]
    places = dict.fromkeys(_entry_location(config, entry) for entry in p.entries)
    return [Related(path, line, f"{p.kernel} registered here") for path, line in places]


def _stale(config: Config, p: Planned, items: list[CapturedSpec], why: str) -> CompileFailure:
    """One finding for a kernel's captured specialisations that no longer fit it; they are not compiled."""
    line = min(item.line for item in items) or 1
    count = len(items)
    return CompileFailure(p.kernel, "", "", config.capture, line,
                          f"{count} captured specialisation(s) of {p.kernel} no longer fit the kernel: {why}; "
                          f"capture again (`kgate capture --replace -- COMMAND`)", kind="stale")


def defined_in_file(p: Planned, expansion: dict[str, Any] | None) -> bool:
    """Whether the kernel's definition is in the file it was registered from (not imported into it)."""
    if p.file is None or not expansion:
        return False
    return os.path.realpath(expansion.get("path", "")) == os.path.realpath(p.file)


def current_line(p: Planned, expansion: dict[str, Any]) -> dict[str, Any]:
    """The expansion with the kernel's `def` line as the source has it now (an expansion may come from the cache)."""
    if p.file is None or not defined_in_file(p, expansion):
        return expansion
    line = def_line(p.file, p.function)
    return {**expansion, "line": line} if line and line != expansion.get("line") else expansion
