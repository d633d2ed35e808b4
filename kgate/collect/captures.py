"""The capture file (`kgate-capture.toml`): the specialisations a project launches, recorded by `kgate capture`.

Committed with the project and gated by `kgate check`, so its format is for review: one
`[[specialization]]` table per specialisation, sorted by kernel and variant, keys in a fixed
order, nothing that changes from run to run (launch counts only when asked), so capturing an
unchanged project again gives the same bytes:

    # kgate capture: the Triton specialisations this project launches ...
    version = 1

    [captured."cpu sm_120a"]
    capability = "12.0"
    triton = "3.9.0"

    [[specialization]]
    kernel = "pkg.norm:rmsnorm_kernel"
    variant = "BLOCK=1024,warps=4,stages=3#3fa2c1d0"
    signature = { n_cols = "i32", x = "*bf16", y = "*bf16" }
    constexprs = { BLOCK = 1024 }
    divisible = ["n_cols", "x", "y"]
    equal_to_1 = ["stride"]
    options = { num_stages = 3, num_warps = 4 }
    captured = ["cpu sm_120a"]

`variant` is derived from the other fields; a table whose `variant` does not match them was
edited by hand or written by another kgate, and is refused rather than gated as something else.

Each `[captured."..."]` table describes an environment the entries name in `captured`: its Triton and the compute
capability its launcher bound for (a GPU's own, or the target of an offline capture), which says on which target
its entries are launched (`CapturedSpec.applies_to`). A file an older kgate wrote has no `capability`: an offline
environment's target is read from its name (`cpu sm_120a`), and a GPU's is not known, so its entries apply to every
target, as they did.
"""

from __future__ import annotations

import json
import math
import os
import re
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

from kgate.collect.specialization import Specialization
from kgate.core.config import parse_cute_entry, toml_document, toml_string
from kgate.core.cute import CuteEntry
from kgate.core.errors import CaptureError, KgateError
from kgate.core.schema import CAPABILITY, KNOWN_TARGETS, MAX_INT64
from kgate.support.atomicio import atomic_write, read_input

FORMAT_VERSION = 1
DEFAULT_FILE = "kgate-capture.toml"
HEADER = ("# kgate capture: the Triton specialisations this project launches, as Triton's launcher bound them.\n"
          "# `kgate check` gates every one; `kgate capture -- COMMAND` records them again. Review every change.\n")
_ENTRY_KEYS = ("kernel", "variant", "signature", "constexprs", "divisible", "equal_to_1", "none", "options",
               "captured", "picked", "launches")


@dataclass(frozen=True)
class CapturedSpec:
    """One captured specialisation and where it was seen."""

    spec: Specialization
    captured: tuple[str, ...] = ()  # the environments that launched it ("NVIDIA H200", "cpu sm_120a")
    picked: bool = False  # an autotuner chose this config on a GPU
    launches: int | None = None  # only when counted
    line: int = 0  # its [[specialization]] line in the file
    # Beside each environment of `captured`, the target its launcher bound for (`environment_target`): a kgate
    # target, another GPU's "sm_89", or None where the file does not say (a GPU capture of an older kgate). Empty:
    # not read from a file (every target).
    bound_for: tuple[str | None, ...] = ()

    @property
    def key(self) -> str:
        return json.dumps(self.spec.to_record(), sort_keys=True)

    def applies_to(self, target: str) -> bool:
        """Whether the launch this records happens on `target`: one of its environments bound for it, or one of them
        does not say what it bound for."""
        return not self.bound_for or any(bound is None or bound == target for bound in self.bound_for)

    def environments_for(self, target: str) -> tuple[str, ...]:
        """The environments whose capture of this entry is gated on `target`: those that bound for it and those that
        do not say; all of them where none does (a project whose launchers are device-independent)."""
        pairs = list(zip(self.captured, self.bound_for or (None,) * len(self.captured)))
        return tuple(where for where, bound in pairs if bound == target) \
            or tuple(where for where, bound in pairs if bound is None) or self.captured


def capability_arch(value: object) -> int | None:
    """A compute capability written "major.minor" ("9.0", "12.0") as Triton numbers it (90, 120); None for any
    other value."""
    major, dot, minor = value.partition(".") if isinstance(value, str) else ("", "", "")
    if not (dot and major.isascii() and minor.isascii() and major.isdigit() and minor.isdigit() and len(minor) == 1):
        return None
    return int(major) * 10 + int(minor)


def environment_target(where: str, table: dict[str, str]) -> str | None:
    """The target an environment's launcher bound for: from its `capability` (`sm_90a` for 9.0; `sm_89` for a GPU
    of no kgate target), else from an offline capture's name (`cpu sm_120a`); None where neither says (a GPU
    capture written by an older kgate)."""
    arch = capability_arch(table.get("capability"))
    if arch is not None:
        return next((target for target, number in CAPABILITY.items() if number == arch), f"sm_{arch}")
    device, _, target = where.partition(" ")
    return target if device == "cpu" and target in KNOWN_TARGETS else None


@dataclass
class CaptureFile:
    environments: dict[str, dict[str, str]] = field(default_factory=dict)  # where -> {"triton": version}
    entries: list[CapturedSpec] = field(default_factory=list)
    # The CuTe DSL calls recorded (`[[cute]]`): a call's arguments are its specialisation, so each is gated as a
    # registration of it would be (`kgate.core.cute`).
    cute: list[CuteEntry] = field(default_factory=list)

    def kernels(self) -> list[str]:
        return sorted({e.spec.kernel for e in self.entries} | {e.kernel for e in self.cute})


# --------------------------------------------------------------------------- reading


def load(path: Path, display: str) -> CaptureFile:
    """Read the capture file; a missing one is empty, a broken one a CaptureError naming the line."""
    try:
        raw = read_input(path)
    except FileNotFoundError:
        if os.path.islink(path):  # a link whose file is gone (moved, not checked out) is no file never captured
            raise CaptureError(f"is a symbolic link to {os.readlink(path)!r}, which does not exist",
                               path=display) from None
        return CaptureFile()
    except IsADirectoryError:
        raise CaptureError("is a folder, not a capture file", path=display) from None
    except OSError as exc:
        raise CaptureError(f"cannot read it: {exc.strerror}", path=display) from None
    return parse(raw, display)


def parse(raw: bytes, where: str) -> CaptureFile:
    data, text = toml_document(raw, where, CaptureError, "not valid UTF-8 (capture again with `kgate capture`)")
    code = _code_lines(text)
    headers = _headers(code, "specialization")

    def fail(message: str, line: int | None = None) -> CaptureError:
        return CaptureError(message, path=where, line=line)

    unknown = sorted(set(data) - {"version", "captured", "specialization", "cute"})
    if unknown:
        raise fail(f"unknown key {unknown[0]!r}", _line_of(code, unknown[0]))
    if "version" not in data:  # an empty file, or one kgate did not write
        raise fail(f"no `version = {FORMAT_VERSION}` line: not a capture file `kgate capture` wrote (capture again, or "
                   f"remove the file)")
    if type(data.get("version")) is not int or data.get("version") != FORMAT_VERSION:  # not 1.0 nor true
        raise fail(f"unsupported capture file version {data.get('version')!r} (this kgate reads {FORMAT_VERSION})",
                   _line_of(code, "version"))
    environments = data.get("captured", {})
    if not isinstance(environments, dict) or not all(
            isinstance(v, dict) and all(isinstance(x, str) for x in v.values()) for v in environments.values()):
        raise fail("[captured] must map each environment to a table of version strings", _line_of(code, "captured"))
    for name, table in environments.items():
        if "capability" in table and capability_arch(table["capability"]) is None:
            raise fail(f"[captured.{_key(name)}]: capability must be a compute capability such as \"9.0\", not "
                       f"{table['capability']!r}", _line_of(code, "capability"))
    tables = data.get("specialization", [])
    if not isinstance(tables, list) or not all(isinstance(t, dict) for t in tables):
        raise fail("specialization must be an array of tables ([[specialization]])", _line_of(code, "specialization"))
    entries = []
    seen: dict[str, int] = {}
    for index, table in enumerate(tables):
        line = headers[index] if index < len(headers) else None
        entry = _entry(table, line, fail, environments)
        if entry.key in seen:
            earlier = seen[entry.key]
            raise fail(f"the same specialisation as {f'line {earlier}' if earlier else 'an earlier one'}", line)
        seen[entry.key] = line or 0
        entries.append(entry)
    return CaptureFile({k: dict(v) for k, v in environments.items()}, entries, _cute_entries(data, code, where, fail))


def _cute_entries(data: dict[str, Any], code: list[str | None], where: str, fail: Any) -> list[CuteEntry]:
    """The `[[cute]]` tables: each one recorded call, its variant checked against its fields."""
    tables = data.get("cute", [])
    if not isinstance(tables, list) or not all(isinstance(t, dict) for t in tables):
        raise fail("cute must be an array of tables ([[cute]])", _line_of(code, "cute"))
    headers = _headers(code, "cute")
    out = []
    for index, table in enumerate(tables):
        line = headers[index] if index < len(headers) else None
        fields = {k: v for k, v in table.items() if k != "variant"}
        try:
            entry = parse_cute_entry({**fields, "args": [fields.get("args")]}, f"{where}:{line}" if line else where,
                                     source="captured")
        except KgateError as exc:
            raise fail(f"[[cute]]: {exc}", line) from None
        if not isinstance(table.get("args"), dict) or table.get("variant") != entry.calls()[0].variant:
            raise fail(f"[[cute]] of {entry.kernel}: variant {table.get('variant')!r} does not match its fields "
                       f"({entry.calls()[0].variant}): edited by hand? capture again with `kgate capture`", line)
        out.append(entry)
    return out


def _entry(table: dict[str, Any], line: int | None, fail: Any,
           environments: dict[str, dict[str, str]]) -> CapturedSpec:
    unknown = sorted(set(table) - set(_ENTRY_KEYS))
    if unknown:
        raise fail(f"unknown key {unknown[0]!r} in a [[specialization]]", line)
    try:
        spec = Specialization.from_record(table)
    except ValueError as exc:
        raise fail(f"[[specialization]] of {table.get('kernel', '?')}: {exc}", line) from None
    if table.get("variant") != spec.variant:
        raise fail(f"[[specialization]] of {spec.kernel}: variant {table.get('variant')!r} does not match its "
                   f"fields ({spec.variant}): edited by hand? capture again with `kgate capture`", line)
    captured = table.get("captured", [])
    if not isinstance(captured, list) or not all(isinstance(c, str) for c in captured):
        raise fail(f"[[specialization]] of {spec.kernel}: captured must be a list of strings", line)
    picked = table.get("picked", False)
    launches = table.get("launches")
    if not isinstance(picked, bool):
        raise fail(f"[[specialization]] of {spec.kernel}: picked must be true or false", line)
    if launches is not None and (not isinstance(launches, int) or isinstance(launches, bool)
                                 or not 0 <= launches <= MAX_INT64):
        raise fail(f"[[specialization]] of {spec.kernel}: launches must be a non-negative integer within 64 bits",
                   line)
    where = tuple(sorted(set(captured)))
    return CapturedSpec(spec, where, picked, launches, line or 0,
                        tuple(environment_target(w, environments.get(w, {})) for w in where))


def _code_lines(text: str) -> list[str | None]:
    """The file's lines as TOML reads them: comments blanked, None for a line inside a multi-line string (a header or
    a key written in a string or a comment is no header or key)."""
    from kgate.support.comments.config import toml_lines

    return toml_lines(text, text.splitlines())[0]


def _headers(code: list[str | None], name: str) -> list[int]:
    """The line numbers of the `[[name]]` headers, however spaced or quoted (`[[ name ]]`, `[["name"]]`)."""
    header = re.compile(rf"""^\s*\[\[\s*(?:{name}|"{name}"|'{name}')\s*\]\]""")
    return [n for n, line in enumerate(code, 1) if line is not None and header.match(line)]


def _line_of(code: list[str | None], key: str) -> int | None:
    """The line where `key` is set or opens a table (`key =`, `[key.x]`, `[[key]]`); None where none does (a key
    of an inline table)."""
    name = rf"""(?:{re.escape(key)}|"{re.escape(key)}"|'{re.escape(key)}')"""
    pattern = re.compile(rf"""^\s*(?:{name}\s*[=.]|\[\[?\s*{name}\s*[\].])""")
    return next((n for n, line in enumerate(code, 1) if line is not None and pattern.match(line)), None)


# --------------------------------------------------------------------------- merging


def added_launches(before: int | None, more: int | None) -> int | None:
    """Two launch counts of one specialisation together (None: neither counted), at most the largest a capture file
    holds (TOML's integers are 64-bit): a count that large says only that it launched very often."""
    if before is None and more is None:
        return None
    return min((before or 0) + (more or 0), MAX_INT64)


def merge(old: CaptureFile, new: CaptureFile, *, replace_kernels: bool) -> CaptureFile:
    """`new` added to `old`: entries seen again gain the new environments; with `replace_kernels`, the old
    entries of every kernel `new` saw are dropped first (so a kernel's stale specialisations go)."""
    seen_kernels = {e.spec.kernel for e in new.entries}
    merged: dict[str, CapturedSpec] = {}
    for entry in old.entries:
        if replace_kernels and entry.spec.kernel in seen_kernels:
            continue
        merged[entry.key] = replace(entry, line=0)
    for entry in new.entries:
        before = merged.get(entry.key)
        if before is None:
            merged[entry.key] = replace(entry, line=0)
            continue
        launches = added_launches(before.launches, entry.launches)
        merged[entry.key] = CapturedSpec(entry.spec, tuple(sorted(set(before.captured) | set(entry.captured))),
                                         before.picked or entry.picked, launches)
    cute = merged_cute(old.cute, new.cute, replace_kernels=replace_kernels)
    environments = {**old.environments, **new.environments}
    used = {where for e in merged.values() for where in e.captured} | {where for e in cute for where in e.captured}
    environments = {k: v for k, v in environments.items() if k in used}
    return CaptureFile(environments, sorted(merged.values(), key=_order), cute)


def merged_cute(old: list[CuteEntry], new: list[CuteEntry], *, replace_kernels: bool) -> list[CuteEntry]:
    """CuTe DSL calls as `merge` merges specialisations: a call seen again gains the new environments."""
    seen_kernels = {e.kernel for e in new}
    merged: dict[str, CuteEntry] = {}
    for entry in [e for e in old if not (replace_kernels and e.kernel in seen_kernels)] + list(new):
        key = json.dumps(entry.calls()[0].to_record(), sort_keys=True)
        before = merged.get(key)
        where = tuple(sorted(set(entry.captured) | set(before.captured if before else ())))
        merged[key] = replace(entry, captured=where, origin="")
    return sorted(merged.values(), key=lambda e: (e.kernel, e.calls()[0].variant))


def _order(entry: CapturedSpec) -> tuple[str, str, str]:
    return (entry.spec.kernel, entry.spec.variant, entry.key)


# --------------------------------------------------------------------------- writing


def toml_value(value: Any) -> str:
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, int):
        return str(value)
    if isinstance(value, float):
        if math.isnan(value):
            return "nan"
        if math.isinf(value):
            return "inf" if value > 0 else "-inf"
        return repr(value)
    if isinstance(value, str):
        return toml_string(value)
    if isinstance(value, (list, tuple)):
        return "[" + ", ".join(toml_value(v) for v in value) + "]"
    if isinstance(value, dict):
        if not value:
            return "{}"
        return "{ " + ", ".join(f"{_key(k)} = {toml_value(value[k])}" for k in sorted(value)) + " }"
    raise TypeError(f"cannot write {type(value).__name__} to TOML")


def _key(name: str) -> str:
    bare = name and all(c.isalnum() and c.isascii() or c in "_-" for c in name)
    return name if bare else toml_string(name)


def render(capture: CaptureFile) -> str:
    lines = [HEADER, f"version = {FORMAT_VERSION}\n"]
    for where in sorted(capture.environments):
        lines.append(f"\n[captured.{_key(where)}]\n")
        for name, version in sorted(capture.environments[where].items()):
            lines.append(f"{_key(name)} = {toml_value(version)}\n")
    for entry in sorted(capture.entries, key=_order):
        spec = entry.spec
        lines.append("\n[[specialization]]\n")
        lines.append(f"kernel = {toml_value(spec.kernel)}\n")
        lines.append(f"variant = {toml_value(spec.variant)}\n")
        lines.append(f"signature = {toml_value(spec.signature)}\n")
        if spec.constexprs:
            lines.append(f"constexprs = {toml_value(spec.constexprs)}\n")
        for key in ("divisible", "equal_to_1", "none"):
            names = getattr(spec, key)
            if names:
                lines.append(f"{key} = {toml_value(sorted(names))}\n")
        lines.append(f"options = {toml_value(spec.options)}\n")
        lines.append(f"captured = {toml_value(sorted(entry.captured))}\n")
        if entry.picked:
            lines.append("picked = true\n")
        if entry.launches is not None:
            lines.append(f"launches = {entry.launches}\n")
    for cute in capture.cute:
        call = cute.calls()[0]
        lines.append("\n[[cute]]\n")
        lines.append(f"kernel = {toml_value(call.kernel)}\n")
        lines.append(f"variant = {toml_value(call.variant)}\n")
        if call.init:
            lines.append(f"init = {toml_value(call.init)}\n")
        lines.append(f"args = {toml_value(call.args)}\n")
        if call.options:
            lines.append(f"options = {toml_value(call.options)}\n")
        lines.append(f"captured = {toml_value(sorted(cute.captured))}\n")
    return "".join(lines)


def save(capture: CaptureFile, path: Path, display: str) -> None:
    try:
        atomic_write(path, render(capture).encode(), follow=True)
    except OSError as exc:
        raise CaptureError(f"cannot write it: {exc.strerror}", path=display) from None
