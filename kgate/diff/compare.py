"""Compare two sides variant by variant: is the machine code the same, and if not, what moved.

Variants are matched by identity (kernel, variant, target), never by a hash of their source, so an edited
kernel is compared with what it was. A variant is `identical` when its instruction stream is (opcodes,
operands, constant-bank offsets, encodings; addresses and symbol names aside) and its launch (dynamic shared
memory, PDL) is, `changed` otherwise, `new`
or `gone` when one side lacks it, `failed` when a side did not compile it, and `unknown` when a side's cubin
is no longer in the cache to read.
"""

from __future__ import annotations

import difflib
import re
from collections.abc import Callable
from dataclasses import dataclass, field, replace
from typing import Any

from kgate.collect.revision import CHECKOUT_PREFIX
from kgate.diff.model import Key, Side
from kgate.facts.listing import Instruction, histogram, same_code
from kgate.facts.model import KernelFacts

STATUSES = ("identical", "changed", "new", "gone", "failed", "unknown")
Listings = Callable[[Side, Key], "tuple[Instruction, ...] | None"]
Code = Callable[[Side, Key], "bytes | None"]  # a variant's machine code (its `.text` section), None if unknown

_TRITON_NAME = re.compile(r"^[\w.]+:\w+$")  # "package.module:function"; CUDA names are C++ names
_CONTEXT = 2  # identical lines shown before the first difference
_SHOWN = 6  # differing lines shown per side


@dataclass(frozen=True)
class Figures:
    registers: int
    spill_bytes: int
    smem_bytes: int
    instructions: int | None  # None where the SASS was not read (identical cubins)

    @classmethod
    def of(cls, facts: KernelFacts, instructions: int | None) -> Figures:
        r = facts.resources
        return cls(r.registers, r.spill_bytes, r.smem_bytes, instructions)


@dataclass(frozen=True)
class Line:
    sign: str  # " ", "-" (base) or "+" (head)
    text: str
    source: str  # "kernels/gemm.py:58", or ""


@dataclass(frozen=True)
class Row:
    kernel: str
    variant: str
    target: str
    language: str
    status: str
    before: Figures | None = None
    after: Figures | None = None
    families: dict[str, tuple[int, int]] = field(default_factory=dict)  # only those that moved
    first: int | None = None  # index of the first differing instruction
    lines: tuple[Line, ...] = ()
    note: str = ""
    was: str = ""  # the base's variant name, for a variant whose constexpr or option values changed

    @property
    def key(self) -> Key:
        return (self.kernel, self.variant, self.target)

    def to_json(self) -> dict[str, Any]:
        return {"kernel": self.kernel, "variant": self.variant, "target": self.target, "language": self.language,
                "status": self.status, "before": vars(self.before) if self.before else None,
                "after": vars(self.after) if self.after else None,
                "families": {k: {"before": a, "after": b} for k, (a, b) in self.families.items()},
                "first_difference": self.first,
                "lines": [{"sign": ln.sign, "text": ln.text, "source": ln.source} for ln in self.lines],
                "note": self.note, "base_variant": self.was or self.variant}


@dataclass(frozen=True)
class Pair:
    """One line of a side-by-side view: the base's instruction and the head's, either absent."""

    tag: str  # "equal", "replace", "delete" (base only) or "insert" (head only)
    left: Line | None
    right: Line | None


@dataclass
class Diff:
    base: Side
    head: Side
    rows: list[Row]
    # Side-by-side SASS around the first difference, for the first few changed variants (`kgate audit --diff`).
    pairs: dict[Key, tuple[Pair, ...]] = field(default_factory=dict)

    def counts(self) -> dict[str, int]:
        return {status: sum(1 for r in self.rows if r.status == status) for status in STATUSES}

    def not_identical(self) -> list[Row]:
        return [r for r in self.rows if r.status != "identical"]


def matched(base: Side, head: Side) -> list[tuple[Key, Key]]:
    """(base key, head key) of every variant of either side, sorted by the head's identity: a variant only one
    side has is matched with itself, a renamed one (`renamed_variants`) with the one it replaces."""
    before = set(base.facts) | set(base.failures)
    after = set(head.facts) | set(head.failures)
    renamed = renamed_variants(sorted(before - after), sorted(after - before))
    return [(renamed.get(key, key), key) for key in sorted((before | after) - set(renamed.values()))]


def needs_listing(base: Side, head: Side, old_key: Key, key: Key, code: Code | None) -> bool:
    """Whether telling identical from changed takes reading the SASS (neither the same cubin nor the same code)."""
    if old_key not in base.facts or key not in head.facts or _same_cubin(base.cubins.get(old_key),
                                                                          head.cubins.get(key)):
        return False
    return code is None or not _same_code(code(base, old_key), code(head, key))


def _same_code(a: bytes | None, b: bytes | None) -> bool:
    return a is not None and a == b


def compare(base: Side, head: Side, listings: Listings, roots: tuple[str, ...] = (), pairs: int = 0,
            code: Code | None = None) -> Diff:
    """Every variant of either side, sorted by identity (a renamed variant under its new name); `pairs`: the
    side-by-side SASS of that many changed variants too; `code`: machine code, which settles identical
    variants without their SASS."""
    diff = Diff(base, head, [_row(old_key, key, base, head, listings, roots, code)
                             for old_key, key in matched(base, head)])
    for row in [r for r in diff.rows if r.status == "changed"][:pairs]:
        old_key = (row.kernel, row.was or row.variant, row.target)
        old, new = listings(base, old_key), listings(head, row.key)
        if old is not None and new is not None:
            files = {i.file for i in old + new}
            found = roots + _roots_of(files, base.facts[old_key].path) + _roots_of(files, head.facts[row.key].path)
            diff.pairs[row.key] = side_by_side(old, new, found)
    return diff


def side_by_side(old: tuple[Instruction, ...], new: tuple[Instruction, ...], roots: tuple[str, ...] = (),
                 limit: int = 48) -> tuple[Pair, ...]:
    """The two streams aligned from a few lines before their first difference, `limit` lines at most."""
    start = 0
    while start < min(len(old), len(new)) and old[start].same_code(new[start]):
        start += 1
    begin = max(0, start - _CONTEXT)
    a, b = old[begin:begin + 4 * limit], new[begin:begin + 4 * limit]
    matcher = difflib.SequenceMatcher(None, [(i.text, i.encoding) for i in a], [(i.text, i.encoding) for i in b],
                                      autojunk=False)
    out: list[Pair] = []
    for tag, i1, i2, j1, j2 in matcher.get_opcodes():
        left = [Line("-" if tag != "equal" else " ", i.text, _source(i, roots)) for i in a[i1:i2]]
        right = [Line("+" if tag != "equal" else " ", i.text, _source(i, roots)) for i in b[j1:j2]]
        for n in range(max(len(left), len(right))):
            out.append(Pair(tag if tag != "replace" or (n < len(left) and n < len(right))
                            else ("delete" if n < len(left) else "insert"),
                            left[n] if n < len(left) else None, right[n] if n < len(right) else None))
    return tuple(out[:limit])


def renamed_variants(gone: list[Key], new: list[Key]) -> dict[Key, Key]:
    """New variant -> the gone one it replaces: the only gone and the only new variant of one kernel and target
    that differ in the values of their constexprs or options alone (a tile size changed in the registration,
    `BLOCK_N=4096,warps=8,...` -> `BLOCK_N=2048,warps=8,...`), or, for a CUDA kernel, in its file alone (the
    file renamed or moved, the kernel moved to another file), so that the change reads as one."""
    def shape(key: Key) -> tuple[str, str, tuple[str, ...]]:
        items = key[1].split(",")
        return key[0], key[2], tuple(item.split("=", 1)[0] if "=" in item else "\0" + item for item in items)

    groups: dict[tuple[str, str, tuple[str, ...]], tuple[list[Key], list[Key]]] = {}
    for index, keys in ((0, gone), (1, new)):
        for key in keys:
            if "=" in key[1]:
                groups.setdefault(shape(key), ([], []))[index].append(key)
            elif key[0] and not _TRITON_NAME.match(key[0]):
                # A CUDA kernel's variant is its file: one that moved (a file renamed, a kernel moved to another
                # file) is the only gone and the only new variant of that kernel and target.
                groups.setdefault((key[0], key[2], ("\0file",)), ([], []))[index].append(key)
    return {n[0]: g[0] for g, n in groups.values() if len(g) == 1 and len(n) == 1}


def _row(old_key: Key, key: Key, base: Side, head: Side, listings: Listings, roots: tuple[str, ...],
         code: Code | None = None) -> Row:
    row = _compared(old_key, key, base, head, listings, roots, code)
    if old_key == key:
        return row
    return replace(row, was=old_key[1], note=f"was {old_key[1]}" + (f"; {row.note}" if row.note else ""))


def _compared(old_key: Key, key: Key, base: Side, head: Side, listings: Listings, roots: tuple[str, ...],
              code: Code | None) -> Row:
    before, after = base.facts.get(old_key), head.facts.get(key)
    known = after or before
    language = known.language if known else "triton" if _TRITON_NAME.match(key[0]) else "cuda"
    if old_key in base.failures or key in head.failures:
        which = [f"{side.label}: {side.failures[k]}" for side, k in ((base, old_key), (head, key)) if k in side.failures]
        return Row(*key, language, "failed", note="; ".join(which))
    if before is None or after is None:
        return Row(*key, language, "new" if before is None else "gone",
                   Figures.of(before, None) if before else None, Figures.of(after, None) if after else None)
    if not needs_listing(base, head, old_key, key, code):  # the same cubin, or the same machine code in it
        return _unread(_launched(Row(*key, language, "identical", Figures.of(before, None),
                                     Figures.of(after, None)), before, after), base, head, old_key, key)
    old, new = listings(base, old_key), listings(head, key)
    if old is None or new is None:
        missing = base.label if old is None else head.label
        return Row(*key, language, "unknown", Figures.of(before, None), Figures.of(after, None),
                   note=f"the SASS of {missing} cannot be read (its cubin is no longer in the cache; run again)")
    figures = (Figures.of(before, len(old)), Figures.of(after, len(new)))
    if same_code(old, new):
        return _unread(_launched(Row(*key, language, "identical", *figures), before, after), base, head, old_key, key)
    files = {i.file for i in old + new}
    first, lines = first_difference(old, new, roots + _roots_of(files, before.path) + _roots_of(files, after.path))
    return Row(*key, language, "changed", *figures, families=_moved(old, new), first=first, lines=lines)


def _launched(row: Row, before: KernelFacts, after: KernelFacts) -> Row:
    """An identical row, or a changed one where the same code is launched otherwise: with another amount of dynamic
    shared memory (a CUDA launch's size, a host-side constant of the project), where the same SASS runs at another
    occupancy or does not launch at all, or with PDL where it was not (or the other way), where it overlaps the
    kernel before it or no longer does. Neither is a proof of the same performance."""
    old, new = before.resources.smem_dynamic, after.resources.smem_dynamic
    said = []
    if old != new:
        where = f" (given at {after.smem_set_at})" if after.smem_set_at else ""
        said.append(f"launched with {new} bytes of dynamic shared memory instead of {old}{where}")
    if before.pdl != after.pdl:
        said.append("launched with programmatic dependent launch (PDL) now" if after.pdl else
                    "no longer launched with programmatic dependent launch (PDL)")
    if not said:
        return row
    return replace(row, status="changed", note="the same SASS, " + "; ".join(said))


def _unread(row: Row, base: Side, head: Side, old_key: Key, key: Key) -> Row:
    """An identical CUDA row stays identical only where the build script that gives its file flags kgate cannot
    read (and compiles without) is the same on both sides: where the script changed (`-DHEAD={HEAD}` with
    `HEAD = int(os.environ.get("HEAD", 64))` given another default), the real builds may differ while kgate's
    compiles do not."""
    if row.status != "identical":
        return row
    old, new = base.unsettled.get(old_key[1], []), head.unsettled.get(key[1], [])
    if old == new:
        return row
    said = ", ".join(new[1:] or old[1:])
    return replace(row, status="changed", note=f"the same SASS from the flags kgate reads, but the build script "
                                               f"that gives it flags kgate cannot read ({said}) changed: give them, "
                                               f"with the values to gate, in the table's `flags`")


def _same_cubin(a: tuple[str, str | None] | None, b: tuple[str, str | None] | None) -> bool:
    """The same cubin file, or two of the same content (the same source and toolchain on both sides)."""
    return a is not None and b is not None and a[1] is not None and a[1] == b[1]


def _moved(old: tuple[Instruction, ...], new: tuple[Instruction, ...]) -> dict[str, tuple[int, int]]:
    a, b = histogram(old), histogram(new)
    return {name: (a.get(name, 0), b.get(name, 0)) for name in sorted(set(a) | set(b))
            if a.get(name, 0) != b.get(name, 0)}


def first_difference(old: tuple[Instruction, ...], new: tuple[Instruction, ...],
                     roots: tuple[str, ...] = ()) -> tuple[int, tuple[Line, ...]]:
    """Where the streams part (an index into both) and a hunk from there: a few identical lines, then the
    base's (`-`) and the head's (`+`) instructions with their source lines, up to about a dozen lines."""
    start = 0
    while start < min(len(old), len(new)) and old[start].same_code(new[start]):
        start += 1
    # Align only a window past the common prefix: an inserted instruction then reads as one `+`.
    window_a, window_b = old[start:start + 400], new[start:start + 400]
    matcher = difflib.SequenceMatcher(None, [(i.text, i.encoding) for i in window_a],
                                      [(i.text, i.encoding) for i in window_b], autojunk=False)
    ops = matcher.get_opcodes()
    first = next((n for n, op in enumerate(ops) if op[0] != "equal"), None)
    if first is None:  # the window was equal: the streams differ past it, or in length
        ops, first = [("replace", 0, len(window_a), 0, len(window_b))], 0
    lines = [Line(" ", i.text, _source(i, roots)) for i in old[max(0, start - _CONTEXT):start]]
    shown = 0
    for tag, i1, i2, j1, j2 in ops[first:]:
        if shown >= _SHOWN * 2:
            break
        if tag == "equal":
            lines += [Line(" ", i.text, _source(i, roots)) for i in window_a[i1:i2][:_CONTEXT]]
            continue
        removed, added = window_a[i1:i2][:_SHOWN], window_b[j1:j2][:_SHOWN]
        for sign, instrs, other in (("-", removed, added), ("+", added, removed)):
            # Where only the encoding differs (the scheduling bits: stalls, barriers, reuse), it is what is shown.
            lines += [Line(sign, i.text + (f"  /* {i.encoding} */" if n < len(other) and other[n].text == i.text
                                           else ""), _source(i, roots)) for n, i in enumerate(instrs)]
        shown += len(removed) + len(added)
    return start + ops[first][1], tuple(lines)


def _roots_of(files: set[str], path: str) -> tuple[str, ...]:
    """The project folders the line tables name, found from the kernel's own file: a cubin in the cache may
    have been compiled in another checkout of the same source."""
    return tuple(sorted({f[: -len(path)] for f in files if path and f.endswith("/" + path)}))


_CHECKOUT = re.compile(rf"^.*/{re.escape(CHECKOUT_PREFIX)}[^/]+/tree/")


def _source(instr: Instruction, roots: tuple[str, ...]) -> str:
    if not instr.file:
        return ""
    path = _CHECKOUT.sub("", instr.file)
    if "/site-packages/" in path:  # Triton's own library code, inlined: named as its package names it
        path = path.split("/site-packages/", 1)[1]
    for root in roots:
        if path.startswith(root.rstrip("/") + "/"):
            path = path[len(root.rstrip("/")) + 1:]
            break
    return f"{path}:{instr.line}"
