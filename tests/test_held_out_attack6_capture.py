"""Hand-edited capture files (`kgate-capture.toml`) of a sixth attack: what a reader refuses, and the line it names.

- A kernel name that is no `package.module:function` (`":"`, `"ops:add:x"`) was taken as one: `kgate check` failed
  with a traceback (`PosixPath('.') has an empty name`) or a stale-capture finding about an attribute `'add:x'`.
  `kgate capture` never writes such a name; reading one is refused, naming its line.
- `version = 1.0` and `version = true` were read as version 1 (Python's `1.0 == True == 1`).
- Lines were found by text, not as TOML reads them: a `[[ specialization ]]` header (spaces are TOML) or an inline
  array of tables gave `kgate-capture.toml:0:`, and a `[[specialization]]` line inside a multi-line string shifted
  every entry's line after it.
"""

from __future__ import annotations

from pathlib import Path

import pytest
from conftest import kgate

from kgate.collect.captures import parse
from kgate.collect.specialization import Specialization
from kgate.core.errors import CaptureError

SPEC = Specialization("ops:add", {"x": "*fp32", "y": "*fp32", "n": "i32"}, {"BLOCK": 256}, ("x", "y"), (), (),
                      {"num_warps": 4, "num_stages": 3})


def _entry(kernel: str = "ops:add", header: str = "[[specialization]]") -> str:
    spec = Specialization(kernel, SPEC.signature, SPEC.constexprs, SPEC.divisible, (), (), SPEC.options)
    return f'''{header}
kernel = "{kernel}"
variant = "{spec.variant}"
signature = {{ n = "i32", x = "*fp32", y = "*fp32" }}
constexprs = {{ BLOCK = 256 }}
divisible = ["x", "y"]
options = {{ num_stages = 3, num_warps = 4 }}
captured = ["cpu sm_120a"]
'''


HEAD = 'version = 1\n\n[captured."cpu sm_120a"]\ncapability = "12.0"\ntriton = "3.9.0"\n\n'


def _refused(text: str) -> str:
    with pytest.raises(CaptureError) as caught:
        parse(text.encode(), "kgate-capture.toml")
    return str(caught.value)


@pytest.mark.parametrize("kernel", [":", "ops:", ":add", "ops:add:x", "ops.:add", "ops:add.inner", "op s:add"])
def test_a_kernel_name_capture_never_writes_is_refused_at_its_line(kernel: str) -> None:
    said = _refused(HEAD + _entry(kernel))
    assert said.startswith("kgate-capture.toml:7: ") and 'must be "package.module:function"' in said, said


@pytest.mark.parametrize("version", ["1.0", "true"])
def test_a_version_that_is_no_integer_is_refused(version: str) -> None:
    said = _refused(HEAD.replace("version = 1", f"version = {version}") + _entry())
    assert said.startswith("kgate-capture.toml:1: unsupported capture file version"), said


def test_the_valid_file_is_read() -> None:
    assert [e.spec.kernel for e in parse((HEAD + _entry()).encode(), "kgate-capture.toml").entries] == ["ops:add"]


@pytest.mark.parametrize(("text", "line"), [
    (HEAD + _entry("bad", "[[ specialization ]]"), 7),
    (HEAD + _entry() + "\n" + _entry("bad", "[[specialization ]]"), 16),
    (HEAD + _entry("bad", '[["specialization"]]'), 7),
    ('version = 1\n\n[captured."x"]\nnote = """\n[[specialization]]\n"""\n\n' + _entry("bad"), 8),
    (HEAD + "# [[specialization]] of an earlier capture\n" + _entry("bad"), 8),
])
def test_an_entry_is_named_by_the_line_of_its_header_as_toml_reads_it(text: str, line: int) -> None:
    said = _refused(text)
    assert said.startswith(f"kgate-capture.toml:{line}: [[specialization]] of bad:"), said


def test_an_entry_of_an_inline_array_names_no_line() -> None:
    said = _refused('version = 1\nspecialization = [{ kernel = "bad" }]\n')
    assert said.startswith("kgate-capture.toml: [[specialization]] of bad:"), said


def test_check_refuses_the_kernel_name_without_a_traceback(tmp_path: Path) -> None:
    (tmp_path / "kgate.toml").write_text('targets = ["sm_120a"]\npython-path = ["."]\n')
    (tmp_path / "ops.py").write_text("")
    (tmp_path / "kgate-capture.toml").write_text(HEAD + _entry(":"))
    run = kgate("check", cwd=tmp_path)
    assert run.code == 2, run.stdout + run.stderr
    assert "Traceback" not in run.stderr and "kgate-capture.toml:7:" in run.stderr, run.stderr


def test_a_capture_file_linked_to_nothing_is_refused_not_taken_for_none(tmp_path: Path) -> None:
    """A `kgate-capture.toml` link to a file that is gone was read as no capture file: a project with a registration
    as well gated that alone, without a word (and one without was told "there is no kgate-capture.toml")."""
    (tmp_path / "kgate.toml").write_text('targets = ["sm_120a"]\npython-path = ["."]\n')
    (tmp_path / "ops.py").write_text("")
    (tmp_path / "kgate-capture.toml").symlink_to("captures/moved.toml")
    run = kgate("check", cwd=tmp_path)
    assert run.code == 2, run.stdout + run.stderr
    assert "kgate-capture.toml: is a symbolic link to 'captures/moved.toml', which does not exist" in run.stderr, \
        run.stderr


@pytest.mark.parametrize("text", ["", "# kgate capture\n", '[captured."x"]\ntriton = "3.9.0"\n'])
def test_a_file_without_a_version_says_so(text: str) -> None:
    """An empty capture file was refused as `unsupported capture file version None`."""
    said = _refused(text)
    assert "no `version = 1` line" in said and "None" not in said, said
