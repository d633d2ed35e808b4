"""Configuration files: TOML (`#` outside its four kinds of string) and INI (`setup.cfg`, `tox.ini`, `pytest.ini`:
whole-line comments only, as configparser and pytest's iniconfig read them; inline text is part of a value)."""

from __future__ import annotations

import re

from kgate.support.comments.python import string_end
from kgate.support.comments.span import Comment, line_end

_TOML_SCAN = re.compile(r"""#|('''|\"\"\"|'|")""")


def toml_comments(text: str) -> list[Comment]:
    return [Comment(start, end, False) for kind, start, end in toml_tokens(text) if kind == "#"]


def toml_strings(text: str) -> list[tuple[int, int]]:
    """(start, end) of each TOML string, its quotes included."""
    return [(start, end) for kind, start, end in toml_tokens(text) if kind != "#"]


def toml_tokens(text: str) -> list[tuple[str, int, int]]:
    """The comments (kind `#`) and strings (kind: the opening quotes) of a TOML text, in order. Literal strings
    (`'`) take no escapes; a multi-line string's closing quotes may be followed by one or two more quotes of
    its kind, which are part of its value (`'''it''''` is "it'")."""
    out: list[tuple[str, int, int]] = []
    index = 0
    while True:
        match = _TOML_SCAN.search(text, index)
        if match is None:
            return out
        token = match.group()
        if token == "#":
            end = line_end(text, match.start())
        else:
            end = string_end(text, match.end(), token, escapes=token[0] == '"')
            if len(token) == 3 and text.endswith(token, 0, end):
                extra = 0
                while extra < 2 and text.startswith(token[0], end + extra):
                    extra += 1
                end += extra
        out.append((token, match.start(), end))
        index = end


def toml_lines(text: str, lines: list[str]) -> tuple[list[str | None], list[str | None], set[tuple[int, int]]]:
    """TOML `lines` (`text` split at its line ends) as TOML reads them: each line with its comment blanked (None for
    a line that starts inside a multi-line string), the same with its strings blanked too, and the (line index,
    column) where each string starts."""
    starts = [0]
    for line in lines[:-1]:
        starts.append(starts[-1] + len(line) + 1 + text.startswith("\r\n", starts[-1] + len(line)))
    code: list[str | None] = list(lines)
    masked: list[str | None] = list(lines)
    strings: set[tuple[int, int]] = set()
    number = 0
    for kind, begin, end in toml_tokens(text):
        while number + 1 < len(starts) and starts[number + 1] <= begin:
            number += 1
        col = begin - starts[number]
        row = masked[number] or ""
        masked[number] = row[:col] + " " * (min(end - begin, len(row) - col)) + row[col + end - begin:]
        if kind == "#":
            row = code[number] or ""
            code[number] = row[:col] + " " * (len(row) - col)
            continue
        strings.add((number, col))
        inside = number + 1
        while inside < len(starts) and starts[inside] < end:
            code[inside] = masked[inside] = None
            inside += 1
    return code, masked, strings


def ini_comments(text: str) -> list[Comment]:
    return [Comment(match.start(1), match.end(1), False)
            for match in re.finditer(r"(?m)^[ \t]*([#;][^\r\n]*)", text)]
