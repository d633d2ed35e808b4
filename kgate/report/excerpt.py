"""Excerpts of a variant's PTX and SASS around the instructions that decide how it runs, with their source lines.

The instructions that matter are the tensor-core MMAs (block-scaled ones apart), loads and stores of local
memory (spills, stack arrays: `ld.local`/`st.local`, `LDL`/`STL`) and the grid-dependence control of PDL
(`griddepcontrol`, `ACQBULK`/`PREEXIT`). Each listing shows a few instructions either side of the first of
each kind, and of one more from another source line, each with the source line the compiler's line table
gives it (PTX `.loc`, nvdisasm's `//## File`). Pure: the command reads the PTX, the listing and the source
files and hands their text in.
"""

from __future__ import annotations

import os
from collections.abc import Callable, Sequence
from dataclasses import dataclass

# The facts package's parser of PTX function bodies, reused as it is (its source is part of the facts
# schema, so this reader lives here rather than beside it).
from kgate.facts import ptx
from kgate.facts.listing import Instruction as SassInstruction
from kgate.facts.sass import MMA_HEADS

BLOCK_MMA, MMA, LOCAL, PDL = "block-scaled MMA", "MMA", "local load/store", "griddepcontrol"
KINDS = (BLOCK_MMA, MMA, LOCAL, PDL)
CONTEXT = 3  # instructions shown either side of the one that matters
WINDOWS = 2  # windows per kind and listing: the first, and one more from another source line

# (file as the line table names it, line) -> (the file as the page shows it, the line where that code is now, the
# text of that line or ""): a cached compile's line table names the lines its code had when it was compiled.
Source = Callable[[str, int], tuple[str, int, str]]


@dataclass(frozen=True)
class Line:
    text: str
    place: str  # "k.py:42", "" where the line table names none
    marked: bool  # one of the instructions the window is about


@dataclass(frozen=True)
class Window:
    kind: str
    nth: int  # which of the kind's instructions it is about, from 1
    file: str  # the marked instruction's source file as shown, "" where unknown
    line: int
    source: str  # the text of that source line, "" where it cannot be read
    lines: tuple[Line, ...]


@dataclass(frozen=True)
class Listing:
    name: str  # "PTX" or "SASS"
    counts: tuple[tuple[str, int], ...]  # instructions of each kind present, in KINDS order
    windows: tuple[Window, ...]


@dataclass(frozen=True)
class Excerpt:
    listings: tuple[Listing, ...]
    notes: tuple[str, ...] = ()  # why a listing is missing

    @property
    def counts(self) -> dict[str, int]:
        """Instructions of each kind, the larger count of the two listings."""
        out: dict[str, int] = {}
        for listing in self.listings:
            for kind, n in listing.counts:
                out[kind] = max(out.get(kind, 0), n)
        return {kind: out[kind] for kind in KINDS if kind in out}


def ptx_kind(opcode: str) -> str | None:
    if ptx.is_mma(opcode):
        return BLOCK_MMA if "block_scale" in opcode else MMA
    if opcode.startswith(("ld.local", "st.local")):
        return LOCAL
    if opcode.startswith("griddepcontrol"):
        return PDL
    return None


def sass_kind(opcode: str) -> str | None:
    parts = opcode.split(".")
    if parts[0] in MMA_HEADS:
        return BLOCK_MMA if "SF" in parts[1:] else MMA
    if parts[0] in ("LDL", "STL"):
        return LOCAL
    if parts[0] in ("ACQBULK", "PREEXIT"):
        return PDL
    return None


Item = tuple[str, "str | None", str, int]  # text, kind, source file, source line


def ptx_items(text: str, entry: str) -> list[Item]:
    """The instructions of one PTX function with their kinds and source places; empty where it is absent."""
    raw = text.splitlines()
    for function in ptx.functions(text):
        if function.name == entry:
            return [(_as_written(i, raw), ptx_kind(i.opcode), i.loc.file if i.loc else "", i.loc.line if i.loc else 0)
                    for i in function.instructions]
    return []


def _as_written(instr: ptx.Instruction, raw: list[str]) -> str:
    """The instruction's line of the module, spaces collapsed, where the statement is that whole line (the parser's
    text drops braces at its ends); the parser's text otherwise."""
    line = " ".join(raw[instr.ptx_line - 1].split()) if 0 < instr.ptx_line <= len(raw) else ""
    return line if line.endswith(";") and line.count(";") == 1 and instr.opcode in line else " ".join(instr.text.split())


def sass_items(instructions: Sequence[SassInstruction]) -> list[Item]:
    return [(i.text, sass_kind(i.opcode), i.file, i.line) for i in instructions]


def listing(name: str, items: Sequence[Item], source: Source) -> Listing:
    counts = tuple((kind, n) for kind in KINDS if (n := sum(1 for it in items if it[1] == kind)))
    windows = []
    for kind, _n in counts:
        shown: list[int] = []
        places: set[tuple[str, int]] = set()
        for nth, i in enumerate((i for i, it in enumerate(items) if it[1] == kind), 1):
            if len(shown) == WINDOWS:
                break
            place = (items[i][2], items[i][3])
            if any(abs(i - j) <= 2 * CONTEXT for j in shown) or (place in places and place[1]):
                continue
            shown.append(i)
            places.add(place)
            windows.append(_window(kind, nth, i, items, source))
    return Listing(name, counts, tuple(windows))


def _window(kind: str, nth: int, at: int, items: Sequence[Item], source: Source) -> Window:
    lines = []
    for text, k, file, line in items[max(0, at - CONTEXT):at + CONTEXT + 1]:
        if line:
            name, now, _code = source(file, line)
            shown = f"{os.path.basename(name)}:{now}"
        else:
            shown = ""
        lines.append(Line(text, shown, k == kind))
    _text, _kind, file, line = items[at]
    shown_file, line, code = source(file, line) if line else ("", 0, "")
    return Window(kind, nth, shown_file, line, code, tuple(lines))


def excerpt(ptx_text: str | None, entry: str, sass: Sequence[SassInstruction] | None, source: Source,
            notes: Sequence[str] = ()) -> Excerpt:
    """The excerpt of one variant: its PTX (the module's text and the entry's name) and its SASS listing."""
    listings = []
    if ptx_text is not None:
        listings.append(listing("PTX", ptx_items(ptx_text, entry), source))
    if sass is not None:
        listings.append(listing("SASS", sass_items(sass), source))
    return Excerpt(tuple(listings), tuple(notes))
