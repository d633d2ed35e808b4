"""The lint engine: source rules over files, the byte pre-filter in front of any decoding or parsing.

Runs every selected rule that has `files` globs (the `python` and `cuda`
layers, and KG004 which parses every Python file) on the files those globs
match, and the `source_check` of a rule of another layer that has one (the
static half of a capture rule). A rule runs only when one of its `prefilter` byte strings occurs in
the file, and every one of its `requires`; the file is decoded and parsed at most once, on the first rule
that asks. Nothing here imports or executes the project's code.

Per file the engine keeps raw findings (before per-file-ignores, configured
severities and suppressions, so those can change without re-reading), the
suppression directives, and the codes it ran: all of it is what the cache
stores, so a warm run never opens an unchanged file.
"""

from __future__ import annotations

import contextlib
import gc
import os
import re
import sys
from collections.abc import Callable, Iterable, Iterator, Mapping
from typing import Any, NamedTuple

from kgate import rules as registry  # type: ignore[attr-defined]
from kgate.collect import depends as reads_of
from kgate.collect.files import glob_matcher, project_root
from kgate.collect.source import SourceFile, UnreadableSource
from kgate.core.errors import ConfigError
from kgate.core.findings import Finding, Related, Severity
from kgate.core.fix import Fix
from kgate.core.rule import READS_BEYOND, Report, Rule, SourceContext, to_finding
from kgate.core.selection import Selection, rule_options
from kgate.core.suppress import Directive, mentions, parse_directives
from kgate.support.comments import language

try:  # the builtin module: `hashlib` would load OpenSSL, a measurable part of a warm run
    from _blake2 import blake2b
except ImportError:  # pragma: no cover - a Python built without it
    from hashlib import blake2b

UNREADABLE = "KG004"
SOURCE_LAYERS = ("meta", "python", "cuda")
# Layers whose rules may carry a `source_check` as well (loaded to find out). Compiled rules are not among them:
# they import the facts model, which `kgate lint` never loads.
SECOND_SOURCE_LAYERS = ("capture",)


class RawFinding(NamedTuple):
    """A finding as a rule reported it, in a form the cache stores as a JSON array."""

    line: int
    col: int
    end_line: int | None
    end_col: int | None
    code: str
    severity: str  # "" unless the report set one
    message: str
    identity: str
    value: int | None
    related: tuple[tuple[Any, ...], ...] = ()  # Related.as_list() of each, as tuples


class FileResult(NamedTuple):
    findings: tuple[RawFinding, ...]
    directives: tuple[Directive, ...]
    ran: tuple[str, ...]  # codes run on the file: what an unused suppression is judged against
    # A rule's verdict also read other files and cannot say which (`SourceFile.derived[READS_BEYOND]`): the result
    # is never cached, since the cache would answer it from this file's state alone. Not stored: only fresh results
    # carry it.
    reads_beyond: bool = False
    # What the verdicts read beyond the file, (key, state, digest) each (`kgate.collect.depends`): the cache answers
    # the result only while every read gives what it gave. Stored beside the result, not in it.
    depends: tuple[tuple[str, Any, str | None], ...] = ()
    # The fixes rules attached to their reports, by finding (`kgate lint --fix`). Not stored either: a fix is made
    # from the file as it is, so a run that fixes reads every file afresh.
    fixes: Mapping[RawFinding, Fix] | None = None
    # The digest (`content_digest`) of the bytes the result was made from, where the run knows it (a result the cache
    # answered, or one linted now that the cache may keep): a pin made from those bytes needs no second lint. Not
    # stored either.
    digest: str = ""


class SourceRule(NamedTuple):
    rule: Rule
    match: Callable[[str], bool]
    ctx: SourceContext

    @property
    def check(self) -> Callable[..., Iterable[Report]]:
        """What reads a file: a source rule's `check`, or the source half of a rule of another layer."""
        return self.rule.source_check or self.rule.check

    @property
    def prefilter(self) -> tuple[bytes, ...]:
        """The rule's pre-filter strings with the names its options add."""
        return self.rule.needles(self.ctx.options) if self.rule.prefilter_options else self.rule.prefilter


def source_rules(selection: Selection) -> list[SourceRule]:
    """The selected rules that read source files, in registry order (KG004, if selected, first: it
    applies to every file the others read)."""
    out = []
    shared: dict[Any, Any] = {}  # what the rules of the run keep for one another (`SourceContext.shared`)
    for code in registry.codes():
        row_layer = next(module for c, _n, module in registry.REGISTRY if c == code).split(".")[0]
        if row_layer not in SOURCE_LAYERS + SECOND_SOURCE_LAYERS or not selection.active(code):
            continue
        rule = registry.load(code)
        if rule.files and (row_layer in SOURCE_LAYERS or rule.source_check is not None):
            out.append(SourceRule(rule, glob_matcher(rule.files), SourceContext(options=rule_options(selection, code),
                                                                                shared=shared)))
    if out and selection.active(UNREADABLE):
        out.insert(0, SourceRule(registry.load(UNREADABLE), _every_file, SourceContext(options={})))
    return out


def refuse_empty_lint(selection: Selection, where: str) -> None:
    """ConfigError where a selection leaves `kgate lint` no rule to run (`ignore = ["KG"]`, `--select KG1`: the
    compiled rules alone, which `kgate check` runs): a lint that reads nothing passes anything."""
    if not source_rules(selection):
        raise ConfigError(f"{where}: the selection leaves no source rule for kgate lint to run, so it would pass "
                          f"anything (what it leaves, if anything, is compiled rules, which `kgate check` runs): "
                          f"select a source rule (`kgate rules` lists them)")


def _every_file(rel: str) -> bool:
    return True


def any_match(rules: list[SourceRule]) -> Callable[[str], bool]:
    """One test for file discovery: does any selected rule read this path?"""
    return glob_matcher(sorted({glob for r in rules for glob in r.rule.files}))


def lint_bytes(path: str, rel: str, data: bytes, rules: list[SourceRule]) -> FileResult:
    """Run the rules that apply to one file's content."""
    source = SourceFile(path, rel, data)
    findings: list[RawFinding] = []
    fixes: dict[RawFinding, Fix] = {}
    ran: list[str] = []
    error: UnreadableSource | None = None
    active = []
    for sr in rules:
        if not sr.match(rel):
            continue
        ran.append(sr.rule.code)
        if sr.rule.code == UNREADABLE:
            continue  # reported below, for what the other rules could not read
        prefilter = sr.prefilter
        if prefilter and not any(marker in data for marker in prefilter):
            continue
        if not sr.rule.admits(data):
            continue
        active.append(sr)
    # What brought the rules here: Python rules parse only the definitions that mention it.
    source.derived["needles"] = tuple(sorted({m.decode("latin-1") for sr in active for m in sr.prefilter
                                              if m in data}))
    reads_of.new_file()
    with reads_of.collecting() as read:
        error = _run_rules(source, active, findings, fixes)
    directives: tuple[Directive, ...] = ()
    if mentions(data):
        try:
            directives = tuple(parse_directives(source.text, language(source.rel)))
        except UnreadableSource as exc:
            error = error or exc
    if error is not None and any(sr.rule.code == UNREADABLE for sr in rules):
        findings.append(unreadable(rel, error))
    own = os.path.abspath(path)
    depends = tuple(sorted(reads_of.shared(key, state, found)
                           for key, (state, found) in read.items() if key not in (own, reads_of.EXPORTS + own)))
    beyond = bool(source.derived.get(READS_BEYOND))
    # What the rules derived from the file refers back to it (a parsed module names the file it was read from): a
    # cycle, which the run's collector, kept off while files are linted, would never free. Nothing reads it now.
    source.derived.clear()
    return FileResult(tuple(sorted(findings)), directives, tuple(ran), beyond, depends, fixes or None)


def _run_rules(source: SourceFile, active: list[SourceRule], findings: list[RawFinding],
               fixes: dict[RawFinding, Fix]) -> UnreadableSource | None:
    """Run the rules on one file, adding their findings; what made the file unreadable to one, if anything did."""
    error: UnreadableSource | None = None
    for sr in active:
        try:
            for report in sr.check(source, sr.ctx):
                raw = _raw(sr.rule, report, source)
                findings.append(raw)
                if report.fix is not None:
                    fixes[raw] = report.fix
        except UnreadableSource as exc:
            error = error or exc
        except RecursionError:
            # A tree that parses but nests deeper than a rule's walk can follow: the file's shape, reported.
            error = error or UnreadableSource(f"nested too deeply for {sr.rule.name} to read", 1, 0)
        except Exception as exc:  # a bug in a rule: say where, keep the traceback
            raise RuntimeError(f"rule {sr.rule.code} failed on {source.rel}: {exc!r}") from exc
    return error


def unreadable(rel: str, error: UnreadableSource) -> RawFinding:
    report = next(iter(registry.load(UNREADABLE).check(error, None)))
    return RawFinding(report.line or 1, report.col or 0, None, None, UNREADABLE, "", report.message,
                      f"|{report.message}", None)


def lint_file(path: str, rel: str, rules: list[SourceRule]) -> tuple[FileResult, bytes | None]:
    """Read and lint one file; an unreadable file gives a KG004 finding, not an exception."""
    try:
        with open(path, "rb") as handle:
            data = handle.read()
    except OSError as exc:
        error = UnreadableSource(f"cannot read: {exc.strerror or exc}")
        found = (unreadable(rel, error),) if any(sr.rule.code == UNREADABLE for sr in rules) else ()
        return FileResult(found, (), tuple(sr.rule.code for sr in rules if sr.match(rel))), None
    return lint_bytes(path, rel, data, rules), data


def _raw(rule: Rule, report: Report, source: SourceFile) -> RawFinding:
    line = report.line or 1
    identity = f"{report.scope}|{report.discriminator or _snippet(source, line)}"
    return RawFinding(line, report.col or 0, report.end_line, report.end_col, rule.code,
                      report.severity.value if report.severity else "", report.message, identity, report.value,
                      tuple(tuple(r.as_list()) for r in report.related))


def _snippet(source: SourceFile, line: int) -> str:
    """The finding's line without spacing or comments: stable across moves, reformatting and an edit of the line's
    comment (a `# noqa`, a `// TODO` or a kgate directive added to a pinned finding's line leaves it pinned)."""
    try:
        text = _code_of_line(source, line, source.line_text(line))
    except UnreadableSource:
        return ""
    cut = text.find("kgate:")  # a file of a language kgate reads no comments of
    if cut >= 0:
        text = text[:cut].rstrip("#/; \t")
    return " ".join(text.split())


def _code_of_line(source: SourceFile, line: int, text: str) -> str:
    """A line of the file with its comments (or the parts of block comments on it) replaced by a space each."""
    if source.is_python and "#" not in text and "\r" not in source.text:
        # A Python comment runs from its `#` to the end of its line: a line without one holds none, and the file's
        # comments are read only for a line that may. (The reader of a file the tokenizer cannot read ends a comment
        # at a newline only: a lone carriage return inside one would carry it onto the next line as kgate counts
        # lines, so such files are read as before.)
        return text
    spans = source.derived.get("comment_columns")
    if spans is None:
        spans = source.derived["comment_columns"] = _comment_columns(source)
    cuts = spans.get(line)
    if not cuts:
        return text
    pieces, done = [], 0
    for start, end in cuts:
        pieces += [text[done:start], " "]
        done = max(done, end)
    return "".join(pieces) + text[done:]


def _comment_columns(source: SourceFile) -> dict[int, list[tuple[int, int]]]:
    """Line -> the (start, end) columns of the comments on it, lines numbered as `SourceFile.lines` numbers them."""
    from bisect import bisect_right

    from kgate.support.comments import comments

    text = source.text
    if source.is_python:
        from kgate.support.comments.python import comments_once

        found = comments_once(text)
    else:
        found = comments(text, language(source.rel))
    if not found:
        return {}
    ends = re.finditer(r"\r\n|\r|\n" if "\r" in text else r"\n", text)
    starts = [0, *(m.end() for m in ends)]
    out: dict[int, list[tuple[int, int]]] = {}
    for comment in found:
        first = bisect_right(starts, comment.start) - 1
        last = bisect_right(starts, max(comment.start, comment.end - 1)) - 1
        for index in range(first, last + 1):
            at = starts[index]
            out.setdefault(index + 1, []).append((max(comment.start, at) - at, comment.end - at))
    return out


def findings(results: dict[str, FileResult], selection: Selection) -> list[Finding]:
    """Findings of a run with the configuration applied: per-file-ignores and severities."""
    rules: dict[str, Rule] = {}
    out = []
    for rel, result in results.items():
        for raw in result.findings:
            rule = rules.get(raw.code) or rules.setdefault(raw.code, registry.load(raw.code))
            report = Report(raw.message, severity=Severity(raw.severity) if raw.severity else None, line=raw.line,
                            col=raw.col, end_line=raw.end_line, end_col=raw.end_col, value=raw.value,
                            related=tuple(Related.from_record(r) for r in raw.related),
                            fix=result.fixes.get(raw) if result.fixes else None)
            finding = to_finding(rule, report, selection, path=rel, line=raw.line, identity=raw.identity)
            if selection.keep(finding):
                out.append(finding)
    return out


def judge(results: dict[str, FileResult], selection: Selection) -> Callable[[str, int, str], bool]:
    """Whether a suppression of `code` at (path, line) was examined by this run: the rule ran on the file."""
    def judged(path: str, _line: int, code: str) -> bool:
        result = results.get(path)
        return result is not None and code in result.ran and not selection.ignored_for(path, code)

    return judged


def to_json(result: FileResult) -> list[Any]:
    return [[[*f[:-1], [list(r) for r in f.related]] for f in result.findings], [list(d) for d in result.directives],
            list(result.ran)]


def from_json(data: list[Any]) -> FileResult:
    findings, directives, ran = data
    if not findings and not directives:
        return FileResult((), (), tuple(ran))
    return FileResult(tuple(RawFinding._make([*f[:-1], tuple(tuple(r) for r in f[-1])]) for f in findings),
                      tuple(Directive(d[0], d[1], d[2], tuple(d[3]), d[4], d[5], d[6]) for d in directives), tuple(ran))


def content_digest(data: bytes) -> str:
    return blake2b(data, digest_size=16).hexdigest()


# Below this many files to read, starting worker processes costs more than it saves.
PARALLEL_MIN_FILES = 48


def run_files(files: Iterable[tuple[str, str]], rules: list[SourceRule], cache: Any | None = None,
              jobs: int | None = None) -> tuple[dict[str, FileResult], int]:
    """Lint files, answering from the cache where a file is unchanged. Returns (results, cache hits)."""
    results: dict[str, FileResult] = {}
    todo: list[tuple[str, str]] = []
    reads_of.new_run()  # what the readers kept of the project's files in an earlier run may no longer hold
    for rel, path in files:
        cached = cache.lookup(rel, path) if cache is not None else None
        if cached is None:
            todo.append((rel, path))
        else:
            results[rel] = cached
    hits = len(results)
    # Syntax trees hold no reference cycles, so reference counting frees them; the cyclic collector
    # would only re-scan the growing heap of nodes while files are parsed (a fifth of a cold run).
    gc.disable()
    try:
        linted = _lint_many(todo, rules, jobs)
    finally:
        # What the readers keep for the run is no garbage: the collector would scan all of it again on the first
        # collection after this (a tenth of a cold run's time on a project of a few hundred modules).
        gc.freeze()
        gc.enable()
    # What the rules kept for one another's files (the project's modules read, their readings and syntax trees) is
    # not read again: dropped before the results are written, which then take that memory rather than more (a kept
    # value with a `release` breaks the cycles in it first: the collector is frozen).
    for sr in rules:
        for held in sr.ctx.shared.values():
            if hasattr(held, "release"):
                held.release()
        sr.ctx.shared.clear()
    reads_of.release()
    for rel, path, result, digest, size in linted:
        results[rel] = result._replace(digest=digest) if digest else result
        if cache is not None and digest:
            cache.store(rel, path, digest, size, result)
    return results, hits


Linted = tuple[str, str, FileResult, str, int]


def _lint_one(rel: str, path: str, rules: list[SourceRule]) -> Linted:
    result, data = lint_file(path, rel, rules)
    cacheable = data is not None and not result.reads_beyond
    return rel, path, result, content_digest(data) if data is not None and cacheable else "", len(data or b"")


def _lint_many(todo: list[tuple[str, str]], rules: list[SourceRule], jobs: int | None) -> list[Linted]:
    """Serially, or split over forked processes when there are enough files (a cold run on 2+ cores).

    Plain `os.fork` and a pipe per child rather than multiprocessing: its imports alone
    would cost a warm run more than a tenth of its time, and the parent takes a share
    of the files itself instead of waiting.
    """
    workers = min(jobs or _free_cores(), 8, len(todo) // (PARALLEL_MIN_FILES // 2) or 1)
    # Under pre-commit (it sets PRE_COMMIT=1) the hook's batches already run one process per core.
    if len(todo) < PARALLEL_MIN_FILES or workers < 2 or sys.platform != "linux" or os.environ.get("PRE_COMMIT"):
        return [_lint_one(rel, path, rules) for rel, path in todo]
    _read_ahead(todo, rules)
    # The files are handed out a few at a time, in their order, through a pipe every process reads from (a read of
    # one 4-byte number from a pipe is whole): a process that meets the costlier files, or a busier core, takes
    # fewer. At most 1,024 numbers, which a pipe holds before anyone reads them.
    step = max(_STEP, -(-len(todo) // 1024))
    queue, fill = os.pipe()
    try:
        os.write(fill, b"".join(start.to_bytes(4, "little") for start in range(0, len(todo), step)))
    finally:
        os.close(fill)
    sys.stdout.flush()
    sys.stderr.flush()
    children: list[tuple[int, int]] = []
    collected = 0
    try:
        children.extend(_fork_worker(queue, todo, step, rules) for _ in range(workers - 1))
        out = list(_lint_taken(queue, todo, step, rules))
        os.close(queue)
        for pid, fd in children:
            out.extend(_collect(pid, fd))
            collected += 1
    except BaseException:  # an interrupt (kgate.support.interrupts): the children still linting stop with kgate
        for pid, fd in children[collected:]:
            _stop_child(pid, fd)
        raise
    # A child that failed left its files unreported: linted here, so that a bug shows with its traceback.
    done = {linted[0] for linted in out}
    out.extend(_lint_one(rel, path, rules) for rel, path in todo if rel not in done)
    order = {rel: index for index, (rel, _path) in enumerate(todo)}
    out.sort(key=lambda linted: order[linted[0]])
    return out


_STEP = 4  # files handed out at a time


def _free_cores() -> int:
    """The workers a cold lint forks when `jobs` is not set: one per core that no other process is running on as it
    starts (the machine's runnable tasks now, less this one). Workers sharing busy cores with other processes take
    no less wall time than one process, and more CPU time and memory: each builds again the readings of the
    modules its files' verdicts ask about."""
    try:
        with open("/proc/loadavg", "rb") as handle:
            return free_cores(os.cpu_count() or 1, handle.read())
    except OSError:
        return os.cpu_count() or 1


def free_cores(cores: int, loadavg: bytes) -> int:
    """The cores of `cores` no other task runs on, by the text of /proc/loadavg (its fourth field: the tasks
    runnable now, the one reading it among them, / all of them); every core where it does not say."""
    try:
        running = int(loadavg.split()[3].split(b"/")[0])
    except (ValueError, IndexError):
        return cores
    return max(1, cores - max(0, running - 1))


def _lint_taken(queue: int, todo: list[tuple[str, str]], step: int, rules: list[SourceRule]) -> Iterator[Linted]:
    """Lint the files handed out through `queue` (`_lint_many`) until none is left."""
    while len(taken := os.read(queue, 4)) == 4:
        start = int.from_bytes(taken, "little")
        for rel, path in todo[start:start + step]:
            yield _lint_one(rel, path, rules)


def _read_ahead(todo: list[tuple[str, str]], rules: list[SourceRule]) -> None:
    """What the rules read of a whole project (`Rule.read_ahead`), read here, once, for the first file of each project
    that the rule reads: the forked workers share it, where each would read it for itself."""
    done: set[tuple[int, str]] = set()
    for sr in rules:
        ahead = sr.rule.read_ahead
        if ahead is None:
            continue
        for rel, path in todo:
            root = project_root(path, rel)
            if (id(sr), root) in done or not sr.match(rel) or not _reads(sr, path):
                continue
            done.add((id(sr), root))
            ahead(path, rel, sr.ctx)


def _reads(sr: SourceRule, path: str) -> bool:
    """Whether the rule reads the file at `path` (its pre-filter and what it requires are in it)."""
    try:
        with open(path, "rb") as handle:
            data = handle.read()
    except OSError:
        return False
    return (not sr.prefilter or any(marker in data for marker in sr.prefilter)) and sr.rule.admits(data)


def _stop_child(pid: int, fd: int) -> None:
    import signal

    with contextlib.suppress(OSError):
        os.kill(pid, signal.SIGKILL)
    with contextlib.suppress(OSError):
        os.waitpid(pid, 0)
    with contextlib.suppress(OSError):
        os.close(fd)


def _fork_worker(queue: int, todo: list[tuple[str, str]], step: int, rules: list[SourceRule]) -> tuple[int, int]:
    import marshal

    read_fd, write_fd = os.pipe()
    pid = os.fork()
    if pid == 0:  # the child: lint, send plain data back, leave without running the parent's cleanup
        code = 0
        try:
            os.close(read_fd)
            payload = [(rel, path, to_json(result), digest, size, result.depends)
                       for rel, path, result, digest, size in _lint_taken(queue, todo, step, rules)]
            with os.fdopen(write_fd, "wb") as pipe:
                pipe.write(marshal.dumps(payload))
            from kgate.collect import pyimports

            pyimports.save()  # what this child scanned of the projects' imports, for the next run
        except BaseException:  # noqa: BLE001 - a forked child must reach os._exit whatever happens
            code = 1
        finally:
            os._exit(code)
    os.close(write_fd)
    return pid, read_fd


def _collect(pid: int, fd: int) -> list[Linted]:
    """A child's results (none where it failed: `_lint_many` lints the files it took)."""
    import marshal

    with os.fdopen(fd, "rb") as pipe:
        data = pipe.read()
    _pid, status = os.waitpid(pid, 0)
    if status == 0 and data:
        return [(rel, path, from_json(result)._replace(depends=depends), digest, size)
                for rel, path, result, digest, size, depends in marshal.loads(data)]
    return []
