"""`kgate lint` reads source as bytes: it never imports or runs the project's code, torch or triton."""

from __future__ import annotations

import json
import subprocess
import sys
import textwrap
from pathlib import Path
from typing import cast

from conftest import kgate

SIDE_EFFECT = textwrap.dedent("""\
    import pathlib

    pathlib.Path(__file__).with_name("IMPORTED_" + pathlib.Path(__file__).stem).write_text("ran")
    import os
    os.environ["TRITON_INTERPRET"] = "1"

    import triton
    import triton.language as tl


    @triton.autotune(configs=[], key=["n_tokens"])
    @triton.jit
    def k(x, n_tokens, BLOCK: tl.constexpr):
        pass
""")


def _project(root: Path) -> Path:
    (root / "kgate.toml").write_text("")
    for rel in ("pkg/__init__.py", "pkg/kernels.py", "tests/conftest.py", "tests/test_kernels.py", "setup.py"):
        (root / rel).parent.mkdir(parents=True, exist_ok=True)
        (root / rel).write_text(SIDE_EFFECT)
    return root


def test_lint_does_not_execute_the_projects_modules(tmp_path: Path) -> None:
    root = _project(tmp_path)
    run = kgate("lint", "--format", "json", cwd=root)
    assert run.code == 1, run.stderr
    # The findings prove every file was read...
    assert {f["path"] for f in run.json()["findings"]} == {
        "pkg/__init__.py", "pkg/kernels.py", "tests/conftest.py", "tests/test_kernels.py", "setup.py"}
    # ...and no module ran: none wrote its marker.
    assert sorted(p.name for p in root.rglob("IMPORTED_*")) == []


def test_lint_imports_neither_torch_nor_triton_nor_the_project(tmp_path: Path) -> None:
    root = _project(tmp_path)
    probe = textwrap.dedent("""\
        import contextlib, io, json, sys
        from kgate.cli import main
        with contextlib.redirect_stdout(io.StringIO()) as out:
            code = main(["lint", "--format", "json"])
        assert '"KG201"' in out.getvalue()
        # The project, the heavy libraries, and kgate's compile side (workers, PTX and SASS parsers).
        heavy = ("torch", "triton", "numpy", "libcst", "pkg", "tests", "setup", "kgate.compile", "kgate.facts.ptx",
                 "kgate.facts.sass", "kgate.facts.model", "kgate.ratchet")
        loaded = sorted(m for m in sys.modules if m in heavy or m.startswith(tuple(h + "." for h in heavy)))
        print(json.dumps({"code": code, "loaded": loaded}))
    """)
    proc = subprocess.run([sys.executable, "-c", probe], cwd=root, capture_output=True, text=True, timeout=120)
    assert proc.returncode == 0, proc.stderr
    result = json.loads(proc.stdout.splitlines()[-1])
    assert result == {"code": 1, "loaded": []}


def test_importing_kgate_is_cheap() -> None:
    probe = "import sys, kgate; print(sorted(m for m in sys.modules if m.split('.')[0] in ('triton', 'torch')))"
    proc = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True, timeout=60)
    assert proc.stdout.strip() == "[]"


KERNEL = textwrap.dedent("""\
    import triton
    import triton.language as tl


    @triton.autotune(configs=[triton.Config({"BLOCK": 64}), triton.Config({"BLOCK": 128})], key=["n_tokens"])
    @triton.jit
    def k(x, n_tokens, BLOCK: tl.constexpr):
        pass
""")
LAUNCH = "__global__ void k(float* x) {}\nvoid run(float* x) {\n  k<<<1, 32>>>(x);\n}\n"
# What a lint of a Python kernel module does not use: the CUDA rules' analyses of builds and C++, C++'s comment
# reader, the CuTe DSL's model, and the standard library's heavier modules kgate's writes and hashes once loaded.
NOT_FOR_PYTHON = ("kgate.collect.cuda_project", "kgate.collect.launch_search", "kgate.collect.cpp_flow",
                  "kgate.collect.cpp_text", "kgate.collect.cuda_checks", "kgate.collect.build_units",
                  "kgate.collect.build_sources", "kgate.collect.build_settings", "kgate.collect.build_handoff",
                  "kgate.hardware.arch_features", "kgate.support.comments.cpp", "kgate.core.cute", "tempfile",
                  "hashlib")


def _loaded_by_lint(root: Path, rel: str) -> dict[str, object]:
    probe = textwrap.dedent(f"""\
        import contextlib, io, json, sys
        from kgate.cli import main
        with contextlib.redirect_stdout(io.StringIO()) as out:
            code = main(["lint", "--format", "json", {rel!r}])
        codes = sorted(f["code"] for f in json.loads(out.getvalue())["findings"])
        print(json.dumps({{"codes": codes, "loaded": sorted(m for m in {NOT_FOR_PYTHON!r} if m in sys.modules)}}))
    """)
    proc = subprocess.run([sys.executable, "-c", probe], cwd=root, capture_output=True, text=True, timeout=120)
    assert proc.returncode == 0, proc.stderr
    result: dict[str, object] = json.loads(proc.stdout.splitlines()[-1])
    return result


def test_a_lint_of_a_python_file_loads_only_what_python_rules_use(tmp_path: Path) -> None:
    (tmp_path / "kgate.toml").write_text("")
    (tmp_path / "ops.py").write_text(KERNEL)
    (tmp_path / "launch.cu").write_text(LAUNCH)
    # The rules of every language are still selected (their codes key the lint cache); their analyses load with a
    # file of their language.
    assert _loaded_by_lint(tmp_path, "ops.py") == {"codes": ["KG201"], "loaded": []}
    cuda = _loaded_by_lint(tmp_path, "launch.cu")
    assert cuda["codes"] == ["KG302"]
    assert {"kgate.collect.cuda_project", "kgate.collect.launch_search"} <= set(cast(list, cuda["loaded"]))
