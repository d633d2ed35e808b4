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


    @triton.autotune(configs=[triton.Config({}, num_warps=4), triton.Config({}, num_warps=8)], key=["n_tokens", "D"])
    @triton.jit
    def scale(x, n_tokens, D, BLOCK: tl.constexpr):
        pass


    @triton.autotune(configs=[triton.Config({}, num_warps=4), triton.Config({}, num_warps=8)], key=["B", "H"])
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
    part = "tuned"

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


def _row(out: str, rule: str, part: str = "tuned") -> list[str]:
    """The cells of `rule`'s row in the table of `part` (tuned, held-out or all)."""
    section = out.split(f"## {part}:", 1)[1].split("\n## ", 1)[0]
    row = next(line for line in section.splitlines() if line.startswith(f"| {rule}"))
    return [cell.strip() for cell in row.strip("|").split("|")]


def test_measure_lints_the_checkout_and_prints_the_table(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert _measure(tmp_path, "0123456789abcdef0123456789abcdef01234567") == 0
    out = capsys.readouterr()
    # The rule reports n_tokens and B (run-time sizes at the launch site), not D and H (model sizes); the
    # labels call n_tokens and D true, B and H false.
    # cases, TP, FP, FN, TN, unlabelled, precision, CI, recall, CI, notes, bar
    cells = _row(out.out, "KG201")
    assert cells[1:7] == ["4", "1", "1", "1", "1", "0"]
    assert cells[7] == cells[9] == "50.0% (1/2)"
    assert cells[11] == "0 of 2 (0%)"
    needed = measure.positives_needed()
    assert cells[12] == (f"not met: precision: not enough positives (2 of the {needed} needed); "
                         f"recall: not enough positives (2 of the {needed} needed)")
    assert _row(out.out, "KG201", "all") == cells
    assert "no repository is labelled in this part yet" in out.out.split("## held-out:", 1)[1]
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
    assert "is at ffff" in out.err and _row(out.out, "KG201")[2] == "1"


def test_the_committed_labels_load_and_name_each_case_once() -> None:
    repositories = measure.load_labels(measure.LABELS)
    assert {r.folder for r in repositories} >= {"flash-linear-attention", "unsloth"}
    for repo in repositories:
        assert len(repo.commit) == 40 and set(repo.rules) <= set(measure.RULES) and repo.part in measure.PARTS
        keys = [(c.path, c.line, c.rule, c.subject) for c in repo.cases]
        assert len(keys) == len(set(keys)), repo.name


def test_the_interval_is_the_exact_clopper_pearson_one() -> None:
    # 5 of 10: the textbook interval; with no failure (or no success) one bound is the closed form of the
    # binomial tail, (a/2) ** (1/n).
    low, high = measure.clopper_pearson(5, 10)
    assert low == pytest.approx(0.187086, abs=1e-5) and high == pytest.approx(0.812914, abs=1e-5)
    assert measure.clopper_pearson(26, 26) == (pytest.approx(0.025 ** (1 / 26)), 1.0)
    assert measure.clopper_pearson(0, 10) == (0.0, pytest.approx(1 - 0.025 ** (1 / 10)))
    # hundreds of trials stay finite, and k/n always lies inside its interval
    for successes, trials in ((397, 413), (1, 2), (999, 1000)):
        low, high = measure.clopper_pearson(successes, trials)
        assert 0 < low < successes / trials < high <= 1


def test_the_bar_takes_the_positives_whose_lower_bound_can_reach_it() -> None:
    needed = measure.positives_needed()
    assert measure.clopper_pearson(needed, needed)[0] >= measure.BAR > measure.clopper_pearson(needed - 1,
                                                                                                needed - 1)[0]
    perfect = measure.Tally(cases=needed, tp=needed)
    assert perfect.meets_bar()
    short = measure.Tally(cases=needed - 1, tp=needed - 1)
    assert short.shortfalls() == [f"precision: not enough positives ({needed - 1} of the {needed} needed)",
                                  f"recall: not enough positives ({needed - 1} of the {needed} needed)"]
    # enough positives, but five false ones in a hundred and five keep the lower bound under the bar
    noisy = measure.Tally(cases=105, tp=100, fp=5)
    assert [r.split(":")[0] for r in noisy.shortfalls()] == ["precision"]
    assert "lower bound" in noisy.shortfalls()[0]
    assert measure.Tally(cases=needed, tp=needed, unlabelled=1).shortfalls() == ["1 finding(s) unlabelled"]


PARTED = textwrap.dedent("""\
    [repository]
    name = "someone/{name}"
    commit = "0123456789abcdef0123456789abcdef01234567"
    folder = "{name}"
    rules = ["KG201"]
    part = "{part}"

    [[case]]
    rule = "KG201"
    path = "kernels/scale.py"
    line = 5
    subject = "n_tokens"
    verdict = true
    reason = "token count"
    """)


def _project(root: Path, name: str, files: dict[str, str]) -> None:
    for rel, text in files.items():
        (root / name / rel).parent.mkdir(parents=True, exist_ok=True)
        (root / name / rel).write_text(text)
    (root / name / measure.COMMIT_FILE).write_text("0123456789abcdef0123456789abcdef01234567\n")


def test_each_part_has_its_table_and_all_adds_them_over_several_roots(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    labels = tmp_path / "labels"
    labels.mkdir()
    # the third project sits in a second root, as corpora kept in two places do
    for name, part, root in (("one", "tuned", "corpus"), ("two", "held-out", "corpus"), ("three", "held-out", "more")):
        (labels / f"{name}.toml").write_text(PARTED.format(name=name, part=part))
        _project(tmp_path / root, name, {"kernels/scale.py": KERNEL})
    measure.main([str(tmp_path / "corpus"), str(tmp_path / "more"), "--labels", str(labels), "--rules", "KG201"])
    out = capsys.readouterr().out
    assert "## tuned: 1 repositories labelled, 1 measured" in out
    assert "## held-out: 2 repositories labelled, 2 measured" in out
    # each project reports n_tokens (labelled true) and B (unlabelled)
    assert _row(out, "KG201", "tuned")[1:7] == ["1", "1", "0", "0", "0", "1"]
    assert _row(out, "KG201", "held-out")[1:7] == ["2", "2", "0", "0", "0", "2"]
    assert _row(out, "KG201", "all")[1:7] == ["3", "3", "0", "0", "0", "3"]


def test_a_held_out_repository_counts_as_tuned_for_the_rules_changed_while_looking_at_it(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    labels = tmp_path / "labels"
    labels.mkdir()
    text = PARTED.format(name="one", part="held-out").replace('rules = ["KG201"]', 'rules = ["KG201", "KG204"]')
    (labels / "one.toml").write_text(text.replace('part = "held-out"', 'part = "held-out"\ntuned-for = ["KG204"]'))
    _project(tmp_path / "corpus", "one", {"kernels/scale.py": KERNEL})
    measure.main([str(tmp_path / "corpus"), "--labels", str(labels), "--rules", "KG201,KG204"])
    out = capsys.readouterr().out
    assert "## tuned: 1 repositories labelled, 1 measured" in out
    assert "## held-out: 1 repositories labelled, 1 measured" in out
    assert _row(out, "KG201", "held-out")[1:3] == ["1", "1"] and _row(out, "KG201", "tuned")[1:3] == ["0", "0"]
    (labels / "one.toml").write_text(text.replace('part = "held-out"', 'part = "held-out"\ntuned-for = ["KG302"]'))
    with pytest.raises(SystemExit, match="tuned-for"):
        measure.load_labels(labels)


def test_the_lists_show_the_held_out_part_only_when_asked(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    labels = tmp_path / "labels"
    labels.mkdir()
    for name, part in (("one", "tuned"), ("two", "held-out")):
        (labels / f"{name}.toml").write_text(PARTED.format(name=name, part=part))
        _project(tmp_path / "corpus", name, {"kernels/scale.py": KERNEL})
    args = [str(tmp_path / "corpus"), "--labels", str(labels), "--rules", "KG201"]
    measure.main([*args, "--show", "unlabelled"])
    out = capsys.readouterr().out
    assert "UNLABELLED someone/one KG201" in out and "UNLABELLED someone/two" not in out
    assert "HIDDEN someone/two: 1 line(s)" in out
    measure.main([*args, "--show", "unlabelled,held-out"])
    out = capsys.readouterr().out
    assert "UNLABELLED someone/one KG201" in out and "UNLABELLED someone/two KG201" in out and "HIDDEN" not in out


def test_a_label_file_without_its_part_is_refused(tmp_path: Path) -> None:
    (tmp_path / "tiny.toml").write_text(LABELS.replace('part = "tuned"\n', ""))
    with pytest.raises(SystemExit, match="part"):
        measure.load_labels(tmp_path)
    (tmp_path / "tiny.toml").write_text(LABELS.replace('part = "tuned"', 'part = "heldout"'))
    with pytest.raises(SystemExit, match="part"):
        measure.load_labels(tmp_path)


EVERY_RULE = textwrap.dedent("""\
    import triton
    import triton.language as tl


    @triton.autotune(configs=[triton.Config({}, num_warps=4), triton.Config({}, num_warps=8)], key=["qq"])
    @triton.jit
    def tuned(x, qq, BLOCK: tl.constexpr):
        tl.device_print("x", qq)


    @triton.jit
    def rows(x, N_ROWS: tl.constexpr, D: tl.constexpr):
        pass


    def launch(x, qq):
        tuned[(1,)](x, qq)
        rows[(1,)](x, x.shape[0], x.shape[1])
    """)

EVERY_RULE_LABELS = textwrap.dedent("""\
    [repository]
    name = "someone/every"
    commit = "0123456789abcdef0123456789abcdef01234567"
    folder = "every"
    rules = ["KG108", "KG201", "KG204", "KG303"]
    part = "tuned"

    [[case]]
    rule = "KG108"
    path = "kernels/k.py"
    line = 18
    subject = "N_ROWS"
    verdict = true
    reason = "the token count as a constexpr"

    [[case]]
    rule = "KG201"
    path = "kernels/k.py"
    line = 5
    subject = "qq"
    verdict = false
    reason = "a setting of the caller"

    [[case]]
    rule = "KG204"
    path = "kernels/k.py"
    line = 8
    verdict = true
    reason = "a print left in the kernel"

    [[case]]
    rule = "KG303"
    path = "kernels/big.cu"
    line = 1
    verdict = true
    reason = "one file of many unrelated functions"
    """)


def test_kg108_kg204_and_kg303_are_measured_and_notes_are_counted(tmp_path: Path,
                                                                  capsys: pytest.CaptureFixture[str]) -> None:
    labels = tmp_path / "labels"
    labels.mkdir()
    (labels / "every.toml").write_text(EVERY_RULE_LABELS)
    big = "__global__ void k(float* x) { x[0] = 1; }\n" + "".join(f"int f{i}() {{ return {i}; }}\n"
                                                                     for i in range(650))
    # the project asks for KG201's unclassified keys as notes (off by default), as a project may: a rule's notes
    # are counted in its output
    settings = '[tool.kgate.options.runtime-autotune]\nunclassified = "note"\n'
    _project(tmp_path / "corpus", "every", {"kernels/k.py": EVERY_RULE, "kernels/big.cu": big,
                                             "pyproject.toml": settings})
    measure.main([str(tmp_path / "corpus"), "--labels", str(labels)])
    out = capsys.readouterr().out
    for rule in ("KG108", "KG204", "KG303"):
        assert _row(out, rule)[1:7] == ["1", "1", "0", "0", "0", "0"], rule
        assert _row(out, rule)[11] == "0 of 1 (0%)", rule
    # a key that no launch site places is a note where asked: KG201's only output here is that note
    assert _row(out, "KG201")[1:7] == ["1", "0", "1", "0", "0", "0"]
    assert _row(out, "KG201")[11] == "1 of 1 (100%)"
