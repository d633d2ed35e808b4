"""Captured constexprs whose readable form is another value's: the string "1" and the integer 1, "2.0" and 2.0,
"true" and True, "(2,3)" and the tuple (2, 3), and a string that holds the separator between two values
(`NAME="x,SCALE=1.0"` with `SCALE=2.0` against `NAME="x"` with `SCALE="1.0,SCALE=2.0"`).

Triton compiles each of them as a specialisation of its own, and the capture file held each, but a variant's name
showed the values as text and its tag covered only the arguments' types, divisibility and constants: both launches
had one name, and `kgate check` gated one of them (the other was never compiled, its findings never reported). The
tag now covers a value whose shown form reads as another; the names of every other variant are as they were.
"""

from __future__ import annotations

import json
import textwrap
from pathlib import Path

import pytest
from conftest import kgate

from kgate.collect.specialization import Specialization

OPS = '''\
import triton
import triton.language as tl


@triton.jit
def pick(x, n, MODE: tl.constexpr, SCALE: tl.constexpr, BLOCK: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    v = tl.load(x + offs, mask=offs < n)
    if MODE == 1:
        v = v * 3.0
    tl.store(x + offs, v, mask=offs < n)
'''
# name -> the (MODE, SCALE) pairs of the launches: each pair is a specialisation of its own
PAIRS = {
    "integer_and_its_digits": [(1, 2.0), ("1", 2.0)],
    "float_and_its_text": [(2.5, 2.0), ("2.5", 2.0)],
    "boolean_and_its_word": [(True, 2.0), ("true", 2.0)],
    "nan_and_its_word": [(float("nan"), 2.0), ("nan", 2.0)],
    "a_separator_inside_a_string": [("x,SCALE=1.0", 2.0), ("x", "1.0,SCALE=2.0")],
}


def _spec(mode: object, scale: object) -> Specialization:
    return Specialization("ops:pick", {"x": "*fp32", "n": "i32"}, {"BLOCK": 256, "MODE": mode, "SCALE": scale},
                          ("x",), (), (), {"num_warps": 4, "num_stages": 3})


@pytest.mark.parametrize("case", sorted(PAIRS))
def test_two_specialisations_never_share_a_name(case: str) -> None:
    first, second = (_spec(*pair) for pair in PAIRS[case])
    assert first.variant != second.variant, first.variant


def test_the_tuple_and_its_text_are_two_names() -> None:
    assert _spec([2, 3], 2.0).variant != _spec("(2,3)", 2.0).variant


@pytest.mark.parametrize("mode", ["a", "fast", "é✓🙂", "x#12345678", 7, 2.5, True, [2, 3]])
def test_a_value_shown_as_itself_keeps_the_name_it_had(mode: object) -> None:
    """The tag of a variant without an ambiguous value is the one earlier capture files and baselines hold."""
    spec = _spec(mode, 2.0)
    assert spec.variant.endswith("#" + Specialization("ops:pick", spec.signature, {}, ("x",)).tag)


pytest.importorskip("torch", reason="the captured launcher takes torch tensors (pip install torch, or kgate's extra "
                                    "ulp: kernel-gate[ulp])")


def test_check_gates_every_captured_specialisation(tmp_path: Path) -> None:
    project = tmp_path / "p"
    project.mkdir()
    (project / "kgate.toml").write_text('targets = ["sm_120a"]\npython-path = ["."]\n')
    (project / "ops.py").write_text(OPS)
    launches = [pair for case in sorted(PAIRS) if case != "nan_and_its_word" for pair in PAIRS[case]]
    (project / "run.py").write_text(textwrap.dedent(f'''\
        import torch
        import ops
        x = torch.zeros(256)
        for mode, scale in {launches!r}:
            ops.pick[(1,)](x, 256, mode, scale, BLOCK=256)
        '''))
    run = kgate("capture", "--device", "cpu", "--", "python", "run.py", cwd=project, timeout=300)
    assert run.code == 0, run.stderr
    # Triton's own cache keeps True and 1 as one specialisation (they are equal): one launch fewer
    assert f"{len(launches) - 1} specialisation(s)" in run.stderr, run.stderr
    check = kgate("check", "--format", "json", cwd=project, timeout=600)
    assert check.code == 0, check.stdout + check.stderr
    variants = [k["variant"] for k in json.loads(check.stdout)["kernels"]]
    assert len(variants) == len(set(variants)) == len(launches) - 1, variants
