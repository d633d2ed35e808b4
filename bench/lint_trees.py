"""Measuring `kgate lint` against ruff on one tree, every figure side by side in the same rounds.

Used by `bench/lint_bench.py`. Each tree is copied into a scratch folder first (its cache is written there, the
original is never touched), and measured in rounds; each round runs every command once, one after another, so that
the commands share the machine's load, and the median of the rounds counts. Per tree:

- the floor: `python -c "import kgate"`;
- cold: `kgate lint` with its cache removed before each run, against `ruff check --no-cache --select ALL`
  (target: at most floor + 0.5 x ruff), with the peak memory of each (kgate and the workers it forks, summed);
- warm: `kgate lint` with nothing changed since its last run, against `ruff check --no-cache --select E9`
  (target: at most floor + 2 x ruff);
- one file changed: a statement appended to a function of one file (the same edit every round, with the round's
  number), then `kgate lint`, against a cold `kgate lint --no-cache FILE` of that one file (target: at most warm +
  1.2 x that); for two files: one no other file's verdict reads (`leaf`) and the project module most imported by the
  tree's kernel modules (`read by others`);
- every finding the same: the warm run's and each changed run's findings against `kgate lint --no-cache` on the same
  files.
"""

from __future__ import annotations

import json
import os
import re
import shutil
import statistics
import subprocess
import sys
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

IGNORED_COPY = shutil.ignore_patterns(".kgate-cache", ".ruff_cache", ".git")


@dataclass
class Figures:
    """Wall and CPU seconds of each round of one command, and its peak memory (kB) where measured."""

    walls: list[float] = field(default_factory=list)
    cpus: list[float] = field(default_factory=list)
    peak_kb: int = 0

    @property
    def wall(self) -> float:
        return statistics.median(self.walls) if self.walls else float("nan")

    @property
    def cpu(self) -> float:
        return statistics.median(self.cpus) if self.cpus else float("nan")


class PeakRss:
    """The summed resident memory of a process and its descendants, sampled every few milliseconds."""

    def __init__(self, pid: int, interval: float = 0.005) -> None:
        self.pid, self.interval, self.peak_kb = pid, interval, 0
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)
        self._thread.start()

    def _pids(self) -> list[int]:
        out, stack = [], [self.pid]
        while stack:
            pid = stack.pop()
            out.append(pid)
            try:
                for task in os.listdir(f"/proc/{pid}/task"):
                    with open(f"/proc/{pid}/task/{task}/children") as handle:
                        stack.extend(int(c) for c in handle.read().split())
            except OSError:
                pass
        return out

    def _run(self) -> None:
        while not self._stop.is_set():
            total = 0
            for pid in self._pids():
                try:
                    with open(f"/proc/{pid}/statm") as handle:
                        total += int(handle.read().split()[1]) * (os.sysconf("SC_PAGE_SIZE") // 1024)
                except (OSError, ValueError, IndexError):
                    pass
            self.peak_kb = max(self.peak_kb, total)
            self._stop.wait(self.interval)

    def stop(self) -> int:
        self._stop.set()
        self._thread.join()
        return self.peak_kb


def run(argv: list[str], cwd: Path, env: dict[str, str], figures: Figures | None = None, memory: bool = False,
        capture: bool = False) -> str:
    """Run one command, adding its wall and CPU seconds (and peak memory) to `figures`; its stdout if `capture`."""
    before = os.times()
    started = time.perf_counter()
    proc = subprocess.Popen(argv, cwd=cwd, env=env, stdout=subprocess.PIPE if capture else subprocess.DEVNULL,
                            stderr=subprocess.PIPE)
    sampler = PeakRss(proc.pid) if memory else None
    out, err = proc.communicate()
    wall = time.perf_counter() - started
    after = os.times()
    peak = sampler.stop() if sampler else 0
    if proc.returncode not in (0, 1):
        raise SystemExit(f"{' '.join(argv)} in {cwd} failed ({proc.returncode}):\n{err.decode()[-3000:]}")
    if figures is not None:
        figures.walls.append(wall)
        figures.cpus.append(after.children_user - before.children_user + after.children_system
                            - before.children_system)
        figures.peak_kb = max(figures.peak_kb, peak)
    return out.decode() if capture else ""


def findings(report: str) -> list[tuple[object, ...]]:
    """The findings of a `--format json` report, each as a tuple of its fields, sorted."""
    return sorted(tuple(json.dumps(f.get(k), sort_keys=True) for k in sorted(f)) for f in json.loads(report)["findings"])


# --------------------------------------------------------------------------- which files to edit

_FROM = re.compile(rb"^[ \t]*from[ \t]+(\.*)([\w.]*)[ \t]+import", re.MULTILINE)
_IMPORT = re.compile(rb"^[ \t]*import[ \t]+([\w.]+)", re.MULTILINE)
_SKIP = {".git", ".kgate-cache", ".ruff_cache", "node_modules", "build", "dist", "__pycache__"}


def python_files(root: Path) -> list[Path]:
    found = []
    for here, folders, names in os.walk(root):
        folders[:] = sorted(d for d in folders if d not in _SKIP and not d.startswith("."))
        found.extend(Path(here) / n for n in sorted(names) if n.endswith(".py"))
    return found


def _module_file(root: Path, importer: Path, dots: bytes, module: bytes) -> Path | None:
    parts = [p for p in module.decode("utf-8", "replace").split(".") if p]
    bases = [importer.parent.joinpath(*[".."] * (len(dots) - 1))] if dots else [root, root / "src", root / "python"]
    for base in bases:
        for depth in range(len(parts), 0, -1):
            stem = base.joinpath(*parts[:depth])
            for candidate in (stem.with_suffix(".py"), stem / "__init__.py"):
                if candidate.is_file():
                    return candidate.resolve()
    return None


def edit_targets(root: Path) -> dict[str, Path]:
    """`leaf`: a module with a function whose text names no kernel and that no kernel module imports;
    `read by others`: the project module the kernel modules (those that spell `triton`) import most often."""
    counts: dict[Path, int] = {}
    imported: set[Path] = set()
    files = python_files(root)
    for path in files:
        data = path.read_bytes()
        for dots, module in _FROM.findall(data):
            found = _module_file(root, path, dots, module)
            if found is not None:
                imported.add(found)
                if b"triton" in data:
                    counts[found] = counts.get(found, 0) + 1
        for (module,) in ((m,) for m in _IMPORT.findall(data)):
            found = _module_file(root, path, b"", module)
            if found is not None:
                imported.add(found)
    out: dict[str, Path] = {}
    leaves = [p for p in files if p.resolve() not in imported and b"triton" not in p.read_bytes()
              and _function_line(p.read_text("utf-8", "replace")) is not None and "test" not in p.name]
    if leaves:
        out["leaf"] = leaves[len(leaves) // 2]
    readable = [p for p in counts if _function_line(p.read_text("utf-8", "replace")) is not None]
    if readable:
        out["read by others"] = max(readable, key=lambda p: (counts[p], str(p)))
    return out


def _function_line(text: str) -> tuple[int, str] | None:
    """(index, indentation) of the last line of the last top-level function's body whose text is a plain statement."""
    lines = text.splitlines()
    last = None
    inside = None
    for index, line in enumerate(lines):
        if line.startswith("def "):
            inside = index
        elif line and not line[0].isspace() and not line.startswith((")", "#")):
            inside = None
        elif inside is not None and line.strip() and not line.strip().startswith(("#", '"', "'", ")", "]", "}")):
            stripped = line.lstrip()
            indent = line[:len(line) - len(stripped)]
            if not line.rstrip().endswith(("\\", ",", "(", "[", "{", ":")) and stripped.split()[0] not in (
                    "return", "raise", "yield", "else:", "elif", "except", "finally:", "continue", "break"):
                last = (index, indent)
    return last


def edit(path: Path, round_: int) -> None:
    """Add a statement after the last plain statement of the file's last function (`_ = ROUND`): the module's
    functions change, what it binds at its top level does not."""
    text = path.read_text("utf-8")
    found = _function_line(text)
    assert found is not None, path
    index, indent = found
    lines = text.splitlines(keepends=True)
    lines[index] = lines[index].rstrip("\r\n") + f"\n{indent}_kgate_bench_edit = {round_}\n"
    path.write_text("".join(lines), "utf-8")


# --------------------------------------------------------------------------- one tree


@dataclass
class TreeResult:
    name: str
    files: int
    figures: dict[str, Figures]
    same_findings: dict[str, bool]
    edited: dict[str, str]


def measure_tree(name: str, root: Path, kgate: str, ruff: str, env: dict[str, str], rounds: int,
                 say: Callable[[str], None] = lambda _text: None) -> TreeResult:
    """Every figure of one tree (already copied where it may be written), `rounds` rounds."""
    fig: dict[str, Figures] = {}

    def timed(label: str, argv: list[str], memory: bool = False, capture: bool = False) -> str:
        return run(argv, root, env, fig.setdefault(label, Figures()), memory=memory, capture=capture)

    targets = edit_targets(root)
    lint = [kgate, "lint", "--format", "json", "--exit-zero"]
    cache = root / ".kgate-cache"
    same: dict[str, bool] = {}
    for round_ in range(1, rounds + 1):
        say(f"  {name}: round {round_} of {rounds}")
        timed("floor", [sys.executable, "-c", "import kgate"])
        shutil.rmtree(cache, ignore_errors=True)
        timed("kgate cold", lint, memory=True)
        timed("ruff ALL", [ruff, "check", "--no-cache", "--select", "ALL", "--exit-zero", "-q", "."], memory=True)
        warm = timed("kgate warm", lint, capture=True)
        timed("ruff E9", [ruff, "check", "--no-cache", "--select", "E9", "--exit-zero", "-q", "."])
        fresh = run(lint + ["--no-cache"], root, env, capture=True)
        same["warm"] = same.get("warm", True) and findings(warm) == findings(fresh)
        for kind, path in targets.items():
            edit(path, round_)
            changed = timed(f"changed: {kind}", lint, capture=True)
            timed(f"cold one file: {kind}", lint + ["--no-cache", str(path)])
            fresh = run(lint + ["--no-cache"], root, env, capture=True)
            same[kind] = same.get(kind, True) and findings(changed) == findings(fresh)
            timed("kgate warm", lint)  # the changed run left a record: nothing changed since
    return TreeResult(name, len(python_files(root)), fig, same,
                      {kind: str(path.relative_to(root)) for kind, path in targets.items()})


def ratios(result: TreeResult) -> list[tuple[str, float, float, float]]:
    """(target, kgate seconds, the target's seconds, kgate / target) of each target of a tree."""
    fig = result.figures
    floor = fig["floor"].wall
    out = [("cold <= floor + 0.5 x ruff ALL", fig["kgate cold"].wall, floor + 0.5 * fig["ruff ALL"].wall),
           ("warm <= floor + 2 x ruff E9", fig["kgate warm"].wall, floor + 2 * fig["ruff E9"].wall)]
    for kind in result.edited:
        out.append((f"changed ({kind}) <= warm + 1.2 x cold one file", fig[f"changed: {kind}"].wall,
                    fig["kgate warm"].wall + 1.2 * fig[f"cold one file: {kind}"].wall))
    out.append(("peak memory <= 2 x ruff ALL's (MB)", fig["kgate cold"].peak_kb / 1024,
                2 * fig["ruff ALL"].peak_kb / 1024))
    return [(label, ours, limit, ours / limit if limit else float("inf")) for label, ours, limit in out]
