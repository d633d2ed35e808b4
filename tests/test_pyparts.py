"""A module's top-level blocks parsed once per run (kgate.collect.pyparts), and a linted file's trees freed when its
lint ends.

Parsing the blocks one by one gives the tree parsing the reading's text gives, node for node and position for
position, on every Python file of this repository, of the fixtures and of a generated kernel tree; readings of one
module share the blocks' nodes.
"""

from __future__ import annotations

import ast
import gc
from pathlib import Path

import pytest
from test_pysparse import NEEDLES, corpus

from kgate.collect import depends, pyparts, pysparse
from kgate.collect.source import SourceFile, UnreadableSource, parse_python
from kgate.core.config import Config
from kgate.core.selection import build_selection
from kgate.evaluate import source as engine


@pytest.fixture(scope="module")
def files(tmp_path_factory: pytest.TempPathFactory) -> list[Path]:
    return corpus(tmp_path_factory.mktemp("parts"))


def _dump(tree: ast.Module) -> list[tuple[object, ...]]:
    """Every node, its position and its plain fields, in `ast.walk`'s order (no recursion: some fixtures nest
    deeper than `ast.dump` can go)."""
    return [(type(node).__name__, *(getattr(node, a, None) for a in node._attributes),
             *(v for f in node._fields if not isinstance(v := getattr(node, f, None), (ast.AST, list))))
            for node in ast.walk(tree)]


def test_blocks_parsed_one_by_one_are_the_reading_parsed_whole(files: list[Path]) -> None:
    depends.new_run()
    checked = 0
    for path in files:
        source = SourceFile(str(path), path.name, path.read_bytes())
        try:
            lines = source.lines
        except UnreadableSource:
            continue
        parts = pyparts.of(source)
        if parts.blocks is None:
            continue
        blocks = parts.blocks
        readings = [
            pysparse.select(lines, blocks, NEEDLES),  # what the rules' needles bring
            ([b for b in blocks if b[2] is None], [b for b in blocks if b[2] is not None]),  # the top level
            (pysparse.containing(blocks, list(range(0, len(lines), 7))), None),  # definitions around some lines
        ]
        for whole, signatures in readings:
            text = pysparse.excerpt(lines, whole, signatures)
            try:
                expected = _dump(parse_python(text.encode("utf-8"), source.rel))
            except UnreadableSource:
                with pytest.raises(UnreadableSource):
                    parts.parse(whole, signatures, source.rel)
                continue
            assert _dump(parts.parse(whole, signatures, source.rel)) == expected, path
            checked += 1
    assert checked > 300


def test_readings_of_one_module_share_its_parsed_blocks() -> None:
    depends.new_run()
    data = b"import triton\n\n\ndef launch(x):\n    return kernel[(1,)](x)\n\n\ndef other():\n    pass\n"
    linted = SourceFile("/project/ops.py", "ops.py", data)
    beside = SourceFile("/project/ops.py", "ops.py", data)
    pyparts.keep(beside)  # the same module read for another file's verdicts
    blocks = pyparts.of(linted).blocks
    assert blocks is not None
    first = pyparts.of(linted).parse(blocks[:2], None, "ops.py")
    again = pyparts.of(beside).parse(blocks, None, "ops.py")
    assert again.body[:2] == first.body  # the same nodes, parsed once
    assert [type(s) for s in again.body] == [ast.Import, ast.FunctionDef, ast.FunctionDef]



def test_the_file_under_lint_shares_what_the_run_keeps_of_its_text_and_adds_nothing_to_it() -> None:
    """A module read for other files' verdicts before its own lint keeps for the run what those readings parsed of
    it; its own lint reads those blocks from there, and what it parses besides (its kernels whole, most of a kernel
    module) is dropped when its lint ends, as any other file's is."""
    depends.new_run()
    data = b"import triton\n\n\ndef launch(x):\n    return kernel[(1,)](x)\n\n\ndef other():\n    pass\n"
    beside = SourceFile("/project/ops.py", "ops.py", data)
    pyparts.keep(beside)
    blocks = pyparts.of(beside).blocks
    assert blocks is not None
    read = pyparts.of(beside).parse(blocks[:2], None, "ops.py")
    linted = SourceFile("/project/ops.py", "ops.py", data)
    own = pyparts.of(linted).parse(blocks, None, "ops.py")
    assert own.body[:2] == read.body  # the same nodes, parsed once
    kept = pyparts.of(beside)
    assert sorted(first for first, _form in kept._parsed) == [blocks[0][0], blocks[1][0]]
    depends.new_file()
    again = pyparts.of(SourceFile("/project/ops.py", "ops.py", data)).parse(blocks, None, "ops.py")
    assert again.body[:2] == read.body and again.body[2] is not own.body[2]


KERNELS = b'''import triton
import triton.language as tl


@triton.autotune(configs=[triton.Config({"BLOCK": 64})], key=["n_tokens"])
@triton.jit
def scale_kernel(x_ptr, n_tokens, BLOCK: tl.constexpr):
    pid = tl.program_id(0)
    offs = pid * BLOCK + tl.arange(0, BLOCK)
    tl.store(x_ptr + offs, tl.load(x_ptr + offs, mask=offs < n_tokens) * 2, mask=offs < n_tokens)


def scale(x):
    scale_kernel[(x.shape[0],)](x, x.shape[0])
'''


def test_a_linted_files_syntax_trees_are_freed_when_its_lint_ends(tmp_path: Path) -> None:
    """The run keeps the cyclic collector off while it lints, so that it does not scan every tree again and again:
    what the rules derive from a file must not refer back to the file (a parsed module names the file it was read
    from) once the file's lint is over, or every file's syntax trees stay until the run ends."""
    path = tmp_path / "kernels.py"
    path.write_bytes(KERNELS)
    rules = engine.source_rules(build_selection(Config(root=tmp_path)))
    depends.new_run()
    gc.collect()
    gc.disable()
    try:
        result = engine.lint_bytes(str(path), "kernels.py", KERNELS, rules)
        alive = [o for o in gc.get_objects() if isinstance(o, SourceFile) and o.path == str(path)]
    finally:
        gc.enable()
    assert "KG201" in result.ran
    assert alive == []


CLAUSED = b"""import os

try:
    import triton
except ImportError:
    triton = None
else:
    HAVE = True
finally:
    pass

if os.environ.get("A"):
    def launch(x):
        return x
elif os.environ.get("B"):
    def launch(x):
        return -x
else:
    def launch(x):
        return 2 * x


def kernel(x):
    return x
"""


def test_a_statement_split_at_its_clauses_is_parsed_from_its_blocks(monkeypatch: pytest.MonkeyPatch) -> None:
    """`try:`/`except:` and `if`/`elif`/`else` at column 0 are several blocks, none of which parses alone as the
    statement: read whole, they are parsed together once, not the reading's whole text each time."""
    depends.new_run()
    source = SourceFile("/project/claused.py", "claused.py", CLAUSED)
    parts = pyparts.of(source)
    blocks = parts.blocks
    assert blocks is not None and len(blocks) == 9
    texts: list[str] = []
    parse = pyparts.parse_python

    def counted(data: bytes, filename: str) -> ast.Module:
        texts.append(filename)
        return parse(data, filename)

    monkeypatch.setattr(pyparts, "parse_python", counted)
    whole = [b for b in blocks if b[2] is None]
    top = pysparse.excerpt(source.lines, whole, [b for b in blocks if b[2] is not None])
    for _ in range(2):
        tree = parts.parse(whole, [b for b in blocks if b[2] is not None], source.rel)
        assert _dump(tree) == _dump(parse_python(top.encode(), source.rel))
    assert [type(s) for s in tree.body] == [ast.Import, ast.Try, ast.If, ast.FunctionDef]
    assert "claused.py" not in texts  # never the reading's text: the blocks, each parsed once
    assert len(texts) == 4

    # A clause left out of the reading: the statement is read as the reading's text has it, without it.
    partial = [b for b in whole if not source.lines[b[0]].startswith("else")]
    text = pysparse.excerpt(source.lines, partial, None)
    assert _dump(parts.parse(partial, None, source.rel)) == _dump(parse_python(text.encode(), source.rel))


def test_a_whole_module_read_from_its_blocks_is_its_parse(files: list[Path]) -> None:
    """`pysource.whole_tree`: the whole file's tree from its blocks, node for node, and the file's own error where
    it has one (an indented first line fails the file's parse, not its blocks')."""
    from kgate.collect import pysource

    depends.new_run()
    checked = 0
    for path in files[:400]:
        data = path.read_bytes()
        try:
            expected = _dump(parse_python(data, path.name))
        except UnreadableSource:
            continue
        source = SourceFile(str(path), path.name, data)
        source.derived["needles"] = ("triton",)
        assert _dump(pysource.whole_tree(source)) == expected, path
        checked += 1
    assert checked > 300
    indented = SourceFile("/project/bad.py", "bad.py", b"    x = 1\nimport triton\n\n\ndef f():\n    pass\n")
    indented.derived["needles"] = ("triton",)
    with pytest.raises(UnreadableSource, match="indent"):
        pysource.whole_tree(indented)
