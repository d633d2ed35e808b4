"""`kgate lint --add-ignore`: pin a project's findings with suppression comments whose reason is a placeholder.

Each finding gets `kgate: ignore[CODE] PLACEHOLDER` at the end of its line
(or its code added to the line's own directive). KG003 reports the
placeholder until someone writes the reason, so adopting kgate this way
still fails the run until every accepted finding is explained; the baseline
is the way to pin findings without failing.

A new pin always gets a directive of its own: a directive that already has
a reason never takes the new code (its reason is not the new code's). The
comment goes at the line's end the same way in every language: into the
line comment that ends the line, as kgate.support.comments reads the
language (where a directive with the placeholder takes the code), else after
the line's code. Every file must then differ in comments alone (Python the
same syntax tree, TOML the same data, every language the same text outside
its comments), and each new comment must read back as the directive on its
line: a line that ends inside a string, a raw string, a bracket argument or a
here-document, or goes on to the next with a backslash, takes none, and the
run says so.

Findings are pinned in the bytes they were found in: the files with findings
are read once more and linted from those bytes, so a file that changes
meanwhile is pinned as it was read, and the write refuses it if it is no
longer so.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Callable, Mapping
from typing import Any, NamedTuple

from kgate.collect.source import UnreadableSource
from kgate.core.config import Config
from kgate.core.findings import Finding
from kgate.core.selection import Selection
from kgate.core.suppress import parse_directives, with_code
from kgate.pipeline.fix import decoded, line_of, line_starts, parse_problem, read_afresh
from kgate.pipeline.lint import active_findings, discover, run_lint
from kgate.pipeline.writes import Change
from kgate.support.comments import LINE_MARKER, Comment, comments, language, same_code
from kgate.support.comments.python import readings_kept
from kgate.support.comments.shell import make_recipe_lines

# Codes that are about the comments or the file itself: never pinned.
_NOT_PINNED = frozenset({"KG002", "KG003", "KG004"})
_NOT_READ = "the line ends inside a string or a comment: a comment there would not be read as a kgate directive"


class PinRun(NamedTuple):
    changes: dict[str, Change]
    pinned: int  # findings a comment now pins
    left: list[tuple[str, int, str, str]]  # (path, line, code, why) findings that could not be pinned
    per_file: dict[str, int]  # findings pinned, by file


def pin_lint(config: Config, selection: Selection, paths: list[str] | None, *, force_exclude: bool = False,
             use_cache: bool = True, select_for: Callable[[Config], Selection] | None = None) -> PinRun:
    """Lint, then pin every active finding in the bytes it was found in (nothing is written)."""
    linted = dict(run_lint(config, selection, paths, force_exclude=force_exclude, use_cache=use_cache,
                           select_for=select_for).results)
    findings: list[Finding] = []
    where: dict[str, str] = {}
    data: dict[str, bytes] = {}
    with readings_kept():  # the comments the lint of a file found are those its pins join
        for group in discover(config, selection, paths, force_exclude=force_exclude, select_for=select_for):
            results = {rel: linted[rel] for rel in group.files if rel in linted}
            data.update(read_afresh(group.files, results, group.selection, group.rules, fixes=False))
            findings.extend(f for f in active_findings(results, group.selection).findings if f.path in group.files)
            where.update(group.files)
        return add_ignores(findings, where, data)


def add_ignores(findings: list[Finding], where: dict[str, str], data: Mapping[str, bytes] | None = None) -> PinRun:
    """A `kgate: ignore[CODE] PLACEHOLDER` comment on the line of each finding (the line's own directive
    gains the code when it has one). `where`: project-relative path -> path to read; `data`: the bytes the
    findings were found in, by path (a file not there is read)."""
    by_file: dict[str, dict[int, list[str]]] = {}
    found: Counter[tuple[str, int, str]] = Counter()
    left: list[tuple[str, int, str, str]] = []
    for finding in findings:
        if finding.code in _NOT_PINNED or finding.path not in where or finding.line < 1:
            continue
        codes = by_file.setdefault(finding.path, {}).setdefault(finding.line, [])
        if finding.code not in codes:
            codes.append(finding.code)
        found[(finding.path, finding.line, finding.code)] += 1  # one comment may pin several findings of a code
    changes: dict[str, Change] = {}
    pinned = 0
    per_file: dict[str, int] = {}
    for rel, lines in sorted(by_file.items()):
        try:
            read = (data or {}).get(rel)
            if read is None:
                with open(where[rel], "rb") as handle:
                    read = handle.read()
            bom, text = decoded(read, rel)
        except (OSError, UnreadableSource) as exc:
            left.extend((rel, n, c, f"cannot read: {exc}") for n, cs in lines.items() for c in cs)
            continue
        new, missed = _pinned_file(rel, text, lines)
        for number, codes in sorted(lines.items()):
            if number in missed:
                left.extend((rel, number, code, missed[number]) for code in codes)
            else:
                count = sum(found[(rel, number, code)] for code in codes)
                pinned += count
                per_file[rel] = per_file.get(rel, 0) + count
        if new != text:
            changes[rel] = Change(where[rel], read, bom + new.encode("utf-8"))
    return PinRun(changes, pinned, left, per_file)


def _pinned_file(rel: str, text: str, lines: dict[int, list[str]]) -> tuple[str, dict[int, str]]:
    """The text with the lines' pins, and why each line left out was (its number -> why)."""
    lang = language(rel)
    if lang not in LINE_MARKER:
        return text, {n: "this kind of file takes no line comment kgate reads here" for n in lines}
    if lang == "python":
        quick = _python_pins(text, lines)
        if quick is not None:
            return quick
    new, missed = _pin_text(text, lines, lang)
    # The comments must read back as directives on their lines, and the file must parse as before.
    found = {(d.line, code) for d in parse_directives(new, lang) for code in d.codes if not d.file_level}
    for number, codes in lines.items():
        if number not in missed and not all((number, code) in found for code in codes):
            missed[number] = _NOT_READ
    if missed and new != text:  # the lines that take a comment, without those that do not
        new = _pin_text(text, {n: c for n, c in lines.items() if n not in missed}, lang)[0]
    problem = _changes_meaning(rel, text, new) if new != text else ""
    if problem:
        return text, {n: problem for n in lines}
    return new, missed


def _python_pins(text: str, lines: dict[int, list[str]]) -> tuple[str, dict[int, str]] | None:
    """A Python file's pins, as `_pinned_file` makes them, read with one scan of its strings and comments (one pass
    of the tokenizer where the scan cannot vouch for its reading): a line whose end is inside a string takes none,
    each comment written must read back as the directive (read on its own), and the file must compile to the same
    code as before (a comment at a line's end moves no code). None where Python cannot compile the file as it is,
    or the result is not so: the general way then says why."""
    from kgate.support.comments.python import read, scanned

    before = _compiled(text)
    if before is None:
        return None
    read_once = scanned(text) or read(text)  # a text Python compiles: the scan reads it as the tokenizer would
    if read_once is None:
        return None
    found, inside = read_once
    missed = {number: _NOT_READ for number in lines if number in inside}
    tails: dict[int, str] = {}
    new, more = _pin_text(text, {n: c for n, c in lines.items() if n not in missed}, "python", found, tails)
    missed.update(more)
    unread = {number: _NOT_READ for number, codes in lines.items() if number not in missed and not set(codes) <= {
        code for d in parse_directives(tails[number].lstrip(), "python") for code in d.codes if not d.file_level}}
    if unread:
        missed.update(unread)
        new = _pin_text(text, {n: c for n, c in lines.items() if n not in missed}, "python", found)[0]
    return (new, missed) if new == text or _compiled(new) == before else None


def _compiled(text: str) -> Any:
    """The code Python compiles `text` to (None where it cannot): two texts that compile alike mean the same."""
    import warnings

    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            return compile(text, "<pin>", "exec", dont_inherit=True)
    except (SyntaxError, ValueError, RecursionError, MemoryError):
        return None


def _changes_meaning(rel: str, before: str, after: str) -> str:
    """Why adding comments changed more than comments ("" when it did not)."""
    problem = parse_problem(rel, after)
    if problem:
        return f"the result would not parse ({problem})"
    return "" if same_code(rel, before, after) else "a comment there would change the file's meaning"


def _pin_text(text: str, lines: dict[int, list[str]], lang: str, found: list[Comment] | None = None,
              tails: dict[int, str] | None = None) -> tuple[str, dict[int, str]]:
    """The comment goes at the line's end: into the line comment that ends it, as the language reads its comments
    (where a directive with the placeholder takes the code), else after the line's code. `found`: the text's
    comments where the caller has read them; `tails`: filled with the comment each pinned line ends with."""
    starts = line_starts(text)
    ending = {c.end: c for c in (comments(text, lang) if found is None else found) if not c.block}
    # Make text (not a recipe) ends a line's value where its comment starts: a comment there is written right
    # after the code, with no spacing that would become part of the value (`X := a` stays `a`, not `a  `).
    recipes = make_recipe_lines(text) if lang == "make" else None
    missed: dict[int, str] = {}
    pieces: list[tuple[int, int, str]] = []
    for number, codes in sorted(lines.items()):
        if number >= len(starts) - 1:
            missed[number] = "no such line"
            continue
        line = line_of(text, starts, number)
        start, end = starts[number], starts[number] + len(line)
        comment = ending.get(end)
        comment = comment if comment is not None and comment.start >= start else None
        # A backslash that ends the line's code joins the next line; one that ends a comment the reader ends here
        # is the comment's text (a `//` comment or a Makefile comment it continues ends on a later line).
        if comment is None and line.rstrip().endswith("\\"):
            missed[number] = "the line continues on the next (a comment would end it)"
            continue
        code = line if comment is None else text[start:comment.start]
        tail = "" if comment is None else text[comment.start:end]
        for pinned in codes:
            tail = with_code(tail, pinned, LINE_MARKER[lang]) or tail
        if comment is None and recipes is not None and number - 1 not in recipes and code.strip():
            ended = code.rstrip("\r")
            code, tail = ended, tail + code[len(ended):]
        elif comment is None:
            tail = ("  " if code.strip() else "") + tail
            code = code.rstrip() if code.strip() else code
        if tails is not None:
            tails[number] = tail
        pieces.append((start, end, code + tail))
    out: list[str] = []
    done = 0
    for start, end, new in pieces:  # in order of position: the text is put together once
        out.extend((text[done:start], new))
        done = end
    out.append(text[done:])
    return "".join(out), missed
