"""`kgate lint --fix` and `--add-ignore`: the one stage that changes a project's files.

Rules attach fixes to their findings as data (kgate.core.fix); this module
applies them. Per file, the fixes of the findings that are still active
(after per-file-ignores and suppression comments) are taken in order of
position; a fix whose edits overlap one already taken waits for the next
round. The new text must still parse as what the file is (Python through
libcst and `ast`, TOML through tomllib, JSON, INI) or the file is left as it
was. The file is then linted again from its new text, and fixes that the
re-lint still offers are applied in a further round, up to `ROUNDS`: one
`--fix` leaves nothing a second one would change.

Python files take exact text edits where each edit allows it (a code
dropped from a suppression comment; a simple statement removed that is
alone on its lines, found from Python's own parse), else are changed
through libcst, so every comment and space around an edit survives (libcst
is imported only then, never by a plain `kgate lint`). Other files take
exact text edits.

The fixes are made from the bytes the findings were found in (`read_afresh`).
Nothing is written until every round is done, and only by
kgate.pipeline.writes: `--diff` runs the same rounds and prints what would
change. `--add-ignore` is kgate.pipeline.pin.
"""

from __future__ import annotations

import codecs
import difflib
import re
import sys
from collections.abc import Callable, Iterable
from typing import Any, NamedTuple

from kgate.collect.source import UnreadableSource
from kgate.core.config import Config
from kgate.core.findings import Finding
from kgate.core.fix import Edit, Fix
from kgate.core.selection import Selection
from kgate.core.suppress import without_code
from kgate.evaluate import source as engine
from kgate.pipeline.fix_python import CannotApply, line_starts, python_edits, text_edits
from kgate.pipeline.lint import active_findings, cache_key, discover, run_lint
from kgate.pipeline.writes import Change
from kgate.report.paths import Shown, as_named
from kgate.support.atomicio import read_input
from kgate.support.comments import Comment, same_code
from kgate.support.comments.python import readings_kept

ROUNDS = 4
_NEWLINE = re.compile(r"\r\n|\r|\n")


class Applied(NamedTuple):
    """A fix that was applied (or, under --diff, would be)."""

    path: str
    line: int
    code: str
    message: str  # the fix's message


class FixRun(NamedTuple):
    changes: dict[str, Change]  # by project-relative path, only files whose text changed
    applied: list[Applied]
    rejected: list[tuple[str, str]]  # (path, why) fixes left out because the result would not parse
    unsafe_left: int  # findings whose fix needs --unsafe-fixes
    # The lint of each changed file's new bytes (the last round's), with the lint cache's record it belongs in
    # (`kgate.pipeline.lint.cache_key`): `keep_linted` hands it to the lint that follows the writes.
    linted: dict[str, tuple[str, engine.FileResult]]


# --------------------------------------------------------------------------- the rounds


def fix_lint(config: Config, selection: Selection, paths: list[str] | None, *, unsafe: bool,
             force_exclude: bool = False, use_cache: bool = True,
             select_for: Callable[[Config], Selection] | None = None) -> FixRun:
    """Lint, apply the fixes in rounds, and return what would change (nothing is written). Each file is fixed
    under the configuration that governs it (`select_for`, as `kgate.pipeline.lint.run_lint` takes it)."""
    # A plain lint first (cached, in parallel), then the files with findings read afresh in this process: fixes
    # are made from the file as it is and are neither cached nor sent back by the forked workers.
    linted = dict(run_lint(config, selection, paths, force_exclude=force_exclude, use_cache=use_cache,
                           select_for=select_for).results)
    run = FixRun({}, [], [], 0, {})
    for group in discover(config, selection, paths, force_exclude=force_exclude, select_for=select_for):
        results = {rel: linted[rel] for rel in group.files if rel in linted}
        with readings_kept():  # the comments the lint of a file found are those its fixes edit
            done = _fix_group(group.files, results, group.selection, group.rules, unsafe)
        run.changes.update(done.changes)
        run.applied.extend(done.applied)
        run.rejected.extend(done.rejected)
        key = cache_key(config, group)
        run.linted.update((rel, (key, results[rel])) for rel in done.changes)
        run = run._replace(unsafe_left=run.unsafe_left + done.unsafe_left)
    return run


def keep_linted(config: Config, run: FixRun) -> None:
    """The lint of each file the fix wrote, as it was made from the bytes written, kept in the lint cache: the lint
    that follows the writes finds it there rather than linting the file once more (a result that read other files
    holds only while they still give what they gave, as any cached result). Call after `kgate.pipeline.writes`,
    with the changes it left out removed."""
    from kgate.pipeline.lint_cache import LintCache

    by_key: dict[str, list[str]] = {}
    for rel in sorted(run.changes):
        key, result = run.linted[rel]
        if not result.reads_beyond:  # a result the cache would answer from this file's state alone: never kept
            by_key.setdefault(key, []).append(rel)
    for key, written in by_key.items():
        cache = LintCache(config.root / config.cache_dir, key)
        for rel in written:
            change = run.changes[rel]
            cache.store(rel, change.path, engine.content_digest(change.after), len(change.after), run.linted[rel][1])
        cache.save()


def _fix_group(where: dict[str, str], results: dict[str, engine.FileResult], selection: Selection,
               rules: list[engine.SourceRule], unsafe: bool) -> FixRun:
    """The rounds of fixes of the files one configuration governs (path as the run names it -> path)."""
    originals = read_afresh(where, results, selection, rules)
    current: dict[str, bytes] = {}
    applied: list[Applied] = []
    rejected: list[tuple[str, str]] = []
    unsafe_left = 0
    for _round in range(ROUNDS):
        findings = active_findings(results, selection).findings
        unsafe_left = sum(1 for f in findings if f.fix is not None and not f.fix.safe and not unsafe)
        wanted: dict[str, list[Finding]] = {}
        for finding in findings:
            if finding.fix is not None and (unsafe or finding.fix.safe) and finding.path in where:
                wanted.setdefault(finding.path, []).append(finding)
        progress = False
        for rel, items in sorted(wanted.items()):
            data = current.get(rel, originals.get(rel))
            if data is None:
                continue
            new, taken, why = apply_fixes(rel, data, [f.fix for f in items if f.fix is not None])
            if why and (rel, why) not in rejected:  # said once, though a later round (for other files) tries again
                rejected.append((rel, why))
            if new is None or new == data:
                continue
            current[rel] = new
            progress = True
            taken_ids = {id(fix) for fix in taken}
            applied.extend(Applied(rel, f.line, f.code, f.fix.message) for f in items
                           if f.fix is not None and id(f.fix) in taken_ids)
            results[rel] = engine.lint_bytes(where[rel], rel, new, rules)
        if not progress:
            break
    changes = {rel: Change(where[rel], originals[rel], data) for rel, data in current.items()
               if data != originals[rel]}
    return FixRun(changes, applied, rejected, unsafe_left, {})


def read_afresh(where: dict[str, str], results: dict[str, engine.FileResult], selection: Selection,
                rules: list[engine.SourceRule], *, fixes: bool = True) -> dict[str, bytes]:
    """The files with active findings, read once more and linted from the bytes read (`results` is updated): fixes
    and pins are made from those bytes, and the write checks that the file still holds them. A file that changed
    after the first lint is fixed as it is now, never with edits found in its older text. A file that still holds
    the bytes its result was made from (`FileResult.digest`) keeps that result rather than being linted again,
    unless `fixes` are wanted and it has a finding of a rule that attaches fixes (`Rule.fixes`), which only a fresh
    lint carries (a suppression's fix is made from its directive, which the result holds)."""
    data: dict[str, bytes] = {}
    fixing = {sr.rule.code for sr in rules if sr.rule.fixes} if fixes else set()
    for rel in sorted({f.path for f in active_findings(results, selection).findings} & set(where)):
        wants_fixes = any(f.code in fixing for f in results[rel].findings)
        read = None if wants_fixes else _unchanged(where[rel], results[rel].digest)
        if read is None:
            results[rel], read = engine.lint_file(where[rel], rel, rules)
        if read is not None:
            data[rel] = read
    return data


def _unchanged(path: str, digest: str) -> bytes | None:
    """The file's bytes where they are the bytes of `digest`; None where they are not, or cannot be read."""
    if not digest:
        return None
    try:
        data = read_input(path)  # never blocks: a named pipe put in the file's place is no file to fix
    except OSError:
        return None
    return data if engine.content_digest(data) == digest else None


def unified_diff(changes: dict[str, Change], shown: Shown = as_named) -> str:
    """The changes as one unified diff (`a/PATH`, `b/PATH`, three lines of context); `shown`: each path as
    printed (from the current folder, so that `patch -p1` applies it there)."""
    out: list[str] = []
    for rel, change in sorted(changes.items()):
        before = decoded(change.before, rel)[1].splitlines(keepends=True)
        after = decoded(change.after, rel)[1].splitlines(keepends=True)
        out.append(f"--- a/{shown(rel)}\n+++ b/{shown(rel)}\n")
        # difflib.unified_diff's matcher treats frequent lines (`}`) as junk and shows them changed.
        matcher = difflib.SequenceMatcher(None, before, after, autojunk=False)
        for group in matcher.get_grouped_opcodes(3):
            first, last = group[0], group[-1]
            out.append(f"@@ -{_range(first[1], last[2])} +{_range(first[3], last[4])} @@\n")
            for tag, i1, i2, j1, j2 in group:
                out.extend(_marked(" ", before[i1:i2]) if tag == "equal" else
                           [*_marked("-", before[i1:i2]), *_marked("+", after[j1:j2])])
    return "".join(out)


def _range(start: int, stop: int) -> str:
    length = stop - start
    return f"{start + 1 if length else start},{length}" if length != 1 else f"{start + 1}"


def _marked(mark: str, lines: list[str]) -> list[str]:
    return [mark + line if line.endswith(("\n", "\r")) else f"{mark}{line}\n\\ No newline at end of file\n"
            for line in lines]


# --------------------------------------------------------------------------- one file


def apply_fixes(rel: str, data: bytes, fixes: Iterable[Fix]) -> tuple[bytes | None, list[Fix], str]:
    """The file's bytes with the fixes that do not overlap applied; the fixes taken; why none could be
    (the result would not parse), or "". None when the file is not text kgate can write back."""
    try:
        bom, text = decoded(data, rel)
    except UnreadableSource as exc:
        return None, [], f"{exc}: kgate edits UTF-8 files only"
    python = rel.endswith((".py", ".pyi"))
    starts = line_starts(text)
    recipes = _make_recipe_lines(rel, text)
    resolved: list[tuple[Fix, list[tuple[int, int, Edit]]]] = []
    for fix in fixes:
        located = [_span(text, starts, edit, python, recipes) for edit in fix.edits]
        if located and all(span is not None for span in located):
            resolved.append((fix, [span for span in located if span is not None]))
    taken: list[tuple[Fix, list[tuple[int, int, Edit]]]] = []
    claimed: list[tuple[int, int]] = []
    for fix, spans in sorted(resolved, key=lambda item: min(s[:2] for s in item[1])):
        if any(_overlaps(span[:2], other) for span in spans for other in claimed):
            continue
        taken.append((fix, spans))
        claimed.extend(span[:2] for span in spans)
    if not taken:
        return None, [], ""
    taken, changed_code = _comment_edits_checked(rel, text, taken, python)
    if not taken:
        return None, [], changed_code
    edits = [span for _fix, spans in taken for span in spans]
    try:
        new = _python(text, edits) if python else _replace(text, edits)
    except CannotApply as exc:
        return None, [], str(exc)
    problem = parse_problem(rel, new)
    if problem:
        return None, [], f"the result would not parse ({problem}): left as it was"
    return (bom + new.encode("utf-8")), [fix for fix, _spans in taken], ""


Taken = list[tuple[Fix, list[tuple[int, int, Edit]]]]


def _comment_edits_checked(rel: str, text: str, taken: Taken, python: bool) -> tuple[Taken, str]:
    """The fixes whose edits are comment edits (`drop-suppression`) only where the file, so edited, differs in
    comments alone (kgate.support.comments.same_code): a directive's text inside a raw string, a bracket
    argument or a here-document is the string's value, and deleting it would change what the file says."""
    kept: Taken = []
    why = ""
    tokens = _python_comments(text) if python else None
    for fix, spans in taken:
        if spans and all(span[2].kind == "drop-suppression" for span in spans):
            if tokens is not None:  # Python's own tokenizer says where its comments are: one reading decides
                if not all(_in_comment(text, span, tokens) for span in spans):
                    why = "a suppression's removal would change more than a comment: left as it was"
                    continue
                kept.append((fix, spans))
                continue
            try:
                after = _python(text, spans) if python else _replace(text, spans)
            except CannotApply as exc:
                why = str(exc)
                continue
            if not same_code(rel, text, after):
                why = "a suppression's removal would change more than a comment: left as it was"
                continue
        kept.append((fix, spans))
    return kept, why


def _python_comments(text: str) -> list[Comment] | None:
    from kgate.support.comments.python import read

    found = read(text)
    return found[0] if found is not None else None


def _in_comment(text: str, span: tuple[int, int, Edit], found: list[Comment]) -> bool:
    """Whether an edit's span is the spaces before a comment and text of that comment, as the tokenizer read it."""
    start, end, _edit = span
    first = start + len(text[start:end]) - len(text[start:end].lstrip(" \t"))
    return any(comment.start <= first and end <= comment.end for comment in found) or first == end


def _python(text: str, edits: list[tuple[int, int, Edit]]) -> str:
    """A Python file's edits: on the text itself where every one allows it (`text_edits`), else through libcst."""
    done = text_edits(text, edits)
    return done if done is not None else python_edits(text, edits)


def toml_parser() -> Any:
    if sys.version_info >= (3, 11):
        import tomllib
    else:  # pragma: no cover - Python 3.10
        import tomli as tomllib
    return tomllib


def require_libcst() -> None:
    """A fixing run needs libcst (the `fix` extra): say so in one line rather than fail half-way."""
    import importlib.util

    from kgate.core.errors import ConfigError
    from kgate.support.install import install_hint

    if importlib.util.find_spec("libcst") is None:
        raise ConfigError(f"--fix, --diff, --show-fixes and --add-ignore need libcst: {install_hint('fix')}")


def decoded(data: bytes, rel: str) -> tuple[bytes, str]:
    bom = codecs.BOM_UTF8 if data.startswith(codecs.BOM_UTF8) else b""
    try:
        return bom, data[len(bom):].decode("utf-8")
    except UnicodeDecodeError:
        raise UnreadableSource("not UTF-8") from None


def _offset(starts: list[int], line: int, col: int) -> int | None:
    if not 0 < line < len(starts) - 1 and not (line == len(starts) - 1 and col == 0):
        return None
    return starts[line] + col


def line_of(text: str, starts: list[int], line: int) -> str:
    end = starts[line + 1] if line + 1 < len(starts) else len(text)
    return _NEWLINE.sub("", text[starts[line]:end])


def _make_recipe_lines(rel: str, text: str) -> set[int] | None:
    """A Makefile's recipe lines (`make_recipe_lines`); None for a file of another kind."""
    from kgate.support.comments import language

    if language(rel) != "make":
        return None
    from kgate.support.comments.shell import make_recipe_lines

    return make_recipe_lines(text)


def _span(text: str, starts: list[int], edit: Edit, python: bool,
          recipes: set[int] | None = None) -> tuple[int, int, Edit] | None:
    """(start, end) offsets the edit covers, with a `drop-suppression` made a plain replacement. `recipes`: in a
    Makefile, its recipe lines; on its other lines the spacing before a comment is part of the line's value
    (`X := a  # ...`), and a directive removed takes none of it."""
    if edit.kind == "drop-suppression":
        if not 0 < edit.line < len(starts) - 1:
            return None
        found = without_code(line_of(text, starts, edit.line), edit.col, edit.text)
        if found is None:
            return None
        start, end, replacement = found
        line = line_of(text, starts, edit.line)
        base = starts[edit.line]
        if recipes is not None and edit.line - 1 not in recipes and not replacement and line[:start].strip():
            while start < edit.col and line[start] in " \t":
                start += 1
        if not python and not replacement and not (line[:start] + line[end:]).strip():
            # A comment on a line of its own: the line goes (libcst removes a Python comment line itself).
            following = starts[edit.line + 1] if edit.line + 1 < len(starts) - 1 else len(text)
            return base, following, Edit(edit.line, 0, edit.line + 1, 0, "", "drop-suppression")
        return base + start, base + end, Edit(edit.line, start, edit.line, end, replacement, "drop-suppression")
    first, last = _offset(starts, edit.line, edit.col), _offset(starts, edit.end_line, edit.end_col)
    if first is None or last is None or last < first or last > len(text):
        return None
    return first, last, edit


def _overlaps(a: tuple[int, int], b: tuple[int, int]) -> bool:
    return a[0] < b[1] and b[0] < a[1] or a[0] == b[0] or (a[0] == a[1] and b[0] < a[0] < b[1]) \
        or (b[0] == b[1] and a[0] < b[0] < a[1])


def _replace(text: str, edits: list[tuple[int, int, Edit]]) -> str:
    for start, end, edit in sorted(edits, key=lambda e: e[:2], reverse=True):
        if edit.kind == "delete-statement":
            raise CannotApply("a statement can be removed from Python only")
        text = text[:start] + edit.text + text[end:]
    return text


def parse_problem(rel: str, text: str) -> str:
    """Why `text` does not parse as the kind of file `rel` is; "" when it does (or kgate has no parser for it:
    CMake, C++, shell, Makefiles take exact text edits)."""
    name = rel.rsplit("/", 1)[-1]
    try:
        if name.endswith((".py", ".pyi")):
            import ast

            ast.parse(text)  # Python's own parser is the judge (libcst cannot read some files Python reads)
        elif name.endswith(".toml"):
            toml_parser().loads(text)
        elif name.endswith(".json"):
            import json

            json.loads(text)
        elif name.endswith((".ini", ".cfg")):
            import configparser

            configparser.ConfigParser(interpolation=None).read_string(text)
    except Exception as exc:  # every parser's own error type: the message is what matters
        return str(exc).splitlines()[0] if str(exc) else type(exc).__name__
    return ""
