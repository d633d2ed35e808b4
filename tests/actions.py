"""A GitHub Actions runner in miniature, for the workflows of docs/ci.md (tests/test_ci_workflows.py).

What it does as GitHub does: `${{ }}` expressions (tests/expressions.py) and `if:` conditions (a condition
without a status function means `success() && (...)`), step outcomes, `env:` of the workflow, job and step,
`run:` steps as `bash --noprofile --norc -eo pipefail`, matrices, `needs`, and these actions:

- `actions/checkout`: the project, committed as a git repository (`Play.checkout` makes it);
- `actions/setup-python`: a fresh virtual environment of this Python, first on `PATH`, with pip upgraded;
- `actions/cache`, `actions/cache/restore`, `actions/cache/save`: a store of folders by key and scope, with
  GitHub's rules: a run restores from its own branch (a pull request: its merge ref), a pull request's base
  branch and the default branch, the exact key first, then the newest entry whose key starts with a
  `restore-keys` line; a key is never saved twice;
- `actions/upload-artifact`, `actions/download-artifact`: the run's artifacts (hidden files left out unless
  `include-hidden-files`; `merge-multiple` copies every match into one folder);
- `github/codeql-action/upload-sarif`: the file must exist and be valid SARIF 2.1.0; it is kept as uploaded.

The steps see no nvcc: `PATH` is this machine's without the folders that hold one, and CUDA_HOME and
CUDA_PATH are unset. The runner's Python has pip only: a job has what its own steps install. Installing the
same packages again for every job would take most of the play's time, so a job whose install steps (the
`run:` steps that call pip) are those of an earlier job reuses that job's environment, after running the
steps again (pip then has nothing to do).
"""

from __future__ import annotations

import fnmatch
import glob
import hashlib
import itertools
import json
import os
import re
import shutil
import subprocess
import sys
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from expressions import Evaluator, as_text, tokens, truthy
from report_helpers import validate_sarif

EXPRESSION = re.compile(r"\$\{\{\s*(.*?)\s*\}\}")
STATUS_FUNCTIONS = re.compile(r"\b(always|success|failure|cancelled)\(")
# How this machine reaches a package index (a proxy, its certificates, a mirror): passed on to the steps.
NETWORK = {"HTTP_PROXY", "HTTPS_PROXY", "NO_PROXY", "http_proxy", "https_proxy", "no_proxy", "SSL_CERT_FILE",
           "SSL_CERT_DIR", "REQUESTS_CA_BUNDLE", "CURL_CA_BUNDLE", "PIP_CERT", "PIP_INDEX_URL", "PIP_TRUSTED_HOST",
           "PIP_DEFAULT_TIMEOUT"}


@dataclass(frozen=True)
class Event:
    """What triggered a run: `push` of a branch or tag, or `pull_request` (number, base branch)."""

    name: str
    ref: str
    base_ref: str = ""

    @staticmethod
    def push(branch: str = "main") -> Event:
        return Event("push", f"refs/heads/{branch}")

    @staticmethod
    def tag(name: str) -> Event:
        return Event("push", f"refs/tags/{name}")

    @staticmethod
    def pull_request(number: int, base: str = "main") -> Event:
        return Event("pull_request", f"refs/pull/{number}/merge", base)

    @property
    def ref_type(self) -> str:
        return "tag" if self.ref.startswith("refs/tags/") else "branch"


@dataclass
class CacheStore:
    """`actions/cache`'s store: entries of (key, scope, folder), in the order they were saved."""

    root: Path
    default_branch: str = "main"
    entries: list[tuple[str, str, Path]] = field(default_factory=list)

    def scopes(self, event: Event) -> list[str]:
        out = [event.ref]
        if event.base_ref:
            out.append(f"refs/heads/{event.base_ref}")
        out.append(f"refs/heads/{self.default_branch}")
        return list(dict.fromkeys(out))

    def find(self, event: Event, key: str, restore_keys: list[str]) -> tuple[str, str, Path] | None:
        for scope in self.scopes(event):
            mine = [entry for entry in self.entries if entry[1] == scope]
            exact = [entry for entry in mine if entry[0] == key]
            if exact:
                return exact[-1]
            for prefix in restore_keys:
                matches = [entry for entry in mine if entry[0].startswith(prefix)]
                if matches:
                    return matches[-1]
        return None

    def save(self, event: Event, key: str, folder: Path) -> str:
        if any(entry[0] == key and entry[1] == event.ref for entry in self.entries):
            return f"Cache already exists: {key}"
        if not folder.is_dir():
            return f"Path Validation Error: {folder.name} does not exist, hence no cache is being saved."
        dest = self.root / f"{len(self.entries)}"
        shutil.copytree(folder, dest, symlinks=True)
        self.entries.append((key, event.ref, dest))
        return f"Cache saved with key: {key}"


@dataclass
class Step:
    name: str
    outcome: str  # success, failure or skipped
    stdout: str = ""
    stderr: str = ""
    note: str = ""  # what an action did


@dataclass
class Job:
    name: str
    matrix: dict[str, Any]
    workspace: Path
    env: dict[str, str]
    steps: list[Step]

    @property
    def failed(self) -> bool:
        return any(step.outcome == "failure" for step in self.steps)

    def step(self, name: str) -> Step:
        (found,) = [step for step in self.steps if step.name == name]
        return found


@dataclass
class Run:
    event: Event
    number: int
    jobs: list[Job]
    sarif: list[dict[str, Any]]  # what upload-sarif received: {"category", "file", "doc", "job"}

    def job(self, name: str, **matrix: Any) -> Job:
        (found,) = [job for job in self.jobs if job.name == name and all(job.matrix.get(k) == v
                                                                          for k, v in matrix.items())]
        return found


def path_without_nvcc() -> str:
    """This machine's PATH without the folders that hold an nvcc."""
    folders = os.environ.get("PATH", "").split(os.pathsep)
    return os.pathsep.join(f for f in folders if f and not os.path.exists(os.path.join(f, "nvcc")))


@dataclass
class Play:
    """Runs of one workflow on one project: `checkout(workspace, event)` puts the project in place."""

    doc: dict[str, Any]
    root: Path
    checkout: Callable[[Path, Event], None]
    rewrite: Callable[[str], str] = lambda script: script  # a `run:` script as this machine runs it
    python: str = sys.executable
    cache: CacheStore = field(init=False)
    runs: int = 0
    environments: dict[tuple[str, ...], Path] = field(default_factory=dict)

    def __post_init__(self) -> None:
        self.root.mkdir(parents=True, exist_ok=True)
        self.cache = CacheStore(self.root / "cache-store")
        self.cache.root.mkdir()

    def run(self, event: Event) -> Run:
        self.runs += 1
        number = self.runs
        folder = self.root / f"run-{number}"
        artifacts = folder / "artifacts"
        artifacts.mkdir(parents=True)
        run = Run(event, number, [], [])
        done: dict[str, bool] = {}
        for name in _job_order(self.doc["jobs"]):
            spec = self.doc["jobs"][name]
            needs = spec.get("needs", [])
            needs = [needs] if isinstance(needs, str) else needs
            if not all(done.get(need) for need in needs):
                done[name] = False
                continue
            ok = True
            for index, matrix in enumerate(_matrices(spec)):
                workspace = folder / f"{name}-{index}"
                job = self._job(name, spec, matrix, workspace, event, number, artifacts, run)
                run.jobs.append(job)
                ok = ok and not job.failed
            done[name] = ok
        return run

    # One job, step by step.
    def _job(self, name: str, spec: dict[str, Any], matrix: dict[str, Any], workspace: Path, event: Event,
             number: int, artifacts: Path, run: Run) -> Job:
        workspace.mkdir(parents=True)
        home = workspace.parent / f"{workspace.name}-home"
        home.mkdir()
        env = {
            "PATH": path_without_nvcc(), "HOME": str(home), "LANG": "C.UTF-8", "CI": "true",
            "GITHUB_ACTIONS": "true", "RUNNER_OS": "Linux", "GITHUB_WORKSPACE": str(workspace),
            "GITHUB_REF": event.ref, "GITHUB_EVENT_NAME": event.name, "GITHUB_RUN_ID": str(number),
            # pip as on a runner: the public index, no configuration of this machine; its download cache kept.
            "PIP_CONFIG_FILE": os.devnull, "PIP_DISABLE_PIP_VERSION_CHECK": "1",
            "PIP_CACHE_DIR": _pip_cache_dir(),
            **{name: value for name, value in os.environ.items() if name in NETWORK},
        }
        job = Job(name, matrix, workspace, env, [])
        context = _Context(self, job, event, number, spec)
        declared = {**self.doc.get("env", {}), **spec.get("env", {})}
        env.update({k: context.expand(as_text(v)) for k, v in declared.items()})
        post: list[Callable[[], None]] = []
        for step in spec["steps"]:
            label = context.expand(step.get("name") or step.get("uses") or step["run"].splitlines()[0])
            if not context.condition(step.get("if")):
                job.steps.append(Step(label, "skipped"))
                context.record(step, "skipped")
                continue
            step_env = {**env, **{k: context.expand(as_text(v)) for k, v in step.get("env", {}).items()}}
            if "run" in step:
                result = self._run(label, context.expand(step["run"]), workspace, step_env)
            else:
                result = self._use(label, step, context, artifacts, run, post)
            job.steps.append(result)
            context.record(step, result.outcome)
        for action in post:
            action()
        return job

    def _run(self, label: str, script: str, workspace: Path, env: dict[str, str]) -> Step:
        path = workspace.parent / f"{workspace.name}-step.sh"
        path.write_text(self.rewrite(script), encoding="utf-8")
        proc = subprocess.run(["bash", "--noprofile", "--norc", "-eo", "pipefail", str(path)], cwd=workspace,
                              env=env, capture_output=True, text=True, timeout=1800, check=False)
        return Step(label, "success" if proc.returncode == 0 else "failure", proc.stdout, proc.stderr,
                    f"exit {proc.returncode}")

    def _use(self, label: str, step: dict[str, Any], context: _Context, artifacts: Path, run: Run,
             post: list[Callable[[], None]]) -> Step:
        action = step["uses"].split("@")[0]
        args = {k: context.expand(as_text(v)) for k, v in (step.get("with") or {}).items()}
        job = context.job
        if action == "actions/checkout":
            self.checkout(job.workspace, context.event)
            return Step(label, "success")
        if action == "actions/setup-python":
            return self._setup_python(label, args, context)
        if action in ("actions/cache", "actions/cache/restore"):
            note = self._restore(args, context)
            if action == "actions/cache":
                post.append(lambda: job.steps.append(Step(f"Post {label}", "success",
                                                          note=self._save(args, context))))
            return Step(label, "success", note=note)
        if action == "actions/cache/save":
            return Step(label, "success", note=self._save(args, context))
        if action == "actions/upload-artifact":
            return self._upload(label, args, job.workspace, artifacts)
        if action == "actions/download-artifact":
            return self._download(label, args, job.workspace, artifacts)
        if action == "github/codeql-action/upload-sarif":
            return self._upload_sarif(label, args, job, run)
        raise AssertionError(f"no emulation of {step['uses']}")

    def _setup_python(self, label: str, args: dict[str, str], context: _Context) -> Step:
        wanted = args.get("python-version", "")
        have = f"{sys.version_info.major}.{sys.version_info.minor}"
        installs = tuple(context.expand(step["run"]) for step in context.spec["steps"]
                         if "pip install" in step.get("run", ""))
        venv = self.environments.get((wanted, *installs))
        if venv is None:
            venv = self.root / f"venv-{len(self.environments) + 1}"
            subprocess.run([self.python, "-m", "venv", str(venv)], check=True, capture_output=True)
            upgrade = subprocess.run([str(venv / "bin" / "python"), "-m", "pip", "install", "-q", "--upgrade", "pip"],
                                     env=context.job.env, capture_output=True, text=True, timeout=600, check=False)
            if upgrade.returncode != 0:
                return Step(label, "failure", upgrade.stdout, upgrade.stderr)
            self.environments[(wanted, *installs)] = venv
        context.job.env["PATH"] = f"{venv / 'bin'}{os.pathsep}{context.job.env['PATH']}"
        context.job.env["pythonLocation"] = str(venv)
        return Step(label, "success", note=f"Python {have} (asked: {wanted}) in {venv.name}")

    def _restore(self, args: dict[str, str], context: _Context) -> str:
        restore_keys = [line.strip() for line in args.get("restore-keys", "").splitlines() if line.strip()]
        found = self.cache.find(context.event, args["key"], restore_keys)
        if found is None:
            return "Cache not found"
        target = context.job.workspace / args["path"]
        shutil.copytree(found[2], target, symlinks=True, dirs_exist_ok=True)
        return f"Cache restored from key: {found[0]} ({found[1]})"

    def _save(self, args: dict[str, str], context: _Context) -> str:
        return self.cache.save(context.event, args["key"], context.job.workspace / args["path"])

    def _upload(self, label: str, args: dict[str, str], workspace: Path, artifacts: Path) -> Step:
        source = workspace / args["path"]
        dest = artifacts / args["name"]
        if dest.exists():
            return Step(label, "failure", note=f"an artifact named {args['name']} exists")
        hidden = args.get("include-hidden-files", "false") == "true"
        files = [source] if source.is_file() else sorted(p for p in source.rglob("*") if p.is_file()) \
            if source.is_dir() else []
        base = source.parent if source.is_file() else source
        kept = [p for p in files if hidden or not any(part.startswith(".")
                                                      for part in p.relative_to(workspace).parts)]
        if not kept:
            outcome = "failure" if args.get("if-no-files-found", "warn") == "error" else "success"
            return Step(label, outcome, note=f"No files were found with the provided path: {args['path']}")
        for path in kept:
            target = dest / path.relative_to(base)
            target.parent.mkdir(parents=True, exist_ok=True)
            shutil.copy2(path, target)
        return Step(label, "success", note=f"{len(kept)} file(s)")

    def _download(self, label: str, args: dict[str, str], workspace: Path, artifacts: Path) -> Step:
        names = sorted(p.name for p in artifacts.iterdir() if fnmatch.fnmatch(p.name, args["pattern"]))
        target = workspace / args.get("path", ".")
        merge = args.get("merge-multiple", "false") == "true"
        for name in names:
            shutil.copytree(artifacts / name, target if merge else target / name, dirs_exist_ok=True)
        return Step(label, "success", note=f"{len(names)} artifact(s)")

    def _upload_sarif(self, label: str, args: dict[str, str], job: Job, run: Run) -> Step:
        path = job.workspace / args["sarif_file"]
        if not path.is_file():
            return Step(label, "failure", note=f"Path does not exist: {args['sarif_file']}")
        doc = json.loads(path.read_text(encoding="utf-8"))
        validate_sarif(doc)
        run.sarif.append({"category": args.get("category", ""), "file": args["sarif_file"], "doc": doc,
                          "job": job.name})
        return Step(label, "success", note=f"uploaded {args['sarif_file']}")


class _Context:
    """The contexts a job's expressions read: github, runner, matrix, env, steps; and the job's status."""

    def __init__(self, play: Play, job: Job, event: Event, number: int, spec: dict[str, Any]) -> None:
        self.play, self.job, self.event, self.number, self.spec = play, job, event, number, spec
        self.outcomes: dict[str, str] = {}

    def record(self, step: dict[str, Any], outcome: str) -> None:
        if "id" in step:
            self.outcomes[step["id"]] = outcome

    def lookup(self, path: str) -> Any:
        head, _, rest = path.partition(".")
        github = {"ref": self.event.ref, "ref_type": self.event.ref_type, "event_name": self.event.name,
                  "base_ref": self.event.base_ref, "run_id": str(self.number), "run_attempt": "1",
                  "repository": "owner/project", "ref_name": self.event.ref.rsplit("/", 1)[-1]}
        if head == "github":
            return github[rest]
        if head == "runner":
            return {"os": "Linux", "arch": "X64"}[rest]
        if head == "matrix":
            return self.job.matrix[rest]
        if head == "env":
            return self.job.env.get(rest)
        if head == "steps":
            step_id, _, attribute = rest.partition(".")
            if attribute not in ("outcome", "conclusion"):
                raise ValueError(f"no emulation of steps.{rest}")
            return self.outcomes.get(step_id)
        raise ValueError(f"no emulation of the context {path!r}")

    def call(self, name: str, args: list[Any]) -> Any:
        failed = self.job.failed
        if name == "always":
            return True
        if name == "success":
            return not failed
        if name == "failure":
            return failed
        if name == "cancelled":
            return False
        if name == "hashFiles":
            return hash_files(self.job.workspace, [str(a) for a in args])
        if name == "startsWith":
            return str(args[0]).lower().startswith(str(args[1]).lower())
        if name == "contains":
            return str(args[1]).lower() in str(args[0]).lower()
        raise ValueError(f"no emulation of the function {name}()")

    def evaluate(self, text: str) -> Any:
        return Evaluator(tokens(text), self.lookup, self.call).parse()

    def expand(self, text: str) -> str:
        return EXPRESSION.sub(lambda m: as_text(self.evaluate(m.group(1))), text)

    def condition(self, text: Any) -> bool:
        if text is None:
            return not self.job.failed
        if isinstance(text, bool):
            return text and not self.job.failed
        inner = EXPRESSION.fullmatch(text.strip())
        expression = inner.group(1) if inner else text
        if not STATUS_FUNCTIONS.search(expression):
            expression = f"success() && ({expression})"
        return truthy(self.evaluate(expression))


def hash_files(root: Path, patterns: list[str]) -> str:
    """`hashFiles`: a SHA-256 of the SHA-256 of every matching file, in path order; empty when none match."""
    paths = sorted({p for pattern in patterns for p in glob.glob(pattern, root_dir=root, recursive=True)
                    if (root / p).is_file()})
    if not paths:
        return ""
    outer = hashlib.sha256()
    for path in paths:
        outer.update(hashlib.sha256((root / path).read_bytes()).digest())
    return outer.hexdigest()


def condition_holds(text: Any, *, failed: bool, outcomes: dict[str, str], event: Event | None = None) -> bool:
    """Whether a step's `if:` lets it run, for a job state given by hand (a step before it failed or not, the
    outcomes of steps by id): for checking a workflow's conditions without running it."""
    job = Job("-", {}, Path("."), {}, [Step("-", "failure" if failed else "success")])
    context = _Context(None, job, event or Event.push(), 1, {})  # type: ignore[arg-type]
    context.outcomes = outcomes
    return context.condition(text)


def _pip_cache_dir() -> str:
    found = subprocess.run([sys.executable, "-m", "pip", "cache", "dir"], capture_output=True, text=True, check=False)
    path = found.stdout.strip()
    return path if found.returncode == 0 and path else str(Path.home() / ".cache" / "pip")


def _job_order(jobs: dict[str, Any]) -> list[str]:
    order: list[str] = []
    while len(order) < len(jobs):
        for name, spec in jobs.items():
            needs = spec.get("needs", [])
            needs = [needs] if isinstance(needs, str) else needs
            if name not in order and all(need in order for need in needs):
                order.append(name)
    return order


def _matrices(spec: dict[str, Any]) -> list[dict[str, Any]]:
    matrix = (spec.get("strategy") or {}).get("matrix") or {}
    if not matrix:
        return [{}]
    names = sorted(matrix)
    return [dict(zip(names, values)) for values in itertools.product(*(matrix[n] for n in names))]
