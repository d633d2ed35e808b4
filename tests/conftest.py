"""Shared fixtures: projects copied into a temporary folder, kgate run in-process or as a CLI."""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import sys
from collections.abc import Callable, Iterable
from dataclasses import asdict, dataclass
from pathlib import Path

import inprocess
import pytest
from filelock import FileLock

REPO = Path(__file__).resolve().parent.parent
FIXTURES = REPO / "fixtures"
TESTS = Path(__file__).resolve().parent
DATA = TESTS / "data"


def pytest_addoption(parser: pytest.Parser) -> None:
    parser.addoption("--record-facts", action="store_true", default=False,
                     help="compile every fixtures/rules/<CODE>/ that keeps a facts.json with the real compiler and "
                          "write its facts.json again (tests/test_rules.py)")


def shared_folder(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The temporary folder every process of this test run shares: the base temporary folder, or under
    pytest-xdist its parent (each worker's base folder is a folder of its own in there)."""
    base = tmp_path_factory.getbasetemp()
    return base.parent if os.environ.get("PYTEST_XDIST_WORKER") else base


def once(tmp_path_factory: pytest.TempPathFactory, name: str, compute: Callable[[Path], dict]) -> dict:
    """`compute(folder)`'s result (JSON data), computed once per test run in `folder`, a new folder of the shared
    temporary folder: the first process of the run that asks computes it, the others wait for it and read it.

    The folder is never changed afterwards, so every worker of pytest-xdist can copy what is in it.
    """
    root = shared_folder(tmp_path_factory)
    folder, result = root / name, root / f"{name}.json"
    with FileLock(root / f"{name}.lock"):
        if result.is_file():
            return json.loads(result.read_text(encoding="utf-8"))
        if folder.exists():  # a computation that failed in another worker: start again
            shutil.rmtree(folder)
        folder.mkdir()
        data = compute(folder)
        result.write_text(json.dumps(data), encoding="utf-8")
        return data


def pytest_configure(config: pytest.Config) -> None:
    """Once, in the process that starts the run: kgate's modules and rules compiled to bytecode before any test
    starts a process that imports them.

    Python writes a module's bytecode when it first imports it, unless PYTHONDONTWRITEBYTECODE is set, as it is
    on many CI machines: there every process the suite starts (kgate runs, the compile workers' fork servers,
    captured commands, pytest runs with kgate's plugin) compiled kgate from its source again, about a third of
    a second of CPU each. Bytecode that is there is read whatever that variable says; compileall writes it
    only for a source that is newer than its bytecode.
    """
    if not hasattr(config, "workerinput"):
        import compileall

        for package in ("kgate", "rules"):
            compileall.compile_dir(str(REPO / package), quiet=2)
        config.stash[_LEFT_BEHIND] = _kgate_folders()


_LEFT_BEHIND = pytest.StashKey[set[Path]]()


def _kgate_folders() -> set[Path]:
    """kgate's cache folders in this checkout that git does not track (the suite works in temporary folders)."""
    tracked = subprocess.run(["git", "ls-files", "-z", "--", "*/.kgate-cache/*", ".kgate-cache/*"], cwd=REPO,
                             capture_output=True).stdout.decode().split("\0")
    keep = {REPO / Path(name).parts[0] if name.startswith(".kgate-cache") else REPO / Path(name).parent
            for name in tracked if name}
    found = set()
    for folder, names, _files in os.walk(REPO):
        if ".kgate-cache" in names:
            found.add(Path(folder) / ".kgate-cache")
        names[:] = [n for n in names if not n.startswith((".venv", ".git", ".kgate-cache", "__pycache__"))]
    return {path for path in found if not any(path == k or k.is_relative_to(path) for k in keep)}


def pytest_sessionfinish(session: pytest.Session, exitstatus: int) -> None:
    """The run fails when a test left a kgate cache folder in the checkout (a user's clone must stay as it was)."""
    before = session.config.stash.get(_LEFT_BEHIND, None)
    if before is None:
        return
    left = sorted(_kgate_folders() - before)
    if left:
        names = ", ".join(str(path.relative_to(REPO)) for path in left)
        session.config.get_terminal_writer().line(f"the suite left kgate cache folders in the checkout: {names}",
                                                  red=True)
        session.exitstatus = pytest.ExitCode.TESTS_FAILED


@pytest.fixture(autouse=True)
def _isolated_home(tmp_path_factory: pytest.TempPathFactory, monkeypatch: pytest.MonkeyPatch) -> None:
    """Keep Triton's and kgate's caches out of the real home directory (one home for the run's workers, as for
    a serial run: Triton writes its cache entries atomically)."""
    home = shared_folder(tmp_path_factory) / "home"
    home.mkdir(exist_ok=True)
    monkeypatch.setenv("TRITON_HOME", str(home))
    monkeypatch.setenv("TRITON_CACHE_DIR", str(home / "triton-cache"))
    monkeypatch.delenv("TRITON_INTERPRET", raising=False)


@dataclass
class Run:
    code: int
    stdout: str
    stderr: str

    def json(self) -> dict:
        return json.loads(self.stdout)


# KGATE_TEST_PROCESSES=1 runs every `kgate(...)` in a process of its own, as before the in-process runner (to
# compare the two, or to rule the runner out when a test fails).
ALWAYS_PROCESS = os.environ.get("KGATE_TEST_PROCESSES", "") not in ("", "0")


def kgate(*args: str, cwd: Path, env: dict[str, str] | None = None, timeout: float = 900,
          process: bool = False) -> Run:
    """Run the `kgate` command line as a user would: its exit code, stdout and stderr.

    In this process (`inprocess.run`), unless the test needs a process of its own (`process=True`: signals,
    concurrency, isolation from this process's imports and state).
    """
    if process or ALWAYS_PROCESS:
        return kgate_process(*args, cwd=cwd, env=env, timeout=timeout)
    code, stdout, stderr = inprocess.run(list(args), cwd=cwd, env=env, timeout=timeout)
    return Run(code, stdout, stderr)


def kgate_process(*args: str, cwd: Path, env: dict[str, str] | None = None, timeout: float = 900) -> Run:
    """Run the installed `kgate` command line in a subprocess."""
    full_env = {**os.environ, **(env or {})}
    full_env.pop("TRITON_INTERPRET", None)
    proc = subprocess.run([sys.executable, "-m", "kgate", *args], cwd=cwd, env=full_env, capture_output=True,
                          text=True, timeout=timeout)
    return Run(proc.returncode, proc.stdout, proc.stderr)


def copy_project(name: str, dest: Path) -> Path:
    """A copy of fixtures/<name> in a temporary folder."""
    target = dest / name.replace("/", "_")
    shutil.copytree(FIXTURES / name, target, ignore=shutil.ignore_patterns("__pycache__", ".kgate-cache"))
    return target


@pytest.fixture(scope="session")
def compiled_cold(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, Run]:
    """fixtures/compiled after one cold `kgate check --format json`: its folder (cache included) and that run.

    Compiling its 24 variants takes most of a minute. The test files that need them compiled share this one
    cold compile and each works on its own copy of the folder (`copy_compiled`), so that no test depends on
    which file ran first. The folder itself is never changed after the compile. The compile also records the
    ptxas commands Triton ran, with their PTX (`ptxas_calls`), for a test that runs ptxas itself.
    """
    def compile_cold(folder: Path) -> dict:
        project = copy_project("compiled", folder)
        calls = folder / PTXAS_CALLS
        calls.mkdir()
        recorder = {"PYTHONPATH": os.pathsep.join([str(TESTS / "ptxas_calls"), *filter(None, [
            os.environ.get("PYTHONPATH")])]), "KGATE_TEST_PTXAS_CALLS": str(calls)}
        return {"project": str(project), "run": asdict(kgate("check", "--format", "json", cwd=project,
                                                             env=recorder))}

    data = once(tmp_path_factory, "compiled-cold", compile_cold)
    return Path(data["project"]), Run(**data["run"])


PTXAS_CALLS = "ptxas-calls"


def ptxas_calls(compiled_cold: tuple[Path, Run]) -> list[dict]:
    """The ptxas commands the cold compile of fixtures/compiled ran: {"command": [...], "ptx": copy or None}
    (tests/ptxas_calls/sitecustomize.py)."""
    folder = compiled_cold[0].parent / PTXAS_CALLS
    return [json.loads(line) for path in sorted(folder.glob("calls-*.jsonl"))
            for line in path.read_text(encoding="utf-8").splitlines()]


def copy_compiled(compiled_cold: tuple[Path, Run], dest: Path) -> Path:
    """A copy of the cold-compiled fixtures/compiled in `dest`, its cache included: every variant is cached."""
    target = dest / "compiled"
    shutil.copytree(compiled_cold[0], target, symlinks=True)
    return target


def repository_checkout(dest: Path) -> Path:
    """This repository as a user's checkout of it holds what kgate reads: the configuration, the baseline, the
    capture and the kernels (without their tests)."""
    dest.mkdir(parents=True, exist_ok=True)
    for name in ("pyproject.toml", "kgate-baseline.toml", "kgate-capture.toml"):
        shutil.copy(REPO / name, dest / name)
    shutil.copytree(REPO / "kernels", dest / "kernels",
                    ignore=shutil.ignore_patterns("__pycache__", "test_*.py", "conftest.py"))
    return dest


REPOSITORY_FIRST_CHECK = ("check", "--format", "github")


@pytest.fixture(scope="session")
def repository_first_push(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, list[Run]]:
    """The first push of docs/ci.md's sharded workflow on fresh checkouts of this repository: every shard job
    compiles its slice with no cache, then the merge job joins the shards' results and caches. Its merge
    checkout (the joined cache included) and the merge job's runs.

    Compiling the bundled kernels takes minutes: this is the session's one cold compile of them. The workflow
    test checks this push; the tests of this repository's gate start from the cache it joined
    (`repository_checked`). Nothing here is changed after the push.
    """
    from workflows import run_matrix, workflow  # it imports this module

    def push(folder: Path) -> dict:
        checkout, runs = run_matrix(workflow("### A GitHub Actions matrix"), folder, restored=None)
        return {"checkout": str(checkout), "runs": [asdict(run) for run in runs]}

    data = once(tmp_path_factory, "first-push", push)
    return Path(data["checkout"]), [Run(**run) for run in data["runs"]]


@pytest.fixture(scope="session")
def repository_checked(tmp_path_factory: pytest.TempPathFactory,
                    repository_first_push: tuple[Path, list[Run]]) -> tuple[Path, Run]:
    """A fresh checkout of this repository (`repository_checkout`) with the cache the sharded first push joined,
    after `kgate check --format github` there (the first step of the README's CI workflow): its folder, cache
    included, and that run.

    Every variant is in the cache, so the run compiles nothing; its report is the bytes a cold run gives (a
    warm cache changes no report: tests/test_determinism.py), which the workflow test also sees (the merged
    shards equal it). The tests of this repository's gate work on copies (`copy_repository`); the folder
    itself is never changed after the check.
    """
    def check(folder: Path) -> dict:
        checkout = repository_checkout(folder / "checkout")
        shutil.copytree(repository_first_push[0] / ".kgate-cache", checkout / ".kgate-cache", symlinks=True)
        return {"checkout": str(checkout), "run": asdict(kgate(*REPOSITORY_FIRST_CHECK, cwd=checkout))}

    data = once(tmp_path_factory, "repository-checked", check)
    return Path(data["checkout"]), Run(**data["run"])


def copy_repository(repository_checked: tuple[Path, Run], dest: Path) -> Path:
    """A copy of the cold-checked checkout of this repository in `dest`, its cache included."""
    target = dest / "checkout"
    shutil.copytree(repository_checked[0], target, symlinks=True)
    return target


def expectations(folder: Path, suffixes: tuple[str, ...] = (".py",), *,
                 optional: bool = False) -> set[tuple[str, int, str, str]]:
    """(path, line, code, target) from `# expect: CODE@target ...` comments in a fixture folder.

    `target` is what follows the `@`: a compile target for compiled rules, a
    1-based column for source rules. `# expect-next-line: ...` states the
    findings of the following line, for lines that cannot carry a comment.
    Codes after `may:` (`# expect: KG102@sm_90a may: KG103@sm_90a`) are findings a
    compiler version decides (a spill at the edge): with `optional`, those are returned
    instead, and a test accepts them present or absent.
    Files are read as bytes (a fixture may be deliberately not UTF-8).
    """
    out = set()
    for path in sorted(folder.rglob("*")):
        if path.suffix not in suffixes and path.name not in suffixes:
            continue
        text = path.read_bytes().decode("utf-8", errors="replace")
        for number, line in enumerate(text.splitlines(), 1):
            if "#" not in line and "//" not in line:
                continue
            for marker, offset in (("expect:", 0), ("expect-next-line:", 1)):
                if marker not in line:
                    continue
                maybe = False
                for item in line.split(marker, 1)[1].split():
                    if item == "may:":
                        maybe = True
                        continue
                    if maybe != optional:
                        continue
                    code, _, target = item.partition("@")
                    out.add((path.relative_to(folder).as_posix(), number + offset, code, target))
    return out


def variant_key(keys: Iterable[str], kernel: str, readable: str, target: str) -> str:
    """The one `kernel|variant|target` key among `keys` whose Triton variant reads `readable` before its pointee
    types and the tag of its specialisation. Tests name variants by that readable part, never by the tag: the
    tag hashes what Triton's launcher decided."""
    pattern = re.compile(re.escape(f"{kernel}|{readable}") + r"(,[a-z0-9+]+)?#[0-9a-f]{8}\|" + re.escape(target))
    found = sorted(key for key in keys if pattern.fullmatch(key))
    assert len(found) == 1, (kernel, readable, target, found)
    return found[0]


def session_processes(sid: int) -> list[str]:
    """Processes of a session still running (zombies waiting for a reaper are not running)."""
    out = []
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        try:
            fields = Path(f"/proc/{entry}/stat").read_text().rsplit(")", 1)[1].split()
            command = Path(f"/proc/{entry}/cmdline").read_bytes().replace(b"\0", b" ").decode(errors="replace")
        except OSError:
            continue
        if int(fields[3]) == sid and fields[0] != "Z":
            out.append(f"{entry} {command[:120]}")
    return out


def kgate_modules_reached(start: Iterable[str]) -> set[str]:
    """The kgate modules `start` reaches through the modules it imports (at their top or inside a function), read
    from their source: `from kgate.compile import units` is a module, `from kgate.compile.cache import Cache` its
    module's."""
    import ast
    import importlib.util

    def is_module(name: str) -> bool:
        try:
            return importlib.util.find_spec(name) is not None
        except ModuleNotFoundError:
            return False

    def imports(name: str) -> set[str]:
        spec = importlib.util.find_spec(name)
        assert spec is not None and spec.origin is not None
        out: set[str] = set()
        for node in ast.walk(ast.parse(Path(spec.origin).read_text(encoding="utf-8"))):
            if isinstance(node, ast.ImportFrom) and node.module and node.module.startswith("kgate") and not node.level:
                out.update(f"{node.module}.{a.name}" if is_module(f"{node.module}.{a.name}") else node.module
                           for a in node.names)
            elif isinstance(node, ast.Import):
                out.update(alias.name for alias in node.names if alias.name.startswith("kgate"))
        return out

    wanted, seen = list(start), set[str]()
    while wanted:
        name = wanted.pop()
        if name not in seen:
            seen.add(name)
            wanted.extend(imports(name))
    return seen


def after_each_lint(monkeypatch: pytest.MonkeyPatch, then: Callable[[str, str], None]) -> None:
    """Call `then(path, rel)` after each file a kgate run in this process reads from disk and lints."""
    from kgate.evaluate import source as engine

    real = engine.lint_file

    def lint_file(path: str, rel: str, rules: list[engine.SourceRule]) -> tuple[engine.FileResult, bytes | None]:
        out = real(path, rel, rules)
        then(path, rel)
        return out

    monkeypatch.setattr(engine, "lint_file", lint_file)


def after_read(monkeypatch: pytest.MonkeyPatch, name: str, read: int, act: Callable[[str], None]) -> None:
    """After kgate's `read`-th read of the file `name`, `act(path)`: another program changes it meanwhile."""
    reads = [0]

    def then(path: str, rel: str) -> None:
        if rel == name:
            reads[0] += 1
            if reads[0] == read:
                act(path)

    after_each_lint(monkeypatch, then)
