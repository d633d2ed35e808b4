"""C++ source text with comments and string literals blanked out, offsets and lines preserved.

Source rules and launch-site analysis search C++ text with regular
expressions; a launch inside a comment or a string is not a launch. Blanking
(every character of a comment or of a literal's contents becomes a space,
newlines stay) keeps every match's offset and line number valid in the
original text.
"""

from __future__ import annotations

import re
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

_RAW_OPEN = re.compile(r'(?:u8|[uUL])?R"([^()\\\s]{0,16})\(')


@dataclass(frozen=True)
class Blanked:
    code: str  # the text with comments and literal contents replaced by spaces
    comment_lines: frozenset[int]  # 1-based lines that hold part of a comment


def blank(text: str) -> Blanked:
    """The text with comments and literal contents blanked, and the lines that hold comments.

    The scan jumps from one place where a comment or a literal may start to the next (a regular
    expression finds them), so plain code costs nothing per character: a generated 50 MB file takes
    seconds, not minutes.
    """
    pieces: list[str] = []
    comment_lines: set[int] = set()
    done = 0  # text[:done] is in `pieces`
    line = 1  # the line of `index`
    counted = 0  # newlines are counted up to here
    index = 0
    length = len(text)
    while True:
        match = _START.search(text, index)
        if match is None:
            break
        at = match.start()
        line += text.count("\n", counted, at)
        counted = at
        ch = text[at]
        if ch == "/":
            end = _line_comment_end(text, at) if text[at + 1] == "/" else _block_comment_end(text, at)
            comment_lines.update(range(line, line + text.count("\n", at, end) + 1))
            wipe_from, wipe_to = at, end
        elif ch in "\"'":
            if ch == "'" and at > 0 and text[at - 1].isalnum() and _digit_separator(text, at):
                index = at + 1  # 1'000'000
                continue
            end = _literal_end(text, at, ch)
            wipe_from, wipe_to = at + 1, max(at + 1, end - 1)
        else:  # `R"`: a raw string with its prefix (u8, u, U, L), unless that ends an identifier (`fooR"...`)
            if at - 2 >= index and text.startswith("u8", at - 2):
                at -= 2
            elif at - 1 >= index and text[at - 1] in "uUL":
                at -= 1
            raw = _RAW_OPEN.match(text, at)
            if raw is None or at > 0 and (text[at - 1].isalnum() or text[at - 1] == "_"):
                index = match.end() - 1  # the quote: a plain literal
                continue
            close = text.find(")" + raw.group(1) + '"', raw.end())
            end = length if close < 0 else close + len(raw.group(1)) + 2
            wipe_from, wipe_to = raw.end(), max(raw.end(), end - len(raw.group(1)) - 2)
        pieces.append(text[done:wipe_from])
        pieces.append(_NOT_NEWLINE.sub(" ", text[wipe_from:wipe_to]))
        done = wipe_to
        index = end
    pieces.append(text[done:])
    return Blanked("".join(pieces), frozenset(comment_lines))


def blanked(source: Any) -> Blanked:
    """`blank(source.text)` of a file under lint, computed once for all the rules that read it."""
    derived = getattr(source, "derived", None)
    if derived is None:
        return blank(source.text)
    found = derived.get("cpp_blanked")
    if found is None:
        found = derived["cpp_blanked"] = blank(source.text)
    return found


# Where a comment or a literal may start; each alternative starts with a fixed character, which lets the
# regex engine skip plain code quickly. A raw string is found by its `R"` and confirmed by _RAW_OPEN.
_START = re.compile(r"""/[/*]|["']|R\"""")
_NOT_NEWLINE = re.compile(r"[^\n]")


def _block_comment_end(text: str, start: int) -> int:
    end = text.find("*/", start + 2)
    return len(text) if end < 0 else end + 2


def _line_comment_end(text: str, start: int) -> int:
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


def _literal_end(text: str, start: int, quote: str) -> int:
    index = start + 1
    while index < len(text):
        ch = text[index]
        if ch == "\\":
            index += 2
            continue
        if ch == quote or ch == "\n":
            return index + 1
        index += 1
    return len(text)


def _digit_separator(text: str, index: int) -> bool:
    before = text[index - 1]
    after = text[index + 1] if index + 1 < len(text) else ""
    return before.isalnum() and after.isalnum() and _in_number(text, index)


def _in_number(text: str, index: int) -> bool:
    start = index
    while start > 0 and (text[start - 1].isalnum() or text[start - 1] in "'._"):
        start -= 1
    return text[start].isdigit()


def line_of(text: str, offset: int) -> int:
    return text.count("\n", 0, offset) + 1


def balanced(code: str, open_index: int, opening: str = "(", closing: str = ")") -> int:
    """Index just past the bracket that closes the one at `open_index` (len(code) if unclosed)."""
    depth = 0
    for index in range(open_index, len(code)):
        ch = code[index]
        if ch == opening:
            depth += 1
        elif ch == closing:
            depth -= 1
            if depth == 0:
                return index + 1
    return len(code)


_WORD_CHAR = re.compile(r"\w")


def calls_of(code: str, name: str, start: int = 0, end: int | None = None) -> Iterator[re.Match[str]]:
    """Each `name(` or `name<...>(` in `code[start:end]` where `name` starts a word: what `\\bname\\s*(...)`
    matches, found from the name's own letters. A pattern that begins with `\\b` has no literal prefix, so
    Python's engine tries it at every position of the file (forty times slower on a large CUDA file)."""
    pattern = _CALL_PATTERNS.get(name)
    if pattern is None:
        pattern = _CALL_PATTERNS[name] = re.compile(re.escape(name) + r"\s*(?:<[^;{}]*?>)?\s*\(")
    stop = len(code) if end is None else end
    at = start
    while (match := pattern.search(code, at, stop)) is not None:
        if match.start() > 0 and _WORD_CHAR.match(code, match.start() - 1):
            at = match.start() + 1  # inside a longer name: look again from the next letter
            continue
        yield match
        at = match.end() if match.end() > match.start() else match.start() + 1


_CALL_PATTERNS: dict[str, re.Pattern[str]] = {}


def split_arguments(inner: str) -> list[str]:
    """Top-level comma-separated arguments (commas inside (), [], {} or <...> of a template don't split)."""
    args: list[str] = []
    depth = 0
    angle = 0
    current: list[str] = []
    for ch in inner:
        if ch in "([{":
            depth += 1
        elif ch in ")]}":
            depth -= 1
        elif ch == "<" and depth == 0:
            angle += 1
        elif ch == ">" and depth == 0 and angle:
            angle -= 1
        if ch == "," and depth == 0 and angle == 0:
            args.append("".join(current).strip())
            current = []
        else:
            current.append(ch)
    tail = "".join(current).strip()
    if tail or args:
        args.append(tail)
    return args


def macro_lines(code: str) -> frozenset[int]:
    """Lines that belong to a `#define` (with its backslash continuations)."""
    if "define" not in code:  # no line to look at (a large generated file without a macro is read once, here)
        return frozenset()
    lines = code.split("\n")
    out: set[int] = set()
    in_macro = False
    for number, text in enumerate(lines, 1):
        stripped = text.lstrip()
        if not in_macro and re.match(r"#\s*define\b", stripped):
            in_macro = True
        if in_macro:
            out.add(number)
            in_macro = text.rstrip().endswith("\\")
    return frozenset(out)


def strip_hash_comment(line: str) -> str:
    """A line of CMake, Python, shell or Makefile without its `#` comment (a `#` inside quotes stays)."""
    quote = ""
    index = 0
    while index < len(line):
        ch = line[index]
        if quote:
            if ch == "\\":
                index += 2
                continue
            if ch == quote:
                quote = ""
        elif ch in "\"'":
            quote = ch
        elif ch == "#":
            return line[:index]
        index += 1
    return line


_FUNCTION_NAME = re.compile(r"([A-Za-z_~][\w:]*)\s*(?:<[^{};]*>)?\s*\([^{};]*\)\s*(?:const\s*)?(?:noexcept\s*)?"
                            r"(?:override\s*)?(?:->\s*[^{};]+)?$")


def enclosing_function(code: str, position: int) -> str:
    """The name of the function whose body holds `position` ('' at namespace scope), for stable identities."""
    return Scopes(code).function_at(position)


class Scopes:
    """`enclosing_function` for many positions of one text: asked in increasing order, the braces are
    scanned once (a generated file with thousands of launches must not cost a scan per launch)."""

    def __init__(self, code: str) -> None:
        self.code = code
        self.stack: list[int] = []  # offsets of the braces open at `scanned`
        self.scanned = 0

    def function_at(self, position: int) -> str:
        if position < self.scanned:
            self.stack, self.scanned = [], 0
        for match in _BRACES.finditer(self.code, self.scanned, position):
            if match.group() == "{":
                self.stack.append(match.start())
            elif self.stack:
                self.stack.pop()
        self.scanned = position
        return _function_name(self.code, self.stack)


_BRACES = re.compile(r"[{}]")


def _function_name(code: str, stack: list[int]) -> str:
    for index in stack:
        head = code[max(0, index - 400):index].rstrip()
        match = _FUNCTION_NAME.search(head)
        if match and match.group(1) not in ("if", "for", "while", "switch", "catch"):
            return match.group(1)
    return ""
