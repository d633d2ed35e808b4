"""Python comments: the tokenizer's; a file it cannot read is scanned by a reader that knows the string forms."""

from __future__ import annotations

import re
from collections.abc import Iterator
from contextlib import contextmanager

from kgate.support.comments.span import Comment, line_end

PY_LINE = re.compile(r"[^\r\n]*(?:\r\n|\r|\n)|[^\r\n]+\Z")
PY_NEWLINE = re.compile(r"\r\n|\r|\n")
# A Python string with its prefix; (opening, closing, escapes) is decided from the match.
_PY_STRING = re.compile(r"""(?i:[rbuf]{0,2})('''|\"\"\"|'|")""")
_PY_SCAN = re.compile(r"#|" + _PY_STRING.pattern)


def comments(text: str) -> list[Comment]:
    found = read(text)
    return found[0] if found is not None else _scan(text)


@contextmanager
def readings_kept() -> Iterator[None]:
    """For the length of a run that reads the same files more than once (a fix or a pin lints each file, then edits
    it in the comments that lint found): each text's reading kept, so that the tokenizer reads it once. Callers
    never change what `read` gives."""
    _KEPT.append({})
    try:
        yield
    finally:
        _KEPT.pop()


_KEPT: list[dict[str, tuple[list[Comment], set[int]] | None]] = []


def read(text: str) -> tuple[list[Comment], set[int]] | None:
    """The comments of `text`, and the (1-based) lines whose end is inside a token that goes on past it (a
    multi-line string): as the tokenizer reads them, once. None where the tokenizer cannot read the text."""
    if not _KEPT:
        return _tokenized(text)
    kept = _KEPT[-1]
    if text not in kept:
        kept[text] = _tokenized(text)
    return kept[text]


def _tokenized(text: str) -> tuple[list[Comment], set[int]] | None:
    import tokenize

    # Python ends a line at `\r\n`, `\r` or `\n` (a lone `\r` too, as `ast` counts lines): the tokenizer is given
    # the lines so split, so that its rows are the rows of `starts`.
    starts = [0, *(m.end() for m in PY_NEWLINE.finditer(text))]
    lines = iter(PY_LINE.findall(text))
    out = []
    inside: set[int] = set()
    try:
        for token in tokenize.generate_tokens(lambda: next(lines, "")):
            if token.type == tokenize.COMMENT:
                at = starts[token.start[0] - 1] + token.start[1]
                out.append(Comment(at, at + len(token.string), False))
            elif token.end[0] > token.start[0]:
                inside.update(range(token.start[0], token.end[0]))
    except (tokenize.TokenError, SyntaxError):
        return None
    return out, inside


def _scan(text: str) -> list[Comment]:
    """`#` comments outside strings, for a file the tokenizer cannot read: single- and triple-quoted strings, with
    backslash escapes except in raw strings."""
    out: list[Comment] = []
    index = 0
    while True:
        match = _PY_SCAN.search(text, index)
        if match is None:
            return out
        if match.group() == "#":
            end = line_end(text, match.start())
            out.append(Comment(match.start(), end, False))
            index = end
            continue
        quote = match.group(1)
        prefix = match.group()[:-len(quote)].lower()
        if match.start() > 0 and (text[match.start() - 1].isalnum() or text[match.start() - 1] == "_"):
            index = match.end() if not prefix else match.start() + 1
            continue
        index = string_end(text, match.end(), quote, escapes="r" not in prefix)


def string_end(text: str, index: int, quote: str, *, escapes: bool) -> int:
    """Past the closing `quote` of a string whose text starts at `index` (a one-quote string ends at a newline)."""
    while index < len(text):
        ch = text[index]
        if escapes and ch == "\\":
            index += 2
            continue
        if text.startswith(quote, index):
            return index + len(quote)
        if ch == "\n" and len(quote) == 1:
            return index + 1
        index += 1
    return len(text)
