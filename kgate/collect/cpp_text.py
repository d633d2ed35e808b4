"""C++ source text with comments and string literals blanked out, offsets and lines preserved.

Source rules and launch-site analysis search C++ text with regular
expressions; a launch inside a comment or a string is not a launch. Blanking
(every character of a comment or of a literal's contents becomes a space,
newlines stay) keeps every match's offset and line number valid in the
original text.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

_RAW_OPEN = re.compile(r'(?:u8|[uUL])?R"([^()\\\s]{0,16})\(')


@dataclass(frozen=True)
class Blanked:
    code: str  # the text with comments and literal contents replaced by spaces
    comment_lines: frozenset[int]  # 1-based lines that hold part of a comment


def blank(text: str) -> Blanked:
    out = list(text)
    comment_lines: set[int] = set()
    index = 0
    length = len(text)
    line = 1

    def wipe(start: int, end: int, comment: bool) -> None:
        nonlocal line
        current = line
        for position in range(start, end):
            ch = text[position]
            if ch == "\n":
                current += 1
            else:
                out[position] = " "
            if comment:
                comment_lines.add(current)

    while index < length:
        ch = text[index]
        if ch == "\n":
            line += 1
            index += 1
            continue
        if text.startswith("//", index):
            end = _line_comment_end(text, index)
            wipe(index, end, True)
            line += text.count("\n", index, end)
            index = end
            continue
        if text.startswith("/*", index):
            end = text.find("*/", index + 2)
            end = length if end < 0 else end + 2
            wipe(index, end, True)
            line += text.count("\n", index, end)
            index = end
            continue
        raw = _RAW_OPEN.match(text, index) if ch in 'uULR' else None
        if raw and (index == 0 or not (text[index - 1].isalnum() or text[index - 1] == "_")):
            close = text.find(")" + raw.group(1) + '"', raw.end())
            end = length if close < 0 else close + len(raw.group(1)) + 2
            wipe(raw.end(), max(raw.end(), end - len(raw.group(1)) - 2), False)
            line += text.count("\n", index, end)
            index = end
            continue
        if ch in "\"'":
            if ch == "'" and index > 0 and (text[index - 1].isalnum()) and _digit_separator(text, index):
                index += 1  # 1'000'000
                continue
            end = _literal_end(text, index, ch)
            wipe(index + 1, max(index + 1, end - 1), False)
            line += text.count("\n", index, end)
            index = end
            continue
        index += 1
    return Blanked("".join(out), frozenset(comment_lines))


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
    stack: list[int] = []
    for index in range(position):
        ch = code[index]
        if ch == "{":
            stack.append(index)
        elif ch == "}" and stack:
            stack.pop()
    for index in stack:
        head = code[max(0, index - 400):index].rstrip()
        match = _FUNCTION_NAME.search(head)
        if match and match.group(1) not in ("if", "for", "while", "switch", "catch"):
            return match.group(1)
    return ""
