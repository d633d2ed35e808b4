"""What a rule is. Rule modules live in the `rules/` folder (installed as `kgate.rules`).

A rule module's docstring is its user documentation, in fixed sections
(What it does / Why is this bad? / Example / Use instead / Options /
References); `kgate explain CODE` prints it. The module defines `RULE`.
Rules never print and never run tools: `check` yields `Report`s and the
engine turns them into `Finding`s.
"""

from __future__ import annotations

import builtins
import math
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from kgate.core.artifacts import Artifact, KernelTest
from kgate.core.errors import ConfigError
from kgate.core.findings import Finding, Related, Severity

if TYPE_CHECKING:
    from kgate.core.fix import Fix
    from kgate.core.selection import Selection

LAYERS = ("meta", "compiled", "capture", "python", "cuda")
DOC_SECTIONS = ("## What it does", "## Why is this bad?", "## Example", "## Use instead", "## Options")


@dataclass(frozen=True)
class Option:
    default: Any
    help: str
    type: type | tuple[type, ...] = object
    items: builtins.type | None = None  # for list options: the type of every element; for tables: of every
    # element of every value, each a list (`{ "pkg.mod:kernel" = ["w_ptr"] }`)
    minimum: float | None = None  # for numbers: the smallest value that means something
    choices: tuple[str, ...] = ()  # for strings: the values the rule knows

    def validate(self, rule: str, name: str, value: Any) -> Any:
        expected = self.type
        if self.items is not None and isinstance(value, list):
            self._check_items(f"options.{rule}.{name}", value)
        if self.items is not None and isinstance(value, dict):
            for key, listed in value.items():
                if not isinstance(listed, list):
                    raise ConfigError(f"options.{rule}.{name}.{key}: must be a list, not {listed!r}")
                self._check_items(f"options.{rule}.{name}.{key}", listed)
        if expected is not object:
            if isinstance(value, bool) and bool not in (expected if isinstance(expected, tuple) else (expected,)):
                raise ConfigError(f"options.{rule}.{name}: must be {_describe(expected)}, not {value!r}")
            if not isinstance(value, expected):
                raise ConfigError(f"options.{rule}.{name}: must be {_describe(expected)}, not {value!r}")
        if isinstance(value, (int, float)) and not isinstance(value, bool):
            if not math.isfinite(value):
                raise ConfigError(f"options.{rule}.{name}: must be a finite number, not {value!r}")
            if self.minimum is not None and value < self.minimum:
                raise ConfigError(f"options.{rule}.{name}: must be at least {self.minimum:g}, not {value!r}")
        if self.choices and value not in self.choices:
            raise ConfigError(f"options.{rule}.{name}: must be one of {', '.join(map(repr, self.choices))}, "
                              f"not {value!r}")
        return value

    def _check_items(self, where: str, listed: list[Any]) -> None:
        kind = self.items or object
        for item in listed:
            if not isinstance(item, kind) or isinstance(item, bool) and kind is not bool:
                raise ConfigError(f"{where}: every item must be {_describe(kind)}, not {item!r}")


def _decoded(marker: bytes | tuple[bytes, ...]) -> str | list[str]:
    """A `requires` entry as text: a string, or the list of strings any one of which meets it."""
    if isinstance(marker, tuple):
        return [m.decode("utf-8", "replace") for m in marker]
    return marker.decode("utf-8", "replace")


def _describe(expected: type | tuple[type, ...]) -> str:
    names = {int: "an integer", float: "a number", str: "a string", bool: "true or false", list: "a list",
             dict: "a table"}
    if isinstance(expected, tuple):
        return " or ".join(names.get(t, t.__name__) for t in expected)
    return names.get(expected, expected.__name__)


@dataclass(frozen=True)
class Report:
    """A rule's verdict on one subject; the engine adds path, kernel and identity."""

    message: str
    severity: Severity | None = None  # None: the rule's (configured) severity
    line: int | None = None  # None: the subject's own line (a kernel's definition)
    col: int | None = None  # 1-based, in characters (SourceFile.span converts ast's byte offsets)
    end_line: int | None = None
    end_col: int | None = None
    # Extra words that keep two reports on one subject apart in the baseline.
    discriminator: str = ""
    path: str | None = None
    # Enclosing scope (function or class) for the baseline identity of source findings.
    scope: str = ""
    # A size-like measurement (code lines of a file, ...): the baseline pins it with
    # the project's `size-slack`, so small growth needs no re-pin (and no merge conflict).
    value: int | None = None
    # Other places the report points at (kgate.core.findings.Related): the offending access beside the kernel.
    related: tuple[Related, ...] = ()
    # The change that removes the finding, when it is mechanical (kgate.core.fix): applied by `kgate lint --fix`.
    fix: Fix | None = None


@dataclass(frozen=True)
class Rule:
    code: str
    name: str
    layer: str
    severity: Severity
    summary: str
    check: Callable[..., Iterable[Report]]
    doc: str = ""
    options: dict[str, Option] = field(default_factory=dict)
    # Source rules: file-name globs the rule reads ("*.py", "*.cu", "CMakeLists.txt"),
    # and byte strings of which at least one must occur for the rule to run at all.
    files: tuple[str, ...] = ()
    prefilter: tuple[bytes, ...] = ()
    # Byte strings that must all occur as well: what the rule cannot do without, so that a file without them is
    # not even parsed. An entry that is a tuple is met by any one of its strings (`kgate.collect.pysource.
    # TRITON_MARKERS` for a rule that stays quiet in a module that reaches no Triton: `triton` or a `jit`).
    requires: tuple[bytes | tuple[bytes, ...], ...] = ()
    # List options whose values (their last dotted part) are further pre-filter strings: names a project adds for
    # the rule to look for (an autotune wrapper of its own).
    prefilter_options: tuple[str, ...] = ()
    # A rule of another layer (a capture rule) with a second source of evidence: a check over source files, run
    # by `kgate lint` like a source rule's `check` (same `files`, `prefilter`, SourceContext), under the same code
    # and options. None: the rule reads only its own layer's evidence.
    source_check: Callable[..., Iterable[Report]] | None = None
    # What the source check reads of the whole project around a file it reads, called with the file's path, its
    # project-relative name and the rule's SourceContext (the import index of the project's Python files, the reading
    # of its C++ files): a run that splits its files over forked workers reads it once before they start, and they
    # share it, where each would read it for itself. None: nothing beyond what each file's verdict reads.
    read_ahead: Callable[[str, str, SourceContext], object] | None = None
    # The kernel figures the baseline pins (`kgate.ratchet.baseline.METRICS`) that this rule's verdict is about: a
    # pinned figure that got worse is said on the rule's finding for that kernel, not on a line of its own.
    measures: tuple[str, ...] = ()
    # Compiled rules whose finding on the same kernel variant is the cause of this rule's (a spill is the register
    # ceiling's): where both are reported, this one is folded into that one (`kgate.evaluate.causes`).
    caused_by: tuple[str, ...] = ()
    # Whether the rule runs only when a configuration or the command line names it (`kgate.rules.OPT_IN`).
    opt_in: bool = False
    # The artifacts the rule reads (`kgate.core.artifacts`): the run compiles and disassembles what its selected
    # rules read, and nothing else.
    reads: frozenset[Artifact] = frozenset()
    # For a rule that reads SASS of some kernels only: which (a test of a kernel's facts read without SASS, a
    # function of the rule's module). None: every kernel's SASS, where the rule reads SASS at all.
    sass_when: KernelTest | None = None
    # Whether the rule's reports may carry a fix (`kgate.core.fix`; its documentation then has a "Fix" section): a
    # fix reads a file with such a finding through a fresh lint, since the lint cache keeps no fixes.
    fixes: bool = False

    def admits(self, data: bytes) -> bool:
        """Whether a file's bytes hold everything the rule `requires`."""
        return all(any(m in data for m in marker) if isinstance(marker, tuple) else marker in data
                   for marker in self.requires)

    def needles(self, options: dict[str, Any]) -> tuple[bytes, ...]:
        """The pre-filter with the configured names added."""
        extra = [str(v).rsplit(".", 1)[-1].encode("utf-8") for name in self.prefilter_options
                 for v in options.get(name) or () if str(v).strip(".")]
        return self.prefilter + tuple(sorted(set(extra) - set(self.prefilter))) if extra else self.prefilter

    def resolve_options(self, configured: dict[str, Any] | None) -> dict[str, Any]:
        configured = configured or {}
        unknown = sorted(set(configured) - set(self.options))
        if unknown:
            known = ", ".join(sorted(self.options)) or "none"
            raise ConfigError(f"options.{self.name}: unknown option {unknown[0]!r} (known: {known})")
        return {name: opt.validate(self.name, name, configured.get(name, opt.default))
                for name, opt in self.options.items()}

    def selection_note(self) -> str:
        """What the header of the rule's page says about its selection: nothing for a rule every run selects."""
        return f" Opt-in: runs only when selected (`extend-select = [\"{self.code}\"]`)." if self.opt_in else ""

    def record(self) -> dict[str, Any]:
        """The rule as `kgate explain --format json` and `kgate rules --format json` print it."""
        return {
            "code": self.code,
            "name": self.name,
            "layer": self.layer,
            "severity": self.severity.value,
            "opt_in": self.opt_in,
            "summary": self.summary,
            "files": list(self.files),
            "prefilter": [p.decode("utf-8", "replace") for p in self.prefilter],
            "requires": [_decoded(p) for p in self.requires],
            "options": {name: {"default": opt.default, "help": opt.help} for name, opt in sorted(self.options.items())},
            "doc": self.doc.strip(),
        }


# --------------------------------------------------------------------------- from a report to a finding


def severity_of(rule: Rule, report: Report, selection: Selection) -> Severity:
    """A finding's severity: the configured one replaces the rule's and the report's, except for informational
    notes, which stay notes."""
    if report.severity is Severity.NOTE:
        return Severity.NOTE
    return selection.severity.get(rule.code) or report.severity or rule.severity


def to_finding(rule: Rule, report: Report, selection: Selection, *, path: str, line: int, identity: str,
               kernel: str | None = None, variant: str | None = None, target: str | None = None) -> Finding:
    """The finding a rule's report makes: where the report does not say (its path, its line), the subject's
    `path` and `line`; the severity as configured (`severity_of`). Every layer's findings are built here."""
    return Finding(
        path=report.path or path,
        line=report.line or line,
        col=report.col or 0,
        code=rule.code,
        name=rule.name,
        severity=severity_of(rule, report, selection),
        message=report.message,
        kernel=kernel,
        variant=variant or None,
        target=target or None,
        identity=identity,
        end_line=report.end_line,
        end_col=report.end_col,
        value=report.value,
        related=report.related,
        fix=report.fix,
    )


# The key a source rule sets in `SourceFile.derived` when its verdict on a file read other files of the project that
# it does not note as read (`kgate.collect.depends`, where the project's shared readers note what they read): the
# engine then never caches that file's result (the cache answers from the file's own state alone).
READS_BEYOND = "reads_beyond"


@dataclass(frozen=True)
class SourceContext:
    """What a source rule may read besides the file itself. `shared`: what the source rules of one run keep for one
    another, the same dictionary for all of them (the project's other modules, read once however many rules ask);
    emptied once the run's files are linted, after calling the `release()` of each value that has one."""

    options: dict[str, Any]
    shared: dict[Any, Any] = field(default_factory=dict, compare=False, hash=False)


@dataclass(frozen=True)
class CapturedKernel:
    """What a capture rule reads: one kernel's captured specialisations (`kgate.collect.specialization`)."""

    kernel: str
    specs: tuple[Any, ...]
    tuned: frozenset[str]  # constexprs an autotune config of the kernel sets (they vary by design)
    keys: frozenset[str] = frozenset()  # the arguments its autotuner is keyed on (KG201 judges what they follow)


@dataclass(frozen=True)
class CaptureContext:
    """What a capture rule may read besides the kernel's specialisations."""

    options: dict[str, Any]


@dataclass(frozen=True)
class CompiledContext:
    """What a compiled rule may read besides the kernel's facts."""

    options: dict[str, Any]
    profile: Any  # kgate.hardware.profiles.Profile of the target's primary card
