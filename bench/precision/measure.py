"""Precision and recall of kgate's source rules on a hand-labelled corpus of public repositories.

    python bench/precision/measure.py ROOT [--labels DIR] [--rules KG201,KG202] [--show fp,fn,unlabelled]

ROOT holds one folder per labelled repository, named as the label file's
`folder` (ROOT/flash-linear-attention, ROOT/mamba, ...): a git checkout at the
labelled commit, or an exported tree at that commit with a `.corpus-commit`
file holding the commit. Nothing is fetched: a folder that is missing is
skipped, one at another commit is measured with a warning. docs/precision-corpus.md
lists the repositories, their commits and how to bring them.

Each label file (bench/precision/labels/*.toml) describes one repository: its
name, commit, folder, the rules labelled there, and one `[[case]]` per line a
rule reports or should report: path, line, rule, optional subject (the
autotune key, the pointer, ...), verdict (true: a real problem a kernel
engineer wants reported at this line; false: not one) and the reason. Cases
the rules do not report are labelled too: true ones are the misses (recall),
false ones are near misses kept to catch a precision regression.

kgate lint runs once per repository (subprocess, no cache, no baseline) with
the rules labelled there; findings are matched to cases by (path, line, rule)
and, when the case names a subject, that subject. Per rule it prints the
cases, TP, FP, FN, TN, the findings no case covers (they need labelling
before the figures mean anything), precision, recall and whether the bar is met.
This is a measurement on checkouts of other projects, not a test: it does
not run in CI.
"""

from __future__ import annotations

import argparse
import json
import re
import subprocess
import sys
from dataclasses import dataclass, field
from pathlib import Path

if sys.version_info >= (3, 11):
    import tomllib
else:  # Python 3.10
    import tomli as tomllib

RULES = ("KG201", "KG202", "KG203", "KG301", "KG302")
BAR_PRECISION = 0.95
BAR_RECALL = 0.95
BAR_CASES = 20
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
    cases: list[Case] = field(default_factory=list)


@dataclass
class Tally:
    cases: int = 0
    tp: int = 0
    fp: int = 0
    fn: int = 0
    tn: int = 0
    unlabelled: int = 0
    skipped: int = 0  # cases of repositories that were not measured

    @property
    def precision(self) -> float | None:
        return self.tp / (self.tp + self.fp) if self.tp + self.fp else None

    @property
    def recall(self) -> float | None:
        return self.tp / (self.tp + self.fn) if self.tp + self.fn else None

    def meets_bar(self) -> bool:
        p, r = self.precision, self.recall
        return (self.cases >= BAR_CASES and self.unlabelled == 0 and self.skipped == 0
                and p is not None and p >= BAR_PRECISION and r is not None and r >= BAR_RECALL)


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
        repo = Repository(head["name"], head["commit"], head["folder"], rules)
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
        done = subprocess.run(["git", "-C", str(folder), "rev-parse", "HEAD"], capture_output=True, text=True)
        return done.stdout.strip() if done.returncode == 0 else None
    return None


def lint(folder: Path, rules: tuple[str, ...]) -> list[Finding]:
    command = [sys.executable, "-m", "kgate", "lint", "--select", ",".join(rules), "--format", "json",
               "--no-cache", "--no-baseline", "--exit-zero", "."]
    done = subprocess.run(command, cwd=folder, capture_output=True, text=True)
    if done.returncode != 0:
        raise SystemExit(f"kgate lint failed in {folder} ({done.returncode}):\n{done.stderr.strip()}")
    return [Finding(f["path"], int(f["line"]), f["code"], f.get("identity") or "", f.get("message") or "")
            for f in json.loads(done.stdout)["findings"] if f["code"] in rules]


def _percent(value: float | None) -> str:
    return "n/a" if value is None else f"{100 * value:.1f}%"


def table(tallies: dict[str, Tally]) -> str:
    header = ("rule", "cases", "TP", "FP", "FN", "TN", "unlabelled", "precision", "recall", "bar")
    rows = [header]
    for rule, t in tallies.items():
        rows.append((rule, str(t.cases), str(t.tp), str(t.fp), str(t.fn), str(t.tn), str(t.unlabelled),
                     _percent(t.precision), _percent(t.recall), "met" if t.meets_bar() else "not met"))
    widths = [max(len(row[i]) for row in rows) for i in range(len(header))]
    lines = ["| " + " | ".join(cell.ljust(w) for cell, w in zip(row, widths)) + " |" for row in rows]
    lines.insert(1, "|" + "|".join("-" * (w + 2) for w in widths) + "|")
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("root", type=Path, help="folder holding one checkout per labelled repository")
    parser.add_argument("--labels", type=Path, default=LABELS, help="folder of label files")
    parser.add_argument("--rules", default=",".join(RULES), help="comma-separated rules to measure")
    parser.add_argument("--show", default="", help="comma-separated lists to print: fp, fn, unlabelled")
    args = parser.parse_args(argv)
    wanted = tuple(r.strip() for r in args.rules.split(",") if r.strip())
    show = {s.strip() for s in args.show.split(",") if s.strip()}
    tallies = {rule: Tally() for rule in wanted}
    details: list[str] = []
    for repo in load_labels(args.labels):
        rules = tuple(r for r in repo.rules if r in wanted)
        if not rules:
            continue
        for case in repo.cases:
            if case.rule in rules:
                tallies[case.rule].cases += 1
        folder = args.root / repo.folder
        if not folder.is_dir():
            print(f"skipped {repo.name}: no folder {folder}", file=sys.stderr)
            for case in repo.cases:
                if case.rule in rules:
                    tallies[case.rule].skipped += 1
            continue
        commit = checkout_commit(folder)
        if commit is None:
            print(f"warning: {repo.name}: cannot tell the commit of {folder} (labelled at {repo.commit})",
                  file=sys.stderr)
        elif commit != repo.commit:
            print(f"warning: {repo.name}: {folder} is at {commit}, labelled at {repo.commit}", file=sys.stderr)
        findings = lint(folder, rules)
        cases = [c for c in repo.cases if c.rule in rules]
        outcome = match(cases, findings)
        for kind in ("tp", "fp", "fn", "tn"):
            for case in getattr(outcome, kind):
                setattr(tallies[case.rule], kind, getattr(tallies[case.rule], kind) + 1)
        for finding in outcome.unlabelled:
            tallies[finding.rule].unlabelled += 1
        for kind, items in (("fp", outcome.fp), ("fn", outcome.fn)):
            if kind in show:
                details += [f"{kind.upper()} {repo.name} {c.rule} {c.path}:{c.line} {c.subject}: {c.reason}"
                            for c in items]
        if "unlabelled" in show:
            details += [f"UNLABELLED {repo.name} {f.rule} {f.path}:{f.line} {f.identity}: {f.message}"
                        for f in outcome.unlabelled]
    print(table(tallies))
    skipped = sum(t.skipped for t in tallies.values())
    if skipped:
        print(f"{skipped} case(s) not measured: their repository is missing under {args.root}")
    print(f"bar: precision >= {BAR_PRECISION:.0%}, recall >= {BAR_RECALL:.0%}, at least {BAR_CASES} cases, "
          f"every finding labelled")
    for line in details:
        print(line)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
