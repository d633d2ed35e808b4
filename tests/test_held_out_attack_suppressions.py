"""Suppressions of the comment rules themselves: `# kgate: ignore[KG002]` and `# kgate: ignore[KG003]`.

A comment that pins KG002 or KG003 where no unused or invalid code of a comment is reported silences nothing,
and would silence the next stale or broken comment on its line: it is unused (KG002) like any other pin, and
`--fix` removes it. It is not silenced by itself; a file's `ignore-file[KG002]` may silence it, and is then used.
"""

from __future__ import annotations

from pathlib import Path

import pytest
from conftest import kgate

KERNEL = 'import triton\nimport triton.language as tl\n\n\n@triton.jit\ndef k(x):\n    tl.device_print("x", x){}\n    tl.store(x, 0)\n'
CLEAN = "import triton\n\n\n@triton.jit\ndef k(x):\n    pass{}\n"


def _lint(root: Path, text: str, *args: str) -> list[tuple[int, str, str]]:
    (root / "kgate.toml").write_text("")
    (root / "k.py").write_text(text)
    run = kgate("lint", "--no-cache", "--format", "json", *args, cwd=root)
    assert run.code in (0, 1) and "Traceback" not in run.stderr, run.stderr
    return sorted((f["line"], f["code"], f["message"]) for f in run.json()["findings"])


@pytest.mark.parametrize("text, expected", [
    # nothing about comments is reported on the line: the pin is stale
    (CLEAN.format("  # kgate: ignore[KG002] reviewed"), [(6, "KG002", "KG002")]),
    (CLEAN.format("  # kgate: ignore[KG003] reviewed"), [(6, "KG002", "KG003")]),
    (CLEAN.format("  # kgate: ignore[KG003, KG002] reviewed"), [(6, "KG002", "KG002"), (6, "KG002", "KG003")]),
    # the pin silences what it names: used
    (KERNEL.format("  # kgate: ignore[KG204, KG201, KG002] the KG201 pin stays for the next release"), []),
    (KERNEL.format("  # kgate: ignore[KG204, RUF100, KG003] a code of another tool"), []),
    # one code unused, another pin of KG002 on the line would be the only thing that silenced it
    (KERNEL.format("  # kgate: ignore[KG204, KG201] the KG201 pin is stale"), [(7, "KG002", "KG201")]),
    # a file's KG002 silences the stale line pin, and is used by doing so
    ("# kgate: ignore-file[KG002] stale pins are tolerated in this file\n" + CLEAN.format(
        "  # kgate: ignore[KG002] reviewed"), []),
    ("# kgate: ignore-file[KG002] stale pins are tolerated in this file\n" + CLEAN.format(""),
     [(1, "KG002", "KG002")]),
])
def test_a_pin_of_the_comment_rules_that_silences_nothing_is_unused(tmp_path: Path, text: str,
                                                                    expected: list[tuple[int, str, str]]) -> None:
    found = _lint(tmp_path, text)
    assert [(line, code) for line, code, _message in found] == [(line, code) for line, code, _pinned in expected]
    for (_line, _code, message), (_l, _c, pinned) in zip(found, expected):
        assert f"ignore[{pinned}]" in message or f"ignore-file[{pinned}]" in message


def test_the_stale_pin_is_judged_only_where_the_comment_rules_run(tmp_path: Path) -> None:
    text = CLEAN.format("  # kgate: ignore[KG003] reviewed")
    assert _lint(tmp_path, text, "--ignore", "KG002") == []
    assert _lint(tmp_path, text, "--ignore", "KG003") == []  # KG003 did not run: its pin is not judged
    assert [code for _line, code, _message in _lint(tmp_path, text)] == ["KG002"]


def test_fix_removes_the_stale_pins_and_keeps_the_other_comments(tmp_path: Path) -> None:
    (tmp_path / "kgate.toml").write_text("")
    (tmp_path / "k.py").write_text(CLEAN.format("  # kgate: ignore[KG002, KG003] reviewed  # noqa: E501"))
    run = kgate("lint", "--no-cache", "--fix", cwd=tmp_path)
    assert run.code == 0, run.stdout + run.stderr
    assert (tmp_path / "k.py").read_text() == CLEAN.format("  # noqa: E501")
