"""`kgate audit`: compile like `kgate check` and write the audit report.

Every kernel's SASS is read once, by nvdisasm, whose listing (kept in the cache) gives the excerpts with their
source lines and, for a kernel whose rules read no SASS, the instruction mix.

Writes DIR/report.html (one self-contained page: no network requests, charts
as inline SVG), DIR/report.md with the same numbers, and DIR/summary.md, a
screenful for a pull-request comment. The baseline, when
there is one, is compared as `kgate check` compares it, and each kernel's
differences are shown with it. Exit 0 when the report is written, whatever
it says: `kgate check` is the gate.
"""

from __future__ import annotations

import argparse
import functools
import os
from collections import defaultdict
from collections.abc import Mapping, Sequence
from dataclasses import replace
from pathlib import Path
from typing import Any

import kgate
from kgate.commands.common import ProgressBar, config_from, fail_on, selection_from
from kgate.compile.relocate import Spans
from kgate.core.config import Config
from kgate.core.errors import ConfigError, KgateError
from kgate.core.result import Result
from kgate.diff.compare import Diff
from kgate.diff.listing import Listing
from kgate.facts.listing import opcode_counts
from kgate.facts.model import KernelFacts
from kgate.facts.ptx import SourceLoc
from kgate.hardware.profiles import AUDIT_DEFAULT, Profile, primary, profiles
from kgate.pipeline.check import CheckOptions, resolve_targets, run_check
from kgate.ratchet import gate as ratchet
from kgate.ratchet.compare import Comparison
from kgate.report import audit_html, audit_md, audit_model, audit_summary, audit_tables, differences, excerpt
from kgate.report.audit_model import Key
from kgate.report.escape import terminal
from kgate.report.excerpt import Excerpt
from kgate.support.atomicio import atomic_write


def resolve_cards(requested: list[str] | None, targets: tuple[str, ...], explicit_targets: bool
                  ) -> tuple[tuple[str, ...], dict[str, list[Profile]]]:
    """The targets to compile and the cards to show per target: the defaults plus `--profile` cards.

    A requested card of an architecture that is not among the targets adds its
    target, unless the targets were given with --target (then it is an error).
    """
    known = profiles()
    chosen: list[Profile] = []
    for name in requested or []:
        card = known.get(name.lower())
        if card is None:
            raise ConfigError(f"--profile {name}: unknown card (known: {', '.join(sorted(known))})")
        chosen.append(card)
    for card in chosen:
        if card.arch not in targets:
            if explicit_targets:
                raise ConfigError(f"--profile {card.key} is an {card.arch} card; add --target {card.arch}")
            targets += (card.arch,)
    cards: dict[str, list[Profile]] = {}
    for target in targets:
        defaults = [known[k] for k in AUDIT_DEFAULT.get(target, ())] or [primary(target)]
        cards[target] = defaults + [c for c in chosen if c.arch == target and c not in defaults]
    return targets, cards


def baseline_view(comparison: Comparison | None) -> tuple[dict[tuple[str, str, str], list[str]], list[str]]:
    """Baseline differences per kernel variant and target, and those that belong to none."""
    per_kernel: dict[tuple[str, str, str], list[str]] = defaultdict(list)
    general: list[str] = []
    for diff in comparison.differences if comparison else []:
        key = differences.owner(diff)
        if key is None:
            general.append(differences.describe(diff))
        else:
            per_kernel[key].append(differences.per_kernel_line(diff))
    return dict(per_kernel), general


def _check_folder(out: Path) -> None:
    try:
        blocked = out.exists() and not out.is_dir()
    except OSError:  # cannot look: writing into it will say why
        return
    if blocked:
        raise ConfigError(f"{out}: not a folder (kgate audit writes report.html and report.md into one)")


def run(args: argparse.Namespace) -> int:
    config = config_from(args)
    selection = selection_from(args, config)
    _check_folder(Path(args.output))  # before compiling anything
    targets, cards = resolve_cards(args.profile, resolve_targets(config, tuple(args.target or ())),
                                   explicit_targets=bool(args.target))
    options = CheckOptions(targets=targets, kernels=tuple(args.kernel or ()), jobs=args.jobs,
                           fail_on=fail_on(args, config))
    progress = ProgressBar(enabled=True)
    try:
        checked = run_check(config, selection, options, progress)
    finally:
        progress.clear()
    compiled = checked.compiled
    judged = ratchet.apply(checked.state, config, enabled=not args.no_baseline)
    result = Result.judged("check", checked.findings, judged, kernels=compiled.facts, fail_on=options.fail_on)
    comparison = judged.comparison if judged is not None else None
    per_kernel, general = baseline_view(comparison)
    if args.no_baseline:
        state = "not compared (--no-baseline)"
    elif comparison is None:
        state = f"no baseline file ({config.baseline})"
    else:
        state = f"compared with {config.baseline}"
    listed, note = listings(config, compiled.facts, compiled.cubins, options.jobs)
    facts = with_listed_sass(compiled.facts, compiled.cubins, listed)
    model = audit_model.build(
        facts, compiled.failures, result.findings, cards, toolchain=compiled.toolchain,
        excerpts=excerpts(config, facts, compiled.cubins, listed, note), verdict=verdict(result),
        version=kgate.__version__, baseline=per_kernel,
        baselined=comparison.baselined if comparison else (), baseline_state=state,
        baseline_compared=comparison is not None, baseline_notes=general,
        limits=audit_model.Thresholds.under(selection.options))  # the rules' options, as configured
    if getattr(args, "diff", None):
        model = replace(model, sass_diff=_sass_diff(config, options, args.diff))
    return write(model, Path(args.output))


def verdict(result: Result) -> str:
    """What `kgate check` says of the same run, in a few words, each finding counted once."""
    failing, by_ratchet, worse = len(result.failing()), len(result.failing_by_ratchet()), len(result.ratchet_failures())
    if not result.exit_code():
        return "passes"
    why = [f"{failing} finding(s) at {result.fail_on.value} or above"] if failing else []
    why += [f"{by_ratchet} below it failing the ratchet"] if by_ratchet else []
    why += [f"{worse} other difference(s) against the baseline" if failing or by_ratchet else
            f"{worse} difference(s) against the baseline"] if worse else []
    return f"fails ({', '.join(why)})"


def listings(config: Config, facts: Sequence[KernelFacts], cubins: Mapping[Key, tuple[str, str | None]],
             jobs: int | None) -> tuple[dict[str, Listing | None], str]:
    """The SASS listing of every cubin of the run by its path (made once per cubin by nvdisasm, which gives the
    line table, and kept in the cache; None for a cubin that is not the one its record was written with), and
    a note when there is none at all."""
    from concurrent.futures import ThreadPoolExecutor

    from kgate.compile.cache import Cache
    from kgate.diff.listing import cubin_listing

    cache = Cache(config.root / config.cache_dir, config.cache_dir)
    paths = sorted({cubins[f.key] for f in facts if f.key in cubins}, key=lambda c: c[0])
    found: dict[str, Listing | None] = {}
    try:
        with ThreadPoolExecutor(max_workers=max(1, jobs or os.cpu_count() or 1)) as pool:
            for (path, _), listing in zip(paths, pool.map(lambda p: cubin_listing(cache, Path(p[0]), p[1]), paths)):
                found[path] = listing
    except KgateError as exc:  # no nvdisasm: the PTX alone
        return {}, f"no SASS listing: {exc}"
    return found, ""


def with_listed_sass(facts: Sequence[KernelFacts], cubins: Mapping[Key, tuple[str, str | None]],
                     listed: Mapping[str, Listing | None]) -> list[KernelFacts]:
    """The facts, those the check read no SASS for with the opcode counts of their listing (the instruction mix),
    instead of disassembling their cubins a second time."""
    out = []
    for f in facts:
        functions = listed.get(cubins[f.key][0]) if f.sass is None and f.key in cubins else None
        body = functions.get(f.entry.name) if functions else None
        out.append(replace(f, sass=opcode_counts(body)) if body is not None else f)
    return out


def excerpts(config: Config, facts: Sequence[KernelFacts], cubins: Mapping[Key, tuple[str, str | None]],
             listed: Mapping[str, Listing | None], note: str) -> dict[Key, Excerpt]:
    """Each variant's PTX and SASS around the instructions that matter, read from the cache's artifacts and the
    cubins' listings."""
    from kgate.compile.cache import Cache

    read = SourceLines(config.root, Cache(config.root / config.cache_dir, config.cache_dir))
    out = {}
    for f in facts:
        if f.key not in cubins:
            continue
        folder = Path(cubins[f.key][0]).parent
        read.compiled_in(f, folder.name)
        try:
            ptx_text: str | None = (folder / "kernel.ptx").read_text(encoding="utf-8", errors="replace")
        except OSError:
            ptx_text = None
        functions = listed.get(cubins[f.key][0])
        sass = functions.get(f.entry.name) if functions else None
        notes = [note] if note else [] if sass is not None else ["no SASS listing: the cubin is not in the cache"]
        out[f.key] = excerpt.excerpt(ptx_text, f.entry.name, sass, functools.partial(read, f), notes)
    return out


class SourceLines:
    """The lines of the project's source files a line table names, each file read once."""

    def __init__(self, root: Path, cache: Any) -> None:
        self.root = root.resolve()
        self.cache = cache
        self.files: dict[Path, list[str]] = {}
        self.spans: dict[tuple[str, str, str], tuple[Spans, Spans]] = {}

    def compiled_in(self, facts: KernelFacts, key: str) -> None:
        """Where the top-level functions of the kernel's file were when its compile (cache key `key`) was made,
        and where they are now: a compile is reused when only code above the kernel moved, and its line table
        then names the old lines, which are moved here as the facts' own lines are (`kgate.facts.relocate`)."""
        if not facts.path.endswith(".py"):
            return
        from kgate.compile import records as shapes
        from kgate.compile.relocate import def_spans

        then = self.cache.get("spans", key, shapes.spans)
        if then:
            now = def_spans(self.root / facts.path)
            spans = {k: (v[0], v[1]) for k, v in then.items()}
            if spans != now:
                self.spans[facts.key] = (spans, now)

    def __call__(self, facts: KernelFacts, file: str, line: int) -> tuple[str, int, str]:
        """(the file as the page shows it, the line where that code is now, its text): project files relative to
        the project, the kernel's own file wherever it was compiled (the line table names the path the compiler
        was given), other files by their last two parts and without text."""
        name = file.replace("\\", "/")
        if facts.own_line(SourceLoc(file, line, 0)) is not None:
            path = self.root / facts.path
            moved = self.spans.get(facts.key)
            if moved is not None:
                # The facts stage's own rule for moving a line with its function, so that both agree.
                from kgate.facts.relocate import Moved, _move

                try:
                    line = _move(line, *moved)
                except Moved:  # its function is gone: no line of today's file is that code
                    return facts.path, line, ""
        else:
            path = Path(name) if os.path.isabs(name) else self.root / name
        try:
            rel = path.resolve().relative_to(self.root)
        except (OSError, ValueError):
            return "/".join(name.split("/")[-2:]), line, ""
        if path not in self.files:
            try:
                self.files[path] = path.read_text(encoding="utf-8", errors="replace").splitlines()
            except OSError:
                self.files[path] = []
        lines = self.files[path]
        return rel.as_posix(), line, lines[line - 1] if 0 < line <= len(lines) else ""


# Side-by-side SASS for this many changed variants: enough to read what a change did, not a listing of all.
SIDE_BY_SIDE = 5


def _sass_diff(config: Config, options: CheckOptions, base: str) -> Diff:
    from kgate.diff.runs import revision_diff

    progress = ProgressBar(enabled=True)
    try:
        return revision_diff(config, replace(options, sass=False, source=False), base, progress, pairs=SIDE_BY_SIDE)
    finally:
        progress.clear()


def write(model: audit_model.AuditModel, out: Path) -> int:
    written = []
    _check_folder(out)
    for name, text in (("report.html", audit_html.render(model)), ("report.md", audit_md.render(model)),
                       ("summary.md", audit_summary.render(model))):
        try:
            # A file name that is not UTF-8 reaches the text as lone surrogates: shown as their escapes.
            atomic_write(out / name, text.encode("utf-8", "backslashreplace"), follow=True)
        except OSError as exc:
            raise ConfigError(f"cannot write {out / name}: {exc.strerror}") from None
        written.append(str(out / name))
    tail = ""
    if model.ranking:
        closest = model.ranking[0]
        tail = terminal(f"; closest to a cliff: {closest.facts.kernel} [{closest.facts.variant}] @ "
                        f"{closest.facts.target}, headroom {audit_tables.headroom_text(closest.headroom.score)} "
                        f"({closest.headroom.limiter})")
    print(f"kgate audit: {len(model.kernels)} kernel variant(s), {len(model.failures)} failed to compile, "
          f"{len(model.findings)} finding(s){tail}")
    for path in written:
        print(f"wrote {terminal(path)}")
    return 0
