"""Held-out edits in one module that should change a cached lint verdict of another: renames, re-exports, a
package's `__init__.py` appearing or going, a module turned into a package, links, case-only renames, a file made
again with the same size and time, the import words' record damaged, imports written in unusual ways. After each
edit a warm `kgate lint` finds what a lint without the cache finds (`lint` checks it), and where the edit decides a
finding, that finding."""

from __future__ import annotations

import json
import os
import re
import shutil
from collections.abc import Callable
from pathlib import Path

import pytest
from conftest import kgate
from test_lint_depends import KERNELS, PRINTS, TRITON_UTILS, edit, lint, project  # noqa: F401 - the fixture

KG201 = ("pkg/kernels.py", 6, "KG201")  # the launcher's caller passes a shape as the autotune key
KG204 = ("pkg/prints.py", 6, "KG204")  # pkg/prints.py's kernel prints, through Triton taken from triton_utils
NO_TL = TRITON_UTILS.replace("    import triton.language as tl\n", "    tl = None\n")
SERVE = "\n\ndef serve(tokens):\n    scale_rows(tokens, tokens.shape[0])\n"


def write(root: Path, rel: str, text: str) -> None:
    (root / rel).parent.mkdir(parents=True, exist_ok=True)
    (root / rel).write_text(text)


def caller(how: str) -> Callable[[Path], None]:
    """A module added that calls the launcher with a shape, importing it as `how` writes."""
    return lambda root: write(root, "pkg/serving.py", how + SERVE)


def rename(old: str, new: str) -> Callable[[Path], None]:
    return lambda root: os.rename(root / old, root / new)


def no_tl_behind(rel: str) -> Callable[[Path], None]:
    return lambda root: write(root, rel, NO_TL)


def package_utils(root: Path) -> None:
    """pkg/triton_utils.py turned into a package of the same name whose __init__ binds no `tl`."""
    (root / "pkg/triton_utils.py").unlink()
    write(root, "pkg/triton_utils/__init__.py", NO_TL)


def package_utils_keeping(root: Path) -> None:
    """The same module turned into a package whose __init__ re-exports the module's names from a submodule."""
    text = (root / "pkg/triton_utils.py").read_text()
    (root / "pkg/triton_utils.py").unlink()
    write(root, "pkg/triton_utils/core.py", text.replace("import triton.language as tl", "tl = None"))
    write(root, "pkg/triton_utils/__init__.py", "from .core import tl, triton\n")


def same_size_and_time(root: Path) -> None:
    """pkg/triton_utils.py deleted and written again with other bytes of the same length and modification time."""
    path = root / "pkg/triton_utils.py"
    old = path.read_text()
    new = old.replace("    import triton.language as tl\n", "    tl = None  # ...............\n")
    new = new[:len(old)].ljust(len(old))
    assert len(new) == len(old)
    st = path.stat()
    path.unlink()
    path.write_text(new)
    os.utime(path, ns=(st.st_atime_ns, st.st_mtime_ns))


def link_retargeted(root: Path) -> None:
    """pkg/triton_utils.py is a link; it is made to point at another file."""
    (root / "real_a.py").write_text((root / "pkg/triton_utils.py").read_text())
    (root / "real_b.py").write_text(NO_TL)
    (root / "pkg/triton_utils.py").unlink()
    (root / "pkg/triton_utils.py").symlink_to(root / "real_a.py")
    first, _linted = _lint_now(root)
    assert KG204 in first
    (root / "pkg/triton_utils.py").unlink()
    (root / "pkg/triton_utils.py").symlink_to(root / "real_b.py")


def link_target_edited(root: Path) -> None:
    (root / "real_a.py").write_text((root / "pkg/triton_utils.py").read_text())
    (root / "pkg/triton_utils.py").unlink()
    (root / "pkg/triton_utils.py").symlink_to(root / "real_a.py")
    _lint_now(root)
    (root / "real_a.py").write_text(NO_TL)


def folder_linked(root: Path) -> None:
    """pkg/utils is a link to a folder outside the package; prints.py takes Triton from it; the folder's module
    changes."""
    write(root, "vendor/triton_utils.py", TRITON_UTILS)
    (root / "pkg/vendored").symlink_to(root / "vendor", target_is_directory=True)
    write(root, "pkg/prints.py", PRINTS.replace("pkg.triton_utils", "pkg.vendored.triton_utils"))
    first, _linted = _lint_now(root)
    assert KG204 in first
    write(root, "vendor/triton_utils.py", NO_TL)


def case_only(root: Path) -> None:
    """pkg/triton_utils.py renamed to pkg/Triton_utils.py: `pkg.triton_utils` names nothing any more."""
    os.rename(root / "pkg/triton_utils.py", root / "pkg/Triton_utils.py")


_STATE: dict[str, pytest.MonkeyPatch] = {}


def _lint_now(root: Path) -> tuple[set[tuple[str, int, str]], set[str]]:
    return lint(root, _STATE["mp"])


def init_gone(root: Path) -> None:
    (root / "pkg/__init__.py").unlink()


def init_appears_elsewhere(root: Path) -> None:
    """A folder `triton_utils` with an __init__.py appears beside the module of that name: the package wins."""
    write(root, "pkg/triton_utils/__init__.py", NO_TL)


def reexported_elsewhere(root: Path) -> None:
    """pkg/triton_utils.py becomes a re-export of another module, which binds no `tl`."""
    write(root, "pkg/real_utils.py", NO_TL)
    write(root, "pkg/triton_utils.py", "from .real_utils import *  # noqa: F403\n")


def reexport_target_edited(root: Path) -> None:
    write(root, "pkg/real_utils.py", TRITON_UTILS)
    write(root, "pkg/triton_utils.py", "from .real_utils import *  # noqa: F403\n")
    first, _linted = _lint_now(root)
    assert KG204 in first
    write(root, "pkg/real_utils.py", NO_TL)


def reexport_all_narrowed(root: Path) -> None:
    write(root, "pkg/real_utils.py", TRITON_UTILS.replace('"""The', '__all__ = ["triton", "tl"]\n"""The'))
    write(root, "pkg/triton_utils.py", "from .real_utils import *  # noqa: F403\n")
    first, _linted = _lint_now(root)
    assert KG204 in first
    edit(root, "pkg/real_utils.py", '__all__ = ["triton", "tl"]', '__all__ = ["triton"]')


def caller_through_reexport(root: Path) -> None:
    write(root, "pkg/api.py", "from .kernels import scale_rows\n")
    _lint_now(root)
    caller("from .api import scale_rows")(root)


def caller_reexport_switched(root: Path) -> None:
    write(root, "pkg/api.py", "from .models import step as scale_rows\n")
    caller("from .api import scale_rows")(root)
    first, _linted = _lint_now(root)
    assert KG201 not in first
    write(root, "pkg/api.py", "from .kernels import scale_rows\n")


def caller_renamed_in(root: Path) -> None:
    write(root, "pkg/serving.txt", "from .kernels import scale_rows" + SERVE)
    _lint_now(root)
    os.rename(root / "pkg/serving.txt", root / "pkg/serving.py")


def caller_renamed_out(root: Path) -> None:
    caller("from .kernels import scale_rows")(root)
    first, _linted = _lint_now(root)
    assert KG201 in first
    os.rename(root / "pkg/serving.py", root / "pkg/serving.py.bak")


def caller_into_hidden_folder(root: Path) -> None:
    caller("from .kernels import scale_rows")(root)
    _lint_now(root)
    (root / "pkg/.old").mkdir()
    os.rename(root / "pkg/serving.py", root / "pkg/.old/serving.py")


def aged(root: Path) -> None:
    """Every file of the project written ten seconds ago, so that the records keep their states."""
    for path in root.rglob("*.py"):
        os.utime(path, ns=(path.stat().st_atime_ns, path.stat().st_mtime_ns - 10_000_000_000))


def words_damaged(root: Path) -> None:
    """The import words kept across runs are edited (the layer's words dropped, its state kept), and the lint cache
    is gone: the layer still calls the launcher."""
    edit(root, "pkg/layers.py", "scale_rows(hidden, width)", "scale_rows(hidden, hidden.shape[0])")
    aged(root)
    first, _linted = _lint_now(root)
    assert KG201 in first
    record = _cache(root) / "v1" / "imports.json"
    data = json.loads(record.read_text())
    for files in data["roots"].values():
        for rel, entry in files.items():
            if rel.endswith("layers.py"):
                entry[1] = ""
    record.write_text(json.dumps(data, separators=(",", ":")))
    forget_all_but_words(root)


def words_other_version(root: Path) -> None:
    """The import words' record written in another form (a list where this version keeps a string)."""
    edit(root, "pkg/layers.py", "scale_rows(hidden, width)", "scale_rows(hidden, hidden.shape[0])")
    aged(root)
    _lint_now(root)
    record = _cache(root) / "v1" / "imports.json"
    data = json.loads(record.read_text())
    for files in data["roots"].values():
        for entry in files.values():
            entry[1] = entry[1].split()
    record.write_text(json.dumps(data))
    forget_all_but_words(root)


def words_truncated(root: Path) -> None:
    edit(root, "pkg/layers.py", "scale_rows(hidden, width)", "scale_rows(hidden, hidden.shape[0])")
    aged(root)
    _lint_now(root)
    record = _cache(root) / "v1" / "imports.json"
    record.write_bytes(record.read_bytes()[:40])
    forget_all_but_words(root)


def lint_record_other_version(root: Path) -> None:
    """The lint record is replaced by one of another format with a verdict that found nothing."""
    records = list((_cache(root) / "v1" / "lint").glob("*.json"))
    for record in records:
        text = record.read_text()
        older = re.sub(r'"format":(\d+)', lambda number: f'"format":{int(number.group(1)) - 1}', text, count=1)
        assert older != text, "the lint record names no format"
        record.write_text(older)
    assert records, "no lint record to replace"
    caller("from .kernels import scale_rows")(root)


def forget_all_but_words(root: Path) -> None:
    """The cache less the import words: the lint record and the run record gone."""
    for path in (_cache(root) / "v1").iterdir():
        if path.is_dir():
            shutil.rmtree(path)


def _cache(root: Path) -> Path:
    found = [p for p in root.rglob("imports.json")]
    assert found, "no import words kept"
    return found[0].parent.parent


KG302 = ("csrc/launch.cu", 6, "KG302")  # csrc/launch.cu's launch, unchecked once no caller checks it
UNCHECKED = "  if (cudaGetLastError() != cudaSuccess) return;\n"


def caller_same_size_and_time(root: Path) -> None:
    """csrc/caller.cu written again without its check (spaces keep its length) and its modification time."""
    path = root / "csrc/caller.cu"
    old = path.read_text()
    st = path.stat()
    path.unlink()
    path.write_text(old.replace(UNCHECKED, " " * (len(UNCHECKED) - 1) + "\n"))
    os.utime(path, ns=(st.st_atime_ns, st.st_mtime_ns))


def caller_linked(root: Path) -> None:
    """csrc/caller.cu is a link to a file outside csrc; the file loses its check."""
    write(root, "shared/caller.cu", (root / "csrc/caller.cu").read_text())
    (root / "csrc/caller.cu").unlink()
    (root / "csrc/caller.cu").symlink_to(root / "shared/caller.cu")
    _lint_now(root)
    edit(root, "shared/caller.cu", UNCHECKED, "")


def caller_header(root: Path) -> None:
    """The checking caller moves into a header the launch's file includes."""
    text = (root / "csrc/caller.cu").read_text()
    (root / "csrc/caller.cu").unlink()
    write(root, "csrc/caller.cuh", text)


# (name, the change; the finding it adds (+) or removes (-), None: none decided)
CASES: list[tuple[str, Callable[[Path], None], tuple[str, tuple[str, int, str]] | None]] = [
    ("module-renamed-away", rename("pkg/triton_utils.py", "pkg/triton_helpers.py"), ("-", KG204)),
    ("module-turned-package", package_utils, ("-", KG204)),
    ("module-turned-package-reexporting", package_utils_keeping, ("-", KG204)),
    ("same-size-and-time", same_size_and_time, ("-", KG204)),
    ("link-retargeted", link_retargeted, ("-", KG204)),
    ("link-target-edited", link_target_edited, ("-", KG204)),
    ("folder-link-target-edited", folder_linked, ("-", KG204)),
    ("case-only-rename", case_only, ("-", KG204)),
    ("package-init-gone", init_gone, None),
    ("package-beside-module", init_appears_elsewhere, None),
    ("reexported-elsewhere", reexported_elsewhere, ("-", KG204)),
    ("reexport-target-edited", reexport_target_edited, ("-", KG204)),
    ("reexport-all-narrowed", reexport_all_narrowed, None),
    ("caller-through-reexport", caller_through_reexport, None),
    ("caller-reexport-switched", caller_reexport_switched, None),
    ("caller-renamed-in", caller_renamed_in, ("+", KG201)),
    ("caller-renamed-out", caller_renamed_out, ("-", KG201)),
    ("caller-into-hidden-folder", caller_into_hidden_folder, None),
    ("caller-continued-import", caller("from .kernels import \\\n    scale_rows"), ("+", KG201)),
    ("caller-parenthesised-import", caller("from .kernels import (\n    step_free,\n    scale_rows,\n)"),
     ("+", KG201)),
    ("caller-semicolon-import", caller("x = 1; from .kernels import scale_rows"), ("+", KG201)),
    ("caller-tab-import", caller("from\t.kernels\timport\tscale_rows"), ("+", KG201)),
    ("caller-cr-newlines", lambda root: (root / "pkg/serving.py").write_bytes(
        ("from .kernels import scale_rows" + SERVE).replace("\n", "\r").encode()), ("+", KG201)),
    ("caller-alias", caller("from .kernels import scale_rows as rows\nscale_rows = rows"), None),
    ("caller-absolute", caller("from pkg.kernels import scale_rows"), ("+", KG201)),
    ("caller-in-function", lambda root: write(root, "pkg/serving.py", "def serve(tokens):\n"
                                              "    from .kernels import scale_rows\n"
                                              "    scale_rows(tokens, tokens.shape[0])\n"), ("+", KG201)),
    ("caller-in-tests", lambda root: write(root, "tests/test_rows.py", "from pkg.kernels import scale_rows" + SERVE),
     None),
    ("lint-record-other-version", lint_record_other_version, ("+", KG201)),
    ("cpp-caller-renamed-away", rename("csrc/caller.cu", "csrc/caller.cu.bak"), ("+", KG302)),
    ("cpp-caller-same-size-and-time", caller_same_size_and_time, ("+", KG302)),
    ("cpp-caller-linked-target-edited", caller_linked, ("+", KG302)),
    ("cpp-caller-into-a-header", caller_header, None),
    ("cpp-caller-case-renamed", rename("csrc/caller.cu", "csrc/Caller.CU"), None),
    ("cpp-second-caller-unchecked", lambda root: write(root, "csrc/other.cu", (root / "csrc/caller.cu").read_text(
        ).replace(UNCHECKED, "").replace("void run(", "void run_twice(")), None),
]


@pytest.mark.parametrize("change,decides", [case[1:] for case in CASES], ids=[case[0] for case in CASES])
def test_a_warm_lint_after_an_edit_elsewhere(project: Path, monkeypatch: pytest.MonkeyPatch,  # noqa: F811
                                             change: Callable[[Path], None],
                                             decides: tuple[str, tuple[str, int, str]] | None) -> None:
    _STATE["mp"] = monkeypatch
    lint(project, monkeypatch)
    change(project)
    found, _linted = lint(project, monkeypatch)
    if decides is not None:
        sign, finding = decides
        assert (finding in found) is (sign == "+"), sorted(found)


def test_two_lints_at_once_after_an_edit(project: Path, monkeypatch: pytest.MonkeyPatch) -> None:  # noqa: F811
    """Two `kgate lint` processes run at once after the caller's edit; a third, warm, finds what a cold one does."""
    import subprocess
    import sys

    lint(project, monkeypatch)
    edit(project, "pkg/layers.py", "scale_rows(hidden, width)", "scale_rows(hidden, hidden.shape[0])")
    runs = [subprocess.Popen([sys.executable, "-m", "kgate", "lint", "--exit-zero"], cwd=project,
                             stdout=subprocess.DEVNULL, stderr=subprocess.PIPE) for _ in range(2)]
    assert all(run.wait(timeout=300) == 0 for run in runs)
    found, _linted = lint(project, monkeypatch)
    assert KG201 in found
    assert kgate("lint", "--exit-zero", cwd=project).code == 0


@pytest.mark.parametrize("damage", [words_damaged, words_other_version, words_truncated],
                         ids=["edited", "other-form", "truncated"])
def test_the_import_words_record_damaged(project: Path, monkeypatch: pytest.MonkeyPatch,  # noqa: F811
                                         damage: Callable[[Path], None]) -> None:
    """The import words kept across runs, damaged between two runs of their own process: the next lint (a process
    of its own, reading the record afresh) still finds the layer's call of the launcher."""
    _STATE["mp"] = monkeypatch
    damage(project)
    warm = kgate("lint", "--format", "json", "--exit-zero", cwd=project, process=True)
    assert KG201 in {(f["path"], f["line"], f["code"]) for f in json.loads(warm.stdout)["findings"]}
