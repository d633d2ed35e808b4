"""Held-out record files for `kgate capture`, lines no recorder writes that the earlier cases do not have: two
environments in one process's file, a byte-order mark before a later line or alone on one, `\\r\\r\\n` line ends, a
NaN or an infinite constexpr, `true` for an integer, an empty object, a huge line of garbage, NUL bytes, a negative
warp count, a deeply nested value, a spec whose file is not a module, and a string escaping a lone surrogate (no
UTF-8 file can hold it). Each is recorded as it reads, or refused in one line naming the file; never a traceback,
never a launch recorded under another environment."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from conftest import kgate
from test_capture_imports import blocks, make_project
from test_held_out_capture_records import ENV, _lines, _spec, _write_files

from kgate.support import jsondoc

pytest.importorskip("torch", reason="the captured launchers take torch tensors (pip install torch, or kgate's extra ulp: kernel-gate[ulp])")

GPU = {"type": "env", "where": "NVIDIA RTX PRO 6000", "triton": "3.9.0", "capability": "12.0"}
INCOMPLETE = "the capture is incomplete: a launch may be missing"


def _with(project: Path, block: int, text: str) -> str:
    """A spec line whose constexprs hold `text` (JSON) beside BLOCK."""
    return json.dumps(_spec(project, block)).replace(f'"BLOCK": {block}', f'"BLOCK": {block}, "X": {text}') + "\n"


# name -> (the files, given the project; words the output holds; the BLOCKs captured, None: the capture fails)
WRITTEN = {
    "two-environments-in-one-file": (lambda p: {"records-1.jsonl": _lines(ENV, _spec(p, 64), GPU, _spec(p, 128))},
                                     "records of 2 environments in one process's file", None),
    "the-same-environment-twice": (lambda p: {"records-1.jsonl": _lines(ENV, _spec(p, 64), ENV, _spec(p, 128))},
                                   "", {64, 128}),
    "a-byte-order-mark-before-a-later-line": (lambda p: {"records-1.jsonl": _lines(ENV) + "\ufeff" + _lines(
        _spec(p, 64))}, "", {64}),
    "a-byte-order-mark-alone-on-a-line": (lambda p: {"records-1.jsonl": _lines(ENV) + "\ufeff\n" + _lines(
        _spec(p, 64))}, "records-1.jsonl, line 2: not a record kgate wrote: not JSON", None),
    "carriage-returns-twice": (lambda p: {"records-1.jsonl": _lines(ENV, _spec(p, 64), end="\r\r\n")}, "", {64}),
    "a-nan-constexpr": (lambda p: {"records-1.jsonl": _lines(ENV) + _with(p, 64, "NaN")}, "", {64}),
    "an-infinite-constexpr": (lambda p: {"records-1.jsonl": _lines(ENV) + _with(p, 64, "1e400")}, "", {64}),
    "an-empty-object": (lambda p: {"records-1.jsonl": _lines(ENV, {}, _spec(p, 64))},
                        "line 2: not a record kgate wrote: unknown record type None", None),
    "a-huge-line-of-garbage": (lambda p: {"records-1.jsonl": _lines(ENV, _spec(p, 64)) + "x" * (16 << 20) + "\n"},
                               "line 3: not a record kgate wrote: not JSON", None),
    "nul-bytes": (lambda p: {"records-1.jsonl": _lines(ENV, _spec(p, 64)) + "\0\0\n"},
                  "line 3: not a record kgate wrote: not valid UTF-8 (a NUL byte", None),
    "a-negative-warp-count": (lambda p: {"records-1.jsonl": _lines(ENV, _spec(
        p, 64, options={"num_warps": -4, "num_stages": 3}))}, "options.num_warps: must be a positive integer", None),
    "a-deeply-nested-value": (lambda p: {"records-1.jsonl": _lines(ENV) + _with(p, 64, "[" * 5000 + "]" * 5000)},
                              "line 2: not a record kgate wrote: not JSON (nested too deeply)", None),
    "a-lone-surrogate": (lambda p: {"records-1.jsonl": _lines(ENV) + _with(p, 64, '"a\\ud800"')},
                         "line 2: not a record kgate wrote: not JSON kgate reads (a string escapes a lone surrogate", None),
    "a-surrogate-pair": (lambda p: {"records-1.jsonl": _lines(ENV) + _with(p, 64, '"\\ud83d\\ude00"')}, "", {64}),
}


@pytest.mark.parametrize("name", sorted(WRITTEN))
def test_record_lines_no_recorder_writes(tmp_path: Path, name: str) -> None:
    files, words, wanted = WRITTEN[name]
    project = make_project(tmp_path)
    run = kgate("capture", "--device", "cpu", "--", *_write_files(project, files(project)), cwd=project, timeout=120)
    assert "Traceback" not in run.stderr, run.stderr
    assert words in run.stderr, run.stderr
    if wanted is None:
        assert run.code != 0 and not (project / "kgate-capture.toml").exists(), run.stderr
        return
    assert run.code == 0, run.stderr
    assert blocks(project) == wanted


def test_every_json_kgate_reads_refuses_a_lone_surrogate_and_keeps_a_pair() -> None:
    """One reader for every JSON file: a lone surrogate is no character, and nothing kgate writes can hold it."""
    assert jsondoc.loads(b'{"a": "\\ud83d\\ude00"}') == {"a": "\U0001f600"}
    for text in (b'["\\ud800"]', b'{"\\uDC00": 1}', b'{"a": {"b": ["x", "\\udbff"]}}'):
        with pytest.raises(jsondoc.NotJSON, match="lone surrogate"):
            jsondoc.loads(text)
