"""Held-out fixes made on the text without libcst, on unusual Python: line continuations, semicolons, tabs, CRLF and
lone CR, a byte order mark, form feeds, non-ASCII, `# type:` comments, decorators, strings that hold `#`. Each case
is edited on the text and through libcst: where the text path takes it, it writes what libcst writes, and the
result compiles."""

from __future__ import annotations

import ast
import re
from pathlib import Path

import pytest
from conftest import kgate

from kgate.core.fix import Applicability, Edit, Fix
from kgate.pipeline.fix import _span, apply_fixes
from kgate.pipeline.fix_python import CannotApply, line_starts, python_edits, text_edits

SET = 'os.environ["TRITON_INTERPRET"] = "1"'

# (text, the statements to remove by their first line and 0-based character column)
REMOVALS = [
    ('import os\nos.environ["TRITON_INTERPRET"] = \\\n    "1"\nx = 1\n', [(2, 0)]),
    (f"import os\ndef f():\n    x = 1; \\\n    {SET}\n    y = 2\n", [(4, 4)]),
    (f"import os\nx = 1; \\\n{SET}\ny = 2\n", [(3, 0)]),
    (f"import os\ndef f():\n    x = 1; \\\n    {SET}\ny = 2\n", [(4, 4)]),
    (f"import os\nx = 1; \\\n{SET}\n", [(3, 0)]),
    (f"import os\nif True:\n\t{SET}\n", [(3, 1)]),
    (f"import os\ndef f():\n\t# why\n\t{SET}\t# own\n\treturn 1\n", [(4, 1)]),
    (f"import os\n\x0c{SET}\nx = 1\n", [(2, 1)]),
    (f"import os\ndef f():\n\x0c    {SET}\n    y = 1\n", [(3, 5)]),
    (f"import os\n{SET}  # café, ünïcode ✓\nx = 1\n", [(2, 0)]),
    (f"import os\nß = 1\n{SET}\nπ = 2\n", [(3, 0)]),
    (f"import os\n{SET}  # type: ignore\nx = 1\n", [(2, 0)]),
    (f"import os\ndef f(a):\n    # type: (int) -> None\n    {SET}\n", [(4, 4)]),
    (f"import os\n@staticmethod\ndef f():\n    {SET}\n", [(4, 4)]),
    (f"import os\nclass C:\n    {SET}\n", [(3, 4)]),
    (f"import os\nasync def f():\n    async with a:\n        {SET}\n", [(4, 8)]),
    (f"import os\nwhile x:\n    pass\nelse:\n    {SET}\n", [(5, 4)]),
    (f"import os\nfor i in x:\n    pass\nelse:\n    # gone\n    {SET}\n", [(6, 4)]),
    (f"import os\n{SET};\nx = 1\n", [(2, 0)]),
    (f"import os\n{SET} ;  # c\nx = 1\n", [(2, 0)]),
    (f"import os\n{SET}  # a; b\nx = 1\n", [(2, 0)]),
    ('import os\nos.environ["X"] = f"""{1}\n# not a comment\n"""\nx = 1\n', [(2, 0)]),
    ('import os\nos.environ.update(\n    A="#x",  # real\n)\nx = 1\n', [(2, 0)]),
    (f"import os\nif x:\n    {SET}\n    # between\n    {SET}\n", [(3, 4), (5, 4)]),
    (f"import os\ndef f():\n    {SET}\n# trailing\nx = 1\n", [(3, 4)]),
    (f"import os\rdef f():\r    {SET}\rx = 1\r", [(3, 4)]),
    (f"import os\r{SET}  # own\rx = 1\r", [(2, 0)]),
    (f"import os\r\n{SET}\nx = 1\r\n", [(2, 0)]),
    (f"import os\r\ndef f():\n    {SET}  # own\n", [(3, 4)]),
    (f"import os\ndef f():\r\n    {SET}\n", [(3, 4)]),
    (f"import os\n{SET}   \nx = 1\n", [(2, 0)]),
    (f"import os\ntry:\n    pass\nexcept* ValueError:\n    {SET}\n", [(5, 4)]),
    (f"import os\nmatch x:\n    case [a] if a:\n        # why\n        {SET}  # own\n", [(5, 8)]),
    (f"{SET}\n", [(1, 0)]),
    (f"# only\n{SET}  # own\n", [(2, 0)]),
    (f"import os\ndef f():\n    \n    {SET}\n    \n", [(4, 4)]),
    (f"import os\nif a:\n    if b:\n        {SET}\n    else:\n        {SET}\n", [(4, 8), (6, 8)]),
    (f"import os\ndef f():\n    return 1\n    {SET}\n", [(4, 4)]),
    ("import os\ndef f():\n    global g\n    g = 1\n", [(3, 4)]),
    ("import os\nx: int = 1\ny = 2\n", [(2, 0)]),
    ("import os\ndef f():\n    del x\n", [(3, 4)]),
    ("import os\nassert (\n    x  # why\n), 'm'\n", [(2, 0)]),
    ('import os\nx = """a\n# b\n"""  # c\ny = 1\n', [(2, 0)]),
    ("import os\nx = (1 +\n\t2)\t# t\ny = 1\n", [(2, 0)]),
    (f"import os\nclass C:\n    @property\n    def p(self):\n        {SET}\n", [(5, 8)]),
    (f"import os\nwith a as b, c as d:\n    {SET}\n    {SET}\n    {SET}\n", [(3, 4), (4, 4), (5, 4)]),
    (f"import os\nif x:\n    pass\nelif y:\n    {SET}\n", [(5, 4)]),
    (f"import os\n{SET}\n\n\n", [(2, 0)]),
    (f"import os\ndef f():\n    {SET}\n\n\n\ndef g():\n    pass\n", [(3, 4)]),
    (f"import os\ndef f():\n    {SET}  # \x0c\n", [(3, 4)]),
    (f"import os\nx = lambda: (\n    1)\n{SET}\n", [(4, 0)]),
    (f"import os\ndef f():\n    x = [\n        1,\n    ]; \\\n    {SET}\n", [(6, 4)]),
    (f"import os\nif True: \\\n    {SET}\n", [(3, 4)]),
    (f"import os\ndef f(): \\\n    {SET}\n", [(3, 4)]),
]


def edits_of(text: str, removed: list[tuple[int, int]]) -> list[tuple[int, int, Edit]]:
    starts = line_starts(text)
    return [(starts[line] + col, starts[line] + col, Edit(line, col, line, col, kind="delete-statement"))
            for line, col in removed]


def through_libcst(text: str, edits: list[tuple[int, int, Edit]]) -> str | None:
    try:
        return python_edits(text, edits)
    except CannotApply:
        return None


@pytest.mark.parametrize("text,removed", REMOVALS, ids=[str(i) for i in range(len(REMOVALS))])
def test_a_statement_removed_on_the_text_is_what_libcst_writes(text: str, removed: list[tuple[int, int]]) -> None:
    edits = edits_of(text, removed)
    done = text_edits(text, edits)
    if done is None:
        return  # libcst's to make
    compile(done, "k.py", "exec")
    expected = through_libcst(text, edits)
    assert expected is None or done == expected
    if expected is None:  # libcst cannot write the file back (a form feed, a lone CR): as it writes the file plain
        plain = plain_of(text)
        moved = [(line, col - rows_of(text)[line - 1][:col].count("\x0c")) for line, col in removed]
        assert plain_of(done) == python_edits(plain, edits_of(plain, moved))


def plain_of(text: str) -> str:
    """`text` with its newlines `\\n` and without form feeds: what libcst writes back unchanged."""
    return text.replace("\r\n", "\n").replace("\r", "\n").replace("\x0c", "")


def rows_of(text: str) -> list[str]:
    return re.split(r"\r\n|\r|\n", text)


DROPS = [
    "x = 1\t# kgate: ignore[KG201] stale\n",
    "x = 1  # kgate: ignore[KG201] stale\ry = 2\r",
    "x = 1\r# kgate: ignore[KG201] stale\ry = 2\r",
    "x = 1 + \\\n    2  # kgate: ignore[KG201] stale\n",
    "x = 1\n\x0c# kgate: ignore[KG201] stale\ny = 2\n",
    'x = "é"  # kgate: ignore[KG201] stale\n',
    'x = "日本語"  # kgate: ignore[KG204, KG201] stale\n',
    "f(\n    1,  # kgate: ignore[KG201] stale\n)\n",
    "f(\n    # kgate: ignore[KG201] stale\n    1,\n)\n",
    'x = f"{1}  # kgate: ignore[KG201] x"\n',
    "x = 1  # type: int  # kgate: ignore[KG201] stale\n",
    "x = 1  # kgate: ignore[KG201] stale",
    "x = 1\n# kgate: ignore[KG201] stale",
    "x = 1\r\n\t# kgate: ignore[KG201] stale\r\ny = 2\r\n",
    "def f():\n    pass\n    # kgate: ignore[KG201] stale\n",
    "@dec  # kgate: ignore[KG201] stale\ndef f():\n    pass\n",
    "x = 1  # kgate: ignore[KG201, KG204] stale\n",
    "x = 1  # kgate: ignore[KG201] stale \x0c\n",
    'x = """\n"""  # kgate: ignore[KG201] stale\n',
    "x = 1 ;  # kgate: ignore[KG201] stale\n",
    "if x:  # kgate: ignore[KG201] stale\n    pass\n",
    "x = 1  #kgate:ignore[KG201]\n",
]


@pytest.mark.parametrize("text", DROPS, ids=[str(i) for i in range(len(DROPS))])
def test_a_suppression_dropped_on_unusual_python(text: str) -> None:
    line = next(i for i, row in enumerate(re.split(r"\r\n|\r|\n", text), 1) if "# kgate" in row or "#kgate" in row)
    row = re.split(r"\r\n|\r|\n", text)[line - 1]
    col = row.find("#kgate") if "#kgate" in row else row.find("# kgate")
    fix = Fix("remove", Applicability.SAFE, (Edit(line, col, line, col, "KG201", "drop-suppression"),))
    for bom in (b"", b"\xef\xbb\xbf"):
        new, _taken, why = apply_fixes("k.py", bom + text.encode(), [fix])
        starts = line_starts(text)
        span = _span(text, starts, fix.edits[0], True)
        expected = through_libcst(text, [span]) if span is not None else None
        if 'f"' in text:  # the directive's text is the string's: never removed
            assert new is None and why
            continue
        assert new is not None, why
        if expected is None:  # libcst cannot write the file back: as it writes the file plain
            plain = plain_of(text)
            expected = through_libcst(plain, [_span(plain, line_starts(plain), fix.edits[0], True)])
            assert plain_of(new.decode()) == bom.decode() + expected
            continue
        assert new == bom + expected.encode()
        compile(new.decode("utf-8-sig"), "k.py", "exec")


CONTINUED = '''import os


def setup(flag):
    flag = 1; \\
    os.environ["TRITON_INTERPRET"] = "1"
after = 2
'''


def test_lint_fix_of_a_statement_on_a_continued_line_keeps_the_next_line_outside(tmp_path: Path) -> None:
    """`--fix --unsafe-fixes` removes KG203's statement, which continues its function's line `flag = 1; \\`: the
    module's next statement stays at the top level."""
    (tmp_path / "pyproject.toml").write_text('[tool.kgate]\ntargets = ["sm_120a"]\n')
    (tmp_path / "conftest.py").write_text(CONTINUED)
    run = kgate("lint", "--fix", "--unsafe-fixes", "--select", "KG203", cwd=tmp_path)
    assert run.code in (0, 1), run.stderr
    fixed = (tmp_path / "conftest.py").read_text()
    assert "TRITON_INTERPRET" not in fixed
    tree = ast.parse(fixed)
    assert [type(node).__name__ for node in tree.body] == ["Import", "FunctionDef", "Assign"]
