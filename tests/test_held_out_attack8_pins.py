"""A pinned source finding stays pinned when only its line's comment changes: a `# noqa`, a `// TODO` or any other
comment added to, edited on or removed from the flagged line is no code, and names no other finding. Pins written
before (their line's comment in the key) are read as today's keys, and `kgate baseline update` rewrites them."""

from __future__ import annotations

from pathlib import Path

import pytest
from conftest import kgate

KERNEL = '''\
import triton
import triton.language as tl


@triton.jit
def k(x, n, BLOCK: tl.constexpr):
    tl.device_print("n", n){comment}
    tl.store(x, n)
'''

PYTEST_ENV = '''\
[tool.pytest.ini_options]
env = [
    "TRITON_INTERPRET=1",{comment}
]
'''


def _project(tmp_path: Path, name: str, template: str, comment: str) -> Path:
    if name != "pyproject.toml":
        (tmp_path / "kgate.toml").write_text('targets = ["sm_120a"]\n')
    (tmp_path / name).write_text(template.format(comment=comment))
    return tmp_path


@pytest.mark.parametrize(("name", "template", "marker"), [("ops.py", KERNEL, "#"), ("pyproject.toml", PYTEST_ENV, "#")])
@pytest.mark.parametrize(("pinned", "now"), [
    ("", "  {m} TODO: drop before the release"),
    ("  {m} debugging the tail", ""),
    ("  {m} debugging the tail", "  {m} debugging the tail (see the issue)"),
])
def test_a_comment_edit_on_a_pinned_line_keeps_the_pin(tmp_path: Path, name: str, template: str, marker: str,
                                                       pinned: str, now: str) -> None:
    project = _project(tmp_path, name, template, pinned.format(m=marker))
    assert kgate("lint", cwd=project).code == 1
    update = kgate("baseline", "update", "--accept-new", cwd=project)
    assert update.code == 0, update.stdout + update.stderr
    assert kgate("lint", cwd=project).code == 0
    (project / name).write_text(template.format(comment=now.format(m=marker)))
    run = kgate("lint", cwd=project)
    assert run.code == 0, run.stdout + run.stderr
    assert "(1 baselined)" in run.stdout


def test_a_pin_written_with_its_lines_comment_is_read_as_todays_and_rewritten(tmp_path: Path) -> None:
    project = _project(tmp_path, "ops.py", KERNEL, "  # one\n    tl.device_print(\"n\", n)  # two")
    # Two prints of the same code, pinned as kgate pinned them before: each with its comment.
    (project / "kgate-baseline.toml").write_text(
        "version = 2\n\n[findings]\n"
        "\"KG204|ops.py|k|tl.device_print(\\\"n\\\", n) # one\" = 1\n"
        "\"KG204|ops.py|k|tl.device_print(\\\"n\\\", n) # two\" = 1\n")
    run = kgate("lint", cwd=project)
    assert run.code == 0, run.stdout + run.stderr
    assert "(2 baselined)" in run.stdout and "name their line with its comment" in run.stdout
    update = kgate("baseline", "update", cwd=project)
    assert update.code == 0, update.stdout + update.stderr
    text = (project / "kgate-baseline.toml").read_text()
    assert "\"KG204|ops.py|k|tl.device_print(\\\"n\\\", n)\" = 2" in text and "# one" not in text
    again = kgate("lint", cwd=project)
    assert again.code == 0 and "name their line" not in again.stdout, again.stdout + again.stderr


SPILLING = '''\
import triton
import triton.language as tl

import kgate


@kgate.register(signature={"x": "*fp32", "n": "i32"}, constexprs={"BLOCK": 8192}, num_warps=1)
@triton.jit
def big(x, n, BLOCK: tl.constexpr):
    offs = tl.arange(0, BLOCK)
    v = tl.load(x + offs, mask=offs < n)
    tl.store(x + offs, v / tl.sum(v * v, 0), mask=offs < n)
'''

OTHER_TOOLCHAIN = '''
[[toolchain]]
versions = {{ "ptxas-blackwell" = "0.0.1", "triton" = "0.0.1" }}

[toolchain.kernels]
"{kernel}" = {{ registers = 1, spill_bytes = 2, stack_bytes = 3, smem_bytes = 4 }}
'''


def test_renaming_old_variant_names_keeps_the_other_toolchains_pins(tmp_path: Path) -> None:
    pytest.importorskip("triton")
    (tmp_path / "kgate.toml").write_text('targets = ["sm_120a"]\npython-path = ["."]\n')
    (tmp_path / "ops.py").write_text(SPILLING)
    first = kgate("baseline", "update", "--accept-new", cwd=tmp_path)
    assert first.code == 0, first.stdout + first.stderr
    baseline = tmp_path / "kgate-baseline.toml"
    pinned = baseline.read_text()
    kernel = next(line.split('"')[1] for line in pinned.splitlines() if line.startswith('"ops:big|'))
    variant = kernel.split("|")[1]
    old_name = variant[:variant.rindex(",")]  # the name before variants said their specialisation
    # This toolchain's pins under the old variant name, and another toolchain's pins beside them.
    baseline.write_text(pinned.replace(variant, old_name) + OTHER_TOOLCHAIN.format(kernel=kernel))
    update = kgate("baseline", "update", cwd=tmp_path)
    assert update.code == 0, update.stdout + update.stderr
    assert "renamed" in update.stdout
    text = baseline.read_text()
    assert old_name + "|" not in text and text.count("[[toolchain]]") == 2
    assert '"0.0.1"' in text and "registers = 1, spill_bytes = 2, stack_bytes = 3, smem_bytes = 4" in text
