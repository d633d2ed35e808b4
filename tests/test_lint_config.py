"""Configuration of `kgate lint`: selection, per-file-ignores, severities, rule options, exclusions, flags."""

from __future__ import annotations

import json
import re
import textwrap
from pathlib import Path

import pytest
from conftest import Run, kgate

KERNEL = textwrap.dedent("""\
    import triton
    import triton.language as tl


    @triton.autotune(configs=[], key=["n_tokens", "hidden"])
    @triton.jit
    def k(x, out, n_tokens, hidden, BLOCK: tl.constexpr):
        tl.atomic_add(out, 1)


    @triton.autotune(configs=[], key=["seq_len"])
    @triton.jit
    def k2(x, seq_len, BLOCK: tl.constexpr):
        pass
""")


def project(tmp_path: Path, config: str = "", files: dict[str, str] | None = None) -> Path:
    (tmp_path / "pyproject.toml").write_text("[tool.kgate]\n" + textwrap.dedent(config))
    for rel, text in (files or {"pkg/ops.py": KERNEL, "tests/test_ops.py": KERNEL}).items():
        (tmp_path / rel).parent.mkdir(parents=True, exist_ok=True)
        (tmp_path / rel).write_text(text)
    return tmp_path


def codes(run: Run) -> list[tuple[str, str, str]]:
    assert run.code in (0, 1), run.stderr
    return sorted((f["path"], f["code"], f["severity"]) for f in run.json()["findings"])


def lint(root: Path, *args: str) -> Run:
    return kgate("lint", "--format", "json", *args, cwd=root)


def test_defaults_report_every_source_rule(tmp_path: Path) -> None:
    found = codes(lint(project(tmp_path)))
    assert [c for p, c, _s in found if p == "pkg/ops.py"] == ["KG201", "KG201", "KG202"]


def test_select_and_ignore_in_configuration(tmp_path: Path) -> None:
    root = project(tmp_path, 'select = ["KG2"]\nignore = ["autotune-side-effect"]\n')
    assert {c for _p, c, _s in codes(lint(root))} == {"KG201"}


def test_extend_select_in_configuration(tmp_path: Path) -> None:
    root = project(tmp_path, 'select = ["KG201"]\nextend-select = ["KG202"]\n')
    assert {c for _p, c, _s in codes(lint(root))} == {"KG201", "KG202"}


def test_exclude_replaces_the_default_exclusions(tmp_path: Path) -> None:
    files = {"pkg/ops.py": KERNEL, "generated/gen.py": KERNEL, "build/gen.py": KERNEL}
    root = project(tmp_path, 'exclude = ["generated"]\n', files)
    assert {p for p, _c, _s in codes(lint(root))} == {"pkg/ops.py", "build/gen.py"}


def test_command_line_flags_override_configuration(tmp_path: Path) -> None:
    root = project(tmp_path, 'select = ["KG201"]\n')
    assert {c for _p, c, _s in codes(lint(root, "--select", "KG202"))} == {"KG202"}
    assert {c for _p, c, _s in codes(lint(root, "--extend-select", "KG202"))} == {"KG201", "KG202"}
    emptied = lint(root, "--ignore", "KG201")  # no rule left: a lint that reads nothing would pass anything
    assert emptied.code == 2 and "leaves no source rule" in emptied.stderr
    assert codes(lint(root, "--ignore", "KG202")) != []


def test_per_file_ignores(tmp_path: Path) -> None:
    root = project(tmp_path, '[tool.kgate.per-file-ignores]\n"tests/*" = ["KG2"]\n"pkg/ops.py" = ["KG202"]\n')
    assert codes(lint(root)) == [("pkg/ops.py", "KG201", "error"), ("pkg/ops.py", "KG201", "error")]


def test_severity_override_and_off(tmp_path: Path) -> None:
    root = project(tmp_path, '[tool.kgate.severity]\nKG201 = "warning"\nautotune-side-effect = "off"\n')
    run = lint(root)
    assert run.code == 0  # warnings do not fail under the default fail-on = "error"
    assert {(c, s) for _p, c, s in codes(run)} == {("KG201", "warning")}
    assert lint(root, "--fail-on", "warning").code == 1


def test_rule_options(tmp_path: Path) -> None:
    kernel = KERNEL.replace('key=["n_tokens", "hidden"]', 'key=["n", "hidden"]').replace(", n_tokens,", ", n,")
    options = """\
        [tool.kgate.options.runtime-autotune]
        allowed-keys = ["hidden"]
        model-dims = "error"
        runtime-shape-names = []
        extend-runtime-shape-names = ["n"]
    """
    root = project(tmp_path, options, files={"pkg/ops.py": kernel})
    run = lint(root, "pkg/ops.py", "--select", "KG201")
    messages = [f["message"] for f in sorted(run.json()["findings"], key=lambda f: f["line"])]
    # `n` is a token count by the configured name, `hidden` is allowed although model dimensions are errors here,
    # and `seq_len` is still one by the words of its name although the list of names is emptied.
    assert len(messages) == 2 and messages[0].startswith("autotune key of `k`: 'n' (by its name) changes with the ")
    assert "'hidden'" not in messages[0] and "`k2`: 'seq_len' (by its name)" in messages[1]


@pytest.mark.parametrize(("config", "words"), [
    ('colour = "red"\n', ["pyproject.toml", "tool.kgate.colour", "unknown key"]),
    ('select = ["KG299"]\n', ["select", "KG299"]),
    ('[tool.kgate.per-file-ignores]\n"x.py" = ["nope"]\n', ["per-file-ignores.x.py", "nope"]),
    ('[tool.kgate.severity]\nKG201 = "loud"\n', ["severity.KG201", "loud"]),
    ('[tool.kgate.options.runtime-autotune]\nallowed = ["M"]\n', ["pyproject.toml", "options.runtime-autotune",
                                                                 "allowed"]),
    ('[tool.kgate.options.runtime-autotune]\nallowed-keys = [1]\n', ["pyproject.toml", "allowed-keys", "1"]),
    ('[tool.kgate.options.no-such-rule]\nx = 1\n', ["options.no-such-rule", "unknown rule"]),
])
def test_configuration_errors_name_the_key_and_exit_2(tmp_path: Path, config: str, words: list[str]) -> None:
    run = lint(project(tmp_path, config))
    assert run.code == 2 and run.stdout == ""
    assert run.stderr.count("\n") == 1 and "Traceback" not in run.stderr
    for word in words:
        assert word in run.stderr


def test_unknown_code_on_the_command_line(tmp_path: Path) -> None:
    run = lint(project(tmp_path), "--select", "KG2,bogus")
    assert run.code == 2 and "--select" in run.stderr and "bogus" in run.stderr


def test_missing_path_is_a_usage_error(tmp_path: Path) -> None:
    run = lint(project(tmp_path), "no/such.py")
    assert run.code == 2 and "no/such.py" in run.stderr


def test_exclusions_apply_to_walks_not_to_named_files(tmp_path: Path) -> None:
    root = project(tmp_path, 'extend-exclude = ["tests"]\n')
    assert {p for p, _c, _s in codes(lint(root))} == {"pkg/ops.py"}
    assert {p for p, _c, _s in codes(lint(root, "tests/test_ops.py"))} == {"tests/test_ops.py"}
    assert codes(lint(root, "--force-exclude", "tests/test_ops.py")) == []
    # A named folder is walked with the exclusions applied inside it.
    assert {p for p, _c, _s in codes(lint(root, "."))} == {"pkg/ops.py"}


def test_default_exclusions_skip_virtual_environments(tmp_path: Path) -> None:
    root = project(tmp_path, files={"pkg/ops.py": KERNEL, ".venv/lib/site.py": KERNEL, "build/gen.py": KERNEL})
    assert {p for p, _c, _s in codes(lint(root))} == {"pkg/ops.py"}


def test_paths_are_project_relative_from_a_subfolder(tmp_path: Path) -> None:
    root = project(tmp_path)
    run = kgate("lint", "--format", "json", "ops.py", cwd=root / "pkg")
    assert {p for p, _c, _s in codes(run)} == {"pkg/ops.py"}


def test_files_no_rule_reads_are_skipped(tmp_path: Path) -> None:
    root = project(tmp_path, files={"README.md": "TRITON_INTERPRET=1\n", "pkg/ops.py": "x = 1\n"})
    run = lint(root, "README.md", "pkg/ops.py")
    assert run.code == 0 and run.json()["summary"]["findings"] == 0


def test_output_to_a_file_and_exit_zero(tmp_path: Path) -> None:
    root = project(tmp_path)
    run = kgate("lint", "--format", "json", "-o", "out.json", "--exit-zero", cwd=root)
    assert run.code == 0 and run.stdout == ""
    assert '"KG201"' in (root / "out.json").read_text()


def summary_of(run: Run) -> str:
    (line,) = [line for line in (run.stdout + run.stderr).splitlines() if line.startswith("kgate lint: ")]
    return line


def test_exit_zero_on_a_failing_run_says_the_exit_was_forced(tmp_path: Path) -> None:
    root = project(tmp_path)
    plain = kgate("lint", cwd=root)
    assert plain.code == 1 and summary_of(plain).startswith("kgate lint: FAILED: ")
    for args in ((), ("--format", "json", "-o", "out.json"), ("--format", "github")):
        forced = kgate("lint", "--exit-zero", *args, cwd=root)
        assert forced.code == 0, args
        assert summary_of(forced).startswith("kgate lint: failed (exit forced to 0 by --exit-zero): "), args
        assert "FAILED" not in forced.stdout + forced.stderr and "passed" not in summary_of(forced), args
    summary = json.loads((root / "out.json").read_text())["summary"]
    assert (summary["exit_code"], summary["exit_forced"]) == (1, True)
    assert lint(root).json()["summary"]["exit_forced"] is False  # not forced without the flag
    (tmp_path / "clean").mkdir()
    clean = project(tmp_path / "clean", files={"pkg/ops.py": "x = 1\n"})
    passing = kgate("lint", "--exit-zero", cwd=clean)
    assert passing.code == 0 and summary_of(passing).startswith("kgate lint: passed: ")


def test_statistics_go_to_stderr_in_every_format(tmp_path: Path) -> None:
    root = project(tmp_path)
    for fmt in ("terminal", "json"):
        run = kgate("lint", "--statistics", "--format", fmt, cwd=root)
        # KG201 judges the kernel module's autotunes, not the test module's own (tests/test_ops.py)
        assert "    2  KG201  runtime-autotune" in run.stderr.splitlines(), fmt
        assert "    2  KG202  autotune-side-effect" in run.stderr.splitlines(), fmt
        assert not [line for line in run.stdout.splitlines() if re.fullmatch(r" +[0-9]+  KG[0-9]+  [a-z-]+", line)]


def test_terminal_report_to_a_file_puts_the_summary_on_stderr(tmp_path: Path) -> None:
    root = project(tmp_path)
    run = kgate("lint", "--format", "terminal", "-o", "out.txt", cwd=root)
    assert run.code == 1 and run.stdout == ""
    assert run.stderr.splitlines()[-1].startswith("kgate lint: FAILED: ")
    assert "KG201 error runtime-autotune" in (root / "out.txt").read_text()
