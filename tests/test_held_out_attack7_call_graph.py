"""The PTX call graph on calls through a register whose every value is a function the module defines
(tests/data/callgraph/attack7.cu, compiled by `kgate check` as a user runs it).

`(f ? waits : waits_too)()` compiles to a `selp` of the two functions' addresses and `call %rd5`. Every call through
a register was taken to write global memory and never to wait, as if its code were not in the PTX: a PDL kernel
that waits through either function was reported by KG107 for the store after it, "a call of a function pointer,
whose code is not in the PTX". Where the dataflow holds the register to this module's functions alone, the call
is a call of each of them: it waits where all of them do, and reaches their accesses. A pointer read from memory
or passed in may still be anything.
"""

from __future__ import annotations

import shutil

import pytest
from conftest import Run, kgate
from test_held_out_call_graph_paths import CALLGRAPH

needs_nvcc = pytest.mark.skipif(shutil.which("nvcc") is None, reason="nvcc is not installed")
PROJECT = '''targets = ["sm_120a"]
select = ["KG107"]

[[cuda]]
sources = ["attack7.cu"]
flags = ["-O3"]
pdl = ["pdl_*"]
'''
# kernel -> (the codes of its findings, words its KG107 message must hold)
EXPECTED = {
    "pdl_ternary_of_two_waiters_then_store": (set(), ""),
    "pdl_ternary_of_a_waiter_and_a_no_op_then_store": ({"KG107"}, "st.global"),
    "pdl_ternary_of_two_writers_before_wait": ({"KG107"}, "stores"),
    "pdl_ternary_of_two_writers_after_wait": (set(), ""),
    "pdl_pointer_from_memory_then_store": ({"KG107"}, "a call of a function pointer"),
    "pdl_pointer_argument_then_store": ({"KG107"}, "a call of a function pointer"),
}


@pytest.fixture(scope="module")
def checked(tmp_path_factory: pytest.TempPathFactory) -> Run:
    root = tmp_path_factory.mktemp("attack7")
    shutil.copy(CALLGRAPH / "attack7.cu", root / "attack7.cu")
    (root / "kgate.toml").write_text(PROJECT)
    return kgate("check", "--format", "json", cwd=root)


@needs_nvcc
@pytest.mark.parametrize("kernel", sorted(EXPECTED))
def test_calls_through_a_register_of_known_functions(checked: Run, kernel: str) -> None:
    assert checked.code == 1, checked.stderr
    findings = [f for f in checked.json()["findings"] if f["kernel"] == kernel]
    codes, words = EXPECTED[kernel]
    assert {f["code"] for f in findings} == codes, [f["message"] for f in findings]
    assert all(words in f["message"] for f in findings), [f["message"] for f in findings]
