"""A Python module with what the source rules cannot be concerned by blanked out, so it parses faster.

Parsing is most of what `kgate lint` costs on a cold run, and most of a
kernel module is code no rule reads: launchers, autograd wrappers, the
bodies of kernels that are only checked by their decorator. `sparse` keeps

- every module-level statement that is not a `def` or `class` (imports,
  constants, `if`/`try` blocks), whole;
- a definition (with its decorators) whose body mentions a needle, or the
  name of a kept function or constant, whole;
- a definition whose needles are all in its decorators or signature, with
  its body replaced by `pass`;

and blanks everything else, line for line, so that every position in the
tree is the position in the file. The scan is textual: module-level
statements start at column 0 outside multi-line strings. Anything it
cannot read with confidence is kept; if the result does not parse, the
caller parses the whole file.
"""

from __future__ import annotations

import re
from bisect import bisect_left, bisect_right

# Comments and string literals, in the order a tokenizer meets them: a `"""` inside a comment or
# an ordinary string does not open a multi-line string.
_LITERALS = re.compile(
    r"#[^\r\n]*"
    r"|[rRbBuUfF]{0,2}(?:\"\"\"(?:[^\"\\]|\\.|\"(?!\"\"))*\"\"\"|'''(?:[^'\\]|\\.|'(?!''))*''')"
    r"|[rRbBuUfF]{0,2}(?:\"(?:[^\"\\\r\n]|\\.)*\"|'(?:[^'\\\r\n]|\\.)*')",
    re.DOTALL,
)
_TRIPLE = re.compile(r"\"\"\"|\'\'\'")
_DEFINITION = re.compile(r"(?:async\s+def|def|class)\b")
_ASSIGNED = re.compile(r"([A-Za-z_]\w*)\s*(?::[^=]*)?=(?!=)")
_ALIAS = re.compile(r"\bas\s+([A-Za-z_]\w*)")
_WORD = re.compile(r"\w+")


# A top-level statement: first line, end (exclusive), the line that ends its signature (None: not a definition).
Block = tuple[int, int, int | None]


def sparse(lines: list[str], needles: tuple[str, ...]) -> str | None:
    """The module's text with unneeded definitions blanked (same lines and columns), or None to parse it whole."""
    blocks = split(lines)
    return None if blocks is None else excerpt(lines, *select(lines, blocks, needles))


def split(lines: list[str], remember: bool = True) -> list[Block] | None:
    """The module's top-level statements as line ranges (decorators belong to their definition), or None when the
    text cannot be split with confidence. The last answer is kept: a rule that reads more of the same file's
    lines (the same list) after `sparse` does not split it again (`remember=False`: a module read on the side,
    which leaves the kept answer to the file under lint)."""
    if _last_split and _last_split[0] is lines:
        return _last_split[1]
    blocks = _split(lines)
    if remember:
        _last_split[:] = [lines, blocks]
    return blocks


_last_split: list = []  # [lines, blocks] of the last split


def _split(lines: list[str]) -> list[Block] | None:
    inside = _string_lines(lines)
    if inside is None:
        return None
    starts = [i for i, line in enumerate(lines) if line[:1] not in ("", " ", "\t", "#", ")", "]", "}", "\f")
              and i not in inside and not (i and lines[i - 1].rstrip().endswith("\\"))]
    blocks = []  # (first, end, header_end or None for a non-definition)
    i = 0
    while i < len(starts):
        first = starts[i]
        while i < len(starts) and lines[starts[i]].startswith("@"):
            i += 1  # decorators belong to the definition below them
        if i >= len(starts):
            return None
        end = starts[i + 1] if i + 1 < len(starts) else len(lines)
        head = lines[starts[i]]
        header_end = _header_end(lines, starts[i], end) if _DEFINITION.match(head) else None
        if _DEFINITION.match(head) and header_end is None:
            return None
        blocks.append((first, end, header_end))
        i += 1
    return blocks


def definitions(lines: list[str], blocks: list[Block]) -> dict[str, Block]:
    """The top-level `def`s and `class`es of a split module, by name (the last one of a name)."""
    return {_name(lines[_def_line(lines, b[0])]): b for b in blocks if b[2] is not None}


def excerpt(lines: list[str], whole: list[Block], headers: list[Block] | None = None) -> str:
    """The module's text with only the given top-level blocks (and the signatures of `headers`, their bodies
    replaced by `pass`), every other line blank: a few definitions parsed at their own lines and columns."""
    out = [""] * len(lines)
    for first, end, header_end in headers or ():
        if header_end is not None:
            out[first:header_end + 1] = lines[first:header_end + 1]
            if header_end + 1 < end:
                out[header_end + 1] = "    pass"
    for first, end, _header in whole:
        out[first:end] = lines[first:end]
    return "\n".join(out)


def functions_read(lines: list[str], blocks: list[Block], read: set[str]) -> str:
    """The module's text as a reading sees it that reads the bodies of the top-level functions `read` only: every
    block whole, but for the other top-level functions, which are reduced to their signatures; each block with its
    text alone, not where it stands (a line added to another function's body moves the blocks below it)."""
    out: list[str] = []
    for first, end, header_end in blocks:
        if header_end is not None and _is_function(lines[_def_line(lines, first)]) and \
                _name(lines[_def_line(lines, first)]) not in read:
            out.append("\n".join(lines[first:header_end + 1]) + ("\n    pass" if header_end + 1 < end else ""))
        else:
            out.append("\n".join(lines[first:end]))
    return "\0".join(out)


def _is_function(line: str) -> bool:
    return not line.startswith("class")


def containing(blocks: list[Block], marked: list[int]) -> list[Block]:
    """The definitions whose body (after the signature) holds one of the `marked` lines (0-based, sorted)."""
    out = []
    for block in blocks:
        if block[2] is not None:
            at = bisect_left(marked, block[2] + 1)
            if at < len(marked) and marked[at] < block[1]:
                out.append(block)
    return out


def select(lines: list[str], blocks: list[Block], needles: tuple[str, ...] | list[str]
           ) -> tuple[list[Block], list[Block]]:
    """What `sparse` keeps of a split module: the blocks kept whole, and the definitions kept as their signature."""
    names: set[str] = set()  # identifiers that stand for a needle: aliases, constants, kept functions
    marked = _needle_lines(lines, list(needles))
    # The identifiers of a range of lines, read once (a name matches a whole word, as `\b`): the names grow while
    # definitions are kept, and every range not kept yet is asked again.
    words: dict[tuple[int, int], set[str]] = {}

    def mentions(first: int, end: int) -> bool:
        if not needles and not names:  # nothing to look for: every line counts (an empty pattern matches)
            return end > first
        at = bisect_left(marked, first)
        if at < len(marked) and marked[at] < end:
            return True
        if names:
            found = words.get((first, end))
            if found is None:
                found = words[first, end] = set(_WORD.findall("\n".join(lines[first:end])))
            return not names.isdisjoint(found)
        return False

    whole = {b for b in blocks if b[2] is None}
    standing: list[str] = []  # module-level names for a needle: they count from the definitions on
    for first, end, _header in sorted(whole):
        if not mentions(first, end):
            continue
        head = lines[first]
        if head.startswith(("import ", "from ")):  # `from triton import autotune as at`
            standing.extend(_ALIAS.findall(" ".join(lines[first:end])))
        else:
            match = _ASSIGNED.match(head)  # `KEYS = ...`, `tune = triton.autotune`
            if match:
                standing.append(match.group(1))
    names.update(standing)
    changed = True
    while changed:  # a definition that calls a kept one is kept (helpers that do the work)
        changed = False
        for block in blocks:
            first, end, header_end = block
            if block not in whole and header_end is not None and mentions(header_end + 1, end):
                whole.add(block)
                name = _name(lines[_def_line(lines, first)])
                if name:
                    names.add(name)
                changed = True
    signatures = [block for block in blocks if block not in whole and block[2] is not None
                  and mentions(block[0], block[2] + 1)]
    return [block for block in blocks if block in whole], signatures


def _needle_lines(lines: list[str], needles: list[str]) -> list[int]:
    """The lines (0-based, in order) that hold one of `needles`, found by one search of the whole text."""
    if not needles:
        return []
    needle = re.compile("|".join(re.escape(n) for n in needles))
    if any("\n" in n for n in needles):  # a needle no line can hold whole: the lines one by one
        return [index for index, line in enumerate(lines) if needle.search(line)]
    text = "\n".join(lines)
    out: list[int] = []
    index = at = 0  # the line of the offset `at`
    found = needle.search(text)
    while found is not None:
        index += text.count("\n", at, found.start())
        at = found.start()
        out.append(index)
        at_end = text.find("\n", at)
        if at_end < 0:
            break
        found = needle.search(text, at_end + 1)  # the next line on: one mention is enough
    return out


def _name(line: str) -> str:
    return _DEFINITION.sub("", line, count=1).strip().split("(")[0].split(":")[0].strip()


def _def_line(lines: list[str], first: int) -> int:
    index = first
    while lines[index].startswith("@") or not _DEFINITION.match(lines[index]):
        index += 1
    return index


def _header_end(lines: list[str], start: int, end: int) -> int | None:
    """The line that ends a definition's signature (the one with its `:`), or None when unsure."""
    depth = 0
    for index in range(start, min(end, start + 60)):
        code = lines[index]
        if "#" in code or '"' in code or "'" in code:
            code = _LITERALS.sub(_blank, code)
        depth += code.count("(") + code.count("[") + code.count("{")
        depth -= code.count(")") + code.count("]") + code.count("}")
        stripped = code.rstrip()
        if depth == 0 and stripped.endswith(":"):
            return index
        if depth == 0 and ":" in stripped and index > start:
            return None  # a body on the signature's line: keep it whole
    return None


def _blank(match: re.Match[str]) -> str:
    text = match.group(0)
    return "" if text.startswith("#") else '""'


def _string_lines(lines: list[str]) -> set[int] | None:
    """Indexes of lines that continue a multi-line string (they may start at column 0).

    Fast path: pair the triple quotes in order. When one that opens a string
    could be inside a comment or another string (a `#`, a lone quote or a
    backslash before it on its line), scan every literal instead.
    """
    text = "\n".join(lines)
    marks = list(_TRIPLE.finditer(text))
    if not marks:
        return set()
    offsets = [0]
    for line in lines:
        offsets.append(offsets[-1] + len(line) + 1)
    spans: list[tuple[int, int]] = []
    opening: re.Match[str] | None = None
    for mark in marks:
        start = mark.start()
        if opening is None:
            before = text[text.rfind("\n", 0, start) + 1:start]
            if "#" in before or "\\" in before or before.count("'") % 2 or before.count('"') % 2:
                return _scanned_string_lines(text, offsets)
            opening = mark
        elif mark.group() == opening.group() and text[start - 1] != "\\":
            spans.append((opening.start(), mark.end()))
            opening = None
    if opening is not None:
        return _scanned_string_lines(text, offsets)
    return _lines_of(spans, offsets)


def _scanned_string_lines(text: str, offsets: list[int]) -> set[int]:
    spans = [(m.start(), m.end()) for m in _LITERALS.finditer(text)
             if "\n" in m.group(0) and not m.group(0).startswith("#")]
    return _lines_of(spans, offsets)


def _lines_of(spans: list[tuple[int, int]], offsets: list[int]) -> set[int]:
    inside: set[int] = set()
    for start, end in spans:
        first = bisect_right(offsets, start) - 1
        last = bisect_right(offsets, end - 1) - 1
        inside.update(range(first + 1, last + 1))
    return inside
