"""Suppression comments: `# kgate: ignore[CODE] reason` and `# kgate: ignore-file[CODE] reason`.

Generic over where findings come from: `apply` takes findings, the
directives of the files they point into, and a test saying which
(path, line, code) the run really examined, and returns the active findings,
the number suppressed and the meta findings about the comments themselves
(KG002 unused, KG003 without a reason or naming an unknown code). `kgate
lint` and `kgate check` both go through it.

A directive is read in a comment only, as kgate.support.comments reads the
file's language: the same text in a string, a raw string, a bracket argument
or a here-document is not one. A directive in a line comment starts with its
language's own line comment marker (`#`, `//` in C++, `#` or `;` in INI
files), its doc-comment forms included (`///`, `//!`, `##`); one in a block
comment (`/* */`, `/** */`, CMake's `#[[ ]]`) starts the comment's text or one
of its lines. Several directives may share a comment (`# kgate: ignore[A] why
# kgate: ignore[B] why`). Text meant as a directive that is not read as one
(`KGATE: ignore`, `kgate ignore`) is reported by KG003.

A line directive silences findings that start on its line; a file directive
(on a line of its own, anywhere in the file) silences the codes in the whole
file. A file directive after code on its line silences nothing and is
reported (KG003), in every language: a reader takes it for a line directive
(ruff ignores its file-level exemption after code too). Several codes are
separated by commas. A directive without a reason still silences its codes, and is reported as KG003 (an error), so the run
fails until a reason is written. `kgate lint --add-ignore` writes
`PLACEHOLDER` as the reason: it silences the finding and KG003 reports it
until someone replaces it with the real reason.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Iterable, Mapping, Sequence
from pathlib import Path
from typing import NamedTuple

from kgate import rules as registry  # type: ignore[attr-defined]
from kgate.core.findings import Finding, Severity, sort_findings
from kgate.core.rule import Report, to_finding
from kgate.core.selection import Selection
from kgate.support.comments import MARKERS, PY_NEWLINE, Comment, comments, language

# How a directive's `kgate` may be written, for the quick test of whether a file may hold one (or something meant as
# one, which KG003 reports): `kgate`, `KGATE`, `Kgate`, `KGate`.
_MENTIONS = (b"kgate", b"KGATE", b"Kgate", b"KGate")
_MENTIONS_TEXT = tuple(word.decode() for word in _MENTIONS)
# What may follow a line comment's marker before the directive: the language's own doc-comment forms (`///`, `//!`,
# `///<`, `##`, `#:`, `#!`, `;;`) are comments like any other.
_DECORATION = r"(?:(?<=#)[#!:]*|(?<=//)[/!<]*|(?<=;);*)"
# A comment marker at the start of the line or after a space: "`# kgate: ...`" quoted in prose is not one.
_DIRECTIVE = re.compile(r"(?:^|(?<=\s))(?:#|//|;)" + _DECORATION
                        + r"\s*kgate\s*:\s*ignore(?P<file>-file)?(?![\w-])(?P<rest>.*)$")
# A directive in a block comment (`/* */`, `/** */`, `/*! */`, CMake's `#[[ ]]`): at the start of the comment's text
# or of one of its lines (after the ` * ` that a C block comment's lines often start with).
_BARE = re.compile(r"kgate\s*:\s*ignore(?P<file>-file)?(?![\w-])(?P<rest>.*)$")
_BLOCK_OPEN = re.compile(r"/(?:\\\r?\n)*\*[*!]*|#\[(?P<eq>=*)\[")
_BLOCK_LINE = re.compile(r"[ \t]*(?:\*+(?!/)[ \t]*)?")
# Text meant as a directive that is not one (`KGATE: ignore`, `kgate ignore`, `kgate: ignore_file`, `kgate: IGNORE`),
# where a comment starts or a block comment's line does, before its codes: KG003 says it is not read.
_NEAR_WORD = r"(?P<word>(?i:k-?gate)\b\s*[:=]?\s*(?i:ignore|noqa|disable)[\w-]*)(?=\s*[\[(]|\s*$)"
_NEAR = re.compile(r"(?:^|(?<=\s))(?P<marker>#|//|;)" + _DECORATION + r"\s*" + _NEAR_WORD)
_NEAR_BARE = re.compile(_NEAR_WORD)
_ANY_MARKER = ("#", "//", ";")
_CODES = re.compile(r"\[(?P<codes>[^\]]*)\](?P<reason>.*)$")
_NEXT_COMMENT = re.compile(r"\s#\s|\s//")
_REASON_LEAD = " \t:-\u2013\u2014"
UNUSED, INVALID = "KG002", "KG003"
# The reason `kgate lint --add-ignore` writes: a directive whose reason starts with it has no reason yet.
PLACEHOLDER = "TODO: give the reason"


class Directive(NamedTuple):
    line: int
    col: int  # 1-based column of the comment marker
    file_level: bool
    codes: tuple[str, ...]
    reason: str
    problem: str  # "" for a well-formed directive
    # An `ignore-file` after code on its line: it silences nothing (KG003 reports it), as ruff ignores its
    # file-level exemption after code.
    misplaced: bool = False


class Suppressed(NamedTuple):
    """The findings left once the suppression comments are applied, and how many they silenced."""

    findings: list[Finding]  # active findings, meta findings included, sorted
    suppressed: int


def mentions(data: bytes) -> bool:
    """Whether a file's bytes may hold a directive, or text meant as one that KG003 reports."""
    return any(word in data for word in _MENTIONS)


def parse_directives(text: str, lang: str | None = None, *, python: bool = False) -> list[Directive]:
    """Every `kgate: ignore` directive of a file's text, read in its comments only (`lang`, as
    kgate.collect.comments names languages; `python`: the same as "python"): a directive's text inside a
    string, a raw string, a bracket argument or a here-document is not one. Every comment form of the language
    holds directives: line comments with their doc-comment forms (`///`, `//!`, `##`), and block comments (`/* */`,
    `/** */`, CMake's `#[[ ]]`) at the start of their text or of one of their lines. Text meant as a directive that
    is not one (`KGATE: ignore[...]`, `kgate ignore[...]`, `kgate: ignore_file[...]`) is returned as a directive
    that names no code, whose problem says so."""
    if not any(word in text for word in _MENTIONS_TEXT):
        return []
    lang = "python" if python and lang is None else lang
    found = comments(text, lang)
    markers = MARKERS.get(lang or "", _ANY_MARKER)
    out = []
    line, counted = 1, 0
    for index, comment in enumerate(found):
        if not any(word in text[comment.start:comment.end] for word in _MENTIONS_TEXT):
            continue
        if lang == "python":  # a lone `\r` ends a Python line too, as the syntax tree's line numbers count it
            line += len(PY_NEWLINE.findall(text, counted, comment.start))
            newline = text.rfind("\n", 0, comment.start)  # then a `\r` after it only: a search from the text's
            line_start = max(newline, text.rfind("\r", newline + 1, comment.start)) + 1  # start is quadratic
        else:
            line += text.count("\n", counted, comment.start)
            line_start = text.rfind("\n", 0, comment.start) + 1
        counted = comment.start
        offset = comment.start - line_start
        after_code = _code_before(text, line_start, found, index)
        if comment.block:
            out.extend(_block_directives(text, comment, line, offset, after_code or _code_after(text, comment)))
            continue
        # The code before the comment on its line is blanked: the comment's own marker starts a directive
        # whatever comes before it (`launch();// kgate: ...`), as the comment reader found it.
        body = " " * offset + text[comment.start:comment.end]
        read = directives_in(body, offset, markers)
        for match in read:
            # A comment continued onto further lines (a `//` comment ending in a backslash): the directive's line.
            further = body.count("\n", 0, match.start())
            out.append(_directive(line + further, match, body, after_code=after_code and not further))
        starts = {match.start() for match in read}
        for near in _NEAR.finditer(body, offset):
            if near.group("marker") in markers and near.start() not in starts:
                further = body.count("\n", 0, near.start())
                out.append(_unread(line + further, near, body))
    return out


def _block_directives(text: str, comment: Comment, line: int, offset: int, beside_code: bool) -> list[Directive]:
    """The directives of a block comment that starts on `line`, `offset` characters into it: one at the start of the
    comment's text or of one of its lines, to the line's end or the comment's close. `beside_code`: code stands on
    the comment's first line, before or after it."""
    opening = _BLOCK_OPEN.match(text, comment.start)
    if opening is None:
        return []
    close = ("]" + (opening.group("eq") or "") + "]") if opening.group().startswith("#") else "*/"
    end = comment.end - len(close) if text.endswith(close, comment.start, comment.end) else comment.end
    inner = text[opening.end():max(opening.end(), end)]
    out = []
    column = offset + opening.end() - comment.start  # where the first line's text starts
    for number, piece in enumerate(inner.split("\n")):
        piece = piece.removesuffix("\r")
        lead = len(piece) - len(piece.lstrip(" \t")) if number == 0 else _BLOCK_LINE.match(piece).end()  # type: ignore[union-attr]
        body = " " * column + piece
        at = column + lead
        match = _BARE.match(body, at)
        if match is not None:
            out.append(_directive(line + number, match, body, after_code=beside_code and number == 0))
        else:
            near = _NEAR_BARE.match(body, at)
            if near is not None:
                out.append(_unread(line + number, near, body))
        column = 0
    return out


def _code_after(text: str, comment: Comment) -> bool:
    """Whether code follows a block comment on the line where it ends."""
    newline = text.find("\n", comment.end)
    return bool(text[comment.end:len(text) if newline < 0 else newline].strip())


def _unread(number: int, match: re.Match[str], line: str) -> Directive:
    """Text meant as a directive that is not read as one: it silences nothing, and KG003 says why."""
    col = match.start() - (line.rfind("\n", 0, match.start()) + 1) + 1
    word = " ".join(match.group("word").split())
    return Directive(number, col, False, (), "", f"`{word}` is not read as a directive: write `kgate: ignore[CODE] "
                     f"reason` for a line, `kgate: ignore-file[CODE] reason` for the file (lower case, a colon after "
                     f"`kgate`)")


def _code_before(text: str, line_start: int, found: list[Comment], index: int) -> bool:
    """Whether code stands before comment `found[index]` on its line (from `line_start`): text other than spaces
    and the line's earlier comments."""
    end = found[index].start
    for back in range(index - 1, -1, -1):  # the line's own comments only: the walk stops at the line's start
        earlier = found[back]
        if earlier.end <= line_start:
            break
        if text[earlier.end:end].strip():
            return True
        end = earlier.start
    return bool(text[line_start:max(line_start, end)].strip())


# The start of a directive: a comment marker at the start of the comment or after a space ("`# kgate: ...`"
# quoted in prose is not one).
_START = re.compile(r"(?:^|(?<=\s))(?P<marker>#|//|;)" + _DECORATION + r"\s*kgate\s*:\s*ignore(?P<file>-file)?(?![\w-])")


def directives_in(line: str, start: int = 0, markers: tuple[str, ...] = _ANY_MARKER) -> list[re.Match[str]]:
    """The directives of one comment: each `_DIRECTIVE` match ends where the next directive starts (or the
    line does). A directive starts with one of `markers`, its language's line comment markers: in a Python
    comment, `// kgate: ...` is prose."""
    out = []
    starts = [found for found in _START.finditer(line, start) if found.group("marker") in markers]
    for index, found in enumerate(starts):
        end = starts[index + 1].start() if index + 1 < len(starts) else len(line)
        newline = line.find("\n", found.start())
        if 0 <= newline < end:
            end = newline - 1 if line[newline - 1:newline] == "\r" else newline
        match = _DIRECTIVE.match(line, found.start(), end)
        if match is not None:
            out.append(match)
    return out


def _directive(number: int, match: re.Match[str], line: str, *, after_code: bool) -> Directive:
    file_level = bool(match.group("file"))
    misplaced = file_level and after_code
    col = match.start() - (line.rfind("\n", 0, match.start()) + 1) + 1
    form = "ignore-file" if file_level else "ignore"
    codes = _CODES.match(match.group("rest").strip())
    names = tuple(c.strip() for c in codes.group("codes").split(",") if c.strip()) if codes else ()
    # A second comment after the codes (a linter's or a type checker's) is not a reason.
    reason = _NEXT_COMMENT.split(codes.group("reason"), 1)[0].strip(_REASON_LEAD) if codes else ""
    problems = [(f"`kgate: ignore-file` after code silences nothing: a file directive stands on a line of its own "
                 f"(for this line only, write `kgate: ignore[{', '.join(names) or 'CODE'}]`)")] if misplaced else []
    if codes is None:
        problems.append(f"`kgate: {form}` must name codes: `kgate: {form}[CODE] reason`")
    elif not names:
        problems.append(f"`kgate: {form}[]` names no code")
    elif not reason:
        problems.append(f"`kgate: {form}[{', '.join(names)}]` gives no reason: write why after the codes")
    elif reason.startswith(PLACEHOLDER):
        problems.append(f"`kgate: {form}[{', '.join(names)}]` still has the placeholder reason {PLACEHOLDER!r}: "
                        f"replace it with why")
    return Directive(number, col, file_level, names, reason, "; ".join(problems), misplaced)


# --------------------------------------------------------------------------- writing directives


def without_code(line: str, col: int, code: str) -> tuple[int, int, str] | None:
    """The edit that removes `code` from the directive whose marker starts at 0-based `col` of `line` (or whose
    `kgate` does, in a block comment): (start, end, replacement) in the line's characters. The whole directive goes
    (with the space before it) when it named only that code: a block comment with it, where the comment is the line's
    last text and holds nothing else. None when there is no such directive there, or it cannot go alone."""
    # The marker at `col` starts the comment: what comes before it on the line is code, not prose.
    match = _DIRECTIVE.match(" " * col + line[col:], col)
    block = None
    if match is None:
        match = _BARE.match(line, col)
        if match is None:
            return None
        block = _block_bounds(line, col)
    rest = match.group("rest")
    close = -1
    if block is not None and block[1] >= 0:
        close = block[1]
        rest = line[match.start("rest"):close]
    codes = _CODES.match(rest.strip())
    if codes is None:
        return None
    names = [c.strip() for c in codes.group("codes").split(",") if c.strip()]
    if code not in names:
        return None
    kept = [c for c in names if c != code]
    bracket_start = match.start("rest") + rest.index("[")
    bracket_end = bracket_start + rest[rest.index("["):].index("]") + 1
    if kept:
        return bracket_start, bracket_end, f"[{', '.join(kept)}]"
    if block is not None:
        return _without_block(line, col, block)
    # The directive ends where a second comment starts (a linter's), else at the end of the line.
    following = _NEXT_COMMENT.search(line, bracket_end)
    end = following.start() if following else len(line)
    start = col
    if following is None:
        while start > 0 and line[start - 1] in " \t":
            start -= 1
    else:
        end += 1  # keep one space before the next comment
        while end < len(line) and line[end] in " \t":
            end += 1
    return start, end, ""


_OPENS_BEFORE = re.compile(r"(?:/\*[*!]*|#\[(?P<eq>=*)\[)[ \t]*$")


def _block_bounds(line: str, col: int) -> tuple[int, int, int]:
    """Where the block comment around the directive at `col` opens on `line` (-1: on an earlier line), and where its
    close starts and ends (-1, -1: on a later line)."""
    opening = _OPENS_BEFORE.search(line, 0, col)
    if opening is not None:
        close = re.compile(re.escape("]" + (opening.group("eq") or "") + "]") if opening.group().startswith("#")
                           else r"\*/")
    else:
        close = _ANY_CLOSE
    found = close.search(line, col)
    return (opening.start() if opening is not None else -1), (found.start() if found else -1), \
        (found.end() if found else -1)


_ANY_CLOSE = re.compile(r"\*/|\]=*\]")


def _without_block(line: str, col: int, block: tuple[int, int, int]) -> tuple[int, int, str] | None:
    """The edit that removes a block comment's directive whole: the comment when it is the line's last text and holds
    only the directive, the comment's line when the directive is all of it; None elsewhere (left to the reader)."""
    opened, close, end = block
    lead = _BLOCK_LINE.match(line)
    if opened >= 0 and close >= 0:
        if line[end:].strip():
            return None
        start = opened
        while start > 0 and line[start - 1] in " \t":
            start -= 1
        return start, len(line), ""
    if opened < 0 and close < 0 and lead is not None and lead.end() >= col:
        return 0, len(line), ""  # a line of a longer block comment that holds the directive alone
    if opened >= 0 > close:  # the comment goes on below: the directive's text goes, the opening stays
        start = col
        while start > opened + 2 and line[start - 1] in " \t":
            start -= 1
        return start, len(line), ""
    if opened < 0 <= close and lead is not None and lead.end() >= col:  # the comment's last line: its close stays
        return 0, close, " "
    return None


def with_code(line: str, code: str, marker: str) -> str | None:
    """`line`, the comment that ends a line as its language reads it (or the empty text where none does), with
    `code` pinned by a line directive of its own, `marker` (`#` or `//`) kgate: ignore[CODE] PLACEHOLDER, at its
    end; only a directive of the comment that still has the placeholder reason takes the code into its list (a
    directive with a real reason never does: its reason is not the new code's). None when a line directive there
    already names the code."""
    pending = None
    for match in directives_in(line, 0, (marker,)):
        codes = _CODES.match(match.group("rest").strip())
        if match.group("file") or codes is None:
            continue
        names = [c.strip() for c in codes.group("codes").split(",") if c.strip()]
        if code in names:
            return None
        reason = _NEXT_COMMENT.split(codes.group("reason"), 1)[0].strip(_REASON_LEAD)
        if pending is None and reason.startswith(PLACEHOLDER):
            pending = match, names
    if pending is not None:
        match, names = pending
        close = match.start("rest") + match.group("rest").index("]")
        return f"{line[:close]}{', ' if names else ''}{code}{line[close:]}"
    body = line.rstrip()
    return f"{body}{'  ' if body.strip() else ''}{marker} kgate: ignore[{code}] {PLACEHOLDER}"


# --------------------------------------------------------------------------- applying


Judged = Callable[[str, int, str], bool]


def apply(findings: Iterable[Finding], directives: Mapping[str, Sequence[Directive]], selection: Selection,
          judged: Judged, *, meta: bool = True) -> Suppressed:
    """Active findings after the directives; `judged(path, line, code)` (line 0: anywhere in the file)
    says whether this run examined that code there, which is what makes an unused directive a finding. With
    `meta` (the run that judges the comments themselves), a directive's KG002 or KG003 that silenced none of the
    findings about the comments is unused too."""
    used: set[tuple[str, int, str]] = set()
    active, suppressed = [], 0
    for finding in findings:
        hit = _match(finding, directives.get(finding.path, ()))
        if hit is None:
            active.append(finding)
        else:
            used.add((finding.path, hit.line, finding.code))
            suppressed += 1
    about = []
    for path, items in sorted(directives.items()):
        for directive in items:
            about.extend(_meta(path, directive, used, judged, selection))
    for finding in about:
        hit = _match(finding, directives.get(finding.path, ()))
        if hit is None:
            active.append(finding)
        else:
            used.add((finding.path, hit.line, finding.code))
            suppressed += 1
    if meta:
        for path, items in sorted(directives.items()):
            found, silenced = _unused_meta(path, items, used, selection)
            active.extend(found)
            suppressed += silenced
    return Suppressed(sort_findings(active), suppressed)


def _unused_meta(path: str, directives: Sequence[Directive], used: set[tuple[str, int, str]],
                 selection: Selection) -> tuple[list[Finding], int]:
    """KG002 for each KG002 or KG003 a file's directives name that silenced nothing, and how many of those another
    directive silenced. The comment rules judge every directive of every file the run reads, so a pin of theirs
    that nothing was reported under is stale (and would silence the next stale or broken comment on its line).
    Such a finding is never matched against the directive it is about (it would silence itself); another
    directive naming KG002 may silence it, which makes that one's KG002 used in turn."""
    if not selection.keep(_probe(path, UNUSED)):
        return [], 0
    pending: list[tuple[Directive, str, Finding]] = []
    for directive in directives:
        if directive.misplaced:
            continue
        for code in directive.codes:
            if code in (UNUSED, INVALID) and (path, directive.line, code) not in used \
                    and selection.keep(_probe(path, code)):
                for report in registry.load(UNUSED).check((directive, code), None):
                    pending.append((directive, code, meta_finding(UNUSED, report, path, selection, directive)))
    silenced = 0
    changed = True
    while changed:  # a silenced finding makes the silencing directive's KG002 used: settle until nothing moves
        changed = False
        for entry in list(pending):
            directive, code, finding = entry
            hit = _match(finding, [d for d in directives if d is not directive])
            if (path, directive.line, code) in used or hit is not None:
                pending.remove(entry)
                changed = True
                if hit is not None:
                    used.add((path, hit.line, UNUSED))
                    silenced += 1
    return [finding for _directive, _code, finding in pending], silenced


def _match(finding: Finding, directives: Sequence[Directive]) -> Directive | None:
    for directive in directives:
        if directive.misplaced:
            continue
        if finding.code in directive.codes and (directive.file_level or directive.line == finding.line):
            return directive
    return None


def _meta(path: str, directive: Directive, used: set[tuple[str, int, str]], judged: Judged,
          selection: Selection) -> list[Finding]:
    out = []
    names = {name: code for code, name, _module in registry.REGISTRY}
    if selection.keep(_probe(path, INVALID)):
        for report in registry.load(INVALID).check((directive, names), None):
            out.append(meta_finding(INVALID, report, path, selection, directive))
    if directive.misplaced or not selection.keep(_probe(path, UNUSED)):
        return out  # a misplaced directive silences nothing by design: KG003 says so, not KG002
    known = set(names.values())
    line = 0 if directive.file_level else directive.line
    for code in directive.codes:
        if code in known and code not in (UNUSED, INVALID) and (path, directive.line, code) not in used \
                and judged(path, line, code):
            for report in registry.load(UNUSED).check((directive, code), None):
                out.append(meta_finding(UNUSED, report, path, selection, directive))
    return out


def _probe(path: str, code: str) -> Finding:
    return Finding(path=path, line=0, col=0, code=code, name="", severity=Severity.NOTE, message="")


def meta_finding(code: str, report: Report, path: str, selection: Selection, directive: Directive) -> Finding:
    identity = f"{'file' if directive.file_level else 'line'}|{','.join(directive.codes)}|{report.discriminator}"
    return to_finding(registry.load(code), report, selection, path=path, line=directive.line, identity=identity)


# --------------------------------------------------------------------------- compiled findings


def for_compiled(findings: list[Finding], root: Path, kernel_lines: Mapping[str, set[int]], selection: Selection,
                 *, complete: bool) -> Suppressed:
    """Suppressions for `kgate check`: compiled findings point at a kernel's `def` line, where the comment goes.

    `kernel_lines`: path -> definition lines of the kernels compiled in this
    run. Only directives naming a compiled code are considered (the others
    are `kgate lint`'s); a partial run (some kernels or targets) judges none
    of them unused.
    """
    compiled = set(registry.codes("compiled")) | {"KG001"}
    directives: dict[str, list[Directive]] = {}
    for path in sorted(set(kernel_lines) | {f.path for f in findings}):
        try:
            data = (root / path).read_bytes()
        except OSError:
            continue
        if not mentions(data):
            continue
        try:
            found = parse_directives(data.decode("utf-8-sig"), language(path))
        except UnicodeDecodeError:
            continue
        found = [d for d in found if compiled & set(d.codes)]
        if found:
            directives[path] = found

    def judged(path: str, line: int, code: str) -> bool:
        lines = kernel_lines.get(path, set())
        return complete and code in compiled and selection.active(code) and not selection.ignored_for(path, code) \
            and (line in lines if line else bool(lines))

    return apply(findings, directives, selection, judged, meta=False)
