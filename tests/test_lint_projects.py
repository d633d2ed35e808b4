"""Configuration per file for `kgate lint`: the nearest configuration above each file governs it, wherever kgate
is started; files are grouped by it; ignore files (.gitignore, .ignore) are respected, and can be turned off."""

from __future__ import annotations

import json
import textwrap
from pathlib import Path

from conftest import Run, kgate

from kgate.core.config import Config, load_config
from kgate.core.selection import build_selection
from kgate.pipeline.lint import LintRun, run_lint

# One KG204 (device-print) finding per file.
KERNEL = textwrap.dedent("""\
    import triton
    import triton.language as tl


    @triton.jit
    def k(x_ptr):
        x = tl.load(x_ptr)
        tl.device_print("x", x)
""")


def tree(root: Path, files: dict[str, str | None]) -> Path:
    """Files under root: None for a kernel with one finding, else the text."""
    for rel, text in files.items():
        path = root / rel
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(KERNEL if text is None else textwrap.dedent(text))
    return root


def flagged(run: Run) -> list[str]:
    """The paths with a finding, in order."""
    assert run.code in (0, 1), run.stderr
    return sorted(f["path"] for f in run.json()["findings"])


def lint(cwd: Path, *args: str) -> Run:
    return kgate("lint", "--format", "json", *args, cwd=cwd)


def test_a_file_named_from_another_folder_gets_its_projects_per_file_ignores(tmp_path: Path) -> None:
    tree(tmp_path / "proj", {"pyproject.toml": '[project]\nname = "p"\n[tool.kgate.per-file-ignores]\n'
                                               '"tests/*" = ["device-print"]\n',
                             "tests/test_norm.py": None, "pkg/ops.py": None})
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    # Outside the folder kgate was started in, a path is shown absolute, as before.
    assert flagged(lint(elsewhere, "../proj/tests/test_norm.py", "../proj/pkg/ops.py")) == [
        (tmp_path / "proj/pkg/ops.py").resolve().as_posix()]
    # The same from the project's own folder: the configuration found, not the place kgate was started, decides.
    assert flagged(lint(tmp_path / "proj", "tests/test_norm.py", "pkg/ops.py")) == ["pkg/ops.py"]


def test_two_projects_in_one_run_each_under_its_own_configuration(tmp_path: Path) -> None:
    tree(tmp_path, {
        "pyproject.toml": '[tool.kgate]\n[tool.kgate.per-file-ignores]\n"tools/*" = ["device-print"]\n',
        "tools/a.py": None, "lib/b.py": None,
        # A nested project: its own select, its own per-file-ignores relative to its folder; the outer
        # project's `tools/*` does not reach `sub/tools/`.
        "sub/kgate.toml": 'select = ["KG2"]\n[per-file-ignores]\n"lib/*" = ["device-print"]\n',
        "sub/tools/c.py": None, "sub/lib/d.py": None,
    })
    assert flagged(lint(tmp_path)) == ["lib/b.py", "sub/tools/c.py"]
    # A link from the nested project back to the outer one does not walk the outer files a second time.
    (tmp_path / "sub" / "up").symlink_to("..")
    assert flagged(lint(tmp_path)) == ["lib/b.py", "sub/tools/c.py"]
    (tmp_path / "sub" / "up").unlink()
    # Named files from a folder with no configuration: each under its own project's.
    (tmp_path / "outside").mkdir()
    run = lint(tmp_path / "outside", "../tools/a.py", "../lib/b.py", "../sub/tools/c.py", "../sub/lib/d.py")
    assert [Path(p).name for p in flagged(run)] == ["b.py", "c.py"]


def test_a_nested_projects_exclusions_apply_to_files_named_from_the_repository_root(tmp_path: Path) -> None:
    # pre-commit runs from the repository's top and passes file names with --force-exclude.
    tree(tmp_path, {".git/HEAD": "", "sub/kgate.toml": 'extend-exclude = ["gen"]\n', "sub/gen/g.py": None,
                    "sub/ops.py": None})
    assert flagged(lint(tmp_path, "--force-exclude", "sub/gen/g.py", "sub/ops.py")) == ["sub/ops.py"]


def test_an_error_in_a_nested_configuration_names_its_file(tmp_path: Path) -> None:
    tree(tmp_path, {"kgate.toml": "", "sub/kgate.toml": 'selct = ["KG2"]\n', "sub/ops.py": None})
    run = lint(tmp_path)
    assert run.code == 2 and "sub/kgate.toml: selct: unknown key" in run.stderr, run.stderr


def test_config_names_the_configuration_of_every_file(tmp_path: Path) -> None:
    tree(tmp_path, {"kgate.toml": "", "sub/kgate.toml": 'ignore = ["device-print"]\n', "sub/ops.py": None})
    assert flagged(lint(tmp_path)) == []
    assert flagged(lint(tmp_path, "--config", "kgate.toml")) == ["sub/ops.py"]


def test_gitignored_folders_are_not_walked_and_negation_re_includes(tmp_path: Path) -> None:
    tree(tmp_path, {".git/HEAD": "", "kgate.toml": "",
                    ".gitignore": "build_out/\ngen/*\n!gen/keep.py\n# a comment\n",
                    "build_out/a.py": None, "gen/skip.py": None, "gen/keep.py": None, "ops.py": None})
    assert flagged(lint(tmp_path)) == ["gen/keep.py", "ops.py"]


def test_a_nested_gitignore_applies_below_its_folder_only(tmp_path: Path) -> None:
    tree(tmp_path, {".git/HEAD": "", "kgate.toml": "", "local.py": None, "sub/local.py": None,
                    "sub/deeper/local.py": None, "sub/.gitignore": "/local.py\n", "other/x.py": None,
                    "other/.gitignore": "*.py\n!x.py\n"})
    assert flagged(lint(tmp_path)) == ["local.py", "other/x.py", "sub/deeper/local.py"]
    # A gitignore above the folder being linted counts too (it is the repository's).
    (tmp_path / ".gitignore").write_text("deeper/\n")
    assert flagged(lint(tmp_path, "sub")) == []


def test_gitignore_counts_in_a_repository_and_dot_ignore_everywhere(tmp_path: Path) -> None:
    tree(tmp_path, {"kgate.toml": "", ".gitignore": "a.py\n", ".ignore": "b.py\n", "a.py": None, "b.py": None})
    assert flagged(lint(tmp_path)) == ["a.py"]  # no repository: its .gitignore is not git's business
    (tmp_path / ".git").mkdir()
    assert flagged(lint(tmp_path)) == []


def test_the_switch_turns_ignore_files_off(tmp_path: Path) -> None:
    tree(tmp_path, {".git/HEAD": "", "kgate.toml": "", ".gitignore": "gen/\n", "gen/g.py": None, "ops.py": None})
    assert flagged(lint(tmp_path)) == ["ops.py"]
    assert flagged(lint(tmp_path, "--no-respect-gitignore")) == ["gen/g.py", "ops.py"]
    (tmp_path / "kgate.toml").write_text("respect-gitignore = false\n")
    assert flagged(lint(tmp_path)) == ["gen/g.py", "ops.py"]
    (tmp_path / "kgate.toml").write_text('respect-gitignore = "no"\n')
    run = lint(tmp_path)
    assert run.code == 2 and "respect-gitignore: must be true or false" in run.stderr, run.stderr


def test_a_file_named_on_the_command_line_is_linted_even_when_ignored(tmp_path: Path) -> None:
    tree(tmp_path, {".git/HEAD": "", "kgate.toml": "", ".gitignore": "gen/\n", "gen/g.py": None,
                    "gen/h.py": None, "ops.py": None})
    # Named, it is linted; its ignored sibling, reached by walking ".", is not.
    assert flagged(lint(tmp_path, "gen/g.py", ".")) == ["gen/g.py", "ops.py"]


def _run(root: Path) -> LintRun:
    config = load_config(start=root)

    def select_for(other: Config) -> object:
        return build_selection(other)

    return run_lint(config, build_selection(config), None, select_for=select_for)  # type: ignore[arg-type]


def test_a_nested_configuration_change_invalidates_exactly_the_files_it_governs(tmp_path: Path) -> None:
    tree(tmp_path, {"kgate.toml": "", "ops.py": None, "sub/kgate.toml": "", "sub/inner.py": None})
    first = _run(tmp_path)
    assert [f.path for f in first.findings] == ["ops.py", "sub/inner.py"] and first.cached == 0
    assert _run(tmp_path).cached == 2
    (tmp_path / "sub" / "kgate.toml").write_text('ignore = ["device-print"]\n')
    changed = _run(tmp_path)
    assert [f.path for f in changed.findings] == ["ops.py"]
    assert changed.cached == 1  # the outer file's record holds; the nested file was linted again
    assert _run(tmp_path).cached == 2


def test_an_edited_ignore_file_is_read_again(tmp_path: Path) -> None:
    # pathspec's verdicts are remembered by the ignore file's content: an edit must not be answered from them.
    tree(tmp_path, {".git/HEAD": "", "kgate.toml": "", ".gitignore": "gen/\n", "gen/g.py": None, "ops.py": None})
    assert flagged(lint(tmp_path)) == ["ops.py"]
    (tmp_path / ".gitignore").write_text("ops.py\n")
    assert flagged(lint(tmp_path)) == ["gen/g.py"]


def test_a_warm_walk_answers_from_remembered_verdicts_without_importing_pathspec(tmp_path: Path) -> None:
    import subprocess
    import sys

    tree(tmp_path, {".git/HEAD": "", "kgate.toml": "", ".gitignore": "gen/\n", "gen/g.py": None, "ops.py": None})
    probe = ("import sys\nfrom kgate.cli import main\ncode = main(['lint', '--no-baseline', '-q'])\n"
             "print('pathspec' in sys.modules)")
    runs = [subprocess.run([sys.executable, "-c", probe], cwd=tmp_path, capture_output=True, text=True, timeout=300)
            for _ in range(2)]
    assert [r.stdout.strip().splitlines()[-1] for r in runs] == ["True", "False"], [r.stderr for r in runs]


def test_show_settings_of_a_file_are_its_governing_configurations(tmp_path: Path) -> None:
    tree(tmp_path, {"pyproject.toml": '[project]\nname = "p"\n[tool.kgate]\ntargets = ["sm_120a"]\n',
                    "sub/kgate.toml": 'targets = ["sm_90a"]\n[per-file-ignores]\n"t.py" = ["device-print"]\n',
                    "sub/t.py": None})
    run = kgate("lint", "--show-settings", "sub/t.py", cwd=tmp_path)
    shown = json.loads(run.stdout)
    assert Path(shown["configuration"]) == (tmp_path / "sub" / "kgate.toml").resolve()
    assert shown["settings"]["targets"] == ["sm_90a"]
    assert shown["file"]["path"] == "t.py" and shown["file"]["per-file-ignored"] == ["KG204"]
    # `--config` names the one configuration for every file, as for the lint itself.
    named = json.loads(kgate("lint", "--config", "pyproject.toml", "--show-settings", "sub/t.py", cwd=tmp_path).stdout)
    assert named["settings"]["targets"] == ["sm_120a"]


# --------------------------------------------------------------------------- from a folder inside the project

def _fla(root: Path) -> Path:
    """A project whose kernels sit three folders down; per-file-ignores written from the project's top."""
    return tree(root, {"pyproject.toml": '[project]\nname = "fla"\n[tool.kgate.per-file-ignores]\n'
                                         '"fla/ops/utils/skip_*.py" = ["device-print"]\n',
                       "fla/ops/utils/cumsum.py": None, "fla/ops/utils/skip_me.py": None,
                       "fla/ops/chunk.py": None, "top.py": None})


def _where(text: str) -> list[str]:
    """The paths of a text report's finding lines (`PATH:LINE:COL: CODE ...`)."""
    return [line.split(":", 1)[0] for line in text.splitlines() if ": KG" in line]


def test_lint_without_paths_lints_the_current_folder_and_prints_paths_from_there(tmp_path: Path) -> None:
    root = _fla(tmp_path)
    utils = root / "fla/ops/utils"
    run = kgate("lint", cwd=utils)
    # The current folder, under the configuration found above it (its per-file-ignores still apply).
    assert run.code == 1 and _where(run.stdout) == ["cumsum.py"], run.stdout + run.stderr
    assert run.stdout.splitlines()[-1].startswith("kgate lint: FAILED: 2 file(s)")
    assert all((utils / path).is_file() for path in _where(run.stdout))  # each opens from where it was printed
    assert kgate("lint", "--show-files", cwd=utils).stdout.splitlines() == ["cumsum.py", "skip_me.py"]
    # Paths named from a folder inside: shown from there, `../` above it (in the project's order).
    ops = kgate("lint", "utils", "../../top.py", cwd=root / "fla/ops")
    assert _where(ops.stdout) == ["utils/cumsum.py", "../../top.py"], ops.stdout
    # From the top: the whole project, named as before.
    assert _where(kgate("lint", cwd=root).stdout) == ["fla/ops/chunk.py", "fla/ops/utils/cumsum.py", "top.py"]


def test_machine_formats_keep_the_project_relative_paths_from_a_folder_inside(tmp_path: Path) -> None:
    utils = _fla(tmp_path) / "fla/ops/utils"
    assert flagged(lint(utils)) == ["fla/ops/utils/cumsum.py"]
    sarif = json.loads(kgate("lint", "--format", "sarif", cwd=utils).stdout)
    assert [r["locations"][0]["physicalLocation"]["artifactLocation"]["uri"] for r in sarif["runs"][0]["results"]] \
        == ["fla/ops/utils/cumsum.py"]
    assert "file=fla/ops/utils/cumsum.py," in kgate("lint", "--format", "github", cwd=utils).stdout
    assert 'classname="fla/ops/utils/cumsum.py"' in kgate("lint", "--format", "junit", cwd=utils).stdout


def test_a_file_outside_the_project_keeps_its_absolute_name(tmp_path: Path) -> None:
    root = _fla(tmp_path / "proj")
    tree(tmp_path, {"outside/x.py": None})
    run = kgate("lint", "../../../../outside/x.py", "cumsum.py", cwd=root / "fla/ops/utils")
    assert _where(run.stdout) == [(tmp_path / "outside/x.py").resolve().as_posix(), "cumsum.py"], run.stdout


def test_check_prints_source_paths_from_the_current_folder(tmp_path: Path) -> None:
    root = _fla(tmp_path)
    # One CUDA kernel to gate (a check of nothing is exit 2), at the project's top.
    (root / "csrc").mkdir()
    (root / "csrc/copy.cu").write_text("__global__ void copy(float* o, const float* i) { o[threadIdx.x] = "
                                       "i[threadIdx.x]; }\n")
    with (root / "pyproject.toml").open("a") as config:
        config.write('[[tool.kgate.cuda]]\nsources = ["csrc/*.cu"]\n')
    ops = root / "fla/ops"
    run = kgate("check", cwd=ops)  # the whole project: its kernel and the source rules
    assert run.code == 1 and _where(run.stdout) == ["chunk.py", "utils/cumsum.py", "../../top.py"], run.stdout
    assert kgate("check", "--show-files", cwd=ops).stdout.splitlines() == [
        "../../csrc/copy.cu", "chunk.py", "utils/cumsum.py", "utils/skip_me.py", "../../pyproject.toml",
        "../../top.py"]  # in the project's order
    report = kgate("check", "--format", "json", cwd=ops).json()
    assert sorted(f["path"] for f in report["findings"]) == ["fla/ops/chunk.py", "fla/ops/utils/cumsum.py", "top.py"]


def _files(record: dict) -> list[str]:
    """The files a lint record holds entries of (less the members of its table of reads)."""
    return sorted(name for name in record["files"] if not name.startswith("\x00"))


def test_a_lint_of_a_folder_inside_and_of_the_project_share_one_cache_without_mixing_them(tmp_path: Path) -> None:
    root = _fla(tmp_path)
    utils = root / "fla/ops/utils"
    whole = ["fla/ops/chunk.py", "fla/ops/utils/cumsum.py", "top.py"]
    assert _where(kgate("lint", cwd=utils).stdout) == ["cumsum.py"]
    # The lint cache names files from the project's top whoever wrote it.
    records = [json.loads(p.read_text()) for p in (root / ".kgate-cache/v1/lint").glob("*.json")]
    assert [_files(r) for r in records] == [["fla/ops/utils/cumsum.py", "fla/ops/utils/skip_me.py"]]
    assert _where(kgate("lint", cwd=root).stdout) == whole
    assert flagged(lint(root)) == whole == flagged(lint(root, "--no-cache"))
    # Each folder's run record replays its own output, never the other's.
    for _ in range(2):
        assert _where(kgate("lint", cwd=utils).stdout) == ["cumsum.py"]
        assert _where(kgate("lint", cwd=root).stdout) == whole
    # One record for both: a whole-project lint now reads every file from it, each under its project name.
    from kgate.api import lint as api_lint

    assert api_lint(project=root).cached == 5  # the kernels and pyproject.toml
    records = [json.loads(p.read_text()) for p in (root / ".kgate-cache/v1/lint").glob("*.json")]
    assert [_files(r) for r in records] == [sorted([*whole, "fla/ops/utils/skip_me.py", "pyproject.toml"])]
