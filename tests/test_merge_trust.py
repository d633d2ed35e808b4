"""`kgate merge` merges only what kgate wrote, for the commit and configuration where it runs.

A small project (one Triton kernel, one CUDA file: two units, so two shards of one unit each) is
gated once in two shards; every case then edits a copy of a shard's JSON, or runs one shard again
on another state of the project, and merge must refuse it with one line and exit 2 rather than
report on other kernels or on fewer of them. The JSON edits need no compile.
"""

from __future__ import annotations

import json
import shutil
from pathlib import Path
from typing import Any

import pytest
from conftest import FIXTURES, Run, kgate

from kgate.shard.result import seal

CUDA = "__global__ void triv(float* x) { x[threadIdx.x] = 1.f; }\n"


@pytest.fixture(scope="module")
def project(tmp_path_factory: pytest.TempPathFactory) -> Path:
    folder = tmp_path_factory.mktemp("merge") / "project"
    folder.mkdir()
    shutil.copy(FIXTURES / "bad" / "fifo-check" / "k.py", folder)
    config = (FIXTURES / "bad" / "fifo-check" / "kgate.toml").read_text()
    (folder / "kgate.toml").write_text(config + '\n[[cuda]]\nsources = ["csrc/*.cu"]\n')
    (folder / "csrc").mkdir()
    (folder / "csrc" / "t.cu").write_text(CUDA)
    for index in (1, 2):
        run = kgate("check", "--shard", f"{index}/2", "--format", "json", "-o", f"shard-{index}.json", cwd=folder)
        assert run.code == 0, run.stderr
    merged = merge(folder)
    assert merged.code == 0 and "passed: 2 kernel variant(s)" in merged.stdout, merged.stdout + merged.stderr
    return folder


def merge(folder: Path, first: str = "shard-1.json", second: str = "shard-2.json") -> Run:
    return kgate("merge", first, second, cwd=folder)


def refused(run: Run, words: str) -> None:
    assert run.code == 2, run.stdout + run.stderr
    assert run.stdout == "" and run.stderr.count("\n") == 1, run.stderr
    assert run.stderr.startswith("kgate: error: ") and words in run.stderr, run.stderr


def triton_shard(folder: Path) -> int:
    """The shard whose slice holds the Triton kernel."""
    for index in (1, 2):
        if "triton:k:good" in json.loads((folder / f"shard-{index}.json").read_text())["shard"]["slice"]:
            return index
    raise AssertionError("no shard holds k:good")


def another_state(project: Path, tmp_path: Path, old: str, new: str, file: str) -> tuple[Path, int]:
    """A copy of the project with one edit (another commit or configuration), and its Triton shard run there."""
    copy = tmp_path / "copy"
    shutil.copytree(project, copy)  # the cache too: the same timings, the same split
    text = (copy / file).read_text()
    assert text.count(old) == 1
    (copy / file).write_text(text.replace(old, new))
    index = triton_shard(project)
    run = kgate("check", "--shard", f"{index}/2", "--format", "json", "-o", f"shard-{index}.json", cwd=copy)
    assert run.code == 0, run.stderr
    return copy, index


@pytest.mark.parametrize(("file", "old", "new", "what"), [
    ("k.py", "* 2.0", "* 3.0 + 1.0", "k.py differs"),  # another commit
    ("kgate.toml", "BLOCK = 128", "BLOCK = 256", "the configuration differs"),  # another configuration
])
def test_merge_refuses_a_shard_of_another_commit_or_configuration(project: Path, tmp_path: Path, file: str,
                                                                  old: str, new: str, what: str) -> None:
    copy, index = another_state(project, tmp_path, old, new, file)
    other = 3 - index
    moved = json.loads((copy / f"shard-{index}.json").read_text())["shard"]
    kept = json.loads((project / f"shard-{index}.json").read_text())["shard"]
    assert (moved["fingerprint"], moved["assignment"]) == (kept["fingerprint"], kept["assignment"])  # same units
    # The edited shard with the other shard of the original commit, merged where either commit is checked out.
    shutil.copy(project / f"shard-{other}.json", copy)
    refused(merge(copy), f"read different inputs ({what}): run every shard on the same commit and configuration")
    (tmp_path / "edited.json").write_text((copy / f"shard-{index}.json").read_text())
    refused(merge(project, f"shard-{other}.json", str(tmp_path / "edited.json")), f"({what})")
    # The original shards, merged in a checkout that has moved on since.
    for name in ("shard-1.json", "shard-2.json"):
        shutil.copy(project / name, copy)
    refused(merge(copy), f"is not the one the shards gated ({what}): merge on the shards' commit and configuration")


def edited(project: Path, tmp_path: Path, change: Any, *, reseal: bool = False) -> Run:
    """Merge with the Triton shard's JSON changed by `change` (a function of its `shard` object)."""
    index = triton_shard(project)
    doc = json.loads((project / f"shard-{index}.json").read_text())
    change(doc["shard"])
    if reseal:  # as if kgate had written it: the checks behind the digest must hold on their own
        doc["shard"] = seal({k: v for k, v in doc["shard"].items() if k != "digest"})
    path = tmp_path / "edited.json"
    path.write_text(json.dumps(doc))
    return merge(project, f"shard-{3 - index}.json", str(path))


def _set(key: str, value: Any) -> Any:
    def change(shard: dict[str, Any]) -> None:
        shard[key] = value
    return change


def _registers(shard: dict[str, Any]) -> None:
    shard["facts"][0]["resources"]["registers"] = "many"


def _fact_seconds(shard: dict[str, Any]) -> None:
    shard["facts"][0]["compile_seconds"] = "fast"


def _seconds(value: Any) -> Any:
    def change(shard: dict[str, Any]) -> None:
        shard["seconds"]["triton:k:good"] = value
    return change


def _duplicate(shard: dict[str, Any]) -> None:
    shard["facts"].append(dict(shard["facts"][0]))


def _empty(shard: dict[str, Any]) -> None:
    shard["facts"] = []


def _finding_line(shard: dict[str, Any]) -> None:
    shard["compiled_findings"] = [{"path": "k.py", "line": "one", "col": 0, "code": "KG102", "name": "x",
                                   "severity": "error", "message": "m", "identity": "i"}]


def _finding_related(shard: dict[str, Any]) -> None:
    shard["compiled_findings"] = [{"path": "k.py", "line": 1, "col": 0, "code": "KG107", "name": "x",
                                   "severity": "error", "message": "m", "identity": "i",
                                   "related": [{"path": "k.py", "line": "two", "message": "m", "ptx_line": 0}]}]


def _count(shard: dict[str, Any]) -> None:
    shard["count"] = 10**30


@pytest.mark.parametrize(("change", "words"), [
    (_registers, "malformed shard result (facts[0]: a KernelFacts record with the wrong types: counts)"),
    (_fact_seconds, "malformed shard result (facts[0]: a KernelFacts record with the wrong types: compile_seconds)"),
    (_seconds("fast"), 'malformed shard result (seconds of triton:k:good is "fast", not a number of seconds)'),
    (_seconds(float("nan")), "malformed shard result (seconds of triton:k:good is NaN, not a number of seconds)"),
    (_seconds(-1e308), "malformed shard result (seconds of triton:k:good is -1e+308, not a number of seconds)"),
    (_seconds(float("inf")), "(seconds of triton:k:good is Infinity, not a number of seconds)"),
    (_duplicate, "malformed shard result (facts hold k:good|"),
    (_finding_line, "malformed shard result (compiled_findings[0]: line of the wrong type)"),
    (_finding_related, "malformed shard result (compiled_findings[0]: related[0] is not a related place)"),
    (_count, "malformed shard result (count 1000000000000000000000000000000 is not between 1 and 1000)"),
    (_set("units", "2"), "malformed shard result (units of the wrong type)"),
    (_set("options", {"targets": ["sm_120a"]}), "malformed shard result (options must be "),
    (_empty, "changed after kgate wrote it (its content does not match its digest)"),
], ids=["registers-text", "fact-seconds-text", "seconds-text", "seconds-nan", "seconds-negative", "seconds-inf",
        "fact-twice", "finding-line-text", "finding-related-text", "count-huge", "units-text", "options-cut", "facts-emptied"])
def test_merge_refuses_a_shard_result_not_as_kgate_wrote_it(project: Path, tmp_path: Path, change: Any,
                                                            words: str) -> None:
    timings = project / ".kgate-cache" / "shard-timings.json"
    before = timings.read_bytes() if timings.exists() else None
    refused(edited(project, tmp_path, change), words)
    # Nothing of a refused merge reaches the timings the next shards balance on.
    assert (timings.read_bytes() if timings.exists() else None) == before


def test_merge_refuses_facts_outside_their_slice_even_with_a_matching_digest(project: Path, tmp_path: Path) -> None:
    other = json.loads((project / f"shard-{3 - triton_shard(project)}.json").read_text())["shard"]

    def foreign(shard: dict[str, Any]) -> None:
        shard["facts"].append(other["facts"][0])  # the CUDA kernel, whose file is the other shard's

    refused(edited(project, tmp_path, foreign, reseal=True), "holds the facts of triv|csrc/t.cu|sm_120a, which is "
                                                            "not in its slice")
    refused(edited(project, tmp_path, _seconds(float("nan")), reseal=True), "is NaN, not a number of seconds")


@pytest.mark.parametrize(("encoding", "words"), [
    ("utf-16", "not valid UTF-8 (it is UTF-16, by its byte order mark): save it as UTF-8"),  # PowerShell's `>`
    ("utf-16-le", "not valid UTF-8 (a NUL byte at byte 1: UTF-16 or UTF-32?): save it as UTF-8"),
    ("utf-32", "not valid UTF-8 (it is UTF-32, by its byte order mark): save it as UTF-8"),
])
def test_merge_refuses_a_shard_result_saved_in_another_encoding(project: Path, tmp_path: Path, encoding: str,
                                                                words: str) -> None:
    """JSON read from bytes guesses UTF-16 and UTF-32 (its digest is of the values, so those matched): a shard
    result is UTF-8, as kgate writes it, or it is refused."""
    path = tmp_path / "resaved.json"
    path.write_bytes((project / "shard-1.json").read_text(encoding="utf-8").encode(encoding))
    refused(merge(project, str(path), "shard-2.json"), f"{path}: {words}")
