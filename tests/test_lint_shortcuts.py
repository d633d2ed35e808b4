"""Shortcuts of a cold `kgate lint` that must find what the long way finds: the search for dotted launches only in
the lines that can hold one (`kgate.collect.pyproject.Modules.launched`), the modules that reach a definition through
its module asked only about the words their import statements spell (`Modules.reaching`), and a kept answer's reads
noted once into each collection open (`kgate.collect.depends.replay`), the files of a forked run handed out a few
at a time to whichever process asks (`kgate.evaluate.source`), a finding's line cut of the comments the scan reads
rather than the tokenizer's, and the modules that import a package's word noted together by one plan per word
(`Modules._plan`), the attributes of a module followed once a run (`Modules._attribute`)."""

from __future__ import annotations

import os
import textwrap
from pathlib import Path

import pytest
from rules_harness import linted
from test_lint_cache import lint as cache_lint
from test_lint_cache import project as cache_project
from test_lint_cache import verdict

from kgate.collect import depends
from kgate.collect.pyproject import _DOTTED_LAUNCH, _LAUNCH_LINES, Modules
from kgate.evaluate import source as engine

REPOSITORY = Path(__file__).resolve().parent.parent

KERNELS = '''\
import triton
import triton.language as tl


@triton.jit
def double(x, N: tl.constexpr):
    offs = tl.arange(0, N)
    tl.store(x + offs, tl.load(x + offs) * 2)


@triton.jit
def halve(x, N: tl.constexpr):
    offs = tl.arange(0, N)
    tl.store(x + offs, tl.load(x + offs) / 2)
'''

# Never says "triton": its launches are found by the dotted search alone. CRLF line ends, a launch at a line's
# start, one through `.run (`, one through a wrapper (`)[`), and one whose dotted name runs to the line's end.
OPS = (
    "import pkg.kernels\n"
    "from pkg import kernels\n"
    "\n"
    "\n"
    "def double(x):\n"
    "    kernels.double[(1,)](x, N=x.shape[0])\n"
    "\n"
    "\n"
    "def halve(x):\n"
    "    pkg.kernels.halve.run (x, N=x.numel(), grid=(1,), warmup=False)\n"
    "\n"
    "\n"
    "def wrapped(x):\n"
    "    return wrap(kernels.halve)[(1,)](x, N=x.shape[0])\n"
    "\n"
    "\n"
    "def spelled(x):\n"
    "    k = kernels.double\n"
    "    return k, 'kernels.double'\n"
)


def _project(root: Path, ops: str) -> Path:
    (root / "pkg").mkdir(parents=True)
    (root / "pkg" / "__init__.py").write_text("")
    (root / "pkg" / "kernels.py").write_text(KERNELS)
    (root / "pkg" / "ops.py").write_bytes(ops.encode())
    (root / "kgate.toml").write_text('python-path = ["."]\nselect = ["KG108"]\n')
    return root


def _lines(root: Path) -> list[tuple[str, int]]:
    return sorted((f.path, f.line) for f in linted(root)[0])


def test_a_launch_through_a_module_attribute_is_found_in_a_file_that_never_says_triton(tmp_path: Path) -> None:
    expected = [("pkg/ops.py", 6), ("pkg/ops.py", 10), ("pkg/ops.py", 14)]
    assert _lines(_project(tmp_path / "lf", OPS)) == expected
    assert _lines(_project(tmp_path / "crlf", OPS.replace("\n", "\r\n"))) == expected
    # A line ended by a carriage return alone is one line with the next for the search (a line of its own for
    # Python, so the lines below it move down one): found all the same.
    assert _lines(_project(tmp_path / "cr", OPS.replace("    kernels.double[", "\r    kernels.double["))) == [
        (path, line + 1) for path, line in expected]


def _dotted(text: str) -> set[str]:
    return {match.group(1) for match in _DOTTED_LAUNCH.finditer(text)}


def test_the_dotted_launches_of_the_lines_that_can_hold_one_are_those_of_the_whole_text() -> None:
    texts = [OPS, OPS.replace("\n", "\r\n"), "a.b[0]", "x = a.b\n[1]\n", "a.b.run(", "a.b\t)\t[", "(a.b)[",
             "é.b[1]\nc.d.run  (\n", "a.b\x0c[1]\na.c\u2028[2]", ".a.b[1]\n_.x[1]"]
    texts += [path.read_text(encoding="utf-8", errors="surrogateescape")
              for folder in ("kgate", "rules", "tests", "bench", "fixtures")
              for path in (REPOSITORY / folder).rglob("*.py")]
    for text in texts:
        assert _dotted("\n".join(_LAUNCH_LINES.findall(text))) == _dotted(text), text[:200]


def _reaching_project(root: Path) -> str:
    package = root / "pkg"
    (package / "ops").mkdir(parents=True)
    (package / "__init__.py").write_text("")
    (package / "ops" / "__init__.py").write_text("")
    launch = package / "ops" / "launch.py"
    # `launch` is both a definition and its module's name; `attend` is spelled by no import statement but as a part
    # of a longer word.
    launch.write_text("def launch(x):\n    return x\n\n\ndef attend(x):\n    return x\n")
    (package / "layer.py").write_text("from pkg.ops import launch\nfrom pkg.ops.launch import attend_all\n\n\n"
                                      "def forward(x):\n    return launch.launch(launch.attend(x))\n")
    (package / "other.py").write_text("from pkg.ops.launch import launch as run\n\n\ndef forward(x):\n"
                                      "    return run(x)\n")
    return str(launch)


def test_the_modules_that_reach_a_definition_named_as_its_module_or_spelled_in_a_longer_word(tmp_path: Path) -> None:
    launch = _reaching_project(tmp_path)
    project = Modules(str(tmp_path))
    with depends.collecting() as reads:
        found = {Path(path).name: local for path, local in project.importing(launch, "launch")}
        attend = {Path(path).name: local for path, local in project.importing(launch, "attend")}
    assert found == {"other.py": ["run"], "layer.py": ["launch.launch"]}
    assert attend == {"layer.py": ["launch.attend"]}
    # What each asked read: the import statements of the modules that spell the words.
    assert {key for key in reads if key.startswith(depends.STATEMENTS)} == {
        depends.STATEMENTS + str(tmp_path / "pkg" / name) for name in ("layer.py", "other.py")}


def test_a_kept_answers_reads_reach_every_collection_open_when_it_is_asked_again() -> None:
    kept: depends.Reads = {"a": (None, "1"), "b": (None, "2")}
    with depends.collecting() as outer:
        depends.replay(kept)
        with depends.collecting() as inner:
            depends.replay(kept)  # the outer collection has them already; the inner one takes them now
            depends.note("c", None, "3")
        assert inner == {"a": (None, "1"), "b": (None, "2"), "c": (None, "3")}
        with depends.collecting() as later:  # a collection opened after another closed: its own, empty
            depends.replay(kept)
        assert later == kept
    assert outer == {"a": (None, "1"), "b": (None, "2"), "c": (None, "3")}
    with depends.collecting() as fresh:
        depends.replay(kept)
    assert fresh == kept


def test_the_shortcuts_find_the_kg108_fixtures_findings() -> None:
    found = {(f.path, f.line) for f in linted(REPOSITORY / "fixtures" / "rules" / "KG108")[0]}
    assert {("modattr/ops.py", 12), ("modattr/ops.py", 20), ("modattr/ops.py", 28)} <= found
    text = textwrap.dedent((REPOSITORY / "fixtures" / "rules" / "KG108" / "modattr" / "ops.py").read_text())
    assert "triton" not in text.split('"""')[2]  # the launching module never says "triton" below its docstring


def _forked(monkeypatch: pytest.MonkeyPatch, log: Path, fail_in_child: bool = False) -> None:
    """Forked runs, each file linted noted with the process that linted it; with `fail_in_child`, a child fails at the
    first file it takes."""
    monkeypatch.delenv("PRE_COMMIT", raising=False)
    parent, real = os.getpid(), engine._lint_one

    def lint_one(rel: str, path: str, rules: list[engine.SourceRule]) -> engine.Linted:
        if fail_in_child and os.getpid() != parent:
            raise RuntimeError("a bug in a worker")
        with open(log, "a") as out:
            out.write(f"{rel} {os.getpid()}\n")
        return real(rel, path, rules)

    monkeypatch.setattr(engine, "_lint_one", lint_one)


def test_a_forked_run_hands_every_file_out_once_and_both_processes_lint(tmp_path: Path,
                                                                        monkeypatch: pytest.MonkeyPatch) -> None:
    (tmp_path / "tree").mkdir()
    root = cache_project(tmp_path / "tree", files=engine.PARALLEL_MIN_FILES * 2)
    serial = cache_lint(root, use_cache=False, jobs=1)
    log = tmp_path / "linted.txt"
    _forked(monkeypatch, log)
    parallel = cache_lint(root, use_cache=False, jobs=2)
    assert verdict(parallel) == verdict(serial) and list(parallel.results) == list(serial.results)
    linted = [line.split() for line in log.read_text().splitlines()]
    assert sorted(rel for rel, _pid in linted) == sorted(serial.results)  # each file once
    assert len({pid for _rel, pid in linted}) == 2


def test_the_files_a_failed_worker_took_are_linted_by_the_run(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    (tmp_path / "tree").mkdir()
    root = cache_project(tmp_path / "tree", files=engine.PARALLEL_MIN_FILES * 2)
    serial = cache_lint(root, use_cache=False, jobs=1)
    log = tmp_path / "linted.txt"
    _forked(monkeypatch, log, fail_in_child=True)
    parallel = cache_lint(root, use_cache=False, jobs=2)
    assert verdict(parallel) == verdict(serial) and list(parallel.results) == list(serial.results)
    linted = [line.split() for line in log.read_text().splitlines()]
    assert sorted(rel for rel, _pid in linted) == sorted(serial.results)
    assert {pid for _rel, pid in linted} == {str(os.getpid())}


def test_a_cold_lint_forks_for_the_cores_no_other_task_runs_on() -> None:
    # /proc/loadavg: the load averages, the tasks runnable now (the reader among them) / all tasks, the last pid.
    assert engine.free_cores(2, b"0.10 0.20 0.30 1/170 4242\n") == 2  # only the reader runs: both cores
    assert engine.free_cores(2, b"3.43 4.43 4.12 2/167 26797\n") == 1  # another task runs: one process
    assert engine.free_cores(2, b"3.43 4.43 4.12 9/167 26797\n") == 1  # never fewer than one
    assert engine.free_cores(8, b"1.00 1.00 1.00 3/200 1\n") == 6
    assert engine.free_cores(4, b"garbled\n") == 4  # where it does not say: every core


def test_a_cold_lint_on_busy_cores_lints_in_one_process(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    (tmp_path / "tree").mkdir()
    root = cache_project(tmp_path / "tree", files=engine.PARALLEL_MIN_FILES * 2)
    monkeypatch.delenv("PRE_COMMIT", raising=False)
    monkeypatch.setattr(engine, "_free_cores", lambda: 1)
    forks: list[int] = []
    real_fork = os.fork
    monkeypatch.setattr(os, "fork", lambda: forks.append(1) or real_fork())
    serial = cache_lint(root, use_cache=False)
    assert not forks
    assert verdict(cache_lint(root, use_cache=False, jobs=2)) == verdict(serial) and forks == [1]


def _comment_columns(text: str) -> dict[int, list[tuple[int, int]]]:
    """The comment columns a finding's snippet is cut by."""
    from kgate.collect.source import SourceFile

    return engine._comment_columns(SourceFile("m.py", "m.py", text.encode("utf-8", "surrogateescape")))


def test_a_findings_snippet_cuts_the_comments_the_tokenizer_reads(monkeypatch: pytest.MonkeyPatch) -> None:
    """A finding's identity is its line less its comments: of a Python file that compiles, they are read by the scan
    rather than the tokenizer, and are the same; a file that does not compile is read as before."""
    texts = ["x = 1  # c\ns = '''a # no\n# no'''\ny = '#' # yes\n", "x = 1  # c\r\ns = 'a#'\r\n",
             "s = f'{x}#' # c\n", "x = (1,  # c\n", "s = '''open\n# no\n", "x = 1\ry = 2 # c\n",
             "def f():\n    return 1  # c\n\treturn 2\n"]
    for folder in ("kgate", "rules", "tests", "bench", "fixtures"):
        for path in (REPOSITORY / folder).rglob("*.py"):
            try:
                texts.append(path.read_text(encoding="utf-8"))
            except UnicodeDecodeError:  # a file kgate cannot read has no snippets
                continue
    shortcut = [_comment_columns(text) for text in texts]
    from kgate.support.comments import python

    monkeypatch.setattr(python, "compiles", lambda _text: False)  # the tokenizer's reading, always
    assert [_comment_columns(text) for text in texts] == shortcut


def test_a_python_line_without_a_hash_is_cut_as_the_files_comments_cut_it(monkeypatch: pytest.MonkeyPatch) -> None:
    """A finding's line is cut of its comments; a Python line without a `#` holds none, so the file's comments are not
    read for it (for most files with findings, none of their lines is): every line of every Python file of the
    repository and of texts made to break it reads as the cut of the file's comments gives it. A file with a lone
    carriage return is read as before: the reader of a file the tokenizer cannot read carries a comment over one."""
    from kgate.collect.source import SourceFile

    texts = ["x = 1  # c\ny = '#'\nz = '''\n# no\n'''\n", "x = (1,  # open\ny = 2\r\n", "x = (1  # c\ry = 2\n",
             "s = '''never\n# closed\nt = 1\n"]
    for folder in ("kgate", "rules", "tests", "bench", "fixtures"):
        for path in sorted((REPOSITORY / folder).rglob("*.py")):
            try:
                texts.append(path.read_text(encoding="utf-8"))
            except UnicodeDecodeError:
                continue

    def cut(text: str, cuts: list[tuple[int, int]]) -> str:
        pieces, done = [], 0
        for start, end in cuts:
            pieces += [text[done:start], " "]
            done = max(done, end)
        return "".join(pieces) + text[done:]

    sources = [SourceFile("m.py", "m.py", text.encode("utf-8", "surrogateescape")) for text in texts]
    expected = []
    for source in sources:
        spans = engine._comment_columns(source)
        expected.append([cut(source.line_text(line), spans.get(line, [])) for line in range(1, len(source.lines) + 1)])
    assert expected[2][1] == " "  # the lone carriage return's comment, carried onto the next line by that reader
    read: list[str] = []
    columns = engine._comment_columns
    monkeypatch.setattr(engine, "_comment_columns", lambda source: read.append(source.text) or columns(source))
    found = [[engine._code_of_line(source, line, source.line_text(line)) for line in range(1, len(source.lines) + 1)]
             for source in sources]
    assert found == expected
    without = [source.text for source in sources if "#" not in source.text and "\r" not in source.text]
    assert without and not set(without) & set(read)


class _EveryModule(Modules):
    """`Modules` that reads, for each definition asked about, every module that imports one of its words, one by
    one, and follows every attribute of a module anew: the long way the per-word plans of `Modules._reaching` and the
    attributes kept for the run stand for."""

    def _attribute(self, head: object, tail: str) -> tuple[str, str] | None:
        return self.resolver.attribute(head, tail)  # type: ignore[arg-type]

    def _reaching(self, path: str, owner: str) -> list[tuple[str, list[str]]]:
        words, routes = self._spelled(path)
        others = dict.fromkeys(other for word in (owner, *words) for other in self.importers(word))
        spelling = [(word, word.encode("utf-8")) for word in dict.fromkeys((owner, *words))]
        out = []
        for other in others:
            if other != path and not self._checks(other):
                local = self._visit(other, path, owner, spelling, routes)
                if local:
                    out.append((other, local))
        return out


def _plans_project(root: Path) -> list[tuple[str, str]]:
    """A project whose modules import their packages' words in every way a plan must tell apart; the definitions to
    ask about."""
    files = {
        "pkg/__init__.py": "from .ops import *\nfrom . import ops\n",
        "pkg/ops/__init__.py": "from .act import Relu, relu\nfrom pkg.ops.norm import norm as layer_norm\n",
        "pkg/ops/act.py": "from pkg.ops.norm import norm\n\n\nclass Relu:\n    pass\n\n\ndef relu(x):\n    return x\n",
        "pkg/ops/norm.py": "from pkg.ops import act\n\n\ndef norm(x):\n    return act.relu(x)\n\n\ndef ops(x):\n"
                           "    return x\n",
        "pkg/ops/ops.py": "def ops(x):\n    return x\n",  # a module named as its package
        "pkg/layers/__init__.py": "",
        "pkg/layers/a.py": "from pkg.ops.act import relu\nimport pkg.ops.norm\n",
        "pkg/layers/b.py": "from pkg import ops\nfrom pkg.ops import act as activations\n",
        "pkg/layers/c.py": "from pkg.ops.norm import norm  # relu_like, acts, opsy\nfrom pkg.layers import a\n",
        "pkg/layers/d.py": "import pkg.ops as kernels\nfrom pkg import Relu\n",
        "pkg/layers/e.py": "from pkg.ops import layer_norm\nfrom other import ops_table, norms\n",  # spelled, not imported
        "pkg/layers/f.py": "from pkg.ops.ops import ops\nfrom pkg.ops.act import *\n",
        "pkg/layers/g.py": "def f():\n    from pkg.ops.act import Relu as R\n    return R\n",
        "pkg/layers/h.py": "import pkg\nimport pkg.ops.act\n",  # the same module as a.py's `pkg`
        "tests/test_ops.py": "from pkg.ops.act import relu\n",
    }
    for name, text in files.items():
        (root / name).parent.mkdir(parents=True, exist_ok=True)
        (root / name).write_text(text)
    return [(str(root / "pkg/ops" / module), name) for module, names in
            (("act.py", ("Relu", "relu", "missing")), ("norm.py", ("norm", "ops")), ("ops.py", ("ops",)),
             ("__init__.py", ("layer_norm",))) for name in names]


@pytest.mark.parametrize("order", [1, -1])
def test_the_plans_of_the_modules_that_reach_a_definition_find_and_read_what_every_module_read_finds(
        tmp_path: Path, order: int) -> None:
    """Every module that imports a package's word, read one by one for every definition, against the plans that note
    what most of them read together: the same modules, the same names, the same reads, in any order of asking."""
    project = _plans_project(tmp_path)[::order]
    fixtures = REPOSITORY / "fixtures" / "rules" / "KG108"
    answers = {}
    for root, asked in ((tmp_path, project), (fixtures, [(str(path), name) for path in sorted(fixtures.rglob("*.py"))
                                                         for name in ("launch", "forward", "fwd", "kernels")])):
        short, long = Modules(str(root)), _EveryModule(str(root))
        for path, name in asked:
            with depends.collecting() as reads:
                found = short.reaching(path, name), short.importing(path, name)
            with depends.collecting() as every:
                expected = long.reaching(path, name), long.importing(path, name)
            assert found == expected, (path, name)
            assert reads == every, (path, name)
            answers[Path(path).name, name] = {Path(other).name: local for other, local in found[0]}
    # Through a module the statements bind (leading), a package's word spelled but not imported (e.py), the module
    # that imports its own package (norm.py), and names inside a function (g.py).
    assert answers["act.py", "Relu"] == {
        "d.py": ["kernels.Relu", "kernels.act.Relu", "Relu"], "g.py": ["R"], "__init__.py": ["ops.Relu", "ops.act.Relu"],
        "a.py": ["pkg.Relu", "pkg.ops.act.Relu"], "h.py": ["pkg.Relu", "pkg.ops.act.Relu"],
        "b.py": ["ops.Relu", "ops.act.Relu", "activations.Relu"],
        "norm.py": ["act.Relu"], "c.py": ["a.pkg.ops.act.Relu"]}
    assert answers["norm.py", "norm"]["e.py"] == ["layer_norm"]
