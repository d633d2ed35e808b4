"""A verdict that read other files is kept in the lint cache with what it read: after one file changes, a warm lint
lints that file again and exactly the files whose verdicts read what changed, and finds what a lint without the
cache finds."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from conftest import kgate

from kgate.evaluate import source as engine

TRITON_UTILS = '''"""The project's one import of Triton."""

try:
    import triton
    import triton.language as tl
except ImportError:
    triton = tl = None


def describe():
    return "triton"
'''

KERNELS = '''from pkg.triton_utils import tl, triton

CONFIGS = [triton.Config({}, num_warps=4), triton.Config({}, num_warps=8)]


@triton.autotune(configs=CONFIGS, key=["count"])
@triton.jit
def scale_rows_kernel(x, count, BLOCK: tl.constexpr):
    tl.store(x + tl.arange(0, BLOCK), tl.load(x + tl.arange(0, BLOCK)) * count)


def scale_rows(x, count):
    scale_rows_kernel[(1,)](x, count, BLOCK=128)
'''

LAYERS = '''from .kernels import scale_rows


def normalize(hidden, width):
    scale_rows(hidden, width)
    return hidden
'''

PRINTS = '''from pkg.triton_utils import tl, triton


@triton.jit
def show(x):
    tl.device_print("x", tl.load(x))
'''

MODELS = '''def step(batch):
    return sorted(batch)
'''

CUDA_LAUNCH = '''#include <cuda_runtime.h>

__global__ void scale(float* x, int n) { if (threadIdx.x < n) x[threadIdx.x] *= 2.f; }

void scale_launch(float* x, int n, cudaStream_t stream) {
  scale<<<1, 256, 0, stream>>>(x, n);
}
'''

CUDA_CALLER = '''#include <cuda_runtime.h>

void scale_launch(float* x, int n, cudaStream_t stream);

void run(float* x, int n, cudaStream_t stream) {
  scale_launch(x, n, stream);
  if (cudaGetLastError() != cudaSuccess) return;
}
'''


@pytest.fixture
def project(tmp_path: Path) -> Path:
    files = {"pkg/__init__.py": "", "pkg/triton_utils.py": TRITON_UTILS, "pkg/kernels.py": KERNELS,
             "pkg/layers.py": LAYERS, "pkg/prints.py": PRINTS, "pkg/models.py": MODELS,
             "csrc/launch.cu": CUDA_LAUNCH, "csrc/caller.cu": CUDA_CALLER}
    for rel, text in files.items():
        (tmp_path / rel).parent.mkdir(parents=True, exist_ok=True)
        (tmp_path / rel).write_text(text)
    (tmp_path / "kgate.toml").write_text("")
    return tmp_path


def lint(project: Path, monkeypatch: pytest.MonkeyPatch) -> tuple[set[tuple[str, int, str]], set[str]]:
    """(findings, the files linted rather than answered from the cache) of a warm `kgate lint`; the findings are
    checked against a lint without the cache."""
    linted: set[str] = set()
    real = engine.lint_file

    def watched(path: str, rel: str, rules: list[engine.SourceRule]) -> tuple[engine.FileResult, bytes | None]:
        linted.add(rel)
        return real(path, rel, rules)

    monkeypatch.setattr(engine, "lint_file", watched)
    found = _findings(kgate("lint", "--format", "json", "--exit-zero", cwd=project).stdout)
    monkeypatch.setattr(engine, "lint_file", real)
    assert found == _findings(kgate("lint", "--format", "json", "--exit-zero", "--no-cache", cwd=project).stdout)
    return found, linted


def _findings(report: str) -> set[tuple[str, int, str]]:
    return {(f["path"], f["line"], f["code"]) for f in json.loads(report)["findings"]}


def edit(project: Path, rel: str, old: str, new: str) -> None:
    path = project / rel
    text = path.read_text()
    assert old in text
    path.write_text(text.replace(old, new))


def test_a_module_no_verdict_read_is_linted_alone(project: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    first, _linted = lint(project, monkeypatch)
    assert ("pkg/kernels.py", 6, "KG201") not in first and ("pkg/prints.py", 6, "KG204") in first
    edit(project, "pkg/models.py", "sorted(batch)", "sorted(batch, reverse=True)")
    assert lint(project, monkeypatch) == (first, {"pkg/models.py"})


def test_an_edit_inside_a_function_of_a_module_others_follow_names_through(project: Path,
                                                                           monkeypatch: pytest.MonkeyPatch) -> None:
    """The kernel modules take Triton through pkg/triton_utils.py: an edit inside its function changes none of what
    it binds, so their verdicts hold; an edit to what it binds lints them again."""
    first, _linted = lint(project, monkeypatch)
    edit(project, "pkg/triton_utils.py", 'return "triton"', 'return "triton " + triton.__version__')
    assert lint(project, monkeypatch) == (first, {"pkg/triton_utils.py"})
    edit(project, "pkg/triton_utils.py", "    import triton.language as tl\n", "    tl = None\n")
    found, linted = lint(project, monkeypatch)
    assert linted == {"pkg/triton_utils.py", "pkg/kernels.py", "pkg/prints.py"}
    assert ("pkg/prints.py", 6, "KG204") not in found


def test_an_edit_to_the_call_that_decides_a_kernels_key(project: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """pkg/kernels.py's autotune key is decided by the call of its launcher in pkg/layers.py: editing that call lints
    both again, and the key it now passes is reported."""
    first, _linted = lint(project, monkeypatch)
    edit(project, "pkg/layers.py", "scale_rows(hidden, width)", "scale_rows(hidden, hidden.shape[0])")
    found, linted = lint(project, monkeypatch)
    assert linted == {"pkg/layers.py", "pkg/kernels.py"}
    assert found - first == {("pkg/kernels.py", 6, "KG201")}


def test_a_module_added_that_calls_the_launcher(project: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """A module added since that imports the launcher is one that imports its name: the kernel's verdict is linted
    again (a module added that imports other names is not)."""
    first, _linted = lint(project, monkeypatch)
    (project / "pkg" / "unrelated.py").write_text("from .models import step\n")
    assert lint(project, monkeypatch) == (first, {"pkg/unrelated.py"})
    (project / "pkg" / "serving.py").write_text(
        "from .kernels import scale_rows\n\n\ndef serve(tokens):\n    scale_rows(tokens, tokens.shape[0])\n")
    found, linted = lint(project, monkeypatch)
    assert linted == {"pkg/serving.py", "pkg/kernels.py"}
    assert found - first == {("pkg/kernels.py", 6, "KG201")}


def test_a_module_that_appears_where_an_import_was_looked_for(project: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """`from pkg.tools import triton` finds no module at first (the name is taken to be outside the project); once
    pkg/tools.py is there with a stand-in for Triton, the kernel module's verdict follows it."""
    (project / "pkg" / "late.py").write_text(PRINTS.replace("pkg.triton_utils", "pkg.tools"))
    first, _linted = lint(project, monkeypatch)
    assert ("pkg/late.py", 6, "KG204") not in first
    (project / "pkg" / "tools.py").write_text(TRITON_UTILS)
    found, linted = lint(project, monkeypatch)
    assert "pkg/late.py" in linted and found - first == {("pkg/late.py", 6, "KG204")}


TUNING = '''import triton


def describe():
    return "tuning"


def autotune_with(configs, key):
    return triton.autotune(configs=configs, key=key)
'''

ACCUMULATE = '''from pkg.triton_utils import tl, triton

from .tuning import autotune_with


@triton.jit
def accumulate(out, x, BLOCK: tl.constexpr):
    tl.atomic_add(out + tl.arange(0, BLOCK), tl.load(x + tl.arange(0, BLOCK)))


accumulate_tuned = autotune_with(configs=[triton.Config({}, num_warps=4), triton.Config({}, num_warps=8)], key=[])(accumulate)
'''


def test_an_edit_to_another_function_of_the_module_an_autotune_wrapper_is_read_in(
        project: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """pkg/accumulate.py applies the autotuner through pkg/tuning.py's wrapper: its verdict read that wrapper's body,
    not the body of the module's other function, so an edit there (a line added, which moves the wrapper) is linted
    alone; an edit to the wrapper's body lints it again."""
    (project / "pkg" / "tuning.py").write_text(TUNING)
    (project / "pkg" / "accumulate.py").write_text(ACCUMULATE)
    first, _linted = lint(project, monkeypatch)
    assert ("pkg/accumulate.py", 8, "KG202") in first
    edit(project, "pkg/tuning.py", '    return "tuning"\n', '    name = "tuning"\n    return name\n')
    assert lint(project, monkeypatch) == (first, {"pkg/tuning.py"})
    edit(project, "pkg/tuning.py", "key=key)", 'key=key, reset_to_zero=["out"])')
    found, linted = lint(project, monkeypatch)
    assert linted == {"pkg/tuning.py", "pkg/accumulate.py"}
    assert first - found == {("pkg/accumulate.py", 8, "KG202")}


def test_a_module_an_autotune_wrapper_is_read_in_that_no_longer_parses(project: Path,
                                                                      monkeypatch: pytest.MonkeyPatch) -> None:
    """A wrapper's module broken in another function's body is read as no module at all: the verdict that read the
    wrapper there is linted again (and the application it found is no longer found)."""
    (project / "pkg" / "tuning.py").write_text(TUNING)
    (project / "pkg" / "accumulate.py").write_text(ACCUMULATE)
    first, _linted = lint(project, monkeypatch)
    assert ("pkg/accumulate.py", 8, "KG202") in first
    edit(project, "pkg/tuning.py", '    return "tuning"\n', '    return "tuning" +\n')
    found, linted = lint(project, monkeypatch)
    assert "pkg/accumulate.py" in linted
    assert ("pkg/accumulate.py", 8, "KG202") not in found


def test_a_launch_checked_in_another_file(project: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """csrc/launch.cu's launch is checked by its caller in csrc/caller.cu: its verdict is kept while the project's C++
    files are as they were, and linted again once the caller no longer checks."""
    first, _linted = lint(project, monkeypatch)
    assert not {f for f in first if f[0].startswith("csrc/")}
    edit(project, "pkg/models.py", "sorted(batch)", "sorted(batch, reverse=True)")
    assert lint(project, monkeypatch) == (first, {"pkg/models.py"})
    edit(project, "csrc/caller.cu", "  if (cudaGetLastError() != cudaSuccess) return;\n", "")
    found, linted = lint(project, monkeypatch)
    assert {"csrc/caller.cu", "csrc/launch.cu"} <= linted
    assert found - first == {("csrc/launch.cu", 6, "KG302")}


def test_an_edit_to_a_module_that_imports_another_name_of_the_same_spelling(project: Path,
                                                                             monkeypatch: pytest.MonkeyPatch) -> None:
    """pkg/elsewhere.py imports a `scale_rows` of its own: asking which modules import pkg/kernels.py's launcher read
    its import statements only, so an edit to its function is linted alone."""
    (project / "pkg" / "elsewhere.py").write_text(
        "from .models import step as scale_rows\n\n\ndef f(batch):\n    return scale_rows(batch)\n")
    first, _linted = lint(project, monkeypatch)
    edit(project, "pkg/elsewhere.py", "return scale_rows(batch)", "return scale_rows(batch[::-1])")
    assert lint(project, monkeypatch) == (first, {"pkg/elsewhere.py"})
    edit(project, "pkg/elsewhere.py", "from .models import step as scale_rows", "from .kernels import scale_rows")
    _found, linted = lint(project, monkeypatch)
    assert linted == {"pkg/elsewhere.py", "pkg/kernels.py"}


def test_the_readers_of_the_projects_python_and_cpp_files_walk_its_tree_once_a_run(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Which files import a name and the project's C++ files are both read from one walk of the tree per run; each
    reading still skips what it skipped (Python files of an installed package, whatever a hidden or build folder
    holds) and a new run walks again."""
    import os

    from kgate.collect import cuda_project, depends, files, pyimports

    for rel in ("a.py", "csrc/k.cu", "csrc/k.h", "env/site-packages/dep.py", "env/site-packages/dep.h",
                ".hidden/x.py", "build/y.cu", "pkg/b.py"):
        (tmp_path / rel).parent.mkdir(parents=True, exist_ok=True)
        (tmp_path / rel).write_text("")
    walks: list[str] = []
    listed = files.listed
    monkeypatch.setattr(files, "listed", lambda folder: (walks.append(folder) if folder == root else None,
                                                         listed(folder))[1])
    root = str(tmp_path)
    depends.new_run()
    python = [os.path.relpath(p, root) for p in pyimports.python_files(root)]
    cpp = [rel for rel, _path in cuda_project._sources(root)]
    assert (python, cpp) == (["a.py", os.path.join("pkg", "b.py")],
                             ["csrc/k.cu", "csrc/k.h", "env/site-packages/dep.h"])
    assert walks == [root]
    depends.new_run()
    pyimports.python_files(root)
    assert walks == [root, root]


def test_two_kernel_modules_whose_launchers_one_module_calls(project: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """pkg/layers.py calls the launchers of pkg/kernels.py and pkg/shift.py: its reading for their callers is made
    once a run and serves both verdicts, and each verdict keeps what that reading read, so an edit to either call
    lints both kernel modules again and the keys now passed are reported in both."""
    (project / "pkg" / "shift.py").write_text(KERNELS.replace("scale_rows", "shift_rows"))
    edit(project, "pkg/layers.py", "from .kernels import scale_rows\n",
         "from .kernels import scale_rows\nfrom .shift import shift_rows\n")
    edit(project, "pkg/layers.py", "    scale_rows(hidden, width)\n",
         "    scale_rows(hidden, width)\n    shift_rows(hidden, width)\n")
    first, _linted = lint(project, monkeypatch)
    assert not {f for f in first if f[2] == "KG201"}
    edit(project, "pkg/layers.py", "_rows(hidden, width)", "_rows(hidden, hidden.shape[0])")
    found, linted = lint(project, monkeypatch)
    assert linted == {"pkg/layers.py", "pkg/kernels.py", "pkg/shift.py"}
    assert found - first == {("pkg/kernels.py", 6, "KG201"), ("pkg/shift.py", 6, "KG201")}


def test_the_names_cached_verdicts_asked_about_are_answered_together(project: Path,
                                                                     monkeypatch: pytest.MonkeyPatch) -> None:
    """After a Python file changed, the cached verdicts that asked which modules import a name are checked by one pass
    over the project's import words for every name they asked, not by an index of every word of every file."""
    from kgate.collect import pyimports

    first, _linted = lint(project, monkeypatch)
    asked: list[list[str]] = []
    built: list[int] = []
    prepare, inverted = pyimports.Index.prepare, pyimports._inverted
    monkeypatch.setattr(pyimports.Index, "prepare", lambda self, names: (asked.append(sorted(names)),
                                                                         prepare(self, names))[1])
    monkeypatch.setattr(pyimports, "_inverted", lambda words: (built.append(len(words)), inverted(words))[1])
    edit(project, "pkg/models.py", "sorted(batch)", "sorted(batch, reverse=True)")
    linted: set[str] = set()
    real = engine.lint_file
    monkeypatch.setattr(engine, "lint_file", lambda path, rel, rules: (linted.add(rel), real(path, rel, rules))[1])
    found = _findings(kgate("lint", "--format", "json", "--exit-zero", cwd=project).stdout)
    assert (found, linted) == (first, {"pkg/models.py"})
    # pkg/kernels.py's verdict asked who imports its launcher and, a module further, who imports the layer calling it,
    # by its name or through its module (`kernels.scale_rows` after `from pkg import kernels`) or package
    assert asked == [["kernels", "layers", "normalize", "pkg", "scale_rows"]] and built == []


def test_which_files_import_a_name_is_answered_alike_however_it_is_asked(tmp_path: Path) -> None:
    """The files that import a name, found by the pass for the names asked together, by a search of the words for
    one name, or by the index of every word, are the same, in walk order; and after a file's imports change."""
    import os
    import re

    from kgate.collect import depends, pyimports

    texts = {"a.py": "from .k import launch, other\n", "b/c.py": "import launch\n", "b/d.py": "x = 'launch'\n",
             "e.py": "from .k import (\n    other,\n    launch_all,\n)\n", "f.py": "def f():\n    from .k import launch\n"}
    for rel, text in texts.items():
        (tmp_path / rel).parent.mkdir(parents=True, exist_ok=True)
        (tmp_path / rel).write_text(text)

    def expected(name: str) -> list[str]:
        return [path for path in pyimports.python_files(str(tmp_path))
                if re.search(rf"(import|from)[^\n]*\b{name}\b", texts[os.path.relpath(path, tmp_path)].replace(
                    "(\n", "(").replace(",\n", ","))]

    names = ["launch", "other", "launch_all", "k", "missing"]
    for _round in range(2):
        depends.new_run()
        together = pyimports.index_of(str(tmp_path))
        together.prepare(names)
        depends.new_run()
        one_by_one = pyimports.index_of(str(tmp_path))
        depends.new_run()
        indexed = pyimports.index_of(str(tmp_path))
        indexed._searches = pyimports._SEARCHES
        for name in names:
            answers = [together.importers(name), one_by_one.importers(name), indexed.importers(name)]
            assert answers == [expected(name)] * 3, name
        texts["b/d.py"] = "from .a import launch as x\n"
        texts["a.py"] = "from .k import other\n"
        for rel in ("b/d.py", "a.py"):
            (tmp_path / rel).write_text(texts[rel])


def test_an_edit_that_leaves_a_files_imports_alone_leaves_the_import_words_unwritten(
        project: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """The import words of a file edited inside a function are the ones kept: the record is not written again for
    it (the next run reads that file's words again); an edit to its imports is written, and answered."""
    import os

    def aged(*rels: str) -> None:
        for path in [project / rel for rel in rels] or project.rglob("*.py"):
            os.utime(path, ns=(path.stat().st_atime_ns, path.stat().st_mtime_ns - 10_000_000_000))

    aged()
    first, _linted = lint(project, monkeypatch)
    record = next(project.rglob("imports.json"))
    kept = record.read_bytes()
    edit(project, "pkg/models.py", "sorted(batch)", "sorted(batch, reverse=True)")
    aged("pkg/models.py")
    assert lint(project, monkeypatch) == (first, {"pkg/models.py"})
    assert record.read_bytes() == kept
    edit(project, "pkg/models.py", "def step(batch):", "from .kernels import scale_rows\n\n\ndef step(batch):")
    (project / "pkg" / "models.py").write_text((project / "pkg" / "models.py").read_text()
                                               + "\n\ndef serve(t):\n    scale_rows(t, t.shape[0])\n")
    aged("pkg/models.py")
    found, linted = lint(project, monkeypatch)
    assert linted == {"pkg/models.py", "pkg/kernels.py"} and found - first == {("pkg/kernels.py", 6, "KG201")}
    assert record.read_bytes() != kept


def test_a_read_of_a_file_written_just_before_is_answered_by_its_state_once_it_settles(
        project: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """A verdict that read a file written less than two seconds before (a checkout, a pull, then the hook) keeps no
    state for that read, so a later run digests the file again to answer it. Once the file's state is one to keep,
    the answer keeps it: every run after that answers the read by its state (each command line is a process of its
    own, so nothing else remembers the digest)."""
    import os

    def aged(*rels: str) -> None:
        for rel in rels:
            path = project / rel
            os.utime(path, ns=(path.stat().st_atime_ns, path.stat().st_mtime_ns - 10_000_000_000))

    def kept_states() -> list[object]:
        """The state each cached verdict keeps for its read of pkg/triton_utils.py's names."""
        from kgate.pipeline.lint_cache import LintCache

        read = "exports:" + str(project / "pkg" / "triton_utils.py")
        states = []
        for record in (project / ".kgate-cache").rglob("lint/*.json"):
            for entry in LintCache(record.parent.parent.parent, record.stem).entries.values():
                states += [state for key, state, _found in entry[4] if key == read]
        return states

    # Every file settled but the module the kernel module imports its Triton from, written just now.
    (project / "pkg" / "triton_utils.py").write_text(TRITON_UTILS)
    aged(*[str(p.relative_to(project)) for p in project.rglob("*") if p.is_file() and p.name != "triton_utils.py"])
    first = _findings(kgate("lint", "--format", "json", "--exit-zero", cwd=project, process=True).stdout)
    assert kept_states() and all(state is None for state in kept_states())
    aged("pkg/triton_utils.py")  # settled, its bytes the same
    assert lint(project, monkeypatch)[0] == first
    assert kept_states() and all(isinstance(state, list) for state in kept_states())


HELPERS = '''def describe():
    return "helpers"


def rows_of(x):
    return x.shape[0]
'''

ROW_KERNELS = '''from pkg.triton_utils import tl, triton


def describe():
    return "kernels"


@triton.jit
def rows_kernel(x, ROWS: tl.constexpr):
    tl.store(x + tl.arange(0, 16), tl.load(x + tl.arange(0, 16)) * ROWS)
'''

ROWS = '''from .helpers import rows_of
from .row_kernels import rows_kernel


def scale(x):
    rows = rows_of(x)
    rows_kernel[(1,)](x, rows)
'''


def test_an_edit_to_another_function_of_a_module_a_helper_or_a_kernel_is_imported_from(
        project: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """pkg/rows.py launches pkg/row_kernels.py's kernel with what pkg/helpers.py's helper returns (the token count:
    KG108). Its verdict read the helper's and the kernel's definitions, with what their modules bind, not the bodies
    of those modules' other functions: an edit there (a line added, which moves the definitions below it) is linted
    alone, as a module of helpers many kernel modules import is edited; an edit to the helper, or to the kernel's
    signature, lints it again."""
    for rel, text in {"pkg/helpers.py": HELPERS, "pkg/row_kernels.py": ROW_KERNELS, "pkg/rows.py": ROWS}.items():
        (project / rel).write_text(text)
    first, _linted = lint(project, monkeypatch)
    assert ("pkg/rows.py", 7, "KG108") in first
    edit(project, "pkg/helpers.py", '    return "helpers"\n', '    name = "helpers"\n    return name\n')
    assert lint(project, monkeypatch) == (first, {"pkg/helpers.py"})
    edit(project, "pkg/row_kernels.py", '    return "kernels"\n', '    name = "kernels"\n    return name\n')
    assert lint(project, monkeypatch) == (first, {"pkg/row_kernels.py"})
    edit(project, "pkg/helpers.py", "return x.shape[0]", "return 16")
    found, linted = lint(project, monkeypatch)
    assert linted == {"pkg/helpers.py", "pkg/rows.py"}
    assert first - found == {("pkg/rows.py", 7, "KG108")}
    edit(project, "pkg/helpers.py", "return 16", "return x.shape[0]")
    edit(project, "pkg/row_kernels.py", "ROWS: tl.constexpr", "ROWS")
    found, linted = lint(project, monkeypatch)
    assert linted == {"pkg/helpers.py", "pkg/row_kernels.py", "pkg/rows.py"}
    assert first - found == {("pkg/rows.py", 7, "KG108")}


def test_the_kernel_an_import_names_is_the_modules_top_level_definition(project: Path,
                                                                        monkeypatch: pytest.MonkeyPatch) -> None:
    """A function of the kernel's name nested in an earlier function of its module (a stand-in made for a test) is
    not the kernel the import names: the launch's constexpr is read from the kernel at the module's top level."""
    nested = '''def describe():
    def rows_kernel(x, rows):
        return x * rows

    return rows_kernel


'''
    (project / "pkg" / "helpers.py").write_text(HELPERS)
    (project / "pkg" / "row_kernels.py").write_text(ROW_KERNELS.replace("\n\n\ndef describe", "\n\n\n" + nested
                                                                        + "def describe", 1))
    (project / "pkg" / "rows.py").write_text(ROWS)
    found, _linted = lint(project, monkeypatch)
    assert ("pkg/rows.py", 7, "KG108") in found


def test_the_syntax_trees_read_for_a_run_are_released_once_its_files_are_linted(
        project: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """The modules read beyond the file under lint (pkg/rows.py's verdict reads pkg/helpers.py and
    pkg/row_kernels.py), their parsed blocks and the readings built of them are kept while the run's files are linted,
    then released, before the results are written: none of the syntax trees parsed is left once the run ends (the
    peak memory of a cold lint of a project of a few hundred modules is what the readings hold, not that plus what
    writing the results takes)."""
    import weakref

    from kgate.collect import pyparts
    from kgate.collect import source as sources

    for rel, text in {"pkg/helpers.py": HELPERS, "pkg/row_kernels.py": ROW_KERNELS, "pkg/rows.py": ROWS}.items():
        (project / rel).write_text(text)
    parsed: list[weakref.ref[object]] = []
    real = sources.parse_python

    def recorded(data: bytes, filename: str = "<unknown>") -> Any:
        tree = real(data, filename)
        parsed.extend(weakref.ref(statement) for statement in tree.body)
        return tree

    monkeypatch.setattr(sources, "parse_python", recorded)
    monkeypatch.setattr(pyparts, "parse_python", recorded)
    found = _findings(kgate("lint", "--format", "json", "--exit-zero", "--no-cache", cwd=project).stdout)
    assert ("pkg/rows.py", 7, "KG108") in found
    assert len(parsed) > 10
    assert [ref() for ref in parsed if ref() is not None] == []
