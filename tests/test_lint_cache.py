"""The lint cache and the parallel engine: a warm run answers from `stat` alone, and no shortcut changes
a verdict."""

from __future__ import annotations

import json
import os
import textwrap
from pathlib import Path

import pytest
from conftest import kgate, kgate_modules_reached

from kgate.core.config import load_config
from kgate.core.selection import build_selection
from kgate.evaluate import source as engine
from kgate.pipeline.lint import LintRun, run_lint

KERNEL = textwrap.dedent("""\
    import triton
    import triton.language as tl


    @triton.autotune(configs=[], key=["{key}"])
    @triton.jit
    def k{index}(x, out, M, D: tl.constexpr, BLOCK: tl.constexpr):
        tl.atomic_add(out, 1)
""")


def project(root: Path, files: int = 3, config: str = "") -> Path:
    (root / "kgate.toml").write_text(config)
    for index in range(files):
        (root / "pkg").mkdir(exist_ok=True)
        (root / "pkg" / f"k{index:03d}.py").write_text(KERNEL.format(key="M" if index % 2 else "D", index=index))
    return root


def lint(root: Path, paths: list[str] | None = None, *, use_cache: bool = True, **overrides: object) -> LintRun:
    config = load_config(start=root).with_overrides(**overrides)
    return run_lint(config, build_selection(config), paths, use_cache=use_cache)


def verdict(run: LintRun) -> list[tuple[str, int, int, str, str]]:
    return [(f.path, f.line, f.col, f.code, f.message) for f in run.findings]


def age(root: Path, seconds: float = 10) -> None:
    """Make every file look written a while ago, as files are when a commit is made."""
    for path in root.rglob("*.py"):
        st = path.stat()
        os.utime(path, ns=(st.st_atime_ns, st.st_mtime_ns - int(seconds * 1e9)))


def test_a_warm_run_reads_no_unchanged_file(tmp_path: Path) -> None:
    root = project(tmp_path)
    age(root)
    cold = lint(root)
    warm = lint(root)
    assert (cold.cached, warm.cached) == (0, 3)
    assert verdict(warm) == verdict(cold) != []


def test_a_file_changed_within_the_same_mtime_is_still_seen(tmp_path: Path) -> None:
    """Written in the same clock tick as it was read: the entry is confirmed by content, not by stat."""
    root = project(tmp_path, files=1)
    path = root / "pkg" / "k000.py"
    st = path.stat()
    first = lint(root)
    path.write_text(path.read_text().replace('key=["D"]', 'key=["M"]'))  # same size
    os.utime(path, ns=(st.st_atime_ns, st.st_mtime_ns))
    assert path.stat().st_size == st.st_size
    second = lint(root)
    assert [f.code for f in first.findings] == ["KG202"]
    assert sorted(f.code for f in second.findings) == ["KG201", "KG202"]


def test_options_and_selection_key_the_cache(tmp_path: Path) -> None:
    root = project(tmp_path)
    age(root)
    assert len(lint(root).findings) == 4  # KG202 in each file, KG201 in k001
    allowed = 'options = { runtime-autotune = { allowed-keys = ["M"] } }\n'
    (root / "kgate.toml").write_text(allowed)
    run = lint(root)
    assert run.cached == 0 and sorted({f.code for f in run.findings}) == ["KG202"]
    caches = list((root / ".kgate-cache" / "v1" / "lint").glob("*.json"))
    assert len(caches) == 2


def test_a_corrupt_cache_is_an_empty_one(tmp_path: Path) -> None:
    root = project(tmp_path)
    age(root)
    expected = verdict(lint(root))
    for cache in (root / ".kgate-cache").rglob("*.json"):
        cache.write_bytes(b"\x00 not json")
    run = lint(root)
    assert run.cached == 0 and verdict(run) == expected
    assert lint(root).cached == 3  # and it was written again


def test_a_cache_nested_too_deeply_to_read_is_an_empty_one(tmp_path: Path) -> None:
    root = project(tmp_path)
    age(root)
    expected = verdict(lint(root))
    for cache in (root / ".kgate-cache").rglob("*.json"):
        cache.write_bytes(b"[" * 100_000)  # json.loads recurses once per level: RecursionError, not ValueError
    run = lint(root)
    assert run.cached == 0 and verdict(run) == expected


def test_linting_some_files_keeps_the_others_entries(tmp_path: Path) -> None:
    root = project(tmp_path)
    age(root)
    lint(root)
    lint(root, [str(root / "pkg" / "k001.py")])
    assert lint(root).cached == 3
    (root / "pkg" / "k002.py").unlink()
    lint(root)  # a whole-project run forgets deleted files
    data = json.loads(next((root / ".kgate-cache" / "v1" / "lint").glob("*.json")).read_text())
    assert sorted(name for name in data["files"] if not name.startswith("\x00")) == ["pkg/k000.py", "pkg/k001.py"]



def _entries(root: Path) -> bytes:
    record = next((root / ".kgate-cache" / "v1" / "lint").glob("*.json")).read_bytes()
    return record[record.index(b',"files":') + len(b',"files":'):-1]


def test_a_changed_file_is_written_after_the_record_it_read_and_read_back_as_written(tmp_path: Path) -> None:
    """After one file changes, the record keeps the other entries' bytes as they were and adds the changed entry
    after them (the later of two entries of a name is the one read back); entries removed rewrite it whole."""
    root = project(tmp_path, files=4)
    age(root)
    lint(root)
    before = _entries(root)
    changed = root / "pkg" / "k001.py"
    changed.write_text(changed.read_text().replace('key=["M"]', 'key=["D"]'))
    os.utime(changed, ns=(changed.stat().st_atime_ns, changed.stat().st_mtime_ns - 10**10))
    expected = verdict(lint(root, use_cache=False))
    assert verdict(lint(root)) == expected
    after = _entries(root)
    assert after.startswith(before[:-1] + b',"pkg/k001.py":') and after.count(b'"pkg/k001.py"') == 2
    assert json.loads(after)["pkg/k001.py"][0][1] == changed.stat().st_mtime_ns
    warm = lint(root)
    assert warm.cached == 4 and verdict(warm) == expected
    (root / "pkg" / "k003.py").unlink()
    lint(root)
    whole = _entries(root)
    assert sorted(name for name in json.loads(whole) if not name.startswith("\x00")) == [  # less the reads table
        "pkg/k000.py", "pkg/k001.py", "pkg/k002.py"]
    assert whole.count(b'"pkg/k001.py"') == 1

def test_parallel_and_serial_runs_agree(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    files = engine.PARALLEL_MIN_FILES * 2
    root = project(tmp_path, files=files)
    (root / "pkg" / "broken.py").write_text("@triton.autotune(\n")
    serial = lint(root, use_cache=False, jobs=1)
    monkeypatch.delenv("PRE_COMMIT", raising=False)
    forks = []
    real_fork = os.fork
    monkeypatch.setattr(os, "fork", lambda: forks.append(1) or real_fork())
    parallel = lint(root, use_cache=False, jobs=2)
    assert len(forks) == 1
    assert len(serial.results) == files + 1
    assert verdict(parallel) == verdict(serial)
    assert sum(f.code == "KG004" for f in serial.findings) == 1


def test_the_command_line_without_a_cache(tmp_path: Path) -> None:
    root = project(tmp_path)
    run = kgate("lint", "--no-cache", "--format", "json", cwd=root)
    assert run.code == 1 and not (root / ".kgate-cache").exists()
    assert kgate("lint", "--format", "json", cwd=root).stdout == run.stdout
    assert (root / ".kgate-cache" / ".gitignore").read_text().strip().endswith("*")


def test_a_record_edited_to_drop_a_files_findings_is_not_trusted(tmp_path: Path) -> None:
    """The file's stats are kept, so only the record's own hash shows the edit: the file is linted again."""
    root = project(tmp_path)
    age(root)
    expected = verdict(lint(root))
    record = next((root / ".kgate-cache" / "v1" / "lint").glob("*.json"))
    data = json.loads(record.read_text())
    entry = data["files"]["pkg/k001.py"]
    assert entry[3][0] != []  # the file's findings
    entry[3][0] = []
    record.write_text(json.dumps(data))
    run = lint(root)
    assert run.cached == 0 and verdict(run) == expected
    assert lint(root).cached == 3  # and it was written again, whole


def test_a_record_copied_over_another_selections_is_not_read(tmp_path: Path) -> None:
    root = project(tmp_path)
    age(root)
    lint(root)
    (root / "kgate.toml").write_text('options = { runtime-autotune = { allowed-keys = ["M"] } }\n')
    expected = verdict(lint(root))
    first, second = sorted((root / ".kgate-cache" / "v1" / "lint").glob("*.json"), key=lambda p: p.stat().st_mtime_ns)
    second.write_bytes(first.read_bytes())  # the other selection's results, whole and sealed
    run = lint(root)
    assert run.cached == 0 and verdict(run) == expected


def test_every_module_a_source_rule_reads_keys_the_cache(tmp_path: Path) -> None:
    """An edit to an analysis a rule asks (its code moved below the rule, into kgate/collect), not only to the rule
    itself, must invalidate the cached verdicts of a development install: every module the source rules import,
    directly or through the modules they import, is among the files whose states key the cache."""
    from kgate.pipeline import lint_cache

    config = load_config(start=project(tmp_path))
    rules = engine.source_rules(build_selection(config))
    assert any(sr.rule.code == "KG202" for sr in rules)
    keyed = {name for name, _path in lint_cache.keyed_modules(rules)}
    seen = kgate_modules_reached(sr.check.__module__ for sr in rules)
    reached = {name for name in seen if name.startswith("kgate.") and name.count(".") > 1 or name in keyed}
    assert "kgate.collect.pyaccess" in reached
    assert sorted(reached - keyed) == []


def test_entries_written_after_the_others_are_folded_in_before_they_pass_an_eighth_of_the_record(
        tmp_path: Path) -> None:
    """The record does not grow with every run: once the entries written after the others would pass an eighth of
    its entries (64 at least), it is written whole again, each file once."""
    from kgate.pipeline.lint_cache import LintCache

    def run(changed: range, tag: int) -> bytes:
        cache = LintCache(tmp_path, "k" * 32)
        for index in changed:
            cache._remember(f"f{index:04d}.py", [index, 0, 0, index], "d" * 32, [[], [], [f"KG{tag}"]], [])
        cache.save()
        return (tmp_path / "v1" / "lint" / f"{'k' * 32}.json").read_bytes()

    run(range(400), 1)  # an eighth: 50, so 64
    assert b'"appended":10,' in run(range(10), 2)
    assert b'"appended":60,' in run(range(10, 60), 3)
    whole = run(range(60, 70), 4)
    assert b'"appended":0,' in whole and whole.count(b'"f0005.py"') == 1
    entries = LintCache(tmp_path, "k" * 32).entries
    assert len(entries) == 400
    assert [entries[f"f{i:04d}.py"][3][2] for i in (5, 50, 65, 300)] == [["KG2"], ["KG3"], ["KG4"], ["KG1"]]


def _record(root: Path) -> tuple[Path, dict]:
    path = next((root / ".kgate-cache" / "v1" / "lint").glob("*.json"))
    return path, json.loads(path.read_bytes())


def test_the_reads_entries_share_are_kept_once_and_read_back_whole(tmp_path: Path) -> None:
    """Every module reads where its `import triton` may come from in the project: the record keeps each such read
    once, in its table, and each entry's reads come back whole, as they were noted."""
    from kgate.pipeline.lint_cache import LintCache

    root = project(tmp_path, files=6)
    age(root)
    expected = verdict(lint(root))
    path, record = _record(root)
    files = record["files"]
    table = [row for name, rows in files.items() if name.startswith("\x00") for row in rows]
    indexes = [i for name, entry in files.items() if not name.startswith("\x00") for i in entry[4]]
    assert table and len(indexes) > 2 * len(table) and all(type(i) is int for i in indexes)
    entries = LintCache(path.parent.parent.parent, path.stem).entries
    assert [[table[i] for i in files[rel][4]] for rel in sorted(entries)] == [entries[rel][4] for rel in sorted(entries)]
    warm = lint(root)
    assert warm.cached == 6 and verdict(warm) == expected


def test_an_entry_whose_reads_the_table_does_not_hold_is_linted_again(tmp_path: Path) -> None:
    """A record written by another kgate, sealed as this one seals but listing reads its table does not hold (an
    index past its end, a negative one, a read given in place of an index), answers none of those entries."""
    from kgate.pipeline import lint_cache

    root = project(tmp_path, files=4)
    age(root)
    expected = verdict(lint(root))
    path, record = _record(root)
    files = record["files"]
    entries = sorted(name for name in files if not name.startswith("\x00"))
    for name, reads in zip(entries, ([10**6], [-1], [["probe:x", None, ""]])):
        files[name][4] = reads
    body = json.dumps(files, separators=(",", ":")).encode()
    path.write_bytes(lint_cache._sealed(body, path.stem))
    run = lint(root)
    assert run.cached == 1 and verdict(run) == expected


def test_each_read_of_the_table_is_checked_once_however_many_entries_list_it(tmp_path: Path,
                                                                           monkeypatch: pytest.MonkeyPatch) -> None:
    """After an edit, a warm run checks what the cached verdicts read: every module reads where its `import triton`
    may come from, and each such read of the record's table is checked once, not once per entry that lists it (a
    project's modules note much the same reads: on flash-linear-attention 98,596 for 2,254 different ones)."""
    from kgate.collect import depends

    root = project(tmp_path, files=6)
    age(root)
    expected = verdict(lint(root))
    (root / "unrelated.py").write_text("x = 1\n")
    path, record = _record(root)
    files = record["files"]
    table = [row for name, rows in files.items() if name.startswith("\x00") for row in rows]
    listed = [i for name, entry in files.items() if not name.startswith("\x00") for i in entry[4]]
    checked: list[object] = []
    real = depends.Check.holds

    def counted(self: depends.Check, reads: list[object]) -> bool:
        checked.extend(reads)
        return real(self, reads)

    monkeypatch.setattr(depends.Check, "holds", counted)
    warm = lint(root)
    assert warm.cached == 6 and verdict(warm) == expected
    assert len(listed) > 2 * len(table) and 0 < len(checked) <= len(table)
