"""`kgate check --shard I/N` and `kgate merge` on a real project, compiled once on this CPU-only machine.

The project (fixtures/shard plus the Triton kernels of fixtures/compiled and
CUDA sources of fixtures/cuda) has findings of every kind, a compile error,
suppression comments (one used, two unused: one on a kernel's line, one for
a whole file whose kernels land in different shards), CUDA files that must
be gated together, and a baseline pinned from it and then edited so the
comparison has NEW, WORSE, IMPROVED and GONE lines. One unsharded run per
format is the reference; three shards merged must give the same bytes and
exit code.
"""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest
from conftest import FIXTURES, REPO, Run, copy_project, kgate, variant_key

from kgate.collect.registry import triton_entries
from kgate.core.config import load_config
from kgate.ratchet.baseline import Pin, load, save
from kgate.shard.plan import units
from kgate.shard.result import seal

FORMATS = ("json", "terminal", "sarif", "github", "junit")
CUDA_FILES = ("pdl.cu", "pdl_launch.cuh", "spill.cu", "templates.cu", "block_scale.cu", "mma.cuh",
              "bare_unguarded.cu")
# Variants named by their readable part; `pinned` resolves them to the baseline's keys (tag included).
CEILING = ("gemm_resources:gemm_at_ceiling", "BK=64,BM=128,BN=128,warps=8,stages=3", "sm_120a")
BRANCH = ("pdl:wait_under_branch", "BLOCK=1024,warps=4,stages=3,pdl", "sm_120a")
PINNED: dict[tuple[str, str, str], str] = {}
GONE_KERNEL = "old:gone_kernel|BLOCK=64,warps=4,stages=3|sm_120a"
GONE_VARIANT = "pdl:not_pdl|BLOCK=2048,warps=4,stages=3|sm_120a"
GONE_CUDA = "spill_kernel|csrc/templates.cu|sm_120a"
GONE_SOURCE = "KG201|tuned.py|tuned|x"


def build(dest: Path) -> Path:
    project = copy_project("shard", dest)
    for path in sorted((FIXTURES / "compiled").glob("*.py")):
        shutil.copy(path, project)
    for name in CUDA_FILES:
        shutil.copy(FIXTURES / "cuda" / name, project / "csrc")
    small = "def gemm_small_tile(a, b, c, M, N, K, BM: tl.constexpr, BN: tl.constexpr, BK: tl.constexpr):"
    plant(project / "gemm_resources.py", small, small + "  # kgate: ignore[KG105] planted: silences nothing")
    plant(project / "occupancy.py", "# expect: KG105@sm_120a KG105@sm_90a",
          "# kgate: ignore[KG105] planted: one whole row per program, on purpose")
    with open(project / "pdl.py", "a", encoding="utf-8") as handle:
        handle.write("# kgate: ignore-file[KG104] planted: no kernel of this file has a large pipeline\n")
    return project


def plant(path: Path, old: str, new: str) -> None:
    text = path.read_text(encoding="utf-8")
    assert text.count(old) == 1, (path, old)
    path.write_text(text.replace(old, new), encoding="utf-8")


def edit_baseline(project: Path) -> None:
    path = project / "kgate-baseline.toml"
    baseline = load(path)
    for name in (CEILING, BRANCH):
        PINNED[name] = variant_key(baseline.kernels, *name)
    ceiling, branch = PINNED[CEILING], PINNED[BRANCH]
    baseline.kernels[ceiling] = {**baseline.kernels[ceiling], "registers": 250}  # WORSE
    spill = "spill_kernel|csrc/spill.cu|sm_120a"
    baseline.kernels[spill] = {**baseline.kernels[spill], "registers": baseline.kernels[spill]["registers"] + 8}
    del baseline.kernels[branch]  # NEW: an at-risk kernel and its finding, unpinned
    del baseline.findings[f"KG107|pdl.py|{branch}"]
    zero = {"registers": 250, "spill_bytes": 0, "stack_bytes": 0, "smem_bytes": 0}
    for key in (GONE_KERNEL, GONE_VARIANT, GONE_CUDA):
        baseline.kernels[key] = dict(zero)
    baseline.findings[f"KG102|old.py|{GONE_KERNEL}"] = Pin(1)
    baseline.findings[GONE_SOURCE] = Pin(1)
    save(baseline, path)


@pytest.fixture(scope="module")
def project(tmp_path_factory: pytest.TempPathFactory, compiled_cold: tuple[Path, Run]) -> Path:
    project = build(tmp_path_factory.mktemp("shard"))
    # The Triton kernels are fixtures/compiled's: the session compiled them (for sm_120a among others), and their
    # records serve here as they would in any project with the same sources. The CUDA files compile now.
    shutil.copytree(compiled_cold[0] / ".kgate-cache", project / ".kgate-cache", symlinks=True)
    pinned = kgate("baseline", "update", "--accept-new", cwd=project)  # the one compile of this module
    # Exit 1 for bare_unguarded.cu, which does not compile: a compile failure is never pinned.
    failing = [line for line in pinned.stderr.splitlines() if line.startswith("failing ")]
    assert pinned.code == 1 and len(failing) == 1 and "KG001|csrc/bare_unguarded.cu|" in failing[0], pinned.stderr
    edit_baseline(project)
    return project


@pytest.fixture(scope="module")
def unsharded(project: Path) -> dict[str, Run]:
    return {fmt: kgate("check", "--format", fmt, cwd=project) for fmt in FORMATS}


@pytest.fixture(scope="module")
def shards(project: Path) -> list[dict]:
    out = []
    for index in (1, 2, 3):
        run = kgate("check", "--shard", f"{index}/3", "--format", "json", "-o", f"shard-{index}.json", cwd=project)
        assert run.code in (0, 1), run.stderr
        out.append(json.loads((project / f"shard-{index}.json").read_text()))
    return out


def merge(project: Path, *args: str, files: tuple[str, ...] = ("shard-1.json", "shard-2.json", "shard-3.json")) -> Run:
    return kgate("merge", *files, *args, cwd=project)


def test_merged_shards_give_the_unsharded_report_byte_for_byte_in_every_format(
        project: Path, unsharded: dict[str, Run], shards: list[dict]) -> None:
    for fmt in FORMATS:
        merged = merge(project, "--format", fmt)
        assert merged.code == unsharded[fmt].code == 1, (fmt, merged.stderr)
        assert merged.stdout == unsharded[fmt].stdout, fmt
        assert merged.stderr == unsharded[fmt].stderr, fmt


def test_the_reference_run_has_every_kind_of_finding_and_difference(unsharded: dict[str, Run],
                                                                   shards: list[dict]) -> None:
    # Without these the equality above would prove less than it claims.
    data = unsharded["json"].json()
    # Lines of their own, and those a finding says (the unpinned kernel is new on its pdl-missing-wait finding).
    said = {(d["kind"], d["subject"]) for f in data["findings"] for d in f["ratchet"]}
    kinds = {(d["kind"], d["subject"]) for d in data["ratchet"]} | said
    assert {kind for kind, _subject in kinds} == {"NEW", "WORSE", "IMPROVED", "GONE"}
    assert {("GONE", GONE_KERNEL), ("GONE", GONE_VARIANT), ("GONE", GONE_CUDA), ("GONE", GONE_SOURCE),
            ("WORSE", PINNED[CEILING]), ("NEW", PINNED[BRANCH])} <= kinds
    assert ("NEW", PINNED[BRANCH]) in said
    codes = {f["code"] for f in data["findings"]}
    assert {"KG002", "KG105"} & codes == {"KG002"}  # KG105 suppressed; two unused suppressions
    raw = {f["code"] for s in shards for f in s["shard"]["compiled_findings"]}
    assert {"KG001", "KG105"} <= raw  # KG105 suppressed; the compile error never baselined:
    assert "KG001" in codes
    assert sorted(f["path"] for f in data["findings"] if f["code"] == "KG002") == ["gemm_resources.py", "pdl.py"]
    assert data["summary"]["suppressed"] == 1 and data["summary"]["baselined"] > 0
    assert {k["language"] for k in data["kernels"]} == {"triton", "cuda"}
    pdl = {k["kernel"]: k["pdl"] for k in data["kernels"] if k["kernel"].startswith("scale_kernel")}
    assert pdl == {"scale_kernel<2>": False, "scale_kernel<3>": True}


def test_slices_are_disjoint_and_cover_every_unit(project: Path, shards: list[dict]) -> None:
    slices = [s["shard"]["slice"] for s in shards]
    every = [unit for part in slices for unit in part]
    config = load_config(project / "kgate.toml")
    planned = [u.id for u in units(config, [e.kernel for e in triton_entries(config)])]
    assert len(every) == len(set(every)) == shards[0]["shard"]["units"] == len(planned)
    assert sorted(every) == sorted(planned)
    assert all(part for part in slices)
    assert "cuda:csrc/scale_a.cu+csrc/scale_b.cu" in every  # gated together: one file's launch decides the other's
    assert len({(s["shard"]["fingerprint"], s["shard"]["assignment"]) for s in shards}) == 1
    assert [s["shard"]["source"] is not None for s in shards] == [True, False, False]


def test_a_shard_compares_only_its_slice_and_never_reports_other_shards_pins_as_gone(
        shards: list[dict], unsharded: dict[str, Run]) -> None:
    union = set()
    for shard in shards:
        meta = shard["shard"]
        kernels = {u.split(":", 1)[1] for u in meta["slice"] if u.startswith("triton:")}
        files = {f for u in meta["slice"] if u.startswith("cuda:") for f in u.split(":", 1)[1].split("+")}
        for diff in shard["ratchet"]:
            union.add((diff["kind"], diff["subject"]))
            if diff["subject"] == GONE_SOURCE:
                assert meta["index"] == 1  # the shard that ran the source rules
                continue
            parts = diff["subject"].split("|")
            kernel, variant = (parts[2], parts[3]) if parts[0].startswith("KG") else (parts[0], parts[1])
            assert kernel in kernels or variant in files or kernel in files, (meta["index"], diff)
        assert {k["kernel"] for k in shard["kernels"] if k["language"] == "triton"} <= kernels
    reference = {(d["kind"], d["subject"]) for d in unsharded["json"].json()["ratchet"]}
    # Each shard saw its part of the differences; only the whole run knows a kernel no shard owns is gone.
    assert reference - union == {("GONE", GONE_KERNEL), ("GONE", f"KG102|old.py|{GONE_KERNEL}")}
    assert union <= reference


def test_a_shard_judges_no_kernel_suppression_unused_but_merge_does(shards: list[dict],
                                                                    unsharded: dict[str, Run]) -> None:
    for shard in shards:
        assert not [f for f in shard["findings"] if f["code"] == "KG002" and f["path"] == "pdl.py"]
    assert [f for f in unsharded["json"].json()["findings"] if f["code"] == "KG002" and f["path"] == "pdl.py"]


@pytest.mark.parametrize("value", ["0/3", "4/3", "abc", "1/0", "2", "-1/3", "1/99999999999999999999999",
                                   "1/30000000"])
def test_invalid_shard_values_are_one_line_usage_errors(tmp_path: Path, value: str) -> None:
    run = kgate("check", f"--shard={value}", cwd=tmp_path)
    assert run.code == 2
    assert run.stderr.count("\n") == 1 and run.stderr.startswith(f"kgate: error: --shard {value}:"), run.stderr
    assert "Traceback" not in run.stderr


def refused(run: Run, words: str) -> None:
    assert run.code == 2, run.stdout + run.stderr
    assert run.stderr.count("\n") == 1 and words in run.stderr, run.stderr
    assert run.stdout == ""


def test_merge_refuses_a_missing_a_repeated_or_a_foreign_slice(project: Path, shards: list[dict]) -> None:
    refused(merge(project, files=("shard-1.json", "shard-3.json")), "shard 2/3 missing")
    refused(merge(project, files=("shard-1.json", "shard-2.json", "shard-2.json", "shard-3.json")),
            "shard 2/3 is given twice")
    kgate("check", "--format", "json", "-o", "whole.json", cwd=project)
    refused(merge(project, files=("shard-1.json", "whole.json")), "whole.json: not a shard result")
    two = kgate("check", "--shard", "1/2", "--format", "json", "-o", "half.json", cwd=project)
    assert two.code in (0, 1), two.stderr
    refused(merge(project, files=("half.json", "shard-2.json", "shard-3.json")), "different shard counts")


def test_merge_refuses_a_malformed_shard_result(project: Path, shards: list[dict], tmp_path: Path) -> None:
    broken = json.loads((project / "shard-2.json").read_text())
    broken["shard"]["slice"] = "cuda:csrc/pdl.cu"
    (tmp_path / "broken.json").write_text(json.dumps(broken))
    refused(merge(project, files=("shard-1.json", str(tmp_path / "broken.json"), "shard-3.json")),
            "malformed shard result (slice of the wrong type)")
    del broken["shard"]["facts"]
    (tmp_path / "broken.json").write_text(json.dumps(broken))
    refused(merge(project, files=("shard-1.json", str(tmp_path / "broken.json"), "shard-3.json")),
            "malformed shard result (no facts)")
    (tmp_path / "broken.json").write_text("{")
    refused(merge(project, files=(str(tmp_path / "broken.json"),)), "not JSON")


def test_merge_refuses_overlapping_slices(project: Path, shards: list[dict], tmp_path: Path) -> None:
    tampered = json.loads((project / "shard-2.json").read_text())
    tampered["shard"]["slice"].append(shards[0]["shard"]["slice"][0])
    tampered["shard"] = seal({k: v for k, v in tampered["shard"].items() if k != "digest"})  # past the digest
    (tmp_path / "shard-2.json").write_text(json.dumps(tampered))
    run = merge(project, files=("shard-1.json", str(tmp_path / "shard-2.json"), "shard-3.json"))
    refused(run, f"{shards[0]['shard']['slice'][0]} is in two slices")


def test_merge_refuses_shards_that_split_the_units_differently(project: Path, shards: list[dict]) -> None:
    # A runner that restored another cache plans with other timings: the assignment differs.
    timings = project / ".kgate-cache" / "shard-timings.json"
    before = timings.read_text()
    try:
        timings.write_text(json.dumps({"version": 1, "seconds": {"triton:pdl:not_pdl": 1000.0}}))
        other = kgate("check", "--shard", "2/3", "--format", "json", "-o", "other-2.json", cwd=project)
        assert other.code in (0, 1), other.stderr
    finally:
        timings.write_text(before)
    refused(merge(project, files=("shard-1.json", "other-2.json", "shard-3.json")), "split the kernels differently")


def test_merge_refuses_shards_of_another_project_state(project: Path, shards: list[dict], tmp_path: Path) -> None:
    # The same project with one more CUDA file (a runner on another commit): another unit list.
    other = tmp_path / "other"
    shutil.copytree(project, other)
    (other / "csrc" / "extra_kernel.cu").write_text(
        "__global__ void extra_kernel(float* x) { x[threadIdx.x] = 1.f; }\n")
    config = other / "kgate.toml"
    config.write_text(config.read_text().replace('"csrc/scale_*.cu"]', '"csrc/scale_*.cu", "csrc/extra_*.cu"]'))
    run = kgate("check", "--shard", "2/3", "--format", "json", "-o", str(tmp_path / "moved-2.json"), cwd=other)
    assert run.code in (0, 1), run.stderr
    refused(merge(project, files=("shard-1.json", str(tmp_path / "moved-2.json"), "shard-3.json")),
            "planned over different kernels and files")
    # And merging the project's own shards where the project has changed since.
    for index in (1, 2, 3):
        shutil.copy(project / f"shard-{index}.json", other)
    refused(merge(other), "has other kernels or files than the shards planned over")


def test_partition_is_balanced_by_the_recorded_timings(project: Path, shards: list[dict]) -> None:
    timings = json.loads((project / ".kgate-cache" / "shard-timings.json").read_text())["seconds"]
    assert {k.split(":", 1)[0] for k in timings} == {"triton", "cuda"}
    loads = []
    for shard in shards:
        atoms = [f"triton:{u[7:]}" if u.startswith("triton:") else f"cuda:{f}"
                 for u in shard["shard"]["slice"] for f in (u[5:].split("+") if u.startswith("cuda:") else [u])]
        loads.append(sum(timings[a] for a in atoms))
    heaviest = max(timings.values())
    # Greedy least-loaded assignment: no two slices differ by more than the heaviest unit. (Nothing tighter holds
    # for measured timings: on a loaded machine one unit can take a third of the whole.)
    assert max(loads) - min(loads) <= heaviest
    again = [kgate("check", "--shard", f"{i}/3", "--format", "json", cwd=project) for i in (1, 2, 3)]
    assert [r.json()["shard"]["slice"] for r in again] == [s["shard"]["slice"] for s in shards]
    # Make another kernel the heaviest by far: it gets a slice of its own. The same command lines
    # again: a changed timings file means a new plan, not the replay of the last run's output.
    path = project / ".kgate-cache" / "shard-timings.json"
    before = path.read_text()
    try:
        path.write_text(json.dumps({"version": 1, "seconds": {**timings, "triton:pdl:not_pdl": 10 * sum(
            timings.values())}}))
        runs = [kgate("check", "--shard", f"{i}/3", "--format", "json", cwd=project) for i in (1, 2, 3)]
    finally:
        path.write_text(before)
    slices = [r.json()["shard"]["slice"] for r in runs]
    assert ["triton:pdl:not_pdl"] in slices


def test_merge_records_every_slices_timings(project: Path, shards: list[dict]) -> None:
    path = project / ".kgate-cache" / "shard-timings.json"
    before = path.read_text()
    try:
        path.unlink()
        assert merge(project, "--format", "json").code == 1
        merged = json.loads(path.read_text())["seconds"]
    finally:
        path.write_text(before)
    recorded = {}
    for shard in shards:
        recorded.update(shard["shard"]["seconds"])
    assert merged == recorded
    # Every Triton kernel and every CUDA file of the project has its time, whatever the fixtures hold.
    config = load_config(project / "kgate.toml")
    atoms = {atom for u in units(config, [e.kernel for e in triton_entries(config)]) for atom in u.atoms}
    assert set(merged) == atoms


def test_the_docs_document_the_shard_object(shards: list[dict]) -> None:
    page = (REPO / "docs" / "reports.md").read_text()
    section = page.split("\n## JSON output\n", 1)[1].split("\n## ", 1)[0].split("\n### ", 1)[0]
    missing = sorted(f for f in shards[0]["shard"] if f"`{f}`" not in section)
    assert not missing, f"the JSON section of docs/reports.md does not mention {missing}"
    assert "\n## Sharding across CI runners\n" in (REPO / "docs" / "ci.md").read_text()
