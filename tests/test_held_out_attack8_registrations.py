"""A registration kgate cannot read is said, whatever the selection: a module with `@kgate.register` kernels that
Python (the one kgate runs in) cannot parse had its kernels left out of `kgate check` without a word where the
lint finding that reports the file (KG004) was not selected or was ignored."""

from __future__ import annotations

from pathlib import Path

import pytest
from conftest import kgate

REGISTERED = '''\
import triton
import triton.language as tl

import kgate


@kgate.register(signature={{"x": "*fp32", "n": "i32"}}, constexprs={{"BLOCK": 256}})
@triton.jit
def {name}(x, n, BLOCK: tl.constexpr):
    offs = tl.arange(0, BLOCK)
    tl.store(x + offs, 1.0, mask=offs < n)
'''


@pytest.mark.parametrize("options", [("--select", "KG102"), ("--ignore", "KG004"), ()])
def test_a_registration_file_python_cannot_parse_is_an_error_in_every_selection(tmp_path: Path,
                                                                                 options: tuple[str, ...]) -> None:
    pytest.importorskip("triton")
    (tmp_path / "kgate.toml").write_text('targets = ["sm_120a"]\npython-path = ["."]\n')
    (tmp_path / "ok.py").write_text(REGISTERED.format(name="ok_kernel"))
    # A stray parenthesis: Python cannot parse the module (as Python 3.11 cannot parse 3.12's generic functions).
    broken = REGISTERED.format(name="hidden_kernel") + "\n\ndef first(items):\n    return items[0]\n)\n"
    (tmp_path / "broken.py").write_text(broken)
    run = kgate("check", *options, cwd=tmp_path)
    assert run.code == 2, run.stdout + run.stderr
    assert "broken.py:16: cannot read its kgate.register decorators: syntax error" in run.stderr
    assert "Traceback" not in run.stderr
