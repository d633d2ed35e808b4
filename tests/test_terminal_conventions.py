"""The command line's conventions: colour (--color, NO_COLOR, FORCE_COLOR), suggestions for typos, the kernel
table's rows and width, progress lines off a terminal, --show-settings / --show-files, lint -q, examples in the
help, and the shell completion scripts."""

from __future__ import annotations

import io
import json
import re
import shutil
import subprocess
import sys
import time
from pathlib import Path

import pytest
from conftest import Run, copy_compiled, kgate

from kgate.cli import COMMANDS, build_parser
from kgate.commands.common import ProgressBar
from kgate.report.terminal import use_colour

ESC = "\033["
LAUNCH = "__global__ void k(float* x) { x[0] = 1; }\nvoid launch(float* x) {\n  k<<<1, 1>>>(x);\n}\n"


@pytest.fixture(autouse=True)
def _plain_environment(monkeypatch: pytest.MonkeyPatch) -> None:
    for name in ("NO_COLOR", "FORCE_COLOR", "COLUMNS", "KGATE_PROGRESS_INTERVAL"):
        monkeypatch.delenv(name, raising=False)


def _lint_project(folder: Path) -> Path:
    """One unchecked launch (KG302, an error): a finding to colour, nothing to compile."""
    (folder / "kgate.toml").write_text('python-path = ["."]\n')
    (folder / "a.cu").write_text(LAUNCH)
    return folder


# --------------------------------------------------------------------------- colour


@pytest.mark.parametrize(("env", "flags", "coloured"), [
    ({}, [], False),  # stdout is a file here: auto means no colour
    ({"FORCE_COLOR": "1"}, [], True),
    ({"FORCE_COLOR": "0"}, [], True),  # any non-empty value
    ({"FORCE_COLOR": ""}, [], False),
    ({"NO_COLOR": "1", "FORCE_COLOR": "1"}, [], False),  # NO_COLOR before FORCE_COLOR
    ({"NO_COLOR": "", "FORCE_COLOR": "1"}, [], True),  # an empty NO_COLOR says nothing
    ({"NO_COLOR": "1"}, ["--color", "always"], True),  # the flag before both
    ({"FORCE_COLOR": "1"}, ["--color", "never"], False),
    ({}, ["--colour=always"], True),
    ({"FORCE_COLOR": "1"}, ["--color", "auto"], True),
])
def test_colour_follows_the_flag_then_no_color_then_force_color(tmp_path: Path, env: dict[str, str],
                                                                flags: list[str], coloured: bool) -> None:
    run = kgate("lint", *flags, cwd=_lint_project(tmp_path), env=env)
    assert run.code == 1, run.stderr
    assert "KG302 error" in run.stdout
    assert (f"{ESC}31mKG302 error{ESC}0m" in run.stdout) is coloured, run.stdout


def test_on_a_terminal_no_color_wins_over_auto_and_the_flag_over_everything() -> None:
    assert use_colour("auto", True, {}) is True
    assert use_colour("auto", True, {"NO_COLOR": "1"}) is False
    assert use_colour("auto", True, {"NO_COLOR": "", "FORCE_COLOR": ""}) is True
    assert use_colour("always", False, {"NO_COLOR": "1"}) is True
    assert use_colour("never", True, {"FORCE_COLOR": "1"}) is False


def test_force_color_is_for_the_screen_and_always_reaches_a_file(tmp_path: Path) -> None:
    project = _lint_project(tmp_path)
    assert kgate("lint", "-o", "plain.txt", cwd=project, env={"FORCE_COLOR": "1"}).code == 1
    assert ESC not in (project / "plain.txt").read_text()
    assert kgate("lint", "-o", "painted.txt", "--color", "always", cwd=project).code == 1
    assert f"{ESC}31mKG302 error" in (project / "painted.txt").read_text()


def test_a_replayed_run_does_not_keep_another_colour_setting(tmp_path: Path) -> None:
    """The unchanged-run replay keys on FORCE_COLOR too: a coloured record is not replayed to a plain run."""
    project = _lint_project(tmp_path)
    for _ in range(2):
        assert ESC in kgate("lint", cwd=project, env={"FORCE_COLOR": "1"}).stdout
        assert ESC not in kgate("lint", cwd=project).stdout


def test_every_subcommand_takes_color_and_shows_examples() -> None:
    for name in COMMANDS:
        parser = build_parser(name)
        args = parser.parse_args([name, "--color", "never"] + (["bash"] if name == "completion" else [])
                                 + (["KG103"] if name == "explain" else []) + (["show"] if name == "baseline" else [])
                                 + (["x.json"] if name == "merge" else []))
        assert args.color == "never", name
        sub = args.subparsers[name]
        text = sub.format_help()
        assert "examples:\n  kgate " + name in text, name
        assert all(line.startswith(f"  kgate {name}") for line in text.split("examples:\n", 1)[1].splitlines()), name


def test_help_keeps_the_examples_lines(tmp_path: Path) -> None:
    run = kgate("lint", "--help", cwd=tmp_path)
    assert run.code == 0
    assert "examples:\n  kgate lint\n  kgate lint kernels/ tests/test_norm.py\n" in run.stdout


# --------------------------------------------------------------------------- suggestions


def _one_error(run: Run) -> str:
    assert run.code == 2 and run.stdout == "" and "Traceback" not in run.stderr, run.stderr
    errors = [line for line in run.stderr.splitlines() if line.startswith("kgate: error:")]
    assert len(errors) == 1, run.stderr
    return errors[0]


def test_a_mistyped_command_is_named(tmp_path: Path) -> None:
    run = kgate("chek", cwd=tmp_path)
    assert "did you mean 'check'?" in _one_error(run)
    assert run.stderr.startswith("usage: kgate [-h]")
    assert "did you mean" not in _one_error(kgate("zzzzzz", cwd=tmp_path))


def test_a_mistyped_flag_gets_the_subcommands_usage_and_the_nearest_flag(tmp_path: Path) -> None:
    run = kgate("lint", "--selct", "KG1", cwd=_lint_project(tmp_path))
    assert _one_error(run) == "kgate: error: unrecognized arguments: --selct; did you mean '--select'?"
    assert run.stderr.startswith("usage: kgate lint ")
    check = kgate("check", "--show-kernles", "--format=json", cwd=tmp_path)
    assert check.stderr.startswith("usage: kgate check ") and "did you mean '--show-kernels'?" in _one_error(check)
    stray = kgate("explain", "KG103", "extra", cwd=tmp_path)
    assert stray.stderr.startswith("usage: kgate explain ") and _one_error(stray).endswith("arguments: extra")


def test_a_mistyped_choice_is_named(tmp_path: Path) -> None:
    run = kgate("lint", "--format", "jsn", cwd=tmp_path)
    assert _one_error(run).endswith("did you mean 'json'?") and run.stderr.startswith("usage: kgate lint ")


@pytest.mark.parametrize(("args", "config", "near"), [
    (["--select", "runtime-autotun"], "", "'runtime-autotune'"),
    (["--ignore", "KG3022"], "", "'KG302'"),
    (["--extend-select", "lanch-guard"], "", "'launch-guard'"),
    ([], 'ignore = ["runtime-autotun"]\n', "'runtime-autotune'"),
    ([], '[per-file-ignores]\n"a.cu" = ["launch-gaurd"]\n', "'launch-guard'"),
    ([], '[options.runtime-autotun]\nallowed-keys = ["M"]\n', "'runtime-autotune'"),
])
def test_a_mistyped_rule_code_or_name_is_named(tmp_path: Path, args: list[str], config: str, near: str) -> None:
    project = _lint_project(tmp_path)
    (project / "kgate.toml").write_text('python-path = ["."]\n' + config)
    error = _one_error(kgate("lint", *args, cwd=project))
    assert "unknown rule" in error and f"did you mean {near}?" in error, error


def test_explain_names_the_nearest_rule_and_nothing_when_none_is_near(tmp_path: Path) -> None:
    assert "did you mean 'spill'?" in _one_error(kgate("explain", "spil", cwd=tmp_path))
    assert "did you mean" not in _one_error(kgate("lint", "--select", "qqqqqqqq", cwd=_lint_project(tmp_path)))
    # A code is a number: one that shares two digits with a real code is no typo of it (KG999 is not KG109).
    assert "did you mean" not in _one_error(kgate("lint", "--select", "KG999", cwd=_lint_project(tmp_path)))


# --------------------------------------------------------------------------- the kernel table


def _table(stdout: str) -> tuple[list[str], list[str]]:
    """(the table's rows, the lines after it up to the first blank line)."""
    lines = stdout.splitlines()
    start = lines.index(next(line for line in lines if line.startswith("kernel ")))
    rest = lines[start + 2:]
    rows = []
    while rest and rest[0] and not rest[0][0].isdigit() and not rest[0].startswith("w/sub: "):
        rows.append(rest.pop(0))
    return rows, rest[: rest.index("")] if "" in rest else rest


def test_the_table_shows_rows_with_findings_and_fits_the_width(compiled_cold: tuple[Path, Run],
                                                               tmp_path: Path) -> None:
    project = copy_compiled(compiled_cold, tmp_path)
    cold = compiled_cold[1].json()
    keys = {(k["kernel"], k["variant"], k["target"]) for k in cold["kernels"]}
    found = {(f["kernel"], f["variant"], f["target"]) for f in cold["findings"] if f["kernel"] and f["variant"]}
    assert found and found < keys  # some rows have findings, some do not

    every = kgate("check", "--show-kernels", cwd=project)
    rows, after = _table(every.stdout)
    assert every.code == 1 and len(rows) == len(keys) and not after

    default = kgate("check", cwd=project)
    rows, after = _table(default.stdout)
    assert default.code == 1 and len(rows) == len(found)
    assert all(not row.rstrip().endswith(" ok") for row in rows)
    assert after == [f"{len(keys) - len(found)} of {len(keys)} kernel variant(s) without findings not shown "
                     f"(--show-kernels shows them)"]

    # Narrower than the widest row: the variant column is cut with "...", every line fits.
    header = every.stdout.splitlines()[0]
    column = header.index("target") - header.index("variant") - 2
    widest = max(len(line) for line in _table(every.stdout)[0])
    narrower = min(10, column - 12)
    assert narrower > 0
    narrow = kgate("check", "--show-kernels", cwd=project, env={"COLUMNS": str(widest - narrower)})
    rows, _after = _table(narrow.stdout)
    assert len(rows) == len(keys) and max(len(row) for row in rows) <= widest - narrower
    assert sum("..." in row for row in rows) > sum("..." in row for row in _table(every.stdout)[0])
    # The findings keep the whole variant names.
    assert [line for line in narrow.stdout.splitlines() if ": KG" in line] == \
        [line for line in every.stdout.splitlines() if ": KG" in line]


# 2 warps per CTA and 30000 bytes of shared memory a CTA: on an SM with 100 KB, a fractional w/sub.
STAGED = """\
__global__ void __launch_bounds__(64) staged(const float* x, float* out, int n) {
    __shared__ float buf[7500];
    for (int i = threadIdx.x; i < 7500; i += blockDim.x) buf[i] = x[(blockIdx.x * 7500 + i) % n];
    __syncthreads();
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) out[i] = buf[(threadIdx.x * 37) % 7500];
}

__global__ void __launch_bounds__(128) whole(const float* x, float* out, int n) {
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) out[i] = 2 * x[i];
}
"""


@pytest.mark.skipif(shutil.which("nvcc") is None, reason="nvcc is not installed")
def test_a_fractional_warps_per_subcore_is_explained_with_the_rows_own_numbers(tmp_path: Path) -> None:
    from kgate.hardware.profiles import primary

    (tmp_path / "kgate.toml").write_text('targets = ["sm_120a"]\n\n[[cuda]]\nsources = ["staged.cu"]\n')
    (tmp_path / "staged.cu").write_text(STAGED)
    kernels = {k["kernel"]: k for k in kgate("check", "--format", "json", cwd=tmp_path).json()["kernels"]}
    staged, whole = kernels["staged"], kernels["whole"]
    assert staged["warps_per_subcore"] % 1 and not whole["warps_per_subcore"] % 1, kernels  # what the test is about
    subcores = primary("sm_120a").subcores_per_sm
    warps = round(staged["warps_per_subcore"] * subcores)
    ctas = warps // staged["num_warps"]
    run = kgate("check", "--show-kernels", cwd=tmp_path)
    rows, after = _table(run.stdout)
    assert run.code == 0 and len(rows) == 2
    assert f" {staged['warps_per_subcore']:g} " in next(row for row in rows if row.startswith("staged "))
    legends = [line for line in after if line.startswith("w/sub: ")]  # under the table
    assert len(legends) == 1 and run.stdout.count("w/sub: ") == 1, run.stdout
    assert "resident warps per SM sub-core, CTAs per SM x warps per CTA / sub-cores" in legends[0]
    assert (f"staged @ sm_120a keeps {ctas} CTA(s) of {staged['num_warps']} warp(s) on each SM of the "
            f"{primary('sm_120a').name}, {warps} warps over {subcores} sub-cores = {staged['warps_per_subcore']:g}"
            in legends[0]), legends[0]
    # A table whose rows have no fraction (here: no rows, nothing has a finding) says nothing of it.
    assert "w/sub: " not in kgate("check", cwd=tmp_path).stdout


def test_quiet_check_has_no_table(compiled_cold: tuple[Path, Run], tmp_path: Path) -> None:
    run = kgate("check", "-q", cwd=copy_compiled(compiled_cold, tmp_path))
    assert run.code == 1 and "kernel variant(s) without findings" not in run.stdout
    assert not run.stdout.startswith("kernel ")


# --------------------------------------------------------------------------- progress


def _ticks(text: str, total: int) -> list[str]:
    return re.findall(rf"^kgate: compiling: \d+/{total} done, \d+s$", text, flags=re.M)


def test_progress_lines_off_a_terminal_come_every_interval_and_stop_when_done(
        monkeypatch: pytest.MonkeyPatch) -> None:
    err = io.StringIO()  # not a terminal
    monkeypatch.setattr(sys, "stderr", err)
    monkeypatch.setenv("KGATE_PROGRESS_INTERVAL", "0.05")
    bar = ProgressBar(enabled=True)
    bar(0, 3, "")
    time.sleep(0.3)
    bar(1, 3, "k [v] sm_120a")
    time.sleep(0.3)
    bar(3, 3, "k [v] sm_120a")
    time.sleep(0.1)  # a tick between stages or after the last compile says nothing
    ticked = err.getvalue()
    time.sleep(0.3)
    bar.clear()
    assert err.getvalue() == ticked
    lines = ticked.splitlines()
    assert len(lines) >= 4 and lines == _ticks(ticked, 3), ticked
    assert "0/3 done" in lines[0] and "1/3 done" in lines[-1]
    assert "\r" not in ticked and ESC not in ticked


def test_a_short_run_prints_no_progress_and_quiet_none_at_all(monkeypatch: pytest.MonkeyPatch) -> None:
    err = io.StringIO()
    monkeypatch.setattr(sys, "stderr", err)
    bar = ProgressBar(enabled=True)  # the default interval: seconds
    bar(0, 2, "")
    bar(2, 2, "k [v] sm_120a")
    bar.clear()
    monkeypatch.setenv("KGATE_PROGRESS_INTERVAL", "0.01")
    quiet = ProgressBar(enabled=False, plain=False)
    quiet(0, 2, "")
    time.sleep(0.1)
    quiet.clear()
    assert err.getvalue() == ""


@pytest.mark.skipif(shutil.which("nvcc") is None, reason="nvcc is not installed")
def test_a_compiling_check_writes_progress_lines_to_stderr_in_every_format(tmp_path: Path) -> None:
    (tmp_path / "t.cu").write_text("__global__ void inc(float* x) { x[0] += 1.0f; }\n")
    (tmp_path / "kgate.toml").write_text('targets = ["sm_120a"]\n\n[[cuda]]\nsources = ["t.cu"]\n')
    ticking = kgate("check", "--no-cache", "--format", "json", cwd=tmp_path,
                    env={"KGATE_PROGRESS_INTERVAL": "0.02"})
    assert ticking.code == 0, ticking.stderr
    assert _ticks(ticking.stderr, 1) and json.loads(ticking.stdout)["kernels"]
    from kgate.commands.common import PROGRESS_INTERVAL

    started = time.monotonic()
    plain = kgate("check", "--no-cache", cwd=tmp_path)  # the default interval: a one-file compile is shorter
    took = time.monotonic() - started
    assert plain.code == 0, plain.stderr
    assert "kgate: compiling" not in plain.stderr or took >= PROGRESS_INTERVAL, plain.stderr  # unless load slowed it
    bad = kgate("check", cwd=tmp_path, env={"KGATE_PROGRESS_INTERVAL": "soon"})
    assert "KGATE_PROGRESS_INTERVAL" in _one_error(bad)


# --------------------------------------------------------------------------- --show-settings, --show-files


def _settings_project(folder: Path) -> Path:
    (folder / "kgate.toml").write_text('python-path = ["."]\nextend-exclude = ["gen"]\n\n'
                                       '[per-file-ignores]\n"tests/*" = ["launch-guard"]\n')
    for rel in ("a.cu", "tests/b.cu", "gen/c.cu"):
        (folder / rel).parent.mkdir(parents=True, exist_ok=True)
        (folder / rel).write_text(LAUNCH)
    (folder / "notes.txt").write_text("not read by any rule\n")
    return folder


def test_show_files_lists_what_lint_reads_and_lints_nothing(tmp_path: Path) -> None:
    project = _settings_project(tmp_path)
    run = kgate("lint", "--show-files", cwd=project)
    assert run.code == 0 and run.stdout.splitlines() == ["a.cu", "tests/b.cu"], run.stdout
    assert kgate("lint", "--show-files", "tests", cwd=project).stdout.splitlines() == ["tests/b.cu"]
    assert kgate("check", "--show-files", cwd=project).stdout == run.stdout
    assert not (project / ".kgate-cache").exists()  # nothing was linted
    linted = kgate("lint", cwd=project)
    assert {line.split(":")[0] for line in linted.stdout.splitlines() if ": KG" in line} == {"a.cu"}


def test_show_settings_prints_the_resolved_configuration_and_a_files_rules(tmp_path: Path) -> None:
    project = _settings_project(tmp_path)
    run = kgate("lint", "--show-settings", "--select", "KG3", "--ignore", "KG303", cwd=project)
    assert run.code == 0, run.stderr
    shown = json.loads(run.stdout)
    assert shown["configuration"] == str((project / "kgate.toml").resolve())
    assert shown["settings"]["extend_exclude"] == ["gen"]
    assert shown["settings"]["per_file_ignores"] == {"tests/*": ["launch-guard"]}
    assert "KG302" in shown["rules"] and "KG303" not in shown["rules"] and "KG201" not in shown["rules"]
    assert shown["rules"]["KG302"]["name"] == "launch-guard" and shown["rules"]["KG302"]["severity"] == "error"
    for_test = json.loads(kgate("lint", "--show-settings", "tests/b.cu", cwd=project).stdout)["file"]
    assert for_test["path"] == "tests/b.cu" and for_test["per-file-ignored"] == ["KG302"]
    assert "KG302" not in for_test["source-rules"] and not for_test["excluded"]
    for_a = json.loads(kgate("lint", "--show-settings", "a.cu", cwd=project).stdout)["file"]
    assert "KG302" in for_a["source-rules"] and for_a["per-file-ignored"] == []
    assert json.loads(kgate("lint", "--show-settings", "gen/c.cu", cwd=project).stdout)["file"]["excluded"]
    assert "no/such.cu" in _one_error(kgate("lint", "--show-settings", "no/such.cu", cwd=project))


# --------------------------------------------------------------------------- lint -q

KERNEL = ('import triton\n\n\n@triton.autotune(configs=[], key=["n_tokens"])\n@triton.jit\n'
          'def norm(x, n_tokens):\n    pass\n')


def test_quiet_lint_keeps_findings_failures_and_the_summary_only(tmp_path: Path) -> None:
    (tmp_path / "kgate.toml").write_text("")
    (tmp_path / "pkg").mkdir()
    (tmp_path / "pkg" / "a.py").write_text(KERNEL.replace('key=["n_tokens"]', "key=[]"))  # the pinned one is fixed
    (tmp_path / "pkg" / "b.py").write_text(KERNEL)
    (tmp_path / "kgate-baseline.toml").write_text('version = 1\n\n[findings]\n"KG201|pkg/a.py|norm|n_tokens" = 1\n')
    loud = kgate("lint", "pkg/a.py", "pkg/b.py", cwd=tmp_path)
    quiet = kgate("lint", "-q", "pkg/a.py", "pkg/b.py", cwd=tmp_path)
    assert loud.code == quiet.code == 1
    assert "GONE" in loud.stdout and "(accepted)" in loud.stdout  # shown, not failing: -q leaves it out
    assert "GONE" not in quiet.stdout
    kept = [line for line in loud.stdout.splitlines() if "GONE" not in line and line.strip()]
    assert [line for line in quiet.stdout.splitlines() if line.strip()] == kept
    assert quiet.stdout.splitlines()[-1].startswith("kgate lint: FAILED: 2 file(s)")
    whole = kgate("lint", "-q", cwd=tmp_path)  # a stale pin fails the whole-project run: -q keeps that line
    assert "GONE      KG201|pkg/a.py|norm|n_tokens" in whole.stdout


# --------------------------------------------------------------------------- completion


@pytest.mark.parametrize("shell", ["bash", "zsh", "fish"])
def test_completion_scripts_name_every_subcommand_and_flag(tmp_path: Path, shell: str) -> None:
    run = kgate("completion", shell, cwd=tmp_path)
    assert run.code == 0, run.stderr
    for name in COMMANDS:
        assert re.search(rf"\b{name}\b", run.stdout), name
    for flag in ("--select", "--show-kernels", "--show-settings", "--color", "--format", "--accept-new"):
        wanted = f"-l {flag[2:]}" if shell == "fish" else flag
        assert wanted in run.stdout, flag
    assert "text json sarif github junit" in run.stdout and "auto always never" in run.stdout
    checker = shutil.which(shell)
    if checker:  # the script parses in the shell it is for
        script = _write(tmp_path / f"kgate.{shell}", run.stdout)
        parsed = subprocess.run([checker, "--no-execute" if shell == "fish" else "-n", str(script)],
                                capture_output=True, text=True)
        assert parsed.returncode == 0, parsed.stderr


def _write(path: Path, text: str) -> Path:
    path.write_text(text)
    return path


def _bash_completions(script: Path, words: list[str]) -> set[str]:
    """What the script's completion function offers for `words` (the last being completed), as bash calls it."""
    probe = (f"source {script}\nCOMP_WORDS=({' '.join(repr(w) for w in words)})\nCOMP_CWORD={len(words) - 1}\n"
             f'_kgate\nprintf "%s\\n" "${{COMPREPLY[@]}}"\n')
    return set(subprocess.run(["bash", "-c", probe], capture_output=True, text=True, check=True).stdout.split())


KG2 = {"KG201", "KG202", "KG203", "KG204"}


@pytest.mark.skipif(shutil.which("bash") is None, reason="bash is not installed")
@pytest.mark.parametrize(("line", "expected"), [
    ("kgate ch", {"check"}),
    ("kgate lint --sel", {"--select"}),
    ("kgate check --format j", {"json", "junit"}),
    ("kgate lint --color a", {"auto", "always"}),
    ("kgate baseline u", {"update"}),
    ("kgate completion f", {"fish"}),
    # Rules, wherever one is named: codes, names, and for a list its prefixes and ALL, after the last comma.
    ("kgate explain KG10", {f"KG10{i}" for i in range(1, 10)}),
    ("kgate explain spi", {"spill"}),
    ("kgate lint --select KG2", {"KG2", *KG2}),
    ("kgate check --extend-select dev", {"device-print"}),
    ("kgate baseline --ignore A", {"ALL"}),
    ("kgate audit --ignore KG201,runtime-", {"KG201,runtime-autotune"}),
    ("kgate lint --ignore KG103,KG30", {"KG103,KG301", "KG103,KG302", "KG103,KG303"}),
    # `--flag=value`: bash makes the `=` a word of its own, and keeps it when it is the word completed.
    ("kgate lint --select = KG20", KG2),
    ("kgate lint --format = j", {"json", "junit"}),
    ("kgate lint --select =", None),
])
def test_bash_completion_completes(tmp_path: Path, line: str, expected: set[str] | None) -> None:
    script = _write(tmp_path / "kgate.bash", kgate("completion", "bash", cwd=tmp_path).stdout)
    got = _bash_completions(script, line.split(" "))
    if expected is None:  # `--select=` then Tab: every rule, each after the `=` it replaces
        assert {"=ALL", "=KG2", "=KG201", "=spill"} <= got and all(word.startswith("=") for word in got), got
    else:
        assert got == expected


@pytest.mark.skipif(shutil.which("bash") is None, reason="bash is not installed")
def test_completion_offers_every_rule_of_the_registry(tmp_path: Path) -> None:
    from kgate import rules as registry  # type: ignore[attr-defined]

    script = _write(tmp_path / "kgate.bash", kgate("completion", "bash", cwd=tmp_path).stdout)
    every = {word for code, name, _module in registry.REGISTRY for word in (code, name)}
    assert _bash_completions(script, ["kgate", "explain", ""]) == every
    prefixes = {code[:3] for code, _name, _module in registry.REGISTRY}
    assert _bash_completions(script, ["kgate", "lint", "--select", ""]) == every | prefixes | {"ALL"}


# Drives an interactive zsh on a pseudo-terminal: compinit with the script on $fpath, a Tab after the line, and
# every candidate the completion system adds printed between markers.
ZSH_CAPTURE = r"""
zmodload zsh/zpty
zpty z zsh -f -i
zpty -w z "PROMPT=''; fpath=($1 \$fpath); autoload -U compinit; compinit -u -D"
zpty -w z 'compadd() { local -a hits; builtin compadd -A hits "$@"; local h; for h in $hits; do print -r -- "<<$IPREFIX$h>>"; done; }'
zpty -w z 'comppostfuncs=(done_); done_() { print -r -- "<<""END>>"; exit }'
zpty -w z 'bindkey "^I" complete-word'
zpty -w z 'print -r -- "<<""READY>>"'
local out chunk
integer i
for i in {1..300}; do
  while zpty -r -t z chunk; do out+=$chunk; done
  [[ $out == *'<<READY>>'* ]] && break
  sleep 0.1
done
zpty -w z "$2"$'\t'
for i in {1..300}; do
  while zpty -r -t z chunk; do out+=$chunk; done
  [[ $out == *'<<END>>'* ]] && break
  sleep 0.1
done
print -r -- "$out"
"""


@pytest.mark.skipif(shutil.which("zsh") is None, reason="zsh is not installed")
@pytest.mark.parametrize(("line", "expected"), [
    ("kgate ch", {"check"}),
    ("kgate check --format j", {"json", "junit"}),
    ("kgate explain KG10", {f"KG10{i}" for i in range(1, 10)}),
    ("kgate explain spi", {"spill"}),
    ("kgate lint --select KG2", {"KG2", *KG2}),
    ("kgate lint --ignore KG201,runtime-", {"KG201,runtime-autotune"}),
])
def test_zsh_completion_completes(tmp_path: Path, line: str, expected: set[str]) -> None:
    functions = tmp_path / "functions"
    functions.mkdir()
    _write(functions / "_kgate", kgate("completion", "zsh", cwd=tmp_path).stdout)
    capture = _write(tmp_path / "capture.zsh", ZSH_CAPTURE)
    # The Tab is typed once the shell has printed what the line after the set-up prints: typed ahead with the
    # set-up, a loaded machine now and then had zsh complete before compinit had run (no candidate at all). Up
    # to three tries all the same: a completion that is wrong is wrong every time.
    for _attempt in range(3):
        out = subprocess.run(["zsh", "-f", str(capture), str(functions), line], capture_output=True, text=True,
                             check=False, timeout=60, cwd=tmp_path).stdout
        # The lines typed are echoed too: "<<$IPREFIX$h>>" and the markers written "<<""END>>" are no candidates
        # (the markers are split so that their echo is not the marker).
        got = set(re.findall(r"<<([^<>$\"]*)>>", out)) - {"END", "READY"}
        if "<<END>>" in out and got:
            break
    assert "<<END>>" in out, out
    assert got == expected


@pytest.mark.skipif(shutil.which("fish") is None, reason="fish is not installed")
def test_fish_completion_completes(tmp_path: Path) -> None:
    script = _write(tmp_path / "kgate.fish", kgate("completion", "fish", cwd=tmp_path).stdout)
    lines = {"kgate ch": {"check"}, "kgate lint --sel": {"--select"}, "kgate check --format j": {"json", "junit"},
             "kgate baseline u": {"update"}, "kgate explain KG10": {f"KG10{i}" for i in range(1, 10)},
             "kgate lint --select KG201,dev": {"KG201,device-print"},
             "kgate check --ignore=KG30": {"--ignore=KG301", "--ignore=KG302", "--ignore=KG303"}}
    out = {}
    for line in lines:
        probe = subprocess.run(["fish", "--no-config", "-c", f"source {script}; complete -C '{line}'"],
                               capture_output=True, text=True, check=True).stdout
        out[line] = {row.split("\t")[0] for row in probe.splitlines()}
    assert out == lines
