"""What every comment reader returns, and where a line comment ends."""

from __future__ import annotations

from typing import NamedTuple


class Comment(NamedTuple):
    start: int  # offset of the comment's marker
    end: int  # offset just past the comment (a line comment ends before its newline)
    block: bool  # `/* */` or CMake's `#[[ ]]`


def line_end(text: str, index: int) -> int:
    """Where the line of `index` ends: at its newline, before a carriage return that precedes it."""
    end = text.find("\n", index)
    end = len(text) if end < 0 else end
    return end - 1 if end > index and text[end - 1] == "\r" else end


def backslashes_before(text: str, index: int, floor: int = 0) -> int:
    """How many backslashes stand right before `index` (not before `floor`)."""
    run = index
    while run > floor and text[run - 1] == "\\":
        run -= 1
    return index - run
