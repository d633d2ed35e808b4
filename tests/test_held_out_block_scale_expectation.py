"""KG101's expectation follows what each specialisation compiles (tests/data/block_scale/, compiled by Triton here).

A `tl.dot_scaled` in a branch that a constexpr removes expects nothing in the specialisation that removes it,
for a plain, an autotuned, a heuristics and a wrapped kernel, in a helper reached through a call (inlined or
`noinline`), under a negation, a string, a computed or a nested constexpr, a conditional expression, `if False`
and a module-level constexpr; a helper passed as a constexpr expects what it compiles; a registration's own
`expect` wins; a function of the project that is only named `dot_scaled` expects nothing. The helpers reached
through module aliases, renamed imports and packages still give their kernels the expectation.
"""

from __future__ import annotations

import shutil
import sys
import textwrap
from pathlib import Path

import pytest
from conftest import DATA, Run, kgate

from kgate.compile.expectations import calls_dot_scaled

pytest.importorskip("triton")

SCALED = ["block_scale"]
# (kernel, what its variant's name starts with) -> (expected, a KG101 finding on sm_120a)
EXPECTED: dict[tuple[str, str], tuple[list[str], bool]] = {
    ("plain_branch", "USE_SCALED=false"): ([], False),
    ("plain_branch", "USE_SCALED=true"): (SCALED, False),
    ("autotuned_branch", "USE_SCALED=false"): ([], False),
    ("autotuned_branch", "USE_SCALED=true"): (SCALED, False),
    ("heuristics_branch", "USE_SCALED=false"): ([], False),
    ("heuristics_branch", "USE_SCALED=true"): (SCALED, False),
    ("wrapped_branch", "USE_SCALED=false"): ([], False),
    ("wrapped_branch", "USE_SCALED=true"): (SCALED, False),
    ("branch_in_a_helper", "USE_SCALED=false"): ([], False),
    ("branch_in_a_helper", "USE_SCALED=true"): (SCALED, False),
    ("branch_in_a_noinline_helper", "USE_SCALED=false"): ([], False),
    ("branch_in_a_noinline_helper", "USE_SCALED=true"): (SCALED, False),
    ("negated_branch", "PLAIN=true"): ([], False),
    ("negated_branch", "PLAIN=false"): (SCALED, False),
    ("string_constexpr_branch", "FMT=bf16"): ([], False),
    ("string_constexpr_branch", "FMT=mx"): (SCALED, False),
    ("constexpr_computed_in_the_kernel", "MODE=1"): ([], False),
    ("constexpr_computed_in_the_kernel", "MODE=2"): (SCALED, False),
    ("nested_branches", "INNER=false"): ([], False),
    ("nested_branches", "INNER=true"): (SCALED, False),
    ("ternary_on_a_constexpr", "USE_SCALED=false"): ([], False),
    ("ternary_on_a_constexpr", "USE_SCALED=true"): (SCALED, False),
    ("dead_under_if_false", "warps"): ([], False),
    ("module_constexpr_off", "warps"): ([], False),
    ("constexpr_return_before_it", "SKIP=true"): ([], False),
    ("tile_passed_as_a_constexpr", "TILE=jit:tiles:plain_tile"): ([], False),
    ("tile_passed_as_a_constexpr", "TILE=jit:tiles:scaled_tile"): (SCALED, False),
    ("registration_expects_it_anyway", "USE_SCALED=false"): (SCALED, True),
    ("registration_drops_it", "USE_SCALED=true"): ([], False),
    ("two_registrations_of_the_plain_launch", "USE_SCALED=false"): ([], False),
    ("branch_on_a_run_time_value", "warps"): (SCALED, False),
    ("fallback_only_where_compiled", "USE_SCALED=false"): ([], False),
    ("fallback_only_where_compiled", "USE_SCALED=true"): (SCALED, True),
    ("project_function_named_dot_scaled", "warps"): ([], False),
    # Reached through the module's imports and aliases (each compiles the block-scaled tile).
    ("via_module_alias", "warps"): (SCALED, False),
    ("via_module", "warps"): (SCALED, False),
    ("via_renamed_import", "warps"): (SCALED, False),
    ("via_an_alias_in_the_helper_module", "warps"): (SCALED, False),
    ("via_renamed_builtin", "warps"): (SCALED, False),
    ("via_package_module_alias", "warps"): (SCALED, False),
    ("via_dotted_package_path", "warps"): (SCALED, False),
    ("via_relative_package_import", "warps"): (SCALED, False),
    ("via_a_def_under_if", "warps"): (SCALED, False),
    ("via_a_local_alias", "warps"): (SCALED, False),
    ("names_it_in_a_string_only", "warps"): ([], False),
}


@pytest.fixture(scope="module")
def checked(tmp_path_factory: pytest.TempPathFactory) -> Run:
    project = tmp_path_factory.mktemp("block_scale") / "project"
    shutil.copytree(DATA / "block_scale", project, ignore=shutil.ignore_patterns("__pycache__"))
    (project / "kgate.toml").write_text('targets = ["sm_120a"]\npython-path = ["."]\nselect = ["KG101"]\n')
    return kgate("check", "--format", "json", cwd=project)


def _variant(run: Run, kernel: str, prefix: str) -> dict:
    found = [k for k in run.json()["kernels"] if k["kernel"] == f"kernels:{kernel}" and k["variant"].startswith(prefix)]
    assert len(found) == 1, (kernel, prefix, [k["variant"] for k in run.json()["kernels"] if kernel in k["kernel"]])
    return found[0]


@pytest.mark.parametrize(("kernel", "prefix"), sorted(EXPECTED))
def test_the_expectation_is_what_the_specialisation_compiles(checked: Run, kernel: str, prefix: str) -> None:
    expect, finding = EXPECTED[(kernel, prefix)]
    variant = _variant(checked, kernel, prefix)
    assert variant["expect"] == expect, variant
    found = {(f["kernel"], f["variant"]) for f in checked.json()["findings"] if f["code"] == "KG101"}
    assert ((variant["kernel"], variant["variant"]) in found) == finding, checked.json()["findings"]


def test_every_variant_is_stated(checked: Run) -> None:
    assert checked.code == 1, checked.stderr
    assert len(checked.json()["kernels"]) == len(EXPECTED)


@pytest.mark.parametrize(("ttir", "found"), [
    ('%acc = tt.dot_scaled %x scale %sx, %y scale %sy, %acc lhs = e4m3 rhs = e4m3 {fastMath = false}', True),
    ('%0 = "tt.dot_scaled"(%x, %sx, %y, %sy, %acc) <{fastMath = false}>', True),
    ("tt.call @tt.dot_scaled__Pfp8e4nv_Pu8(%a, %s) : (!tt.ptr<f8E4M3FN>, !tt.ptr<i8>) -> ()", False),
    ('tt.func private @tt.dot_scaled__Pfp8e4nv_Pu8(%a: !tt.ptr<f8E4M3FN> loc("a"(#loc2)))', False),
    ('#loc3 = loc("/src/tt.dot_scaled.py":12:5)', False),
    ("%acc = tt.dot %x, %y, %acc, inputPrecision = tf32", False),
])
def test_the_op_is_read_not_a_name_that_holds_its_spelling(ttir: str, found: bool) -> None:
    assert calls_dot_scaled(ttir) is found


OPS = textwrap.dedent("""\
    import triton
    import triton.language as tl

    from tiles import plain_tile, scaled_tile


    @triton.jit
    def branch(a, a_scale, b, b_scale, c, USE_SCALED: tl.constexpr):
        if USE_SCALED:
            scaled_tile(a, a_scale, b, b_scale, c)
        else:
            plain_tile(a, a_scale, b, b_scale, c)
""")
RUN = textwrap.dedent("""\
    import torch

    import ops

    a = torch.zeros(64 * 64, dtype=torch.float8_e4m3fn)
    s = torch.zeros(64 * 2, dtype=torch.uint8)
    c = torch.zeros(64 * 64)
    ops.branch[(1,)](a, s, a, s, c, USE_SCALED=False)
    ops.branch[(1,)](a, s, a, s, c, USE_SCALED=True)
""")


def test_a_captured_specialisation_expects_what_it_compiles(tmp_path: Path) -> None:
    pytest.importorskip("torch", reason="the captured launch takes torch tensors")
    shutil.copy(DATA / "block_scale" / "tiles.py", tmp_path / "tiles.py")
    (tmp_path / "ops.py").write_text(OPS)
    (tmp_path / "run.py").write_text(RUN)
    (tmp_path / "kgate.toml").write_text('targets = ["sm_120a"]\npython-path = ["."]\nselect = ["KG101"]\n')
    captured = kgate("capture", "--device", "cpu", "--", sys.executable, "run.py", cwd=tmp_path, timeout=300)
    assert captured.code == 0, captured.stderr
    run = kgate("check", "--format", "json", cwd=tmp_path)
    assert run.code == 0, run.stderr
    expect = {k["variant"].split(",")[0]: k["expect"] for k in run.json()["kernels"]}
    assert expect == {"USE_SCALED=false": [], "USE_SCALED=true": SCALED}, run.json()["kernels"]
