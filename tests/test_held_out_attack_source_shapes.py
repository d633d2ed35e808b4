"""The Python source rules on code shapes they had not been shown.

An assignment expression binds a name as an assignment does, and is its value where it is written: a launcher
that says `if (n := x.shape[0]) > 0: kernel[grid](x, n)` or passes `(n := x.shape[0])` straight to the launch
gives the kernel the token count (KG201's key, KG108's constexpr), and a conftest that says `if (env :=
os.environ) is not None: env["TRITON_INTERPRET"] = "1"` switches the interpreter on (KG203). A `case (n, d):`
of `match x.shape:` unpacks the shape as `n, d = x.shape` does.

A kernel reached through a package that passes it on under another name (`from .kernels import tuned as fwd` in
pkg/__init__.py, `from pkg import fwd` in ops.py) is launched where ops.py launches `fwd`, and a launcher module
that never spells `triton` is still read for the constexprs it passes (KG108).
"""

from __future__ import annotations

import textwrap
from pathlib import Path

import pytest
from conftest import kgate

HEADER = "import triton\nimport triton.language as tl\n\n\n"
TWO = "[triton.Config({'B': 64}), triton.Config({'B': 128})]"


def _lint(root: Path, files: dict[str, str]) -> set[tuple[str, str]]:
    (root / "kgate.toml").write_text("")
    for rel, text in files.items():
        (root / rel).parent.mkdir(parents=True, exist_ok=True)
        (root / rel).write_text(textwrap.dedent(text))
    run = kgate("lint", "--no-cache", "--format", "json", cwd=root)
    assert run.code in (0, 1) and "Traceback" not in run.stderr, run.stderr
    findings = run.json()["findings"]
    assert run.code == (1 if any(f["severity"] == "error" for f in findings) else 0)
    return {(f["path"], f["code"]) for f in findings}


def _tuned(key: str, launcher: str, configs: str = TWO) -> str:
    return HEADER + f"@triton.autotune(configs={configs}, key=[{key!r}])\n@triton.jit\n" \
        f"def k(x, {key}, B: tl.constexpr):\n    pass\n\n\n" + textwrap.dedent(launcher)


def _constexpr(launcher: str) -> str:
    return HEADER + "@triton.jit\ndef k(x, N: tl.constexpr):\n    pass\n\n\n" + textwrap.dedent(launcher)


# name -> (module text, the codes expected in k.py)
SHAPES = {
    "autotune key bound in an if's test": (_tuned("n", """\
        def launch(x):
            if (n := x.shape[0]) > 0:
                k[(1,)](x, n)
        """), {"KG201"}),
    "autotune key passed as an assignment expression": (_tuned("n", """\
        def launch(x):
            k[(1,)](x, (n := x.shape[0]))
        """), {"KG201"}),
    "autotune key bound in a while's test": (_tuned("n", """\
        def launch(xs):
            while (n := xs.pop().numel()) > 0:
                k[(1,)](xs, n)
        """), {"KG201"}),
    "a model dimension bound by an assignment expression": (_tuned("n", """\
        def launch(x):
            if (n := x.shape[-1]) > 0:
                k[(1,)](x, n)
        """), set()),
    "autotune key captured by a sequence pattern": (_tuned("n", """\
        def launch(x):
            match x.shape:
                case (n, d):
                    k[(1,)](x, n)
        """), {"KG201"}),
    "a model dimension captured by a sequence pattern": (_tuned("n", """\
        def launch(x):
            match x.shape:
                case (t, n):
                    k[(1,)](x, n)
        """), set()),
    "autotune key captured by a starred pattern": (_tuned("n", """\
        def launch(x):
            match x.shape:
                case [n, *rest]:
                    k[(1,)](x, n)
        """), {"KG201"}),
    "a constexpr passed as an assignment expression": (_constexpr("""\
        def launch(x):
            k[(1,)](x, N=(n := x.shape[0]))
        """), {"KG108"}),
    "a constexpr bound in an if's test": (_constexpr("""\
        def launch(x):
            if (n := x.numel()) > 1:
                k[(1,)](x, n)
        """), {"KG108"}),
    "a bucketed constexpr passed as an assignment expression": (_constexpr("""\
        def launch(x):
            k[(1,)](x, N=(n := triton.next_power_of_2(x.shape[0])))
        """), set()),
}


@pytest.mark.parametrize("name", sorted(SHAPES))
def test_assignment_expressions_and_patterns_bind_the_launch_values(tmp_path: Path, name: str) -> None:
    text, expected = SHAPES[name]
    assert {code for _path, code in _lint(tmp_path, {"k.py": text})} == expected


@pytest.mark.parametrize("conftest, expected", [
    ("import os\nif (env := os.environ) is not None:\n    env['TRITON_INTERPRET'] = '1'\n", True),
    ("import os\nenv: dict = os.environ\nenv['TRITON_INTERPRET'] = '1'\n", True),
    ("import os\nif (env := dict(os.environ)):\n    env['TRITON_INTERPRET'] = '1'\n", False),
    ("import os\nif (env := os.environ) is not None:\n    env['TRITON_INTERPRET'] = '0'\n", False),
])
def test_the_environment_bound_by_any_assignment_is_the_environment(tmp_path: Path, conftest: str,
                                                                    expected: bool) -> None:
    found = _lint(tmp_path, {"tests/conftest.py": conftest})
    assert found == ({("tests/conftest.py", "KG203")} if expected else set())
KERNELS = HEADER + f"""\
@triton.autotune(configs={TWO}, key=["n"])
@triton.jit
def tuned(x, n, B: tl.constexpr):
    pass


@triton.jit
def fixed(x, N: tl.constexpr):
    pass
"""


@pytest.mark.parametrize("package, launcher", [
    ("from .kernels import tuned, fixed\n", "from pkg import tuned, fixed\n"),
    ("from .kernels import tuned as fwd, fixed as fwd_fixed\n", "from pkg import fwd as tuned, fwd_fixed as fixed\n"),
    ("from .kernels import tuned as fwd, fixed as fwd_fixed\n", "from pkg import fwd as tuned\nfrom pkg import "
     "fwd_fixed as fixed\n"),
])
def test_a_kernel_launched_through_a_package_that_renames_it(tmp_path: Path, package: str, launcher: str) -> None:
    """The launcher module imports the kernels from their package, which passes them on under other names, and
    never spells `triton`: KG201 reads its launch of the autotuned kernel (through the renaming), KG108 its launch
    of the kernel with a constexpr."""
    found = _lint(tmp_path, {
        "pkg/__init__.py": package,
        "pkg/kernels.py": KERNELS,
        "ops.py": launcher + "\n\ndef launch(x):\n    tuned[(1,)](x, x.shape[0])\n    fixed[(1,)](x, x.shape[0])\n",
    })
    assert found == {("pkg/kernels.py", "KG201"), ("ops.py", "KG108")}


def test_a_launcher_module_that_never_spells_triton_is_read_for_its_constexprs(tmp_path: Path) -> None:
    found = _lint(tmp_path, {
        "pkg/__init__.py": "",
        "pkg/kernels.py": KERNELS,
        "pkg/ops.py": "from .kernels import fixed\n\n\ndef launch(x):\n    b = x.shape[0]\n    fixed[(b,)](x, b)\n",
        "pkg/good.py": "from .kernels import fixed\n\n\ndef launch(x):\n    fixed[(1,)](x, x.shape[-1])\n",
    })
    assert found == {("pkg/ops.py", "KG108")}


@pytest.mark.parametrize("rel, text, on", [
    ("pytest.ini", "[pytest]\nenv =\n    TRITON_INTERPRET=yes\n", True),
    ("pytest.ini", "[pytest]\nenv =\n    TRITON_INTERPRET = Y\n", True),
    ("pyproject.toml", '[tool.pytest_env]\nTRITON_INTERPRET = "yes"\n', True),
    ("tests/conftest.py", "import os\nos.environ['TRITON_INTERPRET'] = 'YES'\n", True),
    ("tests/test_k.py", "def test_k(monkeypatch):\n    monkeypatch.setenv('TRITON_INTERPRET', 'y')\n", True),
    # what Triton reads as false: a letter it does not know, and a Python value with a space it does not trim
    ("pytest.ini", "[pytest]\nenv =\n    TRITON_INTERPRET=t\n", False),
    ("tests/conftest.py", "import os\nos.environ['TRITON_INTERPRET'] = ' 1'\n", False),
    ("tests/conftest.py", "import os\nos.environ['TRITON_INTERPRET'] = 'no'\n", False),
])
def test_the_values_triton_reads_as_true_switch_the_interpreter_on(tmp_path: Path, rel: str, text: str,
                                                                    on: bool) -> None:
    assert _lint(tmp_path, {rel: text}) == ({(rel, "KG203")} if on else set())


PRINTS = HEADER + "@triton.jit\ndef k(x, DEBUG: tl.constexpr = False):\n    if DEBUG:\n" \
    "        tl.device_print('x', x)\n"


@pytest.mark.parametrize("text, reported", [
    # a launch of the module that passes the switch on by position ships the print
    (PRINTS + "\n\ndef run(x):\n    k[(1,)](x, True)\n", True),
    (PRINTS + "\n\ndef run(x):\n    k.run(x, 1, grid=(1,), warmup=False)\n", True),
    (PRINTS + "\n\ndef run(x):\n    k[(1,)](x, False)\n", False),
    (PRINTS + "\n\ndef run(x, *args):\n    k[(1,)](*args, True)\n", False),  # its position is not known
    (PRINTS + "\n\ndef run(x, debug):\n    k[(1,)](x, debug)\n", False),  # the caller's own flag
    # a function made a kernel by a call prints like a decorated one, unless it is a debug kernel
    (HEADER + "def _k(x):\n    tl.device_print('x', x)\n\n\nk = triton.jit(_k)\n", True),
    (HEADER + "def _k(x):\n    print('x', x)\n\n\nk = triton.jit(_k, debug=True)\n", False),
    (HEADER + "def _k(x, DEBUG: tl.constexpr = False):\n    if DEBUG:\n        tl.device_print('x', x)\n\n\n"
     "k = triton.jit(_k)\n\n\ndef run(x):\n    k[(1,)](x, True)\n", True),
    (HEADER + "def host(x):\n    print('x', x)\n", False),
])
def test_a_print_switched_on_by_position_or_in_a_kernel_made_by_a_call(tmp_path: Path, text: str,
                                                                       reported: bool) -> None:
    assert _lint(tmp_path, {"k.py": text}) == ({("k.py", "KG204")} if reported else set())


def _spread(options: str, before: str = "") -> str:
    return HEADER + before + f"@triton.autotune(configs={TWO}, key=['K'], {options})\n@triton.jit\n" \
        "def k(c, K, B: tl.constexpr):\n    tl.atomic_add(c, 1.0)\n"


@pytest.mark.parametrize("text, reported", [
    (_spread("**KW", "KW = dict(reset_to_zero=['c'])\n"), False),
    (_spread("**KW", "KW = {'restore_value': ['c']}\n"), False),
    (_spread("**{'reset_to_zero': ['c']}"), False),
    (_spread("**dict(reset_to_zero=['c'])"), False),
    (_spread("**KW", "KW = dict(warmup=5)\n"), True),  # the spread resets nothing
    (_spread("**KW", "KW = {'reset_to_zero': ['other']}\n"), True),
    (_spread("**options()", "def options():\n    return {}\n\n\n"), False),  # cannot be read: trusted
])
def test_the_options_a_decorator_spreads_are_read(tmp_path: Path, text: str, reported: bool) -> None:
    assert _lint(tmp_path, {"k.py": text}) == ({("k.py", "KG202")} if reported else set())


@pytest.mark.parametrize("launcher, expected", [
    ("def launch(x):\n    s = x.shape\n    tuned[(1,)](x, s[0])\n    fixed[(1,)](x, s[0])\n",
     {("k.py", "KG201"), ("k.py", "KG108")}),
    ("def launch(x):\n    s = tuple(x.size())\n    tuned[(1,)](x, s[0])\n    fixed[(1,)](x, N=s[0])\n",
     {("k.py", "KG201"), ("k.py", "KG108")}),
    ("def launch(x):\n    tuned[(1,)](x, list(x.shape)[0])\n", {("k.py", "KG201")}),
    # the last dimension, a weight's shape, and a name bound twice are no token count
    ("def launch(x):\n    s = x.shape\n    tuned[(1,)](x, s[-1])\n    fixed[(1,)](x, s[-1])\n", set()),
    ("def launch(x, weight):\n    s = weight.shape\n    tuned[(1,)](x, s[0])\n", set()),
    ("def launch(x, w):\n    s = x.shape\n    s = w.shape\n    tuned[(1,)](x, s[0])\n", set()),
])
def test_a_shape_bound_to_a_name_and_indexed_later(tmp_path: Path, launcher: str,
                                                   expected: set[tuple[str, str]]) -> None:
    assert _lint(tmp_path, {"k.py": KERNELS + "\n\n" + launcher}) == expected


ONE = "triton.Config({'B': 64})"


def _one_config(before: str = "", after: str = "") -> str:
    return HEADER + before + "@triton.autotune(configs=CONFIGS, key=['n_tokens'])\n@triton.jit\n" \
        "def k(c, n_tokens, B: tl.constexpr):\n    tl.atomic_add(c, 1.0)\n\n\n" + after


@pytest.mark.parametrize("text, benchmarks", [
    (_one_config(f"CONFIGS = [{ONE}]\n"), False),
    # the list changed in a definition the rules' reduced parse leaves out
    (_one_config(f"CONFIGS = [{ONE}]\n\n\ndef register(extra):\n    CONFIGS.extend(extra)\n\n\n"), True),
    (_one_config(f"CONFIGS = [{ONE}]\n\n\ndef more():\n    global CONFIGS\n    CONFIGS = CONFIGS * 4\n\n\n"), True),
    # given to a call that may change it
    (_one_config(f"CONFIGS = [{ONE}]\nadd_defaults(CONFIGS)\n"), True),
    # the autotuner's own list replaced or extended after it is made
    (_one_config(f"CONFIGS = [{ONE}]\n", f"k.configs = [{ONE}, triton.Config({{'B': 128}})]\n"), True),
    (_one_config(f"CONFIGS = [{ONE}]\n", f"def tune_more():\n    k.configs.append({ONE})\n"), True),
])
def test_a_single_config_list_the_module_changes_later_may_benchmark(tmp_path: Path, text: str,
                                                                     benchmarks: bool) -> None:
    assert _lint(tmp_path, {"k.py": text}) == ({("k.py", "KG201"), ("k.py", "KG202")} if benchmarks else set())
