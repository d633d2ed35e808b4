"""Every JSON file kgate reads is decoded one way (`kgate.support.jsondoc`): UTF-8 only, and a file that does not decode,
however it fails (nested too deeply for Python's parser, another encoding, not JSON), is one error a reader
handles: a user's file is refused in one line, a cache or run record is missing and rebuilt."""

from __future__ import annotations

import codecs
from pathlib import Path

import pytest
from conftest import kgate

from kgate.collect import pyindex
from kgate.core.config import load_config
from kgate.shard.plan import load_timings, timings_path
from kgate.support import jsondoc

DEEP = b"[" * 100_000 + b"]" * 100_000
# A finding whose verdict reads this file alone, so that the lint cache keeps it (KG302's verdict on an unchecked
# CUDA launch reads the project's other files for callers and check macros, and is not cached).
PRINTING_KERNEL = """\
import triton
import triton.language as tl


@triton.jit
def k(x_ptr):
    tl.device_print("x", tl.load(x_ptr))
"""


@pytest.mark.parametrize(("data", "reason"), [
    (DEEP, "not JSON (nested too deeply)"),
    (codecs.BOM_UTF16_LE + '{"a": 1}'.encode("utf-16-le"), "not valid UTF-8 (it is UTF-16, by its byte order mark)"),
    (codecs.BOM_UTF32_LE + '{"a": 1}'.encode("utf-32-le"), "not valid UTF-8 (it is UTF-32, by its byte order mark)"),
    ('{"a": 1}'.encode("utf-16-le"), "not valid UTF-8 (a NUL byte at byte 1"),
    (b'{"a": "\xff"}', "not valid UTF-8 (byte 7)"),
    (b'{"a": ', "not JSON (Expecting value"),
    (b"1" * 5000, "not JSON (Exceeds the limit"),
])
def test_a_document_that_does_not_decode_is_one_value_error(data: bytes, reason: str) -> None:
    with pytest.raises(ValueError) as caught:
        jsondoc.loads(data)
    assert isinstance(caught.value, jsondoc.NotJSON) and str(caught.value).startswith(reason)


def test_utf8_with_or_without_a_byte_order_mark_decodes() -> None:
    assert jsondoc.loads(b'{"a": "\xc3\xa9"}') == jsondoc.loads(codecs.BOM_UTF8 + b'{"a": "\xc3\xa9"}') == {"a": "é"}


def test_cache_and_run_records_that_do_not_decode_are_missing_not_a_crash(tmp_path: Path) -> None:
    (tmp_path / "kgate.toml").write_text('python-path = ["."]\n')
    (tmp_path / "k.py").write_text(PRINTING_KERNEL)
    first = kgate("lint", cwd=tmp_path)
    assert first.code == 1 and "KG204" in first.stdout
    records = sorted((tmp_path / ".kgate-cache" / "v1").rglob("*.json"))
    assert {p.parent.name for p in records} == {"lint", "runs"}
    for path in records:
        path.write_bytes(DEEP)
    again = kgate("lint", cwd=tmp_path)
    assert "Traceback" not in again.stderr and again.code == 1 and "KG204" in again.stdout, again.stderr
    # The timings file and the Python index are read by a check; each is missing when it does not decode.
    config = load_config(start=tmp_path)
    timings_path(config).write_bytes(DEEP)
    assert load_timings(config) == {}
    (tmp_path / "m.py").write_text("def f():\n    pass\n")
    index = pyindex._Index()
    index.use(tmp_path / ".kgate-cache")
    (tmp_path / ".kgate-cache" / "v1" / "pyindex.json").write_bytes(DEEP)
    assert "f" in index.get(tmp_path / "m.py").defs


def test_a_lint_record_saved_in_another_encoding_is_not_read(tmp_path: Path) -> None:
    """json.loads guesses UTF-16 from bytes: a re-encoded record was read as if kgate had written it."""
    (tmp_path / "kgate.toml").write_text('python-path = ["."]\n')
    (tmp_path / "k.py").write_text(PRINTING_KERNEL)
    kgate("lint", cwd=tmp_path)
    record = next((tmp_path / ".kgate-cache" / "v1" / "lint").glob("*.json"))
    record.write_bytes(record.read_text(encoding="utf-8").encode("utf-16"))
    from kgate.pipeline.lint_cache import LintCache

    assert LintCache(tmp_path / ".kgate-cache", record.stem).entries == {}
