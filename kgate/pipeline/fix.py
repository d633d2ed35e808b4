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

Python files are changed through libcst, so every comment and space around
an edit survives (libcst is imported only here, never by a plain `kgate
lint`). Other files take exact text edits.

Nothing is written until every round is done, and only by `write`: `--diff`
runs the same rounds and prints what would change. `--add-ignore` is
kgate.pipeline.pin.
"""

from __future__ import annotations

import codecs
import difflib
import os
import re
import sys
from collections.abc import Callable, Iterable
from pathlib import Path
from typing import Any, NamedTuple

from kgate.collect.source import UnreadableSource
from kgate.core.config import Config
from kgate.core.findings import Finding
from kgate.core.fix import Edit, Fix
from kgate.core.selection import Selection
from kgate.core.suppress import without_code
from kgate.evaluate import source as engine
from kgate.pipeline.lint import active_findings, discover, run_lint
from kgate.report.paths import Shown, as_named
from kgate.support.comments import same_code

ROUNDS = 4
_NEWLINE = re.compile(r"\r\n|\r|\n")


class Applied(NamedTuple):
    """A fix that was applied (or, under --diff, would be)."""

    path: str
    line: int
    code: str
    message: str  # the fix's message


class Change(NamedTuple):
    path: str  # where to write
    before: bytes
    after: bytes


class FixRun(NamedTuple):
    changes: dict[str, Change]  # by project-relative path, only files whose text changed
    applied: list[Applied]
    rejected: list[tuple[str, str]]  # (path, why) fixes left out because the result would not parse
    unsafe_left: int  # findings whose fix needs --unsafe-fixes


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
    run = FixRun({}, [], [], 0)
    for group in discover(config, selection, paths, force_exclude=force_exclude, select_for=select_for):
        results = {rel: linted[rel] for rel in group.files if rel in linted}
        done = _fix_group(group.files, results, group.selection, group.rules, unsafe)
        run.changes.update(done.changes)
        run.applied.extend(done.applied)
        run.rejected.extend(done.rejected)
        run = run._replace(unsafe_left=run.unsafe_left + done.unsafe_left)
    return run


def _fix_group(where: dict[str, str], results: dict[str, engine.FileResult], selection: Selection,
               rules: list[engine.SourceRule], unsafe: bool) -> FixRun:
    """The rounds of fixes of the files one configuration governs (path as the run names it -> path)."""
    for rel in sorted({f.path for f in active_findings(results, selection).findings} & set(where)):
        results[rel] = engine.lint_file(where[rel], rel, rules)[0]
    current: dict[str, bytes] = {}
    originals: dict[str, bytes] = {}
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
            data = current.get(rel)
            if data is None:
                try:
                    with open(where[rel], "rb") as handle:
                        data = handle.read()
                except OSError:
                    continue
                originals[rel] = data
            new, taken, why = apply_fixes(rel, data, [f.fix for f in items if f.fix is not None])
            if why:
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
    return FixRun(changes, applied, rejected, unsafe_left)


def write(changes: dict[str, Change], shown: Shown = as_named, root: Path | None = None) -> list[tuple[str, str]]:
    """Write the changes; (path, why) for each file left as it was: a file (or a folder on its way) that links
    out of the project `root`, a second name of a file already written (a link inside the project, a hard
    link), a file with other hard links, a read-only file, or one changed since it was read."""
    from kgate.core.errors import ConfigError
    from kgate.support.atomicio import atomic_write

    skipped: list[tuple[str, str]] = []
    written: set[object] = set()  # the real paths and (device, inode) of the files read so far
    top = (os.path.abspath(root), os.path.realpath(root)) if root is not None else None
    for rel, change in sorted(changes.items()):
        why = _unwritable(change, top, written)
        if why:
            skipped.append((rel, why))
            continue
        try:
            atomic_write(Path(change.path), change.after, follow=True)
        except OSError as exc:
            raise ConfigError(f"cannot write {shown(rel)}: {exc.strerror or exc}") from None
    return skipped


def _unwritable(change: Change, top: tuple[str, str] | None, written: set[object]) -> str:
    """Why a change must not be written ("" when it may)."""
    real = os.path.realpath(change.path)
    named = os.path.abspath(change.path)
    if top is not None and any(_inside(named, t) for t in top) and not _inside(real, top[1]):
        return f"it is a link to {real}, outside the project: not written"
    try:
        info = os.stat(real)
        with open(real, "rb") as handle:
            now = handle.read()
    except OSError as exc:
        return f"cannot read it again: {exc.strerror or exc}"
    if real in written or (info.st_dev, info.st_ino) in written:
        return "another name of a file already written (a link): written once"
    if info.st_nlink > 1:
        return f"it has {info.st_nlink - 1} other hard link(s), which a write would leave behind: not written"
    if not info.st_mode & 0o222 or not os.access(real, os.W_OK):
        return "it is read-only: not written"
    if now != change.before:
        return "it changed since kgate read it: not written"
    written.update((real, (info.st_dev, info.st_ino)))
    return ""


def _inside(path: str, top: str) -> bool:
    return path == top or path.startswith(top.rstrip(os.sep) + os.sep)


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
    except UnreadableSource:
        return None, [], ""
    python = rel.endswith((".py", ".pyi"))
    starts = line_starts(text)
    resolved: list[tuple[Fix, list[tuple[int, int, Edit]]]] = []
    for fix in fixes:
        spans = [_span(text, starts, edit, python) for edit in fix.edits]
        if spans and all(span is not None for span in spans):
            resolved.append((fix, [span for span in spans if span is not None]))
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
    except _CannotApply as exc:
        return None, [], str(exc)
    problem = parse_problem(rel, new)
    if problem:
        return None, [], f"the result would not parse ({problem}): left as it was"
    return (bom + new.encode("utf-8")), [fix for fix, _spans in taken], ""


class _CannotApply(Exception):
    pass


Taken = list[tuple[Fix, list[tuple[int, int, Edit]]]]


def _comment_edits_checked(rel: str, text: str, taken: Taken, python: bool) -> tuple[Taken, str]:
    """The fixes whose edits are comment edits (`drop-suppression`) only where the file, so edited, differs in
    comments alone (kgate.support.comments.same_code): a directive's text inside a raw string, a bracket
    argument or a here-document is the string's value, and deleting it would change what the file says."""
    kept: Taken = []
    why = ""
    for fix, spans in taken:
        if spans and all(span[2].kind == "drop-suppression" for span in spans):
            try:
                after = _python(text, spans) if python else _replace(text, spans)
            except _CannotApply:
                after = None
            if after is None or not same_code(rel, text, after):
                why = "a suppression's removal would change more than a comment: left as it was"
                continue
        kept.append((fix, spans))
    return kept, why


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


def line_starts(text: str) -> list[int]:
    """Offset of each line's start, 1-based (starts[1] == 0), and one past the end."""
    return [0, 0, *(m.end() for m in _NEWLINE.finditer(text)), len(text) + 1]


def _offset(starts: list[int], line: int, col: int) -> int | None:
    if not 0 < line < len(starts) - 1 and not (line == len(starts) - 1 and col == 0):
        return None
    return starts[line] + col


def line_of(text: str, starts: list[int], line: int) -> str:
    end = starts[line + 1] if line + 1 < len(starts) else len(text)
    return _NEWLINE.sub("", text[starts[line]:end])


def _span(text: str, starts: list[int], edit: Edit, python: bool) -> tuple[int, int, Edit] | None:
    """(start, end) offsets the edit covers, with a `drop-suppression` made a plain replacement."""
    if edit.kind == "drop-suppression":
        if not 0 < edit.line < len(starts) - 1:
            return None
        found = without_code(line_of(text, starts, edit.line), edit.col, edit.text)
        if found is None:
            return None
        start, end, replacement = found
        line = line_of(text, starts, edit.line)
        base = starts[edit.line]
        if not python and not replacement and not (line[:start] + line[end:]).strip():
            # A comment on a line of its own: the line goes (libcst removes a Python comment line itself).
            following = starts[edit.line + 1] if edit.line + 1 < len(starts) - 1 else len(text)
            return base, following, Edit(edit.line, 0, edit.line + 1, 0, "", "drop-suppression")
        return base + start, base + end, Edit(edit.line, start, edit.line, end, replacement, "drop-suppression")
    start, end = _offset(starts, edit.line, edit.col), _offset(starts, edit.end_line, edit.end_col)
    if start is None or end is None or end < start or end > len(text):
        return None
    return start, end, edit


def _overlaps(a: tuple[int, int], b: tuple[int, int]) -> bool:
    return a[0] < b[1] and b[0] < a[1] or a[0] == b[0] or (a[0] == a[1] and b[0] < a[0] < b[1]) \
        or (b[0] == b[1] and a[0] < b[0] < a[1])


def _replace(text: str, edits: list[tuple[int, int, Edit]]) -> str:
    for start, end, edit in sorted(edits, key=lambda e: e[:2], reverse=True):
        if edit.kind == "delete-statement":
            raise _CannotApply("a statement can be removed from Python only")
        text = text[:start] + edit.text + text[end:]
    return text


def parse_problem(rel: str, text: str) -> str:
    """Why `text` does not parse as the kind of file `rel` is; "" when it does (or kgate has no parser for it:
    CMake, C++, shell, Makefiles take exact text edits)."""
    name = rel.rsplit("/", 1)[-1]
    try:
        if name.endswith((".py", ".pyi")):
            import ast

            import libcst

            libcst.parse_module(text)
            ast.parse(text)
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


# --------------------------------------------------------------------------- Python, through libcst


def _python(text: str, edits: list[tuple[int, int, Edit]]) -> str:
    import libcst as cst
    from libcst.metadata import MetadataWrapper, PositionProvider

    try:
        wrapper = MetadataWrapper(cst.parse_module(text))
    except cst.ParserSyntaxError as exc:
        raise _CannotApply(f"does not parse: {str(exc).splitlines()[0]}") from None
    positions = wrapper.resolve(PositionProvider)
    starts = line_starts(text)

    def bounds(node: Any) -> tuple[int, int]:
        where = positions[node]
        return starts[where.start.line] + where.start.column, starts[where.end.line] + where.end.column

    tokens: list[tuple[int, int, Any]] = []
    statements: dict[int, Any] = {}
    for node in positions:
        if isinstance(node, (cst.SimpleString, cst.Comment, cst.FormattedStringText)):
            tokens.append((*bounds(node), node))
        elif isinstance(node, cst.BaseSmallStatement):
            statements[bounds(node)[0]] = node
    new_values: dict[Any, list[tuple[int, int, str]]] = {}
    removed: set[Any] = set()
    for start, end, edit in edits:
        if edit.kind == "delete-statement":
            node = statements.get(start)
            if node is None:
                raise _CannotApply(f"no statement starts at line {edit.line}")
            removed.add(node)
            continue
        holder = next(((s, e, node) for s, e, node in tokens
                       if s <= end <= e and (s <= start or (edit.kind == "drop-suppression"
                                                            and isinstance(node, cst.Comment)))), None)
        if holder is None:
            raise _CannotApply(f"line {edit.line}: the change is not inside one string or comment")
        s, _e, node = holder
        new_values.setdefault(node, []).append((max(start, s) - s, end - s, edit.text))

    def rewritten(node: Any) -> str:
        value = node.value
        for start, end, replacement in sorted(new_values[node], reverse=True):
            value = value[:start] + replacement + value[end:]
        return value

    emptied = {node for node in new_values if isinstance(node, cst.Comment) and not rewritten(node).strip()}

    class Fixer(cst.CSTTransformer):
        def leave_SimpleString(self, original: Any, updated: Any) -> Any:
            return updated.with_changes(value=rewritten(original)) if original in new_values else updated

        def leave_FormattedStringText(self, original: Any, updated: Any) -> Any:
            return updated.with_changes(value=rewritten(original)) if original in new_values else updated

        def leave_Comment(self, original: Any, updated: Any) -> Any:
            if original in new_values and original not in emptied:
                return updated.with_changes(value=rewritten(original))
            return updated

        def leave_TrailingWhitespace(self, original: Any, updated: Any) -> Any:
            if original.comment is not None and original.comment in emptied:
                return updated.with_changes(comment=None, whitespace=cst.SimpleWhitespace(""))
            return updated

        def leave_EmptyLine(self, original: Any, updated: Any) -> Any:
            if original.comment is not None and original.comment in emptied:
                return cst.RemoveFromParent()
            return updated

        def leave_SimpleStatementLine(self, original: Any, updated: Any) -> Any:
            if not any(node in removed for node in original.body):
                return updated
            kept = [new for old, new in zip(original.body, updated.body) if old not in removed]
            if kept:
                return updated.with_changes(body=[*kept[:-1], kept[-1].with_changes(
                    semicolon=cst.MaybeSentinel.DEFAULT)])
            emptied_lines.add(original)
            return updated.with_changes(body=[cst.Pass()])

        def leave_IndentedBlock(self, original: Any, updated: Any) -> Any:
            body, footer = _without_emptied(original.body, updated.body, updated.footer)
            if not body:  # a block needs a statement: `pass`, under the comments that were above the removed one
                carried = footer[:len(footer) - len(updated.footer)]
                body = [cst.SimpleStatementLine([cst.Pass()], leading_lines=carried)]
                footer = list(updated.footer)
            return updated.with_changes(body=body, footer=footer)

        def leave_Module(self, original: Any, updated: Any) -> Any:
            body, footer = _without_emptied(original.body, updated.body, updated.footer)
            return updated.with_changes(body=body, footer=footer)

    emptied_lines: set[Any] = set()

    def _without_emptied(old_body: Any, new_body: Any, footer: Any) -> tuple[list[Any], list[Any]]:
        """The statements left, the comments above a removed one kept above the next (or in the footer)."""
        out: list[Any] = []
        carried: list[Any] = []
        for old, new in zip(old_body, new_body):
            if old in emptied_lines:
                carried.extend(new.leading_lines)
                comment = new.trailing_whitespace.comment
                if comment is not None:  # the removed statement's own comment stays, on a line of its own
                    carried.append(cst.EmptyLine(comment=comment))
                continue
            if carried:
                new = new.with_changes(leading_lines=[*carried, *new.leading_lines])
                carried = []
            out.append(new)
        return out, [*carried, *footer]

    return wrapper.module.visit(Fixer()).code
