"""Trust: what kgate runs, what it imports, and where configured paths may lead.

- `kgate lint`, also as pre-commit runs it on a commit (the `kgate-lint` hook), never imports or
  executes the repository's code (test_lint_isolation.py covers `kgate lint` run by hand).
- `kgate check` imports the modules that define registered Triton kernels, in its compile workers,
  and nothing else of the project: not the other modules, not a `setup.py`, and for CUDA sources
  nothing at all (nvcc compiles them; no project code runs).
- Every external program is started by kgate.support.tools.run: an argument list, never a shell, always a
  timeout. A scan of kgate's sources fails on any other way of starting a process.
- A configured path that leads out of the project is an error, or allowed with a notice on stderr.
"""

from __future__ import annotations

import ast
import json
import os
import subprocess
from pathlib import Path

import pytest
import yaml
from conftest import FIXTURES, REPO, kgate
from test_lint_isolation import SIDE_EFFECT
from test_precommit import BIN, hooks

from kgate.core.config import parse_config
from kgate.core.errors import ConfigError

MARKER = "IMPORTED_"


def _markers(root: Path) -> list[str]:
    return sorted(p.relative_to(root).as_posix() for p in root.rglob(MARKER + "*"))


def _side_effect_project(root: Path) -> Path:
    for rel in ("pkg/__init__.py", "pkg/kernels.py", "tests/conftest.py", "setup.py"):
        (root / rel).parent.mkdir(parents=True, exist_ok=True)
        (root / rel).write_text(SIDE_EFFECT)
    return root


def test_the_commit_hook_never_imports_the_repository(tmp_path: Path) -> None:
    repo = _side_effect_project(tmp_path / "repo")
    (repo / "kgate.toml").write_text("")
    hook = dict(hooks()["kgate-lint"], language="system", entry=f"{BIN}/{hooks()['kgate-lint']['entry']}")
    (repo / ".pre-commit-config.yaml").write_text(yaml.safe_dump({"repos": [{"repo": "local", "hooks": [hook]}]}))
    for args in (("init", "-q"), ("add", "-A")):
        subprocess.run(["git", *args], cwd=repo, check=True, capture_output=True)
    env = {**os.environ, "PRE_COMMIT_HOME": str(tmp_path / "pre-commit-home"), "PRE_COMMIT_COLOR": "never"}
    run = subprocess.run([str(BIN / "pre-commit"), "run", "kgate-lint", "--all-files"], cwd=repo, env=env,
                         capture_output=True, text=True, timeout=600, check=False)
    assert run.returncode == 1, run.stdout + run.stderr
    # Every module was read (each has a finding)...
    assert {line.split(":")[0] for line in run.stdout.splitlines() if ": KG" in line} == {
        "pkg/__init__.py", "pkg/kernels.py", "tests/conftest.py", "setup.py"}
    # ...and none ran.
    assert _markers(repo) == []


def test_check_imports_only_the_modules_of_registered_triton_kernels(tmp_path: Path) -> None:
    project = _side_effect_project(tmp_path / "project")
    kernel = (FIXTURES / "bad" / "bad-flag" / "k.py").read_text()
    marker = 'import pathlib\npathlib.Path(__file__).with_name("IMPORTED_" + pathlib.Path(__file__).stem).write_text("x")\n'
    (project / "k.py").write_text(marker + 'print("printed at import")\n' + kernel)
    (project / "kgate.toml").write_text('python-path = ["."]\nignore = ["KG201", "KG203"]\n\n[[triton]]\n'
                                        'kernel = "k:good"\nsignature = { x = "*fp32", n = "i32" }\n'
                                        'constexprs = { BLOCK = 128 }\n')
    run = kgate("check", "--format", "json", cwd=project)
    assert run.code == 0, run.stdout + run.stderr
    assert _markers(project) == ["IMPORTED_k"]  # not pkg, not tests/conftest.py, not setup.py
    # What the imported module prints goes to stderr: the first run's JSON is as clean as a replay's.
    assert json.loads(run.stdout)["kernels"] and "printed at import" in run.stderr


def test_check_of_cuda_sources_runs_no_project_code(tmp_path: Path) -> None:
    project = _side_effect_project(tmp_path / "project")
    (project / "csrc").mkdir()
    (project / "csrc" / "k.cu").write_text("__global__ void k(float* x) { x[0] = 1.0f; }\n")
    (project / "kgate.toml").write_text('ignore = ["KG201", "KG203"]\n\n[[cuda]]\nsources = ["csrc/*.cu"]\n')
    run = kgate("check", "--show-kernels", cwd=project)
    assert run.code == 0, run.stdout + run.stderr
    assert "k " in run.stdout and _markers(project) == []


# --------------------------------------------------------------------------- starting processes


def _process_calls(tree: ast.Module) -> list[tuple[int, str]]:
    """(line, what) of everything in a module that could start a process or run a shell."""
    out = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            out += [(node.lineno, f"import {a.name}") for a in node.names if a.name in ("subprocess", "pty")]
        elif isinstance(node, ast.ImportFrom) and node.module in ("subprocess", "pty"):
            out.append((node.lineno, f"from {node.module} import ..."))
        elif isinstance(node, ast.Attribute) and isinstance(node.value, ast.Name) and node.value.id == "os" and (
                node.attr in ("system", "popen", "posix_spawn", "posix_spawnp") or node.attr.startswith(
                    ("exec", "spawn"))):
            out.append((node.lineno, f"os.{node.attr}"))
        elif isinstance(node, ast.Attribute) and node.attr in ("create_subprocess_exec", "create_subprocess_shell"):
            out.append((node.lineno, node.attr))
        elif isinstance(node, ast.keyword) and node.arg == "shell":
            out.append((getattr(node.value, "lineno", 0), "shell="))
    return out


def test_only_kgate_tools_starts_processes() -> None:
    found = {}
    for folder in ("kgate", "rules", "kernels"):
        for path in sorted((REPO / folder).rglob("*.py")):
            rel = path.relative_to(REPO).as_posix()
            calls = _process_calls(ast.parse(path.read_text(encoding="utf-8")))
            if calls:
                found[rel] = sorted({what for _line, what in calls})
    # tools.py imports subprocess and calls subprocess.run: an argument list, a timeout, no shell. The import
    # recorder wraps the functions a kernel module's import starts its own programs with (subprocess.Popen,
    # os.system, os.execv, ...) to hand the recorder on to them; it starts no program of its own.
    assert found == {"kgate/support/tools.py": ["import subprocess"],
                     "kgate/compile/import_children.py": ["import subprocess", "os.execv", "os.system"]}


def test_kgate_tools_run_uses_an_argument_list_and_a_timeout() -> None:
    tree = ast.parse((REPO / "kgate" / "support" / "tools.py").read_text(encoding="utf-8"))
    calls = {}
    for function in ast.walk(tree):
        if isinstance(function, ast.FunctionDef):
            for node in ast.walk(function):
                if isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute) \
                        and isinstance(node.func.value, ast.Name) and node.func.value.id == "subprocess":
                    calls[function.name] = node
    # `run` for tools (with a timeout); `run_user_command` for the user's own command under `kgate capture`;
    # `start_service` for the interpreter child of the precision tests (its caller bounds each request).
    assert {name: call.func.attr for name, call in calls.items()} == {  # type: ignore[attr-defined]
        "run": "run", "run_user_command": "Popen", "start_service": "Popen"}
    for name, call in calls.items():
        keywords = {k.arg for k in call.keywords}
        assert "shell" not in keywords
        assert isinstance(call.args[0], ast.Name) and call.args[0].id == "argv"
    assert "timeout" in {k.arg for k in calls["run"].keywords}


# --------------------------------------------------------------------------- paths out of the project


@pytest.mark.parametrize(("table", "outcome"), [
    ({"baseline": "../kgate-baseline.toml"}, "error"),
    ({"baseline": "/etc/kgate-baseline.toml"}, "error"),
    ({"baseline": "sub/../../x.toml"}, "error"),
    ({"baseline": "ci/kgate-baseline.toml"}, "inside"),
    ({"cache-dir": "."}, "error"),
    ({"cache-dir": ".."}, "error"),
    ({"cache-dir": "/"}, "error"),
    ({"cache-dir": "/var/cache/kgate"}, "notice"),
    ({"cache-dir": "../kgate-cache"}, "notice"),
    ({"cache-dir": "build/.kgate-cache"}, "inside"),
    ({"python-path": [".", ".."]}, "notice"),
    ({"python-path": ["src", "/opt/lib/python"]}, "notice"),
    ({"python-path": ["src"]}, "inside"),
    ({"cuda": [{"sources": ["../other/*.cu"]}]}, "error"),
    ({"cuda": [{"sources": ["/abs/*.cu"]}]}, "error"),
    ({"cuda": [{"sources": ["csrc/../../x/*.cu"]}]}, "error"),
    ({"cuda": [{"sources": ["csrc/**/*.cu"]}]}, "inside"),
    ({"cuda": [{"sources": ["*.cu"], "compile_commands": "/abs/build/compile_commands.json"}]}, "notice"),
    ({"cuda": [{"sources": ["*.cu"], "compile_commands": "../build/compile_commands.json"}]}, "notice"),
    ({"cuda": [{"sources": ["*.cu"], "compile_commands": "build/compile_commands.json"}]}, "inside"),
    ({"nvcc": "/usr/local/cuda/bin/nvcc"}, "inside"),  # a program's location: shown by kgate doctor
])
def test_each_path_key_has_a_policy_for_leaving_the_project(tmp_path: Path, table: dict, outcome: str) -> None:
    project = tmp_path / "project"
    project.mkdir()
    try:
        config = parse_config(table, root=project, source=project / "kgate.toml")
    except ConfigError as exc:
        assert outcome == "error", exc
        assert str(exc).startswith("kgate.toml: ")
        return
    assert outcome != "error", config
    assert len(config.notices) == (outcome == "notice")
    for notice in config.notices:  # one line: the file, the key, and where the path leads
        assert notice.startswith("kgate.toml: ") and "\n" not in notice and "is outside the project" in notice


def test_a_symlink_out_of_the_project_counts_as_outside(tmp_path: Path) -> None:
    project = tmp_path / "project"
    project.mkdir()
    (project / "cache").symlink_to(tmp_path)
    config = parse_config({"cache-dir": "cache/kgate"}, root=project, source=project / "kgate.toml")
    assert config.notices == (f"kgate.toml: cache-dir 'cache/kgate' is outside the project: {tmp_path / 'kgate'}",)


def test_notices_go_to_stderr_and_leave_machine_output_alone(tmp_path: Path) -> None:
    project = tmp_path / "project"
    project.mkdir()
    (project / "kgate.toml").write_text('cache-dir = "../elsewhere"\n')
    (project / "k.py").write_text("x = 1\n")
    run = kgate("lint", "--format", "json", cwd=project)
    assert run.code == 0 and json.loads(run.stdout)["summary"]["findings"] == 0
    assert run.stderr.splitlines()[0] == (f"kgate: note: kgate.toml: cache-dir '../elsewhere' is outside the project: "
                                          f"{(tmp_path / 'elsewhere').resolve()}")
    assert (tmp_path / "elsewhere" / "v1" / "lint").is_dir()


def test_the_docs_say_which_commands_import_project_code() -> None:
    page = (REPO / "docs" / "trust.md").read_text(encoding="utf-8")
    section = page.split("## Which commands import your code", 1)[1].split("\n## ", 1)[0]
    for command in ("kgate check", "kgate baseline update", "kgate audit", "kgate lint", "kgate doctor", "nvcc"):
        assert command in section, command
