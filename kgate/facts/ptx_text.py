"""PTX as text: its comments, and a function body's statements and labels as the assembler reads them.

Every reader of a PTX module goes through here, so that none of them takes for code what the assembler does not:

- comments (`// ...` to the end of the line, `/* ... */` across lines; inline asm copies the user's own into the
  module verbatim) are blanked, their newlines kept so that line numbers hold, and a string (`.file 1 "..."`)
  is never taken for one: a folder named `*x` is no comment's start;
- statements end at `;`, wherever the lines break: one line may hold several, and one statement may run over
  several lines;
- a label (`NAME:`) may stand before any statement, on its line or another, several in a row;
- braces at a statement's start open and close a scope (an inline asm block, a call sequence) and a label
  declared in one is that scope's own: two asm blocks inlined into one function each branch to their own
  `SKIP`. A label is renamed after the scope that declares it (`SKIP@3`), and a branch names the label of the
  innermost scope around it that declares the name. Braces inside a statement are a vector operand's.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from kgate.facts.numbers import count

# Strings first, so that a `//` or a `/*` inside one starts nothing; then line and block comments. A block comment
# left open is not matched: the assembler rejects such a module anyway.
_LEXEME = re.compile(r'"(?:[^"\\\n]|\\.)*"|//[^\n]*|/\*.*?\*/', re.DOTALL)
# Line comments the compilers write that say where an inline asm block starts and ends (its `.loc` lines count
# from the statement's line): kept, since the statement reader reads the place of an asm block from them.
ASM_MARKERS = ("// begin inline asm", "// end inline asm")
LOC = re.compile(r"^\s*\.loc\s+(\d+)\s+(\d+)\s+(\d+)")
_LABEL = re.compile(r"^\s*([$%A-Za-z_][$\w]*)\s*:(?!:)")
BRANCH_TARGETS = ".branchtargets"  # a jump table: `$L_brx_0: .branchtargets $L1, $L2;`, read by `brx.idx`
# A file's name in quotes, as PTX (`.file 1 "..."`) and nvdisasm's line info (`//## File "..."`) write it: C escapes,
# each byte of a name outside printable ASCII in octal (a folder `проект` is `\\320\\277...`), `\\\\` a backslash.
QUOTED = r'"((?:[^"\\\n]|\\.)*)"'
_ESCAPE = re.compile(rb"\\(?:([0-7]{1,3})|x([0-9A-Fa-f]{1,2})|(.))", re.DOTALL)
_SIMPLE = {b"n": b"\n", b"t": b"\t", b"r": b"\r", b"a": b"\a", b"b": b"\b", b"f": b"\f", b"v": b"\v"}


def unquoted(name: str) -> str:
    """A quoted file name's text (`QUOTED`'s group) as the file system has it: its escapes read back to the bytes
    they stand for, those read as UTF-8 (a byte that is not: as `os.fsdecode` keeps it)."""
    if "\\" not in name:
        return name

    def one(match: re.Match[bytes]) -> bytes:
        if match.group(1) is not None:
            return bytes([int(match.group(1), 8) & 0xFF])
        if match.group(2) is not None:
            return bytes([int(match.group(2), 16)])
        return _SIMPLE.get(match.group(3), match.group(3))

    return _ESCAPE.sub(one, name.encode("utf-8", "surrogateescape")).decode("utf-8", "surrogateescape")


def code(text: str) -> str:
    """The module with every comment blanked (spaces, newlines kept) but the inline asm markers: what the assembler
    reads, at the same offsets and lines."""
    global _LAST_CODE
    last = _LAST_CODE  # one read: another thread may replace it meanwhile
    if text is last[1]:  # a module's readers blank it in turn (parse_ptx, functions, entry_headers)
        return text
    if text is last[0]:
        return last[1]

    def blank(match: re.Match[str]) -> str:
        found = match.group(0)
        if found.startswith('"') or found.rstrip() in ASM_MARKERS:
            return found
        return re.sub(r"[^\n]", " ", found)

    blanked = _LEXEME.sub(blank, text) if "/" in text else text
    _LAST_CODE = (text, blanked)
    return blanked


# The last module `code` blanked and its blanked text: asked again of either, the same text without reading it again
# (strings are immutable, compared by identity; blanking blanked text changes nothing).
_LAST_CODE: tuple[str, str] = ("", "")


@dataclass(frozen=True)
class Statement:
    """One statement of a body: its text (the labels before it and the braces of a scope taken off), the line it
    starts on, the scopes around it (outermost, 0 for the function's, first) and the `.loc` place in force there
    (file number, line, column)."""

    text: str
    line: int
    scopes: tuple[int, ...]
    place: tuple[int, int, int] | None


@dataclass(frozen=True)
class Label:
    name: str
    scopes: tuple[int, ...]


class _Places:
    """The `.loc` place in force. Inside an inline asm block the backend numbers the block's own lines on from the
    statement's line (`.loc 1 17 9`, `.loc 1 18 9`, ...): the statement's place is the first `.loc` of the block."""

    def __init__(self) -> None:
        self.place: tuple[int, int, int] | None = None
        self.in_asm = self.located = False

    def marker(self, begins: bool) -> None:
        self.in_asm, self.located = begins, False

    def loc(self, file_no: int, line: int, col: int) -> None:
        if line and not (self.in_asm and self.located):
            self.place = (file_no, line, col)
            self.located = self.in_asm


def body_items(body: str, first_line: int) -> list[Statement | Label]:
    """A function body (comments blanked: `code`) as its statements and labels, in order."""
    out: list[Statement | Label] = []
    scopes = [0]
    scope: tuple[int, ...] = (0,)  # `scopes` as the tuple each statement holds: made again only where a brace changes it
    opened = 0
    places = _Places()
    pending = ""
    pending_line = first_line
    lineno = first_line - 1
    for raw in body.split("\n"):
        lineno += 1
        line, _, comment = raw.partition("//")
        line = line.strip()
        if not line:
            marker = "//" + comment.rstrip()
            if marker in ASM_MARKERS:
                places.marker(marker == ASM_MARKERS[0])
            continue
        if not pending or not pending.strip():
            located = LOC.match(line) if line.startswith(".loc") else None
            if located:
                places.loc(*(count(g) for g in located.groups()))
                continue
            if line.startswith(".") and ";" not in line and not line.startswith(BRANCH_TARGETS):
                continue  # a directive without a `;` (`.loc` forms, `.pragma` on its own line)
            if _single(line):  # most lines: one whole statement, read as the loop below reads it
                pending = ""
                text = line[:-1].strip()
                if text and not (text.startswith(".") and not text.startswith(BRANCH_TARGETS)):
                    out.append(Statement(text, lineno, scope, places.place))
                continue
        elif pending:
            pending += " "
        for piece in re.split(r"([;{}])", line):
            if not pending.strip():
                pending = ""
                if piece in ("{", "}"):
                    if piece == "{":
                        opened += 1
                        scopes.append(opened)
                    elif len(scopes) > 1:
                        scopes.pop()
                    scope = tuple(scopes)
                    continue
                pending_line = lineno
                piece = _labels(piece, scope, out)
            if piece == ";":
                text = pending.strip()
                if text and not (text.startswith(".") and not text.startswith(BRANCH_TARGETS)):
                    out.append(Statement(text, pending_line, scope, places.place))
                pending = ""
                continue
            pending += piece
    return out


def _single(line: str) -> bool:
    """Whether a line is one statement and nothing else: no brace, one `;` at its end, no label before it."""
    return (line[-1] == ";" and line.count(";") == 1 and "{" not in line and "}" not in line
            and (":" not in line or _LABEL.match(line) is None))


def _labels(piece: str, scopes: tuple[int, ...], out: list[Statement | Label]) -> str:
    """The piece without the labels it starts with, each added to `out`."""
    found = _LABEL.match(piece)
    while found:
        out.append(Label(found.group(1), scopes))
        piece = piece[found.end():]
        found = _LABEL.match(piece)
    return piece


def label_names(items: list[Statement | Label]) -> dict[tuple[str, int], str]:
    """(label, scope) -> the name the control-flow graph knows it by: its own in the function's scope, else with
    the scope's number, so that two scopes' labels of one name are two labels."""
    return {(i.name, i.scopes[-1]): i.name if len(i.scopes) == 1 else f"{i.name}@{i.scopes[-1]}"
            for i in items if isinstance(i, Label)}


def resolve(name: str, scopes: tuple[int, ...], names: dict[tuple[str, int], str]) -> str:
    """The label a statement in `scopes` means by `name`: the innermost scope's that declares it."""
    for scope in reversed(scopes):
        if (name, scope) in names:
            return names[(name, scope)]
    return name
