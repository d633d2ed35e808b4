"""`kgate lint --add-ignore`: pin a project's findings with suppression comments whose reason is a placeholder.

Each finding gets `kgate: ignore[CODE] PLACEHOLDER` at the end of its line
(or its code added to the line's own directive). KG003 reports the
placeholder until someone writes the reason, so adopting kgate this way
still fails the run until every accepted finding is explained; the baseline
is the way to pin findings without failing.

A new pin always gets a directive of its own: a directive that already has
a reason never takes the new code (its reason is not the new code's).
Python comments go in through libcst, into the line's own end (a
statement's, or a line inside brackets); other files take the comment at
the line's end. Every file must then differ in comments alone, as
kgate.support.comments reads its language (Python the same syntax tree, TOML
the same data, C++, CMake, shell and Makefiles the same text outside
comments), and each new comment must read back as the directive on its
line: a line that ends inside a raw string, a bracket argument, a quoted
string or a here-document takes none, and the run says so.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, NamedTuple

from kgate.collect.source import UnreadableSource
from kgate.core.config import Config
from kgate.core.findings import Finding
from kgate.core.selection import Selection
from kgate.core.suppress import parse_directives, with_code
from kgate.pipeline.fix import Change, decoded, line_of, line_starts, parse_problem
from kgate.pipeline.lint import discover
from kgate.support.comments import LINE_MARKER, language, same_code

# Codes that are about the comments or the file itself: never pinned.
_NOT_PINNED = frozenset({"KG002", "KG003", "KG004"})


class PinRun(NamedTuple):
    changes: dict[str, Change]
    pinned: int  # findings a comment now pins
    left: list[tuple[str, int, str, str]]  # (path, line, code, why) findings that could not be pinned
    per_file: dict[str, int]  # findings pinned, by file


def add_ignores(findings: list[Finding], where: dict[str, str]) -> PinRun:
    """A `kgate: ignore[CODE] PLACEHOLDER` comment on the line of each finding (the line's own directive
    gains the code when it has one). `where`: project-relative path -> path to read."""
    by_file: dict[str, dict[int, list[str]]] = {}
    left: list[tuple[str, int, str, str]] = []
    for finding in findings:
        if finding.code in _NOT_PINNED or finding.path not in where or finding.line < 1:
            continue
        codes = by_file.setdefault(finding.path, {}).setdefault(finding.line, [])
        if finding.code not in codes:
            codes.append(finding.code)
    changes: dict[str, Change] = {}
    pinned = 0
    per_file: dict[str, int] = {}
    for rel, lines in sorted(by_file.items()):
        try:
            with open(where[rel], "rb") as handle:
                data = handle.read()
            bom, text = decoded(data, rel)
        except (OSError, UnreadableSource) as exc:
            left.extend((rel, n, c, f"cannot read: {exc}") for n, cs in lines.items() for c in cs)
            continue
        lang = language(rel)
        new, missed = _pinned(text, lines, lang)
        # The comments must read back as directives on their lines, and the file must parse as before.
        found = {(d.line, code) for d in parse_directives(new, lang) for code in d.codes if not d.file_level}
        for number, codes in lines.items():
            if number not in missed and not all((number, code) in found for code in codes):
                missed[number] = "the line ends inside a string or a comment: a comment there would not be read " \
                                 "as a kgate directive"
        if missed and new != text:  # the lines that take a comment, without those that do not
            new = _pinned(text, {n: c for n, c in lines.items() if n not in missed}, lang)[0]
        problem = _changes_meaning(rel, text, new) if new != text else ""
        if problem:
            missed = {n: problem for n in lines}
            new = text
        for number, codes in sorted(lines.items()):
            if number in missed:
                left.extend((rel, number, code, missed[number]) for code in codes)
            else:
                pinned += len(codes)
                per_file[rel] = per_file.get(rel, 0) + len(codes)
        if new != text:
            changes[rel] = Change(where[rel], data, bom + new.encode("utf-8"))
    return PinRun(changes, pinned, left, per_file)


def _pinned(text: str, lines: dict[int, list[str]], lang: str | None) -> tuple[str, dict[int, str]]:
    if lang == "python":
        return _pin_python(text, lines)
    if lang in LINE_MARKER:
        return _pin_text(text, lines, LINE_MARKER[lang])
    return text, {n: "this kind of file takes no line comment kgate reads here" for n in lines}


def _changes_meaning(rel: str, before: str, after: str) -> str:
    """Why adding comments changed more than comments ("" when it did not)."""
    problem = parse_problem(rel, after)
    if problem:
        return f"the result would not parse ({problem})"
    return "" if same_code(rel, before, after) else "a comment there would change the file's meaning"


def _pin_text(text: str, lines: dict[int, list[str]], marker: str) -> tuple[str, dict[int, str]]:
    starts = line_starts(text)
    missed: dict[int, str] = {}
    pieces: list[tuple[int, int, str]] = []
    for number, codes in sorted(lines.items()):
        if number >= len(starts) - 1:
            missed[number] = "no such line"
            continue
        line = line_of(text, starts, number)
        if line.rstrip().endswith("\\"):
            missed[number] = "the line continues on the next (a comment would end it)"
            continue
        new = line
        for code in codes:
            new = with_code(new, code, marker) or new
        pieces.append((starts[number], starts[number] + len(line), new))
    for start, end, new in reversed(pieces):
        text = text[:start] + new + text[end:]
    return text, missed


def _pin_python(text: str, lines: dict[int, list[str]]) -> tuple[str, dict[int, str]]:
    """Through libcst: the comment goes into the line's own end (a statement's, or a line inside brackets);
    a line inside a multi-line string or continued with a backslash has none, and is left."""
    import libcst as cst
    from libcst.metadata import MetadataWrapper, PositionProvider

    try:
        wrapper = MetadataWrapper(cst.parse_module(text))
    except cst.ParserSyntaxError:
        return text, {n: "the file does not parse" for n in lines}
    positions = wrapper.resolve(PositionProvider)
    ends: dict[int, Any] = {}
    for node, where in positions.items():
        if isinstance(node, cst.TrailingWhitespace) and where.start.line in lines:
            ends.setdefault(where.start.line, node)
    targets = {ends[n]: lines[n] for n in lines if n in ends}

    class Pinner(cst.CSTTransformer):
        def leave_TrailingWhitespace(self, original: Any, updated: Any) -> Any:
            codes = targets.get(original)
            if codes is None:
                return updated
            comment = original.comment.value if original.comment is not None else ""
            for code in codes:
                comment = with_code(comment, code, "#") or comment
            whitespace = updated.whitespace if original.comment is not None else cst.SimpleWhitespace("  ")
            return updated.with_changes(whitespace=whitespace, comment=cst.Comment(comment.lstrip()))

    missed = {n: "the line is inside a string or continued with a backslash" for n in lines if n not in ends}
    return wrapper.module.visit(Pinner()).code, missed


def relative_files(config: Config, selection: Selection, paths: list[str] | None, force_exclude: bool,
                   select_for: Callable[[Config], Selection] | None = None) -> dict[str, str]:
    """Path as the run names it -> path, of the files `kgate lint` reads for these paths."""
    groups = discover(config, selection, paths, force_exclude=force_exclude, select_for=select_for)
    return {rel: path for group in groups for rel, path in group.files.items()}
