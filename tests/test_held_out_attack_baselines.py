"""A baseline kgate cannot read, and what its error tells the user to do.

Every command that reads the baseline stops on one it cannot read (exit 2). The error named `kgate baseline
update` as the way to re-generate it, but the update reads the baseline first and stops with the same error; an
empty file was "unsupported baseline version None". The error now says what does work (fix the entry, restore
the file, or delete it and pin again with `--accept-new`), and that advice is followed here to the end.
"""

from __future__ import annotations

from pathlib import Path

import pytest
from conftest import kgate

KERNEL = 'import triton\nimport triton.language as tl\n\n\n@triton.jit\ndef k(x):\n    tl.device_print("x", x)\n'
ADVICE = "delete it and run `kgate baseline update --accept-new`"


@pytest.mark.parametrize("content, says", [
    (b"", "no `version = 2` line: not a baseline kgate wrote"),
    (b"# kgate baseline\n[findings]\n", "no `version = 2` line"),
    (b"\xff\xfe\x00", "not valid UTF-8"),
    (b'version = 2\n[findings]\n"KG204|k.py|k|x" = -1\n', "must be a positive count"),
    (b'version = 2\n[findings]\n<<<<<<< HEAD\n', "invalid TOML"),
    (b'version = 2\n[findings]\n"KG999|k.py|k|x" = 1\n', "names an unknown rule"),
])
def test_a_baseline_that_cannot_be_read_says_how_to_recover(tmp_path: Path, content: bytes, says: str) -> None:
    (tmp_path / "kgate.toml").write_text("")
    (tmp_path / "k.py").write_text(KERNEL)
    baseline = tmp_path / "kgate-baseline.toml"
    baseline.write_bytes(content)
    for command in (("lint",), ("baseline", "update"), ("baseline", "update", "--accept-new")):
        run = kgate(*command, cwd=tmp_path)
        assert run.code == 2, (command, run.stdout, run.stderr)
        error = [line for line in run.stderr.splitlines() if line.startswith("kgate: error:")]
        assert len(error) == 1 and says in error[0] and ADVICE in error[0], run.stderr
        assert "None" not in error[0]
        assert baseline.read_bytes() == content  # nothing is written over the file the user has to look at
    baseline.unlink()  # the advice, followed
    assert kgate("baseline", "update", "--accept-new", cwd=tmp_path).code == 0
    assert kgate("lint", cwd=tmp_path).code == 0
