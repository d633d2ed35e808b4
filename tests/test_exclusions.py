"""One walk of the project and one meaning of `exclude` (kgate.collect.files) for `kgate lint`, `kgate check`'s
search for registrations, a shard's inputs, the CUDA sources and the replay's snapshot."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from kgate.collect.files import Exclusions, excluded, python_files, walk

PATTERNS = ("build", "*.gen.py", "tests/fixtures", "gen/*", "vendor/", "a*b")


@pytest.mark.parametrize(("rel", "expected"), [
    ("build", True), ("x/build/y.py", True), ("builder/y.py", False),  # a bare name, at any depth
    ("k.gen.py", True), ("x/k.gen.py", True), ("k.gen.pyc", False),  # a glob without '/': a name
    ("tests/fixtures/a.py", True), ("x/tests/fixtures/a.py", False),  # a glob with '/': the path from the root
    ("gen/k.py", True), ("gen/sub/k.py", True), ("x/gen/k.py", False), ("gen", False),
    ("vendor/k.py", True), ("x/vendor", True),  # a trailing '/' is dropped
    ("axb/k.py", True), ("a/b", False),  # a name glob never matches across a '/'
    ("kernels/k.py", False),
])
def test_what_exclude_excludes(rel: str, expected: bool) -> None:
    assert Exclusions(PATTERNS)(rel) is expected
    assert excluded(rel, PATTERNS) is expected


def tree(root: Path) -> Path:
    for rel in ("k.py", "build/b.py", "x/k.gen.py", "x/k.py", "tests/fixtures/f.py", "tests/t.py", "gen/g.py",
                "a/b/ab.py", "axb/no.py", "notes.txt", "sub/deep/d.py"):
        (root / rel).parent.mkdir(parents=True, exist_ok=True)
        (root / rel).write_text("x = 1\n", encoding="utf-8")
    return root


def test_the_walk_and_the_test_of_one_path_agree(tmp_path: Path) -> None:
    root = tree(tmp_path / "p")
    everything = [p.relative_to(root).as_posix() for p in sorted(root.rglob("*.py"))]
    kept = [rel for rel in everything if not excluded(rel, PATTERNS)]
    assert kept == ["a/b/ab.py", "k.py", "sub/deep/d.py", "tests/t.py", "x/k.py"]
    assert [rel for rel, _path in walk(root, lambda rel: rel.endswith(".py"), PATTERNS)] == kept
    assert python_files(root, PATTERNS) == sorted(root / rel for rel in kept)


def test_a_folder_reached_by_two_names_is_walked_once_by_the_first(tmp_path: Path) -> None:
    root = tree(tmp_path / "p")
    (root / "b_link").symlink_to(root / "sub")
    (root / "z_link").symlink_to(root / "sub")
    (root / "sub" / "loop").symlink_to(root / "sub")
    found = [rel for rel, _path in walk(root, lambda rel: rel.endswith(".py"), ())]
    assert [rel for rel in found if rel.endswith("d.py")] == ["b_link/deep/d.py"]
    assert [p.name for p in python_files(root, ())].count("d.py") == 1


def test_what_cannot_be_read_is_kept_for_lint_and_left_out_of_python_files(tmp_path: Path) -> None:
    root = tree(tmp_path / "p")
    os.mkfifo(root / "pipe.py")
    (root / "self.py").symlink_to(root / "self.py")
    (root / "dangling.py").symlink_to(root / "nowhere.py")
    linted = [rel for rel, _path in walk(root, lambda rel: rel.endswith(".py"), PATTERNS)]
    assert "self.py" in linted and "pipe.py" not in linted and "dangling.py" not in linted
    names = [p.relative_to(root).as_posix() for p in python_files(root, PATTERNS)]
    assert names == ["a/b/ab.py", "k.py", "sub/deep/d.py", "tests/t.py", "x/k.py"]
