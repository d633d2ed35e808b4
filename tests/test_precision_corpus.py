"""bench/precision/measure.py: matching findings to hand labels, on a tiny project linted for real."""

from __future__ import annotations

import importlib.util
import sys
import textwrap
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
_spec = importlib.util.spec_from_file_location("precision_measure", ROOT / "bench" / "precision" / "measure.py")
measure = importlib.util.module_from_spec(_spec)
sys.modules[_spec.name] = measure  # dataclasses look their module up there
_spec.loader.exec_module(measure)

KERNEL = textwrap.dedent("""\
    import triton
    import triton.language as tl


    @triton.autotune(configs=[triton.Config({}, num_warps=4)], key=["n_tokens", "D"])
    @triton.jit
    def scale(x, n_tokens, D, BLOCK: tl.constexpr):
        pass


    @triton.autotune(configs=[triton.Config({}, num_warps=4)], key=["B", "H"])
    @triton.jit
    def cumsum(x, B: tl.constexpr, H: tl.constexpr):
        pass


    def launch(x, weight, q):
        # The launch sites say what each key is: a token count and a batch size change from call to
        # call; a weight's width and the head count are fixed per model.
        scale[(1,)](x, x.shape[0], weight.shape[1])
        cumsum[(1,)](q, B=q.shape[0], H=q.shape[2])
    """)

LABELS = textwrap.dedent("""\
    [repository]
    name = "someone/tiny"
    commit = "0123456789abcdef0123456789abcdef01234567"
    folder = "tiny"
    rules = ["KG201"]

    [[case]]
    rule = "KG201"
    path = "kernels/scale.py"
    line = 5
    subject = "n_tokens"
    verdict = true
    reason = "token count"

    [[case]]
    rule = "KG201"
    path = "kernels/scale.py"
    line = 5
    subject = "D"
    verdict = true
    reason = "labelled true so that the table counts a miss"

    [[case]]
    rule = "KG201"
    path = "kernels/scale.py"
    line = 11
    subject = "B"
    verdict = false
    reason = "labelled false so that the table counts a false positive"

    [[case]]
    rule = "KG201"
    path = "kernels/scale.py"
    line = 11
    subject = "H"
    verdict = false
    reason = "heads"
    """)


def _finding(line: int, subject: str, path: str = "a.py", rule: str = "KG201") -> object:
    return measure.Finding(path, line, rule, f"kernel|{subject}", f"autotune key '{subject}' of `kernel` is ...")


def _case(line: int, subject: str, verdict: bool, path: str = "a.py", rule: str = "KG201") -> object:
    return measure.Case("o/r", path, line, rule, verdict, "why", subject)


def test_match_sorts_cases_and_keeps_findings_no_case_covers() -> None:
    cases = [_case(3, "M", True), _case(3, "D", False), _case(9, "B", True), _case(12, "H", False),
             _case(20, "", True, rule="KG302")]
    findings = [_finding(3, "M"), _finding(3, "D"), _finding(3, "K"), _finding(20, "", rule="KG302"),
                _finding(20, "", rule="KG201")]
    out = measure.match(cases, findings)
    assert [(c.line, c.subject) for c in out.tp] == [(3, "M"), (20, "")]
    assert [(c.line, c.subject) for c in out.fp] == [(3, "D")]
    assert [(c.line, c.subject) for c in out.fn] == [(9, "B")]
    assert [(c.line, c.subject) for c in out.tn] == [(12, "H")]
    # another key on a labelled line, and another rule on a labelled line, still need labels
    assert [(f.line, f.rule, f.identity) for f in out.unlabelled] == [(3, "KG201", "kernel|K"), (20, "KG201", "kernel|")]


def test_subject_matches_a_quoted_word_of_the_message_when_the_identity_differs() -> None:
    finding = measure.Finding("a.py", 4, "KG201", "kernel", "autotune keys 'M', 'N' of `kernel` are run-time shapes")
    assert finding.names("M") and finding.names("N") and not finding.names("K")


def _measure(tmp_path: Path, commit: str | None) -> int:
    """measure.py on one labelled repository; its checkout at `commit` (None: no checkout at all)."""
    labels = tmp_path / "labels"
    labels.mkdir()
    (labels / "tiny.toml").write_text(LABELS)
    (tmp_path / "corpus").mkdir()
    if commit is not None:
        project = tmp_path / "corpus" / "tiny"
        (project / "kernels").mkdir(parents=True)
        (project / "kernels" / "scale.py").write_text(KERNEL)
        (project / measure.COMMIT_FILE).write_text(commit + "\n")
    return measure.main([str(tmp_path / "corpus"), "--labels", str(labels), "--rules", "KG201"])


def test_measure_lints_the_checkout_and_prints_the_table(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert _measure(tmp_path, "0123456789abcdef0123456789abcdef01234567") == 0
    out = capsys.readouterr()
    row = next(line for line in out.out.splitlines() if line.startswith("| KG201"))
    cells = [cell.strip() for cell in row.strip("|").split("|")]
    # The rule reports n_tokens and B (run-time sizes at the launch site), not D and H (model sizes); the
    # labels call n_tokens and D true, B and H false.
    # cases, TP, FP, FN, TN, unlabelled, precision, recall, bar
    assert cells[1:] == ["4", "1", "1", "1", "1", "0", "50.0%", "50.0%", "not met"]
    assert "warning" not in out.err


def test_a_missing_checkout_is_skipped_and_counted(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    _measure(tmp_path, None)
    out = capsys.readouterr()
    assert "skipped someone/tiny" in out.err
    assert "4 case(s) not measured" in out.out


def test_a_checkout_at_another_commit_is_measured_with_a_warning(tmp_path: Path,
                                                                capsys: pytest.CaptureFixture[str]) -> None:
    _measure(tmp_path, "f" * 40)
    out = capsys.readouterr()
    assert "is at ffff" in out.err and "| KG201" in out.out


def test_the_committed_labels_load_and_name_each_case_once() -> None:
    repositories = measure.load_labels(measure.LABELS)
    assert {r.folder for r in repositories} >= {"flash-linear-attention", "unsloth"}
    for repo in repositories:
        assert len(repo.commit) == 40 and set(repo.rules) <= set(measure.RULES)
        keys = [(c.path, c.line, c.rule, c.subject) for c in repo.cases]
        assert len(keys) == len(set(keys)), repo.name
