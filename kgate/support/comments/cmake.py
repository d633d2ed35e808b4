"""CMake: `#` line comments and bracket comments `#[==[ ]==]`; quoted and bracket arguments are not comments."""

from __future__ import annotations

import re

from kgate.support.comments.span import Comment, line_end

_CMAKE = re.compile(r'#\[(=*)\[|#|"|\[(=*)\[|\\')


def comments(text: str) -> list[Comment]:
    out: list[Comment] = []
    index = 0
    while True:
        match = _CMAKE.search(text, index)
        if match is None:
            return out
        at, token = match.start(), match.group()
        if token == "\\":
            index = at + 2
        elif token.startswith("#["):
            close = text.find("]" + match.group(1) + "]", match.end())
            end = len(text) if close < 0 else close + len(match.group(1)) + 2
            out.append(Comment(at, end, True))
            index = end
        elif token == "#":
            end = line_end(text, at)
            out.append(Comment(at, end, False))
            index = end
        elif token == '"':
            index = _quoted_end(text, at + 1)
        else:  # `[=[`: a bracket argument where an argument starts
            if at > 0 and text[at - 1] not in " \t\r\n()":
                index = at + 1
                continue
            close = text.find("]" + match.group(2) + "]", match.end())
            index = len(text) if close < 0 else close + len(match.group(2)) + 2


def _quoted_end(text: str, index: int) -> int:
    """End of a CMake quoted argument, which may span lines."""
    while index < len(text):
        ch = text[index]
        if ch == "\\":
            index += 2
            continue
        if ch == '"':
            return index + 1
        index += 1
    return len(text)
