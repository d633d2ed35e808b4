"""Launches and autotuners the launch reading missed: a kernel reached as an attribute of its module (`from . import
kernels; kernels.k[grid](...)`, `import pkg.kernels as kn`, `import pkg.kernels`), a launcher called so, and
autotuners stacked on one kernel. The planted cases are in fixtures/rules/KG201/ (modattr/, stacked.py) and
fixtures/rules/KG108/modattr/; these tests pin what the inline expectations cannot: the class of each verdict."""

from __future__ import annotations

from rules_harness import RULES, linted


def _found(code: str) -> dict[tuple[str, int], tuple[str, str]]:
    findings, _suppressed = linted(RULES / code)
    return {(f.path, f.line): (f.severity.value, f.message) for f in findings}


def test_kg201_keys_of_kernels_launched_through_their_module_are_what_the_launch_passes() -> None:
    found = _found("KG201")
    for line, kernel in ((10, "double"), (17, "halve"), (24, "negate"), (38, "rows")):
        severity, message = found[("modattr/kernels.py", line)]
        assert severity == "error" and f"`{kernel}`: 'n' (x.shape[0]) changes" in message, message
    # The good twins: the last dimension, a model dimension (not an unclassified note).
    assert ("modattr/kernels.py", 31) not in found and ("modattr/kernels.py", 50) not in found


def test_kg201_reads_the_inner_key_of_stacked_autotuners_once() -> None:
    found = _found("KG201")
    severity, message = found[("stacked.py", 13)]
    assert severity == "error" and "`under_heuristics`: 'n_tokens'" in message
    assert ("stacked.py", 21) in found
    # Both autotuners key on `seqlen`: one finding, at the outer one.
    assert ("stacked.py", 28) in found and ("stacked.py", 29) not in found
    assert not any(path == "stacked.py" and line > 30 for path, line in found)


def test_kg108_launches_through_a_module_attribute_are_read() -> None:
    found = _found("KG108")
    for line in (12, 20, 28):
        severity, message = found[("modattr/ops.py", line)]
        assert severity == "warning" and "is passed `x.shape[0]`" in message
    assert {line for path, line in found if path == "modattr/ops.py"} == {12, 20, 28}
    assert ("modattr/kernels.py", 33) in found
