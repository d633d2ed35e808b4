"""`kgate lint` on the Python rules' folders beyond their planted cases: suppression counts, positions and
identities, the cache, a broken file among good ones, the terminal line.

tests/test_rules.py compares each fixtures/rules/<CODE>/ with its inline expectations (`# expect: CODE@column`).
"""

from __future__ import annotations

import sys
from pathlib import Path

import pytest
from conftest import Run, copy_project, expectations, kgate
from rules_harness import RULES, linted


@pytest.fixture(scope="module")
def project(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return copy_project("rules/KG201", tmp_path_factory.mktemp("lint"))


@pytest.fixture(scope="module")
def cold(project: Path) -> Run:
    return kgate("lint", "--format", "json", cwd=project)


def found(run: Run) -> set[tuple[str, int, str, str]]:
    return {(f["path"], f["line"], f["code"], str(f["col"])) for f in run.json()["findings"]}


def test_suppressed_findings_are_counted() -> None:
    # KG002: the good twin with a reason, the used half of `ignore[KG201, KG202]`, the file-level KG201.
    assert linted(RULES / "KG002")[1] == 3
    # KG003: with a reason, without a reason, one code next to an unknown one (an invalid comment still silences).
    assert linted(RULES / "KG003")[1] == 3


def test_findings_carry_end_positions_and_stable_identities(cold: Run) -> None:
    findings = cold.json()["findings"]
    key = next(f for f in findings if f["path"] == "runtime_autotune.py" and f["line"] == 13)
    assert (key["end_line"], key["end_col"]) == (13, 50)
    assert key["identity"] == "rmsnorm_keyed_on_tokens|n_tokens"
    for f in findings:
        assert str(f["line"]) not in f["identity"].split("|")


def test_warm_run_gives_the_same_bytes(project: Path, cold: Run) -> None:
    warm = kgate("lint", "--format", "json", cwd=project)
    assert (warm.code, warm.stdout) == (cold.code, cold.stdout)


def test_an_edited_file_is_linted_again(tmp_path: Path) -> None:
    project = copy_project("rules/KG201", tmp_path)
    first = kgate("lint", "--format", "json", cwd=project)
    path = project / "runtime_autotune.py"
    path.write_text(path.read_text().replace('key=["n_tokens", "D"]', 'key=["D"]'))
    second = kgate("lint", "--format", "json", cwd=project)
    gone = found(first) - found(second)
    assert gone == {("runtime_autotune.py", 13, "KG201", "40")}


def test_a_broken_file_does_not_stop_the_others(tmp_path: Path) -> None:
    (tmp_path / "kgate.toml").write_text("")
    (tmp_path / "a_broken.py").write_bytes(b"@triton.autotune(configs=[], key=[])\ndef f(:\n")
    (tmp_path / "b_null.py").write_bytes(b"import triton\nautotune = 1\x00\n")
    (tmp_path / "c_kernel.py").write_text(
        "import triton\n\n@triton.autotune(configs=[], key=['M'])\n@triton.jit\ndef k(x, M):\n    pass\n")
    run = kgate("lint", "--format", "json", cwd=tmp_path)
    assert run.code == 1 and not run.stderr
    assert {(f["path"], f["code"]) for f in run.json()["findings"]} == {
        ("a_broken.py", "KG004"), ("b_null.py", "KG004"), ("c_kernel.py", "KG201")}


def test_a_module_that_never_names_triton_is_not_parsed_by_the_triton_rules(tmp_path: Path) -> None:
    """The Triton rules require the bytes `triton` (`Rule.requires`): host code that prints, a CuTe DSL kernel's
    `Constexpr`, an `autotune` of another library are not parsed, so their syntax is not kgate's to report."""
    (tmp_path / "kgate.toml").write_text("")
    broken = b"def f(:\n    print(cutlass.Constexpr, autotune, atomic_add)\n"
    (tmp_path / "host.py").write_bytes(broken)
    (tmp_path / "kernel.py").write_bytes(b"import triton\n" + broken)
    run = kgate("lint", "--format", "json", cwd=tmp_path)
    assert {(f["path"], f["code"]) for f in run.json()["findings"]} == {("kernel.py", "KG004")}


def test_terminal_output_names_path_line_column_code_and_name(project: Path) -> None:
    run = kgate("lint", "runtime_autotune.py", cwd=project)
    assert run.code == 1
    assert ("runtime_autotune.py:13:40: KG201 error runtime-autotune: autotune key of `rmsnorm_keyed_on_tokens`: "
            "'n_tokens' (by its name) changes with the token count or batch") in run.stdout
    # One planted case, the positional `stride`, is a run-time argument nothing places: a note, not an error.
    errors = len([e for e in expectations(project) if e[0] == "runtime_autotune.py"]) - 1
    assert run.stdout.rstrip().splitlines()[-1] == f"kgate lint: FAILED: 1 file(s), {errors} errors, 0 warnings, 1 note"


def _kg201(options: dict[str, object] | None = None) -> dict[tuple[str, int], tuple[str, str]]:
    findings, _suppressed = linted(RULES / "KG201", {"runtime-autotune": options} if options else None)
    return {(f.path, f.line): (f.severity.value, f.message) for f in findings}


def test_kg201_severity_of_each_key_class_is_configurable() -> None:
    default = _kg201()
    assert default[("launch_sites.py", 109)][0] == "note"  # `stride`: unclassified, a note as the folder asks
    assert ("launch_sites.py", 64) not in default and ("launch_sites.py", 92) not in default
    configured = _kg201({"model-dims": "warning", "bucketed": "note", "unclassified": "off",
                         "bucketing-functions": ["snap"], "autotune-wrappers": ["project.tuning.sweep"]})
    assert ("launch_sites.py", 109) not in configured
    severity, message = configured[("launch_sites.py", 92)]
    assert severity == "warning" and "'N' (x.shape[-1]), 'F' (F = w.shape[0]), 'hidden' (self.config.hidden_size) " \
        "are model dimensions" in message
    severity, message = configured[("launch_sites.py", 64)]
    assert severity == "note" and "'M' (_tile_rows(M)), 'm_cap'" in message and "are bucketed" in message
    # A run-time key and a model dimension in one decorator: one finding, at the rule's severity, naming both.
    severity, message = configured[("runtime_autotune.py", 64)]
    assert severity == "error" and "'n_rows' (by its name) changes" in message and "'hidden' (by its name) is a " \
        "model dimension" in message


def test_kg201_reports_no_unclassified_key_unless_asked() -> None:
    """The rule's own default (the folder's kgate.toml asks for notes): a key kgate cannot place is not reported."""
    own = _kg201({"bucketing-functions": ["snap"], "autotune-wrappers": ["project.tuning.sweep"]})
    assert not [key for key, (severity, _message) in own.items() if severity == "note"]
    assert ("launch_sites.py", 109) not in own and ("runtime_autotune.py", 26) not in own
    assert ("runtime_autotune.py", 13) in own  # a token count stays an error


def test_kg201_places_a_product_of_leading_sizes_and_a_length_between_batch_and_heads() -> None:
    """The rows counted as the product of every dimension but the last, and `n` of `b, n, h = decay.shape`: token
    counts, errors (kgate placed neither before: unclassified notes at the same keys); their twins stay silent."""
    default = _kg201()
    severity, message = default[("products.py", 15)]
    assert severity == "error" and "'N' (n = torch.prod(" in message and "changes with the token count" in message
    severity, message = default[("products.py", 44)]
    assert severity == "error" and "'N' (decay.shape[1]) changes with the token count" in message
    assert ("products.py", 30) not in default and ("products.py", 58) not in default


def test_kg201_follows_launch_sites_and_calls_into_the_projects_other_modules() -> None:
    """A kernel launched only from another module (conv/ops.py), and a launcher called only from another module
    (conv/layers.py): their keys are what those modules pass, not unclassified notes."""
    default = _kg201()
    severity, message = default[("conv/kernels.py", 10)]
    assert severity == "error" and "'blocks' (blocks = triton.cdiv(B * T, 1024)) changes" in message
    severity, message = default[("conv/kernels.py", 22)]
    assert severity == "error" and "'count' (hidden.shape[0]) changes" in message
    assert ("conv/kernels.py", 16) not in default and ("conv/kernels.py", 28) not in default  # the widths


def test_a_verdict_read_from_another_modules_calls_is_linted_again_when_that_module_changes(tmp_path: Path) -> None:
    """conv/kernels.py's key is decided by the call in conv/layers.py: after only that file changed, a warm run does
    not answer conv/kernels.py from the cache."""
    project = copy_project("rules/KG201", tmp_path)
    first = kgate("lint", "--format", "json", cwd=project)
    assert ("conv/kernels.py", 22, "KG201", "40") in found(first)
    layers = project / "conv" / "layers.py"
    layers.write_text(layers.read_text().replace("scale_rows(hidden, hidden.shape[0])", "scale_rows(hidden, 1)"))
    second = kgate("lint", "--format", "json", cwd=project)
    assert found(first) - found(second) == {("conv/kernels.py", 22, "KG201", "40")}


def test_a_static_method_kernels_verdict_is_linted_again_when_its_launching_module_changes(tmp_path: Path) -> None:
    """methods/kernels/act.py's key is decided by the launch in methods/ops.py, which reaches the kernel through the
    package: after only that file changed, a warm run does not answer act.py from the cache."""
    project = copy_project("rules/KG201", tmp_path)
    first = kgate("lint", "--format", "json", cwd=project)
    assert ("methods/kernels/act.py", 17, "KG201", "32") in found(first)
    ops = project / "methods" / "ops.py"
    ops.write_text(ops.read_text().replace("size = x.numel()", "size = x.shape[-1]"))
    second = kgate("lint", "--format", "json", cwd=project)
    assert found(first) - found(second) == {("methods/kernels/act.py", 17, "KG201", "32")}


def test_a_one_config_verdict_is_linted_again_when_the_builders_module_changes(tmp_path: Path) -> None:
    """built/kernels.py's debug autotune holds one config as built/tuning.py builds it: after only that file changed
    (a second block size), a warm run does not answer built/kernels.py from the cache, and the key is reported."""
    project = copy_project("rules/KG201", tmp_path)
    first = kgate("lint", "--format", "json", cwd=project)
    assert ("built/kernels.py", 17, "KG201", "60") not in found(first)
    tuning = project / "built" / "tuning.py"
    tuning.write_text(tuning.read_text().replace("block_m = [32]\n", "block_m = [32, 64]\n", 1))
    second = kgate("lint", "--format", "json", cwd=project)
    assert found(second) - found(first) == {("built/kernels.py", 17, "KG201", "60")}


def test_a_verdict_read_from_the_projects_modules_is_linted_again_when_a_module_is_added(tmp_path: Path) -> None:
    """A warm run answers conv/kernels.py from the cache while no Python file of the project changed; a module added
    since that calls its launcher with a token count is read, and the key it decides is reported."""
    project = copy_project("rules/KG201", tmp_path)
    layers = project / "conv" / "layers.py"
    layers.write_text(layers.read_text().replace("scale_rows(hidden, hidden.shape[0])", "scale_rows(hidden, 1)"))
    first = kgate("lint", "--format", "json", cwd=project)
    assert ("conv/kernels.py", 22, "KG201", "40") not in found(first)
    assert found(kgate("lint", "--format", "json", cwd=project)) == found(first)
    (project / "conv" / "serving.py").write_text(
        "from .kernels import scale_rows\n\n\ndef step(tokens):\n    scale_rows(tokens, tokens.shape[0])\n")
    second = kgate("lint", "--format", "json", cwd=project)
    assert found(second) - found(first) == {("conv/kernels.py", 22, "KG201", "40")}


def test_each_module_is_split_once_however_often_its_launchers_are_followed(monkeypatch: pytest.MonkeyPatch) -> None:
    """KG201 and KG108 read conv/ops.py and conv/layers.py for what they pass to conv/kernels.py, then lint those
    files themselves: each module's top-level statements are found once in the run (a module read on the side
    does not displace the one under lint, nor is it split again at each reading)."""
    from kgate.collect import pysparse

    split = pysparse._split
    counts: dict[str, int] = {}

    def counted(lines: list[str]) -> list[pysparse.Block] | None:
        callers = {sys._getframe(depth).f_code.co_name for depth in range(2, 7)}
        if "_top_level" not in callers:  # the import resolver's own read, kept by file state
            text = "\n".join(lines)
            counts[text] = counts.get(text, 0) + 1
        return split(lines)

    monkeypatch.setattr(pysparse, "_split", counted)
    linted(RULES / "KG108")
    linted(RULES / "KG201")
    assert counts and max(counts.values()) == 1, sorted(counts.values())


def test_kg201_project_names_are_options() -> None:
    unconfigured = _kg201({"bucketing-functions": [], "autotune-wrappers": [], "unclassified": "note"})
    # Without the wrapper's name the rule never reads the module (it does not spell the pre-filter's word) ...
    assert not any(path == "configured_wrapper.py" for path, _line in unconfigured)
    # ... and without the bucketing function the key it bounds is a run-time argument kgate cannot place.
    severity, message = unconfigured[("launch_sites.py", 64)]
    assert severity == "note" and message.startswith("autotune key of `bucketed`: 'M_SNAP' is a run-time argument")


def test_kg202_reset_lists_built_per_call_and_kernels_of_other_modules(tmp_path: Path) -> None:
    project = copy_project("rules/KG202", tmp_path)
    first = kgate("lint", "--format", "json", cwd=project)
    by_line = {(f["path"], f["line"]): f for f in first.json()["findings"]}
    # A buffer the list holds on one branch only: a warning that names the branch; on no branch: an error.
    sometimes = by_line[("across/computed_lists.py", 27)]
    assert sometimes["severity"] == "warning" and "restores only when varlen" in sometimes["message"]
    assert by_line[("across/computed_lists.py", 13)]["severity"] == "error"
    assert "the list names `Dq`, which is not `dq`" in by_line[("across/computed_lists.py", 74)]["message"]
    imported = by_line[("across/apply_imported.py", 9)]
    assert "across/plain_kernels.py:9" in imported["message"]
    # The verdict on the applying module depends on the kernel's module: editing only that one is seen warm.
    kernels = project / "across" / "plain_kernels.py"
    kernels.write_text(kernels.read_text().replace("tl.atomic_add(c + offs, tl.load(a + offs))\n\n\n",
                                                   "tl.store(c + offs, tl.load(a + offs))\n\n\n", 1))
    second = kgate("lint", "--format", "json", cwd=project)
    assert set(found(first)) - set(found(second)) == {("across/apply_imported.py", 9, "KG202", "18")}


def test_a_verdict_that_follows_the_projects_own_import_of_triton_is_linted_again_when_that_module_changes(
        tmp_path: Path) -> None:
    """A kernel module that takes Triton from the project's own module is read through that module: a warm run
    after only that module changed (it no longer imports Triton, only a stand-in) does not answer from the cache."""
    project = copy_project("rules/KG204", tmp_path)
    first = kgate("lint", "--format", "json", cwd=project)
    assert ("engine/kernels.py", 16, "KG204", "5") in found(first)
    utils = project / "engine" / "triton_utils.py"
    utils.write_text(utils.read_text().replace("    import triton\n    import triton.language as tl\n",
                                               "    raise ImportError\n"))
    second = kgate("lint", "--format", "json", cwd=project)
    assert {f for f in found(first) if f[0].startswith("engine/")} - found(second) == {
        ("engine/kernels.py", 16, "KG204", "5"), ("engine/kernels.py", 22, "KG204", "5"),
        ("engine/kernels.py", 27, "KG204", "5"), ("engine/relative.py", 12, "KG204", "5"),
        ("engine/debugging.py", 8, "KG204", "5")}


def test_kg201_takes_the_length_of_a_flattened_tensor_for_its_element_count() -> None:
    """`len(x.flatten())` (`len(x.reshape(-1))`, through a local) counts every element of x, as `x.numel()` does:
    the token count's for an activation (flat/layers.py), a model dimension for a weight."""
    default = _kg201()
    for line, said in ((10, "size = len(flattened)"), (17, "size = len(grad)")):
        severity, message = default[("flat/kernels.py", line)]
        assert severity == "error" and f"'size' ({said}) changes" in message, message
    assert ("flat/kernels.py", 24) not in default  # the weight's


def test_kg201_reads_kernels_that_are_static_methods_launched_through_a_package() -> None:
    """Kernels that are static methods of a class (methods/kernels/act.py), autotuned through the package's own
    wrapper with the key given by position, launched from another module as `kernels.Act.forward[grid](...)`: each key
    is what that launch passes."""
    default = _kg201()
    severity, message = default[("methods/kernels/act.py", 17)]
    assert severity == "error" and "'size' (size = x.numel()) changes" in message, message
    assert ("methods/kernels/act.py", 24) not in default  # the width: a model dimension


def test_kg201_places_the_dimensions_a_layout_names() -> None:
    """layouts.py: the rows of a GEMM named by their letter (`m_size` of `num_batches, m_size, k_size`), the sequence
    beside heads named by their words (`y_size` of `num_batches, num_heads, y_size, x_size`) and the spatial extents
    after a channels dimension are token counts, errors; unplaced, they were notes. The widths beside them are not."""
    default = _kg201()
    for line, said in ((12, "'m_size' (x.shape[1])"), (32, "'y_size' (q.shape[2])"),
                       (64, "'in_height' (x.shape[2]), 'in_width' (x.shape[3]), 'out_height'"),
                       (89, "'spatial_dim' (x.shape[2])"), (95, "'L' (y.shape[2])")):
        severity, message = default[("layouts.py", line)]
        assert severity == "error" and said in message, message
    assert default[("layouts.py", 51)][0] == "note"  # `y_size` beside no heads: unplaced
    for line in (18, 38, 70, 101):  # k_size and n_size, the head dimension, the channel counts, `C` of `B, T, C`
        assert ("layouts.py", line) not in default
