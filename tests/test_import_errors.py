"""A kernel whose module cannot be imported: the compile-error finding points at the project's line that raised
(the last frame of the traceback in a project file, not in the standard library or an installed package), and
the registration or capture entry is a related place in the terminal, JSON and SARIF reports."""

from __future__ import annotations

import json
import sys
import textwrap
from pathlib import Path

import pytest
from conftest import Run, kgate

KERNELS = textwrap.dedent('''\
    import triton
    import triton.language as tl

    from pkg.helpers import EPS


    @triton.jit
    def scale(x, n, BLOCK: tl.constexpr):
        o = tl.arange(0, BLOCK)
        tl.store(x + o, tl.load(x + o, mask=o < n) * 2.0, mask=o < n)
''')
GOOD = KERNELS.replace("from pkg.helpers import EPS\n", "")
HELPERS = textwrap.dedent('''\
    """Constants the kernels share."""


    def positive(value):
        if value <= 0:
            raise ValueError(f"eps must be positive, got {value}")
        return value


    EPS = positive(0.0)
''')
REGISTERED = textwrap.dedent('''\
    targets = ["sm_120a"]
    python-path = ["."]

    [[triton]]
    kernel = "good:scale"
    signature = { x = "*fp32", n = "i32" }
    constexprs = { BLOCK = 128 }

    [[triton]]
    kernel = "pkg.ops:scale"
    signature = { x = "*fp32", n = "i32" }
    constexprs = { BLOCK = 128 }
''')


def project(root: Path, helpers: str = HELPERS, config: str = REGISTERED) -> Path:
    (root / "pkg").mkdir(parents=True)
    (root / "pkg" / "__init__.py").write_text("")
    (root / "pkg" / "ops.py").write_text(KERNELS)
    (root / "pkg" / "helpers.py").write_text(helpers)
    (root / "good.py").write_text(GOOD)
    (root / "kgate.toml").write_text(config)
    return root


def line_of(path: Path, text: str) -> int:
    """The 1-based number of the first line of `path` that contains `text`."""
    return next(n for n, line in enumerate(path.read_text().splitlines(), 1) if text in line)


def compile_error(run: Run) -> dict:
    found = [f for f in run.json()["findings"] if f["code"] == "KG001"]
    assert len(found) == 1, run.stdout + run.stderr
    return found[0]


def test_an_import_error_in_a_helper_points_at_its_raise_and_relates_the_registration(tmp_path: Path) -> None:
    root = project(tmp_path / "p")
    raised = line_of(root / "pkg" / "helpers.py", "raise ValueError")
    registered = line_of(root / "kgate.toml", '"pkg.ops:scale"')  # the registration's line that names the kernel
    run = kgate("check", "--format", "json", cwd=root)
    assert run.code == 1, run.stdout + run.stderr
    finding = compile_error(run)
    assert (finding["path"], finding["line"], finding["kernel"]) == ("pkg/helpers.py", raised, "pkg.ops:scale")
    assert finding["message"].startswith("cannot import pkg.ops: ValueError: eps must be positive, got 0.0")
    places = [(r["path"], r["line"], r["message"]) for r in finding["related"]]
    assert places[0] == ("kgate.toml", registered, "pkg.ops:scale registered here")
    assert ("pkg/ops.py", line_of(root / "pkg" / "ops.py", "def scale"), "pkg.ops:scale is defined here") in places
    assert [k["kernel"] for k in run.json()["kernels"]] == ["good:scale"]  # the other kernel still compiled

    terminal = kgate("check", cwd=root).stdout.splitlines()
    at = terminal.index(next(line for line in terminal if line.startswith(f"pkg/helpers.py:{raised}: KG001")))
    assert terminal[at + 1] == f"    kgate.toml:{places[0][1]}: pkg.ops:scale registered here"

    sarif = json.loads(kgate("check", "--format", "sarif", cwd=root).stdout)
    result = next(r for r in sarif["runs"][0]["results"] if r["ruleId"] == "KG001")
    location = result["locations"][0]["physicalLocation"]
    assert (location["artifactLocation"]["uri"], location["region"]["startLine"]) == ("pkg/helpers.py", raised)
    related = result["relatedLocations"][0]
    assert related["physicalLocation"]["artifactLocation"]["uri"] == "kgate.toml"
    assert related["physicalLocation"]["region"]["startLine"] == places[0][1]
    assert related["message"]["text"] == "pkg.ops:scale registered here"


def test_frames_in_the_standard_library_and_installed_packages_are_not_the_projects(tmp_path: Path) -> None:
    """The raise is in json's decoder and in a package under a site-packages folder inside the project: the finding
    is at the project's own line that called them."""
    stdlib = HELPERS.replace("EPS = positive(0.0)", 'import json\n\nEPS = json.loads("{0.1")')
    root = project(tmp_path / "stdlib", helpers=stdlib)
    finding = compile_error(kgate("check", "--format", "json", cwd=root))
    assert (finding["path"], finding["line"]) == ("pkg/helpers.py", line_of(root / "pkg" / "helpers.py", "json.loads"))

    installed = HELPERS.replace("EPS = positive(0.0)", "import vendored\n\nEPS = vendored.eps()")
    root = project(tmp_path / "installed", helpers=installed,
                   config=REGISTERED.replace('python-path = ["."]', 'python-path = [".", ".venv/site-packages"]'))
    (root / ".venv" / "site-packages").mkdir(parents=True)
    (root / ".venv" / "site-packages" / "vendored.py").write_text('def eps():\n    raise ValueError("no eps")\n')
    finding = compile_error(kgate("check", "--format", "json", cwd=root))
    assert (finding["path"], finding["line"]) == ("pkg/helpers.py", line_of(root / "pkg" / "helpers.py", "vendored.eps"))


def test_a_syntax_error_in_a_helper_points_at_the_line_that_does_not_parse(tmp_path: Path) -> None:
    root = project(tmp_path / "p", helpers=HELPERS.replace("return value", "return value)"))
    finding = compile_error(kgate("check", "--format", "json", cwd=root))
    assert (finding["path"], finding["line"]) == ("pkg/helpers.py", line_of(root / "pkg" / "helpers.py", "return value)"))
    assert finding["message"].startswith("cannot import pkg.ops: SyntaxError:")


def test_a_captured_kernel_whose_helper_raises_relates_its_capture_entry(tmp_path: Path) -> None:
    pytest.importorskip("torch", reason="the captured launch takes torch tensors (pip install torch, or kgate's extra ulp: kernel-gate[ulp])")
    working = HELPERS.replace("EPS = positive(0.0)", "EPS = positive(1e-6)")
    root = project(tmp_path / "p", helpers=working, config='targets = ["sm_120a"]\npython-path = ["."]\n')
    (root / "launch.py").write_text(textwrap.dedent('''\
        import torch

        from pkg.ops import scale

        x = torch.zeros(1000, dtype=torch.float32)
        scale[(1,)](x, 1000, BLOCK=1024)
    '''))
    captured = kgate("capture", "--device", "cpu", "--", sys.executable, "launch.py", cwd=root)
    assert captured.code == 0, captured.stderr
    (root / "pkg" / "helpers.py").write_text(HELPERS)  # the helper breaks after the capture
    run = kgate("check", "--format", "json", cwd=root)
    assert run.code == 1, run.stdout + run.stderr
    finding = compile_error(run)
    assert (finding["path"], finding["line"]) == ("pkg/helpers.py", line_of(root / "pkg" / "helpers.py", "raise"))
    entry = line_of(root / "kgate-capture.toml", 'kernel = "pkg.ops:scale"') - 1
    assert (root / "kgate-capture.toml").read_text().splitlines()[entry - 1] == "[[specialization]]"
    assert {"path": "kgate-capture.toml", "line": entry, "message": "pkg.ops:scale captured here",
            "ptx_line": 0} in finding["related"]
