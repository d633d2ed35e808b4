"""C, C++ and CUDA: comments and literals, read as the compiler's first phases read them.

Source rules and launch-site analysis search C++ text with regular expressions; a launch inside a comment
or a string is not a launch. Blanking (every character of a comment or of a literal's contents becomes a
space, newlines stay) keeps every match's offset and line number valid in the original text.

What the compiler joins or groups before it looks for comments is read the same way: a backslash-newline
joins two lines wherever it stands (`/\\<newline>*` opens a block comment, `*\\<newline>/` closes one, a string
goes on through it), and a header-name (`#include <a//b>`, `__has_include(<a//b>)`) is one token, whose `//`
starts no comment. Raw strings (`R"delim( ... )delim"`, with their prefixes) and character literals are
literals; a `'` between digits is a digit separator (`1'000'000`).
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from kgate.support.comments.span import Comment

BOM = "\ufeff"  # a UTF-8 byte-order mark, as the text decoded with it starts
RAW_OPEN = re.compile(r'(?:u8|[uUL])?R"([^()\\\s]{0,16})\(')
_SPLICES = r"(?:\\\r?\n)*"  # backslash-newlines: the lines they join are one line before comments are read


@dataclass(frozen=True)
class Blanked:
    code: str  # the text with comments and literal contents replaced by spaces
    comment_lines: frozenset[int]  # 1-based lines that hold part of a comment
    comments: tuple[tuple[int, int], ...] = ()  # (start, end) offsets of each comment, markers included


def blank(text: str) -> Blanked:
    """The text with comments and literal contents blanked, and the lines that hold comments.

    The scan jumps from one place where a comment or a literal may start to the next (a regular
    expression finds them), so plain code costs nothing per character: a generated 50 MB file takes
    seconds, not minutes.
    """
    pieces: list[str] = []
    comment_lines: set[int] = set()
    spans: list[tuple[int, int]] = []
    done = 0  # text[:done] is in `pieces`
    line = 1  # the line of `index`
    counted = 0  # newlines are counted up to here
    index = 0
    if text.startswith(BOM):  # a byte-order mark is no code: a directive after it starts the first line
        pieces.append(" ")
        done = index = counted = len(BOM)
    while True:
        match = _START.search(text, index)
        if match is None:
            break
        at = match.start()
        line += text.count("\n", counted, at)
        counted = at
        ch = text[at]
        if ch in "#_":  # `#include <...>`, `__has_include(<...>)`
            index = header_name_end(text, match)
            continue
        if ch == "/":
            slashes = match.group().endswith("/")
            end = line_comment_end(text, at) if slashes else block_comment_end(text, match.end())
            comment_lines.update(range(line, line + text.count("\n", at, end) + 1))
            spans.append((at, end - 1 if slashes and text[end - 1:end] == "\r" else end))
            wipe_from, wipe_to = at, end
        elif ch in "\"'":
            if ch == "'" and at > 0 and digit_separator(text, at, index):
                index = _PP_NUMBER_REST.match(text, at).end()  # type: ignore[union-attr]  # 1'000'000 at once
                continue
            end = literal_end(text, at, ch)
            wipe_from, wipe_to = at + 1, max(at + 1, end - 1)
        else:  # `R"`: a raw string with its prefix (u8, u, U, L), unless that ends an identifier (`fooR"...`)
            if at - 2 >= index and text.startswith("u8", at - 2):
                at -= 2
            elif at - 1 >= index and text[at - 1] in "uUL":
                at -= 1
            raw = RAW_OPEN.match(text, at)
            if raw is None or at > 0 and (text[at - 1].isalnum() or text[at - 1] == "_"):
                index = match.end() - 1  # the quote: a plain literal
                continue
            end = raw_string_end(text, raw)
            wipe_from, wipe_to = raw.end(), max(raw.end(), end - len(raw.group(1)) - 2)
        pieces.append(text[done:wipe_from])
        pieces.append(_NOT_NEWLINE.sub(" ", text[wipe_from:wipe_to]))
        done = wipe_to
        index = end
    pieces.append(text[done:])
    return Blanked("".join(pieces), frozenset(comment_lines), tuple(spans))


# Where a comment, a literal or a header-name may start; each alternative starts with a fixed character, which
# lets the regex engine skip plain code quickly. A raw string is found by its `R"` and confirmed by RAW_OPEN.
_START = re.compile(r"""/""" + _SPLICES + r"""[/*]|["']|R\"|#[ \t]*(?:include(?:_next)?|import)[ \t]*<"""
                    r"""|__has_include(?:_next)?[ \t]*\([ \t]*<""")
_BLOCK_END = re.compile(r"\*" + _SPLICES + "/")
_BLOCK = re.compile(r"/\*.*?\*/")
_NOT_NEWLINE = re.compile(r"[^\n]")
# The rest of a pp-number from a digit separator: digits, letters, `'` before a digit or letter, `.`, and the
# sign of an exponent.
_PP_NUMBER_REST = re.compile(r"(?:'[0-9A-Za-z_]|[eEpP][+-]|[0-9A-Za-z_.])*")


def header_name_end(text: str, match: re.Match[str]) -> int:
    """Past a header-name `<...>` (to the `>` on its line), where `match` opens one: `#include` only as a directive
    (nothing but spaces and block comments before it on its line), `__has_include(` anywhere. Elsewhere, past the
    match's first character only."""
    at = match.start()
    line_start = text.rfind("\n", 0, at) + 1
    close = text.find(">", match.end())
    newline = text.find("\n", match.end())
    if close < 0 or 0 <= newline < close or text[at] == "#" and _BLOCK.sub("", text[line_start:at]).strip():
        return at + 1
    return close + 1


def block_comment_end(text: str, index: int) -> int:
    """Past the `*/` (a backslash-newline may stand between its characters) that closes a block comment whose
    text starts at `index`."""
    close = _BLOCK_END.search(text, index)
    return len(text) if close is None else close.end()


def line_comment_end(text: str, start: int) -> int:
    """End of a `//` comment: the newline, unless the line ends in a backslash (continued)."""
    index = start
    while True:
        end = text.find("\n", index)
        if end < 0:
            return len(text)
        if text[end - 1] == "\\" or (text[end - 1] == "\r" and text[end - 2] == "\\"):
            index = end + 1
            continue
        return end


def literal_end(text: str, start: int, quote: str) -> int:
    """Past a string or character literal: its closing quote, or the newline that ends it unclosed (a
    backslash-newline, `\\r\\n` included, goes on to the next line)."""
    index = start + 1
    while index < len(text):
        ch = text[index]
        if ch == "\\":
            index += 3 if text.startswith("\r\n", index + 1) else 2
            continue
        if ch == quote or ch == "\n":
            return index + 1
        index += 1
    return len(text)


def raw_string_end(text: str, raw: re.Match[str]) -> int:
    close = text.find(")" + raw.group(1) + '"', raw.end())
    return len(text) if close < 0 else close + len(raw.group(1)) + 2


def digit_separator(text: str, index: int, floor: int = 0) -> bool:
    """Whether the `'` at `index` separates digits of a number (a pp-number that starts at `floor` or later: the
    scan has read what comes before as other tokens)."""
    before = text[index - 1]
    after = text[index + 1] if index + 1 < len(text) else ""
    return before.isalnum() and after.isalnum() and _in_number(text, index, floor)


def _in_number(text: str, index: int, floor: int) -> bool:
    start = index
    while start > floor and (text[start - 1].isalnum() or text[start - 1] in "'._"):
        start -= 1
    return text[start].isdigit()


def comments(text: str) -> list[Comment]:
    return [Comment(start, end, _OPENS_BLOCK.match(text, start) is not None) for start, end in blank(text).comments]


_OPENS_BLOCK = re.compile(r"/" + _SPLICES + r"\*")
