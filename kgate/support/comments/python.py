"""Python comments: the tokenizer's; a file it cannot read is scanned by a reader that knows the string forms."""

from __future__ import annotations

import re
import sys
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


def comments_once(text: str) -> list[Comment]:
    """`comments`, for a text read once (the line of a finding, cut of its comments): by `scanned` where Python
    compiles the text, the compile costing a fraction of the tokenizer's step per token; else as `comments` reads it.
    Within `readings_kept`, the kept reading."""
    if not _KEPT and compiles(text):
        found = scanned(text)
        if found is not None:
            return found[0]
    return comments(text)


@contextmanager
def readings_kept() -> Iterator[None]:
    """For the length of a run that reads the same files more than once (a fix or a pin lints each file, then edits
    it in the comments that lint found): each text's reading kept, so that it is read once, and read by `scanned`
    where Python compiles it. Callers never change what `read` gives."""
    _KEPT.append({})
    try:
        yield
    finally:
        _KEPT.pop()


_KEPT: list[dict[str, tuple[list[Comment], set[int]] | None]] = []


def read(text: str) -> tuple[list[Comment], set[int]] | None:
    """The comments of `text`, and the (1-based) lines whose end is inside a token that goes on past it (a
    multi-line string): as the tokenizer reads them, once (within `readings_kept`, through `scanned` where Python
    compiles the text). None where the tokenizer cannot read the text."""
    if not _KEPT:
        return _tokenized(text)
    kept = _KEPT[-1]
    if text not in kept:  # a fix or a pin: a text Python compiles is scanned (the compile costs less than the tokens)
        kept[text] = (scanned(text) if compiles(text) else None) or _tokenized(text)
    return kept[text]


def compiles(text: str) -> bool:
    """Whether Python compiles `text` (warnings aside)."""
    import warnings

    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            compile(text, "<kgate>", "exec", dont_inherit=True)
    except (SyntaxError, ValueError, RecursionError, MemoryError):
        return False
    return True


# The strings and comments of Python source, as the tokenizer of Python 3.10 and 3.11 reads them (its own patterns,
# matched across lines): a comment to the line's end; a triple-quoted string, where a backslash escapes any character
# (a newline too); a one-quote string, which a backslash continues onto the next line. A quote that starts none of
# them starts a string that never ends.
_Q1, _Q2 = "'", '"'
_PY_TOKEN = re.compile("|".join((
    r"#[^\r\n]*",
    _Q1 * 3 + r"[^'\\]*(?:(?:\\[\s\S]|'(?!''))[^'\\]*)*" + _Q1 * 3,
    _Q2 * 3 + r'[^"\\]*(?:(?:\\[\s\S]|"(?!""))[^"\\]*)*' + _Q2 * 3,
    r"'[^\r\n'\\]*(?:\\(?:\r\n|[\s\S])[^\r\n'\\]*)*'",
    r'"[^\r\n"\\]*(?:\\(?:\r\n|[\s\S])[^\r\n"\\]*)*"',
    r"['\"]")))
_LONE_CR = re.compile(r"\r(?!\n)")
_F_PREFIX = re.compile(r"[fFtT][rR]?\Z")  # an f-string's prefix, or a t-string's (Python 3.14), or a name's end


def scanned(text: str) -> tuple[list[Comment], set[int]] | None:
    """What `read` gives for a text that Python compiles, found with one regular expression rather than the
    tokenizer (which costs a Python step per token); None where the scan cannot vouch for that: a string that never
    ends, a line that ends in a lone carriage return, and under Python 3.12 and later (whose tokenizer splits an
    f-string into parts) any quote after an `f` or a `t`, and any carriage return. Only for text that
    compiles: the tokenizer also refuses brackets left open and inconsistent indentation, which the scan does not
    look at."""
    modern = sys.version_info >= (3, 12)
    if (modern and "\r" in text) or (not modern and "\r" in text and _LONE_CR.search(text)):
        return None
    out: list[Comment] = []
    inside: set[int] = set()
    line, counted = 1, 0
    for match in _PY_TOKEN.finditer(text):
        start, end = match.span()
        if text[start] == "#":
            out.append(Comment(start, end, False))
            continue
        if end - start == 1:
            return None  # a string that never ends: the tokenizer's error
        if modern and _F_PREFIX.search(text, max(0, start - 2), start):
            return None
        newlines = text.count("\n", start, end)
        if newlines:
            line += text.count("\n", counted, start)
            counted = start
            inside.update(range(line, line + newlines))
    return out, inside


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
