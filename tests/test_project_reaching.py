"""Which of a project's modules reach a definition through its module or a package above it
(`kgate.collect.pyproject.Modules.importing`): the names each one spells for it, in the order its import statements
bind them, and the cost of asking about every definition of a module that many modules import."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from kgate.collect import depends, pynames
from kgate.collect.pyproject import Modules

LAUNCHERS = 8
LAYERS = 12


def _project(root: Path) -> Path:
    package = root / "pkg"
    (package / "ops").mkdir(parents=True)
    (package / "layers").mkdir()
    (package / "__init__.py").write_text("")
    (package / "ops" / "__init__.py").write_text("from .launch import *\n")
    (package / "layers" / "__init__.py").write_text("")
    launch = package / "ops" / "launch.py"
    launch.write_text("".join(f"def attend_{i}(x, n):\n    return x\n\n\n" for i in range(LAUNCHERS)))
    for i in range(LAYERS):
        (package / "layers" / f"layer_{i}.py").write_text(
            "import torch\n"
            "import pkg.ops.launch\n"
            "from pkg import ops\n"
            "from pkg.ops import launch, launch as ln\n"
            f"from pkg.ops.launch import attend_{i % LAUNCHERS}, attend_{(i + 1) % LAUNCHERS} as other\n"
            "\n\n"
            "def forward(x):\n"
            f"    return ln.attend_{(i + 2) % LAUNCHERS}(launch.attend_{i % LAUNCHERS}(x, x.shape[0]), 1)\n")
    return launch


def _expected(name: str, i: int) -> list[str]:
    """What layer_i binds or spells for the launcher `name`: the names it imports it as, then each dotted name through
    a binding of its module or a package above it, in the order its statements bind them."""
    index = int(name.rsplit("_", 1)[1])
    bound = [name] if i % LAUNCHERS == index else []
    if (i + 1) % LAUNCHERS == index:
        bound.append("other")
    # `pkg` (import pkg.ops.launch) reaches it by the module's dotted name; `ops` by the package's star import, then
    # by its module; `launch` and its alias `ln` by the module.
    return [*bound, f"pkg.ops.launch.{name}", f"ops.{name}", f"ops.launch.{name}", f"launch.{name}", f"ln.{name}"]


def test_every_spelling_of_every_launcher_in_the_order_read(tmp_path: Path) -> None:
    launch = str(_project(tmp_path))
    project = Modules(str(tmp_path))
    with depends.collecting():
        for index in range(LAUNCHERS):
            name = f"attend_{index}"
            found = dict(project.importing(launch, name))
            layers = {os.path.basename(path): local for path, local in found.items()}
            assert layers == {f"layer_{i}.py": _expected(name, i) for i in range(LAYERS)}, name


def test_each_imports_first_name_is_followed_once_a_run(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Asking about every launcher of a module follows the first name of each import binding of the modules that
    spell the module's or its packages' names once in all, not once per launcher and dotted spelling."""
    launch = str(_project(tmp_path))
    followed: list[tuple[str, str]] = []
    original = pynames.Resolver._followed

    def counting(self: pynames.Resolver, path: str, name: str, own: pynames.Exports | None, depth: int) -> object:
        if own is not None:  # a binding of an import statement, as the statement has it
            followed.append((path, name))
        return original(self, path, name, own, depth)

    monkeypatch.setattr(pynames.Resolver, "_followed", counting)
    project = Modules(str(tmp_path))
    with depends.collecting():
        for index in range(LAUNCHERS):
            project.importing(launch, f"attend_{index}")
    # Each layer's six bindings that spell a word (pkg, ops, launch, ln and the two launchers it imports by name; not
    # torch) once, and the two launchers it imports once more, asked which modules import them by name. Following
    # every dotted spelling of every binding from the top for each launcher took 2,904.
    assert len(followed) <= LAYERS * (6 + 2)


def test_an_import_statement_written_in_many_modules_is_parsed_once_per_run(tmp_path: Path,
                                                                            monkeypatch: pytest.MonkeyPatch) -> None:
    """What an import statement binds is read from its text once per run, however many modules write it."""
    from kgate.collect import pyproject, source

    package = tmp_path / "pkg"
    package.mkdir()
    (package / "__init__.py").write_text("")
    (package / "kernels.py").write_text("def fwd_kernel(x):\n    return x\n")
    for name in ("a", "b", "c"):
        (package / f"{name}.py").write_text("import torch\nfrom pkg.kernels import fwd_kernel\n\n\n"
                                            "def run(x):\n    return fwd_kernel(x)\n")
    depends.new_run()
    parsed: list[bytes] = []
    parse = source.parse_python

    def counted(data: bytes, filename: str) -> object:
        parsed.append(data)
        return parse(data, filename)

    monkeypatch.setattr(source, "parse_python", counted)
    project = Modules(str(tmp_path))
    found = project.importing(str(package / "kernels.py"), "fwd_kernel")
    assert sorted(os.path.basename(path) for path, _local in found) == ["a.py", "b.py", "c.py"]
    assert all(local == ["fwd_kernel"] for _path, local in found)
    assert parsed.count(b"from pkg.kernels import fwd_kernel") == 1
    assert pyproject._statement_exports(b"import torch") is pyproject._statement_exports(b"import torch")
