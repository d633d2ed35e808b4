"""Precision and recall of kgate's source rules on a hand-labelled corpus of public repositories.

    python bench/precision/measure.py ROOT [ROOT ...] [--labels DIR] [--rules KG201,KG202] [--show fp,fn,unlabelled]

`--show` lists the tuned part's false findings, misses and unlabelled findings; the held-out part's only with
`--show fp,fn,unlabelled,held-out` (labelling a new repository needs them), since a rule changed after reading
them is tuned on them.

A ROOT holds one folder per labelled repository, named as the label file's
`folder` (ROOT/flash-linear-attention, ROOT/mamba, ...; the first ROOT that
has the folder is used): a git checkout at the labelled commit, or an exported
tree at that commit with a `.corpus-commit` file holding the commit. Nothing is
fetched: a folder that is missing is skipped, one at another commit is measured
with a warning. docs/precision-corpus.md lists the repositories, their commits
and how to bring them.

Each label file (bench/precision/labels/*.toml) describes one repository: its
name, commit, folder, the rules labelled there, its part of the corpus
(`tuned`: the rules were changed while looking at it; `held-out`: labelled but
never looked at while changing a rule; a held-out repository's `tuned-for`
lists the rules that were changed while looking at it, which count it as
tuned) and one `[[case]]` per line a rule
reports or should report: path, line, rule, optional subject (the autotune key,
the pointer, ...), verdict (true: a real problem a kernel engineer wants
reported at this line; false: not one) and the reason. Cases the rules do not
report are labelled too: true ones are the misses (recall), false ones are
near misses kept to catch a precision regression.

kgate lint runs once per repository (subprocess, no cache, no baseline) with
the rules labelled there; findings are matched to cases by (path, line, rule)
and, when the case names a subject, that subject. One table per part (tuned,
held-out) and one for the whole corpus give per rule the cases, TP, FP, FN,
TN, the findings no case covers (they need labelling before the figures mean
anything), precision and recall with their positives (TP+FP, TP+FN) and an
exact 95% interval, the share of the rule's output that is notes, and whether
the bar is met: the interval's lower bound at least 95% for both, every finding
labelled. This is a measurement on checkouts of other projects, not a test: it
does not run in CI.
"""

from __future__ import annotations

import argparse
import json
import math
import re
import subprocess
import sys
from dataclasses import dataclass, field
from pathlib import Path

if sys.version_info >= (3, 11):
    import tomllib
else:  # Python 3.10
    import tomli as tomllib

RULES = ("KG108", "KG201", "KG202", "KG203", "KG204", "KG301", "KG302", "KG303")
PARTS = ("tuned", "held-out")
HELD_OUT_TOO = "held-out"  # `--show` of the held-out part's lines too: reading them while changing a rule tunes on them
BAR = 0.95  # the lower bound of the 95% interval that precision and recall must reach
CONFIDENCE = 0.95
LABELS = Path(__file__).resolve().parent / "labels"
COMMIT_FILE = ".corpus-commit"


@dataclass(frozen=True)
class Case:
    repository: str
    path: str
    line: int
    rule: str
    verdict: bool
    reason: str
    subject: str = ""


@dataclass(frozen=True)
class Finding:
    path: str
    line: int
    rule: str
    identity: str
    message: str
    severity: str = "error"

    def names(self, subject: str) -> bool:
        """Whether the finding is about `subject`: its identity's discriminator, or a quoted word of its message."""
        discriminator = self.identity.rpartition("|")[2]
        if subject == discriminator:
            return True
        return re.search(r"[`'\"]" + re.escape(subject) + r"[`'\"]", self.message) is not None


@dataclass
class Repository:
    name: str
    commit: str
    folder: str
    rules: tuple[str, ...]
    part: str
    cases: list[Case] = field(default_factory=list)
    tuned_for: tuple[str, ...] = ()  # rules changed while looking at a held-out repository: tuned for those alone

    def part_of(self, rule: str) -> str:
        return "tuned" if rule in self.tuned_for else self.part


def _binomial_tail(k: int, n: int, p: float) -> float:
    """P(X >= k) for X ~ Binomial(n, p), summed in log space so that hundreds of trials neither overflow nor
    underflow."""
    if k <= 0:
        return 1.0
    if p <= 0.0:
        return 0.0
    if p >= 1.0:
        return 1.0
    log_p, log_q = math.log(p), math.log1p(-p)
    terms = [math.lgamma(n + 1) - math.lgamma(i + 1) - math.lgamma(n - i + 1) + i * log_p + (n - i) * log_q
             for i in range(k, n + 1)]
    top = max(terms)
    return min(1.0, math.exp(top) * sum(math.exp(t - top) for t in terms))


def _solve_increasing(f: object, target: float) -> float:
    """The p in [0, 1] where the increasing function f reaches target, by bisection."""
    low, high = 0.0, 1.0
    for _ in range(100):
        middle = (low + high) / 2
        if f(middle) < target:  # type: ignore[operator]
            low = middle
        else:
            high = middle
    return (low + high) / 2


def clopper_pearson(successes: int, trials: int, confidence: float = CONFIDENCE) -> tuple[float, float]:
    """The exact (Clopper-Pearson) two-sided interval of a binomial proportion.

    The bounds are the beta quantiles Beta(a/2; k, n-k+1) and Beta(1-a/2; k+1, n-k); each is the p at which
    a binomial tail equals a/2 (P(X >= k) for the lower bound, P(X <= k) for the upper one), found here by
    bisection on that tail, which rises with p, instead of a statistics library.
    """
    if trials <= 0:
        return 0.0, 1.0
    half = (1 - confidence) / 2
    lower = 0.0 if successes == 0 else _solve_increasing(lambda p: _binomial_tail(successes, trials, p), half)
    upper = 1.0 if successes == trials else _solve_increasing(
        lambda p: _binomial_tail(successes + 1, trials, p), 1 - half)
    return lower, upper


def positives_needed(bar: float = BAR, confidence: float = CONFIDENCE) -> int:
    """The fewest positives whose interval can clear the bar at all: with no error, the lower bound is
    ((1 - confidence) / 2) ** (1 / n)."""
    return math.ceil(math.log((1 - confidence) / 2) / math.log(bar))


@dataclass
class Tally:
    cases: int = 0
    tp: int = 0
    fp: int = 0
    fn: int = 0
    tn: int = 0
    unlabelled: int = 0
    skipped: int = 0  # cases of repositories that were not measured
    findings: int = 0  # what the rule reported by default, labelled or not
    notes: int = 0  # of those, how many at severity note

    @property
    def precision(self) -> float | None:
        return self.tp / (self.tp + self.fp) if self.tp + self.fp else None

    @property
    def recall(self) -> float | None:
        return self.tp / (self.tp + self.fn) if self.tp + self.fn else None

    def shortfalls(self) -> list[str]:
        """Why the bar is not met; empty when it is."""
        reasons = []
        for name, successes, positives in (("precision", self.tp, self.tp + self.fp),
                                           ("recall", self.tp, self.tp + self.fn)):
            if positives < positives_needed():
                reasons.append(f"{name}: not enough positives ({positives} of the {positives_needed()} needed)")
            elif clopper_pearson(successes, positives)[0] < BAR:
                reasons.append(f"{name}: lower bound {_percent(clopper_pearson(successes, positives)[0])} "
                               f"< {BAR:.0%}")
        if self.unlabelled:
            reasons.append(f"{self.unlabelled} finding(s) unlabelled")
        if self.skipped:
            reasons.append(f"{self.skipped} case(s) not measured")
        return reasons

    def meets_bar(self) -> bool:
        return not self.shortfalls()

    def add(self, other: Tally) -> None:
        for name in ("cases", "tp", "fp", "fn", "tn", "unlabelled", "skipped", "findings", "notes"):
            setattr(self, name, getattr(self, name) + getattr(other, name))


@dataclass
class Outcome:
    """What matching one repository's findings to its cases gives."""
    tp: list[Case] = field(default_factory=list)
    fp: list[Case] = field(default_factory=list)
    fn: list[Case] = field(default_factory=list)
    tn: list[Case] = field(default_factory=list)
    unlabelled: list[Finding] = field(default_factory=list)


def load_labels(directory: Path) -> list[Repository]:
    repositories = []
    for file in sorted(directory.glob("*.toml")):
        data = tomllib.loads(file.read_text(encoding="utf-8"))
        head = data["repository"]
        rules = tuple(head.get("rules", RULES))
        if head.get("part") not in PARTS:
            raise SystemExit(f"{file.name}: [repository] needs part = " + " or ".join(f'"{p}"' for p in PARTS))
        tuned_for = tuple(head.get("tuned-for", ()))
        if any(rule not in rules for rule in tuned_for):
            raise SystemExit(f"{file.name}: [repository] tuned-for names a rule the file does not label")
        repo = Repository(head["name"], head["commit"], head["folder"], rules, head["part"], tuned_for=tuned_for)
        for raw in data.get("case", []):
            if raw["rule"] not in rules:
                raise SystemExit(f"{file.name}: case {raw['path']}:{raw['line']} is for {raw['rule']}, "
                                 f"which the file does not label")
            if not isinstance(raw["verdict"], bool) or not raw.get("reason"):
                raise SystemExit(f"{file.name}: case {raw['path']}:{raw['line']} needs a verdict (true/false) "
                                 f"and a reason")
            repo.cases.append(Case(repo.name, raw["path"], int(raw["line"]), raw["rule"], raw["verdict"],
                                   raw["reason"], raw.get("subject", "")))
        repositories.append(repo)
    return repositories


def match(cases: list[Case], findings: list[Finding]) -> Outcome:
    """Sort cases into TP/FP/FN/TN by whether a finding covers them; list the findings no case covers."""
    out = Outcome()
    covered: set[int] = set()
    for case in cases:
        hits = [i for i, f in enumerate(findings)
                if (f.path, f.line, f.rule) == (case.path, case.line, case.rule)
                and (not case.subject or f.names(case.subject))]
        covered.update(hits)
        if hits:
            (out.tp if case.verdict else out.fp).append(case)
        else:
            (out.fn if case.verdict else out.tn).append(case)
    # A finding on a labelled line about another subject is still unlabelled.
    out.unlabelled = [f for i, f in enumerate(findings) if i not in covered]
    return out


def checkout_commit(folder: Path) -> str | None:
    if (folder / COMMIT_FILE).is_file():
        return (folder / COMMIT_FILE).read_text(encoding="utf-8").strip()
    if (folder / ".git").exists():
        done = subprocess.run(["git", "-C", str(folder), "rev-parse", "HEAD"], capture_output=True, text=True,
                              check=False)
        return done.stdout.strip() if done.returncode == 0 else None
    return None


def lint(folder: Path, rules: tuple[str, ...]) -> list[Finding]:
    command = [sys.executable, "-m", "kgate", "lint", "--select", ",".join(rules), "--format", "json",
               "--no-cache", "--no-baseline", "--exit-zero", "."]
    done = subprocess.run(command, cwd=folder, capture_output=True, text=True, check=False)
    if done.returncode != 0:
        raise SystemExit(f"kgate lint failed in {folder} ({done.returncode}):\n{done.stderr.strip()}")
    return [Finding(f["path"], int(f["line"]), f["code"], f.get("identity") or "", f.get("message") or "",
                    f.get("severity") or "error")
            for f in json.loads(done.stdout)["findings"] if f["code"] in rules]


def _percent(value: float | None) -> str:
    return "n/a" if value is None else f"{100 * value:.1f}%"


def _rate(successes: int, positives: int) -> tuple[str, str]:
    """A rate as 'point (k/n)' and its 95% interval."""
    if not positives:
        return "n/a (0/0)", "n/a"
    low, high = clopper_pearson(successes, positives)
    return f"{_percent(successes / positives)} ({successes}/{positives})", f"{_percent(low)}-{_percent(high)}"


def _notes(t: Tally) -> str:
    return f"{t.notes} of {t.findings}" + (f" ({t.notes / t.findings:.0%})" if t.findings else "")


def table(tallies: dict[str, Tally]) -> str:
    header = ("rule", "cases", "TP", "FP", "FN", "TN", "unlabelled", "precision", "95% CI", "recall", "95% CI",
              "notes", "bar")
    rows = [header]
    for rule, t in tallies.items():
        precision, precision_ci = _rate(t.tp, t.tp + t.fp)
        recall, recall_ci = _rate(t.tp, t.tp + t.fn)
        bar = "met" if t.meets_bar() else "not met: " + "; ".join(t.shortfalls())
        rows.append((rule, str(t.cases), str(t.tp), str(t.fp), str(t.fn), str(t.tn), str(t.unlabelled),
                     precision, precision_ci, recall, recall_ci, _notes(t), bar))
    widths = [max(len(row[i]) for row in rows) for i in range(len(header))]
    lines = ["| " + " | ".join(cell.ljust(w) for cell, w in zip(row, widths)) + " |" for row in rows]
    lines.insert(1, "|" + "|".join("-" * (w + 2) for w in widths) + "|")
    return "\n".join(lines)


def _measure_repository(repo: Repository, rules: tuple[str, ...], roots: list[Path], tallies: dict[str, Tally],
                        show: set[str]) -> list[str] | None:
    """Lint one repository, add its outcome to `tallies` (one per rule) and return the detail lines asked for;
    None when its folder is missing (its cases are counted as skipped)."""
    for case in repo.cases:
        if case.rule in rules:
            tallies[case.rule].cases += 1
    folder = next((root / repo.folder for root in roots if (root / repo.folder).is_dir()), roots[0] / repo.folder)
    if not folder.is_dir():
        print(f"skipped {repo.name}: no folder {folder}", file=sys.stderr)
        for case in repo.cases:
            if case.rule in rules:
                tallies[case.rule].skipped += 1
        return None
    commit = checkout_commit(folder)
    if commit is None:
        print(f"warning: {repo.name}: cannot tell the commit of {folder} (labelled at {repo.commit})",
              file=sys.stderr)
    elif commit != repo.commit:
        print(f"warning: {repo.name}: {folder} is at {commit}, labelled at {repo.commit}", file=sys.stderr)
    findings = lint(folder, rules)
    outcome = match([c for c in repo.cases if c.rule in rules], findings)
    for kind in ("tp", "fp", "fn", "tn"):
        for case in getattr(outcome, kind):
            setattr(tallies[case.rule], kind, getattr(tallies[case.rule], kind) + 1)
    for finding in outcome.unlabelled:
        tallies[finding.rule].unlabelled += 1
    for finding in findings:
        tallies[finding.rule].findings += 1
        tallies[finding.rule].notes += finding.severity == "note"
    details = []
    shown = {rule for rule in rules if HELD_OUT_TOO in show or repo.part_of(rule) == "tuned"}
    for kind, items in (("fp", outcome.fp), ("fn", outcome.fn)):
        if kind in show:
            details += [f"{kind.upper()} {repo.name} {c.rule} {c.path}:{c.line} {c.subject}: {c.reason}"
                        for c in items if c.rule in shown]
    if "unlabelled" in show:
        details += [f"UNLABELLED {repo.name} {f.rule} {f.path}:{f.line} {f.identity}: {f.message}"
                    for f in outcome.unlabelled if f.rule in shown]
    hidden = sum(1 for kind, items in (("fp", outcome.fp), ("fn", outcome.fn), ("unlabelled", outcome.unlabelled))
                 if kind in show for item in items if item.rule not in shown)
    if hidden:
        details.append(f"HIDDEN {repo.name}: {hidden} line(s) of its held-out rules (`--show {HELD_OUT_TOO}` lists "
                       f"them; a rule changed after reading them makes the repository tuned for it)")
    return details


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("roots", type=Path, nargs="+", metavar="root",
                        help="folder holding checkouts of labelled repositories (the first that has one is used)")
    parser.add_argument("--labels", type=Path, default=LABELS, help="folder of label files")
    parser.add_argument("--rules", default=",".join(RULES), help="comma-separated rules to measure")
    parser.add_argument("--show", default="", help="comma-separated lists to print: fp, fn, unlabelled; of the "
                        f"tuned part only, unless {HELD_OUT_TOO} is among them (for labelling a new repository)")
    args = parser.parse_args(argv)
    wanted = tuple(r.strip() for r in args.rules.split(",") if r.strip())
    show = {s.strip() for s in args.show.split(",") if s.strip()}
    by_part = {part: {rule: Tally() for rule in wanted} for part in PARTS}
    labelled = {part: 0 for part in PARTS}
    measured = {part: 0 for part in PARTS}
    details: list[str] = []
    for repo in load_labels(args.labels):
        rules = tuple(r for r in repo.rules if r in wanted)
        if rules:
            parts = {repo.part_of(rule) for rule in rules}
            tallies = {rule: by_part[repo.part_of(rule)][rule] for rule in rules}
            lines = _measure_repository(repo, rules, args.roots, tallies, show)
            for part in parts:
                labelled[part] += 1
                measured[part] += lines is not None
            details += lines or []
    whole = {rule: Tally() for rule in wanted}
    for part in PARTS:
        for rule, tally in by_part[part].items():
            whole[rule].add(tally)
        body = table(by_part[part]) if labelled[part] else "no repository is labelled in this part yet"
        print(f"## {part}: {labelled[part]} repositories labelled, {measured[part]} measured\n\n{body}\n")
    print(f"## all: {sum(labelled.values())} repositories labelled, {sum(measured.values())} measured\n\n"
          f"{table(whole)}\n")
    skipped = sum(t.skipped for t in whole.values())
    if skipped:
        print(f"{skipped} case(s) not measured: their repository is missing under "
              f"{', '.join(str(root) for root in args.roots)}")
    print(f"bar: the lower bound of the exact (Clopper-Pearson) 95% interval of precision and of recall at "
          f"least {BAR:.0%}, which takes {positives_needed()} positives at the least, and every finding labelled; "
          f"notes: the rule's findings at severity note, of all it reported")
    for line in details:
        print(line)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
