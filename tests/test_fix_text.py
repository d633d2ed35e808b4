"""Python fixes made on the text itself write what libcst writes: each case is edited both ways and compared."""

from __future__ import annotations

import re

import pytest

from kgate.core.fix import Edit
from kgate.pipeline.fix import apply_fixes
from kgate.pipeline.fix_python import line_starts, python_edits, text_edits

SET = 'os.environ["TRITON_INTERPRET"] = "1"'

# (text, the statements to remove by their first line (0-based column of the statement), whether the text path
# takes them: None where libcst must)
CASES = [
    (f"import os\n{SET}\nx = 1\n", [(2, 0)], True),
    (f"import os\n{SET}  # interpret\nx = 1\n", [(2, 0)], True),
    (f"import os\n\n# above it\n{SET}  # its own\n\n\nx = 1\n", [(4, 0)], True),
    (f"import os\n\n\ndef setup():\n    {SET}\n", [(5, 4)], True),
    (f"import os\n\n\ndef setup():\n    # why\n    {SET}  # own\n    # after\n", [(6, 4)], True),
    (f"import os\n\n\ndef setup():\n    {SET}\n    {SET}\n\n\nx = 1\n", [(5, 4), (6, 4)], True),
    (f"import os\nif True:\n    {SET}\nelse:\n    {SET}\n    y = 2\n", [(3, 4), (5, 4)], True),
    ('import os\nos.environ.update(\n    TRITON_INTERPRET="1",  # on\n    # off\n)  # end\nx = 1\n', [(2, 0)], True),
    (f"import os\r\n\r\ndef f():\r\n    {SET}  # own\r\n", [(4, 4)], True),
    (f"import os\nx = 'é'\ndef f():\n    y = 'ü'; {SET}\n", [(4, 13)], True),
    (f"import os\nif True: {SET}\n", [(2, 9)], None),
    (f"import os\n{SET}; x = 1\n", [(2, 0)], True),
    (f"import os\nx = 1 ;  {SET}\t;\ty = 2  # both\n", [(2, 9)], True),
    (f"import os\nx = 1;{SET};y = 2\n", [(2, 6)], True),
    (f"import os\n{SET}; x = 1; {SET}  # ends\r\nz = 3\r\n", [(2, 0), (2, 45)], True),
    (f"import os\n\n\ndef f():\n    # why\n    x = 'é'; {SET}\n    return x\n", [(6, 13)], True),
    (f"import os\nx = 1; {SET}; y = (\n    2)\n", [(2, 7)], None),
    (f"import os\nx = 1; {SET};\n", [(2, 7)], None),
    (f"import os\nx = 1; \\\n    {SET}\n", [(3, 4)], None),
    (f"import os\n{SET}; {SET}\n", [(2, 0), (2, 38)], None),
    (f"import os\nx = 1; {SET}", [(2, 7)], None),
    (f"import os\n{SET}", [(2, 0)], None),
    (f"import os\ntry:\n    {SET}\nexcept KeyError:\n    {SET}\nfinally:\n    {SET}\n", [(3, 4), (5, 4), (7, 4)], True),
    (f"import os\nmatch x:\n    case 1:\n        {SET}\n", [(4, 8)], True),
]


def edits_of(text: str, removed: list[tuple[int, int]]) -> list[tuple[int, int, Edit]]:
    starts = line_starts(text)
    return [(starts[line] + col, starts[line] + col, Edit(line, col, line, col, kind="delete-statement"))
            for line, col in removed]


@pytest.mark.parametrize("text,removed,takes", CASES, ids=[str(i) for i in range(len(CASES))])
def test_a_statement_removed_on_the_text_reads_as_libcst_writes_it(text: str, removed: list[tuple[int, int]],
                                                                   takes: bool | None) -> None:
    edits = edits_of(text, removed)
    done = text_edits(text, edits)
    assert (done is not None) is bool(takes)
    if done is not None:
        assert done == python_edits(text, edits)


@pytest.mark.parametrize("text,line", [
    ("x = 1  # kgate: ignore[KG201] stale\n", 1),
    ("import os\n\n    # kgate: ignore[KG201] stale\ny = 2\n", 3),
    ("def f():\n    # kgate: ignore[KG201, KG204] stale\n    pass\n", 2),
    ("x = 1  # note  # kgate: ignore[KG201] stale\r\ny = 2\r\n", 1),
    ('x = """\n# kgate: ignore[KG201] stale\n"""\n', 2),
])
def test_a_suppression_dropped_on_the_text_reads_as_libcst_writes_it(text: str, line: int) -> None:
    from kgate.core.fix import Applicability, Fix

    row = re.split(r"\r\n|\r|\n", text)[line - 1]
    col = row.find("# kgate")
    fix = Fix("remove", Applicability.SAFE, (Edit(line, col, line, col, "KG201", "drop-suppression"),))
    through_text, _taken, why = apply_fixes("k.py", text.encode(), [fix])
    starts = line_starts(text)
    try:
        from kgate.pipeline.fix import _span

        through_libcst = python_edits(text, [_span(text, starts, edit, True) for edit in fix.edits])
    except Exception:  # noqa: BLE001 - libcst refuses: so must the text path
        through_libcst = None
    expected = through_libcst.encode() if through_libcst is not None and through_libcst != text else None
    if '"""' in text:  # the directive's text is the string's: never removed
        assert through_text is None and why
    else:
        assert through_text == expected


PIN_CASES = [
    ("x = 1\ny = 2\n", {1: ["KG201"], 2: ["KG204", "KG201"]}),
    ("x = 1  # noqa: E501\n", {1: ["KG201"]}),
    ("x = 1  # kgate: ignore[KG204] PLACEHOLDER\n", {1: ["KG201"]}),
    ("x = 1  # kgate: ignore[KG204] a real reason\n", {1: ["KG201"]}),
    ('s = """\ntext\n"""\n', {1: ["KG201"], 2: ["KG201"], 3: ["KG201"]}),
    ("x = 1 + \\\n    2\n", {1: ["KG201"], 2: ["KG201"]}),
    ("call(\n    a,\n    b)\r\nz = 3\r\n", {2: ["KG201"], 4: ["KG204"]}),
    ('def f():\n    """Doc\n    more."""\n    return 1\n', {2: ["KG201"], 4: ["KG201"]}),
    ("x = f'{1}'\ny = 'é'\n", {1: ["KG201"], 2: ["KG201"]}),
    ("x = 1\n", {5: ["KG201"]}),
]


@pytest.mark.parametrize("text,lines", PIN_CASES, ids=[str(i) for i in range(len(PIN_CASES))])
def test_pins_read_with_one_pass_of_the_tokenizer_are_the_general_ways(text: str, lines: dict[int, list[str]],
                                                                       monkeypatch: pytest.MonkeyPatch) -> None:
    from kgate.pipeline import pin

    quick = pin._python_pins(text, lines)
    monkeypatch.setattr(pin, "_python_pins", lambda _text, _lines: None)
    assert quick is not None
    assert quick == pin._pinned_file("k.py", text, lines)


# Texts Python compiles, with every form of string and comment the scan must read as the tokenizer does.
SCANNED = [
    "x = 1  # a comment with 'quotes' and \"more\"\n",
    's = "a # not a comment"  # but this is\n',
    "s = '''one\n# inside\ntwo'''  # after\nt = \"\"\"a\\\"\"\"\nb\"\"\"\n",
    "s = 'con\\\ntinued # still the string' # comment\n",
    "s = rb'raw\\'' + Rb\"\\\\\" + u'x'  # end\n",
    "s = r'''raw\\'''' + \"\"\"''\"\"\"  # q\n",
    "s = f'{1:>{2}}' + F\"{'a'}\"  # f\n",
    "x = (1,  # first\n     2)\r\ny = '#'\r\n# last\r\n",
    "def f():\n    '''Doc.\n\n    # not a comment\n    '''\n    return 1  # yes\n",
    "x = '''\\\n'''\ny = 2\n",
    "",
]


@pytest.mark.parametrize("text", SCANNED, ids=[str(i) for i in range(len(SCANNED))])
def test_the_scan_reads_what_the_tokenizer_reads(text: str) -> None:
    import sys

    from kgate.support.comments.python import _tokenized, scanned

    compile(text, "<case>", "exec")
    found = scanned(text)
    if found is None:  # under Python 3.12 and later, f-strings and carriage returns are the tokenizer's
        assert sys.version_info >= (3, 12) and ("\r" in text or "f'" in text.lower() or 'f"' in text.lower())
        return
    assert found == _tokenized(text)


def test_the_scan_reads_the_fixtures_as_the_tokenizer_does() -> None:
    """Every Python file of the fixtures (planted cases in every corner of the syntax) that compiles, with LF and CRLF
    line ends: where the scan vouches for its reading, it is the tokenizer's."""
    from pathlib import Path

    from kgate.support.comments.python import _tokenized, compiles, scanned

    vouched = 0
    for path in sorted((Path(__file__).parent.parent / "fixtures").rglob("*.py")):
        try:
            text = path.read_text(encoding="utf-8")
        except (UnicodeDecodeError, OSError):
            continue
        for variant in (text, text.replace("\n", "\r\n")):
            found = scanned(variant) if compiles(variant) else None
            if found is not None:
                assert found == _tokenized(variant), path
                vouched += 1
    assert vouched > 50


@pytest.mark.parametrize("text", ["s = 'open\n", "x = 1\ry = 2\n", "s = '''never closed\n"])
def test_the_scan_does_not_vouch_for_what_it_cannot_read_as_the_tokenizer(text: str) -> None:
    from kgate.support.comments.python import scanned

    assert scanned(text) is None


def test_pins_of_a_file_python_compiles_need_no_tokenizer(monkeypatch: pytest.MonkeyPatch) -> None:
    from kgate.pipeline import pin
    from kgate.support.comments import python

    text = "x = 1  # note\ns = '''a\nb'''\ny = 2\n"
    expected = pin._python_pins(text, {1: ["KG201"], 2: ["KG201"], 4: ["KG204"]})
    tokenized = python._tokenized  # each comment written is read back on its own: a line, not the file
    monkeypatch.setattr(python, "_tokenized", lambda t: pytest.fail("the tokenizer read the file") if t == text
                        else tokenized(t))
    assert pin._python_pins(text, {1: ["KG201"], 2: ["KG201"], 4: ["KG204"]}) == expected
    assert expected == ("x = 1  # note  # kgate: ignore[KG201] TODO: give the reason\ns = '''a\nb'''\n"
                        "y = 2  # kgate: ignore[KG204] TODO: give the reason\n", {2: pin._NOT_READ})
